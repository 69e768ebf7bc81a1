//! The layers of the MLP and the small CNN and the forward and backward passes over them,
//! written once over [`Arith`] so every precision (and the board) runs the same model. The
//! layer list is built by the host (`systole-train`'s `model::build`) from the model's options.

use crate::arith::Arith;
use crate::StepError;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::gather::ConvGeom;

/// One layer of a built model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// `y = x·W + b`, `W` is `inp x out`.
    Dense {
        /// Inputs.
        inp: usize,
        /// Outputs.
        out: usize,
        /// Followed by ReLU (all but the last layer).
        relu: bool,
    },
    /// 3x3 convolution with padding 1, bias, ReLU, 2x2 max pooling.
    ConvBlock {
        /// Input channels.
        in_ch: usize,
        /// Output channels.
        out_ch: usize,
        /// Input height.
        h: usize,
        /// Input width.
        w: usize,
    },
}

impl Layer {
    /// The convolution of a block over `batch` images (`None` for a dense layer).
    pub fn geom(&self, batch: usize) -> Option<Conv2dGeom> {
        match *self {
            Layer::ConvBlock {
                in_ch,
                out_ch,
                h,
                w,
            } => Some(Conv2dGeom {
                batch,
                shape: ConvGeom {
                    in_ch,
                    in_h: h,
                    in_w: w,
                    out_ch,
                    kernel: 3,
                    stride: 1,
                    pad: 1,
                },
            }),
            Layer::Dense { .. } => None,
        }
    }
}

/// The convolution of block `l` over `batch` images, or a shape error for a dense layer.
fn conv_geom(l: &Layer, batch: usize) -> Result<Conv2dGeom, StepError> {
    l.geom(batch).ok_or_else(|| StepError::Shape {
        op: String::from("convolution block"),
        msg: String::from("a dense layer has no convolution"),
    })
}

/// What the backward pass needs from the forward pass of one layer.
pub struct Cache<T> {
    input: T,
    pre: T,
    winners: Vec<u32>,
}

/// Logits and per-layer caches of a forward pass.
pub type Forward<T> = (T, Vec<Cache<T>>);

/// Forward pass: returns the logits and the per-layer caches.
pub fn forward<A: Arith>(
    a: &mut A,
    layers: &[Layer],
    params: &[A::T],
    x: A::T,
    batch: usize,
) -> Result<Forward<A::T>, A::Error> {
    forward_from(a, layers, params, x, batch, 0)
}

/// Forward pass of a run of layers that starts at the model's layer `first` (0-based; its
/// operations are named by their place in the whole model, so their seeds and remembered
/// formats are the whole model's): a pipeline stage. `params` are these layers' own (`W`, `b`
/// each). Returns the run's output and its caches.
pub fn forward_from<A: Arith>(
    a: &mut A,
    layers: &[Layer],
    params: &[A::T],
    x: A::T,
    batch: usize,
    first: usize,
) -> Result<Forward<A::T>, A::Error> {
    let mut caches = Vec::with_capacity(layers.len());
    let mut h = x;
    for (i, l) in layers.iter().enumerate() {
        let (w, b) = (&params[2 * i], &params[2 * i + 1]);
        let n = first + i + 1;
        match *l {
            Layer::Dense { relu, .. } => {
                let z = a.matmul(&format!("layer {n} forward"), &h, w)?;
                let z = a.bias_add(&format!("layer {n} bias"), &z, b, 1)?;
                let next = if relu { a.relu(&z) } else { z.clone() };
                caches.push(Cache {
                    input: h,
                    pre: z,
                    winners: Vec::new(),
                });
                h = next;
            }
            Layer::ConvBlock {
                out_ch,
                h: hh,
                w: ww,
                ..
            } => {
                let g = conv_geom(l, batch)?;
                let z = a.conv_forward(&format!("layer {n} forward"), &h, w, &g)?;
                let z = a.bias_add(&format!("layer {n} bias"), &z, b, hh * ww)?;
                let (p, win) = a.max_pool2(&a.relu(&z), out_ch, hh, ww);
                caches.push(Cache {
                    input: h,
                    pre: z,
                    winners: win,
                });
                h = p;
            }
        }
    }
    Ok((h, caches))
}

/// Backward pass from `d loss / d logits`: returns gradients in parameter order.
pub fn backward<A: Arith>(
    a: &mut A,
    layers: &[Layer],
    params: &[A::T],
    caches: Vec<Cache<A::T>>,
    dlogits: A::T,
    batch: usize,
) -> Result<Vec<A::T>, A::Error> {
    Ok(backward_from(a, layers, params, caches, dlogits, batch, 0)?.0)
}

/// Gradients of a run's parameters (in order) and, unless the run starts at the model's
/// first layer, the gradient of the run's input.
pub type Backward<T> = (Vec<T>, Option<T>);

/// Backward pass of a run of layers that starts at the model's layer `first` (see
/// [`forward_from`]), from the gradient `dout` of the run's output.
pub fn backward_from<A: Arith>(
    a: &mut A,
    layers: &[Layer],
    params: &[A::T],
    caches: Vec<Cache<A::T>>,
    dout: A::T,
    batch: usize,
    first: usize,
) -> Result<Backward<A::T>, A::Error> {
    let mut grads: Vec<Option<A::T>> = vec![None; params.len()];
    // The gradient w.r.t. the current layer's output (after its activation); after the
    // model's first layer there is none.
    let mut d = Some(dout);
    for (i, (l, c)) in layers.iter().zip(caches).enumerate().rev() {
        let n = first + i + 1;
        let w = &params[2 * i];
        let Some(dy) = d.take() else { break };
        let dz = match *l {
            Layer::Dense { relu, .. } => {
                if relu {
                    a.relu_backward(&dy, &c.pre)?
                } else {
                    dy
                }
            }
            Layer::ConvBlock { .. } => {
                let (_, cols) = a.shape(&c.pre);
                let da = a.max_pool2_backward(&dy, &c.winners, cols);
                a.relu_backward(&da, &c.pre)?
            }
        };
        let (dw, db, dx) = match *l {
            Layer::Dense { .. } => {
                let dw = a.matmul_tn(&format!("layer {n} backward dW"), &c.input, &dz)?;
                let db = a.bias_grad(&format!("layer {n} backward db"), &dz, 1)?;
                let dx = if first + i > 0 {
                    Some(a.matmul_nt(&format!("layer {n} backward dX"), &dz, w)?)
                } else {
                    None
                };
                (dw, db, dx)
            }
            Layer::ConvBlock { h, w: ww, .. } => {
                let g = conv_geom(l, batch)?;
                let dw =
                    a.conv_backward_weights(&format!("layer {n} backward dW"), &c.input, &dz, &g)?;
                let db = a.bias_grad(&format!("layer {n} backward db"), &dz, h * ww)?;
                let dx = if first + i > 0 {
                    Some(a.conv_backward_input(&format!("layer {n} backward dX"), &dz, w, &g)?)
                } else {
                    None
                };
                (dw, db, dx)
            }
        };
        grads[2 * i] = Some(dw);
        grads[2 * i + 1] = Some(db);
        d = dx;
    }
    let grads = grads
        .into_iter()
        .enumerate()
        .map(|(i, g)| g.ok_or_else(|| StepError::NoGradient(first * 2 + i).into()))
        .collect::<Result<Vec<_>, A::Error>>()?;
    Ok((grads, d))
}

/// Name of parameter `i` in reports and errors (`layer 2 W`).
pub fn param_name(i: usize) -> String {
    format!("layer {} {}", i / 2 + 1, ["W", "b"][i & 1])
}
