//! One complete run from options to results: opens the device, builds the arithmetic for the
//! chosen precision, resumes if asked, trains, checkpoints after every epoch and returns a
//! summary the CLI turns into reports.

use super::agreement;
use super::checkpoint::{self, Checkpoint};
use super::fixed;
use super::float::{FloatArith, FloatFormat};
use super::{
    arith::Arith, EpochRecord, MaybeDevice, Observer, Precision, TrainConfig, TrainError, Trainer,
};
use crate::data::Dataset;
use crate::dist::{Collective, Single};
use crate::model::Params;
use std::path::Path;
use systole_core::ArrayConfig;

pub use crate::run_options::{RunOptions, RunSummary};

/// Refuses to start a fresh run in a folder that holds a checkpoint, unless told to overwrite
/// it: a finished or interrupted run is never replaced unasked.
pub(crate) fn check_fresh_start(opts: &RunOptions) -> Result<(), TrainError> {
    if opts.resume && opts.overwrite {
        return Err(TrainError::Config(
            "--resume continues the checkpoint and --overwrite replaces it: give one of them"
                .into(),
        ));
    }
    let Some(ck) = opts.out.as_ref().map(|d| d.join(checkpoint::FILE_NAME)) else {
        return Ok(());
    };
    if opts.resume || opts.overwrite || std::fs::symlink_metadata(&ck).is_err() {
        return Ok(());
    }
    Err(TrainError::Config(format!(
        "{} holds the checkpoint of an earlier run: continue it with --resume, or start over with --overwrite (which replaces it)",
        ck.display()
    )))
}

/// Trains one epoch of a [`Trainer`] (plain, sharded or pipelined).
pub(crate) type EpochFn<'a, A> =
    dyn FnMut(&mut Trainer<A>, &Dataset, &mut dyn Observer) -> Result<EpochRecord, TrainError> + 'a;

/// Runs the epochs of `cfg` with `epoch` from the fresh trainer `t` (resumed here when asked);
/// `placement` are the settings the ranks must share beyond the run's options (a pipeline's
/// stages and cut).
pub(crate) fn drive<A: Arith<Error = TrainError> + MaybeDevice>(
    cfg: &TrainConfig,
    data: &Dataset,
    mut t: Trainer<A>,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    (dist, placement): (&dyn Collective, &[crate::dist::Setting]),
    epoch: &mut EpochFn<'_, A>,
) -> Result<RunSummary, TrainError> {
    let lead = dist.rank() == 0;
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
        let ck = Checkpoint::load_for(p, &t.checkpoint(), data.train.len())?;
        t.restore(ck)?;
    }
    if dist.size() > 1 {
        let mut settings = agreement::run_settings(cfg, &opts.device, data, &t.checkpoint());
        settings.extend(placement.iter().cloned());
        // Rank 0 alone writes the reports: a folder given to another rank would be ignored.
        let out = opts
            .out
            .as_ref()
            .map_or("none".into(), |d| d.display().to_string());
        settings.push(crate::dist::Setting::new("--out", out));
        crate::dist::agree(dist, &settings)?;
    }
    if let Some(d) = opts.out.as_ref().filter(|_| lead) {
        // Room for the checkpoint twice (the old file stays until the new one replaces it) and
        // the reports, found now rather than when the first epoch ends.
        let ck_bytes = t.checkpoint().size_bound();
        crate::outfile::probe_dir(d, 2 * ck_bytes + REPORT_ROOM)?;
    }
    while t.epoch < cfg.epochs {
        epoch(&mut t, data, obs)?;
        // Only the lead rank writes: all ranks hold the same state.
        let due = opts.checkpoint_due(t.epoch, cfg.epochs);
        if let Some(p) = ck_path.as_ref().filter(|_| lead && due) {
            t.checkpoint().save(p)?;
        }
    }
    let model = cfg
        .model
        .describe(data.channels, data.height, data.width, data.classes);
    Ok(RunSummary {
        config: cfg.clone(),
        model,
        network: crate::run_options::network_lines(t.graph()),
        arithmetic: t.arith.describe(),
        history: t.history.clone(),
        device: t.arith.device_stats(),
        saturation: t.arith.saturation(),
        params: t.param_states(),
    })
}

/// Runs `cfg` on `data` in this process.
pub fn run(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
) -> Result<RunSummary, TrainError> {
    run_dist(cfg, data, opts, obs, &Single)
}

/// [`run_dist_from`] the seed's initial parameters.
pub fn run_dist(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    dist: &dyn Collective,
) -> Result<RunSummary, TrainError> {
    run_dist_from(cfg, data, opts, obs, dist, None)
}

