//! `systole-board-sim [--array N]`: a simulated board (firmware board loop + Verilated array)
//! on a pseudo-terminal. Prints the pty path; then run e.g.
//! `systole train --device serial:/dev/pts/5 --array N`.
//!
//! `systole-board-sim --bridge`: the board image of a CPU-less board (UART bridge and array, as
//! `systole bitstream` builds it) simulated through its serial pins; use `--device bridge:PATH`.
//!
//! `systole-board-sim --soc [--array N]`: the SoC image (VexRiscv running the firmware image,
//! UART, the array with its conv unit) simulated through its serial pins; use
//! `--device serial:PATH`. Its array size is the one the SoC model was built with.

use systole_core::ArrayConfig;
use systole_device::board_sim::{run_board_sim, run_bridge_image_sim, run_soc_image_sim};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.as_slice() == ["--bridge"] {
        if let Err(e) = run_bridge_image_sim() {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.first().is_some_and(|a| a == "--soc") {
        let size = match &args[1..] {
            [] => None,
            [flag, n] if flag == "--array" => match n.parse::<usize>() {
                Ok(n) => Some(n),
                Err(_) => {
                    eprintln!("error: --array takes a number, e.g. --array 4 (got '{n}')");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("usage: systole-board-sim --soc [--array N]");
                std::process::exit(2);
            }
        };
        if let Err(e) = run_soc_image_sim(size) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    let size = match args.as_slice() {
        [] => 8,
        [flag, n] if flag == "--array" => match n.parse::<usize>() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("error: --array takes a number, e.g. --array 8 (got '{n}')");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!(
                "usage: systole-board-sim [--array N] | systole-board-sim --bridge | systole-board-sim --soc [--array N]"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = run_board_sim(ArrayConfig::square(size)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
