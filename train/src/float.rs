//! Floating-point baselines on the host: f32, and f16 / bf16 trained the way mixed-precision
//! training does it (via `half`): every operation reads its operands in the format and rounds
//! its result to it (arithmetic inside an operation is f32), while the weights and their momentum
//! are f32 *master* copies that the SGD update writes unrounded. A bf16 weight would lose every
//! update smaller than half its ulp (2^-9 of its size, 2^-12 for f16): late in training most of
//! them, which cost bf16 a point on Fashion-MNIST (README). Masters were chosen over stochastic
//! rounding of the update because they keep the runs deterministic with no extra state in the
//! checkpoint, and cost only the rounding of each weight as an operand.

use super::arith::{
    max_pool_backward_slice, max_pool_slice, pool_spread, pool_sums, Arith, PoolGeom, TensorState,
};
use super::TrainError;
use std::borrow::Cow;
use std::collections::BTreeMap;
use systole_golden::Conv2dGeom;

/// A row-major f32 matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct FMat {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Values.
    pub data: Vec<f32>,
}

/// Storage format of the float baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatFormat {
    /// IEEE single precision.
    F32,
    /// IEEE half precision (storage only).
    F16,
    /// bfloat16 (storage only).
    Bf16,
}

impl FloatFormat {
    /// Rounds to the storage format (nearest even, as `half` does).
    #[inline]
    pub fn round(self, x: f32) -> f32 {
        match self {
            FloatFormat::F32 => x,
            FloatFormat::F16 => half::f16::from_f32(x).to_f32(),
            FloatFormat::Bf16 => half::bf16::from_f32(x).to_f32(),
        }
    }

    /// Name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FloatFormat::F32 => "f32",
            FloatFormat::F16 => "f16",
            FloatFormat::Bf16 => "bf16",
        }
    }
}

/// [`Arith`] in floating point on the host.
#[derive(Clone, Debug)]
pub struct FloatArith {
    format: FloatFormat,
}

impl FloatArith {
    /// Float arithmetic storing tensors in `format`.
    pub fn new(format: FloatFormat) -> Self {
        FloatArith { format }
    }

    fn store(&self, rows: usize, cols: usize, mut data: Vec<f32>) -> FMat {
        if self.format != FloatFormat::F32 {
            data.iter_mut().for_each(|x| *x = self.format.round(*x));
        }
        FMat { rows, cols, data }
    }

    /// `v` as an operand of this format: a no-op for f32 and for the tensors the operations
    /// produced (already rounded), the rounding of a master weight for f16 / bf16.
    fn operand<'a>(&self, v: &'a [f32]) -> Cow<'a, [f32]> {
        if self.format == FloatFormat::F32 {
            Cow::Borrowed(v)
        } else {
            Cow::Owned(v.iter().map(|&x| self.format.round(x)).collect())
        }
    }

    /// `A·B` with either operand read transposed (`(matrix, transposed)`): the three
    /// products of the trait share this shape check and differ only in the strides.
    fn product(
        &mut self,
        op: &str,
        (a, at): (&FMat, bool),
        (b, bt): (&FMat, bool),
    ) -> Result<FMat, TrainError> {
        // Rows, columns, row stride and column stride of `t` as the product reads it.
        let view = |t: &FMat, transposed: bool| match transposed {
            false => (t.rows, t.cols, t.cols as isize, 1),
            true => (t.cols, t.rows, 1, t.cols as isize),
        };
        let ((m, k, a_rs, a_cs), (kb, n, b_rs, b_cs)) = (view(a, at), view(b, bt));
        if k != kb {
            let mark = |t: bool| if t { "ᵀ" } else { "" };
            return Err(shape_err(
                op,
                format!(
                    "A{}·B{} with A {}x{} and B {}x{}",
                    mark(at),
                    mark(bt),
                    a.rows,
                    a.cols,
                    b.rows,
                    b.cols
                ),
            ));
        }
        let c = self.gemm(
            m,
            k,
            n,
            &self.operand(&a.data),
            a_rs,
            a_cs,
            &self.operand(&b.data),
            b_rs,
            b_cs,
        );
        Ok(self.store(m, n, c))
    }

    /// `C = op(A)·op(B)` through `sgemm`; strides express the transposes without copying.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        m: usize,
        k: usize,
        n: usize,
        a: &[f32],
        rsa: isize,
        csa: isize,
        b: &[f32],
        rsb: isize,
        csb: isize,
    ) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        if m > 0 && n > 0 && k > 0 {
            // SAFETY: the callers pass slices of exactly m*k and k*n elements with strides that
            // stay inside them, and c is m*n long and row-major.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    rsa,
                    csa,
                    b.as_ptr(),
                    rsb,
                    csb,
                    0.0,
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
        }
        c
    }
}

