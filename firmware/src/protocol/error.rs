//! Error responses: [`ErrorCode`] (why the board refused), [`DriverFailure`] (why its driver
//! did) and [`RemoteError`] (a decoded error payload).

/// Why the board refused a request (the first byte of an error response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[repr(u8)]
pub enum ErrorCode {
    /// The frame's CRC did not match: the host should resend it.
    BadCrc = 1,
    /// The frame's length field exceeded the maximum payload.
    Oversized = 2,
    /// Unknown `CMD`.
    UnknownCommand = 3,
    /// The payload has the wrong length or structure for its command.
    Malformed = 4,
    /// A bank, row, count or register address is out of range.
    OutOfRange = 5,
    /// Row length is not the board's array size.
    RowLength = 6,
    /// The board's accelerator bus reported a fault.
    Bus = 7,
    /// A command that may not appear inside `BATCH`.
    NotBatchable = 8,
    /// The board's firmware panicked and reset ([`super::panic`]: an unsolicited report).
    Panic = 9,
    /// The board (re)started: its firmware announces this once, unsolicited, before it serves
    /// ([`super::boot`]); everything the board held before is gone.
    Restarted = 10,
    /// The board's receiver lost bytes of this frame (its buffer was full): the host should
    /// resend it.
    BytesLost = 11,
    /// The board's tensor store has no room for the tensor.
    StoreFull = 12,
    /// No stored tensor has the id.
    UnknownTensor = 13,
    /// Stored shapes do not fit the request.
    ShapeMismatch = 14,
    /// The board's driver refused or failed the operation ([`DriverFailure`] in the detail).
    Driver = 15,
    /// No training state (detail 0) or data set (detail 1) is on the board.
    NotLoaded = 16,
    /// The uploaded training state does not decode or check (detail: its error code).
    BadTrainState = 17,
    /// The board's heap has no room (detail: free KiB); nothing was kept.
    OutOfMemory = 18,
    /// The data set's chunks or shape do not fit (the order of chunks, the model's input and
    /// classes).
    BadData = 19,
    /// A training step failed on the board (detail: [`super::train::StepFailure`]); the
    /// board dropped its state.
    StepFailed = 20,
    /// A row or feature-map word is outside the array's `W`-bit range (detail: the batch
    /// entry): its ports would cut it.
    WordRange = 21,
}

/// Why the board's driver failed a `MATMUL` / `CONV` (the detail of [`ErrorCode::Driver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum DriverFailure {
    /// Any other refusal (an operand length, the array's configuration).
    Other = 0,
    /// The dot product is longer than the contract's `MAX_K`.
    KTooLong = 1,
    /// The output shift is outside `0..=MAX_SHIFT`.
    Shift = 2,
    /// The accelerator set its error flag.
    Device = 3,
    /// The accelerator did not answer in time.
    Timeout = 4,
    /// The convolution does not fit the conv unit (geometry, feature-map buffer, no unit).
    ConvUnit = 5,
    /// An operand word is outside the array's `W`-bit range.
    WordRange = 6,
}

impl DriverFailure {
    /// From the driver's error.
    pub fn of<E>(e: &crate::driver::DriverError<E>) -> Self {
        use crate::driver::DriverError as D;
        match e {
            D::KTooLong(_) => DriverFailure::KTooLong,
            D::Shift(_) => DriverFailure::Shift,
            D::Device { .. } => DriverFailure::Device,
            D::Timeout { .. } => DriverFailure::Timeout,
            D::NoConvUnit | D::Geometry(_) | D::FeatureMapTooSmall { .. } => {
                DriverFailure::ConvUnit
            }
            D::WordRange { .. } => DriverFailure::WordRange,
            _ => DriverFailure::Other,
        }
    }

    /// What the detail means, in words.
    pub fn describe(detail: u16) -> &'static str {
        match detail {
            1 => "the dot product is longer than MAX_K",
            2 => "the output shift is out of range",
            3 => "the accelerator reported an error",
            4 => "the accelerator did not answer in time",
            5 => "the convolution does not fit the conv unit",
            6 => "an operand word is outside the array's W-bit range",
            _ => "an operand or the array's configuration was refused",
        }
    }
}

