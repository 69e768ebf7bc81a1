//! [`Arith`] for [`Fixed`]: the operations a model asks of W-bit dynamic fixed point. Products
//! and convolutions go through the offloaded-product rule ([`crate::offload`]); bias, ReLU,
//! pooling and the SGD update are computed here, each result formed exactly and converted once
//! with the rule of [`crate::fixed`]'s module docs.

use crate::arith::{
    max_pool_backward_slice, max_pool_slice, pool_spread, pool_sums, Arith, PoolGeom, TensorState,
};
use crate::exact;
use crate::fixed::Fixed;
use crate::offload::Product;
use crate::profile::{section, Section};
use crate::sgd_sums::convert_affine;
use crate::softmax_words;
use crate::width::{fits, frac_for_exact_at, frac_for_max_at, saturate_to};
use crate::{numeric, Products, SaturationCount, StepError};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::elementwise;
use systole_core::tensor::QMatrix;

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
        let _p = section(Section::Import);
        let w = self.w();
        let frac = frac_for_max_at(exact::max_abs(v), w);
        // 16 extra bits carry the value into the contract's conversion, which then rounds it:
        // `rint(x · 2^(frac + 16))`, formed in integers (`exact`: the same bits as in f64).
        let seed = self.next_seed();
        let words = exact::import_words(v, frac, self.rounding, seed);
        let q = QMatrix::from_vec(rows, cols, frac, words).map_err(numeric(op))?;
        Ok(saturate_to(q, w))
    }

    fn to_host(&self, t: &QMatrix) -> Vec<f32> {
        let _p = section(Section::ToHost);
        t.to_f32()
    }

    fn softmax_xent(
        &self,
        t: &QMatrix,
        labels: &[u8],
        classes: usize,
        denom: usize,
    ) -> (f32, usize, Vec<f32>) {
        if !softmax_words::fits(t, labels, classes) {
            let logits = self.to_host(t);
            let _p = section(Section::Softmax);
            return crate::loss::softmax_xent_scaled(&logits, labels, classes, denom);
        }
        let _p = section(Section::Softmax);
        softmax_words::softmax_xent_words((&t.data, t.frac), labels, classes, denom)
    }

    fn softmax_loss(&self, t: &QMatrix, labels: &[u8], classes: usize) -> (f32, usize) {
        if !softmax_words::fits(t, labels, classes) {
            return crate::loss::softmax_loss(&self.to_host(t), labels, classes);
        }
        softmax_words::softmax_loss_words((&t.data, t.frac), labels, classes)
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
        let _p = section(Section::BiasAdd);
        if repeat == 0 || bias.cols * repeat != y.cols {
            return Err(StepError::Shape {
                op: String::from(op),
                msg: format!("bias of {} x{repeat} for {} columns", bias.cols, y.cols),
            }
            .into());
        }
        let f = y.frac.max(bias.frac);
        let m = elementwise::bias_add_largest(y, bias, repeat).map_err(numeric(op))?;
        let w = self.w();
        let spec = self.spec(frac_for_exact_at(m, f, w));
        let z = elementwise::bias_add(y, bias, repeat, &spec).map_err(numeric(op))?;
        Ok(saturate_to(z, w))
    }

    fn bias_grad(&mut self, op: &str, dy: &QMatrix, repeat: usize) -> Result<QMatrix, P::Error> {
        let _p = section(Section::BiasGrad);
        if repeat == 0 || (dy.cols / repeat) * repeat != dy.cols {
            return Err(StepError::Shape {
                op: String::from(op),
                msg: format!("{} columns are not groups of {repeat}", dy.cols),
            }
            .into());
        }
        let mut s = vec![0i64; dy.cols / repeat];
        // Row by row, each group of `repeat` columns into its sum (no division per word).
        for row in dy.data.chunks_exact(dy.cols.max(1)) {
            for (sum, group) in s.iter_mut().zip(row.chunks_exact(repeat)) {
                *sum += group.iter().map(|&v| v as i64).sum::<i64>();
            }
        }
        self.from_exact(op, 1, s.len(), &s, dy.frac)
    }

    fn relu(&self, x: &QMatrix) -> QMatrix {
        let _p = section(Section::Relu);
        elementwise::relu(x)
    }

    fn relu_backward(&self, dy: &QMatrix, x: &QMatrix) -> Result<QMatrix, P::Error> {
        let _p = section(Section::Relu);
        Ok(elementwise::relu_backward(dy, x).map_err(numeric("relu backward"))?)
    }

    fn max_pool(&self, x: &QMatrix, g: &PoolGeom) -> (QMatrix, Vec<u32>) {
        let (d, win) = max_pool_slice(&x.data, x.rows, g);
        let q = QMatrix {
            rows: x.rows,
            cols: g.out_cols(),
            frac: x.frac,
            data: d,
        };
        (q, win)
    }

    fn max_pool_backward(
        &mut self,
        op: &str,
        dy: &QMatrix,
        winners: &[u32],
        g: &PoolGeom,
    ) -> Result<QMatrix, P::Error> {
        let sums = max_pool_backward_slice(&dy.data, winners, dy.rows, g.in_cols(), i64::from);
        if !g.overlaps() {
            // Each input takes at most one gradient: the words move unchanged.
            let data = sums.into_iter().map(|v| v as i16).collect();
            return Ok(QMatrix::from_vec(dy.rows, g.in_cols(), dy.frac, data).map_err(numeric(op))?);
        }
        self.from_exact(op, dy.rows, g.in_cols(), &sums, dy.frac)
    }

    fn avg_pool(&mut self, op: &str, x: &QMatrix, g: &PoolGeom) -> Result<QMatrix, P::Error> {
        let sums = pool_sums(&x.data, x.rows, g, i64::from);
        let exact = divide_exact(sums, g.window());
        self.from_exact(op, x.rows, g.out_cols(), &exact, x.frac + DIV_BITS)
    }

    fn avg_pool_backward(
        &mut self,
        op: &str,
        dy: &QMatrix,
        g: &PoolGeom,
    ) -> Result<QMatrix, P::Error> {
        let sums = pool_spread(&dy.data, dy.rows, g, i64::from);
        let exact = divide_exact(sums, g.window());
        self.from_exact(op, dy.rows, g.in_cols(), &exact, dy.frac + DIV_BITS)
    }

    fn add(&mut self, op: &str, a: &QMatrix, b: &QMatrix) -> Result<QMatrix, P::Error> {
        if (a.rows, a.cols) != (b.rows, b.cols) {
            return Err(StepError::Shape {
                op: String::from(op),
                msg: format!("adding {}x{} to {}x{}", b.rows, b.cols, a.rows, a.cols),
            }
            .into());
        }
        let f = a.frac.max(b.frac);
        let (sa, sb) = (f - a.frac, f - b.frac);
        let sums: Vec<i64> = (a.data.iter().zip(&b.data))
            .map(|(&x, &y)| ((x as i64) << sa) + ((y as i64) << sb))
            .collect();
        self.from_exact(op, a.rows, a.cols, &sums, f)
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
        let _p = section(Section::Sgd);
        const MU_FRAC: u32 = 15;
        let mu_q = libm::round(momentum as f64 * (1u64 << MU_FRAC) as f64) as i64;
        // `lr` is a scheduled rate `lr_q / 2^LR_FRAC`, so this gives `lr_q` back exactly.
        let lr_q = quantize(lr);
        // Momentum and weights are kept at the master width (W unless the run keeps wider
        // master weights).
        let mb = self.widths.master();
        // v = m·v + g, exact with MU_FRAC + v.frac (>= 15 >= g.frac) fractional bits.
        let f2 = MU_FRAC + v.frac;
        let seed = self.next_seed();
        let (vf, data) = convert_affine(
            (mu_q, &v.data),
            (&g.data, f2 - g.frac),
            (f2, mb),
            self.rounding,
            seed,
        );
        let nv = QMatrix::from_vec(v.rows, v.cols, vf, data).map_err(numeric(op))?;
        *v = saturate_to(nv, mb);
        // w = w - lr·v, exact with LR_FRAC + v.frac (>= 16 > w.frac) fractional bits.
        let f3 = LR_FRAC + v.frac;
        let seed = self.next_seed();
        let (wf, data) = convert_affine(
            (-lr_q, &v.data),
            (&w.data, f3 - w.frac),
            (f3, mb),
            self.rounding,
            seed,
        );
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

/// Extra fractional bits an average carries into the conversion: `floor(sum · 2^16 / n)`.
const DIV_BITS: u32 = 16;

/// `floor(s · 2^DIV_BITS / n)` of each exact sum: a mean with [`DIV_BITS`] more fractional
/// bits, truncated toward minus infinity, which the conversion then rounds.
fn divide_exact(sums: Vec<i64>, n: usize) -> Vec<i64> {
    let n = n.max(1) as i64;
    sums.into_iter()
        .map(|s| (s << DIV_BITS).div_euclid(n))
        .collect()
}
