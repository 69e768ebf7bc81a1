//! The forward and backward walks of a [`Graph`] over any [`Arith`]: one implementation for
//! every format, the host and the board. A run may cover the whole graph or a span of it (a
//! pipeline stage, [`Span`]), which reads one tensor from before it and hands one on.
//!
//! Each tensor is held once: a node's output lives until the last layer that reads it has run
//! forward, or, where a reader's backward pass needs it (dense layers, convolutions, ReLU),
//! until that backward pass; gradients meeting at a node that feeds several layers are added
//! ([`Arith::add`], operation `NAME gradient`) in the order the backward walk reaches them.

use super::{Graph, Shape, Src};
use crate::arith::Arith;
use crate::layers::{Bwd, Fwd, OpNames};
use crate::StepError;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// The nodes `lo..hi` of a graph: the whole graph, or a pipeline stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First node.
    pub lo: usize,
    /// One past the last node.
    pub hi: usize,
}

impl Span {
    /// Every node of `g`.
    pub fn all(g: &Graph) -> Span {
        Span {
            lo: 0,
            hi: g.nodes.len(),
        }
    }
}

/// What a walk needs to know of the graph, worked out once per call.
struct Plan {
    shapes: Vec<Shape>,
    /// Index of each node's first parameter within the span's parameters.
    first_param: Vec<usize>,
    /// Number of parameters of each node.
    n_params: Vec<usize>,
    /// The node's number among the graph's parameter layers.
    layer_no: Vec<Option<usize>>,
    /// Whether the gradient of each node's output is needed.
    needs_grad: Vec<bool>,
}

fn shape_err(msg: String) -> StepError {
    StepError::Shape {
        op: String::from("network"),
        msg,
    }
}

impl Plan {
    fn new(g: &Graph, span: Span, input_grad: bool) -> Result<Plan, StepError> {
        let shapes = g.shapes().map_err(|e| shape_err(e.to_string()))?;
        if span.lo >= span.hi || span.hi > g.nodes.len() {
            return Err(shape_err(format!(
                "nodes {}..{} of a graph of {}",
                span.lo,
                span.hi,
                g.nodes.len()
            )));
        }
        let n = g.nodes.len();
        let (mut first_param, mut n_params, mut layer_no) = (vec![0; n], vec![0; n], vec![None; n]);
        let (mut count, mut layers) = (0, 0);
        for k in 0..n {
            let p = g.nodes[k].layer.params(&g.in_shapes(k, &shapes)).len();
            if p > 0 {
                layers += 1;
                layer_no[k] = Some(layers);
            }
            if k == span.lo {
                count = 0;
            }
            first_param[k] = count;
            n_params[k] = p;
            count += p;
        }
        let mut needs_grad = vec![false; n];
        for k in span.lo..span.hi {
            let mut need = n_params[k] > 0;
            for s in &g.nodes[k].inputs {
                match *s {
                    Src::Node(j) if j >= span.lo => need |= needs_grad[j],
                    Src::Node(j) if j + 1 == span.lo => need |= input_grad,
                    Src::Input if span.lo == 0 => {}
                    _ => {
                        return Err(shape_err(format!(
                            "layer '{}' reads a tensor from before the stage's input: cut the network where one tensor crosses",
                            g.nodes[k].name
                        )))
                    }
                }
            }
            needs_grad[k] = need;
        }
        Ok(Plan {
            shapes,
            first_param,
            n_params,
            layer_no,
            needs_grad,
        })
    }
}

/// What the backward walk needs from the forward walk.
pub struct Tape<T> {
    span: Span,
    input: Option<T>,
    values: Vec<Option<T>>,
    saved: Vec<Vec<u32>>,
}

/// Output and tape of a forward walk.
pub type Forward<T> = (T, Tape<T>);