fn shape_err(op: &str, msg: String) -> TrainError {
    TrainError::Shape {
        op: op.to_string(),
        msg,
    }
}

/// im2col on f32 NCHW rows: row `(b, oy, ox)`, column `(ci, ky, kx)`.
fn im2col(x: &[f32], g: &Conv2dGeom) -> Vec<f32> {
    let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
    let cols = g.in_ch * k * k;
    let mut m = vec![0f32; g.batch * oh * ow * cols];
    for b in 0..g.batch {
        for oy in 0..oh {
            for ox in 0..ow {
                let row = ((b * oh + oy) * ow + ox) * cols;
                for ci in 0..g.in_ch {
                    for ky in 0..k {
                        let Some(y) = (oy * g.stride + ky)
                            .checked_sub(g.pad)
                            .filter(|&y| y < g.in_h)
                        else {
                            continue;
                        };
                        for kx in 0..k {
                            let Some(xx) = (ox * g.stride + kx)
                                .checked_sub(g.pad)
                                .filter(|&v| v < g.in_w)
                            else {
                                continue;
                            };
                            m[row + (ci * k + ky) * k + kx] =
                                x[b * g.in_ch * g.in_h * g.in_w + (ci * g.in_h + y) * g.in_w + xx];
                        }
                    }
                }
            }
        }
    }
    m
}

/// Adjoint of [`im2col`]: adds each column entry back into its input position.
fn col2im(cols_m: &[f32], g: &Conv2dGeom) -> Vec<f32> {
    let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
    let cols = g.in_ch * k * k;
    let mut x = vec![0f32; g.batch * g.in_ch * g.in_h * g.in_w];
    for b in 0..g.batch {
        for oy in 0..oh {
            for ox in 0..ow {
                let row = ((b * oh + oy) * ow + ox) * cols;
                for ci in 0..g.in_ch {
                    for ky in 0..k {
                        let Some(y) = (oy * g.stride + ky)
                            .checked_sub(g.pad)
                            .filter(|&y| y < g.in_h)
                        else {
                            continue;
                        };
                        for kx in 0..k {
                            let Some(xx) = (ox * g.stride + kx)
                                .checked_sub(g.pad)
                                .filter(|&v| v < g.in_w)
                            else {
                                continue;
                            };
                            x[b * g.in_ch * g.in_h * g.in_w + (ci * g.in_h + y) * g.in_w + xx] +=
                                cols_m[row + (ci * k + ky) * k + kx];
                        }
                    }
                }
            }
        }
    }
    x
}

/// NCHW rows (`batch x ch·p`) to `(batch·p) x ch`, and back.
fn nchw_to_rows(t: &[f32], batch: usize, ch: usize, p: usize) -> Vec<f32> {
    let mut out = vec![0f32; t.len()];
    for b in 0..batch {
        for c in 0..ch {
            for i in 0..p {
                out[(b * p + i) * ch + c] = t[(b * ch + c) * p + i];
            }
        }
    }
    out
}

fn rows_to_nchw(m: &[f32], batch: usize, ch: usize, p: usize) -> Vec<f32> {
    let mut out = vec![0f32; m.len()];
    for b in 0..batch {
        for c in 0..ch {
            for i in 0..p {
                out[(b * ch + c) * p + i] = m[(b * p + i) * ch + c];
            }
        }
    }
    out
}

impl Arith for FloatArith {
    type T = FMat;
    type Error = TrainError;

    fn describe(&self) -> String {
        format!("{} on the host", self.format.name())
    }

    fn begin_step(&mut self, _step: u64) {}

    fn import(
        &mut self,
        _op: &str,
        rows: usize,
        cols: usize,
        v: &[f32],
    ) -> Result<FMat, TrainError> {
        Ok(self.store(rows, cols, v.to_vec()))
    }

