//! The AMX-INT8 kernel.
//!
//! `a = 256*ah + al` and `b = 256*bh + bl` with signed high bytes (`-128..=127`) and unsigned
//! low bytes (`0..=255`), so `a*b = 65536*ah*bh + 256*(ah*bl + al*bh) + al*bl`. Each of the four
//! byte products is one tile instruction (`TDPBSSD`, `TDPBSUD`, `TDPBUSD`, `TDPBUUD`) into its own
//! `i32` accumulator tile. Per k step the largest magnitudes are `128*128`, `128*255`, `255*128`
//! and `255*255 = 65025`, so over `KBLOCK = 2^15` steps every accumulator stays below
//! `65025 * 2^15 < 2^31`: exact. Longer `k` is split into such blocks, each widened into `i64`.
//!
//! The tiles are used inside single `asm!` blocks that load their own tile configuration and
//! release the tile state before returning, so no AMX state is live outside them.

use std::arch::asm;
use std::arch::x86_64::*;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// Rows of `A` (and `C`) per tile.
const TM: usize = 16;
/// Columns of `C` per tile: 16 `i32`, one 64-byte tile row.
const TN: usize = 16;
/// k per tile product: the 64 bytes of an `A` tile row.
const TK: usize = 64;
/// Bytes of one packed `B` tile: 16 rows (k quads) of 16 columns x 4 k bytes.
const BTILE: usize = 1024;
/// Column blocks per tile call: their accumulators (16 KiB) stay in L1 for the widening.
const GROUP: usize = 4;
/// k steps per exact `i32` block (see the module docs).
const KBLOCK: usize = 1 << 15;

/// Linux `arch_prctl` request for permission to use an extended state component.
const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
/// The AMX tile data state component.
const XFEATURE_XTILEDATA: libc::c_long = 18;

/// Whether the CPU has AMX-TILE and AMX-INT8 (and AVX-512F for widening) and Linux granted
/// this process the tile state. Asked once per process.
pub(super) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if !std::arch::is_x86_feature_detected!("avx512f") || __cpuid(0).eax < 7 {
            return false;
        }
        // CPUID.(EAX=7,ECX=0):EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
        if (__cpuid_count(7, 0).edx >> 24) & 3 != 3 {
            return false;
        }
        // SAFETY: this arch_prctl request only changes the process's permitted xstate
        // components; it takes two integers and touches no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    })
}

/// One 64-byte line. Tile loads from 64-byte aligned rows are about 4x faster here than
/// unaligned ones (measured), so the packed operands are built from these.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A zeroed, 64-byte aligned buffer of at least `len` bytes.
fn lines(len: usize) -> Vec<Line> {
    vec![Line([0; 64]); len.div_ceil(64)]
}

fn bytes_mut(v: &mut [Line]) -> &mut [u8] {
    // SAFETY: `Line` is 64 bytes without padding, so the lines are one contiguous byte run.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 64) }
}

/// The four `i32` accumulator tiles (hh, hl, lh, ll) of one 16x16 output block.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Acc([[[i32; TN]; TM]; 4]);

/// Caller: [`available`] returned true and the operand lengths match the shape.
pub(super) fn gemm(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    assert!(available(), "amx::gemm called without AMX");
    // SAFETY: available() checked AVX-512F.
    unsafe { gemm_avx512(a, b, m, k, n) }
}

