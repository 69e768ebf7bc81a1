//! Training on a board that trains itself: the whole step runs on the board's CPU
//! (`systole_firmware`'s training session), the host uploads the state and the data set, asks
//! for N steps at a time and reads the state back for evaluation, checkpoints and the end.
//!
//! The host keeps a [`Trainer`] on the golden model beside it: it initialises the state,
//! evaluates each epoch (the golden model is the board's array bit for bit, and evaluation
//! changes the remembered formats, which then go back to the board), and under `--check` runs
//! every step itself and compares the board's state after it, naming the first difference.
//! The data set stays on the board when it fits its heap, else each request uploads its
//! batches in the epoch's order.

use crate::data::Dataset;
use crate::fixed::{self, FixedArith};
use crate::run_options::{RunOptions, RunSummary};
use crate::{checkpoint, EpochRecord, Observer, TrainConfig, TrainError, Trainer};
use std::collections::BTreeMap;
use systole_device::board_train::BoardTraining;
use systole_device::DeviceError;
use systole_step::arith::Arith;
use systole_step::resident::DataSet;
use systole_step::SaturationCount;

pub(crate) mod plan;
mod state;

pub(crate) use state::{first_difference, state_of, take_params, take_state};

/// Whether the device of `arith` is a board that trains itself.
pub(crate) fn trains(arith: &mut FixedArith) -> bool {
    arith.products_mut().device_mut().board_training().is_some()
}

pub(crate) fn dev_err(op: &str) -> impl Fn(DeviceError) -> TrainError + '_ {
    move |source| TrainError::Device {
        op: op.to_string(),
        source,
    }
}

/// What crosses the link in a run, in words (the run's header): `evaluates` when the board
/// evaluates on its own test split, `out` when checkpoints are written.
fn link_words(
    board: &BoardTraining<'_>,
    opts: &RunOptions,
    (resident, evaluates, out): (bool, bool, bool),
) -> String {
    let data = match (resident, evaluates) {
        (true, true) => "the data set and the test split once",
        (true, false) => "the data set once",
        (false, _) => "each request's batches",
    };
    let every = opts.checkpoint_every;
    let back = match (opts.check, evaluates, board.reads_parts(), out) {
        (true, _, _, _) => "the whole state after every step (--check)".to_string(),
        (false, true, _, true) => format!(
            "each epoch's test loss and correct count (the board evaluates), the whole state every {every} epoch(s) for the checkpoint and at the end (those epochs the host evaluates on it)"
        ),
        (false, true, _, false) => {
            "each epoch's test loss and correct count (the board evaluates), the whole state at the end (the last epoch the host evaluates on it)".into()
        }
        (false, false, false, _) => {
            "the whole state each epoch (the board's firmware reads no less)".into()
        }
        (false, false, true, true) => format!(
            "the parameters each epoch for the host's evaluation, the whole state every {every} epoch(s) for the checkpoint and at the end"
        ),
        (false, false, true, false) => {
            "the parameters each epoch for the host's evaluation, the whole state at the end".into()
        }
    };
    let formats = match evaluates {
        true => "",
        false => ", the remembered formats when an evaluation changes them",
    };
    format!(
        "the link carries: the state up once, {data}, each step's loss and correct count{formats}; back {back}"
    )
}

/// The host's trainer beside the board: on the golden model of the board's array `config`,
/// from `start` (a model file's weights) or the seed.
pub(crate) fn host_trainer(
    cfg: &TrainConfig,
    data: &Dataset,
    config: &systole_core::ArrayConfig,
    start: Option<&crate::model::Params>,
) -> Result<Trainer<FixedArith>, TrainError> {
    let golden = systole_device::golden::GoldenDevice::new(*config)
        .map_err(dev_err("opening the golden model"))?;
    let arith = fixed::on_device_at(
        Box::new(golden),
        cfg.rounding,
        cfg.seed,
        false,
        cfg.widths()?,
    );
    Trainer::start(cfg.clone(), data, arith, start)
}

