//! The `systole` command-line tool; see `systole --help`.

use clap::Parser;

fn main() {
    let cli = systole::cli::Cli::parse();
    if let Err(e) = systole::cli::run(cli) {
        // `{:#}` prints the error and its causes on one line: "what failed: why".
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
