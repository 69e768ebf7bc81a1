//! The trainer: trains an MLP or a small CNN with softmax cross-entropy and SGD with momentum,
//! in W-bit fixed point (16 by default) on a [`systole_device::Device`] (every matrix product and convolution of
//! the forward and backward passes is offloaded) or in f32 / f16 / bf16 on the host as
//! baselines. Runs are seeded and deterministic, and resume bit for bit from checkpoints.
//!
//! Beside it: the data sets ([`data`]), data-parallel shards and their collective ([`dist`],
//! MPI with the `mpi` feature) and the output files that lose nothing ([`write_atomic`],
//! [`replace_with`]).
#![deny(missing_docs)]

pub mod agreement;
mod board;
pub mod board_bench;
mod config;
mod error;
/// The operations a model needs (`systole_step::arith`, shared with the board's step).
pub use systole_step::arith;
pub mod checkpoint;
pub mod data;
pub mod dist;
mod fixed;
pub mod float;
pub mod model;
pub mod options;
mod outfile;
pub mod pipeline;
/// The seeded random streams (`systole_step::rng`, shared with the board's epoch order).
use systole_step::rng;
pub mod run;
mod run_options;
pub mod shard;

// What front ends (the CLI, explore, benches) use of the fixed-point arithmetic, the output
// files and the seeded random streams; the modules themselves are the trainer's own.
pub use fixed::{
    compare as compare_with_golden, on_device, on_device_at, DeviceProducts, FixedArith,
    SaturationCount, Widths,
};
pub use outfile::{check_target, replace_with, write_atomic, OutputError, RunLock};
pub use rng::{stream as random_stream, SplitMix64};

pub use config::{Precision, TrainConfig};
pub use error::TrainError;

use crate::data::{Dataset, Split};
use arith::{Arith, TensorState};
use model::Graph;
use serde::{Deserialize, Serialize};
use systole_device::DeviceStats;
use systole_step::step;

/// Results of one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// Epoch number, from 1.
    pub epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub train_loss: f32,
    /// Training accuracy (from the training forward passes), in percent.
    pub train_acc: f32,
    /// Test accuracy after the epoch, in percent.
    pub test_acc: f32,
    /// Test loss after the epoch.
    pub test_loss: f32,
    /// Wall-clock seconds of the epoch (training and evaluation).
    pub seconds: f64,
    /// Fixed point: device operations re-run because an output saturated, in this epoch
    /// (training and evaluation; this process's operations).
    #[serde(default)]
    pub retries: u64,
    /// Fixed point: saturated words in the device results kept, in this epoch.
    #[serde(default)]
    pub saturated_words: u64,
}

/// Total `(retries, saturated words)` of an arithmetic's saturation counters.
pub fn saturation_totals(a: &impl Arith) -> (u64, u64) {
    a.saturation()
        .values()
        .fold((0, 0), |(r, w), c| (r + c.retries, w + c.saturated_words))
}

/// Progress callbacks (the CLI draws progress bars with them).
pub trait Observer {
    /// A line the run's header should carry (how and where it trains), before the first epoch.
    fn run_start(&mut self, _line: &str) {}
    /// An epoch with `batches` training batches starts.
    fn epoch_start(&mut self, _epoch: usize, _batches: usize) {}
    /// One more training batch is done.
    fn batch_done(&mut self) {}
    /// Whether the run should stop now (a user's interrupt): asked after each training batch;
    /// `true` ends the run with [`TrainError::Interrupted`], the checkpoints written so far
    /// left as they are.
    fn stop(&mut self) -> bool {
        false
    }
    /// An epoch ended.
    fn epoch_end(&mut self, _rec: &EpochRecord) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// A run in progress: parameters, momentum, counters and history.
pub struct Trainer<A: Arith> {
    /// The options.
    pub cfg: TrainConfig,
    /// The arithmetic (and, for fixed point, the device).
    pub arith: A,
    graph: Graph,
    /// Parameters, in the graph's order (a layer's `W` then its `b`).
    pub params: Vec<A::T>,
    velocity: Vec<A::T>,
    /// Epochs completed.
    pub epoch: usize,
    step: u64,
    /// One record per completed epoch.
    pub history: Vec<EpochRecord>,
}

/// Images per evaluation batch (the step library's, the same on the board).
pub use systole_step::step::EVAL_BATCH;

impl<A: Arith<Error = TrainError>> Trainer<A> {
    /// A fresh run: builds the model for `data` and initialises it from the seed.
    pub fn new(cfg: TrainConfig, data: &Dataset, arith: A) -> Result<Self, TrainError> {
        cfg.validate()?;
        let graph = cfg.graph_that_fits(data)?;
        let init = model::init_params(&graph, cfg.seed)?;
        Self::with_params(cfg, graph, arith, init)
    }

