//! [`DriverError`]: why a product or convolution failed on the device, in one sentence each.

use super::{MAX_LANES, WAIT_LIMIT};
use core::fmt;
use systole_core::numeric::{MAX_K, MAX_SHIFT};
use systole_core::ConfigError;

/// Why [`super::matmul`] or the conv driver's `conv2d` failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverError<E> {
    /// The bus failed.
    Bus(E),
    /// The configuration is not valid.
    Config(ConfigError),
    /// The array is wider than [`MAX_LANES`].
    TooManyLanes(usize),
    /// The device reports a different configuration than the driver was given.
    ConfigMismatch {
        /// `cfg.config_word()`.
        expected: u32,
        /// The device's `CONFIG` register.
        found: u32,
    },
    /// A buffer has the wrong length (`which` is `"a"`, `"b"` or `"out"`).
    Length {
        /// Which slice.
        which: &'static str,
        /// Words it must hold.
        expected: usize,
        /// Words it holds.
        found: usize,
    },
    /// A word of operand `which` (`"a"`, `"b"` or `"feature map"`) is outside the array's
    /// `W`-bit range: its ports would cut it.
    WordRange {
        /// Which operand.
        which: &'static str,
        /// The word's index in it.
        index: usize,
        /// The word.
        value: i16,
        /// The array's word width.
        word_bits: u32,
    },
    /// `m * k`, `k * n` or `m * n` overflows `usize`.
    ShapeOverflow,
    /// The dot product is longer than the contract's `MAX_K`.
    KTooLong(usize),
    /// The output shift exceeds 32.
    Shift(u32),
    /// The device set `STATUS_ERROR` (a dropped command or a bad register value).
    Device {
        /// The `STATUS` register.
        status: u32,
    },
    /// The device did not get to the awaited state within [`WAIT_LIMIT`] cycles.
    Timeout {
        /// What the driver waited for.
        waiting_for: &'static str,
    },
    /// A convolution was asked of an array built without the conv unit.
    NoConvUnit,
    /// The convolution's geometry does not fit the conv unit.
    Geometry(systole_core::gather::GeomError),
    /// The images one command needs do not fit the feature-map buffer together.
    FeatureMapTooSmall {
        /// Words needed.
        needed: usize,
        /// Words the buffer holds.
        fm_depth: usize,
    },
    /// The product sequencer refused the product or stopped (its `MM_STATUS`: `MM_ERR_SIZE`,
    /// `MM_ERR_CONVERT` or `MM_ERR_DEVICE`, `systole_core::soc`).
    #[cfg(any(feature = "step", test))]
    Sequencer {
        /// The `MM_STATUS` register.
        status: u32,
    },
}

impl<E: fmt::Display> fmt::Display for DriverError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Bus(e) => write!(f, "accelerator bus failed: {e}"),
            DriverError::Config(e) => write!(f, "bad array configuration: {e}"),
            DriverError::TooManyLanes(n) => {
                write!(f, "array size {n} exceeds the driver's {MAX_LANES} lanes")
            }
            DriverError::ConfigMismatch { expected, found } => write!(
                f,
                "device reports configuration {found:#010x} but the driver expected {expected:#010x}: \
                 open the device with the array size it was built for"
            ),
            DriverError::Length {
                which,
                expected,
                found,
            } => write!(f, "operand {which} holds {found} words, the shape needs {expected}"),
            DriverError::WordRange {
                which,
                index,
                value,
                word_bits,
            } => write!(
                f,
                "word {index} of {which} is {value}, outside the {word_bits}-bit range of this array's words"
            ),
            DriverError::ShapeOverflow => write!(f, "matrix shape overflows the address space"),
            DriverError::KTooLong(k) => write!(
                f,
                "dot product of length {k} exceeds the contract's limit of {MAX_K}: split it on the host"
            ),
            DriverError::Shift(s) => {
                write!(f, "output shift {s} is outside 0..={MAX_SHIFT}")
            }
            DriverError::Device { status } => {
                write!(f, "accelerator reported an error (STATUS = {status:#x})")
            }
            DriverError::Timeout { waiting_for } => write!(
                f,
                "accelerator did not respond within {WAIT_LIMIT} cycles while waiting for {waiting_for}"
            ),
            DriverError::NoConvUnit => write!(
                f,
                "this array has no conv unit (fm_depth 0): run the convolution on the host or use an array built with one"
            ),
            DriverError::Geometry(e) => write!(f, "{e}"),
            DriverError::FeatureMapTooSmall { needed, fm_depth } => write!(
                f,
                "one command needs {needed} words of feature maps but the buffer holds {fm_depth}: build the array with a larger fm_depth"
            ),
            #[cfg(any(feature = "step", test))]
            DriverError::Sequencer { status } => {
                use systole_core::soc::{MM_ERR_CONVERT, MM_ERR_DEVICE, MM_ERR_SIZE};
                let why = if MM_ERR_SIZE.get(*status) != 0 {
                    "a size is 0 or too large"
                } else if MM_ERR_CONVERT.get(*status) != 0 {
                    "the shift or rounding is out of range"
                } else if MM_ERR_DEVICE.get(*status) != 0 {
                    "the array refused a command, the result is incomplete"
                } else {
                    "it did not run"
                };
                write!(f, "the product sequencer refused the product: {why} (MM_STATUS = {status:#x})")
            }
        }
    }
}

/// The bus's error is the typed cause of [`DriverError::Bus`] (hosts walk the chain to it).
impl<E: core::error::Error + 'static> core::error::Error for DriverError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            DriverError::Bus(e) => Some(e),
            DriverError::Config(e) => Some(e),
            _ => None,
        }
    }
}
