//! The bridge backend: a board flashed with `systole bitstream`, whose top level is the CPU-less
//! UART byte bridge of `systole_hdl::bridge_top` (protocol table in that module's docs).
//!
//! [`BridgeBus`] is an [`AcceleratorBus`] that turns each register access and row port use into
//! one bridge command. Writes (`W`, `A`, `B`, `F`) end with their CRC and stream back to back:
//! the bridge takes the next command as soon as it starts sending a one-byte echo, and the
//! echoes are checked in order later. A read (`R`, `C`) waits for its whole reply before
//! anything else is sent (the bridge drops bytes that arrive while it sends a longer reply), so
//! only reads cost a round trip on the link. A read's reply ends with the board's CRC-16 over
//! the request and the reply data: on a mismatch the bus drains the line and reads again (reads
//! change nothing on the board), up to [`READ_TRIES`] times, then stops with
//! [`BridgeError::Corrupt`]. The bridge checks each write's CRC before it writes and answers
//! `'!'` to a damaged one, writing nothing; any write whose echo is not exact (refused, lost,
//! damaged on the way back, or the line out of step after a damaged opcode) is sent again with
//! every write after it, in order, once the line is back in step (`confirm.rs`), up to
//! [`WRITE_TRIES`] times. Writes that must not happen twice (`COMMAND`, the gather engines'
//! registers) are sent only once the writes before them are confirmed. After a doubt about a
//! `COMMAND` the bus asks the board whether it ran (its `MAC_CYCLES` once the array is idle)
//! and goes on or sends it again; a doubt it cannot settle, and one about a gather register,
//! stops the run ([`BridgeError::Unconfirmed`]) instead of repeating the write. So a noisy link
//! costs resends or ends the run, and never returns a wrong word. Idles send nothing: the
//! board's clock runs freely and the tile driver polls `STATUS`/`DONE_COUNT`, so wall-clock
//! time is the only idle there is.
//! A board built with the conv unit (`systole bitstream --fm-depth N`) takes feature-map rows
//! with the `'F'` command and [`BridgeDevice`] runs convolutions on it, each map sent once;
//! without it (`CONFIG` says `fm_depth` 0, the default build) convolutions are lowered on the
//! host.

use super::backend::{check_config, check_id, BusDevice, Link, Meter, Traffic};
use super::DeviceError;
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};
use systole_core::bus::Beat;
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

use systole_hdl::bridge_top::{
    OP_READ_C, OP_READ_REG, OP_WRITE_A, OP_WRITE_B, OP_WRITE_FM, OP_WRITE_REG,
};

/// Line rate of the bridge: the one `systole bitstream` builds the board's UART for.
pub use systole_core::bridge::BAUD as DEFAULT_BAUD;

/// How long one command may take from its first byte sent to its last reply byte received.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);

/// Read timeout of an opened port: short, so the deadline is checked often.
const PORT_TIMEOUT: Duration = Duration::from_millis(20);

/// A byte stream to a bridge (a serial port, a simulated board's UART, a test script).
pub trait ReadWrite: Read + Write {}
impl<T: Read + Write + ?Sized> ReadWrite for T {}

/// Why a bridge operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// The stream failed or closed.
    #[error("bridge link lost: {0}")]
    Io(#[from] std::io::Error),
    /// The reply did not arrive in time.
    #[error("no complete reply to '{cmd}' within {waited_ms} ms: check the port, the baud rate and that the board runs a `systole bitstream` build")]
    Timeout {
        /// The command's opcode.
        cmd: char,
        /// The deadline that passed.
        waited_ms: u128,
    },
    /// The reply (or the request) does not fit the protocol.
    #[error("bridge protocol error: {0}")]
    Protocol(String),
    /// Writes were not confirmed on any of [`WRITE_TRIES`] tries.
    #[error("the bridge did not confirm the write '{cmd}' on {tries} tries (last: {what}): the serial link corrupts data (check the cable and the ground, or use a lower baud rate)")]
    WritesDamaged {
        /// The first unconfirmed write's opcode.
        cmd: char,
        /// Tries made.
        tries: u32,
        /// What came instead of its echo the last time.
        what: String,
    },
    /// A write that must not run twice got an answer that does not say whether it ran.
    #[error("the bridge answered {what} to '{cmd}' instead of echoing it; that write (register {reg:#04x}) must not run twice and may have run, so the operation stops: the serial link corrupts data (check the cable and the ground, or use a lower baud rate)")]
    Unconfirmed {
        /// The write's opcode.
        cmd: char,
        /// Its register.
        reg: u8,
        /// What came instead of its echo.
        what: String,
    },
    /// Every try of a read came back failing its CRC.
    #[error("the reply to '{cmd}' failed its CRC check {tries} times in a row: the serial link corrupts data (check the cable and the ground, or use a lower baud rate)")]
    Corrupt {
        /// The command's opcode.
        cmd: char,
        /// Tries made.
        tries: u32,
    },
    /// A feature-map write that is not whole rows at a row boundary.
    #[error("feature-map write of {words} words at word {addr}: the bridge moves whole rows of {row} words at multiples of {row}")]
    FeatureMapRows {
        /// First word address.
        addr: u32,
        /// Words given.
        words: usize,
        /// Words per feature-map row.
        row: usize,
    },
}

