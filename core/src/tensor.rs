//! [`QMatrix`]: a row-major matrix of fixed-point words with its own fractional bits
//! (dynamic fixed point: each tensor has its own scale), the errors of the numeric contract
//! ([`NumericError`]) and an operation's output format ([`OutputSpec`]). Shared by the golden
//! model (`systole-golden`) and the training step (`systole-step`), which runs on the host and on
//! the board's CPU.

use crate::numeric::{MAX_K, MAX_SHIFT};
use crate::Rounding;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// A `rows x cols` matrix of signed 16-bit words, value of each = `word / 2^frac`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QMatrix {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Fractional bits shared by every element.
    pub frac: u32,
    /// `rows * cols` words, row-major.
    pub data: Vec<i16>,
}

impl QMatrix {
    /// A zero matrix.
    pub fn zeros(rows: usize, cols: usize, frac: u32) -> Self {
        QMatrix {
            rows,
            cols,
            frac,
            data: vec![0; rows * cols],
        }
    }

    /// Wraps existing words; fails when `data.len() != rows * cols` or `frac > MAX_FRAC`.
    pub fn from_vec(
        rows: usize,
        cols: usize,
        frac: u32,
        data: Vec<i16>,
    ) -> Result<Self, NumericError> {
        // Checked: the shape may come from a file (a checkpoint), and must not wrap.
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(NumericError::Shape(format!(
                "{} words given for a {rows}x{cols} matrix",
                data.len(),
            )));
        }
        if frac > crate::numeric::MAX_FRAC {
            return Err(NumericError::FracBits(frac));
        }
        Ok(QMatrix {
            rows,
            cols,
            frac,
            data,
        })
    }

    /// Quantizes real values to nearest-even with saturation.
    pub fn from_f32(
        rows: usize,
        cols: usize,
        frac: u32,
        values: &[f32],
    ) -> Result<Self, NumericError> {
        let scale = (1u64 << frac) as f64;
        let data = values
            .iter()
            .map(|&v| {
                let x = libm::rint(v as f64 * scale);
                x.clamp(i16::MIN as f64, i16::MAX as f64) as i16
            })
            .collect();
        QMatrix::from_vec(rows, cols, frac, data)
    }

    /// The real values: `w as f32 * 2^-frac` of each word, built from its bits ([`word_to_f32`]).
    pub fn to_f32(&self) -> Vec<f32> {
        let frac = self.frac;
        self.data.iter().map(|&w| word_to_f32(w, frac)).collect()
    }

    /// Element `(r, c)`.
    #[inline]
    pub fn at(&self, r: usize, c: usize) -> i16 {
        self.data[r * self.cols + c]
    }

    /// The transpose (same fractional bits).
    pub fn transpose(&self) -> QMatrix {
        let mut out = QMatrix::zeros(self.cols, self.rows, self.frac);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.data[c * self.rows + r] = self.data[r * self.cols + c];
            }
        }
        out
    }
}

/// `w as f32 * (1.0 / (1u64 << frac) as f32)`, exact (a word has fewer bits than an f32's
/// significand, and the scale is a power of two in the normal range), written as the float's
/// bits: a 32-bit CPU without an FPU otherwise calls two soft-float routines a word.
#[inline]
pub fn word_to_f32(w: i16, frac: u32) -> f32 {
    if w == 0 || frac > 63 {
        // +0.0 (the product of +0.0 and a positive scale); frac > 63 is no tensor's (the
        // expression itself, which refuses it as it always did).
        return w as f32 * (1.0 / (1u64 << frac) as f32);
    }
    let sign = u32::from(w < 0) << 31;
    let m = i32::from(w).unsigned_abs();
    // The top bit's place: |w| = 1.f · 2^top; the biased exponent stays above 63.
    let top = 31 - m.leading_zeros();
    let exponent = (127 + top - frac) << 23;
    f32::from_bits(sign | exponent | ((m << (23 - top)) & 0x7F_FFFF))
}

