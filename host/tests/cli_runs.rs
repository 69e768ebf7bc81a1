//! `systole train` run folders and options: one run per folder, no checkpoint replaced or
//! misread unasked, oversized options refused before allocating, confusing inputs explained.

mod cli_common;

use cli_common::{fails_with, stderr, systole, train, KillOnDrop};
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn a_second_run_into_a_busy_folder_stops_at_once_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let mut first = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_systole"))
            .args([
                "train", "--epochs", "100000", "--limit", "64", "--hidden", "16",
            ])
            .args(["--out", out])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lock = dir.path().join(".lock");
    let pid = format!("pid {} ", first.0.id());
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
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first run ended early"
    );
    drop(first);
    fails_with(&second, &["in use by another systole run", &pid, "--out"]);
    // The first run's checkpoint (if it wrote one yet) is the first run's.
    if let Ok(text) = std::fs::read_to_string(dir.path().join("checkpoint.json")) {
        let ck: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(ck["config"]["model"]["Mlp"]["hidden"][0], 16, "{text:.200}");
    }
}

/// A finished one-epoch run in `dir`; returns its checkpoint's bytes.
fn one_epoch(dir: &Path) -> Vec<u8> {
    let o = train(dir, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read(dir.join("checkpoint.json")).unwrap()
}

/// Rewrites `dir`'s checkpoint after `edit`.
fn edit_checkpoint(dir: &Path, before: &[u8], edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(before).unwrap();
    edit(&mut v);
    // An edited file without its checksum reads as one written before checksums: the checks
    // of the fields themselves are what these tests hold.
    v.as_object_mut().unwrap().remove("checksum");
    std::fs::write(dir.join("checkpoint.json"), serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn a_fresh_run_never_replaces_a_checkpoint_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("checkpoint.json");
    let before = one_epoch(dir.path());
    fails_with(
        &train(dir.path(), &[]),
        &["checkpoint of an earlier run", "--resume", "--overwrite"],
    );
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the checkpoint changed"
    );
    // Told to: starts afresh and replaces it.
    let o = train(dir.path(), &["--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(&ck).unwrap()).unwrap();
}

#[test]
fn resuming_under_other_options_names_them_in_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    one_epoch(dir.path());
    let err = fails_with(
        &train(dir.path(), &["--resume", "--epochs", "2", "--lr", "0.1"]),
        &["--lr 0.1 here, 0.05 in the checkpoint"],
    );
    assert!(
        !err.contains("TrainConfig") && !err.contains("Mlp {"),
        "{err}"
    );
}

#[test]
fn a_checkpoint_beyond_epochs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let before = one_epoch(dir.path());
    edit_checkpoint(dir.path(), &before, |v| {
        let mut second = v["history"][0].clone();
        second["epoch"] = 2.into();
        v["history"].as_array_mut().unwrap().push(second);
        v["epoch"] = 2.into();
        // The step counter of two epochs (7 batches each), so only the epochs are at fault.
        v["step"] = 14.into();
    });
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "1"]),
        &["2 epochs done, more than --epochs 1"],
    );
}

#[test]
fn a_checkpoint_out_of_step_with_its_history_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let before = one_epoch(dir.path());
    edit_checkpoint(dir.path(), &before, |v| {
        v["epoch"] = 5.into();
        v["step"] = 35.into();
    });
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "9"]),
        &["says 5 epochs are done but its history holds epochs [1]"],
    );
}

#[test]
fn a_checkpoint_with_overflowing_shapes_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let before = one_epoch(dir.path());
    edit_checkpoint(dir.path(), &before, |v| {
        v["params"][0]["Fixed"]["rows"] = (1u64 << 63).into();
        v["params"][0]["Fixed"]["cols"] = 2.into();
    });
    fails_with(
        &train(dir.path(), &["--resume", "--epochs", "2"]),
        &["params[0]", "9223372036854775808x2"],
    );
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
            "2^26",
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
fn check_with_zero_cases_is_refused() {
    fails_with(
        &systole(&["check", "--cases", "0"]),
        &["--cases must be at least 1"],
    );
}

