//! The bridge backend against the Verilated bridge image over a link that flips bits in the
//! board's replies or in the host's commands: results stay bit-identical to the golden model
//! (reads are retried on a CRC mismatch, writes the bridge refused or whose echo is not exact
//! are sent again) or the operation fails, never a wrong result.

use super::*;
use crate::golden::GoldenDevice;
use crate::Device;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use systole_core::Rounding;
use systole_golden::tensor::QMatrix;
use systole_golden::OutputSpec;
use systole_sim::ImagePins;

/// A link to a board that flips one bit in every `every`-th reply byte it picks: only bytes of
/// read replies (`R`, `C`), or any reply byte (write echoes too); and in one of every
/// `every_sent` bytes the host sends, picked at random (0: none). It follows the host's
/// commands to know which reply byte belongs to which command.
struct Noisy {
    board: ImagePins,
    n: usize,
    every: u64,
    only_reads: bool,
    every_sent: u64,
    sent: u64,
    /// Bytes written that do not yet make a whole command.
    partial: Vec<u8>,
    /// For each reply byte still to come: whether it belongs to a read's reply.
    coming: VecDeque<bool>,
    picked: u64,
    flips: Arc<AtomicU64>,
}

impl Noisy {
    /// Request length and reply length of the command starting with `op`.
    fn lengths(&self, op: u8) -> (usize, usize) {
        Self::lengths_for(self.n, op)
    }

    /// [`Self::lengths`] on a bridge of `n` lanes.
    fn lengths_for(n: usize, op: u8) -> (usize, usize) {
        let row = 1usize << (usize::BITS - 1 - n.leading_zeros());
        match op {
            OP_WRITE_REG => (8, 1),
            OP_READ_REG => (2, 6),
            OP_WRITE_A | OP_WRITE_B => (6 + 2 * n, 1),
            OP_READ_C => (4, 2 * n + 2),
            OP_WRITE_FM => (5 + 2 * row, 1),
            _ => (1, 1),
        }
    }
}

