//! Verilating a block at run time into a shared object, cached by what it is built from.
//!
//! The cache key hashes the Verilog, the shim, the trace format and Verilator's version line,
//! so the same block under the same tools is Verilated once per machine (per target folder):
//! a rerun loads the shared object it left. Each build runs in a folder of its own and is
//! renamed into place when complete, so concurrent test processes never load a half-written
//! library, and a failed build leaves nothing the next run would trust.

use crate::toolchain::{cxx, cxx_name, include_dir, runtime};
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
    pub dir: PathBuf,
    pub cached: bool,
    pub took: Duration,
}

/// FNV-1a, 64 bits: a stable hash (the cache must mean the same across Rust versions).
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Verilator's version line, which also proves it can be started.
pub(crate) fn verilator_version() -> Result<String, TestbenchError> {
    version_of("verilator")
}

/// `program --version`, or [`TestbenchError::VerilatorMissing`] when it cannot be started.
pub(crate) fn version_of(program: &str) -> Result<String, TestbenchError> {
    let o = Command::new(program)
        .arg("--version")
        .output()
        .map_err(|cause| TestbenchError::VerilatorMissing { cause })?;
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The cache key of a model and its folder under `cache`.
fn model_dir(
    cache: &Path,
    verilog: &str,
    shim: &str,
    trace: Option<TraceFormat>,
) -> Result<(u64, PathBuf), TestbenchError> {
    let version = verilator_version()?;
    let trace_name = trace.map_or("none", TraceFormat::name);
    let key = fnv1a(&[
        verilog,
        shim,
        trace_name,
        &version,
        env!("CARGO_PKG_VERSION"),
    ]);
    Ok((key, cache.join(format!("{key:016x}"))))
}

/// Removes the cached model of these inputs, so the next [`build`] Verilates it again.
pub(crate) fn forget(
    cache: &Path,
    verilog: &str,
    shim: &str,
    trace: Option<TraceFormat>,
) -> Result<(), TestbenchError> {
    let (_, dir) = model_dir(cache, verilog, shim, trace)?;
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TestbenchError::Io {
            what: "removing the cached model".into(),
            path: dir,
            cause: e,
        }),
        _ => Ok(()),
    }
}

/// The shared object of `verilog` (module `top`) with `shim`, from the cache or built now.
pub(crate) fn build(
    cache: &Path,
    verilog: &str,
    shim: &str,
    trace: Option<TraceFormat>,
) -> Result<Built, TestbenchError> {
    let start = Instant::now();
    let (key, dir) = model_dir(cache, verilog, shim, trace)?;
    let library = dir.join("libtb.so");
    if library.is_file() {
        return Ok(Built {
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
    let result = compile(cache, &tmp, verilog, shim, trace);
    if let Err(e) = result {
        // Keep the failed build for inspection only when it says something (a log).
        if !matches!(
            e,
            TestbenchError::Verilate { .. } | TestbenchError::Compile { .. }
        ) {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        return Err(e);
    }
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
        dir,
        cached: false,
        took: start.elapsed(),
    })
}

/// Verilates `verilog` in `dir` with Verilator's own make flow (its runtime included), then
/// links the shim and both archives into `libtb.so`.
fn compile(
    cache: &Path,
    dir: &Path,
    verilog: &str,
    shim: &str,
    trace: Option<TraceFormat>,
) -> Result<(), TestbenchError> {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|cause| TestbenchError::Io {
            what: format!("writing {name}"),
            path,
            cause,
        })
    };
    write("top.v", verilog)?;
    write("shim.cpp", shim)?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Position-independent and hidden: the library exports only the shim, so two models (or
    // a model and a program linking Verilator itself) never mix their runtimes.
    let cflags = "-fPIC -fvisibility=hidden -std=c++17";
    let mut cmd = Command::new("verilator");
    cmd.current_dir(dir)
        .args(["--cc", "--build", "-j", &jobs.to_string()])
        .args(["-O3", "--x-assign", "fast", "--x-initial", "fast"])
        .args(["-Wno-fatal", "-Wno-lint", "-Wno-style"])
        .args(["--top-module", "top", "--prefix", crate::shim::CLASS])
        .args(["--Mdir", "obj", "-CFLAGS", cflags])
        .args(["-MAKEFLAGS", "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O2"]);
    match trace {
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
    let include = include_dir()?;
    let runtime = runtime(cache, &include, trace)?;
    let class = crate::shim::CLASS;
    let mut link = cxx(&include, trace);
    link.current_dir(dir)
        .args([
            "-shared",
            "-Iobj",
            "shim.cpp",
            &format!("obj/{class}__ALL.a"),
        ])
        .arg(runtime)
        .args(["-Wl,-Bsymbolic", "-pthread", "-o", "libtb.so"]);
    if trace == Some(TraceFormat::Fst) {
        link.arg("-lz");
    }
    let o = link.output().map_err(|cause| TestbenchError::Io {
        what: format!("running the C++ compiler `{}` ({INSTALL})", cxx_name()),
        path: dir.into(),
        cause,
    })?;
    if !o.status.success() {
        return Err(TestbenchError::Compile {
            dir: dir.into(),
            log: String::from_utf8_lossy(&o.stderr).into_owned(),
        });
    }
    Ok(())
}

/// Removes the build folders (`*.tmp-PID`) of processes that no longer run: builds that failed
/// (kept for their log) or were killed. A running process's folder is left alone.
fn remove_abandoned_builds(cache: &Path) {
    for e in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.rsplit_once(".tmp-").map(|(_, pid)| pid.to_string());
        if let Some(pid) = pid.filter(|p| p.parse::<u32>().is_ok()) {
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}
