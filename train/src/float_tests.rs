//! Tests of `train::float`.
use super::*;
use systole_golden::ConvGeom;

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
