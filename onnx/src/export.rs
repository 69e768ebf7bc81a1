//! [`Net`] + weights + frozen formats -> standard ONNX (opset 21) that a float runtime runs:
//! float initializers holding the weights' exact fixed-point values, and a QuantizeLinear /
//! DequantizeLinear pair (int16, zero point 0, scale `2^-frac`) at each of systole's rounding
//! points, so the runtime rounds where the array does. The import reads these pairs back as the
//! formats (a round trip gives the same words).

use crate::build::*;
use crate::infer::{points, Formats, Weights};
use crate::net::{Net, Op, Src};
use crate::proto::{data_type, GraphProto, ModelProto, NodeProto, TensorProto};
use std::collections::BTreeSet;

/// The opset the export writes (int16 QuantizeLinear needs 21).
pub const EXPORT_OPSET: i64 = 21;

struct Writer {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    scales: BTreeSet<u32>,
    /// The formats whose W-bit range a Clip needs (`W < 16`).
    clips: BTreeSet<u32>,
    word_bits: u32,
    count: usize,
}

impl Writer {
    fn fresh(&mut self, base: &str) -> String {
        self.count += 1;
        format!("{base}_{}", self.count)
    }

    fn add(
        &mut self,
        op: &str,
        inputs: &[&str],
        base: &str,
        attrs: Vec<crate::proto::AttributeProto>,
    ) -> String {
        let out = self.fresh(base);
        let name = out.clone();
        self.nodes.push(node(op, &name, inputs, &[&out], attrs));
        out
    }

    /// Rounds `x` to `f` fractional bits as the array does: QuantizeLinear then DequantizeLinear.
    fn qdq(&mut self, x: &str, f: u32) -> String {
        self.scales.insert(f);
        let (scale, zp) = (format!("scale_2^-{f}"), "zero_int16".to_string());
        let q = self.add(
            "QuantizeLinear",
            &[x, &scale, &zp],
            &format!("{x}_q{f}"),
            vec![],
        );
        self.add(
            "DequantizeLinear",
            &[&q, &scale, &zp],
            &format!("{x}_dq{f}"),
            vec![],
        )
    }

    /// A rounding point of an activation: [`Self::qdq`], then, for words narrower than 16
    /// bits, a Clip to the `W`-bit range at `2^-f` (the int16 QuantizeLinear saturates to 16).
    fn point(&mut self, x: &str, f: u32) -> String {
        let y = self.qdq(x, f);
        if self.word_bits >= crate::infer::WORD_BITS {
            return y;
        }
        self.clips.insert(f);
        let (lo, hi) = clip_names(self.word_bits, f);
        self.add(
            "Clip",
            &[&y, &lo, &hi],
            &format!("{x}_w{}", self.word_bits),
            vec![],
        )
    }

    /// A weight tensor: its exact values as a float initializer, through a QDQ pair at its own
    /// format (which also keeps a runtime from quantizing it its own way).
    fn weight(&mut self, name: &str, dims: &[usize], q: &systole_core::tensor::QMatrix) -> String {
        self.inits.push(tensor_f32(name, dims, &values(q)));
        self.qdq(name, q.frac)
    }

    fn flat(&mut self, x: &str, rank: u8) -> String {
        if rank == 2 {
            x.to_string()
        } else {
            self.add(
                "Flatten",
                &[x],
                &format!("{x}_flat"),
                vec![attr_i("axis", 1)],
            )
        }
    }
}

fn clip_names(w: u32, f: u32) -> (String, String) {
    (format!("min_w{w}_2^-{f}"), format!("max_w{w}_2^-{f}"))
}

fn values(q: &systole_core::tensor::QMatrix) -> Vec<f32> {
    // Exact: a 16-bit word times a power of two is an f32.
    q.data
        .iter()
        .map(|&v| v as f32 / (1u64 << q.frac) as f32)
        .collect()
}

