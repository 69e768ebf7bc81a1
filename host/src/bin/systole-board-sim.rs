//! `systole-board-sim [--array N]`: a simulated board (the firmware's FrameServer loop + Verilated array)
//! on a pseudo-terminal. Prints the pty path; then run e.g.
//! `systole train --device serial:/dev/pts/5 --array N`. `--trace FILE --trace-cycles N`
//! (with `--trace-from C`) writes a waveform of the array's model.
//!
//! `systole-board-sim --bridge`: the bridge image of a CPU-less board (UART bridge and array, as
//! `systole bitstream` builds it) simulated through its serial pins; use `--device bridge:PATH`.
//! With `--trace` (on any of the three) a window of the image's own clock cycles, counted from
//! its creation, goes to the file (the traced image is Verilated on first use, then cached).
//!
//! `systole-board-sim --soc [--array N]`: the SoC image (VexRiscv running the firmware image,
//! UART, the array with its conv unit) simulated through its serial pins; use
//! `--device serial:PATH`. Its array size is the one the SoC model was built with.
//!
//! `--word-bits W` (8 to 16, default 16): the board's array at `W`-bit words (no conv unit
//! below 16 bits, where it is not built yet); the bridge and SoC images at `W` are Verilated at
//! run time (cached). The host then opens it with the same `--word-bits W`.
//!
//! `--train` (with or without `--soc`): a board whose firmware trains itself (issue 17): without
//! `--soc` the firmware's training session runs on the host over the Verilated array; with it,
//! the training image runs on the Verilated SoC (built at run time).

use clap::Parser;
use systole::cli::{error_text, TraceArgs};
use systole_core::ArrayConfig;
use systole_device::board_sim::{run_board_sim, run_bridge_image_sim, run_soc_image_sim};

/// A simulated board on a pseudo-terminal, until killed.
#[derive(Debug, Parser)]
#[command(name = "systole-board-sim", version, about)]
struct Args {
    /// Array size N of the board (default 8; with --soc: the SoC model's size).
    #[arg(long, value_parser = clap::value_parser!(usize))]
    array: Option<usize>,
    /// The bridge image of a CPU-less board (UART bridge and array), driven through its serial
    /// pins; use --device bridge:PATH.
    #[arg(long, conflicts_with_all = ["soc", "array"])]
    bridge: bool,
    /// The SoC image (VexRiscv running the firmware); use --device serial:PATH.
    #[arg(long)]
    soc: bool,
    /// Word width W of the board's array, 8 to 16 (below 16 without the conv unit; the bridge
    /// and SoC images at W != 16 are Verilated at run time, cached after the first use).
    #[arg(long, default_value_t = systole_core::numeric::WORD_BITS)]
    word_bits: u32,
    /// A board that trains itself (state and data resident, steps run by its firmware): with
    /// --soc the training firmware image (built now if needed), else the firmware on the host.
    #[arg(long, conflicts_with = "bridge")]
    train: bool,
    /// The board runs until killed, so a trace needs --trace-cycles: the file is complete
    /// once that many cycles are written.
    #[command(flatten)]
    trace: TraceArgs,
}

fn run(a: &Args) -> anyhow::Result<()> {
    if a.trace.trace.is_some() && a.trace.trace_cycles.is_none() {
        anyhow::bail!(
            "systole-board-sim runs until killed: give --trace-cycles N, so the trace is closed (complete) after N cycles"
        );
    }
    let window = a.trace.window("verilator")?;
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
    systole::cli::finish_trace(&window, result)
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {}", error_text(&e));
        std::process::exit(1);
    }
}
