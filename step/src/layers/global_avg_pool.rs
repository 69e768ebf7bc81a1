//! Global average pooling: `(c, h, w) -> (c, 1, 1)`, the mean of each map: average pooling
//! with one window the size of the map.

use super::max_pool::shape;
use super::{one, Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::{Arith, PoolGeom};
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// The mean of each channel's map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GlobalAvgPool;

fn geom(x: Shape) -> Result<PoolGeom, String> {
    let g = PoolGeom {
        ch: x.c,
        h: x.h,
        w: x.w,
        kh: x.h,
        kw: x.w,
        stride: 1,
    };
    if g.valid() {
        Ok(g)
    } else {
        Err(alloc::format!("cannot average an empty {x} input"))
    }
}

impl Kind for GlobalAvgPool {
    const NAME: &'static str = "GlobalAvgPool";

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        let g = geom(one(x))?;
        Ok(Shape::flat(g.ch))
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        f.is_empty().then_some(GlobalAvgPool)
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        let g = geom(f.in_shapes[0]).map_err(|e| shape("global average pooling", e))?;
        Ok((a.avg_pool(&n.op("forward"), f.x[0], &g)?, Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let dx = if b.need_dx[0] {
            let g = geom(b.in_shapes[0]).map_err(|e| shape("global average pooling", e))?;
            Some(a.avg_pool_backward(&n.op("backward"), &b.dy, &g)?)
        } else {
            None
        };
        Ok((Vec::new(), vec![dx]))
    }
}
