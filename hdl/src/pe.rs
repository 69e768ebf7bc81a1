//! Processing element: one multiply-accumulate cell of the output-stationary array.
//!
//! Each cycle the PE registers the A word arriving from the left (with its `valid`, `first` and
//! `last` flags) and the B word arriving from above, so they reach the right and lower
//! neighbours one cycle later. When `valid_in` is set it adds the exact 32-bit product, sign
//! extended, to its 48-bit accumulator; `first_in` restarts the accumulator from zero instead
//! (the command had `CMD_CLEAR`). When `last_in` is set (the command had `CMD_EMIT` and this is
//! its last K step) the new sum is also captured into `res`, so the next tile can start
//! accumulating on the very next cycle while `res` drains. The `res` registers of one column
//! form an upward shift chain: with `shift_en` each takes the value of the PE below
//! (`res_in`), delivering row 0 first to the column's converter.
//!
//! The Verilog of the PE is written by hand (`hdl/verilog/pe.v`) rather than generated from
//! `update`: rust-hdl makes every register a submodule whose `d` input is computed by
//! combinational logic, so Verilator evaluated each PE's multiply-add after every clock edge
//! into a stored `d` and copied it into `q` at the next one. With the registers assigned in
//! one clocked block the multiply-add runs once, at the edge, straight into the registers: the
//! PE array is most of the simulation time, and this made the Verilated 8x8 model about 1.3x
//! faster. Both descriptions are the same logic: `update` runs the `#[hdl_gen]` `kernel`, what
//! rust-hdl simulates (the unit test below), the Verilog is what Verilator and the board flows
//! see (systole-sim's and systole-tests' bit-exact tests against the golden model). The
//! differential test (`crate::differential`) simulates the Verilog rust-hdl generates from
//! `kernel` beside `pe_verilog` under Icarus and compares every output in every cycle.

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;

/// One processing element (see the module docs for the timing).
#[derive(LogicBlock, Default)]
pub struct Pe {
    /// Clock; every register samples on its rising edge.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: clears the flags travelling right (the data registers need none).
    pub reset: Signal<In, Bit>,
    /// A word from the left neighbour (or the row's skew line).
    pub a_in: Signal<In, Signed<16>>,
    /// B word from the neighbour above (or the column's skew line).
    pub b_in: Signal<In, Signed<16>>,
    /// `a_in`/`b_in` carry one K step of a command.
    pub valid_in: Signal<In, Bit>,
    /// First K step of a `CMD_CLEAR` command: start the accumulator from zero.
    pub first_in: Signal<In, Bit>,
    /// Last K step of a `CMD_EMIT` command: capture the final sum into `res`.
    pub last_in: Signal<In, Bit>,
    /// `res` of the PE below (the shadow chain shifts upward).
    pub res_in: Signal<In, Signed<48>>,
    /// Shift the shadow chain up one place on this edge.
    pub shift_en: Signal<In, Bit>,
    /// `a_in` delayed one cycle, to the right neighbour.
    pub a_out: Signal<Out, Signed<16>>,
    /// `b_in` delayed one cycle, to the neighbour below.
    pub b_out: Signal<Out, Signed<16>>,
    /// `valid_in` delayed one cycle.
    pub valid_out: Signal<Out, Bit>,
    /// `first_in` delayed one cycle.
    pub first_out: Signal<Out, Bit>,
    /// `last_in` delayed one cycle.
    pub last_out: Signal<Out, Bit>,
    /// Shadow register: the captured accumulator, or the value shifted up from below.
    pub res: Signal<Out, Signed<48>>,
    /// High for one cycle after a capture (used on the bottom row to start the column drain).
    pub captured: Signal<Out, Bit>,
    a_q: DFF<Signed<16>>,
    b_q: DFF<Signed<16>>,
    valid_q: DFF<Bit>,
    first_q: DFF<Bit>,
    last_q: DFF<Bit>,
    acc: DFF<Signed<48>>,
    res_q: DFF<Signed<48>>,
    cap_q: DFF<Bit>,
    prod: Signal<Local, Signed<32>>,
    base: Signal<Local, Signed<48>>,
    sum: Signal<Local, Signed<48>>,
    /// `W` of the emitted Verilog (0, the default, is 16; `kernel` always models 16 bits).
    _word_bits: u32,
}

impl Pe {
    /// A processing element of 16-bit words (the array size only decides how many there are).
    pub fn new() -> Self {
        Self::default()
    }

    /// A processing element whose Verilog computes with `W`-bit words ([`pe_verilog`]); its
    /// ports and its rust-hdl model (`kernel`) stay at 16 and 48 bits.
    pub fn at(word_bits: u32) -> Self {
        Pe {
            _word_bits: word_bits,
            ..Self::default()
        }
    }
}

/// The PE's hand-written Verilog (`hdl/verilog/pe.v`, module `systole_pe` with parameters `W`
/// and `ACC`).
pub(crate) const PE_V: &str = include_str!("../verilog/pe.v");

/// The PE's Verilog body for `W`-bit words inside the ports rust-hdl declares for the array's
/// PE (16-bit words, a 48-bit `res`): `pe.v`'s body at `W` and `acc_bits(W)` (see the file).
pub fn pe_verilog(word_bits: u32) -> String {
    let acc = systole_core::numeric::acc_bits(word_bits);
    crate::vfile::body_at(PE_V, &[("W", word_bits), ("ACC", acc)])
}

impl Logic for Pe {
    fn update(&mut self) {
        Pe::kernel(self);
    }

    fn connect(&mut self) {
        Pe::connect(self);
    }

