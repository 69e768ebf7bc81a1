//! The simulated board: the firmware's [`FrameServer`] loop serving a pseudo-terminal, with an
//! accelerator behind it (the Verilated array, or any other [`AcceleratorBus`]). The host opens
//! the pty's slave path exactly as it would open `/dev/ttyUSB0`, so the serial backend is
//! tested end to end without hardware. [`SimBoard::spawn_bridge_image`] serves the CPU-less
//! bridge image instead (the UART bridge, simulated through its pins) for the bridge backend.

use crate::DeviceError;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::termios;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_firmware::frame::Decoder;
use systole_firmware::protocol::train::WORKING;
use systole_firmware::server::{FrameServer, ServerError};
use systole_sim::{ImagePins, VerilatedSoc};

pub mod faults;
mod serve;
pub use serve::{run_board_sim, run_bridge_image_sim, run_soc_image_sim};

/// The board side of the pty: blocking reads that give up when asked to stop, and an optional
/// byte budget after which the link "drops" (for link-failure tests).
struct PtyIo {
    master: File,
    stop: Arc<AtomicBool>,
    budget: Option<usize>,
}

impl embedded_io::ErrorType for PtyIo {
    type Error = std::io::Error;
}

impl embedded_io::Read for PtyIo {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, std::io::Error> {
        loop {
            if self.stop.load(Ordering::Relaxed) || self.budget == Some(0) {
                return Ok(0);
            }
            let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            // Short polls so a stop request is seen promptly.
            let ready =
                nix::poll::poll(&mut fds, PollTimeout::from(20u8)).map_err(std::io::Error::from)?;
            if ready == 0 {
                continue;
            }
            let want = self.budget.map_or(buf.len(), |b| b.min(buf.len()));
            let n = self.master.read(&mut buf[..want])?;
            if let Some(b) = &mut self.budget {
                *b -= n;
            }
            return Ok(n);
        }
    }
}

impl embedded_io::Write for PtyIo {
    fn write(&mut self, buf: &[u8]) -> Result<usize, std::io::Error> {
        self.master.write(buf)
    }
    fn flush(&mut self) -> Result<(), std::io::Error> {
        self.master.flush()
    }
}

/// A new pty in raw mode: the master side, the slave (kept open) and the slave's path.
fn open_pty() -> Result<(File, OwnedFd, PathBuf), DeviceError> {
    let err = |what: &str, e: nix::Error| DeviceError::Transport {
        device: format!("the simulated board's pty ({what})"),
        source: Box::new(e),
    };
    let pty = nix::pty::openpty(None, None).map_err(|e| err("open", e))?;
    // Raw mode: no echo or line editing between the host and the board.
    let mut t = termios::tcgetattr(&pty.slave).map_err(|e| err("tcgetattr", e))?;
    termios::cfmakeraw(&mut t);
    termios::tcsetattr(&pty.slave, termios::SetArg::TCSANOW, &t)
        .map_err(|e| err("tcsetattr", e))?;
    let path = nix::unistd::ttyname(&pty.slave).map_err(|e| err("name", e))?;
    Ok((File::from(pty.master), pty.slave, path))
}

