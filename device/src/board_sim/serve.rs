//! `systole-board-sim`'s serving loops: a simulated board of each kind on a pty until killed,
//! its path and the host options that open it printed.

use super::SimBoard;
use crate::DeviceError;
use systole_core::ArrayConfig;

/// `systole-board-sim`: serves a Verilated board on a pty until killed, printing its path.
pub fn run_board_sim(
    config: ArrayConfig,
    trace: Option<systole_sim::TraceWindow>,
    trains: bool,
) -> Result<(), DeviceError> {
    let board = if trains {
        if trace.is_some() {
            return Err(DeviceError::Unsupported(
                "--train with --trace: trace the board without --train".into(),
            ));
        }
        let sim = systole_sim::VerilatedArray::new(&config)?;
        // The training SoC's RAM: the host's memory is larger, but plans by this.
        SimBoard::spawn_training(config, move || sim, systole_core::soc::TRAINING_RAM_BYTES)?
    } else {
        SimBoard::spawn_verilated_traced(config, trace)?
    };
    let what = if trains { ", training itself" } else { "" };
    println!(
        "simulated {0}x{0} board{what} on {1} (use --device serial:{1} --array {0}{2}); Ctrl-C to stop",
        config.size,
        board.path().display(),
        word_bits_option(&config),
    );
    loop {
        std::thread::park();
    }
}

/// `systole-board-sim --soc`: serves the simulated SoC image (the firmware on the CPU) on a
/// pty until killed, printing its path. `size`, when given, must be the SoC model's array size;
/// `trace` writes a window of the image's cycles.
pub fn run_soc_image_sim(
    size: Option<usize>,
    word_bits: u32,
    trace: Option<systole_sim::TraceWindow>,
    trains: bool,
) -> Result<(), DeviceError> {
    let (board, config) = if trains {
        SimBoard::spawn_soc_training_image(word_bits, trace)?
    } else {
        SimBoard::spawn_soc_image_at(word_bits, trace)?
    };
    let n = config.size;
    if size.is_some_and(|s| s != n) {
        return Err(DeviceError::Unsupported(format!(
            "the SoC image in this build has a {n}x{n} array: use --soc --array {n} (or no --array)"
        )));
    }
    println!(
        "simulated SoC image (VexRiscv running the {training}firmware, {n}x{n} array of {w}-bit words{unit}) on {path} (use --device serial:{path} --array {n}{option}); Ctrl-C to stop",
        path = board.path().display(),
        training = if trains { "training " } else { "" },
        w = config.word_bits,
        unit = conv_unit(&config),
        option = word_bits_option(&config),
    );
    loop {
        std::thread::park();
    }
}

/// `systole-board-sim --bridge`: serves the simulated bridge image (UART bridge) with its array
/// at `word_bits`-bit words on a pty until killed, printing its path.
pub fn run_bridge_image_sim(
    word_bits: u32,
    trace: Option<systole_sim::TraceWindow>,
) -> Result<(), DeviceError> {
    let (board, config) = SimBoard::spawn_bridge_image_at(word_bits, trace)?;
    let size = config.size;
    println!(
        "simulated bridge image ({size}x{size} array of {w}-bit words{unit}, behind the UART bridge, as `systole bitstream` builds it) on {path} (use --device bridge:{path} --array {size}{option}); Ctrl-C to stop",
        path = board.path().display(),
        w = config.word_bits,
        unit = conv_unit(&config),
        option = word_bits_option(&config),
    );
    loop {
        std::thread::park();
    }
}

/// ", a conv unit of N words" or ", no conv unit", for a board's banner.
fn conv_unit(config: &ArrayConfig) -> String {
    match config.fm_depth {
        0 => ", no conv unit".into(),
        d => format!(", a {d}-word conv unit"),
    }
}

/// The `--word-bits` a host gives to use a board of `config` (none at the default 16).
fn word_bits_option(config: &ArrayConfig) -> String {
    match config.word_bits {
        systole_core::numeric::WORD_BITS => String::new(),
        w => format!(" --word-bits {w}"),
    }
}
