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

    /// Saves to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        let json = serde_json::to_vec(self).map_err(|source| TrainError::Encode {
            what: "checkpoint",
            source,
        })?;
        Ok(write_atomic(path, &json)?)
    }

    /// Reads a checkpoint.
    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(io(path))?;
        serde_json::from_slice(&bytes).map_err(|source| TrainError::CheckpointFormat {
            path: path.to_path_buf(),
            source,
        })
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
