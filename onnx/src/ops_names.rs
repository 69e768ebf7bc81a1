//! The ops that move no data or only name values: Flatten, Reshape, Softmax at the output,
//! Constant, Dropout, and the QuantizeLinear/DequantizeLinear pairs of systole's export.

use crate::import::{Act, Builder};
use crate::net::Src;
use crate::proto::{attr_type, NodeProto};
use crate::tensor::{self, Const, Values};
use crate::OnnxError;

impl Builder<'_> {
    pub(crate) fn flatten(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &["axis"])?;
        let a = self.act(n, node, 0)?;
        let axis = self.attr_i(n, node, "axis", 1)?;
        if axis != 1 && axis != 1 - a.rank as i64 {
            return Err(self.refuse(
                n,
                node,
                format!("axis {axis}: systole flattens after the batch axis (axis 1)"),
            ));
        }
        self.alias(n, node, flat(a))
    }

    pub(crate) fn reshape(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &["allowzero"])?;
        let first = n.input.first().cloned().unwrap_or_default();
        if let Some(c) = self.consts.get(&first).cloned() {
            return self.reshape_const(n, node, c);
        }
        let a = self.act(n, node, 0)?;
        let shape = self
            .konst(n, node, 1)?
            .and_then(|c| c.ints().map(<[i64]>::to_vec));
        let shape = shape
            .ok_or_else(|| self.refuse(n, node, "its shape must be a constant INT64 tensor"))?;
        let allowzero = self.attr_i(n, node, "allowzero", 0)? != 0;
        let [c, h, w] = a.shape;
        let input: Vec<i64> = if a.rank == 4 {
            vec![1, c as i64, h as i64, w as i64]
        } else {
            vec![1, c as i64]
        };
        let total = (c * h * w) as i64;
        // Resolve 0 (copy) and -1 (infer) as ONNX does, for one image.
        let mut dims: Vec<i64> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if d == 0 && !allowzero {
                    input.get(i).copied().unwrap_or(-2)
                } else {
                    d
                }
            })
            .collect();
        let known: i64 = dims.iter().filter(|&&d| d != -1).product();
        if dims.iter().filter(|&&d| d == -1).count() == 1 && known > 0 && total % known == 0 {
            let f = total / known;
            dims.iter_mut().filter(|d| **d == -1).for_each(|d| *d = f);
        }
        if dims == input {
            return self.alias(n, node, a);
        }
        if dims.len() == 2 && dims[0] == 1 && dims[1] == total {
            return self.alias(n, node, flat(a));
        }
        Err(self.refuse(
            n,
            node,
            format!("shape {shape:?} on an input of {c}x{h}x{w}: systole takes a Reshape that flattens (N x C·H·W) or changes nothing"),
        ))
    }

    /// A Reshape of a constant (weights stored in another shape): a constant of the new shape.
    fn reshape_const(&mut self, n: &NodeProto, node: &str, c: Const) -> Result<(), OnnxError> {
        let shape = self
            .konst(n, node, 1)?
            .and_then(|s| s.ints().map(<[i64]>::to_vec));
        let shape = shape
            .ok_or_else(|| self.refuse(n, node, "its shape must be a constant INT64 tensor"))?;
        let allowzero = self.attr_i(n, node, "allowzero", 0)? != 0;
        let mut dims: Vec<i64> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if d == 0 && !allowzero {
                    c.dims.get(i).map_or(-2, |&x| x as i64)
                } else {
                    d
                }
            })
            .collect();
        let known: i64 = dims.iter().filter(|&&d| d != -1).product();
        let total = c.len() as i64;
        if dims.iter().filter(|&&d| d == -1).count() == 1 && known > 0 && total % known == 0 {
            dims.iter_mut()
                .filter(|d| **d == -1)
                .for_each(|d| *d = total / known);
        }
        if dims.iter().any(|&d| d < 0) || dims.iter().product::<i64>() != total {
            return Err(self.refuse(
                n,
                node,
                format!("shape {shape:?} does not fit a constant of {:?}", c.dims),
            ));
        }
        let c = Const {
            dims: dims.iter().map(|&d| d as usize).collect(),
            values: c.values,
        };
        self.set_const(n, node, c)
    }

    pub(crate) fn softmax(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &["axis"])?;
        let a = self.act(n, node, 0)?;
        let default = if self.opset >= 13 { -1 } else { 1 };
        let axis = self.attr_i(n, node, "axis", default)?;
        let axis = if axis < 0 { axis + a.rank as i64 } else { axis };
        if axis != 1 || a.shape[1] != 1 || a.shape[2] != 1 {
            return Err(self.refuse(n, node, format!("softmax over axis {axis} of {:?}: systole's head is a softmax over the class scores", a.shape)));
        }
        self.notes.push(format!("'{node}' ({}) at the output dropped: systole's loss is softmax cross-entropy on the logits", n.op_type));
        self.alias(n, node, Act { head: true, ..a })
    }

    pub(crate) fn constant(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(
            n,
            node,
            &[
                "value",
                "value_float",
                "value_floats",
                "value_int",
                "value_ints",
            ],
        )?;
        let [a] = &n.attribute[..] else {
            return Err(self.refuse(n, node, "it must have exactly one value attribute"));
        };
        let c = match (a.name.as_str(), a.r#type) {
            ("value", attr_type::TENSOR) => {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| self.refuse(n, node, "its value has no tensor"))?;
                tensor::decode(t, self.dir)?
            }
            ("value_float", attr_type::FLOAT) => Const {
                dims: vec![],
                values: Values::F32(vec![a.f]),
            },
            ("value_floats", attr_type::FLOATS) => Const {
                dims: vec![a.floats.len()],
                values: Values::F32(a.floats.clone()),
            },
            ("value_int", attr_type::INT) => Const {
                dims: vec![],
                values: Values::I64(vec![a.i]),
            },
            ("value_ints", attr_type::INTS) => Const {
                dims: vec![a.ints.len()],
                values: Values::I64(a.ints.clone()),
            },
            (name, t) => {
                return Err(self.refuse(n, node, format!("attribute '{name}' of type {t}")))
            }
        };
        self.set_const(n, node, c)
    }

    pub(crate) fn dropout(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &["ratio", "seed"])?;
        let a = self.act(n, node, 0)?;
        if let Some(t) = self.konst(n, node, 2)? {
            if t.ints().is_none_or(|v| v.iter().any(|&x| x != 0)) {
                return Err(self.refuse(
                    n,
                    node,
                    "training_mode must be a constant false: systole imports inference graphs",
                ));
            }
        }
        if n.output
            .get(1)
            .is_some_and(|m| !m.is_empty() && self.is_read(m))
        {
            return Err(self.refuse(n, node, "its mask output is read"));
        }
        self.notes
            .push(format!("'{node}' (Dropout) is the identity at inference"));
        self.alias(n, node, a)
    }
}

