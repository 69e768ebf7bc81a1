//! `systole explore`: the design-space sweep. For every design point (array size,
//! feature-map depth, word width, rounding) it measures what a hardware researcher chooses
//! between: test accuracy over several seeds (fixed-point training on the golden model, which
//! the conformance tests keep bit-identical to the hardware), simulated cycles per training
//! epoch ([`cycles`]), resources from Yosys `synth_xilinx` ([`synth`]), which boards the design
//! fits and its epoch time at each board's clock. [`sweep`] runs the points on every core,
//! caches synthesis by design hash and resumes an interrupted sweep; [`report`] writes
//! `explore.csv` and `explore.json`, [`pareto`] the plot.
//!
//! The word width W (8 to 16) is an axis of the sweep and of [`DesignPoint`] (and of every cache
//! key): accuracy is trained at W on the golden model (the 16-bit model's words saturated to W,
//! which is the W-bit conversion bit for bit: `systole_step::width`), the cycles come from the
//! same per-shape table (a shape's `CYCLES` does not depend on W; the operations W's saturation
//! retries add are counted), and resources are synthesised at W: the bridge top built with the
//! array and its conv unit at W (`ArrayConfig::validate_built`: every valid design is built).
//! A design the synthesiser has no figures for (`--resources estimate` below 16 bits) gets `n/a`
//! and the reason, never figures scaled from another design.

pub mod cycles;
mod error;
pub mod pareto;
pub mod recorder;
pub mod report;
pub mod sweep;
pub mod synth;

pub use error::ExploreError;

use serde::{Deserialize, Serialize};
use systole_core::{ArrayConfig, ConfigError, Rounding};

/// One accelerator design the sweep measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DesignPoint {
    /// Array size n (an n x n systolic array).
    pub array: usize,
    /// Words of the conv unit's feature-map buffer (0: no conv unit).
    pub fm_depth: usize,
    /// Word width W in bits.
    pub word_bits: u32,
    /// Rounding of every fixed-point conversion (stored by name).
    #[serde(with = "rounding_name")]
    pub rounding: Rounding,
    /// Two multiplies per DSP48E1 (`ArrayConfig::dsp_pack`, 8-bit words); absent in the
    /// `explore.json` of before: off.
    #[serde(default)]
    pub dsp_pack: bool,
}

impl DesignPoint {
    /// The hardware this point builds: `ArrayConfig::square(array)` with its feature-map depth
    /// and word width (`with_word_bits`: the accumulator of W too). Not validated: see
    /// [`Axes::points`].
    pub fn config(&self) -> ArrayConfig {
        ArrayConfig {
            fm_depth: self.fm_depth,
            ..ArrayConfig::square(self.array)
        }
        .with_word_bits(self.word_bits)
        .with_dsp_pack(self.dsp_pack)
    }

    /// `8x8 fm0 w16 stochastic` (`8x8 fm0 w8 pack stochastic` packed): the point in tables,
    /// messages and the plot.
    pub fn label(&self) -> String {
        format!(
            "{0}x{0} fm{1} w{2}{3} {4}",
            self.array,
            self.fm_depth,
            self.word_bits,
            if self.dsp_pack { " pack" } else { "" },
            self.rounding.name()
        )
    }

    /// The order of points in the reports: array, feature-map depth, W, packing, rounding.
    pub fn order(&self) -> (usize, usize, u32, bool, u32) {
        (
            self.array,
            self.fm_depth,
            self.word_bits,
            self.dsp_pack,
            self.rounding.code(),
        )
    }

    /// What the training results depend on: the array size (it fixes the tiles and so the
    /// stochastic-rounding seeds), W and the rounding. The feature-map depth does not: a
    /// convolution gives the same words on the conv unit as lowered on the host. (Its cycles
    /// do depend on the depth: the run records convolutions as such, and each point's cycle
    /// count decides where they run, `cycles::CycleTable::total`.)
    pub(crate) fn training_key(&self) -> (usize, u32, Rounding) {
        (self.array, self.word_bits, self.rounding)
    }

    /// What the synthesised design depends on (rounding is a register, not hardware; packing
    /// changes neither words nor cycles, only the hardware).
    pub(crate) fn hardware_key(&self) -> (usize, usize, u32, bool) {
        (self.array, self.fm_depth, self.word_bits, self.dsp_pack)
    }
}

/// (De)serialises a [`Rounding`] by its command-line name.
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

/// The axes of a sweep as the command line gives them (comma-separated lists).
#[derive(Clone, Debug, Default)]
pub struct Axes {
    /// `--array`, e.g. `4,8,16`.
    pub arrays: String,
    /// `--fm-depth`, e.g. `0,4096`.
    pub fm_depths: String,
    /// `--word-bits`, e.g. `16`.
    pub word_bits: String,
    /// `--rounding`, e.g. `stochastic,nearest`.
    pub roundings: String,
    /// `--dsp-pack`, `off`, `on` or `off,on`.
    pub dsp_packs: String,
}

