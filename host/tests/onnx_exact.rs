//! The export's exact words. Where the float values before each QuantizeLinear are exact,
//! docs/ONNX.md says onnxruntime rounds exactly as the array does: its logits equal `systole
//! eval`'s bit for bit, on every image. Two networks where every float sum onnxruntime forms is
//! exact in f32: one host/tests/onnx/exact.py writes (weights multiples of 1/8, biases of 1/16,
//! short dot products, on the digits' pixels / 16), exported with formats calibrated by
//! systole; and a CNN trained at 8-bit words (products of at most 2^14 units, dot products far
//! shorter than 1024), exported with its W-bit range. At 9 to 15 bits the same CNN round-trips
//! at its width, onnxruntime exact where docs/ONNX.md's bound holds and agreeing past it.

mod cli_common;
mod common;

use cli_common::{stderr, systole};
use common::python;
use systole_onnx::{Op, Src};

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The logits of `predictions.csv`, row by row.
fn logits(csv: &str) -> Vec<Vec<f32>> {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').skip(3).map(|v| v.parse().unwrap()).collect())
        .collect()
}

/// onnxruntime's logits of the digits' test images through `model`.
fn ort_logits(py: &std::path::Path, dir: &std::path::Path, model: &str) -> Vec<Vec<f32>> {
    let d = systole_train::data::load("digits").unwrap();
    let x: Vec<u8> = d.test.images.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (xs, js) = (dir.join("x.f32"), dir.join("ort.json"));
    std::fs::write(&xs, x).unwrap();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    python::run(
        py,
        "predict.py",
        &[model, &s(&xs), &d.test.len().to_string(), &s(&js)],
    );
    let ort: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(js).unwrap()).unwrap();
    ort["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let r = r.as_array().unwrap();
            r.iter().map(|v| v.as_f64().unwrap() as f32).collect()
        })
        .collect()
}

/// Every image's logits, bit for bit.
fn same_bits(sys: &[Vec<f32>], ort: &[Vec<f32>]) {
    assert_eq!(sys.len(), ort.len());
    for (i, (s, o)) in sys.iter().zip(ort).enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(s),
            bits(o),
            "image {i}: systole {s:?}, onnxruntime {o:?}"
        );
    }
    eprintln!(
        "{} images: onnxruntime's logits equal systole eval's bit for bit",
        sys.len()
    );
}

