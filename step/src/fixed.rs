//! W-bit dynamic fixed point (W from 8 to 16, [`crate::width`]): every matrix product and convolution runs on a [`Products`]
//! backend (the array); bias, ReLU, pooling and the SGD update run here, on the host or the
//! board's CPU, under the same contract.
//!
//! # How fractional bits are chosen (dynamic fixed point)
//!
//! * **Host-side results** (inputs, loss gradients, bias adds, bias gradients, momentum and
//!   weights after an update) are converted from values the host knows exactly, so each gets the
//!   largest `frac` (at most `W - 1`) for which its largest magnitude still fits a word
//!   ([`frac_for_exact_at`]): the full W bits are used every time.
//! * **Device results** must have their `frac` chosen before the device runs. Each operation
//!   (named like `layer 2 backward dW`) remembers the `frac` it used last. The first time, a safe
//!   bound is used (`max|A|·max|B|·K`). After each run: if any output word is saturated, the
//!   operation is run again with one bit less (a fresh seed, still deterministic); if the largest
//!   output magnitude is below `2^(W-3)` (`2^13` at 16 bits), the next step uses enough more
//!   bits to bring it into `[2^(W-3), 2^(W-2))`, leaving one bit of headroom for growth.
//!
//! A reduction longer than the device limit runs as chunks (the contract's "Long reductions"
//! rule, `systole_core::split`): each chunk starts at the operation's remembered `frac` and retries on
//! its own; the operation remembers the smallest `frac` its chunks would use next. Retries and
//! the saturated words of kept results are counted per operation name
//! ([`SaturationCount`], reported in `run.json` and after each epoch).
//!
//! Weights are W-bit words unless the run keeps master weights wider ([`Widths::master`]: the
//! weights and momentum the update writes are then `master`-bit words, rounded to W bits right
//! before each product): updates smaller than one unit in the last place survive only through
//! stochastic rounding, which is why it is the default. The SGD update is `v = m·v + g`, `w = w - lr·v` with `m` quantized to 15 and `lr`
//! to 16 fractional bits, each result formed exactly and converted once.

use crate::arith::{max_pool2_backward_slice, max_pool2_slice, Arith, TensorState};
use crate::offload::Product;
use crate::seeds::{op_seed, shard_run_seed};
use crate::width::{fits, frac_for_exact_at, frac_for_max_at, saturate_to, Widths};
use crate::{numeric, Products, StepError};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::elementwise::{self, convert_each, convert_sequential};
use systole_core::tensor::{OutputSpec, QMatrix};
use systole_core::Rounding;

pub use crate::arith::SaturationCount;

/// Largest `frac` in `0..=MAX_FRAC` at which `max_abs` fits a 16-bit word (`MAX_FRAC` for
/// zero): [`frac_for_max_at`] at 16 bits.
pub fn frac_for_max(max_abs: f64) -> u32 {
    frac_for_max_at(max_abs, systole_core::numeric::WORD_BITS)
}

/// Largest output `frac` for exact integers with `frac_in` fractional bits and largest
/// magnitude `max_abs`, within the contract's shift range `0..=MAX_SHIFT`: [`frac_for_exact_at`]
/// at 16 bits.
pub fn frac_for_exact(max_abs: i64, frac_in: u32) -> u32 {
    frac_for_exact_at(max_abs, frac_in, systole_core::numeric::WORD_BITS)
}

/// [`Arith`] in W-bit fixed point, offloading products to `P`.
pub struct Fixed<P> {
    pub(crate) products: P,
    pub(crate) widths: Widths,
    rounding: Rounding,
    run_seed: u64,
    step: u64,
    op_index: u32,
    /// Shard of a sharded (data-parallel) step, see [`Fixed::begin_shard`].
    shard: Option<u32>,
    /// Remembered `frac` per operation (see the module docs).
    pub fracs: BTreeMap<String, u32>,
    /// Saturation counters per operation name (this process's operations).
    pub(crate) saturation: BTreeMap<String, SaturationCount>,
}

