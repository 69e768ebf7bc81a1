//! Helpers of the `systole` binary's tests: run it, and check a failure is one clear line.

#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::{Child, Command, Output};

pub fn systole(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_systole"))
        .args(args)
        .output()
        .expect("run systole")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails with exit code 1 and one `error:` line containing every `want`, without a panic.
pub fn fails_with(o: &Output, want: &[&str]) -> String {
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
pub fn train(out: &Path, extra: &[&str]) -> Output {
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

/// A child process killed when the test ends, however it ends (a failing assertion included).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
