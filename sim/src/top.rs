//! The array's `top` driven through its ports: the fast model linked in by `build.rs` and the
//! traced one Verilated at run time are the same kind of `Testbench` (the one Verilator layer),
//! driven by this one piece of code with the bus's timing (docs/HARDWARE.md, "Ports and
//! timing"): every input of a beat is written in place in the model, then one call runs the
//! clock cycle.

use crate::trace::{tb_error, traced_model, TraceWindow, Window};
use crate::SimError;
use systole_core::ArrayConfig;
use systole_testbench::{Input, Narrow, Testbench};

/// Handles of the ports of `top` the bus drives (checked once: a beat writes them without
/// checks, values fitting by construction).
struct TopPorts {
    reset: Input,
    reg_addr: Input,
    reg_wdata: Input,
    reg_we: Input,
    reg_rdata: Narrow,
    /// `(en, bank, row, lanes)` of A and B.
    ab: [(Input, Input, Input, Vec<Input>); 2],
    c_bank: Input,
    c_row: Input,
    c_data: Vec<Narrow>,
    fm_en: Input,
    fm_row: Input,
    fm_data: Vec<Input>,
}

/// An operand row of a beat: `(bank, row, one word per lane)`.
pub(crate) type RowIn<'a> = (u32, u32, &'a [i16]);

/// The inputs of one clock beat (everything not given is idle).
#[derive(Default)]
pub(crate) struct Inputs<'a> {
    /// A register write: `(address, value)`.
    pub reg: Option<(u32, u32)>,
    pub a: Option<RowIn<'a>>,
    pub b: Option<RowIn<'a>>,
    /// The C row read in this beat: `(bank, row)`.
    pub c: Option<(u32, u32)>,
    /// A feature-map row write: `(row, words)`.
    pub fm: Option<(u32, &'a [i16])>,
}

/// One model of the array with its (optional) trace window.
pub(crate) struct Top {
    tb: Testbench,
    p: TopPorts,
    window: Option<Window>,
    /// The word ports' mask (`W` bits).
    word_mask: u64,
    /// Shift that sign-extends a `W`-bit word read from a port in an `i16` (`16 - W`).
    word_ext: u32,
}

