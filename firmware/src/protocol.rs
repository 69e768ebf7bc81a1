//! The command protocol spoken between the host (`SerialBus` in the `systole` crate) and the
//! board ([`crate::server::FrameServer`]), carried in [`crate::frame`] frames.
//!
//! The host sends one request frame and waits for the response frame with the same `SEQ`.
//! A successful response has `CMD = request CMD | 0x80` ([`RESPONSE`]); a failed one has
//! `CMD = 0xFF` ([`ERROR`]) and the payload `[code, request CMD, detail (u16)]` (see
//! [`ErrorCode`]; `detail` is the index of the failing entry of a batch, else 0). A board whose
//! firmware panics sends one unsolicited error frame, the [`panic`] report, and resets; a board
//! that starts (power-up, reset button, or after a panic) sends one unsolicited [`boot`] frame
//! before it serves, so a host in the middle of an operation knows the board's state is gone.
//!
//! | CMD | name | request payload | response payload | action |
//! |-----|------|-----------------|------------------|--------|
//! | 0x01 | `PING` | — | `ID` u32, `CONFIG` u32, [`VERSION`] u8, [`crate::frame::MAX_PAYLOAD`] u16 | identifies the board; never replayed, so a restarted host resynchronises with it |
//! | 0x02 | `READ_REG` | addr u8 | value u32 | reads one register |
//! | 0x03 | `WRITE_REG` | addr u8, value u32 | — | writes one register (one clock) |
//! | 0x04 | `WRITE_ROWS` | buffer u8 (0 = A, 1 = B), bank u8, start u16, count u16, `count x size` words i16 | — | writes rows `start..start+count` of that bank, one row per clock |
//! | 0x05 | `READ_ROWS` | bank u8, start u16, count u16 | `count x size` words i16 | reads C rows `start..start+count`, one per clock |
//! | 0x06 | `STATUS` | — | `STATUS` u32, frames ok u32, frames rejected u32, garbage bytes u32 | accelerator status and link counters |
//! | 0x07 | `IDLE` | cycles u32 | — | lets `cycles` clocks pass (a delay on real hardware) |
//! | 0x08 | `BATCH` | entries: CMD u8, LEN u16, payload | — | runs `WRITE_REG`, `WRITE_ROWS`, `IDLE` and `WRITE_FM` entries in order |
//! | 0x09 | `WRITE_FM` | addr u32, `count` words i16 (`count = (LEN - 4) / 2 >= 1`) | — | writes feature-map words `addr..addr+count` of the conv unit, one row of `R = fm_row_words` words per clock; `addr` and `count` multiples of `R`, `addr + count <= fm_depth` |
//! | 0x0A | `COUNTERS` | — | clock u8 (1: the board counts cycles), frames ok u32, busy cycles u64 | the firmware's own cost: cycles spent from each executed request's last byte received to its response ready (CRC check, execution, response), summed over the requests before this one (`COUNTERS` requests not counted); 0 and clock 0 on a board without a cycle counter |
//!
//! Row words are little-endian, lane 0 first; `size` is the board's array size and every row of
//! a request must be exactly `size` words. Feature-map words are little-endian too, lowest
//! address first; a board without a conv unit (`fm_depth = 0`) refuses every `WRITE_FM` as out
//! of range. The board checks a whole request (every batch entry, every bank, row and
//! feature-map index) before it touches the accelerator, so a rejected request has no effect.
//!
//! **Retries.** The board remembers the `SEQ` and CRC of the last request it executed and the
//! response it sent. A frame with the same `SEQ` and CRC is a retry (the response was lost): the
//! stored response is sent again and nothing runs twice. The host therefore retries a frame with
//! the same `SEQ` after a timeout or a CRC error, and uses a new `SEQ` for every new request.

use crate::frame::MAX_PAYLOAD;

pub mod boot;
pub mod panic;

