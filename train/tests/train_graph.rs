//! Networks as graphs: every layer kind's backward pass against finite differences (f32),
//! LeNet-5 and ResNet-8 trained through the Verilated array with every product checked
//! against the golden model, and a network file that trains as the built-in it describes.

use systole_core::{ArrayConfig, Rounding};
use systole_step::arith::Arith;
use systole_step::step::{loss_and_grads, Batch};
use systole_train::data::{Dataset, Split};
use systole_train::float::{FloatArith, FloatFormat};
use systole_train::model::{builtin, graph_json, ModelName, ModelSpec, Shape};
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig, Trainer};

/// A xorshift stream of floats in [-1, 1).
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// The loss of `params` on `x` with `f32` arithmetic, and its gradients.
fn loss_grads(
    g: &systole_train::model::Graph,
    params: &[(usize, usize, Vec<f32>)],
    x: &[f32],
    labels: &[u8],
) -> (f64, Vec<Vec<f32>>) {
    let mut a = FloatArith::new(FloatFormat::F32);
    let p: Vec<_> = params
        .iter()
        .map(|(r, c, v)| a.import("p", *r, *c, v).unwrap())
        .collect();
    let batch = Batch {
        graph: g,
        images: x,
        labels,
    };
    let (loss, _, grads) = loss_and_grads(&mut a, &batch, &p, labels.len(), 0).unwrap();
    (loss as f64, grads.iter().map(|t| a.to_host(t)).collect())
}

#[test]
fn every_kind_s_backward_pass_matches_finite_differences() {
    // Two branches (max and average pooling) meeting at an Add, a global average pool, a
    // flatten, two dense heads added: every kind, and a fork whose gradients are summed.
    let g = builtin::every_kind(Shape { c: 2, h: 6, w: 6 }, 3).unwrap();
    let checked = check_gradients(&g);
    assert!(checked > 40, "{checked} elements checked");
}

/// Checks sampled elements of every parameter's gradient against central differences;
/// returns how many.
fn check_gradients(g: &systole_train::model::Graph) -> usize {
    let g = g.clone();
    let mut n = Noise(7);
    let mut params = systole_train::model::init_params(&g, 3).unwrap();
    for p in &mut params {
        // Non-zero biases, so their gradients are tested through the kinks too.
        p.2.iter_mut().for_each(|v| *v += 0.1 * n.next());
    }
    let x = n.values(4 * g.input.features());
    let labels = [0u8, 2, 1, 2];
    let (_, grads) = loss_grads(&g, &params, &x, &labels);
    let (mut checked, mut worst) = (0, 0f64);
    for (i, (r, c, v)) in params.iter().enumerate() {
        for j in (0..v.len()).step_by(v.len().div_ceil(12)) {
            let eps = 1e-3f32;
            let at = |d: f32| {
                let mut q = params.clone();
                q[i].2[j] = v[j] + d;
                loss_grads(&g, &q, &x, &labels).0
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps as f64);
            let analytic = grads[i][j] as f64;
            let err = (numeric - analytic).abs() / analytic.abs().max(0.05);
            worst = worst.max(err);
            assert!(
                err < 0.05,
                "parameter {i} ({r}x{c}) element {j}: backward {analytic}, finite differences {numeric}"
            );
            checked += 1;
        }
    }
    eprintln!("{checked} elements checked, worst relative error {worst}");
    checked
}

/// `n` random 1x28x28 images in 10 classes.
fn images(n: usize, seed: u64) -> Split {
    let mut r = Noise(seed);
    Split {
        images: (0..n * 784).map(|_| (r.next() + 1.0) / 2.0).collect(),
        labels: (0..n).map(|i| (i % 10) as u8).collect(),
    }
}

fn data28() -> Dataset {
    Dataset {
        name: "noise28".into(),
        channels: 1,
        height: 28,
        width: 28,
        classes: 10,
        train: images(16, 1),
        test: images(8, 2),
        byte_divisor: None,
    }
}

