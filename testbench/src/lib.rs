//! `systole-testbench`: Verilator testbenches for any rust-hdl [`Block`], driven from Rust.
//!
//! [`Testbench::new`] generates the block's Verilog with rust-hdl, Verilates it at run time
//! into a cache keyed by a hash of the Verilog (a rerun loads the library it left, without
//! running Verilator), writes a C++ shim from the block's ports, links both into a shared
//! object and loads it. The handle reads and writes ports by name or by [`Port`] handle,
//! clocks the block ([`Testbench::clock`]), resets it ([`Testbench::reset`]), counts cycles and
//! writes VCD or FST traces in which every signal keeps its rust-hdl name.
//!
//! ```no_run
//! # use rust_hdl_core::prelude::*;
//! # fn demo<B: Block>(mut block: B) -> Result<(), systole_testbench::TestbenchError> {
//! use systole_testbench::Testbench;
//! let mut tb = Testbench::new(&mut block)?;
//! tb.reset()?;
//! tb.write("a_in", 1234)?;
//! tb.clock();
//! let y = tb.read_signed("y")?;
//! # Ok(()) }
//! ```
//!
//! Why a shared object loaded in process (`libloading`) and not a simulator process over
//! pipes: a port access is then a memory access and a clock cycle one function call, so the
//! testbench runs at the model's own speed (the point of Verilating), and a testbench is an
//! ordinary Rust program to debug. The library exports only the shim's functions (hidden
//! visibility, `-Bsymbolic`), so any number of models load side by side.
#![deny(missing_docs)]

mod cache;
mod handle;
pub mod layer;
mod ports;
mod shim;
mod toolchain;
mod verilate;

pub use handle::io::{Input, Narrow};
#[doc(hidden)]
pub use handle::ShimFns;
pub use handle::{IntoPort, Port, Testbench};
pub use ports::{block_ports, Dir, PortInfo};
pub use verilate::default_cache_dir;

use rust_hdl_core::check_error::CheckError;
use rust_hdl_core::prelude::Block;
use std::path::PathBuf;

/// What to install when the tools are missing.
pub const INSTALL: &str = "install with: apt-get install verilator g++ make (./x does this)";

/// The trace formats a model can be built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Value change dump: every viewer reads it.
    Vcd,
    /// GTKWave's compressed format: much smaller files (needs zlib).
    Fst,
}

impl TraceFormat {
    /// `vcd` or `fst`.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Vcd => "vcd",
            TraceFormat::Fst => "fst",
        }
    }
}

/// How a testbench is built.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Build the model with tracing in this format (tracing costs speed even with no trace
    /// open, so it is off unless asked).
    pub trace: Option<TraceFormat>,
    /// Where compiled models are kept; [`default_cache_dir`] when `None`.
    pub cache_dir: Option<PathBuf>,
    /// Rebuild even when the cache holds this model.
    pub rebuild: bool,
}

/// rust-hdl's design-check failure as an error (rust-hdl's `CheckError` is not one), kept
/// whole so a caller can see which signals are at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct DesignCheck(pub CheckError);

impl std::fmt::Display for DesignCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &mut dyn Iterator<Item = &rust_hdl_core::check_error::PathedName>| {
            let mut v: Vec<String> = v.map(|p| format!("{}:{}", p.path, p.name)).collect();
            v.sort();
            v.join(", ")
        };
        match &self.0 {
            CheckError::OpenSignal(m) => {
                write!(f, "unconnected signals {}", names(&mut m.values()))
            }
            CheckError::LogicLoops(l) => {
                write!(f, "combinational loops through {}", names(&mut l.iter()))
            }
            CheckError::WritesToInputs(l) => {
                write!(f, "inputs written to: {}", names(&mut l.iter()))
            }
        }
    }
}

impl std::error::Error for DesignCheck {}

