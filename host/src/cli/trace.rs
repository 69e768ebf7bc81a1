//! `--trace`: a waveform of the Verilated model from any command that runs one.

use clap::Args;
use std::path::PathBuf;
use systole_device::{TraceFormat, TraceWindow};

/// The trace options every command that runs a Verilated model takes.
#[derive(Debug, Clone, Default, Args)]
#[command(allow_negative_numbers = true)]
pub struct TraceArgs {
    /// Write a waveform of the Verilated model (every signal, rust-hdl's names; time in half
    /// cycles) to this new file: .fst or .vcd (needs --device verilator; the traced model is
    /// Verilated on first use, about a minute, then cached).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Trace format [default: the --trace file's extension].
    #[arg(long, value_enum, requires = "trace")]
    pub trace_format: Option<TraceFormatArg>,
    /// First cycle traced (cycles count from the model's creation, its reset included).
    #[arg(long, value_parser = super::whole_u64, default_value_t = 0, requires = "trace")]
    pub trace_from: u64,
    /// Cycles traced [default: to the end of the run].
    #[arg(long, value_parser = super::whole_u64, requires = "trace")]
    pub trace_cycles: Option<u64>,
    /// Replace an existing --trace file (without this it is refused, and left as it is).
    #[arg(long, requires = "trace")]
    pub overwrite_trace: bool,
}

/// `--trace-format`'s choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormatArg {
    /// Value change dump (text).
    Vcd,
    /// Fast signal trace (compressed; GTKWave and Surfer read it).
    Fst,
}

impl TraceArgs {
    /// The window asked for on `device`, its file created (so a path that cannot be written
    /// fails before any simulation), or `None` without `--trace`.
    pub fn window(
        &self,
        device: &systole_device::DeviceSpec,
    ) -> anyhow::Result<Option<TraceWindow>> {
        let Some(path) = &self.trace else {
            return Ok(None);
        };
        device.traceable()?;
        let format = self.trace_format.map(|f| match f {
            TraceFormatArg::Vcd => TraceFormat::Vcd,
            TraceFormatArg::Fst => TraceFormat::Fst,
        });
        let w = TraceWindow::new(path, format, self.trace_from, self.trace_cycles)?;
        w.create_file(self.overwrite_trace)?;
        Ok(Some(w))
    }
}

/// After the command: on success says what the trace holds; a window that started after the
/// run ended left the file empty, which is removed (the note says so), as it is after a failure.
pub fn finish<T>(window: &Option<TraceWindow>, result: anyhow::Result<T>) -> anyhow::Result<T> {
    let Some(w) = window else { return result };
    if result.is_err() {
        if std::fs::metadata(&w.path).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&w.path);
        }
        return result;
    }
    let cycles = match w.cycles {
        Some(n) => format!("cycles {}..{}", w.from, w.from.saturating_add(n)),
        None => format!("cycles from {}", w.from),
    };
    if std::fs::metadata(&w.path).is_ok_and(|m| m.len() == 0) {
        let _ = std::fs::remove_file(&w.path);
        outln!(
            "trace: the run ended before cycle {}: nothing traced ({} removed)",
            w.from,
            w.path.display()
        );
    } else {
        outln!(
            "wrote trace {} ({}, {cycles})",
            w.path.display(),
            w.format.name()
        );
    }
    result
}
