//! The tile driver: runs one matrix product `C = A·B` on any [`AcceleratorBus`].
//!
//! The output is cut into `size x size` tiles (row blocks outer, column blocks inner so an A
//! block is reused across a row); edges are padded with zeros. A dot product longer than
//! `buffer_depth` runs as several commands on the same tile (`CMD_CLEAR` on the first chunk,
//! `CMD_EMIT` on the last).
//!
//! Overlap, so the array never waits for the bus: command `q` reads A and B bank `q % 2`.
//! While it runs, the driver writes the rows of command `q + 1` into the other bank and, in the
//! same beats, reads back the C rows of tiles that finished converting. A bank is written only
//! once the command that last read it has left the array; the driver knows this because the
//! command queued after it has started (`STATUS_QUEUE_FULL` clear). Emitted tile `e` is
//! converted into C bank `e % 2`, and the command that emits tile `e + 2` is queued only once
//! tile `e` has been read, so a C bank is never overwritten before it is read.
//!
//! No allocation and no panics on bad input: the driver runs on the board as well as on the
//! host.

use systole_core::bus::{Beat, BlockTarget, RowRead, RowWrite};
use systole_core::numeric::tile_seed;
use systole_core::{regmap, AcceleratorBus, ArrayConfig, Rounding};

/// Largest array size the driver has row buffers for (the largest `ArrayConfig` allows).
pub const MAX_LANES: usize = 64;

/// Clock cycles any single wait may take before the driver gives up with
/// [`DriverError::Timeout`] (far beyond the longest legal command).
pub const WAIT_LIMIT: u32 = 1 << 20;

/// One matrix product for [`matmul`].
#[derive(Clone, Copy, Debug)]
pub struct MatmulJob<'a> {
    /// `m x k` operand, row-major.
    pub a: &'a [i16],
    /// `k x n` operand, row-major.
    pub b: &'a [i16],
    /// Rows of A and C.
    pub m: usize,
    /// Columns of A, rows of B (dot-product length).
    pub k: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Output right shift `frac_a + frac_b - frac_out`, `0..=MAX_SHIFT`
    /// ([`systole_core::numeric::MAX_SHIFT`]).
    pub shift: u32,
    /// Rounding of the one output conversion.
    pub rounding: Rounding,
    /// Operation seed for stochastic rounding (tile seeds derive from it).
    pub seed: u32,
}

/// What one [`matmul`] cost on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Clock cycles from the first to the last register access (device `CYCLES` counter).
    pub cycles: u64,
    /// Cycles the array consumed a K step (device `MAC_CYCLES` counter).
    pub mac_cycles: u64,
    /// Output tiles computed.
    pub tiles: u64,
    /// Commands queued (tiles times K chunks).
    pub commands: u64,
    /// Buffer-port beats issued.
    pub beats: u64,
    /// A and B rows written (each `size` words).
    pub rows_written: u64,
    /// C rows read (each `size` words).
    pub rows_read: u64,
    /// Register writes.
    pub reg_writes: u64,
    /// Register reads (status polls included).
    pub reg_reads: u64,
    /// Feature-map words written (conv unit).
    pub fm_words: u64,
    /// Gather commands run (conv unit).
    pub gathers: u64,
    /// Idle cycles spent waiting for the device.
    pub wait_cycles: u64,
}

/// Emitted tile whose C rows are still (partly) unread.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Emit index: the tile is in C bank `emit % 2`, done once `DONE_COUNT` passes it.
    emit: u32,
    i0: usize,
    j0: usize,
    /// Rows already read.
    rows_read: usize,
    /// Rows that hold real outputs (the rest are padding and never read).
    rows: usize,
    /// Known to be converted.
    ready: bool,
}

/// One queued unit of work: rows `k0..k0 + klen` of tile `(i0, j0)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Command {
    pub i0: usize,
    pub j0: usize,
    pub k0: usize,
    pub klen: usize,
    clear: bool,
    emit: bool,
}

/// The conversion every output of a product gets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conversion {
    pub shift: u32,
    pub rounding: Rounding,
    pub seed: u32,
}

