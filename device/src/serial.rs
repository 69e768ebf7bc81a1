//! The serial backend: a board (real, or the simulated one in [`crate::board_sim`]) behind a
//! serial port, speaking the protocol of `systole_firmware::protocol`.
//!
//! The host runs the same tile driver as every other backend over [`SerialBus`], an
//! [`AcceleratorBus`] that turns bus traffic into frames. Writes are buffered and sent many per
//! frame (`BATCH` of block row writes, register writes, feature-map writes and idles); a frame
//! goes out only when the driver needs an answer (a register read or a C row) or the batch is
//! full. A and B row writes are collected in two runs and may be reordered with each other
//! (different memories), never across a register write, a feature-map write, an idle or a read.
//! A long feature-map write is split into as many `WRITE_FM` entries as the frame limit needs. A C read fetches the rest of the tile's
//! rows at once; the cache is dropped at every `COMMAND` write, before any new tile can be
//! converted into a C bank.
//!
//! A frame is resent with the same sequence number as soon as it is known lost (the board's CRC
//! error, a damaged answer, a request a long operation never acknowledged) or after its wait
//! ([`exchange`]: derived from its bytes' time on the line and the board's measured pace, with
//! progress reports during long training requests); the board answers a resent frame from its
//! stored response without running it twice. When the port fails or closes, no answer comes
//! after all retries, the board answers every try as damaged in transit
//! ([`LinkError::Damaged`]), its answers arrive damaged ([`LinkError::AnswersDamaged`]) or it
//! stops reporting progress ([`LinkError::Stalled`]), the operation fails with
//! [`DeviceError::Transport`], whose source chain holds the [`LinkError`], and returns no
//! result.

use super::backend::{check_config, check_id, BusDevice};
use super::DeviceError;
use std::io::{Read, Write};
use std::time::Duration;
use systole_core::ArrayConfig;
use systole_firmware::frame::{Decoder, MAX_PAYLOAD};
use systole_firmware::protocol::board_ops::{CAP_BOARD_OPS, PING_REPLY, PING_REPLY_WITH_CAPS};
use systole_firmware::protocol::stack::{StackUse, STACK_USE, STEP_PROFILE};
use systole_firmware::protocol::train::{
    CAP_EVALUATE, CAP_HEAP_USE, CAP_PACKED_DATA, CAP_PROGRESS, CAP_SATURATION, CAP_STATE_PARTS,
    CAP_TRAIN, PING_REPLY_WITH_TRAIN,
};
use systole_firmware::protocol::{
    cmd, Buffer, Request, Words, BATCH_ENTRY_HEADER, COUNTERS_REPLY, WRITE_FM_HEADER,
    WRITE_ROWS_HEADER,
};
use systole_step::profile::{self, SectionCycles, SECTIONS};

/// Line rate used to open a port (the simulated board ignores it).
pub const DEFAULT_BAUD: u32 = 3_000_000;
/// How long to wait for a response before resending.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// Resends of one frame before giving up.
pub const DEFAULT_RETRIES: u32 = 3;

pub(crate) mod board_ops;
mod bus;
pub mod exchange;
mod kept;
mod probes;
mod train;
pub use crate::board_train::TrainLink;
pub(crate) mod link_error;
pub use link_error::{LinkError, PortError};

/// Byte and frame counters of a [`SerialBus`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Bytes written to the port (frames, resends included).
    pub bytes_out: u64,
    /// Bytes read from the port.
    pub bytes_in: u64,
    /// Request frames exchanged (each counted once).
    pub frames: u64,
    /// Frames resent.
    pub resends: u64,
}

/// What the board said in answer to `PING`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoardInfo {
    /// The `ID` register.
    pub id: u32,
    /// The `CONFIG` register.
    pub config_word: u32,
    /// Protocol version.
    pub version: u8,
    /// The board's maximum payload.
    pub max_payload: u16,
    /// Words of the board's tensor store, when it runs products and convolutions itself
    /// (`protocol::board_ops`); `None` on a board that is driven register by register.
    pub store_words: Option<u32>,
    /// Bytes of the board's heap, when it trains on resident state and data itself
    /// (`protocol::train`); `None` on a board that does not.
    pub heap_bytes: Option<u32>,
    /// The capability byte's training bits (`protocol::train::CAP_PACKED_DATA`,
    /// `CAP_HEAP_USE`, `CAP_STATE_PARTS`, `CAP_EVALUATE`, `CAP_PROGRESS`, `CAP_SATURATION`), 0 on a board that
    /// does not train.
    pub train_caps: u8,
}

