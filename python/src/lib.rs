//! systole's Python extension, `systole._native`: the package `systole` (systole/ beside this
//! crate) wraps it. [`device`]: `systole.Device`, a device opened as the CLI's `--device` opens
//! it, its products and convolutions on numpy words; [`contract`]: the numeric contract's
//! primitives; [`train`]: `systole train` in this process; [`onnx`]: `systole eval` and
//! `systole export`; [`data`]: the data sets as numpy. Every error is an exception of
//! `systole.errors` carrying the CLI's sentence ([`errors`]), and no Rust panic crosses into
//! Python.

use pyo3::prelude::*;

mod contract;
mod data;
mod device;
mod errors;
mod onnx;
mod train;
mod words;

/// The compiled part of the package `systole`: import `systole` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<device::Device>()?;
    contract::register(m)?;
    train::register(m)?;
    onnx::register(m)?;
    data::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