/// [`gemm`] compiled with AVX-512F (the packing and widening helpers use it and SSE2).
#[target_feature(enable = "avx512f")]
fn gemm_avx512(a: &[i16], b: &[i16], m: usize, k: usize, n: usize) -> Vec<i64> {
    if m == 0 || n == 0 || k == 0 {
        return vec![0; m * n];
    }
    let kp = k.div_ceil(TK) * TK;
    let (nk, nb) = (kp / TK, n.div_ceil(TN));
    let (ah, al) = pack_a(a, m, k, kp);
    let bp = pack_b(b, k, n, nk, nb);
    let mut acc = vec![Acc([[[0; TN]; TM]; 4]); GROUP.min(nb)];
    let mut c: Vec<i64> = Vec::with_capacity(m * n);
    for i0 in (0..m).step_by(TM) {
        let rows = TM.min(m - i0);
        for k0 in (0..kp).step_by(KBLOCK) {
            let steps = KBLOCK.min(kp - k0) / TK;
            for g0 in (0..nb).step_by(GROUP) {
                let g = GROUP.min(nb - g0);
                // SAFETY: AMX was granted (asserted in `gemm`). The A planes have whole tiles
                // of rows (i0 + 16 <= their row count) of kp bytes and k0 + 64*steps <= kp;
                // the B panel of each column block is nk steps of 2 tiles, g0 + g <= nb and
                // k0/64 + steps <= nk; `acc` holds g `Acc`s (4 tiles each).
                unsafe {
                    stripe(
                        ah.as_ptr().cast::<u8>().add(i0 * kp + k0),
                        al.as_ptr().cast::<u8>().add(i0 * kp + k0),
                        kp,
                        bp.as_ptr()
                            .cast::<u8>()
                            .add((g0 * nk + k0 / TK) * 2 * BTILE),
                        nk * 2 * BTILE,
                        steps,
                        g,
                        acc.as_mut_ptr().cast::<i32>(),
                    )
                };
                let dst = &mut c.spare_capacity_mut()[i0 * n..(i0 + rows) * n];
                widen(&acc[..g], dst, n, g0 * TN, k0 > 0);
            }
        }
    }
    // SAFETY: the first k block of every stripe wrote all of its rows x n outputs, and the
    // stripes cover rows 0..m.
    unsafe { c.set_len(m * n) };
    c
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
fn pack_a(a: &[i16], m: usize, k: usize, kp: usize) -> (Vec<Line>, Vec<Line>) {
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
fn pack_b(b: &[i16], k: usize, n: usize, nk: usize, nb: usize) -> Vec<Line> {
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

/// Widens the accumulators of column blocks starting at column `j0` into `dst` (`rows x n`):
/// stores on the first k block, adds to what that block wrote on later ones.
#[target_feature(enable = "avx512f")]
fn widen(acc: &[Acc], dst: &mut [MaybeUninit<i64>], n: usize, j0: usize, add: bool) {
    let mask = |c: usize| ((1u32 << c) - 1) as __mmask8;
    for (r, row) in dst.chunks_exact_mut(n).enumerate() {
        for (jb, t) in acc.iter().enumerate() {
            let j = j0 + jb * TN;
            let cols = TN.min(n - j);
            for (half, m) in [(0, mask(cols.min(8))), (8, mask(cols.saturating_sub(8)))] {
                if m == 0 {
                    continue;
                }
                let ld = |q: usize| {
                    // SAFETY: reads 8 of the 16 i32 of row r of tile q.
                    _mm512_cvtepi32_epi64(unsafe {
                        _mm256_load_si256(t.0[q][r][half..].as_ptr().cast())
                    })
                };
                let mid = _mm512_add_epi64(ld(1), ld(2));
                let hh = _mm512_slli_epi64(ld(0), 16);
                let v = _mm512_add_epi64(_mm512_add_epi64(hh, _mm512_slli_epi64(mid, 8)), ld(3));
                let p = row[j + half..].as_mut_ptr().cast::<i64>();
                // SAFETY: the mask covers only elements of `row` (at most n - j - half of them);
                // with `add` they were written by the first k block.
                unsafe {
                    let v = if add {
                        _mm512_add_epi64(v, _mm512_maskz_loadu_epi64(m, p))
                    } else {
                        v
                    };
                    _mm512_mask_storeu_epi64(p, m, v);
                }
            }
        }
    }
}

/// One 16-row stripe of `A` (planes `ah`, `al`, row stride `lda`) against all `nb` column blocks
/// of packed `B` (block stride `ldb` bytes) over `steps` k steps; block `j`'s four accumulator
/// tiles go to `out + 4096*j` bytes.
///
/// # Safety
/// AMX must be granted; `ah`/`al` must be readable for 16 rows of `64*steps` bytes at stride
/// `lda`, `b` for `nb` blocks of `2048*steps` bytes at stride `ldb`, and `out` writable for
/// `nb * 4096` bytes.
#[allow(clippy::too_many_arguments)]
unsafe fn stripe(
    ah: *const u8,
    al: *const u8,
    lda: usize,
    b: *const u8,
    ldb: usize,
    steps: usize,
    nb: usize,
    out: *mut i32,
) {
    // Palette 1; tmm0..tmm7 all 16 rows x 64 bytes.
    let mut cfg = [0u8; 64];
    cfg[0] = 1;
    for t in 0..8 {
        cfg[16 + 2 * t] = 64;
        cfg[48 + t] = 16;
    }
    // tmm0..2, tmm7: hh, hl, lh, ll accumulators; tmm3/4: A high/low; tmm5/6: B high/low.
    // SAFETY: the caller guarantees the memory ranges; the tile state is configured here and
    // released before the block ends.
    unsafe {
        asm!(
            "ldtilecfg [{cfg}]",
            "mov {pah}, {ah}",
            "mov {pal}, {al}",
            "mov {pb}, {b}",
            "tileloadd tmm3, [{pah} + {lda}*1]",
            "tileloadd tmm5, [{pb} + {s64}*1]",
            "tileloadd tmm4, [{pal} + {lda}*1]",
            "tileloadd tmm6, [{pb} + {s64}*1 + 1024]",
            // Per column block: zero the accumulators, then k steps.
            "2:",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm7",
            "mov {kc}, {steps}",
            "3:",
            "tdpbssd tmm0, tmm3, tmm5",
            "tdpbsud tmm1, tmm3, tmm6",
            "dec {kc}",
            "jz 4f",
            // Not the last step: each input tile is reloaded for the next step right after
            // its last use (tile registers are not renamed, so a load waits for its readers).
            "add {pah}, 64",
            "add {pal}, 64",
            "add {pb}, 2048",
            "prefetcht0 [{pb} + 4096]",
            "prefetcht0 [{pb} + 4160]",
            "prefetcht0 [{pb} + 4224]",
            "prefetcht0 [{pb} + 4288]",
            "prefetcht0 [{pb} + 4352]",
            "prefetcht0 [{pb} + 4416]",
            "prefetcht0 [{pb} + 4480]",
            "prefetcht0 [{pb} + 4544]",
            "prefetcht0 [{pb} + 4608]",
            "prefetcht0 [{pb} + 4672]",
            "prefetcht0 [{pb} + 4736]",
            "prefetcht0 [{pb} + 4800]",
            "prefetcht0 [{pb} + 4864]",
            "prefetcht0 [{pb} + 4928]",
            "prefetcht0 [{pb} + 4992]",
            "prefetcht0 [{pb} + 5056]",
            "prefetcht0 [{pb} + 5120]",
            "prefetcht0 [{pb} + 5184]",
            "prefetcht0 [{pb} + 5248]",
            "prefetcht0 [{pb} + 5312]",
            "prefetcht0 [{pb} + 5376]",
            "prefetcht0 [{pb} + 5440]",
            "prefetcht0 [{pb} + 5504]",
            "prefetcht0 [{pb} + 5568]",
            "prefetcht0 [{pb} + 5632]",
            "prefetcht0 [{pb} + 5696]",
            "prefetcht0 [{pb} + 5760]",
            "prefetcht0 [{pb} + 5824]",
            "prefetcht0 [{pb} + 5888]",
            "prefetcht0 [{pb} + 5952]",
            "prefetcht0 [{pb} + 6016]",
            "prefetcht0 [{pb} + 6080]",
            "tileloadd tmm3, [{pah} + {lda}*1]",
            "tdpbusd tmm2, tmm4, tmm5",
            "tileloadd tmm5, [{pb} + {s64}*1]",
            "tdpbuud tmm7, tmm4, tmm6",
            "tileloadd tmm4, [{pal} + {lda}*1]",
            "tileloadd tmm6, [{pb} + {s64}*1 + 1024]",
            "jmp 3b",
            "4:",
            "tdpbusd tmm2, tmm4, tmm5",
            "tdpbuud tmm7, tmm4, tmm6",
            // Load the next block's first step (if any) before storing this one.
            "add {b}, {ldb}",
            "mov {pah}, {ah}",
            "mov {pal}, {al}",
            "mov {pb}, {b}",
            "dec {nb}",
            "jz 5f",
            "tileloadd tmm3, [{pah} + {lda}*1]",
            "tileloadd tmm5, [{pb} + {s64}*1]",
            "tileloadd tmm4, [{pal} + {lda}*1]",
            "tileloadd tmm6, [{pb} + {s64}*1 + 1024]",
            "5:",
            "tilestored [{out} + {s64}*1], tmm0",
            "tilestored [{out} + {s64}*1 + 1024], tmm1",
            "tilestored [{out} + {s64}*1 + 2048], tmm2",
            "tilestored [{out} + {s64}*1 + 3072], tmm7",
            "add {out}, 4096",
            "test {nb}, {nb}",
            "jnz 2b",
            "tilerelease",
            cfg = in(reg) cfg.as_ptr(),
            ah = in(reg) ah,
            al = in(reg) al,
            lda = in(reg) lda,
            b = inout(reg) b => _,
            ldb = in(reg) ldb,
            steps = in(reg) steps,
            nb = inout(reg) nb => _,
            out = inout(reg) out => _,
            s64 = in(reg) 64usize,
            pah = out(reg) _,
            pal = out(reg) _,
            pb = out(reg) _,
            kc = out(reg) _,
            options(nostack),
        )
    };
}
