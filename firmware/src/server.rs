//! [`FrameServer`]: the firmware's main loop. It reads request frames from a byte stream, runs them on
//! the board's local [`AcceleratorBus`] (MMIO registers on a real board, the Verilated array on
//! the simulated one) and writes one response frame per request.

use crate::frame::{self, Decoder, Frame, FrameError, FRAME_CAPACITY, HEADER, MAX_PAYLOAD};
use crate::protocol::stack::{StackUse, STACK_USE, STACK_USE_REPLY, STEP_PROFILE};
use crate::protocol::train::WORKING;
use crate::protocol::{BatchIter, Buffer, ErrorCode, RemoteError, Request, MAX_LANES, RESPONSE};
use crate::protocol::{COUNTERS_REPLY, ERROR, VERSION};
use embedded_io::{Read, Write};
use systole_core::numeric::{word_max, word_min, WORD_BITS};
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

/// Counters of the link, reported by the `STATUS` command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Requests executed.
    pub frames_ok: u32,
    /// Requests answered with an error frame (damaged or refused).
    pub frames_rejected: u32,
    /// Retries answered from the stored response.
    pub replays: u32,
    /// Bytes skipped while searching for a frame start.
    pub garbage_bytes: u32,
    /// Clock cycles spent from each request's last byte received to its response ready (the
    /// frame's CRC check, the execution, the response's encoding), summed over every request
    /// but `COUNTERS`; `None` on a board
    /// without a cycle counter ([`FrameServer::with_clock`]). Reported by `COUNTERS`.
    pub busy_cycles: Option<u64>,
}

/// Why [`FrameServer::serve`] or [`FrameServer::step`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerError<E> {
    /// The byte stream reported an error.
    Io(E),
    /// The byte stream ended (read returned 0 bytes): the link is gone.
    Closed,
}

impl<E: core::fmt::Display> core::fmt::Display for ServerError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ServerError::Io(e) => write!(f, "byte stream error: {e}"),
            ServerError::Closed => f.write_str("the byte stream ended"),
        }
    }
}

/// The last request executed and the response it got, for idempotent retries.
struct Last {
    seq: u8,
    crc: u16,
}

/// The board: a byte stream, an accelerator, and the protocol state between them.
pub struct FrameServer<IO, B> {
    io: IO,
    bus: B,
    config: ArrayConfig,
    decoder: Decoder,
    /// The response last sent (kept whole so a retry is answered byte for byte).
    tx: [u8; FRAME_CAPACITY],
    tx_len: usize,
    last: Option<Last>,
    stats: LinkStats,
    /// The board's free-running cycle counter, if it has one.
    clock: Option<fn() -> u64>,
    /// The tensor store of the board operations, if the board has one.
    store: board_ops::Store,
    /// The training session, if the board trains (feature `step`).
    train: TrainSlot,
    /// Measures the stack's high-water mark (`STACK_USE`), if the board paints its stack.
    stack_use: Option<fn() -> StackUse>,
    /// Writes the step's cycle profile (`STEP_PROFILE`), if the board keeps one.
    step_profile: Option<Probe>,
}

/// The training session's place in the server: a session with feature `step`, nothing without.
#[cfg(any(feature = "step", test))]
type TrainSlot = Option<train::Session>;
#[cfg(not(any(feature = "step", test)))]
type TrainSlot = ();

impl<IO: Read + Write, B: AcceleratorBus> FrameServer<IO, B> {
    /// A board serving `io` with the accelerator `bus` described by `config`
    /// (`config.size <= MAX_LANES`; larger arrays are refused with `Malformed` row lengths).
    pub fn new(io: IO, bus: B, config: ArrayConfig) -> Self {
        FrameServer {
            io,
            bus,
            config,
            decoder: Decoder::new(),
            tx: [0; FRAME_CAPACITY],
            tx_len: 0,
            last: None,
            stats: LinkStats::default(),
            clock: None,
            store: None,
            train: Default::default(),
            stack_use: None,
            step_profile: None,
        }
    }

    /// Lets the board train on resident state and data (`STATE_WRITE` .. `RUN_STEPS`) on its
    /// heap of `heap_bytes` bytes (`heap_free` tells the free bytes when a request is refused
    /// for want of room), and says so in its `PING` answer (which needs the tensor store too:
    /// [`FrameServer::with_store`]).
    #[cfg(any(feature = "step", test))]
    pub fn with_training(mut self, heap_bytes: u32, heap_free: Option<fn() -> usize>) -> Self {
        self.train = Some(train::Session::new(heap_bytes, heap_free));
        self
    }

