//! A sweep's results: `explore.json` (everything, and what a resumed sweep reads back) and
//! `explore.csv` (one row per point).

use super::cycles::Sample;
use super::synth::{BoardFit, Resources};
use super::{DesignPoint, ExploreError};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// File names in the sweep's folder.
pub const JSON: &str = "explore.json";
/// See [`JSON`].
pub const CSV: &str = "explore.csv";
/// See [`JSON`].
pub const PLOT: &str = "pareto.png";

/// What the cycles per epoch are (stated in `explore.json`).
pub const CYCLE_METHOD: &str = "sum over the epoch's training-step device operations (recorded in the golden-model run, evaluation excluded) of each operation shape's CYCLES count, each shape timed once on the Verilated ArrayConfig::square(n) array (512-row buffers, 32768-word conv unit); a convolution counts as its own shape where the point's conv unit holds its maps, else (no unit, or maps too large for the point's depth) as the one product the host lowers it to; checked per point: the first sample_steps training steps run on the Verilated array and its count must equal this model's prediction";

/// Everything that changes a point's results: a sweep resumes only into a folder whose
/// settings are these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The network (`mlp 32`, `cnn 8,16`).
    pub model: String,
    /// Data set.
    pub dataset: String,
    /// `--input-scale` (sweeps from before the option have none: 1).
    #[serde(default = "unit")]
    pub input_scale: f32,
    /// `--input-offset` (none: 0).
    #[serde(default)]
    pub input_offset: f32,
    /// Training images used (None: all).
    pub limit: Option<usize>,
    /// Epochs per run.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch: usize,
    /// Learning rate of the first epoch.
    pub lr: f32,
    /// Its decay per epoch.
    pub lr_decay: f32,
    /// Momentum.
    pub momentum: f32,
    /// Run seeds of each point.
    pub seeds: Vec<u64>,
    /// Steps of the cycle model's check.
    pub sample_steps: usize,
    /// Where resources come from.
    pub resources: String,
}

fn unit() -> f32 {
    1.0
}

/// One measured design point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// The design.
    pub point: DesignPoint,
    /// Test accuracy of each seed (percent).
    pub acc_per_seed: Vec<f32>,
    /// Their mean.
    pub acc_mean: f32,
    /// Their sample standard deviation (0 with one seed).
    pub acc_std: f32,
    /// Simulated cycles per training epoch, mean over the seeds.
    pub cycles_per_epoch: u64,
    /// The cycle model's check on the Verilated array.
    pub sample: Sample,
    /// Synthesised resources; `None` (not available) where the synthesiser has no figures
    /// (`--resources estimate` below 16 bits).
    pub resources: Option<Resources>,
    /// Fit and epoch time per board.
    pub boards: Vec<BoardFit>,
}

/// `explore.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    /// The settings every point was measured with.
    pub settings: Settings,
    /// How cycles were found.
    pub cycle_method: String,
    /// Finished points, in sweep order.
    pub points: Vec<PointResult>,
}

/// Mean and sample standard deviation.
pub fn mean_std(xs: &[f32]) -> (f32, f32) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / (n - 1.0)
    } else {
        0.0
    };
    (mean as f32, var.sqrt() as f32)
}

/// The CSV: a row per point, a fit and an epoch-time column per board.
pub fn csv(file: &SweepFile) -> String {
    let mut s = String::from(
        "array,fm_depth,word_bits,rounding,acc_mean,acc_std,acc_min,acc_max,cycles_per_epoch,luts,lutram,ffs,dsp48e1,ramb18,dsp_pack,macs_per_dsp48e1",
    );
    let boards: Vec<&str> = file
        .points
        .first()
        .map(|p| p.boards.iter().map(|b| b.board.as_str()).collect())
        .unwrap_or_default();
    for b in &boards {
        let _ = write!(s, ",fits_{b},epoch_s_{b}");
    }
    s.push('\n');
    for p in &file.points {
        let min = p.acc_per_seed.iter().copied().fold(f32::INFINITY, f32::min);
        let max = p
            .acc_per_seed
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        let d = &p.point;
        let na = || "n/a".to_string();
        let r =
            |f: fn(&Resources) -> u32| p.resources.as_ref().map_or_else(na, |r| f(r).to_string());
        let _ = write!(
            s,
            "{},{},{},{},{:.3},{:.3},{min:.3},{max:.3},{},{},{},{},{},{},{},{}",
            d.array,
            d.fm_depth,
            d.word_bits,
            d.rounding.name(),
            p.acc_mean,
            p.acc_std,
            p.cycles_per_epoch,
            r(|r| r.luts),
            r(|r| r.lutram),
            r(|r| r.ffs),
            r(|r| r.dsps),
            r(|r| r.brams),
            u8::from(d.dsp_pack),
            // Measured: the array's MACs over the DSP48E1s synthesis used.
            p.resources
                .as_ref()
                .filter(|r| r.dsps > 0)
                .map_or_else(na, |r| format!(
                    "{:.1}",
                    (d.array * d.array) as f64 / f64::from(r.dsps)
                ))
        );
        for b in &p.boards {
            let fits = match (&p.resources, b.fits) {
                (None, _) => "n/a",
                (Some(_), true) => "yes",
                (Some(_), false) => "no",
            };
            let _ = write!(s, ",{fits},{:.6}", b.epoch_seconds);
        }
        s.push('\n');
    }
    s
}

/// Reads an earlier sweep's `explore.json`, `None` when there is none.
pub fn read(path: &Path) -> Result<Option<SweepFile>, ExploreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ExploreError::Corrupt {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ExploreError::Corrupt {
            path: path.to_path_buf(),
            source: e.into(),
        })
}

/// The first setting in which `old` differs from `new`: `(option, old value, new value)`.
pub fn differing(old: &Settings, new: &Settings) -> Option<(String, String, String)> {
    let (a, b) = (
        serde_json::to_value(old).ok()?,
        serde_json::to_value(new).ok()?,
    );
    let (a, b) = (a.as_object()?, b.as_object()?);
    b.iter().find_map(|(k, v)| {
        let was = a.get(k).cloned().unwrap_or(serde_json::Value::Null);
        (was != *v).then(|| (k.replace('_', "-"), was.to_string(), v.to_string()))
    })
}
