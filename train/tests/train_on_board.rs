//! The whole step on a board that trains itself, cheaply: the firmware's training
//! session runs on the host behind a pty (`SimBoard::spawn_training`) with the Verilated 4x4
//! array under it, and `systole train`'s run drives it over the serial link. The board path
//! ends bit-identical to the host-driven path (`--host-step`) on the same kind of board, resumes
//! bit for bit, and `--check` passes on it.

use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::SimBoard;
use systole_train::data::{self, Dataset};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions, RunSummary};
use systole_train::{Precision, Quiet, TrainConfig};

fn cfg(epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![16] },
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        // 4 batches an epoch, the last of 4 images.
        train_limit: Some(100),
        epochs,
        batch: 32,
        lr: 0.05,
        lr_decay: 0.5,
        momentum: 0.9,
        seed: 3,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

/// Heap the pty board announces: room for the data set beside the step.
const ROOMY: u32 = 1 << 20;
/// Room for the step, not for the data set beside it: the batches are uploaded as they go.
const TIGHT: u32 = 56_000;

/// A training board on a pty; `None` (the test is skipped) without the Verilated models.
fn board() -> Option<SimBoard> {
    board_with(ROOMY)
}

fn board_with(heap: u32) -> Option<SimBoard> {
    let config = ArrayConfig::square(4);
    let sim = match systole_sim::VerilatedArray::new(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: {e}");
            return None;
        }
    };
    Some(SimBoard::spawn_training(config, move || sim, heap).unwrap())
}

fn train(
    data: &Dataset,
    epochs: usize,
    host_step: bool,
    out: Option<&std::path::Path>,
    resume: bool,
    check: bool,
) -> RunSummary {
    train_on(ROOMY, data, epochs, (host_step, check, 1), out, resume)
        .unwrap_or_else(|e| panic!("{e:?}"))
}

fn train_on(
    heap: u32,
    data: &Dataset,
    epochs: usize,
    (host_step, check, checkpoint_every): (bool, bool, usize),
    out: Option<&std::path::Path>,
    resume: bool,
) -> Result<RunSummary, systole_train::TrainError> {
    let b = board_with(heap).unwrap();
    let opts = RunOptions {
        device: format!("serial:{}", b.path().display()).parse().unwrap(),
        host_step,
        checkpoint_every,
        check,
        out: out.map(Into::into),
        resume,
        overwrite: false,
        trace: None,
    };
    let s = run(&cfg(epochs), data, &opts, &mut Quiet);
    b.close().unwrap();
    s
}

/// The SoC training tests' run: 3 digits-MLP steps (batch 32, 96 images) on an `size` x
/// `size` array at `word_bits`.
fn three_steps(size: usize, word_bits: u32) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![32] },
        train_limit: Some(96),
        epochs: 1,
        seed: 1,
        lr_decay: 1.0,
        array: size,
        word_bits,
        ..cfg(1)
    }
}

/// A plain run on `device`: the board step, a checkpoint every epoch, no files.
fn soc_opts(device: String) -> RunOptions {
    RunOptions {
        device: device.parse().unwrap(),
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    }
}

/// Results without the wall-clock seconds.
fn results(s: &RunSummary) -> Vec<(f32, f32, f32, f32)> {
    s.history
        .iter()
        .map(|r| (r.train_loss, r.train_acc, r.test_loss, r.test_acc))
        .collect()
}

