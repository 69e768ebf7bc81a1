//! The pipeline's numbers for the README (`cargo test --release -p systole-train --test
//! pipeline_measure -- --ignored --nocapture`; needs Fashion-MNIST and Verilator): the first
//! training step of the Fashion-MNIST CNN 8-16 (batch 32) on the Verilated 8x8 array, as 2
//! pipeline stages with M = 1, 4, 8 micro-batches and as 2 data-parallel replicas: each
//! stage's measured device cycles per unit, the GPipe bubble, the bytes between the stages and
//! in the all-reduce, and the projected step time on boards at 100 MHz over a 3 Mbaud link.

use systole_core::{ArrayConfig, Rounding};
use systole_train::data;
use systole_train::model::ModelSpec;
use systole_train::pipeline::{StagePlan, StepMeasure};
use systole_train::{on_device, Precision, TrainConfig, Trainer};

const CLOCK_HZ: f64 = 100e6;
/// 3 Mbaud, 10 bits a byte: the SoC's serial link.
const LINK_BYTES_PER_S: f64 = 300e3;

fn measure(stages: usize, shards: usize, micro: usize) -> (StagePlan, StepMeasure) {
    let d = data::load("fashion-mnist").expect("Fashion-MNIST (dataset-fashion-mnist)");
    let cfg = TrainConfig {
        model: ModelSpec::Cnn {
            channels: vec![8, 16],
        },
        dataset: "fashion-mnist".into(),
        train_limit: Some(64),
        epochs: 1,
        batch: 32,
        lr: 0.02,
        lr_decay: 0.85,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 8,
        word_bits: 16,
        master_bits: 16,
        shards: Some(shards),
        microbatches: Some(micro),
    };
    let dev = systole_device::open("verilator", ArrayConfig::square(8)).unwrap();
    let mut t = Trainer::new(cfg.clone(), &d, on_device(dev, cfg.rounding, 1, false)).unwrap();
    let plan = StagePlan::new(t.layers(), stages, None).unwrap();
    let m = t.pipeline_epoch_local(&plan, &d, Some(1)).unwrap();
    (plan, m.into_iter().next().unwrap())
}

#[test]
#[ignore]
fn pipeline_numbers_for_the_readme() {
    println!("| strategy | stage cycles (busy) | makespan | ideal | bubble | GPipe (S-1)/(M+S-1) | bytes between stages | all-reduce bytes per rank | step at 100 MHz, 3 Mbaud |");
    for micro in [1, 4, 8] {
        let (plan, m) = measure(2, 1, micro);
        let t = m.timeline();
        let between: u64 = m.boundary_bytes.iter().sum();
        let secs = t.makespan as f64 / CLOCK_HZ + between as f64 / LINK_BYTES_PER_S;
        println!(
            "| 2 stages (cut {}), M = {micro} | {:?} | {} | {} | {:.1}% | {:.1}% | {between} | 0 | {:.2} ms |",
            plan.cut_text(),
            t.busy,
            t.makespan,
            t.ideal(),
            100.0 * t.bubble(),
            100.0 / (micro + 1) as f64,
            1e3 * secs
        );
    }
    let (_, one) = measure(1, 1, 1);
    let (_, dp) = measure(1, 2, 1);
    let words: u64 = dp.reduce_words.iter().sum();
    // Ring all-reduce of i64 words over 2 ranks: each sends and receives half the vector twice.
    let reduce = 8 * words;
    let replica: u64 = dp.forward[0][0] + dp.backward[0][0];
    let other: u64 = dp.forward[0][1] + dp.backward[0][1];
    let busy = replica.max(other);
    println!(
        "| 1 board | [{}] | {} | | | | 0 | 0 | {:.2} ms |",
        one.forward[0][0] + one.backward[0][0],
        one.forward[0][0] + one.backward[0][0],
        1e3 * (one.forward[0][0] + one.backward[0][0]) as f64 / CLOCK_HZ
    );
    println!(
        "| 2 replicas (data parallel) | [{replica}, {other}] | {busy} | | | | 0 | {reduce} | {:.2} ms |",
        1e3 * (busy as f64 / CLOCK_HZ + reduce as f64 / LINK_BYTES_PER_S)
    );
}
