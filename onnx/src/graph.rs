//! [`Net`] <-> the layer graph (`systole_step::graph`): an imported network as the graph the
//! trainer trains, with its weights as initial parameters in the graph's order; and a trained
//! graph with its parameters back as a [`Net`] for evaluation and export.

use crate::net::{Net, Node, Op, Src};
use crate::OnnxError;
use std::collections::HashSet;
use systole_step::graph::{self as g, Graph, Shape};
use systole_step::layers::{Add, AvgPool, Conv2d, Dense, GlobalAvgPool, Layer, MaxPool, Relu};

/// Host values of one parameter tensor: rows, columns, row-major values.
pub type Param = (usize, usize, Vec<f32>);

/// The graph of `net` and its weights as initial parameters (each layer's `W`, then its `b`).
pub fn to_graph(net: &Net) -> Result<(Graph, Vec<Param>), OnnxError> {
    let [c, h, w] = net.input;
    let mut graph = Graph::new(Shape { c, h, w }, net.classes);
    let mut params = Vec::new();
    let mut names = HashSet::new();
    let shapes = crate::infer::in_shapes(net);
    for (i, n) in net.nodes.iter().enumerate() {
        let layer = match &n.op {
            Op::Dense { out, w: wv, b } => {
                let inp = shapes[i].iter().product();
                params.push((inp, *out, wv.clone()));
                params.extend(b.iter().map(|b| (1, *out, b.clone())));
                Layer::Dense(Dense {
                    out: *out,
                    bias: b.is_some(),
                })
            }
            Op::Conv {
                out_ch,
                kernel,
                stride,
                pad,
                w: wv,
                b,
            } => {
                params.push((*out_ch, wv.len() / out_ch, wv.clone()));
                params.extend(b.iter().map(|b| (1, *out_ch, b.clone())));
                let (kernel, stride, pad, bias) = (*kernel, *stride, *pad, b.is_some());
                Layer::Conv2d(Conv2d {
                    out_ch: *out_ch,
                    kernel,
                    stride,
                    pad,
                    bias,
                })
            }
            Op::Relu => Layer::Relu(Relu),
            Op::MaxPool { kernel, stride } => Layer::MaxPool(MaxPool {
                kernel: *kernel,
                stride: *stride,
            }),
            Op::AvgPool { kernel, stride } => Layer::AvgPool(AvgPool {
                kernel: *kernel,
                stride: *stride,
            }),
            Op::GlobalAvgPool => Layer::GlobalAvgPool(GlobalAvgPool),
            Op::Add => Layer::Add(Add),
        };
        // Graph names are unique; ONNX's usually are, a repeat gets its place appended.
        let mut name = n.name.clone();
        if !names.insert(name.clone()) {
            name = format!("{} #{}", n.name, i + 1);
            names.insert(name.clone());
        }
        let inputs: Vec<g::Src> = n.inputs.iter().map(|s| to_src(*s)).collect();
        graph.push(&name, layer, &inputs).map_err(|e| {
            OnnxError::Model(format!(
                "layer '{}' does not fit the layer graph: {e}",
                n.name
            ))
        })?;
    }
    graph.check().map_err(|e| {
        OnnxError::Model(format!(
            "the imported network is not a layer graph systole trains: {e}"
        ))
    })?;
    Ok((graph, params))
}

fn to_src(s: Src) -> g::Src {
    match s {
        Src::Input => g::Src::Input,
        Src::Node(j) => g::Src::Node(j),
    }
}

/// `graph` with `params` (in the graph's order) as a [`Net`]; flatten nodes become nothing
/// (no data moves).
pub fn from_graph(graph: &Graph, params: &[Param]) -> Result<Net, OnnxError> {
    let shapes = graph
        .check()
        .map_err(|e| OnnxError::Model(format!("the network is not a valid layer graph: {e}")))?;
    let bad = |m: String| OnnxError::Model(m);
    let mut next = params.iter();
    let mut take =
        |rows: usize, cols: usize, what: &str, node: &str| -> Result<Vec<f32>, OnnxError> {
            match next.next() {
                Some((r, c, v)) if (*r, *c) == (rows, cols) && v.len() == rows * cols => {
                    Ok(v.clone())
                }
                Some((r, c, _)) => Err(bad(format!(
                    "{what} of '{node}' is {r} x {c}, the layer needs {rows} x {cols}"
                ))),
                None => Err(bad(format!("no {what} for '{node}'"))),
            }
        };
    // Each graph node's place in the net (a flatten is its input's).
    let mut at: Vec<Src> = Vec::with_capacity(graph.nodes.len());
    let mut nodes: Vec<Node> = Vec::new();
    let src = |s: g::Src, at: &[Src]| match s {
        g::Src::Input => Src::Input,
        g::Src::Node(j) => at[j],
    };
    for (k, n) in graph.nodes.iter().enumerate() {
        let inputs: Vec<Src> = n.inputs.iter().map(|s| src(*s, &at)).collect();
        let in_shape = match n.inputs.first() {
            Some(g::Src::Node(j)) => shapes[*j],
            _ => graph.input,
        };
        let op = match n.layer {
            Layer::Flatten(_) => {
                at.push(inputs[0]);
                continue;
            }
            Layer::Dense(d) => {
                let w = take(in_shape.features(), d.out, "W", &n.name)?;
                let b = if d.bias {
                    Some(take(1, d.out, "b", &n.name)?)
                } else {
                    None
                };
                Op::Dense { out: d.out, w, b }
            }
            Layer::Conv2d(c) => {
                let w = take(c.out_ch, in_shape.c * c.kernel * c.kernel, "W", &n.name)?;
                let b = if c.bias {
                    Some(take(1, c.out_ch, "b", &n.name)?)
                } else {
                    None
                };
                Op::Conv {
                    out_ch: c.out_ch,
                    kernel: c.kernel,
                    stride: c.stride,
                    pad: c.pad,
                    w,
                    b,
                }
            }
            Layer::Relu(_) => Op::Relu,
            Layer::MaxPool(p) => Op::MaxPool {
                kernel: p.kernel,
                stride: p.stride,
            },
            Layer::AvgPool(p) => Op::AvgPool {
                kernel: p.kernel,
                stride: p.stride,
            },
            Layer::GlobalAvgPool(_) => Op::GlobalAvgPool,
            Layer::Add(_) => Op::Add,
        };
        let s = shapes[k];
        at.push(Src::Node(nodes.len()));
        nodes.push(Node {
            name: n.name.clone(),
            op,
            inputs,
            shape: [s.c, s.h, s.w],
            fracs: Vec::new(),
        });
    }
    if next.next().is_some() {
        return Err(bad("more parameter tensors than the network has".into()));
    }
    let input = graph.input;
    Ok(Net {
        input_name: "input".into(),
        input: [input.c, input.h, input.w],
        input_frac: None,
        word_bits: crate::infer::WORD_BITS,
        classes: graph.classes,
        nodes,
        notes: Vec::new(),
        opset: crate::EXPORT_OPSET,
        producer: "systole".into(),
        metadata: Vec::new(),
    })
}
