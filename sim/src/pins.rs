//! A pin-level image (a Verilated top as it goes on a board: oscillator, reset button, UART pins)
//! driven through its pins behind a [`std::io::Read`] + [`std::io::Write`] byte stream, as a
//! serial port would present the board. [`ImagePins::bridge_image`] builds the bridge image (the
//! Verilated `bridge_top`: UART, byte bridge and accelerator, exactly the Verilog
//! `systole bitstream` puts on a board); `crate::VerilatedSoc` drives the SoC image through an
//! `ImagePins` of its own.
//!
//! Bytes written are sent to the model's `uart_rx` pin bit by bit (start bit, eight data bits
//! LSB first, stop bit; the image's clock rate / baud rate clocks per bit) and the model's
//! `uart_tx` pin is decoded back into bytes. The clock only runs inside `read` and `flush`: a
//! read runs until a byte came back or its timeout passed ([`ImagePins::READ_BIT_TIMES`]
//! bit times unless set otherwise), then answers `ErrorKind::TimedOut`, as a serial port with a
//! timeout does.

use crate::linked::ImageModel;
use crate::trace::{tb_error, TraceState, TraceWindow, Window};
use crate::{linked, SimError};
use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use systole_core::ArrayConfig;
use systole_testbench::{Input, Narrow, Testbench};

/// Array size of the bridge image's accelerator in this build (`None`: no bridge image model).
pub fn built_size() -> Option<usize> {
    linked::BRIDGE_IMAGE.as_ref().map(|b| b.size)
}

/// The pins of a simulated image: the bridge's or the SoC's (see the module docs).
pub struct ImagePins {
    /// The image's array (size, `W`, conv unit).
    config: ArrayConfig,
    tb: Testbench,
    reset_pin: Input,
    uart_rx: Input,
    uart_tx: Narrow,
    window: Option<Window>,
    clocks_per_bit: u32,
    /// Line levels still to put on `uart_rx`, one per bit time.
    rx_bits: VecDeque<bool>,
    /// Bytes decoded from `uart_tx`, not yet read.
    received: VecDeque<u8>,
    decoder: TxDecoder,
    read_bit_times: u32,
    /// `(cycle, uart_tx after its rising edge)` of every cycle run, when kept (tests).
    pub(crate) tx_log: Option<Vec<(u64, bool)>>,
}

impl ImagePins {
    /// Bit times one `read` runs without a byte coming back before it times out.
    pub const READ_BIT_TIMES: u32 = 4_000;

    /// Builds the bridge image's model, presses and releases its reset button and leaves the
    /// serial line idle for a few bit times.
    pub fn bridge_image() -> Result<Self, SimError> {
        Self::start(systole_core::numeric::WORD_BITS, None)
    }

    /// [`ImagePins::bridge_image`] with its array at `word_bits`-bit words: at 16 bits the
    /// model compiled in; at any other `W` of the contract the same image generated at `W`
    /// (no conv unit where it is not built at `W`) and Verilated at run time (cached by its
    /// Verilog's hash: the first use takes Verilator and the C++ compiler, seconds).
    pub fn bridge_image_at(word_bits: u32) -> Result<Self, SimError> {
        Self::start(word_bits, None)
    }

    /// [`ImagePins::bridge_image`] on a traced model of the same image (Verilated at run time, then
    /// cached), writing the cycles of `window` (counted from the model's creation, as
    /// [`ImagePins::cycles`] counts) to its file (created by the caller, see
    /// [`TraceWindow::create_file`]).
    pub fn with_trace(window: TraceWindow) -> Result<Self, SimError> {
        Self::start(systole_core::numeric::WORD_BITS, Some(window))
    }

    /// [`ImagePins::with_trace`] of the image at `word_bits`-bit words.
    pub fn with_trace_at(word_bits: u32, window: TraceWindow) -> Result<Self, SimError> {
        Self::start(word_bits, Some(window))
    }

