//! The trainer: trains an MLP or a small CNN with softmax cross-entropy and SGD with momentum,
//! in 16-bit fixed point on a [`systole_device::Device`] (every matrix product and convolution of
//! the forward and backward passes is offloaded) or in f32 / f16 / bf16 on the host as
//! baselines. Runs are seeded and deterministic, and resume bit for bit from checkpoints.
//!
//! Beside it: the data sets ([`data`]), data-parallel shards and their collective ([`dist`],
//! MPI with the `mpi` feature) and the output files that lose nothing ([`write_atomic`],
//! [`replace_with`]).
#![deny(missing_docs)]

pub mod agreement;
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
mod rng;
pub mod run;
pub mod shard;

// What front ends (the CLI, explore, benches) use of the fixed-point arithmetic, the output
// files and the seeded random streams; the modules themselves are the trainer's own.
pub use fixed::{
    compare as compare_with_golden, on_device, on_device_at, FixedArith, SaturationCount, Widths,
};
pub use outfile::{check_target, replace_with, write_atomic, OutputError, RunLock};
pub use rng::{stream as random_stream, SplitMix64};

use crate::data::{Dataset, Split};
use arith::{Arith, TensorState};
use model::{Layer, ModelSpec};
use serde::{Deserialize, Serialize};
use systole_core::Rounding;
use systole_device::{DeviceError, DeviceStats};
use systole_golden::NumericError;
use systole_step::step;
use systole_step::StepError;