/// Byte and command counters of a [`BridgeBus`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeCounters {
    /// Bytes written to the stream.
    pub bytes_out: u64,
    /// Bytes read from the stream.
    pub bytes_in: u64,
    /// Commands that got their full reply.
    pub commands: u64,
    /// Commands sent again: reads whose reply failed the CRC check, writes whose echo was not
    /// exact (each write sent again counts).
    pub retries: u64,
    /// Times the bus waited for the bridge: each try of a read, each wait for the echoes of
    /// the writes in flight.
    pub round_trips: u64,
}

/// Tries of one read whose replies fail the CRC check before the bus gives up.
pub const READ_TRIES: u32 = 4;

/// Tries of writes whose echoes are not exact before the bus gives up.
pub const WRITE_TRIES: u32 = 4;

/// [`AcceleratorBus`] over a byte stream to the UART bridge of an array of `n` lanes.
pub struct BridgeBus<T> {
    stream: T,
    n: usize,
    deadline: Duration,
    counters: BridgeCounters,
    /// A command failed midway: late reply bytes may still come and must not be taken for
    /// the next command's reply.
    stale: bool,
    /// The writes sent whose echoes are not read yet, in order.
    unacked: Vec<confirm::Unconfirmed>,
    /// The array's command count as far as known, to learn whether a `COMMAND` ran.
    track: confirm::Commands,
}

/// Writes sent before their echoes are read (a few hundred bytes in flight on the line).
pub const MAX_UNACKED: usize = 32;

impl<T: Read + Write> BridgeBus<T> {
    /// A bus to a bridge with `n` lanes. Reads of `stream` may return partial data or time out
    /// (`TimedOut`, `WouldBlock`, `Interrupted`); the bus retries until [`DEFAULT_DEADLINE`].
    pub fn new(stream: T, n: usize) -> Self {
        BridgeBus {
            stream,
            n,
            deadline: DEFAULT_DEADLINE,
            counters: BridgeCounters::default(),
            stale: false,
            unacked: Vec::new(),
            track: confirm::Commands::default(),
        }
    }

