//! Exact `i16 x i16 -> i64` matrix products: the golden model's hot loop.
//!
//! Two kernels give identical (exact) results:
//! * [`gemm_exact_vnni`]: AVX-512 VNNI `vpdpwssd`. `B` is split into a signed high byte and an
//!   unsigned low byte (`b = 256*hi + lo`), so every pairwise sum `a0*b0 + a1*b1` is below
//!   `2 * 32768 * 255 < 2^24` and 128 of them (256 k steps) fit an `i32` lane without
//!   overflow; each such block is then widened into the `i64` result as `256*sum_hi + sum_lo`.
//! * [`gemm_exact_f64`]: `f64` dgemm. Every product (`<= 2^30`) and partial sum (`< 2^47`) is an
//!   integer below `2^53`, so it is exact in any summation order.
//!
//! [`gemm_exact`] picks the VNNI kernel when the CPU has it.

/// Rows of `A` per VNNI micro-kernel call (measured: 8 to 14 are equally fast here).
const MR: usize = 8;
/// Columns of `B` per micro-kernel call: one 512-bit vector of `i32` lanes.
const NR: usize = 16;
/// `k` pairs per `i32` block: `128 * 2 * 32768 * 255 < 2^31`.
const KBLOCK_PAIRS: usize = 128;

/// `C = A·B` exactly; `a` is `m x k`, `b` is `k x n`, both row-major; `C` is `m x n` row-major.
pub fn gemm_exact(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    gemm_exact_vnni(a, b, m, k, n).unwrap_or_else(|| gemm_exact_f64(a, b, m, k, n))
}

/// The portable kernel (`f64` dgemm).
pub fn gemm_exact_f64(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    assert!(
        a.len() == m * k && b.len() == k * n,
        "gemm_exact_f64: operand lengths do not match the shape"
    );
    let af: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let bf: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    let mut cf = vec![0f64; m * n];
    if m > 0 && n > 0 && k > 0 {
        // SAFETY: the slices are exactly m*k, k*n and m*n long and the strides describe
        // row-major layouts inside them.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                af.as_ptr(),
                k as isize,
                1,
                bf.as_ptr(),
                n as isize,
                1,
                0.0,
                cf.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
    cf.into_iter().map(|x| x as i64).collect()
}

/// The AVX-512 VNNI kernel; `None` when the CPU lacks it.
pub fn gemm_exact_vnni(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Option<Vec<i64>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            assert!(
                a.len() == m * k && b.len() == k * n,
                "gemm_exact_vnni: operand lengths do not match the shape"
            );
            return Some(vnni::gemm(a, b, m, k, n));
        }
    }
    let _ = (a, b, m, k, n);
    None
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{KBLOCK_PAIRS, MR, NR};
    use std::arch::x86_64::*;

    pub(super) fn gemm(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
        let mut c = vec![0i64; m * n];
        if m == 0 || n == 0 || k == 0 {
            return c;
        }
        let kp = k.div_ceil(2);
        // A padded to whole micro-kernel rows and an even k, so each (a[2p], a[2p+1]) pair is
        // one aligned-enough i32 to broadcast.
        let mut ap = vec![0i16; m.div_ceil(MR) * MR * 2 * kp];
        for i in 0..m {
            ap[i * 2 * kp..i * 2 * kp + k].copy_from_slice(&a[i * k..(i + 1) * k]);
        }
        // Per k pair p: 16 lanes of (hi[2p], hi[2p+1]) then 16 lanes of (lo[2p], lo[2p+1]).
        let mut panel = vec![0i16; kp * 4 * NR];
        let mut tile = [[0i32; NR]; MR * 2];
        for j0 in (0..n).step_by(NR) {
            let nc = NR.min(n - j0);
            panel.fill(0);
            for kk in 0..k {
                let (p, odd) = (kk / 2, kk % 2);
                for jj in 0..nc {
                    let v = b[kk * n + j0 + jj];
                    panel[p * 64 + jj * 2 + odd] = v >> 8;
                    panel[p * 64 + 32 + jj * 2 + odd] = v & 0xFF;
                }
            }
            for i0 in (0..m).step_by(MR) {
                let mr = MR.min(m - i0);
                for p0 in (0..kp).step_by(KBLOCK_PAIRS) {
                    let pairs = KBLOCK_PAIRS.min(kp - p0);
                    // SAFETY: the caller checked the CPU features; reads stay inside `ap`
                    // (rows i0..i0+MR exist after padding, pairs p0..p0+pairs < kp) and `panel`.
                    unsafe {
                        kernel(
                            ap.as_ptr().add(i0 * 2 * kp + 2 * p0),
                            2 * kp,
                            panel.as_ptr().add(p0 * 64),
                            pairs,
                            &mut tile,
                        )
                    };
                    for r in 0..mr {
                        let row = &mut c[(i0 + r) * n + j0..(i0 + r) * n + j0 + nc];
                        for (jj, out) in row.iter_mut().enumerate() {
                            *out += ((tile[2 * r][jj] as i64) << 8) + tile[2 * r + 1][jj] as i64;
                        }
                    }
                }
            }
        }
        c
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn kernel(
        a: *const i16,
        lda: usize,
        panel: *const i16,
        pairs: usize,
        out: &mut [[i32; NR]; MR * 2],
    ) {
        let mut acc = [_mm512_setzero_si512(); MR * 2];
        for p in 0..pairs {
            let hi = _mm512_loadu_si512(panel.add(p * 64) as *const _);
            let lo = _mm512_loadu_si512(panel.add(p * 64 + 32) as *const _);
            for r in 0..MR {
                let pair = (a.add(r * lda + 2 * p) as *const i32).read_unaligned();
                let av = _mm512_set1_epi32(pair);
                acc[2 * r] = _mm512_dpwssd_epi32(acc[2 * r], av, hi);
                acc[2 * r + 1] = _mm512_dpwssd_epi32(acc[2 * r + 1], av, lo);
            }
        }
        for (o, v) in out.iter_mut().zip(acc.iter()) {
            _mm512_storeu_si512(o.as_mut_ptr() as *mut _, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn both_kernels_are_exact(m in 1usize..20, k in 1usize..600, n in 1usize..40, seed: u32, extreme: bool) {
            let mut s = seed | 1;
            let mut next = move || { s ^= s << 13; s ^= s >> 17; s ^= s << 5; if extreme && s % 3 == 0 { i16::MIN } else { (s >> 16) as i16 } };
            let a: Vec<i16> = (0..m * k).map(|_| next()).collect();
            let b: Vec<i16> = (0..k * n).map(|_| next()).collect();
            let want = naive(&a, &b, m, k, n);
            prop_assert_eq!(gemm_exact_f64(&a, &b, m, k, n), want.clone());
            if let Some(v) = gemm_exact_vnni(&a, &b, m, k, n) {
                prop_assert_eq!(v, want);
            }
        }
    }

    #[test]
    fn worst_case_block_does_not_overflow() {
        // 256 k steps of (-32768)^2 and of (-32768 * 32767) stress the i32 block bound.
        let (m, k, n) = (3, 1024, 17);
        let a = vec![i16::MIN; m * k];
        let b: Vec<i16> = (0..k * n)
            .map(|i| if i % 2 == 0 { i16::MIN } else { i16::MAX })
            .collect();
        let want = naive(&a, &b, m, k, n);
        assert_eq!(gemm_exact(&a, &b, m, k, n), want);
    }
}
