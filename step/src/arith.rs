//! [`Arith`]: the operations a model needs, implemented once in 16-bit fixed point
//! ([`crate::fixed::Fixed`], products on a [`crate::Products`] backend) and once in floating
//! point on the host (`systole-train`'s `FloatArith`: f32, or f16/bf16 storage). The model code
//! ([`crate::model`]) is written once, generic over it, so every precision trains the very same
//! network.

use crate::profile::{section, Section};
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

impl SaturationCount {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &SaturationCount) {
        self.ops += other.ops;
        self.retries += other.retries;
        self.saturated_words += other.saturated_words;
    }
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

    /// Softmax cross-entropy of the logits `t` ([`crate::loss::softmax_xent_scaled`] of their
    /// host values): the mean loss, the correct count and the gradient. An arithmetic may form
    /// it otherwise with the same bits (fixed point does, from the words).
    fn softmax_xent(
        &self,
        t: &Self::T,
        labels: &[u8],
        classes: usize,
        denom: usize,
    ) -> (f32, usize, Vec<f32>) {
        let logits = self.to_host(t);
        let _p = section(Section::Softmax);
        crate::loss::softmax_xent_scaled(&logits, labels, classes, denom)
    }

    /// [`Arith::softmax_xent`]'s loss and correct count only ([`crate::loss::softmax_loss`]).
    fn softmax_loss(&self, t: &Self::T, labels: &[u8], classes: usize) -> (f32, usize) {
        crate::loss::softmax_loss(&self.to_host(t), labels, classes)
    }

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
    /// Max pooling of NCHW rows ([`PoolGeom`]); returns the output and the winning input
    /// column per output.
    fn max_pool(&self, x: &Self::T, g: &PoolGeom) -> (Self::T, Vec<u32>);
    /// Routes `dy` back to the winners of [`Arith::max_pool`] over `g` (where windows overlap,
    /// an input that won several adds their gradients).
    fn max_pool_backward(
        &mut self,
        op: &str,
        dy: &Self::T,
        winners: &[u32],
        g: &PoolGeom,
    ) -> Result<Self::T, Self::Error>;
    /// Average pooling of NCHW rows: each output is its window's mean.
    fn avg_pool(&mut self, op: &str, x: &Self::T, g: &PoolGeom) -> Result<Self::T, Self::Error>;
    /// Gradient of [`Arith::avg_pool`]: each input gets the sum of the output gradients of
    /// the windows holding it, divided by the window's size.
    fn avg_pool_backward(
        &mut self,
        op: &str,
        dy: &Self::T,
        g: &PoolGeom,
    ) -> Result<Self::T, Self::Error>;
    /// `a + b`, elementwise, equal shapes (a residual connection; gradients meeting at a fork).
    fn add(&mut self, op: &str, a: &Self::T, b: &Self::T) -> Result<Self::T, Self::Error>;

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

/// The window of a pooling layer over NCHW rows: `ch` maps of `h x w`, windows of `kh x kw`
/// moved by `stride` in both directions, no padding (a window that would run past the edge is
/// not taken, as in PyTorch's and ONNX's floor mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeom {
    /// Channels.
    pub ch: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Window height.
    pub kh: usize,
    /// Window width.
    pub kw: usize,
    /// Step between windows.
    pub stride: usize,
}

impl PoolGeom {
    /// Output height.
    pub fn out_h(&self) -> usize {
        (self.h - self.kh) / self.stride + 1
    }
    /// Output width.
    pub fn out_w(&self) -> usize {
        (self.w - self.kw) / self.stride + 1
    }
    /// Columns of one input row.
    pub fn in_cols(&self) -> usize {
        self.ch * self.h * self.w
    }
    /// Columns of one output row.
    pub fn out_cols(&self) -> usize {
        self.ch * self.out_h() * self.out_w()
    }
    /// Elements of one window.
    pub fn window(&self) -> usize {
        self.kh * self.kw
    }
    /// Whether windows overlap (an input can be in more than one).
    pub fn overlaps(&self) -> bool {
        self.stride < self.kh || self.stride < self.kw
    }
    /// Whether the windows fit the maps (positive sizes, the window inside the map).
    pub fn valid(&self) -> bool {
        self.ch > 0
            && self.stride > 0
            && (1..=self.h).contains(&self.kh)
            && (1..=self.w).contains(&self.kw)
    }

    /// Calls `f(output column, input column)` for every element of every window, windows in
    /// NCHW output order, each window's elements in row-major order.
    fn each(&self, mut f: impl FnMut(usize, usize)) {
        let (oh, ow) = (self.out_h(), self.out_w());
        for c in 0..self.ch {
            for oy in 0..oh {
                for ox in 0..ow {
                    let o = (c * oh + oy) * ow + ox;
                    for ky in 0..self.kh {
                        for kx in 0..self.kw {
                            let (y, x) = (oy * self.stride + ky, ox * self.stride + kx);
                            f(o, (c * self.h + y) * self.w + x);
                        }
                    }
                }
            }
        }
    }
}

