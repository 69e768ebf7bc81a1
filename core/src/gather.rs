//! The conv unit's address walk: how a gather engine turns a feature map held on chip into the
//! rows of an A or B bank, with no expanded (im2col) matrix ever crossing the bus.
//!
//! A gather engine has `size` lanes and two *walkers*. The lane walker is stepped `size` times
//! when a command starts, and lane `l` keeps the walker's state after `l` steps; the K walker
//! is stepped once per bank row. Row `k`, lane `l` of the bank receives
//!
//! ```text
//!   fm[(lane.addr + kw.addr) mod fm_depth]  if lane.r == kw.r (both axes) and
//!                                           lane.q + kw.q < limit (both axes, unsigned 16-bit)
//!   0                                       otherwise (zero padding, or a stride that misses)
//! ```
//!
//! A walker is a 3-level mixed-radix counter (level 0 innermost, counts `n0`, `n1`, `n2`).
//! Its state is three counters, two coordinates `(q, r)` (y and x) and an address. One step
//! moves exactly one level: the lowest whose counter is not at its last position (`count - 1`)
//! counts up and the levels below it reset to 0; when all three are at their last position
//! all reset (the "level 3" step, which lets a lane walk cycle through a ring of image slots).
//! The step adds that level's `dq[l]` to `q`, `dr[l]` to `r`, `da[l]` to the address: the
//! increments are relative, so they include rewinding the lower levels. When `r + dr[l]`
//! reaches the modulus it wraps (subtracting the modulus) and the *carry* adds `cq` to `q` and
//! `ca` to the
//! address. Every quantity is an integer the firmware computes once per convolution
//! ([`ConvGeom`]'s builders), so the hardware needs adders and comparators only, no multiplier
//! or divider. The remainder `r` is how the gradient with respect to the input handles a
//! stride: an output position exists only where the stride divides the offset.
//!
//! Register interface: the [`WORDS`] configuration words are shifted in through `GA_CFG` /
//! `GB_CFG` in the order of [`GatherConfig::words`] (bit layout: [`layout`]); `GA_CMD` /
//! `GB_CMD` start a gather (`regmap::gather_command`). docs/HARDWARE.md is the programming guide.

/// Configuration words of one gather engine.
pub const WORDS: usize = 2 * WALK_WORDS + 1;
/// Configuration words of one walker.
pub const WALK_WORDS: usize = 17;
/// Width of walker addresses (wrapping at 2^24).
pub const ADDR_MASK: u32 = layout::DA.max();
/// Largest remainder modulus (a stride) the walkers support.
pub const MAX_MODULUS: u32 = layout::MODULUS.max();
/// Largest padded input side and channel count a convolution may have (the walkers' 16-bit
/// coordinates stay below 2^15 with room for a kernel step).
pub const MAX_DIM: usize = 16383;
/// Level-0 count meaning "never wraps" for walks whose outer levels are never reached.
pub const UNBOUNDED: u16 = 0xFFFF;

/// Where a walker is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkState {
    /// Level counters.
    pub idx: [u16; 3],
    /// Coordinates `(y, x)` (two's complement, 16 bits).
    pub q: [u16; 2],
    /// Remainders `(y, x)`, below the modulus.
    pub r: [u8; 2],
    /// Address (24 bits, wrapping).
    pub addr: u32,
}

/// One walker's configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// Counts of levels 0, 1, 2 (each at least 1).
    pub counts: [u16; 3],
    /// Per level 0..=3: coordinate steps `(y, x)`.
    pub dq: [[u16; 2]; 4],
    /// Per level 0..=3: remainder steps `(y, x)`, below the modulus.
    pub dr: [[u8; 2]; 4],
    /// Per level 0..=3: address step (24 bits).
    pub da: [u32; 4],
    /// Carry into the coordinate `(y, x)`.
    pub cq: [u16; 2],
    /// Carry into the address `(y, x)` (24 bits).
    pub ca: [u32; 2],
    /// Start state.
    pub start: WalkState,
}

