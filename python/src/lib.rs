//! systole's Python extension, `systole._native`: the package `systole` (systole/ beside this
//! crate) wraps it. [`device`]: `systole.Device`, a device opened as the CLI's `--device` opens
//! it, its products and convolutions on numpy words; [`contract`]: the numeric contract's
//! primitives; [`train`]: `systole train` in this process. Every error is an exception of
//! `systole.errors` carrying the CLI's sentence ([`errors`]), and no Rust panic crosses into
//! Python.

use pyo3::prelude::*;

mod contract;
mod device;
mod errors;
mod train;
mod words;

/// The compiled part of the package `systole`: import `systole` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<device::Device>()?;
    contract::register(m)?;
    train::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