/// A run of consecutive rows for one buffer and bank, not yet put into the batch.
struct Run {
    bank: u8,
    start: u16,
    count: u16,
    bytes: Vec<u8>,
}

/// [`AcceleratorBus`] over a byte stream to a board. `T` must time out its reads (a
/// `serialport` port does) so a lost frame is noticed.
pub struct SerialBus<T> {
    port: T,
    size: usize,
    seq: u8,
    timeout: Duration,
    retries: u32,
    batch: Vec<u8>,
    runs: [Option<Run>; 2],
    c_cache: Option<(u8, u16, Vec<i16>)>,
    decoder: Box<Decoder>,
    counters: LinkCounters,
    /// No answer came since the port was opened or the board reported a panic: a start
    /// announcement now (a board just powered up or restarting) is skipped, not taken for a
    /// lost operation.
    start_expected: bool,
    /// Whether the board answers `COUNTERS` (`None`: not asked yet).
    board_counts: Option<bool>,
    /// The board's tensor store as the host knows it, when the board runs operations itself
    /// and the host uses them ([`SerialBus::use_board_ops`]).
    board: Option<board_ops::BoardStore>,
    /// The board's heap, when it trains itself ([`TrainLink`]).
    heap_bytes: Option<u32>,
    /// [`BoardInfo::train_caps`].
    train_caps: u8,
    /// The line rate, for the time a frame takes on the line.
    baud: u32,
    /// How fast the board has been at its long requests so far.
    pace: exchange::Pace,
}

impl<T: Read + Write> SerialBus<T> {
    /// A bus to a board with an array of `size` lanes.
    pub fn new(port: T, size: usize) -> Self {
        SerialBus {
            port,
            size,
            seq: 0,
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            batch: Vec::with_capacity(MAX_PAYLOAD),
            runs: [None, None],
            c_cache: None,
            decoder: Box::new(Decoder::new()),
            counters: LinkCounters::default(),
            start_expected: true,
            board_counts: None,
            board: None,
            heap_bytes: None,
            train_caps: 0,
            baud: DEFAULT_BAUD,
            pace: exchange::Pace::default(),
        }
    }

    /// Runs each product and convolution as one request on the board's own drivers, with
    /// operands in its tensor store of `store_words` words (from [`BoardInfo::store_words`]).
    pub fn use_board_ops(&mut self, store_words: u32) {
        self.board = Some(board_ops::BoardStore::new(store_words as usize));
    }

    /// Sets the per-try timeout and the number of resends. The timeout is a frame's round trip
    /// beyond its bytes' time on the line; long requests wait longer (see [`exchange`]).
    pub fn set_retry_policy(&mut self, timeout: Duration, retries: u32) {
        self.timeout = timeout;
        self.retries = retries;
    }

    /// Sets the line rate the bytes' time on the line is computed from.
    pub fn set_baud(&mut self, baud: u32) {
        self.baud = baud.max(1);
    }

