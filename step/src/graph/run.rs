//! The forward and backward walks of a [`Graph`] over any [`Arith`]: one implementation for
//! every format, the host and the board. A run may cover the whole graph or a span of it (a
//! pipeline stage, [`Span`]), which receives every tensor that crosses into it from before
//! (`Graph::crossing`: the stage's input, a residual connection's earlier end, or the
//! network's input) and hands on every tensor that crosses out of it.
//!
//! Each tensor is held once: a node's output lives until the last layer that reads it has run
//! forward (or it is handed on), or, where a reader's backward pass needs it (dense layers,
//! convolutions, ReLU), until that backward pass; gradients meeting at a node that feeds
//! several layers are added ([`Arith::add`], operation `NAME gradient`) in the order the
//! backward walk reaches them, so a span's walk is exactly its part of the whole walk.

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

/// What a walk needs to know of the graph, worked out once per call. Tensors live in
/// *slots*: node `j` of the span at `j`, the `i`th received tensor at `n + i`.
struct Plan {
    shapes: Vec<Shape>,
    /// Index of each node's first parameter within the span's parameters.
    first_param: Vec<usize>,
    /// Number of parameters of each node.
    n_params: Vec<usize>,
    /// The node's number among the graph's parameter layers.
    layer_no: Vec<Option<usize>>,
    /// Whether the gradient of each node's output is needed (in the whole graph's walk).
    needs_grad: Vec<bool>,
    /// The tensors the span receives.
    ins: Vec<Src>,
    /// The tensors it hands on: the logits for the last span.
    outs: Vec<Src>,
    /// The slots each node of the span reads (`[k - lo]`).
    in_slots: Vec<Vec<usize>>,
}

fn shape_err(msg: String) -> StepError {
    StepError::Shape {
        op: String::from("network"),
        msg,
    }
}

impl Plan {
    fn new(g: &Graph, span: Span) -> Result<Plan, StepError> {
        let shapes = g.shapes().map_err(|e| shape_err(e.to_string()))?;
        let n = g.nodes.len();
        if span.lo >= span.hi || span.hi > n {
            return Err(shape_err(format!(
                "nodes {}..{} of a graph of {n}",
                span.lo, span.hi
            )));
        }
        let (mut first_param, mut n_params, mut layer_no) = (vec![0; n], vec![0; n], vec![None; n]);
        let (mut count, mut layers) = (0, 0);
        let mut needs_grad = vec![false; n];
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
            needs_grad[k] = p > 0
                || g.nodes[k]
                    .inputs
                    .iter()
                    .any(|s| matches!(*s, Src::Node(j) if needs_grad[j]));
        }
        let ins = g.crossing(span.lo);
        let outs = match span.hi == n {
            true => vec![Src::Node(n - 1)],
            false => g.crossing(span.hi),
        };
        let mut plan = Plan {
            shapes,
            first_param,
            n_params,
            layer_no,
            needs_grad,
            ins,
            outs,
            in_slots: Vec::new(),
        };
        for k in span.lo..span.hi {
            let slots = g.nodes[k].inputs.iter().map(|&s| plan.slot(span, s, n));
            let slots = slots.collect::<Option<Vec<_>>>().ok_or_else(|| {
                shape_err(format!(
                    "layer '{}' reads a tensor the stage does not receive",
                    g.nodes[k].name
                ))
            })?;
            plan.in_slots.push(slots);
        }
        Ok(plan)
    }

    /// Where the span holds source `s`.
    fn slot(&self, span: Span, s: Src, n: usize) -> Option<usize> {
        match s {
            Src::Node(j) if j >= span.lo => Some(j),
            _ => self.ins.iter().position(|&t| t == s).map(|i| n + i),
        }
    }

    fn src_needs_grad(&self, s: Src) -> bool {
        matches!(s, Src::Node(j) if self.needs_grad[j])
    }

    /// The source held in a slot.
    fn src(&self, slot: usize, n: usize) -> Src {
        if slot < n {
            Src::Node(slot)
        } else {
            self.ins[slot - n]
        }
    }

    /// The tensors whose gradients the span is given: the logits' for the last span, else
    /// those of the handed-on tensors that need one.
    fn grad_outs(&self, last: bool) -> Vec<Src> {
        let need = |s: &&Src| last || self.src_needs_grad(**s);
        self.outs.iter().filter(need).copied().collect()
    }
}

fn src_name(g: &Graph, s: Src) -> &str {
    match s {
        Src::Input => "input",
        Src::Node(j) => g.nodes[j].name.as_str(),
    }
}

/// What the backward walk needs from the forward walk.
pub struct Tape<T> {
    span: Span,
    values: Vec<Option<T>>,
    saved: Vec<Vec<u32>>,
}

/// Output and tape of a forward walk.
pub type Forward<T> = (T, Tape<T>);

/// The tensors a span hands on and its tape.
pub type SpanForward<T> = (Vec<T>, Tape<T>);

/// The forward walk of the whole graph from the network's input `x`, with its parameters
/// `params` in order: the logits and the tape.
pub fn forward<A: Arith>(
    a: &mut A,
    g: &Graph,
    params: &[A::T],
    x: A::T,
    batch: usize,
) -> Result<Forward<A::T>, A::Error> {
    let (outs, tape) = forward_span(a, g, Span::all(g), params, vec![x], batch)?;
    let out = outs.into_iter().next();
    Ok((out.ok_or_else(|| shape_err("no logits".into()))?, tape))
}

