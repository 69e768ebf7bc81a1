//! The bit-exact fixed-point golden model, and the numeric contract every device follows.
//!
//! # The numeric contract
//!
//! The contract is written down in one place, section 6 of the hardware programming guide
//! (docs/HARDWARE.md, "The numeric contract"): words and dynamic fixed point, exact products in
//! a 48-bit accumulator up to [`systole_core::numeric::MAX_K`], one conversion per output
//! (truncate, nearest-even, stochastic; saturation), the LFSR, `tile_seed` and `lane_seed`
//! written out with their constants and check values, which command's seed a split tile uses,
//! the convolutions' lowering, the host-side elementwise ops and the rule by which the host
//! splits a reduction longer than `MAX_K` into exact partial sums ([`split`]). The HDL, the firmware and
//! every `Device` (crate systole-device) follow it; this module is its reference implementation and
//! the tests hold the others to it bit for bit.
//!
//! Operands are [`QMatrix`] ([`tensor`]). This crate depends on `systole-core` alone: it serves
//! without the trainer, the simulator or the EDA tools.
#![deny(missing_docs)]

pub mod conv;
mod convert;
pub mod elementwise;
pub mod gemm;
mod matmul;
pub mod schedule;
pub mod split;
pub mod tensor;

pub use conv::{
    check_backward_input, check_forward, conv2d_backward_input, conv2d_backward_weights,
    conv2d_forward, Conv2dGeom, ConvGeom,
};
pub use convert::{convert_sequential, convert_tiled, TiledConverter};
pub use elementwise::{bias_add, relu, relu_backward};
pub use matmul::{matmul, matmul_acc, matmul_nt, matmul_tn, OutputSpec};
use systole_core::numeric::{MAX_K, MAX_SHIFT};
pub use tensor::QMatrix;

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
    /// Fractional bits outside `0..=15`.
    #[error("{0} fractional bits do not fit a 16-bit word: choose 0 to 15")]
    FracBits(u32),
    /// The tile size is zero.
    #[error("tile size must be at least 1")]
    Tile,
}

/// Computes and checks `shift = frac_in - frac_out`.
pub fn output_shift(frac_in: u32, frac_out: u32) -> Result<u32, NumericError> {
    let shift = frac_in as i64 - frac_out as i64;
    if frac_out > 15 {
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
mod tests;