/// Why training stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The device failed on an operation (the cause is the error's source).
    #[error("{op}")]
    Device {
        /// The operation, e.g. `layer 2 backward dW`.
        op: String,
        /// The cause.
        source: DeviceError,
    },
    /// An operation broke the numeric contract (the cause is the error's source).
    #[error("{op}")]
    Numeric {
        /// The operation.
        op: String,
        /// The cause.
        source: NumericError,
    },
    /// `--check` found the device disagreeing with the golden model.
    #[error("--check: {op}: the device disagrees with the golden model: {detail}")]
    Mismatch {
        /// The operation.
        op: String,
        /// Which tensor element and both values.
        detail: String,
    },
    /// Operand shapes do not fit (a bug in the model description or bad options).
    #[error("{op}: {msg}")]
    Shape {
        /// The operation.
        op: String,
        /// What does not fit.
        msg: String,
    },
    /// Bad training options.
    #[error("{0}")]
    Config(String),
    /// A checkpoint cannot be used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A checkpoint file is not a systole checkpoint (the decoder's error is the source).
    #[error("checkpoint: {} is not a systole checkpoint", path.display())]
    CheckpointFormat {
        /// The file.
        path: std::path::PathBuf,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// A checkpoint or report could not be encoded (the encoder's error is the source).
    #[error("cannot encode the {what}")]
    Encode {
        /// `checkpoint`, `report`.
        what: &'static str,
        /// The encoder's error.
        source: serde_json::Error,
    },
    /// The array the options describe is not valid (the check's error is the source).
    #[error("the array the options describe")]
    Array(#[from] systole_core::ConfigError),
    /// The MPI ranks were started with different options or data (every rank finds it).
    #[error(transparent)]
    Ranks(#[from] crate::dist::Disagreement),
    /// A file could not be written or read (the cause is the error's source).
    #[error("{path}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output could not be written, or the run folder is another run's.
    #[error(transparent)]
    Output(#[from] crate::outfile::OutputError),
}

/// The step's own errors keep their variants and sentences.
impl From<StepError> for TrainError {
    fn from(e: StepError) -> Self {
        match e {
            StepError::Numeric { op, source } => TrainError::Numeric { op, source },
            StepError::Shape { op, msg } => TrainError::Shape { op, msg },
            StepError::Checkpoint(m) => TrainError::Checkpoint(m),
            other => TrainError::Config(other.to_string()),
        }
    }
}

/// Number format a run trains in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Precision {
    /// 16-bit dynamic fixed point on the device.
    Fixed16,
    /// f32 on the host.
    F32,
    /// f16 operands and results, f32 arithmetic and f32 master weights, on the host.
    F16,
    /// bf16 operands and results, f32 arithmetic and f32 master weights, on the host.
    Bf16,
}

impl Precision {
    /// Parses `fixed16`/`fixed`, `f32`, `f16`, `bf16`.
    pub fn parse(s: &str) -> Option<Precision> {
        match s {
            "fixed16" | "fixed" => Some(Precision::Fixed16),
            "f32" => Some(Precision::F32),
            "f16" => Some(Precision::F16),
            "bf16" => Some(Precision::Bf16),
            _ => None,
        }
    }

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fixed16 => "fixed16",
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

/// Everything that determines a run's result (the device does not: all devices agree bit for
/// bit, so a run may be resumed on another one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// The network.
    pub model: ModelSpec,
    /// Data set name.
    pub dataset: String,
    /// Use only the first N training images (None: all).
    pub train_limit: Option<usize>,
    /// Epochs to train in total.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch: usize,
    /// Learning rate of the first epoch.
    pub lr: f32,
    /// Factor the learning rate is multiplied by after each epoch
    /// ([`systole_golden::schedule`]); 1 keeps it constant (checkpoints from before the schedule
    /// have none and trained with a constant rate).
    #[serde(default = "constant_rate")]
    pub lr_decay: f32,
    /// Momentum coefficient in `[0, 1)`.
    pub momentum: f32,
    /// Run seed.
    pub seed: u64,
    /// Number format.
    pub precision: Precision,
    /// Rounding of every fixed-point conversion.
    #[serde(with = "rounding_name")]
    pub rounding: Rounding,
    /// Array size (fixes the stochastic-rounding order of device results).
    pub array: usize,
    /// Fixed point: the word width W in bits (8 to 16) of every word the array computes with
    /// (checkpoints from before W was a parameter have none and trained at 16).
    #[serde(default = "full_width")]
    pub word_bits: u32,
    /// Fixed point: the width of the weights and momentum the update keeps (W to 16; W: no
    /// wider master copy), see `systole_step::width`.
    #[serde(default = "full_width")]
    pub master_bits: u32,
    /// Data-parallel shards per global batch (fixed16 only; None: the classic unsharded step).
    /// The result depends on this number, never on how many ranks share the shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<usize>,
    /// Micro-batches per shard (fixed16 only; None: 1), each with its own seeds and formats,
    /// their gradients accumulated exactly ([`shard`]): the unit of work of a pipeline's stages.
    /// The result depends on this number, never on how many stages or ranks compute them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microbatches: Option<usize>,
}

fn constant_rate() -> f32 {
    1.0
}

fn full_width() -> u32 {
    systole_core::numeric::WORD_BITS
}

impl TrainConfig {
    /// The learning rate of the epoch after `epochs_done` completed ones.
    pub fn lr_at(&self, epochs_done: usize) -> f32 {
        systole_golden::schedule::lr_at(self.lr, self.lr_decay, epochs_done)
    }

    /// Checks the options that are not checked elsewhere.
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |m: &str| Err(TrainError::Config(m.to_string()));
        if self.batch == 0 {
            return bad("--batch must be at least 1");
        }
        if !(self.lr.is_finite()
            && self.lr < 16.0
            && systole_golden::schedule::quantize(self.lr) >= 1)
        {
            return bad("--lr must be a positive number below 16, at least 2^-17 (it is rounded to 16 fractional bits)");
        }
        if !(self.lr_decay.is_finite()
            && self.lr_decay <= 1.0
            && systole_golden::schedule::quantize(self.lr_decay) >= 1)
        {
            return bad("--lr-decay must be in (0, 1] (at least 2^-17; 1 keeps the rate constant)");
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return bad("--momentum must be in [0, 1)");
        }
        if self.train_limit == Some(0) {
            return bad("--limit must be at least 1");
        }
        self.widths()?;
        if self.precision != Precision::Fixed16 && (self.word_bits, self.master_bits) != (16, 16) {
            return bad("--word-bits and --master-bits are widths of fixed point: use them with --precision fixed16 (the default)");
        }
        if let Some(s) = self.shards {
            if s == 0 {
                return bad("--shards must be at least 1");
            }
            if s > systole_core::limits::MAX_SHARDS {
                return Err(TrainError::Config(format!(
                    "--shards {s} is more than the {} a batch can be split into",
                    systole_core::limits::MAX_SHARDS
                )));
            }
            if self.precision != Precision::Fixed16 {
                return bad("only --precision fixed16 can be trained sharded or with MPI");
            }
        }
        if let Some(m) = self.microbatches {
            shard::check_microbatches(m, self.shards.unwrap_or(1), self.batch)?;
            if self.precision != Precision::Fixed16 {
                return bad("only --precision fixed16 can be trained in micro-batches");
            }
        }
        Ok(())
    }

    /// The fixed-point widths of the run (`--word-bits`, `--master-bits`), checked.
    pub fn widths(&self) -> Result<systole_step::Widths, TrainError> {
        Ok(systole_step::Widths::new(self.word_bits, self.master_bits)?)
    }

    /// The model's layers for `data`, once every tensor a step or an evaluation batch allocates
    /// is known to be within [`systole_core::limits`] (see [`model::check_sizes`]).
    pub fn layers_that_fit(&self, data: &Dataset) -> Result<Vec<Layer>, TrainError> {
        let layers = model::build(
            &self.model,
            data.channels,
            data.height,
            data.width,
            data.classes,
        )?;
        let train_rows = data.train.len().min(self.train_limit.unwrap_or(usize::MAX));
        let rows = self
            .batch
            .min(train_rows)
            .max(EVAL_BATCH.min(data.test.len()));
        model::check_sizes(&layers, rows)?;
        Ok(layers)
    }
}

/// Serialises [`Rounding`] by its command-line name (`systole-core` is `no_std`, without serde).
mod rounding_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use systole_core::Rounding;

    pub fn serialize<S: Serializer>(r: &Rounding, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Rounding, D::Error> {
        let name = String::deserialize(d)?;
        Rounding::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown rounding '{name}'")))
    }
}

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
    /// An epoch with `batches` training batches starts.
    fn epoch_start(&mut self, _epoch: usize, _batches: usize) {}
    /// One more training batch is done.
    fn batch_done(&mut self) {}
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
    layers: Vec<Layer>,
    classes: usize,
    /// Parameters: for each layer `W` then `b`.
    pub params: Vec<A::T>,
    velocity: Vec<A::T>,
    /// Epochs completed.
    pub epoch: usize,
    step: u64,
    /// One record per completed epoch.
    pub history: Vec<EpochRecord>,
}