    /// Sets how long one command may take until its reply is complete.
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.deadline = deadline;
    }

    /// Counters so far.
    pub fn counters(&self) -> BridgeCounters {
        self.counters
    }

    /// Sends `request` (a register or C-row read) and fills `reply` with exactly
    /// `reply.len()` bytes whose CRC matches. The echoes of the writes sent before it come
    /// first on the line; they are read and checked here too.
    fn command(&mut self, request: &[u8], reply: &mut [u8]) -> Result<(), BridgeError> {
        let r = self.round(Some(request), reply);
        self.settled(r)
    }

    /// Reads and checks the echoes of every write sent so far (sending again those not
    /// confirmed). Call it before relying on the writes having happened (a run's end).
    pub fn settle(&mut self) -> Result<(), BridgeError> {
        if self.unacked.is_empty() {
            return Ok(());
        }
        let r = self.round(None, &mut []);
        self.settled(r)
    }

    /// After a failure, late reply bytes may still come and the writes in flight are unknown.
    fn settled<R>(&mut self, r: Result<R, BridgeError>) -> Result<R, BridgeError> {
        if r.is_err() {
            self.stale = true;
            self.unacked.clear();
            self.track.forget();
        }
        r
    }

    /// Writes all of `request` before `end`.
    fn send(&mut self, request: &[u8], end: Instant) -> Result<(), BridgeError> {
        let mut sent = 0;
        while sent < request.len() {
            match self.stream.write(&request[sent..]) {
                Ok(0) => return Err(closed("write")),
                Ok(k) => {
                    sent += k;
                    self.counters.bytes_out += k as u64;
                }
                Err(e) if transient(&e) => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
            }
            if sent < request.len() && Instant::now() >= end {
                return Err(self.timeout(char::from(request[0])));
            }
        }
        self.stream.flush()?;
        Ok(())
    }

    /// Reads into `reply` until it is full or `end` passes; the bytes read.
    fn receive(&mut self, reply: &mut [u8], end: Instant) -> Result<usize, BridgeError> {
        let mut got = 0;
        while got < reply.len() {
            match self.stream.read(&mut reply[got..]) {
                Ok(0) => return Err(closed("read")),
                Ok(k) => {
                    got += k;
                    self.counters.bytes_in += k as u64;
                }
                Err(e) if transient(&e) => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
            }
            if got < reply.len() && Instant::now() >= end {
                break;
            }
        }
        Ok(got)
    }

    fn timeout(&self, cmd: char) -> BridgeError {
        BridgeError::Timeout {
            cmd,
            waited_ms: self.deadline.as_millis(),
        }
    }

    /// Reads and drops bytes until the stream is quiet (a read times out or returns nothing):
    /// the rest of a reply that came too late.
    fn drain(&mut self) -> Result<(), BridgeError> {
        let mut buf = [0u8; 256];
        let end = Instant::now() + self.deadline;
        while Instant::now() < end {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => self.counters.bytes_in += k as u64,
                Err(e) if transient(&e) => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.stale = false;
        Ok(())
    }

    /// Sends a write command (acknowledged by an echo of its opcode) with its CRC, without
    /// waiting for the echo: the bridge is ready for the next command as soon as it starts
    /// sending the echo, so writes stream at the line rate. The echoes are checked in order by
    /// the next read command or [`Self::settle`], at the latest after [`MAX_UNACKED`] writes. A
    /// write that must not run twice waits until every write before it is confirmed.
    fn acked(&mut self, request: &[u8]) -> Result<(), BridgeError> {
        let write = confirm::Unconfirmed::new(request);
        if !write.replayable() {
            self.settle()?;
        }
        let r = self.stream_write(write);
        self.settled(r)?;
        if self.unacked.len() >= MAX_UNACKED {
            self.settle()?;
        }
        Ok(())
    }

    fn stream_write(&mut self, write: confirm::Unconfirmed) -> Result<(), BridgeError> {
        if self.stale {
            self.resync()?;
        }
        self.send(write.bytes(), Instant::now() + self.deadline)?;
        self.track.sent(&write);
        self.unacked.push(write);
        Ok(())
    }

    fn write_row(&mut self, op: u8, bank: u8, row: u16, data: &[i16]) -> Result<(), BridgeError> {
        if data.len() != self.n {
            return Err(BridgeError::Protocol(format!(
                "a row of {} words for a {}-lane bridge: rows must have exactly one word per lane",
                data.len(),
                self.n
            )));
        }
        let mut req = Vec::with_capacity(4 + 2 * self.n);
        req.push(op);
        req.push(bank);
        req.extend(row.to_be_bytes());
        req.extend(data.iter().flat_map(|w| w.to_be_bytes()));
        self.acked(&req)
    }

    fn read_c(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), BridgeError> {
        if out.len() != self.n {
            return Err(BridgeError::Protocol(format!(
                "a C row buffer of {} words for a {}-lane bridge: it must hold one word per lane",
                out.len(),
                self.n
            )));
        }
        let [hi, lo] = row.to_be_bytes();
        let mut reply = vec![0u8; 2 * self.n];
        self.command(&[OP_READ_C, bank, hi, lo], &mut reply)?;
        for (w, b) in out.iter_mut().zip(reply.chunks_exact(2)) {
            *w = i16::from_be_bytes([b[0], b[1]]);
        }
        Ok(())
    }
}

/// Read and write errors that only mean "nothing yet": the caller retries until its deadline.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::TimedOut | ErrorKind::WouldBlock | ErrorKind::Interrupted
    )
}

fn closed(what: &str) -> BridgeError {
    BridgeError::Io(std::io::Error::new(
        ErrorKind::UnexpectedEof,
        format!("the stream closed on {what}"),
    ))
}

/// A reply byte for a message: printable ASCII quoted, anything else in hex.
fn show(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", char::from(b))
    } else {
        format!("{b:#04x}")
    }
}

impl<T: Read + Write> AcceleratorBus for BridgeBus<T> {
    type Error = BridgeError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, BridgeError> {
        let mut data = [0u8; 4];
        self.command(&[OP_READ_REG, addr], &mut data)?;
        let value = u32::from_be_bytes(data);
        self.track.read(addr, value);
        Ok(value)
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), BridgeError> {
        let [d3, d2, d1, d0] = value.to_be_bytes();
        self.acked(&[OP_WRITE_REG, addr, d3, d2, d1, d0])
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), BridgeError> {
        if let Some(a) = beat.a {
            self.write_row(OP_WRITE_A, a.bank, a.row, a.data)?;
        }
        if let Some(b) = beat.b {
            self.write_row(OP_WRITE_B, b.bank, b.row, b.data)?;
        }
        if let Some(c) = beat.c {
            self.read_c(c.bank, c.row, c_out)?;
        }
        Ok(())
    }

