//! Command controller: a queue of one running and one waiting command, the K-row sequencer
//! and the bookkeeping of emitted tiles.
//!
//! Each cycle the running command issues one K step: the A and B buffers are read at row `k`
//! (data valid on the next cycle) and the `valid`/`first`/`last` flags are registered so they
//! reach the array together with that data. When the last K row of a command is issued, the
//! waiting command (if any) becomes the running one on the same edge, so its row 0 is issued on
//! the very next cycle: a stream of tiles keeps the array busy.
//!
//! The only stall: consecutive emitting commands must issue their last rows at least
//! `2n - 1` cycles apart, so a column's shadow chain has shifted out the previous tile before the
//! next tile's results are captured into it (and the drain parameters latched for column 0 are
//! used before they are replaced). With K >= 2n - 1 this never stalls; shorter commands get just
//! enough idle cycles before their last row.
//!
//! The tile seed and C bank of an emitting command are latched (`drain_seed`, `drain_bank`) when
//! its last row is issued; column 0's converter takes them when the drain starts and passes them
//! along the columns. `pending` counts emitted tiles whose outputs are not all in the C buffer.

use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::config::{MAX_SIZE, MIN_SIZE};
use systole_core::regmap::cmd;

/// The controller (see the module docs).
#[derive(LogicBlock)]
pub struct Controller {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: drops both queue slots and forgets pending tiles.
    pub reset: Signal<In, Bit>,
    /// A good command is written this cycle (the register file checked it).
    pub cmd_valid: Signal<In, Bit>,
    /// Its `regmap::CMD_*` bits.
    pub cmd_word: Signal<In, Bits<5>>,
    /// `K_LEN` to latch with the command.
    pub k_len: Signal<In, Bits<17>>,
    /// `SEED` to latch with the command.
    pub seed: Signal<In, Bits<32>>,
    /// The last column finished writing an emitted tile this cycle.
    pub tile_done: Signal<In, Bit>,
    /// A bank to read.
    pub rd_a_bank: Signal<Out, Bit>,
    /// B bank to read.
    pub rd_b_bank: Signal<Out, Bit>,
    /// Row (K step) to read in both buffers.
    pub rd_row: Signal<Out, Bits<16>>,
    /// The buffer data arriving now is a K step (registered, aligned with the RAM output).
    pub valid: Signal<Out, Bit>,
    /// ... the first K step of a clearing command.
    pub first: Signal<Out, Bit>,
    /// ... the last K step of an emitting command.
    pub last: Signal<Out, Bit>,
    /// Tile seed of the most recent emitting command.
    pub drain_seed: Signal<Out, Bits<32>>,
    /// C bank of the most recent emitting command.
    pub drain_bank: Signal<Out, Bit>,
    /// A command runs or waits, or an emitted tile is not complete.
    pub busy: Signal<Out, Bit>,
    /// The waiting slot is taken (a command now would be dropped).
    pub queue_full: Signal<Out, Bit>,
    /// A bank `b` (bit `b`) is read by the running or the waiting command.
    pub a_banks_busy: Signal<Out, Bits<2>>,
    /// B bank `b` (bit `b`) is read by the running or the waiting command.
    pub b_banks_busy: Signal<Out, Bits<2>>,
    /// One K step issued this cycle.
    pub mac: Signal<Out, Bit>,
    w_valid: DFF<Bit>,
    w_word: DFF<Bits<5>>,
    w_klen: DFF<Bits<17>>,
    w_seed: DFF<Bits<32>>,
    r_valid: DFF<Bit>,
    r_word: DFF<Bits<5>>,
    r_klen: DFF<Bits<17>>,
    r_seed: DFF<Bits<32>>,
    k: DFF<Bits<17>>,
    gap: DFF<Bits<8>>,
    v_q: DFF<Bit>,
    f_q: DFF<Bit>,
    l_q: DFF<Bit>,
    dseed: DFF<Bits<32>>,
    dbank: DFF<Bit>,
    pending: DFF<Bits<4>>,
    gap_min: Constant<Bits<8>>,
    gap_max: Constant<Bits<8>>,
    m_a_bank: Constant<Bits<5>>,
    m_b_bank: Constant<Bits<5>>,
    m_c_bank: Constant<Bits<5>>,
    m_clear: Constant<Bits<5>>,
    m_emit: Constant<Bits<5>>,
    is_last: Signal<Local, Bit>,
    emit_last: Signal<Local, Bit>,
    issue: Signal<Local, Bit>,
    inc: Signal<Local, Bit>,
}

