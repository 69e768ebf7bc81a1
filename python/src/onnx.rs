//! `systole.eval` and `systole.export`: `systole eval` and `systole export` in this process,
//! their options given as the words of the command line (systole/__init__.py maps keyword
//! arguments onto them), their results returned.

use crate::errors::{device_failure, guard, Failure, Kind};
use crate::train::print_line;
use numpy::{PyArray1, PyArray2, PyArrayMethods, ToPyArray};
use pyo3::prelude::*;
use systole::cli::embed;
use systole::onnx::cli::{self as onnx_cli, Failure as CmdFailure};
use systole_device::DeviceError;

/// The class of a failed command: its options, its device, or its model.
fn failure(f: CmdFailure) -> Failure {
    match f {
        CmdFailure::Options(e) => Failure::new(Kind::Option, systole::cli::error_text(&e)),
        CmdFailure::Run(e) => {
            // A device's own refusals (an unknown kind, a bad path) are option errors, as for
            // systole.Device.
            let device = e.chain().find_map(|c| c.downcast_ref::<DeviceError>());
            let kind = device.map_or(Kind::Model, |d| device_failure(d).kind);
            Failure::new(kind, systole::cli::error_text(&e))
        }
    }
}

/// What [`eval`] returns: eval.json's content as JSON, each image's logits, predicted class and
/// label.
type Evaluated<'py> = (
    String,
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
);

/// Runs `command` with the GIL released, its lines printed when `verbose`. A Ctrl-C while a
/// line prints ends the command once it is done (the error is raised then).
fn printing<T: Send>(
    py: Python<'_>,
    verbose: bool,
    command: impl FnOnce(&mut dyn FnMut(&str)) -> T + Send,
) -> PyResult<T> {
    let mut raised: Option<PyErr> = None;
    let mut say = |l: &str| {
        if verbose {
            if let Some(e) = print_line(l) {
                raised.get_or_insert(e);
            }
        }
    };
    let out = py.detach(|| command(&mut say));
    match raised {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Runs ``systole eval ARGS`` in this process (the GIL released): eval.json's content as JSON,
/// the logits (images x classes), the predicted classes and the labels. ``verbose`` prints the
/// command's lines.
#[pyfunction]
#[pyo3(signature = (args, verbose = true))]
fn eval(py: Python<'_>, args: Vec<String>, verbose: bool) -> PyResult<Evaluated<'_>> {
    guard(py, || {
        let a = embed::eval_args(&args).map_err(|e| {
            Failure::new(Kind::Option, embed::parse_error_sentence(&e)).into_pyerr(py)
        })?;
        let ev = printing(py, verbose, |say| onnx_cli::evaluation(&a, say))?;
        let ev = ev.map_err(|f| failure(f).into_pyerr(py))?;
        let res = &ev.result;
        let classes = res.logits.first().map_or(0, Vec::len);
        let flat: Vec<f32> = res.logits.iter().flatten().copied().collect();
        let logits = flat.to_pyarray(py).reshape([res.logits.len(), classes])?;
        let predicted: Vec<i64> = res.predicted.iter().map(|&p| p as i64).collect();
        let labels: Vec<i64> = res.labels.iter().map(|&l| l as i64).collect();
        let report = serde_json::to_string(&ev.report).map_err(|e| {
            Failure::new(Kind::Internal, format!("cannot encode the report: {e}")).into_pyerr(py)
        })?;
        Ok((
            report,
            logits,
            predicted.to_pyarray(py),
            labels.to_pyarray(py),
        ))
    })
}

/// Runs ``systole export ARGS`` in this process (the GIL released); ``verbose`` prints the
/// command's lines.
#[pyfunction]
#[pyo3(signature = (args, verbose = true))]
fn export(py: Python<'_>, args: Vec<String>, verbose: bool) -> PyResult<()> {
    guard(py, || {
        let a = embed::export_args(&args).map_err(|e| {
            Failure::new(Kind::Option, embed::parse_error_sentence(&e)).into_pyerr(py)
        })?;
        let done = printing(py, verbose, |say| onnx_cli::exported(&a, say))?;
        done.map_err(|f| failure(f).into_pyerr(py))
    })
}

/// Adds `eval` and `export` to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(eval, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    Ok(())
}
