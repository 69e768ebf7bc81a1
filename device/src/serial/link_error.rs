//! Why an operation over the serial link failed.

/// Why a link operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The port reported an error or closed (the port's error is the source).
    #[error("serial link lost")]
    Gone(#[source] PortError),
    /// No valid answer after every retry.
    #[error("no answer from the board after {tries} tries ({timeout_ms} ms each)")]
    NoAnswer {
        /// Frames sent.
        tries: u32,
        /// Timeout per try.
        timeout_ms: u128,
    },
    /// The board answered sends of one request as damaged in transit (a CRC error, lost
    /// bytes) until the retries ran out: the line corrupts bytes.
    #[error(
        "the board received the request damaged ({what}) on {damaged} of {tries} tries: the line corrupts bytes; check the cable and that both ends use the same baud rate"
    )]
    Damaged {
        /// Frames sent.
        tries: u32,
        /// Tries the board answered as damaged.
        damaged: u32,
        /// The last damage it reported.
        what: String,
    },
    /// The board answered, but every answer arrived damaged (a CRC error, a frame cut short):
    /// the line corrupts bytes towards the host.
    #[error(
        "the board answered, but its answers arrived damaged ({what}) on {damaged} of {tries} tries: the line corrupts bytes towards the host; check the cable and that both ends use the same baud rate"
    )]
    AnswersDamaged {
        /// Frames sent.
        tries: u32,
        /// Tries whose answer arrived damaged.
        damaged: u32,
        /// How the last one was damaged.
        what: String,
    },
    /// The board acknowledged a long request, reported progress, then went quiet for longer
    /// than its measured pace allows: it stopped (halted, hung, or the link was cut).
    #[error(
        "the board stopped answering: it accepted command {cmd:#04x} ({done} of {steps} steps done), then sent nothing for {quiet_ms} ms{}; check that it still runs (a halted or hung board, a cut cable) and run again (--resume continues from the last checkpoint)",
        step_ms.map_or_else(String::new, |s| format!(", over {} times its slowest step so far ({s} ms)", super::exchange::SLACK))
    )]
    Stalled {
        /// The request's command.
        cmd: u8,
        /// Steps the board reported done.
        done: u16,
        /// Steps asked for.
        steps: u16,
        /// How long it was quiet.
        quiet_ms: u128,
        /// The slowest step measured on this link, if any.
        step_ms: Option<u128>,
    },
    /// The board refused a request.
    #[error("board refused command {cmd:#04x}: {what} (detail {detail})")]
    Refused {
        /// The request's command.
        cmd: u8,
        /// The error code's text.
        what: String,
        /// Failing batch entry.
        detail: u16,
    },
    /// The board's tensor store has no room for a tensor (nothing was stored).
    #[error(
        "the board's tensor store is full ({free} words free, at most {} tensors): free stored tensors or send a smaller operation",
        systole_firmware::store::MAX_TENSORS
    )]
    StoreFull {
        /// Words the store had free (0 also when every table entry was taken).
        free: u16,
    },
    /// A request named a tensor the board does not hold.
    #[error("the board holds no tensor {id}: the host's record of the board's store is stale")]
    UnknownTensor {
        /// The id.
        id: u8,
    },
    /// The stored tensors' shapes do not make the requested operation.
    #[error("the board refused command {cmd:#04x}: the stored tensors' shapes do not fit it")]
    ShapeMismatch {
        /// The request's command.
        cmd: u8,
    },
    /// The board's own driver refused or failed an operation.
    #[error("the board's driver refused the operation: {what}")]
    BoardDriver {
        /// Why, as the board's detail code says.
        what: &'static str,
    },
    /// The board refused a training request (`systole_firmware::protocol::train`).
    #[error("the board refused to train: {what}")]
    Training {
        /// What the board said, in words.
        what: String,
    },
    /// The host could not encode a request frame (a request too long for a frame: a bug in
    /// the host, the cause is the error's source).
    #[error("could not encode a request to the board")]
    Encode(#[source] systole_firmware::frame::EncodeError),
    /// The board's answer does not fit the request.
    #[error("unexpected answer from the board: {0}")]
    Protocol(String),
    /// The board's firmware reported a panic and reset: the operation in progress is lost.
    #[error("the board's firmware panicked and reset ({0}); the operation in progress was lost")]
    BoardPanicked(String),
    /// The board announced a start the host did not expect (its reset button, a power cut):
    /// everything it held is gone, so the operation in progress is lost.
    #[error(
        "the board restarted during the operation (reset or power loss): the operation in progress was lost; run it again"
    )]
    BoardRestarted,
}

/// The port's error behind [`LinkError::Gone`]: shared, so the link error stays `Clone`, and
/// equal to another when kind and message are (what tests compare).
#[derive(Debug, Clone)]
pub struct PortError(pub std::sync::Arc<std::io::Error>);

impl From<std::io::Error> for PortError {
    fn from(e: std::io::Error) -> Self {
        PortError(e.into())
    }
}

impl PartialEq for PortError {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for PortError {}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for PortError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
