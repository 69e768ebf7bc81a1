//! `systole-soc-image`: builds the SoC's firmware image (the `soc-firmware/` crate, for
//! `riscv32imac-unknown-none-elf`) and turns it into what the SoC loads.
//!
//! [`build`] runs `cargo build --release` for the firmware with its own target directory
//! (`target/soc-firmware`, so a call from another crate's build script never waits for the
//! outer cargo's lock), reads the ELF, lays its loadable segments out as the flat RAM image
//! the CPU boots from (byte 0 at `RAM_BASE`), checks that code, data, bss and the stack
//! reserve fit the SoC's RAM ([`Budget`]) and that no instruction is an AMO (the SoC's
//! VexRiscv traps on them), and writes the flat image beside the ELF.
//!
//! From a build script (the SoC simulation's) or at run time (`systole bitstream --soc`):
//!
//! ```no_run
//! let image = systole_soc_image::build(&[]).unwrap_or_else(|e| panic!("{e}"));
//! for path in systole_soc_image::source_paths() {
//!     println!("cargo:rerun-if-changed={}", path.display());
//! }
//! println!("cargo:warning={}", image.budget);
//! let words: Vec<u32> = image.words().collect(); // RAM init, word 0 at RAM_BASE
//! ```

pub mod board_fit;
mod budget;
mod elf;
pub mod step_ram;

pub use budget::Budget;
pub use elf::{flatten, Flat};

use std::path::{Path, PathBuf};
use std::process::Command;

/// The firmware's target triple.
pub const TARGET: &str = "riscv32imac-unknown-none-elf";
/// The firmware's package (and binary) name.
pub const PACKAGE: &str = "systole-soc-firmware";
/// The firmware's feature of the training image: RAM of `TRAINING_RAM_BYTES`, a heap, and the
/// training step.
pub const TRAINING: &str = "training";

/// The RAM an image with `features` is linked for.
pub fn ram_bytes(features: &[&str]) -> u32 {
    if features.contains(&TRAINING) {
        systole_core::soc::TRAINING_RAM_BYTES
    } else {
        systole_core::soc::BASE_RAM_BYTES
    }
}

/// Why the image could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The Rust target is not installed.
    #[error(
        "the Rust target {TARGET} is not installed: rustup target add {TARGET} (./x does this)"
    )]
    TargetMissing,
    /// `cargo` or `rustc` could not be started.
    #[error("could not run {what}")]
    Spawn {
        /// The command.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The firmware did not compile or link; cargo's own messages are in `stderr`.
    #[error("building the SoC firmware failed:\n{stderr}")]
    Cargo {
        /// What cargo printed.
        stderr: String,
    },
    /// Reading or writing an image file.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ELF is not what the SoC can load.
    #[error("{0}")]
    Elf(#[from] elf::ElfError),
    /// The image does not fit the SoC's RAM.
    #[error("the SoC firmware does not fit the SoC's RAM: {0}")]
    TooBig(Budget),
}

/// A built firmware image.
#[derive(Clone, Debug)]
pub struct Image {
    /// The ELF cargo produced.
    pub elf: PathBuf,
    /// The flat image written beside it (`systole-soc-firmware.bin`).
    pub bin: PathBuf,
    /// RAM contents from `RAM_BASE`: what the SoC's RAM is initialised with.
    pub bytes: Vec<u8>,
    /// Where the RAM goes.
    pub budget: Budget,
}

impl Image {
    /// The image as little-endian 32-bit RAM words (the last one zero-padded).
    pub fn words(&self) -> impl Iterator<Item = u32> + '_ {
        self.bytes.chunks(4).map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
    }
}

/// The workspace this crate belongs to.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// The firmware's own target directory: `<target>/soc-firmware`.
pub fn target_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    target.join("soc-firmware")
}

