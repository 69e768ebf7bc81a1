//! Every command that trains takes `--model FILE.onnx` and starts from the file's weights:
//! `train`, `compare`, `explore` and training on a board that trains itself (MPI: mpi_train.rs).
//! Each run from the file equals `systole train` from the same file, and differs from
//! `--init random`; a board that cannot hold the file's network refuses it by name.

mod cli_common;
mod common;

use cli_common::{fails_with, stderr, systole};
use common::python;
use std::path::{Path, PathBuf};
use systole_core::ArrayConfig;
use systole_device::board_sim::SimBoard;
use systole_train::arith::TensorState;
use systole_train::checkpoint::Checkpoint;

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A float MLP 64-HIDDEN-10 for digits written by onnx's helper (`None`: no onnx, skipped).
fn mlp(dir: &Path, name: &str, hidden: &str) -> Option<String> {
    let py = python::onnx_python()?;
    let path = dir.join(name).to_str().unwrap().to_string();
    python::run(&py, "mlp.py", &[&path, hidden]);
    Some(path)
}

/// The small recipe every run here shares.
const RECIPE: &[&str] = &["--epochs", "1", "--limit", "200", "--seed", "1"];

/// The file's weights, as the import reads them, in the graph's order.
fn file_weights(path: &str) -> Vec<Vec<f32>> {
    let net = systole_onnx::import_file(Path::new(path)).unwrap();
    let (_, params) = systole_onnx::graph::to_graph(&net).unwrap();
    params.into_iter().map(|(_, _, v)| v).collect()
}

fn checkpoint_weights(dir: &Path) -> Vec<Vec<f32>> {
    let ck = Checkpoint::load(&dir.join("checkpoint.json")).unwrap();
    ck.params
        .iter()
        .map(|t| match t {
            TensorState::Fixed { frac, data, .. } => data
                .iter()
                .map(|&v| v as f32 / (1u64 << frac) as f32)
                .collect(),
            TensorState::Float { data, .. } => data.clone(),
        })
        .collect()
}

/// The largest difference between two parameter lists of the same shapes.
fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f32::max)
}

/// history.csv without its seconds column.
fn history(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("history.csv"))
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string())
        .collect()
}

fn train(model: &str, out: &Path, extra: &[&str]) -> String {
    let args = [
        &["train", "--model", model, "--out", out.to_str().unwrap()][..],
        RECIPE,
        extra,
    ]
    .concat();
    ok(&systole(&args))
}

/// A tiny learning rate keeps the weights near where they started: the file's, not the seed's.
#[test]
fn train_starts_from_the_files_weights() {
    let dir = tempfile::tempdir().unwrap();
    let Some(model) = mlp(dir.path(), "mlp.onnx", "16") else {
        return;
    };
    let slow = ["--lr", "0.0001", "--rounding", "nearest"];
    let said = train(&model, &dir.path().join("file"), &slow);
    assert!(said.contains("starting from the weights of"), "{said}");
    train(
        &model,
        &dir.path().join("random"),
        &[&slow[..], &["--init", "random"]].concat(),
    );
    let w = file_weights(&model);
    let from_file = max_diff(&checkpoint_weights(&dir.path().join("file")), &w);
    let from_seed = max_diff(&checkpoint_weights(&dir.path().join("random")), &w);
    assert!(from_file < 0.01, "{from_file}");
    assert!(from_seed > 0.1, "{from_seed}");
}

#[test]
fn compare_starts_every_run_from_the_files_weights() {
    let dir = tempfile::tempdir().unwrap();
    let Some(model) = mlp(dir.path(), "mlp.onnx", "16") else {
        return;
    };
    let p = |s: &str| dir.path().join(s);
    let compare = |out: &str, extra: &[&str]| {
        let out = p(out);
        let args = [
            &[
                "compare",
                "--model",
                &model,
                "--formats",
                "fixed16-nearest,f32",
                "--seeds",
                "1",
                "--epochs",
                "1",
                "--limit",
                "200",
                "--out",
                out.to_str().unwrap(),
            ][..],
            extra,
        ]
        .concat();
        ok(&systole(&args))
    };
    let said = compare("c", &[]);
    assert!(said.contains("starting from the weights of"), "{said}");
    compare("c-random", &["--init", "random"]);
    train(&model, &p("fixed"), &["--rounding", "nearest"]);
    train(&model, &p("f32"), &["--precision", "f32"]);
    assert_eq!(history(&p("c/fixed16-nearest-seed1")), history(&p("fixed")));
    assert_eq!(history(&p("c/f32-seed1")), history(&p("f32")));
    assert_ne!(
        history(&p("c/fixed16-nearest-seed1")),
        history(&p("c-random/fixed16-nearest-seed1"))
    );
}

