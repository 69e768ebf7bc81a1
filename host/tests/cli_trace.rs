//! `--trace` through the binary: the window bounds the file, rust-hdl's names are in it, and
//! every request that cannot work is one clear error that writes and replaces nothing.

mod cli_common;

use cli_common::{fails_with, stderr, systole};
use std::path::Path;
use std::process::Command;

/// The timestamps of a VCD and whether it declares `name` (a variable) in a scope `scope`.
fn read_vcd(path: &Path) -> (Vec<u64>, Vec<String>) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let (mut times, mut vars, mut scope) = (Vec::new(), Vec::new(), Vec::<String>::new());
    for c in vcd::Parser::new(file) {
        match c.unwrap() {
            vcd::Command::Timestamp(t) => times.push(t),
            vcd::Command::ScopeDef(_, s) => scope.push(s),
            vcd::Command::Upscope => drop(scope.pop()),
            vcd::Command::VarDef(_, _, _, name, _) => {
                vars.push(format!("{}.{name}", scope.join(".")))
            }
            _ => {}
        }
    }
    (times, vars)
}

#[test]
fn check_writes_only_the_asked_cycles_with_rust_hdl_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("check.vcd");
    let p = path.to_str().unwrap();
    let o = systole(&[
        "check",
        "--device",
        "verilator",
        "--array",
        "4",
        "--cases",
        "1",
        "--trace",
        p,
        "--trace-from",
        "300",
        "--trace-cycles",
        "40",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("wrote trace") && out.contains("cycles 300..340"),
        "{out}"
    );
    let (times, vars) = read_vcd(&path);
    // Two samples per cycle: 2c (inputs settled) and 2c + 1 (after the rising edge).
    assert_eq!(times.first(), Some(&600));
    assert_eq!(times.last(), Some(&679));
    assert!(times.iter().all(|t| (600..680).contains(t)), "{times:?}");
    for name in [
        "top.top.core.converters$0.wr_data",
        "top.top.reg_wdata",
        "top.top.c_rd_data_3",
    ] {
        assert!(vars.iter().any(|v| v == name), "{name} not in {vars:?}");
    }
    // bench and train trace the same way.
    let b = dir.path().join("bench.vcd");
    let o = systole(&[
        "bench",
        "--array",
        "4",
        "--sizes",
        "16",
        "--conv-batch",
        "0",
        "--trace",
        b.to_str().unwrap(),
        "--trace-from",
        "10",
        "--trace-cycles",
        "5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_vcd(&b).0.first(), Some(&20));
    let t = dir.path().join("train.vcd");
    let o = systole(&[
        "train",
        "--device",
        "verilator",
        "--array",
        "4",
        "--limit",
        "64",
        "--hidden",
        "8",
        "--epochs",
        "1",
        "--trace",
        t.to_str().unwrap(),
        "--trace-cycles",
        "100",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_vcd(&t).0.last(), Some(&199));
    // Asked again without --overwrite-trace: refused, the file kept.
    let before = std::fs::read(&path).unwrap();
    let o = systole(&[
        "check",
        "--device",
        "verilator",
        "--array",
        "4",
        "--trace",
        p,
    ]);
    fails_with(&o, &["exists", "--overwrite-trace"]);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn trace_requests_that_cannot_work_are_clear_errors_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.vcd");
    let t = t.to_str().unwrap();
    // A format that is none is a usage error naming the choices.
    let o = systole(&[
        "check",
        "--device",
        "verilator",
        "--trace",
        t,
        "--trace-format",
        "gtkw",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid value 'gtkw'") && err.contains("vcd, fst"),
        "{err}"
    );
    assert!(!Path::new(t).exists());
    let cases: [(&[&str], &[&str]); 7] = [
        (&["check", "--trace", t], &["--device verilator", "golden"]),
        (
            &["check", "--device", "serial:/dev/null", "--trace", t],
            &["systole-board-sim --trace"],
        ),
        (
            &[
                "check",
                "--device",
                "verilator",
                "--trace",
                "/nonexistent-dir/t.vcd",
            ],
            &["cannot create the trace file"],
        ),
        (
            &["check", "--device", "verilator", "--trace", "t.txt"],
            &[".vcd or .fst"],
        ),
        (
            &["bench", "--array", "4,8", "--trace", t],
            &["one --array size"],
        ),
        (
            &["train", "--precision", "f32", "--trace", t],
            &["--precision fixed16"],
        ),
        (
            &[
                "check",
                "--device",
                "verilator",
                "--trace",
                t,
                "--trace-cycles",
                "0",
            ],
            &["0 cycles"],
        ),
    ];
    for (args, want) in cases {
        fails_with(&systole(args), want);
        assert!(!Path::new(t).exists(), "{args:?} left {t}");
    }
    let sim = env!("CARGO_BIN_EXE_systole-board-sim");
    for (args, want) in [
        (&["--trace", t][..], "--trace-cycles"),
        (&["--bridge", "--trace", t][..], "--trace-cycles"),
        (&["--soc", "--trace", t][..], "--trace-cycles"),
    ] {
        let o = Command::new(sim).args(args).output().unwrap();
        fails_with(&o, &[want]);
        assert!(!Path::new(t).exists(), "{args:?} left {t}");
    }
}
