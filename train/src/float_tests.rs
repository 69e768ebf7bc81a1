//! Tests of `train::float`.
use super::*;
use systole_golden::{ConvGeom, NumericError};

fn m(rows: usize, cols: usize, d: &[f32]) -> FMat {
    FMat {
        rows,
        cols,
        data: d.to_vec(),
    }
}

#[test]
fn products_and_transposes() {
    let mut a = FloatArith::new(FloatFormat::F32);
    let x = m(2, 3, &[1., 2., 3., 4., 5., 6.]);
    let y = m(3, 2, &[1., 0., 0., 1., 1., 1.]);
    assert_eq!(a.matmul("t", &x, &y).unwrap().data, vec![4., 5., 10., 11.]);
    assert_eq!(
        a.matmul_nt("t", &x, &x).unwrap().data,
        vec![14., 32., 32., 77.]
    );
    assert_eq!(
        a.matmul_tn("t", &x, &x).unwrap().data,
        vec![17., 22., 27., 22., 29., 36., 27., 36., 45.]
    );
    assert!(a.matmul("t", &x, &x).is_err());
}

#[test]
fn conv_backward_matches_finite_differences() {
    // Sum of outputs weighted by r: dL/dx and dL/dw from the backward ops must match the
    // change of L when one input or weight moves.
    let g = Conv2dGeom {
        batch: 1,
        shape: ConvGeom {
            in_ch: 2,
            in_h: 4,
            in_w: 4,
            out_ch: 3,
            kernel: 3,
            stride: 1,
            pad: 1,
        },
    };
    let mut a = FloatArith::new(FloatFormat::F32);
    let x = m(
        1,
        32,
        &(0..32)
            .map(|i| ((i * 7) % 11) as f32 / 10.0)
            .collect::<Vec<_>>(),
    );
    let w = m(
        3,
        18,
        &(0..54)
            .map(|i| ((i * 5) % 13) as f32 / 13.0 - 0.5)
            .collect::<Vec<_>>(),
    );
    let r = m(
        1,
        48,
        &(0..48)
            .map(|i| ((i * 3) % 7) as f32 - 3.0)
            .collect::<Vec<_>>(),
    );
    let loss = |a: &mut FloatArith, x: &FMat, w: &FMat| -> f32 {
        let y = a.conv_forward("f", x, w, &g).unwrap();
        y.data.iter().zip(&r.data).map(|(p, q)| p * q).sum()
    };
    let dx = a.conv_backward_input("bi", &r, &w, &g).unwrap();
    let dw = a.conv_backward_weights("bw", &x, &r, &g).unwrap();
    let base = loss(&mut a, &x, &w);
    for i in [0, 5, 17, 31] {
        let mut x2 = x.clone();
        x2.data[i] += 1.0;
        assert!(
            (loss(&mut a, &x2, &w) - base - dx.data[i]).abs() < 1e-3,
            "dx[{i}]"
        );
    }
    for i in [0, 9, 40, 53] {
        let mut w2 = w.clone();
        w2.data[i] += 1.0;
        assert!(
            (loss(&mut a, &x, &w2) - base - dw.data[i]).abs() < 1e-3,
            "dw[{i}]"
        );
    }
}

#[test]
fn half_formats_round_storage() {
    let mut a = FloatArith::new(FloatFormat::Bf16);
    let t = a.import("in", 1, 1, &[1.0 + 1.0 / 1024.0]).unwrap();
    assert_eq!(t.data[0], 1.0);
    let mut h = FloatArith::new(FloatFormat::F16);
    let t = h.import("in", 1, 1, &[1.0 + 1.0 / 1024.0]).unwrap();
    assert_eq!(t.data[0], 1.0 + 1.0 / 1024.0);
}

#[test]
fn master_weights_keep_updates_that_low_precision_weights_would_lose() {
    // Each update moves the weight 1.0 by a quarter of the format's ulp below 1 (2^-8 for bf16,
    // 2^-11 for f16): rounded to the format after each update the weight never moves; the f32
    // master moves by one ulp after 4 updates, and the next product sees it.
    for (format, ulp) in [
        (FloatFormat::Bf16, 2f32.powi(-8)),
        (FloatFormat::F16, 2f32.powi(-11)),
    ] {
        let step = ulp / 4.0;
        assert_eq!(
            format.round(1.0 - step),
            1.0,
            "{format:?}: the step is lost once rounded"
        );
        let mut a = FloatArith::new(format);
        let (mut w, mut v) = (m(1, 1, &[1.0]), m(1, 1, &[0.0]));
        for _ in 0..4 {
            a.sgd("t", &mut w, &mut v, &m(1, 1, &[step]), 1.0, 0.0)
                .unwrap();
        }
        let seen = a.matmul("t", &w, &m(1, 1, &[1.0])).unwrap();
        assert_eq!(seen.data, vec![1.0 - ulp], "{format:?}");
        // Below one ulp the master still holds the updates the operand does not show yet.
        a.sgd("t", &mut w, &mut v, &m(1, 1, &[step]), 1.0, 0.0)
            .unwrap();
        assert_eq!(w.data, vec![1.0 - ulp - step], "{format:?}");
        assert_eq!(
            a.matmul("t", &w, &m(1, 1, &[1.0])).unwrap().data,
            vec![1.0 - ulp]
        );
    }
}

#[test]
fn a_bad_convolution_geometry_keeps_the_numeric_error_as_its_source() {
    let g = Conv2dGeom {
        batch: 0,
        shape: ConvGeom {
            in_ch: 1,
            in_h: 4,
            in_w: 4,
            out_ch: 1,
            kernel: 3,
            stride: 1,
            pad: 0,
        },
    };
    let mut a = FloatArith::new(FloatFormat::F32);
    let t = m(1, 1, &[0.]);
    for e in [
        a.conv_forward("conv", &t, &t, &g).unwrap_err(),
        a.conv_backward_input("conv", &t, &t, &g).unwrap_err(),
        a.conv_backward_weights("conv", &t, &t, &g).unwrap_err(),
    ] {
        let source = std::error::Error::source(&e).expect("the geometry's error as source");
        assert!(source.downcast_ref::<NumericError>().is_some(), "{e:?}");
    }
}
