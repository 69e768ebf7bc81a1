//! One address walker of a gather engine: the 3-level mixed-radix counter with coordinates,
//! remainders and an address that `systole_core::gather::Walk::step` models bit for bit.
//! Adders and comparators only: every multiply and divide of the im2col arithmetic was done
//! once by the firmware when it computed the configuration words.
//!
//! This block is the walker rust-hdl simulates inside `GatherEngine::kernel`; the engine's
//! hand-written Verilog (`gather/verilog.rs`) writes the same logic out inline, twice.

use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::gather::layout::*;
use systole_core::gather::WALK_WORDS;

// rust-hdl's `hdl_gen` slices only at literal offsets, so `update` spells out the fields of
// `systole_core::gather::layout` (word index, lsb, width); this checks every literal against
// the one definition at compile time.
const _: () = {
    const fn at(f: systole_core::field::Field, lsb: u32, width: u32) -> bool {
        f.lsb == lsb && f.width == width
    }
    assert!(COUNTS01 == 0 && COUNT2_MOD == 1 && CARRY_Q == 10 && CARRY_A_Y == 11);
    assert!(CARRY_A_X == 12 && START_IDX01 == 13 && START_IDX2_R == 14 && START_Q == 15);
    assert!(START_ADDR == 16 && step_q_word(0) == 2 && step_a_word(0) == 3);
    assert!(step_q_word(3) == 8 && step_a_word(3) == 9);
    assert!(at(COUNT0, 0, 16) && at(COUNT1, 16, 16) && at(COUNT2, 0, 16));
    assert!(at(DQ_Y, 0, 16) && at(DQ_X, 16, 16) && at(DA, 0, 24));
    assert!(at(DR_Y, 24, 4) && at(DR_X, 28, 4) && at(CQ_Y, 0, 16) && at(CQ_X, 16, 16));
    assert!(at(CA_Y, 0, 24) && at(CA_X, 0, 24) && at(START_IDX0, 0, 16));
    assert!(at(START_IDX1, 16, 16) && at(START_IDX2, 0, 16) && at(START_RY, 16, 4));
    assert!(at(START_RX, 24, 4) && at(START_QY, 0, 16) && at(START_QX, 16, 16));
    assert!(at(ADDR, 0, 24) && at(MODULUS, 16, 4));
};

/// A walker (see the module docs). State changes on the rising edge: `load` takes the start
/// state from the configuration, otherwise `step` takes one step.
#[derive(LogicBlock)]
pub struct Walker {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// The walker's configuration words (`systole_core::gather::Walk::words`).
    pub cfg: Vec<Signal<In, Bits<32>>>,
    /// Remainder modulus (`1..=15`).
    pub modulus: Signal<In, Bits<4>>,
    /// Load the start state on this edge.
    pub load: Signal<In, Bit>,
    /// Take one step on this edge (ignored while `load` is set).
    pub step: Signal<In, Bit>,
    /// Coordinate y.
    pub qy: Signal<Out, Bits<16>>,
    /// Coordinate x.
    pub qx: Signal<Out, Bits<16>>,
    /// Remainder y.
    pub ry: Signal<Out, Bits<4>>,
    /// Remainder x.
    pub rx: Signal<Out, Bits<4>>,
    /// Address (wrapping).
    pub addr: Signal<Out, Bits<24>>,
    idx0: DFF<Bits<16>>,
    idx1: DFF<Bits<16>>,
    idx2: DFF<Bits<16>>,
    qy_q: DFF<Bits<16>>,
    qx_q: DFF<Bits<16>>,
    ry_q: DFF<Bits<4>>,
    rx_q: DFF<Bits<4>>,
    addr_q: DFF<Bits<24>>,
    /// `idx + 1` of each level, at 16 bits (see `update`).
    inc0: Signal<Local, Bits<16>>,
    inc1: Signal<Local, Bits<16>>,
    inc2: Signal<Local, Bits<16>>,
    last0: Signal<Local, Bit>,
    last1: Signal<Local, Bit>,
    last2: Signal<Local, Bit>,
    dq: Signal<Local, Bits<32>>,
    dd: Signal<Local, Bits<32>>,
    sum_y: Signal<Local, Bits<5>>,
    sum_x: Signal<Local, Bits<5>>,
    mod5: Signal<Local, Bits<5>>,
    carry_y: Signal<Local, Bit>,
    carry_x: Signal<Local, Bit>,
    cq_y: Signal<Local, Bits<16>>,
    cq_x: Signal<Local, Bits<16>>,
    ca_y: Signal<Local, Bits<24>>,
    ca_x: Signal<Local, Bits<24>>,
}