/// Driver state for one product.
pub(crate) struct Run<'b, 'j, B: AcceleratorBus> {
    pub(crate) bus: &'b mut B,
    feed: &'j dyn Feed,
    conversion: Conversion,
    m: usize,
    k: usize,
    n: usize,
    /// The conv unit's operand sources, when A or B is gathered on chip.
    pub(crate) gather: Option<&'j mut dyn hook::Gathers<B>>,
    /// Tile order: column blocks outer (else row blocks outer).
    pub(crate) columns_outer: bool,
    /// Fills already started for the command `(i0, j0, k0)`.
    prestarted: Option<((usize, usize, usize), hook::Started)>,
    size: usize,
    pub(crate) stats: DriverStats,
    /// `DONE_COUNT` when the run started.
    done0: u32,
    /// Outstanding emitted tiles, indexed by C bank.
    pending: [Option<Pending>; 2],
    /// What A / B each bank holds: `(block origin, k0)`.
    a_tag: [Option<(usize, usize)>; 2],
    b_tag: [Option<(usize, usize)>; 2],
    last_seed: Option<u32>,
    last_klen: Option<usize>,
}

pub(crate) type Res<T, E> = Result<T, DriverError<E>>;

/// Computes `out = A·B` (row-major `m x n`) on the accelerator behind `bus`, bit-exact with the
/// numeric contract. See the module docs for the schedule.
pub fn matmul<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    job: &MatmulJob<'_>,
    out: &mut [i16],
) -> Result<DriverStats, DriverError<B::Error>> {
    matmul_views(bus, cfg, job, Transposed::default(), out)
}

/// Which operands of a [`matmul_views`] job are stored transposed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transposed {
    /// `job.a` holds `Aᵀ` (`k x m`, row-major).
    pub a: bool,
    /// `job.b` holds `Bᵀ` (`n x k`, row-major).
    pub b: bool,
}

/// [`matmul`] with either operand read through its transpose: the same product, tiles, seeds
/// and result as [`matmul`] on the transposed copy, without making the copy (the board keeps
/// one copy of a tensor that a training step uses both ways).
pub fn matmul_views<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    job: &MatmulJob<'_>,
    transposed: Transposed,
    out: &mut [i16],
) -> Result<DriverStats, DriverError<B::Error>> {
    validate(cfg, job, out)?;
    let mut stats = DriverStats::default();
    if job.m == 0 || job.n == 0 {
        return Ok(stats);
    }
    if job.k == 0 {
        // An empty sum converts to 0 in every rounding mode; the array needs K_LEN >= 1.
        out.fill(0);
        return Ok(stats);
    }
    check_config(bus, cfg, &mut stats)?;
    #[cfg(any(feature = "step", test))]
    if let Some(stats) = whole::run(bus, cfg, job, transposed, out, stats)? {
        return Ok(stats);
    }
    let conversion = Conversion {
        shift: job.shift,
        rounding: job.rounding,
        seed: job.seed,
    };
    let views = Views { job, transposed };
    let mut run = Run::new(bus, cfg, &views, conversion, None, stats);
    run.execute(cfg.buffer_depth, out)?;
    Ok(run.stats)
}

impl<'b, 'j, B: AcceleratorBus> Run<'b, 'j, B> {
    pub(crate) fn new(
        bus: &'b mut B,
        cfg: &ArrayConfig,
        feed: &'j dyn Feed,
        conversion: Conversion,
        gather: Option<&'j mut dyn hook::Gathers<B>>,
        stats: DriverStats,
    ) -> Self {
        let (m, k, n) = feed.shape();
        Run {
            bus,
            feed,
            conversion,
            m,
            k,
            n,
            gather,
            columns_outer: false,
            prestarted: None,
            size: cfg.size,
            stats,
            done0: 0,
            pending: [None; 2],
            a_tag: [None; 2],
            b_tag: [None; 2],
            last_seed: None,
            last_klen: None,
        }
    }

