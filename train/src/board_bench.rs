//! The training step on the board, measured (`systole bench --link`): the first steps of an
//! epoch run exactly as `systole train` runs them on a board that trains itself (the same
//! plan: resident data set when it fits the board's heap, else the epoch's batches uploaded
//! request by request), with the device's counters ([`DeviceStats`], as run.json has them)
//! taken around each request, so the per-step costs and the one-time costs come apart.

use crate::arith::TensorState;
use crate::board::{data_set, dev_err, host_trainer, plan, state_of, take_state};
use crate::data::Dataset;
use crate::{TrainConfig, TrainError};
use systole_device::board_train::BoardTraining;
use systole_device::{Device, DeviceStats};
use systole_step::resident::DataSet;

/// `op` applied counter by counter to `a` and `b` (the one list of the counters here).
pub fn combine(a: &DeviceStats, b: &DeviceStats, op: impl Fn(u64, u64) -> u64) -> DeviceStats {
    DeviceStats {
        ops: op(a.ops, b.ops),
        macs: op(a.macs, b.macs),
        cycles: op(a.cycles, b.cycles),
        mac_cycles: op(a.mac_cycles, b.mac_cycles),
        bytes_to_device: op(a.bytes_to_device, b.bytes_to_device),
        bytes_from_device: op(a.bytes_from_device, b.bytes_from_device),
        frames: op(a.frames, b.frames),
        round_trips: op(a.round_trips, b.round_trips),
        resends: op(a.resends, b.resends),
        port_bytes: op(a.port_bytes, b.port_bytes),
        tensor_bytes: op(a.tensor_bytes, b.tensor_bytes),
        firmware_cycles: op(a.firmware_cycles, b.firmware_cycles),
        board_ops: op(a.board_ops, b.board_ops),
        board_steps: op(a.board_steps, b.board_steps),
    }
}

/// `now - before`, counter by counter (counters only grow).
pub fn difference(now: &DeviceStats, before: &DeviceStats) -> DeviceStats {
    combine(now, before, u64::saturating_sub)
}

/// What the first steps of a run cost on a board that trains itself.
#[derive(Clone, Debug)]
pub struct BoardSteps {
    /// Steps run.
    pub steps: usize,
    /// The data set stayed on the board (uploaded once); else batch by batch.
    pub resident: bool,
    /// Batches a `RUN_STEPS` request runs (batch by batch: as many as fit beside the step).
    pub per_request: usize,
    /// Images of the run's training set (what a resident upload carries).
    pub images: usize,
    /// Bytes of one image's record (its packed pixels and its label).
    pub image_bytes: usize,
    /// Bits a pixel of the data set as it went up.
    pub bits: u8,
    /// The fit in words (the run header's): what decided where the data set lives.
    pub fit: String,
    /// The probe step that measured the step's heap on the board (its state, batch,
    /// `HEAP_USE` and `RUN_STEPS`), once per run; zero on a board that does not measure.
    pub probe: DeviceStats,
    /// Uploading the training state (`STATE_WRITE`), once per run.
    pub state_upload: DeviceStats,
    /// Uploading the whole data set (`DATA_WRITE`), once per run; zero batch by batch.
    pub data_upload: DeviceStats,
    /// The steps' batches uploaded (`DATA_WRITE` per request; zero when resident).
    pub batch_uploads: DeviceStats,
    /// The steps' `RUN_STEPS` requests (their cycles: the board's CPU and array).
    pub runs: DeviceStats,
    /// Reading the whole state back (`STATE_READ`): at checkpoints and the end (each epoch
    /// on older firmware, `params_read` zero).
    pub state_read: DeviceStats,
    /// Reading the parameters alone back for the host's evaluation (`STATE_READ` part 1),
    /// once per epoch; zero on older firmware.
    pub params_read: DeviceStats,
    /// The board evaluated on its own test split (`EVALUATE`; else the host would, on the
    /// parameters read back).
    pub evaluates: bool,
    /// Uploading the test split (`DATA_WRITE_PACKED` to its slot), once per run; zero when
    /// the board does not evaluate.
    pub test_upload: DeviceStats,
    /// One evaluation on the board after the steps (`EVALUATE`, once per epoch); zero when
    /// the board does not evaluate.
    pub evaluation: DeviceStats,
    /// The board's evaluation after the steps (as after epoch 1).
    pub eval: Option<systole_device::board_train::EvalAnswer>,
    /// The parameters the board reached (read back).
    pub params: Vec<TensorState>,
    /// The remembered formats the board holds at the end (after its evaluation).
    pub fracs: std::collections::BTreeMap<String, u32>,
}