impl Controller {
    /// The controller of an `n x n` array.
    pub fn new(n: usize) -> Result<Self, HdlError> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&n) {
            return Err(HdlError::Block(format!(
                "controller for array size {n}: must be {MIN_SIZE}..={MAX_SIZE}"
            )));
        }
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            cmd_valid: Default::default(),
            cmd_word: Default::default(),
            k_len: Default::default(),
            seed: Default::default(),
            tile_done: Default::default(),
            rd_a_bank: Default::default(),
            rd_b_bank: Default::default(),
            rd_row: Default::default(),
            valid: Default::default(),
            first: Default::default(),
            last: Default::default(),
            drain_seed: Default::default(),
            drain_bank: Default::default(),
            busy: Default::default(),
            queue_full: Default::default(),
            a_banks_busy: Default::default(),
            b_banks_busy: Default::default(),
            mac: Default::default(),
            w_valid: Default::default(),
            w_word: Default::default(),
            w_klen: Default::default(),
            w_seed: Default::default(),
            r_valid: Default::default(),
            r_word: Default::default(),
            r_klen: Default::default(),
            r_seed: Default::default(),
            k: Default::default(),
            gap: Default::default(),
            v_q: Default::default(),
            f_q: Default::default(),
            l_q: Default::default(),
            dseed: Default::default(),
            dbank: Default::default(),
            pending: Default::default(),
            // `gap` counts cycles since the previous emitting last row, minus one.
            gap_min: Constant::new(bits(2 * n as u64 - 2)),
            gap_max: Constant::new(bits(255)),
            m_a_bank: Constant::new(bits(cmd::A_BANK.mask() as u64)),
            m_b_bank: Constant::new(bits(cmd::B_BANK.mask() as u64)),
            m_c_bank: Constant::new(bits(cmd::C_BANK.mask() as u64)),
            m_clear: Constant::new(bits(cmd::CLEAR.mask() as u64)),
            m_emit: Constant::new(bits(cmd::EMIT.mask() as u64)),
            is_last: Default::default(),
            emit_last: Default::default(),
            issue: Default::default(),
            inc: Default::default(),
        })
    }
}

