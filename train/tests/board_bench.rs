//! `systole bench --link`'s board column (`board_bench::measure_steps`), cheaply: the
//! firmware's training session on the host behind a pty with the Verilated 4x4 array under it.
//! The measured steps are the host trainer's first steps bit for bit, resident and batch by
//! batch, and the counters fall where the bench reports them (per step, once, per epoch).

use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_device::golden::GoldenDevice;
use systole_device::serial::SerialDevice;
use systole_train::board_bench::measure_steps;
use systole_train::data;
use systole_train::model::ModelSpec;
use systole_train::{Precision, TrainConfig, Trainer};

fn cfg() -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![16] },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: Some(100),
        epochs: 1,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 5,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

#[test]
fn the_measured_board_steps_are_the_host_trainers_steps() {
    let config = ArrayConfig::square(4);
    if let Err(e) = systole_sim::VerilatedArray::new(&config) {
        eprintln!("skipped: {e}");
        return;
    }
    let d = data::load("digits").unwrap();
    let c = cfg();
    let steps = 2;
    let golden = GoldenDevice::new(config).unwrap();
    let arith = systole_train::on_device(Box::new(golden), c.rounding, c.seed, false);
    let mut host = Trainer::new(c.clone(), &d, arith).unwrap();
    host.train_steps(&d, steps, &mut |_| {}).unwrap();
    // 1 MiB: the data set resident; 56,000 B: room for the step and a batch (54,062 B with the
    // margin of heap / 32), not the 100 packed images beside it (57,122 B), batch by batch.
    for (heap, resident) in [(1 << 20, true), (56_000, false)] {
        let sim = systole_sim::VerilatedArray::new(&config).unwrap();
        let b = SimBoard::spawn_training(config, move || sim, heap).unwrap();
        let mut dev = SerialDevice::open(&b.path().to_string_lossy(), config).unwrap();
        let m = measure_steps(&mut dev, &c, &d, steps).unwrap();
        assert_eq!(m.resident, resident, "heap {heap}");
        assert_eq!(m.params, host.param_states(), "heap {heap}");
        assert_eq!(m.runs.board_steps, steps as u64);
        assert!(m.state_upload.bytes_to_device > 0 && m.state_read.bytes_from_device > 0);
        let own = (steps * 32 * m.image_bytes) as u64;
        let (data_once, per_step) = (
            m.data_upload.bytes_to_device,
            m.batch_uploads.bytes_to_device,
        );
        if resident {
            assert!(
                data_once >= (100 * m.image_bytes) as u64 && per_step == 0,
                "{m:?}"
            );
        } else {
            assert!(data_once == 0 && per_step >= own, "{m:?}");
        }
        drop(dev);
        b.close().unwrap();
    }
}
