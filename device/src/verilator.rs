//! The generated HDL simulated by Verilator as a [`Device`](crate::Device): the firmware's
//! tile driver runs every product on a [`VerilatedArray`], cycle by cycle.

use super::backend::{BusDevice, Link};
use super::DeviceError;
use systole_core::ArrayConfig;
use systole_sim::{SimError, TraceState, TraceWindow, VerilatedArray};

/// A Verilated accelerator of one array size.
pub type VerilatorDevice = BusDevice<VerilatedArray>;

impl Link for VerilatedArray {
    const KIND: &'static str = "verilator";
}

impl From<SimError> for DeviceError {
    fn from(e: SimError) -> Self {
        match e {
            SimError::NotBuilt | SimError::SizeNotBuilt { .. } | SimError::SocNotBuilt(_) => {
                DeviceError::NotBuilt {
                    backend: "verilator",
                    how_to_fix: e.to_string(),
                }
            }
            SimError::Config(c) => DeviceError::Config(c),
            e @ (SimError::TraceSetup(_)
            | SimError::TraceImage(_)
            | SimError::TraceFile { .. }
            | SimError::Traced(_)
            | SimError::TraceTooLate) => DeviceError::Trace(Box::new(e)),
            other => DeviceError::Transport {
                device: VerilatedArray::KIND.into(),
                source: Box::new(other),
            },
        }
    }
}

impl BusDevice<VerilatedArray> {
    /// Creates and resets the model of `config`; [`DeviceError::NotBuilt`] when this build has
    /// no Verilator model of that size.
    pub fn new(config: ArrayConfig) -> Result<Self, DeviceError> {
        let sim = VerilatedArray::new(&config)?;
        Ok(BusDevice::with_bus(config, sim, None))
    }

    /// A device of `config` whose conv unit is smaller than the build's (see
    /// [`VerilatedArray::with_conv_unit_of`]): the built model presenting `config`, for
    /// counting the cycles of a design with that feature-map depth.
    pub fn with_conv_unit_of(config: ArrayConfig) -> Result<Self, DeviceError> {
        let sim = VerilatedArray::with_conv_unit_of(&config)?;
        Ok(BusDevice::with_bus(config, sim, None))
    }

    /// Writes the cycles of `window` (every signal, rust-hdl's names) to its file; call it
    /// before the first product (see [`VerilatedArray::open_trace`]).
    pub fn open_trace(&mut self, window: TraceWindow) -> Result<(), DeviceError> {
        Ok(self.bus.open_trace(window)?)
    }

    /// Where the trace window stands (`None` without a trace).
    pub fn trace_state(&self) -> Option<TraceState> {
        self.bus.trace_state()
    }

    /// Clock cycles simulated since the model was created.
    pub fn sim_cycles(&self) -> u64 {
        self.bus.cycles()
    }
}
