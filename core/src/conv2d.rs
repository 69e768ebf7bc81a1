//! The geometry of a batched 2-D convolution ([`Conv2dGeom`]) and the operand checks of the
//! convolutions of the numeric contract, shared by the golden model's convolutions
//! (`systole-golden`'s `conv`, whose docs give the layouts) and the training step.

use crate::gather::ConvGeom;
use crate::tensor::{NumericError, QMatrix};
use alloc::format;
use alloc::string::ToString;

/// Shape of a 2-D convolution over a batch: the conv unit's geometry of one image
/// ([`ConvGeom`]: channels, sizes, square kernel, stride and padding) and the batch. It
/// dereferences to that geometry, so `g.in_ch` or `g.out_h()` read it directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dGeom {
    /// Images in the batch.
    pub batch: usize,
    /// The geometry of one image's convolution.
    pub shape: ConvGeom,
}

impl core::ops::Deref for Conv2dGeom {
    type Target = ConvGeom;
    fn deref(&self) -> &ConvGeom {
        &self.shape
    }
}

/// In words, for messages: `batch 2, 3x7x7 input, 4 output channels, 3x3 kernel, stride 2, pad 1`.
impl core::fmt::Display for Conv2dGeom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let g = self;
        write!(
            f,
            "batch {}, {}x{}x{} input, {} output channels, {}x{} kernel, stride {}, pad {}",
            g.batch, g.in_ch, g.in_h, g.in_w, g.out_ch, g.kernel, g.kernel, g.stride, g.pad
        )
    }
}

impl Conv2dGeom {
    /// Checks every dimension is usable (the conv unit's shape check,
    /// [`ConvGeom::check_shape`], plus a positive batch). The reduction
    /// lengths are not checked here: each op computes only one of them (its lowered
    /// product's K, see the module table), which the product checks against the contract's
    /// limit.
    pub fn validate(&self) -> Result<(), NumericError> {
        let positive = || {
            NumericError::Shape(format!(
                "convolution dimensions must all be positive: {self}"
            ))
        };
        if self.batch == 0 {
            return Err(positive());
        }
        self.shape.check_shape().map_err(|e| match e {
            crate::gather::GeomError::Shape => positive(),
            other => NumericError::Shape(other.to_string()),
        })
    }

    /// Checks that `m` is a batch of `ch x h x w` maps (`what` names it in the error).
    pub fn check_map(
        &self,
        m: &QMatrix,
        what: &str,
        ch: usize,
        h: usize,
        w: usize,
    ) -> Result<(), NumericError> {
        if m.rows != self.batch || m.cols != ch * h * w {
            return Err(NumericError::Shape(format!(
                "{what} is {}x{} but the convolution needs {}x{} (batch x {ch}*{h}*{w})",
                m.rows,
                m.cols,
                self.batch,
                ch * h * w
            )));
        }
        Ok(())
    }

    /// Checks that `w` holds this convolution's weights (`out_ch x in_ch*k*k`).
    pub fn check_weights(&self, w: &QMatrix) -> Result<(), NumericError> {
        let cols = self.in_ch * self.kernel * self.kernel;
        if w.rows != self.out_ch || w.cols != cols {
            return Err(NumericError::Shape(format!(
                "weights are {}x{} but the convolution needs {}x{} (out_ch x in_ch*k*k)",
                w.rows, w.cols, self.out_ch, cols
            )));
        }
        Ok(())
    }

    /// Input row/column for output position `o` and kernel offset `k`, if inside the image.
    #[inline]
    pub fn src(&self, o: usize, k: usize, size: usize) -> Option<usize> {
        (o * self.stride + k)
            .checked_sub(self.pad)
            .filter(|&i| i < size)
    }
}

/// Checks `g` and the shapes of a forward convolution's operands.
pub fn check_forward(x: &QMatrix, w: &QMatrix, g: &Conv2dGeom) -> Result<(), NumericError> {
    g.validate()?;
    g.check_map(x, "input", g.in_ch, g.in_h, g.in_w)?;
    g.check_weights(w)
}

/// Checks `g` and the shapes of an input gradient's operands.
pub fn check_backward_input(dy: &QMatrix, w: &QMatrix, g: &Conv2dGeom) -> Result<(), NumericError> {
    g.validate()?;
    g.check_map(dy, "output gradient", g.out_ch, g.out_h(), g.out_w())?;
    g.check_weights(w)
}