#[test]
fn explore_trains_every_point_from_the_files_weights() {
    let dir = tempfile::tempdir().unwrap();
    let Some(model) = mlp(dir.path(), "mlp.onnx", "16") else {
        return;
    };
    let p = |s: &str| dir.path().join(s);
    let explore = |out: &str, extra: &[&str]| {
        let dir = p(out);
        let args = [
            &[
                "explore",
                "--model",
                &model,
                "--array",
                "4",
                "--seeds",
                "1",
                "--epochs",
                "1",
                "--limit",
                "200",
                "--sample-steps",
                "1",
                "--resources",
                "estimate",
                "--board",
                "arty-a7-35",
                "--jobs",
                "1",
                "--out",
                dir.to_str().unwrap(),
            ][..],
            extra,
        ]
        .concat();
        ok(&systole(&args));
        let j: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("explore.json")).unwrap()).unwrap();
        (
            j["points"][0]["acc_mean"].as_f64().unwrap(),
            j["settings"]["model"].as_str().unwrap().to_string(),
        )
    };
    let (acc, settings) = explore("e", &[]);
    assert!(settings.ends_with(", from its weights"), "{settings}");
    let (_, settings) = explore("e-random", &["--init", "random"]);
    assert!(!settings.contains("from its weights"), "{settings}");
    // The point as `train` runs it: the golden model, stochastic rounding, seed 1.
    train(&model, &p("t"), &["--array", "4"]);
    let ck = Checkpoint::load(&p("t").join("checkpoint.json")).unwrap();
    let trained = f64::from(ck.history.last().unwrap().test_acc);
    assert!(
        (acc - trained).abs() < 1e-4,
        "explore {acc}, train {trained}"
    );
    train(
        &model,
        &p("t-random"),
        &["--array", "4", "--init", "random"],
    );
    let ck = Checkpoint::load(&p("t-random").join("checkpoint.json")).unwrap();
    assert_ne!(ck.history.last().unwrap().test_acc, trained as f32);
}

/// A training board on a pty (the firmware's training session over the Verilated 4x4 array)
/// with `heap` bytes; `None` without the Verilated models.
fn training_board(heap: u32) -> Option<SimBoard> {
    let config = ArrayConfig::square(4);
    let sim = match systole_sim::VerilatedArray::new(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return None;
        }
    };
    Some(SimBoard::spawn_training(config, move || sim, heap).unwrap())
}

#[test]
fn a_board_that_trains_itself_starts_from_the_files_weights() {
    let dir = tempfile::tempdir().unwrap();
    let Some(model) = mlp(dir.path(), "mlp.onnx", "16") else {
        return;
    };
    let Some(board) = training_board(1 << 20) else {
        return;
    };
    let device = format!("serial:{}", board.path().display());
    let p = |s: &str| dir.path().join(s);
    let said = train(&model, &p("board"), &["--array", "4", "--device", &device]);
    board.close().unwrap();
    assert!(
        said.contains("the whole training step runs on the board")
            && said.contains("starting from the weights of"),
        "{said}"
    );
    train(&model, &p("host"), &["--array", "4"]);
    let (b, h): (PathBuf, PathBuf) = (p("board"), p("host"));
    assert_eq!(history(&b), history(&h));
    assert_eq!(
        Checkpoint::load(&b.join("checkpoint.json")).unwrap().params,
        Checkpoint::load(&h.join("checkpoint.json")).unwrap().params
    );

    // A network whose state does not fit the board's heap is refused, named, nothing trained.
    let Some(big) = mlp(dir.path(), "wide.onnx", "96,96") else {
        return;
    };
    let Some(board) = training_board(40_000) else {
        return;
    };
    let device = format!("serial:{}", board.path().display());
    let out = p("refused");
    let o = systole(
        &[
            &[
                "train",
                "--model",
                &big,
                "--array",
                "4",
                "--device",
                &device,
                "--out",
                out.to_str().unwrap(),
            ][..],
            RECIPE,
        ]
        .concat(),
    );
    board.close().unwrap();
    fails_with(&o, &["wide.onnx", "of the board's heap", "--host-step"]);
    assert!(!out.join("checkpoint.json").exists());
}
