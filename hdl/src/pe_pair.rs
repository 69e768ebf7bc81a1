//! Two vertically neighbouring PEs sharing one multiplier: two MACs per DSP48E1 at `W <= 8`.
//!
//! In the output-stationary array B words travel down, so the PEs of rows `2p` (upper) and
//! `2p + 1` (lower) of a column see the same B word, the lower one clock after the upper.
//! The pair computes both products in the lower's cycle, in one packed multiply
//! (`systole_core::dsp_pack`): `P = b·(a_lower·2^k + a_upper)` with `k = 2W`, the upper's
//! product `sext(P[k-1:0])`, the lower's `(P - low) >> k`. The upper's A word of the last
//! clock is what aligns the two: the upper already holds it in its forwarding register
//! (`ua_q`, which feeds its right neighbour), so the alignment costs no new flip-flop, and the
//! upper accumulates one clock late under the lower's `valid`/`first`/`last` flags, which are
//! the upper's of the clock before (row `r + 1`'s flags are row `r`'s delayed by the skew).
//! Nothing leaves the pair later than before: the upper's shadow register captures one clock
//! late, in the lower's clock, which is never after the bottom row's capture that starts the
//! column's drain, and every word and flag forwarded right or down keeps its timing, so the
//! array's results and cycle counts are the unpacked array's. No pipeline stage is added: the
//! combinational path grows by the packed factor's `(W + 1)`-bit decrement in front of the
//! multiplier and the high product's 2W-bit correction behind it.
//!
//! As for the PE, the Verilog is hand-written (`hdl/verilog/pe_pair.v`) and `kernel` is its
//! rust-hdl model, which computes the two products separately as two PEs would: the
//! differential test below proves the packed multiply equal to them under Icarus.

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::dsp_pack::pack_shift;
use systole_core::numeric::acc_bits;

/// Two PEs of one column, rows `2p` (`u_*`) and `2p + 1` (`l_*`); ports as two `Pe`s' with
/// the B word and the shadow chain passing between them inside.
#[derive(LogicBlock, Default)]
pub struct PePair {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: clears the flags travelling right.
    pub reset: Signal<In, Bit>,
    /// Upper row's A word from the left.
    pub u_a_in: Signal<In, Signed<16>>,
    /// Lower row's A word from the left.
    pub l_a_in: Signal<In, Signed<16>>,
    /// B word from above (into the upper PE).
    pub b_in: Signal<In, Signed<16>>,
    /// Upper row's flags from the left (forwarded only: the upper accumulates under the lower's).
    pub u_valid_in: Signal<In, Bit>,
    /// Upper row's `first`.
    pub u_first_in: Signal<In, Bit>,
    /// Upper row's `last`.
    pub u_last_in: Signal<In, Bit>,
    /// Lower row's `valid`: both PEs accumulate when it is set.
    pub l_valid_in: Signal<In, Bit>,
    /// Lower row's `first`: both restart from zero.
    pub l_first_in: Signal<In, Bit>,
    /// Lower row's `last`: both capture.
    pub l_last_in: Signal<In, Bit>,
    /// `res` of the PE below the pair.
    pub res_in: Signal<In, Signed<48>>,
    /// Shift the shadow chain up one place.
    pub shift_en: Signal<In, Bit>,
    /// Upper A word delayed one clock, to the right.
    pub u_a_out: Signal<Out, Signed<16>>,
    /// Lower A word delayed one clock, to the right.
    pub l_a_out: Signal<Out, Signed<16>>,
    /// B word delayed two clocks (through both PEs), down.
    pub b_out: Signal<Out, Signed<16>>,
    /// Upper flags delayed one clock.
    pub u_valid_out: Signal<Out, Bit>,
    /// Upper `first` delayed.
    pub u_first_out: Signal<Out, Bit>,
    /// Upper `last` delayed.
    pub u_last_out: Signal<Out, Bit>,
    /// Lower flags delayed one clock.
    pub l_valid_out: Signal<Out, Bit>,
    /// Lower `first` delayed.
    pub l_first_out: Signal<Out, Bit>,
    /// Lower `last` delayed.
    pub l_last_out: Signal<Out, Bit>,
    /// The upper PE's shadow register (the top of the pair's chain).
    pub res: Signal<Out, Signed<48>>,
    /// High for one clock after the lower PE captured (the bottom pair starts the drain).
    pub captured: Signal<Out, Bit>,
    ua_q: DFF<Signed<16>>,
    la_q: DFF<Signed<16>>,
    ub_q: DFF<Signed<16>>,
    lb_q: DFF<Signed<16>>,
    u_valid_q: DFF<Bit>,
    u_first_q: DFF<Bit>,
    u_last_q: DFF<Bit>,
    l_valid_q: DFF<Bit>,
    l_first_q: DFF<Bit>,
    l_last_q: DFF<Bit>,
    u_acc: DFF<Signed<48>>,
    l_acc: DFF<Signed<48>>,
    u_res_q: DFF<Signed<48>>,
    l_res_q: DFF<Signed<48>>,
    cap_q: DFF<Bit>,
    u_prod: Signal<Local, Signed<32>>,
    l_prod: Signal<Local, Signed<32>>,
    u_base: Signal<Local, Signed<48>>,
    l_base: Signal<Local, Signed<48>>,
    u_sum: Signal<Local, Signed<48>>,
    l_sum: Signal<Local, Signed<48>>,
    _word_bits: u32,
}