/// Format and rounding of an operation's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputSpec {
    /// Fractional bits of the output tensor.
    pub frac: u32,
    /// Rounding mode of the one conversion.
    pub rounding: Rounding,
    /// Operation seed for stochastic rounding (see the contract: `tile_seed`).
    pub seed: u32,
}

/// Why a golden-model operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NumericError {
    /// Operand shapes do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A dot product longer than the accumulator can hold exactly.
    #[error("dot product of length {0} exceeds the contract's limit of {MAX_K}: split the reduction on the host")]
    KTooLong(usize),
    /// The output needs a shift outside `0..=MAX_SHIFT`.
    #[error("output shift {shift} (= input fractional bits {frac_in} - output fractional bits {frac_out}) is outside 0..={MAX_SHIFT}: choose output fractional bits between {} and {frac_in}", frac_in.saturating_sub(MAX_SHIFT))]
    Shift {
        /// Computed shift (may be negative).
        shift: i64,
        /// Fractional bits of the accumulator (`frac_a + frac_b`).
        frac_in: u32,
        /// Requested output fractional bits.
        frac_out: u32,
    },
    /// Fractional bits outside `0..=MAX_FRAC`.
    #[error("{0} fractional bits do not fit a {WORD_BITS}-bit word: choose 0 to {MAX_FRAC}", WORD_BITS = crate::numeric::WORD_BITS, MAX_FRAC = crate::numeric::MAX_FRAC)]
    FracBits(u32),
    /// A word width outside the contract's `MIN_WORD_BITS..=MAX_WORD_BITS`.
    #[error("word width {0} bits is not supported: choose {min} to {max} bits", min = crate::numeric::MIN_WORD_BITS, max = crate::numeric::MAX_WORD_BITS)]
    WordBits(u32),
    /// A tensor's fractional bits are not below the word width it is used at.
    #[error("{frac} fractional bits do not fit a {word_bits}-bit word: choose 0 to {}", word_bits - 1)]
    FracBitsAt {
        /// The tensor's (or the output's) fractional bits.
        frac: u32,
        /// The word width.
        word_bits: u32,
    },
    /// An operand word outside the `word_bits`-wide range.
    #[error("operand {operand} holds the word {word}, outside the {word_bits}-bit range {}..={}: quantise it to W bits first", crate::numeric::word_min(*word_bits), crate::numeric::word_max(*word_bits))]
    WordRange {
        /// Which operand (`"a"` or `"b"`).
        operand: &'static str,
        /// The offending word.
        word: i16,
        /// The word width.
        word_bits: u32,
    },
    /// The tile size is zero.
    #[error("tile size must be at least 1")]
    Tile,
}

/// Computes and checks `shift = frac_in - frac_out`.
pub fn output_shift(frac_in: u32, frac_out: u32) -> Result<u32, NumericError> {
    let shift = frac_in as i64 - frac_out as i64;
    if frac_out > crate::numeric::MAX_FRAC {
        return Err(NumericError::FracBits(frac_out));
    }
    if !(0..=MAX_SHIFT as i64).contains(&shift) {
        return Err(NumericError::Shift {
            shift,
            frac_in,
            frac_out,
        });
    }
    Ok(shift as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word at every fraction a tensor can have, and beyond: the float expression's bits.
    #[test]
    fn word_to_f32_is_the_float_product() {
        for frac in 0..=63 {
            let scale = 1.0 / (1u64 << frac) as f32;
            for w in i16::MIN..=i16::MAX {
                let want = w as f32 * scale;
                assert_eq!(word_to_f32(w, frac).to_bits(), want.to_bits(), "{w} {frac}");
            }
        }
    }

    #[test]
    fn from_f32_rounds_to_nearest_even_and_saturates() {
        let m = QMatrix::from_f32(1, 4, 1, &[0.25, 0.75, 1e6, -1e6]).unwrap();
        assert_eq!(m.data, vec![0, 2, i16::MAX, i16::MIN]);
    }
}
