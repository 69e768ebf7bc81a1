//! Checkpoints: the whole state of a run as JSON, written atomically (temporary file, fsync,
//! rename, fsync of the folder) so a crash never leaves a half-written checkpoint behind.

use super::arith::TensorState;
use super::{EpochRecord, TrainConfig, TrainError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
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

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io(path))?;
    // Make the rename itself durable.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

impl Checkpoint {
    /// Saves to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        let json = serde_json::to_vec(self)
            .map_err(|e| TrainError::Checkpoint(format!("cannot encode: {e}")))?;
        write_atomic(path, &json)
    }

    /// Reads a checkpoint.
    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(io(path))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            TrainError::Checkpoint(format!(
                "{} is not a systole checkpoint: {e}",
                path.display()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let e = Checkpoint::load(&p).unwrap_err();
        assert!(e.to_string().contains("is not a systole checkpoint"), "{e}");
        let e = write_atomic(&dir.path().join("missing/x.json"), b"").unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
