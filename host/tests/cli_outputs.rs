//! The `systole` binary's outputs: nothing written where it should not be, nothing lost, no run
//! replaced unasked, and every failure one clear error line (never a panic).

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn systole(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_systole"))
        .args(args)
        .output()
        .expect("run systole")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails with exit code 1 and one `error:` line containing every `want`, without a panic.
fn fails_with(o: &Output, want: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: ") && !err.contains("panicked"),
        "{err}"
    );
    for w in want {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
    err
}

/// A small, quick training run into `out` (one epoch unless `extra` gives `--epochs`).
fn train(out: &Path, extra: &[&str]) -> Output {
    let epochs = if extra.contains(&"--epochs") {
        vec![]
    } else {
        vec!["--epochs", "1"]
    };
    let mut args = vec![
        "train",
        "--limit",
        "200",
        "--hidden",
        "8",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&epochs);
    args.extend_from_slice(extra);
    systole(&args)
}

#[test]
fn emit_verilog_to_a_closed_pipe_or_a_full_disk_is_no_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_systole"))
        .arg("emit-verilog")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before a byte is read, like `| head -0`.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    // Standard output on a full device (`> /dev/full`; opening it for writing changes nothing).
    let o = Command::new(env!("CARGO_BIN_EXE_systole"))
        .arg("emit-verilog")
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    fails_with(&o, &["standard output", "No space left on device"]);
}

#[test]
fn out_refuses_links_fifos_and_devices_and_leaves_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.v");
    std::fs::write(&real, b"kept").unwrap();
    let link = dir.path().join("link.v");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = dir.path().join("fifo.v");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // A node like /dev/full in the temporary folder (never the real one: a broken check would
    // replace it for everyone on the machine).
    let dev = dir.path().join("full");
    let made = Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "7"])
        .status()
        .is_ok_and(|s| s.success());
    let mut cases = vec![(&link, "a symbolic link"), (&fifo, "a FIFO")];
    if made {
        cases.push((&dev, "a device"));
    }
    for (path, what) in cases {
        let p = path.to_str().unwrap();
        fails_with(&systole(&["emit-verilog", "--out", p]), &[p, what]);
    }
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(kind(&link).is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), b"kept");
    assert!(kind(&fifo).is_fifo());
    if made {
        assert!(kind(&dev).is_char_device());
    }
    // A regular file is replaced, and no temporary file is left beside it.
    let v = dir.path().join("sa.v");
    let o = systole(&["emit-verilog", "--array", "2", "--out", v.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    // The bitstream flow writes into its folder: a FIFO there is refused before any tool runs.
    let build = dir.path().join("build");
    std::fs::create_dir(&build).unwrap();
    assert!(Command::new("mkfifo")
        .arg(build.join("board_top.v"))
        .status()
        .unwrap()
        .success());
    let b = build.to_str().unwrap();
    let o = systole(&["bitstream", "--board", "icebreaker", "--out", b]);
    fails_with(&o, &["board_top.v", "a FIFO"]);
}

#[test]
fn a_second_run_into_a_busy_folder_stops_at_once_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_systole"))
        .args([
            "train", "--epochs", "100000", "--limit", "64", "--hidden", "16",
        ])
        .args(["--out", out])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = dir.path().join(".lock");
    let pid = format!("pid {} ", first.id());
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains(&pid)) {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the first run never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Even --overwrite does not take a folder another run is using.
    let second = train(dir.path(), &["--overwrite"]);
    let running = first.try_wait().unwrap().is_none();
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(running, "the first run ended early");
    fails_with(&second, &["in use by another systole run", &pid, "--out"]);
    // The first run's checkpoint (if it wrote one yet) is the first run's.
    if let Ok(text) = std::fs::read_to_string(dir.path().join("checkpoint.json")) {
        let ck: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(ck["config"]["model"]["Mlp"]["hidden"][0], 16, "{text:.200}");
    }
}

