//! `systole.train`: `systole train` in this process, its options given as the words of the
//! command line (systole/__init__.py maps keyword arguments onto them).
//!
//! Another command of the CLI comes to Python the same way: a function here that parses its
//! words with `systole::cli::embed`, runs it with the GIL released and returns its results as
//! JSON, and a keyword-argument wrapper in systole/__init__.py over [`cli_options`].

use crate::errors::{guard, Failure, Kind};
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use std::path::Path;
use systole::cli::embed::{self, Failure as RunFailure};
use systole_device::DeviceError;
use systole_train::{EpochRecord, Observer};

/// The long options of the CLI's ``subcommand`` as ``(name, takes_value)`` pairs (``None``: no
/// such subcommand): the keyword arguments of the Python function of that command.
#[pyfunction]
fn cli_options(subcommand: &str) -> Option<Vec<(String, bool)>> {
    embed::options_of(subcommand)
        .map(|opts| opts.into_iter().map(|o| (o.name, o.takes_value)).collect())
}

/// Says a run's progress through Python's ``print`` (so a notebook shows it), the CLI's lines.
/// Also stops the run when Python has a pending signal (Ctrl-C): asked between training steps,
/// it takes the GIL for a moment and runs Python's signal handlers.
struct Printer {
    epochs: usize,
    verbose: bool,
    /// The exception a signal handler raised (`KeyboardInterrupt` for Ctrl-C).
    interrupt: Option<PyErr>,
}

/// Prints `line` with Python's ``print`` (the GIL taken for it). Printing is best effort (a
/// closed sys.stdout must not fail the run), but an exception that is not an `Exception` (a
/// `KeyboardInterrupt` a signal handler raised while the line printed) is returned.
pub(crate) fn print_line(line: &str) -> Option<PyErr> {
    Python::attach(|py| {
        let printed = py
            .import("builtins")
            .and_then(|b| b.getattr("print"))
            .and_then(|p| p.call1((line,)));
        printed
            .err()
            .filter(|e| !e.is_instance_of::<PyException>(py))
    })
}

impl Printer {
    fn say(&mut self, line: &str) {
        if self.verbose {
            if let Some(e) = print_line(line) {
                self.interrupt.get_or_insert(e);
            }
        }
    }
}

impl Observer for Printer {
    fn run_start(&mut self, line: &str) {
        self.say(line);
    }

    fn epoch_end(&mut self, r: &EpochRecord) {
        self.say(&embed::epoch_line(r, self.epochs));
    }

    fn stop(&mut self) -> bool {
        if self.interrupt.is_none() {
            self.interrupt = Python::attach(|py| py.check_signals().err());
        }
        self.interrupt.is_some()
    }
}

/// The exception of a run a signal handler stopped: a `KeyboardInterrupt` says where the run
/// stopped and what its folder keeps; another exception is raised as the handler raised it.
fn interrupted(py: Python<'_>, raised: PyErr, e: &anyhow::Error, out: Option<&Path>) -> PyErr {
    if !raised.is_instance_of::<PyKeyboardInterrupt>(py) {
        return raised;
    }
    let mut msg = systole::cli::error_text(e);
    if let Some(dir) = out {
        let ck = dir.join(systole_train::checkpoint::FILE_NAME);
        if ck.is_file() {
            msg += &format!(
                "; {} keeps the last epoch it saved: train(..., resume=True) continues from it",
                ck.display()
            );
        }
    }
    PyKeyboardInterrupt::new_err(msg)
}

/// The class of a failed run: a device's failure, or the run's.
fn run_failure(e: &anyhow::Error) -> Failure {
    let device = e.chain().any(|c| c.is::<DeviceError>());
    Failure::new(
        if device { Kind::Device } else { Kind::Train },
        systole::cli::error_text(e),
    )
}

/// Runs ``systole train ARGS`` in this process (the GIL released) and returns the run's
/// summary as JSON (run.json's content). ``verbose`` prints each epoch's line.
#[pyfunction]
#[pyo3(signature = (args, verbose = true))]
fn train(py: Python<'_>, args: Vec<String>, verbose: bool) -> PyResult<String> {
    guard(py, || {
        let a = embed::train_args(&args).map_err(|e| {
            Failure::new(Kind::Option, embed::parse_error_sentence(&e)).into_pyerr(py)
        })?;
        let mut printer = Printer {
            epochs: a.recipe.epochs,
            verbose,
            interrupt: None,
        };
        let result = py.detach(|| embed::train(&a, &mut printer));
        let summary = result.map_err(|f| {
            let failure = match f {
                RunFailure::Options(e) => Failure::new(Kind::Option, systole::cli::error_text(&e)),
                RunFailure::Run(e) => match printer.interrupt.take() {
                    Some(raised) => return interrupted(py, raised, &e, a.out.as_deref()),
                    None => run_failure(&e),
                },
            };
            failure.into_pyerr(py)
        })?;
        serde_json::to_string(&summary).map_err(|e| {
            Failure::new(Kind::Train, format!("cannot encode the run's summary: {e}"))
                .into_pyerr(py)
        })
    })
}

/// Adds the training functions to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_options, m)?)?;
    m.add_function(wrap_pyfunction!(train, m)?)?;
    Ok(())
}
