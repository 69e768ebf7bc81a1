//! `systole-sim`: the accelerator's generated Verilog, simulated by Verilator.
//!
//! `build.rs` generates the Verilog of each array size in `SYSTOLE_VERILATOR_SIZES` (default
//! `4,8,16`) with `systole-hdl`, Verilates it and compiles it into this crate. A
//! [`VerilatedArray`] is one instance of such a model behind [`systole_core::AcceleratorBus`],
//! so the firmware's tile driver runs on it unchanged. Each bus call is one call into C++ that
//! sets every input port, runs a whole clock cycle and returns the outputs.
//!
//! The compiled models have no tracing (it costs speed). [`VerilatedArray::open_trace`]
//! before the first clock edge switches an array to a traced model of the same Verilog,
//! Verilated at run time through `systole-testbench` (see [`trace`]), which writes a window of
//! cycles to a VCD or FST file.
//!
//! Timing (see docs/HARDWARE.md, "Ports and timing"): `read_reg` evaluates the
//! combinational register read without a clock edge; `write_reg`, `beat` and each `idle` cycle
//! are one rising edge each; a C row read in a beat is returned after that beat's edge.
#![deny(missing_docs)]

pub mod board;
mod ffi;
pub mod soc;
pub mod trace;

pub use board::VerilatedBoard;
pub use soc::VerilatedSoc;
pub use trace::{TraceFormat, TraceState, TraceWindow};

use core::ffi::c_void;
use core::ptr::NonNull;
use systole_core::bus::Beat;
use systole_core::{AcceleratorBus, ArrayConfig};

/// What to run to get the Verilator backend.
pub const INSTALL_HINT: &str =
    "install with: apt-get install verilator g++ (./x does this), then rebuild systole-sim";

/// Why a simulation could not be created or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// This build has no Verilated models at all.
    #[error("this build has no Verilator models: {INSTALL_HINT}")]
    NotBuilt,
    /// This build has no SoC model (the reason names what to install).
    #[error("this build has no SoC model: {0}")]
    SocNotBuilt(String),
    /// A program image the SoC cannot take.
    #[error("bad SoC program image: {0}")]
    Image(String),
    /// This configuration was not compiled in.
    #[error(
        "no Verilated model of a {size}x{size} array with {depth}-row buffers in this build \
         (built: {}); rebuild with SYSTOLE_VERILATOR_SIZES listing {size} (e.g. SYSTOLE_VERILATOR_SIZES=4,8,16)",
        describe_built(built)
    )]
    SizeNotBuilt {
        /// Requested array size.
        size: usize,
        /// Requested buffer depth.
        depth: usize,
        /// Sizes compiled into this build (each with the default 512-row buffers).
        built: Vec<usize>,
    },
    /// The configuration itself is invalid.
    #[error("invalid array configuration: {0}")]
    Config(systole_core::ConfigError),
    /// A bus call broke the port contract (row out of range, wrong number of words).
    #[error("bad bus access: {0}")]
    BadAccess(String),
    /// A trace asked for in a way that cannot work (the message says what to change).
    #[error("{0}")]
    TraceSetup(String),
    /// The trace file could not be created.
    #[error("cannot create the trace file {path}")]
    TraceFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
    /// The traced model could not be built or driven.
    #[error("the traced model: {0}")]
    Traced(#[source] Box<systole_testbench::TestbenchError>),
    /// A trace was asked for after the fast (untraced) model had run.
    #[error(
        "a trace must be opened before the model's first clock edge (write, beat, idle or \
         reset): only then can it switch to the traced model"
    )]
    TraceTooLate,
}

impl From<systole_core::ConfigError> for SimError {
    fn from(e: systole_core::ConfigError) -> Self {
        SimError::Config(e)
    }
}

fn describe_built(built: &[usize]) -> String {
    if built.is_empty() {
        return "none".into();
    }
    let v: Vec<String> = built.iter().map(|n| format!("{n}x{n}")).collect();
    v.join(", ")
}

/// Array sizes compiled into this build (each with `ArrayConfig::square(n)`).
pub fn built_sizes() -> Vec<usize> {
    ffi::MODELS.iter().map(|m| m.size).collect()
}

