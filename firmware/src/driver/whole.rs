//! A whole product in one command: on a bus that `runs_products` (the SoC's product
//! sequencer) the driver describes the product once, with each operand's steps (a transposed
//! operand is its steps swapped), and the hardware walks the tiles as [`super::Run`] would,
//! with the same tiles, seeds and conversion. Built where the sequencer is driven (the
//! training image and tests).

use super::{DriverError, DriverStats, MatmulJob, Res, Transposed};
use systole_core::bus::ProductJob;
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

/// K rows of each array command the sequencer issues (its `CHUNK`): the buffer depth, at most
/// what one DMA transfer moves.
pub(crate) fn chunk(cfg: &ArrayConfig) -> usize {
    cfg.buffer_depth.min(1 << 15)
}

/// The [`ProductJob`] of a [`MatmulJob`] read through `tr` (row-major operands, `k` and `n`
/// their row lengths, or their transposes).
pub(crate) fn product_job(job: &MatmulJob<'_>, tr: Transposed) -> ProductJob {
    let (m, k, n) = (job.m, job.k, job.n);
    ProductJob {
        m,
        k,
        n,
        // A[i][kk] = a[i·k + kk]; Aᵀ stored: a[kk·m + i].
        a_steps: if tr.a { [1, m] } else { [k, 1] },
        // B[kk][j] = b[kk·n + j]; Bᵀ stored: b[j·k + kk].
        b_steps: if tr.b { [1, k] } else { [n, 1] },
        c_steps: [n, 1],
        shift: job.shift,
        rounding: job.rounding.code(),
        seed: job.seed,
    }
}

/// Runs the validated `job` (`m, n, k >= 1`) in one command when `bus` has the sequencer and
/// the sizes fit its registers; `None` when the caller must tile it itself.
pub(super) fn run<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    job: &MatmulJob<'_>,
    tr: Transposed,
    out: &mut [i16],
    mut stats: DriverStats,
) -> Res<Option<DriverStats>, B::Error> {
    if !bus.runs_products() || job.m > 0xFFFF || job.n > 0xFFFF {
        return Ok(None);
    }
    let pj = product_job(job, tr);
    let read = |bus: &mut B, r| bus.read_reg(r).map_err(DriverError::Bus);
    let cycles0 = read(bus, regmap::CYCLES)?;
    let macs0 = read(bus, regmap::MAC_CYCLES)?;
    let status = bus
        .run_product(&pj, job.a, job.b, out)
        .map_err(DriverError::Bus)?;
    match status {
        None => return Ok(None),
        Some(0) => {}
        Some(status) => return Err(DriverError::Sequencer { status }),
    }
    let size = cfg.size;
    let tiles = (job.m.div_ceil(size) * job.n.div_ceil(size)) as u64;
    stats.cycles = u64::from(read(bus, regmap::CYCLES)?.wrapping_sub(cycles0));
    stats.mac_cycles = u64::from(read(bus, regmap::MAC_CYCLES)?.wrapping_sub(macs0));
    stats.tiles = tiles;
    stats.commands = tiles * job.k.div_ceil(chunk(cfg)) as u64;
    stats.reg_reads += 4;
    Ok(Some(stats))
}