    /// A fresh run from `start` (a model file's weights, in the graph's order) when given,
    /// else initialised from the seed as [`Trainer::new`].
    pub fn start(
        cfg: TrainConfig,
        data: &Dataset,
        arith: A,
        start: Option<&model::Params>,
    ) -> Result<Self, TrainError> {
        let Some(init) = start else {
            return Self::new(cfg, data, arith);
        };
        cfg.validate()?;
        let graph = cfg.graph_that_fits(data)?;
        Self::with_params(cfg, graph, arith, init.clone())
    }

    /// A fresh run of `graph` from the given initial parameters (host values, in the graph's
    /// order: a model's pretrained weights).
    pub fn with_params(
        cfg: TrainConfig,
        graph: Graph,
        mut arith: A,
        init: model::Params,
    ) -> Result<Self, TrainError> {
        let names = model::param_names(&graph)?;
        if init.len() != names.len() {
            return Err(TrainError::Config(format!(
                "{} initial tensors for a network of {} parameters",
                init.len(),
                names.len()
            )));
        }
        let mut params = Vec::new();
        let mut velocity = Vec::new();
        arith.begin_step(u64::MAX);
        for (name, (r, c, v)) in names.iter().zip(init) {
            params.push(arith.import(name, r, c, &v)?);
            velocity.push(arith.zeros(r, c));
        }
        Ok(Trainer {
            cfg,
            arith,
            graph,
            params,
            velocity,
            epoch: 0,
            step: 0,
            history: Vec::new(),
        })
    }

    /// The network.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The images `idx` of `split` as host values, row after row.
    fn batch_images(split: &Split, idx: &[usize], features: usize) -> Vec<f32> {
        let mut x = Vec::with_capacity(idx.len() * features);
        for &i in idx {
            x.extend_from_slice(&split.images[i * features..(i + 1) * features]);
        }
        x
    }

    /// Forward pass, softmax cross-entropy (gradient divided by `denom`, the global batch size)
    /// and backward pass over the training images `idx` (`systole_step::step::loss_and_grads`):
    /// the part of a step the plain and the sharded paths share. Returns the mean loss, the
    /// correct count and the gradients.
    pub(crate) fn loss_and_grads(
        &mut self,
        data: &Dataset,
        idx: &[usize],
        denom: usize,
    ) -> Result<(f32, usize, Vec<A::T>), TrainError> {
        let images = Self::batch_images(&data.train, idx, data.features());
        let labels: Vec<u8> = idx.iter().map(|&i| data.train.labels[i]).collect();
        let batch = step::Batch {
            graph: &self.graph,
            images: &images,
            labels: &labels,
        };
        step::loss_and_grads(&mut self.arith, &batch, &self.params, denom, self.step)
    }

