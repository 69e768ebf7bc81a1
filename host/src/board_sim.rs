//! `systole-board-sim`: a simulated board on a pseudo-terminal, its options here so the CLI
//! reference (docs/CLI.md) renders them beside `systole`'s.
//!
//! The default board is the firmware's FrameServer loop over a Verilated array (`--device
//! serial:PATH`); `--bridge` the CPU-less bridge image through its serial pins (`--device
//! bridge:PATH`); `--soc` the SoC image, VexRiscv running the firmware (`--device serial:PATH`).
//! `--train`: a board whose firmware trains itself. Images at `--word-bits` other than 16 are
//! Verilated at run time and cached.

use crate::cli::TraceArgs;
use clap::Parser;
use systole_core::ArrayConfig;
use systole_device::board_sim::{run_board_sim, run_bridge_image_sim, run_soc_image_sim};

/// A simulated board on a pseudo-terminal, until killed.
///
/// Prints the pty's path; then drive it with e.g. `systole train --device serial:PATH --array
/// N` (the default board and --soc) or `systole check --device bridge:PATH --array 4`
/// (--bridge). The default board is the firmware's frame server over a Verilated array; the
/// bridge and SoC images are simulated through their serial pins.
#[derive(Debug, Parser)]
#[command(name = "systole-board-sim", version)]
pub struct BoardSimArgs {
    /// Array size N of the board (default 8; with --soc: the SoC model's size).
    #[arg(long, value_parser = clap::value_parser!(usize))]
    pub array: Option<usize>,
    /// The bridge image of a CPU-less board (UART bridge and array), driven through its serial
    /// pins; use --device bridge:PATH.
    #[arg(long, conflicts_with_all = ["soc", "array"])]
    pub bridge: bool,
    /// The SoC image (VexRiscv running the firmware); use --device serial:PATH.
    #[arg(long)]
    pub soc: bool,
    /// Word width W of the board's array, 8 to 16 (below 16 without the conv unit; the bridge
    /// and SoC images at W != 16 are Verilated at run time, cached after the first use).
    #[arg(long, default_value_t = systole_core::numeric::WORD_BITS)]
    pub word_bits: u32,
    /// A board that trains itself (state and data resident, steps run by its firmware): with
    /// --soc the training firmware image (built now if needed), else the firmware on the host.
    #[arg(long, conflicts_with = "bridge")]
    pub train: bool,
    /// The board runs until killed, so a trace needs --trace-cycles: the file is complete
    /// once that many cycles are written.
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// Runs the simulated board until killed (or until an error).
pub fn run(a: &BoardSimArgs) -> anyhow::Result<()> {
    if a.trace.trace.is_some() && a.trace.trace_cycles.is_none() {
        anyhow::bail!(
            "systole-board-sim runs until killed: give --trace-cycles N, so the trace is closed (complete) after N cycles"
        );
    }
    let window = a.trace.window(&systole_device::DeviceSpec::Verilator)?;
    if let Some(w) = &window {
        let what = if a.bridge || a.soc {
            "the image's clock cycles, counted from its creation,"
        } else {
            "cycles"
        };
        println!(
            "tracing {what} {}..{} to {}",
            w.from,
            w.from.saturating_add(w.cycles.unwrap_or(0)),
            w.path.display()
        );
    }
    let w = a.word_bits;
    let result = if a.bridge {
        run_bridge_image_sim(w, window.clone())
    } else if a.soc {
        run_soc_image_sim(a.array, w, window.clone(), a.train)
    } else {
        let config = ArrayConfig::square(a.array.unwrap_or(8)).with_word_bits(w);
        run_board_sim(config, window.clone(), a.train)
    }
    .map_err(Into::into);
    crate::cli::finish_trace(&window, result)
}
