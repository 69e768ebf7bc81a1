//! The step at word widths below 16 (`crate::width`), checked against plain `i64` / `f64`
//! arithmetic. At 16 bits the step is the one the other tests (and the trainer's) pin.

use crate::arith::{Arith, TensorState};
use crate::fixed::Fixed;
use crate::tests::Exact;
use crate::width::{frac_for_exact_at, frac_for_max_at, saturate_to, Widths};
use crate::StepError;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use systole_core::numeric::{convert, word_max, word_min};
use systole_core::tensor::QMatrix;
use systole_core::Rounding;

/// A small deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 16
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn fixed(word: u32, master: u32, rounding: Rounding) -> Fixed<Exact> {
    Fixed::with_widths(
        Exact::default(),
        rounding,
        1,
        Widths::new(word, master).unwrap(),
    )
}

/// The step's W-bit conversion (the 16-bit one, then saturated to W) is the contract's
/// `convert(.., W)` for every shift, rounding and random word.
#[test]
fn w_bit_conversion_is_the_16_bit_one_saturated() {
    let mut r = Lcg(7);
    for w in 8..=16 {
        for _ in 0..2000 {
            let acc = (r.next() as i64) >> (r.below(40) + 8);
            let acc = if r.below(2) == 0 { acc } else { -acc };
            let shift = r.below(33) as u32;
            let rounding = Rounding::ALL[r.below(3) as usize];
            let random = r.next() as u32;
            let word16 = convert(acc, shift, rounding, random, 16) as i16;
            let q = QMatrix::from_vec(1, 1, 0, vec![word16]).unwrap();
            let want = convert(acc, shift, rounding, random, w);
            assert_eq!(saturate_to(q, w).data[0] as i64, want, "W={w} acc={acc}");
        }
    }
}

/// The format rules at W: the largest frac whose words fit (one unit spare for host values).
#[test]
fn frac_rules_at_w_are_their_definitions() {
    assert_eq!(frac_for_max_at(0.9, 8), 7); // 0.9·128 = 115.2 <= 126
    assert_eq!(frac_for_max_at(1.0, 8), 6); // 128 > 126, 64 fits
    assert_eq!(frac_for_max_at(0.0, 12), 11);
    assert_eq!(frac_for_exact_at(1 << 20, 20, 8), 6); // 64 < 127, 128 is not
    assert_eq!(frac_for_exact_at(5, 3, 8), 3);
    let mut r = Lcg(3);
    for w in [8, 12] {
        for _ in 0..500 {
            let x = (r.next() % 1_000_000) as f64 / 1000.0;
            let f = frac_for_max_at(x, w);
            let fits = |f: u32| x * (1u64 << f) as f64 <= (word_max(w) - 1) as f64;
            assert!(f < w && (fits(f) || f == 0) && (f == w - 1 || !fits(f + 1)));
            let (m, fin) = (r.next() as i64 >> 20, r.below(30) as u32 + 10);
            let f = frac_for_exact_at(m, fin, w);
            let fits = |f: u32| (m >> (fin - f)) < word_max(w);
            assert!(f < w && (fits(f) || f == fin.saturating_sub(32)));
            assert!(
                f == (w - 1).min(fin) || !fits(f + 1),
                "W={w} {m} {fin} -> {f}"
            );
        }
    }
}

/// A product at W = 8 is the exact integer product converted at 8 bits; a saturated output is
/// run again with a bit less, and a small one grows into [2^5, 2^6) the next time.
#[test]
fn a_product_at_w8_is_the_integer_product_converted_at_8_bits() {
    let mut a = fixed(8, 8, Rounding::NearestEven);
    let mut r = Lcg(11);
    let words =
        |r: &mut Lcg, n| -> Vec<i16> { (0..n).map(|_| r.below(255) as i16 - 127).collect() };
    let x = QMatrix::from_vec(3, 5, 6, words(&mut r, 15)).unwrap();
    let y = QMatrix::from_vec(5, 4, 7, words(&mut r, 20)).unwrap();
    for _ in 0..3 {
        let z = a.matmul("mm", &x, &y).unwrap();
        let shift = x.frac + y.frac - z.frac;
        for i in 0..3 {
            for j in 0..4 {
                let acc: i64 = (0..5).map(|k| x.at(i, k) as i64 * y.at(k, j) as i64).sum();
                let want = convert(acc, shift, Rounding::NearestEven, 0, 8);
                assert_eq!(z.at(i, j) as i64, want);
            }
        }
        assert!(z.frac < 8 && z.data.iter().all(|&v| (-128..=127).contains(&v)));
    }
    // 1.0·1.0 at a remembered frac of 7 is 128: one past the top at 8 bits, so a retry at 6.
    let one = QMatrix::from_vec(1, 1, 6, vec![64]).unwrap();
    a.fracs.insert(String::from("sat"), 7);
    let z = a.matmul("sat", &one, &one).unwrap();
    assert_eq!((z.frac, z.data.clone()), (6, vec![64]));
    assert_eq!(a.saturation()["sat"].retries, 1);
    // 0.5 at a remembered frac of 2 is the word 2 (2 bits): the next run takes 6 - 2 = 4 more.
    a.fracs.insert(String::from("grow"), 2);
    let half = QMatrix::from_vec(1, 1, 7, vec![64]).unwrap();
    let z = a.matmul("grow", &half, &one).unwrap();
    assert_eq!((z.frac, z.data.clone()), (2, vec![2]));
    assert_eq!(a.fracs["grow"], 6);
}

