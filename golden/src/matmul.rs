//! Matrix products in the numeric contract: `A·B`, `A·Bᵀ` and `Aᵀ·B`.

use super::{output_shift, NumericError, OutputSpec, TiledConverter};
use crate::convert::check_word_bits;
use crate::tensor::QMatrix;
use systole_core::numeric::{word_max, word_min, MAX_K, WORD_BITS};

/// Exact accumulators of `A·B`: `a.rows x b.cols`, row-major, `a.frac + b.frac` fractional bits.
///
/// Computed by [`super::gemm::gemm_exact`] (AMX-INT8 or AVX-512 VNNI where available, exact
/// `f64` dgemm elsewhere); all equal the plain integer sum.
pub fn matmul_acc(a: &QMatrix, b: &QMatrix) -> Result<Vec<i64>, NumericError> {
    check_operands(a, b)?;
    Ok(super::gemm::gemm_exact(
        &a.data, &b.data, a.rows, a.cols, b.cols,
    ))
}

fn check_operands(a: &QMatrix, b: &QMatrix) -> Result<(), NumericError> {
    if a.cols != b.rows {
        return Err(NumericError::Shape(format!(
            "A is {}x{} and B is {}x{}: A's columns must equal B's rows",
            a.rows, a.cols, b.rows, b.cols
        )));
    }
    if a.cols > MAX_K {
        return Err(NumericError::KTooLong(a.cols));
    }
    Ok(())
}

/// The checks of a product at `W`-bit words (`word_bits`, 8 to 16): every `frac` (of `a`, `b`
/// and the output) below `W`, and every operand word in the `W`-bit range. [`matmul_at`] makes
/// them, and so does a device built at `W` before its ports would drop the bits above `W`.
pub fn check_at(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    word_bits: u32,
) -> Result<(), NumericError> {
    check_word_bits(word_bits)?;
    for frac in [a.frac, b.frac, out.frac] {
        if frac >= word_bits {
            return Err(NumericError::FracBitsAt { frac, word_bits });
        }
    }
    if word_bits < WORD_BITS {
        let (lo, hi) = (word_min(word_bits), word_max(word_bits));
        for (operand, m) in [("a", a), ("b", b)] {
            if let Some(&word) = m.data.iter().find(|&&w| !(lo..=hi).contains(&i64::from(w))) {
                return Err(NumericError::WordRange {
                    operand,
                    word,
                    word_bits,
                });
            }
        }
    }
    Ok(())
}

/// `C = A·B` in the numeric contract; `tile` is the array size that fixes the stochastic
/// rounding order (it does not change results in the other modes).
pub fn matmul(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    matmul_at(a, b, out, tile, WORD_BITS)
}

/// [`matmul`] at `word_bits`-wide words (`W`, 8 to 16): the operands' words must lie in the
/// `W`-bit range and every `frac` below `W`; the output saturates to `W` bits. The products
/// and sums are exact, as at 16 bits (the contract's accumulator, `acc_bits(W)`, holds any
/// accepted sum).
pub fn matmul_at(
    a: &QMatrix,
    b: &QMatrix,
    out: &OutputSpec,
    tile: usize,
    word_bits: u32,
) -> Result<QMatrix, NumericError> {
    check_at(a, b, out, word_bits)?;
    let shift = output_shift(a.frac + b.frac, out.frac)?;
    check_operands(a, b)?;
    let n = b.cols;
    let mut converter = TiledConverter::new_at(n, shift, out.rounding, out.seed, tile, word_bits)?;
    let mut data = vec![0i16; a.rows * n];
    // Each row is converted as soon as the kernel hands it over (the same result as
    // `convert_tiled(&matmul_acc(a, b)?, ..)`, without storing every accumulator).
    super::gemm::gemm_exact_rows(&a.data, &b.data, a.rows, a.cols, n, &mut |i0, rows| {
        for (r, acc) in rows.chunks_exact(n).enumerate() {
            let i = i0 + r;
            converter.next_row(acc, &mut data[i * n..(i + 1) * n]);
        }
    });
    QMatrix::from_vec(a.rows, n, out.frac, data)
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