impl<P: Products> Fixed<P> {
    /// 16-bit fixed-point arithmetic with products on `products`, conversions rounded by
    /// `rounding`, seeds derived from `run_seed`.
    pub fn new(products: P, rounding: Rounding, run_seed: u64) -> Self {
        Self::with_widths(products, rounding, run_seed, Widths::FULL)
    }

    /// [`Fixed::new`] with words of `widths.word()` bits and master weights of
    /// `widths.master()`.
    pub fn with_widths(products: P, rounding: Rounding, run_seed: u64, widths: Widths) -> Self {
        Fixed {
            products,
            widths,
            rounding,
            run_seed,
            step: 0,
            op_index: 0,
            shard: None,
            fracs: BTreeMap::new(),
            saturation: BTreeMap::new(),
        }
    }

    /// The products' backend (the host reads its device's statistics).
    pub fn products(&self) -> &P {
        &self.products
    }

    /// The products' backend, to use its device otherwise (a board that trains itself).
    pub fn products_mut(&mut self) -> &mut P {
        &mut self.products
    }

    fn next_seed(&mut self) -> u32 {
        let run_seed = match self.shard {
            None => self.run_seed,
            Some(k) => shard_run_seed(self.run_seed, k),
        };
        let s = op_seed(run_seed, self.step, self.op_index);
        self.op_index += 1;
        s
    }

    /// Starts shard `shard` of training step `step` (or, with `None`, the step's shared part:
    /// gradient conversion and update). Seeds and remembered fractional bits are kept per shard,
    /// so a shard's history does not depend on which other shards this process computed.
    pub fn begin_shard(&mut self, step: u64, shard: Option<u32>) {
        self.begin_step(step);
        self.shard = shard;
    }

    /// How many seeds the current step (or shard) has drawn: where a pipeline stage hands its
    /// work to the next one, which goes on with [`Fixed::continue_at`].
    pub fn op_index(&self) -> u32 {
        self.op_index
    }

    /// Goes on with shard `shard` of step `step` (see [`Fixed::begin_shard`]) after its first
    /// `op_index` seeds were drawn (by another stage of a pipeline, maybe in another process),
    /// so its operations get the seeds they get in one process.
    pub fn continue_at(&mut self, step: u64, shard: Option<u32>, op_index: u32) {
        self.begin_shard(step, shard);
        self.op_index = op_index;
    }

    /// Key of an operation's remembered `frac`.
    pub(crate) fn frac_key(&self, op: &str) -> String {
        match self.shard {
            None => String::from(op),
            Some(k) => shard_key(k, op),
        }
    }

    /// The word and master widths.
    pub fn widths(&self) -> Widths {
        self.widths
    }

    /// W.
    pub(crate) fn w(&self) -> u32 {
        self.widths.word()
    }

    /// Converts exact integers with `frac_in` (at most 47) fractional bits, e.g. a summed
    /// gradient, to a W-bit tensor with the usual host-side rule (largest frac that fits).
    pub fn from_exact(
        &mut self,
        op: &str,
        rows: usize,
        cols: usize,
        v: &[i64],
        frac_in: u32,
    ) -> Result<QMatrix, P::Error> {
        let w = self.w();
        let frac = frac_for_exact_at(v.iter().map(|x| x.abs()).max().unwrap_or(0), frac_in, w);
        let seed = self.next_seed();
        let data = convert_sequential(v, frac_in - frac, self.rounding, seed);
        let q = QMatrix::from_vec(rows, cols, frac, data).map_err(numeric(op))?;
        Ok(saturate_to(q, w))
    }

