//! The `systole` command-line tool; see `systole --help`.

use clap::Parser;

fn main() {
    let cli = systole::cli::Cli::parse();
    if let Err(e) = systole::cli::run(cli) {
        eprintln!("error: {}", systole::cli::error_text(&e));
        std::process::exit(1);
    }
}
