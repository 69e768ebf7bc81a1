//! Column output converter: drains one column of captured accumulators and converts each one
//! exactly as `systole_core::numeric::convert` does.
//!
//! Timing (one converter per array column `c`): `start` is high for one cycle when the bottom
//! PE of the column has captured its result; in that cycle the column's shadow chain shows row 0
//! on `acc`. For `n` cycles the converter asks the chain to shift up (`shift_en`), so `acc`
//! shows rows `0, 1, .., n-1` in order. The column's LFSR is loaded with
//! `lane_seed(tile_seed, c)` at `start` and steps once before each row, in every rounding mode,
//! so row `r` uses the state after `r + 1` steps (the contract's order). The conversion takes
//! `systole_core::config::CONVERTER_STAGES` (2) register stages: the edge that takes a row
//! registers its stochastic sum and the nearest-even comparison of its dropped bits (with the
//! row's shift and rounding), the next one the shifted, rounded and saturated word, which is
//! written to the C buffer lane on the edge after (`wr_*`). The tile seed and C
//! bank arrive on `seed_in`/`bank_in` in the `start` cycle and are passed on (one cycle later,
//! like `start` itself) to the next column through `seed_out`/`bank_out`.
//!
//! Arithmetic, in 64-bit two's complement: `x = acc + (stochastic ? lfsr & mask : 0)`;
//! floor shift as `((x + 2^62) >> shift) - (2^62 >> shift)` (a logical shift of a biased,
//! never-negative value, exact because `2^62` is a multiple of `2^shift`); nearest-even adds one
//! when the dropped bits `acc & mask` exceed half, or equal it and the quotient is odd;
//! finally saturation to 16 bits.
//!
//! `hdl/verilog/converter.v` computes the same function at the widths it needs (a 49-bit sum at
//! `W = 16` and the sticky bit in the first stage; one shift giving the quotient and the
//! nearest-even guard bit, and the `W`-bit range test, in the second), for every 6-bit shift and
//! rounding code, not only the contract's: about 450 instead of 1,040 LUTs a column on 7-series
//! (Yosys 0.23), the largest cut of the SoC's logic.
//!
//! The Verilog is hand-written (`converter.v`): rust-hdl's registers-as-submodules made
//! Verilator compute the whole conversion in every cycle, drains or not (about 11% of the
//! instructions of a 16x16 simulation); here it runs only on the edges of a drain (16x16 about
//! 6% faster). `update` runs the `#[hdl_gen]` `kernel`, what rust-hdl simulates (the tests
//! below); the Verilog is checked bit for bit against the golden model through Verilator
//! (systole-sim, systole-tests), and against the Verilog rust-hdl generates from `kernel`, output
//! by output and cycle by cycle (`crate::differential`). The one difference: `wr_data` holds its
//! value outside drains, where `kernel` keeps converting `acc`; it is written to the C buffer
//! only with `wr_en`, two edges after a drain edge, so the buffer sees the same words.

use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::config::{MAX_SIZE, MIN_SIZE};
use systole_core::numeric::{word_max, word_min, LANE_SEED_MUL, LFSR_TAPS, MAX_SHIFT, WORD_BITS};