/// Why a testbench could not be built or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestbenchError {
    /// `verilator` cannot be started.
    #[error("verilator not found: {INSTALL}")]
    VerilatorMissing {
        /// Why it could not be started.
        #[source]
        cause: std::io::Error,
    },
    /// rust-hdl's design check refused the block (unconnected signals, loops, ...).
    #[error("the block fails rust-hdl's design check: {0}")]
    Check(#[source] DesignCheck),
    /// A compiled model's symbol prefix that is not a C identifier.
    #[error("model prefix {prefix:?}: use letters, digits and '_', starting with a letter")]
    BadPrefix {
        /// The prefix given.
        prefix: String,
    },
    /// Verilator refused the generated Verilog.
    #[error("verilator failed on the block's Verilog (kept in {dir}):\n{log}")]
    Verilate {
        /// The build folder, with `top.v` and the log.
        dir: PathBuf,
        /// Verilator's messages.
        log: String,
    },
    /// The shim or the link failed.
    #[error("compiling the testbench shim failed (kept in {dir}):\n{log}")]
    Compile {
        /// The build folder.
        dir: PathBuf,
        /// The compiler's messages.
        log: String,
    },
    /// A file of the build could not be written or read.
    #[error("{what} ({path})")]
    Io {
        /// What was being done.
        what: String,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: std::io::Error,
    },
    /// The compiled model could not be loaded.
    #[error("cannot load the compiled model {path}")]
    Load {
        /// The shared object.
        path: PathBuf,
        /// The loader's error.
        #[source]
        cause: libloading::Error,
    },
    /// No port of that name.
    #[error("the block has no port `{name}` (its ports: {ports})")]
    NoPort {
        /// The name asked for.
        name: String,
        /// Every port, with direction and width.
        ports: String,
    },
    /// A tristate port, which a Verilated model cannot drive from outside.
    #[error(
        "the block has the inout port `{name}`: Verilator testbenches need ports of one direction; wrap the block with the tristate buffer inside"
    )]
    InOut {
        /// The port.
        name: String,
    },
    /// A write to an output.
    #[error("`{name}` is an output of the block: only inputs can be written")]
    NotAnInput {
        /// The port.
        name: String,
    },
    /// A value that does not fit the port.
    #[error("{value} does not fit the {width}-bit port `{name}`")]
    Overflow {
        /// The port.
        name: String,
        /// Its width.
        width: usize,
        /// The value given (signed values as written).
        value: String,
    },
    /// A whole-word access to a port of more than 64 bits, or words to a narrow one.
    #[error(
        "`{name}` is {width} bits wide: use {use_instead} for it ({words} 64-bit words, least significant first)"
    )]
    Width {
        /// The port.
        name: String,
        /// Its width.
        width: usize,
        /// Its width in 64-bit words.
        words: usize,
        /// The call that fits it.
        use_instead: &'static str,
    },
    /// A word slice of the wrong length.
    #[error("`{name}` is {width} bits wide and takes {want} 64-bit words, not {got}")]
    WordCount {
        /// The port.
        name: String,
        /// Its width.
        width: usize,
        /// Words it takes.
        want: usize,
        /// Words given.
        got: usize,
    },
    /// [`Testbench::reset`] on a block without a 1-bit `reset` (or `rst`) input.
    #[error("the block has no 1-bit input named `reset` or `rst` (its ports: {ports}); drive its reset with write and clock")]
    NoReset {
        /// Every port.
        ports: String,
    },
    /// A trace asked of a model built without tracing.
    #[error("this testbench was built without tracing: build it with Options {{ trace: Some(TraceFormat::Vcd), .. }} (or Fst)")]
    TraceNotBuilt,
    /// A port list that does not match the Verilog's top as Verilator compiled it.
    #[error(
        "the port list does not match the Verilog: {what} (Verilator's declaration: {header})"
    )]
    PortList {
        /// What differs.
        what: String,
        /// The model's class header, which declares the ports.
        header: PathBuf,
    },
    /// The trace file could not be opened.
    #[error("cannot open the trace file {0}")]
    TraceOpen(PathBuf),
}

impl Testbench {
    /// Builds (or loads from the cache) a Verilated model of `block` with default [`Options`].
    pub fn new<B: Block>(block: &mut B) -> Result<Testbench, TestbenchError> {
        Testbench::with_options(block, &Options::default())
    }
}

#[cfg(test)]
mod tests;
