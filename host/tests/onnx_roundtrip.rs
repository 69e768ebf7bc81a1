//! A built-in network trained, exported and imported again: `systole eval` of the run and of
//! its export give the same logits word for word; onnxruntime on the export predicts what
//! `systole eval` does.

mod cli_common;
mod common;

use cli_common::{fails_with, stderr, systole};
use common::python;
use std::path::Path;
use systole_core::ArrayConfig;
use systole_device::board_sim::SimBoard;

/// `predictions.csv`'s predicted classes.
fn predicted(csv: &str) -> Vec<usize> {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect()
}

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The first `n` test images of `ds` as the network takes them, for onnxruntime.
fn write_images(ds: &str, n: usize, path: &Path) -> usize {
    let d = systole_train::data::load(ds).unwrap();
    let n = n.min(d.test.len());
    let bytes: Vec<u8> = d.test.images[..n * d.features()]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(path, bytes).unwrap();
    n
}

#[test]
fn a_trained_cnn_exported_and_imported_predicts_the_same_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    ok(&systole(&[
        "train",
        "--model",
        "cnn",
        "--channels",
        "4,8",
        "--epochs",
        "1",
        "--limit",
        "400",
        "--out",
        &p("run"),
    ]));
    ok(&systole(&[
        "eval",
        "--model",
        &p("run"),
        "--dataset",
        "digits",
        "--out",
        &p("eval-run"),
    ]));
    // On a board over its serial link (the simulated one: the firmware's frame server over a
    // Verilated 4x4 array): the same words as on the golden model.
    let board = SimBoard::spawn_verilated(ArrayConfig::square(4)).unwrap();
    let device = format!("serial:{}", board.path().display());
    let out = ok(&systole(&[
        "eval",
        "--model",
        &p("run"),
        "--dataset",
        "digits",
        "--device",
        &device,
        "--array",
        "4",
        "--limit",
        "40",
        "--out",
        &p("eval-serial"),
    ]));
    assert!(out.contains("40 test images of digits"), "{out}");
    board.close().unwrap();
    let golden = std::fs::read_to_string(p("eval-run/predictions.csv")).unwrap();
    let serial = std::fs::read_to_string(p("eval-serial/predictions.csv")).unwrap();
    assert_eq!(
        serial.lines().collect::<Vec<_>>(),
        golden.lines().take(41).collect::<Vec<_>>()
    );

    let out = ok(&systole(&["export", &p("run"), "--out", &p("cnn.onnx")]));
    assert!(out.contains("opset 21"), "{out}");
    let out = ok(&systole(&[
        "eval",
        "--model",
        &p("cnn.onnx"),
        "--dataset",
        "digits",
        "--out",
        &p("eval-onnx"),
    ]));
    assert!(
        out.contains("formats: the model's QuantizeLinear/DequantizeLinear pairs"),
        "{out}"
    );
    assert!(
        out.contains("conv 3x3 4 stride 1 pad 1") && out.contains("maxpool 2x2"),
        "{out}"
    );
    let a = std::fs::read_to_string(p("eval-run/predictions.csv")).unwrap();
    let b = std::fs::read_to_string(p("eval-onnx/predictions.csv")).unwrap();
    assert!(a.starts_with("index,label,predicted,logit_0,") && a.lines().count() > 300);
    assert_eq!(a, b, "the export's logits differ from the run's");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("eval-run/eval.json")).unwrap()).unwrap();
    // Well above chance (10%): the exported network is a trained one.
    assert!(j["accuracy"].as_f64().unwrap() > 25.0, "{j}");
    // Nothing is replaced unasked.
    fails_with(
        &systole(&["export", &p("run"), "--out", &p("cnn.onnx")]),
        &["exists"],
    );
    fails_with(
        &systole(&[
            "eval",
            "--model",
            &p("run"),
            "--dataset",
            "digits",
            "--out",
            &p("eval-run"),
        ]),
        &["exists"],
    );

    let Some(py) = python::onnx_python() else {
        return;
    };
    let n = write_images("digits", usize::MAX, &dir.path().join("x.f32"));
    python::run(
        &py,
        "predict.py",
        &[&p("cnn.onnx"), &p("x.f32"), &n.to_string(), &p("ort.json")],
    );
    let ort: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("ort.json")).unwrap()).unwrap();
    let ort: Vec<usize> = ort["predicted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let sys = predicted(&a);
    let same = sys.iter().zip(&ort).filter(|(a, b)| a == b).count();
    eprintln!("onnxruntime on the export agrees with systole eval on {same} of {n} images");
    assert_eq!(ort.len(), n);
    assert!(same * 100 >= 98 * n, "only {same} of {n} agree");
}

#[test]
fn bad_models_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    std::fs::write(p("junk.onnx"), b"\x08\x07\x12\xff\xff").unwrap();
    fails_with(
        &systole(&[
            "eval",
            "--model",
            &p("junk.onnx"),
            "--dataset",
            "digits",
            "--out",
            &p("e"),
        ]),
        &["not a readable ONNX model"],
    );
    assert!(!dir.path().join("e").exists());
    fails_with(
        &systole(&[
            "eval",
            "--model",
            &p("missing.onnx"),
            "--dataset",
            "digits",
            "--out",
            &p("e"),
        ]),
        &["missing.onnx does not exist"],
    );
    fails_with(
        &systole(&["export", &p("norun"), "--out", &p("x.onnx")]),
        &["norun does not exist"],
    );
    std::fs::create_dir(p("empty")).unwrap();
    fails_with(
        &systole(&["export", &p("empty"), "--out", &p("x.onnx")]),
        &["checkpoint"],
    );
    assert!(!dir.path().join("x.onnx").exists());
}

/// `systole eval` on a CPU-less board over its byte bridge (the simulated bridge image: UART,
/// bridge and a Verilated 4x4 array): the exported network's logits equal the golden model's
/// bit for bit.
#[test]
fn eval_on_the_bridge_image_equals_golden_bit_for_bit() {
    let board = match SimBoard::spawn_bridge_image() {
        Ok(b) => b,
        Err(e @ systole_device::DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED bridge image: {e}");
            return;
        }
        Err(e) => panic!("simulated bridge image: {e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    ok(&systole(&[
        "train",
        "--hidden",
        "12",
        "--epochs",
        "1",
        "--limit",
        "200",
        "--out",
        &p("run"),
    ]));
    ok(&systole(&["export", &p("run"), "--out", &p("mlp.onnx")]));
    let eval = |device: &str, out: &str| {
        ok(&systole(&[
            "eval",
            "--model",
            &p("mlp.onnx"),
            "--dataset",
            "digits",
            "--device",
            device,
            "--array",
            "4",
            "--limit",
            BRIDGE_IMAGES,
            "--out",
            &p(out),
        ]))
    };
    let bridge = format!("bridge:{}", board.path().display());
    let said = eval(&bridge, "e-bridge");
    board.close().unwrap();
    assert!(
        said.contains(&format!("{BRIDGE_IMAGES} test images of digits")),
        "{said}"
    );
    eval("golden", "e-golden");
    let csv = |d: &str| std::fs::read_to_string(p(d).to_string() + "/predictions.csv").unwrap();
    assert_eq!(csv("e-bridge"), csv("e-golden"));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("e-bridge/eval.json")).unwrap()).unwrap();
    assert!(j["device"].as_str().unwrap().contains("bridge"), "{j}");
}

/// Images `eval` runs over the bridge (its UART is simulated bit by bit).
const BRIDGE_IMAGES: &str = "64";
