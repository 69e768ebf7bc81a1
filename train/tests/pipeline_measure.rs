//! The pipeline's numbers in docs/MEASUREMENTS.md (`cargo test --release -p systole-train --test
//! pipeline_measure -- --ignored --nocapture`; needs Fashion-MNIST and Verilator): the first
//! training step (batch 32) of two Fashion-MNIST networks on the Verilated 8x8 array, the CNN
//! 8-16 (small weights, large activations) and the MLP 784-512-512-10 (large weights, small
//! activations), each as 2 pipeline stages with M = 1, 4, 8 micro-batches and as 2 data-parallel
//! replicas: each stage's measured device cycles per unit, the GPipe bubble, the bytes between
//! the stages and in the all-reduce, and the projected step time on boards at the Arty's clock
//! over a 3 Mbaud serial link and over 1 Gb/s Ethernet.

use systole_core::{ArrayConfig, Rounding};
use systole_train::data;
use systole_train::model::ModelSpec;
use systole_train::pipeline::{StagePlan, StepMeasure};
use systole_train::{on_device, Precision, TrainConfig, Trainer};

/// 3 Mbaud, 10 bits a byte: the SoC's serial link.
const SERIAL_BYTES_PER_S: f64 = 300e3;
/// 1 Gb/s Ethernet, payload only.
const GBE_BYTES_PER_S: f64 = 125e6;

/// The logic clock of the boards the projection assumes: the Arty A7-35T's 100 MHz, which the
/// Arty A7-100T, Basys 3 and Nexys A7-100T share (the iCEBreaker runs at 6 MHz).
fn clock_hz() -> f64 {
    f64::from(systole_boards::find("arty-a7-35").unwrap().logic_clock_hz())
}

fn measure(
    model: &ModelSpec,
    stages: usize,
    shards: usize,
    micro: usize,
) -> (StagePlan, StepMeasure) {
    let d = data::load("fashion-mnist").expect("Fashion-MNIST (dataset-fashion-mnist)");
    let cfg = TrainConfig {
        model: model.clone(),
        dataset: systole_train::data::DatasetSpec::FashionMnist,
        input_scale: 1.0,
        input_offset: 0.0,
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
    let plan = StagePlan::new(t.graph(), stages, None).unwrap();
    let m = t.pipeline_epoch_local(&plan, &d, Some(1)).unwrap();
    (plan, m.into_iter().next().unwrap())
}

/// `| 3 Mbaud | 1 GbE |` cells: the cycles at the board clock plus the bytes over each link.
fn link_cells(cycles: u64, bytes: u64) -> String {
    let compute = cycles as f64 / clock_hz();
    let ms = |rate: f64| 1e3 * (compute + bytes as f64 / rate);
    format!(
        "{:.2} ms | {:.2} ms |",
        ms(SERIAL_BYTES_PER_S),
        ms(GBE_BYTES_PER_S)
    )
}

/// Prints the measurement table's rows for `model`, then each stage's parameters.
fn print_rows(model: &ModelSpec) {
    println!("| strategy (2 boards unless said) | cycles per stage | step (makespan) | bubble (GPipe ideal) | bytes between stages / all-reduce per rank | step, 3 Mbaud | step, 1 GbE |");
    let (_, one) = measure(model, 1, 1, 1);
    let whole = one.forward[0][0] + one.backward[0][0];
    println!(
        "| 1 board | {whole} | {whole} | - | 0 / 0 | {}",
        link_cells(whole, 0)
    );
    for micro in [1, 4, 8] {
        let (plan, m) = measure(model, 2, 1, micro);
        let t = m.timeline();
        let between: u64 = m.boundary_bytes.iter().sum();
        println!(
            "| 2 stages (cut {}), M = {micro} | {:?} | {} | {:.1}% ({:.1}%) | {between} / 0 | {}",
            plan.cut_text(),
            t.busy,
            t.makespan,
            100.0 * t.bubble(),
            100.0 / (micro + 1) as f64,
            link_cells(t.makespan, between)
        );
        if micro == 1 {
            println!("parameters per stage: {:?}", m.reduce_words);
        }
    }
    let (_, dp) = measure(model, 1, 2, 1);
    let words: u64 = dp.reduce_words.iter().sum();
    // Ring all-reduce of i64 words over 2 ranks: each sends and receives half the vector twice.
    let reduce = 8 * words;
    let replica: u64 = dp.forward[0][0] + dp.backward[0][0];
    let other: u64 = dp.forward[0][1] + dp.backward[0][1];
    let busy = replica.max(other);
    println!(
        "| 2 replicas (data parallel) | [{replica}, {other}] | {busy} | - | 0 / {reduce} | {}",
        link_cells(busy, reduce)
    );
}

#[test]
#[ignore]
fn cnn_pipeline_numbers_for_the_readme() {
    print_rows(&ModelSpec::Cnn {
        channels: vec![8, 16],
    });
}

#[test]
#[ignore]
fn mlp_pipeline_numbers_for_the_readme() {
    print_rows(&ModelSpec::Mlp {
        hidden: vec![512, 512],
    });
}
