//! The simulated images, defined once for `build.rs` (which compiles their fast models) and
//! for the crate (which Verilates their traced models at run time from the same definition):
//! each image's Verilog and its top's port list, taken from the image's own definition.

use systole_core::ArrayConfig;
use systole_testbench::{Dir, PortInfo};

/// Oscillator and baud rate of the simulated bridge image: 8 clocks per UART bit, as fast as
/// the bridge's receiver allows with margin.
pub const BRIDGE_CLOCK_HZ: u32 = 8_000_000;
/// See [`BRIDGE_CLOCK_HZ`].
pub const BRIDGE_BAUD: u32 = 1_000_000;
/// Feature-map words of the bridge image's conv unit (as `systole bitstream --fm-depth 4096`).
pub const BRIDGE_FM_DEPTH: usize = 4096;
/// Clock of the simulated SoC image: 16 clocks per UART bit, so the CPU has 160 clocks per
/// received byte.
pub const SOC_CLOCK_HZ: u32 = 16_000_000;
/// Baud rate of the simulated SoC image.
pub const SOC_BAUD: u32 = 1_000_000;
/// The clock input of every image's `top`.
pub const CLOCK: &str = "clock";

/// Why an image's Verilog or port list could not be made (shared with `build.rs`, so written
/// by hand: the build script has no `thiserror`).
#[derive(Debug)]
pub enum ImageError {
    /// systole-hdl refused the image (`image` names which, e.g. "4x4 array").
    Hdl {
        /// The image asked for.
        image: String,
        /// systole-hdl's reason.
        cause: systole_hdl::HdlError,
    },
    /// The SoC's CPU Verilog could not be read.
    CpuText {
        /// The CPU's Verilog file.
        path: std::path::PathBuf,
        /// Why it could not be read.
        cause: std::io::Error,
    },
}

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageError::Hdl { image, cause } => write!(f, "the {image}: {cause}"),
            ImageError::CpuText { path, cause } => {
                write!(f, "cannot read the SoC's CPU {}: {cause}", path.display())
            }
        }
    }
}

impl std::error::Error for ImageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImageError::Hdl { cause, .. } => Some(cause),
            ImageError::CpuText { cause, .. } => Some(cause),
        }
    }
}

/// Names the image a systole-hdl error belongs to.
fn hdl(image: impl Into<String>) -> impl FnOnce(systole_hdl::HdlError) -> ImageError {
    let image = image.into();
    move |cause| ImageError::Hdl { image, cause }
}

/// The array's `top` for `cfg`: its Verilog and its ports as `systole_hdl::ports` defines them
/// (the definition the Verilog's wrapper is written from).
pub fn array(cfg: &ArrayConfig) -> Result<(String, Vec<PortInfo>), ImageError> {
    let image = || format!("{}x{} array", cfg.size, cfg.size);
    let verilog = systole_hdl::generate_verilog(cfg).map_err(hdl(image()))?;
    let ports = systole_hdl::ports(cfg)
        .map_err(hdl(image()))?
        .into_iter()
        .map(|p| PortInfo {
            clock: p.name == CLOCK,
            name: p.name,
            width: p.width as usize,
            dir: match p.dir {
                systole_hdl::PortDir::Input => Dir::Input,
                systole_hdl::PortDir::Output => Dir::Output,
            },
            signed: false,
        })
        .collect();
    Ok((verilog, ports))
}

/// The array of an image at `W`-bit words: `n x n` with the conv unit of [`BRIDGE_FM_DEPTH`]
/// words (built at every `W`).
pub fn image_config(n: usize, word_bits: u32) -> ArrayConfig {
    ArrayConfig {
        fm_depth: BRIDGE_FM_DEPTH,
        ..ArrayConfig::square(n).with_word_bits(word_bits)
    }
}

/// The bridge image's options: active-low button and the conv unit of `cfg`.
fn bridge_options(cfg: &ArrayConfig) -> systole_hdl::bridge_top::BridgeTopOptions {
    systole_hdl::bridge_top::BridgeTopOptions {
        clock_hz: BRIDGE_CLOCK_HZ,
        baud: BRIDGE_BAUD,
        reset_active_low: true,
        led_active_low: false,
        halve_clock: false,
        fm_depth: cfg.fm_depth,
    }
}

/// The bridge image (`systole_hdl::bridge_top`: UART, byte bridge and an `n x n` array of
/// `W`-bit words, [`image_config`]): its Verilog and its ports, walked from the rust-hdl block
/// the Verilog is generated from.
pub fn bridge(n: usize, word_bits: u32) -> Result<(String, Vec<PortInfo>), ImageError> {
    use rust_hdl_core::prelude::Block;
    let cfg = image_config(n, word_bits);
    let opts = bridge_options(&cfg);
    let image = || format!("{n}x{n} bridge image at {word_bits}-bit words");
    let verilog =
        systole_hdl::bridge_top::generate_bridge_verilog_with(&cfg, &opts).map_err(hdl(image()))?;
    let mut top = systole_hdl::bridge_top::BridgeTop::new(&cfg, &opts).map_err(hdl(image()))?;
    top.connect_all();
    Ok((verilog, systole_testbench::block_ports(&top)))
}

/// The SoC build of the simulation: the default RAM, the conv unit of `cfg`
/// ([`image_config`]), and the backdoor loader.
pub fn soc_options(cfg: &ArrayConfig) -> systole_hdl::soc::SocOptions {
    systole_hdl::soc::SocOptions {
        clock_hz: SOC_CLOCK_HZ,
        baud: SOC_BAUD,
        reset_active_low: true,
        led_active_low: false,
        ram_bytes: systole_core::soc::SIM_RAM_BYTES,
        fm_depth: cfg.fm_depth,
        ram_init: None,
        backdoor: true,
    }
}

/// The SoC image's Verilog with an `n x n` array of `W`-bit words ([`image_config`]), the
/// CPU's module appended (one text, so the model's cache key covers the CPU too). Its ports are
/// as Verilator declares them: the SoC's `top` is written as text, with no port list of its own.
pub fn soc(n: usize, word_bits: u32) -> Result<String, ImageError> {
    let cpu = systole_hdl::soc::vexriscv_verilog().map_err(hdl("SoC's CPU"))?;
    let cfg = image_config(n, word_bits);
    let verilog = systole_hdl::soc::generate_soc_verilog(&cfg, &soc_options(&cfg))
        .map_err(hdl(format!("{n}x{n} SoC at {word_bits}-bit words")))?;
    let cpu_text = std::fs::read_to_string(&cpu).map_err(|cause| ImageError::CpuText {
        path: cpu.clone(),
        cause,
    })?;
    Ok(format!("{verilog}\n{cpu_text}"))
}
