//! Errors as the Python exceptions of `systole.errors` (one class per kind, each carrying the
//! sentence the CLI prints), and the guard that keeps a Rust panic from crossing into Python.

use pyo3::prelude::*;
use pyo3::types::PyType;
use systole_device::DeviceError;
use systole_golden::NumericError;

/// Which exception class of `systole.errors` an error raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Opening or talking to a device failed (`DeviceError`).
    Device,
    /// Operand shapes do not fit (`ShapeError`, a `ValueError`).
    Shape,
    /// A word, shift, seed or width outside its range (`RangeError`, a `ValueError`).
    Range,
    /// A bad option value: device kind, rounding, array size, training options
    /// (`OptionError`, a `ValueError`).
    Option,
    /// An operand that is not an integer array (`DTypeError`, a `TypeError`).
    DType,
    /// A training run failed after it started (`TrainError`).
    Train,
    /// A network systole cannot take: an unreadable or unsupported ONNX file, a run folder
    /// without its checkpoint, a model that does not fit the data set (`ModelError`, a
    /// `ValueError`).
    Model,
    /// A bug in systole: a Rust panic caught at the boundary (`InternalError`).
    Internal,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Device => "DeviceError",
            Kind::Shape => "ShapeError",
            Kind::Range => "RangeError",
            Kind::Option => "OptionError",
            Kind::DType => "DTypeError",
            Kind::Train => "TrainError",
            Kind::Model => "ModelError",
            Kind::Internal => "InternalError",
        }
    }
}

/// An error on its way to Python: its class and its sentence.
#[derive(Debug)]
pub struct Failure {
    /// The class.
    pub kind: Kind,
    /// The sentence.
    pub message: String,
}

impl Failure {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// The Python exception (`systole.errors.<class>(message)`).
    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match class(py, self.kind) {
            Ok(cls) => PyErr::from_type(cls, self.message),
            Err(e) => e,
        }
    }
}

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    Ok(py
        .import("systole.errors")?
        .getattr(kind.class_name())?
        .cast_into::<PyType>()?)
}

/// The class of a contract refusal: shapes and lengths are shape errors, the rest ranges.
pub fn numeric_kind(e: &NumericError) -> Kind {
    match e {
        NumericError::Shape(_) | NumericError::KTooLong(_) | NumericError::Tile => Kind::Shape,
        _ => Kind::Range,
    }
}

/// A device's error with the CLI's sentence (`systole_device::error_chain`).
pub fn device_failure(e: &DeviceError) -> Failure {
    let kind = match e {
        DeviceError::Numeric(n) => numeric_kind(n),
        DeviceError::Config(_) | DeviceError::UnknownDevice(_) | DeviceError::BadSpec(_) => {
            Kind::Option
        }
        _ => Kind::Device,
    };
    Failure::new(kind, systole_device::error_chain(e))
}

/// Runs `f`, turning a Rust panic into `systole.errors.InternalError` instead of letting it
/// cross into Python (where PyO3 would raise a `PanicException`, which `except Exception` does
/// not catch).
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(Failure::new(
                Kind::Internal,
                format!("systole failed inside (a bug, please report it with the call that raised this): {what}"),
            )
            .into_pyerr(py))
        }
    }
}
