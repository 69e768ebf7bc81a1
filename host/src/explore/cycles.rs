//! Accuracy and cycles of a design point.
//!
//! How the cycles per epoch are found (the method `explore.json` states as `cycle_method`):
//! the device's `CYCLES` count of one operation (from its first to its last register access:
//! the tile driver's schedule and the hardware's timing) depends only on the operation's
//! shape, not on the words in it. So the golden-model training run records every device
//! operation of every training step ([`Recorder`]; evaluation passes are left out), each
//! distinct shape is run once on the Verilated array ([`CycleTable`]), and an epoch's cycles
//! are the sum over its operations of their shape's count. That per-shape table is the cycle
//! model; [`sample_check`] proves it on the point itself: the first training steps run on the
//! Verilated array, and the table's prediction for the operations they issued must equal the
//! array's own count, or the point fails instead of reporting a wrong figure.

pub use super::recorder::{ConvKind, OpCounts, OpShape};
use super::recorder::{Recorder, TrainingStepsOnly};
use super::{DesignPoint, ExploreError};
use std::collections::HashMap;
use std::sync::PoisonError;
use systole_core::ArrayConfig;
use systole_device::golden::GoldenDevice;
use systole_device::verilator::VerilatorDevice;
use systole_device::{Device, DeviceError};
use systole_golden::OutputSpec;
use systole_train::data::Dataset;
use systole_train::model::Params;
use systole_train::{MaybeDevice, Precision, TrainConfig, Trainer};

/// One seed of one point trained on the golden model.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// Final test accuracy (percent).
    pub test_acc: f32,
    /// Device operations of all training steps (saturation re-runs included).
    pub ops: OpCounts,
}

/// The run configuration of `point` with `seed`: fixed point on `point`'s array.
pub fn point_config(base: &TrainConfig, point: &DesignPoint, seed: u64) -> TrainConfig {
    TrainConfig {
        precision: Precision::Fixed16,
        rounding: point.rounding,
        array: point.array,
        seed,
        word_bits: point.word_bits,
        master_bits: point.word_bits,
        shards: None,
        microbatches: None,
        ..base.clone()
    }
}

/// The device a point trains and is timed on: its hardware at 16 bits. At W < 16 the step
/// saturates the device's words to W (the W-bit conversion bit for bit, `systole_step::width`;
/// the array built at W gives the same words, `tests/tests/device_conformance.rs`), and a
/// shape's cycles do not depend on W, so the 16-bit golden model and the compiled-in Verilated
/// array serve every W without Verilating each W.
fn device_config(point: &DesignPoint) -> ArrayConfig {
    point
        .config()
        .with_word_bits(systole_core::numeric::WORD_BITS)
        .with_dsp_pack(false)
}

/// The trainer's fixed-point arithmetic at `cfg`'s widths on `dev`.
fn on_device(
    dev: impl Device + 'static,
    cfg: &TrainConfig,
) -> Result<systole_train::FixedArith, ExploreError> {
    Ok(systole_train::on_device_at(
        Box::new(dev),
        cfg.rounding,
        cfg.seed,
        false,
        cfg.widths()?,
    ))
}

fn device_err(what: String) -> impl FnOnce(DeviceError) -> ExploreError {
    move |source| ExploreError::Device { what, source }
}

/// Trains `point` with `seed` for `base.epochs` epochs on the golden model from `start` (or
/// the seed's weights), exactly as `systole train --device golden` does, recording the
/// training steps' device operations.
pub fn train_point(
    (base, start): (&TrainConfig, Option<&Params>),
    data: &Dataset,
    point: &DesignPoint,
    seed: u64,
) -> Result<SeedRun, ExploreError> {
    let cfg = point_config(base, point, seed);
    let golden = GoldenDevice::new(device_config(point)).map_err(device_err(format!(
        "{}: opening the golden model",
        point.label()
    )))?;
    let (dev, log) = Recorder::new(golden);
    let arith = on_device(dev, &cfg)?;
    let mut t = Trainer::start(cfg.clone(), data, arith, start)?;
    let mut obs = TrainingStepsOnly {
        log: log.clone(),
        left: 0,
    };
    while t.epoch < cfg.epochs {
        t.train_epoch(data, &mut obs)?;
    }
    let test_acc = t.history.last().map_or(0.0, |h| h.test_acc);
    let ops = std::mem::take(&mut log.lock().unwrap_or_else(PoisonError::into_inner).ops);
    Ok(SeedRun { test_acc, ops })
}

/// Cycles of each operation shape on one Verilated array, each measured once.
pub struct CycleTable {
    dev: VerilatorDevice,
    cycles: HashMap<OpShape, u64>,
}

/// The Verilated model an `n x n` point's cycles are counted on: the build's
/// `ArrayConfig::square(n)` (512-row buffers, the largest conv unit), the only one there is.
pub fn simulated_config(array: usize) -> ArrayConfig {
    ArrayConfig::square(array)
}

