//! The conv driver: the three training ops of a 2-D convolution on the conv unit, with no
//! im2col matrix on the bus. Each op is the product of the golden model's lowering
//! (`systole_golden::conv`), tiled by the matmul driver, so the output tiles, their seeds
//! and their rounding are the same as the golden model's, bit for bit:
//!
//! | op | A (lanes = rows) | B (lanes = columns) | output |
//! |----|------------------|---------------------|--------|
//! | forward | `im2col(x)`, gathered | `Wᵀ`, host rows | `(batch·oh·ow) x out_ch` |
//! | input gradient | `gather(dy)`, gathered | `W'`, host rows | `(batch·h·w) x in_ch` |
//! | weight gradient | `dy_rowsᵀ`, gathered | `im2col(x)`, gathered | `out_ch x (in_ch·k·k)` |
//!
//! Feature maps go to the feature-map buffer once, image by image, into a ring of slots
//! (`systole_core::gather`), just before the first gather that needs them; a gather for the
//! next command runs while the array computes the current one. The weight gradient walks the
//! whole batch for every output tile, so its maps are sent once only when the batch fits the
//! ring; otherwise they are sent again for each tile (the driver's stats count every word).

use crate::driver::hook::{Gathers, Started};
use crate::driver::{Command, Conversion, DriverError, DriverStats, Feed, Res, Run, MAX_LANES};
use systole_core::gather::{advance, ConvGeom, GatherConfig};
use systole_core::numeric::{first_outside, MAX_K, MAX_SHIFT};
use systole_core::regmap::{self, gather_command, LaneMode};
use systole_core::{AcceleratorBus, ArrayConfig, Rounding};

/// Which training op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvOp {
    /// `y = conv(x, w)`.
    Forward,
    /// Gradient with respect to the input, from `dy` and `w`.
    BackwardInput,
    /// Gradient with respect to the weights, from `x` and `dy`.
    BackwardWeights,
}

/// One convolution op for [`conv2d`]. Maps are NCHW rows: `x` is `batch x in_ch·in_h·in_w`,
/// `dy` is `batch x out_ch·oh·ow`, `w` is `out_ch x in_ch·k·k`. Operands the op does not use
/// may be empty.
#[derive(Clone, Copy, Debug)]
pub struct ConvJob<'a> {
    /// The op.
    pub op: ConvOp,
    /// The convolution.
    pub geom: ConvGeom,
    /// Images.
    pub batch: usize,
    /// Input maps.
    pub x: &'a [i16],
    /// Output gradients.
    pub dy: &'a [i16],
    /// Weights.
    pub w: &'a [i16],
    /// Output right shift, `0..=MAX_SHIFT` ([`systole_core::numeric::MAX_SHIFT`]).
    pub shift: u32,
    /// Rounding of the one output conversion.
    pub rounding: Rounding,
    /// Operation seed for stochastic rounding.
    pub seed: u32,
}

impl ConvJob<'_> {
    /// `(m, k, n)` of the lowered product.
    pub fn shape(&self) -> (usize, usize, usize) {
        let g = &self.geom;
        let kk = g.kernel * g.kernel;
        let pix = g.out_h() * g.out_w();
        match self.op {
            ConvOp::Forward => (self.batch * pix, g.in_ch * kk, g.out_ch),
            ConvOp::BackwardInput => (self.batch * g.in_h * g.in_w, g.out_ch * kk, g.in_ch),
            ConvOp::BackwardWeights => (g.out_ch, self.batch * pix, g.in_ch * kk),
        }
    }

    /// Pixels per image along the gathered walk that crosses images (lanes of A for the
    /// forward and input-gradient ops, K for the weight gradient).
    fn pixels(&self) -> usize {
        let g = &self.geom;
        match self.op {
            ConvOp::BackwardInput => g.in_h * g.in_w,
            _ => g.out_h() * g.out_w(),
        }
    }

    /// Words of one image slot: whole feature-map rows of `row` words; for the weight
    /// gradient the output gradient starts on a row after the input map.
    pub(crate) fn slot_words(&self, row: usize) -> usize {
        let (x, dy) = (self.geom.in_words(), self.geom.out_words());
        match self.op {
            ConvOp::Forward => x.next_multiple_of(row),
            ConvOp::BackwardInput => dy.next_multiple_of(row),
            ConvOp::BackwardWeights => x.next_multiple_of(row) + dy.next_multiple_of(row),
        }
    }
}