/// The update at W = 12 on exactly representable values is the f64 update rounded to the
/// nearest 12-bit word at the largest frac that fits.
#[test]
fn sgd_at_w12_is_the_f64_update_rounded_to_12_bits() {
    let mut a = fixed(12, 12, Rounding::NearestEven);
    let mut r = Lcg(5);
    let vals = |r: &mut Lcg| -> Vec<f32> {
        (0..64)
            .map(|_| (r.below(2001) as f32 - 1000.0) / 1024.0)
            .collect()
    };
    let (w0, g0) = (vals(&mut r), vals(&mut r));
    let mut w = a.import("w", 1, 64, &w0).unwrap();
    let g = a.import("g", 1, 64, &g0).unwrap();
    let mut v = a.zeros(1, 64);
    let (w_in, g_in) = (w.to_f32(), g.to_f32());
    a.sgd("u", &mut w, &mut v, &g, 0.375, 0.5).unwrap();
    assert_eq!(v.to_f32(), g_in, "v = 0.5·0 + g is exact");
    let want: Vec<f64> = w_in
        .iter()
        .zip(&g_in)
        .map(|(&w, &g)| w as f64 - 0.375 * g as f64)
        .collect();
    let m = want.iter().fold(0f64, |m, x| m.max(x.abs()));
    assert_eq!(w.frac, frac_for_max_at(m, 12).max(w.frac));
    let unit = 1.0 / (1u64 << w.frac) as f64;
    for (got, want) in w.to_f32().iter().zip(&want) {
        assert!((*got as f64 - want).abs() <= unit / 2.0, "{got} vs {want}");
    }
    assert!(w
        .data
        .iter()
        .all(|&x| (x as i64) >= word_min(12) && (x as i64) <= word_max(12)));
}

/// Master weights wider than W are rounded to W bits before a product: the array gets 8-bit
/// words. At W = master nothing is narrowed (no extra seed is drawn).
#[test]
fn master_weights_reach_the_array_rounded_to_w() {
    let mut a = fixed(8, 16, Rounding::NearestEven);
    let x = QMatrix::from_vec(1, 2, 6, vec![64, -32]).unwrap();
    let w = QMatrix::from_vec(2, 1, 15, vec![12345, -20000]).unwrap();
    a.matmul("mm", &x, &w).unwrap();
    let (ax, aw) = &a.products().operands[0];
    assert_eq!(ax, &x, "an 8-bit operand is sent as it is");
    // max 20000 at 15 bits fits 8 bits at frac 7 (20000 >> 8 = 78 < 127): 48.2 -> 48,
    // -78.1 -> -78.
    assert_eq!((aw.frac, aw.data.clone()), (7, vec![48, -78]));
    let mut b = fixed(8, 8, Rounding::NearestEven);
    let w8 = QMatrix::from_vec(2, 1, 7, vec![48, -78]).unwrap();
    b.matmul("mm", &x, &w8).unwrap();
    assert_eq!(b.products().operands[0].1, w8);
    // The narrowing drew the first seed of the step; without it the product has it.
    let first = crate::seeds::op_seed(1, 0, 0);
    assert_eq!(b.products().specs[0].seed, first);
    assert_ne!(a.products().specs[0].seed, first);
}

/// Widths outside the contract and checkpoint tensors wider than the run's are clear errors.
#[test]
fn bad_widths_and_wide_checkpoint_tensors_are_refused() {
    for (word, master) in [(7, 7), (17, 17), (12, 8), (8, 17)] {
        let e = Widths::new(word, master).unwrap_err();
        assert!(
            matches!(e, StepError::WordBits(_) | StepError::MasterBits { .. }),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains("--word-bits") || text.contains("--master-bits"),
            "{text}"
        );
    }
    let a = fixed(8, 8, Rounding::NearestEven);
    let t = |frac, data: Vec<i16>| TensorState::Fixed {
        rows: 1,
        cols: data.len(),
        frac,
        data,
    };
    assert!(a.load(&t(7, vec![127, -128])).is_ok());
    for bad in [t(8, vec![1]), t(7, vec![128]), t(7, vec![-129])] {
        let e = a.load(&bad).unwrap_err().to_string();
        assert!(e.contains("--word-bits"), "{e}");
    }
    assert_eq!(a.describe(), "fixed8 nearest on exact".to_string());
}
