//! Operand packing for the AMX kernel: byte planes of `A`, tile-shaped byte panels of `B`.

use super::{BTILE, TK, TM, TN};
use std::arch::x86_64::*;

/// One 64-byte line. Tile loads from 64-byte aligned rows are about 4x faster here than
/// unaligned ones (measured), so the packed operands are built from these.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Line([u8; 64]);

/// A zeroed, 64-byte aligned buffer of at least `len` bytes.
fn lines(len: usize) -> Vec<Line> {
    vec![Line([0; 64]); len.div_ceil(64)]
}

fn bytes_mut(v: &mut [Line]) -> &mut [u8] {
    // SAFETY: `Line` is 64 bytes without padding, so the lines are one contiguous byte run.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 64) }
}

/// The high and low byte planes of 16 `i16`s given as two vectors of 8.
#[target_feature(enable = "avx512f")]
fn split(x0: __m128i, x1: __m128i) -> (__m128i, __m128i) {
    let ff = _mm_set1_epi16(0xFF);
    // High bytes are -128..=127 and low bytes 0..=255 after the shift and mask, so the
    // saturating packs are exact.
    let h = _mm_packs_epi16(_mm_srai_epi16(x0, 8), _mm_srai_epi16(x1, 8));
    let l = _mm_packus_epi16(_mm_and_si128(x0, ff), _mm_and_si128(x1, ff));
    (h, l)
}

#[target_feature(enable = "avx512f")]
fn load8(v: &[i16]) -> __m128i {
    assert!(v.len() >= 8);
    // SAFETY: reads 8 i16 (16 bytes) from a slice at least that long.
    unsafe { _mm_loadu_si128(v.as_ptr().cast()) }
}

#[target_feature(enable = "avx512f")]
fn store16(v: __m128i, dst: &mut [u8]) {
    assert!(dst.len() >= 16);
    // SAFETY: writes 16 bytes into a slice at least that long.
    unsafe { _mm_storeu_si128(dst.as_mut_ptr().cast(), v) }
}

/// `A` as high and low byte planes: rows padded to whole tiles, each row `kp` bytes (zeros past
/// `k`, which add nothing to the products).
#[target_feature(enable = "avx512f")]
pub(super) fn pack_a(a: &[i16], m: usize, k: usize, kp: usize) -> (Vec<Line>, Vec<Line>) {
    let mp = m.div_ceil(TM) * TM;
    let (mut hv, mut lv) = (lines(mp * kp), lines(mp * kp));
    let (h, l) = (bytes_mut(&mut hv), bytes_mut(&mut lv));
    for (i, src) in a.chunks_exact(k).enumerate() {
        let (hr, lr) = (&mut h[i * kp..i * kp + k], &mut l[i * kp..i * kp + k]);
        let whole = k / 16 * 16;
        for j in (0..whole).step_by(16) {
            let (vh, vl) = split(load8(&src[j..]), load8(&src[j + 8..]));
            store16(vh, &mut hr[j..]);
            store16(vl, &mut lr[j..]);
        }
        for j in whole..k {
            hr[j] = (src[j] >> 8) as u8;
            lr[j] = src[j] as u8;
        }
    }
    (hv, lv)
}

/// `B` packed per 16-column block and 64-k step: the high plane tile then the low plane tile,
/// each 16 rows (k quads) of 16 columns x 4 consecutive k bytes, the layout `TDPB*D` reads.
/// Zero outside `k x n`.
#[target_feature(enable = "avx512f")]
pub(super) fn pack_b(b: &[i16], k: usize, n: usize, nk: usize, nb: usize) -> Vec<Line> {
    let mut pv = lines(nb * nk * 2 * BTILE);
    let p = bytes_mut(&mut pv);
    for k0 in (0..k).step_by(4) {
        let (ks, q) = (k0 / TK, (k0 % TK) / 4);
        for jb in 0..nb {
            let j0 = jb * TN;
            let off = (jb * nk + ks) * 2 * BTILE + q * 64;
            let dst = &mut p[off..off + BTILE + 64];
            if k0 + 4 <= k && j0 + TN <= n {
                let row = |t: usize| &b[(k0 + t) * n + j0..(k0 + t + 1) * n];
                let mut hl = [(_mm_setzero_si128(), _mm_setzero_si128()); 4];
                for (t, v) in hl.iter_mut().enumerate() {
                    *v = split(load8(row(t)), load8(&row(t)[8..]));
                }
                // Interleave the four k rows so each column's 4 bytes are adjacent.
                let high = [hl[0].0, hl[1].0, hl[2].0, hl[3].0];
                let low = [hl[0].1, hl[1].1, hl[2].1, hl[3].1];
                for (plane, base) in [(high, 0), (low, BTILE)] {
                    let lo01 = _mm_unpacklo_epi8(plane[0], plane[1]);
                    let lo23 = _mm_unpacklo_epi8(plane[2], plane[3]);
                    let hi01 = _mm_unpackhi_epi8(plane[0], plane[1]);
                    let hi23 = _mm_unpackhi_epi8(plane[2], plane[3]);
                    store16(_mm_unpacklo_epi16(lo01, lo23), &mut dst[base..]);
                    store16(_mm_unpackhi_epi16(lo01, lo23), &mut dst[base + 16..]);
                    store16(_mm_unpacklo_epi16(hi01, hi23), &mut dst[base + 32..]);
                    store16(_mm_unpackhi_epi16(hi01, hi23), &mut dst[base + 48..]);
                }
            } else {
                for t in 0..4.min(k - k0) {
                    for j in 0..TN.min(n - j0) {
                        let v = b[(k0 + t) * n + j0 + j];
                        dst[j * 4 + t] = (v >> 8) as u8;
                        dst[BTILE + j * 4 + t] = v as u8;
                    }
                }
            }
        }
    }
    pv
}