impl Walk {
    /// One step from `s` (the hardware's rule, bit for bit).
    pub fn step(&self, s: &WalkState, modulus: u8) -> WalkState {
        let last = |i: usize| s.idx[i].wrapping_add(1) == self.counts[i];
        let level = if !last(0) {
            0
        } else if !last(1) {
            1
        } else if !last(2) {
            2
        } else {
            3
        };
        let mut n = *s;
        match level {
            0 => n.idx[0] = s.idx[0].wrapping_add(1),
            1 => n.idx = [0, s.idx[1].wrapping_add(1), s.idx[2]],
            2 => n.idx = [0, 0, s.idx[2].wrapping_add(1)],
            _ => n.idx = [0, 0, 0],
        }
        let mut addr = s.addr.wrapping_add(self.da[level]);
        for axis in 0..2 {
            let sum = s.r[axis].wrapping_add(self.dr[level][axis]);
            let carry = sum >= modulus;
            n.r[axis] = if carry {
                sum.wrapping_sub(modulus)
            } else {
                sum
            };
            n.q[axis] = s.q[axis].wrapping_add(self.dq[level][axis]);
            if carry {
                n.q[axis] = n.q[axis].wrapping_add(self.cq[axis]);
                addr = addr.wrapping_add(self.ca[axis]);
            }
        }
        n.addr = addr & ADDR_MASK;
        n
    }

    /// The configuration words, in shift-in order ([`layout`]).
    pub fn words(&self) -> [u32; WALK_WORDS] {
        use layout::*;
        let mut w = [0u32; WALK_WORDS];
        let c = |x: u16| u32::from(x);
        w[COUNTS01] = COUNT0.put(c(self.counts[0])) | COUNT1.put(c(self.counts[1]));
        w[COUNT2_MOD] = COUNT2.put(c(self.counts[2]));
        for l in 0..4 {
            w[step_q_word(l)] = DQ_Y.put(c(self.dq[l][0])) | DQ_X.put(c(self.dq[l][1]));
            w[step_a_word(l)] = DA.put(self.da[l])
                | DR_Y.put(u32::from(self.dr[l][0]))
                | DR_X.put(u32::from(self.dr[l][1]));
        }
        w[CARRY_Q] = CQ_Y.put(c(self.cq[0])) | CQ_X.put(c(self.cq[1]));
        w[CARRY_A_Y] = CA_Y.put(self.ca[0]);
        w[CARRY_A_X] = CA_X.put(self.ca[1]);
        let s = &self.start;
        w[START_IDX01] = START_IDX0.put(c(s.idx[0])) | START_IDX1.put(c(s.idx[1]));
        w[START_IDX2_R] = START_IDX2.put(c(s.idx[2]))
            | START_RY.put(u32::from(s.r[0]))
            | START_RX.put(u32::from(s.r[1]));
        w[START_Q] = START_QY.put(c(s.q[0])) | START_QX.put(c(s.q[1]));
        w[START_ADDR] = ADDR.put(s.addr);
        w
    }
}

/// Everything one gather engine is configured with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherConfig {
    /// The lane walk.
    pub lanes: Walk,
    /// The K walk.
    pub k: Walk,
    /// Remainder modulus of both walks (1 when no remainders are used), `1..=15`.
    pub modulus: u8,
    /// Coordinate limits `(y, x)`: a word is gathered only where `0 <= q < limit`.
    pub limit: [u16; 2],
}

impl GatherConfig {
    /// The [`WORDS`] configuration words in shift-in order: the lane walk (its word 1 also
    /// carries the modulus in bits 16..20), the K walk, then the limits.
    pub fn words(&self) -> [u32; WORDS] {
        let mut w = [0u32; WORDS];
        w[..WALK_WORDS].copy_from_slice(&self.lanes.words());
        w[layout::COUNT2_MOD] |= layout::MODULUS.put(u32::from(self.modulus));
        w[WALK_WORDS..2 * WALK_WORDS].copy_from_slice(&self.k.words());
        w[layout::LIMITS] = layout::LIMIT_Y.put(u32::from(self.limit[0]))
            | layout::LIMIT_X.put(u32::from(self.limit[1]));
        w
    }

    /// The word lane state `lane` and K state `k` gather from `fm` (`fm.len()` a power of
    /// two): the reference the hardware is checked against.
    pub fn value(&self, lane: &WalkState, k: &WalkState, fm: &[i16]) -> i16 {
        let inside = |axis: usize| {
            lane.r[axis] == k.r[axis] && lane.q[axis].wrapping_add(k.q[axis]) < self.limit[axis]
        };
        if inside(0) && inside(1) {
            let addr = lane.addr.wrapping_add(k.addr) & ADDR_MASK;
            fm[addr as usize & (fm.len() - 1)]
        } else {
            0
        }
    }
}