impl Feed for ConvJob<'_> {
    fn shape(&self) -> (usize, usize, usize) {
        ConvJob::shape(self)
    }
    /// Never called: A is gathered for every op.
    fn a(&self, _i: usize, _kk: usize) -> i16 {
        0
    }
    fn b(&self, kk: usize, j: usize) -> i16 {
        let g = &self.geom;
        let (kk2, ckk) = (g.kernel * g.kernel, g.in_ch * g.kernel * g.kernel);
        match self.op {
            // Wᵀ[(ci,ky,kx)][co]
            ConvOp::Forward => self.w[j * ckk + kk],
            // W'[(co,ky,kx)][ci] = W[co][ci][ky][kx]
            ConvOp::BackwardInput => self.w[(kk / kk2) * ckk + j * kk2 + kk % kk2],
            // Gathered.
            ConvOp::BackwardWeights => 0,
        }
    }
}

/// One gather engine as the driver tracks it.
struct Engine {
    /// The walks from the operand's origin.
    base: GatherConfig,
    /// Lane and K origins the configuration in the engine starts at (`None`: not written).
    cfg_origin: Option<(usize, usize)>,
    /// Tile origin held in the lane registers.
    lanes_at: Option<usize>,
    /// Tile origin the lane walker stands at.
    walker_at: Option<usize>,
    /// K position the K walker stands at.
    k_at: Option<usize>,
    reg_cfg: u8,
    reg_cmd: u8,
    busy_bit: u32,
}

impl Engine {
    fn new(base: GatherConfig, reg_cfg: u8, reg_cmd: u8, busy_bit: u32) -> Self {
        Engine {
            base,
            cfg_origin: None,
            lanes_at: None,
            walker_at: None,
            k_at: None,
            reg_cfg,
            reg_cmd,
            busy_bit,
        }
    }

    /// Fills `bank` rows `0..klen` with lanes from tile origin `origin`, K from `k0`.
    fn command<B: AcceleratorBus>(
        &mut self,
        run: &mut Run<'_, '_, B>,
        size: usize,
        origin: usize,
        k0: usize,
        klen: usize,
        bank: usize,
    ) -> Res<(), B::Error> {
        let mode = if self.lanes_at == Some(origin) {
            LaneMode::Keep
        } else if self.walker_at == Some(origin) {
            LaneMode::Next
        } else {
            LaneMode::Load
        };
        let k_next = self.k_at == Some(k0);
        let (mut lane0, mut kk0) = self.cfg_origin.unwrap_or((usize::MAX, usize::MAX));
        let stale = (mode == LaneMode::Load && lane0 != origin) || (!k_next && kk0 != k0);
        if stale {
            // Start states for this origin: walked in software, once per restart.
            let mut cfg = self.base;
            if mode == LaneMode::Load {
                lane0 = origin;
            }
            if !k_next {
                kk0 = k0;
            }
            if lane0 != usize::MAX {
                cfg.lanes.start = advance(&cfg.lanes, &cfg.lanes.start, cfg.modulus, lane0);
            }
            if kk0 != usize::MAX {
                cfg.k.start = advance(&cfg.k, &cfg.k.start, cfg.modulus, kk0);
            }
            for w in cfg.words() {
                run.write(self.reg_cfg, w)?;
            }
            self.cfg_origin = Some((lane0, kk0));
        }
        run.write(
            self.reg_cmd,
            gather_command(klen as u32, bank as u8, mode, k_next),
        )?;
        run.stats.gathers += 1;
        self.lanes_at = Some(origin);
        if mode != LaneMode::Keep {
            self.walker_at = Some(origin + size);
        }
        self.k_at = Some(k0 + klen);
        Ok(())
    }
}

/// The conv unit's side of one [`conv2d`] call.
struct ConvGathers<'a> {
    job: &'a ConvJob<'a>,
    size: usize,
    a: Engine,
    b: Option<Engine>,
    slots: usize,
    slot_words: usize,
    /// Words per feature-map row.
    row: usize,
    /// Images `loaded - slots .. loaded` are in the ring.
    loaded: usize,
}