/// Protocol version reported by `PING`.
pub const VERSION: u8 = 1;
/// Flag added to a request's `CMD` in its successful response.
pub const RESPONSE: u8 = 0x80;
/// `CMD` of an error response.
pub const ERROR: u8 = 0xFF;
/// Largest array size the board supports (row buffers are sized for it).
pub const MAX_LANES: usize = 64;

/// Request command codes.
pub mod cmd {
    /// Identify the board.
    pub const PING: u8 = 0x01;
    /// Read a register.
    pub const READ_REG: u8 = 0x02;
    /// Write a register.
    pub const WRITE_REG: u8 = 0x03;
    /// Block write of A or B rows.
    pub const WRITE_ROWS: u8 = 0x04;
    /// Block read of C rows.
    pub const READ_ROWS: u8 = 0x05;
    /// Status and link counters.
    pub const STATUS: u8 = 0x06;
    /// Idle clocks.
    pub const IDLE: u8 = 0x07;
    /// Several writes in one frame.
    pub const BATCH: u8 = 0x08;
    /// Block write of feature-map words.
    pub const WRITE_FM: u8 = 0x09;
    /// The firmware's cycle counters.
    pub const COUNTERS: u8 = 0x0A;
}

/// Bytes of a `COUNTERS` response payload.
pub const COUNTERS_REPLY: usize = 13;

/// Bytes of a `WRITE_ROWS` payload before its words.
pub const WRITE_ROWS_HEADER: usize = 6;
/// Bytes of a `WRITE_FM` payload before its words (the address).
pub const WRITE_FM_HEADER: usize = 4;
/// Bytes of a batch entry before its payload.
pub const BATCH_ENTRY_HEADER: usize = 3;

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
    /// The board's firmware panicked and reset ([`panic`]: an unsolicited report).
    Panic = 9,
    /// The board (re)started: its firmware announces this once, unsolicited, before it serves
    /// ([`boot`]); everything the board held before is gone.
    Restarted = 10,
    /// The board's receiver lost bytes of this frame (its buffer was full): the host should
    /// resend it.
    BytesLost = 11,
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

/// Which input buffer a row block goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// The A (left operand) buffer.
    A = 0,
    /// The B (right operand) buffer.
    B = 1,
}

/// Little-endian 16-bit words borrowed from a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// Wraps raw bytes (their length must be even; [`Request::parse`] checks it).
    pub fn from_le_bytes(bytes: &'a [u8]) -> Self {
        Words(bytes)
    }
    /// Number of words.
    pub fn len(&self) -> usize {
        self.0.len() / 2
    }
    /// True when there are no words.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }
    /// Word `i`.
    pub fn get(&self, i: usize) -> i16 {
        i16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]])
    }
}

/// One request, parsed from (or to be encoded into) a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `PING`.
    Ping,
    /// `READ_REG`.
    ReadReg {
        /// Register address.
        addr: u8,
    },
    /// `WRITE_REG`.
    WriteReg {
        /// Register address.
        addr: u8,
        /// Value.
        value: u32,
    },
    /// `WRITE_ROWS`.
    WriteRows {
        /// A or B.
        buffer: Buffer,
        /// Bank 0 or 1.
        bank: u8,
        /// First row.
        start: u16,
        /// Number of rows (`>= 1`).
        count: u16,
        /// `count x size` words.
        words: Words<'a>,
    },
    /// `READ_ROWS` (C buffer).
    ReadRows {
        /// Bank 0 or 1.
        bank: u8,
        /// First row.
        start: u16,
        /// Number of rows (`>= 1`).
        count: u16,
    },
    /// `STATUS`.
    Status,
    /// `COUNTERS`.
    Counters,
    /// `IDLE`.
    Idle {
        /// Clock cycles.
        cycles: u32,
    },
    /// `BATCH`: the raw entries; iterate with [`BatchIter`].
    Batch(&'a [u8]),
    /// `WRITE_FM`.
    WriteFm {
        /// Feature-map word address of the first word.
        addr: u32,
        /// The words (`>= 1`), lowest address first.
        words: Words<'a>,
    },
}

