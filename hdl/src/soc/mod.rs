//! The SoC image: a VexRiscv RV32IMAC CPU ([`cpu`]) running the firmware from on-chip RAM,
//! with the project's UART, a cycle timer, the SYS registers and the accelerator (the same
//! `Core` with its conv unit as the bridge board's) on the CPU's data bus, at the addresses of
//! `systole_core::soc` (the one memory map the firmware reads too).
//!
//! The blocks are hand-written Verilog with parameters (`hdl/verilog/soc_*.v`: resets, CPU
//! wrapper, bus, RAM, UART with a receive FIFO, timer, SYS, row sequencer, row DMA, and the
//! product sequencer, which runs a whole matrix product from one `MM_CMD` by driving the DMA's
//! and the array's registers on the bus in the CPU's place), listed with
//! their ports in [`blocks`]; only the accelerator's stage, whose ports name every lane, is
//! generated per array size ([`stage`]). The top wires them through a checked netlist
//! ([`netlist`], [`wiring`]): every port connected once, to a net of its width, every net
//! driven once. The UART's line blocks are the rust-hdl [`crate::uart`] blocks and the
//! accelerator the Verilog of [`crate::generate_verilog`], under module names of their own
//! (`soc_uart_rx`, `soc_uart_tx`, `systole_acc`). The CPU's module `VexRiscv` is not in the
//! text: every tool also reads [`vexriscv_verilog`].
//!
//! The accelerator may have any word width `W` its `top` is built at: the CPU's row stage keeps
//! 16-bit lanes (a `W`-bit word written sign-extended), the array's `W`-bit ports take each
//! lane's low `W` bits, and the C stage sign-extends each `W`-bit result into a 16-bit lane, so
//! the firmware moves 16-bit words at every `W`.
//!
//! Ports of `top`: `clock`, `reset_pin` (a button of either polarity), `uart_rx`, `uart_tx`,
//! `led0` (the CPU runs), `led1` (a heartbeat), and with [`SocOptions::backdoor`] the
//! simulation's RAM loader `load_we`, `load_addr`, `load_data` (a word per clock, taken while
//! the button holds the CPU in reset). For a board the RAM starts from a `$readmemh` file
//! ([`SocOptions::ram_init`]).

mod blocks;
mod cpu;
pub(crate) mod netlist;
mod stage;
mod wiring;

pub use cpu::{vexriscv_verilog, VEXRISCV_ENV, VEXRISCV_FILE, VEXRISCV_PIP};

use crate::uart::{clocks_per_bit, UartRx, UartTx};
use crate::HdlError;
use rust_hdl_core::prelude::*;
use systole_core::soc::{MMIO_BASE, RAM_BASE};
use systole_core::ArrayConfig;

/// Smallest RAM the SoC is built with.
pub const MIN_RAM_BYTES: u32 = 4096;
/// Largest RAM the SoC is built with (the MMIO range starts above it in any case).
pub const MAX_RAM_BYTES: u32 = 1 << 20;

/// How the SoC is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocOptions {
    /// Clock frequency in Hz (also what `SYS_CLOCK_HZ` reads).
    pub clock_hz: u32,
    /// UART baud rate.
    pub baud: u32,
    /// The reset button reads low when pressed.
    pub reset_active_low: bool,
    /// The LEDs light when driven low.
    pub led_active_low: bool,
    /// On-chip RAM in bytes: a power of two in [`MIN_RAM_BYTES`]..=[`MAX_RAM_BYTES`].
    pub ram_bytes: u32,
    /// Feature-map words of the conv unit (0 leaves it out), as `BridgeTopOptions::fm_depth`.
    pub fm_depth: usize,
    /// A `$readmemh` file (one 32-bit word a line, from address 0) the RAM starts from.
    pub ram_init: Option<String>,
    /// The simulation's RAM loader ports (`load_we`, `load_addr`, `load_data`).
    pub backdoor: bool,
}

