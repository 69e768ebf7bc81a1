//! Convolutions on a device with the conv unit (the [`crate::backend::BusDevice`] path): the
//! firmware's conv driver runs the golden model's lowered product with the im2col operand
//! gathered on chip; this module checks the operands, builds its job and turns the lowered
//! output back into NCHW.

use super::DeviceError;
use systole_core::ArrayConfig;
use systole_firmware::conv::{ConvJob, ConvOp};
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

/// Checks one op's operands against `g` and builds the conv driver's job.
pub(crate) fn job<'a>(
    ops: &ConvOperands<'a>,
    g: &Conv2dGeom,
    out: &OutputSpec,
) -> Result<ConvJob<'a>, DeviceError> {
    g.validate()?;
    let geom = g.shape;
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
    // Only this op's own reduction is bounded (the forward op of a large batch is fine).
    let (_, k, _) = job.shape();
    if k > systole_core::numeric::MAX_K {
        return Err(NumericError::KTooLong(k).into());
    }
    Ok(job)
}

/// The lowered product of `op` in the op's own layout: NCHW for the forward and
/// input-gradient ops, `out_ch x in_ch·k·k` (as it is) for the weight gradient.
pub(crate) fn reshape(op: ConvOp, g: &Conv2dGeom, lowered: QMatrix) -> QMatrix {
    match op {
        ConvOp::Forward => conv::rows_to_nchw(&lowered, g.batch, g.out_ch, g.out_h(), g.out_w()),
        ConvOp::BackwardInput => conv::rows_to_nchw(&lowered, g.batch, g.in_ch, g.in_h, g.in_w),
        ConvOp::BackwardWeights => lowered,
    }
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
        geom: g.shape,
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

/// Bytes a run moved to the device over row-wide ports and the register bus, where no link
/// counts them (the verilator backend).
pub(crate) fn port_bytes(cfg: &ArrayConfig, st: &DriverStats) -> (u64, u64) {
    let row = 2 * cfg.size as u64;
    (
        st.rows_written * row + st.reg_writes * 5 + st.fm_words * 2,
        st.rows_read * row + st.reg_reads * 4,
    )
}