/// The model an array runs on.
enum Model {
    /// A compiled model (`build.rs`): the fast path, no tracing.
    Fast {
        fns: &'static ffi::ModelFns,
        state: NonNull<c_void>,
    },
    /// The traced model, Verilated at run time (see [`trace`]).
    Traced(Box<trace::TracedTop>),
}

/// One simulated accelerator instance.
pub struct VerilatedArray {
    model: Model,
    cfg: ArrayConfig,
    cycles: u64,
    /// Clocked since creation: the state can no longer move to the traced model.
    clocked: bool,
}

// SAFETY: the model state is owned by this value only and has its own VerilatedContext, so it
// may move to another thread; `&mut self` on every call keeps access exclusive.
#[allow(unsafe_code)]
unsafe impl Send for VerilatedArray {}

/// Cycles `reset` holds the reset input high.
const RESET_CYCLES: u32 = 2;

impl VerilatedArray {
    /// Creates and resets a model of `cfg` (only `frac_bits` may differ from
    /// `ArrayConfig::square(cfg.size)`: it is not a hardware parameter).
    pub fn new(cfg: &ArrayConfig) -> Result<VerilatedArray, SimError> {
        cfg.validate()?;
        if cfg!(systole_no_verilator) {
            return Err(SimError::NotBuilt);
        }
        let fns = ffi::MODELS
            .iter()
            .find(|m| m.size == cfg.size)
            .filter(|_| ArrayConfig::square(cfg.size).config_word() == cfg.config_word())
            .ok_or_else(|| SimError::SizeNotBuilt {
                size: cfg.size,
                depth: cfg.buffer_depth,
                built: built_sizes(),
            })?;
        #[allow(unsafe_code)]
        // SAFETY: `new` has no preconditions and returns an owned model.
        let state = NonNull::new(unsafe { (fns.new)() }).ok_or(SimError::NotBuilt)?;
        let mut sim = VerilatedArray {
            model: Model::Fast { fns, state },
            cfg: *cfg,
            cycles: 0,
            clocked: false,
        };
        sim.reset();
        sim.clocked = false;
        Ok(sim)
    }

    /// The configuration this model implements.
    pub fn config(&self) -> &ArrayConfig {
        &self.cfg
    }

    /// Holds `reset` high for two cycles: registers, queue and counters return to zero.
    pub fn reset(&mut self) {
        self.clocked = true;
        match &mut self.model {
            #[allow(unsafe_code)]
            // SAFETY: `state` is a live model created by `fns.new`.
            Model::Fast { fns, state } => unsafe { (fns.reset)(state.as_ptr(), RESET_CYCLES) },
            // The traced model's only failure is a trace file that stopped taking writes,
            // which Verilator reports itself; the simulation goes on.
            Model::Traced(t) => drop(t.reset(RESET_CYCLES)),
        }
        self.cycles += u64::from(RESET_CYCLES);
    }