/// A 2-D convolution as the conv unit sees it (square kernel; equal stride and zero padding in
/// both axes), plus how its feature maps are laid out in the feature-map buffer: a ring of
/// `slots` image slots of `slot_words` words each; slot `b % slots` holds image `b`'s input
/// map (`in_ch x in_h x in_w`, at offset 0) and, for the weight gradient, its output gradient
/// (`out_ch x out_h x out_w`, after the input at a row-aligned offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeom {
    /// Input channels.
    pub in_ch: usize,
    /// Input height.
    pub in_h: usize,
    /// Input width.
    pub in_w: usize,
    /// Output channels.
    pub out_ch: usize,
    /// Kernel height and width.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
}

/// Why a convolution cannot run on the conv unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GeomError {
    /// A dimension is zero.
    Shape,
    /// The kernel is larger than the padded input.
    KernelTooLarge {
        /// Kernel height and width.
        kernel: usize,
        /// Padded input height.
        padded_h: usize,
        /// Padded input width.
        padded_w: usize,
    },
    /// The stride exceeds [`MAX_MODULUS`].
    Stride(usize),
    /// A dimension exceeds the walkers' 15-bit coordinates.
    TooLarge(usize),
    /// One image slot does not fit the feature-map buffer.
    SlotTooLarge {
        /// Words one slot needs.
        words: usize,
        /// The buffer's words.
        fm_depth: usize,
    },
}

impl core::fmt::Display for GeomError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GeomError::Shape => write!(f, "convolution dimensions must all be positive"),
            GeomError::KernelTooLarge { kernel, padded_h, padded_w } => write!(f, "kernel {kernel} is larger than the padded input {padded_h}x{padded_w}"),
            GeomError::Stride(s) => write!(f, "stride {s} exceeds the conv unit's limit of {MAX_MODULUS}"),
            GeomError::TooLarge(d) => write!(f, "dimension {d} exceeds the conv unit's limit of {MAX_DIM}"),
            GeomError::SlotTooLarge { words, fm_depth } => write!(
                f,
                "one image needs {words} words of feature-map buffer but it holds {fm_depth}: build the array with a larger fm_depth"
            ),
        }
    }
}

/// Builds a walker from the unit increments of its levels, in *value* units: `inc[l]` is what
/// one count of level `l` adds to `(vy, vx, base address)`; `inc[3]` is where the level-3 step
/// (level 2 wrapping) lands relative to the walk's origin: 0 for a ring of slots. Values
/// are stored as `q = sign * floor(v / modulus)`, `r = v mod modulus`; the address is
/// `base + wy * q_y + q_x`.
fn build(
    counts: [u16; 3],
    inc: [[i64; 3]; 4],
    start: [i64; 3],
    modulus: i64,
    sign: i64,
    wy: i64,
) -> Walk {
    let split = |v: i64| (sign * v.div_euclid(modulus), v.rem_euclid(modulus));
    let mut w = Walk {
        counts,
        cq: [sign as u16, sign as u16],
        ca: [((sign * wy) as u32) & ADDR_MASK, (sign as u32) & ADDR_MASK],
        ..Walk::default()
    };
    for level in 0..4 {
        // A step at `level` resets every lower level to 0.
        let mut d = inc[level];
        for (lower, &count) in counts.iter().enumerate().take(level.min(3)) {
            for (dv, iv) in d.iter_mut().zip(inc[lower]) {
                *dv -= (i64::from(count) - 1) * iv;
            }
        }
        let (qy, ry) = split(d[0]);
        let (qx, rx) = split(d[1]);
        w.dq[level] = [qy as u16, qx as u16];
        w.dr[level] = [ry as u8, rx as u8];
        w.da[level] = ((d[2] + wy * qy + qx) as u32) & ADDR_MASK;
    }
    let (qy, ry) = split(start[0]);
    let (qx, rx) = split(start[1]);
    w.start = WalkState {
        idx: [0; 3],
        q: [qy as u16, qx as u16],
        r: [ry as u8, rx as u8],
        addr: ((start[2] + wy * qy + qx) as u32) & ADDR_MASK,
    };
    w
}

/// The three training ops' gathered operands.
impl ConvGeom {
    /// Output height.
    pub fn out_h(&self) -> usize {
        (self.in_h + 2 * self.pad - self.kernel) / self.stride + 1
    }

    /// Output width.
    pub fn out_w(&self) -> usize {
        (self.in_w + 2 * self.pad - self.kernel) / self.stride + 1
    }

