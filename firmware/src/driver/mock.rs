//! A cycle-level behavioural stand-in for the accelerator, used to test the driver's schedule
//! without Verilator. It follows the register map and port timing of `systole-core` and
//! counts *hazards*: writes into a bank that a running or queued command still reads.

extern crate std;

use std::collections::VecDeque;
use std::vec;
use std::vec::Vec;
use systole_core::bus::Beat;
use systole_core::gather::{EngineModel, GatherConfig, WORDS};
use systole_core::numeric::{convert, lane_seed, Lfsr32};
use systole_core::regmap::gcmd;
use systole_core::{regmap, AcceleratorBus, ArrayConfig, Rounding};

#[derive(Clone, Copy, Debug)]
struct Cmd {
    word: u32,
    klen: usize,
    seed: u32,
    t: usize,
}

/// A gather engine of the stand-in: the core's reference model plus its timing.
struct MockEngine {
    words: [u32; WORDS],
    model: EngineModel,
    /// A fill waiting for its bank to be free of commands: the command word.
    held: Option<u32>,
    /// Busy while `cycles < busy_until`.
    busy_until: u32,
    bank: u8,
}

/// The stand-in accelerator.
pub struct MockArray {
    fm: Vec<i16>,
    engines: [MockEngine; 2],
    cfg: ArrayConfig,
    a: [Vec<i16>; 2],
    b: [Vec<i16>; 2],
    c: [Vec<i16>; 2],
    acc: Vec<i64>,
    shift: u32,
    rounding: u32,
    seed: u32,
    klen: usize,
    error: bool,
    done: u32,
    cycles: u32,
    macs: u32,
    running: Option<Cmd>,
    waiting: Option<Cmd>,
    /// `(cycle ready, C bank, converted tile)`.
    conversions: VecDeque<(u32, usize, Vec<i16>)>,
    /// Cycles from a tile's last K step to its outputs being in the C bank (the hardware's
    /// `ArrayConfig::emit_latency`).
    pub latency: u32,
    /// Writes into a bank a running or queued command reads.
    pub hazards: usize,
    /// Runs whole products through the product sequencer's model (`runs_products`).
    pub sequencer: bool,
    /// Products the sequencer's model ran.
    pub products: usize,
    /// A status the sequencer answers instead of running the product.
    pub answer: Option<u32>,
}

impl MockArray {
    pub fn new(cfg: ArrayConfig) -> Self {
        let (n, d) = (cfg.size, cfg.buffer_depth);
        let engine = || MockEngine {
            words: [0; WORDS],
            model: EngineModel::new(n),
            held: None,
            busy_until: 0,
            bank: 0,
        };
        MockArray {
            fm: vec![0; cfg.fm_depth],
            engines: [engine(), engine()],
            cfg,
            a: [vec![0x5555; n * d], vec![0x5555; n * d]],
            b: [vec![0x1234; n * d], vec![0x1234; n * d]],
            c: [vec![0; n * n], vec![0; n * n]],
            acc: vec![0; n * n],
            shift: 0,
            rounding: 0,
            seed: 1,
            klen: 1,
            error: false,
            done: 0,
            cycles: 0,
            macs: 0,
            running: None,
            waiting: None,
            conversions: VecDeque::new(),
            latency: cfg.emit_latency(),
            hazards: 0,
            sequencer: false,
            products: 0,
            answer: None,
        }
    }

    /// Clock cycles run so far (beats and idles).
    pub fn cycles_run(&self) -> u32 {
        self.cycles
    }

    fn status(&self) -> u32 {
        let mut s = 0;
        if self.running.is_some() || self.waiting.is_some() || !self.conversions.is_empty() {
            s |= regmap::STATUS_BUSY;
        }
        if self.waiting.is_some() {
            s |= regmap::STATUS_QUEUE_FULL;
        }
        if self.error {
            s |= regmap::STATUS_ERROR;
        }
        if self.gathering(0) {
            s |= regmap::STATUS_GATHER_A;
        }
        if self.gathering(1) {
            s |= regmap::STATUS_GATHER_B;
        }
        s
    }

    fn gathering(&self, e: usize) -> bool {
        self.engines[e]
            .busy_until
            .wrapping_sub(self.cycles)
            .wrapping_sub(1)
            < 1 << 31
    }

