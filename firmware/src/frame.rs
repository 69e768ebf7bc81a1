//! Byte framing: how one message is delimited and checked on the serial link, and a streaming
//! [`Decoder`] that finds frames in a byte stream and resynchronises after damage.
//!
//! | offset | size | field |
//! |--------|------|-------|
//! | 0 | 2 | sync: `0xA5 0x5A` ([`SYNC`]) |
//! | 2 | 2 | `LEN`: payload length in bytes, little-endian, `<=` [`MAX_PAYLOAD`] |
//! | 4 | 1 | `SEQ`: sequence number chosen by the host, echoed in the response |
//! | 5 | 1 | `CMD`: command code (requests), response or error code (responses) |
//! | 6 | `LEN` | payload |
//! | 6 + `LEN` | 2 | CRC-16/CCITT-FALSE ([`crate::crc`]) of bytes `2 .. 6 + LEN`, little-endian |
//!
//! A frame is therefore [`OVERHEAD`] (8) bytes plus its payload, at most [`FRAME_CAPACITY`].
//! Multi-byte fields are little-endian throughout the protocol.
//!
//! **Resynchronisation.** Bytes before a sync pattern are skipped (counted as garbage). When a
//! candidate frame fails (bad CRC, impossible length) the decoder drops only its first sync byte
//! and searches again in what it already buffered, so a valid frame that followed garbage or a
//! truncated frame is still found.

use crate::crc;

/// The two sync bytes that start every frame.
pub const SYNC: [u8; 2] = [0xA5, 0x5A];
/// Sync, length, sequence and command bytes before the payload.
pub const HEADER: usize = 6;
/// Header plus the CRC after the payload.
pub const OVERHEAD: usize = HEADER + 2;
/// Largest payload of one frame. 1 KiB keeps the board's two frame buffers small enough for a
/// microcontroller while a block write still carries 63 rows of an 8x8 array.
pub const MAX_PAYLOAD: usize = 1024;
/// Largest frame in bytes.
pub const FRAME_CAPACITY: usize = MAX_PAYLOAD + OVERHEAD;

/// One checked frame, borrowed from the decoder's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Sequence number.
    pub seq: u8,
    /// Command (or response) code.
    pub cmd: u8,
    /// Payload bytes.
    pub payload: &'a [u8],
    /// The frame's CRC, used to tell a replayed frame from a new one with the same `seq`.
    pub crc: u16,
}

/// Why bytes that started like a frame were rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The CRC does not match; `seq` is as received and may itself be damaged.
    BadCrc {
        /// Sequence byte as received.
        seq: u8,
        /// Command byte as received.
        cmd: u8,
    },
    /// `LEN` is larger than [`MAX_PAYLOAD`].
    Oversized {
        /// Sequence byte as received.
        seq: u8,
        /// Command byte as received.
        cmd: u8,
        /// The length field.
        len: u16,
    },
}

/// Why a frame could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload is longer than [`MAX_PAYLOAD`].
    PayloadTooLong(usize),
    /// The output buffer is too small for the frame.
    BufferTooSmall,
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::PayloadTooLong(n) => {
                write!(
                    f,
                    "payload of {n} bytes exceeds the {MAX_PAYLOAD}-byte frame limit"
                )
            }
            EncodeError::BufferTooSmall => write!(f, "output buffer too small for the frame"),
        }
    }
}

impl core::error::Error for EncodeError {}

/// Writes header and CRC around a payload that is already at `buf[HEADER..HEADER + len]`, so
/// a payload can be produced in place without a copy. Returns the frame length.
pub fn finish(buf: &mut [u8], seq: u8, cmd: u8, len: usize) -> Result<usize, EncodeError> {
    if len > MAX_PAYLOAD {
        return Err(EncodeError::PayloadTooLong(len));
    }
    let total = len + OVERHEAD;
    if buf.len() < total {
        return Err(EncodeError::BufferTooSmall);
    }
    buf[..2].copy_from_slice(&SYNC);
    buf[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    buf[4] = seq;
    buf[5] = cmd;
    let crc = crc::crc16(&buf[2..HEADER + len]);
    buf[HEADER + len..total].copy_from_slice(&crc.to_le_bytes());
    Ok(total)
}

/// Encodes a whole frame into `out`; returns its length.
pub fn encode(seq: u8, cmd: u8, payload: &[u8], out: &mut [u8]) -> Result<usize, EncodeError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(EncodeError::PayloadTooLong(payload.len()));
    }
    if out.len() < payload.len() + OVERHEAD {
        return Err(EncodeError::BufferTooSmall);
    }
    out[HEADER..HEADER + payload.len()].copy_from_slice(payload);
    finish(out, seq, cmd, payload.len())
}

