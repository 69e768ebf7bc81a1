//! A gather engine of the conv unit: fills rows `0..klen` of one A or B bank from the
//! feature-map buffer, generating every im2col address on chip (`systole_core::gather`).
//!
//! Each lane has a read port on the feature map (in hardware, one true dual-port block-RAM
//! copy per pair of lanes, all written together, a row of words per clock through both ports,
//! from the feature-map port), so all lanes read a word per clock and a bank fills at one row
//! per clock, the rate at which the array consumes it; a clock that writes a feature-map row
//! pauses the reads (the write takes the ports). A command runs: one cycle to load walker
//! start states, `size` cycles to step the lane walker into the lane registers (skipped when
//! the lanes are kept), then `klen` cycles of reads; each read lands in the bank one cycle
//! later. `busy` stays high until the last row is written. The first read waits while an
//! array command (running or waiting) reads the target bank, so the driver may start the fill
//! of the next command's bank while the previous command still computes from it.
//!
//! `GatherEngine::kernel` (with the [`Walker`] and [`FmRam`] blocks) is the engine as rust-hdl
//! simulates it; the Verilog that Verilator and the FPGA flows see is `hdl/verilog/gather.v`,
//! whose registers sit in clocked blocks so that an idle engine costs the simulator next to
//! nothing (`verilog.rs` fixes its parameters and joins its ports to rust-hdl's).

use crate::fm_ram::FmRam;
use crate::walker::Walker;
use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::config::{MAX_FM_DEPTH, MAX_SIZE, MIN_FM_DEPTH, MIN_SIZE};
use systole_core::gather::{layout, WALK_WORDS, WORDS};
use systole_core::regmap::gcmd;

// `kernel` slices at literal offsets (all rust-hdl's `hdl_gen` accepts); they are those of
// `systole_core::gather::layout` and `regmap::gcmd`, checked here at compile time. (The walker's
// own fields are checked in `walker.rs`; `gather.v` gets them from the layout as parameters.)
const _: () = {
    const fn at(f: systole_core::field::Field, lsb: u32, width: u32) -> bool {
        f.lsb == lsb && f.width == width
    }
    assert!(WALK_WORDS == 17 && layout::LIMITS == 34 && layout::COUNT2_MOD == 1);
    assert!(at(layout::MODULUS, 16, 4) && at(layout::LIMIT_Y, 0, 16));
    assert!(at(layout::LIMIT_X, 16, 16) && at(gcmd::KLEN, 0, 17) && at(gcmd::BANK, 17, 1));
    assert!(at(gcmd::LANES, 18, 2) && at(gcmd::K_NEXT, 20, 1));
};

/// `k` default-constructed blocks or signals.
fn many<T: Default>(k: usize) -> Vec<T> {
    (0..k).map(|_| T::default()).collect()
}

