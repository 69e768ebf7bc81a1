//! Each ONNX op the import takes, and exactly which of its attributes: anything else is refused
//! naming the node, never approximated.

use crate::import::{Act, Builder};
use crate::net::Op;
use crate::proto::NodeProto;
use crate::OnnxError;

impl Builder<'_> {
    /// Imports one node.
    pub(crate) fn node(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Err(self.refuse(n, node, format!("domain '{}' is not supported", n.domain)));
        }
        match n.op_type.as_str() {
            "Conv" => self.conv(n, node),
            "Gemm" => self.gemm(n, node),
            "MatMul" => self.matmul(n, node),
            "Add" => self.add(n, node),
            "Relu" => {
                self.known_attrs(n, node, &[])?;
                let a = self.act(n, node, 0)?;
                self.emit(n, node, Op::Relu, vec![a.src], a.shape, a.rank)
            }
            "MaxPool" | "AveragePool" => self.pool(n, node),
            "GlobalAveragePool" => {
                self.known_attrs(n, node, &[])?;
                let a = self.rank4(n, node)?;
                self.emit(
                    n,
                    node,
                    Op::GlobalAvgPool,
                    vec![a.src],
                    [a.shape[0], 1, 1],
                    4,
                )
            }
            "Flatten" => self.flatten(n, node),
            "Reshape" => self.reshape(n, node),
            "BatchNormalization" => self.batch_norm(n, node),
            "Softmax" | "LogSoftmax" => self.softmax(n, node),
            "Constant" => self.constant(n, node),
            "Identity" => {
                self.known_attrs(n, node, &[])?;
                let a = self.act(n, node, 0)?;
                self.alias(n, node, a)
            }
            "Dropout" => self.dropout(n, node),
            "QuantizeLinear" | "DequantizeLinear" => self.qdq(n, node),
            "Clip" => self.clip(n, node),
            op => Err(self.refuse(n, node, format!("op {op} is not supported"))),
        }
    }

    fn rank4(&self, n: &NodeProto, node: &str) -> Result<Act, OnnxError> {
        let a = self.act(n, node, 0)?;
        if a.rank != 4 {
            return Err(self.refuse(
                n,
                node,
                format!("its input has rank {}; it takes N x C x H x W", a.rank),
            ));
        }
        Ok(a)
    }

    /// A pair attribute (kernel, strides, dilations) that must be square: its one value.
    fn square(
        &self,
        n: &NodeProto,
        node: &str,
        name: &str,
        default: Option<usize>,
    ) -> Result<usize, OnnxError> {
        match (self.attr_ints(n, node, name)?, default) {
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.refuse(n, node, format!("attribute '{name}' is missing"))),
            (Some(v), _) => match v[..] {
                [a, b] if a == b && a > 0 => Ok(a as usize),
                _ => Err(self.refuse(
                    n,
                    node,
                    format!("{name} {v:?}: systole takes two equal positive values (square kernels, equal strides, 2-D)"),
                )),
            },
        }
    }

    /// Symmetric padding from `pads` / `auto_pad` for a `k` window at stride `s` over `h x w`.
    fn padding(
        &self,
        n: &NodeProto,
        node: &str,
        k: usize,
        s: usize,
        h: usize,
        w: usize,
    ) -> Result<usize, OnnxError> {
        let auto = self.attr_s(n, node, "auto_pad", "NOTSET")?;
        let pads = self.attr_ints(n, node, "pads")?;
        match auto.as_str() {
            "NOTSET" => match pads.as_deref() {
                None => Ok(0),
                Some([a, b, c, d]) if a == b && b == c && c == d && *a >= 0 => Ok(*a as usize),
                Some(p) => Err(self.refuse(
                    n,
                    node,
                    format!(
                        "pads {p:?}: systole's array takes equal zero padding on all four sides"
                    ),
                )),
            },
            "VALID" => Ok(0),
            "SAME_UPPER" | "SAME_LOWER" => {
                // ONNX's SAME: the output is ceil(x / s), the padding what that needs.
                let total = |x: usize| ((x.div_ceil(s) - 1) * s + k).saturating_sub(x);
                let (th, tw) = (total(h), total(w));
                if th != tw || th % 2 != 0 {
                    return Err(self.refuse(
                        n,
                        node,
                        format!("auto_pad {auto} pads {th} rows and {tw} columns in total here, not the same even amount: the array's padding is symmetric"),
                    ));
                }
                Ok(th / 2)
            }
            other => Err(self.refuse(
                n,
                node,
                format!("auto_pad '{other}' is not an ONNX auto_pad"),
            )),
        }
    }

    fn conv(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(
            n,
            node,
            &[
                "auto_pad",
                "dilations",
                "group",
                "kernel_shape",
                "pads",
                "strides",
            ],
        )?;
        let x = self.rank4(n, node)?;
        let (wd, w) = self
            .floats(n, node, 1)?
            .ok_or_else(|| self.refuse(n, node, "it has no weights"))?;
        let [c, h, ww] = x.shape;
        let [m, ci, kh, kw] = wd[..] else {
            return Err(self.refuse(
                n,
                node,
                format!(
                    "weights of shape {wd:?}: systole takes 2-D convolutions (M x C x kH x kW)"
                ),
            ));
        };
        if self.attr_i(n, node, "group", 1)? != 1 {
            return Err(self.refuse(
                n,
                node,
                "group other than 1 (grouped or depthwise convolution) is not supported",
            ));
        }
        if self.square(n, node, "dilations", Some(1))? != 1 {
            return Err(self.refuse(n, node, "dilations other than 1 are not supported"));
        }
        if kh != kw || ci != c || m == 0 || kh == 0 {
            return Err(self.refuse(
                n,
                node,
                format!("weights {wd:?} on an input of {c} channels: systole takes square kernels over all input channels"),
            ));
        }
        let k = self.square(n, node, "kernel_shape", Some(kh))?;
        if k != kh {
            return Err(self.refuse(
                n,
                node,
                format!("kernel_shape {k} does not match the weights' {kh}"),
            ));
        }
        let s = self.square(n, node, "strides", Some(1))?;
        let p = self.padding(n, node, k, s, h, ww)?;
        if h + 2 * p < k || ww + 2 * p < k {
            return Err(self.refuse(
                n,
                node,
                format!("a {k}x{k} kernel does not fit a {h}x{ww} input padded by {p}"),
            ));
        }
        let b = self.bias(n, node, 2, m)?;
        let out = [m, (h + 2 * p - k) / s + 1, (ww + 2 * p - k) / s + 1];
        let op = Op::Conv {
            out_ch: m,
            kernel: k,
            stride: s,
            pad: p,
            w,
            b,
        };
        self.emit(n, node, op, vec![x.src], out, 4)
    }

    /// Optional bias input `i` of `len` values (any shape of that many elements).
    fn bias(
        &self,
        n: &NodeProto,
        node: &str,
        i: usize,
        len: usize,
    ) -> Result<Option<Vec<f32>>, OnnxError> {
        match self.floats(n, node, i)? {
            None => Ok(None),
            Some((_, v)) if v.len() == len => Ok(Some(v)),
            Some((d, _)) => {
                Err(self.refuse(n, node, format!("bias of shape {d:?} for {len} outputs")))
            }
        }
    }

    /// A 2-D input for Gemm/MatMul: its feature count.
    fn features(&self, n: &NodeProto, node: &str) -> Result<(Act, usize), OnnxError> {
        let a = self.act(n, node, 0)?;
        if a.rank != 2 {
            return Err(self.refuse(
                n,
                node,
                format!(
                    "its input has rank {}; systole's dense layer takes N x F (Flatten first)",
                    a.rank
                ),
            ));
        }
        Ok((a, a.shape[0]))
    }

    fn gemm(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &["alpha", "beta", "transA", "transB"])?;
        if self.attr_i(n, node, "transA", 0)? != 0 {
            return Err(self.refuse(
                n,
                node,
                "transA = 1 (transposed activations) is not supported",
            ));
        }
        let (a, k) = self.features(n, node)?;
        let (bd, bv) = self
            .floats(n, node, 1)?
            .ok_or_else(|| self.refuse(n, node, "it has no B"))?;
        let trans = self.attr_i(n, node, "transB", 0)? != 0;
        let (alpha, beta) = (
            self.attr_f(n, node, "alpha", 1.0)?,
            self.attr_f(n, node, "beta", 1.0)?,
        );
        let (rows, cols) = match bd[..] {
            [r, c] => (r, c),
            _ => return Err(self.refuse(n, node, format!("B of shape {bd:?} is not 2-D"))),
        };
        let (kk, out) = if trans { (cols, rows) } else { (rows, cols) };
        if kk != k || out == 0 {
            return Err(self.refuse(
                n,
                node,
                format!(
                    "B of shape {bd:?} (transB {}) on {k} input features",
                    trans as u8
                ),
            ));
        }
        let mut w = vec![0f32; k * out];
        for r in 0..k {
            for c in 0..out {
                let v = if trans {
                    bv[c * k + r]
                } else {
                    bv[r * out + c]
                };
                w[r * out + c] = (alpha as f64 * v as f64) as f32;
            }
        }
        let b = self
            .bias(n, node, 2, out)?
            .map(|v| v.iter().map(|&x| (beta as f64 * x as f64) as f32).collect());
        if alpha != 1.0 || (beta != 1.0 && b.is_some()) {
            self.notes.push(format!(
                "'{node}': Gemm's alpha {alpha} and beta {beta} folded into its weights and bias"
            ));
        }
        if let Some((d, _)) = self.floats(n, node, 2)? {
            if d.len() == 2 && d[0] > 1 {
                return Err(self.refuse(
                    n,
                    node,
                    format!("C of shape {d:?} is not a per-output bias"),
                ));
            }
        }
        self.emit(
            n,
            node,
            Op::Dense { out, w, b },
            vec![a.src],
            [out, 1, 1],
            2,
        )
    }

    fn matmul(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &[])?;
        let (a, k) = self.features(n, node)?;
        let (bd, w) = self
            .floats(n, node, 1)?
            .ok_or_else(|| self.refuse(n, node, "it has no B"))?;
        match bd[..] {
            [r, out] if r == k && out > 0 => self.emit(n, node, Op::Dense { out, w, b: None }, vec![a.src], [out, 1, 1], 2),
            _ => Err(self.refuse(n, node, format!("B of shape {bd:?} on {k} input features (systole takes 2-D MatMul by a constant)"))),
        }
    }

    fn add(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &[])?;
        let name = |i: usize| n.input.get(i).cloned().unwrap_or_default();
        let (x, y) = (name(0), name(1));
        let (ax, ay) = (self.acts.contains_key(&x), self.acts.contains_key(&y));
        if ax && ay {
            let (a, b) = (self.act(n, node, 0)?, self.act(n, node, 1)?);
            if a.shape != b.shape || a.rank != b.rank {
                return Err(self.refuse(
                    n,
                    node,
                    format!("it adds {:?} to {:?}: systole's residual add takes equal shapes (no broadcasting)", a.shape, b.shape),
                ));
            }
            return self.emit(n, node, Op::Add, vec![a.src, b.src], a.shape, a.rank);
        }
        let (ai, ci) = if ax { (0, 1) } else { (1, 0) };
        let a = self.act(n, node, ai)?;
        let (cd, cv) = self
            .floats(n, node, ci)?
            .ok_or_else(|| self.refuse(n, node, "it has one input"))?;
        let Some(i) = self.foldable(&a) else {
            return Err(self.refuse(
                n,
                node,
                "it adds a constant to something other than a Conv/Gemm/MatMul whose output nothing else reads; systole folds a constant Add only into the bias of the layer before it",
            ));
        };
        let ch = a.shape[0];
        // One value per channel, broadcast as ONNX aligns trailing axes: the constant's axis
        // that meets the activation's channel axis (1) may be `ch`, every other must be 1.
        let lead = cd.len() as i64 - a.rank as i64 + 1;
        let per_channel = cd.len() <= a.rank as usize
            && cd
                .iter()
                .enumerate()
                .all(|(j, &d)| d == 1 || (j as i64 == lead && d == ch));
        let add: Vec<f32> = match cv.len() {
            1 if per_channel => vec![cv[0]; ch],
            l if l == ch && per_channel => cv,
            _ => {
                return Err(self.refuse(
                    n,
                    node,
                    format!(
                        "a constant of shape {cd:?} is not one value per output channel ({ch})"
                    ),
                ))
            }
        };
        // After a QuantizeLinear/DequantizeLinear pair the Add is the bias add that follows the
        // product's rounding: systole's layer exactly, when the layer had no bias before.
        let fracs = self.nodes[i].fracs.len();
        let has_bias = matches!(
            &self.nodes[i].op,
            Op::Dense { b: Some(_), .. } | Op::Conv { b: Some(_), .. }
        );
        if fracs > 1 || (fracs == 1 && has_bias) {
            return Err(self.refuse(n, node, "a constant Add after a layer's bias has been rounded is not a bias systole can fold"));
        }
        let (Op::Dense { b, .. } | Op::Conv { b, .. }) = &mut self.nodes[i].op else {
            unreachable!()
        };
        let bias = b.get_or_insert_with(|| vec![0.0; ch]);
        for (b, v) in bias.iter_mut().zip(&add) {
            *b = (*b as f64 + *v as f64) as f32;
        }
        let target = self.nodes[i].name.clone();
        self.notes.push(format!(
            "'{node}' (Add of a constant) folded into the bias of '{target}'"
        ));
        self.alias(n, node, a)
    }

    fn pool(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        let max = n.op_type == "MaxPool";
        let known: &[&str] = if max {
            &[
                "auto_pad",
                "ceil_mode",
                "dilations",
                "kernel_shape",
                "pads",
                "storage_order",
                "strides",
            ]
        } else {
            &[
                "auto_pad",
                "ceil_mode",
                "count_include_pad",
                "dilations",
                "kernel_shape",
                "pads",
                "strides",
            ]
        };
        self.known_attrs(n, node, known)?;
        let a = self.rank4(n, node)?;
        let k = self.square(n, node, "kernel_shape", None)?;
        let s = self.square(n, node, "strides", Some(1))?;
        if self.square(n, node, "dilations", Some(1))? != 1 {
            return Err(self.refuse(n, node, "dilations other than 1 are not supported"));
        }
        let [c, h, w] = a.shape;
        if self.padding(n, node, k, s, h, w)? != 0 {
            return Err(self.refuse(
                n,
                node,
                "padded pooling is not supported (systole's pools take no padding)",
            ));
        }
        if h < k || w < k {
            return Err(self.refuse(
                n,
                node,
                format!("a {k}x{k} window does not fit a {h}x{w} input"),
            ));
        }
        let ceil = self.attr_i(n, node, "ceil_mode", 0)? != 0;
        if ceil && ((h - k) % s != 0 || (w - k) % s != 0) {
            return Err(self.refuse(
                n,
                node,
                "ceil_mode = 1 with a partial last window is not supported",
            ));
        }
        let op = if max {
            Op::MaxPool {
                kernel: k,
                stride: s,
            }
        } else {
            Op::AvgPool {
                kernel: k,
                stride: s,
            }
        };
        self.emit(
            n,
            node,
            op,
            vec![a.src],
            [c, (h - k) / s + 1, (w - k) / s + 1],
            4,
        )
    }

    fn batch_norm(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(
            n,
            node,
            &["epsilon", "momentum", "spatial", "training_mode"],
        )?;
        if self.attr_i(n, node, "training_mode", 0)? != 0
            || self.attr_i(n, node, "spatial", 1)? != 1
        {
            return Err(self.refuse(n, node, "training_mode = 1 or spatial = 0: systole folds inference-mode batch normalisation only"));
        }
        let a = self.act(n, node, 0)?;
        let eps = self.attr_f(n, node, "epsilon", 1e-5)? as f64;
        let ch = a.shape[0];
        let mut v = Vec::new();
        for i in 1..5 {
            match self.floats(n, node, i)? {
                Some((_, x)) if x.len() == ch => v.push(x),
                _ => {
                    return Err(self.refuse(
                        n,
                        node,
                        format!("input {i} must be a constant of {ch} values"),
                    ))
                }
            }
        }
        let Some(t) = self.foldable(&a) else {
            return Err(self.refuse(
                n,
                node,
                "it does not follow a Conv/Gemm/MatMul whose output nothing else reads; systole folds batch normalisation into the layer before it",
            ));
        };
        if !self.nodes[t].fracs.is_empty() {
            return Err(self.refuse(n, node, "it follows a QuantizeLinear/DequantizeLinear pair: folding it would change the rounding"));
        }
        let (scale, shift, mean, var) = (&v[0], &v[1], &v[2], &v[3]);
        let f: Vec<f64> = (0..ch)
            .map(|o| scale[o] as f64 / (var[o] as f64 + eps).sqrt())
            .collect();
        if f.iter().any(|x| !x.is_finite()) {
            return Err(self.refuse(n, node, "a variance plus epsilon is not positive"));
        }
        let (w, b, per_row) = match &mut self.nodes[t].op {
            Op::Conv { w, b, .. } => (w, b, true),
            Op::Dense { w, b, .. } => (w, b, false),
            _ => unreachable!(),
        };
        let cols = w.len() / ch;
        for (j, x) in w.iter_mut().enumerate() {
            let o = if per_row { j / cols } else { j % ch };
            *x = (*x as f64 * f[o]) as f32;
        }
        let bias = b.get_or_insert_with(|| vec![0.0; ch]);
        for o in 0..ch {
            bias[o] = ((bias[o] as f64 - mean[o] as f64) * f[o] + shift[o] as f64) as f32;
        }
        let target = self.nodes[t].name.clone();
        self.notes.push(format!(
            "'{node}' (BatchNormalization) folded into the weights and bias of '{target}'"
        ));
        self.alias(n, node, a)
    }
}
