//! Register file: the bus side of `systole_core::regmap`.
//!
//! Reads are combinational from `reg_addr` (no side effects); writes happen on the rising edge
//! when `reg_we` is set. Out-of-range values written to `SHIFT` (> 32), `ROUNDING` (> 2) or
//! `K_LEN` (0 or > depth) are stored, set the sticky error bit, and make every `COMMAND`
//! written while they stand fail. A `COMMAND` that fails (bad parameters, or the queue is full)
//! sets the error bit and is dropped; a good one is handed to the controller as a one-cycle
//! `cmd_valid` with the current `K_LEN` and `SEED` beside it.

use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::numeric::MAX_SHIFT;
use systole_core::regmap::{self, value};
use systole_core::{ArrayConfig, Rounding};

// The stored widths below are those of the register fields in `systole_core::regmap`.
const _: () = assert!(value::SHIFT.width == 6 && value::ROUNDING.width == 2);
const _: () = assert!(value::K_LEN.width == 17 && value::SEED.width == 32);
const _: () = assert!(
    regmap::cmd::EMIT.msb() < 5,
    "cmd_word holds the COMMAND fields"
);

/// The register file (see the module docs).
#[derive(LogicBlock)]
pub struct RegFile {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset: registers to their reset values, counters to zero.
    pub reset: Signal<In, Bit>,
    /// Register index.
    pub reg_addr: Signal<In, Bits<8>>,
    /// Write data.
    pub reg_wdata: Signal<In, Bits<32>>,
    /// Write strobe.
    pub reg_we: Signal<In, Bit>,
    /// Read data of `reg_addr` (combinational).
    pub reg_rdata: Signal<Out, Bits<32>>,
    /// Controller: a command runs, waits or is draining.
    pub busy: Signal<In, Bit>,
    /// Controller: the waiting slot is taken.
    pub queue_full: Signal<In, Bit>,
    /// One emitted tile completed this cycle.
    pub done_inc: Signal<In, Bit>,
    /// The array consumed one K step this cycle.
    pub mac_inc: Signal<In, Bit>,
    /// Gather engine A is busy.
    pub gather_a_busy: Signal<In, Bit>,
    /// Gather engine B is busy.
    pub gather_b_busy: Signal<In, Bit>,
    /// A gather command was refused this cycle.
    pub gather_error: Signal<In, Bit>,
    /// `SHIFT` register.
    pub shift: Signal<Out, Bits<6>>,
    /// `ROUNDING` register.
    pub rounding: Signal<Out, Bits<2>>,
    /// `SEED` register.
    pub seed: Signal<Out, Bits<32>>,
    /// `K_LEN` register.
    pub k_len: Signal<Out, Bits<17>>,
    /// A good command is written this cycle.
    pub cmd_valid: Signal<Out, Bit>,
    /// The command word (`regmap::CMD_*` bits).
    pub cmd_word: Signal<Out, Bits<5>>,
    shift_q: DFF<Bits<6>>,
    shift_bad: DFF<Bit>,
    round_q: DFF<Bits<2>>,
    round_bad: DFF<Bit>,
    seed_q: DFF<Bits<32>>,
    klen_q: DFF<Bits<17>>,
    klen_bad: DFF<Bit>,
    err: DFF<Bit>,
    done_q: DFF<Bits<32>>,
    cycles_q: DFF<Bits<32>>,
    mac_q: DFF<Bits<32>>,
    status: Signal<Local, Bits<32>>,
    write: Signal<Local, Bit>,
    id_value: Constant<Bits<32>>,
    config_value: Constant<Bits<32>>,
    depth: Constant<Bits<32>>,
    a_id: Constant<Bits<8>>,
    a_config: Constant<Bits<8>>,
    a_status: Constant<Bits<8>>,
    a_done: Constant<Bits<8>>,
    a_cycles: Constant<Bits<8>>,
    a_mac: Constant<Bits<8>>,
    a_shift: Constant<Bits<8>>,
    a_rounding: Constant<Bits<8>>,
    a_seed: Constant<Bits<8>>,
    a_klen: Constant<Bits<8>>,
    a_command: Constant<Bits<8>>,
    a_error_clear: Constant<Bits<8>>,
    s_busy: Constant<Bits<32>>,
    s_queue_full: Constant<Bits<32>>,
    s_error: Constant<Bits<32>>,
    s_gather_a: Constant<Bits<32>>,
    s_gather_b: Constant<Bits<32>>,
    max_shift: Constant<Bits<32>>,
    max_rounding: Constant<Bits<32>>,
}

