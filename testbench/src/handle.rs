//! The loaded model: ports by name or handle, clock, reset, cycle count and traces.
#![allow(unsafe_code)]

pub(crate) mod io;

use crate::ports::{block_ports, Dir, PortInfo};
use crate::verilate::{Design, Package, Ports};
use crate::{DesignCheck, Options, TestbenchError};
use core::ffi::{c_char, c_int, c_void};
use rust_hdl_core::prelude::*;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A port of the testbench's block: a cheap handle for the hot loop (see [`Testbench::port`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port(usize);

/// A port named by its rust-hdl name or by a [`Port`] handle.
pub trait IntoPort {
    /// The port's handle in `tb`.
    fn port_in(self, tb: &Testbench) -> Result<Port, TestbenchError>;
}

impl IntoPort for Port {
    fn port_in(self, _tb: &Testbench) -> Result<Port, TestbenchError> {
        Ok(self)
    }
}

impl IntoPort for &str {
    fn port_in(self, tb: &Testbench) -> Result<Port, TestbenchError> {
        tb.port(self)
    }
}

type NewFn = unsafe extern "C" fn() -> *mut c_void;
type StateFn = unsafe extern "C" fn(*mut c_void);
type PortFn = unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void;
type ClockFn = unsafe extern "C" fn(*mut c_void, u64);
type OpenFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;

/// The shim's functions (see `shim.rs`), looked up in a shared object or linked statically.
#[derive(Clone, Copy, Debug)]
#[doc(hidden)]
pub struct ShimFns {
    pub new: NewFn,
    pub delete: StateFn,
    pub port: PortFn,
    pub eval: StateFn,
    pub clock: ClockFn,
    pub trace_open: OpenFn,
    pub trace_close: StateFn,
    pub trace_flush: StateFn,
}

/// Cycles [`Testbench::reset`] holds `reset` high.
pub const RESET_CYCLES: u64 = 2;

/// A Verilated block, loaded and ready to drive.
pub struct Testbench {
    state: *mut c_void,
    fns: ShimFns,
    /// Where each port lives in the model (see `shim.rs`), in the order of `ports`.
    addrs: Vec<*mut c_void>,
    /// The same with each port's size, for the unchecked `set` and `get`.
    slots: Vec<io::Slot>,
    ports: Vec<PortInfo>,
    /// Inputs written since the last evaluation: outputs must be recomputed before a read.
    dirty: bool,
    cycles: u64,
    cached: bool,
    build_time: Duration,
    dir: PathBuf,
    // Last: the library (none for a statically linked model) must outlive every pointer above.
    _lib: Option<libloading::Library>,
}

// SAFETY: the model and its VerilatedContext belong to this value alone, and every call takes
// `&mut self` or reads through it, so it may move to another thread.
unsafe impl Send for Testbench {}

impl Testbench {
    /// Builds (or loads from the cache) a Verilated model of `block`.
    pub fn with_options<B: Block>(
        block: &mut B,
        opts: &Options,
    ) -> Result<Testbench, TestbenchError> {
        block.connect_all();
        check_all(block).map_err(|e| TestbenchError::Check(DesignCheck(e)))?;
        let mut defines = ModuleDefines::default();
        block.accept("top", &mut defines);
        Testbench::from_verilog(&defines.defines(), block_ports(block), opts)
    }

    /// Builds (or loads from the cache) a Verilated model of `verilog`, whose module `top` has
    /// exactly `ports` (in any order; names as in the Verilog): for Verilog that is not one
    /// rust-hdl block's own output, such as the accelerator's `top` (systole-sim's traced
    /// models), with its port list from the same definition the Verilog was written from.
    pub fn from_verilog(
        verilog: &str,
        ports: Vec<PortInfo>,
        opts: &Options,
    ) -> Result<Testbench, TestbenchError> {
        check_ports(&ports)?;
        Testbench::from_design(verilog, Ports::Given(&ports), opts)
    }

    /// [`Testbench::from_verilog`] for Verilog with no port list of its own: the ports are
    /// taken as Verilator declares them in the compiled model (none signed); the input named
    /// `clock` drives [`Testbench::clock`].
    pub fn from_verilog_declared_ports(
        verilog: &str,
        clock: &str,
        opts: &Options,
    ) -> Result<Testbench, TestbenchError> {
        Testbench::from_design(verilog, Ports::Declared { clock }, opts)
    }

