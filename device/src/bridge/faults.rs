//! The bridge backend against the Verilated bridge image over a link that flips bits in the
//! board's replies: results stay bit-identical to the golden model (reads are retried on a
//! CRC mismatch) or the operation fails, never a wrong result.

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
/// read replies (`R`, `C`), or any reply byte (write echoes too). It follows the host's
/// commands to know which reply byte belongs to which command.
struct Noisy {
    board: ImagePins,
    n: usize,
    every: u64,
    only_reads: bool,
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
        let row = 1usize << (usize::BITS - 1 - self.n.leading_zeros());
        match op {
            OP_WRITE_REG => (6, 1),
            OP_READ_REG => (2, 6),
            OP_WRITE_A | OP_WRITE_B => (4 + 2 * self.n, 1),
            OP_READ_C => (4, 2 * self.n + 2),
            OP_WRITE_FM => (3 + 2 * row, 1),
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
        self.board.write(buf)
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
        partial: Vec::new(),
        coming: VecDeque::new(),
        picked: 0,
        flips: flips.clone(),
    };
    Some(BridgeDevice::over(Box::new(link), "noisy link", ArrayConfig::square(n)).unwrap())
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

#[test]
fn flips_anywhere_in_replies_give_exact_results_or_an_error() {
    let (mut exact, mut failed) = (0, 0);
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
        match dev.matmul(&a, &b, &out) {
            Ok(got) => {
                assert_eq!(got, want, "product {i}: a wrong result was returned");
                exact += 1;
            }
            Err(e) => {
                // A flipped echo, or a read corrupted on every try: said so.
                let named = |m: &str| m.contains("instead of echoing") || m.contains("CRC");
                let cause = e.cause::<BridgeError>().map(|b| b.to_string());
                assert!(cause.as_deref().is_some_and(named), "{e:?}");
                failed += 1;
            }
        }
    }
    eprintln!("{exact} exact, {failed} stopped with an error");
    // The schedules are deterministic: both outcomes occur.
    assert!(exact > 0 && failed > 0 && flips.load(Ordering::Relaxed) > 0);
}