/// The run's training images (up to `--limit`) as the board takes them: pixels packed at the
/// bits they need, labels.
pub(crate) fn data_set(cfg: &TrainConfig, data: &Dataset) -> Result<DataSet, TrainError> {
    let n = data.train.len().min(cfg.train_limit.unwrap_or(usize::MAX));
    let features = data.features();
    let all: Vec<usize> = (0..n).collect();
    let divisor = data.byte_divisor.ok_or_else(|| {
        TrainError::Config(format!(
            "the board trains on byte pixels / pixel_max, and {} holds other values (float images, or --input-scale / --input-offset other than 1 and 0): train it on the host (--host-step)",
            data.name
        ))
    })?;
    let images = Trainer::<FixedArith>::batch_images(&data.train, &all, features);
    DataSet::from_values(&images, &data.train.labels[..n], features, divisor)
        .map_err(|e| TrainError::Config(format!("the board trains on byte pixels: {e}")))
}

/// The run's test split as the board takes it, packed; `None` when its values are not byte
/// pixels (the host evaluates).
pub(crate) fn test_set(data: &Dataset) -> Option<DataSet> {
    let features = data.features();
    DataSet::from_values(
        &data.test.images,
        &data.test.labels,
        features,
        data.byte_divisor?,
    )
    .ok()
}

/// Trains `cfg` on the board behind `dev_arith`'s device from `start` (or the seed); the
/// host's own trainer runs on the golden model of the same array.
pub(crate) fn run(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    (mut dev_arith, start): (FixedArith, Option<&crate::model::Params>),
) -> Result<RunSummary, TrainError> {
    let dev = dev_arith.products_mut().device_mut();
    let mut t = host_trainer(cfg, data, dev.config(), start)?;
    let ck_path = opts.out.as_ref().map(|d| d.join(checkpoint::FILE_NAME));
    if opts.resume {
        let p = ck_path.as_ref().ok_or_else(|| {
            TrainError::Config("--resume needs --out DIR holding checkpoint.json".into())
        })?;
        if !p.exists() {
            return Err(TrainError::Checkpoint(format!(
                "{} does not exist: nothing to resume",
                p.display()
            )));
        }
        let ck = checkpoint::Checkpoint::load_for(p, &t.checkpoint(), data.train.len())?;
        t.restore(ck)?;
    }
    if let Some(d) = &opts.out {
        crate::outfile::probe_dir(d, 2 * t.checkpoint().size_bound() + (1 << 20))?;
    }
    let set = data_set(cfg, data)?;
    let name = dev.name();
    let mut board = dev
        .board_training()
        .ok_or_else(|| TrainError::Config(format!("{name} does not train itself")))?;
    let test = board.evaluates().then(|| test_set(data)).flatten();
    let fit = plan::measure(&t, &mut board, &set, test.as_ref())?;
    let p = fit
        .plan(cfg.batch)
        .ok_or_else(|| plan::no_room(&fit, data, &t))?;
    let (resident, per_upload) = (p.resident, p.per_upload);
    let evaluates = fit.board_evaluates(&p);
    obs.run_start(&format!(
        "the whole training step runs on the board ({name}); {}; {}",
        fit.describe(&p, set.bits),
        link_words(&board, opts, (resident, evaluates, ck_path.is_some()))
    ));
    if let Some(test) = test.as_ref().filter(|_| fit.test_uploaded && !evaluates) {
        // The probe's test split does not fit beside the run: one record in its place.
        board
            .write_test_data(&test.select(&[0]))
            .map_err(dev_err("dropping the test split"))?;
    }
    if resident {
        board
            .write_data(&set)
            .map_err(dev_err("uploading the data set"))?;
    }
    if let Some(test) = test.as_ref().filter(|_| evaluates && !fit.test_uploaded) {
        board
            .write_test_data(test)
            .map_err(dev_err("uploading the test split"))?;
    }
    // Not the run's state yet: after a probe step the board holds the probe's.
    let mut sync = BoardSync::default();
    while t.epoch < cfg.epochs {
        // The whole state comes back for a checkpoint and at the end; else the parameters.
        let due = opts.checkpoint_due(t.epoch + 1, cfg.epochs);
        let whole = t.epoch + 1 >= cfg.epochs || (due && ck_path.is_some());
        epoch(
            &mut t,
            &mut board,
            (data, &set),
            (opts.check, resident, per_upload, whole),
            evaluates,
            &mut sync,
            obs,
        )?;
        if let Some(p) = ck_path.as_ref().filter(|_| due) {
            t.checkpoint().save(p)?;
        }
    }
    drop(board);
    let dev = dev_arith.products_mut().device_mut();
    Ok(RunSummary {
        config: cfg.clone(),
        model: cfg
            .model
            .describe(data.channels, data.height, data.width, data.classes),
        network: crate::run_options::network_lines(t.graph()),
        arithmetic: format!(
            "{}, the step on the board ({})",
            t.arith.describe(),
            dev.name()
        ),
        history: t.history.clone(),
        device: Some((dev.name(), dev.stats())),
        saturation: t.arith.saturation(),
        params: t.param_states(),
    })
}

