//! Per op, a small ONNX model written by onnx.helper (host/tests/onnx/ops.py), run by
//! onnxruntime in f32 and by systole in 16-bit fixed point on the golden model and on the
//! Verilated array: the Verilated logits equal the golden ones word for word, and every systole
//! logit is within the contract's rounding of onnxruntime's float logit.
//!
//! The bound, propagated layer by layer as a largest error per tensor (an infinity norm) `e`:
//! the input words are off by at most half their unit (`2^-(f+1)`); a product `x·W` (Dense,
//! Conv) by `max_o Σ_k |Wq| · e_x + max|x| · max_o Σ_k |Wq - W|` (the quantized weights `Wq`),
//! plus half a unit of the product's format and, with a bias, `max|bq - b|` and half a unit of
//! the bias add's format; ReLU and max pooling keep `e`; an average and a residual add add half
//! a unit of their format to the mean or the sum of their inputs' `e`. Plus f32 slack for
//! onnxruntime itself: `1e-5·(1 + |logit|)`.

mod common;

use common::python;
use systole_onnx::infer::{self, Formats, Weights};
use systole_onnx::{Net, Op, Src};

fn half(f: u32) -> f64 {
    0.5 / (1u64 << f) as f64
}

fn float_weights(op: &Op) -> Option<(&[f32], Option<&[f32]>)> {
    match op {
        Op::Dense { w, b, .. } | Op::Conv { w, b, .. } => Some((w, b.as_deref())),
        _ => None,
    }
}

/// Largest error of each layer's output (see the file's docs); `act_max` is each layer's
/// largest magnitude from the float pass on the quantized weights.
fn bounds(
    net: &Net,
    ws: &[Option<Weights>],
    fm: &Formats,
    act_max: &[f64],
    in_max: f64,
) -> Vec<f64> {
    let mut e: Vec<f64> = Vec::new();
    for (i, n) in net.nodes.iter().enumerate() {
        let src = |s: Src, e: &[f64]| match s {
            Src::Input => (half(fm.input), in_max),
            Src::Node(j) => (e[j], act_max[j] + e[j]),
        };
        let (ex, xmax) = src(n.inputs[0], &e);
        let pts = &fm.nodes[i];
        let b = match (&n.op, float_weights(&n.op), &ws[i]) {
            (op, Some((w, bias)), Some(q)) => {
                let wq: Vec<f64> =
                    q.w.data
                        .iter()
                        .map(|&v| v as f64 / (1u64 << q.w.frac) as f64)
                        .collect();
                let (rows, cols) = (q.w.rows, q.w.cols);
                // Dense W is inp x out (sum down a column), Conv W is out x taps (along a row).
                let sums = |f: &dyn Fn(usize) -> f64| -> f64 {
                    let outs = if matches!(op, Op::Dense { .. }) {
                        cols
                    } else {
                        rows
                    };
                    (0..outs)
                        .map(|o| {
                            let idx: Vec<usize> = if matches!(op, Op::Dense { .. }) {
                                (0..rows).map(|k| k * cols + o).collect()
                            } else {
                                (0..cols).map(|k| o * cols + k).collect()
                            };
                            idx.into_iter().map(f).sum::<f64>()
                        })
                        .fold(0.0, f64::max)
                };
                let mut b = sums(&|j| wq[j].abs()) * ex
                    + xmax * sums(&|j| (wq[j] - w[j] as f64).abs())
                    + half(pts[0]);
                if let (Some(bias), Some(bq)) = (bias, &q.b) {
                    let d = bias
                        .iter()
                        .zip(&bq.data)
                        .map(|(&f, &v)| (f as f64 - v as f64 / (1u64 << bq.frac) as f64).abs());
                    b += d.fold(0.0, f64::max) + half(pts[1]);
                }
                b
            }
            (Op::Relu | Op::MaxPool { .. }, _, _) => ex,
            (Op::AvgPool { .. } | Op::GlobalAvgPool, _, _) => ex + half(pts[0]),
            (Op::Add, _, _) => ex + src(n.inputs[1], &e).0 + half(pts[0]),
            _ => unreachable!(),
        };
        e.push(b);
    }
    e
}

struct Case {
    net: Net,
    x: Vec<f32>,
    rows: usize,
    ort: Vec<f32>,
}

fn load(dir: &std::path::Path, name: &str) -> Case {
    let net = systole_onnx::import_file(&dir.join(format!("{name}.onnx"))).unwrap();
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let floats = |k: &str| {
        j[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect::<Vec<_>>()
    };
    Case {
        net,
        x: floats("input"),
        rows: j["rows"].as_u64().unwrap() as usize,
        ort: floats("logits"),
    }
}

const MODELS: [&str; 10] = [
    "conv_stride_pad",
    "conv_same_add",
    "gemm",
    "matmul_add",
    "maxpool",
    "avgpool",
    "global_avgpool",
    "residual_add",
    "batchnorm",
    "softmax_head",
];

#[test]
fn each_op_matches_onnxruntime_within_the_contracts_rounding_and_verilator_equals_golden() {
    let Some(py) = python::onnx_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    python::run(&py, "ops.py", &[dir.path().to_str().unwrap()]);
    let mut verilator = systole::onnx::products("verilator", 4, false).ok();
    if verilator.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("the Verilated array is not built");
        }
        eprintln!("SKIPPED (Verilated array not built): golden only");
    }
    for name in MODELS {
        let c = load(dir.path(), name);
        let ws = infer::weights(&c.net);
        let lo = c.x.iter().cloned().fold(f32::MAX, f32::min);
        let hi = c.x.iter().cloned().fold(f32::MIN, f32::max);
        let fm = systole_onnx::calibrate::calibrate(&c.net, &ws, &c.x, c.rows, (lo, hi));
        infer::check_formats(&c.net, &ws, &fm).unwrap();
        let mut golden = systole::onnx::products("golden", 4, false).unwrap();
        let xq = infer::input_words(&c.x, c.rows, fm.input, fm.word_bits);
        let z = infer::forward(&mut golden, &c.net, &ws, &fm, xq.clone()).unwrap();
        if let Some(v) = verilator.as_mut() {
            let zv = infer::forward(v, &c.net, &ws, &fm, xq).unwrap();
            assert_eq!(zv, z, "{name}: Verilated array vs golden model");
        }
        let per = c.x.len() / c.rows;
        let mut worst: f64 = 0.0;
        for (r, img) in c.x.chunks_exact(per).enumerate() {
            let xf: Vec<f64> = img.iter().map(|&v| v as f64).collect();
            let acts = systole_onnx::calibrate::float_forward(&c.net, &ws, &xf);
            let act_max: Vec<f64> = acts
                .iter()
                .map(|(a, _)| a.iter().fold(0.0f64, |m, v| m.max(v.abs())))
                .collect();
            let in_max = xf.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let e = *bounds(&c.net, &ws, &fm, &act_max, in_max).last().unwrap();
            for j in 0..z.cols {
                let sys = z.data[r * z.cols + j] as f64 / (1u64 << z.frac) as f64;
                let ort = c.ort[r * z.cols + j] as f64;
                let d = (sys - ort).abs();
                assert!(d <= e + 1e-5 * (1.0 + ort.abs()), "{name}: image {r} logit {j}: systole {sys} onnxruntime {ort}, |d| {d} > bound {e}");
                worst = worst.max(d / e);
            }
        }
        eprintln!(
            "{name}: largest |systole - onnxruntime| is {:.3} of the bound",
            worst
        );
    }
}