/// What the Verilog writers need, checked and derived from the options.
pub(crate) struct Plan {
    n: usize,
    /// The accelerator's word width `W`: its row ports take the low `W` bits of the CPU's
    /// 16-bit lanes, and its C words reach the C stage sign-extended to 16 bits.
    word_bits: u32,
    /// K rows of each array command the product sequencer issues: the buffer depth, at most
    /// what a 16-bit `DMA_ROWS` moves.
    chunk: u32,
    ram_bytes: u32,
    ram_addr_bits: usize,
    clock_hz: u32,
    reset_active_low: bool,
    led_active_low: bool,
    ram_init: Option<String>,
    backdoor: bool,
}

/// Verilog of the SoC (module `top` and everything it instantiates except `VexRiscv`, which
/// is in [`vexriscv_verilog`]) for the accelerator `cfg` and the build `opts`.
pub fn generate_soc_verilog(cfg: &ArrayConfig, opts: &SocOptions) -> Result<String, HdlError> {
    cfg.validate_built().map_err(HdlError::Config)?;
    let r = opts.ram_bytes;
    if !r.is_power_of_two() || !(MIN_RAM_BYTES..=MAX_RAM_BYTES).contains(&r) {
        return Err(HdlError::Block(format!(
            "SoC RAM of {r} bytes: need a power of two from {MIN_RAM_BYTES} to {MAX_RAM_BYTES}"
        )));
    }
    // The decode takes bit 31 as MMIO and the RAM's index from the low bits.
    const _: () = assert!(RAM_BASE == 0 && MMIO_BASE == 1 << 31);
    if let Some(f) = &opts.ram_init {
        if f.is_empty() || f.contains(['"', '\\', '\n']) {
            return Err(HdlError::Block(format!(
                "RAM init file name {f:?}: give a plain file name (no quotes, backslashes or newlines)"
            )));
        }
    }
    let cpb =
        clocks_per_bit(u64::from(opts.clock_hz), u64::from(opts.baud)).map_err(HdlError::Block)?;
    let acc_cfg = ArrayConfig {
        fm_depth: opts.fm_depth,
        ..*cfg
    };
    let plan = Plan {
        n: cfg.size,
        word_bits: cfg.word_bits,
        chunk: cfg.buffer_depth.min(1 << 15) as u32,
        ram_bytes: r,
        ram_addr_bits: (r / 4).trailing_zeros() as usize,
        clock_hz: opts.clock_hz,
        reset_active_low: opts.reset_active_low,
        led_active_low: opts.led_active_low,
        ram_init: opts.ram_init.clone(),
        backdoor: opts.backdoor,
    };
    let acc_ports = crate::ports(&acc_cfg)?;
    let mut out = format!(
        "// Generated by systole-hdl: the SoC (VexRiscv + {} accelerator), {} bytes of RAM \
         (do not edit). Module VexRiscv is read from {VEXRISCV_FILE} ({VEXRISCV_PIP}).\n",
        acc_cfg.name(),
        r
    );
    out.push_str(&wiring::top_module(&plan, &acc_ports)?);
    for block in blocks::ALL {
        out.push_str(block.text);
    }
    out.push_str(&stage::module(&plan));
    out.push_str(&uart_modules(cpb)?);
    out.push_str(&crate::verilog::generate_verilog_named(
        &acc_cfg,
        "systole_acc",
    )?);
    Ok(out)
}

/// The UART's rust-hdl blocks as modules `soc_uart_rx` and `soc_uart_tx`.
fn uart_modules(cpb: u64) -> Result<String, HdlError> {
    let mut defines = ModuleDefines::default();
    let mut rx = UartRx::new(cpb);
    rx.connect_all();
    check_all(&rx).map_err(HdlError::check)?;
    rx.accept("soc_uart_rx", &mut defines);
    let mut tx = UartTx::new(cpb);
    tx.connect_all();
    check_all(&tx).map_err(HdlError::check)?;
    tx.accept("soc_uart_tx", &mut defines);
    Ok(defines.defines())
}

#[cfg(test)]
mod tests;
