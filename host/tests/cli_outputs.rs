//! The `systole` binary's outputs: nothing written where it should not be (links, devices,
//! FIFOs), nothing half-written, a closed or full standard output no panic, and every failure
//! one clear error line.

mod cli_common;

use cli_common::{fails_with, stderr, systole, train};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn closed_or_full_standard_output_is_no_panic() {
    for cmd in ["emit-verilog", "info", "boards"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_systole"))
            .arg(cmd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before a byte is read, like `| head -0`.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{cmd}: {}", stderr(&o));
        assert!(o.stderr.is_empty(), "{cmd}: {}", stderr(&o));
    }
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
    let o = Command::new(env!("CARGO_BIN_EXE_systole"))
        .arg("info")
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
        .arg(build.join("bridge_top.v"))
        .status()
        .unwrap()
        .success());
    let b = build.to_str().unwrap();
    let o = systole(&["bitstream", "--board", "icebreaker", "--out", b]);
    fails_with(&o, &["bridge_top.v", "a FIFO"]);
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

/// The SoC whose block RAM the model counts over the part's is refused before the firmware
/// build, any file or Yosys, naming where the block RAM goes and what fits instead.
#[test]
fn a_soc_over_the_block_ram_writes_nothing_and_runs_no_tool() {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    let b = build.to_str().unwrap();
    let o = systole(&[
        "bitstream",
        "--board",
        "arty-a7-35",
        "--soc",
        "--array",
        "8",
        "--fm-depth",
        "8192",
        "--out",
        b,
    ]);
    fails_with(
        &o,
        &[
            "does not fit arty-a7-35",
            "needs 123 RAMB18",
            "feature maps 64",
            "beside the CPU is 8x8 with 4096 words",
        ],
    );
    assert!(!build.exists(), "files were written");
    let o = systole(&[
        "bitstream",
        "--board",
        "icebreaker",
        "--soc",
        "--array",
        "2",
        "--out",
        b,
    ]);
    fails_with(&o, &["7-series and ECP5 boards only"]);
    assert!(!build.exists(), "files were written");
}

#[test]
fn error_causes_are_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    // A checkpoint that cannot be read (a folder by that name).
    std::fs::create_dir(dir.path().join("checkpoint.json")).unwrap();
    let err = fails_with(&train(dir.path(), &["--resume"]), &["checkpoint.json"]);
    assert_eq!(err.matches("is a folder").count(), 1, "{err}");
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
