//! [`Arith`]: the operations a model needs, implemented once in 16-bit fixed point
//! ([`crate::fixed::Fixed`], products on a [`crate::Products`] backend) and once in floating
//! point on the host (`systole-train`'s `FloatArith`: f32, or f16/bf16 storage). The model code
//! ([`crate::model`]) is written once, generic over it, so every precision trains the very same
//! network.

use crate::StepError;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;

/// Saturation counters of one tensor (one operation name, summed over shards).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SaturationCount {
    /// Device operations run (a split reduction counts each chunk).
    pub ops: u64,
    /// Re-runs with one fractional bit fewer because an output word saturated.
    pub retries: u64,
    /// Saturated words (either end of the W-bit range, `-32768` or `32767` at 16 bits) in the
    /// results kept: those of an operation already
    /// at its fewest fractional bits, where no retry is possible.
    pub saturated_words: u64,
}

/// A tensor as stored in a checkpoint.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TensorState {
    /// 16-bit words with their fractional bits.
    Fixed {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Fractional bits.
        frac: u32,
        /// Row-major words.
        data: Vec<i16>,
    },
    /// Floating-point values (f16/bf16 values are exactly representable in f32).
    Float {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Row-major values.
        data: Vec<f32>,
    },
}

/// The arithmetic a model runs on. `op` arguments name the operation for error messages and
/// for per-operation state (e.g. `layer 2 backward dW`).
pub trait Arith {
    /// Tensor type: rows x cols, row-major.
    type T: Clone;
    /// Error of every fallible operation; the step's own errors convert into it.
    type Error: From<StepError>;

    /// Short description, e.g. `fixed16 stochastic on golden 8x8` or `f32`.
    fn describe(&self) -> String;

    /// Called before each training step (and each evaluation batch) with a unique step id;
    /// operation seeds derive from it.
    fn begin_step(&mut self, step: u64);

    /// Brings host values (a data batch, a loss gradient) into the arithmetic.
    fn import(
        &mut self,
        op: &str,
        rows: usize,
        cols: usize,
        v: &[f32],
    ) -> Result<Self::T, Self::Error>;

    /// Real values of a tensor.
    fn to_host(&self, t: &Self::T) -> Vec<f32>;

    /// Shape `(rows, cols)`.
    fn shape(&self, t: &Self::T) -> (usize, usize);

    /// A zero tensor (momentum buffers).
    fn zeros(&self, rows: usize, cols: usize) -> Self::T;

    /// `A·B`.
    fn matmul(&mut self, op: &str, a: &Self::T, b: &Self::T) -> Result<Self::T, Self::Error>;
    /// `A·Bᵀ`.
    fn matmul_nt(&mut self, op: &str, a: &Self::T, b: &Self::T) -> Result<Self::T, Self::Error>;
    /// `Aᵀ·B`.
    fn matmul_tn(&mut self, op: &str, a: &Self::T, b: &Self::T) -> Result<Self::T, Self::Error>;
    /// Forward convolution.
    fn conv_forward(
        &mut self,
        op: &str,
        x: &Self::T,
        w: &Self::T,
        g: &Conv2dGeom,
    ) -> Result<Self::T, Self::Error>;
    /// Convolution gradient with respect to the input.
    fn conv_backward_input(
        &mut self,
        op: &str,
        dy: &Self::T,
        w: &Self::T,
        g: &Conv2dGeom,
    ) -> Result<Self::T, Self::Error>;
    /// Convolution gradient with respect to the weights.
    fn conv_backward_weights(
        &mut self,
        op: &str,
        x: &Self::T,
        dy: &Self::T,
        g: &Conv2dGeom,
    ) -> Result<Self::T, Self::Error>;

