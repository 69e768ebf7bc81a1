//! [`QMatrix`] (defined in `systole_core::tensor`, shared with the training step) and its
//! conversions from and to the `fixed` crate's words ([`FixedWords`]).

use systole_core::tensor::NumericError;
pub use systole_core::tensor::QMatrix;

/// `QMatrix` from and to words of the `fixed` crate: `FixedI16<F>` carries its fractional bits
/// in its type, the user-facing way to hand tensors to systole. With the trait in scope,
/// `QMatrix::from_fixed(..)` and `m.to_fixed::<F>()` read as methods.
pub trait FixedWords: Sized {
    /// Wraps `FixedI16<F>` words as a `rows x cols` matrix with `F` fractional bits.
    fn from_fixed<F: fixed::types::extra::LeEqU16>(
        rows: usize,
        cols: usize,
        values: &[fixed::FixedI16<F>],
    ) -> Result<Self, NumericError>;

    /// The words as `FixedI16<F>`; fails unless `F` is this matrix's fractional bits (no silent
    /// rescaling).
    fn to_fixed<F: fixed::types::extra::LeEqU16>(
        &self,
    ) -> Result<Vec<fixed::FixedI16<F>>, NumericError>;
}

impl FixedWords for QMatrix {
    fn from_fixed<F: fixed::types::extra::LeEqU16>(
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

    fn to_fixed<F: fixed::types::extra::LeEqU16>(
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
}
