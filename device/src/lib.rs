//! [`Device`]: where the trainer's matrix products run.
//!
//! Backends: [`golden::GoldenDevice`] (the golden model on the host CPU) and
//! [`backend::BusDevice`], the firmware's drivers over a [`backend::Link`], as `verilator` (the
//! generated HDL simulated by Verilator), `serial` (a board, real or simulated, behind a
//! serial port, running the firmware's framed protocol) and `bridge` (a board flashed with
//! `systole bitstream`: the CPU-less UART byte bridge). Every backend exists in every build;
//! one that was not built returns
//! [`DeviceError::NotBuilt`] saying how to get it. All of them must return results that equal
//! the golden model bit for bit; the shared test body in `tests/tests/device_conformance.rs`
//! runs on each. [`board_sim`] is the simulated board the `serial` backend can talk to over a
//! pty.
#![deny(missing_docs)]

pub mod backend;
pub mod board_sim;
pub mod board_train;
pub mod bridge;
mod conv_unit;
pub mod golden;
pub mod serial;
pub mod verilator;

use systole_core::{ArrayConfig, ConfigError};
use systole_golden::conv::{self, Conv2dGeom};
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

/// Counters a device keeps across operations (since creation or [`Device::reset_stats`]);
/// run.json's `device` stats are these fields as they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStats {
    /// Operations run.
    pub ops: u64,
    /// Multiply-accumulates requested (`M * K * N` summed over matmuls).
    pub macs: u64,
    /// Simulated clock cycles (0 where the backend has no clock).
    pub cycles: u64,
    /// Cycles in which the array consumed a K step (0 where the backend has no clock).
    pub mac_cycles: u64,
    /// Bytes sent to the device (words and register traffic).
    pub bytes_to_device: u64,
    /// Bytes read back from the device.
    pub bytes_from_device: u64,
    /// Messages sent to the device: request frames (serial) or bus transactions, one per
    /// register access or row (bridge); 0 where there is no link.
    pub frames: u64,
    /// Times the host waited for the device's answer before it could go on (a frame's
    /// response, a bridge read's reply or the echoes of the writes in flight); each costs a
    /// link's latency on a real board. 0 where there is no link.
    pub round_trips: u64,
    /// Frames sent again after a timeout or a damaged answer (serial), reads sent again after a
    /// CRC mismatch (bridge); their bytes are in the byte counts.
    pub resends: u64,
    /// Bytes the accelerator's ports moved for these operations (A/B rows written, C rows
    /// read, register accesses, feature-map words): the payload any link must carry for the
    /// host's tile driver; the rest of a link's bytes is its framing and resends.
    pub port_bytes: u64,
    /// Bytes of the operations' operands and results as whole tensors, each word once: what a
    /// board that tiles the operations itself would have to move at least.
    pub tensor_bytes: u64,
    /// Clock cycles the board's firmware spent handling these operations' requests, from each
    /// request's last byte received to its response ready, as the board reports them
    /// (`COUNTERS`); 0 where no board CPU reports them (golden, verilator, the bridge, which
    /// has no CPU, and the pty-simulated board, whose firmware runs on the host).
    pub firmware_cycles: u64,
    /// Of `ops`, those the board ran itself (one `MATMUL` / `CONV` request on tensors in its
    /// store: the board operations of `systole_firmware::protocol`).
    pub board_ops: u64,
    /// Training steps the board ran itself on resident state and data
    /// (`board_train::BoardTraining`; not in `ops`).
    #[serde(default)]
    pub board_steps: u64,
}

