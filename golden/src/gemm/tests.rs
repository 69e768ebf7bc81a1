//! Every kernel against a plain `i64` triple loop.

use super::*;
use proptest::prelude::*;
use systole_core::numeric::MAX_K;

fn naive(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    let mut c = vec![0i64; m * n];
    for i in 0..m {
        for kk in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + kk] as i64 * b[kk * n + j] as i64;
            }
        }
    }
    c
}

/// Checks every kernel this CPU has against the triple loop (the portable one always runs).
fn check_all(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) {
    let want = naive(a, b, m, k, n);
    assert_eq!(gemm_exact_f64(a, b, m, k, n), want, "f64 {m}x{k}x{n}");
    if let Some(v) = gemm_exact_vnni(a, b, m, k, n) {
        assert_eq!(v, want, "vnni {m}x{k}x{n}");
    }
    if let Some(v) = gemm_exact_amx(a, b, m, k, n) {
        assert_eq!(v, want, "amx {m}x{k}x{n}");
    }
    assert_eq!(gemm_exact(a, b, m, k, n), want, "dispatch {m}x{k}x{n}");
}

/// Values whose byte halves hit the bounds: -32768 (hi -128, lo 0), -1 (hi -1, lo 255),
/// 32767 (hi 127, lo 255), -32513 (hi -128, lo 255), 255 (hi 0, lo 255).
const EXTREMES: [i16; 5] = [i16::MIN, -1, i16::MAX, -32513, 255];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_kernel_is_exact(m in 0usize..40, k in 0usize..300, n in 0usize..40, seed: u32, extreme: bool) {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            if extreme && s % 3 == 0 { EXTREMES[(s >> 8) as usize % 5] } else { (s >> 16) as i16 }
        };
        let a: Vec<i16> = (0..m * k).map(|_| next()).collect();
        let b: Vec<i16> = (0..k * n).map(|_| next()).collect();
        check_all(&a, &b, m, k, n);
    }
}

#[test]
fn shapes_around_the_tile_sizes() {
    // 16 rows / 16 columns / 64 k per AMX tile, 8 rows / 16 columns / 256 k per VNNI block.
    let mut s = 0x2545_F491u32;
    for &(m, k, n) in &[
        (1, 1, 1),
        (16, 64, 16),
        (17, 65, 17),
        (15, 63, 15),
        (33, 257, 31),
        (8, 256, 48),
    ] {
        let mut next = || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 16) as i16
        };
        let a: Vec<i16> = (0..m * k).map(|_| next()).collect();
        let b: Vec<i16> = (0..k * n).map(|_| next()).collect();
        check_all(&a, &b, m, k, n);
    }
}

#[test]
fn empty_shapes_give_zeros() {
    for &(m, k, n) in &[(0, 0, 0), (0, 5, 3), (4, 0, 3), (4, 5, 0)] {
        check_all(&vec![7; m * k], &vec![-9; k * n], m, k, n);
    }
}

#[test]
fn worst_case_blocks_do_not_overflow() {
    // Each extreme value in every position, with k just below, at and past the kernels' i32
    // block lengths (VNNI 256, AMX 2^15), so every block bound is exercised at its maximum.
    for &k in &[255, 256, 257, (1 << 15) - 1, 1 << 15, (1 << 15) + 70] {
        for &x in &EXTREMES {
            for &y in &EXTREMES {
                let (m, n) = (3, 17);
                check_all(&vec![x; m * k], &vec![y; k * n], m, k, n);
            }
        }
    }
}

#[test]
fn longest_contract_dot_product_is_exact() {
    // k = MAX_K with every pair of extremes: (-32768)^2 everywhere gives (2^17 - 1) * 2^30, the
    // contract's largest accumulator magnitude; -1 * -1 has the largest low-byte product (255 * 255) at
    // every step, which overflows an i32 block longer than 33025 steps.
    let (m, k, n) = (2, MAX_K, 3);
    for &x in &EXTREMES {
        for &y in &EXTREMES {
            check_all(&vec![x; m * k], &vec![y; k * n], m, k, n);
        }
    }
}

#[test]
fn rows_arrive_in_order_and_make_up_the_product() {
    let mut s = 0x9E37_79B9u32;
    for &(m, k, n) in &[
        (0, 3, 4),
        (4, 3, 0),
        (5, 0, 3),
        (16, 64, 16),
        (37, 70, 19),
        (3, (1 << 15) + 70, 5),
    ] {
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 16) as i16
        };
        let a: Vec<i16> = (0..m * k).map(|_| next()).collect();
        let b: Vec<i16> = (0..k * n).map(|_| next()).collect();
        let mut got = Vec::new();
        gemm_exact_rows(&a, &b, m, k, n, &mut |first, rows| {
            assert_eq!(first * n, got.len(), "rows out of order");
            assert!(!rows.is_empty() && rows.len() % n == 0, "partial row");
            got.extend_from_slice(rows);
        });
        assert_eq!(got, naive(&a, &b, m, k, n), "{m}x{k}x{n}");
    }
}
