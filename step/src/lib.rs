//! `systole-step`: the fixed-point training step, written once for the host trainer and for the
//! board's CPU (`no_std` + `alloc`, on `systole-core` alone).
//!
//! * [`arith::Arith`] — the operations a model needs; [`fixed::Fixed`] implements them in 16-bit
//!   dynamic fixed point (the per-tensor format choices, the remembered per-operation
//!   fractional bits, the saturation retries, the op seeds, the long-reduction chunks, bias,
//!   ReLU, pooling and the SGD update with momentum), sending every matrix product and
//!   convolution to a [`products::Products`]: the host implements it with a `Device`
//!   (`systole-train`); the firmware with its tile and conv drivers
//!   (`systole_firmware::products::BoardProducts`).
//! * [`graph`] — the network as a graph of [`layers`] (each kind in its own file), type-checked,
//!   walked forward and backward over `Arith` (`graph::run`: the host's float formats and the
//!   board run the very same walk).
//! * [`loss`] — softmax cross-entropy in f32 with `libm`'s double-precision `exp`/`log` rounded to f32.
//! * [`step`] — one training step (forward, loss, backward, update) and an evaluation batch.
//! * [`rng`] — the seeded streams and the epoch order (the host's and the board's shuffle).
//! * [`resident`] — a run whose state and data live on the board: the training state's wire
//!   form (written and read by both sides) and the steps run on resident data.
//!
//! No platform maths: every float operation is an IEEE basic operation (exact on every
//! platform, soft-float on the RV32 included) or a `libm` function, so x86 and RV32 give the
//! same bits.
#![no_std]
#![deny(missing_docs, unsafe_code)]

extern crate alloc;

pub mod arith;
mod exact;
mod exp;
pub mod fixed;
mod fixed_arith;
pub mod graph;
pub mod layers;
pub mod loss;
mod offload;
pub mod products;
pub mod profile;
pub mod resident;
pub mod rng;
pub mod seeds;
mod sgd_sums;
mod softmax_words;
pub mod step;
pub mod width;

pub use arith::{Arith, PoolGeom, SaturationCount, TensorState};
pub use fixed::Fixed;
pub use graph::{Graph, GraphError, Shape, Src};
pub use layers::Layer;
pub use products::Products;
pub use systole_core::conv2d::Conv2dGeom;
pub use systole_core::tensor::{NumericError, OutputSpec, QMatrix};
pub use width::Widths;

use alloc::string::String;

/// Why a step's own work (not a product's backend) failed. Each backend's error type converts
/// from it (`From<StepError>`), so a step's errors come out as the backend's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// An operation broke the numeric contract (the cause is the error's source).
    #[error("{op}")]
    Numeric {
        /// The operation, e.g. `layer 2 backward dW`.
        op: String,
        /// The cause.
        source: NumericError,
    },
    /// Operand shapes do not fit (a bug in the model description or bad options).
    #[error("{op}: {msg}")]
    Shape {
        /// The operation.
        op: String,
        /// What does not fit.
        msg: String,
    },
    /// The loss is not finite.
    #[error("training diverged at step {step} (loss {loss}): lower --lr")]
    Diverged {
        /// The step id.
        step: u64,
        /// The loss.
        loss: f32,
    },
    /// A checkpoint's tensor cannot be used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A word width outside `MIN_WORD_BITS..=MAX_WORD_BITS`.
    #[error("a word width of {0} bits is outside {min}..={max}: choose --word-bits from {min} to {max}", min = width::MIN_WORD_BITS, max = systole_core::numeric::MAX_WORD_BITS)]
    WordBits(u32),
    /// Master weights narrower than the words or wider than 16 bits.
    #[error("master weights of {master} bits with {word}-bit words: choose --master-bits from {word} to {max} (at least --word-bits)", max = systole_core::numeric::MAX_WORD_BITS)]
    MasterBits {
        /// W.
        word: u32,
        /// The master width asked for.
        master: u32,
    },
    /// The backward pass produced no gradient for a parameter (a bug in the layer list).
    #[error("no gradient for parameter {0}")]
    NoGradient(usize),
}

/// Maps a [`NumericError`] to [`StepError::Numeric`] of `op`.
pub(crate) fn numeric(op: &str) -> impl Fn(NumericError) -> StepError + '_ {
    move |source| StepError::Numeric {
        op: String::from(op),
        source,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod width_tests;