/// A device value is parsed by clap (a usage error, exit code 2) saying what is wrong.
#[test]
fn a_bridge_baud_typo_is_a_baud_error_not_a_path() {
    for (device, want) in [
        (
            "bridge:/dev/ttyUSB9@abc",
            &[
                "'abc' after the '@'",
                "baud rate",
                "bridge:/dev/ttyUSB9@115200",
            ][..],
        ),
        ("bridge:@9600", &["names no serial port"][..]),
    ] {
        let o = systole(&["check", "--device", device]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.starts_with("error: invalid value"), "{err}");
        for w in want {
            assert!(err.contains(w), "{w:?} missing from: {err}");
        }
    }
}

#[test]
fn negative_numbers_reach_their_options_checks() {
    fails_with(
        &systole(&["train", "--lr", "-1"]),
        &["--lr must be a positive"],
    );
    fails_with(
        &systole(&["train", "--momentum", "-0.5"]),
        &["--momentum must be in"],
    );
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

/// A tiny MNIST-style IDX folder in `dir`: 48 training and 16 test images of 4 x 4 bytes,
/// 3 classes.
fn write_idx_set(dir: &Path) {
    let idx = |dims: &[u32], data: &[u8]| {
        let mut b = vec![0, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    };
    for (split, n) in [("train", 48u32), ("t10k", 16)] {
        let labels: Vec<u8> = (0..n).map(|i| (i % 3) as u8).collect();
        let pixels: Vec<u8> = (0..n * 16)
            .map(|k| (k % 16 / 4 * 60 + (k / 16) % 3 * 20) as u8)
            .collect();
        let files = [
            (
                format!("{split}-images-idx3-ubyte"),
                idx(&[n, 4, 4], &pixels),
            ),
            (format!("{split}-labels-idx1-ubyte"), idx(&[n], &labels)),
        ];
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

/// A set of the user's trains from the command line; run.json and the checkpoint record it and
/// the input scaling, and resuming under another scaling is refused naming the option.
#[test]
fn an_idx_set_trains_and_its_input_scaling_is_part_of_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    std::fs::create_dir(&set).unwrap();
    write_idx_set(&set);
    let spec = format!("idx:{}", set.display());
    let out = tmp.path().join("run");
    let scaled = [
        "--dataset",
        &spec,
        "--input-scale",
        "2",
        "--input-offset=-1",
    ];
    let o = train(&out, &scaled);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    let c = &json["config"];
    assert_eq!(c["dataset"], spec.as_str());
    assert_eq!(
        (c["input_scale"].as_f64(), c["input_offset"].as_f64()),
        (Some(2.0), Some(-1.0))
    );
    fails_with(
        &train(&out, &["--dataset", &spec, "--resume", "--epochs", "2"]),
        &[
            "--input-scale 1 here, 2 in the checkpoint",
            "--input-offset 0 here, -1 in the checkpoint",
        ],
    );
    let o = train(
        &out,
        &[&scaled[..], &["--resume", "--epochs", "2"]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A damaged data file is one error naming it, before the run folder is made.
#[test]
fn a_bad_data_file_fails_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    std::fs::create_dir(&set).unwrap();
    write_idx_set(&set);
    let labels = set.join("t10k-labels-idx1-ubyte");
    let mut bytes = std::fs::read(&labels).unwrap();
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&labels, bytes).unwrap();
    let out = tmp.path().join("run");
    for cmd in ["train", "compare"] {
        let o = systole(&[
            cmd,
            "--dataset",
            &format!("idx:{}", set.display()),
            "--out",
            out.to_str().unwrap(),
        ]);
        fails_with(
            &o,
            &[
                &labels.display().to_string(),
                "is malformed: truncated: dimensions 16 of uint8",
            ],
        );
        assert!(!out.exists(), "{cmd} made its --out");
    }
    let npz = tmp.path().join("set.npz");
    std::fs::write(&npz, b"PK").unwrap();
    let o = systole(&[
        "train",
        "--dataset",
        &format!("npz:{}", npz.display()),
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&o, &[&npz.display().to_string(), "not a zip archive"]);
    assert!(!out.exists());
}
