//! Compiles systole-sim's fast models through the one Verilator layer (`systole_testbench::layer`,
//! the same Verilation, shim and cache as the run-time testbenches and traced models):
//!
//! - the array of each size in `SYSTOLE_VERILATOR_SIZES` (default `4,8,16`), `top`'s ports
//!   from `systole_hdl::ports`;
//! - the bridge image (UART bridge and the smallest array), its ports walked from its rust-hdl
//!   block;
//! - the SoC image (CPU, RAM, UART and the smallest array) when the CPU is installed, its ports
//!   as Verilator declares them (its `top` is written as text).
//!
//! Each becomes a static archive `lib{prefix}.a` (class `V{prefix}`, functions `{prefix}_*`),
//! cached in `<target>/systole-testbench/` by the hash of its Verilog, so a rebuild (debug,
//! release, another feature set) only copies it; two models build at once, as the machine
//! has cores. Writes `OUT_DIR/models.rs`: each model's `Linked` table for
//! `Testbench::linked`.
//!
//! The models are built without tracing: it makes Verilator keep every traced signal as a
//! variable and mark trace activity on each eval, which cost about 25% of the simulation speed
//! even with no trace open. A traced model is Verilated at run time only when a trace is asked
//! for (`src/trace.rs`), from the same definitions (`build/images.rs`).
//!
//! Without `verilator` or a C++ compiler the build still succeeds: it sets
//! `cfg(systole_no_verilator)` and the crate reports `SimError::NotBuilt` at run time.

#[path = "build/images.rs"]
mod images;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use systole_core::ArrayConfig;
use systole_testbench::layer::{self, Ports};

const INSTALL: &str = "install with: apt-get install verilator g++ make (./x does this)";

/// One model to compile.
struct Job {
    /// `prefix` of its archive and functions.
    prefix: String,
    verilog: String,
    /// `None`: the ports Verilator declares (the SoC).
    ports: Option<Vec<systole_testbench::PortInfo>>,
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/images.rs");
    println!("cargo::rerun-if-env-changed=SYSTOLE_VERILATOR_SIZES");
    println!("cargo::rustc-check-cfg=cfg(systole_no_verilator)");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let sizes = parse_sizes();
    if let Err(why) = tools() {
        println!("cargo::warning=systole-sim: {why}; the Verilator backend is disabled: {INSTALL}");
        println!("cargo::rustc-cfg=systole_no_verilator");
        no_firmware(&out, "Verilator is not installed");
        write_models(&out, &[], &[], None, Err(why));
        return;
    }
    // The firmware's nested cargo build runs before any C++ is compiled here (after C++
    // compiler probes in this process it once failed to start).
    let cpu = systole_hdl::soc::vexriscv_verilog();
    if cpu.is_ok() {
        write_firmware(&out);
    }
    let mut jobs = Vec::new();
    for &n in &sizes {
        let (verilog, ports) = images::array(&ArrayConfig::square(n))
            .unwrap_or_else(|e| panic!("systole-hdl could not generate the {n}x{n} array: {e}"));
        jobs.push(Job {
            prefix: format!("systole_sa{n}"),
            verilog,
            ports: Some(ports),
        });
    }
    // The bridge and SoC images carry the smallest array built.
    let image_size = sizes.iter().copied().min();
    if let Some(n) = image_size {
        let (verilog, ports) =
            images::bridge(n, systole_core::numeric::WORD_BITS).unwrap_or_else(|e| {
                panic!("systole-hdl could not generate the {n}x{n} bridge top: {e}")
            });
        jobs.push(Job {
            prefix: "systole_bridge".into(),
            verilog,
            ports: Some(ports),
        });
    }
    let soc = match (image_size, &cpu) {
        (Some(n), Ok(cpu)) => {
            println!("cargo::rerun-if-changed={}", cpu.display());
            let verilog =
                images::soc(n, systole_core::numeric::WORD_BITS).unwrap_or_else(|e| panic!("{e}"));
            jobs.push(Job {
                prefix: "systole_soc".into(),
                verilog,
                ports: None,
            });
            Ok(n)
        }
        (None, _) => Err("no array size was built".to_string()),
        (_, Err(e)) => {
            println!("cargo::warning=systole-sim: no SoC model: {e}");
            Err(e.to_string())
        }
    };
    let tables = compile_all(&out, &jobs);
    println!("cargo::rustc-link-search=native={}", out.display());
    for job in &jobs {
        println!("cargo::rustc-link-lib=static={}", job.prefix);
    }
    let runtime = layer::runtime_archive(&cache_dir(&out))
        .unwrap_or_else(|e| panic!("Verilator's runtime: {e}"));
    copy(&runtime, &out.join("libsystole_verilated.a"));
    println!("cargo::rustc-link-lib=static=systole_verilated");
    println!("cargo::rustc-link-lib=dylib=stdc++");
    if cpu.is_err() || soc.is_err() {
        no_firmware(&out, "the SoC model is not built");
    }
    write_models(&out, &sizes, &tables, image_size, soc);
}