/// What the host knows of the board's state between epochs.
#[derive(Clone, Debug, Default)]
struct BoardSync {
    /// The board's saturation counts (since its state went up) already added to the host's.
    saturation: BTreeMap<String, SaturationCount>,
    /// The board holds the run's state (else it goes up before the next steps).
    on_board: bool,
    /// The host's momentum tensors are older than the board's (only the parameters came
    /// back): the whole state must come back before the host writes or uploads it.
    velocity_stale: bool,
}

/// One epoch on the board, then the state (`whole`) or its parameters back and the evaluation
/// on the host.
fn epoch(
    t: &mut Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    (data, set): (&Dataset, &DataSet),
    (check, resident, per_upload, whole): (bool, bool, usize, bool),
    evaluates: bool,
    sync: &mut BoardSync,
    obs: &mut dyn Observer,
) -> Result<EpochRecord, TrainError> {
    let t0 = std::time::Instant::now();
    if !sync.on_board {
        board
            .write_state(&state_of(t))
            .map_err(dev_err("uploading the training state"))?;
        sync.on_board = true;
        sync.saturation.clear();
    }
    let n = set.len();
    let batch = t.cfg.batch;
    let batches = n.div_ceil(batch);
    let lr = t.cfg.lr_at(t.epoch);
    let order = systole_step::rng::epoch_order(t.cfg.seed, t.epoch as u64, n);
    obs.epoch_start(t.epoch + 1, batches);
    let sat0 = crate::saturation_totals(&t.arith);
    let (mut loss_sum, mut correct) = (0f64, 0usize);
    let per = if check { 1 } else { per_upload };
    let mut first = 0;
    let epoch32 =
        u32::try_from(t.epoch).map_err(|_| TrainError::Config("too many epochs".into()))?;
    let batch16 = u16::try_from(batch)
        .map_err(|_| TrainError::Config(format!("--batch {batch} is over the board's 65535")))?;
    while first < batches {
        let k = per.min(batches - first);
        let results = if resident {
            board.run_steps((epoch32, first as u32), k as u16, batch16, lr, false)
        } else {
            // The epoch's next batches, in its order, as the board's whole data set.
            let idx = &order[first * batch..((first + k) * batch).min(n)];
            board
                .write_data(&set.select(idx))
                .map_err(dev_err("uploading a batch"))?;
            board.run_steps((epoch32, 0), k as u16, batch16, lr, true)
        };
        let (_, results) = results.map_err(dev_err("training steps on the board"))?;
        for (s, (loss, ok)) in results.into_iter().enumerate() {
            let b = first + s;
            let rows = ((b + 1) * batch).min(n) - b * batch;
            loss_sum += loss as f64 * rows as f64;
            correct += usize::from(ok);
            obs.batch_done();
        }
        // Between the board's runs of steps (the board's state is dropped with the run).
        t.stop_if_asked(obs)?;
        if check {
            // The same step on the host's golden model, then the board's state against it.
            let idx = order[first * batch..((first + 1) * batch).min(n)].to_vec();
            t.train_batch(data, &idx, lr)?;
            let on_board = board
                .read_state()
                .map_err(dev_err("reading the state back"))?;
            if let Some(d) = first_difference(&state_of(t), &on_board) {
                return Err(TrainError::Mismatch {
                    op: format!("training step {} on the board", t.step - 1),
                    detail: format!(
                        "the board's state differs from the golden model's first at {d}"
                    ),
                });
            }
        }
        first += k;
    }
    // An epoch whose whole state comes back anyway (a checkpoint, the end) is evaluated by the
    // host on it (its formats then go back alone): cheaper than the board's evaluation.
    if evaluates && (check || !whole) {
        t.epoch += 1;
        let test = evaluate_on_board(t, board, data, (check, whole), sync)?;
        take_saturation(t, board, sync, check)?;
        return t.record_epoch(t0, (loss_sum, n), correct, sat0, test, obs);
    }
    // Under --check the host ran every step itself: its state is the board's already.
    if !check && (whole || !board.reads_parts()) {
        let s = board
            .read_state()
            .map_err(dev_err("reading the state back"))?;
        take_state(t, s)?;
        sync.velocity_stale = false;
    } else if !check {
        let s = board
            .read_params()
            .map_err(dev_err("reading the parameters back"))?;
        take_params(t, s)?;
        sync.velocity_stale = true;
    }
    take_saturation(t, board, sync, check)?;
    let fracs = t.arith.state();
    t.epoch += 1;
    let rec = t.finish_epoch(data, t0, (loss_sum, n), correct, sat0, obs)?;
    // Evaluation remembers formats too: the board must go on with the host's.
    if t.arith.state() != fracs {
        send_formats(t, board, sync)?;
    }
    Ok(rec)
}