/// Why a simulated board stopped other than by being closed: [`SimBoard::close`]'s verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimBoardError {
    /// The image could not be created on the board's thread.
    #[error("the simulated image could not start")]
    Start(#[source] systole_sim::SimError),
    /// The pty or the image's serial pins failed.
    #[error("the simulated board's link failed")]
    Link(#[source] std::io::Error),
    /// Waiting on the pty failed.
    #[error("waiting on the simulated board's pty failed")]
    Poll(#[source] nix::Error),
    /// The frame server stopped for a reason this build does not name.
    #[error("the simulated board's frame server stopped")]
    Server,
    /// The board's thread panicked.
    #[error("the simulated board's thread panicked")]
    Panicked,
}

/// A running simulated board. Dropping it stops the board and closes the pty.
pub struct SimBoard {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), SimBoardError>>>,
    /// Kept open so the master side never sees a hang-up while no host has the port open.
    _slave: OwnedFd,
}

impl SimBoard {
    /// Starts a board on a new pty. `make_bus` runs on the board's thread (a Verilated model
    /// is created where it is used). With `drop_after = Some(n)` the board closes the link
    /// after receiving `n` bytes, to test what the host does when a link dies mid-operation.
    pub fn spawn<B, F>(
        config: ArrayConfig,
        make_bus: F,
        drop_after: Option<usize>,
    ) -> Result<SimBoard, DeviceError>
    where
        B: AcceleratorBus,
        B::Error: std::fmt::Debug,
        F: FnOnce() -> B + Send + 'static,
    {
        SimBoard::spawn_as(config, make_bus, drop_after, None)
    }

    /// [`SimBoard::spawn`] of a board whose firmware trains itself: a tensor store
    /// of the SoC's size and the training session (`FrameServer::with_training`) announcing a
    /// heap of `heap_bytes` (the memory is this process's: the host plans by the number). The
    /// training SoC image's firmware, run on the host.
    pub fn spawn_training<B, F>(
        config: ArrayConfig,
        make_bus: F,
        heap_bytes: u32,
    ) -> Result<SimBoard, DeviceError>
    where
        B: AcceleratorBus,
        B::Error: std::fmt::Debug,
        F: FnOnce() -> B + Send + 'static,
    {
        SimBoard::spawn_as(config, make_bus, None, Some(heap_bytes))
    }

    /// [`SimBoard::spawn_verilated`] with a tensor store of `words` words (the SoC image's
    /// firmware without its CPU): the host runs products as board operations and keeps its
    /// kept tensors (`Device::upload`) in the store.
    pub fn spawn_verilated_with_store(
        config: ArrayConfig,
        words: usize,
    ) -> Result<SimBoard, DeviceError> {
        let sim = systole_sim::VerilatedArray::new(&config)?;
        SimBoard::spawn_with(config, move || sim, None, None, Some(words))
    }

    fn spawn_as<B, F>(
        config: ArrayConfig,
        make_bus: F,
        drop_after: Option<usize>,
        heap_bytes: Option<u32>,
    ) -> Result<SimBoard, DeviceError>
    where
        B: AcceleratorBus,
        B::Error: std::fmt::Debug,
        F: FnOnce() -> B + Send + 'static,
    {
        SimBoard::spawn_with(config, make_bus, drop_after, heap_bytes, None)
    }

    /// A board with the training session when `heap_bytes` is given (and the training
    /// image's store), else with a store of `store_words` when given.
    fn spawn_with<B, F>(
        config: ArrayConfig,
        make_bus: F,
        drop_after: Option<usize>,
        heap_bytes: Option<u32>,
        store_words: Option<usize>,
    ) -> Result<SimBoard, DeviceError>
    where
        B: AcceleratorBus,
        B::Error: std::fmt::Debug,
        F: FnOnce() -> B + Send + 'static,
    {
        let (master, slave, path) = open_pty()?;
        let stop = Arc::new(AtomicBool::new(false));
        let io = PtyIo {
            master,
            stop: stop.clone(),
            budget: drop_after,
        };
        let thread = std::thread::Builder::new()
            .name("systole-board-sim".into())
            .spawn(move || {
                let bus = make_bus();
                let board = FrameServer::new(io, bus, config);
                // One store per board for the life of the process, as the images' static.
                let leak = |words: usize| Box::leak(vec![0i16; words].into_boxed_slice());
                let mut board = match (heap_bytes, store_words) {
                    (Some(heap), _) => {
                        let words = systole_core::soc::TRAINING_TENSOR_STORE_BYTES as usize / 2;
                        board.with_store(leak(words)).with_training(heap, None)
                    }
                    (None, Some(words)) => board.with_store(leak(words)),
                    (None, None) => board,
                };
                match board.serve() {
                    ServerError::Closed => Ok(()),
                    ServerError::Io(e) => Err(SimBoardError::Link(e)),
                    _ => Err(SimBoardError::Server),
                }
                // The master end closes here, as the board's thread ends.
            })
            .map_err(|e| DeviceError::Transport {
                device: "the simulated board's thread".into(),
                source: Box::new(e),
            })?;
        Ok(SimBoard {
            path,
            stop,
            thread: Some(thread),
            _slave: slave,
        })
    }

    /// The bridge image of a CPU-less board (UART, byte bridge and array: what `systole
    /// bitstream` puts on a board) simulated through its serial pins, on a new pty: open it
    /// with `--device bridge:PATH`. The simulation runs while a command is in flight and
    /// sleeps on the pty otherwise.
    pub fn spawn_bridge_image() -> Result<SimBoard, DeviceError> {
        Ok(SimBoard::spawn_bridge_image_at(systole_core::numeric::WORD_BITS, None)?.0)
    }

    /// [`SimBoard::spawn_bridge_image`] with the image's array at `word_bits`-bit words
    /// (Verilated at run time when not 16: `ImagePins::bridge_image_at`), writing the cycles of
    /// `trace` (counted from the image's creation) to its file when given. Returns it with the
    /// image's array.
    pub fn spawn_bridge_image_at(
        word_bits: u32,
        trace: Option<systole_sim::TraceWindow>,
    ) -> Result<(SimBoard, ArrayConfig), DeviceError> {
        // Built on this thread, so a missing model or a trace that cannot be set up fails
        // here with the simulator's own message; it then runs on the board's thread.
        let board = match trace {
            None => ImagePins::bridge_image_at(word_bits)?,
            Some(w) => ImagePins::with_trace_at(word_bits, w)?,
        };
        let config = board.config();
        let board = SimBoard::spawn_pins("systole-bridge-image", None, move || {
            Ok(Pins::Bridge(board))
        })?;
        Ok((board, config))
    }

    /// The SoC image (the VexRiscv CPU running the firmware image of `soc-firmware/`, the
    /// UART and the array with its conv unit) simulated through its serial pins, on a new pty:
    /// open it with `--device serial:PATH`, as a flashed SoC board. Returns it with its
    /// accelerator's configuration.
    pub fn spawn_soc_image() -> Result<(SimBoard, ArrayConfig), DeviceError> {
        SimBoard::spawn_soc_image_at(systole_core::numeric::WORD_BITS, None)
    }

    /// [`SimBoard::spawn_soc_image`] with its array at `word_bits`-bit words (Verilated at run
    /// time when not 16: `VerilatedSoc::new_at`), writing the cycles of `trace` (counted from
    /// the image's creation, the firmware's loading included) to its file when given (16 bits
    /// only).
    pub fn spawn_soc_image_at(
        word_bits: u32,
        trace: Option<systole_sim::TraceWindow>,
    ) -> Result<(SimBoard, ArrayConfig), DeviceError> {
        let soc = match trace {
            None => VerilatedSoc::with_firmware_at(word_bits)?,
            Some(w) => {
                only_16_bits_traced(word_bits)?;
                VerilatedSoc::with_firmware_traced(w)?
            }
        };
        let config = soc.config();
        let board = SimBoard::spawn_pins("systole-soc-image", None, move || Ok(Pins::Soc(soc)))?;
        Ok((board, config))
    }

    /// [`SimBoard::spawn_soc_image`] whose board closes the pty once it has received `bytes`
    /// bytes from the host (those still reach the SoC), as a board unplugged mid-operation.
    pub fn spawn_soc_image_closing_after(
        bytes: usize,
    ) -> Result<(SimBoard, ArrayConfig), DeviceError> {
        let soc = VerilatedSoc::with_firmware()?;
        let config = soc.config();
        let board =
            SimBoard::spawn_pins("systole-soc-image", Some(bytes), move || Ok(Pins::Soc(soc)))?;
        Ok((board, config))
    }

    /// The SoC image with the training firmware (`systole_soc_image::TRAINING`, built now if
    /// its sources changed: the first time takes about a minute) on a new pty: a board that
    /// trains itself. Returns it with its accelerator's configuration.
    /// Its array at `word_bits`-bit words as [`SimBoard::spawn_soc_image_at`].
    pub fn spawn_soc_training_image(
        word_bits: u32,
        trace: Option<systole_sim::TraceWindow>,
    ) -> Result<(SimBoard, ArrayConfig), DeviceError> {
        let image = systole_soc_image::build(&[systole_soc_image::TRAINING]).map_err(|e| {
            DeviceError::Transport {
                device: "the training firmware image".into(),
                source: Box::new(e),
            }
        })?;
        let bytes = image.bytes;
        let soc = match trace {
            None => VerilatedSoc::new_at(&bytes, word_bits)?,
            Some(w) => {
                only_16_bits_traced(word_bits)?;
                VerilatedSoc::with_trace(&bytes, w)?
            }
        };
        let config = soc.config();
        let board = SimBoard::spawn_pins("systole-soc-image", None, move || Ok(Pins::Soc(soc)))?;
        Ok((board, config))
    }

    /// Serves an image simulated through its serial pins on a new pty. The simulation runs
    /// while a command is in flight and sleeps on the pty otherwise.
    fn spawn_pins(
        name: &str,
        close_after: Option<usize>,
        make: impl FnOnce() -> Result<Pins, systole_sim::SimError> + Send + 'static,
    ) -> Result<SimBoard, DeviceError> {
        let (mut master, slave, path) = open_pty()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut board = make().map_err(SimBoardError::Start)?;
                // Short slices of simulated time, so new bytes from the host are taken in
                // between; the image is clocked only while the host may wait for an answer
                // (until `SILENT_SLICES` slices passed without a byte; on the SoC, whose
                // firmware answers every request and may compute for millions of cycles
                // first, also until it answered the bytes it was sent, for at most
                // `BUSY_SLICES` slices).
                const SLICE_BIT_TIMES: u32 = 32;
                const SILENT_SLICES: u32 = 200;
                const BUSY_SLICES: u32 = 1 << 20;
                let answers_every_request = matches!(board, Pins::Soc(_));
                board.set_read_timeout(SLICE_BIT_TIMES);
                let mut buf = [0u8; 256];
                let mut silent = SILENT_SLICES;
                // Slices since the host's last bytes while no answer came (`None`: answered).
                let mut unanswered: Option<u32> = None;
                let mut answers = Decoder::new();
                // Bytes still to take from the host before the link drops (`None`: never).
                let mut budget = close_after;
                while !stopped.load(Ordering::Relaxed) && budget != Some(0) {
                    let busy = unanswered.is_some_and(|n| n < BUSY_SLICES);
                    if busy {
                        silent = 0;
                    }
                    let running = silent < SILENT_SLICES;
                    let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
                    let wait = PollTimeout::from(if running { 0u8 } else { 20u8 });
                    if nix::poll::poll(&mut fds, wait).map_err(SimBoardError::Poll)? > 0 {
                        let want = budget.map_or(buf.len(), |b| b.min(buf.len()));
                        let n = master.read(&mut buf[..want]).map_err(SimBoardError::Link)?;
                        board.write_all(&buf[..n]).map_err(SimBoardError::Link)?;
                        if let Some(b) = &mut budget {
                            *b -= n;
                        }
                        silent = 0;
                        if answers_every_request {
                            unanswered = Some(0);
                        }
                    }
                    if silent < SILENT_SLICES {
                        match board.read(&mut buf) {
                            Ok(n) => {
                                master.write_all(&buf[..n]).map_err(SimBoardError::Link)?;
                                silent = 0;
                                // A progress report is not the answer: the firmware works on.
                                answers.push(&buf[..n]);
                                while let Some(f) = answers.next_frame() {
                                    let working = matches!(f, Ok(f) if f.cmd == WORKING);
                                    unanswered = match (working, answers_every_request) {
                                        (true, true) => Some(0),
                                        _ => None,
                                    };
                                }
                            }
                            // Silence counts only once the line towards the image is idle: a
                            // frame longer than the silent slices' bit times is still arriving.
                            Err(e) if e.kind() == ErrorKind::TimedOut => {
                                unanswered = unanswered.map(|n| n + 1);
                                silent = if board.queued_bit_times() > 0 {
                                    0
                                } else {
                                    silent + 1
                                }
                            }
                            Err(e) => return Err(SimBoardError::Link(e)),
                        }
                    }
                }
                Ok(())
            })
            .map_err(|e| DeviceError::Transport {
                device: "the simulated board's thread".into(),
                source: Box::new(e),
            })?;
        Ok(SimBoard {
            path,
            stop,
            thread: Some(thread),
            _slave: slave,
        })
    }

    /// A simulated board with a Verilated array of `config`.
    pub fn spawn_verilated(config: ArrayConfig) -> Result<SimBoard, DeviceError> {
        SimBoard::spawn_verilated_traced(config, None)
    }

    /// [`SimBoard::spawn_verilated`], writing the cycles of `trace` (when given) to its file.
    pub fn spawn_verilated_traced(
        config: ArrayConfig,
        trace: Option<systole_sim::TraceWindow>,
    ) -> Result<SimBoard, DeviceError> {
        // Built on this thread, so a missing size or a trace that cannot be set up fails here
        // with the simulator's own message.
        let mut sim = systole_sim::VerilatedArray::new(&config)?;
        if let Some(w) = trace {
            sim.open_trace(w)?;
        }
        SimBoard::spawn(config, move || sim, None)
    }

    /// The pty path to open as a serial port.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the board and closes its end of the link; returns the board's own verdict.
    pub fn close(mut self) -> Result<(), SimBoardError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), SimBoardError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| SimBoardError::Panicked)?,
            None => Ok(()),
        }
    }
}

