//! Average pooling: the mean of each `kernel x kernel` window (no padding, floor mode, the
//! divisor always the window's size). In fixed point the mean is formed exactly with 16 more
//! fractional bits and converted once (`Arith::avg_pool`).

use super::max_pool::shape;
use super::{fields, one, pool_geom, Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Average pooling over square windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AvgPool {
    /// Window height and width.
    pub kernel: usize,
    /// Step between windows.
    pub stride: usize,
}

impl Kind for AvgPool {
    const NAME: &'static str = "AvgPool";
    const WIRE_FIELDS: usize = 2;

    fn out_shape(&self, x: &[Shape]) -> Result<Shape, String> {
        super::pool_shape(one(x), self.kernel, self.stride)
    }

    fn detail(&self) -> String {
        super::pool_detail(self.kernel, self.stride)
    }

    fn wire(&self) -> Vec<usize> {
        vec![self.kernel, self.stride]
    }

    fn from_wire(f: &[u16]) -> Option<Self> {
        let [kernel, stride] = fields(f)?;
        Some(AvgPool { kernel, stride })
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        let g = pool_geom(f.in_shapes[0], self.kernel, self.stride)
            .map_err(|e| shape("average pooling", e))?;
        Ok((a.avg_pool(&n.op("forward"), f.x[0], &g)?, Vec::new()))
    }

    fn backward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let dx = if b.need_dx[0] {
            let g = pool_geom(b.in_shapes[0], self.kernel, self.stride)
                .map_err(|e| shape("average pooling", e))?;
            Some(a.avg_pool_backward(&n.op("backward"), &b.dy, &g)?)
        } else {
            None
        };
        Ok((Vec::new(), vec![dx]))
    }
}
