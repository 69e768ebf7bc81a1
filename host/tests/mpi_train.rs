//! `mpirun -np 2 systole train --shards 2` ends with the same checkpoint weights, momentum and
//! fractional-bit state as `systole train --shards 2` in one process (feature `mpi`; needs
//! Open MPI's `mpirun`). Ranks started with different options all end at once with one
//! sentence naming the option. `mpirun -np S*D systole train --stages S --shards D` (a
//! pipeline of S stages, D replicas) ends with one process's checkpoint too.
#![cfg(feature = "mpi")]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", bin])
        .args(ARGS)
        .arg("--out")
        .arg(two.path())
        .output()
        .unwrap();
    // Rank 0's counts are not the job's: the summary says whose they are.
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains("counts below are rank 0's of 2"),
        "no note on whose counts: {said}"
    );
    ok(out);
    let (a, b) = (checkpoint(one.path()), checkpoint(two.path()));
    for k in ["params", "velocity", "fracs", "step", "epoch", "config"] {
        assert_eq!(a[k], b[k], "{k} differs");
    }
    assert!(a["params"].as_array().is_some_and(|p| p.len() == 4));
}

/// Every rank starts from an ONNX file's weights (a float MLP written by onnx's helper): the
/// checkpoint equals one process's from the same file, and differs from `--init random`'s.
#[test]
fn two_mpi_ranks_start_from_an_onnx_files_weights() {
    let Some(py) = common::python::onnx_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("mlp.onnx").to_str().unwrap().to_string();
    common::python::run(&py, "mlp.py", &[&model, "16"]);
    let bin = env!("CARGO_BIN_EXE_systole");
    let args = [ARGS, &["--model", &model]].concat();
    let run = |out: &str, extra: &[&str]| {
        ok(Command::new(bin)
            .args(&args)
            .args(extra)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap())
    };
    run("one", &[]);
    run("random", &["--init", "random"]);
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", bin])
        .args(&args)
        .arg("--out")
        .arg(dir.path().join("two"))
        .output()
        .unwrap();
    ok(out);
    let [one, two, random] = ["one", "two", "random"].map(|d| checkpoint(&dir.path().join(d)));
    for k in ["params", "velocity", "fracs", "step", "epoch", "config"] {
        assert_eq!(one[k], two[k], "{k} differs");
    }
    assert_ne!(one["params"], random["params"]);
}

/// A 3-layer MLP in 2 micro-batches per shard: the pipeline's runs (`--shards` appended).
const PIPE: &[&str] = &[
    "train",
    "--device",
    "golden",
    "--array",
    "4",
    "--hidden",
    "16,12",
    "--limit",
    "90",
    "--epochs",
    "2",
    "--seed",
    "3",
    "--microbatches",
    "2",
];

/// `mpirun -np S*D systole train --stages S --shards D` ends with the checkpoint of one process
/// with the same --shards and --microbatches.
fn pipeline_matches_one_process(stages: &str, shards: &str, ranks: &str) {
    let bin = env!("CARGO_BIN_EXE_systole");
    let one = tempfile::tempdir().unwrap();
    let many = tempfile::tempdir().unwrap();
    ok(Command::new(bin)
        .args(PIPE)
        .args(["--shards", shards, "--out"])
        .arg(one.path())
        .output()
        .unwrap());
    ok(Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", ranks, bin])
        .args(PIPE)
        .args(["--shards", shards, "--stages", stages, "--out"])
        .arg(many.path())
        .output()
        .unwrap());
    let (a, b) = (checkpoint(one.path()), checkpoint(many.path()));
    for k in ["params", "velocity", "fracs", "step", "epoch", "config"] {
        assert_eq!(a[k], b[k], "{k} differs");
    }
    assert!(a["params"].as_array().is_some_and(|p| p.len() == 6));
}

#[test]
fn two_pipeline_stages_match_one_process_bit_for_bit() {
    pipeline_matches_one_process("2", "1", "2");
}