/// Runs the first `steps` steps of `cfg`'s first epoch on the board behind `dev` (a device
/// whose board trains itself), then reads the state back.
pub fn measure_steps(
    dev: &mut dyn Device,
    cfg: &TrainConfig,
    data: &Dataset,
    steps: usize,
) -> Result<BoardSteps, TrainError> {
    let mut t = host_trainer(cfg, data, dev.config(), None)?;
    let set = data_set(cfg, data)?;
    let (n, batch) = (set.len(), cfg.batch);
    if steps == 0 || steps > n.div_ceil(batch) {
        return Err(TrainError::Config(format!(
            "{steps} steps: an epoch of {n} images at batch {batch} has 1 to {}",
            n.div_ceil(batch)
        )));
    }
    let name = dev.name();
    let no_board = || not_a_board(&name);
    let before = dev.stats();
    let test = match dev.board_training().ok_or_else(no_board)?.evaluates() {
        true => crate::board::test_set(data),
        false => None,
    };
    let fit = plan::measure(
        &t,
        &mut dev.board_training().ok_or_else(no_board)?,
        &set,
        test.as_ref(),
    )?;
    let probe = difference(&dev.stats(), &before);
    let p = fit
        .plan(batch)
        .ok_or_else(|| plan::no_room(&fit, data, &t))?;
    let (resident, per_request) = (p.resident, p.per_upload);
    let evaluates = fit.board_evaluates(&p);
    let state = state_of(&t);
    let state_upload = counted(dev, "uploading the training state", &mut |b| {
        b.write_state(&state)
    })?;
    let mut data_upload = DeviceStats::default();
    if resident {
        data_upload = counted(dev, "uploading the data set", &mut |b| b.write_data(&set))?;
    }
    let (batch_uploads, runs) = run_steps(dev, cfg, &set, (steps, per_request, resident))?;
    let (mut test_upload, mut evaluation, mut eval) = Default::default();
    if let Some(test) = test.as_ref().filter(|_| evaluates) {
        // A run keeps the probe's test split (its upload is in `probe`).
        if !fit.test_uploaded {
            test_upload = counted(dev, "uploading the test split", &mut |b| {
                b.write_test_data(test)
            })?;
        }
        evaluation = counted(dev, "the evaluation on the board", &mut |b| {
            eval = Some(b.evaluate(1)?);
            Ok(())
        })?;
    }
    let mut params_read = DeviceStats::default();
    if dev.board_training().ok_or_else(no_board)?.reads_parts() {
        params_read = counted(dev, "reading the parameters back", &mut |b| {
            b.read_params().map(|_| ())
        })?;
    }
    let mut read = None;
    let state_read = counted(dev, "reading the state back", &mut |b| {
        read = Some(b.read_state()?);
        Ok(())
    })?;
    take_state(&mut t, read.ok_or_else(no_board)?)?;
    let fracs = crate::arith::Arith::state(&t.arith);
    Ok(BoardSteps {
        steps,
        resident,
        per_request,
        images: n,
        image_bytes: set.record_bytes(),
        bits: set.bits,
        fit: fit.describe(&p, set.bits),
        probe,
        state_upload,
        data_upload,
        batch_uploads,
        runs,
        state_read,
        params_read,
        evaluates,
        test_upload,
        evaluation,
        eval,
        params: t.param_states(),
        fracs,
    })
}

fn not_a_board(name: &str) -> TrainError {
    TrainError::Config(format!("{name} does not train itself"))
}

/// A request to a board that trains itself.
type BoardCall<'c> =
    dyn FnMut(&mut BoardTraining<'_>) -> Result<(), systole_device::DeviceError> + 'c;

/// Runs one request alone between two readings of the device's counters: its cost.
fn counted(
    dev: &mut dyn Device,
    op: &str,
    call: &mut BoardCall<'_>,
) -> Result<DeviceStats, TrainError> {
    let before = dev.stats();
    let name = dev.name();
    let mut board = dev.board_training().ok_or_else(|| not_a_board(&name))?;
    call(&mut board).map_err(dev_err(op))?;
    drop(board);
    Ok(difference(&dev.stats(), &before))
}

/// The first `steps` steps of the first epoch, `per_request` a `RUN_STEPS` request (each
/// request's batches uploaded first unless the set is `resident`): the uploads' and the
/// runs' costs.
fn run_steps(
    dev: &mut dyn Device,
    cfg: &TrainConfig,
    set: &DataSet,
    (steps, per_request, resident): (usize, usize, bool),
) -> Result<(DeviceStats, DeviceStats), TrainError> {
    let (n, batch) = (set.len(), cfg.batch);
    let order = systole_step::rng::epoch_order(cfg.seed, 0, n);
    let lr = cfg.lr_at(0);
    let batch16 = u16::try_from(batch)
        .map_err(|_| TrainError::Config(format!("--batch {batch} is over the board's 65535")))?;
    let (mut batch_uploads, mut runs) = (DeviceStats::default(), DeviceStats::default());
    let mut first = 0;
    while first < steps {
        let k = per_request.min(steps - first);
        let from = if resident {
            first as u32
        } else {
            let part = set.select(&order[first * batch..((first + k) * batch).min(n)]);
            let up = counted(dev, "uploading a batch", &mut |b| b.write_data(&part))?;
            batch_uploads = combine(&batch_uploads, &up, |a, b| a + b);
            0
        };
        let run = counted(dev, "training steps on the board", &mut |b| {
            b.run_steps((0, from), k as u16, batch16, lr, !resident)
                .map(|_| ())
        })?;
        runs = combine(&runs, &run, |a, b| a + b);
        first += k;
    }
    Ok((batch_uploads, runs))
}
