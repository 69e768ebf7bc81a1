//! The generated HDL simulated by Verilator as a [`Device`]: the firmware's tile driver runs
//! every product on a [`VerilatedArray`], cycle by cycle.

use super::conv_unit::{self, ConvOperands};
use super::{Device, DeviceError, DeviceStats};
use crate::golden::conv::Conv2dGeom;
use crate::golden::OutputSpec;
use crate::tensor::QMatrix;
use std::path::Path;
use systole_core::ArrayConfig;
use systole_firmware::driver;
use systole_sim::{SimError, VerilatedArray};

/// A Verilated accelerator of one array size.
pub struct VerilatorDevice {
    config: ArrayConfig,
    sim: VerilatedArray,
    stats: DeviceStats,
}

impl From<SimError> for DeviceError {
    fn from(e: SimError) -> Self {
        match e {
            SimError::NotBuilt
            | SimError::SizeNotBuilt { .. }
            | SimError::TraceNotBuilt
            | SimError::SocNotBuilt(_) => DeviceError::NotBuilt {
                backend: "verilator",
                how_to_fix: e.to_string(),
            },
            SimError::Config(c) => DeviceError::Unsupported(c.to_string()),
            SimError::TraceTooLate => DeviceError::Unsupported(e.to_string()),
            other => DeviceError::Transport(other.to_string()),
        }
    }
}

impl VerilatorDevice {
    /// Creates and resets the model of `config`; [`DeviceError::NotBuilt`] when this build has
    /// no Verilator model of that size.
    pub fn new(config: ArrayConfig) -> Result<Self, DeviceError> {
        let sim = VerilatedArray::new(&config)?;
        Ok(VerilatorDevice {
            config,
            sim,
            stats: DeviceStats::default(),
        })
    }

    /// Starts writing a VCD waveform of every signal to `path` (view with GTKWave); call it
    /// before the first product (see [`VerilatedArray::open_trace`]).
    pub fn open_trace(&mut self, path: &Path) -> Result<(), DeviceError> {
        Ok(self.sim.open_trace(path)?)
    }

    /// Flushes and closes the waveform, if one is open.
    pub fn close_trace(&mut self) {
        self.sim.close_trace();
    }

    /// Clock cycles simulated since the model was created.
    pub fn sim_cycles(&self) -> u64 {
        self.sim.cycles()
    }
}

impl VerilatorDevice {
    fn add_bytes(&mut self, st: &driver::DriverStats) {
        let (to, from) = conv_unit::port_bytes(&self.config, st);
        self.stats.bytes_to_device += to;
        self.stats.bytes_from_device += from;
    }

    fn conv(
        &mut self,
        ops: &ConvOperands<'_>,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let (r, st) = conv_unit::run(
            &mut self.sim,
            &self.config,
            ops,
            g,
            out,
            &mut self.stats,
            &DeviceError::Transport,
        )?;
        self.add_bytes(&st);
        Ok(r)
    }
}

impl Device for VerilatorDevice {
    fn name(&self) -> String {
        format!("verilator {0}x{0}", self.config.size)
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
        let job = super::driver_job(a, b, out)?;
        let (m, n) = (job.m, job.n);
        let mut c = vec![0i16; m * n];
        let st = driver::matmul(&mut self.sim, &self.config, &job, &mut c)
            .map_err(|e| DeviceError::Transport(e.to_string()))?;
        super::record_driver_run(&mut self.stats, &job, &st);
        self.add_bytes(&st);
        Ok(QMatrix::from_vec(m, n, out.frac, c)?)
    }

    conv_unit::conv_unit_methods!();

    fn stats(&self) -> DeviceStats {
        self.stats
    }

    fn reset_stats(&mut self) {
        self.stats = DeviceStats::default();
    }
}
