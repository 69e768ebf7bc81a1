//! Verilating a block at run time into a shared object, cached by what it is built from.
//!
//! The cache key hashes the Verilog, the shim, the trace format and Verilator's version line,
//! so the same block under the same tools is Verilated once per machine (per target folder):
//! a rerun loads the shared object it left. Each build runs in a folder of its own and is
//! renamed into place when complete, so concurrent test processes never load a half-written
//! library, and a failed build leaves nothing the next run would trust.

use crate::cache::{fnv1a, key_lock, remove_abandoned_builds};
use crate::ports::{Dir, PortInfo};
use crate::shim::ShimSpec;
use crate::toolchain::{cxx, cxx_name, include_dir, runtime, verilator_version};
use crate::{TestbenchError, TraceFormat, INSTALL};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the cached models live, unless [`crate::Options::cache_dir`] says otherwise:
/// `SYSTOLE_TESTBENCH_CACHE`, else `systole-testbench/` in the cargo target folder of the
/// running executable (the folder holding cargo's `CACHEDIR.TAG`), else in `CARGO_TARGET_DIR`,
/// else in the system's temporary folder.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SYSTOLE_TESTBENCH_CACHE") {
        return d.into();
    }
    let exe = std::env::current_exe().ok();
    let target = exe
        .as_deref()
        .and_then(|e| e.ancestors().find(|a| a.join("CACHEDIR.TAG").is_file()))
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from));
    target
        .unwrap_or_else(std::env::temp_dir)
        .join("systole-testbench")
}

/// A compiled model on disk.
pub(crate) struct Built {
    pub library: PathBuf,
    /// The model's ports, in the shim's order.
    pub ports: Vec<PortInfo>,
    pub dir: PathBuf,
    pub cached: bool,
    pub took: Duration,
}

/// How a model is packaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Package<'a> {
    /// `libtb.so` with functions `tb_*` and class `Vtb`, loaded at run time.
    Shared,
    /// `lib{prefix}.a` (model and shim) with functions `{prefix}_*` and class `V{prefix}`, for
    /// a build script to link statically beside other models.
    Archive { prefix: &'a str },
}

impl Package<'_> {
    fn names(self) -> (String, String, String) {
        match self {
            Package::Shared => (
                crate::shim::PREFIX.into(),
                crate::shim::CLASS.into(),
                "libtb.so".into(),
            ),
            Package::Archive { prefix } => (
                prefix.into(),
                format!("V{prefix}"),
                format!("lib{prefix}.a"),
            ),
        }
    }
}

/// Where a model's port list comes from.
#[derive(Clone, Copy, Debug)]
pub enum Ports<'a> {
    /// The design's own list (checked against what Verilator compiled).
    Given(&'a [PortInfo]),
    /// As Verilator declares them in the model's class, for Verilog with no list of its own;
    /// the input of this name is the clock.
    Declared {
        /// The clock input's name.
        clock: &'a str,
    },
}

/// What a model is built from.
pub(crate) struct Design<'a> {
    pub verilog: &'a str,
    pub ports: Ports<'a>,
    pub trace: Option<TraceFormat>,
    pub package: Package<'a>,
    /// `make -j` of the model's C++.
    pub jobs: usize,
}

impl Design<'_> {
    /// The shim of `ports`, given the edge-detector member Verilator made for the clock.
    fn shim(&self, ports: &[PortInfo], fall_member: Option<&str>) -> String {
        let (prefix, class, _) = self.package.names();
        crate::shim::shim_cpp(&ShimSpec {
            prefix: &prefix,
            class: &class,
            ports,
            clock: clock_of(ports),
            trace: self.trace,
            fall_member,
        })
    }
}

/// The first clock input: it drives every cycle (a second clock is an ordinary input).
pub(crate) fn clock_of(ports: &[PortInfo]) -> Option<&PortInfo> {
    ports.iter().find(|p| p.clock && p.dir == Dir::Input)
}

/// The root-class member in which Verilator 5 keeps the clock's last value for edge
/// detection, when it is the model's only edge detector and the Verilog names no falling
/// edge: then every process runs on the clock's rising edge, and the falling edge needs no
/// evaluation (a derived clock would have a detector of its own).
fn fall_member(d: &Design<'_>, ports: &[PortInfo], root_header: &str) -> Option<String> {
    let want = format!("__Vtrigrprev__TOP__{}", clock_of(ports)?.cpp());
    let detectors: Vec<&str> = root_header
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("__Vtrigrprev__"))
        .collect();
    let only = detectors.len() == 1 && detectors[0] == want;
    (only && !d.verilog.contains("negedge")).then_some(want)
}

