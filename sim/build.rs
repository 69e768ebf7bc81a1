//! systole-sim's own verilator-sys layer.
//!
//! For each array size in `SYSTOLE_VERILATOR_SIZES` (default `4,8,16`): generate the Verilog
//! with `systole_hdl::generate_verilog(&ArrayConfig::square(n))`, Verilate it with its own
//! `--prefix Vsa{n}` (so every size links into one binary), write a C++ shim whose `extern "C"`
//! functions move a whole clock beat per call, and compile it all with `cc` at `-O2` (even in
//! debug builds: the model is the hot loop). Writes `OUT_DIR/models.rs`, the table of compiled
//! models that `src/ffi.rs` includes.
//!
//! The models are built without `--trace`: it makes Verilator keep every traced signal as a
//! variable and mark trace activity on each eval, which cost about 25% of the simulation speed
//! even with no trace open. A traced model is Verilated at run time only when a trace is asked
//! for (`src/trace.rs`, through `systole-testbench`). The shim's port list comes from
//! `systole_hdl::ports`, the definition the Verilog's `top` is written from.
//!
//! Without `verilator` or a C++ compiler the build still succeeds: it sets
//! `cfg(systole_no_verilator)` and the crate reports `SimError::NotBuilt` at run time.

#[path = "build/ports.rs"]
mod ports;

use std::path::{Path, PathBuf};
use std::process::Command;
use systole_core::ArrayConfig;

const INSTALL: &str = "install with: apt-get install verilator g++ (./x does this)";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/ports.rs");
    println!("cargo::rerun-if-env-changed=SYSTOLE_VERILATOR_SIZES");
    println!("cargo::rustc-check-cfg=cfg(systole_no_verilator)");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let sizes = parse_sizes();
    let models: Vec<Model> = sizes.iter().map(|&size| Model { size }).collect();

    let root = match tools() {
        Ok(root) => root,
        Err(why) => {
            println!(
                "cargo::warning=systole-sim: {why}; the Verilator backend is disabled: {INSTALL}"
            );
            println!("cargo::rustc-cfg=systole_no_verilator");
            no_firmware(&out, "Verilator is not installed");
            write_models(&out, &[], None, Err(why));
            return;
        }
    };
    // The firmware's nested cargo build runs before any C++ is compiled here: after the `cc`
    // crate's compiler probes in this process it failed to start (rustc read a compiler's
    // error text as its input).
    let has_cpu = systole_hdl::soc::vexriscv_verilog().is_ok();
    if has_cpu {
        write_firmware(&out);
    }
    let include = root.join("include");
    for &n in &sizes {
        let verilog = systole_hdl::generate_verilog(&ArrayConfig::square(n))
            .unwrap_or_else(|e| panic!("systole-hdl could not generate the {n}x{n} array: {e}"));
        build_model(&out, &include, &Model { size: n }, &verilog);
    }
    build_runtime(&out, &include);
    for m in &models {
        println!("cargo::rustc-link-lib=static=systole_{}", m.name());
    }
    // The board image (UART bridge and the array) of the smallest size built, for the host's
    // bridge backend to be tested end to end through the serial pins.
    let board = sizes.iter().copied().min();
    if let Some(n) = board {
        build_board(&out, &include, n);
        println!("cargo::rustc-link-lib=static=systole_board");
    }
    // The SoC image (CPU, UART, RAM and the smallest array built), when the CPU is installed.
    let soc = match (board, systole_hdl::soc::vexriscv_verilog()) {
        (Some(n), Ok(cpu)) => {
            println!("cargo::rerun-if-changed={}", cpu.display());
            build_soc(&out, &include, n, &cpu);
            println!("cargo::rustc-link-lib=static=systole_soc");
            Ok(n)
        }
        (None, _) => Err("no array size was built".to_string()),
        (_, Err(e)) => {
            println!("cargo::warning=systole-sim: no SoC model: {e}");
            Err(e.to_string())
        }
    };
    println!("cargo::rustc-link-lib=static=systole_verilated");
    println!("cargo::rustc-link-search=native={}", out.display());
    println!("cargo::rustc-link-lib=dylib=stdc++");
    if !has_cpu || soc.is_err() {
        no_firmware(&out, "the SoC model is not built");
    }
    write_models(&out, &models, board, soc);
}