/// A CNN trained at `w`-bit words, evaluated, exported with its W-bit range and imported again:
/// the import reads W back, the export's logits equal the run's, every logit is a W-bit word,
/// and onnxruntime gives the same logits bit for bit.
fn a_run_at_width_round_trips_bit_for_bit(w: u32) {
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    let file = p(&format!("w{w}.onnx"));
    ok(&systole(&[
        "train",
        "--model",
        "cnn",
        "--channels",
        "4,8",
        "--word-bits",
        &w.to_string(),
        "--epochs",
        "1",
        "--limit",
        "300",
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
        &p("e"),
    ]));
    ok(&systole(&["export", &p("run"), "--out", &file]));
    let out = ok(&systole(&[
        "eval",
        "--model",
        &file,
        "--dataset",
        "digits",
        "--out",
        &p("e2"),
    ]));
    assert!(
        out.contains("the model's QuantizeLinear/DequantizeLinear pairs"),
        "{out}"
    );
    let csv = std::fs::read_to_string(p("e/predictions.csv")).unwrap();
    assert_eq!(
        csv,
        std::fs::read_to_string(p("e2/predictions.csv")).unwrap(),
        "W = {w}: the export's logits differ from the run's"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("e/eval.json")).unwrap()).unwrap();
    assert_eq!(j["formats"]["word_bits"], w, "{j}");
    // A trained network, not a constant one: its predictions vary over the images.
    let classes: std::collections::BTreeSet<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    assert!(classes.len() >= 3, "{j}");
    // Every word is a W-bit one: the logits are multiples of their unit, within W bits of it.
    let net = systole_onnx::import_file(std::path::Path::new(&file)).unwrap();
    assert_eq!(net.word_bits, w);
    let fm = net.formats().unwrap().unwrap();
    let unit = 1.0 / (1u64 << *fm.nodes.last().unwrap().last().unwrap()) as f64;
    let half = (1u64 << (w - 1)) as f64;
    for z in logits(&csv).iter().flatten() {
        let words = *z as f64 / unit;
        assert!(
            words.fract() == 0.0 && (-half..=half - 1.0).contains(&words),
            "W = {w}: {z}"
        );
    }
    let Some(py) = python::onnx_python() else {
        return;
    };
    let ort = ort_logits(&py, dir.path(), &file);
    // docs/ONNX.md: f32 forms every sum exactly while K · 2^(2W-2) < 2^24 for the longest dot
    // product K; past that bound a logit may differ by a unit where a sum lies that close to a
    // rounding boundary, and the predictions must still agree.
    if LONGEST_DOT << (2 * w - 2) < 1 << 24 {
        same_bits(&logits(&csv), &ort);
    } else {
        let sys = logits(&csv);
        let exact = sys.iter().zip(&ort).filter(|(s, o)| s == o).count();
        let argmax = |z: &[f32]| (0..z.len()).fold(0, |b, j| if z[j] > z[b] { j } else { b });
        let same = sys
            .iter()
            .zip(&ort)
            .filter(|(s, o)| argmax(s) == argmax(o))
            .count();
        eprintln!("W = {w}: onnxruntime's logits equal systole's bit for bit on {exact} of {} images, predictions on {same}", sys.len());
        assert!(
            same * 100 >= 98 * sys.len(),
            "W = {w}: {same} of {}",
            sys.len()
        );
    }
}

/// The longest dot product of the CNN `cnn --channels 4,8` on 8x8 digits: the second
/// convolution's 4 channels x 3x3 taps (the dense layer's 8 channels x 2x2 are 32).
const LONGEST_DOT: u64 = 36;

#[test]
fn a_run_at_8_bit_words_exports_its_range_and_onnxruntime_gives_its_logits_bit_for_bit() {
    a_run_at_width_round_trips_bit_for_bit(8);
}

/// Widths between 8 and 16: the Clip's range is read back at each.
#[test]
fn runs_at_9_12_and_15_bit_words_round_trip_and_onnxruntime_agrees_bit_for_bit() {
    for w in [9, 12, 15] {
        a_run_at_width_round_trips_bit_for_bit(w);
    }
}

#[test]
fn onnxruntime_on_an_exact_export_gives_systoles_logits_bit_for_bit() {
    let Some(py) = python::onnx_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    python::run(&py, "exact.py", &[dir.path().to_str().unwrap()]);
    ok(&systole(&[
        "export",
        &p("exact.onnx"),
        "--dataset",
        "digits",
        "--out",
        &p("q.onnx"),
    ]));
    ok(&systole(&[
        "eval",
        "--model",
        &p("q.onnx"),
        "--dataset",
        "digits",
        "--out",
        &p("e"),
    ]));

    // The residual add's two words sum exactly in f32 when their formats are within 7 bits
    // (16 + 7 + a carry fit in 24): the premise of this test, checked on the export.
    let net = systole_onnx::import_file(std::path::Path::new(&p("q.onnx"))).unwrap();
    let fm = net.formats().unwrap().unwrap();
    let outs = systole_onnx::infer::out_fracs(&net, &fm);
    let frac = |s: Src| match s {
        Src::Input => fm.input,
        Src::Node(j) => outs[j],
    };
    let adds = net.nodes.iter().filter(|n| matches!(n.op, Op::Add));
    for n in adds {
        let (a, b) = (frac(n.inputs[0]), frac(n.inputs[1]));
        assert!(a.abs_diff(b) <= 7, "{}: formats {a} and {b}", n.name);
    }

    let sys = logits(&std::fs::read_to_string(p("e/predictions.csv")).unwrap());
    same_bits(&sys, &ort_logits(&py, dir.path(), &p("q.onnx")));
}