impl Write for Noisy {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(&op) = self.partial.first() {
            let (request, reply) = self.lengths(op);
            if self.partial.len() < request {
                break;
            }
            self.partial.drain(..request);
            let read = op == OP_READ_REG || op == OP_READ_C;
            self.coming.extend(std::iter::repeat_n(read, reply));
        }
        let mut bytes = buf.to_vec();
        for b in &mut bytes {
            self.sent += 1;
            // Bytes picked at random (a fixed stream), one in `every_sent` on average: a
            // periodic pick could hit the same byte of every resend of a batch.
            let pick = self.sent.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            if self.every_sent > 0 && pick.is_multiple_of(self.every_sent) {
                *b ^= 1 << (self.sent % 8);
                self.flips.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.board.write(&bytes)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.board.flush()
    }
}

impl Read for Noisy {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.board.read(buf)?;
        for b in &mut buf[..k] {
            let read = self.coming.pop_front().unwrap_or(false);
            if read || !self.only_reads {
                self.picked += 1;
                if self.picked.is_multiple_of(self.every) {
                    *b ^= 1 << ((self.picked / self.every) % 8);
                    self.flips.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(k)
    }
}

/// A bridge device on a fresh bridge image behind a [`Noisy`] link, or `None` when this build
/// has no board model.
fn noisy_device(every: u64, only_reads: bool, flips: &Arc<AtomicU64>) -> Option<BridgeDevice> {
    noisy_both_ways(every, only_reads, 0, flips)
}

/// [`noisy_device`] that also flips a bit in every `every_sent`-th byte the host sends (0: none;
/// counted from the first byte after the device opened).
fn noisy_both_ways(
    every: u64,
    only_reads: bool,
    every_sent: u64,
    flips: &Arc<AtomicU64>,
) -> Option<BridgeDevice> {
    let Ok(board) = ImagePins::bridge_image() else {
        eprintln!("SKIPPED: no board model in this build");
        return None;
    };
    let n = board.size();
    let link = Noisy {
        board,
        n,
        every,
        only_reads,
        every_sent: 0,
        sent: 0,
        partial: Vec::new(),
        coming: VecDeque::new(),
        picked: 0,
        flips: flips.clone(),
    };
    // Opened on a clean line; the flips of the bytes sent start after.
    let shared = Arc::new(std::sync::Mutex::new(link));
    let config = ArrayConfig::square(n);
    let dev = BridgeDevice::over(Box::new(Shared(shared.clone())), "noisy link", config);
    shared.lock().unwrap().every_sent = every_sent;
    Some(dev.unwrap())
}

/// A [`Noisy`] link the test can still reach after the device took it.
struct Shared(Arc<std::sync::Mutex<Noisy>>);

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().read(buf)
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

/// Operands of product `i`: sizes that need several tiles and padding, full-range words.
fn operands(i: u64) -> (QMatrix, QMatrix, OutputSpec) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ i;
    let mut word = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as i16
    };
    let (m, k, n) = (5 + i as usize % 3, 7, 6);
    let a = QMatrix::from_vec(m, k, 8, (0..m * k).map(|_| word()).collect()).unwrap();
    let b = QMatrix::from_vec(k, n, 8, (0..k * n).map(|_| word()).collect()).unwrap();
    let out = OutputSpec {
        frac: 14,
        rounding: Rounding::Stochastic,
        seed: i as u32,
    };
    (a, b, out)
}

/// One bit in every 17th byte of read replies: replies are at most 10 bytes here, so each
/// has at most one flip and of any three tries in a row one is clean (fewer than
/// [`READ_TRIES`]): every read gets through, after one retry per flip.
#[test]
fn flipped_read_replies_are_read_again_and_results_stay_exact() {
    let flips = Arc::new(AtomicU64::new(0));
    let Some(mut dev) = noisy_device(17, true, &flips) else {
        return;
    };
    let mut golden = GoldenDevice::new(ArrayConfig::square(dev.config().size)).unwrap();
    for i in 0..4 {
        let (a, b, out) = operands(i);
        let want = golden.matmul(&a, &b, &out).unwrap();
        assert_eq!(dev.matmul(&a, &b, &out).unwrap(), want, "product {i}");
    }
    let c = dev.link_counters();
    let flips = flips.load(Ordering::Relaxed);
    eprintln!("{flips} bits flipped in read replies: {c:?}");
    assert!(flips > 10, "{c:?}");
    assert_eq!(c.retries, flips, "{c:?}");
}

/// One bit in every `every`-th reply byte, write echoes included: a flipped echo of a row or
/// a register that holds a value costs a resend; only one of a write that must not run twice
/// (`COMMAND`) ends the product, with an error that says so.
#[test]
fn flips_anywhere_in_replies_give_exact_results_or_an_error() {
    let (mut exact, mut failed, mut resent) = (0, 0, 0);
    let flips = Arc::new(AtomicU64::new(0));
    let mut golden = GoldenDevice::new(ArrayConfig::square(4)).unwrap();
    for (i, every) in [
        (0u64, 61u64),
        (1, 97),
        (2, 151),
        (3, 211),
        (4, 307),
        (5, 401),
    ] {
        let Some(mut dev) = noisy_device(every, false, &flips) else {
            return;
        };
        let (a, b, out) = operands(i);
        let want = golden.matmul(&a, &b, &out).unwrap();
        let got = dev.matmul(&a, &b, &out);
        resent += dev.link_counters().retries;
        match got {
            Ok(got) => {
                assert_eq!(got, want, "product {i}: a wrong result was returned");
                exact += 1;
            }
            Err(e) => {
                // A flipped echo of a write that must not run twice, or a read corrupted on
                // every try: said so.
                let named = |m: &str| m.contains("instead of echoing") || m.contains("CRC");
                let cause = e.cause::<BridgeError>().map(|b| b.to_string());
                assert!(cause.as_deref().is_some_and(named), "{e:?}");
                failed += 1;
            }
        }
    }
    eprintln!("{exact} exact, {failed} stopped with an error, {resent} commands sent again");
    // The schedules are deterministic: none hits a COMMAND's echo.
    assert_eq!((exact, failed), (6, 0));
    assert!(resent > 0 && flips.load(Ordering::Relaxed) > 0);
}

/// One bit flipped in one of every `every` bytes the host sends, wherever it falls: opcodes,
/// addresses, words and CRCs of writes and reads, and the filler. Damaged writes are refused
/// by the bridge and sent again, damaged reads read again, a line out of step brought back in
/// step: every product is exact.
#[test]
fn flips_on_the_way_to_the_board_are_sent_again_and_results_stay_exact() {
    let flips = Arc::new(AtomicU64::new(0));
    let mut golden = GoldenDevice::new(ArrayConfig::square(4)).unwrap();
    for (i, every) in [(0u64, 53u64), (1, 89), (2, 131), (3, 199)] {
        let Some(mut dev) = noisy_both_ways(u64::MAX, false, every, &flips) else {
            return;
        };
        let (a, b, out) = operands(i);
        let want = golden.matmul(&a, &b, &out).unwrap();
        let got = dev.matmul(&a, &b, &out);
        let c = dev.link_counters();
        let got = got.unwrap_or_else(|e| panic!("product {i}: {}", crate::error_chain(&e)));
        assert_eq!(got, want, "product {i}: a wrong result was returned");
        eprintln!("product {i}, a flip every {every} bytes sent: {c:?}");
        assert!(c.retries > 0, "product {i}: {c:?}");
    }
    assert!(flips.load(Ordering::Relaxed) > 4);
}

/// What the line does to the host's `nth` `COMMAND` write (counted from 0 after the device
/// opened).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CommandFault {
    /// Its echo comes back damaged: the command ran.
    EchoDamaged,
    /// The write never reaches the board (no echo either): the command did not run.
    Lost,
}

