//! A 2-D convolution: square kernel, the same stride both ways, symmetric zero padding,
//! dilation 1, one group; an optional bias per output channel. Its three products run on the
//! conv unit where they fit, lowered to matrix products where not (the device decides).

use super::{fields, one, Bwd, Fwd, Grads, Kind, OpNames, ParamShape};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use systole_core::conv2d::Conv2dGeom;
use systole_core::gather::ConvGeom;

/// A convolution with `out_ch` filters of `in_ch x kernel x kernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Conv2d {
    /// Output channels.
    pub out_ch: usize,
    /// Kernel height and width.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
    /// Whether the layer adds a bias.
    pub bias: bool,
}

impl Conv2d {
    /// The convolution of one image of shape `x`.
    pub fn geom(&self, x: Shape) -> ConvGeom {
        ConvGeom {
            in_ch: x.c,
            in_h: x.h,
            in_w: x.w,
            out_ch: self.out_ch,
            kernel: self.kernel,
            stride: self.stride,
            pad: self.pad,
        }
    }

    fn batch_geom(&self, x: Shape, batch: usize) -> Conv2dGeom {
        Conv2dGeom {
            batch,
            shape: self.geom(x),
        }
    }
}

impl Kind for Conv2d {
    const NAME: &'static str = "Conv2d";
    const WIRE_FIELDS: usize = 5;

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        let g = self.geom(one(x));
        g.check_shape().map_err(|e| e.to_string())?;
        Ok(Shape {
            c: self.out_ch,
            h: g.out_h(),
            w: g.out_w(),
        })
    }

    fn params(&self, x: &[Shape]) -> Vec<ParamShape> {
        let kk = self.kernel.saturating_mul(self.kernel);
        let mut p = vec![ParamShape {
            rows: self.out_ch,
            cols: one(x).c.saturating_mul(kk),
            fan_in: one(x).c.saturating_mul(kk),
            fan_out: self.out_ch.saturating_mul(kk),
        }];
        if self.bias {
            p.push(ParamShape {
                rows: 1,
                cols: self.out_ch,
                fan_in: 0,
                fan_out: 0,
            });
        }
        p
    }

    fn macs(&self, x: &[Shape], y: Shape) -> u64 {
        (y.features() as u64)
            .saturating_mul(one(x).c as u64)
            .saturating_mul((self.kernel * self.kernel) as u64)
    }

    fn keeps_inputs(&self) -> bool {
        true
    }

    fn detail(&self) -> String {
        alloc::format!(
            "{} filters {k}x{k}, stride {}, pad {}{}",
            self.out_ch,
            self.stride,
            self.pad,
            if self.bias { "" } else { ", no bias" },
            k = self.kernel
        )
    }

    fn wire(&self) -> Vec<usize> {
        vec![
            self.out_ch,
            self.kernel,
            self.stride,
            self.pad,
            self.bias as usize,
        ]
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        let [out_ch, kernel, stride, pad, bias] = fields(f)?;
        (bias <= 1).then_some(Conv2d {
            out_ch,
            kernel,
            stride,
            pad,
            bias: bias == 1,
        })
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        let g = self.batch_geom(f.in_shapes[0], f.batch);
        let z = a.conv_forward(&n.op("forward"), f.x[0], &f.params[0], &g)?;
        let z = if self.bias {
            let pixels = g.out_h() * g.out_w();
            a.bias_add(&n.op("bias"), &z, &f.params[1], pixels)?
        } else {
            z
        };
        Ok((z, Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let g = self.batch_geom(b.in_shapes[0], b.batch);
        let x = b.x[0].expect("a convolution keeps its input");
        let mut grads = vec![a.conv_backward_weights(&n.op("backward dW"), x, &b.dy, &g)?];
        if self.bias {
            let pixels = g.out_h() * g.out_w();
            grads.push(a.bias_grad(&n.op("backward db"), &b.dy, pixels)?);
        }
        let dx = if b.need_dx[0] {
            Some(a.conv_backward_input(&n.op("backward dX"), &b.dy, &b.params[0], &g)?)
        } else {
            None
        };
        Ok((grads, vec![dx]))
    }
}
