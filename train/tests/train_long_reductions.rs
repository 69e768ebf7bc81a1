//! A CNN whose reductions are longer than the device limit (`MAX_K`) trains and evaluates in
//! every precision: the forward convolution of an evaluation batch (256 images of 32x32 =
//! 262,144 output pixels, but only 9 products per output) is not bound by the limit at all, and
//! the first layer's weight gradient over a training batch of 130 images (133,120 products per
//! output) is split into chunks by the contract's rule. The golden model and the Verilated
//! array give the same weights bit for bit, with every chunk checked against the golden model.

use systole_core::numeric::MAX_K;
use systole_core::Rounding;
use systole_train::data::{Dataset, Split};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions, RunSummary};
use systole_train::{Precision, Quiet, TrainConfig};

const SIDE: usize = 32;
const BATCH: usize = 130;

/// Two classes of 32x32 images: the bright half is the left one or the right one.
fn split(n: usize, salt: u64) -> Split {
    let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ salt;
    let mut noise = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 * 0.4
    };
    let mut images = Vec::with_capacity(n * SIDE * SIDE);
    let labels: Vec<u8> = (0..n).map(|i| (i % 2) as u8).collect();
    for &l in &labels {
        for _y in 0..SIDE {
            for x in 0..SIDE {
                let bright = (x < SIDE / 2) == (l == 0);
                images.push(if bright { 0.6 } else { 0.0 } + noise());
            }
        }
    }
    Split { images, labels }
}

fn data() -> Dataset {
    Dataset {
        name: "halves".into(),
        channels: 1,
        height: SIDE,
        width: SIDE,
        classes: 2,
        train: split(BATCH, 1),
        test: split(256, 2),
        byte_divisor: None,
    }
}

fn cfg(precision: Precision) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Cnn { channels: vec![2] },
        // The data is built above; this name is not read.
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: None,
        epochs: 1,
        batch: BATCH,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 3,
        precision,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

fn train(precision: Precision, device: &str, check: bool) -> Option<RunSummary> {
    let opts = RunOptions {
        device: device.parse().unwrap(),
        host_step: false,
        checkpoint_every: 1,
        check,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    match run(&cfg(precision), &data(), &opts, &mut Quiet) {
        Ok(s) => Some(s),
        Err(e) if format!("{e:?}").contains("NotBuilt") => {
            eprintln!("SKIPPED {device}: {:#}", anyhow::Error::from(e));
            None
        }
        Err(e) => panic!("{precision:?} on {device}: {:#}", anyhow::Error::from(e)),
    }
}

// The first layer's weight gradient needs a split, and so would the evaluation batch's forward
// convolution if it were (wrongly) bounded by batch * pixels.
const _: () = assert!(BATCH * SIDE * SIDE > MAX_K && 256 * SIDE * SIDE > MAX_K);

#[test]
fn cnn_with_long_reductions_trains_in_every_precision() {
    for p in [Precision::F32, Precision::F16, Precision::Bf16] {
        let s = train(p, "golden", false).unwrap();
        let h = &s.history[0];
        assert!(
            h.train_loss.is_finite() && h.test_acc >= 0.0,
            "{p:?}: {h:?}"
        );
        assert!(s.saturation.is_empty(), "{p:?}: float runs do not saturate");
    }
    let gold = train(Precision::Fixed16, "golden", false).unwrap();
    assert!(gold.history[0].train_loss.is_finite());
    let layer1 = &gold.saturation["layer 1 backward dW"];
    // Two chunks (127 and 3 images), each one device operation at least.
    assert!(layer1.ops >= 2, "{layer1:?}");
    if let Some(ver) = train(Precision::Fixed16, "verilator", true) {
        assert_eq!(
            gold.params, ver.params,
            "golden and verilator weights differ"
        );
        assert_eq!(gold.history[0].test_acc, ver.history[0].test_acc);
        assert_eq!(gold.saturation, ver.saturation);
        let (name, st) = ver.device.unwrap();
        assert!(st.cycles > 0, "{name} simulated no cycles");
        eprintln!("{name}: {} ops, {} cycles", st.ops, st.cycles);
    }
}