impl Axes {
    /// Every combination of the axes, each value checked against core's limits (and the
    /// array sizes against the Verilated models this build has, `simulated`), in the order
    /// array, feature-map depth, W, rounding.
    pub fn points(&self, simulated: &[usize]) -> Result<Vec<DesignPoint>, ExploreError> {
        let arrays = parse_list("--array", &self.arrays, "4,8,16", whole)?;
        let fm_depths = parse_list("--fm-depth", &self.fm_depths, "0,4096", whole)?;
        let word_bits = parse_list("--word-bits", &self.word_bits, "16", |s| {
            s.parse::<u32>().ok()
        })?;
        let roundings = parse_list(
            "--rounding",
            &self.roundings,
            "stochastic,nearest",
            Rounding::parse,
        )?;
        let packs = parse_list("--dsp-pack", &self.dsp_packs, "off,on", |s| match s {
            "off" => Some(false),
            "on" => Some(true),
            _ => None,
        })?;
        if packs.contains(&true) {
            for &a in &arrays {
                for &w in &word_bits {
                    check(ArrayConfig::square(a).with_word_bits(w).with_dsp_pack(true))
                        .map_err(|source| ExploreError::DspPack { source })?;
                }
            }
        }
        for &w in &word_bits {
            systole_train::Widths::new(w, w).map_err(|e| ExploreError::WordBits {
                value: w,
                source: e.into(),
            })?;
        }
        for &a in &arrays {
            check(ArrayConfig::square(a))
                .map_err(|source| ExploreError::Array { value: a, source })?;
            if !simulated.contains(&a) {
                return Err(ExploreError::NotSimulated {
                    value: a,
                    built: simulated.to_vec(),
                });
            }
        }
        for &d in &fm_depths {
            check(ArrayConfig {
                fm_depth: d,
                ..ArrayConfig::square(8)
            })
            .map_err(|source| ExploreError::FmDepth { value: d, source })?;
        }
        let mut points = Vec::new();
        for &array in &arrays {
            for &fm_depth in &fm_depths {
                for &word_bits in &word_bits {
                    for &dsp_pack in &packs {
                        for &rounding in &roundings {
                            points.push(DesignPoint {
                                array,
                                fm_depth,
                                word_bits,
                                rounding,
                                dsp_pack,
                            });
                        }
                    }
                }
            }
        }
        Ok(points)
    }
}

fn check(cfg: ArrayConfig) -> Result<(), ConfigError> {
    cfg.validate()
}

fn whole(s: &str) -> Option<usize> {
    s.parse().ok()
}

/// Splits a comma-separated list of `flag`, parsing each entry with `parse`: an empty list or
/// entry, an entry `parse` refuses and a repeated entry are errors naming the flag, the value
/// and an `example` of a good list.
pub fn parse_list<T: PartialEq>(
    flag: &'static str,
    text: &str,
    example: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, ExploreError> {
    let mut out: Vec<T> = Vec::new();
    if text.trim().is_empty() {
        return Err(ExploreError::EmptyList { flag, example });
    }
    for entry in text.split(',').map(str::trim) {
        let bad = || ExploreError::BadEntry {
            flag,
            value: entry.to_string(),
            list: text.to_string(),
            example,
        };
        let v = parse(entry).ok_or_else(bad)?;
        if out.contains(&v) {
            return Err(ExploreError::Repeated {
                flag,
                value: entry.to_string(),
            });
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

/// The training recipe of a sweep, as the command line gives it.
#[derive(Clone, Debug)]
pub struct Recipe {
    /// The network.
    pub model: systole_train::model::ModelName,
    /// From an ONNX file: start every run from its weights, or from the seed.
    pub init: crate::cli::Init,
    /// MLP hidden widths.
    pub hidden: Vec<usize>,
    /// CNN block channels.
    pub channels: Vec<usize>,
    /// The data set.
    pub dataset: systole_train::data::DatasetSpec,
    /// `--input-scale`.
    pub input_scale: f32,
    /// `--input-offset`.
    pub input_offset: f32,
    /// Training images used (None: all).
    pub limit: Option<usize>,
    /// Epochs per run.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch: usize,
    /// Learning rate (None: the data set's default).
    pub lr: Option<f32>,
    /// Its decay per epoch (None: the data set's default).
    pub lr_decay: Option<f32>,
    /// Momentum.
    pub momentum: f32,
}

impl Recipe {
    /// The run configuration every point starts from (fixed point, seed 1, array 8: the
    /// sweep sets these per run), checked by the trainer.
    pub fn config(&self) -> Result<systole_train::TrainConfig, ExploreError> {
        Ok(self.config_and_model()?.0)
    }

    /// [`Recipe::config`] and the model as read for it (`--model` read as `train` reads it,
    /// with an ONNX file's weights unless `--init random`).
    pub fn config_and_model(
        &self,
    ) -> Result<(systole_train::TrainConfig, crate::onnx::ModelChoice), ExploreError> {
        let choice =
            crate::onnx::resolve_model(&self.model, self.init, &self.hidden, &self.channels)
                .map_err(|e| ExploreError::Model(crate::cli::error_text(&e)))?;
        let model = choice.spec.clone();
        if self.epochs == 0 {
            return Err(ExploreError::Zero { flag: "--epochs" });
        }
        let (lr, lr_decay) = self.dataset.default_rate();
        let cfg = systole_train::TrainConfig {
            model,
            dataset: self.dataset.clone(),
            input_scale: self.input_scale,
            input_offset: self.input_offset,
            train_limit: self.limit,
            epochs: self.epochs,
            batch: self.batch,
            lr: self.lr.unwrap_or(lr),
            lr_decay: self.lr_decay.unwrap_or(lr_decay),
            momentum: self.momentum,
            seed: 1,
            precision: systole_train::Precision::Fixed16,
            rounding: Rounding::Stochastic,
            array: 8,
            word_bits: 16,
            master_bits: 16,
            shards: None,
            microbatches: None,
        };
        cfg.validate()?;
        Ok((cfg, choice))
    }
}

/// The boards of `--board` (a comma-separated list; empty or `all`: every board).
pub fn parse_boards(text: &str) -> Result<Vec<&'static systole_boards::Board>, ExploreError> {
    if text.trim() == "all" {
        return Ok(systole_boards::list().iter().collect());
    }
    let names = parse_list("--board", text, "arty-a7-35,arty-a7-100", |s| {
        Some(s.to_string())
    })?;
    names
        .iter()
        .map(|n| systole_boards::find(n).map_err(ExploreError::Board))
        .collect()
}
