//! The project's Python (`.venv`) with onnx and onnxruntime, for the ONNX tests.
#![allow(dead_code)] // each test crate uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The venv's python when it has onnx and onnxruntime. Without them: `None` (the caller skips,
/// saying so) outside CI, a failure under CI=true (`./x` installs them).
pub fn onnx_python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    let ok = python.is_file()
        && Command::new(&python)
            .args(["-c", "import onnx, onnxruntime, numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let msg = format!(
        "{} lacks onnx/onnxruntime: run ./x test once (it installs them into the project's .venv)",
        python.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// Runs `script` (in host/tests/onnx/) with `args`; panics with its output on failure.
pub fn run(python: &Path, script: &str, args: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/onnx")
        .join(script);
    let out = Command::new(python)
        .arg(&path)
        .args(args)
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