    /// Counters so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Sends every buffered write and waits for the board to confirm them.
    pub fn flush(&mut self) -> Result<(), LinkError> {
        self.close_runs()?;
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            let r = self.transact(cmd::BATCH, &batch);
            self.batch = batch;
            self.batch.clear();
            r?;
        }
        Ok(())
    }

    /// Drops everything buffered (after a failure the driver's state is gone anyway).
    pub(crate) fn discard(&mut self) {
        self.batch.clear();
        self.runs = [None, None];
        self.c_cache = None;
    }

    pub(crate) fn push_entry(&mut self, req: &Request<'_>) -> Result<(), LinkError> {
        let mut buf = [0u8; MAX_PAYLOAD];
        let n = req
            .encode_batch_entry(&mut buf)
            .map_err(LinkError::Encode)?;
        if self.batch.len() + n > MAX_PAYLOAD {
            let batch = std::mem::take(&mut self.batch);
            let r = self.transact(cmd::BATCH, &batch);
            self.batch = batch;
            self.batch.clear();
            r?;
        }
        self.batch.extend_from_slice(&buf[..n]);
        Ok(())
    }

    fn close_runs(&mut self) -> Result<(), LinkError> {
        self.close_run(0)?;
        self.close_run(1)
    }

    /// Queues the open run of rows for buffer `which` (0: A, 1: B) as one `WRITE_ROWS` entry.
    fn close_run(&mut self, which: usize) -> Result<(), LinkError> {
        if let Some(run) = self.runs[which].take() {
            self.push_entry(&Request::WriteRows {
                buffer: if which == 0 { Buffer::A } else { Buffer::B },
                bank: run.bank,
                start: run.start,
                count: run.count,
                words: Words::from_le_bytes(&run.bytes),
            })?;
        }
        Ok(())
    }

    fn add_row(&mut self, which: usize, bank: u8, row: u16, data: &[i16]) -> Result<(), LinkError> {
        let limit = MAX_PAYLOAD - BATCH_ENTRY_HEADER - WRITE_ROWS_HEADER;
        let fits = matches!(&self.runs[which], Some(r) if r.bank == bank
            && u32::from(r.start) + u32::from(r.count) == u32::from(row)
            && r.bytes.len() + 2 * data.len() <= limit);
        if !fits {
            self.close_run(which)?;
            self.runs[which] = Some(Run {
                bank,
                start: row,
                count: 0,
                bytes: Vec::with_capacity(limit),
            });
        }
        if let Some(run) = &mut self.runs[which] {
            run.count += 1;
            run.bytes.extend(data.iter().flat_map(|w| w.to_le_bytes()));
        }
        Ok(())
    }

    /// Queues `words` for feature-map addresses `addr..`, after every write queued before.
    fn add_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), LinkError> {
        if u64::from(addr) + words.len() as u64 > u64::from(u32::MAX) + 1 {
            return Err(LinkError::Protocol(format!(
                "feature-map write of {} words at {addr:#x} passes the 32-bit address space",
                words.len()
            )));
        }
        // Pending row runs were issued first by the driver: queue them ahead of these words.
        self.close_runs()?;
        let overhead = BATCH_ENTRY_HEADER + WRITE_FM_HEADER;
        // Entries carry whole feature-map rows (the largest power of two <= size words): the
        // board writes one row per clock and refuses partial rows.
        let row = 1usize << (usize::BITS - 1 - self.size.leading_zeros());
        let most = (MAX_PAYLOAD - overhead) / 2 / row * row;
        let mut done = 0;
        while done < words.len() {
            // Fill what is left of the current batch; if not even one row fits, `push_entry`
            // sends the batch and the entry starts an empty one.
            let room = MAX_PAYLOAD.saturating_sub(self.batch.len() + overhead) / 2 / row * row;
            let take = (words.len() - done).min(if room == 0 { most } else { room });
            let bytes: Vec<u8> = words[done..done + take]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            self.push_entry(&Request::WriteFm {
                addr: addr + done as u32,
                words: Words::from_le_bytes(&bytes),
            })?;
            done += take;
        }
        Ok(())
    }

    fn read_c(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), LinkError> {
        let n = self.size;
        if let Some((b, start, words)) = &self.c_cache {
            if *b == bank && row >= *start && usize::from(row - start) * n < words.len() {
                let at = usize::from(row - start) * n;
                out.copy_from_slice(&words[at..at + n]);
                return Ok(());
            }
        }
        self.flush()?;
        let count = (n - usize::from(row).min(n))
            .max(1)
            .min(MAX_PAYLOAD / (2 * n)) as u16;
        let mut p = [0u8; 5];
        p[0] = bank;
        p[1..3].copy_from_slice(&row.to_le_bytes());
        p[3..5].copy_from_slice(&count.to_le_bytes());
        let bytes = self.transact(cmd::READ_ROWS, &p)?;
        if bytes.len() != 2 * n * usize::from(count) {
            return Err(LinkError::Protocol(format!(
                "READ_ROWS answered {} bytes for {count} rows of {n} words",
                bytes.len()
            )));
        }
        let words: Vec<i16> = bytes
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        out.copy_from_slice(&words[..n]);
        self.c_cache = Some((bank, row, words));
        Ok(())
    }

    /// The board restarted, so its tensor store is empty: the host's record of it (which
    /// tensors are resident) must not name a tensor to it again, whichever exchange saw the
    /// restart (also one outside a board operation, on the register path).
    fn forget_board_store(&mut self) {
        if let Some(b) = self.board.as_mut() {
            b.forget();
        }
    }

    fn guard<R>(&mut self, r: Result<R, LinkError>) -> Result<R, LinkError> {
        if r.is_err() {
            self.discard();
        }
        r
    }
}