    /// Trains one epoch (shuffled by a generator seeded from the run seed and the epoch) and
    /// evaluates on the test split.
    pub fn train_epoch(
        &mut self,
        data: &Dataset,
        obs: &mut dyn Observer,
    ) -> Result<EpochRecord, TrainError> {
        let t0 = std::time::Instant::now();
        let order = self.epoch_order(data);
        let n = order.len();
        let batches = n.div_ceil(self.cfg.batch);
        obs.epoch_start(self.epoch + 1, batches);
        let (mut loss_sum, mut correct) = (0f64, 0usize);
        let sat0 = saturation_totals(&self.arith);
        let lr = self.cfg.lr_at(self.epoch);
        for idx in order.chunks(self.cfg.batch) {
            let (loss, ok) = self.train_batch(data, idx, lr)?;
            loss_sum += loss as f64 * idx.len() as f64;
            correct += ok;
            obs.batch_done();
            self.stop_if_asked(obs)?;
        }
        self.epoch += 1;
        self.finish_epoch(data, t0, (loss_sum, n), correct, sat0, obs)
    }

    /// [`TrainError::Interrupted`] when `obs` asks the run to stop.
    pub(crate) fn stop_if_asked(&self, obs: &mut dyn Observer) -> Result<(), TrainError> {
        if obs.stop() {
            return Err(TrainError::Interrupted {
                epoch: self.epoch + 1,
                step: self.step,
            });
        }
        Ok(())
    }

    /// Ends an epoch whose training steps are done (`self.epoch` counts it already): the
    /// evaluation on the test split, the record (training loss sum over `n` images, `correct`
    /// predictions, the saturation counts since `sat0`), the history and the observer.
    pub(crate) fn finish_epoch(
        &mut self,
        data: &Dataset,
        t0: std::time::Instant,
        (loss_sum, n): (f64, usize),
        correct: usize,
        sat0: (u64, u64),
        obs: &mut dyn Observer,
    ) -> Result<EpochRecord, TrainError> {
        let test = self.evaluate(&data.test, data.features())?;
        self.record_epoch(t0, (loss_sum, n), correct, sat0, test, obs)
    }

    /// Records an epoch whose evaluation is done (`(test_loss, test_acc)`; on the board, or by
    /// [`Self::finish_epoch`]): the record, the history and the observer.
    pub(crate) fn record_epoch(
        &mut self,
        t0: std::time::Instant,
        (loss_sum, n): (f64, usize),
        correct: usize,
        sat0: (u64, u64),
        (test_loss, test_acc): (f32, f32),
        obs: &mut dyn Observer,
    ) -> Result<EpochRecord, TrainError> {
        let sat = saturation_totals(&self.arith);
        let rec = EpochRecord {
            epoch: self.epoch,
            train_loss: (loss_sum / n as f64) as f32,
            train_acc: 100.0 * correct as f32 / n as f32,
            test_acc,
            test_loss,
            seconds: t0.elapsed().as_secs_f64(),
            retries: sat.0 - sat0.0,
            saturated_words: sat.1 - sat0.1,
        };
        self.history.push(rec.clone());
        obs.epoch_end(&rec);
        Ok(rec)
    }

    /// The next epoch's training images in the order it trains them (shuffled by a generator
    /// seeded from the run seed and the epoch).
    fn epoch_order(&self, data: &Dataset) -> Vec<usize> {
        let n = data
            .train
            .len()
            .min(self.cfg.train_limit.unwrap_or(usize::MAX));
        rng::epoch_order(self.cfg.seed, self.epoch as u64, n)
    }

    /// One training step on the training images `idx` at learning rate `lr`: returns the mean
    /// loss and the correct count.
    fn train_batch(
        &mut self,
        data: &Dataset,
        idx: &[usize],
        lr: f32,
    ) -> Result<(f32, usize), TrainError> {
        let images = Self::batch_images(&data.train, idx, data.features());
        let labels: Vec<u8> = idx.iter().map(|&i| data.train.labels[i]).collect();
        let batch = step::Batch {
            graph: &self.graph,
            images: &images,
            labels: &labels,
        };
        let (loss, ok) = step::train_step(
            &mut self.arith,
            &batch,
            &mut self.params,
            &mut self.velocity,
            (self.step, lr, self.cfg.momentum),
        )?;
        self.step += 1;
        Ok((loss, ok))
    }

