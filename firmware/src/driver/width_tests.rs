//! The driver at `W`-bit words: products of words in the `W`-bit range on an array built at
//! `W` (the stand-in reads the low `W` bits of each lane and saturates at `W`, as the hardware
//! does) equal the contract at `W` bit for bit (outputs saturated at `W`, the golden model's
//! `matmul_at`), and a word outside the range is refused before anything reaches the bus.

extern crate std;

use super::tests::{reference_at, Rng};
use super::*;
use std::vec;
use std::vec::Vec;
use systole_core::numeric::{word_max, word_min};

/// `words` clamped to the `W`-bit range: the extremes of `W` (saturation, `-2^(W-1)`) stay
/// frequent.
fn at_w(words: Vec<i16>, w: u32) -> Vec<i16> {
    let (lo, hi) = (word_min(w), word_max(w));
    words
        .into_iter()
        .map(|x| i64::from(x).clamp(lo, hi) as i16)
        .collect()
}

#[test]
fn products_at_w_bits_match_the_contract_at_w() {
    let mut rng = Rng(0xC0FF_EE00_5EED_0008);
    for w in [8, 12] {
        let mut saturated = 0;
        for case in 0..30 {
            let size = [2, 4, 8][case % 3];
            let cfg = ArrayConfig::new(size, 4, 16).unwrap().with_word_bits(w);
            let (m, k, n) = (1 + rng.below(21), 1 + rng.below(40), 1 + rng.below(21));
            let (a, b) = (at_w(rng.words(m * k), w), at_w(rng.words(k * n), w));
            let job = MatmulJob {
                a: &a,
                b: &b,
                m,
                k,
                n,
                shift: rng.below(2 * w as usize) as u32,
                rounding: Rounding::ALL[case % 3],
                seed: rng.below(1 << 30) as u32,
            };
            let mut mock = mock::MockArray::new(cfg);
            let mut out = vec![0i16; m * n];
            matmul(&mut mock, &cfg, &job, &mut out).unwrap();
            let want = reference_at(&job, size, w);
            assert_eq!(out, want, "W {w}, case {case} ({m}x{k}x{n})");
            let limit = word_max(w) as i16;
            saturated += out.iter().filter(|&&x| x == limit || x == !limit).count();
        }
        assert!(saturated > 0, "W {w}: no output saturated at W bits");
    }
}

#[test]
fn a_word_outside_w_bits_is_refused_before_the_bus() {
    let cfg = ArrayConfig::new(4, 4, 16).unwrap().with_word_bits(8);
    for (a, b, which, index, value) in [
        (vec![1, 2, 128, 4], vec![0; 4], "a", 2, 128),
        (vec![0; 4], vec![-128, -129, 0, 0], "b", 1, -129),
    ] {
        let job = MatmulJob {
            a: &a,
            b: &b,
            m: 2,
            k: 2,
            n: 2,
            shift: 0,
            rounding: Rounding::NearestEven,
            seed: 1,
        };
        let mut mock = mock::MockArray::new(cfg);
        let mut out = [0i16; 4];
        let e = matmul(&mut mock, &cfg, &job, &mut out).unwrap_err();
        assert_eq!(
            e,
            DriverError::WordRange {
                which,
                index,
                value,
                word_bits: 8
            }
        );
        let text = std::format!("{e}");
        assert!(text.contains("outside the 8-bit range"), "{text}");
        assert_eq!(mock.cycles_run(), 0, "the bus was used");
    }
}
