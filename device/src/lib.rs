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
pub mod resident;
pub mod serial;
mod spec;
pub mod verilator;

use systole_core::{ArrayConfig, ConfigError};
use systole_golden::conv::{self, Conv2dGeom};
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

pub use resident::{DeviceTensor, HostTensors, TensorRoom};
pub use spec::{DeviceSpec, DEVICE_CHOICES};
pub use systole_firmware::driver::Transposed;

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
    /// A kept tensor's handle from another device (each device's handles are its own).
    #[error("{tensor} was not kept on {device}: a handle is valid only on the device that returned it (read it back there and upload it here)")]
    ForeignTensor {
        /// The device it was given to.
        device: String,
        /// The handle.
        tensor: String,
    },
    /// A kept tensor's handle after [`Device::free_tensor`].
    #[error("{tensor} was freed on {device}: upload it again to use it")]
    FreedTensor {
        /// The device.
        device: String,
        /// The handle.
        tensor: String,
    },
    /// A board lost its kept tensors: it restarted, or an operation failed and the host cleared
    /// the store it could no longer vouch for.
    #[error("{device} lost {tensor} (the board restarted or an operation on it failed, which clears its tensor store): upload it again")]
    TensorLost {
        /// The device.
        device: String,
        /// The handle.
        tensor: String,
    },
    /// No room to keep a tensor (an upload or a kept product's result); nothing was stored.
    #[error("{device} cannot keep a tensor of {needed} words: {free} of its {capacity} words for kept tensors are free; free the tensors no longer needed (Device::free_tensor) or keep fewer")]
    StoreFull {
        /// The device.
        device: String,
        /// Words the tensor needs.
        needed: usize,
        /// Words free for kept tensors.
        free: usize,
        /// Words for kept tensors in all.
        capacity: usize,
    },
    /// A board's store table is full of kept tensors; nothing was stored.
    #[error("{device} keeps at most {most} tensors and holds that many: free one first (Device::free_tensor)")]
    TooManyTensors {
        /// The device.
        device: String,
        /// Tensors its store holds at most.
        most: usize,
    },
    /// An unknown `--device` value.
    #[error("unknown device '{0}': use {choices} (e.g. serial:/dev/ttyUSB0, bridge:/dev/ttyUSB1@115200)", choices = DEVICE_CHOICES)]
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

    /// The table of tensors kept in host memory, for devices that keep them there (the
    /// default methods below use it); `None`: this device keeps no tensors (a wrapper that
    /// does not pass them on), and the methods below say so.
    fn host_tensors(&mut self) -> Option<&mut HostTensors> {
        None
    }

    /// Keeps `t` on the device (in host memory by default; a serial board with a tensor store
    /// keeps it in its RAM) until [`Device::free_tensor`]. [`DeviceError::StoreFull`] /
    /// [`DeviceError::TooManyTensors`] when it does not fit, with nothing stored.
    fn upload(&mut self, t: &QMatrix) -> Result<DeviceTensor, DeviceError> {
        resident::upload_to_host(self, t)
    }

    /// The words of a kept tensor. A handle of another device or one freed is a typed error
    /// ([`DeviceError::ForeignTensor`], [`DeviceError::FreedTensor`]).
    fn read_tensor(&mut self, t: &DeviceTensor) -> Result<QMatrix, DeviceError> {
        resident::read_from_host(self, t)
    }

    /// Lets a kept tensor go; its handle (and every clone of it) is then refused.
    fn free_tensor(&mut self, t: &DeviceTensor) -> Result<(), DeviceError> {
        resident::free_in_host(self, t)
    }

    /// `C = op(A)·op(B)` on kept tensors (`op` transposing where `tr` says), C kept on the
    /// device: the same words as the value-based [`Device::matmul`] (`matmul_nt`,
    /// `matmul_tn`) on the tensors' words, bit for bit. Refused before it runs when C does
    /// not fit.
    fn matmul_kept(
        &mut self,
        a: &DeviceTensor,
        b: &DeviceTensor,
        tr: Transposed,
        out: &OutputSpec,
    ) -> Result<DeviceTensor, DeviceError> {
        resident::matmul_in_host(self, a, b, tr, out)
    }

    /// The words kept tensors hold and may hold; `None` where the device keeps none.
    fn tensor_room(&mut self) -> Option<TensorRoom> {
        self.host_tensors().map(|t| t.room())
    }

    /// Limits the words kept tensors may hold together (a board's store limits them
    /// further); no effect where the device keeps none.
    fn limit_kept_words(&mut self, words: usize) {
        if let Some(t) = self.host_tensors() {
            t.set_limit(words);
        }
    }

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

/// Opens a device from a `--device` value ([`DeviceSpec`]'s forms: `golden`, `verilator`,
/// `serial:PATH`, `bridge:PATH[@BAUD]`).
pub fn open(spec: &str, config: ArrayConfig) -> Result<Box<dyn Device>, DeviceError> {
    spec.parse::<DeviceSpec>()?.open(config)
}

impl DeviceSpec {
    /// Opens the device this value names, an array of `config`.
    pub fn open(&self, config: ArrayConfig) -> Result<Box<dyn Device>, DeviceError> {
        Ok(match self {
            DeviceSpec::Golden => Box::new(golden::GoldenDevice::new(config)?),
            DeviceSpec::Verilator => Box::new(verilator::VerilatorDevice::new(config)?),
            DeviceSpec::Serial { path } => Box::new(serial::SerialDevice::open(path, config)?),
            DeviceSpec::Bridge { path, baud } => {
                Box::new(bridge::BridgeDevice::open(path, *baud, config)?)
            }
        })
    }

    /// [`Self::open`], writing the cycles of `trace` (when given) to a waveform file: only
    /// the `verilator` device runs a model in this process that can be traced; any other is an
    /// error naming what to do instead.
    pub fn open_traced(
        &self,
        config: ArrayConfig,
        trace: Option<systole_sim::TraceWindow>,
    ) -> Result<Box<dyn Device>, DeviceError> {
        let Some(window) = trace else {
            return self.open(config);
        };
        self.traceable()?;
        let mut dev = verilator::VerilatorDevice::new(config)?;
        dev.open_trace(window)?;
        Ok(Box::new(dev))
    }

    /// `Ok` when this device can be traced (`verilator`, the model running in this process),
    /// else an error naming what to do instead.
    pub fn traceable(&self) -> Result<(), DeviceError> {
        let why = match self {
            DeviceSpec::Verilator => return Ok(()),
            DeviceSpec::Golden => {
                "the golden device is the numeric contract in Rust and has no signals".to_string()
            }
            DeviceSpec::Serial { .. } | DeviceSpec::Bridge { .. } => format!(
                "{self} is a board (or a simulated board in another process): trace a simulated board with systole-board-sim --trace"
            ),
        };
        Err(DeviceError::Unsupported(format!(
            "--trace needs --device verilator (the Verilated model running in this process): {why}"
        )))
    }
}