/// The device a point's cycles are counted on: the build's `n x n` model presenting the
/// point's conv unit (`VerilatorDevice::with_conv_unit_of`), so its driver runs or lowers each
/// convolution and schedules it exactly as on the point's design.
fn timing_device(point: &DesignPoint) -> Result<VerilatorDevice, ExploreError> {
    VerilatorDevice::with_conv_unit_of(device_config(point)).map_err(device_err(format!(
        "{}: opening the Verilated {n}x{n} array with a {d}-word conv unit",
        point.label(),
        n = point.array,
        d = point.fm_depth
    )))
}

impl CycleTable {
    /// An empty table on a fresh Verilated model of `point`'s hardware (its array size and
    /// conv unit; W and rounding do not change a shape's cycles).
    pub fn new(point: &DesignPoint) -> Result<Self, ExploreError> {
        Ok(CycleTable {
            dev: timing_device(point)?,
            cycles: HashMap::new(),
        })
    }

    /// Cycles of one operation of `shape`, run on the model the first time it is asked for.
    pub fn cycles(&mut self, shape: &OpShape) -> Result<u64, ExploreError> {
        if let Some(&c) = self.cycles.get(shape) {
            return Ok(c);
        }
        let c = measure(&mut self.dev, shape).map_err(device_err(format!(
            "timing {shape:?} on the Verilated array"
        )))?;
        self.cycles.insert(*shape, c);
        Ok(c)
    }

    /// Total cycles of `ops` (a convolution the table's conv unit cannot hold is timed as the
    /// product the device lowers it to, as on that design).
    pub fn total(&mut self, ops: &OpCounts) -> Result<u64, ExploreError> {
        let mut sum = 0u64;
        for (shape, &count) in ops {
            sum = sum.saturating_add(self.cycles(shape)?.saturating_mul(count));
        }
        Ok(sum)
    }
}

/// Runs one operation of `shape` on `dev` with arbitrary words and returns its cycles.
pub fn measure(dev: &mut dyn Device, shape: &OpShape) -> Result<u64, DeviceError> {
    use crate::bench::operand;
    let spec = OutputSpec {
        frac: 8,
        rounding: systole_core::Rounding::Stochastic,
        seed: 7,
    };
    let before = dev.stats().cycles;
    match *shape {
        OpShape::Matmul { m, k, n } => {
            dev.matmul(&operand(m, k, 1, 8, 2), &operand(k, n, 2, 8, 2), &spec)?;
        }
        OpShape::Conv { kind, geom, a, b } => {
            let (a, b) = (operand(a.0, a.1, 3, 8, 2), operand(b.0, b.1, 4, 8, 2));
            match kind {
                ConvKind::Forward => dev.conv2d_forward(&a, &b, &geom, &spec)?,
                ConvKind::BackwardInput => dev.conv2d_backward_input(&a, &b, &geom, &spec)?,
                ConvKind::BackwardWeights => dev.conv2d_backward_weights(&a, &b, &geom, &spec)?,
            };
        }
    }
    Ok(dev.stats().cycles - before)
}

/// The sampled steps of a point: the Verilated count and the cycle model's prediction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Training steps run on the Verilated array.
    pub steps: usize,
    /// Its `CYCLES` count over their device operations.
    pub verilated: u64,
    /// The per-shape table's prediction for the same operations.
    pub model: u64,
}

/// Runs the first `steps` training steps of `point` (seed `seed`, from `start` or the seed's
/// weights) on the Verilated array and checks that `table` predicts their cycle count exactly
/// ([`ExploreError::CycleMismatch`] otherwise).
pub fn sample_check(
    (base, start): (&TrainConfig, Option<&Params>),
    data: &Dataset,
    point: &DesignPoint,
    seed: u64,
    steps: usize,
    table: &mut CycleTable,
) -> Result<Sample, ExploreError> {
    let cfg = point_config(base, point, seed);
    let (dev, log) = Recorder::new(timing_device(point)?);
    let arith = on_device(dev, &cfg)?;
    let mut t = Trainer::start(cfg, data, arith, start)?;
    log.lock().unwrap_or_else(PoisonError::into_inner).on = true;
    // The model is set up (parameters imported) before the log is on: only steps count.
    let start = t.arith.device_stats().map_or(0, |(_, s)| s.cycles);
    t.train_steps(data, steps, &mut |_| {})?;
    let verilated = t.arith.device_stats().map_or(0, |(_, s)| s.cycles) - start;
    let ops = std::mem::take(&mut log.lock().unwrap_or_else(PoisonError::into_inner).ops);
    let model = table.total(&ops)?;
    if model != verilated {
        return Err(ExploreError::CycleMismatch {
            point: point.label(),
            steps,
            verilated,
            model,
        });
    }
    Ok(Sample {
        steps,
        verilated,
        model,
    })
}