    /// The first `steps` training steps of the next epoch, exactly as [`Self::train_epoch`]
    /// runs them (same order, seeds and rate), without finishing the epoch or evaluating:
    /// for measurements. `after` sees the arithmetic after each step.
    pub fn train_steps(
        &mut self,
        data: &Dataset,
        steps: usize,
        after: &mut dyn FnMut(&A),
    ) -> Result<(), TrainError> {
        let order = self.epoch_order(data);
        let lr = self.cfg.lr_at(self.epoch);
        for idx in order.chunks(self.cfg.batch).take(steps) {
            self.train_batch(data, idx, lr)?;
            after(&self.arith);
        }
        Ok(())
    }

    /// Loss and accuracy (percent) on `split`: `systole_step::step::evaluate`, the one
    /// evaluation the board runs too (batches of `EVAL_BATCH` through the same arithmetic).
    pub fn evaluate(&mut self, split: &Split, features: usize) -> Result<(f32, f32), TrainError> {
        let (loss, correct) = step::evaluate(
            &mut self.arith,
            &self.graph,
            &self.params,
            (self.epoch as u64, split.len()),
            &mut |range| {
                let idx: Vec<usize> = range.collect();
                let labels = idx.iter().map(|&i| split.labels[i]).collect();
                (Self::batch_images(split, &idx, features), labels)
            },
        )?;
        let n = split.len().max(1);
        Ok((loss, 100.0 * correct as f32 / n as f32))
    }

    /// Parameters in checkpoint form.
    pub fn param_states(&self) -> Vec<TensorState> {
        self.params.iter().map(|p| self.arith.save(p)).collect()
    }

    /// Everything needed to continue this run.
    pub fn checkpoint(&self) -> checkpoint::Checkpoint {
        checkpoint::Checkpoint {
            format: checkpoint::FORMAT.to_string(),
            config: self.cfg.clone(),
            epoch: self.epoch,
            step: self.step,
            params: self.param_states(),
            velocity: self.velocity.iter().map(|p| self.arith.save(p)).collect(),
            fracs: self.arith.state(),
            history: self.history.clone(),
        }
    }

    /// Continues from `ck`, which must come from the same run configuration.
    pub fn restore(&mut self, ck: checkpoint::Checkpoint) -> Result<(), TrainError> {
        if ck.format != checkpoint::FORMAT {
            return Err(TrainError::Checkpoint(format!(
                "format '{}' is not '{}'",
                ck.format,
                checkpoint::FORMAT
            )));
        }
        ck.check_continues(&self.cfg)?;
        if ck.params.len() != self.params.len() || ck.velocity.len() != self.params.len() {
            return Err(TrainError::Checkpoint(
                "wrong number of parameter tensors".into(),
            ));
        }
        let names = model::param_names(&self.graph)?;
        for (i, s) in ck.params.iter().enumerate() {
            let t = self.arith.load(s)?;
            if self.arith.shape(&t) != self.arith.shape(&self.params[i]) {
                return Err(TrainError::Checkpoint(format!(
                    "{} has the wrong shape",
                    names[i]
                )));
            }
            self.params[i] = t;
            self.velocity[i] = self.arith.load(&ck.velocity[i])?;
        }
        self.arith.set_state(ck.fracs);
        self.epoch = ck.epoch;
        self.step = ck.step;
        self.history = ck.history;
        Ok(())
    }
}

/// Device counters, when the run uses a device.
pub trait MaybeDevice {
    /// Counters of the device, if any.
    fn device_stats(&self) -> Option<(String, DeviceStats)>;
}

impl MaybeDevice for fixed::FixedArith {
    fn device_stats(&self) -> Option<(String, DeviceStats)> {
        let d = self.products().device();
        Some((d.name(), d.stats()))
    }
}

impl MaybeDevice for float::FloatArith {
    fn device_stats(&self) -> Option<(String, DeviceStats)> {
        None
    }
}
