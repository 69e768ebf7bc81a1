//! What a run is given besides its configuration ([`RunOptions`]) and what it returns
//! ([`RunSummary`]): shared by the run loop (`run`) and the run on a board that trains itself
//! (`board`), which `run` calls, so neither imports the other's file for them.

use crate::arith::TensorState;
use crate::fixed::SaturationCount;
use crate::{EpochRecord, TrainConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use systole_device::DeviceStats;

/// Where and how a run executes (none of this changes its results).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Where the products run (fixed point only).
    pub device: systole_device::DeviceSpec,
    /// Recompute every offloaded op in the golden model.
    pub check: bool,
    /// Folder for the checkpoint (None: no checkpoints).
    pub out: Option<std::path::PathBuf>,
    /// Continue from the checkpoint in `out`.
    pub resume: bool,
    /// Start afresh even though `out` holds a checkpoint (which the run then replaces).
    pub overwrite: bool,
    /// The device's waveform window (`--trace`; the verilator device only).
    pub trace: Option<systole_device::TraceWindow>,
    /// Drive every step from the host even on a board that trains itself (`--host-step`).
    pub host_step: bool,
    /// Write the checkpoint every this many epochs, and after the last (`--checkpoint-every`,
    /// at least 1). On a board that trains itself only those epochs read the whole state
    /// back; the others read the parameters the evaluation needs.
    pub checkpoint_every: usize,
}

impl RunOptions {
    /// Whether the checkpoint is written after `done` of `total` epochs: every
    /// `checkpoint_every` epochs and after the last.
    pub fn checkpoint_due(&self, done: usize, total: usize) -> bool {
        done >= total || done.is_multiple_of(self.checkpoint_every.max(1))
    }
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// The options.
    pub config: TrainConfig,
    /// Model description.
    pub model: String,
    /// The network, a line a layer: kind, settings, inputs, output shape, parameters, MACs.
    pub network: Vec<String>,
    /// Arithmetic description (format, rounding, device).
    pub arithmetic: String,
    /// Per-epoch results (including epochs before a resume).
    pub history: Vec<EpochRecord>,
    /// Device name and counters for the epochs run in this process.
    pub device: Option<(String, DeviceStats)>,
    /// Fixed point: saturation counters per operation name, for the epochs run in this process
    /// (under MPI, this rank's shards); empty for the float formats.
    pub saturation: BTreeMap<String, SaturationCount>,
    /// Final parameters.
    #[serde(skip)]
    pub params: Vec<TensorState>,
}

/// [`RunSummary::network`] of `g`.
pub fn network_lines(g: &crate::model::Graph) -> Vec<String> {
    g.describe()
        .map(|d| d.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_every_n_epochs_and_after_the_last() {
        let opts = |checkpoint_every| RunOptions {
            device: systole_device::DeviceSpec::Golden,
            check: false,
            out: None,
            resume: false,
            overwrite: false,
            trace: None,
            host_step: false,
            checkpoint_every,
        };
        let due = |every, total| {
            (1..=total)
                .filter(|&done| opts(every).checkpoint_due(done, total))
                .collect::<Vec<_>>()
        };
        assert_eq!(due(1, 3), [1, 2, 3]);
        assert_eq!(due(2, 5), [2, 4, 5]);
        assert_eq!(due(10, 4), [4]);
    }
}