    /// A gather command to engine `e` (0: A, 1: B): fills the bank at once, stays busy as
    /// long as the hardware would (load, lane walk, rows, write latency).
    fn gather(&mut self, e: usize, v: u32) {
        let klen = gcmd::KLEN.get(v) as usize;
        if self.gathering(e) || klen == 0 || klen > self.cfg.buffer_depth || self.fm.is_empty() {
            self.error = true;
            return;
        }
        let bank = gcmd::BANK.get(v) as u8;
        if self.in_use(e == 0, bank) {
            // The interlock: the fill waits until no command reads its bank.
            self.engines[e].held = Some(v);
            return;
        }
        self.fill(e, v);
    }

    /// Runs a gather command whose bank is free.
    fn fill(&mut self, e: usize, v: u32) {
        let klen = gcmd::KLEN.get(v) as usize;
        let bank = gcmd::BANK.get(v) as u8;
        // Code 3 neither loads nor keeps: the hardware steps the lanes as for `Next`.
        let mode =
            regmap::LaneMode::from_code(gcmd::LANES.get(v)).unwrap_or(regmap::LaneMode::Next);
        if self.in_use(e == 0, bank) {
            self.hazards += 1;
        }
        let n = self.cfg.size;
        let cfg = GatherConfig::from_words(&self.engines[e].words);
        let mem = if e == 0 { &mut self.a } else { &mut self.b };
        let fm = &self.fm;
        self.engines[e]
            .model
            .run(&cfg, klen, mode, gcmd::K_NEXT.get(v) != 0, fm, |k, w| {
                mem[bank as usize][k * n..][..n].copy_from_slice(w)
            });
        let setup = if mode == regmap::LaneMode::Keep { 0 } else { n };
        let eng = &mut self.engines[e];
        eng.bank = bank;
        eng.busy_until = self.cycles.wrapping_add((2 + setup + klen) as u32);
    }

    fn in_use(&self, a_side: bool, bank: u8) -> bool {
        let bit = if a_side {
            regmap::CMD_A_BANK
        } else {
            regmap::CMD_B_BANK
        };
        [self.running, self.waiting]
            .iter()
            .flatten()
            .any(|c| u8::from(c.word & bit != 0) == bank)
    }

    /// One rising clock edge with the given port activity.
    fn clock(&mut self, reg: Option<(u8, u32)>, beat: &Beat<'_>, c_out: &mut [i16]) {
        let n = self.cfg.size;
        if let Some(r) = beat.c {
            c_out.copy_from_slice(&self.c[r.bank as usize][r.row as usize * n..][..n]);
        }
        if self.running.is_none() {
            if let Some(cmd) = self.waiting.take() {
                if cmd.word & regmap::CMD_CLEAR != 0 {
                    self.acc.fill(0);
                }
                self.running = Some(cmd);
            }
        }
        if let Some(mut cmd) = self.running {
            let ab = usize::from(cmd.word & regmap::CMD_A_BANK != 0);
            let bb = usize::from(cmd.word & regmap::CMD_B_BANK != 0);
            for r in 0..n {
                let x = i64::from(self.a[ab][cmd.t * n + r]);
                for c in 0..n {
                    self.acc[r * n + c] += x * i64::from(self.b[bb][cmd.t * n + c]);
                }
            }
            self.macs = self.macs.wrapping_add(1);
            cmd.t += 1;
            self.running = Some(cmd);
            if cmd.t == cmd.klen {
                self.running = None;
                if cmd.word & regmap::CMD_EMIT != 0 {
                    let tile = self.convert(cmd.seed);
                    let bank = usize::from(cmd.word & regmap::CMD_C_BANK != 0);
                    let at = self.cycles.wrapping_add(self.latency);
                    self.conversions.push_back((at, bank, tile));
                }
            }
        }
        for (w, a_side) in [(beat.a, true), (beat.b, false)] {
            if let Some(w) = w {
                if self.in_use(a_side, w.bank) {
                    self.hazards += 1;
                }
                // A `W`-bit port takes the low `W` bits of each word (sign-extended inside).
                let ext = 16 - self.cfg.word_bits;
                let mem = if a_side { &mut self.a } else { &mut self.b };
                let row = &mut mem[w.bank as usize][w.row as usize * n..][..n];
                for (m, &x) in row.iter_mut().zip(w.data) {
                    *m = (x << ext) >> ext;
                }
            }
        }
        if let Some((addr, v)) = reg {
            self.write(addr, v);
        }
        for e in 0..2 {
            if let Some(v) = self.engines[e].held {
                if !self.in_use(e == 0, gcmd::BANK.get(v) as u8) {
                    self.engines[e].held = None;
                    self.fill(e, v);
                }
            }
        }
        while self.conversions.front().is_some_and(|c| c.0 == self.cycles) {
            let (_, bank, tile) = self.conversions.pop_front().unwrap();
            self.c[bank] = tile;
            self.done = self.done.wrapping_add(1);
        }
        self.cycles = self.cycles.wrapping_add(1);
    }

