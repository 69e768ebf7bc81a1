//! The accelerator core: buffers, controller, register file, array and converters wired
//! together. `generate_verilog` wraps it in the `top` module whose ports have the exact widths
//! of the configuration (see `crate::ports` and docs/HARDWARE.md); inside the core, row addresses
//! are 16 bits and tile rows 6 bits wide for every configuration.

use crate::array::Array;
use crate::buffers::LaneRam;
use crate::controller::Controller;
use crate::converter::ColumnConverter;
use crate::gather::GatherEngine;
use crate::regfile::RegFile;
use crate::HdlError;
use rust_hdl_core::prelude::*;
use systole_core::{regmap, ArrayConfig};

/// Width of the core's buffer row addresses (the wrapper zero-extends `log2(depth)` bits).
pub const CORE_ROW_BITS: usize = 16;
/// Width of the core's C tile-row address (the wrapper zero-extends `log2(n)` bits).
pub const CORE_TILE_ROW_BITS: usize = 6;

/// The accelerator core (ports as in ARCHITECTURE.md, address ports at their core widths).
#[derive(LogicBlock)]
pub struct Core {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset.
    pub reset: Signal<In, Bit>,
    /// Register index.
    pub reg_addr: Signal<In, Bits<8>>,
    /// Register write data.
    pub reg_wdata: Signal<In, Bits<32>>,
    /// Register write strobe.
    pub reg_we: Signal<In, Bit>,
    /// Register read data (combinational).
    pub reg_rdata: Signal<Out, Bits<32>>,
    /// Write one A row.
    pub a_wr_en: Signal<In, Bit>,
    /// A bank written.
    pub a_wr_bank: Signal<In, Bit>,
    /// A row written.
    pub a_wr_row: Signal<In, Bits<CORE_ROW_BITS>>,
    /// A row data, lane `r` = `A[i0 + r][k]`.
    pub a_wr_data: Vec<Signal<In, Signed<16>>>,
    /// Write one B row.
    pub b_wr_en: Signal<In, Bit>,
    /// B bank written.
    pub b_wr_bank: Signal<In, Bit>,
    /// B row written.
    pub b_wr_row: Signal<In, Bits<CORE_ROW_BITS>>,
    /// B row data, lane `c` = `B[k][j0 + c]`.
    pub b_wr_data: Vec<Signal<In, Signed<16>>>,
    /// C bank read.
    pub c_rd_bank: Signal<In, Bit>,
    /// C row read.
    pub c_rd_row: Signal<In, Bits<CORE_TILE_ROW_BITS>>,
    /// C row data (valid after the edge that sampled the address), lane `c` = `C[i0 + r][j0 + c]`.
    pub c_rd_data: Vec<Signal<Out, Signed<16>>>,
    /// Write one feature-map row (both gather engines' maps).
    pub fm_wr_en: Signal<In, Bit>,
    /// Feature-map row (word address / `fm_row_words`).
    pub fm_wr_row: Signal<In, Bits<16>>,
    /// Feature-map row words, word `i` at address `row * fm_row_words + i`.
    pub fm_wr_data: Vec<Signal<In, Signed<16>>>,
    regs: RegFile,
    ctrl: Controller,
    a_ram: Vec<LaneRam<CORE_ROW_BITS>>,
    b_ram: Vec<LaneRam<CORE_ROW_BITS>>,
    c_ram: Vec<LaneRam<CORE_TILE_ROW_BITS>>,
    array: Array,
    converters: Vec<ColumnConverter>,
    gather_a: GatherEngine,
    gather_b: GatherEngine,
    _n: usize,
    _fm_row_words: usize,
}

