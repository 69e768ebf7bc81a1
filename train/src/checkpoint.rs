//! Checkpoints: the whole state of a run as JSON, written atomically
//! ([`crate::write_atomic`]: temporary file, fsync, rename, fsync of the folder) so a
//! crash never leaves a half-written checkpoint behind.

use super::arith::TensorState;
use super::{EpochRecord, TrainConfig, TrainError};
use crate::outfile::write_atomic;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Format tag stored in every checkpoint.
pub const FORMAT: &str = "systole-checkpoint-1";

/// File name of the checkpoint inside a run's `--out` folder.
pub const FILE_NAME: &str = "checkpoint.json";

/// A run's state after a whole number of epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`FORMAT`].
    pub format: String,
    /// The run's options.
    pub config: TrainConfig,
    /// Epochs completed.
    pub epoch: usize,
    /// Training steps completed.
    pub step: u64,
    /// Parameters.
    pub params: Vec<TensorState>,
    /// Momentum buffers.
    pub velocity: Vec<TensorState>,
    /// Per-operation fractional bits (fixed point only).
    pub fracs: BTreeMap<String, u32>,
    /// Completed epochs' records.
    pub history: Vec<EpochRecord>,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Checkpoint {
    /// Checks this checkpoint can continue under `cfg`: the same options (except `--epochs`),
    /// no more epochs done than `cfg` asks for, and a history of exactly the epochs done (so
    /// `history.csv` never repeats or skips one).
    pub fn check_continues(&self, cfg: &TrainConfig) -> Result<(), TrainError> {
        if !cfg.same_run(&self.config) {
            return Err(TrainError::Checkpoint(format!(
                "it was written by a different run configuration ({}); resume with the checkpoint's options (only --epochs and --device may change)",
                cfg.differences(&self.config, "in the checkpoint").join("; ")
            )));
        }
        if self.epoch > cfg.epochs {
            return Err(TrainError::Checkpoint(format!(
                "it has {} epochs done, more than --epochs {}: ask for at least --epochs {} to continue it",
                self.epoch, cfg.epochs, self.epoch
            )));
        }
        let recorded: Vec<usize> = self.history.iter().map(|r| r.epoch).collect();
        if !recorded.iter().copied().eq(1..=self.epoch) {
            return Err(TrainError::Checkpoint(format!(
                "it says {} epochs are done but its history holds epochs {recorded:?}: the file was edited or mixed from two runs; start over with --overwrite",
                self.epoch
            )));
        }
        Ok(())
    }

    /// An upper bound of this run's checkpoint size in any later epoch: the size now, plus room
    /// for every tensor value to print longer (a 16-bit word takes at most 7 bytes, `-32768,`;
    /// an f32 at most 16).
    pub fn size_bound(&self) -> u64 {
        let now = serde_json::to_vec(self).map_or(0, |v| v.len());
        let words: usize = self
            .params
            .iter()
            .chain(&self.velocity)
            .map(|t| match t {
                TensorState::Fixed { data, .. } => data.len(),
                TensorState::Float { data, .. } => data.len(),
            })
            .sum();
        (now as u64).saturating_add(16 * words as u64)
    }

    /// Saves to `path` atomically, with a [`CHECKSUM`] field over the rest of its content.
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        let encode = |source| TrainError::Encode {
            what: "checkpoint",
            source,
        };
        let mut v = serde_json::to_value(self).map_err(encode)?;
        let sum = checksum(&v);
        if let Some(o) = v.as_object_mut() {
            o.insert(CHECKSUM.into(), sum.into());
        }
        let json = serde_json::to_vec(&v).map_err(encode)?;
        Ok(write_atomic(path, &json)?)
    }

    /// Reads a checkpoint; its [`CHECKSUM`], when it has one (files written before it have
    /// none), must match its content.
    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(io(path))?;
        let format = |source| TrainError::CheckpointFormat {
            path: path.to_path_buf(),
            source,
        };
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).map_err(format)?;
        let stored = v.as_object_mut().and_then(|o| o.remove(CHECKSUM));
        if let Some(stored) = stored {
            let sum = checksum(&v);
            if stored.as_str() != Some(sum.as_str()) {
                return Err(field_error(
                    path,
                    CHECKSUM,
                    format!("is {stored} but the content sums to \"{sum}\": the file was damaged or edited"),
                ));
            }
        }
        serde_json::from_value(v).map_err(format)
    }

    /// [`Self::load`], then every field checked against `fresh` (the checkpoint of the run
    /// being resumed, before its first step: its options, tensors and formats): the format
    /// tag, the step counter against the epochs done (`train_images` training images, before
    /// `--limit`), every tensor's kind, shape, length and words, and every remembered format's
    /// range. An error names the file and the field.
    pub fn load_for(
        path: &Path,
        fresh: &Checkpoint,
        train_images: usize,
    ) -> Result<Checkpoint, TrainError> {
        let ck = Checkpoint::load(path)?;
        ck.validate(path, fresh, train_images)?;
        Ok(ck)
    }

    fn validate(
        &self,
        path: &Path,
        fresh: &Checkpoint,
        train_images: usize,
    ) -> Result<(), TrainError> {
        let bad = |field: &str, what: String| Err(field_error(path, field, what));
        if self.format != FORMAT {
            return bad("format", format!("is '{}', not '{FORMAT}'", self.format));
        }
        let cfg = &self.config;
        let images = train_images.min(cfg.train_limit.unwrap_or(usize::MAX));
        let per_epoch = images.div_ceil(cfg.batch.max(1)) as u64;
        if Some(self.step) != (self.epoch as u64).checked_mul(per_epoch) {
            return bad(
                "step",
                format!(
                    "is {} but {} epochs of {per_epoch} batches make {}",
                    self.step,
                    self.epoch,
                    self.epoch as u64 * per_epoch
                ),
            );
        }
        let fixed = cfg.precision == super::Precision::Fixed16;
        let word = systole_core::numeric::max_frac(cfg.word_bits);
        for (op, &frac) in &self.fracs {
            if !fixed {
                return bad(
                    &format!("fracs.{op}"),
                    "is set, but a float run keeps no formats".into(),
                );
            }
            if frac > word {
                return bad(
                    &format!("fracs.{op}"),
                    format!(
                        "is {frac} fractional bits, over the {} of {}-bit words",
                        word, cfg.word_bits
                    ),
                );
            }
        }
        for (name, got, want) in [
            ("params", &self.params, &fresh.params),
            ("velocity", &self.velocity, &fresh.velocity),
        ] {
            if got.len() != want.len() {
                return bad(
                    name,
                    format!("holds {} tensors, the model has {}", got.len(), want.len()),
                );
            }
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                let field = format!("{name}[{i}] (parameter {} in the network's order)", i + 1);
                if let Err(what) = tensor_fits(g, w, cfg.master_bits) {
                    return bad(&field, what);
                }
            }
        }
        Ok(())
    }
}

