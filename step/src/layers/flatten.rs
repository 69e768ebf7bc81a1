//! `(c, h, w) -> (c·h·w, 1, 1)`: the rows are already NCHW, so only the shape changes.

use super::{Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Flattening of a feature map into a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Flatten;

impl Kind for Flatten {
    const NAME: &'static str = "Flatten";

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        Ok(Shape::flat(super::one(x).features()))
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        f.is_empty().then_some(Flatten)
    }

    fn forward<A: Arith>(
        &self,
        _a: &mut A,
        _n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        Ok((f.x[0].clone(), Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        _a: &mut A,
        _n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        Ok((Vec::new(), vec![b.need_dx[0].then_some(b.dy)]))
    }
}