impl Core {
    /// The core of the accelerator described by `cfg` (checked first).
    pub fn new(cfg: &ArrayConfig) -> Result<Self, HdlError> {
        cfg.validate_built().map_err(HdlError::Config)?;
        let n = cfg.size;
        let aw = cfg.row_addr_bits() as usize;
        let tw = (cfg.tile_row_bits() as usize).max(1);
        let rams = |count: usize, bits: usize| -> Result<Vec<LaneRam<CORE_ROW_BITS>>, HdlError> {
            (0..count).map(|_| LaneRam::new(bits)).collect()
        };
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            reg_addr: Default::default(),
            reg_wdata: Default::default(),
            reg_we: Default::default(),
            reg_rdata: Default::default(),
            a_wr_en: Default::default(),
            a_wr_bank: Default::default(),
            a_wr_row: Default::default(),
            a_wr_data: (0..n).map(|_| Signal::default()).collect(),
            b_wr_en: Default::default(),
            b_wr_bank: Default::default(),
            b_wr_row: Default::default(),
            b_wr_data: (0..n).map(|_| Signal::default()).collect(),
            c_rd_bank: Default::default(),
            c_rd_row: Default::default(),
            c_rd_data: (0..n).map(|_| Signal::default()).collect(),
            fm_wr_en: Default::default(),
            fm_wr_row: Default::default(),
            fm_wr_data: (0..cfg.fm_row_words()).map(|_| Signal::default()).collect(),
            regs: RegFile::new(cfg)?,
            ctrl: Controller::new(n)?,
            a_ram: rams(n, aw)?,
            b_ram: rams(n, aw)?,
            c_ram: (0..n).map(|_| LaneRam::new(tw)).collect::<Result<_, _>>()?,
            array: Array::of(cfg)?,
            converters: (0..n)
                .map(|c| ColumnConverter::at(c, n, cfg.word_bits))
                .collect::<Result<_, _>>()?,
            gather_a: GatherEngine::new(
                n,
                regmap::GA_CFG,
                regmap::GA_CMD,
                cfg.buffer_depth,
                cfg.fm_depth,
                cfg.word_bits,
            )?,
            gather_b: GatherEngine::new(
                n,
                regmap::GB_CFG,
                regmap::GB_CMD,
                cfg.buffer_depth,
                cfg.fm_depth,
                cfg.word_bits,
            )?,
            _n: n,
            _fm_row_words: cfg.fm_row_words(),
        })
    }

    /// One past the size (a loop bound in the kernel, which binds `n` through a one-pass loop).
    fn n_end(&self) -> usize {
        self._n + 1
    }
}