impl Top {
    /// Drives `tb`, a model of the array `cfg`.
    pub fn new(tb: Testbench, cfg: &ArrayConfig, window: Option<Window>) -> Result<Top, SimError> {
        let (n, fm_lanes) = (cfg.size, cfg.fm_row_words());
        let h = |name: &str| tb.input(name).map_err(tb_error);
        let out = |name: &str| tb.narrow_port(name).map_err(tb_error);
        let lanes = |base: &str, count: usize| -> Result<Vec<Input>, SimError> {
            (0..count).map(|i| h(&format!("{base}_{i}"))).collect()
        };
        let ab = |m: &str| -> Result<_, SimError> {
            Ok((
                h(&format!("{m}_wr_en"))?,
                h(&format!("{m}_wr_bank"))?,
                h(&format!("{m}_wr_row"))?,
                lanes(&format!("{m}_wr_data"), n)?,
            ))
        };
        let p = TopPorts {
            reset: h("reset")?,
            reg_addr: h("reg_addr")?,
            reg_wdata: h("reg_wdata")?,
            reg_we: h("reg_we")?,
            reg_rdata: out("reg_rdata")?,
            ab: [ab("a")?, ab("b")?],
            c_bank: h("c_rd_bank")?,
            c_row: h("c_rd_row")?,
            c_data: (0..n)
                .map(|i| out(&format!("c_rd_data_{i}")))
                .collect::<Result<_, _>>()?,
            fm_en: h("fm_wr_en")?,
            fm_row: h("fm_wr_row")?,
            fm_data: lanes("fm_wr_data", fm_lanes)?,
        };
        Ok(Top {
            tb,
            p,
            window,
            word_mask: (1u64 << cfg.word_bits) - 1,
            word_ext: i16::BITS - cfg.word_bits,
        })
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<crate::TraceState> {
        self.window.as_ref().map(Window::state)
    }

    fn clock(&mut self, n: u64) -> Result<(), SimError> {
        Window::clock(&mut self.tb, self.window.as_mut(), n)
    }

    /// Every enable low.
    fn idle_inputs(&mut self) {
        let (we, a, b, fm) = (self.p.reg_we, self.p.ab[0].0, self.p.ab[1].0, self.p.fm_en);
        for en in [we, a, b, fm] {
            self.tb.set(en, 0);
        }
    }

    /// Holds `reset` high for `cycles` cycles (inputs idle).
    pub fn reset(&mut self, cycles: u32) -> Result<(), SimError> {
        self.idle_inputs();
        self.tb.set(self.p.reset, 1);
        self.clock(cycles.into())?;
        self.tb.set(self.p.reset, 0);
        Ok(())
    }

    /// The combinational register read (no clock edge).
    pub fn read_reg(&mut self, addr: u32) -> Result<u32, SimError> {
        self.tb.set(self.p.reg_addr, addr.into());
        self.tb.set(self.p.reg_we, 0);
        Ok(self.tb.get(self.p.reg_rdata) as u32)
    }

    /// One beat: the inputs of `inp`, a clock edge, then the C row into `c_out` when given
    /// (the rows in `inp` hold a word per lane and the row numbers fit their ports: the
    /// callers check).
    pub fn tick(&mut self, inp: &Inputs<'_>, c_out: Option<&mut [i16]>) -> Result<(), SimError> {
        let (tb, p) = (&mut self.tb, &self.p);
        let (addr, data) = inp.reg.unwrap_or((0, 0));
        tb.set(p.reg_addr, addr.into());
        tb.set(p.reg_wdata, data.into());
        tb.set(p.reg_we, inp.reg.is_some().into());
        for (row, (en, bank, r, lanes)) in [inp.a, inp.b].into_iter().zip(&p.ab) {
            let (bv, rv) = row.map_or((0, 0), |(b, r, _)| (b, r));
            tb.set(*en, row.is_some().into());
            tb.set(*bank, bv.into());
            tb.set(*r, rv.into());
            if let Some((_, _, words)) = row {
                for (&lane, &w) in lanes.iter().zip(words) {
                    tb.set(lane, u64::from(w as u16) & self.word_mask);
                }
            }
        }
        let (cb, cr) = inp.c.unwrap_or((0, 0));
        tb.set(p.c_bank, cb.into());
        tb.set(p.c_row, cr.into());
        let (fr, fw) = inp.fm.unwrap_or((0, &[]));
        tb.set(p.fm_en, inp.fm.is_some().into());
        tb.set(p.fm_row, fr.into());
        for (&lane, &w) in p.fm_data.iter().zip(fw) {
            tb.set(lane, u64::from(w as u16) & self.word_mask);
        }
        self.clock(1)?;
        if let Some(out) = c_out {
            for (o, &port) in out.iter_mut().zip(&self.p.c_data) {
                *o = ((self.tb.get(port) as u16) << self.word_ext) as i16 >> self.word_ext;
            }
        }
        Ok(())
    }

    /// `cycles` clock cycles with every enable low.
    pub fn idle(&mut self, cycles: u32) -> Result<(), SimError> {
        self.idle_inputs();
        self.clock(cycles.into())
    }
}

/// The traced model of the array `cfg`, reset as [`crate::VerilatedArray::new`] resets the fast
/// one. It lives here, beside the `Top` it builds, so `top` uses `trace` and not the reverse.
pub(crate) fn traced_array(cfg: &ArrayConfig, window: TraceWindow) -> Result<Top, SimError> {
    let (verilog, ports) = crate::images::array(cfg).map_err(SimError::TraceImage)?;
    let tb = traced_model(&verilog, Some(ports), window.format)?;
    let mut top = Top::new(tb, cfg, Some(Window::new(window)))?;
    top.reset(crate::RESET_CYCLES)?;
    Ok(top)
}

/// The untraced model of the array `cfg`, Verilated at run time (cached), not yet reset.
pub(crate) fn runtime_array(cfg: &ArrayConfig) -> Result<Top, SimError> {
    let (verilog, ports) = crate::images::array(cfg).map_err(SimError::ArrayImage)?;
    let tb = crate::trace::runtime_model(&verilog, Some(ports), cfg.word_bits)?;
    Top::new(tb, cfg, None)
}
