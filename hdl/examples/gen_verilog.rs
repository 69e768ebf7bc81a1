//! Writes the Verilog of one accelerator configuration and its Verilator waivers.
//!
//! Usage: `cargo run -p systole-hdl --example gen_verilog -- SIZE [DEPTH] [OUT_DIR]`
//! (defaults: depth 512, directory `.`); writes `sa{SIZE}.v` and `lint.vlt`.

use std::process::ExitCode;
use systole_core::ArrayConfig;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse = |i: usize, default: usize| -> Option<usize> {
        args.get(i).map_or(Some(default), |s| s.parse().ok())
    };
    let (Some(size), Some(depth)) = (parse(0, 8), parse(1, 512)) else {
        eprintln!("usage: gen_verilog SIZE [DEPTH] [OUT_DIR]");
        return ExitCode::FAILURE;
    };
    let dir = std::path::PathBuf::from(args.get(2).map_or(".", |s| s.as_str()));
    let cfg = match ArrayConfig::new(size, 8, depth) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let verilog = match systole_hdl::generate_verilog(&cfg) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let file = dir.join(format!("sa{size}.v"));
    if let Err(e) = std::fs::write(&file, &verilog)
        .and_then(|_| std::fs::write(dir.join("lint.vlt"), systole_hdl::lint_waivers()))
    {
        eprintln!("error: cannot write to {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    println!("{}: {} lines", file.display(), verilog.lines().count());
    ExitCode::SUCCESS
}