/// The forward walk over `span` from its input `x` (the network's input, or for a later stage
/// the output of the node before it), with the span's parameters `params` in order.
pub fn forward<A: Arith>(
    a: &mut A,
    g: &Graph,
    span: Span,
    params: &[A::T],
    x: A::T,
    batch: usize,
) -> Result<Forward<A::T>, A::Error> {
    let plan = Plan::new(g, span, false)?;
    let n = g.nodes.len();
    // Readers in the span of each node's output (and of the span's input, at `n`).
    let (mut readers, mut kept) = (vec![0usize; n + 1], vec![false; n + 1]);
    let slot = |s: Src| match s {
        Src::Node(j) if j >= span.lo => j,
        _ => n,
    };
    for k in span.lo..span.hi {
        let l = &g.nodes[k].layer;
        for &s in &g.nodes[k].inputs {
            readers[slot(s)] += 1;
            kept[slot(s)] |= l.keeps_inputs();
        }
    }
    let mut values: Vec<Option<A::T>> = vec![None; n];
    let mut input = Some(x);
    let mut saved = vec![Vec::new(); n];
    for k in span.lo..span.hi {
        let node = &g.nodes[k];
        let (y, s) = {
            let x: Vec<&A::T> = node
                .inputs
                .iter()
                .map(|&s| match slot(s) {
                    j if j < n => values[j].as_ref(),
                    _ => input.as_ref(),
                })
                .collect::<Option<_>>()
                .ok_or_else(|| shape_err(format!("layer '{}' reads a freed tensor", node.name)))?;
            let in_shapes = g.in_shapes(k, &plan.shapes);
            let p = &params[plan.first_param[k]..][..plan.n_params[k]];
            let names = OpNames {
                node: &node.name,
                layer: plan.layer_no[k],
            };
            let f = Fwd {
                x: &x,
                in_shapes: &in_shapes,
                params: p,
                batch,
            };
            node.layer.forward(a, names, f)?
        };
        values[k] = Some(y);
        saved[k] = s;
        for &s in &node.inputs {
            let j = slot(s);
            readers[j] -= 1;
            if readers[j] == 0 && !kept[j] {
                if j < n {
                    values[j] = None;
                } else {
                    input = None;
                }
            }
        }
    }
    let out = values[span.hi - 1]
        .take()
        .ok_or_else(|| shape_err("the last layer's output is missing".into()))?;
    let tape = Tape {
        span,
        input,
        values,
        saved,
    };
    Ok((out, tape))
}

/// Gradients of a span's parameters (in order) and, when asked for, of its input.
pub type Backward<T> = (Vec<T>, Option<T>);

/// The backward walk of a forward walk's `tape` from `dout`, the gradient of the span's
/// output. `input_grad` asks for the gradient of the span's input (a later pipeline stage
/// sends it back; the network's input never needs one).
pub fn backward<A: Arith>(
    a: &mut A,
    g: &Graph,
    params: &[A::T],
    mut tape: Tape<A::T>,
    dout: A::T,
    (batch, input_grad): (usize, bool),
) -> Result<Backward<A::T>, A::Error> {
    let span = tape.span;
    let input_grad = input_grad && span.lo > 0;
    let plan = Plan::new(g, span, input_grad)?;
    let n = g.nodes.len();
    let mut grads: Vec<Option<A::T>> = vec![None; n];
    grads[span.hi - 1] = Some(dout);
    let mut dinput: Option<A::T> = None;
    let mut pgrads: Vec<Option<A::T>> = vec![None; params.len()];
    for k in (span.lo..span.hi).rev() {
        tape.values[k] = None;
        let Some(dy) = grads[k].take() else { continue };
        let node = &g.nodes[k];
        let inner = |s: Src| matches!(s, Src::Node(j) if j >= span.lo);
        let need_dx: Vec<bool> = node
            .inputs
            .iter()
            .map(|&s| match s {
                Src::Node(j) if inner(s) => plan.needs_grad[j],
                _ => input_grad,
            })
            .collect();
        let (pg, dxs) = {
            let keeps = node.layer.keeps_inputs();
            let x: Vec<Option<&A::T>> = node
                .inputs
                .iter()
                .map(|&s| match s {
                    _ if !keeps => None,
                    Src::Node(j) if inner(s) => tape.values[j].as_ref(),
                    _ => tape.input.as_ref(),
                })
                .collect();
            let in_shapes = g.in_shapes(k, &plan.shapes);
            let p = &params[plan.first_param[k]..][..plan.n_params[k]];
            let names = OpNames {
                node: &node.name,
                layer: plan.layer_no[k],
            };
            let b = Bwd {
                dy,
                x: &x,
                in_shapes: &in_shapes,
                params: p,
                saved: core::mem::take(&mut tape.saved[k]),
                need_dx: &need_dx,
                batch,
            };
            node.layer.backward(a, names, b)?
        };
        for (i, gr) in pg.into_iter().enumerate() {
            pgrads[plan.first_param[k] + i] = Some(gr);
        }
        for (&s, dx) in node.inputs.iter().zip(dxs) {
            let Some(dx) = dx else { continue };
            let (slot, name) = match s {
                Src::Node(j) if inner(s) => (&mut grads[j], g.nodes[j].name.as_str()),
                _ => (&mut dinput, "input"),
            };
            *slot = Some(match slot.take() {
                None => dx,
                Some(prev) => a.add(&format!("{name} gradient"), &prev, &dx)?,
            });
        }
    }
    // Parameters are numbered across the whole graph in errors.
    let first: usize = plan.n_params[..span.lo].iter().sum();
    let pgrads = pgrads
        .into_iter()
        .enumerate()
        .map(|(i, gr)| gr.ok_or_else(|| StepError::NoGradient(first + i).into()))
        .collect::<Result<Vec<_>, A::Error>>()?;
    Ok((pgrads, dinput))
}
