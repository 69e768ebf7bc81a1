//! Matrix products in the numeric contract: `A·B`, `A·Bᵀ` and `Aᵀ·B`.

use super::{convert_tiled, output_shift, NumericError};
use crate::tensor::QMatrix;
use systole_core::numeric::MAX_K;
use systole_core::Rounding;

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

/// Exact accumulators of `A·B`: `a.rows x b.cols`, row-major, `a.frac + b.frac` fractional bits.
///
/// Computed by [`super::gemm::gemm_exact`] (AVX-512 VNNI where available, exact `f64` dgemm
/// elsewhere); both equal the plain integer sum.
pub fn matmul_acc(a: &QMatrix, b: &QMatrix) -> Result<Vec<i64>, NumericError> {
    if a.cols != b.rows {
        return Err(NumericError::Shape(format!(
            "A is {}x{} and B is {}x{}: A's columns must equal B's rows",
            a.rows, a.cols, b.rows, b.cols
        )));
    }
    if a.cols > MAX_K {
        return Err(NumericError::KTooLong(a.cols));
    }
    Ok(super::gemm::gemm_exact(
        &a.data, &b.data, a.rows, a.cols, b.cols,
    ))
}

/// `C = A·B` in the numeric contract; `tile` is the array size that fixes the stochastic
/// rounding order (it does not change results in the other modes).
pub fn matmul(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    let shift = output_shift(a.frac + b.frac, out.frac)?;
    let acc = matmul_acc(a, b)?;
    let data = convert_tiled(&acc, a.rows, b.cols, shift, out.rounding, out.seed, tile)?;
    QMatrix::from_vec(a.rows, b.cols, out.frac, data)
}

/// `C = A·Bᵀ` (used for the backward pass of a dense layer): defined as `matmul(A, Bᵀ)`.
pub fn matmul_nt(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    matmul(a, &b.transpose(), out, tile)
}

/// `C = Aᵀ·B` (weight gradients): defined as `matmul(Aᵀ, B)`.
pub fn matmul_tn(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    matmul(&a.transpose(), b, out, tile)
}