    /// Lets a training board answer `HEAP_USE` with `probe`: `(bytes in use, their peak since
    /// the last call)` (the training image's allocator, `mmio::heap::Heap::take_peak`).
    #[cfg(any(feature = "step", test))]
    pub fn with_heap_peak(mut self, probe: fn() -> (usize, usize)) -> Self {
        self.train = self.train.take().map(|s| s.with_heap_peak(probe));
        self
    }

    /// The training session, if the board trains.
    #[cfg(any(feature = "step", test))]
    pub fn training(&self) -> Option<&train::Session> {
        self.train.as_ref()
    }

    /// Gives the board a tensor store over `words` (on the SoC a static array), so it runs
    /// `MATMUL` and `CONV` on tensors the host uploaded, and says so in its `PING` answer.
    pub fn with_store(mut self, words: &'static mut [i16]) -> Self {
        self.store = Some(crate::store::TensorStore::new(words));
        self
    }

    /// The tensor store, if the board has one.
    pub fn store(&self) -> Option<&crate::store::TensorStore<'static>> {
        self.store.as_ref()
    }

    /// Counts the cycles each request costs with `clock`, the board's free-running cycle
    /// counter (on the SoC its timer), into [`LinkStats::busy_cycles`].
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = Some(clock);
        self.stats.busy_cycles = Some(0);
        self
    }

    /// Answers `STACK_USE` with `probe`, which measures the firmware's stack
    /// ([`crate::protocol::stack`]).
    pub fn with_stack_use(mut self, probe: fn() -> StackUse) -> Self {
        self.stack_use = Some(probe);
        self
    }

    /// Answers `STEP_PROFILE` with `probe` (`systole_step::profile::encode` on the training
    /// image).
    pub fn with_step_profile(mut self, probe: Probe) -> Self {
        self.step_profile = Some(probe);
        self
    }

    /// Link counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// The accelerator.
    pub fn bus(&mut self) -> &mut B {
        &mut self.bus
    }

    /// Gives back the stream and the accelerator.
    pub fn into_parts(self) -> (IO, B) {
        (self.io, self.bus)
    }

    /// Sends the start announcement ([`crate::protocol::boot`]): call once when the firmware
    /// starts, before serving.
    pub fn announce_start(&mut self) -> Result<(), ServerError<IO::Error>> {
        self.io
            .write_all(&crate::protocol::boot::boot_frame())
            .map_err(ServerError::Io)?;
        self.io.flush().map_err(ServerError::Io)
    }

    /// After the byte stream reported lost bytes (a receiver overrun): drops the frame being
    /// received, which the loss damaged, and when its header already arrived answers its `SEQ`
    /// with [`ErrorCode::BytesLost`], so the host resends it at once instead of after a
    /// timeout. Bytes of it still to come are skipped as garbage.
    pub fn bytes_lost(&mut self) -> Result<(), ServerError<IO::Error>> {
        self.stats.frames_rejected = self.stats.frames_rejected.wrapping_add(1);
        let header = self.decoder.partial_header();
        self.decoder.clear();
        if let Some((seq, cmd)) = header {
            let mut buf = [0u8; frame::OVERHEAD + 4];
            let p = RemoteError::payload(ErrorCode::BytesLost, cmd, 0);
            let n = frame::encode(seq, ERROR, &p, &mut buf).unwrap_or(0);
            self.io.write_all(&buf[..n]).map_err(ServerError::Io)?;
            self.io.flush().map_err(ServerError::Io)?;
        }
        Ok(())
    }

    /// Serves requests until the stream fails or closes.
    pub fn serve(&mut self) -> ServerError<IO::Error> {
        loop {
            if let Err(e) = self.step() {
                return e;
            }
        }
    }

    /// One blocking read from the stream, then answers every complete frame it buffered.
    pub fn step(&mut self) -> Result<(), ServerError<IO::Error>> {
        let n = self
            .io
            .read(self.decoder.spare())
            .map_err(ServerError::Io)?;
        if n == 0 {
            return Err(ServerError::Closed);
        }
        self.decoder.commit(n);
        self.answer_buffered()
    }

    /// Answers every complete frame already received (no read).
    pub fn answer_buffered(&mut self) -> Result<(), ServerError<IO::Error>> {
        loop {
            let FrameServer {
                decoder,
                bus,
                config,
                tx,
                tx_len,
                last,
                stats,
                clock,
                store,
                train,
                stack_use,
                step_profile,
                io,
                ..
            } = self;
            decoder.skip_garbage();
            stats.garbage_bytes = decoder.garbage_bytes();
            let start = clock.map(|now| now());
            match decoder.next_frame() {
                None => return Ok(()),
                // Read-only, so not kept for replay: a resend measures again.
                Some(Ok(f)) if f.cmd == STACK_USE => {
                    let probe = stack_use.map(|p| {
                        move |out: &mut [u8]| {
                            out[..STACK_USE_REPLY].copy_from_slice(&p().encode());
                            STACK_USE_REPLY
                        }
                    });
                    *tx_len = answer_probe(f, probe.as_ref().map(|p| p as _), tx, stats);
                }
                Some(Ok(f)) if f.cmd == STEP_PROFILE => {
                    *tx_len = answer_probe(f, step_profile.as_ref().map(|p| p as _), tx, stats);
                }
                Some(Ok(f)) => {
                    // `COUNTERS` itself is not counted: a host asking after every operation
                    // must not see its own questions in the cost of the next one.
                    let counted = f.cmd != crate::protocol::cmd::COUNTERS;
                    // Progress frames are best effort: a failing link shows at the answer.
                    let seq = f.seq;
                    let mut progress = |done: u16| {
                        let mut buf = [0u8; frame::OVERHEAD + 2];
                        if let Ok(n) = frame::encode(seq, WORKING, &done.to_le_bytes(), &mut buf) {
                            let _ = io.write_all(&buf[..n]).and_then(|()| io.flush());
                        }
                    };
                    let board = Board {
                        bus,
                        config,
                        store,
                        train,
                        clock: *clock,
                        progress: &mut progress,
                    };
                    handle(f, board, tx, tx_len, last, stats);
                    if let (Some(now), Some(t0), Some(busy), true) =
                        (clock, start, &mut stats.busy_cycles, counted)
                    {
                        *busy = busy.wrapping_add(now().wrapping_sub(t0));
                    }
                }
                Some(Err(e)) => {
                    let (seq, cmd, code) = match e {
                        FrameError::BadCrc { seq, cmd } => (seq, cmd, ErrorCode::BadCrc),
                        FrameError::Oversized { seq, cmd, .. } => (seq, cmd, ErrorCode::Oversized),
                    };
                    // Not stored as the last response: the damaged frame was never executed.
                    stats.frames_rejected = stats.frames_rejected.wrapping_add(1);
                    let mut buf = [0u8; frame::OVERHEAD + 4];
                    let p = RemoteError::payload(code, cmd, 0);
                    let n = frame::encode(seq, ERROR, &p, &mut buf).unwrap_or(0);
                    self.io.write_all(&buf[..n]).map_err(ServerError::Io)?;
                    self.io.flush().map_err(ServerError::Io)?;
                    continue;
                }
            }
            self.io
                .write_all(&self.tx[..self.tx_len])
                .map_err(ServerError::Io)?;
            self.io.flush().map_err(ServerError::Io)?;
        }
    }
}

