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
use std::sync::OnceLock;

mod pack;
use pack::{pack_a, pack_b};

/// Rows of `A` (and `C`) per tile.
const TM: usize = 16;
/// Columns of `C` per tile: 16 `i32`, one 64-byte tile row.
const TN: usize = 16;
/// k per tile product: the 64 bytes of an `A` tile row.
const TK: usize = 64;
/// Bytes of one packed `B` tile: 16 rows (k quads) of 16 columns x 4 k bytes.
const BTILE: usize = 1024;
/// Column blocks per tile call: their accumulators (32 KiB) stay in L1 for the widening.
const GROUP: usize = 8;
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

/// The four `i32` accumulator tiles (hh, hl, lh, ll) of one 16x16 output block.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Acc([[[i32; TN]; TM]; 4]);

/// `C = A·B` handed to `sink` in row order, up to 16 rows at a time: `sink(first_row, rows)`
/// with `rows` holding whole rows of `n`. Not called when `m` or `n` is 0.
///
/// Caller: [`available`] returned true and the operand lengths match the shape.
pub(super) fn gemm_rows(
    a: &[i16],
    b: &[i16],
    m: usize,
    k: usize,
    n: usize,
    sink: &mut dyn FnMut(usize, &[i64]),
) {
    assert!(available(), "amx::gemm_rows called without AMX");
    // SAFETY: available() checked AVX-512F.
    unsafe { gemm_avx512(a, b, m, k, n, sink) }
}

/// [`gemm_rows`] compiled with AVX-512F (the packing and widening helpers use it and SSE2).
#[target_feature(enable = "avx512f")]
fn gemm_avx512(
    a: &[i16],
    b: &[i16],
    m: usize,
    k: usize,
    n: usize,
    sink: &mut dyn FnMut(usize, &[i64]),
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        return sink(0, &vec![0; m * n]);
    }
    let kp = k.div_ceil(TK) * TK;
    let (nk, nb) = (kp / TK, n.div_ceil(TN));
    let (ah, al) = pack_a(a, m, k, kp);
    let bp = pack_b(b, k, n, nk, nb);
    let mut acc = vec![Acc([[[0; TN]; TM]; 4]); GROUP.min(nb)];
    // One stripe of exact results, small enough to stay in cache until the sink reads it.
    let mut rows_buf = vec![0i64; TM * n];
    for i0 in (0..m).step_by(TM) {
        let rows = TM.min(m - i0);
        let dst = &mut rows_buf[..rows * n];
        for k0 in (0..kp).step_by(KBLOCK) {
            let steps = KBLOCK.min(kp - k0) / TK;
            for g0 in (0..nb).step_by(GROUP) {
                let g = GROUP.min(nb - g0);
                // SAFETY: AMX was granted (asserted in `gemm_rows`). The A planes have whole
                // tiles of rows (i0 + 16 <= their row count) of kp bytes and
                // k0 + 64*steps <= kp; the B panel of each column block is nk steps of 2 tiles,
                // g0 + g <= nb and k0/64 + steps <= nk; `acc` holds g `Acc`s (4 tiles each).
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
                widen(&acc[..g], dst, n, g0 * TN, k0 > 0);
            }
        }
        sink(i0, dst);
    }
}

/// Widens the accumulators of column blocks starting at column `j0` into `dst` (`rows x n`):
/// overwrites on the first k block, adds on later ones.
#[target_feature(enable = "avx512f")]
fn widen(acc: &[Acc], dst: &mut [i64], n: usize, j0: usize, add: bool) {
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
                let p = row[j + half..].as_mut_ptr();
                // SAFETY: the mask covers only elements of `row` (at most n - j - half of them).
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
            // Prefetch the two B tiles (32 lines) of the step after the one being loaded.
            ".set pf_off, 2048",
            ".rept 32",
            "prefetcht0 [{pb} + pf_off]",
            ".set pf_off, pf_off + 64",
            ".endr",
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
