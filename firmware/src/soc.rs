//! The firmware's drivers for the SoC's devices (addresses from [`systole_core::soc`]), each
//! generic over [`Regs`] so the host tests them against a fake register file:
//!
//! * [`MmioBus`] — the accelerator as an [`systole_core::AcceleratorBus`]: registers, row stage
//!   and C stage;
//! * [`Uart`] — the serial link as an `embedded_io` byte stream (what [`crate::server::FrameServer`]
//!   serves frames over);
//! * [`Timer`] — the cycle counter, and `embedded_hal`'s `DelayNs` on top of it;
//! * [`reset`] — the software reset the panic handler ends with.

mod accel;
mod timer;
mod uart;

pub use accel::{MmioBus, MmioError};
pub use timer::{cycles, Timer, TimerError};
pub use uart::{Uart, UartError};

use crate::mmio::Regs;
use systole_core::soc::{SYS_RESET, SYS_RESET_KEY};

/// Stack the firmware reserves at the top of the SoC's RAM: the image's code and static data
/// plus this must fit in RAM (checked when the image is built). The deepest path is a frame
/// being answered: the board keeps its frame buffers in its own struct (static data), the
/// stack holds a few row buffers of `MAX_LANES` words and the call chain.
///
/// 7.5 KiB: the deepest use measured is 6,256 B (the conv conformance body), and the row DMA's
/// driver code took the last half KiB of the image's 64 KiB.
pub const STACK_RESERVE_BYTES: u32 = 7 * 1024 + 512;

/// Stack the training image reserves (it is linked for more than `BASE_RAM_BYTES`): a step's
/// call chain (the model's forward and backward, the drivers, soft float and `libm`) went to
/// 8,188 of an 8,192-byte reserve on the simulated SoC (digits MLP, `STACK_USE` after 3 steps)
/// and to 8,264 B in a 32 KiB reserve: it had run past the 8 KiB one. With the whole digits
/// set resident it reached the end of a 12 KiB reserve, and 13,416 B of a 20 KiB one (14,504 B
/// with the row DMA and the integer elementwise work). 20 KiB
/// keeps a quarter of the reserve free above that (the SoC training tests check it) and gives
/// the rest of the 32 KiB to the heap, where the resident data set lives.
pub const TRAINING_STACK_RESERVE_BYTES: u32 = 20 * 1024;

/// The stack reserve of an image linked for `ram_bytes` of RAM: the serving image's
/// [`STACK_RESERVE_BYTES`] in `BASE_RAM_BYTES`, the training image's
/// [`TRAINING_STACK_RESERVE_BYTES`] above it.
pub const fn stack_reserve_bytes(ram_bytes: u32) -> u32 {
    if ram_bytes > systole_core::soc::BASE_RAM_BYTES {
        TRAINING_STACK_RESERVE_BYTES
    } else {
        STACK_RESERVE_BYTES
    }
}

// The host sends one frame and waits for its answer: the UART's receive FIFO must hold the
// largest frame, or a request arriving while the firmware runs the last one loses bytes.
const _: () = assert!(crate::frame::FRAME_CAPACITY <= systole_core::soc::RX_FIFO_BYTES);

/// Resets the CPU through `SYS_RESET`. On the SoC the write does not return; elsewhere (a fake
/// register file) it does.
pub fn reset<R: Regs>(regs: &mut R) {
    regs.write32(SYS_RESET, SYS_RESET_KEY);
}

#[cfg(test)]
mod dma_tests;
#[cfg(test)]
mod overrun_tests;
#[cfg(test)]
mod tests;