/// Why a device operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The operands break the numeric contract.
    #[error(transparent)]
    Numeric(#[from] NumericError),
    /// The backend was not compiled into this build.
    #[error("the {backend} backend is not available in this build: {how_to_fix}")]
    NotBuilt {
        /// Backend name.
        backend: &'static str,
        /// What to install or rebuild.
        how_to_fix: String,
    },
    /// The array configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The backend cannot run this configuration or operation.
    #[error("{0}")]
    Unsupported(String),
    /// The board's `CONFIG` register describes another array than the one asked for.
    #[error("the board at {at} is not the array asked for")]
    WrongArray {
        /// The board's port or name.
        at: String,
        /// Both arrays.
        source: Box<systole_core::ConfigWordMismatch>,
    },
    /// A waveform trace could not be set up or written.
    #[error(transparent)]
    Trace(Box<systole_sim::SimError>),
    /// The device or the link to it failed; the operation produced no result. `source` is
    /// the typed cause (the driver's error, holding the bus's: `SimError`, a serial
    /// `LinkError`, a `BridgeError`).
    #[error("{device} failed")]
    Transport {
        /// The device, as [`Device::name`] gives it (or its port, before it was opened).
        device: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A serial port could not be opened.
    #[error("cannot open serial port {path}")]
    Open {
        /// The port.
        path: String,
        /// Why not.
        #[source]
        source: serialport::Error,
    },
    /// The board answers but is not a systole accelerator.
    #[error(
        "the board at {at} reports ID {id:#010x}, not a systole accelerator ({:#010x}): check the port and what the board is flashed with (the firmware, or `systole bitstream` for bridge:)",
        systole_core::regmap::ID_VALUE
    )]
    NotAccelerator {
        /// The board's port.
        at: String,
        /// Its `ID` register.
        id: u32,
    },
    /// A backend's result differs from the golden model's (a benchmark's check).
    #[error("{0} differs from the golden model")]
    DiffersFromGolden(String),
    /// A `--device` value of a known kind, written wrongly (the text says how).
    #[error("{0}")]
    BadSpec(String),
    /// An unknown `--device` value.
    #[error(
        "unknown device '{0}': use golden, verilator, serial:PATH (e.g. serial:/dev/ttyUSB0) or bridge:PATH[@BAUD] (e.g. bridge:/dev/ttyUSB1@115200)"
    )]
    UnknownDevice(String),
}

impl DeviceError {
    /// The first cause of type `E` in this error's source chain (the typed error of the bus or
    /// link under a [`DeviceError::Transport`], e.g. a serial `LinkError`).
    pub fn cause<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            next = e.source();
        }
        None
    }
}

/// `e` and its causes in one line, `"e: cause: cause"`, leaving out a cause whose text is
/// already there: a `Display` that shows its `#[source]` (`accelerator bus failed: X`, with
/// `X` the source) would otherwise print it twice. What the CLI's `error:` line and the
/// tests' failure messages print.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        next = cause.source();
    }
    text
}

/// An accelerator (or a stand-in for one) that runs the numeric contract's operations.
pub trait Device {
    /// Human-readable name, e.g. `golden 8x8` or `verilator 8x8`.
    fn name(&self) -> String;

    /// The array configuration this device implements (fixes stochastic rounding order).
    fn config(&self) -> &ArrayConfig;

    /// `C = A·B` under `out`'s format and rounding.
    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError>;

    /// `C = A·Bᵀ`.
    fn matmul_nt(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        self.matmul(a, &b.transpose(), out)
    }

    /// `C = Aᵀ·B`.
    fn matmul_tn(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        self.matmul(&a.transpose(), b, out)
    }

    /// Forward convolution (see `golden::conv` for layouts). The default lowers it on the host
    /// to one matrix product on this device ([`lowered_forward`]); a backend with the conv
    /// unit overrides it and sends each feature map once.
    fn conv2d_forward(
        &mut self,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        lowered_forward(self, x, w, g, out)
    }

    /// Gradient of a convolution with respect to its input.
    fn conv2d_backward_input(
        &mut self,
        dy: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        lowered_backward_input(self, dy, w, g, out)
    }

    /// Gradient of a convolution with respect to its weights.
    fn conv2d_backward_weights(
        &mut self,
        x: &QMatrix,
        dy: &QMatrix,
        g: &Conv2dGeom,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        lowered_backward_weights(self, x, dy, g, out)
    }

    /// Counters since creation or the last reset.
    fn stats(&self) -> DeviceStats;

    /// Zeroes the counters.
    fn reset_stats(&mut self);

    /// The board's own training (state and data resident, the steps run by its CPU), when
    /// this device is a board whose firmware trains (`PING`'s capability); `None` otherwise.
    fn board_training(&mut self) -> Option<board_train::BoardTraining<'_>> {
        None
    }
}

/// The forward convolution lowered on the host to one product on `dev` (im2col on the host).
pub fn lowered_forward<D: Device + ?Sized>(
    dev: &mut D,
    x: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
) -> Result<QMatrix, DeviceError> {
    let (p, q) = conv::forward_operands(x, w, g)?;
    let c = dev.matmul(&p, &q, out)?;
    Ok(conv::rows_to_nchw(
        &c,
        g.batch,
        g.out_ch,
        g.out_h(),
        g.out_w(),
    ))
}

