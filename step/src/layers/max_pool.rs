//! Max pooling: the largest element of each `kernel x kernel` window (no padding, floor mode;
//! ties go to the window's first element in row-major order).

use super::{fields, one, pool_geom, Bwd, Fwd, Grads, Kind, OpNames};
use crate::arith::Arith;
use crate::graph::Shape;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Max pooling over square windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MaxPool {
    /// Window height and width.
    pub kernel: usize,
    /// Step between windows.
    pub stride: usize,
}

impl Kind for MaxPool {
    const NAME: &'static str = "MaxPool";
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
        Some(MaxPool { kernel, stride })
    }

    fn forward<A: Arith>(
        &self,
        a: &mut A,
        _n: OpNames<'_>,
        f: Fwd<'_, A::T>,
    ) -> Result<(A::T, Vec<u32>), A::Error> {
        let g = pool_geom(f.in_shapes[0], self.kernel, self.stride)
            .map_err(|e| shape("max pooling", e))?;
        Ok(a.max_pool(f.x[0], &g))
    }

    fn backward<A: Arith>(
        &self,
        a: &mut A,
        n: OpNames<'_>,
        b: Bwd<'_, A::T>,
    ) -> Result<Grads<A::T>, A::Error> {
        let dx = if b.need_dx[0] {
            let g = pool_geom(b.in_shapes[0], self.kernel, self.stride)
                .map_err(|e| shape("max pooling", e))?;
            Some(a.max_pool_backward(&n.op("backward"), &b.dy, &b.saved, &g)?)
        } else {
            None
        };
        Ok((Vec::new(), vec![dx]))
    }
}

/// A shape error of operation `op`.
pub(crate) fn shape(op: &str, msg: String) -> crate::StepError {
    crate::StepError::Shape {
        op: String::from(op),
        msg,
    }
}
