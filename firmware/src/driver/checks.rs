//! What a product is checked against before the first row moves: the job's shapes, words
//! and limits against the array's config ([`validate`]), and the device's `CONFIG` word against
//! that config ([`check_config`], the first bus access of every product and convolution).

use super::{DriverError, DriverStats, MatmulJob, Res, MAX_LANES};
use systole_core::numeric::{first_outside, MAX_K, MAX_SHIFT};
use systole_core::{regmap, AcceleratorBus, ArrayConfig};

/// Reads `CONFIG` (counted in `stats`) and checks the device is the array `cfg` describes:
/// the first bus access of every product and convolution.
pub(crate) fn check_config<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    stats: &mut DriverStats,
) -> Res<(), B::Error> {
    let found = bus.read_reg(regmap::CONFIG).map_err(DriverError::Bus)?;
    stats.reg_reads += 1;
    // Core's one check; the driver's error keeps both words, not the decoded arrays.
    cfg.check_config_word(found)
        .map_err(|_| DriverError::ConfigMismatch {
            expected: cfg.config_word(),
            found,
        })
}

pub(super) fn validate<E>(cfg: &ArrayConfig, job: &MatmulJob<'_>, out: &[i16]) -> Res<(), E> {
    cfg.validate().map_err(DriverError::Config)?;
    if cfg.size > MAX_LANES {
        return Err(DriverError::TooManyLanes(cfg.size));
    }
    let len = |x: usize, y: usize| x.checked_mul(y).ok_or(DriverError::ShapeOverflow);
    for (which, expected, found) in [
        ("a", len(job.m, job.k)?, job.a.len()),
        ("b", len(job.k, job.n)?, job.b.len()),
        ("out", len(job.m, job.n)?, out.len()),
    ] {
        if expected != found {
            return Err(DriverError::Length {
                which,
                expected,
                found,
            });
        }
    }
    // A `W`-bit array reads the low `W` bits of each 16-bit lane: a wider word would be cut.
    for (which, words) in [("a", job.a), ("b", job.b)] {
        if let Some((index, value)) = first_outside(words, cfg.word_bits) {
            return Err(DriverError::WordRange {
                which,
                index,
                value,
                word_bits: cfg.word_bits,
            });
        }
    }
    if job.k > MAX_K {
        return Err(DriverError::KTooLong(job.k));
    }
    if job.shift > MAX_SHIFT {
        return Err(DriverError::Shift(job.shift));
    }
    Ok(())
}
