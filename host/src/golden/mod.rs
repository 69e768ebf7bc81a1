//! The bit-exact fixed-point golden model, and the numeric contract every device follows.
//!
//! # The numeric contract
//!
//! This is the one place the contract is written down; the HDL (`systole-hdl`), the firmware
//! and every [`crate::device::Device`] follow it, and the tests hold them to it bit for bit.
//!
//! **Words.** Tensors hold signed two's-complement 16-bit words. A tensor's value is
//! `word / 2^frac`, where `frac` (0 to 15) is chosen per tensor by the host: dynamic fixed
//! point. The most negative word, -32768, is a legal value.
//!
//! **Products and accumulation.** `a * b` is exact (32 bits; the largest magnitude is
//! `(-32768)^2 = 2^30`). A dot product is summed exactly in a 48-bit accumulator, as in a
//! DSP48E1's P register, whose largest value is `2^47 - 1`. A dot product may be at most
//! [`MAX_K`] = `2^17 - 1` long: then `|sum| <= (2^17 - 1) * 2^30 < 2^47`, so no accepted dot
//! product can overflow (at `2^17` the all-`(-32768)^2` sum would be exactly `2^47`). Longer ones
//! are rejected with [`NumericError::KTooLong`]; the host splits them (below). The accumulator
//! has `frac_a + frac_b` fractional bits.
//!
//! **One conversion per output.** Each output is converted exactly once, from the exact
//! accumulator to the output format with `frac_out` fractional bits:
//! `shift = frac_a + frac_b - frac_out` must be in `0..=32` ([`NumericError::Shift`] otherwise);
//! the accumulator is shifted right by `shift` with the chosen [`Rounding`](systole_core::Rounding):
//!
//! * `Truncate`: drop the low bits, i.e. floor (toward minus infinity; `-0.5` becomes `-1`).
//! * `NearestEven`: nearest; an exact half goes to the even neighbour (`2.5 -> 2`, `3.5 -> 4`,
//!   `-2.5 -> -2`).
//! * `Stochastic`: add the low `shift` bits of a random 32-bit value `u`, then floor. The result
//!   rounds up with probability equal to the dropped fraction, so its mean is the exact value.
//!
//! then saturated to `-32768..=32767` (never wrapped). Intermediate sums are formed wide enough
//! never to wrap (49 bits for the stochastic addition).
//!
//! **Where stochastic bits come from.** From the 32-bit Galois LFSR
//! [`systole_core::Lfsr32`] (polynomial `x^32 + x^22 + x^2 + x + 1`, mask `0x8020_0003`,
//! right-shifting). Outputs are grouped into `n x n` tiles, `n` the array size
//! (`ArrayConfig::size`), tile origins at multiples of `n`. The tile at `(i0, j0)` of an operation
//! seeded with `seed` has tile seed `t = tile_seed(seed, i0, j0)`; column `c` of the tile has its
//! own LFSR started at `lane_seed(t, c)`; the LFSR steps once before converting each row
//! `r = 0..n` (padding rows included) and output `(i0 + r, j0 + c)` uses the state after `r + 1`
//! steps. The LFSR steps in every mode (only `Stochastic` reads it). So results depend on the
//! array size only in stochastic mode, and the golden model takes that size as `tile`.
//!
//! Host-side elementwise ops (bias add, ReLU, SGD updates) use the same conversion on the exact
//! sum or product; their stochastic bits come from one LFSR seeded by the caller and stepped
//! once per element in row-major order.
//!
//! **Long reductions.** A reduction longer than [`MAX_K`] is never one device operation; the
//! host computes it as exact partial sums ([`split`]), by one rule:
//!
//! 1. The reduction is cut into consecutive chunks of whole *units*: one index for a matrix
//!    product (the K of `A·B`, `A·Bᵀ`, `Aᵀ·B`), one image (`out_h·out_w` indices) for a
//!    convolution's weight gradient. Each chunk holds `floor(MAX_K / unit)` units, the last one
//!    the rest ([`split::reduction_chunks`]); a unit longer than `MAX_K` is an error.
//! 2. Chunk `j` is one operation of this contract on its slice of the operands (its own output
//!    tiles, stochastic bits and output fractional bits `f_j`), seeded with
//!    [`split::chunk_seed`]`(s, j)`, where `s` is the seed the host gives that operation.
//! 3. Each chunk word `w` becomes the exact integer `w · 2^(15 - f_j)` (15 =
//!    [`split::SUM_FRAC`] fractional bits), and the chunks are summed exactly in `i64`.
//! 4. The sum is converted once, as a host-side result: to the largest fractional bits
//!    `F <= 15` at which its largest magnitude `M` fits a word (`M >> (15 - F) < 32767`; 0 if
//!    none does), with the elementwise rule above (one LFSR seeded by the host, row-major).
//!
//! Steps 3 and 4 are also how data-parallel training sums the gradients of its shards.

pub mod conv;
mod convert;
pub mod elementwise;
pub mod gemm;
mod matmul;
pub mod split;

pub use conv::{conv2d_backward_input, conv2d_backward_weights, conv2d_forward, Conv2dGeom};
pub use convert::{convert_sequential, convert_tiled, TiledConverter};
pub use elementwise::{bias_add, relu, relu_backward};
pub use matmul::{matmul, matmul_acc, matmul_nt, matmul_tn, OutputSpec};
use systole_core::numeric::MAX_K;

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
    /// The output needs a shift outside `0..=32`.
    #[error("output shift {shift} (= input fractional bits {frac_in} - output fractional bits {frac_out}) is outside 0..=32: choose output fractional bits between {} and {frac_in}", frac_in.saturating_sub(32))]
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
    if !(0..=systole_core::numeric::MAX_SHIFT as i64).contains(&shift) {
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
