//! The contract's output conversion applied to whole grids of exact accumulators.
//!
//! [`convert_tiled`] walks the outputs one row at a time with one LFSR per column (the columns of
//! a tile row are independent lanes), so each row is a plain loop over contiguous accumulators
//! with the rounding mode fixed outside it. That loop vectorises; on CPUs with AVX-512 it is
//! compiled a second time for AVX-512 and chosen at run time. Both give exactly
//! [`systole_core::numeric::convert`] for every input (checked in the tests below).

use super::NumericError;
use systole_core::numeric::{lane_seed, tile_seed, word_max, word_min, WORD_BITS};
use systole_core::Rounding;

/// Converts a row-major `rows x cols` grid of exact accumulators to words, following the
/// contract's tile-and-lane LFSR order with tiles of `tile x tile`.
pub fn convert_tiled(
    acc: &[i64],
    rows: usize,
    cols: usize,
    shift: u32,
    rounding: Rounding,
    seed: u32,
    tile: usize,
) -> Result<Vec<i16>, NumericError> {
    assert_eq!(
        acc.len(),
        rows * cols,
        "convert_tiled: accumulator grid has the wrong length"
    );
    let mut converter = TiledConverter::new(cols, shift, rounding, seed, tile)?;
    let mut out = vec![0i16; rows * cols];
    if cols > 0 {
        for (a, o) in acc.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
            converter.next_row(a, o);
        }
    }
    Ok(out)
}

/// [`convert_tiled`] fed one row at a time, in order from row 0 (so a producer can hand over
/// rows as it computes them).
pub struct TiledConverter {
    cols: usize,
    shift: u32,
    rounding: Rounding,
    seed: u32,
    tile: usize,
    row_fn: RowFn,
    /// The word range outputs saturate to (`W`-bit words).
    lo: i64,
    hi: i64,
    /// The LFSR state of every column in the current tile row (only used in stochastic mode).
    lanes: Vec<u32>,
    next: usize,
}

impl TiledConverter {
    /// A converter for rows of `cols` outputs; the arguments are those of [`convert_tiled`].
    pub fn new(
        cols: usize,
        shift: u32,
        rounding: Rounding,
        seed: u32,
        tile: usize,
    ) -> Result<Self, NumericError> {
        Self::new_at(cols, shift, rounding, seed, tile, WORD_BITS)
    }

    /// [`Self::new`] for `word_bits`-wide output words: the same rounding, saturated to
    /// `-2^(W-1)..=2^(W-1)-1` (the words still travel as `i16`).
    pub fn new_at(
        cols: usize,
        shift: u32,
        rounding: Rounding,
        seed: u32,
        tile: usize,
        word_bits: u32,
    ) -> Result<Self, NumericError> {
        check_word_bits(word_bits)?;
        if tile == 0 {
            return Err(NumericError::Tile);
        }
        assert!(
            shift <= systole_core::numeric::MAX_SHIFT,
            "TiledConverter: shift above the contract's maximum"
        );
        // With shift 0 every mode is plain saturation and the random bits are never read.
        let rounding = if shift == 0 {
            Rounding::Truncate
        } else {
            rounding
        };
        Ok(TiledConverter {
            cols,
            shift,
            rounding,
            seed,
            tile,
            lo: word_min(word_bits),
            hi: word_max(word_bits),
            row_fn: row_converter(),
            lanes: vec![0; cols],
            next: 0,
        })
    }

    /// Converts the next row (`acc` and `out` are `cols` long).
    pub fn next_row(&mut self, acc: &[i64], out: &mut [i16]) {
        assert!(
            acc.len() == self.cols && out.len() == self.cols,
            "TiledConverter: row length differs from the column count"
        );
        let i = self.next;
        self.next += 1;
        // A new tile row restarts every lane. Rows past the matrix are padding: the LFSR steps
        // for them too, but nothing after the last real row is used, so nothing is lost.
        if i.is_multiple_of(self.tile) && self.rounding == Rounding::Stochastic {
            for j0 in (0..self.cols).step_by(self.tile) {
                let t = tile_seed(self.seed, i as u32, j0 as u32);
                let end = (j0 + self.tile).min(self.cols);
                for (c, lane) in self.lanes[j0..end].iter_mut().enumerate() {
                    *lane = lane_seed(t, c as u32);
                }
            }
        }
        let range = (self.lo, self.hi);
        (self.row_fn)(acc, out, &mut self.lanes, self.shift, self.rounding, range);
    }
}

/// Converts one row: `out[j] = convert(acc[j], shift, rounding, u_j)` where `u_j` is the next
/// state of `lanes[j]` (stepped only in stochastic mode; `shift == 0` only with `Truncate`),
/// saturated to the word range `(lo, hi)`.
type RowFn = fn(&[i64], &mut [i16], &mut [u32], u32, Rounding, (i64, i64));

/// Refuses a word width outside the contract's `MIN_WORD_BITS..=MAX_WORD_BITS`.
pub(crate) fn check_word_bits(word_bits: u32) -> Result<(), NumericError> {
    use systole_core::numeric::{MAX_WORD_BITS, MIN_WORD_BITS};
    if (MIN_WORD_BITS..=MAX_WORD_BITS).contains(&word_bits) {
        Ok(())
    } else {
        Err(NumericError::WordBits(word_bits))
    }
}

fn row_converter() -> RowFn {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
        {
            return |acc, out, lanes, shift, rounding, range| {
                // SAFETY: the CPU features this function is compiled for were detected above.
                unsafe { convert_row_avx512(acc, out, lanes, shift, rounding, range) }
            };
        }
    }
    convert_row_portable
}

