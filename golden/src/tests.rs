//! The golden model checked against plain `i64`/`f64` arithmetic and hand-worked cases.

use super::conv::{Conv2dGeom, ConvGeom};
use super::*;
use crate::tensor::QMatrix;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use systole_core::numeric::{lane_seed, tile_seed, Lfsr32, MAX_K};
use systole_core::Rounding;

fn spec(frac: u32, rounding: Rounding, seed: u32) -> OutputSpec {
    OutputSpec {
        frac,
        rounding,
        seed,
    }
}

/// Reference conversion written from the contract's words with `f64`, independent of
/// `systole_core::numeric::round_shift`: values are below 2^49, so `f64` is exact here.
fn reference_convert(acc: i64, shift: u32, rounding: Rounding, u: u32) -> i16 {
    let scale = (1u64 << shift) as f64;
    let v = match rounding {
        Rounding::Truncate => (acc as f64 / scale).floor(),
        Rounding::NearestEven => (acc as f64 / scale).round_ties_even(),
        Rounding::Stochastic => {
            ((acc as f64 + (u as u64 % (1u64 << shift)) as f64) / scale).floor()
        }
    };
    v.clamp(-32768.0, 32767.0) as i16
}

/// Naive triple loop and per-element LFSR walk, in a different order from `convert_tiled`.
fn reference_matmul(a: &QMatrix, b: &QMatrix, out: &OutputSpec, tile: usize) -> Vec<i16> {
    let shift = a.frac + b.frac - out.frac;
    let mut c = vec![0i16; a.rows * b.cols];
    for i in 0..a.rows {
        for j in 0..b.cols {
            let acc: i64 = (0..a.cols)
                .map(|k| a.at(i, k) as i64 * b.at(k, j) as i64)
                .sum();
            let (i0, j0) = (i / tile * tile, j / tile * tile);
            let mut l = Lfsr32::new(lane_seed(
                tile_seed(out.seed, i0 as u32, j0 as u32),
                (j - j0) as u32,
            ));
            let mut u = 0;
            for _ in 0..=(i - i0) {
                u = l.step();
            }
            c[i * b.cols + j] = reference_convert(acc, shift, out.rounding, u);
        }
    }
    c
}

fn qmatrix(rows: usize, cols: usize, frac: u32) -> impl Strategy<Value = QMatrix> {
    // Mix ordinary values with the extremes so saturation and -32768 are exercised.
    let word =
        prop_oneof![8 => any::<i16>(), 1 => Just(i16::MIN), 1 => Just(i16::MAX), 2 => -64i16..64];
    proptest::collection::vec(word, rows * cols)
        .prop_map(move |d| QMatrix::from_vec(rows, cols, frac, d).unwrap())
}

fn rounding() -> impl Strategy<Value = Rounding> {
    prop_oneof![
        Just(Rounding::Truncate),
        Just(Rounding::NearestEven),
        Just(Rounding::Stochastic)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matmul_matches_naive_reference(
        (m, k, n) in (1usize..20, 1usize..40, 1usize..20),
        fa in 0u32..16, fb in 0u32..16, fo_back in 0u32..30, r in rounding(), seed: u32, tile in 1usize..9,
        salt: u64,
    ) {
        let fo = (fa + fb).saturating_sub(fo_back).min(15);
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(Default::default(), proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[salt as u8; 32]));
        let a = qmatrix(m, k, fa).new_tree(&mut runner).unwrap().current();
        let b = qmatrix(k, n, fb).new_tree(&mut runner).unwrap().current();
        let s = spec(fo, r, seed);
        let c = matmul(&a, &b, &s, tile).unwrap();
        prop_assert_eq!(c.data, reference_matmul(&a, &b, &s, tile));
        prop_assert_eq!(c.frac, fo);
    }

    #[test]
    fn transposed_forms_match(a in qmatrix(5, 7, 6), b in qmatrix(3, 7, 9), r in rounding(), seed: u32) {
        let s = spec(10, r, seed);
        prop_assert_eq!(matmul_nt(&a, &b, &s, 4).unwrap(), matmul(&a, &b.transpose(), &s, 4).unwrap());
        let c = qmatrix(5, 3, 2).new_tree(&mut proptest::test_runner::TestRunner::deterministic()).unwrap().current();
        prop_assert_eq!(matmul_tn(&a, &c, &spec(4, r, seed), 4).unwrap().data, reference_matmul(&a.transpose(), &c, &spec(4, r, seed), 4));
    }

    #[test]
    fn exact_accumulators_equal_i64(a in qmatrix(9, 33, 0), b in qmatrix(33, 6, 0)) {
        let acc = matmul_acc(&a, &b).unwrap();
        for i in 0..9 { for j in 0..6 {
            let want: i64 = (0..33).map(|k| a.at(i, k) as i64 * b.at(k, j) as i64).sum();
            prop_assert_eq!(acc[i * 6 + j], want);
        }}
    }
}

