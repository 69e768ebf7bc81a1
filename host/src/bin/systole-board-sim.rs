//! `systole-board-sim [--array N]`: a simulated board (firmware board loop + Verilated array)
//! on a pseudo-terminal. Prints the pty path; then run e.g.
//! `systole train --device serial:/dev/pts/5 --array N`.

use systole::board_sim::run_board_sim;
use systole::ArrayConfig;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
            eprintln!("usage: systole-board-sim [--array N]");
            std::process::exit(2);
        }
    };
    if let Err(e) = run_board_sim(ArrayConfig::square(size)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
