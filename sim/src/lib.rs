//! `systole-sim`: the accelerator's generated Verilog, simulated by Verilator.
//!
//! `build.rs` generates the Verilog of each array size in `SYSTOLE_VERILATOR_SIZES` (default
//! `4,8,16`) with `systole-hdl`, Verilates it and compiles it into this crate. A
//! [`VerilatedArray`] is one instance of such a model behind [`systole_core::AcceleratorBus`],
//! so the firmware's tile driver runs on it unchanged. Every model, compiled in or Verilated at
//! run time, goes through the one Verilator layer of `systole-testbench` (`layer` for the
//! compiled ones): a bus call writes the beat's inputs in place in the model and runs the
//! clock cycle with one call into C++, then reads the outputs in place.
//!
//! The compiled models have no tracing (it costs speed). [`VerilatedArray::open_trace`]
//! before the first clock edge switches an array to a traced model of the same Verilog,
//! Verilated at run time (see [`trace`]), which writes a window of cycles to a VCD or FST
//! file; the bridge and SoC images take a window when created
//! ([`ImagePins::with_trace`], [`VerilatedSoc::with_trace`]).
//!
//! Timing (see docs/HARDWARE.md, "Ports and timing"): `read_reg` evaluates the
//! combinational register read without a clock edge; `write_reg`, `beat` and each `idle` cycle
//! are one rising edge each; a C row read in a beat is returned after that beat's edge.
#![deny(missing_docs)]

#[path = "../build/images.rs"]
#[allow(dead_code)]
mod images;
mod linked;
pub mod pins;
pub mod soc;
mod top;
pub mod trace;