impl Logic for Core {
    #[hdl_gen]
    fn update(&mut self) {
        self.regs.clock.next = self.clock.val();
        self.regs.reset.next = self.reset.val();
        self.regs.reg_addr.next = self.reg_addr.val();
        self.regs.reg_wdata.next = self.reg_wdata.val();
        self.regs.reg_we.next = self.reg_we.val();
        self.reg_rdata.next = self.regs.reg_rdata.val();
        self.regs.busy.next = self.ctrl.busy.val();
        self.regs.queue_full.next = self.ctrl.queue_full.val();
        self.regs.mac_inc.next = self.ctrl.mac.val();
        self.ctrl.clock.next = self.clock.val();
        self.ctrl.reset.next = self.reset.val();
        self.ctrl.cmd_valid.next = self.regs.cmd_valid.val();
        self.ctrl.cmd_word.next = self.regs.cmd_word.val();
        self.ctrl.k_len.next = self.regs.k_len.val();
        self.ctrl.seed.next = self.regs.seed.val();
        self.array.clock.next = self.clock.val();
        self.array.reset.next = self.reset.val();
        self.array.valid_in.next = self.ctrl.valid.val();
        self.array.first_in.next = self.ctrl.first.val();
        self.array.last_in.next = self.ctrl.last.val();
        self.gather_a.clock.next = self.clock.val();
        self.gather_a.reset.next = self.reset.val();
        self.gather_a.reg_addr.next = self.reg_addr.val();
        self.gather_a.reg_wdata.next = self.reg_wdata.val();
        self.gather_a.reg_we.next = self.reg_we.val();
        self.gather_a.fm_we.next = self.fm_wr_en.val();
        self.gather_a.fm_row.next = self.fm_wr_row.val();
        self.gather_b.clock.next = self.clock.val();
        self.gather_b.reset.next = self.reset.val();
        self.gather_b.reg_addr.next = self.reg_addr.val();
        self.gather_b.reg_wdata.next = self.reg_wdata.val();
        self.gather_b.reg_we.next = self.reg_we.val();
        self.gather_b.fm_we.next = self.fm_wr_en.val();
        self.gather_b.fm_row.next = self.fm_wr_row.val();
        for w in 0..self._fm_row_words {
            self.gather_a.fm_data[w].next = self.fm_wr_data[w].val();
            self.gather_b.fm_data[w].next = self.fm_wr_data[w].val();
        }
        self.gather_a.bank_busy.next = self.ctrl.a_banks_busy.val();
        self.gather_b.bank_busy.next = self.ctrl.b_banks_busy.val();
        self.regs.gather_a_busy.next = self.gather_a.busy.val();
        self.regs.gather_b_busy.next = self.gather_b.busy.val();
        self.regs.gather_error.next = self.gather_a.cmd_error.val() | self.gather_b.cmd_error.val();
        for i in 0..self._n {
            self.a_ram[i].clock.next = self.clock.val();
            // A gather engine owns its bank's write port while it runs (the driver keeps the
            // host's row writes off that bank meanwhile).
            self.a_ram[i].we.next = self.a_wr_en.val() | self.gather_a.wr_en.val();
            self.a_ram[i].w_bank.next = self.a_wr_bank.val();
            self.a_ram[i].w_row.next = self.a_wr_row.val();
            self.a_ram[i].w_data.next = self.a_wr_data[i].val();
            if self.gather_a.wr_en.val() {
                self.a_ram[i].w_bank.next = self.gather_a.wr_bank.val();
                self.a_ram[i].w_row.next = self.gather_a.wr_row.val();
                self.a_ram[i].w_data.next = self.gather_a.wr_data[i].val();
            }
            self.a_ram[i].r_bank.next = self.ctrl.rd_a_bank.val();
            self.a_ram[i].r_row.next = self.ctrl.rd_row.val();
            self.array.a_in[i].next = self.a_ram[i].r_data.val();
            self.b_ram[i].clock.next = self.clock.val();
            self.b_ram[i].we.next = self.b_wr_en.val() | self.gather_b.wr_en.val();
            self.b_ram[i].w_bank.next = self.b_wr_bank.val();
            self.b_ram[i].w_row.next = self.b_wr_row.val();
            self.b_ram[i].w_data.next = self.b_wr_data[i].val();
            if self.gather_b.wr_en.val() {
                self.b_ram[i].w_bank.next = self.gather_b.wr_bank.val();
                self.b_ram[i].w_row.next = self.gather_b.wr_row.val();
                self.b_ram[i].w_data.next = self.gather_b.wr_data[i].val();
            }
            self.b_ram[i].r_bank.next = self.ctrl.rd_b_bank.val();
            self.b_ram[i].r_row.next = self.ctrl.rd_row.val();
            self.array.b_in[i].next = self.b_ram[i].r_data.val();
            self.converters[i].clock.next = self.clock.val();
            self.converters[i].reset.next = self.reset.val();
            self.converters[i].start.next = self.array.cap_bottom[i].val();
            self.converters[i].acc.next = self.array.res_top[i].val();
            self.converters[i].shift.next = self.regs.shift.val();
            self.converters[i].rounding.next = self.regs.rounding.val();
            self.array.shift_en[i].next = self.converters[i].shift_en.val();
            self.c_ram[i].clock.next = self.clock.val();
            self.c_ram[i].we.next = self.converters[i].wr_en.val();
            self.c_ram[i].w_bank.next = self.converters[i].wr_bank.val();
            self.c_ram[i].w_row.next = self.converters[i].wr_row.val();
            self.c_ram[i].w_data.next = self.converters[i].wr_data.val();
            self.c_ram[i].r_bank.next = self.c_rd_bank.val();
            self.c_ram[i].r_row.next = self.c_rd_row.val();
            self.c_rd_data[i].next = self.c_ram[i].r_data.val();
        }
        // The drain parameters enter at column 0 and walk right with the drain.
        self.converters[0].seed_in.next = self.ctrl.drain_seed.val();
        self.converters[0].bank_in.next = self.ctrl.drain_bank.val();
        for i in 1..self._n {
            self.converters[i].seed_in.next = self.converters[i - 1].seed_out.val();
            self.converters[i].bank_in.next = self.converters[i - 1].bank_out.val();
        }
        // The last column finishes last: its final write completes the tile.
        for n in self._n..self.n_end() {
            self.ctrl.tile_done.next = self.converters[n - 1].done.val();
            self.regs.done_inc.next = self.converters[n - 1].done.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::numeric::{convert, lane_seed, Lfsr32};
    use systole_core::{regmap, Rounding};

    type X = Box<Core>;

    fn cycle(sim: &mut Sim<Core>, mut x: X) -> Result<X, SimError> {
        wait_clock_cycle!(sim, clock, x);
        Ok(x)
    }

    fn write_reg(sim: &mut Sim<Core>, mut x: X, addr: u8, val: u32) -> Result<X, SimError> {
        x.reg_addr.next = bits(addr as u64);
        x.reg_wdata.next = bits(val as u64);
        x.reg_we.next = true;
        x = cycle(sim, x)?;
        x.reg_we.next = false;
        Ok(x)
    }

    fn read_reg(sim: &mut Sim<Core>, mut x: X, addr: u8) -> Result<(X, u32), SimError> {
        x.reg_addr.next = bits(addr as u64);
        x = sim.wait(1, x)?;
        let v = x.reg_rdata.val().to_u32();
        Ok((x, v))
    }

    /// A test tile: `a[r][k]`, `b[k][c]` for one bank.
    struct Bank {
        a: Vec<Vec<i16>>,
        b: Vec<Vec<i16>>,
    }

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 33
    }

    fn bank(n: usize, depth: usize, s: &mut u64) -> Bank {
        let a = (0..n)
            .map(|_| (0..depth).map(|_| lcg(s) as i16).collect())
            .collect();
        let b = (0..depth)
            .map(|_| (0..n).map(|_| (lcg(s) % 601) as i16 - 300).collect())
            .collect();
        Bank { a, b }
    }

    /// Exact `sum_k a[r][k] * b[k][c]` over `k < klen`.
    fn dot(bk: &Bank, klen: usize, r: usize, c: usize) -> i64 {
        (0..klen)
            .map(|k| bk.a[r][k] as i64 * bk.b[k][c] as i64)
            .sum()
    }

    /// Converts a tile in the contract's order (LFSR per column, stepped once per row).
    fn convert_tile(acc: &[Vec<i64>], shift: u32, mode: Rounding, seed: u32) -> Vec<Vec<i16>> {
        let n = acc.len();
        let mut out = vec![vec![0i16; n]; n];
        for c in 0..n {
            let mut l = Lfsr32::new(lane_seed(seed, c as u32));
            for r in 0..n {
                out[r][c] = convert(acc[r][c], shift, mode, l.step(), 16) as i16;
            }
        }
        out
    }

    #[test]
    fn core_matches_golden_arithmetic() {
        let cfg = ArrayConfig::new(4, 8, 16).unwrap();
        let n = cfg.size;
        let mut s = 7u64;
        let banks = [bank(n, 16, &mut s), bank(n, 16, &mut s)];
        // (shift, rounding, seed of tile 1, seed of tile 2, K of bank 0, K of bank 1)
        let runs = [
            (11u32, Rounding::Truncate, 1u32, 2u32, 2usize, 3usize),
            (12, Rounding::NearestEven, 0xDEAD_BEEF, 5, 9, 16),
            (13, Rounding::Stochastic, 0x1234_5678, 0x9E37_79B9, 2, 1),
            (2, Rounding::NearestEven, 3, 4, 5, 5),
        ];
        let mut expected = vec![];
        for &(shift, mode, s1, s2, k0, k1) in &runs {
            let t1: Vec<Vec<i64>> = (0..n)
                .map(|r| (0..n).map(|c| dot(&banks[0], k0, r, c)).collect())
                .collect();
            let t2: Vec<Vec<i64>> = (0..n)
                .map(|r| {
                    (0..n)
                        .map(|c| t1[r][c] + dot(&banks[1], k1, r, c))
                        .collect()
                })
                .collect();
            expected.push((
                convert_tile(&t1, shift, mode, s1),
                convert_tile(&t2, shift, mode, s2),
            ));
        }
        let mut sim = Simulation::new();
        sim.add_clock(5, |x: &mut Box<Core>| x.clock.next = !x.clock.val());
        sim.add_testbench(move |mut sim: Sim<Core>| {
            let mut x = sim.init()?;
            x.reset.next = true;
            x = cycle(&mut sim, x)?;
            x.reset.next = false;
            for (bi, bk) in banks.iter().enumerate() {
                for k in 0..16 {
                    x.a_wr_en.next = true;
                    x.b_wr_en.next = true;
                    x.a_wr_bank.next = bi == 1;
                    x.b_wr_bank.next = bi == 1;
                    x.a_wr_row.next = bits(k as u64);
                    x.b_wr_row.next = bits(k as u64);
                    for i in 0..n {
                        x.a_wr_data[i].next = signed(bk.a[i][k] as i64);
                        x.b_wr_data[i].next = signed(bk.b[k][i] as i64);
                    }
                    x = cycle(&mut sim, x)?;
                }
            }
            x.a_wr_en.next = false;
            x.b_wr_en.next = false;
            let (mut x, id) = read_reg(&mut sim, x, regmap::ID)?;
            sim_assert_eq!(sim, id, regmap::ID_VALUE, x);
            for (run, &(shift, mode, s1, s2, k0, k1)) in runs.iter().enumerate() {
                x = write_reg(&mut sim, x, regmap::SHIFT, shift)?;
                x = write_reg(&mut sim, x, regmap::ROUNDING, mode.code())?;
                // Tile 1: bank 0 alone into C bank 0. Tile 2: bank 1 then bank 0 accumulated,
                // into C bank 1; its first command waits in the queue behind tile 1.
                x = write_reg(&mut sim, x, regmap::K_LEN, k0 as u32)?;
                x = write_reg(&mut sim, x, regmap::SEED, s1)?;
                x = write_reg(
                    &mut sim,
                    x,
                    regmap::COMMAND,
                    regmap::command(0, 0, 0, true, true),
                )?;
                x = write_reg(&mut sim, x, regmap::K_LEN, k1 as u32)?;
                x = write_reg(
                    &mut sim,
                    x,
                    regmap::COMMAND,
                    regmap::command(1, 1, 0, true, false),
                )?;
                let mut st = regmap::STATUS_QUEUE_FULL;
                while st & regmap::STATUS_QUEUE_FULL != 0 {
                    (x, st) = read_reg(&mut sim, x, regmap::STATUS)?;
                    x = cycle(&mut sim, x)?;
                }
                x = write_reg(&mut sim, x, regmap::K_LEN, k0 as u32)?;
                x = write_reg(&mut sim, x, regmap::SEED, s2)?;
                x = write_reg(
                    &mut sim,
                    x,
                    regmap::COMMAND,
                    regmap::command(0, 0, 1, false, true),
                )?;
                let mut st = regmap::STATUS_BUSY;
                while st & regmap::STATUS_BUSY != 0 {
                    (x, st) = read_reg(&mut sim, x, regmap::STATUS)?;
                    x = cycle(&mut sim, x)?;
                }
                sim_assert_eq!(sim, st & regmap::STATUS_ERROR, 0, x);
                let (x2, done) = read_reg(&mut sim, x, regmap::DONE_COUNT)?;
                x = x2;
                sim_assert_eq!(sim, done, 2 * (run as u32 + 1), x);
                for (cb, tile) in [&expected[run].0, &expected[run].1].iter().enumerate() {
                    for r in 0..n {
                        x.c_rd_bank.next = cb == 1;
                        x.c_rd_row.next = bits(r as u64);
                        x = cycle(&mut sim, x)?;
                        for c in 0..n {
                            let want = signed::<16>(tile[r][c] as i64);
                            sim_assert_eq!(
                                sim,
                                (run, cb, r, c, x.c_rd_data[c].val()),
                                (run, cb, r, c, want),
                                x
                            );
                        }
                    }
                }
            }
            // Errors: a zero K_LEN, and a command while the queue is full, are dropped.
            x = write_reg(&mut sim, x, regmap::K_LEN, 0)?;
            let (x2, st) = read_reg(&mut sim, x, regmap::STATUS)?;
            x = x2;
            sim_assert_eq!(sim, st, regmap::STATUS_ERROR, x);
            x = write_reg(&mut sim, x, regmap::ERROR_CLEAR, 1)?;
            x = write_reg(
                &mut sim,
                x,
                regmap::COMMAND,
                regmap::command(0, 0, 0, true, true),
            )?;
            let (x2, st) = read_reg(&mut sim, x, regmap::STATUS)?;
            x = x2;
            sim_assert_eq!(sim, st, regmap::STATUS_ERROR, x);
            x = write_reg(&mut sim, x, regmap::ERROR_CLEAR, 1)?;
            x = write_reg(&mut sim, x, regmap::K_LEN, 16)?;
            for _ in 0..2 {
                // The first command moves to the running slot one cycle after it is written.
                x = write_reg(
                    &mut sim,
                    x,
                    regmap::COMMAND,
                    regmap::command(0, 0, 0, true, false),
                )?;
                x = cycle(&mut sim, x)?;
            }
            x = write_reg(
                &mut sim,
                x,
                regmap::COMMAND,
                regmap::command(0, 0, 0, true, false),
            )?;
            let (x2, st) = read_reg(&mut sim, x, regmap::STATUS)?;
            x = x2;
            let want = regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL | regmap::STATUS_ERROR;
            sim_assert_eq!(sim, st, want, x);
            let (x2, cfgw) = read_reg(&mut sim, x, regmap::CONFIG)?;
            x = x2;
            sim_assert_eq!(sim, cfgw, cfg.config_word(), x);
            sim.done(x)
        });
        let mut uut = Core::new(&cfg).unwrap();
        uut.connect_all();
        sim.run(Box::new(uut), 100_000).unwrap();
    }
}