impl Walker {
    /// A walker; `WALK_WORDS` configuration inputs.
    pub fn new() -> Result<Self, HdlError> {
        if WALK_WORDS != 17 {
            return Err(HdlError::Block(format!(
                "walker layout has {WALK_WORDS} words; this block decodes 17"
            )));
        }
        Ok(Self {
            clock: Default::default(),
            cfg: (0..WALK_WORDS).map(|_| Signal::default()).collect(),
            modulus: Default::default(),
            load: Default::default(),
            step: Default::default(),
            qy: Default::default(),
            qx: Default::default(),
            ry: Default::default(),
            rx: Default::default(),
            addr: Default::default(),
            idx0: Default::default(),
            idx1: Default::default(),
            idx2: Default::default(),
            qy_q: Default::default(),
            qx_q: Default::default(),
            ry_q: Default::default(),
            rx_q: Default::default(),
            addr_q: Default::default(),
            inc0: Default::default(),
            inc1: Default::default(),
            inc2: Default::default(),
            last0: Default::default(),
            last1: Default::default(),
            last2: Default::default(),
            dq: Default::default(),
            dd: Default::default(),
            sum_y: Default::default(),
            sum_x: Default::default(),
            mod5: Default::default(),
            carry_y: Default::default(),
            carry_x: Default::default(),
            cq_y: Default::default(),
            cq_x: Default::default(),
            ca_y: Default::default(),
            ca_x: Default::default(),
        })
    }
}

