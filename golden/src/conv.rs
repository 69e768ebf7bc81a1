//! Two-dimensional convolution in the numeric contract: forward, gradient with respect to the
//! input, gradient with respect to the weights.
//!
//! Layouts: a feature map is a [`QMatrix`] with one row per image and `channels * h * w` columns
//! (NCHW within the row); weights have one row per output channel and `in_ch * kernel * kernel`
//! columns (`[co][ci][ky][kx]`).
//!
//! Each op is defined as one matrix product over a gathered ("lowered") operand, converted once
//! per output under the contract. The lowering fixes which output matrix the stochastic-rounding
//! tiles are laid over, so any device that runs the same product agrees bit for bit:
//!
//! | op | product | output matrix (tiles laid over it) |
//! |----|---------|----------------|
//! | forward | `im2col(x) · Wᵀ` | `(batch·oh·ow) x out_ch` |
//! | backward input | `gather(dy) · W'` | `(batch·h·w) x in_ch` |
//! | backward weights | `dy_rowsᵀ · im2col(x)` | `out_ch x (in_ch·k·k)` |
//!
//! where `gather(dy)[(b,y,x)][(co,ky,kx)] = dy[b][co][oy][ox]` with `y = oy·stride + ky - pad`
//! (zero where no such `oy` exists), and `W'[(co,ky,kx)][ci] = W[co][ci][ky][kx]`. The gradient
//! with respect to the input is thus one exact sum per input element (no rounding between
//! overlapping windows), as the contract demands.

use super::{matmul_at, NumericError, OutputSpec};
use crate::tensor::QMatrix;
pub use systole_core::conv2d::{check_backward_input, check_forward, Conv2dGeom};
pub use systole_core::gather::ConvGeom;
use systole_core::numeric::WORD_BITS;

/// The matrices whose product is the forward convolution: `(im2col(x), Wᵀ)`.
pub fn forward_operands(
    x: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
) -> Result<(QMatrix, QMatrix), NumericError> {
    check_forward(x, w, g)?;
    Ok((im2col(x, g), w.transpose()))
}

/// `im2col(x)`: row `(b, oy, ox)`, column `(ci, ky, kx)`, zero outside the image.
pub fn im2col(x: &QMatrix, g: &Conv2dGeom) -> QMatrix {
    let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
    let cols = g.in_ch * k * k;
    let mut m = QMatrix::zeros(g.batch * oh * ow, cols, x.frac);
    for b in 0..g.batch {
        let img = &x.data[b * x.cols..(b + 1) * x.cols];
        for oy in 0..oh {
            for ox in 0..ow {
                let row = &mut m.data[((b * oh + oy) * ow + ox) * cols..][..cols];
                for ci in 0..g.in_ch {
                    for ky in 0..k {
                        let Some(y) = g.src(oy, ky, g.in_h) else {
                            continue;
                        };
                        for kx in 0..k {
                            if let Some(xx) = g.src(ox, kx, g.in_w) {
                                row[(ci * k + ky) * k + kx] = img[(ci * g.in_h + y) * g.in_w + xx];
                            }
                        }
                    }
                }
            }
        }
    }
    m
}

/// Reorders a `(batch·h·w) x ch` matrix into NCHW rows (`batch x ch·h·w`).
pub fn rows_to_nchw(m: &QMatrix, batch: usize, ch: usize, h: usize, w: usize) -> QMatrix {
    let mut out = QMatrix::zeros(batch, ch * h * w, m.frac);
    for b in 0..batch {
        for p in 0..h * w {
            for c in 0..ch {
                out.data[b * ch * h * w + c * h * w + p] = m.data[(b * h * w + p) * ch + c];
            }
        }
    }
    out
}

/// Reorders NCHW rows (`batch x ch·h·w`) into a `(batch·h·w) x ch` matrix.
pub fn nchw_to_rows(t: &QMatrix, batch: usize, ch: usize, h: usize, w: usize) -> QMatrix {
    let mut out = QMatrix::zeros(batch * h * w, ch, t.frac);
    for b in 0..batch {
        for p in 0..h * w {
            for c in 0..ch {
                out.data[(b * h * w + p) * ch + c] = t.data[b * ch * h * w + c * h * w + p];
            }
        }
    }
    out
}

