//! Host side of systole: the bit-exact golden model ([`golden`]), the [`device::Device`]
//! backends that run operations on an accelerator, and (in later modules) the trainer and CLI.
#![deny(missing_docs)]

pub mod bench;
pub mod bench_conv;
pub mod board_sim;
pub mod boards;
pub mod cli;
pub mod data;
pub mod device;
pub mod dist;
pub mod golden;
pub mod guide;
pub mod outfile;
pub mod plot;
pub mod report;
pub mod tensor;
pub mod train;

pub use systole_core::{ArrayConfig, Rounding};
pub use tensor::QMatrix;
