//! Training on a board that trains itself (issue 17): the whole step runs on the board's CPU
//! (`systole_firmware`'s training session), the host uploads the state and the data set, asks
//! for N steps at a time and reads the state back for evaluation, checkpoints and the end.
//!
//! The host keeps a [`Trainer`] on the golden model beside it: it initialises the state,
//! evaluates each epoch (the golden model is the board's array bit for bit, and evaluation
//! changes the remembered formats, which then go back to the board), and under `--check` runs
//! every step itself and compares the board's state after it, naming the first difference.
//! The data set stays on the board when it fits its heap, else each request uploads its
//! batches in the epoch's order.

use crate::data::{pixel_divisor, Dataset};
use crate::fixed::{self, FixedArith};
use crate::run_options::{RunOptions, RunSummary};
use crate::{checkpoint, EpochRecord, Observer, TrainConfig, TrainError, Trainer};
use systole_device::board_train::{BoardTraining, MAX_RUN_STEPS};
use systole_device::DeviceError;
use systole_step::arith::Arith;
use systole_step::model::param_name;
use systole_step::resident::{DataSet, TrainState};

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

/// The host trainer's state as the board takes it.
pub(crate) fn state_of(t: &Trainer<FixedArith>) -> TrainState {
    TrainState {
        layers: t.layers.clone(),
        classes: t.classes,
        rounding: t.cfg.rounding,
        widths: t.arith.widths(),
        run_seed: t.cfg.seed,
        step: t.step,
        momentum: t.cfg.momentum,
        params: t.params.clone(),
        velocity: t.velocity.clone(),
        fracs: t.arith.state(),
    }
}

/// Takes the board's state into the host trainer (after checking it is this run's).
pub(crate) fn take_state(t: &mut Trainer<FixedArith>, s: TrainState) -> Result<(), TrainError> {
    if s.layers != t.layers || s.run_seed != t.cfg.seed || s.params.len() != t.params.len() {
        return Err(TrainError::Checkpoint(
            "the board's training state is not this run's".into(),
        ));
    }
    t.params = s.params;
    t.velocity = s.velocity;
    t.arith.set_state(s.fracs);
    t.step = s.step;
    Ok(())
}

/// The first difference between the host's state and the board's, named.
fn first_difference(host: &TrainState, board: &TrainState) -> Option<String> {
    if host.step != board.step {
        return Some(format!(
            "step counter: host {}, board {}",
            host.step, board.step
        ));
    }
    let tensors = |s: &TrainState| {
        s.params
            .iter()
            .chain(&s.velocity)
            .cloned()
            .collect::<Vec<_>>()
    };
    for (i, (h, b)) in tensors(host).iter().zip(&tensors(board)).enumerate() {
        let n = host.params.len();
        let name = if i < n {
            param_name(i)
        } else {
            format!("{} momentum", param_name(i - n))
        };
        if (h.rows, h.cols, h.frac) != (b.rows, b.cols, b.frac) {
            return Some(format!(
                "{name}: host {}x{} frac {}, board {}x{} frac {}",
                h.rows, h.cols, h.frac, b.rows, b.cols, b.frac
            ));
        }
        if let Some(k) = h.data.iter().zip(&b.data).position(|(x, y)| x != y) {
            return Some(format!(
                "{name} index {k} (row {}, column {}): host {}, board {}",
                k / h.cols,
                k % h.cols,
                h.data[k],
                b.data[k]
            ));
        }
    }
    (host.fracs != board.fracs).then(|| "the remembered formats".to_string())
}

/// Heap a step needs beside the state and the data set, estimated from the batch's largest
/// activations (the images as f32 and as words, each layer's outputs and gradients kept for
/// the backward pass) and twice the parameters (gradients, the update's new tensors).
fn step_heap(t: &Trainer<FixedArith>, batch: usize, features: usize) -> usize {
    let widest: usize = t
        .layers
        .iter()
        .map(|l| match *l {
            systole_step::model::Layer::Dense { out, .. } => out,
            systole_step::model::Layer::ConvBlock { out_ch, h, w, .. } => out_ch * h * w,
        })
        .sum();
    let params: usize = t.params.iter().map(|p| p.data.len()).sum();
    batch * features * 6 + batch * widest * 2 * 6 + params * 2 * 3 + 16 * 1024
}

/// The host's trainer beside the board: on the golden model of the board's array `config`.
pub(crate) fn host_trainer(
    cfg: &TrainConfig,
    data: &Dataset,
    config: &systole_core::ArrayConfig,
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
    Trainer::new(cfg.clone(), data, arith)
}

/// The run's training images (up to `--limit`) as the board takes them: 8-bit pixels, labels.
pub(crate) fn data_set(cfg: &TrainConfig, data: &Dataset) -> Result<DataSet, TrainError> {
    let n = data.train.len().min(cfg.train_limit.unwrap_or(usize::MAX));
    let features = data.features();
    let all: Vec<usize> = (0..n).collect();
    let images = Trainer::<FixedArith>::batch_images(&data.train, &all, features);
    DataSet::from_values(
        &images,
        &data.train.labels[..n],
        features,
        pixel_divisor(&data.name),
    )
    .map_err(|e| TrainError::Config(format!("the board trains on 8-bit pixels: {e}")))
}

