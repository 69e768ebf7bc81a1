//! One offloaded operation of [`FixedArith`]: the fractional-bit rule with its saturation
//! retries, the split of a reduction longer than the device limit into chunks (the contract's
//! "Long reductions" rule, `systole_golden::split`), `--check`, and the saturation counters.

use super::{add_exact_at, FixedArith};
use crate::TrainError;
use systole_device::{Device, DeviceError};
use systole_golden::split::{chunk_seed, SUM_FRAC};
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

/// Runs chunk `j` of an operation on a device.
pub(super) type RunChunk<'a> =
    &'a dyn Fn(&mut dyn Device, &OutputSpec, usize) -> Result<QMatrix, DeviceError>;
/// Computes chunk `j` in the golden model (array size as `tile`), for `--check`.
pub(super) type GoldChunk<'a> =
    &'a dyn Fn(&OutputSpec, usize, usize) -> Result<QMatrix, NumericError>;

fn saturated(y: &QMatrix) -> u64 {
    y.data
        .iter()
        .filter(|&&w| w == i16::MAX || w == i16::MIN)
        .count() as u64
}

impl FixedArith {
    /// Runs one offloaded operation of `chunks` chunks (1 when its reduction fits the device)
    /// with the frac rule of the module docs, checking each chunk if asked. Each chunk starts
    /// at the operation's remembered `frac` and retries on its own; a split operation's chunks
    /// are summed exactly and converted once (`from_exact`), and it remembers the smallest
    /// `frac` its chunks would use next.
    pub(super) fn offload(
        &mut self,
        op: &str,
        frac_in: u32,
        bound: f64,
        chunks: usize,
        run: RunChunk<'_>,
        gold: GoldChunk<'_>,
    ) -> Result<QMatrix, TrainError> {
        let (lo, hi) = (frac_in.saturating_sub(32), frac_in.min(15));
        let key = self.frac_key(op);
        let start = self
            .fracs
            .get(&key)
            .copied()
            .unwrap_or_else(|| super::frac_for_max(bound))
            .clamp(lo, hi);
        let mut next = hi;
        let mut parts = Vec::with_capacity(chunks);
        for j in 0..chunks {
            let mut frac = start;
            let y = loop {
                let mut spec = self.spec(frac);
                if chunks > 1 {
                    spec.seed = chunk_seed(spec.seed, j);
                }
                let y =
                    run(self.device.as_mut(), &spec, j).map_err(|source| TrainError::Device {
                        op: op.to_string(),
                        source,
                    })?;
                if self.check {
                    let g = gold(&spec, self.device.config().size, j).map_err(|source| {
                        TrainError::Numeric {
                            op: op.to_string(),
                            source,
                        }
                    })?;
                    compare(op, &y, &g)?;
                }
                let count = self.saturation.entry(op.to_string()).or_default();
                count.ops += 1;
                let sat = saturated(&y);
                if frac > lo && sat > 0 {
                    count.retries += 1;
                    frac -= 1;
                    continue;
                }
                count.saturated_words += sat;
                break y;
            };
            let m = y
                .data
                .iter()
                .map(|&w| (w as i32).unsigned_abs())
                .max()
                .unwrap_or(0);
            next = next.min(if m > 0 && m < 1 << 13 {
                frac + (14 - (32 - m.leading_zeros()))
            } else {
                frac
            });
            parts.push(y);
        }
        self.fracs.insert(key, next.clamp(lo, hi));
        if parts.len() == 1 {
            if let Some(y) = parts.pop() {
                return Ok(y);
            }
        }
        let (rows, cols) = parts.first().map_or((0, 0), |p| (p.rows, p.cols));
        let mut sum = vec![0i64; rows * cols];
        for p in &parts {
            add_exact_at(&mut sum, p, SUM_FRAC);
        }
        let y = self.from_exact(op, rows, cols, &sum, SUM_FRAC)?;
        if y.frac == 0 {
            // The sum did not fit even without fractional bits: its extreme words saturated.
            let count = self.saturation.entry(op.to_string()).or_default();
            count.saturated_words += saturated(&y);
        }
        Ok(y)
    }
}

/// Compares a device result with the golden one; the error names the first difference.
pub fn compare(op: &str, dev: &QMatrix, gold: &QMatrix) -> Result<(), TrainError> {
    if (dev.rows, dev.cols, dev.frac) != (gold.rows, gold.cols, gold.frac) {
        return Err(TrainError::Mismatch {
            op: op.to_string(),
            detail: format!(
                "the device returned a {}x{} tensor with {} fractional bits, the golden model {}x{} with {}",
                dev.rows, dev.cols, dev.frac, gold.rows, gold.cols, gold.frac
            ),
        });
    }
    if let Some(i) = dev.data.iter().zip(&gold.data).position(|(a, b)| a != b) {
        return Err(TrainError::Mismatch {
            op: op.to_string(),
            detail: format!(
                "output {}x{} differs first at index {i} (row {}, column {}): device {}, golden {}",
                dev.rows,
                dev.cols,
                i / dev.cols,
                i % dev.cols,
                dev.data[i],
                gold.data[i]
            ),
        });
    }
    Ok(())
}
