//! `systole.train`: `systole train` in this process, its options given as the words of the
//! command line (systole/__init__.py maps keyword arguments onto them).
//!
//! Another command of the CLI comes to Python the same way: a function here that parses its
//! words with `systole::cli::embed`, runs it with the GIL released and returns its results as
//! JSON, and a keyword-argument wrapper in systole/__init__.py over [`cli_options`].

use crate::errors::{guard, Failure, Kind};
use pyo3::prelude::*;
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
struct Printer {
    epochs: usize,
    verbose: bool,
}

impl Printer {
    fn say(&self, line: &str) {
        if self.verbose {
            Python::attach(|py| {
                // Printing is best effort: a closed sys.stdout must not fail the run.
                let _ = py
                    .import("builtins")
                    .and_then(|b| b.getattr("print"))
                    .and_then(|p| p.call1((line,)));
            });
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
        };
        let summary = py.detach(|| embed::train(&a, &mut printer)).map_err(|f| {
            let failure = match f {
                RunFailure::Options(e) => Failure::new(Kind::Option, systole::cli::error_text(&e)),
                RunFailure::Run(e) => run_failure(&e),
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