/// Converter and LFSR of one output column (see the module docs).
#[derive(LogicBlock)]
pub struct ColumnConverter {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: abandons a drain in progress.
    pub reset: Signal<In, Bit>,
    /// One-cycle pulse: the column's results are captured, row 0 is on `acc`.
    pub start: Signal<In, Bit>,
    /// Top of the column's shadow chain.
    pub acc: Signal<In, Signed<48>>,
    /// Tile seed of the drain starting now (valid in the `start` cycle).
    pub seed_in: Signal<In, Bits<32>>,
    /// C bank of the drain starting now (valid in the `start` cycle).
    pub bank_in: Signal<In, Bit>,
    /// `SHIFT` register, `0..=MAX_SHIFT`.
    pub shift: Signal<In, Bits<6>>,
    /// `ROUNDING` register code.
    pub rounding: Signal<In, Bits<2>>,
    /// Shift the column's shadow chain up on this edge.
    pub shift_en: Signal<Out, Bit>,
    /// Tile seed, one cycle after `start`, for the next column.
    pub seed_out: Signal<Out, Bits<32>>,
    /// C bank, one cycle after `start`, for the next column.
    pub bank_out: Signal<Out, Bit>,
    /// Write one converted word into the C buffer lane.
    pub wr_en: Signal<Out, Bit>,
    /// C bank of the write.
    pub wr_bank: Signal<Out, Bit>,
    /// Tile row of the write.
    pub wr_row: Signal<Out, Bits<6>>,
    /// Converted word.
    pub wr_data: Signal<Out, Signed<16>>,
    /// High in the cycle the last row (`n - 1`) is being written.
    pub done: Signal<Out, Bit>,
    active: DFF<Bit>,
    row: DFF<Bits<6>>,
    lfsr: DFF<Bits<32>>,
    seed_q: DFF<Bits<32>>,
    bank_q: DFF<Bit>,
    s_q: DFF<Bits<64>>,
    gt_q: DFF<Bit>,
    eq_q: DFF<Bit>,
    sh_q: DFF<Bits<6>>,
    mode_q: DFF<Bits<2>>,
    v_q: DFF<Bit>,
    row_q: DFF<Bits<6>>,
    bank1_q: DFF<Bit>,
    wr_en_q: DFF<Bit>,
    wr_bank_q: DFF<Bit>,
    wr_row_q: DFF<Bits<6>>,
    wr_data_q: DFF<Signed<16>>,
    lane_mul: Constant<Bits<32>>,
    taps: Constant<Bits<32>>,
    last_row: Constant<Bits<6>>,
    bias: Constant<Bits<64>>,
    one: Constant<Bits<64>>,
    sign_ext: Constant<Bits<64>>,
    sat_hi: Constant<Bits<64>>,
    sat_lo: Constant<Bits<64>>,
    lane_seed: Signal<Local, Bits<32>>,
    pre: Signal<Local, Bits<32>>,
    cur: Signal<Local, Bits<32>>,
    go: Signal<Local, Bit>,
    cur_row: Signal<Local, Bits<6>>,
    x: Signal<Local, Bits<64>>,
    mask: Signal<Local, Bits<64>>,
    sum: Signal<Local, Bits<64>>,
    q: Signal<Local, Bits<64>>,
    rem: Signal<Local, Bits<64>>,
    half: Signal<Local, Bits<64>>,
    res: Signal<Local, Bits<64>>,
    /// `W` of the words it writes (the ports stay 16 and 48 bits wide, values sign-extended).
    _word_bits: u32,
}

impl ColumnConverter {
    /// The converter of column `column` of a `rows`-row array of 16-bit words.
    pub fn new(column: usize, rows: usize) -> Result<Self, HdlError> {
        Self::at(column, rows, WORD_BITS)
    }

