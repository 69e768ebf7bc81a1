//! The sum of two tensors of one shape: a residual connection. Its backward pass hands the
//! output's gradient to both inputs unchanged.

use super::{Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// `x0 + x1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Add;

impl Kind for Add {
    const NAME: &'static str = "Add";
    const ARITY: usize = 2;

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        match x {
            [a, b] if a == b => Ok(*a),
            [a, b] => Err(alloc::format!("adds {a} to {b}: the shapes must be equal")),
            _ => Err("takes two inputs".into()),
        }
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        f.is_empty().then_some(Add)
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        Ok((a.add(&n.op("forward"), f.x[0], f.x[1])?, Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        _a: &mut A,
        _n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let first = b.need_dx[0].then(|| b.dy.clone());
        Ok((Vec::new(), vec![first, b.need_dx[1].then_some(b.dy)]))
    }
}
