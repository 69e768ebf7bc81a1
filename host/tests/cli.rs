//! The `systole` binary: a short training run writes its reports and resumes; bad input gives
//! one clear error line and exit code 1, never a panic.

use std::process::Command;

fn systole(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_systole"))
        .args(args)
        .output()
        .expect("run systole")
}

#[test]
fn train_writes_reports_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = systole(&["train", "--epochs", "1", "--check", "--out", out]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("epoch   1/1"), "{text}");
    for f in ["run.json", "history.csv", "loss.png", "checkpoint.json"] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    let o = systole(&[
        "train", "--epochs", "2", "--check", "--out", out, "--resume",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(dir.path().join("history.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(json["history"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_input_is_one_clear_error() {
    for (args, want) in [
        (vec!["train", "--array", "1"], "array size 1"),
        (vec!["train", "--lr=0"], "--lr must be"),
        (vec!["train", "--batch", "0"], "--batch must be"),
        (vec!["train", "--resume"], "--resume needs --out"),
        (vec!["check", "--array", "100"], "array size 100"),
        (
            vec!["program", "--board", "arty-a7-35", "--out", "no-build"],
            "no-build/top.bit: no bitstream here: run `systole bitstream`",
        ),
        (
            vec!["bitstream", "--board", "zedboard"],
            "unknown board 'zedboard'",
        ),
        (
            vec![
                "explore",
                "--array",
                "4",
                "--word-bits",
                "7",
                "--out",
                "no-sweep",
            ],
            "--word-bits 7: the word width W must be 8 to 16 bits",
        ),
        (
            vec!["explore", "--array", "", "--out", "no-sweep"],
            "--array is empty: give at least one value, e.g. --array 4,8,16",
        ),
        (
            vec!["explore", "--array", "4,100", "--out", "no-sweep"],
            "--array 100: array size 100 is not supported",
        ),
        (
            vec![
                "explore", "--array", "4", "--board", "zedboard", "--out", "no-sweep",
            ],
            "unknown board 'zedboard'",
        ),
    ] {
        let o = systole(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(want),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            !std::path::Path::new("no-sweep").exists(),
            "{args:?} made its --out"
        );
        // A cause is said once, even when the error's own message already names it.
        let parts: Vec<&str> = err.trim_end().split(": ").collect();
        for p in &parts {
            let n = parts.iter().filter(|q| *q == p).count();
            assert_eq!(n, 1, "{args:?}: `{p}` repeated: {err}");
        }
    }
}

/// `--dataset` is parsed by clap (a usage error, exit code 2) naming the value and the choices.
#[test]
fn an_unknown_data_set_is_a_usage_error() {
    for cmd in ["train", "compare", "explore"] {
        let o = systole(&[
            cmd,
            "--array",
            "4",
            "--dataset",
            "cifar",
            "--out",
            "no-sweep",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.starts_with("error: invalid value 'cifar' for '--dataset <DATASET>': unknown data set 'cifar': use digits, fashion-mnist, idx:DIR"),
            "{cmd}: {err}"
        );
        assert!(
            !std::path::Path::new("no-sweep").exists(),
            "{cmd} made its --out"
        );
    }
}

/// Every choice is parsed once, by clap (a usage error, exit code 2), naming the value and
/// the choices.
#[test]
fn an_unknown_choice_is_a_usage_error() {
    let model = "invalid value 'rnn' for '--model <MODEL>': unknown model 'rnn': use mlp, cnn, lenet5, resnet8, a network file (.json) or an ONNX file (.onnx)";
    for (args, want) in [
        (vec!["train", "--model", "rnn"], model),
        (vec!["compare", "--model", "rnn"], model),
        (vec!["explore", "--array", "4", "--model", "rnn"], model),
        (
            vec!["train", "--rounding", "up"],
            "invalid value 'up' for '--rounding <ROUNDING>'\n  [possible values: truncate, nearest, stochastic]",
        ),
        (
            vec!["train", "--precision", "f64"],
            "invalid value 'f64' for '--precision <PRECISION>'\n  [possible values: fixed16, f32, f16, bf16]",
        ),
        (
            vec!["train", "--init", "zeros"],
            "invalid value 'zeros' for '--init <INIT>'\n  [possible values: file, random]",
        ),
        (
            vec!["explore", "--array", "4", "--resources", "vivado"],
            "invalid value 'vivado' for '--resources <RESOURCES>'\n  [possible values: yosys, estimate]",
        ),
        (
            vec!["compare", "--formats", "f32,fixed16"],
            "invalid value 'fixed16' for '--formats",
        ),
        (
            vec!["train", "--device", "fpga"],
            "invalid value 'fpga' for '--device <DEVICE>': unknown device 'fpga': use golden, verilator, serial:PATH or bridge:PATH[@BAUD]",
        ),
        (
            vec!["train", "--device", "serial:"],
            "invalid value 'serial:' for '--device <DEVICE>': 'serial:' names no serial port",
        ),
        (
            vec!["eval", "--device", "tpu", "--model", "m.onnx", "--dataset", "digits"],
            "invalid value 'tpu' for '--device <DEVICE>': unknown device 'tpu'",
        ),
    ] {
        let o = systole(&[&args[..], &["--out", "no-sweep"][..]].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(&format!("error: {want}")), "{args:?}: {err}");
        assert!(
            !args.contains(&"--formats") || err.contains("unknown format 'fixed16': use f32, f16, bf16, fixed16-stochastic"),
            "{err}"
        );
        assert!(
            !std::path::Path::new("no-sweep").exists(),
            "{args:?} made its --out"
        );
    }
    // Aliases are taken.
    let o = systole(&[
        "train",
        "--rounding",
        "sr",
        "--precision",
        "fixed",
        "--print-model",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn check_passes_on_golden() {
    let o = systole(&["check", "--cases", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("24 operations agree"));
}

/// Without the `mpi` feature a launch under mpirun must fail instead of training K copies.
#[cfg(not(feature = "mpi"))]
#[test]
fn mpirun_without_mpi_feature_is_a_clear_error() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_systole"))
        .args(["train", "--epochs", "1"])
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("built without MPI: rebuild with --features mpi"),
        "{err}"
    );
}

/// `emit-verilog --cocotb` writes the Python constants of exactly the top it emits: its ports
/// as the Verilog declares them and the register map, from the same definitions.
#[test]
fn emit_verilog_writes_the_cocotb_constants_of_the_same_top() {
    let dir = tempfile::tempdir().unwrap();
    let (v, py) = (dir.path().join("top.v"), dir.path().join("systole_top.py"));
    let o = systole(&[
        "emit-verilog",
        "--array",
        "3",
        "--fm-depth",
        "0",
        "--buffer-depth",
        "64",
        "--out",
        v.to_str().unwrap(),
        "--cocotb",
        py.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (verilog, text) = (
        std::fs::read_to_string(&v).unwrap(),
        std::fs::read_to_string(&py).unwrap(),
    );
    let mut cfg = systole_core::ArrayConfig::new(3, 8, 64).unwrap();
    cfg.fm_depth = 0;
    assert_eq!(text, systole_hdl::cocotb::python_constants(&cfg).unwrap());
    assert!(text.contains("FM_DEPTH = 0\n") && text.contains("BUFFER_DEPTH = 64\n"));
    // Every port in PORTS is declared by the Verilog's `top` with that width.
    let ports: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("PORTS = {"))
        .skip(1)
        .take_while(|l| *l != "}")
        .collect();
    assert_eq!(ports.len(), systole_hdl::ports(&cfg).unwrap().len());
    for line in ports {
        let (name, rest) = line.trim().split_once(": (").unwrap();
        let (dir, width) = rest.trim_end_matches("),").split_once(", ").unwrap();
        let (name, dir) = (name.trim_matches('"'), dir.trim_matches('"'));
        let width: u32 = width.parse().unwrap();
        let range = if width > 1 {
            format!(" [{}:0]", width - 1)
        } else {
            String::new()
        };
        let decl = format!("    {dir} wire{range} {name};");
        assert!(verilog.contains(&decl), "{decl} not in the Verilog");
    }
    let same = v.to_str().unwrap();
    let o = systole(&["emit-verilog", "--out", same, "--cocotb", same]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the same file"));
}