    /// The converter of column `column` of a `rows`-row array of `W`-bit words: it saturates
    /// to the `W`-bit range (its model too: `sat_hi`/`sat_lo`), and its Verilog is
    /// `converter_width::converter_verilog(W)`, reading the low `acc_bits(W)` bits of `acc` and
    /// driving `wr_data` sign-extended.
    pub fn at(column: usize, rows: usize, word_bits: u32) -> Result<Self, HdlError> {
        // The Verilog is checked here, once, so `hdl` cannot fail.
        crate::converter_width::converter_verilog(word_bits)?;
        if !(MIN_SIZE..=MAX_SIZE).contains(&rows) || column >= rows {
            return Err(HdlError::Block(format!(
                "converter for column {column} of a {rows}-row array: rows must be {MIN_SIZE}..={MAX_SIZE} and column < rows"
            )));
        }
        let mul = LANE_SEED_MUL.wrapping_mul(column as u32 + 1);
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            start: Default::default(),
            acc: Default::default(),
            seed_in: Default::default(),
            bank_in: Default::default(),
            shift: Default::default(),
            rounding: Default::default(),
            shift_en: Default::default(),
            seed_out: Default::default(),
            bank_out: Default::default(),
            wr_en: Default::default(),
            wr_bank: Default::default(),
            wr_row: Default::default(),
            wr_data: Default::default(),
            done: Default::default(),
            active: Default::default(),
            row: Default::default(),
            lfsr: Default::default(),
            seed_q: Default::default(),
            bank_q: Default::default(),
            s_q: Default::default(),
            gt_q: Default::default(),
            eq_q: Default::default(),
            sh_q: Default::default(),
            mode_q: Default::default(),
            v_q: Default::default(),
            row_q: Default::default(),
            bank1_q: Default::default(),
            wr_en_q: Default::default(),
            wr_bank_q: Default::default(),
            wr_row_q: Default::default(),
            wr_data_q: Default::default(),
            lane_mul: Constant::new(bits(mul as u64)),
            taps: Constant::new(bits(LFSR_TAPS as u64)),
            last_row: Constant::new(bits(rows as u64 - 1)),
            bias: Constant::new(bits(1u64 << 62)),
            one: Constant::new(bits(1)),
            sign_ext: Constant::new(bits(0xFFFF_0000_0000_0000)),
            sat_hi: Constant::new(bits(word_max(word_bits) as u64)),
            sat_lo: Constant::new(bits(word_min(word_bits) as u64)),
            lane_seed: Default::default(),
            pre: Default::default(),
            cur: Default::default(),
            go: Default::default(),
            cur_row: Default::default(),
            x: Default::default(),
            mask: Default::default(),
            sum: Default::default(),
            q: Default::default(),
            rem: Default::default(),
            half: Default::default(),
            res: Default::default(),
            _word_bits: word_bits,
        })
    }
}

/// Largest shift the converter implements (the contract's limit).
pub const CONVERTER_MAX_SHIFT: u32 = MAX_SHIFT;

impl Logic for ColumnConverter {
    fn update(&mut self) {
        ColumnConverter::kernel(self);
    }

    fn connect(&mut self) {
        ColumnConverter::connect(self);
    }

    /// The hand-written Verilog (see the module docs); rust-hdl still emits the register
    /// submodules, which nothing instantiates: `generate_verilog` drops them.
    fn hdl(&self) -> Verilog {
        let code = crate::converter_width::converter_verilog(self._word_bits)
            .expect("`at` checked the width");
        Verilog::Wrapper(Wrapper {
            code,
            cores: String::new(),
        })
    }
}

#[cfg(test)]
impl crate::differential::Model for ColumnConverter {
    fn model_hdl(&self) -> Verilog {
        ColumnConverter::hdl(self)
    }
}

