//! A fully connected layer: `y = x·W + b` over the input's `c·h·w` features (NCHW order, so a
//! feature map needs no separate flatten).

use super::{fields, one, Bwd, Fwd, Grads, Kind, OpNames, ParamShape};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// `y = x·W (+ b)`, `W` is `features x out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Dense {
    /// Outputs.
    pub out: usize,
    /// Whether the layer adds a bias.
    pub bias: bool,
}

impl Kind for Dense {
    const NAME: &'static str = "Dense";
    const WIRE_FIELDS: usize = 2;

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        if self.out == 0 || one(x).features() == 0 {
            return Err("a dense layer needs at least one input and one output".into());
        }
        Ok(Shape::flat(self.out))
    }

    fn params(&self, x: &[Shape]) -> Vec<ParamShape> {
        let inp = one(x).features();
        let mut p = vec![ParamShape {
            rows: inp,
            cols: self.out,
            fan_in: inp,
            fan_out: self.out,
        }];
        if self.bias {
            p.push(ParamShape {
                rows: 1,
                cols: self.out,
                fan_in: 0,
                fan_out: 0,
            });
        }
        p
    }

    fn macs(&self, x: &[Shape], _y: Shape) -> u64 {
        (one(x).features() as u64).saturating_mul(self.out as u64)
    }

    fn keeps_inputs(&self) -> bool {
        true
    }

    fn detail(&self) -> String {
        alloc::format!(
            "{} outputs{}",
            self.out,
            if self.bias { "" } else { ", no bias" }
        )
    }

    fn wire(&self) -> Vec<usize> {
        vec![self.out, self.bias as usize]
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        let [out, bias] = fields(f)?;
        (bias <= 1).then_some(Dense {
            out,
            bias: bias == 1,
        })
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        let z = a.matmul(&n.op("forward"), f.x[0], &f.params[0])?;
        let z = if self.bias {
            a.bias_add(&n.op("bias"), &z, &f.params[1], 1)?
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
        let x = b.x[0].expect("a dense layer keeps its input");
        let mut grads = vec![a.matmul_tn(&n.op("backward dW"), x, &b.dy)?];
        if self.bias {
            grads.push(a.bias_grad(&n.op("backward db"), &b.dy, 1)?);
        }
        let dx = if b.need_dx[0] {
            Some(a.matmul_nt(&n.op("backward dX"), &b.dy, &b.params[0])?)
        } else {
            None
        };
        Ok((grads, vec![dx]))
    }
}