/// 2 stages x 2 replicas, oversubscribed (4 ranks on 2 cores; about half a second).
#[test]
fn two_stages_of_two_replicas_match_one_process_bit_for_bit() {
    pipeline_matches_one_process("2", "2", "4");
}

/// A network whose every cut two tensors cross (two branches meeting at an Add), as a network
/// file, in 3 stages of one rank each: the checkpoint equals one process's. In the middle
/// stage one tensor only passes through, forward and back.
#[test]
fn cuts_that_residual_connections_cross_match_one_process_bit_for_bit() {
    use systole_train::model::{builtin, graph_json, Shape};
    let bin = env!("CARGO_BIN_EXE_systole");
    let (one, many, files) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let g = builtin::every_kind(Shape { c: 1, h: 8, w: 8 }, 10).unwrap();
    let net = files.path().join("branches.json");
    std::fs::write(&net, graph_json(&g)).unwrap();
    let args = |out: &Path| {
        let mut a: Vec<String> = PIPE.iter().map(|s| s.to_string()).collect();
        a.extend(["--model".into(), net.display().to_string()]);
        // As in the other pipeline tests: both runs name their shards, so the configs agree.
        a.extend(["--shards".into(), "1".into()]);
        a.extend(["--out".into(), out.display().to_string()]);
        a
    };
    ok(Command::new(bin).args(args(one.path())).output().unwrap());
    ok(Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "3", bin])
        .args(args(many.path()))
        .args(["--stages", "3", "--cut", "1,2"])
        .output()
        .unwrap());
    let (a, b) = (checkpoint(one.path()), checkpoint(many.path()));
    for k in ["params", "velocity", "fracs", "step", "epoch", "config"] {
        assert_eq!(a[k], b[k], "{k} differs");
    }
    assert!(a["params"].as_array().is_some_and(|p| p.len() == 5));
}

/// A small run; the option under test is appended per rank.
const SMALL: &[&str] = &[
    "train", "--device", "golden", "--array", "4", "--limit", "64", "--epochs", "1",
];

/// Far above what a mismatch needs (MPI start-up, loading the digits): only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

/// Runs two ranks (`mpirun` MPMD syntax) that differ only in `option`, and returns the exit
/// status and the combined output, or panics if the job did not end within [`HANG`].
fn mismatched(option: &str, rank0: &str, rank1: &str) -> (std::process::ExitStatus, String) {
    let bin = env!("CARGO_BIN_EXE_systole");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe"]);
    for (i, value) in [rank0, rank1].into_iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        cmd.args(["-np", "1", bin])
            .args(SMALL)
            .args([option, value]);
    }
    let mut child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + HANG;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            // SIGTERM lets mpirun take its ranks down with it.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ranks with different {option} still ran after {HANG:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, std::fs::read_to_string(&log).unwrap())
}

/// Ranks differing in `option` end non-zero, and rank 0's one sentence names it and both values.
fn refused(option: &str, rank0: &str, rank1: &str) {
    let (status, log) = mismatched(option, rank0, rank1);
    assert!(
        !status.success(),
        "different {option} ended with {status}:\n{log}"
    );
    let want = format!("disagree on {option}: rank 0 has {rank0} but rank 1 has {rank1}");
    assert!(log.contains(&want), "no '{want}' in:\n{log}");
    assert_eq!(log.matches("disagree on").count(), 1, "{log}");
}

#[test]
fn ranks_with_different_hidden_widths_stop_at_once() {
    refused("--hidden", "32", "16");
}

#[test]
fn ranks_with_different_seeds_stop_at_once() {
    refused("--seed", "1", "2");
}

#[test]
fn ranks_with_different_rounding_stop_at_once() {
    refused("--rounding", "stochastic", "nearest");
}

/// Only rank 0 writes the reports: ranks given different folders are refused, not rank 1's
/// folder silently ignored.
#[test]
fn ranks_with_different_out_folders_stop_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    refused("--out", a.to_str().unwrap(), b.to_str().unwrap());
}
