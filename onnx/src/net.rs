//! The neutral form of an imported network: what the import made of the ONNX graph, layer by
//! layer, with its weights as host floats in systole's layouts. It maps one to one onto the
//! layer graph (`systole_step::graph`); it does not depend on it, so the protobuf side is tested
//! on its own.

use std::fmt::Write;

/// Where a layer's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// The network's input.
    Input,
    /// An earlier layer's output.
    Node(usize),
}

/// One layer and its weights.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `y = x·W + b` over the input's `c·h·w` features; `w` is `inp x out`, row-major.
    Dense {
        /// Outputs.
        out: usize,
        /// Weights, `inp x out`.
        w: Vec<f32>,
        /// Bias (`out`), if any.
        b: Option<Vec<f32>>,
    },
    /// Square-kernel convolution with symmetric zero padding; `w` is `[co][ci][ky][kx]`.
    Conv {
        /// Output channels.
        out_ch: usize,
        /// Kernel side.
        kernel: usize,
        /// Stride.
        stride: usize,
        /// Zero padding on every side.
        pad: usize,
        /// Weights, `out_ch x (in_ch·k·k)`.
        w: Vec<f32>,
        /// Bias (`out_ch`), if any.
        b: Option<Vec<f32>>,
    },
    /// `max(x, 0)`.
    Relu,
    /// Max pooling without padding (windows past the edge not taken).
    MaxPool {
        /// Window side.
        kernel: usize,
        /// Stride.
        stride: usize,
    },
    /// Average pooling without padding, divisor `kernel²`.
    AvgPool {
        /// Window side.
        kernel: usize,
        /// Stride.
        stride: usize,
    },
    /// `(c, h, w) -> (c, 1, 1)`, the mean of each channel.
    GlobalAvgPool,
    /// The sum of two equally shaped inputs (a residual connection).
    Add,
}

impl Op {
    /// Short name for the import's table.
    pub fn name(&self) -> String {
        match self {
            Op::Dense { out, b, .. } => {
                format!("dense {out}{}", if b.is_some() { "" } else { " (no bias)" })
            }
            Op::Conv {
                out_ch,
                kernel,
                stride,
                pad,
                b,
                ..
            } => format!(
                "conv {kernel}x{kernel} {out_ch} stride {stride} pad {pad}{}",
                if b.is_some() { "" } else { " (no bias)" }
            ),
            Op::Relu => "relu".into(),
            Op::MaxPool { kernel, stride } => format!("maxpool {kernel}x{kernel} stride {stride}"),
            Op::AvgPool { kernel, stride } => format!("avgpool {kernel}x{kernel} stride {stride}"),
            Op::GlobalAvgPool => "global avgpool".into(),
            Op::Add => "add".into(),
        }
    }

    /// Number of parameters (weights and bias).
    pub fn params(&self) -> usize {
        match self {
            Op::Dense { w, b, .. } | Op::Conv { w, b, .. } => {
                w.len() + b.as_ref().map_or(0, Vec::len)
            }
            _ => 0,
        }
    }
}

/// One layer of the imported network.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The ONNX node it came from (its name, or op and place when unnamed).
    pub name: String,
    /// The layer.
    pub op: Op,
    /// Its inputs (two for `Add`, else one).
    pub inputs: Vec<Src>,
    /// Its output shape `(c, h, w)` for one image.
    pub shape: [usize; 3],
    /// The formats of its rounding points, when the file gives them (QuantizeLinear /
    /// DequantizeLinear pairs after it, as systole's export writes them).
    pub fracs: Vec<u32>,
}

/// An imported network: one image `input` in, the last node's `(classes, 1, 1)` logits out.
#[derive(Clone, Debug, PartialEq)]
pub struct Net {
    /// The ONNX graph input's name.
    pub input_name: String,
    /// Input shape `(c, h, w)` of one image.
    pub input: [usize; 3],
    /// The input's format, when the file gives it (a QuantizeLinear / DequantizeLinear pair).
    pub input_frac: Option<u32>,
    /// Width of its words: 16, or narrower when a Clip after every rounding point saturates to
    /// `W` bits (systole's export of a run at `--word-bits W`), or a run's own width.
    pub word_bits: u32,
    /// Number of classes (the last node's channels).
    pub classes: usize,
    /// Layers in topological order.
    pub nodes: Vec<Node>,
    /// What the import did beyond one node per layer: folds, dropped ops, ignored attributes.
    pub notes: Vec<String>,
    /// The default domain's opset of the file.
    pub opset: i64,
    /// The file's `producer_name producer_version`.
    pub producer: String,
    /// The file's metadata (key, value).
    pub metadata: Vec<(String, String)>,
}

impl Net {
    /// The formats the file gives: `None` when it gives none (a float model), an error naming
    /// the first layer whose rounding points it does not cover when it gives some.
    pub fn formats(&self) -> Option<Result<crate::infer::Formats, String>> {
        if self.input_frac.is_none() && self.nodes.iter().all(|n| n.fracs.is_empty()) {
            return None;
        }
        let bad = self
            .nodes
            .iter()
            .find(|n| n.fracs.len() != crate::infer::points(&n.op));
        Some(match (self.input_frac, bad) {
            (Some(input), None) => Ok(crate::infer::Formats {
                word_bits: self.word_bits,
                input,
                nodes: self.nodes.iter().map(|n| n.fracs.clone()).collect(),
            }),
            (None, _) => Err("the model quantizes some values but not its input".into()),
            (_, Some(n)) => Err(format!(
                "the model's QuantizeLinear/DequantizeLinear pairs give {} formats after '{}' ({}), which rounds at {} points",
                n.fracs.len(),
                n.name,
                n.op.name(),
                crate::infer::points(&n.op)
            )),
        })
    }

    /// The import's report: one line per layer (shape, parameters), then the notes.
    pub fn describe(&self) -> String {
        let [c, h, w] = self.input;
        let mut s = format!(
            "ONNX model (opset {}, from {}): input '{}' {c}x{h}x{w}, {} classes\n",
            self.opset,
            if self.producer.trim().is_empty() {
                "an unnamed producer"
            } else {
                self.producer.trim()
            },
            self.input_name,
            self.classes
        );
        let _ = writeln!(
            s,
            "  {:>3}  {:<28} {:<34} {:>10}  {:>9}  inputs",
            "#", "node", "layer", "output", "params"
        );
        for (i, n) in self.nodes.iter().enumerate() {
            let [c, h, w] = n.shape;
            let ins: Vec<String> = n
                .inputs
                .iter()
                .map(|s| match s {
                    Src::Input => "input".into(),
                    Src::Node(j) => format!("#{}", j + 1),
                })
                .collect();
            let _ = writeln!(
                s,
                "  {:>3}  {:<28} {:<34} {:>10}  {:>9}  {}",
                i + 1,
                clip(&n.name, 28),
                n.op.name(),
                format!("{c}x{h}x{w}"),
                n.op.params(),
                ins.join(", ")
            );
        }
        let total: usize = self.nodes.iter().map(|n| n.op.params()).sum();
        let _ = writeln!(s, "  {total} parameters");
        for n in &self.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        s
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        format!("{t}~")
    }
}