/// A traced SoC image is built at 16-bit words only (its traced model takes minutes to
/// Verilate, one per width was not worth it).
fn only_16_bits_traced(word_bits: u32) -> Result<(), DeviceError> {
    if word_bits == systole_core::numeric::WORD_BITS {
        return Ok(());
    }
    Err(DeviceError::Unsupported(format!(
        "a trace of the SoC image is taken at 16-bit words: trace it without --word-bits {word_bits}, or trace the {word_bits}-bit bridge image or array"
    )))
}

/// An image driven through its serial pins.
enum Pins {
    Bridge(ImagePins),
    Soc(VerilatedSoc),
}

impl Pins {
    fn queued_bit_times(&self) -> usize {
        match self {
            Pins::Bridge(b) => b.queued_bit_times(),
            Pins::Soc(s) => s.queued_bit_times(),
        }
    }

    fn set_read_timeout(&mut self, bit_times: u32) {
        match self {
            Pins::Bridge(b) => b.set_read_timeout(bit_times),
            Pins::Soc(s) => s.set_read_timeout(bit_times),
        }
    }
}

impl Read for Pins {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Pins::Bridge(b) => b.read(buf),
            Pins::Soc(s) => s.read(buf),
        }
    }
}

impl Write for Pins {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Pins::Bridge(b) => b.write(buf),
            Pins::Soc(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Pins::Bridge(b) => b.flush(),
            Pins::Soc(s) => s.flush(),
        }
    }
}

impl Drop for SimBoard {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The board's verdict keeps its cause typed: an image that cannot start is
    /// `SimBoardError::Start` with the simulator's own error as its source.
    #[test]
    fn a_board_that_cannot_start_says_why_typed() {
        let b = SimBoard::spawn_pins("test-board", None, || Err(systole_sim::SimError::NotBuilt))
            .unwrap();
        let e = b.close().unwrap_err();
        assert!(matches!(e, SimBoardError::Start(_)), "{e:?}");
        let source = std::error::Error::source(&e).expect("the simulator's error is the source");
        assert!(
            source.downcast_ref::<systole_sim::SimError>().is_some(),
            "{source:?}"
        );
    }
}
