//! `systole-hdl`: the rust-hdl blocks of the systole systolic-array accelerator and the Verilog
//! generator used by the simulation and board flows.
//!
//! * [`pe`] processing element, [`array`] the `n x n` array with its input skew,
//! * [`converter`] one output converter (shift, rounding, saturation, LFSR) per column,
//! * [`buffers`] the double-buffered A, B and C lane RAMs,
//! * [`controller`] command queue and K sequencer, [`regfile`] the register map,
//! * [`top`] the core wiring them together.
//!
//! [`generate_verilog`] validates an [`ArrayConfig`], builds the core, checks it with rust-hdl's
//! design rules, emits its Verilog (module `systole` and its submodules) and appends the module
//! [`top_module_name`] (`top`), whose ports are exactly [`ports`]: address ports at the
//! configuration's widths and row data as `n` separate 16-bit ports. docs/HARDWARE.md documents them.

pub mod array;
pub mod bridge_top;
pub mod buffers;
pub mod cocotb;
mod comb_split;
pub mod controller;
pub mod converter;
pub mod converter_width;
#[cfg(test)]
mod differential;
pub mod fm_ram;
pub mod gather;
pub mod icarus;
pub mod pe;
pub mod pe_pair;
mod prune;
pub mod regfile;
pub mod soc;
pub mod top;
pub mod uart;
mod vfile;
pub mod walker;

mod verilog;

pub use verilog::{generate_verilog, lint_waivers, ports, top_module_name, PortDir, PortInfo};

use systole_core::ConfigError;

/// Why Verilog could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HdlError {
    /// The array configuration is invalid.
    #[error("invalid array configuration: {0}")]
    Config(ConfigError),
    /// A block was asked for with parameters it does not support.
    #[error("unsupported block parameters: {0}")]
    Block(String),
    /// rust-hdl's design-rule check rejected the design (an internal bug, reported verbatim).
    #[error("rust-hdl design check failed: {0}")]
    Check(String),
}

impl HdlError {
    /// rust-hdl's check error in words: what is wrong and with which signals.
    pub(crate) fn check(e: rust_hdl_core::check_error::CheckError) -> HdlError {
        use rust_hdl_core::check_error::{CheckError, PathedName};
        let names = |v: &mut dyn Iterator<Item = &PathedName>| {
            let mut v: Vec<String> = v.map(|p| format!("{}:{}", p.path, p.name)).collect();
            v.sort();
            v.join(", ")
        };
        HdlError::Check(match &e {
            CheckError::OpenSignal(m) => format!("unconnected signals {}", names(&mut m.values())),
            CheckError::LogicLoops(l) => {
                format!("combinational loops through {}", names(&mut l.iter()))
            }
            CheckError::WritesToInputs(l) => format!("inputs written to: {}", names(&mut l.iter())),
        })
    }
}