pub use images::ImageError;
pub use pins::ImagePins;
pub use soc::VerilatedSoc;
pub use trace::{TraceFormat, TraceState, TraceWindow};

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
    /// The Verilog of the model to trace could not be generated.
    #[error("cannot generate the Verilog to trace: {0}")]
    TraceImage(#[source] ImageError),
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
    /// The Verilog of an array or board image Verilated at run time (words narrower than 16
    /// bits) could not be generated.
    #[error("cannot generate the Verilog to Verilate: {0}")]
    ArrayImage(#[source] ImageError),
    /// An array or board image Verilated at run time (words narrower than 16 bits) could not
    /// be built or driven.
    #[error("the {word_bits}-bit model Verilated at run time: {cause}")]
    RuntimeModel {
        /// Its word width.
        word_bits: u32,
        /// Why.
        #[source]
        cause: Box<systole_testbench::TestbenchError>,
    },
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
    linked::MODELS.iter().map(|m| m.0).collect()
}

/// One simulated accelerator instance.
pub struct VerilatedArray {
    top: top::Top,
    cfg: ArrayConfig,
    cycles: u64,
    /// Clocked since creation: the state can no longer move to the traced model.
    clocked: bool,
    /// The `CONFIG` word reads return instead of the model's ([`Self::with_conv_unit_of`]).
    config_shown: Option<u32>,
}

/// Cycles `reset` holds the reset input high.
const RESET_CYCLES: u32 = 2;

impl VerilatedArray {
    /// Creates and resets a model of `cfg`: at 16-bit words the one compiled in (only
    /// `frac_bits` may differ from `ArrayConfig::square(cfg.size)`: it is not a hardware
    /// parameter); at narrower words (any size, buffer depth, feature-map depth and `W` that
    /// `ArrayConfig::validate_built` accepts, the conv unit at `W` too) one Verilated at run
    /// time ([`Self::at_run_time`]).
    pub fn new(cfg: &ArrayConfig) -> Result<VerilatedArray, SimError> {
        cfg.validate_built()?;
        if cfg!(systole_no_verilator) {
            return Err(SimError::NotBuilt);
        }
        if cfg.word_bits != systole_core::numeric::WORD_BITS {
            return Self::at_run_time(cfg);
        }
        let linked = linked::MODELS
            .iter()
            .find(|m| m.0 == cfg.size)
            .filter(|_| ArrayConfig::square(cfg.size).config_word() == cfg.config_word())
            .ok_or_else(|| SimError::SizeNotBuilt {
                size: cfg.size,
                depth: cfg.buffer_depth,
                built: built_sizes(),
            })?
            .1;
        #[allow(unsafe_code)]
        // SAFETY: the table was written by `layer::rust_table` for the archive linked in.
        let tb = unsafe { systole_testbench::Testbench::linked(linked) };
        Self::reset_new(top::Top::new(tb, cfg, None)?, cfg)
    }

    /// Creates and resets a model of `cfg` Verilated at run time through the one Verilator
    /// layer (cached under `target/systole-testbench/` by the Verilog's hash: the first use of
    /// a design takes Verilator and the C++ compiler, tens of seconds; later ones load it).
    /// It is how arrays of words narrower than 16 bits are simulated (the build compiles
    /// 16-bit arrays only); the model is untraced, as fast as a compiled one.
    pub fn at_run_time(cfg: &ArrayConfig) -> Result<VerilatedArray, SimError> {
        cfg.validate_built()?;
        Self::reset_new(top::runtime_array(cfg)?, cfg)
    }

    /// `top` as a fresh model of `cfg`: reset, with no clock edge counted as its own yet.
    fn reset_new(top: top::Top, cfg: &ArrayConfig) -> Result<VerilatedArray, SimError> {
        let mut sim = VerilatedArray {
            top,
            cfg: *cfg,
            cycles: 0,
            clocked: false,
            config_shown: None,
        };
        sim.reset();
        sim.clocked = false;
        Ok(sim)
    }

    /// A model of `cfg` whose conv unit is smaller than the built model's (`cfg.fm_depth`
    /// below `ArrayConfig::square(cfg.size).fm_depth`, 0 for no unit; nothing else may
    /// differ): the built model, its `CONFIG` register reading `cfg`'s word. A driver reads
    /// the depth from `CONFIG` and lays out and schedules its work exactly as on a design of
    /// that depth, and the hardware's timing does not depend on the depth (the feature-map
    /// buffer answers one read per clock at any depth; only the address width changes), so
    /// the cycle counts are that design's. `systole explore` times every depth with it.
    pub fn with_conv_unit_of(cfg: &ArrayConfig) -> Result<VerilatedArray, SimError> {
        let built = ArrayConfig {
            frac_bits: cfg.frac_bits,
            ..ArrayConfig::square(cfg.size)
        };
        cfg.validate()?;
        let rest_equal = ArrayConfig {
            fm_depth: built.fm_depth,
            ..*cfg
        }
        .config_word()
            == built.config_word();
        if cfg.fm_depth > built.fm_depth || !rest_equal {
            return Err(SimError::SizeNotBuilt {
                size: cfg.size,
                depth: cfg.buffer_depth,
                built: built_sizes(),
            });
        }
        let mut sim = VerilatedArray::new(&built)?;
        sim.config_shown = Some(cfg.config_word());
        Ok(sim)
    }

    /// The configuration this model implements.
    pub fn config(&self) -> &ArrayConfig {
        &self.cfg
    }

    /// Holds `reset` high for two cycles: registers, queue and counters return to zero.
    pub fn reset(&mut self) {
        self.clocked = true;
        // The only failure is a trace file that stopped taking writes, which Verilator
        // reports itself; the simulation goes on.
        drop(self.top.reset(RESET_CYCLES));
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
        if self.clocked || self.top.trace_state().is_some() {
            return Err(SimError::TraceTooLate);
        }
        self.top = top::traced_array(&self.cfg, window)?;
        Ok(())
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<TraceState> {
        self.top.trace_state()
    }

    fn check_row(&self, data: &[i16], row: u16, what: &str) -> Result<(), SimError> {
        if data.len() != self.cfg.size {
            return Err(SimError::BadAccess(format!(
                "{what} row holds {} words, the array has {} lanes",
                data.len(),
                self.cfg.size
            )));
        }
        self.check_words(data, what)?;
        if usize::from(row) >= self.cfg.buffer_depth {
            return Err(SimError::BadAccess(format!(
                "{what} row {row} is past the buffer depth {}",
                self.cfg.buffer_depth
            )));
        }
        Ok(())
    }

    /// Every word of `data` in the `W`-bit range of the array (a narrower array's ports would
    /// drop the bits above it).
    fn check_words(&self, data: &[i16], what: &str) -> Result<(), SimError> {
        let w = self.cfg.word_bits;
        let range = systole_core::numeric::word_min(w)..=systole_core::numeric::word_max(w);
        match data.iter().position(|&x| !range.contains(&i64::from(x))) {
            None => Ok(()),
            Some(i) => Err(SimError::BadAccess(format!(
                "{what} word {i} is {}, outside the {w}-bit word range {}..={} of this array",
                data[i],
                range.start(),
                range.end()
            ))),
        }
    }

    /// One clock beat with the inputs of `p`; the C row into `c_out` when given (rows checked
    /// by the callers).
    fn tick(&mut self, p: &top::Inputs<'_>, c_out: Option<&mut [i16]>) -> Result<(), SimError> {
        self.clocked = true;
        self.cycles += 1;
        self.top.tick(p, c_out)
    }
}

impl AcceleratorBus for VerilatedArray {
    type Error = SimError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, SimError> {
        if let (systole_core::regmap::CONFIG, Some(word)) = (addr, self.config_shown) {
            return Ok(word);
        }
        self.top.read_reg(addr.into())
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), SimError> {
        let p = top::Inputs {
            reg: Some((u32::from(addr), value)),
            ..top::Inputs::default()
        };
        self.tick(&p, None)
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), SimError> {
        let mut p = top::Inputs::default();
        if let Some(a) = beat.a {
            self.check_row(a.data, a.row, "A")?;
            p.a = Some((u32::from(a.bank & 1), a.row.into(), a.data));
        }
        if let Some(b) = beat.b {
            self.check_row(b.data, b.row, "B")?;
            p.b = Some((u32::from(b.bank & 1), b.row.into(), b.data));
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
            p.c = Some((u32::from(c.bank & 1), c.row.into()));
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
        self.check_words(words, "feature-map")?;
        for (i, row) in words.chunks(r).enumerate() {
            let p = top::Inputs {
                fm: Some((addr / r as u32 + i as u32, row)),
                ..top::Inputs::default()
            };
            self.tick(&p, None)?;
        }
        Ok(())
    }

    fn idle(&mut self, cycles: u32) -> Result<(), SimError> {
        self.clocked = true;
        self.cycles += u64::from(cycles);
        self.top.idle(cycles)
    }
}

#[cfg(test)]
mod tests;