/// The epoch's evaluation on the board (`t.epoch` counts the epoch already): its loss and
/// accuracy. Under `check` the host evaluates too and the loss, the accuracy and the board's
/// whole state (its formats after the evaluation) must equal the host's; else the whole state
/// comes back when `whole` (after the evaluation: the checkpoint holds its formats; the run
/// asks for it only under `check`).
fn evaluate_on_board(
    t: &mut Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    data: &Dataset,
    (check, whole): (bool, bool),
    sync: &mut BoardSync,
) -> Result<(f32, f32), TrainError> {
    let epochs =
        u32::try_from(t.epoch).map_err(|_| TrainError::Config("too many epochs".into()))?;
    let a = board
        .evaluate(epochs)
        .map_err(dev_err("the evaluation on the board"))?;
    let n = data.test.len();
    if a.images as usize != n {
        return Err(TrainError::Checkpoint(format!(
            "the board evaluated {} images, the run's test split has {n}",
            a.images
        )));
    }
    let test = (a.loss, 100.0 * a.correct as f32 / n.max(1) as f32);
    if check {
        let host = t.evaluate(&data.test, data.features())?;
        let on_board = board
            .read_state()
            .map_err(dev_err("reading the state back"))?;
        let differs = |what: &str| TrainError::Mismatch {
            op: format!("the evaluation after epoch {} on the board", t.epoch),
            detail: format!(
                "the board's evaluation differs from the golden model's first at {what}"
            ),
        };
        if host.0.to_bits() != test.0.to_bits() {
            return Err(differs(&format!(
                "the loss: host {}, board {}",
                host.0, test.0
            )));
        }
        if host.1.to_bits() != test.1.to_bits() {
            return Err(differs(&format!(
                "the accuracy: host {}%, board {}%",
                host.1, test.1
            )));
        }
        if let Some(d) = first_difference(&state_of(t), &on_board) {
            return Err(differs(&d));
        }
    } else if whole {
        let s = board
            .read_state()
            .map_err(dev_err("reading the state back"))?;
        take_state(t, s)?;
        sync.velocity_stale = false;
    } else {
        // The host's tensors and formats are the board's of an earlier epoch now.
        sync.velocity_stale = true;
    }
    Ok(test)
}

