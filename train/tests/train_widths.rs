//! `--word-bits` W and `--master-bits` through the trainer: bad widths are clear errors, W
//! below 16 runs on the golden device, the Verilated array built at W and a board at W behind
//! `serial:` (bit-identical), a board of another W is refused; a checkpoint records W and
//! refuses a resume at another, and a run at W keeps every word within W bits.

use systole_core::Rounding;
use systole_train::arith::TensorState;
use systole_train::checkpoint::{self, Checkpoint};
use systole_train::data;
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig};

fn cfg(word_bits: u32, master_bits: u32, epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![8] },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: Some(64),
        epochs,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits,
        master_bits,
        shards: None,
        microbatches: None,
    }
}

fn opts(device: &str, out: Option<&std::path::Path>, resume: bool) -> RunOptions {
    RunOptions {
        device: device.parse().unwrap(),
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: out.map(|p| p.to_path_buf()),
        resume,
        overwrite: false,
        trace: None,
    }
}

#[test]
fn bad_widths_are_clear_errors() {
    let bad = [
        (cfg(7, 7, 1), "--word-bits"),
        (cfg(17, 17, 1), "--word-bits"),
        (cfg(12, 8, 1), "--master-bits"),
        (
            TrainConfig {
                precision: Precision::F32,
                ..cfg(12, 12, 1)
            },
            "--precision fixed16",
        ),
    ];
    for (c, says) in bad {
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains(says),
            "W {} master {}: {e}",
            c.word_bits,
            c.master_bits
        );
    }
    assert!(cfg(8, 16, 1).validate().is_ok() && cfg(16, 16, 1).validate().is_ok());
}

/// A board behind `serial:` whose array is built at another `W` than the run asks for is refused
/// naming both arrays (its `CONFIG` word carries `W`): a 16-bit board for a run at 8 bits.
#[test]
fn a_board_of_another_word_width_is_refused_naming_both() {
    use systole_device::board_sim::SimBoard;
    let board = match SimBoard::spawn_verilated(systole_core::ArrayConfig::square(4)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("SKIPPED (no Verilated 4x4 array): {e}");
            return;
        }
    };
    let d = data::load("digits").unwrap();
    let spec = format!("serial:{}", board.path().display());
    let e = run(&cfg(8, 8, 1), &d, &opts(&spec, None, false), &mut Quiet).unwrap_err();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    assert!(
        text.contains("it is a 4x4 array of 16-bit words") && text.contains("array of 8-bit words"),
        "{text}"
    );
}

/// A run at 8 bits on the Verilated array built at 8 bits and on a board at 8 bits behind
/// `serial:` (the firmware's frame server over that array; products at W on the hardware, each
/// checked against the golden model at 8 bits by `--check`) ends with every parameter and
/// momentum word equal to the same run on the golden device.
#[test]
fn a_run_at_8_bits_on_the_verilated_array_equals_the_golden_device() {
    let d = data::load("digits").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut states = Vec::new();
    // The board behind `serial:`: the firmware's frame server over the 4x4 array built at 8
    // bits (the Verilated model the verilator device loads, cached).
    let board = systole_device::board_sim::SimBoard::spawn_verilated(
        systole_core::ArrayConfig::square(4).with_word_bits(8),
    )
    .ok();
    let serial = board
        .as_ref()
        .map(|b| format!("serial:{}", b.path().display()));
    for device in ["golden", "verilator"].into_iter().chain(serial.as_deref()) {
        let out = dir.path().join(device.replace(['/', ':'], "_"));
        std::fs::create_dir_all(&out).unwrap();
        let o = RunOptions {
            check: device != "golden",
            ..opts(device, Some(&out), false)
        };
        match run(&cfg(8, 8, 1), &d, &o, &mut Quiet) {
            Ok(s) => assert!(s.arithmetic.starts_with("fixed8"), "{}", s.arithmetic),
            Err(e) if e.to_string().contains("not available in this build") => {
                eprintln!("SKIPPED the verilator device: {e}");
                return;
            }
            Err(e) => panic!("{device}: {e}"),
        }
        let ck = Checkpoint::load(&out.join(checkpoint::FILE_NAME)).unwrap();
        states.push((ck.params, ck.velocity));
    }
    for (i, s) in states.iter().enumerate().skip(1) {
        assert!(
            states[0] == *s,
            "the 8-bit run on device {i} differs from the golden one"
        );
    }
}

/// Every word of every parameter and momentum tensor of a run at W (master M) is an M-bit word
/// with fewer than M fractional bits; the checkpoint records W and M, and a resume at another W
/// is refused naming both values.
#[test]
fn a_run_at_w_keeps_its_words_and_its_checkpoint_refuses_another_w() {
    let d = data::load("digits").unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (w, m) in [(8, 8), (12, 16)] {
        let out = dir.path().join(format!("w{w}"));
        std::fs::create_dir_all(&out).unwrap();
        let s = run(
            &cfg(w, m, 1),
            &d,
            &opts("golden", Some(&out), false),
            &mut Quiet,
        )
        .unwrap();
        assert!(
            s.arithmetic.starts_with(&format!("fixed{w}")),
            "{}",
            s.arithmetic
        );
        let ck = Checkpoint::load(&out.join(checkpoint::FILE_NAME)).unwrap();
        assert_eq!((ck.config.word_bits, ck.config.master_bits), (w, m));
        let (lo, hi) = (-(1i32 << (m - 1)), (1i32 << (m - 1)) - 1);
        let mut widest = 0;
        for t in ck.params.iter().chain(&ck.velocity) {
            let TensorState::Fixed { frac, data, .. } = t else {
                panic!("a fixed-point run checkpoints fixed-point tensors")
            };
            assert!(*frac < m);
            assert!(data.iter().all(|&x| (lo..=hi).contains(&(x as i32))));
            widest = widest.max(data.iter().map(|&x| (x as i32).abs()).max().unwrap_or(0));
        }
        // The format rule uses the width: the largest word is near the top of M bits.
        assert!(widest >= 1 << (m - 3), "W {w} M {m}: largest word {widest}");
        let e = run(
            &cfg(16, 16, 2),
            &d,
            &opts("golden", Some(&out), true),
            &mut Quiet,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("--word-bits 16 here, {w} in the checkpoint")),
            "{e}"
        );
    }
}

/// Checkpoints from before W was a parameter trained at 16 bits, and read back so.
#[test]
fn a_checkpoint_from_before_w_trained_at_16_bits() {
    let mut v = serde_json::to_value(cfg(8, 8, 1)).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("word_bits").unwrap();
    o.remove("master_bits").unwrap();
    let old: TrainConfig = serde_json::from_value(v).unwrap();
    assert_eq!((old.word_bits, old.master_bits), (16, 16));
}
