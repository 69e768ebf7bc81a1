//! [`QMatrix`]: a row-major matrix of fixed-point words with its own fractional bits
//! (dynamic fixed point: each tensor has its own scale).

use crate::NumericError;

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

    /// Wraps existing words; fails when `data.len() != rows * cols` or `frac > 15`.
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
        if frac > 15 {
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
                let x = (v as f64 * scale).round_ties_even();
                x.clamp(i16::MIN as f64, i16::MAX as f64) as i16
            })
            .collect();
        QMatrix::from_vec(rows, cols, frac, data)
    }

    /// Wraps words of the `fixed` crate: `FixedI16<F>` carries its fractional bits in its type,
    /// the user-facing way to hand tensors to systole.
    pub fn from_fixed<F: fixed::types::extra::LeEqU16>(
        rows: usize,
        cols: usize,
        values: &[fixed::FixedI16<F>],
    ) -> Result<Self, NumericError> {
        QMatrix::from_vec(
            rows,
            cols,
            F::U32,
            values.iter().map(|v| v.to_bits()).collect(),
        )
    }

    /// The words as `FixedI16<F>`; fails unless `F` is this matrix's fractional bits (no silent
    /// rescaling).
    pub fn to_fixed<F: fixed::types::extra::LeEqU16>(
        &self,
    ) -> Result<Vec<fixed::FixedI16<F>>, NumericError> {
        if F::U32 != self.frac {
            return Err(NumericError::Shape(format!(
                "matrix has {} fractional bits but FixedI16 with {} was asked for",
                self.frac,
                F::U32
            )));
        }
        Ok(self
            .data
            .iter()
            .map(|&w| fixed::FixedI16::<F>::from_bits(w))
            .collect())
    }

    /// The real values.
    pub fn to_f32(&self) -> Vec<f32> {
        let scale = 1.0 / (1u64 << self.frac) as f32;
        self.data.iter().map(|&w| w as f32 * scale).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use fixed::types::extra::{U12, U8};
    use fixed::FixedI16;

    #[test]
    fn fixed_round_trip_keeps_bits_and_scale() {
        let v = [
            FixedI16::<U8>::from_num(1.5),
            FixedI16::<U8>::from_num(-0.25),
            FixedI16::<U8>::MIN,
        ];
        let m = QMatrix::from_fixed(1, 3, &v).unwrap();
        assert_eq!((m.frac, m.data.clone()), (8, vec![384, -64, i16::MIN]));
        assert_eq!(m.to_f32(), vec![1.5, -0.25, -128.0]);
        assert_eq!(m.to_fixed::<U8>().unwrap(), v.to_vec());
        assert!(m.to_fixed::<U12>().is_err());
    }

    #[test]
    fn from_f32_rounds_to_nearest_even_and_saturates() {
        let m = QMatrix::from_f32(1, 4, 1, &[0.25, 0.75, 1e6, -1e6]).unwrap();
        assert_eq!(m.data, vec![0, 2, i16::MAX, i16::MIN]);
    }
}
