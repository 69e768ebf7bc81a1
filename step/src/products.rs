//! [`Products`]: where the step's matrix products and convolutions run. The host implements it
//! with a `systole_device::Device` (`systole-train`'s `DeviceProducts`, which also checks each
//! result against the golden model under `--check`); the firmware implements it with its tile
//! and conv drivers (`systole_firmware::products::BoardProducts`). Every implementation follows
//! the numeric contract, so the step's results do not depend on which one runs it.

use crate::StepError;
use alloc::string::String;
use systole_core::conv2d::Conv2dGeom;
use systole_core::tensor::{OutputSpec, QMatrix};

/// Matrix products and convolutions of fixed-point operands, each converted once to `spec`
/// (the contract's one conversion per output, stochastic bits from `spec.seed`). `op` names the
/// operation for errors (`layer 2 backward dW`). Reductions are at most
/// `systole_core::numeric::MAX_K` long: the step splits longer ones.
pub trait Products {
    /// Error of a product (a device or link failure, a `--check` mismatch); the step's own
    /// errors convert into it.
    type Error: From<StepError>;

    /// What runs the products, for the run header (`golden 8x8`, `verilator 8x8`, `board`).
    fn name(&self) -> String;

    /// `A·B`.
    fn matmul(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error>;

    /// `A·Bᵀ`; the contract defines it as `A·(Bᵀ)`, which this default computes.
    fn matmul_nt(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error> {
        self.matmul(op, a, &b.transpose(), spec)
    }

    /// `Aᵀ·B`; the contract defines it as `(Aᵀ)·B`, which this default computes.
    fn matmul_tn(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error> {
        self.matmul(op, &a.transpose(), b, spec)
    }

    /// Forward convolution of NCHW rows `x` with weights `w` (`out_ch x in_ch·k·k`).
    fn conv2d_forward(
        &mut self,
        op: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error>;

    /// Gradient with respect to the convolution's input.
    fn conv2d_backward_input(
        &mut self,
        op: &str,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error>;

    /// Gradient with respect to the convolution's weights.
    fn conv2d_backward_weights(
        &mut self,
        op: &str,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        spec: &OutputSpec,
    ) -> Result<QMatrix, Self::Error>;
}
