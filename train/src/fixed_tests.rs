//! Tests of the fixed-point step (`systole_step::fixed`) as the trainer runs it: on a
//! `Device`, checked against the golden model.
use super::*;
use crate::arith::Arith;
use systole_core::{ArrayConfig, Rounding};
use systole_device::golden::GoldenDevice;
use systole_golden::{convert_sequential, ConvGeom};

fn arith(rounding: Rounding) -> FixedArith {
    on_device(
        Box::new(GoldenDevice::new(ArrayConfig::square(4)).unwrap()),
        rounding,
        1,
        true,
    )
}

#[test]
fn offloaded_frac_adapts_and_never_saturates() {
    let mut a = arith(Rounding::NearestEven);
    let x = a
        .import("x", 2, 3, &[1.0, 1.0, 1.0, 0.5, -0.25, 1.0])
        .unwrap();
    let w = a
        .import("w", 3, 2, &[0.5, 0.02, -0.5, 0.04, 0.01, -0.06])
        .unwrap();
    let y1 = a.matmul("mm", &x, &w).unwrap();
    let y2 = a.matmul("mm", &x, &w).unwrap();
    // The first run uses the loose bound; the second one more bits for the same values.
    assert!(y2.frac > y1.frac, "{} then {}", y1.frac, y2.frac);
    let want = [0.01, 0.0, 0.25 + 0.125 + 0.01, 0.01 - 0.01 - 0.06];
    for (got, w) in y2.to_f32().iter().zip(want) {
        assert!((got - w).abs() < 1e-3, "{got} vs {w}");
    }
    // Forcing a too-large frac makes it retry until nothing saturates.
    a.fracs.insert("big".into(), 15);
    let big = a.import("b", 1, 1, &[100.0]).unwrap();
    let one = a.import("o", 1, 1, &[1.0]).unwrap();
    let y = a.matmul("big", &big, &one).unwrap();
    assert_eq!(y.to_f32(), vec![100.0]);
}

#[test]
fn sgd_moves_weights_by_lr_times_gradient_on_average() {
    let mut a = arith(Rounding::Stochastic);
    let mut w = a.import("w", 1, 256, &[0.5; 256]).unwrap();
    let mut v = a.zeros(1, 256);
    let g = a.import("g", 1, 256, &[0.001; 256]).unwrap();
    a.sgd("u", &mut w, &mut v, &g, 0.01, 0.0).unwrap();
    // Each step is 1e-5, below the 2^-15 = 3.05e-5 resolution: only the mean moves.
    let mean: f64 = w.to_f32().iter().map(|&x| x as f64).sum::<f64>() / 256.0;
    assert!((mean - (0.5 - 1e-5)).abs() < 4e-6, "mean {mean}");
    let mut a = arith(Rounding::NearestEven);
    let mut w2 = a.import("w", 1, 256, &[0.5; 256]).unwrap();
    let mut v2 = a.zeros(1, 256);
    a.sgd("u", &mut w2, &mut v2, &g, 0.01, 0.0).unwrap();
    assert!(
        w2.to_f32().iter().all(|&x| x == 0.5),
        "nearest rounding loses the update"
    );
}

#[test]
fn forced_saturation_is_counted() {
    let mut a = arith(Rounding::NearestEven);
    // 1.0 * 1.0 at a remembered frac of 15 is 32768: one past the top, so one retry at 14.
    a.fracs.insert("big".into(), 15);
    let one = QMatrix::from_vec(1, 1, 14, vec![1 << 14]).unwrap();
    assert_eq!(a.matmul("big", &one, &one).unwrap().to_f32(), vec![1.0]);
    let want = SaturationCount {
        ops: 2,
        retries: 1,
        saturated_words: 0,
    };
    assert_eq!(a.saturation()["big"], want);
    // With no fractional bits to give up (0 + 0 in, 0 out), 32767 * 2 saturates and is kept.
    let m = QMatrix::from_vec(1, 2, 0, vec![32767, 1]).unwrap();
    let two = QMatrix::from_vec(2, 1, 0, vec![2, 0]).unwrap();
    assert_eq!(a.matmul("kept", &m, &two).unwrap().data, vec![32767]);
    let want = SaturationCount {
        ops: 1,
        retries: 0,
        saturated_words: 1,
    };
    assert_eq!(a.saturation()["kept"], want);
    assert_eq!(crate::saturation_totals(&a), (1, 1));
}

