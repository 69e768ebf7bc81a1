//! Training on a board that trains itself, with faults on the serial link
//! (`systole_device::board_sim::faults::FaultProxy` between the host and the pty board): a board
//! that stalls mid-run is detected within seconds with the checkpoint kept; a request or an
//! answer lost on the line costs a resend, not the whole request's wait; answers that arrive
//! damaged are reported as damage, not silence. Each run has a watchdog, so a regression fails
//! in seconds instead of hanging for the old two-minute waits.

use std::sync::mpsc;
use std::time::{Duration, Instant};
use systole_core::{ArrayConfig, Rounding};
use systole_device::board_sim::faults::{Direction, Fault, FaultProxy};
use systole_device::board_sim::SimBoard;
use systole_firmware::protocol::cmd::RUN_STEPS;
use systole_firmware::protocol::train::WORKING;
use systole_firmware::protocol::RESPONSE;
use systole_train::data::{self, Dataset};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions, RunSummary};
use systole_train::{Precision, Quiet, TrainConfig, TrainError};

/// The longest any run here may take: far below the old waits (120 s per try of a step).
const WATCHDOG: Duration = Duration::from_secs(40);

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

/// A training board on a pty; `None` (the test is skipped) without the Verilated models.
fn board() -> Option<SimBoard> {
    let config = ArrayConfig::square(4);
    let sim = match systole_sim::VerilatedArray::new(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: {e}");
            return None;
        }
    };
    Some(SimBoard::spawn_training(config, move || sim, 1 << 20).unwrap())
}

/// Trains `epochs` through `proxy` (into `out` when given) on another thread; the result and
/// the wall time, or a panic when the watchdog fires first.
fn train_through(
    proxy: &FaultProxy,
    data: &Dataset,
    epochs: usize,
    out: Option<&std::path::Path>,
) -> (Result<RunSummary, TrainError>, Duration) {
    let opts = RunOptions {
        device: format!("serial:{}", proxy.path().display())
            .parse()
            .unwrap(),
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: out.map(Into::into),
        resume: false,
        overwrite: false,
        trace: None,
    };
    let (tx, rx) = mpsc::channel();
    let data = data.clone();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(run(&cfg(epochs), &data, &opts, &mut Quiet));
    });
    let r = rx
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("the run did not end within {WATCHDOG:?}"));
    (r, t0.elapsed())
}

fn results(s: &RunSummary) -> Vec<(f32, f32, f32, f32)> {
    s.history
        .iter()
        .map(|r| (r.train_loss, r.train_acc, r.test_loss, r.test_acc))
        .collect()
}

fn text(e: &TrainError) -> String {
    systole_device::error_chain(e)
}

/// The board stops (as a board whose process got SIGSTOP) after the first step of epoch 2:
/// the host says so within seconds, and epoch 1's checkpoint is kept.
#[test]
fn a_board_that_stalls_mid_run_is_detected_in_seconds_and_the_checkpoint_kept() {
    let Some(b) = board() else { return };
    let proxy = FaultProxy::spawn(b.path()).unwrap();
    let d = data::load("digits").unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Epoch 1: the acceptance and 4 steps' reports; epoch 2: the acceptance and one step.
    proxy.arm(Fault::StallAfter {
        cmd: WORKING,
        count: 5 + 2,
    });
    let (r, _) = train_through(&proxy, &d, 2, Some(dir.path()));
    let stalled = proxy.stalled_at().expect("the link stalled");
    let detected = stalled.elapsed();
    let e = r.expect_err("a stalled board gives no result");
    eprintln!("stall detected after {detected:?}: {}", text(&e));
    assert!(text(&e).contains("stopped answering"), "{}", text(&e));
    assert!(detected < Duration::from_secs(10), "{detected:?}");
    let ck = systole_train::checkpoint::Checkpoint::load(&dir.path().join("checkpoint.json"));
    assert_eq!(ck.unwrap().epoch, 1);
}

/// One `RUN_STEPS` request lost on its way to the board (its sync byte hit), then one answer
/// lost on its way back: each costs a resend within about a second, and the run ends with the
/// same results as a clean one.
#[test]
fn a_lost_request_or_answer_costs_a_resend_not_the_whole_wait() {
    let Some(b) = board() else { return };
    let proxy = FaultProxy::spawn(b.path()).unwrap();
    let d = data::load("digits").unwrap();
    let (clean, t_clean) = train_through(&proxy, &d, 1, None);
    let clean = clean.unwrap();
    for (dir, cmd) in [
        (Direction::ToBoard, RUN_STEPS),
        (Direction::ToHost, RUN_STEPS | RESPONSE),
    ] {
        let flipped = proxy.counts().flipped;
        proxy.arm(Fault::FlipSync {
            dir,
            cmd: Some(cmd),
            times: 1,
        });
        let (r, t) = train_through(&proxy, &d, 1, None);
        let r = r.unwrap_or_else(|e| panic!("{dir:?}: {}", text(&e)));
        eprintln!("{dir:?}: {t:?} with the frame lost, {t_clean:?} clean");
        assert_eq!(proxy.counts().flipped, flipped + 1, "{dir:?}");
        assert_eq!(results(&r), results(&clean), "{dir:?}");
        assert!(t < t_clean + Duration::from_secs(4), "{dir:?}: {t:?}");
    }
}