    /// Clock cycles simulated since creation (resets included).
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Writes the cycles of `window` to its file (created by the caller, see
    /// [`TraceWindow::create_file`]).
    ///
    /// It must come before any clock edge (`write_reg`, `beat`, `idle`, `reset`; `read_reg` is
    /// fine): it replaces the fast model by a traced one of the same Verilog, reset the same
    /// way, so the simulation is the same and only slower (the first use Verilates the traced
    /// model, about a minute; later runs load it from the cache). Later it is
    /// [`SimError::TraceTooLate`].
    pub fn open_trace(&mut self, window: TraceWindow) -> Result<(), SimError> {
        if self.clocked || matches!(self.model, Model::Traced(_)) {
            return Err(SimError::TraceTooLate);
        }
        let traced = trace::TracedTop::new(&self.cfg, window)?;
        self.model = Model::Traced(Box::new(traced));
        Ok(())
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<TraceState> {
        match &self.model {
            Model::Traced(t) => Some(t.state()),
            Model::Fast { .. } => None,
        }
    }

    fn check_row(&self, data: &[i16], row: u16, what: &str) -> Result<(), SimError> {
        if data.len() != self.cfg.size {
            return Err(SimError::BadAccess(format!(
                "{what} row holds {} words, the array has {} lanes",
                data.len(),
                self.cfg.size
            )));
        }
        if usize::from(row) >= self.cfg.buffer_depth {
            return Err(SimError::BadAccess(format!(
                "{what} row {row} is past the buffer depth {}",
                self.cfg.buffer_depth
            )));
        }
        Ok(())
    }

    /// One clock beat with the inputs of `p`; the C row into `c_out` when given. The data
    /// pointers in `p` are null or point at a whole row (checked by the callers).
    fn tick(&mut self, p: &ffi::PortIn, c_out: Option<&mut [i16]>) -> Result<(), SimError> {
        self.clocked = true;
        self.cycles += 1;
        match &mut self.model {
            Model::Fast { fns, state } => {
                let out = c_out.map_or(core::ptr::null_mut(), |c| c.as_mut_ptr());
                #[allow(unsafe_code)]
                // SAFETY: live model; the data pointers in `p` are null or point at `size`
                // words, and `out` is null or points at `size` writable words.
                unsafe {
                    (fns.tick)(state.as_ptr(), p, out)
                };
                Ok(())
            }
            Model::Traced(t) => t.tick(p, c_out),
        }
    }
}

impl Drop for VerilatedArray {
    fn drop(&mut self) {
        if let Model::Fast { fns, state } = &self.model {
            #[allow(unsafe_code)]
            // SAFETY: the model was created by `fns.new` and is not used after this.
            unsafe {
                (fns.delete)(state.as_ptr())
            };
        }
    }
}

impl AcceleratorBus for VerilatedArray {
    type Error = SimError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, SimError> {
        match &mut self.model {
            #[allow(unsafe_code)]
            // SAFETY: live model.
            Model::Fast { fns, state } => {
                Ok(unsafe { (fns.read_reg)(state.as_ptr(), u32::from(addr)) })
            }
            Model::Traced(t) => t.read_reg(addr.into()),
        }
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), SimError> {
        let p = ffi::PortIn {
            reg_addr: u32::from(addr),
            reg_wdata: value,
            reg_we: 1,
            ..ffi::PortIn::idle()
        };
        self.tick(&p, None)
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), SimError> {
        let mut p = ffi::PortIn::idle();
        if let Some(a) = beat.a {
            self.check_row(a.data, a.row, "A")?;
            (p.a_en, p.a_bank, p.a_row, p.a_data) =
                (1, u32::from(a.bank & 1), a.row.into(), a.data.as_ptr());
        }
        if let Some(b) = beat.b {
            self.check_row(b.data, b.row, "B")?;
            (p.b_en, p.b_bank, p.b_row, p.b_data) =
                (1, u32::from(b.bank & 1), b.row.into(), b.data.as_ptr());
        }
        let mut out = None;
        if let Some(c) = beat.c {
            if usize::from(c.row) >= self.cfg.size || c_out.len() != self.cfg.size {
                return Err(SimError::BadAccess(format!(
                    "C row {} with a {}-word output buffer on a {}x{} array",
                    c.row,
                    c_out.len(),
                    self.cfg.size,
                    self.cfg.size
                )));
            }
            (p.c_bank, p.c_row) = (u32::from(c.bank & 1), c.row.into());
            out = Some(c_out);
        }
        self.tick(&p, out)
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), SimError> {
        let r = self.cfg.fm_row_words();
        let end = (addr as usize).checked_add(words.len());
        if !self.cfg.has_conv_unit()
            || end.is_none_or(|e| e > self.cfg.fm_depth)
            || !(addr as usize).is_multiple_of(r)
            || !words.len().is_multiple_of(r)
        {
            return Err(SimError::BadAccess(format!(
                "feature-map words {addr}..{} must be whole {r}-word rows inside the {}-word feature-map buffer",
                addr as usize + words.len(),
                self.cfg.fm_depth
            )));
        }
        for (i, row) in words.chunks(r).enumerate() {
            let p = ffi::PortIn {
                fm_en: 1,
                fm_row: addr / r as u32 + i as u32,
                fm_data: row.as_ptr(),
                ..ffi::PortIn::idle()
            };
            self.tick(&p, None)?;
        }
        Ok(())
    }

    fn idle(&mut self, cycles: u32) -> Result<(), SimError> {
        self.clocked = true;
        self.cycles += u64::from(cycles);
        match &mut self.model {
            #[allow(unsafe_code)]
            // SAFETY: live model.
            Model::Fast { fns, state } => unsafe { (fns.idle)(state.as_ptr(), cycles) },
            Model::Traced(t) => t.idle(cycles)?,
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "../build/ports.rs"]
#[allow(dead_code)]
mod ports;

#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
