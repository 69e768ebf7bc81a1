//! The golden model at word widths below 16 (`matmul_at`): against plain `i64` sums converted
//! by the contract's words in `f64`, a hand-worked case, and the refusals.

use super::*;
use crate::tensor::QMatrix;
use proptest::prelude::*;
use systole_core::numeric::{lane_seed, tile_seed, word_max, word_min, Lfsr32};
use systole_core::Rounding;

fn spec(frac: u32, rounding: Rounding, seed: u32) -> OutputSpec {
    OutputSpec {
        frac,
        rounding,
        seed,
    }
}

/// The contract's conversion written with `f64` (exact below 2^49) and saturated to `W` bits.
fn reference_convert(acc: i64, shift: u32, rounding: Rounding, u: u32, word_bits: u32) -> i16 {
    let scale = (1u64 << shift) as f64;
    let v = match rounding {
        Rounding::Truncate => (acc as f64 / scale).floor(),
        Rounding::NearestEven => (acc as f64 / scale).round_ties_even(),
        Rounding::Stochastic => {
            ((acc as f64 + (u as u64 % (1u64 << shift)) as f64) / scale).floor()
        }
    };
    v.clamp(word_min(word_bits) as f64, word_max(word_bits) as f64) as i16
}

/// Naive triple loop in `i64` and a per-element LFSR walk.
fn reference_matmul(a: &QMatrix, b: &QMatrix, out: &OutputSpec, tile: usize, w: u32) -> Vec<i16> {
    let shift = a.frac + b.frac - out.frac;
    let mut c = vec![0i16; a.rows * b.cols];
    for i in 0..a.rows {
        for j in 0..b.cols {
            let acc: i64 = (0..a.cols)
                .map(|k| a.at(i, k) as i64 * b.at(k, j) as i64)
                .sum();
            let (i0, j0) = (i / tile * tile, j / tile * tile);
            let t = tile_seed(out.seed, i0 as u32, j0 as u32);
            let mut l = Lfsr32::new(lane_seed(t, (j - j0) as u32));
            let u = (0..=(i - i0)).map(|_| l.step()).last().unwrap_or(0);
            c[i * b.cols + j] = reference_convert(acc, shift, out.rounding, u, w);
        }
    }
    c
}

/// `W`-bit words, the extremes often.
fn words(w: u32, len: usize) -> impl Strategy<Value = Vec<i16>> {
    let (lo, hi) = (word_min(w) as i16, word_max(w) as i16);
    proptest::collection::vec(
        prop_oneof![6 => lo..=hi, 2 => Just(lo), 1 => Just(hi), 2 => -4i16..4],
        len,
    )
}

fn rounding() -> impl Strategy<Value = Rounding> {
    prop_oneof![
        Just(Rounding::Truncate),
        Just(Rounding::NearestEven),
        Just(Rounding::Stochastic)
    ]
}

