//! The word width W of a fixed-point run: every tensor the step sends to the array or
//! gets back, every activation, gradient and data word is a signed W-bit word with at most
//! `W - 1` fractional bits, `MIN_WORD_BITS <= W <= WORD_BITS` (8 to 16).
//!
//! The array's conversion is `convert(acc, shift, rounding, random, W)`: shift and round, then
//! saturate to W bits. Saturating to 16 bits and then to W is the same as saturating to W once
//! (the W-bit range lies inside the 16-bit one), so the step runs a product on a 16-bit backend
//! and saturates its words to W ([`saturate_to`]): bit for bit the W-bit conversion, for
//! operands that are W-bit words (their products then fit the accumulator with room to spare).
//! The host-side conversions (`systole_core::elementwise`) are narrowed the same way.
//!
//! Master weights: the update may keep weights and momentum at `master` bits (`W <= master <=
//! 16`, [`Widths`]); an operand wider than W is then rounded to W bits right before each product
//! ([`crate::Fixed`]'s `narrow`), so the array still only ever sees W-bit words. With `master ==
//! W` (the default) nothing is ever narrowed.

use crate::StepError;
use systole_core::numeric::{
    max_frac, saturate, word_max, word_min, MAX_SHIFT, MAX_WORD_BITS, WORD_BITS,
};
use systole_core::tensor::QMatrix;

/// Narrowest word the step trains with: the contract's (`systole_core::numeric`).
pub use systole_core::numeric::MIN_WORD_BITS;

/// The widths of a fixed-point run: `word` (W) for everything the array computes with, `master`
/// for the weights and momentum the update keeps (at least W).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    word: u32,
    master: u32,
}

impl Widths {
    /// Today's contract: 16-bit words, no wider master copy.
    pub const FULL: Widths = Widths {
        word: WORD_BITS,
        master: WORD_BITS,
    };

    /// Checked widths: `MIN_WORD_BITS <= word <= master <= MAX_WORD_BITS`.
    pub fn new(word: u32, master: u32) -> Result<Widths, StepError> {
        if !(MIN_WORD_BITS..=MAX_WORD_BITS).contains(&word) {
            return Err(StepError::WordBits(word));
        }
        if !(word..=MAX_WORD_BITS).contains(&master) {
            return Err(StepError::MasterBits { word, master });
        }
        Ok(Widths { word, master })
    }

    /// W: the width of every word the array sees.
    pub fn word(self) -> u32 {
        self.word
    }

    /// The width of the weights and momentum the update keeps.
    pub fn master(self) -> u32 {
        self.master
    }
}

/// Largest `frac` in `0..=w - 1` at which `max_abs` fits a W-bit word with one unit to spare
/// (`w - 1` for zero).
pub fn frac_for_max_at(max_abs: f64, w: u32) -> u32 {
    let limit = (word_max(w) - 1) as f64;
    // Exact: a power of two times a double, compared with an integer.
    (0..=max_frac(w))
        .rev()
        .find(|&f| max_abs * (1u64 << f) as f64 <= limit)
        .unwrap_or(0)
}

/// Largest output `frac` (at most `w - 1`) for exact integers with `frac_in` fractional bits and
/// largest magnitude `max_abs` to fit a W-bit word, within the contract's shift range
/// `0..=MAX_SHIFT`.
pub fn frac_for_exact_at(max_abs: i64, frac_in: u32, w: u32) -> u32 {
    let lo = frac_in.saturating_sub(MAX_SHIFT);
    let hi = frac_in.min(max_frac(w));
    (lo..=hi)
        .rev()
        .find(|&f| (max_abs >> (frac_in - f)) < word_max(w))
        .unwrap_or(lo)
}

/// Saturates every word of `q` to W bits (a no-op at 16).
pub fn saturate_to(mut q: QMatrix, w: u32) -> QMatrix {
    if w < WORD_BITS {
        for x in &mut q.data {
            *x = saturate(*x as i64, w) as i16;
        }
    }
    q
}

/// Words of `y` at either end of the W-bit range.
pub fn saturated_at(y: &QMatrix, w: u32) -> u64 {
    let (lo, hi) = (word_min(w), word_max(w));
    y.data
        .iter()
        .filter(|&&x| x as i64 == lo || x as i64 == hi)
        .count() as u64
}

/// Whether every word of `q` is a W-bit word with fewer than W fractional bits.
pub fn fits(q: &QMatrix, w: u32) -> bool {
    // Every i16 is a word of 16 or more bits: no need to look at them.
    q.frac < w
        && (w >= 16
            || q.data
                .iter()
                .all(|&x| (word_min(w)..=word_max(w)).contains(&(x as i64))))
}
