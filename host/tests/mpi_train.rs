//! `mpirun -np 2 systole train --shards 2` ends with the same checkpoint weights, momentum and
//! fractional-bit state as `systole train --shards 2` in one process (feature `mpi`; needs
//! Open MPI's `mpirun`).
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::Command;

const ARGS: &[&str] = &[
    "train", "--device", "golden", "--array", "4", "--hidden", "16", "--limit", "251", "--epochs",
    "2", "--seed", "3", "--shards", "2",
];

fn checkpoint(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("checkpoint.json")).unwrap()).unwrap()
}

fn ok(o: std::process::Output) {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn two_mpi_ranks_match_one_process_bit_for_bit() {
    let bin = env!("CARGO_BIN_EXE_systole");
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    ok(Command::new(bin)
        .args(ARGS)
        .arg("--out")
        .arg(one.path())
        .output()
        .unwrap());
    ok(Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", bin])
        .args(ARGS)
        .arg("--out")
        .arg(two.path())
        .output()
        .unwrap());
    let (a, b) = (checkpoint(one.path()), checkpoint(two.path()));
    for k in ["params", "velocity", "fracs", "step", "epoch", "config"] {
        assert_eq!(a[k], b[k], "{k} differs");
    }
    assert!(a["params"].as_array().is_some_and(|p| p.len() == 4));
}