    /// `y + bias` with column `j` adding `bias[j / repeat]`.
    fn bias_add(
        &mut self,
        op: &str,
        y: &Self::T,
        bias: &Self::T,
        repeat: usize,
    ) -> Result<Self::T, Self::Error>;
    /// Bias gradient: `db[c] = sum over rows and the `repeat` columns of group c`.
    fn bias_grad(&mut self, op: &str, dy: &Self::T, repeat: usize) -> Result<Self::T, Self::Error>;
    /// `max(x, 0)`.
    fn relu(&self, x: &Self::T) -> Self::T;
    /// `dy` where `x > 0`, else 0.
    fn relu_backward(&self, dy: &Self::T, x: &Self::T) -> Result<Self::T, Self::Error>;
    /// 2x2 max pooling of NCHW rows; returns the output and the winning input column per output.
    fn max_pool2(&self, x: &Self::T, ch: usize, h: usize, w: usize) -> (Self::T, Vec<u32>);
    /// Routes `dy` back to the winners; `in_cols` is the pooled input's column count.
    fn max_pool2_backward(&self, dy: &Self::T, winners: &[u32], in_cols: usize) -> Self::T;

    /// SGD with momentum: `v = momentum·v + g`, `w = w - lr·v`, in this arithmetic.
    fn sgd(
        &mut self,
        op: &str,
        w: &mut Self::T,
        v: &mut Self::T,
        g: &Self::T,
        lr: f32,
        momentum: f32,
    ) -> Result<(), Self::Error>;

    /// Checkpoint form of a tensor.
    fn save(&self, t: &Self::T) -> TensorState;
    /// Restores a tensor from its checkpoint form.
    fn load(&self, s: &TensorState) -> Result<Self::T, Self::Error>;
    /// Per-operation state to checkpoint (fixed point: chosen fractional bits).
    fn state(&self) -> BTreeMap<String, u32>;
    /// Restores [`Self::state`].
    fn set_state(&mut self, s: BTreeMap<String, u32>);

    /// Saturation counters per operation name since creation (empty where nothing saturates:
    /// the float formats).
    fn saturation(&self) -> BTreeMap<String, SaturationCount> {
        Default::default()
    }
}

/// 2x2 max pooling over NCHW rows, shared by every element type. Ties keep the first
/// (top-left) element so all precisions route gradients the same way.
pub fn max_pool2_slice<E: Copy + PartialOrd>(
    x: &[E],
    rows: usize,
    ch: usize,
    h: usize,
    w: usize,
) -> (Vec<E>, Vec<u32>) {
    let (oh, ow) = (h / 2, w / 2);
    let in_cols = ch * h * w;
    let mut out = Vec::with_capacity(rows * ch * oh * ow);
    let mut win = Vec::with_capacity(out.capacity());
    for r in 0..rows {
        for c in 0..ch {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut best = c * h * w + 2 * oy * w + 2 * ox;
                    for (dy, dx) in [(0, 1), (1, 0), (1, 1)] {
                        let i = c * h * w + (2 * oy + dy) * w + 2 * ox + dx;
                        if x[r * in_cols + i] > x[r * in_cols + best] {
                            best = i;
                        }
                    }
                    out.push(x[r * in_cols + best]);
                    win.push(best as u32);
                }
            }
        }
    }
    (out, win)
}

/// Backward of [`max_pool2_slice`]: each output gradient goes to its winner.
pub fn max_pool2_backward_slice<E: Copy + Default>(
    dy: &[E],
    winners: &[u32],
    rows: usize,
    in_cols: usize,
) -> Vec<E> {
    let out_cols = winners.len() / rows.max(1);
    let mut dx = vec![E::default(); rows * in_cols];
    for r in 0..rows {
        for j in 0..out_cols {
            let k = r * out_cols + j;
            dx[r * in_cols + winners[k] as usize] = dy[k];
        }
    }
    dx
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn pool_picks_max_and_routes_back() {
        // one row, one channel, 2x4: windows [1,5;2,0] and [3,3;9,4]
        let x = [1, 5, 3, 3, 2, 0, 9, 4];
        let (y, w) = max_pool2_slice(&x, 1, 1, 2, 4);
        assert_eq!(y, vec![5, 9]);
        assert_eq!(w, vec![1, 6]);
        let dx = max_pool2_backward_slice(&[10, 20], &w, 1, 8);
        assert_eq!(dx, vec![0, 10, 0, 0, 0, 0, 20, 0]);
    }
}
