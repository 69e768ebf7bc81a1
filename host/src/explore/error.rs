//! Why a sweep could not start or a point could not be measured.

use std::path::PathBuf;
use systole_core::ConfigError;

/// Why a sweep could not start or a point could not be measured: each says what was wrong
/// and how to fix it; causes are kept as sources.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExploreError {
    /// A list option with nothing in it.
    #[error("{flag} is empty: give at least one value, e.g. {flag} {example}")]
    EmptyList {
        /// The option.
        flag: &'static str,
        /// A good value.
        example: &'static str,
    },
    /// An entry of a list option that is not a value of its kind.
    #[error("{flag} {list}: '{value}' is not a valid entry: give a comma-separated list such as {flag} {example}")]
    BadEntry {
        /// The option.
        flag: &'static str,
        /// The entry.
        value: String,
        /// The whole list as given.
        list: String,
        /// A good value.
        example: &'static str,
    },
    /// An entry given twice.
    #[error("{flag} names {value} twice: give each value once")]
    Repeated {
        /// The option.
        flag: &'static str,
        /// The entry.
        value: String,
    },
    /// An array size core refuses.
    #[error("--array {value}: {source}")]
    Array {
        /// The size.
        value: usize,
        /// Core's reason.
        source: ConfigError,
    },
    /// An array size with no Verilated model in this build (cycles are simulated).
    #[error("--array {value}: this build has no Verilated {value}x{value} model to count cycles on (built: {}); rebuild with SYSTOLE_VERILATOR_SIZES={},{value} or choose built sizes", list(built), list(built))]
    NotSimulated {
        /// The size.
        value: usize,
        /// The sizes that were built.
        built: Vec<usize>,
    },
    /// A word width the trainer does not take (outside 8..=16).
    #[error(
        "--word-bits {value}: the word width W must be {} to {} bits, e.g. --word-bits 8,12,16",
        systole_core::numeric::MIN_WORD_BITS,
        systole_core::numeric::MAX_WORD_BITS
    )]
    WordBits {
        /// The width.
        value: u32,
        /// The trainer's reason.
        source: systole_train::TrainError,
    },
    /// `--dsp-pack on` with a word width or array size core does not pack.
    #[error("--dsp-pack on: {source}; e.g. --dsp-pack off,on --word-bits 8")]
    DspPack {
        /// Core's reason.
        source: ConfigError,
    },
    /// A feature-map depth core refuses.
    #[error("--fm-depth {value}: {source}; 0 builds no conv unit")]
    FmDepth {
        /// The depth.
        value: usize,
        /// Core's reason.
        source: ConfigError,
    },
    /// A number that must be at least one.
    #[error("{flag} must be at least 1")]
    Zero {
        /// The option.
        flag: &'static str,
    },
    /// A model that cannot be read (unknown name, bad network file).
    #[error("{0}")]
    Model(String),
    /// A board name not in the table.
    #[error("--board: {0}")]
    Board(#[source] systole_boards::BoardError),
    /// Training options or data the trainer refuses (unknown data set, oversized model, ...).
    #[error(transparent)]
    Train(#[from] systole_train::TrainError),
    /// A device (the golden model or a Verilated array) failed.
    #[error("{what}: {source}")]
    Device {
        /// What was being done.
        what: String,
        /// The device's error.
        source: systole_device::DeviceError,
    },
    /// The cycle model disagrees with the Verilated count on the sampled steps: no cycle
    /// figure is reported then.
    #[error("{point}: the cycle model predicts {model} cycles for the first {steps} training step(s) but the Verilated array counted {verilated}; the per-shape cycle table no longer describes the driver (report this)")]
    CycleMismatch {
        /// The design point.
        point: String,
        /// Steps run on the Verilated array.
        steps: usize,
        /// Its count.
        verilated: u64,
        /// The model's prediction.
        model: u64,
    },
    /// Synthesis failed (Yosys missing or failing, the design not generated).
    #[error("synthesising {point}: {source}")]
    Synth {
        /// The design point.
        point: String,
        /// The board flow's error.
        source: systole_boards::BoardError,
    },
    /// The output folder holds a sweep run with other settings.
    #[error("{path} holds a sweep with {option} {was} (this one: {now}): resume it with the same options, choose another --out, or replace it with --overwrite")]
    OtherSweep {
        /// explore.json.
        path: PathBuf,
        /// The differing option.
        option: String,
        /// Its value in the file.
        was: String,
        /// Its value now.
        now: String,
    },
    /// An earlier sweep's results that cannot be read.
    #[error(
        "{path} cannot be read as a sweep's results: move it away or replace it with --overwrite"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The reader's error.
        source: std::io::Error,
    },
    /// Writing an output failed.
    #[error(transparent)]
    Output(#[from] systole_train::OutputError),
    /// The plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// A cache file could not be read or written.
    #[error("synthesis cache {path}")]
    Cache {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A worker thread panicked (a bug): the points finished before it are written.
    #[error("a sweep worker stopped unexpectedly: {0}")]
    Worker(String),
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