#[test]
fn the_board_step_equals_the_host_step_and_resumes() {
    if board().is_none() {
        return;
    }
    let d = data::load("digits").unwrap();
    let on_board = train(&d, 2, false, None, false, false);
    let host = train(&d, 2, true, None, false, false);
    assert!(
        on_board.arithmetic.contains("the step on the board"),
        "{}",
        on_board.arithmetic
    );
    assert!(
        !host.arithmetic.contains("on the board"),
        "{}",
        host.arithmetic
    );
    let (_, st) = on_board.device.as_ref().unwrap();
    assert_eq!(st.board_steps, 8);
    // The board evaluated on its own test split: the test split went up once, and no
    // parameters came back between the epochs: 5,517 B back (the whole state at the end and
    // the answers), 7,950 B when the host evaluated on the parameters read after epoch 1.
    assert!(st.bytes_to_device > 359 * 41, "{st:?}");
    assert!(st.bytes_from_device < 6_500, "{st:?}");
    assert_eq!(st.ops, 0, "the board path ran products from the host");
    assert!(
        st.bytes_to_device > 100 * 41,
        "the data set went up: {st:?}"
    );
    assert_eq!(on_board.params, host.params);
    assert_eq!(results(&on_board), results(&host));
    // One epoch, then a resumed second one, on fresh boards: the same bits.
    let dir = tempfile::tempdir().unwrap();
    train(&d, 1, false, Some(dir.path()), false, false);
    let resumed = train(&d, 2, false, Some(dir.path()), true, false);
    assert_eq!(resumed.params, on_board.params);
    assert_eq!(results(&resumed), results(&on_board));
    // Without --out only the last epoch reads the whole state back (the others the
    // parameters for the evaluation); with --out and a checkpoint every epoch each one does:
    // the same run, more bytes back.
    let dir = tempfile::tempdir().unwrap();
    let every = train(&d, 2, false, Some(dir.path()), false, false);
    assert_eq!(every.params, on_board.params);
    assert_eq!(results(&every), results(&on_board));
    let (_, ev) = every.device.as_ref().unwrap();
    assert!(
        st.bytes_from_device + 1_000 < ev.bytes_from_device,
        "{st:?} vs {ev:?}"
    );
    // --check recomputes every step on the golden model and compares the board's state.
    let checked = train(&d, 1, false, None, false, true);
    assert_eq!(results(&checked)[0], results(&on_board)[0]);
    // A heap without room for the data set: each request uploads its batches in the epoch's
    // order, and the steps are the same. Per step the link carries the batch and little more.
    let by_batch = train_on(TIGHT, &d, 2, (false, false, 1), None, false).unwrap();
    assert_eq!(by_batch.params, on_board.params);
    assert_eq!(results(&by_batch), results(&on_board));
    let (_, b) = by_batch.device.as_ref().unwrap();
    println!("resident: {st:?}\nbatch by batch: {b:?}");
    // The resident run sent the test split (359 images at 41 B) up once, the batch-by-batch
    // one does not (its heap has no room: the host evaluates on the parameters it reads).
    assert!(
        b.bytes_to_device + 359 * 41 > st.bytes_to_device + 100 * 41 / 2,
        "{b:?} vs {st:?}"
    );
    assert!(
        b.bytes_from_device > st.bytes_from_device,
        "{b:?} vs {st:?}"
    );
    // A heap without room for the step: refused before anything is uploaded, saying why.
    let e = train_on(20_000, &d, 1, (false, false, 1), None, false).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("the board has 20000") && text.contains("--host-step"),
        "{text}"
    );
}

/// A run trained on the board counts saturation as the golden model's run of the same steps:
/// per operation and per epoch, the board's steps and evaluations counted there and read back
/// after each epoch. The rate is high enough that outputs saturate and are retried.
#[test]
fn the_board_counts_saturation_as_the_golden_run_does() {
    let Some(b) = board() else { return };
    let d = data::load("digits").unwrap();
    let c = TrainConfig { lr: 0.5, ..cfg(2) };
    let device = format!("serial:{}", b.path().display());
    let on_board = run(&c, &d, &soc_opts(device), &mut Quiet).unwrap();
    b.close().unwrap();
    let golden = run(&c, &d, &soc_opts("golden".into()), &mut Quiet).unwrap();
    assert_eq!(on_board.params, golden.params);
    let retries: u64 = golden.saturation.values().map(|c| c.retries).sum();
    assert!(retries > 0, "no retries to count: {:?}", golden.saturation);
    assert_eq!(on_board.saturation, golden.saturation);
    let per_epoch = |s: &RunSummary| -> Vec<(u64, u64)> {
        s.history
            .iter()
            .map(|r| (r.retries, r.saturated_words))
            .collect()
    };
    assert_eq!(per_epoch(&on_board), per_epoch(&golden));
}

