//! Convolutions on a device with the conv unit: the one path the verilator and serial
//! backends share. The firmware's conv driver runs the golden model's lowered product with
//! the im2col operand gathered on chip; this module checks the operands, builds its job and
//! turns the lowered output back into NCHW.

use super::{DeviceError, DeviceStats};
use core::fmt::Display;
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_firmware::conv::{conv2d, ConvJob, ConvOp};
use systole_firmware::driver::DriverStats;
use systole_golden::conv::{self, Conv2dGeom};
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

/// The operands of one op (unused ones empty).
pub(crate) struct ConvOperands<'a> {
    pub op: ConvOp,
    pub x: Option<&'a QMatrix>,
    pub dy: Option<&'a QMatrix>,
    pub w: Option<&'a QMatrix>,
}

fn check(m: &QMatrix, what: &str, rows: usize, cols: usize) -> Result<(), DeviceError> {
    if m.rows != rows || m.cols != cols {
        return Err(NumericError::Shape(format!(
            "{what} is {}x{} but the convolution needs {rows}x{cols}",
            m.rows, m.cols
        ))
        .into());
    }
    Ok(())
}

/// Runs one op through the conv driver on `bus`; returns the result (NCHW for the forward
/// and input-gradient ops, `out_ch x in_ch·k·k` for the weight gradient) and the driver's
/// counters. `wrap` names the bus in errors.
pub(crate) fn run<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    ops: &ConvOperands<'_>,
    g: &Conv2dGeom,
    out: &OutputSpec,
    stats: &mut DeviceStats,
    wrap: &dyn Fn(String) -> DeviceError,
) -> Result<(QMatrix, DriverStats), DeviceError>
where
    B::Error: Display,
{
    g.validate()?;
    let geom = g.unit_geom();
    let empty: &[i16] = &[];
    let mut frac = 0;
    let mut data = [empty; 3];
    for (i, (m, what, words)) in [
        (ops.x, "input", geom.in_words()),
        (ops.dy, "output gradient", geom.out_words()),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(m) = m {
            check(m, what, g.batch, words)?;
            frac += m.frac;
            data[i] = &m.data;
        }
    }
    if let Some(w) = ops.w {
        check(w, "weights", g.out_ch, g.in_ch * g.kernel * g.kernel)?;
        frac += w.frac;
        data[2] = &w.data;
    }
    let job = ConvJob {
        op: ops.op,
        geom,
        batch: g.batch,
        x: data[0],
        dy: data[1],
        w: data[2],
        shift: systole_golden::output_shift(frac, out.frac)?,
        rounding: out.rounding,
        seed: out.seed,
    };
    let (m, k, n) = job.shape();
    // Only this op's own reduction is bounded (the forward op of a large batch is fine).
    if k > systole_core::numeric::MAX_K {
        return Err(NumericError::KTooLong(k).into());
    }
    let mut c = vec![0i16; m * n];
    let st = conv2d(bus, cfg, &job, &mut c).map_err(|e| wrap(e.to_string()))?;
    stats.ops += 1;
    stats.macs += (m * k * n) as u64;
    stats.cycles += st.cycles;
    stats.mac_cycles += st.mac_cycles;
    let lowered = QMatrix::from_vec(m, n, out.frac, c)?;
    let result = match ops.op {
        ConvOp::Forward => conv::rows_to_nchw(&lowered, g.batch, g.out_ch, g.out_h(), g.out_w()),
        ConvOp::BackwardInput => conv::rows_to_nchw(&lowered, g.batch, g.in_ch, g.in_h, g.in_w),
        ConvOp::BackwardWeights => lowered,
    };
    Ok((result, st))
}

/// Whether op `op` of `g` runs on the conv unit sending each map once (see
/// `systole_firmware::conv::sends_maps_once`: the unit is there and the maps fit its buffer);
/// otherwise the backends lower it on the host.
pub(crate) fn runs_on_unit(cfg: &ArrayConfig, g: &Conv2dGeom, op: ConvOp) -> bool {
    if g.validate().is_err() {
        // Let the unit's path report the geometry error.
        return cfg.has_conv_unit();
    }
    let job = ConvJob {
        op,
        geom: g.unit_geom(),
        batch: g.batch,
        x: &[],
        dy: &[],
        w: &[],
        shift: 0,
        rounding: systole_core::Rounding::Truncate,
        seed: 0,
    };
    systole_firmware::conv::sends_maps_once(cfg, &job)
}

/// Bytes a run moved to the device over row-wide ports and the register bus, as the
/// verilator backend counts them (the serial backend counts its real link bytes).
pub(crate) fn port_bytes(cfg: &ArrayConfig, st: &DriverStats) -> (u64, u64) {
    let row = 2 * cfg.size as u64;
    (
        st.rows_written * row + st.reg_writes * 5 + st.fm_words * 2,
        st.rows_read * row + st.reg_reads * 4,
    )
}

/// The three `Device` convolution methods of a backend with the conv unit: each runs on the
/// unit through the backend's `conv(&ConvOperands, &Conv2dGeom, &OutputSpec)`, or, when the
/// array was built without one or the maps do not fit its buffer, as the host-lowered product
/// (`Device`'s default).
macro_rules! conv_unit_methods {
    () => {
        fn conv2d_forward(
            &mut self,
            x: &QMatrix,
            w: &QMatrix,
            g: &Conv2dGeom,
            out: &OutputSpec,
        ) -> Result<QMatrix, DeviceError> {
            let op = systole_firmware::conv::ConvOp::Forward;
            if !conv_unit::runs_on_unit(&self.config, g, op) {
                return super::lowered_forward(self, x, w, g, out);
            }
            self.conv(
                &ConvOperands {
                    op,
                    x: Some(x),
                    dy: None,
                    w: Some(w),
                },
                g,
                out,
            )
        }

        fn conv2d_backward_input(
            &mut self,
            dy: &QMatrix,
            w: &QMatrix,
            g: &Conv2dGeom,
            out: &OutputSpec,
        ) -> Result<QMatrix, DeviceError> {
            let op = systole_firmware::conv::ConvOp::BackwardInput;
            if !conv_unit::runs_on_unit(&self.config, g, op) {
                return super::lowered_backward_input(self, dy, w, g, out);
            }
            self.conv(
                &ConvOperands {
                    op,
                    x: None,
                    dy: Some(dy),
                    w: Some(w),
                },
                g,
                out,
            )
        }

        fn conv2d_backward_weights(
            &mut self,
            x: &QMatrix,
            dy: &QMatrix,
            g: &Conv2dGeom,
            out: &OutputSpec,
        ) -> Result<QMatrix, DeviceError> {
            let op = systole_firmware::conv::ConvOp::BackwardWeights;
            if !conv_unit::runs_on_unit(&self.config, g, op) {
                return super::lowered_backward_weights(self, x, dy, g, out);
            }
            self.conv(
                &ConvOperands {
                    op,
                    x: Some(x),
                    dy: Some(dy),
                    w: None,
                },
                g,
                out,
            )
        }
    };
}
pub(crate) use conv_unit_methods;