/// `Aᵀ·B` over `MAX_K + 5` rows, against the contract's "Long reductions" rule re-done here
/// step by step with the golden model: chunks of `MAX_K` and 5 rows, chunk seeds, exact sum
/// at 15 fractional bits, one sequential conversion.
#[test]
fn a_long_reduction_is_split_by_the_contract_rule() {
    use systole_core::numeric::MAX_K;
    use systole_golden::split::{chunk_seed, rows_of};
    let k = MAX_K + 5;
    let word = |i: usize, p: usize, m: usize| ((i * p) % m) as i16 - (m / 2) as i16;
    let a = QMatrix::from_vec(k, 2, 12, (0..2 * k).map(|i| word(i, 7919, 4001)).collect());
    let b = QMatrix::from_vec(
        k,
        3,
        11,
        (0..3 * k).map(|i| word(i, 104_729, 3001)).collect(),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut ar = arith(Rounding::Stochastic);
    ar.begin_step(5);
    let f = 4;
    ar.fracs.insert("dw".into(), f);
    let got = ar.matmul_tn("dw", &a, &b).unwrap();
    assert_eq!(
        ar.saturation()["dw"].retries,
        0,
        "the test assumes no retry"
    );
    let seed = |i: u32| systole_step::seeds::op_seed(1, 5, i);
    let mut sum = vec![0i64; 6];
    for (j, r) in [0..MAX_K, MAX_K..k].into_iter().enumerate() {
        let spec = OutputSpec {
            frac: f,
            rounding: Rounding::Stochastic,
            seed: chunk_seed(seed(j as u32), j),
        };
        let part = golden::matmul_tn(&rows_of(&a, r.clone()), &rows_of(&b, r), &spec, 4).unwrap();
        for (s, &w) in sum.iter_mut().zip(&part.data) {
            *s += (w as i64) << (15 - f);
        }
    }
    let m = sum.iter().map(|v| v.abs()).max().unwrap();
    let out = (0..=15u32)
        .rev()
        .find(|&o| m >> (15 - o) < 32767)
        .unwrap_or(0);
    let want = convert_sequential(&sum, 15 - out, Rounding::Stochastic, seed(2));
    assert_eq!((got.frac, got.data), (out, want));
}

#[test]
fn an_op_error_names_its_cause_once() {
    let e = TrainError::Numeric {
        op: "layer 1 forward".into(),
        source: NumericError::KTooLong(200_704),
    };
    // The CLI prints errors with their causes, as `{:#}` does.
    let s = format!("{:#}", anyhow::Error::from(e));
    assert!(
        s.starts_with("layer 1 forward: dot product of length 200704"),
        "{s}"
    );
    assert_eq!(s.matches("200704").count(), 1, "{s}");
}

/// Sparse small integer words (at 0 fractional bits every product and sum below is exact) with
/// the last `dense` words all non-zero, so the last chunk of a split reduction counts.
fn sparse_words(n: usize, dense: usize, mul: usize) -> Vec<i16> {
    (0..n)
        .map(|i| match (i * mul) % 61 {
            _ if i >= n - dense => ((i % 5) as i16 - 2) | 1,
            0 => (i % 7) as i16 - 3,
            _ => 0,
        })
        .collect()
}

/// A convolution whose reduction is 5 products longer than `MAX_K` (14,564 channels of a 3x3
/// kernel), split into two chunks, equals the exact unsplit convolution computed here.
#[test]
fn long_conv_reductions_are_split_and_equal_the_exact_convolution() {
    long_conv_case(&mut arith(Rounding::Stochastic));
}

/// The same through the Verilated 4x4 array (the split runs in the trainer, above every
/// backend), each chunk also checked against the golden model.
#[test]
fn long_conv_reductions_are_split_on_the_verilated_array() {
    let device = systole_device::verilator::VerilatorDevice::new(ArrayConfig::square(4)).unwrap();
    long_conv_case(&mut on_device(
        Box::new(device),
        Rounding::Stochastic,
        1,
        true,
    ));
}

fn long_conv_case(a: &mut FixedArith) {
    use systole_core::numeric::MAX_K;
    let long = 14_564;
    assert_eq!(long * 9, MAX_K + 5);
    // 4x4 maps (not 3x3) so a map channel and a kernel window differ in size.
    let (hw, k) = (4usize, 3usize);
    let px = hw * hw;
    let at = |b: usize, c: usize, ch: usize, y: usize, x: usize| ((b * ch + c) * hw + y) * hw + x;
    // Input position of output (oy, ox) under kernel tap (ky, kx), padding 1.
    let tap = |o: usize, t: usize| (o + t).checked_sub(1).filter(|&i| i < hw);

    // Forward: in_ch is the long dimension.
    let g = Conv2dGeom {
        batch: 2,
        shape: ConvGeom {
            in_ch: long,
            in_h: hw,
            in_w: hw,
            out_ch: 2,
            kernel: k,
            stride: 1,
            pad: 1,
        },
    };
    let x = QMatrix::from_vec(2, long * px, 0, sparse_words(2 * long * px, px, 7919)).unwrap();
    let w = QMatrix::from_vec(2, long * 9, 0, sparse_words(2 * long * 9, 9, 104_729)).unwrap();
    let mut want = vec![0f32; 2 * 2 * px];
    for (b, co, oy, ox) in grid4(2, 2, hw, hw) {
        let mut s = 0i64;
        for ci in 0..long {
            for ky in 0..k {
                for kx in 0..k {
                    if let (Some(y), Some(xx)) = (tap(oy, ky), tap(ox, kx)) {
                        s += x.data[at(b, ci, long, y, xx)] as i64
                            * w.data[(co * long + ci) * 9 + ky * k + kx] as i64;
                    }
                }
            }
        }
        want[at(b, co, 2, oy, ox)] = s as f32;
    }
    a.begin_step(3);
    let y = a.conv_forward("fwd", &x, &w, &g).unwrap();
    assert_eq!(a.saturation()["fwd"].ops, 2, "two chunks, no retry");
    assert_eq!(y.to_f32(), want);

    // Input gradient: out_ch is the long dimension.
    let g = Conv2dGeom {
        batch: g.batch,
        shape: ConvGeom {
            in_ch: 2,
            out_ch: long,
            ..g.shape
        },
    };
    let dy = QMatrix::from_vec(2, long * px, 0, sparse_words(2 * long * px, px, 7919)).unwrap();
    let w = QMatrix::from_vec(long, 2 * 9, 0, sparse_words(long * 2 * 9, 2 * 9, 104_729)).unwrap();
    let mut want = vec![0f32; 2 * 2 * px];
    for (b, ci, y, xx) in grid4(2, 2, hw, hw) {
        let mut s = 0i64;
        for co in 0..long {
            for ky in 0..k {
                for kx in 0..k {
                    // y = oy + ky - 1  =>  oy = y + 1 - ky.
                    if let (Some(oy), Some(ox)) = (tap(y, 2 - ky), tap(xx, 2 - kx)) {
                        s += dy.data[at(b, co, long, oy, ox)] as i64
                            * w.data[(co * 2 + ci) * 9 + ky * k + kx] as i64;
                    }
                }
            }
        }
        want[at(b, ci, 2, y, xx)] = s as f32;
    }
    let dx = a.conv_backward_input("dx", &dy, &w, &g).unwrap();
    assert_eq!(a.saturation()["dx"].ops, 2, "two chunks, no retry");
    assert_eq!(dx.to_f32(), want);
}

/// Every `(a, b, c, d)` below the bounds, the last index fastest.
fn grid4(
    n0: usize,
    n1: usize,
    n2: usize,
    n3: usize,
) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    (0..n0).flat_map(move |a| {
        (0..n1).flat_map(move |b| (0..n2).flat_map(move |c| (0..n3).map(move |d| (a, b, c, d))))
    })
}

/// `--check` on a device built at 8 bits compares with the golden model's product saturated to
/// 8 bits, the product at W: a saturating product passes (unsaturated, the 16-bit golden
/// result would differ in every word).
#[test]
fn check_at_8_bits_compares_with_the_product_at_8_bits() {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(4)
    }
    .with_word_bits(8);
    let mut p = DeviceProducts {
        device: Box::new(GoldenDevice::new(cfg).unwrap()),
        check: true,
    };
    let a = QMatrix::from_vec(2, 2, 0, vec![100, 100, -100, -100]).unwrap();
    let spec = OutputSpec {
        frac: 0,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    let y = Products::matmul(&mut p, "mm", &a, &a, &spec).unwrap();
    assert_eq!(y.data, vec![0, 0, 0, 0]);
    let b = QMatrix::from_vec(2, 2, 0, vec![100, 0, 0, 100]).unwrap();
    let y = Products::matmul(&mut p, "mm", &a, &b, &spec).unwrap();
    assert_eq!(y.data, vec![127, 127, -128, -128]);
}
