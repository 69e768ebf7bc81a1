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
/// Computed with `f64` dgemm: every product (`<= 2^30`) and every partial sum (`< 2^47`) is an
/// integer below `2^53`, so each is exact whatever order the kernel adds in, and the result
/// equals the integer sum. This makes the golden model about as fast as the best float kernel.
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
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let af: Vec<f64> = a.data.iter().map(|&x| x as f64).collect();
    let bf: Vec<f64> = b.data.iter().map(|&x| x as f64).collect();
    let mut cf = vec![0f64; m * n];
    if m > 0 && n > 0 && k > 0 {
        // SAFETY: the slices are exactly m*k, k*n and m*n long and the strides describe
        // row-major layouts inside them.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                1.0,
                af.as_ptr(),
                k as isize,
                1,
                bf.as_ptr(),
                n as isize,
                1,
                0.0,
                cf.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    }
    Ok(cf.into_iter().map(|x| x as i64).collect())
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