    /// Checks the geometry is a convolution at all: every dimension positive, the kernel no
    /// larger than the padded input (the one shape check, also of the golden model's
    /// `Conv2dGeom`).
    pub fn check_shape(&self) -> Result<(), GeomError> {
        let g = self;
        if g.in_ch == 0
            || g.in_h == 0
            || g.in_w == 0
            || g.out_ch == 0
            || g.kernel == 0
            || g.stride == 0
        {
            return Err(GeomError::Shape);
        }
        let (padded_h, padded_w) = (g.in_h + 2 * g.pad, g.in_w + 2 * g.pad);
        if g.kernel > padded_h || g.kernel > padded_w {
            return Err(GeomError::KernelTooLarge {
                kernel: g.kernel,
                padded_h,
                padded_w,
            });
        }
        Ok(())
    }

    /// Checks the geometry is a convolution ([`Self::check_shape`]) that fits the walkers.
    pub fn check(&self) -> Result<(), GeomError> {
        let g = self;
        g.check_shape()?;
        if g.stride > MAX_MODULUS as usize {
            return Err(GeomError::Stride(g.stride));
        }
        for d in [g.in_h + 2 * g.pad, g.in_w + 2 * g.pad, g.in_ch, g.out_ch] {
            if d > MAX_DIM {
                return Err(GeomError::TooLarge(d));
            }
        }
        Ok(())
    }

    /// Words of one image's input map.
    pub fn in_words(&self) -> usize {
        self.in_ch * self.in_h * self.in_w
    }

    /// Words of one image's output (gradient) map.
    pub fn out_words(&self) -> usize {
        self.out_ch * self.out_h() * self.out_w()
    }

    /// Image slots of `slot_words` words that fit `fm_depth` (at most [`UNBOUNDED`]).
    pub fn slots(slot_words: usize, fm_depth: usize) -> Result<usize, GeomError> {
        if slot_words > fm_depth {
            return Err(GeomError::SlotTooLarge {
                words: slot_words,
                fm_depth,
            });
        }
        Ok((fm_depth / slot_words.max(1)).min(UNBOUNDED as usize))
    }

    /// A pixel walk over `(image, row, col)` with `rows x cols` positions per image, through a
    /// ring of `slots` slots of `slot` words; `step` is the value step per row/col.
    #[allow(clippy::too_many_arguments)]
    fn pixel_walk(
        rows: usize,
        cols: usize,
        slots: usize,
        slot: usize,
        step: i64,
        first: i64,
        base: i64,
        modulus: i64,
        wy: i64,
    ) -> Walk {
        let sl = slot as i64;
        build(
            [cols as u16, rows as u16, slots as u16],
            [[0, step, 0], [step, 0, 0], [0, 0, sl], [0, 0, 0]],
            [first, first, base],
            modulus,
            1,
            wy,
        )
    }

    /// A kernel walk over `(channel, ky, kx)`: `plane` words per channel, `sign` -1 for the
    /// flipped kernel of the input gradient.
    fn kernel_walk(&self, plane: usize, modulus: i64, sign: i64, wy: i64) -> Walk {
        let k = self.kernel as u16;
        let p = plane as i64;
        build(
            [k, k, UNBOUNDED],
            [[0, 1, 0], [1, 0, 0], [0, 0, p], [0, 0, 0]],
            [0, 0, 0],
            modulus,
            sign,
            wy,
        )
    }

    /// Forward: the A operand `im2col(x)`, lanes = output pixels `(b, oy, ox)`, K = `(ci, ky, kx)`.
    /// Slot `b % slots` holds `x[b]` at offset 0.
    pub fn forward_a(&self, slots: usize, slot_words: usize) -> GatherConfig {
        let (s, p, w) = (self.stride as i64, self.pad as i64, self.in_w as i64);
        GatherConfig {
            lanes: Self::pixel_walk(
                self.out_h(),
                self.out_w(),
                slots,
                slot_words,
                s,
                -p,
                0,
                1,
                w,
            ),
            k: self.kernel_walk(self.in_h * self.in_w, 1, 1, w),
            modulus: 1,
            limit: [self.in_h as u16, self.in_w as u16],
        }
    }

    /// Gradient with respect to the input: the A operand `gather(dy)`, lanes = input pixels
    /// `(b, y, x)`, K = `(co, ky, kx)`. Slot `b % slots` holds `dy[b]` at offset 0.
    pub fn backward_input_a(&self, slots: usize, slot_words: usize) -> GatherConfig {
        let (s, p, ow) = (self.stride as i64, self.pad as i64, self.out_w() as i64);
        GatherConfig {
            lanes: Self::pixel_walk(self.in_h, self.in_w, slots, slot_words, 1, p, 0, s, ow),
            k: self.kernel_walk(self.out_h() * self.out_w(), s, -1, ow),
            modulus: self.stride as u8,
            limit: [self.out_h() as u16, self.out_w() as u16],
        }
    }

