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
    edit_checkpoint(dir.path(), &before, |v| v["epoch"] = 5.into());
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
        &["bad fixed-point tensor", "9223372036854775808x2"],
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
fn check_with_zero_cases_is_refused() {
    fails_with(
        &systole(&["check", "--cases", "0"]),
        &["--cases must be at least 1"],
    );
}

#[test]
fn a_bridge_baud_typo_is_a_baud_error_not_a_path() {
    fails_with(
        &systole(&["check", "--device", "bridge:/dev/ttyUSB9@abc"]),
        &[
            "'abc' after the '@'",
            "baud rate",
            "bridge:/dev/ttyUSB9@115200",
        ],
    );
    fails_with(
        &systole(&["check", "--device", "bridge:@9600"]),
        &["names no serial port"],
    );
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
