//! Training on the shipped digits through the golden device: loss falls, accuracy beats a real
//! threshold, runs repeat bit for bit, resume continues bit for bit, and `--check` catches a
//! device that computes one element wrong.

use systole_core::{ArrayConfig, Rounding};
use systole_device::{golden::GoldenDevice, Device, DeviceError, DeviceStats};
use systole_golden::OutputSpec;
use systole_golden::QMatrix;
use systole_train::arith::{Arith, TensorState};
use systole_train::checkpoint::Checkpoint;
use systole_train::data::{self, Dataset};
use systole_train::float::{FloatArith, FloatFormat};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig, TrainError, Trainer};

fn digits() -> Dataset {
    data::load("digits").unwrap()
}

fn cfg(precision: Precision, rounding: Rounding, epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![32] },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: None,
        epochs,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 1,
        precision,
        rounding,
        array: 8,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

fn opts() -> RunOptions {
    RunOptions {
        device: systole_device::DeviceSpec::Golden,
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    }
}

#[test]
fn fixed16_mlp_learns_digits_on_golden() {
    let d = digits();
    let s = run(
        &cfg(Precision::Fixed16, Rounding::Stochastic, 4),
        &d,
        &RunOptions {
            check: true,
            ..opts()
        },
        &mut Quiet,
    )
    .unwrap();
    let h = &s.history;
    assert!(
        h[3].train_loss < h[0].train_loss * 0.6,
        "loss {} -> {}",
        h[0].train_loss,
        h[3].train_loss
    );
    assert!(h[3].test_acc > 90.0, "test accuracy {}", h[3].test_acc);
    let (_, stats) = s.device.unwrap();
    // 45 batches x (2 forward + 3 backward products) x 4 epochs, plus evaluation.
    assert!(stats.ops >= 45 * 5 * 4, "{} ops", stats.ops);
}

#[test]
fn repeat_runs_are_identical_and_seeds_matter() {
    let d = digits();
    let c = cfg(Precision::Fixed16, Rounding::Stochastic, 1);
    let a = run(&c, &d, &opts(), &mut Quiet).unwrap();
    let b = run(&c, &d, &opts(), &mut Quiet).unwrap();
    assert_eq!(a.params, b.params);
    let other = run(&TrainConfig { seed: 2, ..c }, &d, &opts(), &mut Quiet).unwrap();
    assert_ne!(a.params, other.params);
}

#[test]
fn resume_continues_bit_for_bit() {
    let d = digits();
    for precision in [Precision::Fixed16, Precision::F32] {
        let dir = tempfile::tempdir().unwrap();
        // A decaying rate: epoch 2 trains at half the rate of epoch 1.
        let cfg = |p, r, e| TrainConfig {
            lr_decay: 0.5,
            ..cfg(p, r, e)
        };
        let straight = run(
            &cfg(precision, Rounding::Stochastic, 2),
            &d,
            &opts(),
            &mut Quiet,
        )
        .unwrap();
        let o = RunOptions {
            out: Some(dir.path().to_path_buf()),
            ..opts()
        };
        run(&cfg(precision, Rounding::Stochastic, 1), &d, &o, &mut Quiet).unwrap();
        let resumed = run(
            &cfg(precision, Rounding::Stochastic, 2),
            &d,
            &RunOptions {
                resume: true,
                ..o.clone()
            },
            &mut Quiet,
        )
        .unwrap();
        assert_eq!(straight.params, resumed.params, "{precision:?}");
        assert_eq!(resumed.history.len(), 2);
        // A different configuration refuses the checkpoint.
        let e = run(
            &TrainConfig {
                lr: 0.1,
                ..cfg(precision, Rounding::Stochastic, 3)
            },
            &d,
            &RunOptions { resume: true, ..o },
            &mut Quiet,
        )
        .unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("different run configuration")
                && e.contains("--lr 0.1 here, 0.05 in the checkpoint"),
            "{e}"
        );
    }
}

/// One epoch of `c` from `start` (with its configuration replaced by `c`) or from scratch.
fn one_epoch(c: &TrainConfig, d: &Dataset, start: Option<&Checkpoint>) -> Checkpoint {
    fn go<A: Arith<Error = TrainError>>(
        c: &TrainConfig,
        d: &Dataset,
        a: A,
        start: Option<&Checkpoint>,
    ) -> Checkpoint {
        let mut t = Trainer::new(c.clone(), d, a).unwrap();
        if let Some(ck) = start {
            t.restore(Checkpoint {
                config: c.clone(),
                ..ck.clone()
            })
            .unwrap();
        }
        t.train_epoch(d, &mut Quiet).unwrap();
        t.checkpoint()
    }
    match c.precision {
        Precision::Fixed16 => {
            let dev = GoldenDevice::new(ArrayConfig::square(c.array)).unwrap();
            go(
                c,
                d,
                systole_train::on_device(Box::new(dev), c.rounding, c.seed, false),
                start,
            )
        }
        _ => go(c, d, FloatArith::new(FloatFormat::F32), start),
    }
}

