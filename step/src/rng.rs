//! Deterministic random numbers for the trainer, the data split and the board's own epoch
//! order (one implementation: the host trainer and the firmware draw the same shuffle).
//!
//! Every random choice (weight init, shuffling, split, stochastic-rounding seeds) is derived
//! from the run seed by the functions here, so a run is a pure function of its configuration
//! and can be resumed bit for bit.

use alloc::vec::Vec;

/// SplitMix64: small, fast, and good enough for shuffling and initialisation.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in `[0, 1)` with 24 random bits (exact in `f32`).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `0..n` (`n > 0`); the tiny modulo bias does not matter for shuffling.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

pub use crate::seeds::mix64;

/// A generator for one purpose (`stream`) of a run, e.g. the shuffle of epoch 3.
pub fn stream(run_seed: u64, stream: u64) -> SplitMix64 {
    SplitMix64::new(mix64(
        run_seed ^ mix64(stream.wrapping_add(0x243F_6A88_85A3_08D3)),
    ))
}

/// The training images `0..n` in the order epoch `epochs_done + 1` of a run with `run_seed`
/// trains them: the trainer's and the board's epoch order.
pub fn epoch_order(run_seed: u64, epochs_done: u64, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    stream(run_seed, epochs_done + 1).shuffle(&mut order);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn shuffle_is_a_permutation_and_seeded() {
        let mut a: Vec<usize> = (0..100).collect();
        let mut b = a.clone();
        stream(7, 1).shuffle(&mut a);
        stream(7, 1).shuffle(&mut b);
        assert_eq!(a, b);
        let mut c = a.clone();
        stream(8, 1).shuffle(&mut c);
        assert_ne!(a, c);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_ne!(a, sorted);
    }

    #[test]
    fn floats_are_in_unit_interval() {
        let mut r = SplitMix64::new(3);
        let v: Vec<f32> = (0..1000).map(|_| r.next_f32()).collect();
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = v.iter().sum::<f32>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    }
}