impl Logic for Controller {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, w_valid, w_word, w_klen, w_seed, r_valid, r_word, r_klen, r_seed, k, gap,
            v_q, f_q, l_q, dseed, dbank, pending
        );
        self.is_last.next = (self.k.q.val() + 1) == self.r_klen.q.val();
        self.emit_last.next = self.is_last.val() & (self.r_word.q.val() & self.m_emit.val()).any();
        self.issue.next = self.r_valid.q.val()
            & !(self.emit_last.val() & (self.gap.q.val() < self.gap_min.val()));
        self.v_q.d.next = self.issue.val();
        self.f_q.d.next = self.issue.val()
            & (self.k.q.val() == 0)
            & (self.r_word.q.val() & self.m_clear.val()).any();
        self.l_q.d.next = self.issue.val() & self.emit_last.val();
        self.inc.next = self.issue.val() & self.emit_last.val();
        if self.gap.q.val() != self.gap_max.val() {
            self.gap.d.next = self.gap.q.val() + 1;
        }
        if self.issue.val() {
            self.k.d.next = self.k.q.val() + 1;
            if self.is_last.val() {
                // Hand over to the waiting command without a bubble.
                self.k.d.next = 0.into();
                self.r_valid.d.next = self.w_valid.q.val();
                self.r_word.d.next = self.w_word.q.val();
                self.r_klen.d.next = self.w_klen.q.val();
                self.r_seed.d.next = self.w_seed.q.val();
                self.w_valid.d.next = false;
            }
            if self.emit_last.val() {
                self.dseed.d.next = self.r_seed.q.val();
                self.dbank.d.next = (self.r_word.q.val() & self.m_c_bank.val()).any();
                self.gap.d.next = 0.into();
            }
        }
        if !self.r_valid.q.val() & self.w_valid.q.val() {
            self.k.d.next = 0.into();
            self.r_valid.d.next = true;
            self.r_word.d.next = self.w_word.q.val();
            self.r_klen.d.next = self.w_klen.q.val();
            self.r_seed.d.next = self.w_seed.q.val();
            self.w_valid.d.next = false;
        }
        // The register file only passes a command when `queue_full` is low.
        if self.cmd_valid.val() {
            self.w_valid.d.next = true;
            self.w_word.d.next = self.cmd_word.val();
            self.w_klen.d.next = self.k_len.val();
            self.w_seed.d.next = self.seed.val();
        }
        if self.inc.val() & !self.tile_done.val() {
            self.pending.d.next = self.pending.q.val() + 1;
        }
        if !self.inc.val() & self.tile_done.val() & (self.pending.q.val() != 0) {
            self.pending.d.next = self.pending.q.val() - 1;
        }
        if self.reset.val() {
            self.w_valid.d.next = false;
            self.r_valid.d.next = false;
            self.k.d.next = 0.into();
            self.gap.d.next = self.gap_max.val();
            self.v_q.d.next = false;
            self.f_q.d.next = false;
            self.l_q.d.next = false;
            self.pending.d.next = 0.into();
        }
        self.rd_a_bank.next = (self.r_word.q.val() & self.m_a_bank.val()).any();
        self.rd_b_bank.next = (self.r_word.q.val() & self.m_b_bank.val()).any();
        self.rd_row.next = bit_cast::<16, 17>(self.k.q.val());
        self.valid.next = self.v_q.q.val();
        self.first.next = self.f_q.q.val();
        self.last.next = self.l_q.q.val();
        self.drain_seed.next = self.dseed.q.val();
        self.drain_bank.next = self.dbank.q.val();
        self.busy.next = self.r_valid.q.val() | self.w_valid.q.val() | (self.pending.q.val() != 0);
        // Straight from a register: a combinational status would close a false loop through
        // the register file's `cmd_valid` (Verilator UNOPTFLAT).
        self.queue_full.next = self.w_valid.q.val();
        // For the gather engines' interlock: a bank may be filled once no command reads it.
        self.a_banks_busy.next = 0.into();
        self.b_banks_busy.next = 0.into();
        if self.r_valid.q.val() {
            if (self.r_word.q.val() & self.m_a_bank.val()).any() {
                self.a_banks_busy.next = self.a_banks_busy.val() | 2;
            } else {
                self.a_banks_busy.next = self.a_banks_busy.val() | 1;
            }
            if (self.r_word.q.val() & self.m_b_bank.val()).any() {
                self.b_banks_busy.next = self.b_banks_busy.val() | 2;
            } else {
                self.b_banks_busy.next = self.b_banks_busy.val() | 1;
            }
        }
        if self.w_valid.q.val() {
            if (self.w_word.q.val() & self.m_a_bank.val()).any() {
                self.a_banks_busy.next = self.a_banks_busy.val() | 2;
            } else {
                self.a_banks_busy.next = self.a_banks_busy.val() | 1;
            }
            if (self.w_word.q.val() & self.m_b_bank.val()).any() {
                self.b_banks_busy.next = self.b_banks_busy.val() | 2;
            } else {
                self.b_banks_busy.next = self.b_banks_busy.val() | 1;
            }
        }
        self.mac.next = self.issue.val();
    }
}
