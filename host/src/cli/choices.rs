//! The command line's choices that are the host's own, as types clap parses once (the
//! network, the data set, the precision and the rounding are the trainer's types).

use clap::ValueEnum;
use systole_core::Rounding;
use systole_train::Precision;

/// `--init`: where a run from an ONNX file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Init {
    /// The ONNX file's weights.
    File,
    /// Random weights from the run's seed.
    Random,
}

/// A `compare --formats` entry, parsed once: `f32`, `f16`, `bf16` or `fixed16-ROUNDING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The number format.
    pub precision: Precision,
    /// Its rounding (nearest for the floats, which round to nearest-even).
    pub rounding: Rounding,
}

impl Format {
    /// Its name in tables and folders: a fixed-point format by its width W
    /// (`fixed8-stochastic` under `--word-bits 8`).
    pub fn name(&self, word_bits: u32) -> String {
        match self.precision {
            Precision::Fixed16 => format!("fixed{word_bits}-{}", self.rounding.name()),
            p => p.name().to_string(),
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        let bad = || {
            format!("unknown format '{name}': use f32, f16, bf16, fixed16-stochastic, fixed16-nearest or fixed16-truncate")
        };
        let (precision, rounding) = match name.split_once('-') {
            Some((p, r)) => (Precision::parse(p), Rounding::parse(r)),
            None => (Precision::parse(name), Some(Rounding::NearestEven)),
        };
        match (precision, rounding, name.contains('-')) {
            (Some(Precision::Fixed16), Some(rounding), true) => Ok(Format {
                precision: Precision::Fixed16,
                rounding,
            }),
            (Some(p), Some(rounding), false) if p != Precision::Fixed16 => Ok(Format {
                precision: p,
                rounding,
            }),
            _ => Err(bad()),
        }
    }
}

/// `explore --resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Resources {
    /// Yosys synth_xilinx, cached by design hash.
    Yosys,
    /// The resource model of `systole boards`, no synthesis.
    Estimate,
}