    /// Runs the whole product; `kstep` is the K chunk length (at most the buffer depth).
    pub(crate) fn execute(&mut self, kstep: usize, out: &mut [i16]) -> Res<(), B::Error> {
        let conversion = self.conversion;
        // SHIFT and ROUNDING may only change while the array is idle.
        // Not strict: a stale error from an earlier operation is cleared below.
        self.wait_status(
            regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL,
            false,
            "the array to go idle",
        )?;
        if self.status()? & regmap::STATUS_ERROR != 0 {
            // A stale error from an earlier operation; this one starts clean.
            self.write(regmap::ERROR_CLEAR, 1)?;
        }
        let cycles0 = self.read(regmap::CYCLES)?;
        let macs0 = self.read(regmap::MAC_CYCLES)?;
        self.done0 = self.read(regmap::DONE_COUNT)?;
        self.write(regmap::SHIFT, conversion.shift)?;
        self.write(regmap::ROUNDING, conversion.rounding.code())?;

        let (size, k) = (self.size, self.k);
        let mut q: u32 = 0;
        let mut emit: u32 = 0;
        // Row blocks outer reuses an A block across a row of tiles (host-written A); column
        // blocks outer keeps a host-written B block while a gathered A streams past it.
        let (rows, cols) = (self.m.div_ceil(size), self.n.div_ceil(size));
        let columns_outer = self.columns_outer;
        let mut commands = (0..rows * cols)
            .flat_map(|t| {
                let (bi, bj) = if columns_outer {
                    (t % rows, t / rows)
                } else {
                    (t / cols, t % cols)
                };
                (0..k).step_by(kstep).map(move |k0| Command {
                    i0: bi * size,
                    j0: bj * size,
                    k0,
                    klen: kstep.min(k - k0),
                    clear: k0 == 0,
                    emit: k0 + kstep >= k,
                })
            })
            .peekable();
        while let Some(cmd) = commands.next() {
            self.issue(cmd, commands.peek().copied(), q, emit, out)?;
            q = q.wrapping_add(1);
            if cmd.emit {
                emit = emit.wrapping_add(1);
            }
        }
        for bank in [emit & 1, (emit + 1) & 1] {
            self.drain(bank as usize, out)?;
        }
        let status = self.status()?;
        if status & regmap::STATUS_ERROR != 0 {
            return Err(DriverError::Device { status });
        }
        self.stats.cycles = u64::from(self.read(regmap::CYCLES)?.wrapping_sub(cycles0));
        self.stats.mac_cycles = u64::from(self.read(regmap::MAC_CYCLES)?.wrapping_sub(macs0));
        self.stats.tiles = u64::from(emit);
        self.stats.commands = u64::from(q);
        Ok(())
    }

