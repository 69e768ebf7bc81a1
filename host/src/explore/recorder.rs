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
/// A convolution runs where the point's hardware (`unit`) would run it: on its conv unit when
/// the unit's buffer holds the maps (`systole_firmware::conv::sends_maps_once`, the backends'
/// rule), else lowered on the host to a product, counted as that product.
pub struct Recorder<D> {
    inner: D,
    unit: ArrayConfig,
    log: Arc<Mutex<Log>>,
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

    /// Whether the point's conv unit runs `op` of geometry `g`.
    fn on_unit(&self, g: &Conv2dGeom, op: ConvOp) -> bool {
        if g.validate().is_err() {
            return self.unit.has_conv_unit();
        }
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
        sends_maps_once(&self.unit, &job)
    }

    fn note(&self, shape: OpShape) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if log.on {
            *log.ops.entry(shape).or_insert(0) += 1;
        }
    }

    fn conv(&self, kind: ConvKind, g: &Conv2dGeom, a: &QMatrix, b: &QMatrix) {
        self.note(OpShape::Conv {
            kind,
            geom: *g,
            a: (a.rows, a.cols),
            b: (b.rows, b.cols),
        });
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
        if !self.on_unit(g, ConvOp::Forward) {
            return systole_device::lowered_forward(self, x, w, g, o);
        }
        self.conv(ConvKind::Forward, g, x, w);
        self.inner.conv2d_forward(x, w, g, o)
    }
    fn conv2d_backward_input(
        &mut self,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        o: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        if !self.on_unit(g, ConvOp::BackwardInput) {
            return systole_device::lowered_backward_input(self, dy, w, g, o);
        }
        self.conv(ConvKind::BackwardInput, g, dy, w);
        self.inner.conv2d_backward_input(dy, w, g, o)
    }
    fn conv2d_backward_weights(
        &mut self,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        o: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        if !self.on_unit(g, ConvOp::BackwardWeights) {
            return systole_device::lowered_backward_weights(self, x, dy, g, o);
        }
        self.conv(ConvKind::BackwardWeights, g, x, dy);
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