/// Layer `i`'s nodes, reading `outs` (the earlier layers' outputs and ranks) and `x` (the
/// network's quantized input): its output value and rank.
fn layer(
    w: &mut Writer,
    n: &crate::net::Node,
    i: usize,
    wt: Option<&Weights>,
    pts: &[u32],
    outs: &[(String, u8)],
    x: &str,
) -> (String, u8) {
    let get = |s: Src, outs: &[(String, u8)]| match s {
        Src::Input => (x.to_string(), 4u8),
        Src::Node(j) => outs[j].clone(),
    };
    let (a, rank) = get(n.inputs[0], outs);
    let tag = format!("l{}", i + 1);
    match &n.op {
        Op::Dense { .. } | Op::Conv { .. } => {
            let wt = wt.expect("weights");
            let wname = format!("{tag}_W");
            let (z, r) = match n.op {
                Op::Conv {
                    out_ch,
                    kernel: k,
                    stride: s,
                    pad: p,
                    ..
                } => {
                    let cin = wt.w.cols / (k * k);
                    let wq = w.weight(&wname, &[out_ch, cin, k, k], &wt.w);
                    let p = p as i64;
                    let attrs = vec![
                        attr_ints("kernel_shape", &[k as i64; 2]),
                        attr_ints("strides", &[s as i64; 2]),
                        attr_ints("pads", &[p, p, p, p]),
                    ];
                    (w.add("Conv", &[&a, &wq], &format!("{tag}_conv"), attrs), 4)
                }
                _ => {
                    let wq = w.weight(&wname, &[wt.w.rows, wt.w.cols], &wt.w);
                    let f = w.flat(&a, rank);
                    (
                        w.add("MatMul", &[&f, &wq], &format!("{tag}_matmul"), vec![]),
                        2,
                    )
                }
            };
            let mut y = w.point(&z, pts[0]);
            if let Some(b) = &wt.b {
                let bname = format!("{tag}_b");
                let dims: Vec<usize> = if r == 4 {
                    vec![b.cols, 1, 1]
                } else {
                    vec![b.cols]
                };
                let bq = w.weight(&bname, &dims, b);
                let s = w.add("Add", &[&y, &bq], &format!("{tag}_bias"), vec![]);
                y = w.point(&s, pts[1]);
            }
            (y, r)
        }
        Op::Relu => (w.add("Relu", &[&a], &format!("{tag}_relu"), vec![]), rank),
        Op::MaxPool {
            kernel: k,
            stride: s,
        }
        | Op::AvgPool {
            kernel: k,
            stride: s,
        } => {
            let op = if matches!(n.op, Op::MaxPool { .. }) {
                "MaxPool"
            } else {
                "AveragePool"
            };
            let attrs = vec![
                attr_ints("kernel_shape", &[*k as i64; 2]),
                attr_ints("strides", &[*s as i64; 2]),
            ];
            let y = w.add(op, &[&a], &format!("{tag}_pool"), attrs);
            (
                if op == "AveragePool" {
                    w.point(&y, pts[0])
                } else {
                    y
                },
                4,
            )
        }
        Op::GlobalAvgPool => {
            let y = w.add("GlobalAveragePool", &[&a], &format!("{tag}_gap"), vec![]);
            (w.point(&y, pts[0]), 4)
        }
        Op::Add => {
            let (b, rb) = get(n.inputs[1], outs);
            let (a, b, r) = if rank == rb {
                (a, b, rank)
            } else {
                (w.flat(&a, rank), w.flat(&b, rb), 2)
            };
            let y = w.add("Add", &[&a, &b], &format!("{tag}_add"), vec![]);
            (w.point(&y, pts[0]), r)
        }
    }
}

/// The ONNX model of `net` with weights `ws` in formats `fm`; `metadata` is added to systole's
/// own keys (the caller says how the input is formed).
pub fn export(
    net: &Net,
    ws: &[Option<Weights>],
    fm: &Formats,
    metadata: &[(String, String)],
) -> ModelProto {
    let mut w = Writer {
        nodes: Vec::new(),
        inits: Vec::new(),
        scales: BTreeSet::new(),
        clips: BTreeSet::new(),
        word_bits: fm.word_bits,
        count: 0,
    };
    let [c, h, wd] = net.input;
    let x = w.point("input", fm.input);
    // Each layer's output value and its rank (4: N x C x H x W, 2: N x F).
    let mut outs: Vec<(String, u8)> = Vec::with_capacity(net.nodes.len());
    for (i, n) in net.nodes.iter().enumerate() {
        let out = layer(&mut w, n, i, ws[i].as_ref(), &fm.nodes[i], &outs, &x);
        debug_assert_eq!(fm.nodes[i].len(), points(&n.op));
        outs.push(out);
    }
    let (last, rank) = outs.pop().expect("a network has layers");
    let logits = w.flat(&last, rank);
    let out = "logits";
    w.nodes
        .push(node("Identity", "logits", &[&logits], &[out], vec![]));
    for &f in &w.scales {
        w.inits.push(tensor_f32(
            &format!("scale_2^-{f}"),
            &[],
            &[1.0 / (1u64 << f) as f32],
        ));
    }
    for &f in &w.clips {
        let (lo, hi) = crate::infer::word_range(w.word_bits);
        let unit = 1.0 / (1u64 << f) as f32;
        let (lo_name, hi_name) = clip_names(w.word_bits, f);
        // Exact: a W-bit word times a power of two is an f32.
        w.inits.push(tensor_f32(&lo_name, &[], &[lo as f32 * unit]));
        w.inits.push(tensor_f32(&hi_name, &[], &[hi as f32 * unit]));
    }
    w.inits.push(scalar_int("zero_int16", data_type::INT16, 0));
    let graph = GraphProto {
        node: w.nodes,
        name: "systole".into(),
        initializer: w.inits,
        input: vec![value_f32("input", &[None, Some(c), Some(h), Some(wd)])],
        output: vec![value_f32(out, &[None, Some(net.classes)])],
        ..Default::default()
    };
    let mut meta: Vec<(String, String)> = vec![
        (
            "systole.words".into(),
            format!(
                "{}-bit two's complement; value = word / 2^frac",
                fm.word_bits
            ),
        ),
        (
            "systole.rounding".into(),
            if fm.word_bits < crate::infer::WORD_BITS {
                format!("each QuantizeLinear/DequantizeLinear pair (int16, zero point 0, scale 2^-frac) and the Clip after it to the {}-bit range is one of systole's conversions: round to nearest, ties to even, saturated", fm.word_bits)
            } else {
                "each QuantizeLinear/DequantizeLinear pair (int16, zero point 0, scale 2^-frac) is one of systole's conversions: round to nearest, ties to even, saturated".into()
            },
        ),
        (
            "systole.output".into(),
            "logits; systole's loss is softmax cross-entropy on them".into(),
        ),
    ];
    meta.extend(metadata.iter().cloned());
    let meta: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut m = model(graph, EXPORT_OPSET, "systole", &meta);
    m.ir_version = 10;
    m
}