/// The training firmware on the Verilated SoC (VexRiscv, the 4x4 array, 16 clocks a UART bit)
/// on a pty: 3 digits-MLP steps (batch 32) run by the board through `systole train`'s run end
/// bit-identical to the same steps on the golden model, and the link carries the state and the
/// data set, not the step's tensors.
#[test]
#[ignore = "the training firmware on the Verilated SoC: a few minutes"]
fn three_steps_on_the_simulated_soc_equal_the_golden_model() {
    let (b, config) =
        match SimBoard::spawn_soc_training_image(systole_core::numeric::WORD_BITS, None) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
    let d = data::load("digits").unwrap();
    let c = three_steps(config.size, config.word_bits);
    let on_board = run(
        &c,
        &d,
        &soc_opts(format!("serial:{}", b.path().display())),
        &mut Quiet,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    // The training step's own stack on the board: the deepest use since boot (`STACK_USE`),
    // which must have stayed inside the reserve the image was linked with.
    let path = b.path().display().to_string();
    let mut dev = systole_device::serial::SerialDevice::open(&path, config).unwrap();
    let stack = dev.stack_use().unwrap();
    println!(
        "the training firmware's stack reached {} of its {} B reserve",
        stack.used, stack.reserve
    );
    assert_eq!(
        stack.reserve,
        systole_firmware::soc::TRAINING_STACK_RESERVE_BYTES,
        "the reserve the training image was linked with"
    );
    // A quarter of the reserve left: the paint cannot show a frame that reached below the
    // reserve's bottom word without writing it (at 8 KiB the step read 8,188 of 8,192 B, and
    // 8,264 B with a larger reserve: it had overrun into the heap).
    assert!(
        stack.fits() && stack.used <= stack.reserve / 4 * 3,
        "{stack:?}: raise TRAINING_STACK_RESERVE_BYTES"
    );
    let profile = dev.step_profile().unwrap();
    drop(dev);
    b.close().unwrap();
    print_step_profile(
        &profile,
        on_board.device.as_ref().map_or(0, |d| d.1.board_steps),
    );
    let golden = run(&c, &d, &soc_opts("golden".into()), &mut Quiet).unwrap();
    let (name, st) = on_board.device.as_ref().unwrap();
    for line in [format!("{name}: {st:?}"), on_board.arithmetic.clone()] {
        println!("{line}");
    }
    // The 3 steps and the probe step that measured the step's heap.
    assert_eq!(st.board_steps, 3 + 1);
    assert_eq!(st.ops, 0);
    assert_eq!(on_board.params, golden.params);
    assert_eq!(results(&on_board), results(&golden));
}

/// The training firmware on the Verilated SoC built at 8-bit words: 3 digits-MLP steps at
/// `--word-bits 8` run by the board end bit-identical to the same steps on the golden model at
/// 8 bits (the step saturates at W on both sides; the array's ports take the lanes' low 8 bits).
#[test]
#[ignore = "Verilates the training SoC at 8 bits at run time: minutes"]
fn three_steps_at_8_bits_on_the_simulated_soc_equal_the_golden_model() {
    let (b, config) = match SimBoard::spawn_soc_training_image(8, None) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    assert_eq!(config.word_bits, 8);
    let d = data::load("digits").unwrap();
    let c = three_steps(config.size, config.word_bits);
    let on_board = run(
        &c,
        &d,
        &soc_opts(format!("serial:{}", b.path().display())),
        &mut Quiet,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    b.close().unwrap();
    let golden = run(&c, &d, &soc_opts("golden".into()), &mut Quiet).unwrap();
    let (name, st) = on_board.device.as_ref().unwrap();
    println!("{name}: {st:?}");
    assert!(st.board_steps >= 3, "{st:?}");
    assert_eq!(on_board.params, golden.params);
    assert_eq!(results(&on_board), results(&golden));
}

/// Prints the board step's CPU cycles by section (`STEP_PROFILE`), per step, largest first:
/// the ranking docs/BOARD-TRAINING.md quotes.
fn print_step_profile(profile: &[systole_step::profile::SectionCycles], steps: u64) {
    use systole_step::profile::Section;
    let mut rows: Vec<_> = Section::ALL.iter().zip(profile).skip(1).collect();
    rows.sort_by_key(|(_, c)| std::cmp::Reverse(c.cycles));
    let total: u64 = rows.iter().map(|(_, c)| u64::from(c.cycles)).sum();
    let steps = steps.max(1);
    println!("the board step's CPU cycles by section, per step ({steps} steps):");
    for (s, c) in rows {
        println!(
            "  {:>10} {:5.1}% {:>6} entries  {}",
            u64::from(c.cycles) / steps,
            100.0 * c.cycles as f64 / total.max(1) as f64,
            u64::from(c.entries) / steps,
            s.name()
        );
    }
    println!("  {:>10} in all", total / steps);
}

/// The whole digits training set (1,438 images, packed at 5 bits a pixel) resident on the
/// Verilated training SoC beside the MLP's step at batch 32: the board measures the step's
/// heap in a probe step, the plan keeps the set resident, and 3 steps on it equal the golden
/// model's. The steps carry no data over the link. The test split is resident too and the
/// board's evaluation on it equals the host's.
#[test]
#[ignore = "the training firmware on the Verilated SoC: a few minutes"]
fn the_whole_digits_set_is_resident_on_the_simulated_soc() {
    let (b, config) =
        match SimBoard::spawn_soc_training_image(systole_core::numeric::WORD_BITS, None) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
    let d = data::load("digits").unwrap();
    let c = TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![32] },
        train_limit: None,
        epochs: 1,
        seed: 1,
        lr_decay: 1.0,
        array: config.size,
        ..cfg(1)
    };
    let path = b.path().display().to_string();
    let mut dev = systole_device::serial::SerialDevice::open(&path, config).unwrap();
    dev.set_retry_policy(std::time::Duration::from_secs(10), 3);
    let m = systole_train::board_bench::measure_steps(&mut dev, &c, &d, 3)
        .unwrap_or_else(|e| panic!("{e}: {e:?}"));
    println!("{}", m.fit);
    println!(
        "probe {:?}\ndata {:?}\nruns {:?}",
        m.probe, m.data_upload, m.runs
    );
    assert!(m.resident, "{}", m.fit);
    assert!(m.fit.contains("measured on the board"), "{}", m.fit);
    assert_eq!((m.images, m.bits, m.image_bytes), (1_438, 5, 41));
    assert_eq!(m.batch_uploads.bytes_to_device, 0);
    // The stack stayed inside the smaller reserve.
    let stack = dev.stack_use().unwrap();
    println!("stack {} of {} B", stack.used, stack.reserve);
    assert!(stack.used <= stack.reserve / 4 * 3, "{stack:?}");
    drop(dev);
    b.close().unwrap();
    let golden = systole_device::golden::GoldenDevice::new(config).unwrap();
    let arith = systole_train::on_device(Box::new(golden), c.rounding, c.seed, false);
    let mut t = systole_train::Trainer::new(c.clone(), &d, arith).unwrap();
    t.train_steps(&d, 3, &mut |_| {}).unwrap();
    assert_eq!(m.params, t.param_states());
    // The board's evaluation on its resident test split (359 images) after the steps, as
    // after epoch 1: the host's loss bits, correct count and remembered formats.
    println!(
        "evaluates {} test split {:?} evaluation {:?} answer {:?}",
        m.evaluates, m.test_upload, m.evaluation, m.eval
    );
    assert!(m.evaluates, "{}", m.fit);
    let a = m.eval.unwrap();
    t.epoch = 1;
    let (loss, acc) = t.evaluate(&d.test, d.features()).unwrap();
    assert_eq!(a.images, 359);
    assert_eq!(a.loss.to_bits(), loss.to_bits());
    assert_eq!(100.0 * a.correct as f32 / 359.0, acc);
    assert_eq!(m.fracs, systole_train::arith::Arith::state(&t.arith));
}