/// Every answer from the board arrives with a flipped bit: the error says the answers were
/// damaged, not that the board was silent, and comes within seconds.
#[test]
fn damaged_answers_are_reported_as_damage_not_silence() {
    let Some(b) = board() else { return };
    let proxy = FaultProxy::spawn(b.path()).unwrap();
    let d = data::load("digits").unwrap();
    proxy.arm(Fault::FlipByte {
        dir: Direction::ToHost,
        offset: 6,
        times: usize::MAX,
    });
    let (r, t) = train_through(&proxy, &d, 1, None);
    let e = r.expect_err("no answer arrived whole");
    eprintln!("after {t:?}: {}", text(&e));
    assert!(text(&e).contains("answers arrived damaged"), "{}", text(&e));
    assert!(t < Duration::from_secs(10), "{t:?}");
}

/// The board stops as the training state goes up (after its first chunk arrived): the host
/// waits a frame's time for each chunk but the last, so it says so within seconds, not after
/// four tries of a minute.
#[test]
fn a_board_that_stops_during_an_upload_is_detected_in_seconds() {
    let Some(b) = board() else { return };
    let proxy = FaultProxy::spawn(b.path()).unwrap();
    let d = data::load("digits").unwrap();
    proxy.arm(Fault::StallWhenSent {
        cmd: systole_firmware::protocol::cmd::STATE_WRITE,
    });
    let (r, t) = train_through(&proxy, &d, 1, None);
    let e = r.expect_err("a stalled board gives no result");
    eprintln!("after {t:?}: {}", text(&e));
    assert!(proxy.stalled_at().is_some());
    assert!(
        text(&e).contains("uploading the training state"),
        "{}",
        text(&e)
    );
    assert!(t < Duration::from_secs(10), "{t:?}");
}

/// A board with a tensor store stops while it runs a `MATMUL`, after `before` products ran
/// on the link: the time from the stall to the error, which must say there was no answer.
fn stall_during_a_product(before: usize) -> Option<Duration> {
    use systole_golden::tensor::QMatrix;
    use systole_golden::OutputSpec;
    let config = ArrayConfig::square(4);
    if systole_sim::VerilatedArray::new(&config).is_err() {
        eprintln!("skipped: no Verilated array");
        return None;
    }
    let b = SimBoard::spawn_verilated_with_store(config, 1 << 16).unwrap();
    let proxy = FaultProxy::spawn(b.path()).unwrap();
    let spec = format!("serial:{}", proxy.path().display());
    let (tx, rx) = mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
    let (arm, stalled) = (std::sync::Arc::new(proxy), stop.clone());
    let p = arm.clone();
    std::thread::spawn(move || {
        let mut dev = systole_device::open(&spec, config).unwrap();
        let a = QMatrix::from_vec(24, 40, 8, (0..960).map(|i| (i % 97) as i16).collect()).unwrap();
        let w = QMatrix::from_vec(40, 24, 8, (0..960).map(|i| (i % 89) as i16).collect()).unwrap();
        let out = OutputSpec {
            frac: 8,
            rounding: Rounding::NearestEven,
            seed: 1,
        };
        for _ in 0..before {
            dev.matmul(&a, &w, &out).unwrap();
        }
        p.arm(Fault::StallWhenSent {
            cmd: systole_firmware::protocol::cmd::MATMUL,
        });
        *stalled.lock().unwrap() = Some(Instant::now());
        let r = dev
            .matmul(&a, &w, &out)
            .map(|_| ())
            .map_err(|e| systole_device::error_chain(&e));
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("the product did not end within {WATCHDOG:?}"));
    let t = stop.lock().unwrap().expect("the stall was armed").elapsed();
    let e = r.expect_err("a stalled board gives no result");
    eprintln!("after {t:?}: {e}");
    assert!(arm.stalled_at().is_some());
    assert!(e.contains("no answer"), "{e}");
    Some(t)
}

/// Once a product's pace was measured on the link, the wait is a few times the product's own
/// time, so a board that stops during one is found within seconds (it waited a minute a try
/// before).
#[test]
fn a_board_that_stops_during_a_product_is_detected_in_seconds() {
    if let Some(t) = stall_during_a_product(3) {
        assert!(t < Duration::from_secs(10), "{t:?}");
    }
}

/// Before any pace was measured, the first product waits what its work can take on the
/// slowest board (its multiply-accumulates at a conservative rate, at least a floor): a board
/// that stops during the very first product is found within seconds too.
#[test]
fn a_board_that_stops_during_its_first_product_is_detected_in_seconds() {
    if let Some(t) = stall_during_a_product(0) {
        assert!(t < Duration::from_secs(10), "{t:?}");
    }
}
