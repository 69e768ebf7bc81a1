//! The accumulator at the contract's own limit: a dot product of exactly `MAX_K` extreme
//! products through the Verilated hardware equals the golden model bit for bit in every rounding
//! mode, and one step longer is refused by every backend with the same typed error.
//!
//! `MAX_K` extreme products `(-32768)^2 = 2^30` sum to `MAX_K * 2^30`, the largest accumulator
//! value the contract admits; one more would be `2^47`, which a signed 48-bit accumulator wraps.

use systole_core::numeric::MAX_K;
use systole_core::{ArrayConfig, Rounding};
use systole_device::{self as device, Device, DeviceError};
use systole_golden::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, ConvGeom, NumericError, OutputSpec};

mod common;

/// Row `i` of A (and column `i` of B) is filled with `EXTREMES[i]`, except that the last K
/// element of row/column 2 flips sign, so the sums hit the top, the bottom and values between.
const EXTREMES: [i16; 4] = [i16::MIN, i16::MAX, i16::MIN, -1];

/// `m x k` A and `k x n` B (m = n = 4: one tile of a 4x4 array) at 15 fractional bits each.
fn extreme_operands(k: usize) -> (QMatrix, QMatrix) {
    let fill = |i: usize, kk: usize| {
        if i == 2 && kk == k - 1 {
            i16::MAX
        } else {
            EXTREMES[i]
        }
    };
    let mut a = vec![0i16; 4 * k];
    let mut b = vec![0i16; k * 4];
    for i in 0..4 {
        for kk in 0..k {
            a[i * k + kk] = fill(i, kk);
            b[kk * 4 + i] = fill(i, kk);
        }
    }
    (
        QMatrix::from_vec(4, k, 15, a).unwrap(),
        QMatrix::from_vec(k, 4, 15, b).unwrap(),
    )
}

fn open(spec: &str) -> Option<Box<dyn Device>> {
    match device::open(spec, ArrayConfig::square(4)) {
        Ok(d) => Some(d),
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED {spec} 4x4: {e}");
            None
        }
        Err(e) => panic!("{spec}: {e}"),
    }
}

/// `K = MAX_K` on the Verilated 4x4 array: accumulators at the contract's extremes, each
/// rounding mode, at shift 30 (outputs saturate at the top and bottom; the `-1` row and column
/// leave small sums whose rounding differs by mode) and shift 17.
#[test]
fn verilator_at_max_k_equals_golden() {
    let Some(mut dev) = open("verilator") else {
        return;
    };
    let (a, b) = extreme_operands(MAX_K);
    for (case, rounding) in Rounding::ALL.into_iter().enumerate() {
        let spec = OutputSpec {
            frac: [0, 13, 0][case],
            rounding,
            seed: 0xB0DA_0000 + case as u32,
        };
        let want = golden::matmul(&a, &b, &spec, 4).unwrap();
        // The top corner is the largest accepted sum, so it saturates high (a wrap would give
        // the most negative word).
        assert_eq!(want.data[0], i16::MAX);
        let got = dev.matmul(&a, &b, &spec).unwrap();
        assert_eq!(
            got.data, want.data,
            "{rounding:?}: verilator {:?} vs golden {:?}",
            got.data, want.data
        );
    }
}

/// The refusal of `MAX_K + 1`: the same typed error naming the limit on every backend built
/// here, for a product and for a convolution's weight gradient whose K is `batch * oh * ow`.
#[test]
fn one_past_max_k_is_refused_everywhere() {
    let a = QMatrix::zeros(1, MAX_K + 1, 0);
    let b = QMatrix::zeros(MAX_K + 1, 1, 0);
    let spec = OutputSpec {
        frac: 0,
        rounding: Rounding::NearestEven,
        seed: 1,
    };
    // 128 images of 32x32 with a 3x3 kernel, padding 1: K = 128 * 1024 = MAX_K + 1.
    let g = Conv2dGeom {
        batch: 128,
        shape: ConvGeom {
            in_ch: 1,
            in_h: 32,
            in_w: 32,
            out_ch: 2,
            kernel: 3,
            stride: 1,
            pad: 1,
        },
    };
    assert_eq!(g.batch * g.out_h() * g.out_w(), MAX_K + 1);
    let x = QMatrix::zeros(g.batch, 32 * 32, 8);
    let dy = QMatrix::zeros(g.batch, 2 * 32 * 32, 8);
    let expect = |what: &str, r: Result<QMatrix, DeviceError>| match r {
        Err(DeviceError::Numeric(e @ NumericError::KTooLong(k))) if k == MAX_K + 1 => {
            assert!(e.to_string().contains(&format!("limit of {MAX_K}")), "{e}")
        }
        other => panic!("{what}: expected KTooLong({}), got {other:?}", MAX_K + 1),
    };
    let refuse = |dev: &mut dyn Device| {
        let name = dev.name();
        expect(&name, dev.matmul(&a, &b, &spec));
        expect(&name, dev.matmul_tn(&b, &b, &spec));
        expect(&name, dev.conv2d_backward_weights(&x, &dy, &g, &spec));
        assert_eq!(dev.stats().ops, 0, "{name}: a refused op must not run");
    };
    for spec_name in ["golden", "verilator"] {
        let Some(mut dev) = open(spec_name) else {
            continue;
        };
        refuse(dev.as_mut());
        // The forward op of the same batch reduces over only 9 values: it runs.
        let w = QMatrix::zeros(2, 9, 8);
        dev.conv2d_forward(&x, &w, &g, &OutputSpec { frac: 8, ..spec })
            .unwrap_or_else(|e| panic!("{spec_name}: forward of a large batch: {e}"));
    }
    // The bridge image behind the bridge (serial boards share the host-side check).
    if let Some((board, mut dev)) = common::bridge_image() {
        refuse(dev.as_mut());
        drop(dev);
        board.close().expect("the bridge image reported an error");
    }
    let e = golden::matmul(&a, &b, &spec, 4).unwrap_err();
    assert_eq!(e, NumericError::KTooLong(MAX_K + 1));
}
