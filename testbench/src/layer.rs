//! The Verilator layer for build scripts: the same Verilation, shim and cache as
//! [`crate::Testbench::from_verilog`], packaged as a static archive that a build script links
//! into its crate beside other models (each with its own class `V{prefix}` and functions
//! `{prefix}_*`), with the Rust table that [`crate::Testbench::linked`] drives.
//!
//! ```text
//! // build.rs
//! let a = layer::build_archive(&cache, "sa8", &verilog, Ports::Given(&ports), 2)?; // libsa8.a
//! let r = layer::runtime_archive(&cache)?;                               // Verilator's runtime
//! // link both (model archives first), and write layer::rust_table("sa8", "SA8", &ports)
//! // into OUT_DIR for the crate to include: `unsafe { Testbench::linked(&SA8) }`.
//! ```
//!
//! A model linked this way is built without tracing (tracing costs speed even with no trace
//! open); a traced model of the same Verilog is [`crate::Testbench::from_verilog`] at run time.

use crate::handle::{check_ports, ShimFns, Testbench};
use crate::ports::{Dir, PortInfo};
use crate::toolchain::include_and_runtime;
pub use crate::verilate::Ports;
use crate::verilate::{build, Design, Package};
use crate::TestbenchError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A model's archive in the cache.
#[derive(Clone, Debug)]
pub struct Archive {
    /// `lib{prefix}.a`: the Verilated model and its shim.
    pub library: PathBuf,
    /// The model's ports, in the shim's order (for [`rust_table`]).
    pub ports: Vec<PortInfo>,
    /// Loaded from the cache (Verilator did not run).
    pub cached: bool,
    /// Time spent Verilating and compiling, or finding it in the cache.
    pub took: Duration,
}

/// Verilates `verilog` (module `top` with `ports`) into `cache` as `lib{prefix}.a`, unless
/// the cache has it; `jobs` compilers run at once. `prefix` must be a C identifier, distinct
/// for every model linked into one program.
pub fn build_archive(
    cache: &Path,
    prefix: &str,
    verilog: &str,
    ports: Ports<'_>,
    jobs: usize,
) -> Result<Archive, TestbenchError> {
    if let Ports::Given(list) = ports {
        check_ports(list)?;
    }
    let ident = prefix.starts_with(|c: char| c.is_ascii_alphabetic())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(TestbenchError::BadPrefix {
            prefix: prefix.into(),
        });
    }
    let design = Design {
        verilog,
        ports,
        trace: None,
        package: Package::Archive { prefix },
        jobs,
    };
    let built = build(cache, &design)?;
    Ok(Archive {
        library: built.library,
        ports: built.ports,
        cached: built.cached,
        took: built.took,
    })
}

/// Verilator's runtime (without tracing) as `libverilated.a`, compiled once per Verilator
/// version into `cache`: linked once, after every model archive.
pub fn runtime_archive(cache: &Path) -> Result<PathBuf, TestbenchError> {
    include_and_runtime(cache, None)
}

/// One port of a linked model, as the table names it.
#[derive(Clone, Copy, Debug)]
pub struct LinkedPort {
    /// The port's name.
    pub name: &'static str,
    /// Width in bits.
    pub width: usize,
    /// Driven by the testbench.
    pub input: bool,
    /// Declared signed.
    pub signed: bool,
    /// The clock `Testbench::clock` drives.
    pub clock: bool,
}

impl LinkedPort {
    /// As the [`PortInfo`] the shim was generated from.
    pub fn info(&self) -> PortInfo {
        PortInfo {
            name: self.name.into(),
            width: self.width,
            dir: if self.input { Dir::Input } else { Dir::Output },
            signed: self.signed,
            clock: self.clock,
        }
    }
}

/// A linked model's table: its shim's functions and the ports they serve, in order.
#[derive(Debug)]
pub struct Linked {
    #[doc(hidden)]
    pub fns: ShimFns,
    /// The ports, in the shim's order.
    pub ports: &'static [LinkedPort],
}

/// Rust source declaring the functions of `lib{prefix}.a` and `pub static {name}:
/// systole_testbench::layer::Linked`, for a build script to write into `OUT_DIR` and its
/// crate to `include!` (the crate must depend on `systole-testbench`).
pub fn rust_table(prefix: &str, name: &str, ports: &[PortInfo]) -> String {
    let p = prefix;
    let mut list = String::new();
    for q in ports {
        let _ = writeln!(
            list,
            "        systole_testbench::layer::LinkedPort {{ name: {:?}, width: {}, input: {}, signed: {}, clock: {} }},",
            q.name,
            q.width,
            q.dir == Dir::Input,
            q.signed,
            q.clock
        );
    }
    format!(
        r#"extern "C" {{
    fn {p}_new() -> *mut core::ffi::c_void;
    fn {p}_delete(s: *mut core::ffi::c_void);
    fn {p}_port(s: *mut core::ffi::c_void, i: u32) -> *mut core::ffi::c_void;
    fn {p}_eval(s: *mut core::ffi::c_void);
    fn {p}_clock(s: *mut core::ffi::c_void, n: u64);
    fn {p}_trace_open(s: *mut core::ffi::c_void, path: *const core::ffi::c_char) -> core::ffi::c_int;
    fn {p}_trace_close(s: *mut core::ffi::c_void);
    fn {p}_trace_flush(s: *mut core::ffi::c_void);
}}
/// The statically linked model `{p}` (generated by `systole_testbench::layer::rust_table`).
pub static {name}: systole_testbench::layer::Linked = systole_testbench::layer::Linked {{
    fns: systole_testbench::ShimFns {{
        new: {p}_new,
        delete: {p}_delete,
        port: {p}_port,
        eval: {p}_eval,
        clock: {p}_clock,
        trace_open: {p}_trace_open,
        trace_close: {p}_trace_close,
        trace_flush: {p}_trace_flush,
    }},
    ports: &[
{list}    ],
}};
"#
    )
}

impl Testbench {
    /// A model a build script compiled and linked into this program ([`build_archive`]), from
    /// the table [`rust_table`] wrote.
    ///
    /// # Safety
    /// `model` must be a table written by [`rust_table`] for the archive linked in (its
    /// functions and port list are the shim's).
    pub unsafe fn linked(model: &'static Linked) -> Testbench {
        let ports = model.ports.iter().map(|p| p.info()).collect();
        // SAFETY: by the caller.
        unsafe { Testbench::start(model.fns, ports, None) }
    }
}