/// A board behind a serial port as a [`Device`](crate::Device).
pub type SerialDevice = BusDevice<SerialBus<Box<dyn serialport::SerialPort>>>;

impl SerialDevice {
    /// Opens `path` (e.g. `/dev/ttyUSB0`, or a simulated board's pty), pings the board and
    /// checks it implements `config`.
    pub fn open(path: &str, config: ArrayConfig) -> Result<Self, DeviceError> {
        config.validate()?;
        let port = serialport::new(path, DEFAULT_BAUD)
            .timeout(Duration::from_millis(20))
            .open()
            .map_err(|source| DeviceError::Open {
                path: path.to_string(),
                source,
            })?;
        BusDevice::on_port(port, config, path)
    }
}

impl<T: Read + Write> BusDevice<SerialBus<T>> {
    /// The board behind the byte stream `port` (a serial port; in tests also a simulated
    /// board's pins with faults put in its way), called `at` in messages: pings the board and
    /// checks it implements `config`. `port`'s reads must time out (see [`SerialBus`]).
    pub fn on_port(port: T, config: ArrayConfig, at: &str) -> Result<Self, DeviceError> {
        config.validate()?;
        let mut bus = SerialBus::new(port, config.size);
        let info = bus.ping().map_err(|e| DeviceError::Transport {
            device: at.to_string(),
            source: Box::new(e),
        })?;
        check_id(at, info.id)?;
        // The host's options cannot name a board's conv unit: a board that is the array asked
        // for but with another feature-map depth (the SoC's 4096 words) is taken as it is.
        let with_boards_unit = ArrayConfig {
            fm_depth: ArrayConfig::from_config_word(info.config_word).fm_depth,
            ..config
        };
        let config = if with_boards_unit.config_word() == info.config_word {
            with_boards_unit
        } else {
            config
        };
        check_config(at, info.config_word, &config)?;
        // Every frame this host sends may be as long as its own limit: a board that takes
        // less would lose the end of the longer ones.
        if usize::from(info.max_payload) < MAX_PAYLOAD {
            return Err(DeviceError::Unsupported(format!(
                "the board at {at} takes frames of at most {} payload bytes, this host sends up to {MAX_PAYLOAD}: update the board's firmware",
                info.max_payload
            )));
        }
        if let Some(words) = info.store_words {
            bus.use_board_ops(words);
        }
        bus.heap_bytes = info.heap_bytes;
        bus.train_caps = info.train_caps;
        Ok(BusDevice::with_bus(config, bus, Some(at.to_string())))
    }

    /// Sets the per-frame timeout and resend count.
    pub fn set_retry_policy(&mut self, timeout: Duration, retries: u32) {
        self.bus.set_retry_policy(timeout, retries);
    }

    /// Link counters (bytes and frames actually moved).
    pub fn link_counters(&self) -> LinkCounters {
        self.bus.counters()
    }

    /// The board's stack use so far ([`SerialBus::stack_use`]).
    pub fn stack_use(&mut self) -> Result<StackUse, LinkError> {
        self.bus.stack_use()
    }

    /// The board's step profile so far ([`SerialBus::step_profile`]).
    pub fn step_profile(&mut self) -> Result<[SectionCycles; SECTIONS], LinkError> {
        self.bus.step_profile()
    }
}

#[cfg(test)]
mod tests;