impl ConvGathers<'_> {
    /// Makes images `lo..=hi` resident, writing the missing ones.
    fn ensure<B: AcceleratorBus>(
        &mut self,
        run: &mut Run<'_, '_, B>,
        lo: usize,
        hi: usize,
    ) -> Res<(), B::Error> {
        if lo < self.loaded.saturating_sub(self.slots) || lo > self.loaded {
            self.loaded = lo;
        }
        let job = self.job;
        let (xw, dw) = (job.geom.in_words(), job.geom.out_words());
        while self.loaded <= hi {
            let b = self.loaded;
            let base = (b % self.slots) * self.slot_words;
            let parts: [(&[i16], usize); 2] = match job.op {
                ConvOp::Forward => [(&job.x[b * xw..][..xw], base), (&[], 0)],
                ConvOp::BackwardInput => [(&job.dy[b * dw..][..dw], base), (&[], 0)],
                ConvOp::BackwardWeights => [
                    (&job.x[b * xw..][..xw], base),
                    (
                        &job.dy[b * dw..][..dw],
                        base + xw.next_multiple_of(self.row),
                    ),
                ],
            };
            for (words, addr) in parts {
                self.write_map(run, addr, words)?;
            }
            self.loaded += 1;
        }
        Ok(())
    }

    /// Writes one map at `addr` (row-aligned) in whole rows, the last padded with zeros.
    fn write_map<B: AcceleratorBus>(
        &self,
        run: &mut Run<'_, '_, B>,
        addr: usize,
        words: &[i16],
    ) -> Res<(), B::Error> {
        if words.is_empty() {
            return Ok(());
        }
        let whole = words.len() - words.len() % self.row;
        if whole > 0 {
            run.bus
                .write_fm(addr as u32, &words[..whole])
                .map_err(DriverError::Bus)?;
        }
        if whole < words.len() {
            let mut last = [0i16; MAX_LANES];
            last[..words.len() - whole].copy_from_slice(&words[whole..]);
            run.bus
                .write_fm((addr + whole) as u32, &last[..self.row])
                .map_err(DriverError::Bus)?;
        }
        run.stats.fm_words += words.len().next_multiple_of(self.row) as u64;
        Ok(())
    }
}

impl<B: AcceleratorBus> Gathers<B> for ConvGathers<'_> {
    fn start(
        &mut self,
        run: &mut Run<'_, '_, B>,
        cmd: &Command,
        bank: usize,
        need_a: bool,
        need_b: bool,
    ) -> Res<Started, B::Error> {
        let job = self.job;
        let (m, _, _) = job.shape();
        let pix = job.pixels();
        if need_a || (need_b && self.b.is_some()) {
            let (lo, hi) = match job.op {
                ConvOp::BackwardWeights => (cmd.k0 / pix, (cmd.k0 + cmd.klen - 1) / pix),
                _ => (cmd.i0 / pix, ((cmd.i0 + self.size).min(m) - 1) / pix),
            };
            self.ensure(run, lo, hi)?;
        }
        let mut busy_bits = 0;
        if need_a {
            self.a
                .command(run, self.size, cmd.i0, cmd.k0, cmd.klen, bank)?;
            busy_bits |= self.a.busy_bit;
        }
        let gathered_b = self.b.is_some();
        if let (true, Some(e)) = (need_b, self.b.as_mut()) {
            e.command(run, self.size, cmd.j0, cmd.k0, cmd.klen, bank)?;
            busy_bits |= e.busy_bit;
        }
        Ok(Started {
            a: true,
            b: gathered_b,
            busy_bits,
        })
    }
}

/// Whether [`conv2d`] runs `job` on `cfg`'s conv unit sending every feature map exactly once:
/// the unit is there and, for the forward and input-gradient ops, the images a tile of `size`
/// pixel rows can span fit the feature-map buffer at once (else [`conv2d`] refuses with
/// `FeatureMapTooSmall`); for the weight gradient, the whole batch fits (it walks the batch
/// once per output tile). Callers lower a job that does not fit on the host instead (same
/// result; for the weight gradient, fewer bytes than re-sending the maps for every tile).
pub fn sends_maps_once(cfg: &ArrayConfig, job: &ConvJob<'_>) -> bool {
    if !cfg.has_conv_unit() {
        return false;
    }
    let slot = job.slot_words(cfg.fm_row_words());
    if job.op == ConvOp::BackwardWeights {
        return job.batch.saturating_mul(slot) <= cfg.fm_depth;
    }
    // The same ring as `conv2d` lays out: a tile spans `span` images, `span` slots needed.
    let span = (cfg.size - 1).div_ceil(job.pixels().max(1)) + 1;
    ConvGeom::slots(slot, cfg.fm_depth).is_ok_and(|slots| span <= slots)
}