/// A gather engine of `n` lanes (see the module docs).
#[derive(LogicBlock)]
pub struct GatherEngine {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: the engine goes idle.
    pub reset: Signal<In, Bit>,
    /// Register bus: index (the engine decodes its own `*_CFG` and `*_CMD`).
    pub reg_addr: Signal<In, Bits<8>>,
    /// Register bus: write data.
    pub reg_wdata: Signal<In, Bits<32>>,
    /// Register bus: write strobe.
    pub reg_we: Signal<In, Bit>,
    /// Feature-map row write strobe.
    pub fm_we: Signal<In, Bit>,
    /// Feature-map row (word address / row width).
    pub fm_row: Signal<In, Bits<16>>,
    /// Feature-map row words.
    pub fm_data: Vec<Signal<In, Signed<16>>>,
    /// Bank `b` (bit `b`) is read by a running or waiting array command: the first row of a
    /// fill into it waits (the interlock that lets the driver start a gather early).
    pub bank_busy: Signal<In, Bits<2>>,
    /// A command runs or its last row is not yet written.
    pub busy: Signal<Out, Bit>,
    /// A command was refused this cycle (engine busy, or `klen` 0 or above the depth).
    pub cmd_error: Signal<Out, Bit>,
    /// Write one bank row.
    pub wr_en: Signal<Out, Bit>,
    /// Bank written.
    pub wr_bank: Signal<Out, Bit>,
    /// Row written.
    pub wr_row: Signal<Out, Bits<16>>,
    /// Row data, one word per lane.
    pub wr_data: Vec<Signal<Out, Signed<16>>>,
    cfg: Vec<DFF<Bits<32>>>,
    lane_walk: Walker,
    k_walk: Walker,
    fm: FmRam,
    l_qy: Vec<DFF<Bits<16>>>,
    l_qx: Vec<DFF<Bits<16>>>,
    l_ry: Vec<DFF<Bits<4>>>,
    l_rx: Vec<DFF<Bits<4>>>,
    l_addr: Vec<DFF<Bits<24>>>,
    y: Vec<Signal<Local, Bits<16>>>,
    x: Vec<Signal<Local, Bits<16>>>,
    a: Vec<Signal<Local, Bits<24>>>,
    inside: Vec<Signal<Local, Bit>>,
    vd: Vec<DFF<Bit>>,
    /// 0 idle, 1 start (walker loads), 2 setup (lane walk), 3 run (bank rows).
    state: DFF<Bits<2>>,
    count: DFF<Bits<17>>,
    klen: DFF<Bits<17>>,
    bank: DFF<Bit>,
    lane_mode: DFF<Bits<2>>,
    k_next: DFF<Bit>,
    we_d: DFF<Bit>,
    row_d: DFF<Bits<17>>,
    cmd_write: Signal<Local, Bit>,
    hold: Signal<Local, Bit>,
    new_klen: Signal<Local, Bits<17>>,
    a_cfg: Constant<Bits<8>>,
    a_cmd: Constant<Bits<8>>,
    depth: Constant<Bits<17>>,
    lanes_last: Constant<Bits<17>>,
    enabled: Constant<Bit>,
    _n: usize,
    _row_words: usize,
    _words_last: usize,
    _words: usize,
    _fm_words: usize,
    _enabled: bool,
    _word_bits: u32,
}

impl GatherEngine {
    /// An engine of `n` lanes answering at registers `cfg_addr` / `cmd_addr`, filling banks of
    /// `depth` rows, with `fm_depth` words of `word_bits` bits (`W`) of feature map per lane.
    /// Its ports carry 16-bit words, as the core does: the map keeps the low `W` bits of each
    /// word written and the lanes' words come out sign-extended. With `fm_depth` 0 the engine
    /// is absent: its outputs are constant (every command is refused), so synthesis removes it.
    pub fn new(
        n: usize,
        cfg_addr: u8,
        cmd_addr: u8,
        depth: usize,
        fm_depth: usize,
        word_bits: u32,
    ) -> Result<Self, HdlError> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&n)
            || (fm_depth != 0
                && (!fm_depth.is_power_of_two()
                    || !(MIN_FM_DEPTH..=MAX_FM_DEPTH).contains(&fm_depth)))
        {
            return Err(HdlError::Block(format!(
                "gather engine with {n} lanes and a {fm_depth}-word feature map: need {MIN_SIZE}..={MAX_SIZE} lanes and 0 or a power of two in {MIN_FM_DEPTH}..={MAX_FM_DEPTH}"
            )));
        }
        let enabled = fm_depth != 0;
        let fm_words = fm_depth.max(MIN_FM_DEPTH);
        // Rows of the largest power of two of words not above the lane count.
        let row_words = 1usize << (usize::BITS - 1 - n.leading_zeros());
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            reg_addr: Default::default(),
            reg_wdata: Default::default(),
            reg_we: Default::default(),
            fm_we: Default::default(),
            fm_row: Default::default(),
            fm_data: many(row_words),
            bank_busy: Default::default(),
            busy: Default::default(),
            cmd_error: Default::default(),
            wr_en: Default::default(),
            wr_bank: Default::default(),
            wr_row: Default::default(),
            wr_data: many(n),
            cfg: many(WORDS),
            lane_walk: Walker::new()?,
            k_walk: Walker::new()?,
            fm: FmRam::new(fm_words, row_words, n, word_bits)?,
            l_qy: many(n),
            l_qx: many(n),
            l_ry: many(n),
            l_rx: many(n),
            l_addr: many(n),
            y: many(n),
            x: many(n),
            a: many(n),
            inside: many(n),
            vd: many(n),
            state: Default::default(),
            count: Default::default(),
            klen: Default::default(),
            bank: Default::default(),
            lane_mode: Default::default(),
            k_next: Default::default(),
            we_d: Default::default(),
            row_d: Default::default(),
            cmd_write: Default::default(),
            hold: Default::default(),
            new_klen: Default::default(),
            a_cfg: Constant::new(bits(cfg_addr as u64)),
            a_cmd: Constant::new(bits(cmd_addr as u64)),
            depth: Constant::new(bits(depth as u64)),
            lanes_last: Constant::new(bits(n as u64 - 1)),
            enabled: Constant::new(enabled),
            _n: n,
            _row_words: row_words,
            _words_last: WORDS - 1,
            _words: WORDS,
            _fm_words: fm_words,
            _enabled: enabled,
            _word_bits: word_bits,
        })
    }

    fn n_last(&self) -> usize {
        self._n - 1
    }
}