/// Step ids of evaluation batches live far above training steps so their seeds never collide.
const EVAL_STEP_BASE: u64 = 1 << 62;

/// Images per evaluation batch.
const EVAL_BATCH: usize = 256;

impl<A: Arith<Error = TrainError>> Trainer<A> {
    /// A fresh run: builds the model for `data` and initialises it from the seed.
    pub fn new(cfg: TrainConfig, data: &Dataset, mut arith: A) -> Result<Self, TrainError> {
        cfg.validate()?;
        let layers = cfg.layers_that_fit(data)?;
        let mut params = Vec::new();
        let mut velocity = Vec::new();
        arith.begin_step(u64::MAX);
        for (i, (r, c, v)) in model::init_params(&layers, cfg.seed)
            .into_iter()
            .enumerate()
        {
            params.push(arith.import(&model::param_name(i), r, c, &v)?);
            velocity.push(arith.zeros(r, c));
        }
        Ok(Trainer {
            cfg,
            arith,
            layers,
            classes: data.classes,
            params,
            velocity,
            epoch: 0,
            step: 0,
            history: Vec::new(),
        })
    }

    /// The model's layers.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
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
            layers: &self.layers,
            classes: self.classes,
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
        let features = data.features();
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
        }
        self.epoch += 1;
        let (test_loss, test_acc) = self.evaluate(&data.test, features)?;
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
        let mut order: Vec<usize> = (0..n).collect();
        rng::stream(self.cfg.seed, self.epoch as u64 + 1).shuffle(&mut order);
        order
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
            layers: &self.layers,
            classes: self.classes,
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

    /// Loss and accuracy (percent) on `split`, in batches of 256 through the same arithmetic.
    pub fn evaluate(&mut self, split: &Split, features: usize) -> Result<(f32, f32), TrainError> {
        let (mut loss_sum, mut correct) = (0f64, 0usize);
        let all: Vec<usize> = (0..split.len()).collect();
        for (b, idx) in all.chunks(EVAL_BATCH).enumerate() {
            let images = Self::batch_images(split, idx, features);
            let labels: Vec<u8> = idx.iter().map(|&i| split.labels[i]).collect();
            let id = EVAL_STEP_BASE + (self.epoch as u64) * 65536 + b as u64;
            let batch = step::Batch {
                layers: &self.layers,
                classes: self.classes,
                images: &images,
                labels: &labels,
            };
            let (loss, ok) = step::evaluate_batch(&mut self.arith, &batch, &self.params, id)?;
            loss_sum += loss as f64 * idx.len() as f64;
            correct += ok;
        }
        let n = split.len().max(1);
        Ok((
            (loss_sum / n as f64) as f32,
            100.0 * correct as f32 / n as f32,
        ))
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
        for (i, s) in ck.params.iter().enumerate() {
            let t = self.arith.load(s)?;
            if self.arith.shape(&t) != self.arith.shape(&self.params[i]) {
                return Err(TrainError::Checkpoint(format!(
                    "{} has the wrong shape",
                    model::param_name(i)
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