/// What a request runs on: the board's parts, borrowed from the server for one request.
struct Board<'s, B> {
    bus: &'s mut B,
    config: &'s ArrayConfig,
    store: &'s mut board_ops::Store,
    train: &'s mut TrainSlot,
    clock: Option<fn() -> u64>,
    /// Sends a progress frame ([`WORKING`]) for the request being run.
    progress: &'s mut dyn FnMut(u16),
}

/// Executes (or replays) one request and leaves its response frame in `tx`.
fn handle<B: AcceleratorBus>(
    f: Frame<'_>,
    board: Board<'_, B>,
    tx: &mut [u8; FRAME_CAPACITY],
    tx_len: &mut usize,
    last: &mut Option<Last>,
    stats: &mut LinkStats,
) {
    let is_retry = matches!(last, Some(l) if l.seq == f.seq && l.crc == f.crc);
    if is_retry && f.cmd != crate::protocol::cmd::PING {
        stats.replays = stats.replays.wrapping_add(1);
        return;
    }
    let out = &mut tx[HEADER..HEADER + MAX_PAYLOAD];
    let (cmd, len) = match execute(f, board, stats, out) {
        Ok(len) => {
            stats.frames_ok = stats.frames_ok.wrapping_add(1);
            (f.cmd | RESPONSE, len)
        }
        Err((code, detail)) => {
            stats.frames_rejected = stats.frames_rejected.wrapping_add(1);
            tx[HEADER..HEADER + 4].copy_from_slice(&RemoteError::payload(code, f.cmd, detail));
            (ERROR, 4)
        }
    };
    // `len <= MAX_PAYLOAD` by construction, so finishing cannot fail.
    *tx_len = frame::finish(tx, f.seq, cmd, len).unwrap_or(0);
    *last = Some(Last {
        seq: f.seq,
        crc: f.crc,
    });
}

