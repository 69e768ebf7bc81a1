//! [`Arith`] for [`Fixed`]: the operations a model asks of W-bit dynamic fixed point. Products
//! and convolutions go through the offloaded-product rule ([`crate::offload`]); bias, ReLU,
//! pooling and the SGD update are computed here, each result formed exactly and converted once
//! with the rule of [`crate::fixed`]'s module docs.

use crate::arith::{max_pool2_backward_slice, max_pool2_slice, Arith, TensorState};
use crate::fixed::Fixed;
use crate::offload::Product;
use crate::width::{fits, frac_for_exact_at, frac_for_max_at, saturate_to};
use crate::{numeric, Products, SaturationCount, StepError};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::elementwise::{self, convert_each, convert_sequential};
use systole_core::tensor::QMatrix;

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
        self.begin_shard(step, None);
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