    fn to_host(&self, t: &FMat) -> Vec<f32> {
        t.data.clone()
    }

    fn shape(&self, t: &FMat) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn zeros(&self, rows: usize, cols: usize) -> FMat {
        FMat {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    fn matmul(&mut self, op: &str, a: &FMat, b: &FMat) -> Result<FMat, TrainError> {
        self.product(op, (a, false), (b, false))
    }

    fn matmul_nt(&mut self, op: &str, a: &FMat, b: &FMat) -> Result<FMat, TrainError> {
        self.product(op, (a, false), (b, true))
    }

    fn matmul_tn(&mut self, op: &str, a: &FMat, b: &FMat) -> Result<FMat, TrainError> {
        self.product(op, (a, true), (b, false))
    }

    fn conv_forward(
        &mut self,
        op: &str,
        x: &FMat,
        w: &FMat,
        g: &Conv2dGeom,
    ) -> Result<FMat, TrainError> {
        g.validate().map_err(|source| TrainError::Numeric {
            op: op.to_string(),
            source,
        })?;
        let cols = im2col(&self.operand(&x.data), g);
        let p = g.out_h() * g.out_w();
        // (batch·p x in_ch·k·k) · Wᵀ -> (batch·p) x out_ch
        let kk = w.cols;
        let y = self.gemm(
            g.batch * p,
            kk,
            g.out_ch,
            &cols,
            kk as isize,
            1,
            &self.operand(&w.data),
            1,
            kk as isize,
        );
        Ok(self.store(
            g.batch,
            g.out_ch * p,
            rows_to_nchw(&y, g.batch, g.out_ch, p),
        ))
    }

    fn conv_backward_input(
        &mut self,
        op: &str,
        dy: &FMat,
        w: &FMat,
        g: &Conv2dGeom,
    ) -> Result<FMat, TrainError> {
        g.validate().map_err(|source| TrainError::Numeric {
            op: op.to_string(),
            source,
        })?;
        let p = g.out_h() * g.out_w();
        let dyr = nchw_to_rows(&self.operand(&dy.data), g.batch, g.out_ch, p);
        let dcols = self.gemm(
            g.batch * p,
            g.out_ch,
            w.cols,
            &dyr,
            g.out_ch as isize,
            1,
            &self.operand(&w.data),
            w.cols as isize,
            1,
        );
        Ok(self.store(g.batch, g.in_ch * g.in_h * g.in_w, col2im(&dcols, g)))
    }

    fn conv_backward_weights(
        &mut self,
        op: &str,
        x: &FMat,
        dy: &FMat,
        g: &Conv2dGeom,
    ) -> Result<FMat, TrainError> {
        g.validate().map_err(|source| TrainError::Numeric {
            op: op.to_string(),
            source,
        })?;
        let p = g.out_h() * g.out_w();
        let dyr = nchw_to_rows(&self.operand(&dy.data), g.batch, g.out_ch, p);
        let cols = im2col(&self.operand(&x.data), g);
        let kk = g.in_ch * g.kernel * g.kernel;
        let dw = self.gemm(
            g.out_ch,
            g.batch * p,
            kk,
            &dyr,
            1,
            g.out_ch as isize,
            &cols,
            kk as isize,
            1,
        );
        Ok(self.store(g.out_ch, kk, dw))
    }

    fn bias_add(
        &mut self,
        op: &str,
        y: &FMat,
        bias: &FMat,
        repeat: usize,
    ) -> Result<FMat, TrainError> {
        if repeat == 0 || bias.cols * repeat != y.cols {
            return Err(shape_err(
                op,
                format!("bias of {} x{repeat} for {} columns", bias.cols, y.cols),
            ));
        }
        let bias = self.operand(&bias.data);
        let d = y
            .data
            .iter()
            .enumerate()
            .map(|(i, &v)| v + bias[(i % y.cols) / repeat])
            .collect();
        Ok(self.store(y.rows, y.cols, d))
    }

    fn bias_grad(&mut self, op: &str, dy: &FMat, repeat: usize) -> Result<FMat, TrainError> {
        if repeat == 0 || (dy.cols / repeat) * repeat != dy.cols {
            return Err(shape_err(
                op,
                format!("{} columns are not groups of {repeat}", dy.cols),
            ));
        }
        let mut s = vec![0f32; dy.cols / repeat];
        for (i, &v) in dy.data.iter().enumerate() {
            s[(i % dy.cols) / repeat] += v;
        }
        Ok(self.store(1, dy.cols / repeat, s))
    }

    fn relu(&self, x: &FMat) -> FMat {
        FMat {
            data: x.data.iter().map(|&v| v.max(0.0)).collect(),
            ..*x
        }
    }

    fn relu_backward(&self, dy: &FMat, x: &FMat) -> Result<FMat, TrainError> {
        if dy.data.len() != x.data.len() {
            return Err(shape_err(
                "relu backward",
                "gradient and input differ in size".into(),
            ));
        }
        let data = dy
            .data
            .iter()
            .zip(&x.data)
            .map(|(&d, &v)| if v > 0.0 { d } else { 0.0 })
            .collect();
        Ok(FMat { data, ..*dy })
    }

    fn max_pool(&self, x: &FMat, g: &PoolGeom) -> (FMat, Vec<u32>) {
        let (d, win) = max_pool_slice(&x.data, x.rows, g);
        let m = FMat {
            rows: x.rows,
            cols: g.out_cols(),
            data: d,
        };
        (m, win)
    }

    fn max_pool_backward(
        &mut self,
        _op: &str,
        dy: &FMat,
        winners: &[u32],
        g: &PoolGeom,
    ) -> Result<FMat, TrainError> {
        let d = max_pool_backward_slice(&dy.data, winners, dy.rows, g.in_cols(), |v| v);
        Ok(self.store(dy.rows, g.in_cols(), d))
    }

    fn avg_pool(&mut self, _op: &str, x: &FMat, g: &PoolGeom) -> Result<FMat, TrainError> {
        let n = g.window() as f32;
        let d = pool_sums(&x.data, x.rows, g, |v| v)
            .into_iter()
            .map(|s| s / n)
            .collect();
        Ok(self.store(x.rows, g.out_cols(), d))
    }

    fn avg_pool_backward(
        &mut self,
        _op: &str,
        dy: &FMat,
        g: &PoolGeom,
    ) -> Result<FMat, TrainError> {
        let n = g.window() as f32;
        let d = pool_spread(&dy.data, dy.rows, g, |v| v)
            .into_iter()
            .map(|s| s / n)
            .collect();
        Ok(self.store(dy.rows, g.in_cols(), d))
    }

    fn add(&mut self, op: &str, a: &FMat, b: &FMat) -> Result<FMat, TrainError> {
        if (a.rows, a.cols) != (b.rows, b.cols) {
            return Err(shape_err(
                op,
                format!("adding {}x{} to {}x{}", b.rows, b.cols, a.rows, a.cols),
            ));
        }
        let d = a.data.iter().zip(&b.data).map(|(x, y)| x + y).collect();
        Ok(self.store(a.rows, a.cols, d))
    }

    fn sgd(
        &mut self,
        _op: &str,
        w: &mut FMat,
        v: &mut FMat,
        g: &FMat,
        lr: f32,
        momentum: f32,
    ) -> Result<(), TrainError> {
        // `w` and `v` are f32 masters in every format (module docs); `g` is in the format.
        for ((wi, vi), &gi) in w.data.iter_mut().zip(v.data.iter_mut()).zip(&g.data) {
            *vi = momentum * *vi + gi;
            *wi -= lr * *vi;
        }
        Ok(())
    }

    fn save(&self, t: &FMat) -> TensorState {
        TensorState::Float {
            rows: t.rows,
            cols: t.cols,
            data: t.data.clone(),
        }
    }

    fn load(&self, s: &TensorState) -> Result<FMat, TrainError> {
        match s {
            TensorState::Float { rows, cols, data } if rows.checked_mul(*cols) == Some(data.len()) => Ok(FMat { rows: *rows, cols: *cols, data: data.clone() }),
            _ => Err(TrainError::Checkpoint("a tensor is not a float tensor of the stated shape (was the checkpoint written with another --precision?)".into())),
        }
    }

    fn state(&self) -> BTreeMap<String, u32> {
        BTreeMap::new()
    }

    fn set_state(&mut self, _s: BTreeMap<String, u32>) {}
}

#[cfg(test)]
#[path = "float_tests.rs"]
mod tests;