fn case(w: u32) -> impl Strategy<Value = (QMatrix, QMatrix, OutputSpec, usize)> {
    (1usize..12, 1usize..30, 1usize..12, 0..w, 0..w, 0u32..2 * w).prop_flat_map(
        move |(m, k, n, fa, fb, back)| {
            let fo = (fa + fb).saturating_sub(back).min(w - 1);
            (
                words(w, m * k),
                words(w, k * n),
                rounding(),
                any::<u32>(),
                1usize..9,
            )
                .prop_map(move |(a, b, r, seed, tile)| {
                    let a = QMatrix::from_vec(m, k, fa, a).unwrap();
                    let b = QMatrix::from_vec(k, n, fb, b).unwrap();
                    (a, b, spec(fo, r, seed), tile)
                })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn matmul_at_8_bits_matches_i64((a, b, s, tile) in case(8)) {
        let c = matmul_at(&a, &b, &s, tile, 8).unwrap();
        prop_assert_eq!(c.data, reference_matmul(&a, &b, &s, tile, 8));
    }

    #[test]
    fn matmul_at_12_bits_matches_i64((a, b, s, tile) in case(12)) {
        let c = matmul_at(&a, &b, &s, tile, 12).unwrap();
        prop_assert_eq!(c.data, reference_matmul(&a, &b, &s, tile, 12));
    }
}

/// Worked by hand. (1) 8-bit extremes: (-128)(-128) + (-128)(-128) = 2^15 at 14 fractional
/// bits, i.e. 2.0; at 7 output bits that is 256, past 127: saturates (16 bits keep 256).
/// (2) 100·100 + 100·27 = 12,700 at shift 0: 127 at W = 8, 2047 at W = 12, exact at 16.
/// (3) 5 at 1 fractional bit is 2.5; to 0 bits: nearest-even 2, truncate 2, and at W = 12
/// -5 gives -2.5: nearest-even -2, truncate -3.
#[test]
fn hand_worked_cases_at_8_and_12_bits() {
    let q = |r, c, f, d: Vec<i16>| QMatrix::from_vec(r, c, f, d).unwrap();
    let a = q(1, 2, 7, vec![-128, -128]);
    let b = q(2, 1, 7, vec![-128, -128]);
    let s = spec(7, Rounding::NearestEven, 0);
    assert_eq!(matmul_at(&a, &b, &s, 4, 8).unwrap().data, [127]);
    assert_eq!(matmul_at(&a, &b, &s, 4, 16).unwrap().data, [256]);
    let a = q(1, 2, 0, vec![100, 100]);
    let b = q(2, 1, 0, vec![100, 27]);
    let s = spec(0, Rounding::Truncate, 0);
    assert_eq!(matmul_at(&a, &b, &s, 4, 8).unwrap().data, [127]);
    assert_eq!(matmul_at(&a, &b, &s, 4, 12).unwrap().data, [2047]);
    assert_eq!(matmul_at(&a, &b, &s, 4, 16).unwrap().data, [12_700]);
    let a = q(2, 1, 1, vec![5, -5]);
    let b = q(1, 1, 0, vec![1]);
    for (r, want) in [
        (Rounding::NearestEven, [2, -2]),
        (Rounding::Truncate, [2, -3]),
    ] {
        assert_eq!(matmul_at(&a, &b, &spec(0, r, 0), 4, 12).unwrap().data, want);
    }
    // At W = 16 matmul_at is matmul.
    let s = spec(0, Rounding::NearestEven, 9);
    assert_eq!(matmul_at(&a, &b, &s, 4, 16), matmul(&a, &b, &s, 4));
}

/// A width outside 8..=16, a frac not below W and a word outside the W-bit range are refused,
/// each naming the value and the fix.
#[test]
fn bad_widths_and_words_are_named() {
    let a = QMatrix::from_vec(1, 2, 3, vec![127, -128]).unwrap();
    let b = QMatrix::from_vec(2, 1, 3, vec![1, 128]).unwrap();
    let s = spec(3, Rounding::Truncate, 0);
    for w in [0, 7, 17] {
        let e = matmul_at(&a, &a.transpose(), &s, 4, w).unwrap_err();
        assert_eq!(e, NumericError::WordBits(w));
        assert!(e.to_string().contains("choose 8 to 16 bits"), "{e}");
    }
    let e = matmul_at(&a, &b, &s, 4, 8).unwrap_err();
    assert_eq!(
        e.to_string(),
        "operand b holds the word 128, outside the 8-bit range -128..=127: quantise it to W bits first"
    );
    let e = matmul_at(&a, &a.transpose(), &spec(8, Rounding::Truncate, 0), 4, 8).unwrap_err();
    assert_eq!(
        e.to_string(),
        "8 fractional bits do not fit a 8-bit word: choose 0 to 7"
    );
    let wide = QMatrix::from_vec(1, 1, 9, vec![1]).unwrap();
    let e = matmul_at(&wide, &wide, &s, 4, 8).unwrap_err();
    assert_eq!(
        e,
        NumericError::FracBitsAt {
            frac: 9,
            word_bits: 8
        }
    );
    assert!(matmul_at(&a, &b, &s, 4, 9).is_ok());
}