pub(crate) type Failure = (ErrorCode, u16);

/// Checks a write-type request against the configuration without touching the bus.
fn check(req: &Request<'_>, config: &ArrayConfig, index: u16) -> Result<(), Failure> {
    let range = (ErrorCode::OutOfRange, index);
    match *req {
        Request::WriteRows {
            bank,
            start,
            count,
            words,
            ..
        } => {
            if words.len() != usize::from(count) * config.size || config.size > MAX_LANES {
                return Err((ErrorCode::RowLength, index));
            }
            if bank > 1 || usize::from(start) + usize::from(count) > config.buffer_depth {
                return Err(range);
            }
        }
        Request::ReadRows { bank, start, count } => {
            if bank > 1 || usize::from(start) + usize::from(count) > config.size {
                return Err(range);
            }
            if usize::from(count) * config.size * 2 > MAX_PAYLOAD || config.size > MAX_LANES {
                return Err(range);
            }
        }
        // u64: `addr` comes from the wire and may be near `u32::MAX`. With no conv unit
        // (`fm_depth = 0`) every request fails here, as `words` is never empty.
        // The feature map is written in whole rows of `fm_row_words` words.
        Request::WriteFm { addr, words }
            if u64::from(addr) + words.len() as u64 > config.fm_depth as u64
                || !(addr as usize).is_multiple_of(config.fm_row_words())
                || !words.len().is_multiple_of(config.fm_row_words()) =>
        {
            return Err(range);
        }
        _ => {}
    }
    // A `W`-bit array reads the low `W` bits of a 16-bit word: a wider one would be cut.
    if let Request::WriteRows { words, .. } | Request::WriteFm { words, .. } = *req {
        let (lo, hi) = (word_min(config.word_bits), word_max(config.word_bits));
        if config.word_bits < WORD_BITS
            && (0..words.len()).any(|i| !(lo..=hi).contains(&i64::from(words.get(i))))
        {
            return Err((ErrorCode::WordRange, index));
        }
    }
    Ok(())
}

fn execute<B: AcceleratorBus>(
    f: Frame<'_>,
    board: Board<'_, B>,
    stats: &LinkStats,
    out: &mut [u8],
) -> Result<usize, Failure> {
    let Board {
        bus,
        config,
        store,
        train,
        clock,
        progress,
    } = board;
    let req = Request::parse(f.cmd, f.payload).map_err(|c| {
        // For a batch, report which entry was bad.
        let index = match f.cmd {
            crate::protocol::cmd::BATCH => BatchIter::new(f.payload)
                .find_map(|e| e.err())
                .map_or(0, |(_, i)| i),
            _ => 0,
        };
        (c, index)
    })?;
    check(&req, config, 0)?;
    if let Request::Batch(entries) = req {
        // Tensor entries are checked against a copy of the store's bookkeeping, updated
        // entry by entry as running them will.
        let mut plan = store.as_ref().map(|s| s.table());
        for (i, e) in BatchIter::new(entries).enumerate() {
            let e = e.map_err(|(c, _)| (c, i as u16))?;
            check(&e, config, i as u16)?;
            board_ops::check_entry(&e, &mut plan, i as u16)?;
        }
    }
    let bus_err = |_| (ErrorCode::Bus, 0);
    match req {
        Request::Ping => {
            let id = bus.read_reg(regmap::ID).map_err(bus_err)?;
            let cfg = bus.read_reg(regmap::CONFIG).map_err(bus_err)?;
            out[..4].copy_from_slice(&id.to_le_bytes());
            out[4..8].copy_from_slice(&cfg.to_le_bytes());
            out[8] = VERSION;
            out[9..11].copy_from_slice(&(MAX_PAYLOAD as u16).to_le_bytes());
            let n = board_ops::ping_caps(store, &mut out[11..]);
            Ok(11 + n + train_caps(train, n, &mut out[11..]))
        }
        Request::ReadReg { addr } => {
            let v = bus.read_reg(addr).map_err(bus_err)?;
            out[..4].copy_from_slice(&v.to_le_bytes());
            Ok(4)
        }
        Request::Status => {
            let s = bus.read_reg(regmap::STATUS).map_err(bus_err)?;
            out[..4].copy_from_slice(&s.to_le_bytes());
            out[4..8].copy_from_slice(&stats.frames_ok.to_le_bytes());
            out[8..12].copy_from_slice(&stats.frames_rejected.to_le_bytes());
            out[12..16].copy_from_slice(&stats.garbage_bytes.to_le_bytes());
            Ok(16)
        }
        Request::Counters => {
            out[0] = u8::from(stats.busy_cycles.is_some());
            out[1..5].copy_from_slice(&stats.frames_ok.to_le_bytes());
            out[5..13].copy_from_slice(&stats.busy_cycles.unwrap_or(0).to_le_bytes());
            Ok(COUNTERS_REPLY)
        }
        Request::ReadRows { bank, start, count } => {
            let n = config.size;
            let mut row = [0i16; MAX_LANES];
            for r in 0..usize::from(count) {
                bus.read_c_row(bank, start + r as u16, &mut row[..n])
                    .map_err(bus_err)?;
                for (c, w) in row[..n].iter().enumerate() {
                    let at = 2 * (r * n + c);
                    out[at..at + 2].copy_from_slice(&w.to_le_bytes());
                }
            }
            Ok(2 * n * usize::from(count))
        }
        Request::Batch(entries) => {
            for (i, e) in BatchIter::new(entries).enumerate() {
                // Entries were all parsed and checked above.
                if let Ok(e) = e {
                    run_write(&e, bus, config, store).map_err(|(c, _)| (c, i as u16))?;
                }
            }
            Ok(0)
        }
        Request::ReadTensor { .. }
        | Request::FreeTensors(_)
        | Request::Matmul(_)
        | Request::Conv(_) => board_ops::execute(&req, bus, config, store, out),
        #[cfg(any(feature = "step", test))]
        Request::Train(r) => match train.as_mut() {
            Some(session) => train::execute(&r, session, (bus, config), (clock, progress), out),
            None => Err((ErrorCode::UnknownCommand, 0)),
        },
        #[cfg(not(any(feature = "step", test)))]
        Request::Train(_) => {
            let _ = (train, clock, progress);
            Err((ErrorCode::UnknownCommand, 0))
        }
        other => run_write(&other, bus, config, store).map(|()| 0),
    }
}

