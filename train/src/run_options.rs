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
    /// `--device` value (fixed point only).
    pub device: String,
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
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// The options.
    pub config: TrainConfig,
    /// Model description.
    pub model: String,
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