fn convert_row_portable(
    acc: &[i64],
    out: &mut [i16],
    lanes: &mut [u32],
    shift: u32,
    r: Rounding,
    range: (i64, i64),
) {
    convert_row(acc, out, lanes, shift, r, range)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn convert_row_avx512(
    acc: &[i64],
    out: &mut [i16],
    lanes: &mut [u32],
    shift: u32,
    r: Rounding,
    range: (i64, i64),
) {
    convert_row(acc, out, lanes, shift, r, range)
}

/// The row loop, one loop per mode so each is branch-free and vectorises.
#[inline(always)]
fn convert_row(
    acc: &[i64],
    out: &mut [i16],
    lanes: &mut [u32],
    shift: u32,
    rounding: Rounding,
    (lo, hi): (i64, i64),
) {
    let sat = |v: i64| v.clamp(lo, hi) as i16;
    let (acc, lanes) = (&acc[..out.len()], &mut lanes[..out.len()]);
    let mask = (1i64 << shift) - 1;
    match rounding {
        Rounding::Truncate => {
            for (o, &a) in out.iter_mut().zip(acc) {
                *o = sat(a >> shift);
            }
        }
        Rounding::NearestEven => {
            // shift >= 1 here (see convert_tiled).
            let half = 1i64 << (shift - 1);
            for (o, &a) in out.iter_mut().zip(acc) {
                let (q, rem) = (a >> shift, a & mask);
                let up = (rem > half) | ((rem == half) & (q & 1 == 1));
                *o = sat(q + up as i64);
            }
        }
        Rounding::Stochastic => {
            for ((o, &a), s) in out.iter_mut().zip(acc).zip(lanes.iter_mut()) {
                // Lfsr32::step written branch-free: shift right, XOR the taps if the LSB was 1.
                let u = (*s >> 1) ^ ((*s & 1).wrapping_neg() & systole_core::numeric::LFSR_TAPS);
                *s = u;
                *o = sat((a + (u as i64 & mask)) >> shift);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use systole_core::numeric::{convert, Lfsr32, ACC_MAX, ACC_MIN, MAX_SHIFT};

    /// The contract's order, element by element, with `Lfsr32` and `convert` themselves.
    fn reference(
        acc: &[i64],
        rows: usize,
        cols: usize,
        shift: u32,
        r: Rounding,
        seed: u32,
        tile: usize,
    ) -> Vec<i16> {
        let mut out = vec![0i16; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                let (i0, j0) = (i / tile * tile, j / tile * tile);
                let mut l = Lfsr32::new(lane_seed(
                    tile_seed(seed, i0 as u32, j0 as u32),
                    (j - j0) as u32,
                ));
                let u = (0..=i - i0).map(|_| l.step()).last().unwrap();
                out[i * cols + j] = convert(acc[i * cols + j], shift, r, u, 16) as i16;
            }
        }
        out
    }

    fn accumulator() -> impl Strategy<Value = i64> {
        // Full 48-bit range, the extremes, and small values around rounding ties.
        prop_oneof![4 => ACC_MIN..=ACC_MAX, 1 => Just(ACC_MIN), 1 => Just(ACC_MAX), 2 => -70000i64..70000, 2 => -64i64..64]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn tiled_conversion_matches_the_contract(
            (rows, cols) in (0usize..20, 0usize..45),
            shift in 0u32..=32, r in prop_oneof![Just(Rounding::Truncate), Just(Rounding::NearestEven), Just(Rounding::Stochastic)],
            seed: u32, tile in 1usize..12,
            pool in proptest::collection::vec(accumulator(), 900),
        ) {
            let acc = &pool[..rows * cols];
            let got = convert_tiled(acc, rows, cols, shift, r, seed, tile).unwrap();
            prop_assert_eq!(got, reference(acc, rows, cols, shift, r, seed, tile));
        }
    }

    #[test]
    fn every_row_kernel_matches_convert_on_ties_and_extremes() {
        // Exact halves (even and odd quotients), one unit around them, and the range ends, for
        // every shift; both row kernels (portable and the dispatched one) against `convert`.
        for shift in 0..=MAX_SHIFT {
            let mut acc = vec![ACC_MIN, ACC_MAX, 0, -1, 1];
            for q in -3i64..=3 {
                for d in -1i64..=1 {
                    let v = (q << shift) + if shift > 0 { 1i64 << (shift - 1) } else { 0 } + d;
                    acc.push(v);
                    acc.push(v.wrapping_add(1 << 20));
                }
            }
            for r in Rounding::ALL {
                let r = if shift == 0 { Rounding::Truncate } else { r };
                for f in [convert_row_portable as RowFn, row_converter()] {
                    let seeds: Vec<u32> = (0..acc.len() as u32)
                        .map(|i| lane_seed(0xDEAD_BEEF, i))
                        .collect();
                    let mut lanes = seeds.clone();
                    let mut out = vec![0i16; acc.len()];
                    f(&acc, &mut out, &mut lanes, shift, r, (-32768, 32767));
                    for (j, &a) in acc.iter().enumerate() {
                        let u = Lfsr32::new(seeds[j]).step();
                        assert_eq!(
                            out[j] as i64,
                            convert(a, shift, r, u, 16),
                            "shift {shift} {r:?} acc {a}"
                        );
                    }
                }
            }
        }
    }
}
