//! Outputs checked before any work, a closed standard output that does not end a training job,
//! and `check` taking the word width the simulated board's banner asks for.

mod cli_common;

use cli_common::{fails_with, stderr, systole};
use std::process::{Command, Stdio};

/// A link where `history.csv` will go is refused before the first step, not after the run.
#[test]
fn a_link_among_the_run_files_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let target = dir.path().join("elsewhere.csv");
    std::fs::write(&target, b"kept").unwrap();
    std::os::unix::fs::symlink(&target, out.join("history.csv")).unwrap();
    let o = systole(&[
        "train",
        "--epochs",
        "1",
        "--limit",
        "64",
        "--hidden",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&o, &["history.csv", "a symbolic link"]);
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        !printed.contains("epoch"),
        "trained before failing: {printed}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"kept");
}

/// An --out that is not a folder says so, not "File exists (os error 17)".
#[test]
fn an_out_that_is_not_a_folder_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let o = systole(&[
        "train",
        "--epochs",
        "1",
        "--limit",
        "64",
        "--out",
        "/dev/null",
    ]);
    fails_with(&o, &["/dev/null", "a device, not a folder"]);
    let o = systole(&["train", "--epochs", "1", "--limit", "64", "--out", f]);
    fails_with(&o, &[f, "a regular file, not a folder"]);
    let o = systole(&[
        "explore",
        "--array",
        "4",
        "--resources",
        "estimate",
        "--out",
        f,
    ]);
    let err = fails_with(&o, &[f, "not a folder"]);
    assert!(!err.contains("os error 17"), "{err}");
}

/// Temporary files a killed run left in its folder are removed by the next run there.
#[test]
fn a_killed_runs_temporary_files_are_removed_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let stale = out.join(".checkpoint.json.4000000-0.tmp.json");
    std::fs::write(&stale, b"{half").unwrap();
    let kept = out.join("notes.tmp.txt");
    std::fs::write(&kept, b"mine").unwrap();
    let o = cli_common::train(&out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stale.exists(), "the stale temporary file is still there");
    assert_eq!(std::fs::read(&kept).unwrap(), b"mine");
}

/// `| head -1`: the reader goes away after the first line, the training still runs to its end
/// (its files are the job) and exits 0.
#[test]
fn a_closed_standard_output_does_not_end_the_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_systole"))
        .args([
            "train", "--epochs", "3", "--limit", "64", "--hidden", "8", "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let history = std::fs::read_to_string(out.join("history.csv")).unwrap();
    assert_eq!(history.lines().count(), 1 + 3, "{history}");
    let ck = std::fs::read_to_string(out.join("checkpoint.json")).unwrap();
    assert!(
        ck.contains("\"epoch\":3"),
        "the checkpoint is not epoch 3's"
    );
}

/// `check --word-bits W` checks an array at W (the golden model here), as the simulated
/// board's banner tells its users to.
#[test]
fn check_takes_the_word_width() {
    let o = systole(&["check", "--array", "4", "--cases", "1", "--word-bits", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        printed.contains("golden 4x4 (8-bit words): ")
            && printed.contains("agree with the golden model"),
        "{printed}"
    );
    let o = systole(&["check", "--array", "4", "--word-bits", "7"]);
    fails_with(&o, &["--word-bits 7"]);
}