    fn start(word_bits: u32, window: Option<TraceWindow>) -> Result<Self, SimError> {
        let image = linked::BRIDGE_IMAGE.as_ref().ok_or(SimError::NotBuilt)?;
        let config = crate::images::image_config(image.size, word_bits);
        config.validate_built()?;
        let built = word_bits == systole_core::numeric::WORD_BITS;
        let tb = match &window {
            None if built => Self::linked_model(image),
            None => {
                let (verilog, ports) =
                    crate::images::bridge(image.size, word_bits).map_err(SimError::ArrayImage)?;
                crate::trace::runtime_model(&verilog, Some(ports), word_bits)?
            }
            Some(w) => {
                let (verilog, ports) =
                    crate::images::bridge(image.size, word_bits).map_err(SimError::TraceImage)?;
                crate::trace::traced_model(&verilog, Some(ports), w.format)?
            }
        };
        let mut pins = Self::from_model(image, config, tb, window)?;
        // The button is active low: pressed, then released; the synchronizer needs two clocks.
        pins.run_bit(false, false)?;
        pins.run_bit(true, true)?;
        for _ in 0..4 {
            pins.run_bit(true, true)?;
        }
        Ok(pins)
    }

    /// The image's compiled model.
    pub(crate) fn linked_model(image: &'static ImageModel) -> Testbench {
        #[allow(unsafe_code)]
        // SAFETY: the table was written by `layer::rust_table` for the archive linked in.
        unsafe {
            Testbench::linked(image.linked)
        }
    }

    /// `tb`, a model of `image` with the array `config`, with its clock not yet run.
    pub(crate) fn from_model(
        image: &ImageModel,
        config: ArrayConfig,
        tb: Testbench,
        window: Option<TraceWindow>,
    ) -> Result<Self, SimError> {
        let pin = |name: &str| tb.input(name).map_err(tb_error);
        let clocks_per_bit = image.clock_hz.div_ceil(image.baud);
        Ok(ImagePins {
            config,
            reset_pin: pin("reset_pin")?,
            uart_rx: pin("uart_rx")?,
            uart_tx: tb.narrow_port("uart_tx").map_err(tb_error)?,
            tb,
            window: window.map(Window::new),
            clocks_per_bit,
            rx_bits: VecDeque::new(),
            received: VecDeque::new(),
            decoder: TxDecoder::new(clocks_per_bit),
            read_bit_times: Self::READ_BIT_TIMES,
            tx_log: None,
        })
    }

    /// The model (for the SoC's RAM loader).
    pub(crate) fn model(&mut self) -> &mut Testbench {
        &mut self.tb
    }

    /// `n` clock cycles with the pins held, through the trace window.
    pub(crate) fn clock(&mut self, n: u64) -> Result<(), SimError> {
        Window::clock(&mut self.tb, self.window.as_mut(), n)
    }

    /// Array size of the image's accelerator.
    pub fn size(&self) -> usize {
        self.config.size
    }

    /// The image's array (what its `CONFIG` register reports; `frac_bits` is the default of
    /// its `W`).
    pub fn config(&self) -> ArrayConfig {
        self.config
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<TraceState> {
        self.window.as_ref().map(Window::state)
    }

    /// Bit times a `read` runs without a byte coming back before it times out (at least 1).
    pub fn set_read_timeout(&mut self, bit_times: u32) {
        self.read_bit_times = bit_times.max(1);
    }

    /// Bit times of written bytes not yet on the line towards the image (a `read` or `flush`
    /// sends them).
    pub fn queued_bit_times(&self) -> usize {
        self.rx_bits.len()
    }

    /// Oscillator cycles simulated so far.
    pub fn cycles(&self) -> u64 {
        self.tb.cycles()
    }

    /// One bit time with the button and the receive line held, decoding the transmit line after
    /// each rising edge.
    pub(crate) fn run_bit(&mut self, reset_released: bool, rx: bool) -> Result<(), SimError> {
        self.tb.set(self.reset_pin, reset_released.into());
        self.tb.set(self.uart_rx, rx.into());
        for _ in 0..self.clocks_per_bit {
            self.clock(1)?;
            let level = self.tb.get(self.uart_tx);
            if let Some(log) = &mut self.tx_log {
                log.push((self.tb.cycles() - 1, level != 0));
            }
            if let Some(byte) = self.decoder.sample(level != 0) {
                self.received.push_back(byte);
            }
        }
        Ok(())
    }

    /// One bit time of the line towards the image: the next queued bit, or idle (high).
    pub(crate) fn step(&mut self) -> Result<(), SimError> {
        let rx = self.rx_bits.pop_front().unwrap_or(true);
        self.run_bit(true, rx)
    }
}

/// A simulation failure as the I/O error a serial port would give.
fn io_error(e: SimError) -> io::Error {
    io::Error::other(e)
}

impl Write for ImagePins {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for &byte in buf {
            self.rx_bits.push_back(false);
            self.rx_bits.extend((0..8).map(|i| (byte >> i) & 1 == 1));
            self.rx_bits.push_back(true);
        }
        Ok(buf.len())
    }

