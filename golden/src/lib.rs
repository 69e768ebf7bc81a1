//! The bit-exact fixed-point golden model, and the numeric contract every device follows.
//!
//! # The numeric contract
//!
//! The contract is written down in one place, section 6 of the hardware programming guide
//! (docs/HARDWARE.md, "The numeric contract"): words and dynamic fixed point, exact products in
//! a 48-bit accumulator up to [`systole_core::numeric::MAX_K`], one conversion per output
//! (truncate, nearest-even, stochastic; saturation), the LFSR, `tile_seed` and `lane_seed`
//! written out with their constants and check values, which command's seed a split tile uses,
//! the convolutions' lowering, the host-side elementwise ops and the rule by which the host
//! splits a reduction longer than `MAX_K` into exact partial sums ([`split`]). The HDL, the firmware and
//! every `Device` (crate systole-device) follow it; this module is its reference implementation and
//! the tests hold the others to it bit for bit.
//!
//! Operands are [`QMatrix`] ([`tensor`]). This crate depends on `systole-core` alone: it serves
//! without the trainer, the simulator or the EDA tools.
#![deny(missing_docs)]

pub mod conv;
mod convert;
pub mod gemm;
mod matmul;
pub mod tensor;

// The parts of the contract the training step shares live in systole-core (no_std + alloc), so
// the host and the board's CPU run one source; they are re-exported under their old paths.
pub use systole_core::{elementwise, schedule, split};

pub use conv::{
    check_backward_input, check_forward, conv2d_backward_input, conv2d_backward_weights,
    conv2d_forward, Conv2dGeom, ConvGeom,
};
pub use convert::{convert_tiled, TiledConverter};
pub use elementwise::{bias_add, convert_sequential, relu, relu_backward};
pub use matmul::{check_at, matmul, matmul_acc, matmul_at, matmul_nt, matmul_tn};
pub use systole_core::tensor::{output_shift, NumericError, OutputSpec};
pub use tensor::{FixedWords, QMatrix};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod width_tests;
