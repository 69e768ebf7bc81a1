//! `systole-core`: the one place every other crate takes its facts from.
//!
//! * [`config::ArrayConfig`] — array size, word and accumulator widths, default fractional bits
//!   and buffer depth. The HDL generator, the register map the firmware uses and the host all
//!   derive from it.
//! * [`regmap`] — the accelerator's register addresses and bit fields ([`field::Field`]).
//! * [`numeric`] — the scalar primitives of the numeric contract (rounding, saturation, the
//!   stochastic-rounding LFSR). The contract itself is written down in docs/HARDWARE.md (section 6);
//!   the golden model (`systole-golden`) is built from these primitives.
//! * [`limits`] — the largest tensors, models and shard counts the host accepts.
//! * [`bridge`] — the baud rate of the board bridge's UART.
//! * [`crc`] — the CRC-16 parameters of the firmware protocol and the board bridge.
//! * [`dsp_pack`] — two multiplies per DSP48E1 at `W <= 8`: the packed multiply's arithmetic.
//! * [`soc`] — the memory map of the SoC (the RISC-V CPU that runs the firmware beside the array).
//! * [`bus::AcceleratorBus`] — the narrow interface to one accelerator instance (registers plus
//!   row-wide buffer ports), implemented by the Verilator model and by the firmware's MMIO layer.
//!
//! With the `alloc` feature (no_std + `alloc`; the host crates and the training step turn it on,
//! the firmware's frame server does not):
//! * [`tensor`] — [`tensor::QMatrix`], [`tensor::NumericError`], [`tensor::OutputSpec`].
//! * [`elementwise`] — the sequential conversion, bias add, ReLU.
//! * [`split`] — the contract's long-reduction rule (chunks, chunk seeds, slices).
//! * [`schedule`] — the learning-rate schedule.
//! * [`conv2d`] — a batched convolution's geometry and operand checks.
//!
//! Rounding of floats goes through `libm` (pure Rust, the same bits on x86 and RV32), never
//! the platform's maths library.
#![no_std]
#![deny(missing_docs, unsafe_code)]

pub mod bridge;
pub mod bus;
pub mod config;
mod config_word;
pub mod crc;
pub mod dsp_pack;
pub mod field;
pub mod gather;
pub mod limits;
pub mod numeric;
pub mod regmap;
pub mod soc;

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "alloc")]
pub mod conv2d;
#[cfg(feature = "alloc")]
pub mod elementwise;
#[cfg(feature = "alloc")]
pub mod schedule;
#[cfg(feature = "alloc")]
pub mod split;
#[cfg(feature = "alloc")]
pub mod tensor;

pub use bus::AcceleratorBus;
pub use config::{ArrayConfig, ConfigError};
pub use config_word::ConfigWordMismatch;
pub use numeric::{Lfsr32, Rounding};