    fn from_design(
        verilog: &str,
        ports: Ports<'_>,
        opts: &Options,
    ) -> Result<Testbench, TestbenchError> {
        let cache = opts
            .cache_dir
            .clone()
            .unwrap_or_else(crate::verilate::default_cache_dir);
        let design = Design {
            verilog,
            ports,
            trace: opts.trace,
            package: Package::Shared,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if opts.rebuild {
            crate::verilate::forget(&cache, &design)?;
        }
        let built = crate::verilate::build(&cache, &design)?;
        let load = |cause| TestbenchError::Load {
            path: built.library.clone(),
            cause,
        };
        // SAFETY: the library is the shim built above; loading runs only Verilator's static
        // initialisers.
        let lib = unsafe { libloading::Library::new(&built.library) }.map_err(load)?;
        // SAFETY: each symbol has the signature `shim.rs` gives it.
        let fns = unsafe {
            ShimFns {
                new: *lib.get(b"tb_new\0").map_err(load)?,
                delete: *lib.get(b"tb_delete\0").map_err(load)?,
                port: *lib.get(b"tb_port\0").map_err(load)?,
                eval: *lib.get(b"tb_eval\0").map_err(load)?,
                clock: *lib.get(b"tb_clock\0").map_err(load)?,
                trace_open: *lib.get(b"tb_trace_open\0").map_err(load)?,
                trace_close: *lib.get(b"tb_trace_close\0").map_err(load)?,
                trace_flush: *lib.get(b"tb_trace_flush\0").map_err(load)?,
            }
        };
        // SAFETY: `fns` are the shim of `ports`, and `lib` keeps them loaded.
        let mut tb = unsafe { Testbench::start(fns, built.ports, Some(lib)) };
        tb.cached = built.cached;
        tb.build_time = built.took;
        tb.dir = built.dir;
        Ok(tb)
    }

    /// Creates the model and looks up its ports.
    ///
    /// # Safety
    /// `fns` must be the shim generated for `ports`, loaded as long as `lib` lives.
    pub(crate) unsafe fn start(
        fns: ShimFns,
        ports: Vec<PortInfo>,
        lib: Option<libloading::Library>,
    ) -> Testbench {
        // SAFETY: by the caller.
        let state = unsafe { (fns.new)() };
        let addrs: Vec<*mut c_void> = (0..ports.len())
            // SAFETY: a live model; indices within the shim's port list.
            .map(|i| unsafe { (fns.port)(state, i as u32) })
            .collect();
        let slots = ports
            .iter()
            .zip(&addrs)
            .map(|(p, &a)| io::Slot::new(a, p.width))
            .collect();
        Testbench {
            state,
            fns,
            addrs,
            slots,
            ports,
            dirty: false,
            cycles: 0,
            cached: true,
            build_time: Duration::ZERO,
            dir: PathBuf::new(),
            _lib: lib,
        }
    }

    /// `true` when the model came from the cache (Verilator did not run).
    pub fn cached(&self) -> bool {
        self.cached
    }

    /// Time spent getting the model: Verilating and compiling, or finding it in the cache.
    pub fn build_time(&self) -> Duration {
        self.build_time
    }

    /// The model's folder in the cache (its Verilog `top.v`, shim, and Verilator's output).
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// The block's ports, in declaration order.
    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// The handle of the port `name` (its rust-hdl name).
    pub fn port(&self, name: &str) -> Result<Port, TestbenchError> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .map(Port)
            .ok_or_else(|| TestbenchError::NoPort {
                name: name.into(),
                ports: self.describe_ports(),
            })
    }

    /// Every port as `name (input, 16 bits)`, for error messages.
    fn describe_ports(&self) -> String {
        let v: Vec<String> = self
            .ports
            .iter()
            .map(|p| {
                let dir = if p.dir == Dir::Input {
                    "input"
                } else {
                    "output"
                };
                format!("{} ({dir}, {} bits)", p.name, p.width)
            })
            .collect();
        v.join(", ")
    }

    /// Clock cycles run (rising edges, resets included).
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// One clock cycle: the logic settles with the clock low, then the rising edge (and the
    /// falling one). A block without a clock input only advances the cycle count and time.
    pub fn clock(&mut self) {
        self.clock_n(1);
    }

    /// `n` clock cycles with the inputs held.
    pub fn clock_n(&mut self, n: u64) {
        // SAFETY: live model.
        unsafe { (self.fns.clock)(self.state, n) };
        self.cycles += n;
        self.dirty = false;
    }

    /// Holds the 1-bit input `reset` (or `rst`) high for [`RESET_CYCLES`] cycles, then low.
    pub fn reset(&mut self) -> Result<(), TestbenchError> {
        let reset = self
            .ports
            .iter()
            .position(|p| {
                (p.name == "reset" || p.name == "rst") && p.width == 1 && p.dir == Dir::Input
            })
            .map(Port)
            .ok_or_else(|| TestbenchError::NoReset {
                ports: self.describe_ports(),
            })?;
        self.write(reset, 1)?;
        self.clock_n(RESET_CYCLES);
        self.write(reset, 0)
    }

    /// Starts writing every signal of the block to `path` in the format the model was built
    /// for (replacing an open trace). Trace time is in half cycles: cycle `c`'s settled inputs
    /// at `2c`, its rising edge at `2c + 1`.
    pub fn trace(&mut self, path: &Path) -> Result<(), TestbenchError> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| TestbenchError::TraceOpen(path.into()))?;
        self.settle();
        // SAFETY: live model; `c` outlives the call.
        match unsafe { (self.fns.trace_open)(self.state, c.as_ptr()) } {
            0 => Ok(()),
            2 => Err(TestbenchError::TraceNotBuilt),
            _ => Err(TestbenchError::TraceOpen(path.into())),
        }
    }

    /// Flushes the open trace to its file.
    pub fn flush_trace(&mut self) {
        // SAFETY: live model; a no-op without a trace.
        unsafe { (self.fns.trace_flush)(self.state) };
    }

    /// Closes the open trace, if any (dropping the testbench does too).
    pub fn close_trace(&mut self) {
        // SAFETY: live model; a no-op without a trace.
        unsafe { (self.fns.trace_close)(self.state) };
    }

    #[inline(always)]
    fn settle(&mut self) {
        if self.dirty {
            // SAFETY: live model.
            unsafe { (self.fns.eval)(self.state) };
            self.dirty = false;
        }
    }
}

impl Drop for Testbench {
    fn drop(&mut self) {
        // SAFETY: the model was created by `tb_new` and is not used after this; the library
        // is dropped after this body.
        unsafe { (self.fns.delete)(self.state) };
    }
}

/// Refuses a port list the shim cannot serve.
pub(crate) fn check_ports(ports: &[PortInfo]) -> Result<(), TestbenchError> {
    if let Some(p) = ports.iter().find(|p| p.dir == Dir::InOut) {
        return Err(TestbenchError::InOut {
            name: p.name.clone(),
        });
    }
    Ok(())
}
