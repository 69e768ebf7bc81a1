//! Tests of `train::fixed`.
use super::*;
use crate::device::golden::GoldenDevice;
use systole_core::ArrayConfig;

fn arith(rounding: Rounding) -> FixedArith {
    FixedArith::new(
        Box::new(GoldenDevice::new(ArrayConfig::square(4)).unwrap()),
        rounding,
        1,
        true,
    )
}

#[test]
fn frac_rules() {
    assert_eq!(frac_for_max(0.0), 15);
    assert_eq!(frac_for_max(0.9), 15);
    assert_eq!(frac_for_max(1.0), 14);
    assert_eq!(frac_for_max(3.0), 13);
    assert_eq!(frac_for_max(1e9), 0);
    assert_eq!(frac_for_exact(0, 20), 15);
    assert_eq!(frac_for_exact(1 << 20, 20), 14);
    assert_eq!(frac_for_exact(5, 3), 3);
    assert_eq!(frac_for_exact(1 << 40, 40), 14);
    // 1024 would want frac 4, but a shift above 32 is outside the contract: 8 is the floor.
    assert_eq!(frac_for_exact(1 << 50, 40), 8);
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