/// Streaming frame finder with a fixed buffer of one maximal frame.
///
/// Feed bytes with [`Decoder::spare`] + [`Decoder::commit`] (read straight into the buffer) or
/// [`Decoder::push`], then call [`Decoder::next_frame`] until it returns `None`.
#[derive(Clone)]
pub struct Decoder {
    buf: [u8; FRAME_CAPACITY],
    len: usize,
    /// Length of the frame last returned, removed on the next call.
    pending: usize,
    garbage: u32,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// An empty decoder.
    pub const fn new() -> Self {
        Decoder {
            buf: [0; FRAME_CAPACITY],
            len: 0,
            pending: 0,
            garbage: 0,
        }
    }

    /// Free space to read bytes into; call [`Decoder::commit`] with the count read. Never
    /// empty after [`Decoder::next_frame`] returned `None` (a full buffer always decides).
    pub fn spare(&mut self) -> &mut [u8] {
        self.drop_pending();
        &mut self.buf[self.len..]
    }

    /// Marks `n` bytes of [`Decoder::spare`] as received.
    pub fn commit(&mut self, n: usize) {
        self.len = (self.len + n).min(FRAME_CAPACITY);
    }

    /// Copies as many of `bytes` as fit; returns how many were taken.
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        let spare = self.spare();
        let n = bytes.len().min(spare.len());
        spare[..n].copy_from_slice(&bytes[..n]);
        self.commit(n);
        n
    }

    /// Bytes skipped while looking for a sync pattern, since creation.
    pub fn garbage_bytes(&self) -> u32 {
        self.garbage
    }

    /// Bytes buffered but not yet part of a returned frame.
    pub fn buffered(&self) -> usize {
        self.len - self.pending
    }

    /// `SEQ` and `CMD` of the frame being received: its sync and header arrived, its end not
    /// yet (what a board answers when bytes of it were lost).
    pub fn partial_header(&mut self) -> Option<(u8, u8)> {
        self.skip_garbage();
        (self.len >= HEADER).then(|| (self.buf[4], self.buf[5]))
    }

    /// Forgets everything buffered (after a link reset).
    pub fn clear(&mut self) {
        self.len = 0;
        self.pending = 0;
    }

    fn drop_pending(&mut self) {
        if self.pending > 0 {
            self.drop_front(self.pending);
            self.pending = 0;
        }
    }

    fn drop_front(&mut self, n: usize) {
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
    }

    /// Drops the frame last returned and any bytes before the next possible sync pattern
    /// (counted in [`Decoder::garbage_bytes`]).
    pub fn skip_garbage(&mut self) {
        self.drop_pending();
        // Skip to the first byte that can start a sync pattern; a lone SYNC[0] at the very end
        // is kept because its partner may still arrive.
        let start = (0..self.len)
            .find(|&i| self.buf[i] == SYNC[0] && (i + 1 == self.len || self.buf[i + 1] == SYNC[1]))
            .unwrap_or(self.len);
        if start > 0 {
            self.garbage = self.garbage.saturating_add(start as u32);
            self.drop_front(start);
        }
    }

    /// The next complete frame or framing error, or `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Option<Result<Frame<'_>, FrameError>> {
        self.skip_garbage();
        if self.len < HEADER {
            return None;
        }
        let plen = u16::from_le_bytes([self.buf[2], self.buf[3]]);
        let (seq, cmd) = (self.buf[4], self.buf[5]);
        if usize::from(plen) > MAX_PAYLOAD {
            self.drop_front(1);
            return Some(Err(FrameError::Oversized {
                seq,
                cmd,
                len: plen,
            }));
        }
        let plen = usize::from(plen);
        let total = plen + OVERHEAD;
        if self.len < total {
            return None;
        }
        let got = u16::from_le_bytes([self.buf[HEADER + plen], self.buf[HEADER + plen + 1]]);
        if crc::crc16(&self.buf[2..HEADER + plen]) != got {
            self.drop_front(1);
            return Some(Err(FrameError::BadCrc { seq, cmd }));
        }
        self.pending = total;
        Some(Ok(Frame {
            seq,
            cmd,
            payload: &self.buf[HEADER..HEADER + plen],
            crc: got,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u8, cmd: u8, payload: &[u8]) -> heapless::Vec<u8, FRAME_CAPACITY> {
        let mut out = [0u8; FRAME_CAPACITY];
        let n = encode(seq, cmd, payload, &mut out).unwrap();
        heapless::Vec::from_slice(&out[..n]).unwrap()
    }

    #[test]
    fn literal_empty_frame() {
        // CRC-16/CCITT-FALSE of 00 00 07 01 is 0x0D76 (computed independently with a bitwise script).
        let f = frame(7, 1, &[]);
        assert_eq!(
            f.as_slice(),
            &[0xA5, 0x5A, 0x00, 0x00, 0x07, 0x01, 0x76, 0x0D]
        );
        assert_eq!(crate::crc::crc16(&[0, 0, 7, 1]), 0x0D76);
    }

    #[test]
    fn split_delivery_and_garbage_resync() {
        let mut d = Decoder::new();
        let f = frame(3, 2, &[9, 8, 7]);
        let mut stream = heapless::Vec::<u8, 64>::new();
        stream.extend_from_slice(&[0x00, 0xA5, 0x11, 0x5A]).unwrap();
        stream.extend_from_slice(&f).unwrap();
        for &b in stream.iter() {
            d.push(&[b]);
        }
        let got = d.next_frame().unwrap().unwrap();
        assert_eq!((got.seq, got.cmd, got.payload), (3, 2, &[9u8, 8, 7][..]));
        assert!(d.next_frame().is_none());
        assert_eq!(d.garbage_bytes(), 4);
    }

    #[test]
    fn bad_crc_then_good_frame_is_found() {
        let mut d = Decoder::new();
        let mut bad = frame(1, 2, &[1, 2, 3]);
        bad[7] ^= 0x40;
        d.push(&bad);
        d.push(&frame(2, 2, &[4]));
        assert_eq!(
            d.next_frame().unwrap(),
            Err(FrameError::BadCrc { seq: 1, cmd: 2 })
        );
        let got = d.next_frame().unwrap().unwrap();
        assert_eq!((got.seq, got.payload), (2, &[4u8][..]));
    }

    #[test]
    fn oversized_length_is_rejected_at_once() {
        let mut d = Decoder::new();
        d.push(&[0xA5, 0x5A, 0x01, 0x04, 5, 1]); // LEN = 1025
        assert_eq!(
            d.next_frame().unwrap(),
            Err(FrameError::Oversized {
                seq: 5,
                cmd: 1,
                len: 1025
            })
        );
        assert!(d.next_frame().is_none());
    }

    #[test]
    fn encode_refuses_long_payloads() {
        let mut out = [0u8; FRAME_CAPACITY + 1];
        let big = [0u8; MAX_PAYLOAD + 1];
        assert_eq!(
            encode(0, 0, &big, &mut out),
            Err(EncodeError::PayloadTooLong(MAX_PAYLOAD + 1))
        );
        assert_eq!(
            encode(0, 0, &[1, 2], &mut [0u8; 9]),
            Err(EncodeError::BufferTooSmall)
        );
    }

    proptest::proptest! {
        #[test]
        fn round_trip(seq: u8, cmd: u8, payload in proptest::collection::vec(proptest::num::u8::ANY, 0..=MAX_PAYLOAD), junk in proptest::collection::vec(proptest::num::u8::ANY, 0..20)) {
            let mut d = Decoder::new();
            // Garbage without a sync pattern in front must not hide the frame.
            let junk: heapless::Vec<u8, 20> = junk.into_iter().filter(|&b| b != SYNC[0]).collect();
            d.push(&junk);
            // A board calls next_frame after every read, which drops the junk.
            proptest::prop_assert!(d.next_frame().is_none());
            let f = frame(seq, cmd, &payload);
            let mut fed = 0;
            while fed < f.len() {
                let n = d.push(&f[fed..]);
                proptest::prop_assert!(n > 0, "decoder refused bytes");
                fed += n;
            }
            let got = d.next_frame().unwrap().unwrap();
            proptest::prop_assert_eq!((got.seq, got.cmd, got.payload), (seq, cmd, payload.as_slice()));
        }

        #[test]
        fn never_panics_and_always_makes_progress(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..4000)) {
            let mut d = Decoder::new();
            let mut rest = bytes.as_slice();
            loop {
                let n = d.push(rest);
                rest = &rest[n..];
                while d.next_frame().is_some() {}
                // After draining, the buffer must have room again or the stream would stall.
                proptest::prop_assert!(!d.spare().is_empty());
                if rest.is_empty() { break; }
            }
        }
    }
}