impl ErrorCode {
    /// Decodes an error byte.
    pub fn from_u8(b: u8) -> Option<ErrorCode> {
        Some(match b {
            1 => ErrorCode::BadCrc,
            2 => ErrorCode::Oversized,
            3 => ErrorCode::UnknownCommand,
            4 => ErrorCode::Malformed,
            5 => ErrorCode::OutOfRange,
            6 => ErrorCode::RowLength,
            7 => ErrorCode::Bus,
            8 => ErrorCode::NotBatchable,
            9 => ErrorCode::Panic,
            10 => ErrorCode::Restarted,
            11 => ErrorCode::BytesLost,
            12 => ErrorCode::StoreFull,
            13 => ErrorCode::UnknownTensor,
            14 => ErrorCode::ShapeMismatch,
            15 => ErrorCode::Driver,
            16 => ErrorCode::NotLoaded,
            17 => ErrorCode::BadTrainState,
            18 => ErrorCode::OutOfMemory,
            19 => ErrorCode::BadData,
            20 => ErrorCode::StepFailed,
            21 => ErrorCode::WordRange,
            _ => return None,
        })
    }

    /// True when resending the same frame may succeed (the request was damaged in transit).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ErrorCode::BadCrc | ErrorCode::Oversized | ErrorCode::BytesLost
        )
    }
}

impl core::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ErrorCode::BadCrc => "frame CRC mismatch",
            ErrorCode::Oversized => "frame length exceeds the maximum payload",
            ErrorCode::UnknownCommand => "unknown command",
            ErrorCode::Malformed => "malformed payload",
            ErrorCode::OutOfRange => "bank, row, count or address out of range",
            ErrorCode::RowLength => "row length differs from the array size",
            ErrorCode::Bus => "accelerator bus fault on the board",
            ErrorCode::NotBatchable => "command not allowed inside a batch",
            ErrorCode::Panic => "the board's firmware panicked and reset",
            ErrorCode::Restarted => "the board restarted",
            ErrorCode::BytesLost => "the board's receiver lost bytes of the frame",
            ErrorCode::StoreFull => "the board's tensor store is full",
            ErrorCode::UnknownTensor => "no tensor with that id is stored on the board",
            ErrorCode::ShapeMismatch => "the stored tensors' shapes do not fit the request",
            ErrorCode::Driver => "the board's driver refused or failed the operation",
            ErrorCode::NotLoaded => "no training state or data set is on the board",
            ErrorCode::BadTrainState => "the board refused the training state",
            ErrorCode::OutOfMemory => "the board's heap has no room",
            ErrorCode::BadData => "the board refused the data set",
            ErrorCode::StepFailed => "a training step failed on the board",
            ErrorCode::WordRange => "a word is outside the W-bit range of the board's array",
        })
    }
}

/// A decoded error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteError {
    /// What went wrong (`None`: a code this host does not know).
    pub code: Option<ErrorCode>,
    /// Raw code byte.
    pub raw: u8,
    /// The request `CMD` that failed.
    pub cmd: u8,
    /// Failing batch entry, else 0.
    pub detail: u16,
}

impl RemoteError {
    /// Builds the 4-byte error payload.
    pub fn payload(code: ErrorCode, cmd: u8, detail: u16) -> [u8; 4] {
        let d = detail.to_le_bytes();
        [code as u8, cmd, d[0], d[1]]
    }

    /// Parses an error payload.
    pub fn parse(payload: &[u8]) -> Option<RemoteError> {
        match *payload {
            [raw, cmd, d0, d1] => Some(RemoteError {
                code: ErrorCode::from_u8(raw),
                raw,
                cmd,
                detail: u16::from_le_bytes([d0, d1]),
            }),
            _ => None,
        }
    }
}