    /// `q` as W-bit words: itself when it fits, else (a master-width weight) rounded to the
    /// largest `frac` at which it fits W bits, with its own seed.
    pub(crate) fn narrow<'q>(
        &mut self,
        op: &str,
        q: &'q QMatrix,
    ) -> Result<alloc::borrow::Cow<'q, QMatrix>, P::Error> {
        use alloc::borrow::Cow;
        let w = self.w();
        if fits(q, w) {
            return Ok(Cow::Borrowed(q));
        }
        let m = q.data.iter().map(|&x| (x as i64).abs()).max().unwrap_or(0);
        let frac = frac_for_exact_at(m, q.frac, w);
        let seed = self.next_seed();
        let exact = q.data.iter().map(|&x| x as i64);
        let data = convert_each(exact, q.frac - frac, self.rounding, seed);
        let n = QMatrix::from_vec(q.rows, q.cols, frac, data).map_err(numeric(op))?;
        Ok(Cow::Owned(saturate_to(n, w)))
    }

    pub(crate) fn spec(&mut self, frac: u32) -> OutputSpec {
        OutputSpec {
            frac,
            rounding: self.rounding,
            seed: self.next_seed(),
        }
    }
}

/// `mu_q·v + (g << g_shift)` per element: the momentum sum, exact.
fn momentum_sums<'a>(
    v: &'a [i16],
    g: &'a [i16],
    mu_q: i64,
    g_shift: u32,
) -> impl Iterator<Item = i64> + 'a {
    v.iter()
        .zip(g)
        .map(move |(&vi, &gi)| mu_q * vi as i64 + ((gi as i64) << g_shift))
}

/// `(w << w_shift) - lr_q·v` per element: the updated weight, exact.
fn update_sums<'a>(
    w: &'a [i16],
    v: &'a [i16],
    lr_q: i64,
    w_shift: u32,
) -> impl Iterator<Item = i64> + 'a {
    w.iter()
        .zip(v)
        .map(move |(&wi, &vi)| ((wi as i64) << w_shift) - lr_q * vi as i64)
}

/// Key under which shard `k` remembers the `frac` of operation `op`.
pub fn shard_key(k: u32, op: &str) -> String {
    format!("shard {k}: {op}")
}

/// Adds a tensor's words, as exact integers with `frac` (>= its own) fractional bits, to `sum`:
/// how shard gradients and the chunks of a split reduction are combined.
pub fn add_exact_at(sum: &mut [i64], t: &QMatrix, frac: u32) {
    for (s, &w) in sum.iter_mut().zip(&t.data) {
        *s += (w as i64) << (frac - t.frac);
    }
}

impl<P: Products> Arith for Fixed<P> {
    type T = QMatrix;
    type Error = P::Error;

    fn describe(&self) -> String {
        let (w, m) = (self.widths.word(), self.widths.master());
        let master = if m > w {
            format!(" (master weights {m} bits)")
        } else {
            String::new()
        };
        format!(
            "fixed{w}{master} {} on {}",
            self.rounding.name(),
            self.products.name()
        )
    }

    fn begin_step(&mut self, step: u64) {
        self.step = step;
        self.op_index = 0;
        self.shard = None;
    }

    fn import(
        &mut self,
        op: &str,
        rows: usize,
        cols: usize,
        v: &[f32],
    ) -> Result<QMatrix, P::Error> {
        let w = self.w();
        let frac = frac_for_max_at(v.iter().fold(0f64, |m, &x| m.max((x as f64).abs())), w);
        // 16 extra bits carry the value into the contract's conversion, which then rounds it.
        let scale = (1u64 << (frac + 16)) as f64;
        let exact = v.iter().map(|&x| libm::rint(x as f64 * scale) as i64);
        let seed = self.next_seed();
        let q = QMatrix::from_vec(
            rows,
            cols,
            frac,
            convert_each(exact, 16, self.rounding, seed),
        )
        .map_err(numeric(op))?;
        Ok(saturate_to(q, w))
    }

    fn to_host(&self, t: &QMatrix) -> Vec<f32> {
        t.to_f32()
    }

    fn shape(&self, t: &QMatrix) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn zeros(&self, rows: usize, cols: usize) -> QMatrix {
        // Momentum: kept at the master width.
        QMatrix::zeros(rows, cols, self.widths.master() - 1)
    }