#[cfg(any(feature = "step", test))]
use train::train_caps;

#[cfg(not(any(feature = "step", test)))]
fn train_caps(_: &TrainSlot, _: usize, _: &mut [u8]) -> usize {
    0
}

/// Feature-map words converted per `write_fm` call (a stack buffer: the firmware has no heap);
/// a multiple of every row width (a power of two up to 64).
const FM_CHUNK: usize = 64;

/// Runs a write-type request (the kinds allowed in a batch).
fn run_write<B: AcceleratorBus>(
    req: &Request<'_>,
    bus: &mut B,
    config: &ArrayConfig,
    store: &mut board_ops::Store,
) -> Result<(), Failure> {
    let bus_err = |_| (ErrorCode::Bus, 0);
    match *req {
        Request::WriteReg { addr, value } => bus.write_reg(addr, value).map_err(bus_err),
        Request::Idle { cycles } => bus.idle(cycles).map_err(bus_err),
        Request::WriteRows {
            buffer,
            bank,
            start,
            count,
            words,
        } => {
            let n = config.size;
            let mut row = [0i16; MAX_LANES];
            for r in 0..usize::from(count) {
                for (c, w) in row[..n].iter_mut().enumerate() {
                    *w = words.get(r * n + c);
                }
                let at = start + r as u16;
                match buffer {
                    Buffer::A => bus.write_a_row(bank, at, &row[..n]),
                    Buffer::B => bus.write_b_row(bank, at, &row[..n]),
                }
                .map_err(bus_err)?;
            }
            Ok(())
        }
        Request::WriteFm { addr, words } => {
            // Consecutive calls continue at the next address, so splitting the request into
            // whole-row chunks writes the same rows in the same order, one per clock.
            let mut buf = [0i16; FM_CHUNK];
            let mut done = 0;
            while done < words.len() {
                let n = (words.len() - done).min(FM_CHUNK);
                for (i, w) in buf[..n].iter_mut().enumerate() {
                    *w = words.get(done + i);
                }
                // `check` bounded `addr + len` by `fm_depth`, so this cannot overflow.
                bus.write_fm(addr + done as u32, &buf[..n])
                    .map_err(bus_err)?;
                done += n;
            }
            Ok(())
        }
        Request::WriteTensor { .. } | Request::FreeTensors(_) => {
            board_ops::run_store_write(req, store)
        }
        _ => Err((ErrorCode::NotBatchable, 0)),
    }
}

mod board_ops;
mod probe;
use probe::{answer_probe, Probe};
#[cfg(any(feature = "step", test))]
pub mod train;

#[cfg(test)]
mod tests;