/// Runs `cfg` on `data` as one rank of `dist` (`cfg.shards` must be set when there are several
/// ranks), starting from `start` (a model file's weights; `None`: from the seed) unless the run
/// resumes; only rank 0 writes the checkpoint. Every rank returns the same summary.
pub fn run_dist_from(
    cfg: &TrainConfig,
    data: &Dataset,
    opts: &RunOptions,
    obs: &mut dyn Observer,
    dist: &dyn Collective,
    start: Option<&Params>,
) -> Result<RunSummary, TrainError> {
    cfg.validate()?;
    check_fresh_start(opts)?;
    if opts.checkpoint_every == 0 {
        return Err(TrainError::Config(
            "--checkpoint-every 0: give a number of epochs, at least 1".into(),
        ));
    }
    if dist.size() > 1 && cfg.shards.is_none() {
        return Err(TrainError::Config(
            "a run over several MPI ranks needs --shards".into(),
        ));
    }
    // Before the ranks compare their settings: a count that cannot be spread is every rank's
    // own error, found without a collective.
    if dist.size() > 1 {
        super::shard::check_shards(cfg.shards, dist.size())?;
    }
    // Ranks with and without --stages disagree on this setting, named.
    let one_stage = [crate::pipeline::placement_setting(None)];
    let mut float = |f| -> Result<RunSummary, TrainError> {
        drive(
            cfg,
            data,
            Trainer::start(cfg.clone(), data, FloatArith::new(f), start)?,
            opts,
            obs,
            (dist, &one_stage),
            &mut |t, d, o| t.train_epoch(d, o),
        )
    };
    match cfg.precision {
        Precision::Fixed16 => {
            let sharded = cfg.shards.is_some() || cfg.microbatches.is_some();
            let mut arith = fixed_arith(cfg, opts)?;
            // A board that trains itself runs the whole step, unless told not to
            // or the run is split over shards or ranks (those steps are the host's).
            if !opts.host_step && !sharded && dist.size() == 1 && crate::board::trains(&mut arith) {
                return crate::board::run(cfg, data, opts, obs, (arith, start));
            }
            drive(
                cfg,
                data,
                Trainer::start(cfg.clone(), data, arith, start)?,
                opts,
                obs,
                (dist, &one_stage),
                &mut |t, d, o| {
                    if sharded {
                        t.train_epoch_sharded(d, o, dist)
                    } else {
                        t.train_epoch(d, o)
                    }
                },
            )
        }
        Precision::F32 => float(FloatFormat::F32),
        Precision::F16 => float(FloatFormat::F16),
        Precision::Bf16 => float(FloatFormat::Bf16),
    }
}

/// The array the device of a run at `W`-bit words is opened with: `array` x `array` at `W`
/// (the device's products then come out at `W`, which the step's saturation to `W` leaves
/// as they are), with its conv unit (feature-map words of `W` bits) as at 16 bits. Every device takes
/// every `W`: the golden model, the Verilated array and the boards (`serial:`, `bridge:`), which
/// check their `CONFIG` word's `W` against it.
fn device_config(array: usize, word_bits: u32) -> Result<ArrayConfig, TrainError> {
    let square = ArrayConfig::square(array);
    let full = ArrayConfig::new(array, square.frac_bits, square.buffer_depth)?;
    if word_bits == systole_core::numeric::WORD_BITS {
        return Ok(full);
    }
    let narrow = full.with_word_bits(word_bits);
    narrow.validate_built()?;
    Ok(narrow)
}

/// The fixed-point arithmetic of `cfg` on the device of `opts`.
pub(crate) fn fixed_arith(
    cfg: &TrainConfig,
    opts: &RunOptions,
) -> Result<fixed::FixedArith, TrainError> {
    let widths = cfg.widths()?;
    let ac = device_config(cfg.array, widths.word())?;
    let dev = opts
        .device
        .open_traced(ac, opts.trace.clone())
        .map_err(|source| TrainError::Device {
            op: "opening the device".into(),
            source,
        })?;
    Ok(fixed::on_device_at(
        dev,
        cfg.rounding,
        cfg.seed,
        opts.check,
        widths,
    ))
}

/// Room a run folder needs besides its checkpoint: `run.json`, `history.csv`, `loss.png`.
const REPORT_ROOM: u64 = 1 << 20;

/// Makes `dir` this run's before anything slow happens (loading data, opening a device, the
/// first epoch): creates it, proves it takes a write (a read-only or full folder fails here)
/// and locks it against other runs for as long as the returned lock lives.
pub fn claim_out_dir(dir: &Path) -> Result<crate::outfile::RunLock, TrainError> {
    claim_out_dir_for(dir, &REPORT_FILES)
}

/// [`claim_out_dir`] of a folder the command will write `files` into: each is checked now
/// (a link or node there is refused before any work, not after it), and temporary files a
/// killed run left there are removed.
pub fn claim_out_dir_for(
    dir: &Path,
    files: &[&str],
) -> Result<crate::outfile::RunLock, TrainError> {
    crate::outfile::check_folder(dir)?;
    crate::outfile::probe_dir(dir, REPORT_ROOM)?;
    let lock = crate::outfile::RunLock::acquire(dir)?;
    for f in files {
        crate::outfile::check_target(&dir.join(f))?;
    }
    crate::outfile::remove_stale_temps(dir);
    Ok(lock)
}

/// The run report (`systole train --out`).
pub const RUN_JSON: &str = "run.json";
/// The per-epoch history.
pub const HISTORY_CSV: &str = "history.csv";
/// The loss plot.
pub const LOSS_PNG: &str = "loss.png";
/// Every file a training run writes into its `--out` folder.
pub const REPORT_FILES: [&str; 4] = [
    RUN_JSON,
    HISTORY_CSV,
    LOSS_PNG,
    crate::checkpoint::FILE_NAME,
];