    fn idle(&mut self, _cycles: u32) -> Result<(), BridgeError> {
        // The board's clock runs on its own; the driver's waits are STATUS polls.
        Ok(())
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), BridgeError> {
        // A feature-map row is the largest power of two of words not above the lane count.
        let row = 1usize << (usize::BITS - 1 - self.n.leading_zeros());
        let first = addr as usize / row;
        let whole_rows = (addr as usize).is_multiple_of(row) && words.len().is_multiple_of(row);
        if !whole_rows || first + words.len() / row > 1 << 16 {
            return Err(BridgeError::FeatureMapRows {
                addr,
                words: words.len(),
                row,
            });
        }
        let mut req = Vec::with_capacity(3 + 2 * row);
        for (i, chunk) in words.chunks_exact(row).enumerate() {
            req.clear();
            req.push(OP_WRITE_FM);
            req.extend(((first + i) as u16).to_be_bytes());
            req.extend(chunk.iter().flat_map(|w| w.to_be_bytes()));
            self.acked(&req)?;
        }
        Ok(())
    }
}

/// Splits the part of a `bridge:PATH[@BAUD]` device spec after `bridge:` into the path and the
/// baud rate ([`DEFAULT_BAUD`] when absent). `None` for an empty path or, after the last `@`,
/// anything but a baud rate from 1 to `u32::MAX` (so a mistyped rate is never taken for a path).
pub fn parse_spec(rest: &str) -> Option<(&str, u32)> {
    let (path, baud) = match rest.rsplit_once('@') {
        Some((p, b)) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => {
            (p, b.parse::<u32>().ok().filter(|&b| b > 0)?)
        }
        Some(_) => return None,
        None => (rest, DEFAULT_BAUD),
    };
    (!path.is_empty()).then_some((path, baud))
}

/// A board running the UART bridge as a [`Device`](crate::Device).
pub type BridgeDevice = BusDevice<BridgeBus<Box<dyn ReadWrite + Send>>>;

impl<T: Read + Write> Link for BridgeBus<T> {
    const KIND: &'static str = "bridge";

    fn settle(&mut self) -> Result<(), BridgeError> {
        BridgeBus::settle(self)
    }

    fn meter(&mut self) -> Option<&mut dyn Meter<BridgeError>> {
        Some(self)
    }
}

/// A bridge command is one bus transaction (a register access or a row). The bridge has no
/// CPU to count firmware cycles.
impl<T: Read + Write> Meter<BridgeError> for BridgeBus<T> {
    fn traffic(&self) -> Traffic {
        let c = &self.counters;
        Traffic {
            bytes_out: c.bytes_out,
            bytes_in: c.bytes_in,
            frames: c.commands,
            round_trips: c.round_trips,
            resends: c.retries,
        }
    }
}

impl BridgeDevice {
    /// Opens the serial port `path` at `baud`, and checks the board is a systole bridge build
    /// of `config`'s array (size and buffer depth); the conv unit's feature-map size is the
    /// board's own (`systole bitstream --fm-depth`), whatever `config.fm_depth` says.
    pub fn open(path: &str, baud: u32, config: ArrayConfig) -> Result<Self, DeviceError> {
        let port = serialport::new(path, baud)
            .timeout(PORT_TIMEOUT)
            .open()
            .map_err(|source| DeviceError::Open {
                path: path.to_string(),
                source,
            })?;
        Self::over(Box::new(port), path, config)
    }

    /// A device over any byte stream to a bridge (a simulated board, a test script); `name`
    /// appears in messages. Checks the board like [`Self::open`].
    pub fn over(
        stream: Box<dyn ReadWrite + Send>,
        name: &str,
        config: ArrayConfig,
    ) -> Result<Self, DeviceError> {
        config.validate()?;
        let mut bus = BridgeBus::new(stream, config.size);
        let link = |e: BridgeError| DeviceError::Transport {
            device: name.to_string(),
            source: Box::new(e),
        };
        check_id(name, bus.read_reg(regmap::ID).map_err(link)?)?;
        let word = bus.read_reg(regmap::CONFIG).map_err(link)?;
        // The feature map is sized when the board is built (most leave the unit out), so only
        // the array has to match; the devices' shared default of 32k words must not fail it.
        let config = ArrayConfig {
            fm_depth: ArrayConfig::from_config_word(word).fm_depth,
            ..config
        };
        check_config(name, word, &config)?;
        Ok(BusDevice::with_bus(config, bus, Some(name.to_string())))
    }

    /// Sets how long one bridge command may take until its reply is complete.
    pub fn set_deadline(&mut self, deadline: Duration) {
        self.bus.set_deadline(deadline);
    }

    /// Link counters (bytes and commands actually moved).
    pub fn link_counters(&self) -> BridgeCounters {
        self.bus.counters()
    }
}

mod confirm;
#[cfg(test)]
mod faults;
#[cfg(test)]
mod tests;