/// The input gradient lowered on the host to one product on `dev`.
pub fn lowered_backward_input<D: Device + ?Sized>(
    dev: &mut D,
    dy: &QMatrix,
    w: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
) -> Result<QMatrix, DeviceError> {
    let (p, q) = conv::backward_input_operands(dy, w, g)?;
    let c = dev.matmul(&p, &q, out)?;
    Ok(conv::rows_to_nchw(&c, g.batch, g.in_ch, g.in_h, g.in_w))
}

/// The weight gradient lowered on the host to one product on `dev`.
pub fn lowered_backward_weights<D: Device + ?Sized>(
    dev: &mut D,
    x: &QMatrix,
    dy: &QMatrix,
    g: &Conv2dGeom,
    out: &OutputSpec,
) -> Result<QMatrix, DeviceError> {
    let (p, q) = conv::backward_weights_operands(x, dy, g)?;
    dev.matmul(&p, &q, out)
}

pub use systole_sim::{TraceFormat, TraceState, TraceWindow};

/// [`open`], writing the cycles of `trace` (when given) to a waveform file: only the
/// `verilator` device runs a model in this process that can be traced; any other is an error
/// naming what to do instead.
pub fn open_traced(
    spec: &str,
    config: ArrayConfig,
    trace: Option<systole_sim::TraceWindow>,
) -> Result<Box<dyn Device>, DeviceError> {
    let Some(window) = trace else {
        return open(spec, config);
    };
    traceable(spec)?;
    let mut dev = verilator::VerilatorDevice::new(config)?;
    dev.open_trace(window)?;
    Ok(Box::new(dev))
}

/// `Ok` when the device `spec` can be traced (`verilator`, the model running in this process),
/// else an error naming what to do instead.
pub fn traceable(spec: &str) -> Result<(), DeviceError> {
    if spec == "verilator" {
        return Ok(());
    }
    let why = match spec {
        "golden" => {
            "the golden device is the numeric contract in Rust and has no signals".to_string()
        }
        s if s.starts_with("serial:") || s.starts_with("bridge:") => format!(
            "{s} is a board (or a simulated board in another process): trace a simulated board with systole-board-sim --trace"
        ),
        s => format!("'{s}' is not a simulated device"),
    };
    Err(DeviceError::Unsupported(format!(
        "--trace needs --device verilator (the Verilated model running in this process): {why}"
    )))
}

/// Opens a device from a `--device` value: `golden`, `verilator`, `serial:PATH` (a board
/// running the firmware) or `bridge:PATH[@BAUD]` (a `systole bitstream` board; the baud rate
/// defaults to [`bridge::DEFAULT_BAUD`], the one the board flow builds).
pub fn open(spec: &str, config: ArrayConfig) -> Result<Box<dyn Device>, DeviceError> {
    match spec {
        "golden" => Ok(Box::new(golden::GoldenDevice::new(config)?)),
        "verilator" => Ok(Box::new(verilator::VerilatorDevice::new(config)?)),
        other => {
            if let Some(path) = other.strip_prefix("serial:").filter(|p| !p.is_empty()) {
                return Ok(Box::new(serial::SerialDevice::open(path, config)?));
            }
            let Some(rest) = other.strip_prefix("bridge:") else {
                return Err(DeviceError::UnknownDevice(other.to_string()));
            };
            match (bridge::parse_spec(rest), rest.rsplit_once('@')) {
                (Some((path, baud)), _) => {
                    Ok(Box::new(bridge::BridgeDevice::open(path, baud, config)?))
                }
                (None, Some((path, baud))) if !path.is_empty() => Err(DeviceError::BadSpec(format!(
                    "'{baud}' after the '@' of '{other}' is not a baud rate: give bits per second from 1 to {}, e.g. bridge:{path}@115200",
                    u32::MAX
                ))),
                (None, _) => Err(DeviceError::BadSpec(format!(
                    "'{other}' names no serial port: write bridge:PATH or bridge:PATH@BAUD, e.g. bridge:/dev/ttyUSB1@115200"
                ))),
            }
        }
    }
}