    /// Runs the clock until every written byte is on the line.
    fn flush(&mut self) -> io::Result<()> {
        while !self.rx_bits.is_empty() {
            self.step().map_err(io_error)?;
        }
        Ok(())
    }
}

impl Read for ImagePins {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut waited = 0;
        while self.received.is_empty() {
            if waited == self.read_bit_times {
                return Err(io::Error::new(
                    ErrorKind::TimedOut,
                    "the simulated image sent nothing",
                ));
            }
            self.step().map_err(io_error)?;
            waited += 1;
        }
        let n = buf.len().min(self.received.len());
        for (slot, byte) in buf.iter_mut().zip(self.received.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }
}

/// Decodes a UART line sampled once per clock: a falling edge starts a byte, each bit is
/// sampled in the middle of its bit time.
pub(crate) struct TxDecoder {
    clocks_per_bit: u32,
    /// Clocks since the start bit's falling edge, while a byte is being received.
    since_start: Option<u32>,
    byte: u8,
    last: bool,
}

impl TxDecoder {
    pub(crate) fn new(clocks_per_bit: u32) -> Self {
        TxDecoder {
            clocks_per_bit,
            since_start: None,
            byte: 0,
            last: true,
        }
    }

    /// The line level of one clock; a byte when its stop bit was sampled high.
    pub(crate) fn sample(&mut self, level: bool) -> Option<u8> {
        let falling = self.last && !level;
        self.last = level;
        let Some(t) = self.since_start else {
            if falling {
                self.since_start = Some(0);
                self.byte = 0;
            }
            return None;
        };
        let t = t + 1;
        self.since_start = Some(t);
        let cpb = self.clocks_per_bit;
        if t % cpb != cpb / 2 {
            return None;
        }
        match t / cpb {
            // A start bit that is not low in its middle was a glitch.
            0 if level => self.since_start = None,
            0 => {}
            bit @ 1..=8 => self.byte |= u8::from(level) << (bit - 1),
            _ => {
                self.since_start = None;
                // A low stop bit is a framing error: the byte is dropped, as a UART does.
                return level.then_some(self.byte);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decoder_reads_what_a_uart_sends() {
        let cpb = 8;
        let mut d = TxDecoder::new(cpb);
        let mut got = vec![];
        let mut line = vec![true; 5];
        for byte in [0x53u8, 0x00, 0xFF, 0xA5] {
            let bits = std::iter::once(false)
                .chain((0..8).map(|i| (byte >> i) & 1 == 1))
                .chain(std::iter::once(true));
            for b in bits {
                line.extend(std::iter::repeat_n(b, cpb as usize));
            }
        }
        line.extend([true; 3]);
        for level in line {
            got.extend(d.sample(level));
        }
        assert_eq!(got, [0x53, 0x00, 0xFF, 0xA5]);
    }

    /// The bridge image answers the bridge's register read of `ID` ("SYST", then the CRC of
    /// the request and the data) through its pins.
    #[test]
    fn the_bridge_image_answers_over_its_serial_pins() {
        let Ok(mut pins) = ImagePins::bridge_image() else {
            println!("no bridge image model in this build: skipped");
            return;
        };
        let request = [b'R', systole_core::regmap::ID];
        pins.write_all(&request).unwrap();
        let mut reply = [0u8; 6];
        pins.read_exact(&mut reply).unwrap();
        let (id, crc) = reply.split_at(4);
        assert_eq!(
            u32::from_be_bytes(id.try_into().unwrap()),
            systole_core::regmap::ID_VALUE
        );
        let checked = [&request[..], id].concat();
        assert_eq!(
            crc,
            systole_core::crc::crc16_bitwise(&checked).to_be_bytes(),
            "{reply:02x?}"
        );
        let mut id = [0u8; 4];
        // Nothing more comes back: the next read times out.
        let e = pins.read(&mut id).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
    }
}