    /// The hand-written clocked Verilog (see the module docs); rust-hdl still emits the register
    /// submodules, which nothing instantiates: `generate_verilog` drops them.
    fn hdl(&self) -> Verilog {
        let w = match self._word_bits {
            0 => systole_core::numeric::WORD_BITS,
            w => w,
        };
        Verilog::Wrapper(Wrapper {
            code: pe_verilog(w),
            cores: String::new(),
        })
    }
}

#[cfg(test)]
impl crate::differential::Model for Pe {
    fn model_hdl(&self) -> Verilog {
        Pe::hdl(self)
    }
}

/// The PE's logic as rust-hdl simulates it. `#[hdl_gen]` derives `connect` (used above) and a
/// `hdl` of its own: the model's Verilog, which the differential test (`crate::differential`)
/// simulates beside `pe_verilog`.
impl Pe {
    #[hdl_gen]
    fn kernel(&mut self) {
        dff_setup!(self, clock, a_q, b_q, valid_q, first_q, last_q, acc, res_q, cap_q);
        self.prod.next = self.a_in.val() * self.b_in.val();
        self.base.next = self.acc.q.val();
        if self.first_in.val() {
            self.base.next = 0.into();
        }
        self.sum.next = self.base.val() + signed_bit_cast::<48, 32>(self.prod.val());
        self.a_q.d.next = self.a_in.val();
        self.b_q.d.next = self.b_in.val();
        self.valid_q.d.next = self.valid_in.val() & !self.reset.val();
        self.first_q.d.next = self.first_in.val() & !self.reset.val();
        self.last_q.d.next = self.last_in.val() & !self.reset.val();
        if self.valid_in.val() {
            self.acc.d.next = self.sum.val();
        }
        self.cap_q.d.next = false;
        if self.shift_en.val() {
            self.res_q.d.next = self.res_in.val();
        }
        if self.valid_in.val() & self.last_in.val() {
            self.res_q.d.next = self.sum.val();
            self.cap_q.d.next = !self.reset.val();
        }
        self.a_out.next = self.a_q.q.val();
        self.b_out.next = self.b_q.q.val();
        self.valid_out.next = self.valid_q.q.val();
        self.first_out.next = self.first_q.q.val();
        self.last_out.next = self.last_q.q.val();
        self.res.next = self.res_q.q.val();
        self.captured.next = self.cap_q.q.val();
    }
}

#[cfg(test)]
#[path = "pe_width_tests.rs"]
mod width_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// `pe.v`'s ports are the ones rust-hdl declares for `Pe` (the body goes inside them).
    #[test]
    fn the_file_declares_the_ports_of_the_block() {
        let mut pe = Pe::new();
        pe.connect_all();
        crate::vfile::assert_same_ports(PE_V, &generate_verilog_unchecked(&pe));
    }

    /// One K step as (a, b, valid, first, last).
    type Step = (i16, i16, bool, bool, bool);

    #[test]
    fn pe_accumulates_captures_and_forwards() {
        // Two commands: clear K=3 with emit, then clear K=2 with emit, with a bubble between.
        let steps: Vec<Step> = vec![
            (-32768, -32768, true, true, false),
            (1234, -77, true, false, false),
            (-5, 9, true, false, true),
            (0, 0, false, false, false),
            (300, 300, true, true, false),
            (-1, 2, true, false, true),
            (7, 7, false, false, false),
        ];
        let want1 = (1i64 << 30) + 1234 * -77 + -45;
        let want2 = 90000 - 2;
        let mut sim = Simulation::new();
        sim.add_clock(5, |x: &mut Box<Pe>| x.clock.next = !x.clock.val());
        sim.add_testbench(move |mut sim: Sim<Pe>| {
            let mut x = sim.init()?;
            let mut captures = vec![];
            for (i, &(a, b, v, f, l)) in steps.iter().enumerate() {
                x.a_in.next = signed(a as i64);
                x.b_in.next = signed(b as i64);
                x.valid_in.next = v;
                x.first_in.next = f;
                x.last_in.next = l;
                x.res_in.next = signed(-99);
                x.shift_en.next = false;
                wait_clock_cycle!(sim, clock, x);
                // Everything travelling through is one register late.
                sim_assert_eq!(sim, x.a_out.val(), signed::<16>(a as i64), x);
                sim_assert_eq!(sim, x.b_out.val(), signed::<16>(b as i64), x);
                sim_assert_eq!(sim, x.valid_out.val(), v, x);
                sim_assert_eq!(sim, x.first_out.val(), f, x);
                sim_assert_eq!(sim, x.last_out.val(), l, x);
                if x.captured.val() {
                    captures.push((i, x.res.val()));
                }
            }
            sim_assert_eq!(sim, captures.len(), 2, x);
            sim_assert_eq!(sim, captures[0], (2, signed::<48>(want1)), x);
            sim_assert_eq!(sim, captures[1], (5, signed::<48>(want2)), x);
            // The shadow register shifts in the value from below when asked, and holds otherwise.
            x.valid_in.next = false;
            x.shift_en.next = true;
            wait_clock_cycle!(sim, clock, x);
            sim_assert_eq!(sim, x.res.val(), signed::<48>(-99), x);
            x.shift_en.next = false;
            x.res_in.next = signed(5);
            wait_clock_cycle!(sim, clock, x);
            sim_assert_eq!(sim, x.res.val(), signed::<48>(-99), x);
            sim.done(x)
        });
        let mut uut = Pe::new();
        uut.connect_all();
        sim.run(Box::new(uut), 1_000).unwrap();
    }
}