/// A link to the bridge image that does `fault` to one `COMMAND` write and nothing else. It
/// passes the host's bytes on a whole command at a time, following the commands as [`Noisy`]
/// does, and counts the `COMMAND` writes that reach the board.
struct CommandLine {
    board: ImagePins,
    n: usize,
    fault: Option<(CommandFault, u64)>,
    partial: Vec<u8>,
    /// For each reply byte still to come: whether it is the echo to damage.
    coming: VecDeque<bool>,
    commands_seen: u64,
    reached: Arc<AtomicU64>,
}

impl Write for CommandLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.partial.extend_from_slice(buf);
        while let Some(&op) = self.partial.first() {
            let (request, reply) = Noisy::lengths_for(self.n, op);
            if self.partial.len() < request {
                break;
            }
            let bytes: Vec<u8> = self.partial.drain(..request).collect();
            let is_command = op == OP_WRITE_REG && bytes[1] == regmap::COMMAND;
            let fault = match self.fault {
                Some((f, nth)) if is_command && nth == self.commands_seen => Some(f),
                _ => None,
            };
            if is_command {
                self.commands_seen += 1;
            }
            if fault == Some(CommandFault::Lost) {
                continue;
            }
            if is_command {
                self.reached.fetch_add(1, Ordering::Relaxed);
            }
            let damage = fault == Some(CommandFault::EchoDamaged);
            self.coming.push_back(damage);
            self.coming.extend(std::iter::repeat_n(false, reply - 1));
            self.board.write_all(&bytes)?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.board.flush()
    }
}

impl Read for CommandLine {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.board.read(buf)?;
        for b in &mut buf[..k] {
            if self.coming.pop_front().unwrap_or(false) {
                *b ^= 0x10;
            }
        }
        Ok(k)
    }
}

/// A product on the bridge image with `fault` done to its `nth` `COMMAND`: the result, the
/// `COMMAND` writes that reached the board, and the device's stats.
fn product_with(
    fault: Option<(CommandFault, u64)>,
) -> Option<(Result<QMatrix, crate::DeviceError>, u64, crate::DeviceStats)> {
    let Ok(board) = ImagePins::bridge_image() else {
        eprintln!("SKIPPED: no board model in this build");
        return None;
    };
    let n = board.size();
    let reached = Arc::new(AtomicU64::new(0));
    let line = CommandLine {
        board,
        n,
        fault,
        partial: Vec::new(),
        coming: VecDeque::new(),
        commands_seen: 0,
        reached: reached.clone(),
    };
    let mut dev =
        BridgeDevice::over(Box::new(line), "command line", ArrayConfig::square(n)).ok()?;
    // A lost write is noticed when its echo's wait ends.
    dev.set_deadline(Duration::from_millis(300));
    let (a, b, out) = operands(7);
    let got = dev.matmul(&a, &b, &out);
    Some((got, reached.load(Ordering::Relaxed), dev.stats()))
}

/// A `COMMAND` whose echo comes back damaged ran: the bus reads the board's count, goes on
/// without sending it again, and the product is exact with every command run once. A
/// `COMMAND` lost on the way did not run: the count says so, it is sent again, and the
/// product is exact.
#[test]
fn an_unclear_command_echo_is_settled_by_asking_the_board() {
    let Some((clean, commands, clean_stats)) = product_with(None) else {
        return;
    };
    let want = clean.unwrap();
    let golden = GoldenDevice::new(ArrayConfig::square(4))
        .unwrap()
        .matmul(&operands(7).0, &operands(7).1, &operands(7).2)
        .unwrap();
    assert_eq!(want, golden);
    assert!(commands >= 2, "{commands}");
    for (fault, reached) in [
        (CommandFault::EchoDamaged, commands),
        (CommandFault::Lost, commands),
    ] {
        let (got, seen, st) = product_with(Some((fault, 1))).unwrap();
        let got = got.unwrap_or_else(|e| panic!("{fault:?}: {}", crate::error_chain(&e)));
        assert_eq!(got, want, "{fault:?}: a wrong result was returned");
        // Every command reached the board once: none ran twice, none was left out.
        assert_eq!(seen, reached, "{fault:?}");
        assert_eq!(st.mac_cycles, clean_stats.mac_cycles, "{fault:?}");
        assert!(
            st.resends > 0 || fault == CommandFault::EchoDamaged,
            "{fault:?}: {st:?}"
        );
    }
}