fn cfg(model: ModelSpec) -> TrainConfig {
    TrainConfig {
        model,
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: None,
        epochs: 1,
        batch: 8,
        lr: 0.02,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 8,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

/// One epoch (two steps) of LeNet-5 and of ResNet-8 on the Verilated 8x8 array, every product
/// recomputed by the golden model and compared word for word (`--check`), and the same
/// weights as the golden device's run.
#[test]
fn lenet5_and_resnet8_on_the_verilated_array_equal_the_golden_model() {
    let d = data28();
    for model in [ModelSpec::Lenet5, ModelSpec::Resnet8] {
        let c = cfg(model.clone());
        let weights = |device: &str, check: bool| {
            let dev = systole_device::open(device, ArrayConfig::square(8)).unwrap();
            let a = systole_train::on_device(dev, c.rounding, c.seed, check);
            let mut t = Trainer::new(c.clone(), &d, a).unwrap();
            t.train_epoch(&d, &mut Quiet).unwrap();
            (t.param_states(), t.history[0].train_loss.to_bits())
        };
        let verilated = match systole_device::open("verilator", ArrayConfig::square(8)) {
            Ok(_) => weights("verilator", true),
            Err(e) => panic!("the verilator device must open here: {e}"),
        };
        assert!(verilated == weights("golden", false), "{model:?}");
    }
}

/// A network file written from a built-in network trains exactly as the built-in.
#[test]
fn a_network_file_trains_as_the_built_in_it_describes() {
    let d = data28();
    let g = builtin::lenet5(Shape { c: 1, h: 28, w: 28 }, 10).unwrap();
    let dir = std::env::temp_dir().join(format!("systole-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lenet5.json");
    std::fs::write(&file, graph_json(&g)).unwrap();
    let spec = ModelSpec::new(&ModelName::Json(file.clone()), &[], &[]).unwrap();
    let hist = |m: ModelSpec| {
        let c = TrainConfig {
            precision: Precision::F32,
            ..cfg(m)
        };
        let opts = RunOptions {
            device: systole_device::DeviceSpec::Golden,
            host_step: false,
            checkpoint_every: 1,
            check: false,
            out: None,
            resume: false,
            overwrite: false,
            trace: None,
        };
        run(&c, &d, &opts, &mut Quiet).unwrap().history
    };
    let bits = |h: Vec<systole_train::EpochRecord>| {
        h.iter()
            .map(|r| [r.train_loss, r.train_acc, r.test_acc, r.test_loss].map(f32::to_bits))
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(hist(spec)), bits(hist(ModelSpec::Lenet5)));
    // A file that does not type-check names the file and the layer.
    std::fs::write(&file, graph_json(&g).replace("\"out\": 120", "\"out\": 0")).unwrap();
    let e = ModelSpec::new(&ModelName::Json(file.clone()), &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("lenet5.json") && e.contains("dense"), "{e}");
    std::fs::write(&file, "{\"input\": 3").unwrap();
    let e = ModelSpec::new(&ModelName::Json(file.clone()), &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a network description"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each kind alone between a convolution and the dense head (strided and overlapping
/// windows too).
#[test]
fn each_kind_alone_matches_finite_differences() {
    use systole_step::layers::{AvgPool, Conv2d, Dense, Flatten, GlobalAvgPool, MaxPool, Relu};
    use systole_train::model::{Graph, Layer};
    let x = Shape { c: 2, h: 7, w: 7 };
    let conv = |stride| {
        Layer::Conv2d(Conv2d {
            out_ch: 3,
            kernel: 3,
            stride,
            pad: 1,
            bias: true,
        })
    };
    for (first, mid) in [
        (conv(1), None),
        (conv(2), Some(Layer::Relu(Relu))),
        (
            conv(1),
            Some(Layer::MaxPool(MaxPool {
                kernel: 3,
                stride: 2,
            })),
        ),
        (
            conv(1),
            Some(Layer::AvgPool(AvgPool {
                kernel: 3,
                stride: 2,
            })),
        ),
        (conv(1), Some(Layer::GlobalAvgPool(GlobalAvgPool))),
        (conv(1), Some(Layer::Flatten(Flatten))),
    ] {
        let mut g = Graph::new(x, 3);
        g.then(first).unwrap();
        if let Some(m) = mid {
            g.then(m).unwrap();
        }
        g.then(Layer::Dense(Dense { out: 3, bias: true })).unwrap();
        assert!(check_gradients(&g) > 20, "{mid:?}");
    }
}
