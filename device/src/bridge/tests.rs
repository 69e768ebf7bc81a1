//! The bridge backend against a scripted board, with literal bytes.

use super::*;
use crate::Device;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use systole_firmware::crc;

/// A board that answers from a script: each step is the length of the command the host
/// must have written before the step's reply becomes readable. Replies come out in pieces
/// of `piece` bytes, with a `TimedOut`, `WouldBlock` or `Interrupted` error between reads,
/// as a serial port with a short timeout delivers them.
struct Script {
    steps: VecDeque<(usize, Vec<u8>)>,
    written: Arc<Mutex<Vec<u8>>>,
    answered_up_to: usize,
    pending: VecDeque<u8>,
    piece: usize,
    reads: u32,
}

impl Script {
    fn new(steps: &[(usize, &[u8])]) -> Self {
        Script {
            steps: steps.iter().map(|(l, r)| (*l, r.to_vec())).collect(),
            written: Arc::default(),
            answered_up_to: 0,
            pending: VecDeque::new(),
            piece: 1,
            reads: 0,
        }
    }
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads += 1;
        let kinds = [
            ErrorKind::TimedOut,
            ErrorKind::WouldBlock,
            ErrorKind::Interrupted,
        ];
        if self.reads % 2 == 1 {
            let kind = kinds[(self.reads as usize / 2) % 3];
            return Err(std::io::Error::new(kind, "nothing yet"));
        }
        let written = self.written.lock().unwrap().len();
        if self.pending.is_empty() {
            if let Some((len, _)) = self.steps.front() {
                if written >= self.answered_up_to + len {
                    let (len, reply) = self.steps.pop_front().unwrap();
                    self.answered_up_to += len;
                    self.pending.extend(reply);
                }
            }
        }
        if self.pending.is_empty() {
            return Err(std::io::Error::new(ErrorKind::TimedOut, "silence"));
        }
        let k = buf.len().min(self.piece).min(self.pending.len());
        for b in &mut buf[..k] {
            *b = self.pending.pop_front().unwrap();
        }
        Ok(k)
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Take at most 3 bytes per call, as a busy port may.
        let k = buf.len().min(3);
        self.written.lock().unwrap().extend_from_slice(&buf[..k]);
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn bus(steps: &[(usize, &[u8])], n: usize) -> (BridgeBus<Script>, Arc<Mutex<Vec<u8>>>) {
    let s = Script::new(steps);
    let w = s.written.clone();
    (BridgeBus::new(s, n), w)
}

fn cfg(size: usize) -> ArrayConfig {
    ArrayConfig::square(size)
}

/// A write as the host sends it: `bytes`, then their CRC.
fn sent(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .copied()
        .chain(crc::crc16(bytes).to_be_bytes())
        .collect()
}

/// The filler that brings a bridge of `n` lanes back in step.
fn filler(n: usize) -> Vec<u8> {
    vec![0xFF; 2 * n + 6]
}

/// A read's reply as the board sends it: `data`, then the CRC of `request` and `data`.
fn checked(request: &[u8], data: &[u8]) -> Vec<u8> {
    let crc = crc::update(crc::crc16(request), data);
    data.iter().copied().chain(crc.to_be_bytes()).collect()
}

#[test]
fn write_reg_sends_opcode_addr_and_big_endian_data() {
    let (mut b, w) = bus(&[(8, b"W")], 2);
    b.write_reg(0x0B, 0x0102_0304).unwrap();
    assert_eq!(
        *w.lock().unwrap(),
        sent(&[b'W', 0x0B, 0x01, 0x02, 0x03, 0x04])
    );
    // Sent, its echo not read yet.
    assert_eq!(
        b.counters(),
        BridgeCounters {
            bytes_out: 8,
            bytes_in: 0,
            commands: 0,
            retries: 0,
            round_trips: 0,
        }
    );
    b.settle().unwrap();
    assert_eq!(
        b.counters(),
        BridgeCounters {
            bytes_out: 8,
            bytes_in: 1,
            commands: 1,
            retries: 0,
            round_trips: 1,
        }
    );
}

#[test]
fn read_reg_parses_big_endian_and_checks_the_crc() {
    // The CRC of 'R' 0x00 0x53 0x59 0x53 0x54, computed outside the project.
    let second = checked(&[b'R', 0x02], &[0x80, 0, 0, 1]);
    let (mut b, w) = bus(
        &[(2, &[0x53, 0x59, 0x53, 0x54, 0x9A, 0xE1]), (2, &second)],
        2,
    );
    assert_eq!(b.read_reg(regmap::ID).unwrap(), 0x5359_5354);
    assert_eq!(b.read_reg(regmap::STATUS).unwrap(), 0x8000_0001);
    assert_eq!(*w.lock().unwrap(), [b'R', 0x00, b'R', 0x02]);
    assert_eq!(b.counters().retries, 0);
}

/// One flipped bit in a reply's data, or in its CRC, or in the address on the way to the
/// board: the read is sent again and the good reply taken.
#[test]
fn a_reply_failing_its_crc_is_read_again() {
    let good = checked(&[b'R', 9], &[0, 0, 0, 7]);
    for flip in [(3, 0x01), (4, 0x80), (5, 0x10)] {
        let mut bad = good.clone();
        bad[flip.0] ^= flip.1;
        let (mut b, w) = bus(&[(2, &bad), (filler(2).len() + 2, &good)], 2);
        assert_eq!(b.read_reg(9).unwrap(), 7);
        // Read again once in step (after the filler).
        let want = [&[b'R', 9][..], &filler(2), &[b'R', 9]].concat();
        assert_eq!(*w.lock().unwrap(), want);
        assert_eq!(b.counters().retries, 1);
        assert_eq!(b.counters().commands, 1);
        // Each try waited for its reply.
        assert_eq!(b.counters().round_trips, 2);
    }
    // The board answered register 8 (the address byte flipped on the way): its CRC covers
    // the address it saw, so the host's check over the address it sent fails.
    let wrong_reg = checked(&[b'R', 8], &[0, 0, 0, 7]);
    let (mut b, _) = bus(&[(2, &wrong_reg), (filler(2).len() + 2, &good)], 2);
    assert_eq!(b.read_reg(9).unwrap(), 7);
    assert_eq!(b.counters().retries, 1);
}

#[test]
fn a_link_that_keeps_corrupting_replies_stops_with_an_error() {
    let mut bad = checked(&[b'C', 0, 0, 1], &[0, 1, 0, 2]);
    bad[1] ^= 4;
    let again = filler(2).len() + 4;
    let steps: Vec<(usize, &[u8])> = (0..READ_TRIES)
        .map(|i| (if i == 0 { 4 } else { again }, &bad[..]))
        .collect();
    let (mut b, w) = bus(&steps, 2);
    let e = b.read_c_row(0, 1, &mut [0; 2]).unwrap_err();
    assert!(
        matches!(e, BridgeError::Corrupt { cmd: 'C', tries } if tries == READ_TRIES),
        "{e}"
    );
    assert!(e.to_string().contains("CRC"), "{e}");
    assert_eq!(
        w.lock().unwrap().len(),
        4 + (READ_TRIES as usize - 1) * again
    );
}

#[test]
fn row_writes_send_bank_row_and_big_endian_words() {
    let (mut b, w) = bus(&[(10, b"A"), (10, b"B")], 2);
    b.beat(
        &Beat {
            a: Some(systole_core::bus::RowWrite {
                bank: 1,
                row: 0x0102,
                data: &[1, -2],
            }),
            b: Some(systole_core::bus::RowWrite {
                bank: 0,
                row: 7,
                data: &[-32768, 0x1234],
            }),
            c: None,
        },
        &mut [],
    )
    .unwrap();
    let mut want = sent(&[b'A', 1, 0x01, 0x02, 0x00, 0x01, 0xFF, 0xFE]);
    want.extend(sent(&[b'B', 0, 0x00, 0x07, 0x80, 0x00, 0x12, 0x34]));
    assert_eq!(*w.lock().unwrap(), want);
}

#[test]
fn c_read_decodes_words_lane_zero_first() {
    let reply = checked(&[b'C', 1, 0, 2], &[0xFF, 0xFF, 0x00, 0x2A, 0x80, 0x00]);
    let (mut b, w) = bus(&[(4, &reply)], 3);
    let mut out = [0i16; 3];
    b.read_c_row(1, 2, &mut out).unwrap();
    assert_eq!(out, [-1, 42, -32768]);
    assert_eq!(*w.lock().unwrap(), [b'C', 1, 0x00, 0x02]);
}

#[test]
fn unknown_opcode_reply_is_a_protocol_error() {
    // Writes stream: a refused write is found when its echo is read, and sent again (after
    // the filler) until the tries run out.
    let again = filler(2).len() + 8;
    let steps: Vec<(usize, &[u8])> = (0..WRITE_TRIES)
        .map(|i| (if i == 0 { 8 } else { again }, &b"?"[..]))
        .collect();
    let (mut b, w) = bus(&steps, 2);
    b.write_reg(1, 2).unwrap();
    let e = b.settle().unwrap_err();
    assert!(
        matches!(&e, BridgeError::Protocol(m) if m.contains("'?'") && m.contains("CRC")),
        "{e}"
    );
    assert_eq!(
        w.lock().unwrap().len(),
        8 + (WRITE_TRIES as usize - 1) * again
    );
    // A read that stops after a lone '?' on every try is one too.
    let again = filler(2).len() + 2;
    let steps: Vec<(usize, &[u8])> = (0..READ_TRIES)
        .map(|i| (if i == 0 { 2 } else { again }, &b"?"[..]))
        .collect();
    let (mut b, _) = bus(&steps, 2);
    b.set_deadline(Duration::from_millis(30));
    let e = b.read_reg(regmap::ID).unwrap_err();
    assert!(
        matches!(&e, BridgeError::Protocol(m) if m.contains("'?'")),
        "{e}"
    );
    // A different echo every time: the write's tries run out, saying what came.
    let steps: Vec<(usize, &[u8])> = (0..WRITE_TRIES)
        .map(|i| (if i == 0 { 10 } else { 10 + filler(2).len() }, &b"B"[..]))
        .collect();
    let (mut b, _) = bus(&steps, 2);
    b.write_a_row(0, 0, &[0, 0]).unwrap();
    let e = b.settle().unwrap_err();
    assert!(
        matches!(&e, BridgeError::WritesDamaged { cmd: 'A', tries: WRITE_TRIES, what } if what == "'B'"),
        "{e}"
    );
}

/// A write the bridge refused as damaged (`'!'`), or whose echo came damaged, is sent again
/// with every write after it, after the filler; the writes before it are not.
#[test]
fn unconfirmed_writes_are_sent_again_with_the_writes_after_them() {
    let (a, shift, row_b) = (
        sent(&[b'A', 0, 0, 3, 0, 4, 0, 5]),
        sent(&[b'W', regmap::SHIFT, 0, 0, 0, 9]),
        sent(&[b'B', 1, 0, 2, 0, 6, 0, 7]),
    );
    for (echoes, resent) in [(&b"A!B"[..], 2usize), (b"AWC", 1), (b"X", 3)] {
        let again: Vec<u8> = [&a, &shift, &row_b][3 - resent..]
            .iter()
            .flat_map(|w| w.iter().copied())
            .collect();
        let first = echoes.len().min(3);
        let steps: Vec<(usize, &[u8])> = vec![
            (a.len() + shift.len() + row_b.len(), &echoes[..first]),
            (filler(2).len() + again.len(), &b"AWB"[3 - resent..]),
        ];
        let (mut b, w) = bus(&steps, 2);
        // (The lost echoes' wait.)
        b.set_deadline(Duration::from_millis(50));
        b.write_a_row(0, 3, &[4, 5]).unwrap();
        b.write_reg(regmap::SHIFT, 9).unwrap();
        b.write_b_row(1, 2, &[6, 7]).unwrap();
        b.settle().unwrap();
        let want = [a.clone(), shift.clone(), row_b.clone(), filler(2), again].concat();
        assert_eq!(*w.lock().unwrap(), want, "{echoes:?}");
        assert_eq!(b.counters().retries, resent as u64, "{echoes:?}");
        assert_eq!(b.counters().commands, 3, "{echoes:?}");
    }
}

/// `COMMAND` is sent only once the writes before it are confirmed; refused, it is sent
/// again; a damaged echo leaves it unknown whether it ran, and the bus stops saying so.
#[test]
fn a_write_that_must_not_run_twice_is_never_sent_twice_after_a_doubt() {
    let (a, cmd) = (
        sent(&[b'A', 0, 0, 3, 0, 4, 0, 5]),
        sent(&[b'W', regmap::COMMAND, 0, 0, 0, 1]),
    );
    let again = filler(2).len() + cmd.len();
    let (mut b, w) = bus(&[(a.len(), b"A"), (cmd.len(), b"!"), (again, b"W")], 2);
    b.write_a_row(0, 3, &[4, 5]).unwrap();
    b.write_reg(regmap::COMMAND, 1).unwrap();
    // The row's echo was read before COMMAND went out.
    assert_eq!(b.counters().round_trips, 1);
    b.settle().unwrap();
    let want = [a.clone(), cmd.clone(), filler(2), cmd.clone()].concat();
    assert_eq!(*w.lock().unwrap(), want);
    let (mut b, w) = bus(&[(cmd.len(), b"V")], 2);
    b.write_reg(regmap::COMMAND, 1).unwrap();
    let e = b.settle().unwrap_err();
    assert!(
        matches!(
            &e,
            BridgeError::Unconfirmed {
                cmd: 'W',
                reg: regmap::COMMAND,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("must not run twice"), "{e}");
    assert_eq!(*w.lock().unwrap(), cmd);
}

/// Writes go out back to back; the next read takes their echoes (in order) with its reply,
/// and after `MAX_UNACKED` writes the echoes are read anyway.
#[test]
fn writes_stream_and_their_echoes_are_checked_in_order() {
    let reply = checked(&[b'R', 9], &[0, 0, 0, 7]);
    let (mut b, w) = bus(&[(8, b"W"), (10, b"A"), (8, b"W"), (2, &reply)], 2);
    b.write_reg(regmap::SHIFT, 2).unwrap();
    b.write_a_row(1, 3, &[4, 5]).unwrap();
    b.write_reg(regmap::K_LEN, 7).unwrap();
    assert_eq!(b.read_reg(9).unwrap(), 7);
    let mut want = sent(&[b'W', regmap::SHIFT, 0, 0, 0, 2]);
    want.extend(sent(&[b'A', 1, 0, 3, 0, 4, 0, 5]));
    want.extend(sent(&[b'W', regmap::K_LEN, 0, 0, 0, 7]));
    want.extend([b'R', 9]);
    assert_eq!(*w.lock().unwrap(), want);
    assert_eq!(b.counters().commands, 4);
    // One wait: the read's, which took the three echoes with its reply.
    assert_eq!(b.counters().round_trips, 1);
    let steps: Vec<(usize, &[u8])> = (0..MAX_UNACKED + 1).map(|_| (8, &b"W"[..])).collect();
    let (mut b, _) = bus(&steps, 2);
    for i in 0..MAX_UNACKED {
        b.write_reg(regmap::SEED, i as u32).unwrap();
    }
    assert_eq!(b.counters().commands, MAX_UNACKED as u64);
    b.write_reg(regmap::SEED, 0).unwrap();
    assert_eq!(b.counters().commands, MAX_UNACKED as u64);
    b.settle().unwrap();
    assert_eq!(b.counters().commands, MAX_UNACKED as u64 + 1);
    // The wait after MAX_UNACKED writes and the settle's.
    assert_eq!(b.counters().round_trips, 2);
    // Nothing in flight: settling again waits for nothing.
    b.settle().unwrap();
    assert_eq!(b.counters().round_trips, 2);
}

#[test]
fn silence_is_a_timeout_and_wrong_lengths_are_refused() {
    let (mut b, _) = bus(&[], 2);
    b.set_deadline(Duration::from_millis(30));
    let e = b.read_reg(regmap::ID).unwrap_err();
    assert!(
        matches!(
            e,
            BridgeError::Timeout {
                cmd: 'R',
                waited_ms: 30
            }
        ),
        "{e}"
    );
    // A row that is not one word per lane never reaches the stream.
    let (mut b, w) = bus(&[], 2);
    assert!(matches!(
        b.write_b_row(0, 0, &[1, 2, 3]),
        Err(BridgeError::Protocol(_))
    ));
    assert!(w.lock().unwrap().is_empty());
}

#[test]
fn feature_map_rows_and_idle() {
    // 3 lanes: rows of 2 words. Word 6 is row 3.
    let (mut b, w) = bus(&[(9, b"F"), (9, b"F")], 3);
    b.write_fm(6, &[1, -2, 0x1234, -32768]).unwrap();
    let mut want = sent(&[b'F', 0x00, 0x03, 0x00, 0x01, 0xFF, 0xFE]);
    want.extend(sent(&[b'F', 0x00, 0x04, 0x12, 0x34, 0x80, 0x00]));
    assert_eq!(*w.lock().unwrap(), want);
    // Not a whole row, or not at a row boundary: refused before anything is sent.
    for (addr, words) in [(0u32, &[1i16][..]), (1, &[1, 2][..])] {
        assert!(matches!(
            b.write_fm(addr, words),
            Err(BridgeError::FeatureMapRows { row: 2, .. })
        ));
    }
    b.idle(1000).unwrap();
    assert_eq!(w.lock().unwrap().len(), 18);
}

#[test]
fn spec_parsing() {
    assert_eq!(
        parse_spec("/dev/ttyUSB1"),
        Some(("/dev/ttyUSB1", DEFAULT_BAUD))
    );
    assert_eq!(
        parse_spec("/dev/ttyUSB1@9600"),
        Some(("/dev/ttyUSB1", 9600))
    );
    assert_eq!(parse_spec("/tmp/a@b"), None);
    assert_eq!(parse_spec("/dev/x@+9600"), None);
    assert_eq!(parse_spec(""), None);
    assert_eq!(parse_spec("@9600"), None);
    assert_eq!(parse_spec("/dev/x@0"), None);
    assert_eq!(parse_spec("/dev/x@99999999999"), None);
}

#[test]
fn open_checks_id_and_config() {
    let read = |reg: u8, v: u32| checked(&[b'R', reg], &v.to_be_bytes());
    let id = read(regmap::ID, regmap::ID_VALUE);
    let wrong = read(regmap::ID, 0x1234_5678);
    let e = BridgeDevice::over(Box::new(Script::new(&[(2, &wrong)])), "fake", cfg(4))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("0x12345678") && e.to_string().contains("not a systole"),
        "{e}"
    );
    // The board is 8x8; 4x4 was asked for.
    let board = ArrayConfig {
        fm_depth: 0,
        ..cfg(8)
    };
    let word = read(regmap::CONFIG, board.config_word());
    let e = BridgeDevice::over(
        Box::new(Script::new(&[(2, &id), (2, &word)])),
        "fake",
        cfg(4),
    )
    .err()
    .unwrap();
    let text = crate::error_chain(&e);
    assert!(text.contains("is a 8x8 array"), "{text}");
    // A matching board opens even though the default config asks for a feature-map buffer:
    // the board's own size (none here, 4096 words on the second) is taken.
    let s = Script::new(&[(2, &id), (2, &word)]);
    let w = s.written.clone();
    let dev = BridgeDevice::over(Box::new(s), "fake", cfg(8)).unwrap();
    assert_eq!(dev.config().fm_depth, 0);
    assert_eq!(*w.lock().unwrap(), [b'R', regmap::ID, b'R', regmap::CONFIG]);
    let conv = ArrayConfig {
        fm_depth: 4096,
        ..cfg(8)
    };
    let word = read(regmap::CONFIG, conv.config_word());
    let dev = BridgeDevice::over(
        Box::new(Script::new(&[(2, &id), (2, &word)])),
        "fake",
        cfg(8),
    )
    .unwrap();
    assert_eq!(dev.config().fm_depth, 4096);
}

/// A stream that accepts every write and fails every read as an unplugged port does.
struct Unplugged;

impl Read for Unplugged {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::new(
            ErrorKind::BrokenPipe,
            "the port was unplugged",
        ))
    }
}

impl Write for Unplugged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The port's own error stays the source of the bridge's and the device's: a caller reads
/// its kind through `std::error::Error::source`, not from a message.
#[test]
fn a_failing_port_stays_the_errors_source() {
    use std::error::Error;
    let e = BridgeDevice::over(Box::new(Unplugged), "unplugged", cfg(4))
        .err()
        .unwrap();
    let bridge = e
        .cause::<BridgeError>()
        .expect("the bridge's error in the chain");
    assert!(matches!(bridge, BridgeError::Io(_)), "{bridge}");
    let port = bridge.source().expect("the port's error as the source");
    let port = port.downcast_ref::<std::io::Error>().expect("an io::Error");
    assert_eq!(port.kind(), ErrorKind::BrokenPipe);
}