/// Files and folders the image is built from (for `cargo:rerun-if-changed`). The training
/// image also needs `step/`; no build script builds it, so the step's changes do not rerun
/// the SoC simulation's.
pub fn source_paths() -> Vec<PathBuf> {
    let root = workspace_root();
    [
        "soc-firmware/src",
        "soc-firmware/build.rs",
        "soc-firmware/Cargo.toml",
        "soc-firmware/Cargo.lock",
        "firmware/src",
        "firmware/Cargo.toml",
        "core/src",
        "core/Cargo.toml",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect()
}

/// Builds the firmware (with the given cargo `features` of `soc-firmware`), checks it and
/// writes its flat image. A build with features has its own target dir under
/// [`target_dir`] and its image is named after them, so a test image never replaces the real
/// one.
pub fn build(features: &[&str]) -> Result<Image, ImageError> {
    check_target_installed()?;
    let root = workspace_root();
    // Each feature set in its own target dir: builds of two variants never replace each
    // other's ELF between a build and its read, nor rebuild each other.
    let target_dir = match features {
        [] => target_dir(),
        f => target_dir().join(format!("features-{}", f.join("-"))),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root.join("soc-firmware"))
        .args([
            "build",
            "--release",
            "--quiet",
            "--target",
            TARGET,
            "--manifest-path",
        ])
        .arg(root.join("soc-firmware/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    clean_env(&mut cmd);
    cmd.env("CARGO_ENCODED_RUSTFLAGS", remapped_paths(&root));
    // The build never reads input: a caller's stdin (a build script inherits cargo's) must
    // not reach rustc, which reads its target probe from stdin.
    cmd.stdin(std::process::Stdio::null());
    let out = cmd.output().map_err(|source| ImageError::Spawn {
        what: "cargo",
        source,
    })?;
    if !out.status.success() {
        return Err(ImageError::Cargo {
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let elf_path = target_dir.join(TARGET).join("release").join(PACKAGE);
    let data = std::fs::read(&elf_path).map_err(|source| ImageError::File {
        path: elf_path.clone(),
        source,
    })?;
    let flat = flatten(&data, ram_bytes(features))?;
    let budget = flat.budget;
    if !budget.fits() {
        return Err(ImageError::TooBig(budget));
    }
    let name = match features {
        [] => format!("{PACKAGE}.bin"),
        f => format!("{PACKAGE}-{}.bin", f.join("-")),
    };
    let bin = target_dir.join(name);
    std::fs::write(&bin, &flat.bytes).map_err(|source| ImageError::File {
        path: bin.clone(),
        source,
    })?;
    Ok(Image {
        elf: elf_path,
        bin,
        bytes: flat.bytes,
        budget,
    })
}

/// The nested cargo must not inherit the outer build's settings (its target, flags, profile,
/// target dir, the build script's own variables): the firmware has its own.
/// rustc flags that write the checkout's and cargo's own directories as fixed short names into
/// the image (panic locations carry file paths): the image's size, which has only a few hundred
/// bytes to spare, must not depend on where the project was cloned.
fn remapped_paths(root: &Path) -> String {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let mut flags = vec![format!("--remap-path-prefix={}=/systole", root.display())];
    if let Some(home) = cargo_home {
        flags.push(format!("--remap-path-prefix={}=/cargo", home.display()));
    }
    // Cargo's encoded form: flags separated by 0x1f, so paths with spaces stay whole.
    flags.join("\u{1f}")
}

fn clean_env(cmd: &mut Command) {
    const KEEP: [&str; 5] = [
        "CARGO_HOME",
        "CARGO_MAKEFLAGS",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
    ];
    const DROP: [&str; 9] = [
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "TARGET",
        "HOST",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let cargo_setting = name.starts_with("CARGO_") && !KEEP.iter().any(|k| name.starts_with(k));
        if cargo_setting || DROP.contains(&name) {
            cmd.env_remove(name);
        }
    }
}

/// Fails with [`ImageError::TargetMissing`] when the toolchain's sysroot has no library for
/// [`TARGET`].
fn check_target_installed() -> Result<(), ImageError> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .env_remove("RUSTC_WRAPPER")
        .output()
        .map_err(|source| ImageError::Spawn {
            what: "rustc --print sysroot",
            source,
        })?;
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let lib = Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib");
    if lib.is_dir() {
        Ok(())
    } else {
        Err(ImageError::TargetMissing)
    }
}

/// Clock cycles from the reset's release within which the firmware has answered a `PING` sent
/// at once on the simulated SoC (16 clocks a UART bit), the bound of the boot tests, from its
/// parts: the line time of the request (8 bytes), the start announcement (12)
/// and the answer with the store's capability (24), 10 bits a byte at 16 clocks a bit; the
/// stack reserve painted for `STACK_USE` and riscv-rt zeroing `.bss`, which is the tensor store,
/// one word at a time (measured 4.53 cycles a word, bounded at 5); and the firmware's own start
/// and `PING` (measured 5,632 cycles, the same before the store existed). 5% on top for
/// code-layout changes. Measured 31,232-31,280 in all before the paint.
pub const PING_AFTER_RESET_CYCLES: u64 = {
    let line = 44 * 10 * 16;
    let words = (systole_core::soc::TENSOR_STORE_BYTES as u64
        + systole_firmware::soc::STACK_RESERVE_BYTES as u64)
        / 4;
    let firmware = 5_632;
    (line + words * 5 + firmware) * 105 / 100
};

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_target_says_how_to_install_it() {
        let text = super::ImageError::TargetMissing.to_string();
        assert!(
            text.contains("rustup target add riscv32imac-unknown-none-elf (./x does this)"),
            "{text}"
        );
    }
}