impl Logic for Walker {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, idx0, idx1, idx2, qy_q, qx_q, ry_q, rx_q, addr_q);
        // The sums go through 16-bit signals: rust-hdl writes `idx + 1` as `idx + 32'h1`, so
        // compared directly in its Verilog `0xFFFF + 1` would not wrap to 0 as it does here and
        // in `Walk::step` (the differential test found this).
        self.inc0.next = self.idx0.q.val() + 1;
        self.inc1.next = self.idx1.q.val() + 1;
        self.inc2.next = self.idx2.q.val() + 1;
        self.last0.next = self.inc0.val() == self.cfg[0].val().get_bits::<16>(0);
        self.last1.next = self.inc1.val() == self.cfg[0].val().get_bits::<16>(16);
        self.last2.next = self.inc2.val() == self.cfg[1].val().get_bits::<16>(0);
        // The level that steps: the innermost one not at its last count (3 when all are).
        self.dq.next = self.cfg[8].val();
        self.dd.next = self.cfg[9].val();
        if !self.last2.val() {
            self.dq.next = self.cfg[6].val();
            self.dd.next = self.cfg[7].val();
        }
        if !self.last1.val() {
            self.dq.next = self.cfg[4].val();
            self.dd.next = self.cfg[5].val();
        }
        if !self.last0.val() {
            self.dq.next = self.cfg[2].val();
            self.dd.next = self.cfg[3].val();
        }
        self.mod5.next = bit_cast::<5, 4>(self.modulus.val());
        self.sum_y.next =
            bit_cast::<5, 4>(self.ry_q.q.val()) + bit_cast::<5, 4>(self.dd.val().get_bits::<4>(24));
        self.sum_x.next =
            bit_cast::<5, 4>(self.rx_q.q.val()) + bit_cast::<5, 4>(self.dd.val().get_bits::<4>(28));
        self.carry_y.next = self.sum_y.val() >= self.mod5.val();
        self.carry_x.next = self.sum_x.val() >= self.mod5.val();
        self.cq_y.next = 0.into();
        self.ca_y.next = 0.into();
        self.cq_x.next = 0.into();
        self.ca_x.next = 0.into();
        if self.carry_y.val() {
            self.cq_y.next = self.cfg[10].val().get_bits::<16>(0);
            self.ca_y.next = self.cfg[11].val().get_bits::<24>(0);
        }
        if self.carry_x.val() {
            self.cq_x.next = self.cfg[10].val().get_bits::<16>(16);
            self.ca_x.next = self.cfg[12].val().get_bits::<24>(0);
        }
        if self.step.val() {
            if !self.last0.val() {
                self.idx0.d.next = self.idx0.q.val() + 1;
            } else {
                self.idx0.d.next = 0.into();
                if !self.last1.val() {
                    self.idx1.d.next = self.idx1.q.val() + 1;
                } else {
                    self.idx1.d.next = 0.into();
                    if !self.last2.val() {
                        self.idx2.d.next = self.idx2.q.val() + 1;
                    } else {
                        self.idx2.d.next = 0.into();
                    }
                }
            }
            self.ry_q.d.next = bit_cast::<4, 5>(self.sum_y.val());
            if self.carry_y.val() {
                self.ry_q.d.next = bit_cast::<4, 5>(self.sum_y.val() - self.mod5.val());
            }
            self.rx_q.d.next = bit_cast::<4, 5>(self.sum_x.val());
            if self.carry_x.val() {
                self.rx_q.d.next = bit_cast::<4, 5>(self.sum_x.val() - self.mod5.val());
            }
            self.qy_q.d.next =
                self.qy_q.q.val() + self.dq.val().get_bits::<16>(0) + self.cq_y.val();
            self.qx_q.d.next =
                self.qx_q.q.val() + self.dq.val().get_bits::<16>(16) + self.cq_x.val();
            self.addr_q.d.next = self.addr_q.q.val()
                + self.dd.val().get_bits::<24>(0)
                + self.ca_y.val()
                + self.ca_x.val();
        }
        if self.load.val() {
            self.idx0.d.next = self.cfg[13].val().get_bits::<16>(0);
            self.idx1.d.next = self.cfg[13].val().get_bits::<16>(16);
            self.idx2.d.next = self.cfg[14].val().get_bits::<16>(0);
            self.ry_q.d.next = self.cfg[14].val().get_bits::<4>(16);
            self.rx_q.d.next = self.cfg[14].val().get_bits::<4>(24);
            self.qy_q.d.next = self.cfg[15].val().get_bits::<16>(0);
            self.qx_q.d.next = self.cfg[15].val().get_bits::<16>(16);
            self.addr_q.d.next = self.cfg[16].val().get_bits::<24>(0);
        }
        self.qy.next = self.qy_q.q.val();
        self.qx.next = self.qx_q.q.val();
        self.ry.next = self.ry_q.q.val();
        self.rx.next = self.rx_q.q.val();
        self.addr.next = self.addr_q.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::gather::{ConvGeom, Walk, WalkState};

    #[test]
    fn walker_synthesizes() {
        let mut w = Walker::new().unwrap();
        w.connect_all();
        let v = generate_verilog(&w);
        assert!(v.contains("module top"), "{v}");
    }

    /// Loads, then steps through `steps` states and compares each with the model.
    fn follow(walk: Walk, modulus: u8, steps: usize) {
        let words = walk.words();
        let mut want = vec![walk.start];
        for i in 1..steps {
            want.push(walk.step(&want[i - 1], modulus));
        }
        let mut sim = Simulation::new();
        sim.add_clock(5, |x: &mut Box<Walker>| x.clock.next = !x.clock.val());
        sim.add_testbench(move |mut sim: Sim<Walker>| {
            let mut x = sim.init()?;
            for (i, w) in words.iter().enumerate() {
                x.cfg[i].next = bits(*w as u64);
            }
            x.modulus.next = bits(modulus as u64);
            x.load.next = true;
            wait_clock_cycle!(sim, clock, x);
            x.load.next = false;
            x.step.next = true;
            for (i, s) in want.iter().enumerate() {
                let got = WalkState {
                    idx: s.idx,
                    q: [x.qy.val().index() as u16, x.qx.val().index() as u16],
                    r: [x.ry.val().index() as u8, x.rx.val().index() as u8],
                    addr: x.addr.val().index() as u32,
                };
                sim_assert_eq!(sim, (i, got), (i, *s), x);
                wait_clock_cycle!(sim, clock, x);
            }
            sim.done(x)
        });
        let mut uut = Walker::new().unwrap();
        uut.connect_all();
        sim.run(Box::new(uut), 1_000_000).unwrap();
    }

    #[test]
    fn walker_matches_the_model() {
        let g = ConvGeom {
            in_ch: 2,
            in_h: 7,
            in_w: 6,
            out_ch: 3,
            kernel: 3,
            stride: 2,
            pad: 1,
        };
        // The strided input-gradient walks use remainders, carries and negative steps; the
        // forward lane walk wraps around a ring of two image slots.
        let bi = g.backward_input_a(2, g.out_words());
        follow(bi.lanes, bi.modulus, 2 * 7 * 6 + 5);
        follow(bi.k, bi.modulus, 3 * 9 + 2);
        let fw = g.forward_a(2, g.in_words());
        follow(fw.lanes, fw.modulus, 3 * g.out_h() * g.out_w() + 1);
    }
}