fn u16_at(p: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([p[i], p[i + 1]])
}

fn u32_at(p: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]])
}

impl<'a> Request<'a> {
    /// The command code.
    pub fn cmd(&self) -> u8 {
        match self {
            Request::Ping => cmd::PING,
            Request::ReadReg { .. } => cmd::READ_REG,
            Request::WriteReg { .. } => cmd::WRITE_REG,
            Request::WriteRows { .. } => cmd::WRITE_ROWS,
            Request::ReadRows { .. } => cmd::READ_ROWS,
            Request::Status => cmd::STATUS,
            Request::Counters => cmd::COUNTERS,
            Request::Idle { .. } => cmd::IDLE,
            Request::Batch(_) => cmd::BATCH,
            Request::WriteFm { .. } => cmd::WRITE_FM,
        }
    }

    /// Parses a request payload. Checks structure only; ranges depend on the board's
    /// configuration and are checked by the board.
    pub fn parse(cmd: u8, p: &'a [u8]) -> Result<Request<'a>, ErrorCode> {
        let need = |n: usize| {
            if p.len() == n {
                Ok(())
            } else {
                Err(ErrorCode::Malformed)
            }
        };
        Ok(match cmd {
            cmd::PING => {
                need(0)?;
                Request::Ping
            }
            cmd::READ_REG => {
                need(1)?;
                Request::ReadReg { addr: p[0] }
            }
            cmd::WRITE_REG => {
                need(5)?;
                Request::WriteReg {
                    addr: p[0],
                    value: u32_at(p, 1),
                }
            }
            cmd::WRITE_ROWS => {
                if p.len() < WRITE_ROWS_HEADER {
                    return Err(ErrorCode::Malformed);
                }
                let buffer = match p[0] {
                    0 => Buffer::A,
                    1 => Buffer::B,
                    _ => return Err(ErrorCode::OutOfRange),
                };
                let count = u16_at(p, 4);
                let words = &p[WRITE_ROWS_HEADER..];
                if count == 0
                    || words.is_empty()
                    || !words.len().is_multiple_of(2 * usize::from(count))
                {
                    return Err(ErrorCode::Malformed);
                }
                Request::WriteRows {
                    buffer,
                    bank: p[1],
                    start: u16_at(p, 2),
                    count,
                    words: Words(words),
                }
            }
            cmd::READ_ROWS => {
                need(5)?;
                let count = u16_at(p, 3);
                if count == 0 {
                    return Err(ErrorCode::Malformed);
                }
                Request::ReadRows {
                    bank: p[0],
                    start: u16_at(p, 1),
                    count,
                }
            }
            cmd::STATUS => {
                need(0)?;
                Request::Status
            }
            cmd::COUNTERS => {
                need(0)?;
                Request::Counters
            }
            cmd::IDLE => {
                need(4)?;
                Request::Idle {
                    cycles: u32_at(p, 0),
                }
            }
            cmd::BATCH => {
                // Validate every entry now so a bad batch is refused before anything runs.
                for entry in BatchIter::new(p) {
                    entry.map_err(|(code, _)| code)?;
                }
                Request::Batch(p)
            }
            cmd::WRITE_FM => {
                let words = p.get(WRITE_FM_HEADER..).unwrap_or(&[]);
                if words.is_empty() || !words.len().is_multiple_of(2) {
                    return Err(ErrorCode::Malformed);
                }
                Request::WriteFm {
                    addr: u32_at(p, 0),
                    words: Words(words),
                }
            }
            _ => return Err(ErrorCode::UnknownCommand),
        })
    }

    /// Encodes the payload into `out`; returns its length.
    pub fn encode_payload(&self, out: &mut [u8]) -> Result<usize, crate::frame::EncodeError> {
        use crate::frame::EncodeError;
        let mut w = Writer { out, len: 0 };
        match *self {
            Request::Ping | Request::Status | Request::Counters => {}
            Request::ReadReg { addr } => w.put(&[addr])?,
            Request::WriteReg { addr, value } => {
                w.put(&[addr])?;
                w.put(&value.to_le_bytes())?;
            }
            Request::WriteRows {
                buffer,
                bank,
                start,
                count,
                words,
            } => {
                w.put(&[buffer as u8, bank])?;
                w.put(&start.to_le_bytes())?;
                w.put(&count.to_le_bytes())?;
                w.put(words.bytes())?;
            }
            Request::ReadRows { bank, start, count } => {
                w.put(&[bank])?;
                w.put(&start.to_le_bytes())?;
                w.put(&count.to_le_bytes())?;
            }
            Request::Idle { cycles } => w.put(&cycles.to_le_bytes())?,
            Request::Batch(entries) => w.put(entries)?,
            Request::WriteFm { addr, words } => {
                w.put(&addr.to_le_bytes())?;
                w.put(words.bytes())?;
            }
        }
        if w.len > MAX_PAYLOAD {
            return Err(EncodeError::PayloadTooLong(w.len));
        }
        Ok(w.len)
    }

    /// Encodes this request as one `BATCH` entry (CMD, LEN, payload) into `out`.
    pub fn encode_batch_entry(&self, out: &mut [u8]) -> Result<usize, crate::frame::EncodeError> {
        if out.len() < BATCH_ENTRY_HEADER {
            return Err(crate::frame::EncodeError::BufferTooSmall);
        }
        let n = self.encode_payload(&mut out[BATCH_ENTRY_HEADER..])?;
        out[0] = self.cmd();
        out[1..3].copy_from_slice(&(n as u16).to_le_bytes());
        Ok(n + BATCH_ENTRY_HEADER)
    }
}

struct Writer<'o> {
    out: &'o mut [u8],
    len: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) -> Result<(), crate::frame::EncodeError> {
        let end = self.len + b.len();
        if end > self.out.len() {
            return Err(crate::frame::EncodeError::BufferTooSmall);
        }
        self.out[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }
}

