//! Shared by the conformance tests: a deterministic operand generator.
#![allow(dead_code)]

use systole::QMatrix;

/// xorshift64: deterministic operands without an external generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// Words of one flavour: small, full-range, or extreme (saturation and -32768).
    pub fn matrix(&mut self, rows: usize, cols: usize, frac: u32) -> QMatrix {
        let flavour = self.below(3);
        let data = (0..rows * cols)
            .map(|_| match (flavour, self.below(4)) {
                (0, _) => self.below(64) as i16 - 32,
                (1, _) => self.next() as i16,
                (_, 0) => i16::MIN,
                (_, 1) => i16::MAX,
                _ => self.next() as i16,
            })
            .collect();
        QMatrix::from_vec(rows, cols, frac, data).unwrap()
    }
}
