//! `systole-board-sim`: a simulated board on a pseudo-terminal; see `systole-board-sim --help`
//! and docs/CLI.md. Prints the pty path; then run e.g. `systole train --device serial:PATH`.

use clap::Parser;

fn main() {
    let args = systole::board_sim::BoardSimArgs::parse();
    if let Err(e) = systole::board_sim::run(&args) {
        eprintln!("error: {}", systole::cli::error_text(&e));
        std::process::exit(1);
    }
}
