//! The loaded model: ports by name or handle, clock, reset, cycle count and traces.
#![allow(unsafe_code)]

use crate::ports::{ports_of, Dir, PortInfo};
use crate::{Options, TestbenchError};
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

/// Cycles [`Testbench::reset`] holds `reset` high.
pub const RESET_CYCLES: u64 = 2;

/// A Verilated block, loaded and ready to drive.
pub struct Testbench {
    state: *mut c_void,
    delete: StateFn,
    eval: StateFn,
    clock_fn: ClockFn,
    trace_open: OpenFn,
    trace_close: StateFn,
    trace_flush: StateFn,
    /// Where each port lives in the model (see `shim.rs`), in the order of `ports`.
    addrs: Vec<*mut c_void>,
    ports: Vec<PortInfo>,
    /// Inputs written since the last evaluation: outputs must be recomputed before a read.
    dirty: bool,
    cycles: u64,
    cached: bool,
    build_time: Duration,
    dir: PathBuf,
    // Last: the library must outlive every pointer above.
    _lib: libloading::Library,
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
        check_all(block).map_err(|e| TestbenchError::Check(format!("{e:?}")))?;
        let mut defines = ModuleDefines::default();
        block.accept("top", &mut defines);
        let verilog = defines.defines();
        let ports = ports_of(block);
        if let Some(p) = ports.iter().find(|p| p.dir == Dir::InOut) {
            return Err(TestbenchError::InOut {
                name: p.name.clone(),
            });
        }
        // The first clock input drives every `clock()`; a second clock is an ordinary input.
        let clock = ports.iter().find(|p| p.clock && p.dir == Dir::Input);
        let shim = crate::shim::shim_cpp(&ports, clock, opts.trace);
        let cache = opts
            .cache_dir
            .clone()
            .unwrap_or_else(crate::verilate::default_cache_dir);
        if opts.rebuild {
            crate::verilate::forget(&cache, &verilog, &shim, opts.trace)?;
        }
        let built = crate::verilate::build(&cache, &verilog, &shim, opts.trace)?;
        let load = |cause| TestbenchError::Load {
            path: built.library.clone(),
            cause,
        };
        // SAFETY: the library is the shim built above; loading runs only Verilator's static
        // initialisers.
        let lib = unsafe { libloading::Library::new(&built.library) }.map_err(load)?;
        // SAFETY: each symbol has the signature `shim.rs` gives it.
        unsafe {
            let new: NewFn = *lib.get(b"tb_new\0").map_err(load)?;
            let port: PortFn = *lib.get(b"tb_port\0").map_err(load)?;
            let state = new();
            let addrs = (0..ports.len()).map(|i| port(state, i as u32)).collect();
            Ok(Testbench {
                state,
                delete: *lib.get(b"tb_delete\0").map_err(load)?,
                eval: *lib.get(b"tb_eval\0").map_err(load)?,
                clock_fn: *lib.get(b"tb_clock\0").map_err(load)?,
                trace_open: *lib.get(b"tb_trace_open\0").map_err(load)?,
                trace_close: *lib.get(b"tb_trace_close\0").map_err(load)?,
                trace_flush: *lib.get(b"tb_trace_flush\0").map_err(load)?,
                addrs,
                ports,
                dirty: false,
                cycles: 0,
                cached: built.cached,
                build_time: built.took,
                dir: built.dir,
                _lib: lib,
            })
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

    /// Writes `value` to the input `port` (up to 64 bits wide; it must fit the width).
    pub fn write(&mut self, port: impl IntoPort, value: u64) -> Result<(), TestbenchError> {
        let (i, p) = self.narrow(port, "write_words")?;
        if p.dir != Dir::Input {
            return Err(TestbenchError::NotAnInput {
                name: p.name.clone(),
            });
        }
        if p.width < 64 && value >> p.width != 0 {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: format!("{value:#x}"),
            });
        }
        // SAFETY: `addrs[i]` is the model's member for this port, of Verilator's type for its
        // width (shim.rs).
        unsafe { store(self.addrs[i], p.width, value) };
        self.dirty = true;
        Ok(())
    }

    /// Writes a two's-complement `value` to the input `port`; it must fit the width as a
    /// signed number.
    pub fn write_signed(&mut self, port: impl IntoPort, value: i64) -> Result<(), TestbenchError> {
        let (_, p) = self.narrow(port, "write_words")?;
        let w = p.width as u32;
        let fits = w >= 64 || (value >= -(1i64 << (w - 1)) && value < (1i64 << (w - 1)));
        if !fits {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: value.to_string(),
            });
        }
        let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
        let port = self.port(&p.name.clone())?;
        self.write(port, value as u64 & mask)
    }

    /// Reads `port` (an input or an output, up to 64 bits), after evaluating the logic when
    /// inputs changed since.
    pub fn read(&mut self, port: impl IntoPort) -> Result<u64, TestbenchError> {
        let (i, p) = self.narrow(port, "read_words")?;
        let width = p.width;
        self.settle();
        // SAFETY: as in `write`.
        Ok(unsafe { load(self.addrs[i], width) })
    }

    /// Reads `port` as a two's-complement number of its width.
    pub fn read_signed(&mut self, port: impl IntoPort) -> Result<i64, TestbenchError> {
        let port = port.port_in(self)?;
        let w = self.ports[port.0].width as u32;
        let v = self.read(port)?;
        Ok(if w >= 64 {
            v as i64
        } else {
            ((v << (64 - w)) as i64) >> (64 - w)
        })
    }

    /// Writes a port of any width from 64-bit words, least significant first (`ceil(width /
    /// 64)` of them; bits above the width must be zero).
    pub fn write_words(
        &mut self,
        port: impl IntoPort,
        words: &[u64],
    ) -> Result<(), TestbenchError> {
        let port = port.port_in(self)?;
        let p = &self.ports[port.0];
        if p.dir != Dir::Input {
            return Err(TestbenchError::NotAnInput {
                name: p.name.clone(),
            });
        }
        self.check_words(port, words.len())?;
        if p.width <= 64 {
            return self.write(port, words[0]);
        }
        let top = p.width % 64;
        if top != 0 && words[words.len() - 1] >> top != 0 {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: format!("{words:x?}"),
            });
        }
        let base = self.addrs[port.0].cast::<u32>();
        for k in 0..p.words32() {
            let w = (words[k / 2] >> (32 * (k % 2))) as u32;
            // SAFETY: a port wider than 64 bits is `words32()` 32-bit words (VlWide).
            unsafe { base.add(k).write(w) };
        }
        self.dirty = true;
        Ok(())
    }

    /// Reads a port of any width as 64-bit words, least significant first.
    pub fn read_words(&mut self, port: impl IntoPort) -> Result<Vec<u64>, TestbenchError> {
        let port = port.port_in(self)?;
        let p = self.ports[port.0].clone();
        if p.width <= 64 {
            return Ok(vec![self.read(port)?]);
        }
        self.settle();
        let base = self.addrs[port.0].cast::<u32>();
        let mut out = vec![0u64; p.width.div_ceil(64)];
        for k in 0..p.words32() {
            // SAFETY: as in `write_words`.
            let w = u64::from(unsafe { base.add(k).read() });
            out[k / 2] |= w << (32 * (k % 2));
        }
        if !p.width.is_multiple_of(64) {
            let last = out.len() - 1;
            out[last] &= (1u64 << (p.width % 64)) - 1;
        }
        Ok(out)
    }

    /// One clock cycle: the logic settles with the clock low, then the rising edge (and the
    /// falling one). A block without a clock input only advances the cycle count and time.
    pub fn clock(&mut self) {
        self.clock_n(1);
    }

    /// `n` clock cycles with the inputs held.
    pub fn clock_n(&mut self, n: u64) {
        // SAFETY: live model.
        unsafe { (self.clock_fn)(self.state, n) };
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
        match unsafe { (self.trace_open)(self.state, c.as_ptr()) } {
            0 => Ok(()),
            2 => Err(TestbenchError::TraceNotBuilt),
            _ => Err(TestbenchError::TraceOpen(path.into())),
        }
    }

    /// Flushes the open trace to its file.
    pub fn flush_trace(&mut self) {
        // SAFETY: live model; a no-op without a trace.
        unsafe { (self.trace_flush)(self.state) };
    }

    /// Closes the open trace, if any (dropping the testbench does too).
    pub fn close_trace(&mut self) {
        // SAFETY: live model; a no-op without a trace.
        unsafe { (self.trace_close)(self.state) };
    }

    fn settle(&mut self) {
        if self.dirty {
            // SAFETY: live model.
            unsafe { (self.eval)(self.state) };
            self.dirty = false;
        }
    }

    fn narrow(
        &self,
        port: impl IntoPort,
        use_instead: &'static str,
    ) -> Result<(usize, &PortInfo), TestbenchError> {
        let i = port.port_in(self)?.0;
        let p = &self.ports[i];
        if p.width > 64 {
            return Err(TestbenchError::Width {
                name: p.name.clone(),
                width: p.width,
                words: p.width.div_ceil(64),
                use_instead,
            });
        }
        Ok((i, p))
    }

    fn check_words(&self, port: Port, got: usize) -> Result<(), TestbenchError> {
        let p = &self.ports[port.0];
        let want = p.width.div_ceil(64);
        if got != want {
            return Err(TestbenchError::WordCount {
                name: p.name.clone(),
                width: p.width,
                want,
                got,
            });
        }
        Ok(())
    }
}

/// Stores `value` in a port member of Verilator's type for `width` (8, 16, 32 or 64 bits).
unsafe fn store(addr: *mut c_void, width: usize, value: u64) {
    match width {
        0..=8 => addr.cast::<u8>().write(value as u8),
        9..=16 => addr.cast::<u16>().write(value as u16),
        17..=32 => addr.cast::<u32>().write(value as u32),
        _ => addr.cast::<u64>().write(value),
    }
}

/// Loads a port member of Verilator's type for `width`, masked to the width.
unsafe fn load(addr: *const c_void, width: usize) -> u64 {
    let v = match width {
        0..=8 => u64::from(addr.cast::<u8>().read()),
        9..=16 => u64::from(addr.cast::<u16>().read()),
        17..=32 => u64::from(addr.cast::<u32>().read()),
        _ => addr.cast::<u64>().read(),
    };
    if width >= 64 {
        v
    } else {
        v & ((1u64 << width) - 1)
    }
}

impl Drop for Testbench {
    fn drop(&mut self) {
        // SAFETY: the model was created by `tb_new` and is not used after this; the library
        // is dropped after this body.
        unsafe { (self.delete)(self.state) };
    }
}