#[test]
fn hand_worked_small_product() {
    // A = [1.5, -2.5] (frac 1), B = [1.0, 0.5]^T (frac 1): 1.5 - 1.25 = 0.25 = acc 1 at frac 2.
    let a = QMatrix::from_vec(1, 2, 1, vec![3, -5]).unwrap();
    let b = QMatrix::from_vec(2, 1, 1, vec![2, 1]).unwrap();
    assert_eq!(
        matmul(&a, &b, &spec(2, Rounding::Truncate, 0), 8)
            .unwrap()
            .data,
        vec![1]
    );
    // To frac 1 the exact value is 0.5 units: truncate -> 0, nearest-even tie -> 0.
    assert_eq!(
        matmul(&a, &b, &spec(1, Rounding::Truncate, 0), 8)
            .unwrap()
            .data,
        vec![0]
    );
    assert_eq!(
        matmul(&a, &b, &spec(1, Rounding::NearestEven, 0), 8)
            .unwrap()
            .data,
        vec![0]
    );
    // 1.5 units (acc 3 at frac 2 -> frac 1) rounds to the even 2 units.
    let b2 = QMatrix::from_vec(2, 1, 1, vec![2, 0]).unwrap();
    assert_eq!(
        matmul(&a, &b2, &spec(1, Rounding::NearestEven, 0), 8)
            .unwrap()
            .data,
        vec![3]
    );
    let a3 = QMatrix::from_vec(1, 2, 1, vec![3, 0]).unwrap();
    let b3 = QMatrix::from_vec(2, 1, 1, vec![1, 0]).unwrap();
    assert_eq!(
        matmul(&a3, &b3, &spec(1, Rounding::NearestEven, 0), 8)
            .unwrap()
            .data,
        vec![2]
    );
}

#[test]
fn most_negative_and_saturation_both_ways() {
    // (-1.0) * (-1.0) in Q15 is +1.0, one past the largest Q15 word: saturates to 32767.
    let a = QMatrix::from_vec(1, 1, 15, vec![i16::MIN]).unwrap();
    assert_eq!(
        matmul(&a, &a, &spec(15, Rounding::NearestEven, 0), 4)
            .unwrap()
            .data,
        vec![i16::MAX]
    );
    let big = QMatrix::from_vec(1, 2, 0, vec![i16::MIN, i16::MIN]).unwrap();
    let pos = QMatrix::from_vec(2, 1, 0, vec![i16::MAX, i16::MAX]).unwrap();
    assert_eq!(
        matmul(&big, &pos, &spec(0, Rounding::Truncate, 0), 4)
            .unwrap()
            .data,
        vec![i16::MIN]
    );
    let neg = QMatrix::from_vec(2, 1, 0, vec![i16::MIN, i16::MIN]).unwrap();
    assert_eq!(
        matmul(&big, &neg, &spec(0, Rounding::Stochastic, 9), 4)
            .unwrap()
            .data,
        vec![i16::MAX]
    );
}

