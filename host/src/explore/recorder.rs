//! [`Recorder`]: a device that counts the shape of every operation it passes on, the
//! cycle model's input (see [`super::cycles`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use systole_core::ArrayConfig;
use systole_device::{Device, DeviceError, DeviceStats};
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
/// A convolution is counted as the convolution it is, whoever runs it: where it runs (on a
/// conv unit that holds its maps, else lowered on the host to one product) is a property of
/// the design point, not of the training run, which serves every feature-map depth. The
/// point's timing device decides it as the point's design does (see [`super::cycles`]).
pub struct Recorder<D> {
    inner: D,
    log: Arc<Mutex<Log>>,
}

impl<D: Device> Recorder<D> {
    pub(crate) fn new(inner: D) -> (Self, Arc<Mutex<Log>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        let me = Recorder {
            inner,
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