    /// Weight gradient, A operand `dy_rowsᵀ`: lanes = output channels, K = `(b, oy, ox)`.
    /// Slot `b % slots` holds `dy[b]` at offset `dy_offset` (at least `in_words()`).
    pub fn backward_weights_a(
        &self,
        slots: usize,
        slot_words: usize,
        dy_offset: usize,
    ) -> GatherConfig {
        let plane = (self.out_h() * self.out_w()) as i64;
        let ow = self.out_w() as i64;
        let lanes = build(
            [UNBOUNDED, UNBOUNDED, UNBOUNDED],
            [[0, 0, plane]; 4],
            [0, 0, dy_offset as i64],
            1,
            1,
            0,
        );
        GatherConfig {
            lanes,
            k: Self::pixel_walk(
                self.out_h(),
                self.out_w(),
                slots,
                slot_words,
                1,
                0,
                0,
                1,
                ow,
            ),
            modulus: 1,
            limit: [self.out_h() as u16, self.out_w() as u16],
        }
    }

    /// Weight gradient, B operand `im2col(x)`: lanes = `(ci, ky, kx)`, K = `(b, oy, ox)`.
    /// Slot `b % slots` holds `x[b]` at offset 0.
    pub fn backward_weights_b(&self, slots: usize, slot_words: usize) -> GatherConfig {
        let (s, p, w) = (self.stride as i64, self.pad as i64, self.in_w as i64);
        GatherConfig {
            lanes: self.kernel_walk(self.in_h * self.in_w, 1, 1, w),
            k: Self::pixel_walk(
                self.out_h(),
                self.out_w(),
                slots,
                slot_words,
                s,
                -p,
                0,
                1,
                w,
            ),
            modulus: 1,
            limit: [self.in_h as u16, self.in_w as u16],
        }
    }
}

/// The state after `n` steps from `from` (how the driver finds a walk's position without
/// division; `n` is at most one image's worth in practice).
pub fn advance(walk: &Walk, from: &WalkState, modulus: u8, n: usize) -> WalkState {
    let mut s = *from;
    for _ in 0..n {
        s = walk.step(&s, modulus);
    }
    s
}

/// A gather engine's command semantics in software: what the hardware writes into a bank.
/// The firmware's test double and the HDL tests use it as the reference.
#[derive(Clone, Copy, Debug)]
pub struct EngineModel {
    size: usize,
    lane_walker: WalkState,
    k_walker: WalkState,
    lanes: [WalkState; MAX_LANES],
}

/// Lanes an [`EngineModel`] supports (the largest array).
pub const MAX_LANES: usize = 64;

impl EngineModel {
    /// An engine of `size` lanes (`<= MAX_LANES`), walkers at zero as after reset.
    pub fn new(size: usize) -> Self {
        EngineModel {
            size: size.min(MAX_LANES),
            lane_walker: WalkState::default(),
            k_walker: WalkState::default(),
            lanes: [WalkState::default(); MAX_LANES],
        }
    }

    /// Runs one command: calls `row(k, words)` for bank rows `k = 0..klen` in order.
    pub fn run(
        &mut self,
        cfg: &GatherConfig,
        klen: usize,
        lanes: crate::regmap::LaneMode,
        k_next: bool,
        fm: &[i16],
        mut row: impl FnMut(usize, &[i16]),
    ) {
        use crate::regmap::LaneMode;
        if lanes == LaneMode::Load {
            self.lane_walker = cfg.lanes.start;
        }
        if !k_next {
            self.k_walker = cfg.k.start;
        }
        if lanes != LaneMode::Keep {
            for l in 0..self.size {
                self.lanes[l] = self.lane_walker;
                self.lane_walker = cfg.lanes.step(&self.lane_walker, cfg.modulus);
            }
        }
        let mut words = [0i16; MAX_LANES];
        for k in 0..klen {
            for (w, lane) in words.iter_mut().zip(&self.lanes[..self.size]) {
                *w = cfg.value(lane, &self.k_walker, fm);
            }
            row(k, &words[..self.size]);
            self.k_walker = cfg.k.step(&self.k_walker, cfg.modulus);
        }
    }
}

pub mod layout;

#[cfg(test)]
mod tests;