/// The matrices whose product is the gradient with respect to the input: `(gather(dy), W')`.
pub fn backward_input_operands(
    dy: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
) -> Result<(QMatrix, QMatrix), NumericError> {
    check_backward_input(dy, w, g)?;
    let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
    let cols = g.out_ch * k * k;
    let mut gath = QMatrix::zeros(g.batch * g.in_h * g.in_w, cols, dy.frac);
    for b in 0..g.batch {
        let d = &dy.data[b * dy.cols..(b + 1) * dy.cols];
        for y in 0..g.in_h {
            for x in 0..g.in_w {
                let row = &mut gath.data[((b * g.in_h + y) * g.in_w + x) * cols..][..cols];
                for ky in 0..k {
                    // y = oy*stride + ky - pad  =>  oy = (y + pad - ky) / stride when exact.
                    let Some(ny) = (y + g.pad).checked_sub(ky) else {
                        continue;
                    };
                    if ny % g.stride != 0 || ny / g.stride >= oh {
                        continue;
                    }
                    let oy = ny / g.stride;
                    for kx in 0..k {
                        let Some(nx) = (x + g.pad).checked_sub(kx) else {
                            continue;
                        };
                        if nx % g.stride != 0 || nx / g.stride >= ow {
                            continue;
                        }
                        let ox = nx / g.stride;
                        for co in 0..g.out_ch {
                            row[(co * k + ky) * k + kx] = d[(co * oh + oy) * ow + ox];
                        }
                    }
                }
            }
        }
    }
    let mut wr = QMatrix::zeros(cols, g.in_ch, w.frac);
    for co in 0..g.out_ch {
        for ci in 0..g.in_ch {
            for kk in 0..k * k {
                wr.data[(co * k * k + kk) * g.in_ch + ci] = w.data[co * w.cols + ci * k * k + kk];
            }
        }
    }
    Ok((gath, wr))
}

/// The matrices whose product is the weight gradient: `(dy_rowsᵀ, im2col(x))`.
pub fn backward_weights_operands(
    x: &QMatrix,
    dy: &QMatrix,
    g: &Conv2dGeom,
) -> Result<(QMatrix, QMatrix), NumericError> {
    g.validate()?;
    g.check_map(x, "input", g.in_ch, g.in_h, g.in_w)?;
    g.check_map(dy, "output gradient", g.out_ch, g.out_h(), g.out_w())?;
    let dyt = nchw_to_rows(dy, g.batch, g.out_ch, g.out_h(), g.out_w()).transpose();
    Ok((dyt, im2col(x, g)))
}

/// Forward convolution `y = conv(x, w)`: `batch x out_ch·oh·ow`.
pub fn conv2d_forward(
    x: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    conv2d_forward_at(x, w, g, out, tile, WORD_BITS)
}

/// [`conv2d_forward`] at `word_bits`-wide words (`W`): the lowered product is
/// [`matmul_at`]'s, so operand words outside `W` bits and formats not below `W` are refused
/// and the output saturates to `W` bits.
pub fn conv2d_forward_at(
    x: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
    word_bits: u32,
) -> Result<QMatrix, NumericError> {
    let (p, q) = forward_operands(x, w, g)?;
    Ok(rows_to_nchw(
        &matmul_at(&p, &q, out, tile, word_bits)?,
        g.batch,
        g.out_ch,
        g.out_h(),
        g.out_w(),
    ))
}

/// Gradient with respect to the input: `batch x in_ch·h·w`.
pub fn conv2d_backward_input(
    dy: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    conv2d_backward_input_at(dy, w, g, out, tile, WORD_BITS)
}

/// [`conv2d_backward_input`] at `word_bits`-wide words (as [`conv2d_forward_at`]).
pub fn conv2d_backward_input_at(
    dy: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
    word_bits: u32,
) -> Result<QMatrix, NumericError> {
    let (p, q) = backward_input_operands(dy, w, g)?;
    Ok(rows_to_nchw(
        &matmul_at(&p, &q, out, tile, word_bits)?,
        g.batch,
        g.in_ch,
        g.in_h,
        g.in_w,
    ))
}

/// Gradient with respect to the weights: `out_ch x in_ch·k·k`.
pub fn conv2d_backward_weights(
    x: &QMatrix,
    dy: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
) -> Result<QMatrix, NumericError> {
    conv2d_backward_weights_at(x, dy, g, out, tile, WORD_BITS)
}

/// [`conv2d_backward_weights`] at `word_bits`-wide words (as [`conv2d_forward_at`]).
pub fn conv2d_backward_weights_at(
    x: &QMatrix,
    dy: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
    tile: usize,
    word_bits: u32,
) -> Result<QMatrix, NumericError> {
    let (p, q) = backward_weights_operands(x, dy, g)?;
    matmul_at(&p, &q, out, tile, word_bits)
}