#[test]
fn bad_shapes_shifts_and_lengths_are_errors() {
    let a = QMatrix::zeros(2, 3, 8);
    let b = QMatrix::zeros(4, 2, 8);
    assert!(matches!(
        matmul(&a, &b, &spec(8, Rounding::Truncate, 0), 4),
        Err(NumericError::Shape(_))
    ));
    let b = QMatrix::zeros(3, 2, 2);
    let e = matmul(&a, &b, &spec(12, Rounding::Truncate, 0), 4).unwrap_err();
    assert!(matches!(e, NumericError::Shift { shift: -2, .. }), "{e}");
    let long_a = QMatrix::zeros(1, MAX_K + 1, 0);
    let long_b = QMatrix::zeros(MAX_K + 1, 1, 0);
    let e = matmul_acc(&long_a, &long_b).unwrap_err();
    assert_eq!(e, NumericError::KTooLong(MAX_K + 1));
    assert!(e.to_string().contains(&format!("limit of {MAX_K}")), "{e}");
    assert!(QMatrix::from_vec(2, 2, 3, vec![0; 3]).is_err());
}

#[test]
fn stochastic_rounding_is_unbiased() {
    // Every output is exactly 3/16 of a unit: nearest and truncate give 0 (biased by -0.1875),
    // stochastic rounding gives 1 with probability 3/16.
    let (m, n) = (64, 64);
    let a = QMatrix::from_vec(m, 1, 2, vec![3; m]).unwrap();
    let b = QMatrix::from_vec(1, n, 2, vec![1; n]).unwrap();
    for r in [Rounding::Truncate, Rounding::NearestEven] {
        assert!(matmul(&a, &b, &spec(0, r, 1), 8)
            .unwrap()
            .data
            .iter()
            .all(|&v| v == 0));
    }
    let mut sum = 0i64;
    for seed in 0..4 {
        sum += matmul(&a, &b, &spec(0, Rounding::Stochastic, seed), 8)
            .unwrap()
            .data
            .iter()
            .map(|&v| v as i64)
            .sum::<i64>();
    }
    let mean = sum as f64 / (4 * m * n) as f64;
    // Standard error is sqrt(p(1-p)/16384) = 0.003; allow 5 of them.
    assert!((mean - 0.1875).abs() < 0.015, "mean {mean}");
}