impl RegFile {
    /// The register file of the accelerator described by `cfg`.
    pub fn new(cfg: &ArrayConfig) -> Result<Self, HdlError> {
        cfg.validate_built().map_err(HdlError::Config)?;
        let a = |x: u8| Constant::new(bits(x as u64));
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            reg_addr: Default::default(),
            reg_wdata: Default::default(),
            reg_we: Default::default(),
            reg_rdata: Default::default(),
            busy: Default::default(),
            queue_full: Default::default(),
            done_inc: Default::default(),
            mac_inc: Default::default(),
            gather_a_busy: Default::default(),
            gather_b_busy: Default::default(),
            gather_error: Default::default(),
            shift: Default::default(),
            rounding: Default::default(),
            seed: Default::default(),
            k_len: Default::default(),
            cmd_valid: Default::default(),
            cmd_word: Default::default(),
            shift_q: Default::default(),
            shift_bad: Default::default(),
            round_q: Default::default(),
            round_bad: Default::default(),
            seed_q: Default::default(),
            klen_q: Default::default(),
            klen_bad: Default::default(),
            err: Default::default(),
            done_q: Default::default(),
            cycles_q: Default::default(),
            mac_q: Default::default(),
            status: Default::default(),
            write: Default::default(),
            id_value: Constant::new(bits(regmap::ID_VALUE as u64)),
            config_value: Constant::new(bits(cfg.config_word() as u64)),
            depth: Constant::new(bits(cfg.buffer_depth as u64)),
            a_id: a(regmap::ID),
            a_config: a(regmap::CONFIG),
            a_status: a(regmap::STATUS),
            a_done: a(regmap::DONE_COUNT),
            a_cycles: a(regmap::CYCLES),
            a_mac: a(regmap::MAC_CYCLES),
            a_shift: a(regmap::SHIFT),
            a_rounding: a(regmap::ROUNDING),
            a_seed: a(regmap::SEED),
            a_klen: a(regmap::K_LEN),
            a_command: a(regmap::COMMAND),
            a_error_clear: a(regmap::ERROR_CLEAR),
            s_busy: Constant::new(bits(regmap::STATUS_BUSY as u64)),
            s_queue_full: Constant::new(bits(regmap::STATUS_QUEUE_FULL as u64)),
            s_error: Constant::new(bits(regmap::STATUS_ERROR as u64)),
            s_gather_a: Constant::new(bits(regmap::STATUS_GATHER_A as u64)),
            s_gather_b: Constant::new(bits(regmap::STATUS_GATHER_B as u64)),
            max_shift: Constant::new(bits(MAX_SHIFT as u64)),
            max_rounding: Constant::new(bits(Rounding::Stochastic.code() as u64)),
        })
    }
}

