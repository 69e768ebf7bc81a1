//! [`BoardProducts`]: the training step's matrix products and convolutions
//! ([`systole_step::Products`]) run by this crate's drivers on the board's own array, so the
//! whole step can run on the board's CPU. Feature `step` (it allocates: the step's
//! tensors live on the heap).
//!
//! Each product is the driver's, bit-exact with the golden model at the array's size as the
//! tile: transposed operands are read in place (`matmul_views`), convolutions go to the conv
//! unit. A convolution whose maps do not fit the unit's buffer is refused
//! ([`ProductsError::ConvNeedsLowering`]) rather than lowered here.

use crate::conv::{conv2d, sends_maps_once, ConvJob, ConvOp};
use crate::driver::{matmul_views, DriverError, DriverStats, MatmulJob, Transposed};
use alloc::string::{String, ToString};
use alloc::vec;
use core::fmt;
use systole_core::conv2d::{check_backward_input, check_forward, Conv2dGeom};
use systole_core::tensor::{output_shift, NumericError, OutputSpec, QMatrix};
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_step::{Products, StepError};

/// Why a product on the board failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProductsError<E> {
    /// The step's own work failed (or an operand broke the numeric contract).
    Step(StepError),
    /// The driver failed running operation `op`.
    Driver {
        /// The operation, e.g. `layer 2 backward dW`.
        op: String,
        /// The cause.
        source: DriverError<E>,
    },
    /// Convolution `op` needs the conv unit with room for its maps, and this array has not.
    ConvNeedsLowering {
        /// The operation.
        op: String,
        /// The convolution.
        geom: Conv2dGeom,
    },
}

impl<E> From<StepError> for ProductsError<E> {
    fn from(e: StepError) -> Self {
        ProductsError::Step(e)
    }
}

impl<E: fmt::Display> fmt::Display for ProductsError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProductsError::Step(e) => write!(f, "{e}"),
            ProductsError::Driver { op, .. } => write!(f, "{op}: the array's driver failed"),
            ProductsError::ConvNeedsLowering { op, geom } => write!(
                f,
                "{op}: the convolution ({geom}) does not fit this array's conv unit: \
                 build the array with the conv unit and a larger feature-map buffer, \
                 or train this model with the host-driven step"
            ),
        }
    }
}

impl<E: core::error::Error + 'static> core::error::Error for ProductsError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            ProductsError::Step(e) => Some(e),
            ProductsError::Driver { source, .. } => Some(source),
            ProductsError::ConvNeedsLowering { .. } => None,
        }
    }
}

/// What [`BoardProducts`] runs its drivers on: a bus it owns, or the bus a borrow points at
/// (the server's training step borrows the server's bus). The drivers are compiled for the bus
/// itself, so an image that serves requests and trains on one bus carries them once.
pub trait ProductsBus {
    /// The bus the drivers run on.
    type Bus: AcceleratorBus;
    /// That bus.
    fn bus(&mut self) -> &mut Self::Bus;
}

impl<T: AcceleratorBus> ProductsBus for &mut T {
    type Bus = T;
    fn bus(&mut self) -> &mut T {
        self
    }
}

/// The error of the bus behind `B`.
type BusError<B> = <<B as ProductsBus>::Bus as AcceleratorBus>::Error;

/// The step's products on the array behind `bus`, described by `config`.
pub struct BoardProducts<B> {
    bus: B,
    config: ArrayConfig,
    /// The drivers' counters, summed over every product so far.
    stats: DriverStats,
}

type Res<T, E> = Result<T, ProductsError<E>>;

fn numeric<E>(op: &str, source: NumericError) -> ProductsError<E> {
    ProductsError::Step(StepError::Numeric {
        op: op.to_string(),
        source,
    })
}

impl<B: ProductsBus> BoardProducts<B> {
    /// Products on `bus`, an array of `config` (checked against the device's `CONFIG` at every
    /// product).
    pub fn new(bus: B, config: ArrayConfig) -> Self {
        BoardProducts {
            bus,
            config,
            stats: DriverStats::default(),
        }
    }