    /// Loads the rows of command `q` into bank `q % 2` (reading finished C rows in the same
    /// beats), then queues it.
    fn issue(
        &mut self,
        cmd: Command,
        next: Option<Command>,
        q: u32,
        emit: u32,
        out: &mut [i16],
    ) -> Res<(), B::Error> {
        let bank = (q & 1) as usize;
        let mut write_a = self.a_tag[bank] != Some((cmd.i0, cmd.k0));
        let mut write_b = self.b_tag[bank] != Some((cmd.j0, cmd.k0));
        // Gathered operands are filled on chip, concurrently with the host's row writes; the
        // previous command usually started this fill already (see the end of this function).
        let mut gathering = 0;
        let started = match self.prestarted.take() {
            Some((key, st)) if key == (cmd.i0, cmd.j0, cmd.k0) => Some(st),
            _ => self.start_gathers(&cmd, bank, write_a, write_b)?,
        };
        if let Some(st) = started {
            gathering = st.busy_bits;
            write_a &= !st.a;
            write_b &= !st.b;
        }
        // Registers latched by COMMAND: written first so they cost no bubble after the rows.
        let seed = tile_seed(self.conversion.seed, cmd.i0 as u32, cmd.j0 as u32);
        if cmd.emit && self.last_seed != Some(seed) {
            self.write(regmap::SEED, seed)?;
            self.last_seed = Some(seed);
        }
        if self.last_klen != Some(cmd.klen) {
            self.write(regmap::K_LEN, cmd.klen as u32)?;
            self.last_klen = Some(cmd.klen);
        }
        let mut a_row = [0i16; MAX_LANES];
        let mut b_row = [0i16; MAX_LANES];
        let mut c_row = [0i16; MAX_LANES];
        let size = self.size;
        let mut rows = if write_a || write_b { cmd.klen } else { 0 };
        let (strided_a, strided_b) = (self.feed.strided_a(), self.feed.strided_b());
        if self.bus.moves_blocks() {
            // The bus's DMA moves whole blocks: each operand in one request, then the tiles
            // that finished converting.
            let blocks = [
                (write_a, strided_a, BlockTarget::A, cmd.i0),
                (write_b, strided_b, BlockTarget::B, cmd.j0),
            ];
            for (write, strided, target, first) in blocks {
                if let (true, Some(s)) = (write, strided) {
                    let block = s.block(cmd.k0, first, cmd.klen, size, bank as u8);
                    self.bus
                        .write_block(target, &block, size, s.data())
                        .map_err(DriverError::Bus)?;
                    self.stats.beats += cmd.klen as u64;
                    self.stats.rows_written += cmd.klen as u64;
                }
            }
            self.read_ready_tiles(out)?;
            // An operand without a strided view goes a row a beat below.
            write_a &= strided_a.is_none();
            write_b &= strided_b.is_none();
            if !(write_a || write_b) {
                rows = 0;
            }
        }
        // Beats until the next poll (counted down: no division a row on the board's CPU).
        let mut until_poll = 0;
        for r in 0..rows {
            let kk = cmd.k0 + r;
            if write_a {
                match strided_a {
                    Some(s) => s.fill(kk, cmd.i0, &mut a_row[..size]),
                    None => self.fill_a(kk, cmd.i0, &mut a_row[..size]),
                }
            }
            if write_b {
                match strided_b {
                    Some(s) => s.fill(kk, cmd.j0, &mut b_row[..size]),
                    None => self.fill_b(kk, cmd.j0, &mut b_row[..size]),
                }
            }
            // Poll for finished tiles only every `size` beats: on a serial bus a poll is a
            // round trip, and a tile needs `size` beats to read anyway.
            let poll = until_poll == 0;
            until_poll = if poll { size - 1 } else { until_poll - 1 };
            let c = self.next_c_read(poll)?;
            let beat = Beat {
                a: write_a.then(|| RowWrite {
                    bank: bank as u8,
                    row: r as u16,
                    data: &a_row[..size],
                }),
                b: write_b.then(|| RowWrite {
                    bank: bank as u8,
                    row: r as u16,
                    data: &b_row[..size],
                }),
                c: c.map(|(cb, row)| RowRead {
                    bank: cb as u8,
                    row: row as u16,
                }),
            };
            let c_out: &mut [i16] = if c.is_some() {
                &mut c_row[..size]
            } else {
                &mut []
            };
            self.bus.beat(&beat, c_out).map_err(DriverError::Bus)?;
            self.stats.beats += 1;
            self.stats.rows_written += u64::from(write_a) + u64::from(write_b);
            if let Some((cb, row)) = c {
                self.store_c_row(cb, row, &c_row[..size], out);
            }
        }
        self.queue(cmd, next, bank, emit, gathering, out)
    }

    /// The rest of [`Self::issue`] once command `q`'s rows are in: waits for its gathers,
    /// records what each bank holds, queues the command and starts the next one's gathers.
    #[inline(always)]
    fn queue(
        &mut self,
        cmd: Command,
        next: Option<Command>,
        bank: usize,
        emit: u32,
        gathering: u32,
        out: &mut [i16],
    ) -> Res<(), B::Error> {
        if gathering != 0 {
            self.wait_gathers(gathering, out)?;
        }
        self.a_tag[bank] = Some((cmd.i0, cmd.k0));
        self.b_tag[bank] = Some((cmd.j0, cmd.k0));
        let c_bank = (emit & 1) as usize;
        if cmd.emit {
            // Tile `emit - 2` used this C bank: it must be read before it can be overwritten.
            self.drain(c_bank, out)?;
        }
        self.wait_status(regmap::STATUS_QUEUE_FULL, true, "a free command slot")?;
        let word = regmap::command(bank as u8, bank as u8, c_bank as u8, cmd.clear, cmd.emit);
        self.write(regmap::COMMAND, word)?;
        if cmd.emit {
            let rows = self.size.min(self.m - cmd.i0);
            self.pending[c_bank] = Some(Pending {
                emit,
                i0: cmd.i0,
                j0: cmd.j0,
                rows_read: 0,
                rows,
                ready: false,
            });
        }
        // The gather engines hold a fill's first row until no command reads its bank, so the
        // fill for command q + 1 may start now, while command q - 1 still reads that bank.
        if let Some(nx) = next {
            let nb = 1 - bank;
            let need_a = self.a_tag[nb] != Some((nx.i0, nx.k0));
            let need_b = self.b_tag[nb] != Some((nx.j0, nx.k0));
            if let Some(st) = self.start_gathers(&nx, nb, need_a, need_b)? {
                self.prestarted = Some(((nx.i0, nx.j0, nx.k0), st));
            }
        }
        // Once command q has started, command q - 1 has left the array and its bank, the one
        // command q + 1 will fill, is free.
        self.wait_status(
            regmap::STATUS_QUEUE_FULL,
            true,
            "the queued command to start",
        )
    }

