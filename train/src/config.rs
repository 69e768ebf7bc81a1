//! A run's configuration: [`TrainConfig`] (model, data, schedule, number format) and [`Precision`].

use crate::data::{DataError, Dataset, DatasetSpec, Scaling};
use crate::model::{self, Graph, ModelSpec};
use crate::TrainError;
use crate::{shard, EVAL_BATCH};
use serde::{Deserialize, Serialize};
use systole_core::Rounding;

/// Number format a run trains in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Precision {
    /// Dynamic fixed point on the device: W-bit words (`--word-bits`, 16 by default).
    Fixed16,
    /// f32 on the host.
    F32,
    /// f16 operands and results, f32 arithmetic and f32 master weights, on the host.
    F16,
    /// bf16 operands and results, f32 arithmetic and f32 master weights, on the host.
    Bf16,
}

impl Precision {
    /// Every format, in the order the command line lists them.
    pub const ALL: [Precision; 4] = [
        Precision::Fixed16,
        Precision::F32,
        Precision::F16,
        Precision::Bf16,
    ];

    /// Parses a command-line name ([`Precision::name`], or `fixed` for fixed16).
    pub fn parse(s: &str) -> Option<Precision> {
        let named = |p: &&Precision| p.name() == s || p.aliases().contains(&s);
        Precision::ALL.iter().find(named).copied()
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

    /// Other names the command line accepts.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Precision::Fixed16 => &["fixed"],
            _ => &[],
        }
    }
}

/// `--precision` as the command line takes it.
#[cfg(feature = "clap")]
impl clap::ValueEnum for Precision {
    fn value_variants<'a>() -> &'a [Self] {
        &Precision::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let v = clap::builder::PossibleValue::new(self.name());
        Some(v.aliases(self.aliases().iter().copied()))
    }
}

/// Everything that determines a run's result (the device does not: all devices agree bit for
/// bit, so a run may be resumed on another one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// The network.
    pub model: ModelSpec,
    /// The data set (`--dataset`).
    pub dataset: DatasetSpec,
    /// The network's input is pixel / pixel_max * `input_scale` + `input_offset`
    /// ([`Scaling`]; checkpoints from before the option have none and trained at 1 and 0).
    #[serde(default = "unit_scale")]
    pub input_scale: f32,
    /// See `input_scale`.
    #[serde(default)]
    pub input_offset: f32,
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

fn unit_scale() -> f32 {
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

    /// How pixels become the network's input (`--input-scale`, `--input-offset`).
    pub fn scaling(&self) -> Scaling {
        Scaling {
            scale: self.input_scale,
            offset: self.input_offset,
        }
    }

    /// Loads the run's data set, scaled as the run says.
    pub fn load_data(&self) -> Result<Dataset, DataError> {
        self.dataset.load(self.scaling())
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
        if !(self.input_scale.is_finite() && self.input_scale != 0.0) {
            return bad("--input-scale must be a finite number other than 0");
        }
        if !self.input_offset.is_finite() {
            return bad("--input-offset must be a finite number");
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

    /// The network for `data`, once every tensor a step or an evaluation batch allocates
    /// is known to be within [`systole_core::limits`] (see [`model::check_sizes`]).
    pub fn graph_that_fits(&self, data: &Dataset) -> Result<Graph, TrainError> {
        let graph = model::build(
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
        model::check_sizes(&graph, rows)?;
        Ok(graph)
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