impl Logic for RegFile {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, shift_q, shift_bad, round_q, round_bad, seed_q, klen_q, klen_bad, err,
            done_q, cycles_q, mac_q
        );
        self.status.next = 0.into();
        if self.busy.val() {
            self.status.next = self.status.val() | self.s_busy.val();
        }
        if self.queue_full.val() {
            self.status.next = self.status.val() | self.s_queue_full.val();
        }
        if self.err.q.val() {
            self.status.next = self.status.val() | self.s_error.val();
        }
        if self.gather_a_busy.val() {
            self.status.next = self.status.val() | self.s_gather_a.val();
        }
        if self.gather_b_busy.val() {
            self.status.next = self.status.val() | self.s_gather_b.val();
        }
        self.reg_rdata.next = 0.into();
        if self.reg_addr.val() == self.a_id.val() {
            self.reg_rdata.next = self.id_value.val();
        }
        if self.reg_addr.val() == self.a_config.val() {
            self.reg_rdata.next = self.config_value.val();
        }
        if self.reg_addr.val() == self.a_status.val() {
            self.reg_rdata.next = self.status.val();
        }
        if self.reg_addr.val() == self.a_done.val() {
            self.reg_rdata.next = self.done_q.q.val();
        }
        if self.reg_addr.val() == self.a_cycles.val() {
            self.reg_rdata.next = self.cycles_q.q.val();
        }
        if self.reg_addr.val() == self.a_mac.val() {
            self.reg_rdata.next = self.mac_q.q.val();
        }
        if self.reg_addr.val() == self.a_shift.val() {
            self.reg_rdata.next = bit_cast::<32, 6>(self.shift_q.q.val());
        }
        if self.reg_addr.val() == self.a_rounding.val() {
            self.reg_rdata.next = bit_cast::<32, 2>(self.round_q.q.val());
        }
        if self.reg_addr.val() == self.a_seed.val() {
            self.reg_rdata.next = self.seed_q.q.val();
        }
        if self.reg_addr.val() == self.a_klen.val() {
            self.reg_rdata.next = bit_cast::<32, 17>(self.klen_q.q.val());
        }
        // Writes.
        self.write.next = self.reg_we.val() & !self.reset.val();
        self.cmd_valid.next = false;
        if self.write.val() & (self.reg_addr.val() == self.a_shift.val()) {
            self.shift_q.d.next = bit_cast::<6, 32>(self.reg_wdata.val());
            self.shift_bad.d.next = self.reg_wdata.val() > self.max_shift.val();
        }
        if self.write.val() & (self.reg_addr.val() == self.a_rounding.val()) {
            self.round_q.d.next = bit_cast::<2, 32>(self.reg_wdata.val());
            self.round_bad.d.next = self.reg_wdata.val() > self.max_rounding.val();
        }
        if self.write.val() & (self.reg_addr.val() == self.a_seed.val()) {
            self.seed_q.d.next = self.reg_wdata.val();
        }
        if self.write.val() & (self.reg_addr.val() == self.a_klen.val()) {
            self.klen_q.d.next = bit_cast::<17, 32>(self.reg_wdata.val());
            self.klen_bad.d.next =
                (self.reg_wdata.val() == 0) | (self.reg_wdata.val() > self.depth.val());
        }
        if self.write.val()
            & (((self.reg_addr.val() == self.a_shift.val())
                & (self.reg_wdata.val() > self.max_shift.val()))
                | ((self.reg_addr.val() == self.a_rounding.val())
                    & (self.reg_wdata.val() > self.max_rounding.val()))
                | ((self.reg_addr.val() == self.a_klen.val())
                    & ((self.reg_wdata.val() == 0) | (self.reg_wdata.val() > self.depth.val()))))
        {
            self.err.d.next = true;
        }
        if self.write.val() & (self.reg_addr.val() == self.a_command.val()) {
            if self.queue_full.val()
                | self.shift_bad.q.val()
                | self.round_bad.q.val()
                | self.klen_bad.q.val()
            {
                self.err.d.next = true;
            } else {
                self.cmd_valid.next = true;
            }
        }
        if self.gather_error.val() {
            self.err.d.next = true;
        }
        if self.write.val() & (self.reg_addr.val() == self.a_error_clear.val()) {
            self.err.d.next = false;
        }
        // Counters.
        self.cycles_q.d.next = self.cycles_q.q.val() + 1;
        if self.mac_inc.val() {
            self.mac_q.d.next = self.mac_q.q.val() + 1;
        }
        if self.done_inc.val() {
            self.done_q.d.next = self.done_q.q.val() + 1;
        }
        if self.reset.val() {
            self.shift_q.d.next = 0.into();
            self.shift_bad.d.next = false;
            self.round_q.d.next = 0.into();
            self.round_bad.d.next = false;
            self.seed_q.d.next = 0.into();
            self.klen_q.d.next = 0.into();
            self.klen_bad.d.next = true;
            self.err.d.next = false;
            self.done_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.mac_q.d.next = 0.into();
        }
        self.shift.next = self.shift_q.q.val();
        self.rounding.next = self.round_q.q.val();
        self.seed.next = self.seed_q.q.val();
        self.k_len.next = self.klen_q.q.val();
        self.cmd_word.next = bit_cast::<5, 32>(self.reg_wdata.val());
    }
}
