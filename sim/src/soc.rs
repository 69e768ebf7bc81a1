//! The SoC image simulated through its serial pins: the Verilated `systole_hdl::soc` (the
//! VexRiscv CPU, its RAM, the UART, timer, SYS registers and the smallest array built, with the
//! conv unit) behind a [`std::io::Read`] + [`std::io::Write`] byte stream, as a serial port
//! presents a board. A program image is written into the RAM while the reset button is held,
//! then the button is released and the CPU starts at `systole_core::soc::RESET_VECTOR`.
//! Reading and writing work as for [`ImagePins`] (the clock runs inside `read` and
//! `flush` only).

use crate::trace::{tb_error, TraceState, TraceWindow};
use crate::{linked, ImagePins, SimError};
use std::io::{self, Read, Write};
use systole_core::ArrayConfig;

/// The simulated SoC image (see the module docs).
pub struct VerilatedSoc {
    pins: ImagePins,
    ram_bytes: u32,
    /// The board's cycle count when the reset button was released.
    released_at: u64,
}

impl VerilatedSoc {
    /// Builds the SoC's model, loads `image` (little-endian bytes from `RAM_BASE`, at most
    /// the RAM size) and releases the reset: the CPU runs the image from its first clock.
    pub fn new(image: &[u8]) -> Result<Self, SimError> {
        Self::start(image, systole_core::numeric::WORD_BITS, None)
    }

    /// [`VerilatedSoc::new`] with the array at `word_bits`-bit words: at 16 bits the model
    /// compiled in; at any other `W` of the contract the same SoC generated at `W` (no conv
    /// unit where it is not built at `W`), Verilated at run time (cached by its Verilog's hash;
    /// the first use takes minutes, the CPU's Verilog included).
    pub fn new_at(image: &[u8], word_bits: u32) -> Result<Self, SimError> {
        Self::start(image, word_bits, None)
    }

    /// [`VerilatedSoc::new`] on a traced model of the same image (Verilated at run time, then
    /// cached: the first use takes minutes), writing the cycles of `window` (counted from the
    /// model's creation, the RAM loading included) to its file (created by the caller, see
    /// [`TraceWindow::create_file`]).
    pub fn with_trace(image: &[u8], window: TraceWindow) -> Result<Self, SimError> {
        Self::start(image, systole_core::numeric::WORD_BITS, Some(window))
    }

    fn start(image: &[u8], word_bits: u32, window: Option<TraceWindow>) -> Result<Self, SimError> {
        let model = linked::SOC
            .as_ref()
            .map_err(|why| SimError::SocNotBuilt((*why).to_string()))?;
        let loader = model
            .loader
            .as_ref()
            .ok_or_else(|| SimError::SocNotBuilt("the SoC model has no RAM loader".into()))?;
        if image.is_empty() || image.len() > loader.ram_bytes as usize {
            return Err(SimError::Image(format!(
                "{} bytes: a program image must have 1 to {} bytes (the SoC's RAM)",
                image.len(),
                loader.ram_bytes
            )));
        }
        let config = crate::images::image_config(model.size, word_bits);
        config.validate_built()?;
        let tb = match &window {
            None if word_bits == systole_core::numeric::WORD_BITS => ImagePins::linked_model(model),
            None => {
                let verilog =
                    crate::images::soc(model.size, word_bits).map_err(SimError::ArrayImage)?;
                crate::trace::runtime_model(&verilog, None, word_bits)?
            }
            Some(w) => {
                let verilog =
                    crate::images::soc(model.size, word_bits).map_err(SimError::TraceImage)?;
                crate::trace::traced_model(&verilog, None, w.format)?
            }
        };
        let mut pins = ImagePins::from_model(model, config, tb, window)?;
        // The button held (active low) for a bit time, so the reset reaches every register.
        pins.run_bit(false, true)?;
        load(&mut pins, image)?;
        pins.run_bit(false, true)?;
        let released_at = pins.cycles();
        Ok(VerilatedSoc {
            pins,
            ram_bytes: loader.ram_bytes,
            released_at,
        })
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<TraceState> {
        self.pins.trace_state()
    }

    /// The board model under the SoC (tests).
    #[cfg(test)]
    pub(crate) fn board_mut(&mut self) -> &mut ImagePins {
        &mut self.pins
    }

    /// The SoC running the firmware image of `soc-firmware/` (built with this crate by
    /// `systole_soc_image`): the frame protocol server of `systole_firmware::server` on the CPU.
    pub fn with_firmware() -> Result<Self, SimError> {
        Self::with_image(&linked::SOC_FIRMWARE)
    }

    /// [`VerilatedSoc::with_firmware`] on the SoC with its array at `word_bits`-bit words
    /// ([`VerilatedSoc::new_at`]): the same firmware image, which reads the array's `W` from
    /// its `CONFIG` register.
    pub fn with_firmware_at(word_bits: u32) -> Result<Self, SimError> {
        Self::new_at(Self::firmware(&linked::SOC_FIRMWARE)?, word_bits)
    }

    /// [`VerilatedSoc::with_firmware`] with the firmware's `panic-test` build, whose `IDLE` of
    /// `protocol::panic::PANIC_TEST_IDLE_CYCLES` cycles panics.
    pub fn with_panic_test_firmware() -> Result<Self, SimError> {
        Self::with_image(&linked::SOC_PANIC_FIRMWARE)
    }

    /// [`VerilatedSoc::with_firmware`] on a traced model (see [`VerilatedSoc::with_trace`]).
    pub fn with_firmware_traced(window: TraceWindow) -> Result<Self, SimError> {
        Self::start(
            Self::firmware(&linked::SOC_FIRMWARE)?,
            systole_core::numeric::WORD_BITS,
            Some(window),
        )
    }

    fn with_image(image: &Result<&'static [u8], &'static str>) -> Result<Self, SimError> {
        Self::new(Self::firmware(image)?)
    }

    fn firmware(image: &Result<&'static [u8], &'static str>) -> Result<&'static [u8], SimError> {
        if let Err(why) = &linked::SOC {
            return Err(SimError::SocNotBuilt((*why).to_string()));
        }
        image
            .map_err(|why| SimError::SocNotBuilt(format!("no firmware image in this build: {why}")))
    }

