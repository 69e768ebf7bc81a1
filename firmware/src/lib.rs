//! `systole-firmware`: the device side of systole, `no_std` and allocation-free.
//!
//! * [`frame`] and [`crc`] — how messages are delimited and checked on the serial link.
//! * [`protocol`] — the commands (register access, block row transfers, status), with a table
//!   of every frame's format and action.
//! * [`store`] — [`store::TensorStore`], the tensors a host uploads for the board operations
//!   (`MATMUL`, `CONV` run by the board's own drivers).
//! * [`server`] — [`server::FrameServer`], the board's loop: decode frames from an `embedded_io` byte stream, run them on
//!   the local [`systole_core::AcceleratorBus`], answer, and answer retries without re-running.
//! * `driver` — the tile driver (tiled matmul over any `AcceleratorBus`), used by the host for
//!   every backend; [`conv`] — the conv driver on top of it (feature maps sent once, im2col
//!   gathered on chip).
//! * `products` (feature `step`) — `BoardProducts`: the training step's products
//!   (`systole_step::Products`) on these drivers, so the whole step runs on the board's CPU.
//! * [`mmio`] and [`soc`] — the SoC build: register access and the training image's heap
//!   allocator (the crate's only `unsafe`), and the drivers for its accelerator windows, UART
//!   and timer.
#![no_std]
#![deny(unsafe_code, missing_docs)]

pub mod conv;
pub mod crc;
pub mod driver;
pub mod frame;
pub mod mmio;
#[cfg(any(feature = "step", test))]
extern crate alloc;

#[cfg(any(feature = "step", test))]
pub mod products;
pub mod protocol;
pub mod server;
pub mod soc;
pub mod store;