/// Where the models are cached: `<target>/systole-testbench/`, shared by every build of this
/// crate and by the run-time testbenches (`OUT_DIR` itself when it is not under a target).
fn cache_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .nth(4)
        .filter(|t| t.join("CACHEDIR.TAG").is_file())
        .map_or_else(|| out.join("models"), |t| t.join("systole-testbench"))
}

/// Builds every job (largest first, two at a time, one compiler each: Verilator itself is
/// single-threaded), copies each archive into `OUT_DIR` and returns each model's Rust table.
fn compile_all(out: &Path, jobs: &[Job]) -> Vec<String> {
    let cache = cache_dir(out);
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs[i].verilog.len()));
    let queue = Mutex::new(order);
    let tables: Mutex<Vec<Option<String>>> = Mutex::new(vec![None; jobs.len()]);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some(i) = queue.lock().unwrap().pop_first() else {
                    return;
                };
                let job = &jobs[i];
                let ports = match &job.ports {
                    Some(list) => Ports::Given(list),
                    None => Ports::Declared {
                        clock: images::CLOCK,
                    },
                };
                let a = layer::build_archive(&cache, &job.prefix, &job.verilog, ports, 1)
                    .unwrap_or_else(|e| panic!("model {}: {e}", job.prefix));
                copy(&a.library, &out.join(format!("lib{}.a", job.prefix)));
                let name = job.prefix.to_uppercase();
                tables.lock().unwrap()[i] = Some(layer::rust_table(&job.prefix, &name, &a.ports));
            });
        }
    });
    tables
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|t| t.expect("every job ran"))
        .collect()
}

/// `Vec::pop` from the front, for the queue above.
trait PopFirst {
    fn pop_first(&mut self) -> Option<usize>;
}

impl PopFirst for Vec<usize> {
    fn pop_first(&mut self) -> Option<usize> {
        (!self.is_empty()).then(|| self.remove(0))
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
}

/// `OUT_DIR/firmware.rs` without images (`why` says what is missing).
fn no_firmware(out: &Path, why: &str) {
    let text = format!(
        "pub static SOC_FIRMWARE: Result<&[u8], &str> = Err({why:?});\n\
         pub static SOC_PANIC_FIRMWARE: Result<&[u8], &str> = Err({why:?});\n"
    );
    std::fs::write(out.join("firmware.rs"), text).expect("write firmware.rs");
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

/// Checks that Verilator, `make` and a C++ compiler run.
fn tools() -> Result<(), String> {
    use std::process::Command;
    let runs = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    for tool in ["verilator", "make", cxx.as_str()] {
        if !runs(tool) {
            return Err(format!("`{tool}` does not run"));
        }
    }
    Ok(())
}

/// `OUT_DIR/models.rs`: the tables of `tables` (one per job: the sizes, then the bridge image,
/// then the SoC), `MODELS`, `BRIDGE_IMAGE` and `SOC`.
fn write_models(
    out: &Path,
    sizes: &[usize],
    tables: &[String],
    image_size: Option<usize>,
    soc: Result<usize, String>,
) {
    use images::{BRIDGE_BAUD, BRIDGE_CLOCK_HZ, SOC_BAUD, SOC_CLOCK_HZ};
    let mut text = String::from("// Generated by build.rs: the models linked into this build.\n");
    for t in tables {
        text.push_str(t);
    }
    let entries: Vec<String> = sizes
        .iter()
        .map(|n| format!("({n}, &SYSTOLE_SA{n})"))
        .collect();
    let bridge = match image_size {
        Some(n) => format!(
            "Some(ImageModel {{ size: {n}, clock_hz: {BRIDGE_CLOCK_HZ}, baud: {BRIDGE_BAUD}, linked: &SYSTOLE_BRIDGE, loader: None }})"
        ),
        None => "None".into(),
    };
    let soc = match soc {
        Ok(n) => format!(
            "Ok(ImageModel {{ size: {n}, clock_hz: {SOC_CLOCK_HZ}, baud: {SOC_BAUD}, linked: &SYSTOLE_SOC, loader: Some(Loader {{ ram_bytes: {} }}) }})",
            systole_core::soc::SIM_RAM_BYTES
        ),
        Err(why) => format!("Err({why:?})"),
    };
    text.push_str(&format!(
        "/// The array models, by size.\npub static MODELS: &[(usize, &systole_testbench::layer::Linked)] = &[{}];\n\
         /// The bridge image's model, when one was built.\npub static BRIDGE_IMAGE: Option<ImageModel> = {bridge};\n\
         /// The SoC image's model, or why this build has none.\npub static SOC: Result<ImageModel, &str> = {soc};\n",
        entries.join(", ")
    ));
    std::fs::write(out.join("models.rs"), text).expect("write models.rs");
}