    fn matmul(&mut self, op: &str, a: &QMatrix, b: &QMatrix) -> Result<QMatrix, P::Error> {
        self.product(op, Product::Matmul, a, b)
    }

    fn matmul_nt(&mut self, op: &str, a: &QMatrix, b: &QMatrix) -> Result<QMatrix, P::Error> {
        self.product(op, Product::MatmulNt, a, b)
    }

    fn matmul_tn(&mut self, op: &str, a: &QMatrix, b: &QMatrix) -> Result<QMatrix, P::Error> {
        self.product(op, Product::MatmulTn, a, b)
    }

    fn conv_forward(
        &mut self,
        op: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
    ) -> Result<QMatrix, P::Error> {
        self.product(op, Product::ConvForward(g), x, w)
    }

    fn conv_backward_input(
        &mut self,
        op: &str,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
    ) -> Result<QMatrix, P::Error> {
        self.product(op, Product::ConvBackwardInput(g), dy, w)
    }

    fn conv_backward_weights(
        &mut self,
        op: &str,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
    ) -> Result<QMatrix, P::Error> {
        self.product(op, Product::ConvBackwardWeights(g), x, dy)
    }

    fn bias_add(
        &mut self,
        op: &str,
        y: &QMatrix,
        bias: &QMatrix,
        repeat: usize,
    ) -> Result<QMatrix, P::Error> {
        if repeat == 0 || bias.cols * repeat != y.cols {
            return Err(StepError::Shape {
                op: String::from(op),
                msg: format!("bias of {} x{repeat} for {} columns", bias.cols, y.cols),
            }
            .into());
        }
        let f = y.frac.max(bias.frac);
        let (sy, sb) = (f - y.frac, f - bias.frac);
        let m = y
            .data
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                (((v as i64) << sy) + ((bias.data[(i % y.cols) / repeat] as i64) << sb)).abs()
            })
            .max()
            .unwrap_or(0);
        let w = self.w();
        let spec = self.spec(frac_for_exact_at(m, f, w));
        let z = elementwise::bias_add(y, bias, repeat, &spec).map_err(numeric(op))?;
        Ok(saturate_to(z, w))
    }

    fn bias_grad(&mut self, op: &str, dy: &QMatrix, repeat: usize) -> Result<QMatrix, P::Error> {
        if repeat == 0 || (dy.cols / repeat) * repeat != dy.cols {
            return Err(StepError::Shape {
                op: String::from(op),
                msg: format!("{} columns are not groups of {repeat}", dy.cols),
            }
            .into());
        }
        let mut s = vec![0i64; dy.cols / repeat];
        for (i, &v) in dy.data.iter().enumerate() {
            s[(i % dy.cols) / repeat] += v as i64;
        }
        let w = self.w();
        let frac = frac_for_exact_at(s.iter().map(|v| v.abs()).max().unwrap_or(0), dy.frac, w);
        let seed = self.next_seed();
        let data = convert_sequential(&s, dy.frac - frac, self.rounding, seed);
        let q = QMatrix::from_vec(1, s.len(), frac, data).map_err(numeric(op))?;
        Ok(saturate_to(q, w))
    }

    fn relu(&self, x: &QMatrix) -> QMatrix {
        elementwise::relu(x)
    }

    fn relu_backward(&self, dy: &QMatrix, x: &QMatrix) -> Result<QMatrix, P::Error> {
        Ok(elementwise::relu_backward(dy, x).map_err(numeric("relu backward"))?)
    }

    fn max_pool2(&self, x: &QMatrix, ch: usize, h: usize, w: usize) -> (QMatrix, Vec<u32>) {
        let (d, win) = max_pool2_slice(&x.data, x.rows, ch, h, w);
        (
            QMatrix {
                rows: x.rows,
                cols: ch * (h / 2) * (w / 2),
                frac: x.frac,
                data: d,
            },
            win,
        )
    }

    fn max_pool2_backward(&self, dy: &QMatrix, winners: &[u32], in_cols: usize) -> QMatrix {
        QMatrix {
            rows: dy.rows,
            cols: in_cols,
            frac: dy.frac,
            data: max_pool2_backward_slice(&dy.data, winners, dy.rows, in_cols),
        }
    }

    fn sgd(
        &mut self,
        op: &str,
        w: &mut QMatrix,
        v: &mut QMatrix,
        g: &QMatrix,
        lr: f32,
        momentum: f32,
    ) -> Result<(), P::Error> {
        use systole_core::schedule::{quantize, LR_FRAC};
        const MU_FRAC: u32 = 15;
        let mu_q = libm::round(momentum as f64 * (1u64 << MU_FRAC) as f64) as i64;
        // `lr` is a scheduled rate `lr_q / 2^LR_FRAC`, so this gives `lr_q` back exactly.
        let lr_q = quantize(lr);
        // The exact values are computed twice (for their largest magnitude, then to convert
        // them) rather than stored: a tensor of i64 is four times the words' RAM.
        // Momentum and weights are kept at the master width (W unless the run keeps wider
        // master weights).
        let mb = self.widths.master();
        // v = m·v + g, exact with MU_FRAC + v.frac (>= 15 >= g.frac) fractional bits.
        let f2 = MU_FRAC + v.frac;
        let vx = || momentum_sums(&v.data, &g.data, mu_q, f2 - g.frac);
        let vf = frac_for_exact_at(vx().map(i64::abs).max().unwrap_or(0), f2, mb);
        let seed = self.next_seed();
        let data = convert_each(vx(), f2 - vf, self.rounding, seed);
        let nv = QMatrix::from_vec(v.rows, v.cols, vf, data).map_err(numeric(op))?;
        *v = saturate_to(nv, mb);
        // w = w - lr·v, exact with LR_FRAC + v.frac (>= 16 > w.frac) fractional bits.
        let f3 = LR_FRAC + v.frac;
        let wx = || update_sums(&w.data, &v.data, lr_q, f3 - w.frac);
        let wf = frac_for_exact_at(wx().map(i64::abs).max().unwrap_or(0), f3, mb);
        let seed = self.next_seed();
        let data = convert_each(wx(), f3 - wf, self.rounding, seed);
        let nw = QMatrix::from_vec(w.rows, w.cols, wf, data).map_err(numeric(op))?;
        *w = saturate_to(nw, mb);
        Ok(())
    }

    fn save(&self, t: &QMatrix) -> TensorState {
        TensorState::Fixed {
            rows: t.rows,
            cols: t.cols,
            frac: t.frac,
            data: t.data.clone(),
        }
    }

    fn load(&self, s: &TensorState) -> Result<QMatrix, P::Error> {
        match s {
            TensorState::Fixed { rows, cols, frac, data } => {
                let q = QMatrix::from_vec(*rows, *cols, *frac, data.clone())
                    .map_err(|e| StepError::Checkpoint(format!("bad fixed-point tensor: {e}")))?;
                let m = self.widths.master();
                if !fits(&q, m) {
                    return Err(StepError::Checkpoint(format!(
                        "a tensor of {frac} fractional bits or with words outside {m} bits, but this run keeps {m}-bit weights (was it written with another --word-bits or --master-bits?)"
                    )).into());
                }
                Ok(q)
            }
            TensorState::Float { .. } => Err(StepError::Checkpoint(
                "the checkpoint holds float tensors but this run is fixed point (was it written with another --precision?)".into(),
            ).into()),
        }
    }

    fn state(&self) -> BTreeMap<String, u32> {
        self.fracs.clone()
    }

    fn set_state(&mut self, s: BTreeMap<String, u32>) {
        self.fracs = s;
    }

    fn saturation(&self) -> BTreeMap<String, SaturationCount> {
        self.saturation.clone()
    }
}
