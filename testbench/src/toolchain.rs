//! The C++ side of a model: Verilator's include folder, the compiler and its flags, and
//! Verilator's runtime library, compiled once per Verilator version and trace format.

use crate::cache::{fnv1a, key_lock};
use crate::{TestbenchError, TraceFormat};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Verilator's C++ headers and runtime sources.
pub(crate) fn include_dir() -> Result<PathBuf, TestbenchError> {
    let root = Command::new("verilator")
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .map_err(|cause| TestbenchError::VerilatorMissing { cause })?;
    Ok(PathBuf::from(String::from_utf8_lossy(&root.stdout).trim()).join("include"))
}

/// The C++ compiler: `CXX`, else `c++`.
pub(crate) fn cxx_name() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

/// A compiler command with the flags every part of a model is built with: position
/// independent, hidden symbols, and the trace defines Verilator's headers expect.
pub(crate) fn cxx(include: &Path, trace: Option<TraceFormat>) -> Command {
    let defs = match trace {
        Some(TraceFormat::Vcd) => ["-DVM_TRACE=1", "-DVM_TRACE_VCD=1", "-DVM_TRACE_FST=0"],
        Some(TraceFormat::Fst) => ["-DVM_TRACE=1", "-DVM_TRACE_VCD=0", "-DVM_TRACE_FST=1"],
        None => ["-DVM_TRACE=0", "-DVM_TRACE_VCD=0", "-DVM_TRACE_FST=0"],
    };
    let mut c = Command::new(cxx_name());
    c.args([
        "-O2",
        "-fPIC",
        "-fvisibility=hidden",
        "-std=c++17",
        "-faligned-new",
    ])
    .args(["-DVM_COVERAGE=0", "-DVM_SC=0"])
    .args(defs)
    .arg(format!("-I{}", include.display()))
    .arg(format!("-I{}", include.join("vltstd").display()));
    c
}

/// Verilator's runtime (`verilated.cpp`, its threads and the trace writer) as one archive,
/// compiled once per Verilator version and trace format and shared by every model: it is
/// most of a small block's compile time.
pub(crate) fn runtime(
    cache: &Path,
    include: &Path,
    trace: Option<TraceFormat>,
) -> Result<PathBuf, TestbenchError> {
    let version = verilator_version()?;
    let flags = format!("{:?}", cxx(include, trace));
    let key = fnv1a(&[&version, &flags, env!("CARGO_PKG_VERSION")]);
    let dir = cache.join(format!("runtime-{key:016x}"));
    let lib = dir.join("libverilated.a");
    let lock = key_lock(key);
    let _one = lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if lib.is_file() {
        return Ok(lib);
    }
    let tmp = cache.join(format!("runtime-{key:016x}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let io = |what: &str| {
        let (what, path) = (what.to_string(), tmp.clone());
        move |cause| TestbenchError::Io { what, path, cause }
    };
    std::fs::create_dir_all(&tmp).map_err(io("creating the runtime's build folder"))?;
    let mut sources = vec!["verilated.cpp", "verilated_threads.cpp"];
    match trace {
        Some(TraceFormat::Vcd) => sources.push("verilated_vcd_c.cpp"),
        Some(TraceFormat::Fst) => sources.push("verilated_fst_c.cpp"),
        None => {}
    }
    // One compiler per source, all at once: they are independent.
    let mut children = Vec::new();
    for src in &sources {
        let mut c = cxx(include, trace);
        c.current_dir(&tmp)
            .arg("-c")
            .arg(include.join(src))
            .stderr(std::process::Stdio::piped());
        children.push(c.spawn().map_err(io("running the C++ compiler"))?);
    }
    let mut log = String::new();
    let mut ok = true;
    for child in children {
        let o = child
            .wait_with_output()
            .map_err(io("waiting for the C++ compiler"))?;
        ok &= o.status.success();
        log.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    let objects: Vec<String> = sources.iter().map(|s| s.replace(".cpp", ".o")).collect();
    let archived = ok
        && Command::new("ar")
            .current_dir(&tmp)
            .arg("rcs")
            .arg("libverilated.a")
            .args(&objects)
            .status()
            .is_ok_and(|s| s.success());
    if !archived {
        return Err(TestbenchError::Compile { dir: tmp, log });
    }
    // Another process may have finished first: then theirs is used.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(TestbenchError::Io {
            what: "moving Verilator's runtime into the cache".into(),
            path: dir,
            cause: std::io::Error::other("the folder exists without the archive"),
        })
    }
}

/// Verilator's runtime archive for models built with `trace`, from the cache or built now.
pub(crate) fn include_and_runtime(
    cache: &Path,
    trace: Option<TraceFormat>,
) -> Result<PathBuf, TestbenchError> {
    runtime(cache, &include_dir()?, trace)
}
