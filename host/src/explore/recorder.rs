//! [`Recorder`]: a device that counts the shape of every operation it passes on, the
//! cycle model's input (see [`super::cycles`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use systole_core::ArrayConfig;
use systole_device::{Device, DeviceError, DeviceStats};
use systole_firmware::conv::{sends_maps_once, ConvJob, ConvOp};
use systole_golden::conv::Conv2dGeom;
use systole_golden::tensor::QMatrix;
use systole_golden::OutputSpec;
use systole_train::{EpochRecord, Observer};

/// Which convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvKind {
    /// `conv2d_forward`.
    Forward,
    /// `conv2d_backward_input`.
    BackwardInput,
    /// `conv2d_backward_weights`.
    BackwardWeights,
}

/// The shape of one device operation: all its cycle count depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpShape {
    /// `C = A·B`, `m x k` times `k x n` (transposed products are transposed first, as the
    /// device backends do).
    Matmul {
        /// Rows of A.
        m: usize,
        /// Dot-product length.
        k: usize,
        /// Columns of B.
        n: usize,
    },
    /// A convolution with its two operands' `(rows, cols)`.
    Conv {
        /// Which one.
        kind: ConvKind,
        /// Its geometry.
        geom: Conv2dGeom,
        /// First operand's shape.
        a: (usize, usize),
        /// Second operand's shape.
        b: (usize, usize),
    },
}

/// How many operations of each shape.
pub type OpCounts = HashMap<OpShape, u64>;

#[derive(Default)]
pub(crate) struct Log {
    pub(crate) on: bool,
    pub(crate) ops: OpCounts,
}

/// A device that counts the shape of every operation it runs (while its log is on) and passes
/// the operation to `inner`. Transposed products go through its own `matmul`, as on the
/// device backends, so they are counted as the product the array runs.
///
/// A convolution is counted as the convolution it is, whatever runs it: where it runs is a
/// property of the design point, not of the training run (one golden run serves every
/// feature-map depth), so [`super::cycles::CycleTable::total`] decides per point. It is run
/// where the point's hardware (`unit`) would run it: on `inner`'s conv unit when the unit's
/// buffer holds the maps ([`runs_on_unit`], the backends' rule), else lowered on the host to
/// one product on `inner` (not counted again).
pub struct Recorder<D> {
    inner: D,
    unit: ArrayConfig,
    log: Arc<Mutex<Log>>,
}

/// Whether `unit`'s conv unit runs convolution `kind` of geometry `g` (the maps fit its
/// buffer: `systole_firmware::conv::sends_maps_once`, the rule every backend applies); if not,
/// the backends lower it on the host to one matrix product.
pub fn runs_on_unit(unit: &ArrayConfig, g: &Conv2dGeom, kind: ConvKind) -> bool {
    if g.validate().is_err() {
        return unit.has_conv_unit();
    }
    let op = match kind {
        ConvKind::Forward => ConvOp::Forward,
        ConvKind::BackwardInput => ConvOp::BackwardInput,
        ConvKind::BackwardWeights => ConvOp::BackwardWeights,
    };
    let job = ConvJob {
        op,
        geom: g.shape,
        batch: g.batch,
        x: &[],
        dy: &[],
        w: &[],
        shift: 0,
        rounding: systole_core::Rounding::Truncate,
        seed: 0,
    };
    sends_maps_once(unit, &job)
}

impl<D: Device> Recorder<D> {
    pub(crate) fn new(inner: D, unit: ArrayConfig) -> (Self, Arc<Mutex<Log>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        let me = Recorder {
            inner,
            unit,
            log: log.clone(),
        };
        (me, log)
    }

    fn note(&self, shape: OpShape) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.on {
            *log.ops.entry(shape).or_insert(0) += 1;
        }
    }

    /// Counts the convolution; whether the point's unit runs it.
    fn conv(&self, kind: ConvKind, g: &Conv2dGeom, a: &QMatrix, b: &QMatrix) -> bool {
        self.note(OpShape::Conv {
            kind,
            geom: *g,
            a: (a.rows, a.cols),
            b: (b.rows, b.cols),
        });
        runs_on_unit(&self.unit, g, kind)
    }
}

impl<D: Device> Device for Recorder<D> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn config(&self) -> &ArrayConfig {
        self.inner.config()
    }
    fn matmul(&mut self, a: &QMatrix, b: &QMatrix, o: &OutputSpec) -> Result<QMatrix, DeviceError> {
        self.note(OpShape::Matmul {
            m: a.rows,
            k: a.cols,
            n: b.cols,
        });
        self.inner.matmul(a, b, o)
    }
    fn conv2d_forward(
        &mut self,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        o: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        if !self.conv(ConvKind::Forward, g, x, w) {
            return systole_device::lowered_forward(&mut self.inner, x, w, g, o);
        }
        self.inner.conv2d_forward(x, w, g, o)
    }
    fn conv2d_backward_input(
        &mut self,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        o: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        if !self.conv(ConvKind::BackwardInput, g, dy, w) {
            return systole_device::lowered_backward_input(&mut self.inner, dy, w, g, o);
        }
        self.inner.conv2d_backward_input(dy, w, g, o)
    }
    fn conv2d_backward_weights(
        &mut self,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        o: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        if !self.conv(ConvKind::BackwardWeights, g, x, dy) {
            return systole_device::lowered_backward_weights(&mut self.inner, x, dy, g, o);
        }
        self.inner.conv2d_backward_weights(x, dy, g, o)
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
    fn reset_stats(&mut self) {
        self.inner.reset_stats()
    }
}

/// Turns the log on for an epoch's training batches and off before its evaluation.
pub(crate) struct TrainingStepsOnly {
    pub(crate) log: Arc<Mutex<Log>>,
    pub(crate) left: usize,
}

impl TrainingStepsOnly {
    fn set(&self, on: bool) {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).on = on;
    }
}

impl Observer for TrainingStepsOnly {
    fn epoch_start(&mut self, _epoch: usize, batches: usize) {
        self.left = batches;
        self.set(batches > 0);
    }
    fn batch_done(&mut self) {
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.set(false);
        }
    }
    fn epoch_end(&mut self, _rec: &EpochRecord) {
        self.set(false);
    }
}
