//! The AVX-512 VNNI kernel (see the module docs of `gemm`).

use std::arch::x86_64::*;

/// Rows of `A` per VNNI micro-kernel call (measured: 8 to 14 are equally fast here).
const MR: usize = 8;
/// Columns of `B` per micro-kernel call: one 512-bit vector of `i32` lanes.
const NR: usize = 16;
/// `k` pairs per `i32` block: `128 * 2 * 32768 * 255 < 2^31`.
const KBLOCK_PAIRS: usize = 128;

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