impl PePair {
    /// A pair whose Verilog computes with `W`-bit words (`W <= MAX_PACK_WORD_BITS`, which
    /// `ArrayConfig::validate` checks); ports and model stay at 16 and 48 bits, as the PE's.
    pub fn at(word_bits: u32) -> Self {
        PePair {
            _word_bits: word_bits,
            ..Self::default()
        }
    }
}

/// The pair's hand-written Verilog (`hdl/verilog/pe_pair.v`, module `systole_pe_pair` with
/// parameters `W`, `K` and `ACC`).
pub(crate) const PE_PAIR_V: &str = include_str!("../verilog/pe_pair.v");

/// The pair's Verilog for `W`-bit words inside its 16-bit word and 48-bit `res` ports (which
/// carry sign-extended values): both products from one `W x (3W + 1)` multiply.
pub fn pe_pair_verilog(word_bits: u32) -> String {
    pair_body(word_bits, pack_shift(word_bits))
}

/// [`pe_pair_verilog`] with the high factor at `2^k` (the tests show `k = 2W - 1` wrong).
fn pair_body(w: u32, k: u32) -> String {
    crate::vfile::body_at(PE_PAIR_V, &[("W", w), ("K", k), ("ACC", acc_bits(w))])
}

impl Logic for PePair {
    fn update(&mut self) {
        PePair::kernel(self);
    }

    fn connect(&mut self) {
        PePair::connect(self);
    }

    /// The hand-written Verilog; `generate_verilog` drops the register submodules rust-hdl
    /// still emits for it.
    fn hdl(&self) -> Verilog {
        Verilog::Wrapper(Wrapper {
            code: pe_pair_verilog(self._word_bits),
            cores: String::new(),
        })
    }
}

#[cfg(test)]
impl crate::differential::Model for PePair {
    fn model_hdl(&self) -> Verilog {
        PePair::hdl(self)
    }
}

/// The pair as two PEs with their own multiplies (what the packed multiply must equal), the
/// upper one clock late under the lower's flags.
impl PePair {
    #[hdl_gen]
    fn kernel(&mut self) {
        dff_setup!(
            self, clock, ua_q, la_q, ub_q, lb_q, u_valid_q, u_first_q, u_last_q, l_valid_q,
            l_first_q, l_last_q, u_acc, l_acc, u_res_q, l_res_q, cap_q
        );
        self.u_prod.next = self.ua_q.q.val() * self.ub_q.q.val();
        self.l_prod.next = self.l_a_in.val() * self.ub_q.q.val();
        self.u_base.next = self.u_acc.q.val();
        self.l_base.next = self.l_acc.q.val();
        if self.l_first_in.val() {
            self.u_base.next = 0.into();
            self.l_base.next = 0.into();
        }
        self.u_sum.next = self.u_base.val() + signed_bit_cast::<48, 32>(self.u_prod.val());
        self.l_sum.next = self.l_base.val() + signed_bit_cast::<48, 32>(self.l_prod.val());
        self.ua_q.d.next = self.u_a_in.val();
        self.la_q.d.next = self.l_a_in.val();
        self.ub_q.d.next = self.b_in.val();
        self.lb_q.d.next = self.ub_q.q.val();
        self.u_valid_q.d.next = self.u_valid_in.val() & !self.reset.val();
        self.u_first_q.d.next = self.u_first_in.val() & !self.reset.val();
        self.u_last_q.d.next = self.u_last_in.val() & !self.reset.val();
        self.l_valid_q.d.next = self.l_valid_in.val() & !self.reset.val();
        self.l_first_q.d.next = self.l_first_in.val() & !self.reset.val();
        self.l_last_q.d.next = self.l_last_in.val() & !self.reset.val();
        if self.l_valid_in.val() {
            self.u_acc.d.next = self.u_sum.val();
            self.l_acc.d.next = self.l_sum.val();
        }
        self.cap_q.d.next = false;
        if self.shift_en.val() {
            self.u_res_q.d.next = self.l_res_q.q.val();
            self.l_res_q.d.next = self.res_in.val();
        }
        if self.l_valid_in.val() & self.l_last_in.val() {
            self.u_res_q.d.next = self.u_sum.val();
            self.l_res_q.d.next = self.l_sum.val();
            self.cap_q.d.next = !self.reset.val();
        }
        self.u_a_out.next = self.ua_q.q.val();
        self.l_a_out.next = self.la_q.q.val();
        self.b_out.next = self.lb_q.q.val();
        self.u_valid_out.next = self.u_valid_q.q.val();
        self.u_first_out.next = self.u_first_q.q.val();
        self.u_last_out.next = self.u_last_q.q.val();
        self.l_valid_out.next = self.l_valid_q.q.val();
        self.l_first_out.next = self.l_first_q.q.val();
        self.l_last_out.next = self.l_last_q.q.val();
        self.res.next = self.u_res_q.q.val();
        self.captured.next = self.cap_q.q.val();
    }
}

#[cfg(test)]
#[path = "pe_pair_tests.rs"]
mod tests;
