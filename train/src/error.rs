//! Why training stopped: [`TrainError`], and the step's errors mapped onto it.

use systole_device::DeviceError;
use systole_golden::NumericError;
use systole_step::StepError;

/// Why training stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The device failed on an operation (the cause is the error's source).
    #[error("{op}")]
    Device {
        /// The operation, e.g. `layer 2 backward dW`.
        op: String,
        /// The cause.
        source: DeviceError,
    },
    /// An operation broke the numeric contract (the cause is the error's source).
    #[error("{op}")]
    Numeric {
        /// The operation.
        op: String,
        /// The cause.
        source: NumericError,
    },
    /// `--check` found the device disagreeing with the golden model.
    #[error("--check: {op}: the device disagrees with the golden model: {detail}")]
    Mismatch {
        /// The operation.
        op: String,
        /// Which tensor element and both values.
        detail: String,
    },
    /// Operand shapes do not fit (a bug in the model description or bad options).
    #[error("{op}: {msg}")]
    Shape {
        /// The operation.
        op: String,
        /// What does not fit.
        msg: String,
    },
    /// Bad training options.
    #[error("{0}")]
    Config(String),
    /// A checkpoint cannot be used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A field of a checkpoint file is wrong (damaged, edited, or from another model).
    #[error("checkpoint {}: field `{field}` {what}; resume from an intact copy, or start over with --overwrite", path.display())]
    CheckpointField {
        /// The file.
        path: std::path::PathBuf,
        /// The field, e.g. `velocity[1] (layer 1 b)`.
        field: String,
        /// What is wrong with it.
        what: String,
    },
    /// A checkpoint file is not a systole checkpoint (the decoder's error is the source).
    #[error("checkpoint: {} is not a systole checkpoint", path.display())]
    CheckpointFormat {
        /// The file.
        path: std::path::PathBuf,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// A checkpoint or report could not be encoded (the encoder's error is the source).
    #[error("cannot encode the {what}")]
    Encode {
        /// `checkpoint`, `report`.
        what: &'static str,
        /// The encoder's error.
        source: serde_json::Error,
    },
    /// The array the options describe is not valid (the check's error is the source).
    #[error("the array the options describe")]
    Array(#[from] systole_core::ConfigError),
    /// The MPI ranks were started with different options or data (every rank finds it).
    #[error(transparent)]
    Ranks(#[from] crate::dist::Disagreement),
    /// A file could not be written or read (the cause is the error's source).
    #[error("{path}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output could not be written, or the run folder is another run's.
    #[error(transparent)]
    Output(#[from] crate::outfile::OutputError),
    /// A pipeline stage received words that make no message.
    #[error("pipeline message")]
    Message(#[source] crate::pipeline::MessageError),
    /// The caller asked the run to stop ([`crate::Observer::stop`]) between two training steps.
    #[error("interrupted in epoch {epoch}, after {step} training steps")]
    Interrupted {
        /// The epoch that was running.
        epoch: usize,
        /// Training steps done in the whole run.
        step: u64,
    },
    /// The training step stopped on its own (a diverged loss, a word or master width it cannot
    /// keep, a missing gradient): its error, whole.
    #[error(transparent)]
    Step(StepError),
}

/// The step's own errors keep their variants and sentences.
impl From<StepError> for TrainError {
    fn from(e: StepError) -> Self {
        match e {
            StepError::Numeric { op, source } => TrainError::Numeric { op, source },
            StepError::Shape { op, msg } => TrainError::Shape { op, msg },
            StepError::Checkpoint(m) => TrainError::Checkpoint(m),
            other => TrainError::Step(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_own_errors_stay_typed() {
        let e = TrainError::from(StepError::Diverged {
            step: 7,
            loss: f32::NAN,
        });
        assert!(
            matches!(e, TrainError::Step(StepError::Diverged { step: 7, .. })),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "training diverged at step 7 (loss NaN): lower --lr"
        );
    }
}