    fn write(&mut self, addr: u8, v: u32) {
        match addr {
            regmap::SHIFT => self.shift = v,
            regmap::ROUNDING => self.rounding = v,
            regmap::SEED => self.seed = v,
            regmap::K_LEN => self.klen = v as usize,
            regmap::ERROR_CLEAR => self.error = false,
            regmap::GA_CFG | regmap::GB_CFG => {
                let w = &mut self.engines[usize::from(addr == regmap::GB_CFG)].words;
                w.copy_within(1.., 0);
                w[WORDS - 1] = v;
            }
            regmap::GA_CMD => self.gather(0, v),
            regmap::GB_CMD => self.gather(1, v),
            regmap::COMMAND => {
                for (e, bit) in [(0, regmap::CMD_A_BANK), (1, regmap::CMD_B_BANK)] {
                    if self.gathering(e) && u8::from(v & bit != 0) == self.engines[e].bank {
                        self.hazards += 1;
                    }
                }
                if self.waiting.is_some() || self.klen == 0 || self.klen > self.cfg.buffer_depth {
                    self.error = true;
                } else {
                    self.waiting = Some(Cmd {
                        word: v,
                        klen: self.klen,
                        seed: self.seed,
                        t: 0,
                    });
                }
            }
            _ => {}
        }
    }

    fn convert(&self, seed: u32) -> Vec<i16> {
        let n = self.cfg.size;
        let rounding = Rounding::from_code(self.rounding).unwrap();
        let w = self.cfg.word_bits;
        let mut out = vec![0i16; n * n];
        for c in 0..n {
            let mut lfsr = Lfsr32::new(lane_seed(seed, c as u32));
            for r in 0..n {
                let u = lfsr.step();
                out[r * n + c] = convert(self.acc[r * n + c], self.shift, rounding, u, w) as i16;
            }
        }
        out
    }
}

impl AcceleratorBus for MockArray {
    type Error = core::convert::Infallible;

    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error> {
        Ok(match addr {
            regmap::ID => regmap::ID_VALUE,
            regmap::CONFIG => self.cfg.config_word(),
            regmap::STATUS => self.status(),
            regmap::DONE_COUNT => self.done,
            regmap::CYCLES => self.cycles,
            regmap::MAC_CYCLES => self.macs,
            regmap::SHIFT => self.shift,
            regmap::ROUNDING => self.rounding,
            regmap::SEED => self.seed,
            regmap::K_LEN => self.klen as u32,
            _ => 0,
        })
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error> {
        self.clock(Some((addr, value)), &Beat::default(), &mut []);
        Ok(())
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error> {
        self.clock(None, beat, c_out);
        Ok(())
    }

    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error> {
        for _ in 0..cycles {
            self.clock(None, &Beat::default(), &mut []);
        }
        Ok(())
    }

    fn runs_products(&self) -> bool {
        self.sequencer
    }

    fn run_product(
        &mut self,
        job: &systole_core::bus::ProductJob,
        a: &[i16],
        b: &[i16],
        c: &mut [i16],
    ) -> Result<Option<u32>, Self::Error> {
        if !self.sequencer {
            return Ok(None);
        }
        self.products += 1;
        if let Some(status) = self.answer {
            return Ok(Some(status));
        }
        let cfg = self.cfg;
        super::sequencer_model::sequence(self, &cfg, job, (a, b, c)).map(Some)
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error> {
        let r = self.cfg.fm_row_words();
        assert!(
            (addr as usize).is_multiple_of(r) && words.len().is_multiple_of(r),
            "unaligned feature-map write"
        );
        self.fm[addr as usize..][..words.len()].copy_from_slice(words);
        for _ in 0..words.len() / r {
            self.clock(None, &Beat::default(), &mut []);
        }
        Ok(())
    }
}