/// The converter's logic as rust-hdl simulates it. `#[hdl_gen]` derives `connect` (used above)
/// and a `hdl` of its own: the model's Verilog, which the differential test
/// (`crate::differential`) simulates beside `hdl/verilog/converter.v`.
impl ColumnConverter {
    #[hdl_gen]
    fn kernel(&mut self) {
        dff_setup!(
            self, clock, active, row, lfsr, seed_q, bank_q, s_q, gt_q, eq_q, sh_q, mode_q, v_q,
            row_q, bank1_q, wr_en_q, wr_bank_q, wr_row_q, wr_data_q
        );
        // LFSR: load the lane seed at start, step once before every row.
        self.lane_seed.next = self.seed_in.val() ^ self.lane_mul.val();
        if self.lane_seed.val() == 0 {
            self.lane_seed.next = 1.into();
        }
        self.pre.next = self.lfsr.q.val();
        self.cur_row.next = self.row.q.val();
        if self.start.val() {
            self.pre.next = self.lane_seed.val();
            self.cur_row.next = 0.into();
            self.seed_q.d.next = self.seed_in.val();
            self.bank_q.d.next = self.bank_in.val();
        }
        self.cur.next = self.pre.val() >> 1;
        if self.pre.val().get_bit(0) {
            self.cur.next = (self.pre.val() >> 1) ^ self.taps.val();
        }
        self.go.next = self.start.val() | self.active.q.val();
        // Conversion of the current row, first stage: the stochastic sum and the nearest-even
        // comparison of the dropped bits, registered with the row's shift and rounding.
        // Sign extension by hand: a zero-extending cast, then the high bits from the sign.
        self.x.next = bit_cast::<64, 48>(unsigned_cast(self.acc.val()));
        if self.acc.val().get_bit(47) {
            self.x.next = bit_cast::<64, 48>(unsigned_cast(self.acc.val())) | self.sign_ext.val();
        }
        self.mask.next = (self.one.val() << self.shift.val()) - self.one.val();
        self.rem.next = self.x.val() & self.mask.val();
        self.half.next = (self.one.val() << self.shift.val()) >> 1;
        self.sum.next = self.x.val();
        if self.rounding.val() == 2 {
            self.sum.next = self.x.val() + (bit_cast::<64, 32>(self.cur.val()) & self.mask.val());
        }
        self.s_q.d.next = self.sum.val();
        self.gt_q.d.next = self.rem.val() > self.half.val();
        self.eq_q.d.next = self.rem.val() == self.half.val();
        self.sh_q.d.next = self.shift.val();
        self.mode_q.d.next = self.rounding.val();
        // Second stage: the floor shift, rounding and saturation.
        self.q.next = ((self.s_q.q.val() + self.bias.val()) >> self.sh_q.q.val())
            - (self.bias.val() >> self.sh_q.q.val());
        self.res.next = self.q.val();
        if (self.mode_q.q.val() == 1)
            & (self.sh_q.q.val() != 0)
            & (self.gt_q.q.val() | (self.eq_q.q.val() & self.q.val().get_bit(0)))
        {
            self.res.next = self.q.val() + 1;
        }
        if self.res.val().get_bit(63) {
            if self.res.val() < self.sat_lo.val() {
                self.res.next = self.sat_lo.val();
            }
        } else if self.res.val() > self.sat_hi.val() {
            self.res.next = self.sat_hi.val();
        }
        // Sequencing: `n` rows from `start`.
        if self.go.val() {
            self.lfsr.d.next = self.cur.val();
            self.row.d.next = self.cur_row.val() + 1;
            self.active.d.next = self.cur_row.val() != self.last_row.val();
        }
        self.v_q.d.next = self.go.val() & !self.reset.val();
        self.row_q.d.next = self.cur_row.val();
        self.bank1_q.d.next = self.bank_q.q.val();
        if self.start.val() {
            self.bank1_q.d.next = self.bank_in.val();
        }
        self.wr_en_q.d.next = self.v_q.q.val() & !self.reset.val();
        self.wr_row_q.d.next = self.row_q.q.val();
        self.wr_bank_q.d.next = self.bank1_q.q.val();
        self.wr_data_q.d.next = signed_cast(self.res.val().get_bits::<16>(0));
        if self.reset.val() {
            self.active.d.next = false;
        }
        self.shift_en.next = self.go.val();
        self.seed_out.next = self.seed_q.q.val();
        self.bank_out.next = self.bank_q.q.val();
        self.wr_en.next = self.wr_en_q.q.val();
        self.wr_bank.next = self.wr_bank_q.q.val();
        self.wr_row.next = self.wr_row_q.q.val();
        self.wr_data.next = self.wr_data_q.q.val();
        self.done.next = self.wr_en_q.q.val() & (self.wr_row_q.q.val() == self.last_row.val());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::numeric::{convert, lane_seed, Lfsr32, ACC_MAX, ACC_MIN};
    use systole_core::Rounding;

    /// Small deterministic generator for test data (splitmix64).
    fn next(s: &mut u64) -> u64 {
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Accumulators with a spread of magnitudes, including the extremes and exact halves.
    fn accumulator(s: &mut u64, shift: u32) -> i64 {
        match next(s) % 6 {
            0 => [ACC_MIN + 1, ACC_MAX, 0, -1, 1 << 30, -(1 << 30)][(next(s) % 6) as usize],
            1 => (next(s) as i64 >> 16).clamp(ACC_MIN, ACC_MAX),
            2 if shift > 0 => {
                // An exact half plus a small multiple: exercises the nearest-even ties.
                ((next(s) % 64) as i64 - 32) * (1 << shift) + (1 << (shift - 1))
            }
            _ => (next(s) as i64) >> (64 - 16 - shift.min(30)),
        }
    }

    /// The converter writes word `want` of row `row` into `bank`, `done` with the last row.
    fn writes(x: &ColumnConverter, row: usize, bank: bool, want: i64, last: bool) -> bool {
        let got = (
            x.wr_row.val(),
            x.wr_bank.val(),
            x.wr_data.val(),
            x.done.val(),
        );
        let expect = (bits::<6>(row as u64), bank, signed::<16>(want), last);
        if got != expect {
            println!("row {row}: wrote {got:?}, expected {expect:?}");
        }
        got == expect
    }

    #[test]
    fn converter_matches_contract() {
        let rows = 5usize;
        let column = 3usize;
        let mut s = 42u64;
        // (shift, mode, seed, accumulators) per drain.
        let mut drains = vec![];
        for d in 0..18 {
            let shift = [0, 1, 15, 16, 32][d % 5] as u32;
            let shift = if d >= 5 {
                (next(&mut s) % 33) as u32
            } else {
                shift
            };
            let mode = Rounding::ALL[d % 3];
            let seed = if d == 4 {
                0x9E37_79B9u32.wrapping_mul(4)
            } else {
                next(&mut s) as u32
            };
            let accs: Vec<i64> = (0..rows).map(|_| accumulator(&mut s, shift)).collect();
            drains.push((shift, mode, seed, accs));
        }
        let mut sim = Simulation::new();
        sim.add_clock(5, |x: &mut Box<ColumnConverter>| {
            x.clock.next = !x.clock.val()
        });
        sim.add_testbench(move |mut sim: Sim<ColumnConverter>| {
            let mut x = sim.init()?;
            for (d, (shift, mode, seed, accs)) in drains.iter().enumerate() {
                let bank = d % 2 == 1;
                x.shift.next = bits(*shift as u64);
                x.rounding.next = bits(mode.code() as u64);
                let mut lfsr = Lfsr32::new(lane_seed(*seed, column as u32));
                let want: Vec<i64> = accs
                    .iter()
                    .map(|&acc| convert(acc, *shift, *mode, lfsr.step(), 16))
                    .collect();
                for (r, &acc) in accs.iter().enumerate() {
                    x.start.next = r == 0;
                    x.seed_in.next = bits(if r == 0 { *seed as u64 } else { 0 });
                    x.bank_in.next = bank ^ (r != 0);
                    x.acc.next = signed(acc);
                    // The chain must shift after every row is taken.
                    x = sim.wait(1, x)?;
                    sim_assert_eq!(sim, x.shift_en.val(), true, x);
                    wait_clock_cycle!(sim, clock, x);
                    if r == 0 {
                        sim_assert_eq!(sim, x.seed_out.val(), bits::<32>(*seed as u64), x);
                        sim_assert_eq!(sim, x.bank_out.val(), bank, x);
                    }
                    // The word taken in a cycle is written two edges later.
                    sim_assert_eq!(sim, x.wr_en.val(), r > 0, x);
                    if r > 0 {
                        sim_assert!(sim, writes(&x, r - 1, bank, want[r - 1], false), x);
                    }
                }
                x.start.next = false;
                x = sim.wait(1, x)?;
                sim_assert_eq!(sim, x.shift_en.val(), false, x);
                wait_clock_cycle!(sim, clock, x);
                sim_assert_eq!(sim, x.wr_en.val(), true, x);
                sim_assert!(sim, writes(&x, rows - 1, bank, want[rows - 1], true), x);
            }
            sim.done(x)
        });
        let mut uut = ColumnConverter::new(column, rows).unwrap();
        uut.connect_all();
        sim.run(Box::new(uut), 100_000).unwrap();
    }

    #[test]
    fn converter_rejects_bad_parameters() {
        assert!(ColumnConverter::new(4, 4).is_err());
        assert!(ColumnConverter::new(0, 1).is_err());
        assert!(ColumnConverter::new(0, 65).is_err());
    }
}
