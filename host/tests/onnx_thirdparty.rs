//! A real third-party CNN: the ONNX model zoo's MNIST network (MIT), as PyPI's qonnx ships it,
//! on Fashion-MNIST. Imported (its SAME convolutions, constant Adds folded into biases, the
//! weights' Reshape of a constant), evaluated on the array's arithmetic, exported with its
//! formats; onnxruntime on the export agrees with `systole eval` on at least 98% of 1,000 test
//! images and within half a point of accuracy.

mod cli_common;
mod common;

use cli_common::{stderr, systole};
use common::python;
use std::process::Command;

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn skip_or_fail(msg: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
}

fn predicted(csv: &str) -> Vec<(usize, usize)> {
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn the_model_zoo_mnist_cnn_on_fashion_mnist_agrees_with_onnxruntime() {
    let Some(py) = python::onnx_python() else {
        return;
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onnx/locate.py");
    let loc = Command::new(&py).arg(&script).output().unwrap();
    if !loc.status.success() {
        return skip_or_fail("qonnx (which ships the model) is not in .venv: run ./x test once");
    }
    let model = String::from_utf8_lossy(&loc.stdout).trim().to_string();
    let Ok(ds) = systole_train::data::load("fashion-mnist") else {
        return skip_or_fail(
            "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    let common = ["--dataset", "fashion-mnist", "--input-scale", "255"];
    let out = ok(&systole(
        &[
            &[
                "eval",
                "--model",
                &model,
                "--limit",
                "1000",
                "--out",
                &p("e0"),
            ][..],
            &common,
        ]
        .concat(),
    ));
    assert!(
        out.contains("folded into the bias") && out.contains("conv 5x5 8 stride 1 pad 2"),
        "{out}"
    );
    ok(&systole(
        &[&["export", &model, "--out", &p("zoo.onnx")][..], &common].concat(),
    ));
    ok(&systole(
        &[
            &[
                "eval",
                "--model",
                &p("zoo.onnx"),
                "--limit",
                "1000",
                "--out",
                &p("e1"),
            ][..],
            &common,
        ]
        .concat(),
    ));
    let a = std::fs::read_to_string(p("e0/predictions.csv")).unwrap();
    assert_eq!(
        a,
        std::fs::read_to_string(p("e1/predictions.csv")).unwrap(),
        "the export's logits differ"
    );

    // onnxruntime on the export, on the same 1,000 images as systole took them.
    let n = 1000.min(ds.test.len());
    let x: Vec<u8> = ds.test.images[..n * ds.features()]
        .iter()
        .flat_map(|v| (v * 255.0).to_le_bytes())
        .collect();
    std::fs::write(p("x.f32"), x).unwrap();
    python::run(
        &py,
        "predict.py",
        &[&p("zoo.onnx"), &p("x.f32"), &n.to_string(), &p("ort.json")],
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
    assert_eq!((sys.len(), ort.len()), (n, n));
    let same = sys.iter().zip(&ort).filter(|((_, s), o)| s == *o).count();
    let acc = |pred: &mut dyn Iterator<Item = (usize, usize)>| {
        pred.filter(|(l, p)| l == p).count() as f64 * 100.0 / n as f64
    };
    let (acc_sys, acc_ort) = (
        acc(&mut sys.iter().copied()),
        acc(&mut sys.iter().zip(&ort).map(|((l, _), o)| (*l, *o))),
    );
    eprintln!("agreement {same}/{n}; accuracy systole {acc_sys:.1}% onnxruntime {acc_ort:.1}%");
    assert!(same * 100 >= 98 * n, "only {same} of {n} agree");
    assert!((acc_sys - acc_ort).abs() <= 0.5, "{acc_sys} vs {acc_ort}");
}
