//! The conformance body every `Device` backend runs (`device_conformance.rs`, and a new
//! backend's own test: docs/EXTENDING.md): random shapes (edges that are not multiples of the
//! array size, K longer than a buffer bank), all three rounding modes, saturating values and
//! the most negative word, each result compared bit for bit with the golden model.

use super::Rng;
use systole_core::numeric::max_frac;
use systole_core::Rounding;
use systole_device::{Device, DeviceError};
use systole_golden::{self as golden, OutputSpec};

/// Shape limits of one conformance run.
pub struct Plan {
    pub cases: usize,
    pub max_mn: usize,
    /// Longest K drawn (K past the 512-row buffer runs as several commands).
    pub max_k: usize,
    pub seed: u64,
}

/// The test body every backend runs, at the device's word width `W` (operands, formats and
/// the golden model's `matmul_at` at `W`).
/// Returns the words of each product run (operands and result), for the SoC's check of which
/// fit its tensor store.
pub fn conformance(dev: &mut dyn Device, plan: &Plan) -> Vec<usize> {
    let mut words = Vec::new();
    let size = dev.config().size;
    let w = dev.config().word_bits;
    let mut rng = Rng(plan.seed);
    dev.reset_stats();
    let mut macs = 0u64;
    for case in 0..plan.cases {
        // Every third case is long enough to need several K chunks.
        let k = if case % 3 == 2 {
            rng.range(513, plan.max_k.max(513))
        } else {
            rng.range(1, 64)
        };
        let (m, n) = (rng.range(1, plan.max_mn), rng.range(1, plan.max_mn));
        let (fa, fb) = (rng.below(w as usize) as u32, rng.below(w as usize) as u32);
        let frac_in = fa + fb;
        let frac = rng.range(
            frac_in.saturating_sub(32) as usize,
            frac_in.min(max_frac(w)) as usize,
        ) as u32;
        let spec = OutputSpec {
            frac,
            rounding: Rounding::ALL[case % 3],
            seed: rng.next() as u32,
        };
        let a = rng.matrix_at(m, k, fa, w);
        let b = rng.matrix_at(k, n, fb, w);
        let want = golden::matmul_at(&a, &b, &spec, size, w).unwrap();
        let got = dev.matmul(&a, &b, &spec).unwrap_or_else(|e| {
            panic!(
                "{}: case {case} ({m}x{k}x{n}): {}",
                dev.name(),
                super::chain(&e)
            )
        });
        if let Some(i) = (0..want.data.len()).find(|&i| want.data[i] != got.data[i]) {
            panic!(
                "{}: case {case} ({m}x{k}x{n}, {:?}, shift {}): C[{}][{}] is {} but the golden model says {}",
                dev.name(),
                spec.rounding,
                frac_in - frac,
                i / n,
                i % n,
                got.data[i],
                want.data[i]
            );
        }
        assert_eq!((got.rows, got.cols, got.frac), (m, n, frac));
        macs += (m * k * n) as u64;
        words.push(m * k + k * n + m * n);
    }
    // The transposed forms go through the same path.
    let a = rng.matrix_at(size + 3, 9, 6, w);
    let b = rng.matrix_at(size + 1, 9, 5, w);
    let spec = OutputSpec {
        frac: 4,
        rounding: Rounding::Stochastic,
        seed: 77,
    };
    let nt = dev.matmul_nt(&a, &b, &spec).unwrap();
    words.push(a.data.len() + b.data.len() + nt.data.len());
    assert_eq!(
        nt,
        golden::matmul_at(&a, &b.transpose(), &spec, size, w).unwrap(),
        "{}: A·Bᵀ",
        dev.name()
    );
    let st = dev.stats();
    assert_eq!(st.ops, plan.cases as u64 + 1);
    assert_eq!(st.macs, macs + ((size + 3) * 9 * (size + 1)) as u64);
    // A shape mismatch is an error, not a panic.
    let bad = dev.matmul(&a, &a, &spec);
    assert!(
        matches!(bad, Err(DeviceError::Numeric(_))),
        "{}: {bad:?}",
        dev.name()
    );
    words
}

/// A quick run: 12 cases up to 21 x 700 x 21.
pub const QUICK: Plan = Plan {
    cases: 12,
    max_mn: 21,
    max_k: 700,
    seed: 0x5EED_0001,
};
