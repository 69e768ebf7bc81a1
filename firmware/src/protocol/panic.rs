//! The panic report: the frame the board's firmware sends when it panics, just before it
//! resets. It is an error frame (`CMD` = [`ERROR`]) with `SEQ` 0 that answers no request, so
//! the host recognises it whatever it is waiting for:
//!
//! | offset | size | field |
//! |--------|------|-------|
//! | 0 | 1 | [`ErrorCode::Panic`] |
//! | 1 | 3 | 0 (no request `CMD`, no detail) |
//! | 4 | at most [`MAX_PANIC_MESSAGE`] | the panic message, UTF-8 (cut at a character boundary) |
//!
//! After it the board restarts from its reset vector: the host's request is lost, nothing of it
//! may be taken as a result.

use super::{ErrorCode, RemoteError, ERROR};
use crate::frame::{self, OVERHEAD};

/// Longest panic message sent (the rest is cut).
pub const MAX_PANIC_MESSAGE: usize = 160;
/// Bytes of the report before its message.
pub const PANIC_HEADER: usize = 4;
/// Bytes of the largest panic report frame.
pub const PANIC_FRAME_CAPACITY: usize = OVERHEAD + PANIC_HEADER + MAX_PANIC_MESSAGE;

/// Test hook of the firmware built with its `panic-test` feature: an `IDLE` request of this
/// many cycles panics, so tests can watch the report and the reset from the host.
pub const PANIC_TEST_IDLE_CYCLES: u32 = 0xDEAD_0001;

/// Test hook of the same build on the board-operation path: a `MATMUL` or `CONV` with this
/// seed panics in its board driver when it sets up its first output tile (the operands are on
/// the board, the product is under way).
pub const PANIC_TEST_OP_SEED: u32 = 0xDEAD_0002;

/// A panic message collected through `core::fmt::Write`, cut to [`MAX_PANIC_MESSAGE`] bytes at
/// a character boundary (writing never fails, so a long message still yields its start).
pub struct PanicMessage {
    buf: [u8; MAX_PANIC_MESSAGE],
    len: usize,
}

impl PanicMessage {
    /// An empty message.
    pub const fn new() -> Self {
        PanicMessage {
            buf: [0; MAX_PANIC_MESSAGE],
            len: 0,
        }
    }

    /// The message so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The report frame carrying this message; returns its length in `out`.
    pub fn encode(&self, out: &mut [u8; PANIC_FRAME_CAPACITY]) -> usize {
        out[frame::HEADER..frame::HEADER + PANIC_HEADER].copy_from_slice(&RemoteError::payload(
            ErrorCode::Panic,
            0,
            0,
        ));
        let at = frame::HEADER + PANIC_HEADER;
        out[at..at + self.len].copy_from_slice(self.as_bytes());
        // The payload is at most PANIC_HEADER + MAX_PANIC_MESSAGE bytes, within MAX_PAYLOAD.
        frame::finish(out, 0, ERROR, PANIC_HEADER + self.len).unwrap_or(0)
    }
}

impl Default for PanicMessage {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Write for PanicMessage {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = MAX_PANIC_MESSAGE - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The message of a panic report, when a frame with `cmd` and `payload` is one.
pub fn parse_panic(cmd: u8, payload: &[u8]) -> Option<&[u8]> {
    match payload {
        [code, _, _, _, message @ ..] if cmd == ERROR && *code == ErrorCode::Panic as u8 => {
            Some(message)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn a_panic_report_in_literal_bytes() {
        let mut m = PanicMessage::new();
        write!(m, "x{}", 1).unwrap();
        let mut out = [0u8; PANIC_FRAME_CAPACITY];
        let n = m.encode(&mut out);
        let expect: [u8; 14] = [
            0xA5, 0x5A, // sync
            0x06, 0x00, // LEN 6
            0x00, 0xFF, // SEQ 0, CMD ERROR
            0x09, 0x00, 0x00, 0x00, // Panic, no CMD, no detail
            b'x', b'1', // message
            0x97, 0xD8, // CRC-16/CCITT-FALSE of bytes 2..12, little-endian
        ];
        assert_eq!(&out[..n], &expect);
        assert_eq!(parse_panic(0xFF, &out[6..12]), Some(&b"x1"[..]));
    }

    #[test]
    fn other_frames_are_not_panic_reports() {
        let refusal = RemoteError::payload(ErrorCode::OutOfRange, 4, 0);
        assert_eq!(parse_panic(ERROR, &refusal), None);
        assert_eq!(parse_panic(0x81, &[9, 0, 0, 0]), None);
        assert_eq!(parse_panic(ERROR, &[9, 0, 0]), None);
        assert_eq!(parse_panic(ERROR, &[9, 0, 0, 0]), Some(&[][..]));
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let mut m = PanicMessage::new();
        for _ in 0..MAX_PANIC_MESSAGE {
            m.write_str("é").unwrap(); // two bytes each
        }
        assert_eq!(m.as_bytes().len(), MAX_PANIC_MESSAGE);
        m.write_str("a").unwrap();
        assert_eq!(m.as_bytes().len(), MAX_PANIC_MESSAGE);
        assert!(core::str::from_utf8(m.as_bytes()).is_ok());
        let mut odd = PanicMessage::new();
        odd.write_str("a").unwrap();
        for _ in 0..MAX_PANIC_MESSAGE {
            odd.write_str("é").unwrap();
        }
        assert_eq!(
            odd.as_bytes().len(),
            MAX_PANIC_MESSAGE - 1,
            "no half character"
        );
        assert!(core::str::from_utf8(odd.as_bytes()).is_ok());
    }
}
