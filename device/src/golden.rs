//! The golden model as a [`Device`]: the reference every other backend is compared with.

use super::{Device, DeviceError, DeviceStats, HostTensors};
use systole_core::ArrayConfig;
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, OutputSpec};

/// Runs every operation in the golden model on the host CPU, at the config's word width `W`
/// (`systole_golden::matmul_at`).
#[derive(Debug, Clone)]
pub struct GoldenDevice {
    config: ArrayConfig,
    stats: DeviceStats,
    /// Kept tensors, in host memory.
    tensors: HostTensors,
}

impl GoldenDevice {
    /// A golden device that follows `config` (its size fixes the stochastic rounding order).
    pub fn new(config: ArrayConfig) -> Result<Self, DeviceError> {
        config.validate()?;
        Ok(GoldenDevice {
            config,
            stats: DeviceStats::default(),
            tensors: HostTensors::new(),
        })
    }
}

impl Device for GoldenDevice {
    fn name(&self) -> String {
        format!("golden {0}x{0}", self.config.size)
    }

    fn config(&self) -> &ArrayConfig {
        &self.config
    }

    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let c = golden::matmul_at(a, b, out, self.config.size, self.config.word_bits)?;
        self.stats.ops += 1;
        self.stats.macs += (a.rows * a.cols * b.cols) as u64;
        Ok(c)
    }

    fn stats(&self) -> DeviceStats {
        self.stats
    }

    fn reset_stats(&mut self) {
        self.stats = DeviceStats::default();
    }

    fn host_tensors(&mut self) -> Option<&mut HostTensors> {
        Some(&mut self.tensors)
    }
}