#[test]
fn a_checkpoint_is_never_replaced_or_misread_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("checkpoint.json");
    let o = train(dir.path(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&ck).unwrap();
    fails_with(
        &train(dir.path(), &[]),
        &["checkpoint of an earlier run", "--resume", "--overwrite"],
    );
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the checkpoint changed"
    );
    // A different configuration on resume: a sentence naming the option, no debug dump.
    let err = fails_with(
        &train(dir.path(), &["--resume", "--epochs", "2", "--lr", "0.1"]),
        &["--lr 0.1 here, 0.05 in the checkpoint"],
    );
    assert!(
        !err.contains("TrainConfig") && !err.contains("Mlp {"),
        "{err}"
    );
    // A checkpoint further along than --epochs, or out of step with its own history.
    let mut v: serde_json::Value = serde_json::from_slice(&before).unwrap();
    v["epoch"] = 5.into();
    std::fs::write(&ck, serde_json::to_vec(&v).unwrap()).unwrap();
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "3"]),
        &["5 epochs done, more than --epochs 3"],
    );
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "9"]),
        &["says 5 epochs are done but its history holds epochs [1]"],
    );
    // Tensor shapes that overflow when multiplied: an error, not a panic or a wrapped size.
    let mut v: serde_json::Value = serde_json::from_slice(&before).unwrap();
    v["params"][0]["Fixed"]["rows"] = (1u64 << 63).into();
    v["params"][0]["Fixed"]["cols"] = 2.into();
    std::fs::write(&ck, serde_json::to_vec(&v).unwrap()).unwrap();
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "2"]),
        &["bad fixed-point tensor", "9223372036854775808x2"],
    );
    // Told to: starts afresh and replaces it.
    let o = train(dir.path(), &["--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(&ck).unwrap()).unwrap();
}

#[test]
fn an_unwritable_out_fails_before_training() {
    // procfs takes no new files, even from root.
    let o = systole(&["train", "--epochs", "1", "--limit", "64", "--out", "/proc"]);
    fails_with(&o, &["/proc"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("epoch"), "trained before failing: {out}");
}

#[test]
fn oversized_options_are_clear_errors_before_allocating() {
    for (args, want) in [
        (vec!["train", "--hidden", "100000000"], "2^26"),
        (vec!["train", "--hidden", "1000000,1000000"], "2^26"),
        (
            vec!["train", "--model", "cnn", "--channels", "100000000000"],
            "2^26",
        ),
        (
            vec![
                "train",
                "--model",
                "cnn",
                "--channels",
                "2305843009213693952",
            ],
            "too many",
        ),
        (vec!["train", "--shards", "100000000"], "--shards 100000000"),
        (vec!["bench", "--sizes", "100000"], "--sizes 100000"),
        (vec!["bench", "--conv-batch", "100000000"], "--conv-batch"),
    ] {
        let o = systole(&args);
        fails_with(&o, &[want]);
    }
}

#[test]
fn confusing_inputs_get_one_clear_sentence() {
    for (args, want) in [
        (vec!["check", "--cases", "0"], "--cases must be at least 1"),
        (
            vec!["check", "--device", "bridge:/dev/ttyUSB9@abc"],
            "'abc' after the '@'",
        ),
        (
            vec!["check", "--device", "bridge:@9600"],
            "names no serial port",
        ),
        (vec!["train", "--lr", "-1"], "--lr must be a positive"),
        (vec!["train", "--momentum", "-0.5"], "--momentum must be in"),
    ] {
        let o = systole(&args);
        fails_with(&o, &[want]);
    }
    // clap's own usage errors (exit code 2) name the value and what it must be.
    for args in [
        vec!["train", "--epochs", "-1"],
        vec!["check", "--seed", "-3"],
    ] {
        let o = systole(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("is not a whole number"), "{err}");
        assert!(!err.contains("unexpected argument"), "{err}");
    }
}

#[test]
fn the_far_too_big_bitstream_writes_nothing_and_runs_no_tool() {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    let b = build.to_str().unwrap();
    let o = systole(&[
        "bitstream",
        "--board",
        "icebreaker",
        "--array",
        "16",
        "--out",
        b,
    ]);
    fails_with(
        &o,
        &[
            "does not fit icebreaker",
            "needs 256 hard multipliers",
            "2x2",
        ],
    );
    assert!(!build.exists(), "files were written");
}

#[test]
fn error_causes_are_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    // A checkpoint that cannot be read (a folder by that name).
    std::fs::create_dir(dir.path().join("checkpoint.json")).unwrap();
    let err = fails_with(&train(dir.path(), &["--resume"]), &["checkpoint.json"]);
    assert_eq!(err.matches("(os error").count(), 1, "{err}");
    // An --out below a regular file.
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let sub = file.join("run");
    let err = fails_with(
        &systole(&["train", "--epochs", "1", "--out", sub.to_str().unwrap()]),
        &["Not a directory"],
    );
    assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
}