/// `OUT_DIR/firmware.rs` without images (`why` says what is missing).
fn no_firmware(out: &Path, why: &str) {
    let text = format!(
        "pub static SOC_FIRMWARE: Result<&[u8], &str> = Err({why:?});\n\
         pub static SOC_PANIC_FIRMWARE: Result<&[u8], &str> = Err({why:?});\n"
    );
    std::fs::write(out.join("firmware.rs"), text).expect("write firmware.rs");
}

/// Oscillator and baud rate of the simulated board image: 8 clocks per UART bit, as fast as
/// the bridge's receiver allows with margin.
pub const BOARD_CLOCK_HZ: u32 = 8_000_000;
/// See [`BOARD_CLOCK_HZ`].
pub const BOARD_BAUD: u32 = 1_000_000;
/// Feature-map words of the board image's conv unit (as `systole bitstream --fm-depth 4096`).
pub const BOARD_FM_DEPTH: usize = 4096;

/// Verilates the board top (`systole_hdl::board_top`) of an `n x n` array with a conv unit of
/// [`BOARD_FM_DEPTH`] words as `Vboard` with a
/// shim that runs whole UART bit times, and compiles it into `libsystole_board.a`.
fn build_board(out: &Path, include: &Path, n: usize) {
    use systole_hdl::board_top::{generate_board_verilog_with, BoardTopOptions};
    let opts = BoardTopOptions {
        clock_hz: BOARD_CLOCK_HZ,
        baud: BOARD_BAUD,
        reset_active_low: true,
        led_active_low: false,
        halve_clock: false,
        fm_depth: BOARD_FM_DEPTH,
    };
    let verilog = generate_board_verilog_with(&ArrayConfig::square(n), &opts)
        .unwrap_or_else(|e| panic!("systole-hdl could not generate the {n}x{n} board top: {e}"));
    let key = format!(
        "{verilog}\n// board {n} {} {:x}",
        tool_version(),
        script_hash()
    );
    cached(out, "systole_board", &key, || {
        let dir = out.join("board");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create board model dir");
        std::fs::write(dir.join("board.v"), &verilog).expect("write board Verilog");
        let o = verilator_cc("Vboard", &dir, &dir.join("board.v"))
            .output()
            .expect("run verilator");
        if !o.status.success() {
            panic!(
                "verilator failed on the generated {n}x{n} board top ({}):\n{}",
                dir.join("board.v").display(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let shim = dir.join("shim_board.cpp");
        std::fs::write(&shim, ports::board_shim_cpp()).expect("write board shim");
        let mut b = cxx_build(include);
        b.include(&dir).file(&shim);
        for f in classes(&dir, "board") {
            b.file(f);
        }
        b.compile("systole_board");
    });
}

/// Clock of the simulated SoC image: 16 clocks per UART bit, so the CPU has 160 clocks per
/// received byte.
pub const SOC_CLOCK_HZ: u32 = 16_000_000;
/// Baud rate of the simulated SoC image.
pub const SOC_BAUD: u32 = 1_000_000;

/// The SoC build of the simulation: the default RAM, the board image's conv unit, and the
/// backdoor loader.
fn soc_options() -> systole_hdl::soc::SocOptions {
    systole_hdl::soc::SocOptions {
        clock_hz: SOC_CLOCK_HZ,
        baud: SOC_BAUD,
        reset_active_low: true,
        led_active_low: false,
        ram_bytes: systole_core::soc::DEFAULT_RAM_BYTES,
        fm_depth: BOARD_FM_DEPTH,
        ram_init: None,
        backdoor: true,
    }
}

/// Verilates the SoC (`systole_hdl::soc`, CPU from `cpu`) of an `n x n` array as `Vsoc` with
/// the serial-pin shim and the RAM loader, into `libsystole_soc.a`.
fn build_soc(out: &Path, include: &Path, n: usize, cpu: &Path) {
    let verilog = systole_hdl::soc::generate_soc_verilog(&ArrayConfig::square(n), &soc_options())
        .unwrap_or_else(|e| panic!("systole-hdl could not generate the {n}x{n} SoC: {e}"));
    let cpu_text = std::fs::read_to_string(cpu)
        .unwrap_or_else(|e| panic!("cannot read the SoC's CPU {}: {e}", cpu.display()));
    let key = format!(
        "{verilog}\n{cpu_text}\n// soc {n} {} {:x}",
        tool_version(),
        script_hash()
    );
    cached(out, "systole_soc", &key, || {
        let dir = out.join("soc");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create SoC model dir");
        std::fs::write(dir.join("soc.v"), &verilog).expect("write SoC Verilog");
        let o = verilator_cc("Vsoc", &dir, &dir.join("soc.v"))
            .arg(cpu)
            .output()
            .expect("run verilator");
        if !o.status.success() {
            panic!(
                "verilator failed on the generated {n}x{n} SoC ({}):\n{}",
                dir.join("soc.v").display(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let shim = dir.join("shim_soc.cpp");
        std::fs::write(&shim, ports::soc_shim_cpp()).expect("write SoC shim");
        let mut b = cxx_build(include);
        b.include(&dir).file(&shim);
        for f in classes(&dir, "soc") {
            b.file(f);
        }
        b.compile("systole_soc");
    });
}

/// Builds the SoC's firmware image and its panic-test variant (`systole_soc_image`) and
/// writes `OUT_DIR/firmware.rs`: `SOC_FIRMWARE` and `SOC_PANIC_FIRMWARE`, each the image's
/// bytes or why there is none (a missing Rust target leaves the SoC model usable with other
/// programs).
fn write_firmware(out: &Path) {
    for path in systole_soc_image::source_paths() {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let mut text = String::from("// Generated by build.rs: the SoC firmware images.\n");
    for (name, features) in [
        ("SOC_FIRMWARE", &[][..]),
        ("SOC_PANIC_FIRMWARE", &["panic-test"][..]),
    ] {
        let value = match systole_soc_image::build(features) {
            Ok(image) => {
                if features.is_empty() {
                    println!("cargo::warning=SoC firmware: {}", image.budget);
                }
                let bin = out.join(format!("{}.bin", name.to_lowercase()));
                std::fs::write(&bin, &image.bytes).expect("write the firmware image");
                format!("Ok(include_bytes!({:?}))", bin.display().to_string())
            }
            Err(e) => {
                println!("cargo::warning=systole-sim: no SoC firmware image: {e}");
                format!("Err({:?})", e.to_string())
            }
        };
        text.push_str(&format!(
            "pub static {name}: Result<&[u8], &str> = {value};\n"
        ));
    }
    std::fs::write(out.join("firmware.rs"), text).expect("write firmware.rs");
}

/// The Verilated build of one array size.
struct Model {
    size: usize,
}

impl Model {
    /// `sa{n}`: the suffix of the C++ class (`Vsa{n}`), shim functions and library.
    fn name(&self) -> String {
        format!("sa{}", self.size)
    }
}

fn parse_sizes() -> Vec<usize> {
    let spec = std::env::var("SYSTOLE_VERILATOR_SIZES").unwrap_or_else(|_| "4,8,16".into());
    let mut sizes = Vec::new();
    for s in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let n: usize = s.parse().unwrap_or_else(|_| {
            panic!("SYSTOLE_VERILATOR_SIZES={spec:?}: '{s}' is not an array size (e.g. 4,8,16)")
        });
        if let Err(e) = ArrayConfig::square(n).validate() {
            panic!("SYSTOLE_VERILATOR_SIZES={spec:?}: {e}");
        }
        if !sizes.contains(&n) {
            sizes.push(n);
        }
    }
    sizes
}

/// Finds Verilator's root and checks a C++ compiler runs.
fn tools() -> Result<PathBuf, String> {
    let o = Command::new("verilator")
        .args(["--getenv", "VERILATOR_ROOT"])
        .output()
        .map_err(|e| format!("verilator not found ({e})"))?;
    if !o.status.success() {
        return Err("`verilator --getenv VERILATOR_ROOT` failed".into());
    }
    let root = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    if !root.join("include/verilated.cpp").exists() {
        return Err(format!(
            "Verilator's runtime is missing under {}",
            root.display()
        ));
    }
    let cxx = cc::Build::new()
        .cpp(true)
        .cargo_metadata(false)
        .try_get_compiler();
    let cxx = cxx.map_err(|e| format!("no C++ compiler ({e})"))?;
    let ok = Command::new(cxx.path()).arg("--version").output();
    if !ok.is_ok_and(|o| o.status.success()) {
        return Err(format!(
            "C++ compiler {} does not run",
            cxx.path().display()
        ));
    }
    Ok(root)
}

fn cxx_build(include: &Path) -> cc::Build {
    let mut b = cc::Build::new();
    b.cpp(true)
        .cargo_metadata(false)
        .opt_level(2)
        .debug(false)
        .warnings(false)
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-faligned-new")
        .flag_if_supported("-fno-var-tracking")
        .include(include)
        .include(include.join("vltstd"))
        .define("VM_COVERAGE", "0")
        .define("VM_SC", "0")
        .define("VM_TRACE", "0")
        .define("VM_TRACE_VCD", "0")
        .define("VM_TRACE_FST", "0");
    b
}

/// Verilates and compiles one model unless the same Verilog was built before.
fn build_model(out: &Path, include: &Path, m: &Model, verilog: &str) {
    let name = m.name();
    // The key covers this script and the tools too, so a change in how models are built
    // rebuilds them.
    let key = format!(
        "{verilog}\n// {name} {} {:x}",
        tool_version(),
        script_hash()
    );
    cached(out, &format!("systole_{name}"), &key, || {
        verilate(include, &out.join(&name), m, verilog)
    });
}

/// Verilates one model and compiles it and its shim into `libsystole_{name}.a`.
fn verilate(include: &Path, dir: &Path, m: &Model, verilog: &str) {
    let (n, name) = (m.size, m.name());
    // Verilator leaves files of an earlier run in its --Mdir; start clean.
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create model dir");
    let ports = ports::TopPorts::of(&ArrayConfig::square(n))
        .unwrap_or_else(|e| panic!("{n}x{n} array: {e}"));
    std::fs::write(dir.join("src.v"), verilog).expect("write Verilog");
    let o = verilator_cc(&format!("V{name}"), dir, &dir.join("src.v"))
        .output()
        .expect("run verilator");
    if !o.status.success() {
        panic!(
            "verilator failed on the generated {n}x{n} Verilog ({}):\n{}",
            dir.join("src.v").display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let shim = dir.join(format!("shim_{name}.cpp"));
    // Verilator 5 keeps the clock's last value for edge detection in the root class; when it
    // is there under the expected name the shim can skip the falling-edge eval.
    let root_h =
        std::fs::read_to_string(dir.join(format!("V{name}___024root.h"))).unwrap_or_default();
    let prev = format!("__Vtrigrprev__TOP__{}", ports.clock_member());
    let prev = root_h
        .contains(&format!(" {prev};"))
        .then_some(prev.as_str());
    std::fs::write(&shim, ports::shim_cpp(&name, &ports, prev)).expect("write shim");
    let mut b = cxx_build(include);
    b.include(dir).file(&shim);
    for f in classes(dir, &name) {
        b.file(f);
    }
    b.compile(&format!("systole_{name}"));
}

/// `verilator --cc` of `src` (module `top`) into `dir` as class `prefix`, with the options every
/// model is built with.
fn verilator_cc(prefix: &str, dir: &Path, src: &Path) -> Command {
    let mut cmd = Command::new("verilator");
    cmd.args(["--cc", "-O3", "--x-assign", "fast", "--x-initial", "fast"])
        .args(["-Wno-fatal", "-Wno-lint", "-Wno-style"])
        .args(["--top-module", "top", "--prefix", prefix, "--Mdir"])
        .arg(dir)
        .arg(src);
    cmd
}

/// The model's C++ files (module and support classes) listed in Verilator's `V*_classes.mk`.
fn classes(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mk = std::fs::read_to_string(dir.join(format!("V{name}_classes.mk")))
        .expect("Verilator wrote no _classes.mk");
    let mut files = Vec::new();
    let mut in_list = false;
    for line in mk.lines() {
        let l = line.trim();
        if ["VM_CLASSES_", "VM_SUPPORT_"]
            .iter()
            .any(|p| l.starts_with(p))
            && l.ends_with("+= \\")
        {
            in_list = true;
            continue;
        }
        if in_list {
            let name = l.trim_end_matches('\\').trim();
            if !name.is_empty() {
                files.push(dir.join(format!("{name}.cpp")));
            }
            in_list = l.ends_with('\\');
        }
    }
    assert!(!files.is_empty(), "no model classes in V{name}_classes.mk");
    files
}

/// Verilator's runtime, shared by every model.
fn build_runtime(out: &Path, include: &Path) {
    let key = format!("runtime {} {:x}", tool_version(), script_hash());
    cached(out, "systole_verilated", &key, || {
        let mut b = cxx_build(include);
        b.file(include.join("verilated.cpp"))
            .file(include.join("verilated_threads.cpp"));
        b.compile("systole_verilated");
    });
}

/// Provides `OUT_DIR/lib{name}.a`, reusing a copy compiled from the same `key` by another build
/// of this crate: debug, release and each feature set have their own `OUT_DIR` but share
/// `<target>/systole-verilator/`, so the heavy C++ is compiled once.
fn cached(out: &Path, name: &str, key: &str, build: impl FnOnce()) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    let lib = out.join(format!("lib{name}.a"));
    let shared = out.ancestors().nth(4).map(|target| {
        target
            .join("systole-verilator")
            .join(format!("{name}-{:016x}.a", h.finish()))
    });
    if let Some(s) = &shared {
        if s.exists() && std::fs::copy(s, &lib).is_ok() {
            return;
        }
    }
    build();
    if let Some(s) = shared {
        // Copy then rename, so a concurrent build never links a half-written file.
        let tmp = s.with_extension(format!("tmp{}", std::process::id()));
        let stored = s
            .parent()
            .map(std::fs::create_dir_all)
            .is_some_and(|r| r.is_ok())
            && std::fs::copy(&lib, &tmp).is_ok()
            && std::fs::rename(&tmp, &s).is_ok();
        if !stored {
            let _ = std::fs::remove_file(&tmp);
        } else if let Some(dir) = s.parent() {
            // Older builds of the same library (an earlier HDL) are dead weight: drop them.
            let prefix = format!("{name}-");
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let f = e.file_name().to_string_lossy().into_owned();
                if f.starts_with(&prefix) && f.ends_with(".a") && e.path() != s {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// Verilator's version line (part of the cache key).
fn tool_version() -> String {
    Command::new("verilator")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// A hash of the build script's own sources.
fn script_hash() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    include_str!("build.rs").hash(&mut h);
    include_str!("build/ports.rs").hash(&mut h);
    h.finish()
}

fn write_models(out: &Path, models: &[Model], board: Option<usize>, soc: Result<usize, String>) {
    let mut decls = String::new();
    let mut entries = String::new();
    for m in models {
        let (d, e) = ports::rust_entry(&m.name(), m.size);
        decls.push_str(&d);
        entries.push_str(&e);
    }
    let board = match board {
        Some(n) => {
            decls.push_str(&ports::board_rust_decls());
            format!("Some(BoardFns {{ size: {n}, clock_hz: {BOARD_CLOCK_HZ}, baud: {BOARD_BAUD}, new: systole_board_new, delete: systole_board_delete, run: systole_board_run, load: None }})")
        }
        None => "None".into(),
    };
    let soc = match soc {
        Ok(n) => {
            decls.push_str(&ports::soc_rust_decls());
            format!(
                "Ok(BoardFns {{ size: {n}, clock_hz: {SOC_CLOCK_HZ}, baud: {SOC_BAUD}, new: systole_soc_new, delete: systole_soc_delete, run: systole_soc_run, load: Some(Loader {{ ram_bytes: {}, fm_depth: {BOARD_FM_DEPTH}, load: systole_soc_load }}) }})",
                systole_core::soc::DEFAULT_RAM_BYTES
            )
        }
        Err(why) => format!("Err({why:?})"),
    };
    let text = format!(
        "// Generated by build.rs: the Verilated models compiled into this build.\n{decls}\n\
         /// One entry per compiled model (one per size).\npub static MODELS: &[ModelFns] = &[\n{entries}];\n\
         /// The board image's model, when one was built.\npub static BOARD: Option<BoardFns> = {board};\n\
         /// The SoC image's model, or why this build has none.\npub static SOC: Result<BoardFns, &str> = {soc};\n"
    );
    std::fs::write(out.join("models.rs"), text).expect("write models.rs");
}