/// The ports Verilator declares in a model's class header (`VL_IN16(&a,15,0);`), in order:
/// `(C++ member name, width, direction)`.
pub(crate) fn declared_ports(header: &str) -> Vec<(String, usize, Dir)> {
    let mut out = Vec::new();
    for line in header.lines() {
        let l = line.trim();
        let Some(rest) = l.strip_prefix("VL_") else {
            continue;
        };
        let dir = if rest.starts_with("INOUT") {
            Dir::InOut
        } else if rest.starts_with("IN") {
            Dir::Input
        } else if rest.starts_with("OUT") {
            Dir::Output
        } else {
            continue;
        };
        let Some(args) = rest
            .split_once("(&")
            .and_then(|(_, a)| a.strip_suffix(");"))
        else {
            continue;
        };
        let f: Vec<&str> = args.split(',').collect();
        let (Some(name), Some(Ok(msb)), Some(Ok(lsb))) = (
            f.first(),
            f.get(1).map(|v| v.parse::<usize>()),
            f.get(2).map(|v| v.parse::<usize>()),
        ) else {
            continue;
        };
        out.push((name.to_string(), msb.saturating_sub(lsb) + 1, dir));
    }
    out
}

/// The port list of the model in `obj` (class `class`): `given`, checked against Verilator's
/// declaration (every port, with its width and direction, and no other), or the declared one.
fn model_ports(obj: &Path, class: &str, ports: Ports<'_>) -> Result<Vec<PortInfo>, TestbenchError> {
    let path = obj.join(format!("{class}.h"));
    let header = std::fs::read_to_string(&path).map_err(|cause| TestbenchError::Io {
        what: "reading the model's class header".into(),
        path: path.clone(),
        cause,
    })?;
    let declared = declared_ports(&header);
    let mismatch = |what: String| TestbenchError::PortList {
        what,
        header: path.clone(),
    };
    match ports {
        Ports::Given(given) => {
            for p in given {
                match declared.iter().find(|d| d.0 == p.cpp()) {
                    None => {
                        return Err(mismatch(format!(
                            "`{}` is not a port of the Verilog's top",
                            p.name
                        )))
                    }
                    Some(d) if d.1 != p.width || d.2 != p.dir => {
                        return Err(mismatch(format!(
                            "`{}` is a {}-bit {:?} in the Verilog, the list says {}-bit {:?}",
                            p.name, d.1, d.2, p.width, p.dir
                        )))
                    }
                    Some(_) => {}
                }
            }
            if let Some(d) = declared
                .iter()
                .find(|d| !given.iter().any(|p| p.cpp() == d.0))
            {
                return Err(mismatch(format!(
                    "the Verilog's top has `{}`, the list does not",
                    d.0
                )));
            }
            Ok(given.to_vec())
        }
        Ports::Declared { clock } => Ok(declared
            .into_iter()
            .map(|(cpp, width, dir)| {
                let name = cpp.replace("__024", "$");
                PortInfo {
                    clock: name == clock && dir == Dir::Input,
                    name,
                    width,
                    dir,
                    signed: false,
                }
            })
            .collect()),
    }
}

/// The cache key of a model and its folder under `cache`. It covers this layer's own sources,
/// so a change in how models are built rebuilds them.
fn model_dir(cache: &Path, d: &Design<'_>) -> Result<(u64, PathBuf), TestbenchError> {
    let version = verilator_version()?;
    let trace_name = d.trace.map_or("none", TraceFormat::name);
    let (_, _, file) = d.package.names();
    let key = fnv1a(&[
        d.verilog,
        &format!("{:?}", d.ports),
        trace_name,
        &file,
        &version,
        env!("CARGO_PKG_VERSION"),
        include_str!("shim.rs"),
        include_str!("verilate.rs"),
        include_str!("toolchain.rs"),
    ]);
    Ok((key, cache.join(format!("{key:016x}"))))
}

/// Removes the cached model of these inputs, so the next [`build`] Verilates it again.
pub(crate) fn forget(cache: &Path, d: &Design<'_>) -> Result<(), TestbenchError> {
    let (_, dir) = model_dir(cache, d)?;
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TestbenchError::Io {
            what: "removing the cached model".into(),
            path: dir,
            cause: e,
        }),
        _ => Ok(()),
    }
}