/// Direct-definition convolutions with `i64` sums.
fn direct_conv(
    x: &QMatrix,
    w: &QMatrix,
    dy: &QMatrix,
    g: &Conv2dGeom,
) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
    let xi = |b: usize, c: usize, y: i64, xx: i64| -> i64 {
        if y < 0 || xx < 0 || y >= g.in_h as i64 || xx >= g.in_w as i64 {
            0
        } else {
            x.data[b * x.cols + (c * g.in_h + y as usize) * g.in_w + xx as usize] as i64
        }
    };
    let wi = |co: usize, ci: usize, ky: usize, kx: usize| {
        w.data[co * w.cols + (ci * k + ky) * k + kx] as i64
    };
    let dyi = |b: usize, co: usize, oy: usize, ox: usize| {
        dy.data[b * dy.cols + (co * oh + oy) * ow + ox] as i64
    };
    let pos = |o: usize, kk: usize| (o * g.stride + kk) as i64 - g.pad as i64;
    let mut y = vec![0i64; g.batch * g.out_ch * oh * ow];
    let mut dx = vec![0i64; g.batch * g.in_ch * g.in_h * g.in_w];
    let mut dw = vec![0i64; g.out_ch * g.in_ch * k * k];
    for b in 0..g.batch {
        for co in 0..g.out_ch {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ci in 0..g.in_ch {
                        for ky in 0..k {
                            for kx in 0..k {
                                let (py, px) = (pos(oy, ky), pos(ox, kx));
                                y[((b * g.out_ch + co) * oh + oy) * ow + ox] +=
                                    xi(b, ci, py, px) * wi(co, ci, ky, kx);
                                dw[((co * g.in_ch + ci) * k + ky) * k + kx] +=
                                    dyi(b, co, oy, ox) * xi(b, ci, py, px);
                                if py >= 0 && px >= 0 && py < g.in_h as i64 && px < g.in_w as i64 {
                                    dx[((b * g.in_ch + ci) * g.in_h + py as usize) * g.in_w
                                        + px as usize] += dyi(b, co, oy, ox) * wi(co, ci, ky, kx);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (y, dx, dw)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn conv_ops_match_direct_definition(
        batch in 1usize..3, in_ch in 1usize..4, out_ch in 1usize..4, hw in 3usize..8,
        kernel in prop_oneof![Just(1usize), Just(3), Just(5)], stride in 1usize..3, pad in 0usize..3,
        r in prop_oneof![Just(Rounding::Truncate), Just(Rounding::NearestEven)], seed: u64,
    ) {
        prop_assume!(kernel <= hw + 2 * pad);
        let g = Conv2dGeom { batch, shape: ConvGeom { in_ch, in_h: hw, in_w: hw + 1, out_ch, kernel, stride, pad } };
        let mut run = proptest::test_runner::TestRunner::new_with_rng(Default::default(), proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &[seed as u8; 32]));
        let x = qmatrix(batch, in_ch * g.in_h * g.in_w, 7).new_tree(&mut run).unwrap().current();
        let w = qmatrix(out_ch, in_ch * kernel * kernel, 9).new_tree(&mut run).unwrap().current();
        let dy = qmatrix(batch, out_ch * g.out_h() * g.out_w(), 5).new_tree(&mut run).unwrap().current();
        let (y, dx, dw) = direct_conv(&x, &w, &dy, &g);
        let convert_all = |v: &[i64], shift: u32| v.iter().map(|&a| reference_convert(a, shift, r, 0)).collect::<Vec<_>>();
        prop_assert_eq!(conv2d_forward(&x, &w, &g, &spec(8, r, 0), 4).unwrap().data, convert_all(&y, 8));
        prop_assert_eq!(conv2d_backward_input(&dy, &w, &g, &spec(6, r, 0), 4).unwrap().data, convert_all(&dx, 8));
        prop_assert_eq!(conv2d_backward_weights(&x, &dy, &g, &spec(4, r, 0), 4).unwrap().data, convert_all(&dw, 8));
    }
}

#[test]
fn conv_shape_errors_are_clear() {
    let g = Conv2dGeom {
        batch: 1,
        shape: ConvGeom {
            in_ch: 1,
            in_h: 4,
            in_w: 4,
            out_ch: 2,
            kernel: 3,
            stride: 1,
            pad: 0,
        },
    };
    let x = QMatrix::zeros(1, 15, 8);
    let w = QMatrix::zeros(2, 9, 8);
    let e = conv2d_forward(&x, &w, &g, &spec(8, Rounding::Truncate, 0), 4).unwrap_err();
    assert!(e.to_string().contains("input is 1x15"), "{e}");
    let g2 = Conv2dGeom {
        shape: ConvGeom {
            kernel: 7,
            ..g.shape
        },
        ..g
    };
    assert!(g2.validate().is_err());
    let e = Conv2dGeom {
        shape: ConvGeom {
            out_ch: 0,
            ..g.shape
        },
        ..g
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "shape mismatch: convolution dimensions must all be positive: batch 1, 1x4x4 input, \
         0 output channels, 3x3 kernel, stride 1, pad 0"
    );
}

#[test]
fn bias_add_and_relu_hand_worked() {
    // y = [1.0, -0.5] at frac 2 (words 4, -2), bias = [0.25] at frac 3 (word 2), repeated twice.
    let y = QMatrix::from_vec(1, 2, 2, vec![4, -2]).unwrap();
    let b = QMatrix::from_vec(1, 1, 3, vec![2]).unwrap();
    let s = bias_add(&y, &b, 2, &spec(3, Rounding::Truncate, 0)).unwrap();
    assert_eq!(s.data, vec![10, -2]); // 1.25 and -0.25 at frac 3
    let s = bias_add(&y, &b, 2, &spec(1, Rounding::NearestEven, 0)).unwrap();
    assert_eq!(s.data, vec![2, 0]); // 1.25 -> 1.0 (2.5 units -> 2), -0.25 -> -0.0 (-0.5 units -> 0)
    assert!(bias_add(&y, &b, 1, &spec(3, Rounding::Truncate, 0)).is_err());
    assert_eq!(relu(&y).data, vec![4, 0]);
    let dy = QMatrix::from_vec(1, 2, 5, vec![7, 9]).unwrap();
    assert_eq!(relu_backward(&dy, &y).unwrap().data, vec![7, 0]);
}
