//! `systole.dataset`: a data set as systole loads it (the `--dataset` names), as numpy arrays,
//! so a script can feed the same images to another runtime.

use crate::errors::{guard, Failure, Kind};
use numpy::{PyArray1, PyArray4, PyArrayMethods, ToPyArray};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn images<'py>(
    py: Python<'py>,
    v: &[f32],
    [c, h, w]: [usize; 3],
) -> PyResult<Bound<'py, PyArray4<f32>>> {
    let n = v.len() / (c * h * w).max(1);
    v.to_pyarray(py).reshape([n, c, h, w])
}

fn labels<'py>(py: Python<'py>, v: &[u8]) -> Bound<'py, PyArray1<i64>> {
    let v: Vec<i64> = v.iter().map(|&l| l as i64).collect();
    v.to_pyarray(py)
}

/// The data set ``name`` (``"digits"``, ``"fashion-mnist"``, ``"idx:DIR"``, ``"npz:FILE"``) as
/// systole trains and evaluates on it: a dict of ``train_images``/``test_images`` (float32,
/// N x C x H x W, each value pixel / pixel_max) and ``train_labels``/``test_labels`` (int64),
/// ``name``, ``classes``, ``pixel_max`` (``None`` for float images).
#[pyfunction]
fn dataset<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    guard(py, || {
        let ds = py.detach(|| systole_train::data::load(name)).map_err(|e| {
            let e = anyhow::Error::from(e);
            Failure::new(Kind::Option, systole::cli::error_text(&e)).into_pyerr(py)
        })?;
        let shape = [ds.channels, ds.height, ds.width];
        let d = PyDict::new(py);
        d.set_item("name", &ds.name)?;
        d.set_item("classes", ds.classes)?;
        d.set_item("pixel_max", ds.byte_divisor)?;
        d.set_item("train_images", images(py, &ds.train.images, shape)?)?;
        d.set_item("train_labels", labels(py, &ds.train.labels))?;
        d.set_item("test_images", images(py, &ds.test.images, shape)?)?;
        d.set_item("test_labels", labels(py, &ds.test.labels))?;
        Ok(d)
    })
}

/// Adds `dataset` to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dataset, m)?)
}