/// The field of a checkpoint holding the checksum of the rest of its content.
pub const CHECKSUM: &str = "checksum";

/// FNV-1a 64 of the checkpoint's JSON without [`CHECKSUM`] (keys in order), as hex.
fn checksum(v: &serde_json::Value) -> String {
    let mut h = crate::dist::Fnv::default();
    h.write(&serde_json::to_vec(v).unwrap_or_default());
    format!("{:016x}", h.0)
}

fn field_error(path: &Path, field: &str, what: String) -> TrainError {
    TrainError::CheckpointField {
        path: path.to_path_buf(),
        field: field.to_string(),
        what,
    }
}

/// Whether tensor `got` can stand where the run has `want`: the same kind and shape, as many
/// values as the shape holds, and fixed-point words and formats within `master` bits.
fn tensor_fits(got: &TensorState, want: &TensorState, master: u32) -> Result<(), String> {
    use systole_core::numeric::{max_frac, word_max, word_min};
    let shape = |t: &TensorState| match t {
        TensorState::Fixed { rows, cols, .. } | TensorState::Float { rows, cols, .. } => {
            (*rows, *cols)
        }
    };
    let ((r, c), (wr, wc)) = (shape(got), shape(want));
    if (r, c) != (wr, wc) {
        return Err(format!("is {r}x{c}, the model's is {wr}x{wc}"));
    }
    match (got, want) {
        (TensorState::Fixed { frac, data, .. }, TensorState::Fixed { .. }) => {
            if data.len() != r * c {
                return Err(format!("holds {} words for {r}x{c}", data.len()));
            }
            if *frac > max_frac(master) {
                return Err(format!(
                    "has {frac} fractional bits, over the {} of {master}-bit weights",
                    max_frac(master)
                ));
            }
            let (lo, hi) = (word_min(master), word_max(master));
            if let Some(i) = data
                .iter()
                .position(|&w| !(lo..=hi).contains(&i64::from(w)))
            {
                return Err(format!("word {i} is {}, outside {master} bits", data[i]));
            }
            Ok(())
        }
        (TensorState::Float { data, .. }, TensorState::Float { .. }) => {
            if data.len() != r * c {
                return Err(format!("holds {} values for {r}x{c}", data.len()));
            }
            match data.iter().position(|x| !x.is_finite()) {
                Some(i) => Err(format!("value {i} is not finite")),
                None => Ok(()),
            }
        }
        (TensorState::Fixed { .. }, _) => {
            Err("holds fixed-point words but this run is floating point".into())
        }
        (TensorState::Float { .. }, _) => Err("holds floats but this run is fixed point".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;

    /// Checkpoints written before `--lr-decay` existed trained at a constant rate, and read
    /// back so: resumed under today's defaults they are refused naming the option. Those from
    /// before `--input-scale` / `--input-offset` trained on pixel / pixel_max: 1 and 0.
    #[test]
    fn a_checkpoint_from_before_the_schedule_trained_at_a_constant_rate() {
        let now = TrainConfig {
            model: ModelSpec::Mlp { hidden: vec![8] },
            dataset: crate::data::DatasetSpec::Digits,
            input_scale: 1.0,
            input_offset: 0.0,
            train_limit: None,
            epochs: 2,
            batch: 32,
            lr: 0.05,
            lr_decay: 0.85,
            momentum: 0.9,
            seed: 1,
            precision: super::super::Precision::F32,
            rounding: systole_core::Rounding::NearestEven,
            array: 8,
            word_bits: 16,
            master_bits: 16,
            shards: None,
            microbatches: None,
        };
        let mut old = serde_json::to_value(&now).unwrap();
        for field in ["lr_decay", "input_scale", "input_offset"] {
            old.as_object_mut().unwrap().remove(field).unwrap();
        }
        let old: TrainConfig = serde_json::from_value(old).unwrap();
        assert_eq!(old.lr_decay, 1.0);
        assert_eq!((old.input_scale, old.input_offset), (1.0, 0.0));
        assert_eq!(
            now.differences(&old, "in the checkpoint"),
            ["--lr-decay 0.85 here, 1 in the checkpoint"]
        );
    }

    #[test]
    fn a_file_that_is_not_a_checkpoint_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, b"two").unwrap();
        let e = Checkpoint::load(&p).unwrap_err();
        assert!(e.to_string().contains("is not a systole checkpoint"), "{e}");
        // The decoder's own words are the source, not flattened into the sentence.
        let cause = std::error::Error::source(&e).expect("the decoder's error as source");
        assert!(cause.to_string().contains("line 1"), "{cause}");
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod field_tests;
