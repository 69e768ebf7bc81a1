//! The SoC image simulated through its serial pins: the Verilated `systole_hdl::soc` (the
//! VexRiscv CPU, its RAM, the UART, timer, SYS registers and the smallest array built, with the
//! conv unit) behind a [`std::io::Read`] + [`std::io::Write`] byte stream, as a serial port
//! presents a board. A program image is written into the RAM while the reset button is held,
//! then the button is released and the CPU starts at `systole_core::soc::RESET_VECTOR`.
//! Reading and writing work as for [`VerilatedBoard`] (the clock runs inside `read` and
//! `flush` only).
#![allow(unsafe_code)]

use crate::{ffi, SimError, VerilatedBoard};
use std::io::{self, Read, Write};
use systole_core::ArrayConfig;

/// The simulated SoC image (see the module docs).
pub struct VerilatedSoc {
    board: VerilatedBoard,
    ram_bytes: u32,
    fm_depth: usize,
    /// The board's cycle count when the reset button was released.
    released_at: u64,
}

impl VerilatedSoc {
    /// Builds the SoC's model, loads `image` (little-endian bytes from `RAM_BASE`, at most
    /// the RAM size) and releases the reset: the CPU runs the image from its first clock.
    pub fn new(image: &[u8]) -> Result<Self, SimError> {
        let fns = ffi::SOC
            .as_ref()
            .map_err(|why| SimError::SocNotBuilt((*why).to_string()))?;
        let loader = fns
            .load
            .as_ref()
            .ok_or_else(|| SimError::SocNotBuilt("the SoC model has no RAM loader".into()))?;
        if image.is_empty() || image.len() > loader.ram_bytes as usize {
            return Err(SimError::Image(format!(
                "{} bytes: a program image must have 1 to {} bytes (the SoC's RAM)",
                image.len(),
                loader.ram_bytes
            )));
        }
        let words: Vec<u32> = image
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect();
        let mut board = VerilatedBoard::from_fns(fns)?;
        // The button held (active low) for a bit time, so the reset reaches every register.
        board.run_bit(false, true);
        let (_, state) = board.model();
        let count = u32::try_from(words.len()).expect("the RAM size bounds the image");
        // SAFETY: `state` is the live model `board` owns; `words` holds `count` words, and the
        // image fits the RAM (checked above).
        unsafe { (loader.load)(state, 0, words.as_ptr(), count) };
        board.run_bit(false, true);
        let released_at = board.cycles();
        Ok(VerilatedSoc {
            board,
            ram_bytes: loader.ram_bytes,
            fm_depth: loader.fm_depth,
            released_at,
        })
    }

    /// The SoC running the firmware image of `soc-firmware/` (built with this crate by
    /// `systole_soc_image`): the frame protocol server of `systole_firmware::server` on the CPU.
    pub fn with_firmware() -> Result<Self, SimError> {
        Self::with_image(&ffi::SOC_FIRMWARE)
    }

    /// [`VerilatedSoc::with_firmware`] with the firmware's `panic-test` build, whose `IDLE` of
    /// `protocol::panic::PANIC_TEST_IDLE_CYCLES` cycles panics.
    pub fn with_panic_test_firmware() -> Result<Self, SimError> {
        Self::with_image(&ffi::SOC_PANIC_FIRMWARE)
    }

    fn with_image(image: &Result<&'static [u8], &'static str>) -> Result<Self, SimError> {
        if let Err(why) = &ffi::SOC {
            return Err(SimError::SocNotBuilt((*why).to_string()));
        }
        let image = image.map_err(|why| {
            SimError::SocNotBuilt(format!("no firmware image in this build: {why}"))
        })?;
        Self::new(image)
    }

    /// Array size of the SoC's accelerator.
    pub fn size(&self) -> usize {
        self.board.size()
    }

    /// The accelerator's configuration (what its `CONFIG` register reports).
    pub fn config(&self) -> ArrayConfig {
        ArrayConfig {
            fm_depth: self.fm_depth,
            ..ArrayConfig::square(self.size())
        }
    }

    /// RAM size in bytes.
    pub fn ram_bytes(&self) -> u32 {
        self.ram_bytes
    }

    /// Clock cycles run since the reset button was released (at bit-time granularity).
    pub fn cycles(&self) -> u64 {
        self.board.cycles() - self.released_at
    }

    /// Presses the reset button for a bit time and releases it: the CPU restarts the image
    /// still in its RAM (as a board's button does); the line keeps its queued bytes.
    pub fn press_reset(&mut self) {
        self.board.run_bit(false, true);
        self.board.run_bit(true, true);
    }

    /// Bit times of written bytes not yet on the line towards the SoC.
    pub fn queued_bit_times(&self) -> usize {
        self.board.queued_bit_times()
    }

    /// Runs the clock for at least `cycles` clocks (whole bit times), the line towards the
    /// SoC sending what was written and then idle.
    pub fn run(&mut self, cycles: u64) {
        let end = self.board.cycles() + cycles;
        while self.board.cycles() < end {
            self.board.step();
        }
    }

    /// Bit times a `read` runs without a byte coming back before it times out (at least 1).
    pub fn set_read_timeout(&mut self, bit_times: u32) {
        self.board.set_read_timeout(bit_times);
    }
}

impl Write for VerilatedSoc {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.board.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.board.flush()
    }
}

impl Read for VerilatedSoc {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.board.read(buf)
    }
}

#[cfg(test)]
mod tests;
