//! Waveforms of the array: a window of cycles written to a VCD or FST file.
//!
//! The fast models compiled by `build.rs` have no tracing (Verilator's `--trace` cost about 25%
//! of their speed even with no file open). A traced model is Verilated on first use through
//! the same layer (`systole-testbench`, cached under `target/systole-testbench/`, so later runs
//! load it at once), from the same definition (`build/images.rs`: Verilog and port list) as
//! the fast one, in the format asked for, and driven by the same code; the clock stops where
//! the window opens and closes, so the trace holds exactly the window's cycles. The array,
//! the board (bridge) image and the SoC image can each be traced.

use crate::SimError;
use std::path::{Path, PathBuf};
use systole_testbench::{Options, Testbench};

pub use systole_testbench::TraceFormat;

/// Which cycles of a simulation go to which trace file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceWindow {
    /// The trace file.
    pub path: PathBuf,
    /// Its format.
    pub format: TraceFormat,
    /// The first cycle traced, counted as [`crate::VerilatedArray::cycles`] counts (from the
    /// model's creation, its reset included).
    pub from: u64,
    /// How many cycles are traced (`None`: to the end of the simulation).
    pub cycles: Option<u64>,
}

impl TraceWindow {
    /// A window writing `path`, in `format` when given, else the one its extension names
    /// (`.vcd`, `.fst`).
    pub fn new(
        path: &Path,
        format: Option<TraceFormat>,
        from: u64,
        cycles: Option<u64>,
    ) -> Result<TraceWindow, SimError> {
        let by_name = match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("vcd") => Some(TraceFormat::Vcd),
            Some(e) if e.eq_ignore_ascii_case("fst") => Some(TraceFormat::Fst),
            _ => None,
        };
        let format = format.or(by_name).ok_or_else(|| {
            SimError::TraceSetup(format!(
                "{}: name the trace file .vcd or .fst (or state the format), e.g. run.{}",
                path.display(),
                default_format().name()
            ))
        })?;
        if cycles == Some(0) {
            return Err(SimError::TraceSetup(
                "a trace of 0 cycles would hold nothing: give at least 1 cycle".into(),
            ));
        }
        Ok(TraceWindow {
            path: path.to_path_buf(),
            format,
            from,
            cycles,
        })
    }

    /// The cycle after the last one traced.
    fn end(&self) -> Option<u64> {
        self.cycles.map(|c| self.from.saturating_add(c))
    }

    /// Creates the (empty) trace file, so a path that cannot be written fails before any
    /// simulation. An existing file is replaced only when `overwrite`; a link, folder, device
    /// or FIFO never is.
    pub fn create_file(&self, overwrite: bool) -> Result<(), SimError> {
        let shown = self.path.display();
        if let Ok(meta) = std::fs::symlink_metadata(&self.path) {
            if !meta.file_type().is_file() {
                return Err(SimError::TraceSetup(format!(
                    "{shown} exists and is not a regular file (a link, folder, device or FIFO): name a new file"
                )));
            }
            if !overwrite {
                return Err(SimError::TraceSetup(format!(
                    "{shown} exists: choose another --trace file, or replace it with --overwrite-trace"
                )));
            }
        }
        let mut open = std::fs::OpenOptions::new();
        open.write(true);
        if overwrite {
            open.create(true).truncate(true);
        } else {
            open.create_new(true);
        }
        open.open(&self.path)
            .map(drop)
            .map_err(|cause| SimError::TraceFile {
                path: self.path.clone(),
                cause,
            })
    }
}

/// FST where Verilator's FST writer can be built (it needs zlib's header), else VCD.
pub fn default_format() -> TraceFormat {
    let zlib = ["/usr/include/zlib.h", "/usr/local/include/zlib.h"];
    if zlib.iter().any(|p| Path::new(p).is_file()) {
        TraceFormat::Fst
    } else {
        TraceFormat::Vcd
    }
}

/// Where the trace window stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceState {
    /// The first traced cycle is still ahead.
    Waiting,
    /// Cycles are being written.
    Open,
    /// The window has passed; the file is complete.
    Closed,
}

/// A trace window on a model: opens the trace before the window's first cycle and closes it
/// after its last, however many cycles one call runs.
pub(crate) struct Window {
    spec: TraceWindow,
    state: TraceState,
}

/// The testbench's error as a [`SimError`] (a build failure keeps Verilator's log).
pub(crate) fn tb_error(e: systole_testbench::TestbenchError) -> SimError {
    SimError::Traced(Box::new(e))
}

impl Window {
    pub fn new(spec: TraceWindow) -> Window {
        Window {
            spec,
            state: TraceState::Waiting,
        }
    }

    /// Where the window stands.
    pub fn state(&self) -> TraceState {
        self.state
    }

    /// `n` clock cycles of `tb`, split where the window opens and closes.
    pub fn clock(tb: &mut Testbench, window: Option<&mut Window>, n: u64) -> Result<(), SimError> {
        let Some(w) = window else {
            tb.clock_n(n);
            return Ok(());
        };
        let mut left = n;
        while left > 0 {
            let now = tb.cycles();
            if w.state == TraceState::Waiting && now >= w.spec.from {
                tb.trace(&w.spec.path).map_err(tb_error)?;
                w.state = TraceState::Open;
            }
            let step = match (w.state, w.spec.end()) {
                (TraceState::Waiting, _) => left.min(w.spec.from - now),
                (TraceState::Open, Some(end)) => left.min(end - now),
                _ => left,
            };
            tb.clock_n(step);
            left -= step;
            if w.state == TraceState::Open && w.spec.end() == Some(tb.cycles()) {
                tb.close_trace();
                w.state = TraceState::Closed;
            }
        }
        Ok(())
    }
}

/// A traced model Verilated at run time (cached) from `verilog` and `ports`, or from the ports
/// Verilator declares when `ports` is `None`.
pub(crate) fn traced_model(
    verilog: &str,
    ports: Option<Vec<systole_testbench::PortInfo>>,
    format: TraceFormat,
) -> Result<Testbench, SimError> {
    let opts = Options {
        trace: Some(format),
        ..Options::default()
    };
    verilate(verilog, ports, &opts).map_err(tb_error)
}

/// An untraced model Verilated at run time (cached) as [`traced_model`]: how the array and the
/// board images at words other than 16 bits (`word_bits`), which the build does not compile,
/// are simulated; as fast as a compiled model.
pub(crate) fn runtime_model(
    verilog: &str,
    ports: Option<Vec<systole_testbench::PortInfo>>,
    word_bits: u32,
) -> Result<Testbench, SimError> {
    verilate(verilog, ports, &Options::default()).map_err(|e| SimError::RuntimeModel {
        word_bits,
        cause: Box::new(e),
    })
}

fn verilate(
    verilog: &str,
    ports: Option<Vec<systole_testbench::PortInfo>>,
    opts: &Options,
) -> Result<Testbench, systole_testbench::TestbenchError> {
    match ports {
        Some(p) => Testbench::from_verilog(verilog, p, opts),
        None => Testbench::from_verilog_declared_ports(verilog, crate::images::CLOCK, opts),
    }
}

#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod tests;
