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

/// The array's `top` for `cfg`: its Verilog and its ports as `systole_hdl::ports` defines them
/// (the definition the Verilog's wrapper is written from).
pub fn array(cfg: &ArrayConfig) -> Result<(String, Vec<PortInfo>), String> {
    let verilog = systole_hdl::generate_verilog(cfg).map_err(|e| e.to_string())?;
    let ports = systole_hdl::ports(cfg)
        .map_err(|e| e.to_string())?
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

/// The bridge image's options: active-low button, [`BRIDGE_FM_DEPTH`] feature-map words.
fn bridge_options() -> systole_hdl::bridge_top::BridgeTopOptions {
    systole_hdl::bridge_top::BridgeTopOptions {
        clock_hz: BRIDGE_CLOCK_HZ,
        baud: BRIDGE_BAUD,
        reset_active_low: true,
        led_active_low: false,
        halve_clock: false,
        fm_depth: BRIDGE_FM_DEPTH,
    }
}

/// The bridge image (`systole_hdl::bridge_top`: UART, byte bridge and an `n x n` array): its
/// Verilog and its ports, walked from the rust-hdl block the Verilog is generated from.
pub fn bridge(n: usize) -> Result<(String, Vec<PortInfo>), String> {
    use rust_hdl_core::prelude::Block;
    let cfg = ArrayConfig::square(n);
    let opts = bridge_options();
    let verilog = systole_hdl::bridge_top::generate_bridge_verilog_with(&cfg, &opts)
        .map_err(|e| e.to_string())?;
    let mut top =
        systole_hdl::bridge_top::BridgeTop::new(&cfg, &opts).map_err(|e| e.to_string())?;
    top.connect_all();
    Ok((verilog, systole_testbench::block_ports(&top)))
}

/// The SoC build of the simulation: the default RAM, the bridge image's conv unit, and the
/// backdoor loader.
pub fn soc_options() -> systole_hdl::soc::SocOptions {
    systole_hdl::soc::SocOptions {
        clock_hz: SOC_CLOCK_HZ,
        baud: SOC_BAUD,
        reset_active_low: true,
        led_active_low: false,
        ram_bytes: systole_core::soc::SIM_RAM_BYTES,
        fm_depth: BRIDGE_FM_DEPTH,
        ram_init: None,
        backdoor: true,
    }
}

/// The SoC image's Verilog with an `n x n` array, the CPU's module appended (one text, so the
/// model's cache key covers the CPU too). Its ports are as Verilator declares them: the SoC's
/// `top` is written as text, with no port list of its own.
pub fn soc(n: usize) -> Result<String, String> {
    let cpu = systole_hdl::soc::vexriscv_verilog().map_err(|e| e.to_string())?;
    let verilog = systole_hdl::soc::generate_soc_verilog(&ArrayConfig::square(n), &soc_options())
        .map_err(|e| format!("the {n}x{n} SoC: {e}"))?;
    let cpu_text = std::fs::read_to_string(&cpu)
        .map_err(|e| format!("cannot read the SoC's CPU {}: {e}", cpu.display()))?;
    Ok(format!("{verilog}\n{cpu_text}"))
}