    /// Array size of the SoC's accelerator.
    pub fn size(&self) -> usize {
        self.pins.size()
    }

    /// The accelerator's configuration (what its `CONFIG` register reports; `frac_bits` is
    /// the default of its `W`).
    pub fn config(&self) -> ArrayConfig {
        self.pins.config()
    }

    /// RAM size in bytes.
    pub fn ram_bytes(&self) -> u32 {
        self.ram_bytes
    }

    /// Clock cycles run since the reset button was released (at bit-time granularity).
    pub fn cycles(&self) -> u64 {
        self.pins.cycles() - self.released_at
    }

    /// Presses the reset button for a bit time and releases it: the CPU restarts the image
    /// still in its RAM (as a board's button does); the line keeps its queued bytes.
    pub fn press_reset(&mut self) {
        // The model's only failure is a trace file that stopped taking writes, which
        // Verilator reports itself; the simulation goes on.
        drop(self.pins.run_bit(false, true));
        drop(self.pins.run_bit(true, true));
    }

    /// Bit times of written bytes not yet on the line towards the SoC.
    pub fn queued_bit_times(&self) -> usize {
        self.pins.queued_bit_times()
    }

    /// Runs the clock for at least `cycles` clocks (whole bit times), the line towards the
    /// SoC sending what was written and then idle.
    pub fn run(&mut self, cycles: u64) {
        let end = self.pins.cycles() + cycles;
        while self.pins.cycles() < end {
            drop(self.pins.step());
        }
    }

    /// Bit times a `read` runs without a byte coming back before it times out (at least 1).
    pub fn set_read_timeout(&mut self, bit_times: u32) {
        self.pins.set_read_timeout(bit_times);
    }
}

impl Write for VerilatedSoc {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pins.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.pins.flush()
    }
}

impl Read for VerilatedSoc {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.pins.read(buf)
    }
}

/// Writes `image`'s words into the RAM from word 0 through the loader ports, a word per
/// clock, the reset button held (the CPU stays in reset; the next bit time releases it).
fn load(pins: &mut ImagePins, image: &[u8]) -> Result<(), SimError> {
    let tb = pins.model();
    let port = |name: &str| tb.port(name).map_err(tb_error);
    let (reset_pin, we, addr, data) = (
        port("reset_pin")?,
        port("load_we")?,
        port("load_addr")?,
        port("load_data")?,
    );
    tb.write(reset_pin, 0).map_err(tb_error)?;
    for (i, chunk) in image.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..chunk.len()].copy_from_slice(chunk);
        let tb = pins.model();
        tb.write(we, 1).map_err(tb_error)?;
        tb.write(addr, i as u64).map_err(tb_error)?;
        tb.write(data, u32::from_le_bytes(w).into())
            .map_err(tb_error)?;
        pins.clock(1)?;
    }
    pins.model().write(we, 0).map_err(tb_error)
}

#[cfg(test)]
mod tests;
