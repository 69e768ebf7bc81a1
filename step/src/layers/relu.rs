//! `max(x, 0)`: exact in every format, no operation of its own to round.

use super::{Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// The rectifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Relu;

impl Kind for Relu {
    const NAME: &'static str = "ReLU";

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        Ok(super::one(x))
    }

    fn keeps_inputs(&self) -> bool {
        true
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        f.is_empty().then_some(Relu)
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        _n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        Ok((a.relu(f.x[0]), Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        a: &mut A,
        _n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let dx = if b.need_dx[0] {
            let x = b.x[0].expect("ReLU keeps its input");
            Some(a.relu_backward(&b.dy, x)?)
        } else {
            None
        };
        Ok((Vec::new(), vec![dx]))
    }
}