/// Adds the board's saturation counts since the last look to the host's (not under `check`).
fn take_saturation(
    t: &mut Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    sync: &mut BoardSync,
    check: bool,
) -> Result<(), TrainError> {
    let read = (!check).then(|| board.saturation());
    let Some(Some(now)) = read
        .transpose()
        .map_err(dev_err("reading the saturation counts"))?
    else {
        return Ok(());
    };
    let new: BTreeMap<String, SaturationCount> = now
        .iter()
        .map(|(op, c)| {
            let seen = sync.saturation.get(op).copied().unwrap_or_default();
            let add = SaturationCount {
                ops: c.ops.saturating_sub(seen.ops),
                retries: c.retries.saturating_sub(seen.retries),
                saturated_words: c.saturated_words.saturating_sub(seen.saturated_words),
            };
            (op.clone(), add)
        })
        .collect();
    t.arith.add_saturation(&new);
    sync.saturation = now;
    Ok(())
}

/// After an evaluation changed the remembered formats: the formats alone to a board that
/// takes them, else the whole state goes up before the next steps (its momentum read back
/// first when the host's is stale).
fn send_formats(
    t: &mut Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    sync: &mut BoardSync,
) -> Result<(), TrainError> {
    match board.write_formats(&t.arith.state()) {
        Ok(()) => return Ok(()),
        Err(DeviceError::Unsupported(_)) => {}
        Err(e) => return Err(dev_err("sending the remembered formats")(e)),
    }
    if sync.velocity_stale {
        let s = board
            .read_state()
            .map_err(dev_err("reading the state back"))?;
        if s.velocity.len() != t.velocity.len() {
            return Err(TrainError::Checkpoint(
                "the board's training state is not this run's".into(),
            ));
        }
        t.velocity = s.velocity;
        sync.velocity_stale = false;
    }
    sync.on_board = false;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::Rounding;
    use systole_golden::tensor::QMatrix;
    use systole_step::graph::builtin::mlp;
    use systole_step::resident::TrainState;
    use systole_step::{Shape, Widths};

    fn state() -> TrainState {
        TrainState {
            graph: mlp(Shape::flat(2), &[], 3).unwrap(),
            rounding: Rounding::Stochastic,
            widths: Widths::FULL,
            run_seed: 1,
            step: 4,
            momentum: 0.9,
            params: vec![QMatrix::zeros(2, 3, 14), QMatrix::zeros(1, 3, 15)],
            velocity: vec![QMatrix::zeros(2, 3, 15), QMatrix::zeros(1, 3, 15)],
            fracs: Default::default(),
        }
    }

    /// `--check` on the board names the first tensor and index that differ.
    #[test]
    fn the_first_difference_is_named_by_tensor_and_index() {
        let host = state();
        assert_eq!(first_difference(&host, &host), None);
        let mut board = state();
        board.velocity[0].data[4] = 7;
        board.params[1].data[2] = -1;
        assert_eq!(
            first_difference(&host, &board).as_deref(),
            Some("layer 1 b index 2 (row 0, column 2): host 0, board -1")
        );
        board.params[1].data[2] = 0;
        assert_eq!(
            first_difference(&host, &board).as_deref(),
            Some("layer 1 W momentum index 4 (row 1, column 1): host 0, board 7")
        );
        board.step = 5;
        assert_eq!(
            first_difference(&host, &board).as_deref(),
            Some("step counter: host 4, board 5")
        );
    }
}