/// Max pooling over NCHW rows, shared by every element type. Ties keep the first element of
/// the window in row-major order, so all precisions route gradients the same way.
pub fn max_pool_slice<E: Copy + PartialOrd>(
    x: &[E],
    rows: usize,
    g: &PoolGeom,
) -> (Vec<E>, Vec<u32>) {
    let (in_cols, out_cols) = (g.in_cols(), g.out_cols());
    let mut win = vec![u32::MAX; rows * out_cols];
    for r in 0..rows {
        let (xr, wr) = (
            &x[r * in_cols..][..in_cols],
            &mut win[r * out_cols..][..out_cols],
        );
        g.each(|o, i| {
            if wr[o] == u32::MAX || xr[i] > xr[wr[o] as usize] {
                wr[o] = i as u32;
            }
        });
    }
    let out = (0..rows * out_cols)
        .map(|k| x[(k / out_cols.max(1)) * in_cols + win[k] as usize])
        .collect();
    (out, win)
}

/// Backward of [`max_pool_slice`]: each output gradient goes to its winner (windows that
/// overlap add their gradients there).
pub fn max_pool_backward_slice<E: Copy, S: Copy + Default + core::ops::Add<Output = S>>(
    dy: &[E],
    winners: &[u32],
    rows: usize,
    in_cols: usize,
    val: impl Fn(E) -> S,
) -> Vec<S> {
    let out_cols = winners.len() / rows.max(1);
    let mut dx = vec![S::default(); rows * in_cols];
    for r in 0..rows {
        for j in 0..out_cols {
            let k = r * out_cols + j;
            let i = r * in_cols + winners[k] as usize;
            dx[i] = dx[i] + val(dy[k]);
        }
    }
    dx
}

/// The sum of each pooling window (NCHW output order, each window summed in row-major order).
pub fn pool_sums<E: Copy, S: Copy + Default + core::ops::Add<Output = S>>(
    x: &[E],
    rows: usize,
    g: &PoolGeom,
    val: impl Fn(E) -> S,
) -> Vec<S> {
    let (in_cols, out_cols) = (g.in_cols(), g.out_cols());
    let mut out = vec![S::default(); rows * out_cols];
    for r in 0..rows {
        let (xr, or) = (
            &x[r * in_cols..][..in_cols],
            &mut out[r * out_cols..][..out_cols],
        );
        g.each(|o, i| or[o] = or[o] + val(xr[i]));
    }
    out
}

/// For each input element, the sum of the outputs `dy` of the windows that hold it (windows in
/// NCHW output order).
pub fn pool_spread<E: Copy, S: Copy + Default + core::ops::Add<Output = S>>(
    dy: &[E],
    rows: usize,
    g: &PoolGeom,
    val: impl Fn(E) -> S,
) -> Vec<S> {
    let (in_cols, out_cols) = (g.in_cols(), g.out_cols());
    let mut out = vec![S::default(); rows * in_cols];
    for r in 0..rows {
        let (dr, or) = (
            &dy[r * out_cols..][..out_cols],
            &mut out[r * in_cols..][..in_cols],
        );
        g.each(|o, i| or[i] = or[i] + val(dr[o]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn pool_picks_max_and_routes_back() {
        // one row, one channel, 2x4: windows [1,5;2,0] and [3,3;9,4]
        let x = [1, 5, 3, 3, 2, 0, 9, 4];
        let g = PoolGeom {
            ch: 1,
            h: 2,
            w: 4,
            kh: 2,
            kw: 2,
            stride: 2,
        };
        let (y, w) = max_pool_slice(&x, 1, &g);
        assert_eq!(y, vec![5, 9]);
        assert_eq!(w, vec![1, 6]);
        let dx = max_pool_backward_slice(&[10, 20], &w, 1, 8, |v: i32| v);
        assert_eq!(dx, vec![0, 10, 0, 0, 0, 0, 20, 0]);
    }

    #[test]
    fn overlapping_windows_sum_and_spread() {
        // 1 channel, 3x3, windows 2x2 stride 1: four windows, the centre in all of them.
        let x: Vec<i64> = (1..=9).collect();
        let g = PoolGeom {
            ch: 1,
            h: 3,
            w: 3,
            kh: 2,
            kw: 2,
            stride: 1,
        };
        assert_eq!((g.out_h(), g.out_w()), (2, 2));
        assert_eq!(pool_sums(&x, 1, &g, |v| v), vec![12, 16, 24, 28]);
        let spread = pool_spread(&[1i64, 10, 100, 1000], 1, &g, |v| v);
        assert_eq!(spread, vec![1, 11, 10, 101, 1111, 1010, 100, 1100, 1000]);
        let (y, w) = max_pool_slice(&x, 1, &g);
        assert_eq!((y, w), (vec![5, 6, 8, 9], vec![4, 5, 7, 8]));
        // Floor mode: a 3-wide map with 2-wide windows moved by 2 has one window per row.
        let g2 = PoolGeom { stride: 2, ..g };
        assert_eq!((g2.out_h(), g2.out_w()), (1, 1));
    }
}