/// Iterates over the entries of a `BATCH` payload; an error carries the entry index.
pub struct BatchIter<'a> {
    rest: &'a [u8],
    index: u16,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    /// Iterator over `payload`'s entries.
    pub fn new(payload: &'a [u8]) -> Self {
        BatchIter {
            rest: payload,
            index: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<Request<'a>, (ErrorCode, u16)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let index = self.index;
        self.index = self.index.wrapping_add(1);
        let fail = |s: &mut Self, code| {
            s.failed = true;
            Some(Err((code, index)))
        };
        if self.rest.len() < BATCH_ENTRY_HEADER {
            return fail(self, ErrorCode::Malformed);
        }
        let c = self.rest[0];
        let len = usize::from(u16_at(self.rest, 1));
        if self.rest.len() < BATCH_ENTRY_HEADER + len {
            return fail(self, ErrorCode::Malformed);
        }
        let body = &self.rest[BATCH_ENTRY_HEADER..BATCH_ENTRY_HEADER + len];
        self.rest = &self.rest[BATCH_ENTRY_HEADER + len..];
        if !matches!(
            c,
            cmd::WRITE_REG | cmd::WRITE_ROWS | cmd::IDLE | cmd::WRITE_FM
        ) {
            let code = if matches!(c, cmd::PING..=cmd::COUNTERS) {
                ErrorCode::NotBatchable
            } else {
                ErrorCode::UnknownCommand
            };
            return fail(self, code);
        }
        match Request::parse(c, body) {
            Ok(r) => Some(Ok(r)),
            Err(code) => fail(self, code),
        }
    }
}

#[cfg(test)]
mod tests;