/// The model of `d` (module `top`) with its shim, from the cache or built now.
pub(crate) fn build(cache: &Path, d: &Design<'_>) -> Result<Built, TestbenchError> {
    let start = Instant::now();
    let (key, dir) = model_dir(cache, d)?;
    let lock = key_lock(key);
    let _one = lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_, class, file) = d.package.names();
    let library = dir.join(file);
    if library.is_file() {
        return Ok(Built {
            ports: model_ports(&dir.join("obj"), &class, d.ports)?,
            library,
            dir,
            cached: true,
            took: start.elapsed(),
        });
    }
    let io = |what: &str, path: &Path| {
        let (what, path) = (what.to_string(), path.to_path_buf());
        move |cause| TestbenchError::Io { what, path, cause }
    };
    std::fs::create_dir_all(cache).map_err(io("creating the model cache", cache))?;
    remove_abandoned_builds(cache);
    let tmp = cache.join(format!("{key:016x}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(io("creating the build folder", &tmp))?;
    let result = compile(cache, &tmp, d);
    if let Err(e) = &result {
        // Keep the failed build for inspection only when it says something (a log).
        if !matches!(
            e,
            TestbenchError::Verilate { .. } | TestbenchError::Compile { .. }
        ) {
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
    let ports = result?;
    // Another process may have finished the same model first: then use theirs.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        if !library.is_file() {
            return Err(TestbenchError::Io {
                what: "moving the built model into the cache".into(),
                path: dir,
                cause: std::io::Error::other("the folder exists without a library"),
            });
        }
    }
    Ok(Built {
        library,
        ports,
        dir,
        cached: false,
        took: start.elapsed(),
    })
}

/// Runs `cmd`; its output as the log, or `fail(log)` when it fails.
fn run(
    cmd: &mut Command,
    what: &str,
    dir: &Path,
    fail: impl FnOnce(String) -> TestbenchError,
) -> Result<String, TestbenchError> {
    let o = cmd.output().map_err(|cause| TestbenchError::Io {
        what: format!("running {what} ({INSTALL})"),
        path: dir.into(),
        cause,
    })?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if o.status.success() {
        Ok(log)
    } else {
        Err(fail(log))
    }
}

/// Verilates `d` in `dir`, compiles the model with Verilator's makefile, then the shim, and
/// packages them: `libtb.so` with Verilator's runtime linked in, or `lib{prefix}.a` (the
/// program links the runtime, [`crate::layer::runtime_archive`], once for all its models).
fn compile(cache: &Path, dir: &Path, d: &Design<'_>) -> Result<Vec<PortInfo>, TestbenchError> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|cause| TestbenchError::Io {
            what: format!("writing {name}"),
            path,
            cause,
        })
    };
    write("top.v", d.verilog)?;
    let (_, class, library) = d.package.names();
    // Position-independent and hidden: a shared object exports only the shim, so two models
    // (or a model and a program linking Verilator itself) never mix their runtimes.
    let cflags = "-fPIC -fvisibility=hidden -std=c++17";
    let mut cmd = Command::new("verilator");
    cmd.current_dir(dir)
        .args(["--cc", "-O3", "--x-assign", "fast", "--x-initial", "fast"])
        .args(["-Wno-fatal", "-Wno-lint", "-Wno-style"])
        .args(["--top-module", "top", "--prefix", &class])
        .args(["--Mdir", "obj", "-CFLAGS", cflags]);
    match d.trace {
        Some(TraceFormat::Vcd) => {
            cmd.arg("--trace");
        }
        Some(TraceFormat::Fst) => {
            cmd.arg("--trace-fst");
        }
        None => {}
    }
    cmd.arg("top.v");
    let o = cmd
        .output()
        .map_err(|cause| TestbenchError::VerilatorMissing { cause })?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::write(dir.join("verilator.log"), &log);
    if !o.status.success() {
        return Err(TestbenchError::Verilate {
            dir: dir.into(),
            log,
        });
    }
    let ports = model_ports(&dir.join("obj"), &class, d.ports)?;
    let root_h =
        std::fs::read_to_string(dir.join(format!("obj/{class}___024root.h"))).unwrap_or_default();
    let fall = fall_member(d, &ports, &root_h);
    write("shim.cpp", &d.shim(&ports, fall.as_deref()))?;
    let compile_error = |log| TestbenchError::Compile {
        dir: dir.into(),
        log,
    };
    let mut make = Command::new("make");
    make.current_dir(dir.join("obj"))
        .args([
            "-f",
            &format!("{class}.mk"),
            "-j",
            &d.jobs.max(1).to_string(),
        ])
        .args(["OPT_FAST=-O2", "OPT_SLOW=-O1", "OPT_GLOBAL=-O2"])
        .arg(format!("{class}__ALL.a"));
    run(&mut make, "make", dir, compile_error)?;
    let include = include_dir()?;
    let mut shim = cxx(&include, d.trace);
    shim.current_dir(dir)
        .args(["-c", "-Iobj", "shim.cpp", "-o", "shim.o"]);
    run(
        &mut shim,
        &format!("the C++ compiler `{}`", cxx_name()),
        dir,
        compile_error,
    )?;
    let all = format!("obj/{class}__ALL.a");
    match d.package {
        Package::Archive { .. } => {
            std::fs::copy(dir.join(&all), dir.join(&library)).map_err(|cause| {
                TestbenchError::Io {
                    what: "copying the model's archive".into(),
                    path: dir.join(&all),
                    cause,
                }
            })?;
            let mut ar = Command::new("ar");
            ar.current_dir(dir).args(["rs", &library, "shim.o"]);
            run(&mut ar, "ar", dir, compile_error)?;
        }
        Package::Shared => {
            let runtime = runtime(cache, &include, d.trace)?;
            let mut link = cxx(&include, d.trace);
            link.current_dir(dir)
                .args(["-shared", "shim.o", &all])
                .arg(runtime)
                .args(["-Wl,-Bsymbolic", "-pthread", "-o", &library]);
            if d.trace == Some(TraceFormat::Fst) {
                link.arg("-lz");
            }
            run(
                &mut link,
                &format!("the C++ compiler `{}`", cxx_name()),
                dir,
                compile_error,
            )?;
        }
    }
    Ok(ports)
}