/// The checks of [`conv2d`] before the bus is touched: the configuration, the geometry, the
/// operands' lengths and words, K and the shift.
fn check_job<E>(
    cfg: &ArrayConfig,
    job: &ConvJob<'_>,
    out_len: usize,
) -> Result<(), DriverError<E>> {
    cfg.validate().map_err(DriverError::Config)?;
    if cfg.size > MAX_LANES {
        return Err(DriverError::TooManyLanes(cfg.size));
    }
    if !cfg.has_conv_unit() {
        return Err(DriverError::NoConvUnit);
    }
    let g = &job.geom;
    g.check().map_err(DriverError::Geometry)?;
    let (m, k, n) = job.shape();
    let len = |x: usize, y: usize| x.checked_mul(y).ok_or(DriverError::ShapeOverflow);
    let uses = |op: &[ConvOp]| op.contains(&job.op);
    for (which, used, expected, found) in [
        (
            "x",
            uses(&[ConvOp::Forward, ConvOp::BackwardWeights]),
            len(job.batch, g.in_words())?,
            job.x.len(),
        ),
        (
            "dy",
            uses(&[ConvOp::BackwardInput, ConvOp::BackwardWeights]),
            len(job.batch, g.out_words())?,
            job.dy.len(),
        ),
        (
            "w",
            uses(&[ConvOp::Forward, ConvOp::BackwardInput]),
            len(g.out_ch, g.in_ch * g.kernel * g.kernel)?,
            job.w.len(),
        ),
        ("out", true, len(m, n)?, out_len),
    ] {
        if used && expected != found {
            return Err(DriverError::Length {
                which,
                expected,
                found,
            });
        }
    }
    // A conv unit at `W` bits (once built below 16) reads the low `W` bits of each word.
    for (which, words) in [("x", job.x), ("dy", job.dy), ("w", job.w)] {
        if let Some((index, value)) = first_outside(words, cfg.word_bits) {
            return Err(DriverError::WordRange {
                which,
                index,
                value,
                word_bits: cfg.word_bits,
            });
        }
    }
    if k > MAX_K {
        return Err(DriverError::KTooLong(k));
    }
    if job.shift > MAX_SHIFT {
        return Err(DriverError::Shift(job.shift));
    }
    Ok(())
}

/// Computes one convolution op on the conv unit behind `bus`, bit-exact with the golden
/// model. `out` receives the lowered output matrix (see the module table), row-major.
pub fn conv2d<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    job: &ConvJob<'_>,
    out: &mut [i16],
) -> Result<DriverStats, DriverError<B::Error>> {
    check_job(cfg, job, out.len())?;
    let g = &job.geom;
    let (m, _, n) = job.shape();
    let mut stats = DriverStats::default();
    if m == 0 || n == 0 {
        return Ok(stats);
    }
    crate::driver::check_config(bus, cfg, &mut stats)?;
    let row = cfg.fm_row_words();
    let slot_words = job.slot_words(row);
    let slots = ConvGeom::slots(slot_words, cfg.fm_depth).map_err(DriverError::Geometry)?;
    let pix = job.pixels().max(1);
    let mut kstep = cfg.buffer_depth;
    let span = match job.op {
        // A K chunk walks whole images in the ring: with one slot, chunks end at image
        // boundaries (a divisor of the image's pixels); with more, a chunk may start anywhere.
        ConvOp::BackwardWeights => {
            if slots >= 2 {
                kstep = kstep.min((slots - 1) * pix + 1);
            } else {
                kstep = (1..=kstep.min(pix))
                    .rev()
                    .find(|&d| pix.is_multiple_of(d))
                    .unwrap_or(1);
            }
            1
        }
        // A tile of `size` pixel rows may start anywhere in an image.
        _ => (cfg.size - 1).div_ceil(pix) + 1,
    };
    if span > slots {
        return Err(DriverError::FeatureMapTooSmall {
            needed: span * slot_words,
            fm_depth: cfg.fm_depth,
        });
    }
    let (a_cfg, b_cfg) = match job.op {
        ConvOp::Forward => (g.forward_a(slots, slot_words), None),
        ConvOp::BackwardInput => (g.backward_input_a(slots, slot_words), None),
        ConvOp::BackwardWeights => (
            g.backward_weights_a(slots, slot_words, g.in_words().next_multiple_of(row)),
            Some(g.backward_weights_b(slots, slot_words)),
        ),
    };
    let mut gathers = ConvGathers {
        job,
        size: cfg.size,
        a: Engine::new(
            a_cfg,
            regmap::GA_CFG,
            regmap::GA_CMD,
            regmap::STATUS_GATHER_A,
        ),
        b: b_cfg.map(|c| Engine::new(c, regmap::GB_CFG, regmap::GB_CMD, regmap::STATUS_GATHER_B)),
        slots,
        slot_words,
        row,
        loaded: 0,
    };
    let conversion = Conversion {
        shift: job.shift,
        rounding: job.rounding,
        seed: job.seed,
    };
    let b_gathered = gathers.b.is_some();
    let mut run = Run::new(bus, cfg, job, conversion, Some(&mut gathers), stats);
    // With host-written weights as B and more than two column blocks, keep each weight block
    // in the two banks while the gathered tiles stream past it: weights cross the bus twice
    // per column block instead of once per tile. (With one or two column blocks, row order
    // already keeps them resident, and the lanes are kept between the two columns.)
    run.columns_outer = !b_gathered && n.div_ceil(cfg.size) > 2;
    run.execute(kstep, out)?;
    Ok(run.stats)
}

#[cfg(test)]
mod tests;