impl Builder<'_> {
    /// A QuantizeLinear (int16, zero point 0, scale `2^-f`) whose only reader is a
    /// DequantizeLinear with the same scale: systole's rounding to `f` fractional bits there.
    pub(crate) fn qdq(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        let quant = n.op_type == "QuantizeLinear";
        self.known_attrs(n, node, &["axis", "saturate"])?;
        let scale = self
            .konst(n, node, 1)?
            .and_then(|c| c.floats().filter(|v| v.len() == 1).map(|v| v[0] as f64));
        let f = scale
            .and_then(|s| (0..=crate::infer::MAX_FRAC).find(|&f| s * (1u64 << f) as f64 == 1.0))
            .ok_or_else(|| {
                self.refuse(
                    n,
                    node,
                    "its scale must be one power of two 2^-f, f from 0 to 15 (systole's export)",
                )
            })?;
        let zp = self.konst(n, node, 2)?;
        let int16 = n
            .input
            .get(2)
            .and_then(|z| self.zero_point_types.get(z))
            .copied();
        if zp.and_then(|c| c.ints()).is_none_or(|v| v != [0])
            || int16 != Some(crate::proto::data_type::INT16)
        {
            return Err(self.refuse(
                n,
                node,
                "its zero point must be an INT16 zero (systole's export: 16-bit words)",
            ));
        }
        let name = n.input.first().cloned().unwrap_or_default();
        if let Some(c) = self.consts.get(&name).cloned() {
            return self.qdq_const(n, node, c, f);
        }
        let a = *self.acts.get(&name).ok_or_else(|| {
            self.refuse(
                n,
                node,
                format!("input '{name}' is not computed before this node"),
            )
        })?;
        if quant {
            if a.q.is_some() {
                return Err(self.refuse(n, node, "it quantizes an already quantized value"));
            }
            return self.alias(n, node, Act { q: Some(f), ..a });
        }
        if a.q != Some(f) {
            return Err(self.refuse(n, node, "systole takes DequantizeLinear only right after a QuantizeLinear of the same scale"));
        }
        match a.src {
            Src::Input if self.input_frac.is_none() => self.input_frac = Some(f),
            Src::Node(i) if self.nodes[i].fracs.len() < crate::infer::points(&self.nodes[i].op) => {
                self.nodes[i].fracs.push(f)
            }
            _ => {
                return Err(self.refuse(
                    n,
                    node,
                    "it rounds a value at a point where systole does not round",
                ))
            }
        }
        self.points_seen += 1;
        self.alias(
            n,
            node,
            Act {
                q: None,
                dq: Some(f),
                ..a
            },
        )
    }

    /// A Clip right after a rounding point's DequantizeLinear at `2^-f`, to a `W`-bit word's
    /// range there (W from 8 to 15): systole's saturation to narrower words.
    pub(crate) fn clip(&mut self, n: &NodeProto, node: &str) -> Result<(), OnnxError> {
        self.known_attrs(n, node, &[])?;
        let a = self.act(n, node, 0)?;
        let Some(f) = a.dq else {
            return Err(self.refuse(n, node, "systole takes Clip only right after the DequantizeLinear of a rounding point (its export's narrower words)"));
        };
        let bound = |i: usize| -> Result<Option<f64>, OnnxError> {
            Ok(self
                .konst(n, node, i)?
                .and_then(|c| c.floats().filter(|v| v.len() == 1).map(|v| v[0] as f64)))
        };
        let (lo, hi) = (bound(1)?, bound(2)?);
        let unit = 1.0 / (1u64 << f) as f64;
        let w = (8..crate::infer::WORD_BITS).find(|&w| {
            let (l, h) = crate::infer::word_range(w);
            lo == Some(l as f64 * unit) && hi == Some(h as f64 * unit)
        });
        let Some(w) = w else {
            return Err(self.refuse(n, node, format!("its bounds must be the range of W-bit words at the scale 2^-{f} of the DequantizeLinear before it, W from 8 to 15")));
        };
        if self.word_bits.is_some_and(|v| v != w) {
            return Err(self.refuse(
                n,
                node,
                format!(
                    "it saturates to {w}-bit words, another Clip to {}",
                    self.word_bits.unwrap_or(0)
                ),
            ));
        }
        self.word_bits = Some(w);
        self.clips += 1;
        self.alias(n, node, Act { dq: None, ..a })
    }

    /// A constant through QuantizeLinear (float -> its int16 words at `f`) or DequantizeLinear
    /// (words -> their values): the export writes each weight tensor's format this way.
    fn qdq_const(&mut self, n: &NodeProto, node: &str, c: Const, f: u32) -> Result<(), OnnxError> {
        let values = match (n.op_type.as_str(), &c.values) {
            ("QuantizeLinear", Values::F32(v)) => {
                Values::I64(v.iter().map(|&x| crate::infer::quantize(x as f64, f) as i64).collect())
            }
            ("DequantizeLinear", Values::I64(v)) if v.iter().all(|&x| i16::try_from(x).is_ok()) => {
                Values::F32(v.iter().map(|&x| x as f32 / (1u64 << f) as f32).collect())
            }
            _ => return Err(self.refuse(n, node, "its constant input has the wrong type (float for QuantizeLinear, int16 words for DequantizeLinear)")),
        };
        self.set_const(
            n,
            node,
            Const {
                dims: c.dims,
                values,
            },
        )
    }
}

/// `a` seen as `N x (C·H·W)`: no data moves, rows are already NCHW.
fn flat(a: Act) -> Act {
    let [c, h, w] = a.shape;
    Act {
        shape: [c * h * w, 1, 1],
        rank: 2,
        ..a
    }
}