/// The trainer through `systole_step` equals the trainer before the step moved there (main at
/// 098ac4e, its own fixed-point code and glibc's `expf`/`logf`): one epoch of 8 steps of the
/// digits MLP (`systole train --device golden --model mlp --dataset digits --limit 256 --epochs
/// 1`, run with that build) ends with the same weights, momentum and remembered fractional bits
/// (FNV-1a over every tensor's frac and words) and the same loss and accuracy bits.
#[test]
fn the_step_reproduces_the_trainer_it_replaced() {
    let c = TrainConfig {
        train_limit: Some(256),
        ..cfg(Precision::Fixed16, Rounding::Stochastic, 1)
    };
    let ck = one_epoch(&c, &digits(), None);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for t in ck.params.iter().chain(&ck.velocity) {
        let TensorState::Fixed { frac, data, .. } = t else {
            panic!("a fixed-point run holds fixed-point tensors");
        };
        for w in std::iter::once(*frac as u16).chain(data.iter().map(|&w| w as u16)) {
            h = (h ^ u64::from(w)).wrapping_mul(0x100_0000_01b3);
        }
    }
    assert_eq!(h, 0x0836_0d13_c309_e0c1, "weights or momentum differ");
    let want: std::collections::BTreeMap<String, u32> = [
        ("layer 1 backward dW", 15),
        ("layer 1 forward", 13),
        ("layer 2 backward dW", 15),
        ("layer 2 backward dX", 15),
        ("layer 2 forward", 13),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(ck.fracs, want);
    let r = &ck.history[0];
    let bits = [r.train_loss, r.train_acc, r.test_acc, r.test_loss].map(f32::to_bits);
    // The test loss in evaluation batches of 32 (`EVAL_BATCH`); batches of 256 would give
    // 0x4000_dcfd, with the same accuracy.
    assert_eq!(bits, [0x400f_7773, 0x4161_0000, 0x4215_4dba, 0x4000_dd05]);
}

/// Epoch 2 of a run with `--lr 0.05 --lr-decay 0.5` is exactly an epoch at the constant rate
/// `lr_q(1) / 2^16` (1639 units, 0.0250...) from the same state: the schedule reaches the update, on the fixed-point and the float
/// path.
#[test]
fn the_second_epoch_trains_at_the_decayed_rate() {
    let d = digits();
    for p in [Precision::Fixed16, Precision::F32] {
        let decaying = TrainConfig {
            lr_decay: 0.5,
            train_limit: Some(256),
            ..cfg(p, Rounding::Stochastic, 2)
        };
        let halved = TrainConfig {
            lr: decaying.lr_at(1),
            lr_decay: 1.0,
            ..decaying.clone()
        };
        let first = one_epoch(&decaying, &d, None);
        let decayed = one_epoch(&decaying, &d, Some(&first));
        let constant = one_epoch(&halved, &d, Some(&first));
        assert_eq!(decaying.lr_at(1), 1639.0 / 65536.0);
        assert!(
            decayed.params == constant.params,
            "{p:?}: epoch 2 is not at the decayed rate"
        );
        assert!(first.params != decayed.params, "{p:?}");
    }
}

#[test]
fn cnn_trains_on_golden_with_check() {
    let d = digits();
    let c = TrainConfig {
        model: ModelSpec::Cnn {
            channels: vec![4, 8],
        },
        train_limit: Some(512),
        ..cfg(Precision::Fixed16, Rounding::Stochastic, 2)
    };
    let s = run(
        &c,
        &d,
        &RunOptions {
            check: true,
            ..opts()
        },
        &mut Quiet,
    )
    .unwrap();
    assert!(s.history[1].train_loss < s.history[0].train_loss);
    assert!(
        s.history[1].test_acc > 40.0,
        "test accuracy {}",
        s.history[1].test_acc
    );
}

/// A device that returns one wrong element in its `bad_op`-th operation.
struct Faulty {
    inner: GoldenDevice,
    count: usize,
    bad_op: usize,
}

impl Device for Faulty {
    fn name(&self) -> String {
        "faulty".into()
    }
    fn config(&self) -> &ArrayConfig {
        self.inner.config()
    }
    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let mut c = self.inner.matmul(a, b, out)?;
        self.count += 1;
        if self.count == self.bad_op {
            c.data[3] = c.data[3].wrapping_add(1);
        }
        Ok(c)
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn reset_stats(&mut self) {}
}

#[test]
fn check_names_the_op_and_element() {
    let d = digits();
    // Ops of the first step: layer 1 forward, layer 2 forward, layer 2 dW, layer 2 dX, layer 1 dW.
    for (bad, name) in [
        (1, "layer 1 forward"),
        (3, "layer 2 backward dW"),
        (4, "layer 2 backward dX"),
    ] {
        let dev = Faulty {
            inner: GoldenDevice::new(ArrayConfig::square(8)).unwrap(),
            count: 0,
            bad_op: bad,
        };
        let mut t = Trainer::new(
            cfg(Precision::Fixed16, Rounding::Stochastic, 1),
            &d,
            systole_train::on_device(Box::new(dev), Rounding::Stochastic, 1, true),
        )
        .unwrap();
        let e = t.train_epoch(&d, &mut Quiet).unwrap_err();
        assert!(matches!(e, TrainError::Mismatch { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(name) && msg.contains("index 3 (row 0, column 3)"),
            "{msg}"
        );
    }
}

#[test]
fn float_baselines_learn() {
    let d = digits();
    for p in [Precision::F32, Precision::Bf16] {
        let s = run(&cfg(p, Rounding::NearestEven, 3), &d, &opts(), &mut Quiet).unwrap();
        assert!(
            s.history[2].test_acc > 90.0,
            "{p:?}: {}",
            s.history[2].test_acc
        );
    }
}

/// The accuracy study: mean test accuracy of 3 seeds per mode. Run with
/// `cargo test -p systole --release --test train_digits -- --ignored --nocapture`.
#[test]
#[ignore]
fn accuracy_study_digits() {
    let d = digits();
    let epochs: usize = std::env::var("STUDY_EPOCHS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut f32_mean = 0.0;
    for (p, r) in [
        (Precision::F32, Rounding::NearestEven),
        (Precision::F16, Rounding::NearestEven),
        (Precision::Bf16, Rounding::NearestEven),
        (Precision::Fixed16, Rounding::Stochastic),
        (Precision::Fixed16, Rounding::NearestEven),
    ] {
        let accs: Vec<f32> = (1..=3)
            .map(|seed| {
                run(
                    &TrainConfig {
                        seed,
                        ..cfg(p, r, epochs)
                    },
                    &d,
                    &opts(),
                    &mut Quiet,
                )
                .unwrap()
                .history
                .last()
                .unwrap()
                .test_acc
            })
            .collect();
        let mean = accs.iter().sum::<f32>() / 3.0;
        if p == Precision::F32 {
            f32_mean = mean;
        }
        println!(
            "{:8} {:10} {:?} mean {mean:.2} (f32 {f32_mean:.2})",
            p.name(),
            r.name(),
            accs
        );
        if p == Precision::Fixed16 && r == Rounding::Stochastic {
            assert!(
                mean > f32_mean - 1.5,
                "fixed16 stochastic {mean} vs f32 {f32_mean}"
            );
        }
    }
}

/// The digits CNN through the layer graph equals the CNN before the graph (its conv blocks a
/// layer kind of their own): one epoch of 8 steps of `--model cnn --channels 4,8 --limit 256`
/// on golden, FNV-1a over every weight and momentum tensor's frac and words, the remembered
/// formats' count and the history's bits, computed by the build before the graph.
#[test]
fn the_graph_reproduces_the_cnn_before_it() {
    let c = TrainConfig {
        model: ModelSpec::Cnn {
            channels: vec![4, 8],
        },
        train_limit: Some(256),
        ..cfg(Precision::Fixed16, Rounding::Stochastic, 1)
    };
    let ck = one_epoch(&c, &digits(), None);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for t in ck.params.iter().chain(&ck.velocity) {
        let TensorState::Fixed { frac, data, .. } = t else {
            panic!("a fixed-point run holds fixed-point tensors");
        };
        for w in std::iter::once(*frac as u16).chain(data.iter().map(|&w| w as u16)) {
            h = (h ^ u64::from(w)).wrapping_mul(0x100_0000_01b3);
        }
    }
    for (k, v) in &ck.fracs {
        for b in k.bytes().chain([*v as u8]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    let r = &ck.history[0];
    let bits = [r.train_loss, r.train_acc, r.test_acc, r.test_loss].map(f32::to_bits);
    assert_eq!((h, bits), (PIN_HASH, PIN_BITS));
}

/// The CNN's pin, from the build before the graph.
const PIN_HASH: u64 = 0x0ce1_9190_6775_a190;
/// Its history's loss and accuracy bits (train loss, train accuracy, test accuracy, test loss).
const PIN_BITS: [u32; 4] = [0x4014_0b26, 0x4186_6000, 0x4170_ab24, 0x4010_482c];
