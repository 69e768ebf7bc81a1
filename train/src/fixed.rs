//! W-bit dynamic fixed point on a [`Device`]: the step is `systole_step`'s
//! ([`systole_step::fixed`]: the format rules, retries, seeds, chunks, bias, ReLU, pooling and
//! the update, the one implementation the board's CPU runs too); this module gives it its
//! products on a `Device` ([`DeviceProducts`]) and, under `--check`, recomputes each product in
//! the golden model and stops at the first difference.

use crate::TrainError;
use systole_device::Device;
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, NumericError, OutputSpec};
use systole_step::Products;

pub use systole_step::fixed::{add_exact_at, shard_key, Fixed};
pub use systole_step::{SaturationCount, Widths};

/// [`Fixed`] with its products on a [`Device`]: the trainer's fixed-point arithmetic.
pub type FixedArith = Fixed<DeviceProducts>;

/// Fixed-point arithmetic on `device`; `check` recomputes each offloaded op in the golden model
/// and stops at the first difference.
pub fn on_device(
    device: Box<dyn Device>,
    rounding: systole_core::Rounding,
    run_seed: u64,
    check: bool,
) -> FixedArith {
    Fixed::new(DeviceProducts { device, check }, rounding, run_seed)
}

/// [`on_device`] with words of `widths.word()` bits (W) and master weights of
/// `widths.master()`: the device runs each product at 16 bits and the step saturates its words
/// to W, which is the W-bit conversion bit for bit (`systole_step::width`).
pub fn on_device_at(
    device: Box<dyn Device>,
    rounding: systole_core::Rounding,
    run_seed: u64,
    check: bool,
    widths: systole_step::Widths,
) -> FixedArith {
    Fixed::with_widths(DeviceProducts { device, check }, rounding, run_seed, widths)
}

/// The step's products on a [`Device`], each checked against the golden model under `--check`.
pub struct DeviceProducts {
    device: Box<dyn Device>,
    check: bool,
}

impl DeviceProducts {
    /// Products on `device`; with `check`, each result is compared with the golden model's
    /// (`--check`). For users of the products alone (inference in frozen formats).
    pub fn new(device: Box<dyn Device>, check: bool) -> DeviceProducts {
        DeviceProducts { device, check }
    }

    /// The device (for its statistics).
    pub fn device(&self) -> &dyn Device {
        self.device.as_ref()
    }

    /// The device, to use it otherwise (a board that trains itself).
    pub fn device_mut(&mut self) -> &mut dyn Device {
        self.device.as_mut()
    }

    /// Runs one product on the device and, under `--check`, compares it with the golden model's
    /// (computed with the array size as its tile, at the device's word width).
    fn run(
        &mut self,
        op: &str,
        on_device: impl FnOnce(&mut dyn Device) -> Result<QMatrix, systole_device::DeviceError>,
        gold: impl FnOnce(usize) -> Result<QMatrix, NumericError>,
    ) -> Result<QMatrix, TrainError> {
        let y = on_device(self.device.as_mut()).map_err(|source| TrainError::Device {
            op: op.to_string(),
            source,
        })?;
        if self.check {
            let g = gold(self.device.config().size).map_err(|source| TrainError::Numeric {
                op: op.to_string(),
                source,
            })?;
            // The golden model's 16-bit product saturated to the device's W: the product at W
            // bit for bit (the contract's conversion saturates once, at the end).
            let g = systole_step::width::saturate_to(g, self.device.config().word_bits);
            compare(op, &y, &g)?;
        }
        Ok(y)
    }
}

impl Products for DeviceProducts {
    type Error = TrainError;

    fn name(&self) -> String {
        self.device.name()
    }

    fn matmul(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(op, |d| d.matmul(a, b, s), |t| golden::matmul(a, b, s, t))
    }

    fn matmul_nt(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(
            op,
            |d| d.matmul_nt(a, b, s),
            |t| golden::matmul_nt(a, b, s, t),
        )
    }

    fn matmul_tn(
        &mut self,
        op: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(
            op,
            |d| d.matmul_tn(a, b, s),
            |t| golden::matmul_tn(a, b, s, t),
        )
    }

    fn conv2d_forward(
        &mut self,
        op: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(
            op,
            |d| d.conv2d_forward(x, w, g, s),
            |t| golden::conv2d_forward(x, w, g, s, t),
        )
    }

    fn conv2d_backward_input(
        &mut self,
        op: &str,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(
            op,
            |d| d.conv2d_backward_input(dy, w, g, s),
            |t| golden::conv2d_backward_input(dy, w, g, s, t),
        )
    }

    fn conv2d_backward_weights(
        &mut self,
        op: &str,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, TrainError> {
        self.run(
            op,
            |d| d.conv2d_backward_weights(x, dy, g, s),
            |t| golden::conv2d_backward_weights(x, dy, g, s, t),
        )
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

#[cfg(test)]
#[path = "fixed_tests.rs"]
mod tests;