    /// `row[l] = A[i0 + l][kk]` through [`Feed::a`], 0 past row `m` (padding).
    #[inline(never)]
    fn fill_a(&self, kk: usize, i0: usize, row: &mut [i16]) {
        for (l, x) in row.iter_mut().enumerate() {
            let i = i0 + l;
            *x = if i < self.m { self.feed.a(i, kk) } else { 0 };
        }
    }

    /// `row[l] = B[kk][j0 + l]` through [`Feed::b`], 0 past column `n` (padding).
    #[inline(never)]
    fn fill_b(&self, kk: usize, j0: usize, row: &mut [i16]) {
        for (l, x) in row.iter_mut().enumerate() {
            let j = j0 + l;
            *x = if j < self.n { self.feed.b(kk, j) } else { 0 };
        }
    }

    /// Starts the conv unit's fills for `cmd` into `bank` (none without a conv unit).
    fn start_gathers(
        &mut self,
        cmd: &Command,
        bank: usize,
        need_a: bool,
        need_b: bool,
    ) -> Res<Option<hook::Started>, B::Error> {
        let Some(g) = self.gather.take() else {
            return Ok(None);
        };
        let r = g.start(self, cmd, bank, need_a, need_b);
        self.gather = Some(g);
        r.map(Some)
    }

    /// Idles until none of `bits` is set in `STATUS`; fails on `STATUS_ERROR` when `strict`.
    pub(crate) fn wait_status(
        &mut self,
        bits: u32,
        strict: bool,
        what: &'static str,
    ) -> Res<(), B::Error> {
        let mut waited = 0u32;
        loop {
            let s = self.status()?;
            if strict && s & regmap::STATUS_ERROR != 0 {
                return Err(DriverError::Device { status: s });
            }
            if s & bits == 0 {
                return Ok(());
            }
            self.idle_one(&mut waited, what)?;
        }
    }

    fn idle_one(&mut self, waited: &mut u32, what: &'static str) -> Res<(), B::Error> {
        if *waited >= WAIT_LIMIT {
            return Err(DriverError::Timeout { waiting_for: what });
        }
        self.bus.idle(1).map_err(DriverError::Bus)?;
        *waited += 1;
        self.stats.wait_cycles += 1;
        Ok(())
    }

    fn check_error(&mut self) -> Res<(), B::Error> {
        let status = self.status()?;
        if status & regmap::STATUS_ERROR != 0 {
            return Err(DriverError::Device { status });
        }
        Ok(())
    }

    fn status(&mut self) -> Res<u32, B::Error> {
        self.read(regmap::STATUS)
    }

    pub(crate) fn read(&mut self, addr: u8) -> Res<u32, B::Error> {
        self.stats.reg_reads += 1;
        self.bus.read_reg(addr).map_err(DriverError::Bus)
    }

    pub(crate) fn write(&mut self, addr: u8, value: u32) -> Res<(), B::Error> {
        self.stats.reg_writes += 1;
        self.bus.write_reg(addr, value).map_err(DriverError::Bus)
    }
}

mod checks;
mod error;
mod feed;
pub(crate) mod hook;
mod readout;
#[cfg(any(feature = "step", test))]
pub(crate) mod whole;
pub(crate) use checks::check_config;
use checks::validate;
pub use error::DriverError;
pub(crate) use feed::Feed;
use feed::Views;

#[cfg(test)]
mod block_tests;
#[cfg(test)]
pub(crate) mod mock;
#[cfg(test)]
mod sequencer_model;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod width_tests;