    /// The drivers' counters summed over every product so far (array busy cycles, beats).
    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }

    /// The bus, back.
    pub fn into_bus(self) -> B {
        self.bus
    }

    fn add(&mut self, st: &DriverStats) {
        let s = &mut self.stats;
        for (sum, v) in [
            (&mut s.cycles, st.cycles),
            (&mut s.mac_cycles, st.mac_cycles),
            (&mut s.tiles, st.tiles),
            (&mut s.commands, st.commands),
            (&mut s.beats, st.beats),
            (&mut s.rows_written, st.rows_written),
            (&mut s.rows_read, st.rows_read),
            (&mut s.reg_writes, st.reg_writes),
            (&mut s.reg_reads, st.reg_reads),
            (&mut s.fm_words, st.fm_words),
            (&mut s.gathers, st.gathers),
            (&mut s.wait_cycles, st.wait_cycles),
        ] {
            *sum = sum.saturating_add(v);
        }
    }

    /// `A·B` with A and B read as stored (`tr`): `a` is `m x k` (or `k x m` transposed).
    fn product(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        tr: Transposed,
        spec: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        let (m, k) = if tr.a {
            (a.cols, a.rows)
        } else {
            (a.rows, a.cols)
        };
        let (kb, n) = if tr.b {
            (b.cols, b.rows)
        } else {
            (b.rows, b.cols)
        };
        if k != kb {
            return Err(numeric(
                op,
                NumericError::Shape(alloc::format!(
                    "A is {m}x{k} but B is {kb}x{n}: the inner dimensions must match"
                )),
            ));
        }
        let shift = output_shift(a.frac + b.frac, spec.frac).map_err(|e| numeric(op, e))?;
        let job = MatmulJob {
            a: &a.data,
            b: &b.data,
            m,
            k,
            n,
            shift,
            rounding: spec.rounding,
            seed: spec.seed,
        };
        let mut out = vec![0i16; m * n];
        let st =
            matmul_views(self.bus.bus(), &self.config, &job, tr, &mut out).map_err(|source| {
                match source {
                    DriverError::KTooLong(k) => numeric(op, NumericError::KTooLong(k)),
                    source => ProductsError::Driver {
                        op: op.to_string(),
                        source,
                    },
                }
            })?;
        self.add(&st);
        QMatrix::from_vec(m, n, spec.frac, out).map_err(|e| numeric(op, e))
    }

    /// Convolution op `conv` on the conv unit; `frac_in` is the two operands' fractional bits.
    /// Returns the lowered output (see [`crate::conv`]).
    fn conv(
        &mut self,
        op: &str,
        mut job: ConvJob<'_>,
        frac_in: u32,
        g: &Conv2dGeom,
        spec: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        job.shift = output_shift(frac_in, spec.frac).map_err(|e| numeric(op, e))?;
        if !sends_maps_once(&self.config, &job) {
            return Err(ProductsError::ConvNeedsLowering {
                op: op.to_string(),
                geom: *g,
            });
        }
        let (m, _, n) = job.shape();
        let mut out = vec![0i16; m * n];
        let st = conv2d(self.bus.bus(), &self.config, &job, &mut out).map_err(
            |source| match source {
                DriverError::KTooLong(k) => numeric(op, NumericError::KTooLong(k)),
                source => ProductsError::Driver {
                    op: op.to_string(),
                    source,
                },
            },
        )?;
        self.add(&st);
        QMatrix::from_vec(m, n, spec.frac, out).map_err(|e| numeric(op, e))
    }
}

/// `(batch·h·w) x ch` rows, as the unit emits them, to NCHW rows (`batch x ch·h·w`).
fn rows_to_nchw(m: &QMatrix, batch: usize, ch: usize, hw: usize) -> QMatrix {
    let mut out = QMatrix::zeros(batch, ch * hw, m.frac);
    for b in 0..batch {
        for p in 0..hw {
            for c in 0..ch {
                out.data[b * ch * hw + c * hw + p] = m.data[(b * hw + p) * ch + c];
            }
        }
    }
    out
}

fn job<'a>(op: ConvOp, g: &Conv2dGeom, spec: &OutputSpec) -> ConvJob<'a> {
    ConvJob {
        op,
        geom: g.shape,
        batch: g.batch,
        x: &[],
        dy: &[],
        w: &[],
        shift: 0,
        rounding: spec.rounding,
        seed: spec.seed,
    }
}

impl<B: ProductsBus> Products for BoardProducts<B> {
    type Error = ProductsError<BusError<B>>;

    fn name(&self) -> String {
        alloc::format!("board {0}x{0}", self.config.size)
    }

    fn matmul(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        self.product(op, a, b, Transposed::default(), s)
    }

    fn matmul_nt(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        let tr = Transposed { a: false, b: true };
        self.product(op, a, b, tr, s)
    }

    fn matmul_tn(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        let tr = Transposed { a: true, b: false };
        self.product(op, a, b, tr, s)
    }

    fn conv2d_forward(
        &mut self,
        op: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        check_forward(x, w, g).map_err(|e| numeric(op, e))?;
        let j = ConvJob {
            x: &x.data,
            w: &w.data,
            ..job(ConvOp::Forward, g, s)
        };
        let y = self.conv(op, j, x.frac + w.frac, g, s)?;
        Ok(rows_to_nchw(&y, g.batch, g.out_ch, g.out_h() * g.out_w()))
    }

    fn conv2d_backward_input(
        &mut self,
        op: &str,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        check_backward_input(dy, w, g).map_err(|e| numeric(op, e))?;
        let j = ConvJob {
            dy: &dy.data,
            w: &w.data,
            ..job(ConvOp::BackwardInput, g, s)
        };
        let dx = self.conv(op, j, dy.frac + w.frac, g, s)?;
        Ok(rows_to_nchw(&dx, g.batch, g.in_ch, g.in_h * g.in_w))
    }

    fn conv2d_backward_weights(
        &mut self,
        op: &str,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Res<QMatrix, BusError<B>> {
        let checks = g
            .validate()
            .and_then(|()| g.check_map(x, "input", g.in_ch, g.in_h, g.in_w))
            .and_then(|()| g.check_map(dy, "output gradient", g.out_ch, g.out_h(), g.out_w()));
        checks.map_err(|e| numeric(op, e))?;
        let j = ConvJob {
            x: &x.data,
            dy: &dy.data,
            ..job(ConvOp::BackwardWeights, g, s)
        };
        self.conv(op, j, x.frac + dy.frac, g, s)
    }
}

#[cfg(test)]
mod tests;