/// The images `idx` of `set`, in that order, as a data set of their own (a request's batches).
pub(crate) fn images_of(set: &DataSet, idx: &[usize]) -> DataSet {
    DataSet {
        features: set.features,
        divisor: set.divisor,
        pixels: idx
            .iter()
            .flat_map(|&i| {
                set.pixels[i * set.features..(i + 1) * set.features]
                    .iter()
                    .copied()
            })
            .collect(),
        labels: idx.iter().map(|&i| set.labels[i]).collect(),
    }
}

/// How the board trains `t`'s run on `set` with a heap of `heap` bytes: whether the data set
/// stays resident, and how many batches one request runs (batch by batch: as many as fit the
/// heap beside the step, a record and its place in the order each image). Refuses a step
/// that does not fit.
pub(crate) fn plan(
    t: &Trainer<FixedArith>,
    data: &Dataset,
    set: &DataSet,
    heap: usize,
) -> Result<(bool, usize), TrainError> {
    let (cfg, features, n) = (&t.cfg, set.features, set.len());
    let state_bytes = state_of(t).encode().len();
    let need = state_bytes + step_heap(t, cfg.batch, features);
    if need > heap {
        return Err(TrainError::Config(format!(
            "{} at batch {} needs about {need} bytes of the board's heap (state {state_bytes}, step {}), the board has {heap}: train a smaller model or batch, or drive the step from the host with --host-step",
            cfg.model.describe(data.channels, data.height, data.width, data.classes),
            cfg.batch,
            need - state_bytes
        )));
    }
    let resident = need + set.pixels.len() + set.labels.len() + 4 * n <= heap;
    let per_upload = if resident {
        MAX_RUN_STEPS
    } else {
        ((heap - need) / (cfg.batch * (features + 1 + 4))).clamp(1, MAX_RUN_STEPS)
    };
    Ok((resident, per_upload))
}

/// Trains `cfg` on the board behind `dev_arith`'s device; the host's own trainer runs on the
/// golden model of the same array.
pub(crate) fn run(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    mut dev_arith: FixedArith,
) -> Result<RunSummary, TrainError> {
    let dev = dev_arith.products_mut().device_mut();
    let mut t = host_trainer(cfg, data, dev.config())?;
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
        t.restore(checkpoint::Checkpoint::load(p)?)?;
    }
    if let Some(d) = &opts.out {
        crate::outfile::probe_dir(d, 2 * t.checkpoint().size_bound() + (1 << 20))?;
    }
    let set = data_set(cfg, data)?;
    let n = set.len();
    let name = dev.name();
    let mut board = dev
        .board_training()
        .ok_or_else(|| TrainError::Config(format!("{name} does not train itself")))?;
    let heap = board.heap_bytes() as usize;
    let (resident, per_upload) = plan(&t, data, &set, heap)?;
    obs.run_start(&format!(
        "the whole training step runs on the board ({name}: its heap {heap} bytes; data set {})",
        if resident {
            format!("resident, {n} images uploaded once")
        } else {
            "uploaded batch by batch: it does not fit beside the step".to_string()
        }
    ));
    if resident {
        board
            .write_data(&set)
            .map_err(dev_err("uploading the data set"))?;
    }
    let mut state_on_board = false;
    while t.epoch < cfg.epochs {
        epoch(
            &mut t,
            &mut board,
            (data, &set),
            (opts.check, resident, per_upload),
            &mut state_on_board,
            obs,
        )?;
        if let Some(p) = &ck_path {
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

/// One epoch on the board, then the state back and the evaluation on the host.
fn epoch(
    t: &mut Trainer<FixedArith>,
    board: &mut BoardTraining<'_>,
    (data, set): (&Dataset, &DataSet),
    (check, resident, per_upload): (bool, bool, usize),
    state_on_board: &mut bool,
    obs: &mut dyn Observer,
) -> Result<EpochRecord, TrainError> {
    let t0 = std::time::Instant::now();
    if !*state_on_board {
        board
            .write_state(&state_of(t))
            .map_err(dev_err("uploading the training state"))?;
        *state_on_board = true;
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
                .write_data(&images_of(set, idx))
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
    if !check {
        let s = board
            .read_state()
            .map_err(dev_err("reading the state back"))?;
        take_state(t, s)?;
    }
    let fracs = t.arith.state();
    t.epoch += 1;
    let rec = t.finish_epoch(data, t0, (loss_sum, n), correct, sat0, obs)?;
    // Evaluation remembers formats too: the board must go on with the host's.
    if t.arith.state() != fracs {
        *state_on_board = false;
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::Rounding;
    use systole_golden::tensor::QMatrix;
    use systole_step::model::Layer;
    use systole_step::Widths;

    fn state() -> TrainState {
        TrainState {
            layers: vec![Layer::Dense {
                inp: 2,
                out: 3,
                relu: false,
            }],
            classes: 3,
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