/// The forward walk over `span` from the tensors it receives, `xs` (in the order of
/// `g.crossing(span.lo)`: the network's input for the first span), with the span's parameters
/// `params` in order. Returns the tensors it hands on (`g.crossing(span.hi)`, or the logits
/// for the last span) and the tape.
pub fn forward_span<A: Arith>(
    a: &mut A,
    g: &Graph,
    span: Span,
    params: &[A::T],
    xs: Vec<A::T>,
    batch: usize,
) -> Result<SpanForward<A::T>, A::Error> {
    let plan = Plan::new(g, span)?;
    if xs.len() != plan.ins.len() {
        return Err(shape_err(format!(
            "nodes {}..{} receive {} tensor(s), not {}",
            span.lo,
            span.hi,
            plan.ins.len(),
            xs.len()
        ))
        .into());
    }
    let n = g.nodes.len();
    let slots = n + plan.ins.len();
    // Readers in the span of each slot (a handed-on tensor counts one more).
    let (mut readers, mut kept) = (vec![0usize; slots], vec![false; slots]);
    for k in span.lo..span.hi {
        for &sl in &plan.in_slots[k - span.lo] {
            readers[sl] += 1;
            kept[sl] |= g.nodes[k].layer.keeps_inputs();
        }
    }
    let out_slots = plan.outs.iter().map(|&s| plan.slot(span, s, n));
    let out_slots = out_slots
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| shape_err("a handed-on tensor is not held".into()))?;
    for &sl in &out_slots {
        readers[sl] += 1;
    }
    let mut values: Vec<Option<A::T>> = vec![None; slots];
    for (i, x) in xs.into_iter().enumerate() {
        values[n + i] = Some(x);
    }
    let mut saved = vec![Vec::new(); n];
    for k in span.lo..span.hi {
        let node = &g.nodes[k];
        let in_slots = &plan.in_slots[k - span.lo];
        let (y, s) = {
            let x: Vec<&A::T> = in_slots
                .iter()
                .map(|&sl| values[sl].as_ref())
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
        for &sl in in_slots {
            readers[sl] -= 1;
            if readers[sl] == 0 && !kept[sl] {
                values[sl] = None;
            }
        }
    }
    let mut outs = Vec::with_capacity(out_slots.len());
    for sl in out_slots {
        readers[sl] -= 1;
        let v = match readers[sl] == 0 && !kept[sl] {
            true => values[sl].take(),
            false => values[sl].clone(),
        };
        outs.push(v.ok_or_else(|| shape_err("a handed-on tensor is missing".into()))?);
    }
    Ok((
        outs,
        Tape {
            span,
            values,
            saved,
        },
    ))
}

/// Gradients of a span's parameters (in order) and of the tensors it received that need one.
pub type Backward<T> = (Vec<T>, Vec<T>);

/// The backward walk of the whole graph's forward walk `tape` from `dout`, the gradient of
/// the logits: the parameters' gradients in order.
pub fn backward<A: Arith>(
    a: &mut A,
    g: &Graph,
    params: &[A::T],
    tape: Tape<A::T>,
    dout: A::T,
    batch: usize,
) -> Result<Vec<A::T>, A::Error> {
    Ok(backward_span(a, g, params, tape, vec![dout], batch)?.0)
}

/// The backward walk of a span's forward walk `tape` from `douts`, the gradients of the
/// tensors it handed on that need one (the logits' for the last span), in their order.
/// Returns the parameters' gradients and those of the received tensors that need one (none
/// for the first span: the network's input needs none), in `g.crossing(span.lo)`'s order.
pub fn backward_span<A: Arith>(
    a: &mut A,
    g: &Graph,
    params: &[A::T],
    mut tape: Tape<A::T>,
    douts: Vec<A::T>,
    batch: usize,
) -> Result<Backward<A::T>, A::Error> {
    let span = tape.span;
    let plan = Plan::new(g, span)?;
    let n = g.nodes.len();
    let grad_outs = plan.grad_outs(span.hi == n);
    if douts.len() != grad_outs.len() {
        return Err(shape_err(format!(
            "nodes {}..{} are given {} gradient(s), not {}",
            span.lo,
            span.hi,
            douts.len(),
            grad_outs.len()
        ))
        .into());
    }
    let mut grads: Vec<Option<A::T>> = vec![None; n + plan.ins.len()];
    for (&s, d) in grad_outs.iter().zip(douts) {
        let sl = plan.slot(span, s, n);
        let sl = sl.ok_or_else(|| shape_err("a handed-on tensor is not held".into()))?;
        grads[sl] = Some(d);
    }
    let mut pgrads: Vec<Option<A::T>> = vec![None; params.len()];
    for k in (span.lo..span.hi).rev() {
        tape.values[k] = None;
        let Some(dy) = grads[k].take() else { continue };
        let node = &g.nodes[k];
        let in_slots = &plan.in_slots[k - span.lo];
        let need_dx: Vec<bool> = in_slots
            .iter()
            .map(|&sl| plan.src_needs_grad(plan.src(sl, n)))
            .collect();
        let (pg, dxs) = {
            let keeps = node.layer.keeps_inputs();
            let x: Vec<Option<&A::T>> = in_slots
                .iter()
                .map(|&sl| tape.values[sl].as_ref().filter(|_| keeps))
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
        for (&sl, dx) in in_slots.iter().zip(dxs) {
            let Some(dx) = dx else { continue };
            let name = src_name(g, plan.src(sl, n));
            grads[sl] = Some(match grads[sl].take() {
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
    let mut dins = Vec::new();
    for (i, &s) in plan.ins.iter().enumerate() {
        if plan.src_needs_grad(s) {
            let d = grads[n + i]
                .take()
                .ok_or_else(|| shape_err(format!("no gradient reached '{}'", src_name(g, s))))?;
            dins.push(d);
        }
    }
    Ok((pgrads, dins))
}