impl Logic for GatherEngine {
    fn update(&mut self) {
        GatherEngine::kernel(self);
    }

    fn connect(&mut self) {
        GatherEngine::connect(self);
    }

    /// The hand-written Verilog (see `verilog`); rust-hdl still emits the walker, feature-map
    /// and register submodules, which nothing instantiates: `generate_verilog` drops them.
    fn hdl(&self) -> Verilog {
        Verilog::Wrapper(Wrapper {
            code: verilog::engine_verilog(&verilog::EngineShape {
                n: self._n,
                row_words: self._row_words,
                fm_words: self._fm_words,
                enabled: self._enabled,
                word_bits: self._word_bits,
            }),
            cores: String::new(),
        })
    }
}

#[cfg(test)]
impl crate::differential::Model for GatherEngine {
    fn model_hdl(&self) -> Verilog {
        GatherEngine::hdl(self)
    }
}

/// The engine's logic as rust-hdl simulates it. `#[hdl_gen]` derives `connect` (used above)
/// and a `hdl` of its own, which the hand-written Verilog replaces.
impl GatherEngine {
    #[hdl_gen]
    fn kernel(&mut self) {
        dff_setup!(self, clock, state, count, klen, bank, lane_mode, k_next, we_d, row_d);
        for i in 0..self._words {
            self.cfg[i].clock.next = self.clock.val();
            self.cfg[i].d.next = self.cfg[i].q.val();
        }
        // Configuration: each write shifts one word in at the end.
        if self.reg_we.val() & (self.reg_addr.val() == self.a_cfg.val()) {
            for i in 0..self._words_last {
                self.cfg[i].d.next = self.cfg[i + 1].q.val();
            }
            for w in self._words_last..self._words {
                self.cfg[w].d.next = self.reg_wdata.val();
            }
        }
        self.fm.clock.next = self.clock.val();
        self.fm.we.next = self.fm_we.val();
        self.fm.w_row.next = self.fm_row.val();
        self.fm.re.next = self.state.q.val() == 3;
        for w in 0..self._row_words {
            self.fm.w_data[w].next = self.fm_data[w].val();
        }
        self.lane_walk.clock.next = self.clock.val();
        self.k_walk.clock.next = self.clock.val();
        for i in 0..17 {
            self.lane_walk.cfg[i].next = self.cfg[i].q.val();
            self.k_walk.cfg[i].next = self.cfg[i + 17].q.val();
        }
        self.lane_walk.modulus.next = self.cfg[1].q.val().get_bits::<4>(16);
        self.k_walk.modulus.next = self.cfg[1].q.val().get_bits::<4>(16);
        self.lane_walk.load.next = false;
        self.lane_walk.step.next = false;
        self.k_walk.load.next = false;
        self.k_walk.step.next = false;
        // Lanes: the gathered word of this row, and the feature-map copies.
        for i in 0..self._n {
            self.y[i].next = self.l_qy[i].q.val() + self.k_walk.qy.val();
            self.x[i].next = self.l_qx[i].q.val() + self.k_walk.qx.val();
            self.a[i].next = self.l_addr[i].q.val() + self.k_walk.addr.val();
            self.inside[i].next = (self.l_ry[i].q.val() == self.k_walk.ry.val())
                & (self.l_rx[i].q.val() == self.k_walk.rx.val())
                & (self.y[i].val() < self.cfg[34].q.val().get_bits::<16>(0))
                & (self.x[i].val() < self.cfg[34].q.val().get_bits::<16>(16));
            self.fm.r_addr[i].next = self.a[i].val().get_bits::<16>(0);
            self.l_qy[i].clock.next = self.clock.val();
            self.l_qx[i].clock.next = self.clock.val();
            self.l_ry[i].clock.next = self.clock.val();
            self.l_rx[i].clock.next = self.clock.val();
            self.l_addr[i].clock.next = self.clock.val();
            self.vd[i].clock.next = self.clock.val();
            self.l_qy[i].d.next = self.l_qy[i].q.val();
            self.l_qx[i].d.next = self.l_qx[i].q.val();
            self.l_ry[i].d.next = self.l_ry[i].q.val();
            self.l_rx[i].d.next = self.l_rx[i].q.val();
            self.l_addr[i].d.next = self.l_addr[i].q.val();
            self.vd[i].d.next = self.inside[i].val();
            self.wr_data[i].next = 0.into();
            if self.vd[i].q.val() {
                self.wr_data[i].next = self.fm.r_data[i].val();
            }
        }
        self.we_d.d.next = false;
        self.new_klen.next = self.reg_wdata.val().get_bits::<17>(0);
        self.cmd_write.next = self.reg_we.val() & (self.reg_addr.val() == self.a_cmd.val());
        self.cmd_error.next = false;
        if self.cmd_write.val() {
            if (self.state.q.val() != 0)
                | self.we_d.q.val()
                | (self.new_klen.val() == 0)
                | (self.new_klen.val() > self.depth.val())
            {
                self.cmd_error.next = true;
            } else {
                self.klen.d.next = self.new_klen.val();
                self.bank.d.next = self.reg_wdata.val().get_bit(17);
                self.lane_mode.d.next = self.reg_wdata.val().get_bits::<2>(18);
                self.k_next.d.next = self.reg_wdata.val().get_bit(20);
                self.state.d.next = 1.into();
            }
        }
        if self.state.q.val() == 1 {
            self.lane_walk.load.next = self.lane_mode.q.val() == 0;
            self.k_walk.load.next = !self.k_next.q.val();
            self.count.d.next = 0.into();
            self.state.d.next = 2.into();
            if self.lane_mode.q.val() == 2 {
                self.state.d.next = 3.into();
            }
        }
        if self.state.q.val() == 2 {
            // The lane walker's states shift in from the top lane: after `n` steps lane `l`
            // holds the state after `l` steps.
            self.lane_walk.step.next = true;
            for i in 0..self.n_last() {
                self.l_qy[i].d.next = self.l_qy[i + 1].q.val();
                self.l_qx[i].d.next = self.l_qx[i + 1].q.val();
                self.l_ry[i].d.next = self.l_ry[i + 1].q.val();
                self.l_rx[i].d.next = self.l_rx[i + 1].q.val();
                self.l_addr[i].d.next = self.l_addr[i + 1].q.val();
            }
            for t in self.n_last()..self._n {
                self.l_qy[t].d.next = self.lane_walk.qy.val();
                self.l_qx[t].d.next = self.lane_walk.qx.val();
                self.l_ry[t].d.next = self.lane_walk.ry.val();
                self.l_rx[t].d.next = self.lane_walk.rx.val();
                self.l_addr[t].d.next = self.lane_walk.addr.val();
            }
            self.count.d.next = self.count.q.val() + 1;
            if self.count.q.val() == self.lanes_last.val() {
                self.count.d.next = 0.into();
                self.state.d.next = 3.into();
            }
        }
        // The first row waits while an array command still reads (or will read) the bank,
        // and every row while a feature-map row is written (in hardware the write takes the
        // block RAMs' read ports).
        self.hold.next =
            ((self.count.q.val() == 0) & self.bank_busy.val().get_bit(0)) | self.fm_we.val();
        if self.bank.q.val() {
            self.hold.next =
                ((self.count.q.val() == 0) & self.bank_busy.val().get_bit(1)) | self.fm_we.val();
        }
        if (self.state.q.val() == 3) & !self.hold.val() {
            self.k_walk.step.next = true;
            self.we_d.d.next = true;
            self.row_d.d.next = self.count.q.val();
            self.count.d.next = self.count.q.val() + 1;
            if (self.count.q.val() + 1) == self.klen.q.val() {
                self.state.d.next = 0.into();
            }
        }
        if self.reset.val() {
            self.state.d.next = 0.into();
            self.we_d.d.next = false;
        }
        self.busy.next = self.enabled.val() & ((self.state.q.val() != 0) | self.we_d.q.val());
        self.wr_en.next = self.enabled.val() & self.we_d.q.val();
        if !self.enabled.val() {
            self.cmd_error.next = self.cmd_write.val();
        }
        self.wr_bank.next = self.bank.q.val();
        self.wr_row.next = self.row_d.q.val().get_bits::<16>(0);
    }
}

#[cfg(test)]
mod tests;
mod verilog;
