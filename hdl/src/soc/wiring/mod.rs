//! The SoC's `top`: every block instantiated and wired through [`Netlist`], which checks each
//! connection against the block's ports.
//!
//! The CPU's data bus (`soc_bus.v`) decodes MMIO (address bit 31) for the UART, timer, SYS,
//! the row DMA and the accelerator's window ([`stage`]); their read data is ORed (each is 0
//! outside its addresses) and registered by the bus. A `ROW_CMD` or `DMA_CMD` write is held on
//! the bus until its command is done (the sequencer's or the DMA's `hold`), during which the DMA
//! has the RAM's data port. The accelerator (module `systole_acc`) takes its row words from the
//! stage words: a `W`-bit port the low `W` bits of a 16-bit lane.

mod acc;

use super::blocks::{self, Source};
use super::netlist::{Net, Netlist, Src, Value};
use super::Plan;
use crate::{HdlError, PortInfo};
use acc::accelerator;
use systole_core::soc::*;

/// The nets that join blocks, by what they carry.
struct Nets {
    clock: Net,
    rst: Net,
    uart_rst: Net,
    hard_reset: Net,
    soft_reset: Net,
    /// The CPU's data bus as the MMIO blocks see it (the CPU's, or the product sequencer's
    /// while it runs a product): byte address, strobes, write data.
    addr: Net,
    wr: Net,
    rd: Net,
    wdata: Net,
    /// The CPU's own data bus: address and strobes from the bus block, the write data (also
    /// the RAM's).
    cpu_addr: Net,
    cpu_wr: Net,
    cpu_rd: Net,
    cpu_wdata: Net,
    /// The RAM's data port read (the CPU's and the DMA's).
    ram_q: Net,
    /// The CPU's side of the RAM: the instruction port, the data port's address and bytes.
    i_adr: Net,
    i_dat_r: Net,
    d_adr: Net,
    ram_we: Net,
    /// Read data of each MMIO block (0 outside its addresses), ORed into `mmio_rdata`.
    uart_rdata: Net,
    timer_rdata: Net,
    sys_rdata: Net,
    dma_rdata: Net,
    stage_rdata: Net,
    mm_rdata: Net,
    /// The bus waits: a `ROW_CMD`, `DMA_CMD` or `MM_CMD` write not yet done.
    row_hold: Net,
    dma_hold: Net,
    mm_hold: Net,
    /// The DMA on the RAM's data port.
    dma_busy: Net,
    dma_ram_addr: Net,
    dma_ram_we: Net,
    dma_ram_wdata: Net,
}

impl Nets {
    fn new(nl: &mut Netlist, p: &Plan, clock: Net) -> Self {
        let mut w = |name: &str, width: u32| nl.wire(name, width);
        Nets {
            clock,
            rst: w("rst", 1),
            uart_rst: w("uart_rst", 1),
            hard_reset: w("hard_reset", 1),
            soft_reset: w("soft_reset", 1),
            addr: w("addr", 32),
            wr: w("mmio_wr", 1),
            rd: w("mmio_rd", 1),
            wdata: w("mmio_wdata", 32),
            cpu_addr: w("cpu_addr", 32),
            cpu_wr: w("cpu_mmio_wr", 1),
            cpu_rd: w("cpu_mmio_rd", 1),
            cpu_wdata: w("d_dat_w", 32),
            ram_q: w("ram_q", 32),
            i_adr: w("i_adr", 30),
            i_dat_r: w("i_dat_r", 32),
            d_adr: w("d_adr", 30),
            ram_we: w("ram_we", 4),
            uart_rdata: w("uart_rdata", 32),
            timer_rdata: w("timer_rdata", 32),
            sys_rdata: w("sys_rdata", 32),
            dma_rdata: w("dma_rdata", 32),
            stage_rdata: w("stage_rdata", 32),
            mm_rdata: w("mm_rdata", 32),
            row_hold: w("row_hold", 1),
            dma_hold: w("dma_hold", 1),
            mm_hold: w("mm_hold", 1),
            dma_busy: w("dma_busy", 1),
            dma_ram_addr: w("dma_ram_addr", p.ram_addr_bits as u32),
            dma_ram_we: w("dma_ram_we", 4),
            dma_ram_wdata: w("dma_ram_wdata", 32),
        }
    }
}

fn inst(
    nl: &mut Netlist,
    s: &Source,
    name: &str,
    params: &[(&str, Value)],
    conns: &[(&str, Src)],
) -> Result<(), HdlError> {
    nl.instance(&s.block(), name, params, conns)
}

/// The whole `top` module of the SoC.
pub(super) fn top_module(p: &Plan, acc_ports: &[PortInfo]) -> Result<String, HdlError> {
    let mut nl = Netlist::new("top");
    let clock = nl.input("clock", 1);
    let reset_pin = nl.input("reset_pin", 1);
    let uart_rx = nl.input("uart_rx", 1);
    let uart_tx = nl.output("uart_tx", 1);
    let led0 = nl.output("led0", 1);
    let led1 = nl.output("led1", 1);
    let aw = p.ram_addr_bits as u32;
    // The simulation's RAM loader (taken while the button holds the CPU in reset), else idle.
    let load: [Src; 3] = if p.backdoor {
        [
            nl.input("load_we", 1).into(),
            nl.input("load_addr", aw).into(),
            nl.input("load_data", 32).into(),
        ]
    } else {
        [Src::Const(1, 0), Src::Const(aw, 0), Src::Const(32, 0)]
    };
    let n = Nets::new(&mut nl, p, clock);
    inst(
        &mut nl,
        &blocks::RESET,
        "resets",
        &[
            ("BUTTON_ACTIVE_LOW", Value::Bit(p.reset_active_low)),
            ("LED_ACTIVE_LOW", Value::Bit(p.led_active_low)),
        ],
        &[
            ("clock", n.clock.into()),
            ("reset_pin", reset_pin.into()),
            ("soft_reset", n.soft_reset.into()),
            ("hard_reset", n.hard_reset.into()),
            ("rst", n.rst.into()),
            ("uart_rst", n.uart_rst.into()),
            ("led0", led0.into()),
            ("led1", led1.into()),
        ],
    )?;
    cpu_and_bus(&mut nl, &n)?;
    ram(&mut nl, p, &n, load)?;
    uart_timer_sys(&mut nl, p, &n, uart_rx, uart_tx)?;
    accelerator(&mut nl, p, &n, acc_ports)?;
    nl.finish()
}

/// The CPU and its bus, with the MMIO read data and the hold ORed from the blocks'.
fn cpu_and_bus(nl: &mut Netlist, n: &Nets) -> Result<(), HdlError> {
    let mut w = |name: &str, width: u32| nl.wire(name, width);
    let (i_cyc, i_stb, i_ack) = (w("i_cyc", 1), w("i_stb", 1), w("i_ack", 1));
    let (d_cyc, d_stb, d_we) = (w("d_cyc", 1), w("d_stb", 1), w("d_we", 1));
    let (d_sel, d_ack, d_dat_r) = (w("d_sel", 4), w("d_ack", 1), w("d_dat_r", 32));
    let (mmio_rdata, hold) = (w("mmio_rdata", 32), w("hold", 1));
    inst(
        nl,
        &blocks::CPU,
        "cpu",
        &[("RESET_VECTOR", Value::Word(RESET_VECTOR))],
        &[
            ("clock", n.clock.into()),
            ("rst", n.rst.into()),
            ("i_cyc", i_cyc.into()),
            ("i_stb", i_stb.into()),
            ("i_adr", n.i_adr.into()),
            ("i_ack", i_ack.into()),
            ("i_dat_r", n.i_dat_r.into()),
            ("d_cyc", d_cyc.into()),
            ("d_stb", d_stb.into()),
            ("d_we", d_we.into()),
            ("d_adr", n.d_adr.into()),
            ("d_dat_w", n.cpu_wdata.into()),
            ("d_sel", d_sel.into()),
            ("d_ack", d_ack.into()),
            ("d_dat_r", d_dat_r.into()),
        ],
    )?;
    inst(
        nl,
        &blocks::BUS,
        "bus",
        &[],
        &[
            ("clock", n.clock.into()),
            ("rst", n.rst.into()),
            ("i_cyc", i_cyc.into()),
            ("i_stb", i_stb.into()),
            ("i_ack", i_ack.into()),
            ("d_cyc", d_cyc.into()),
            ("d_stb", d_stb.into()),
            ("d_we", d_we.into()),
            ("d_adr", n.d_adr.into()),
            ("d_sel", d_sel.into()),
            ("d_ack", d_ack.into()),
            ("d_dat_r", d_dat_r.into()),
            ("ram_we", n.ram_we.into()),
            ("ram_q", n.ram_q.into()),
            ("addr", n.cpu_addr.into()),
            ("mmio_rd", n.cpu_rd.into()),
            ("mmio_wr", n.cpu_wr.into()),
            ("mmio_rdata", mmio_rdata.into()),
            ("hold", hold.into()),
        ],
    )?;
    let reads = [
        n.uart_rdata,
        n.timer_rdata,
        n.sys_rdata,
        n.dma_rdata,
        n.stage_rdata,
        n.mm_rdata,
    ];
    nl.or(mmio_rdata, &reads)?;
    nl.or(hold, &[n.row_hold, n.dma_hold, n.mm_hold])
}

/// The RAM: the CPU's instruction and data ports, the DMA's, the loader's.
fn ram(nl: &mut Netlist, p: &Plan, n: &Nets, load: [Src; 3]) -> Result<(), HdlError> {
    let init = p.ram_init.clone();
    inst(
        nl,
        &blocks::RAM,
        "ram",
        &[
            ("ADDR_BITS", Value::Int(p.ram_addr_bits as u32)),
            ("HAS_INIT", Value::Bit(init.is_some())),
            (
                "INIT_FILE",
                Value::Text(init.unwrap_or_else(|| "none".into())),
            ),
        ],
        &[
            ("clock", n.clock.into()),
            ("i_adr", n.i_adr.into()),
            ("i_q", n.i_dat_r.into()),
            ("cpu_adr", n.d_adr.into()),
            ("cpu_we", n.ram_we.into()),
            ("cpu_wdata", n.cpu_wdata.into()),
            ("dma_busy", n.dma_busy.into()),
            ("dma_addr", n.dma_ram_addr.into()),
            ("dma_we", n.dma_ram_we.into()),
            ("dma_wdata", n.dma_ram_wdata.into()),
            ("load_we", load[0]),
            ("load_addr", load[1]),
            ("load_wdata", load[2]),
            ("d_q", n.ram_q.into()),
        ],
    )
}

/// The UART on the pins, the cycle timer and the SYS registers.
fn uart_timer_sys(
    nl: &mut Netlist,
    p: &Plan,
    n: &Nets,
    uart_rx: Net,
    uart_tx: Net,
) -> Result<(), HdlError> {
    let word = Value::Word;
    let bit = |f: systole_core::field::Field| Value::Int(f.lsb);
    inst(
        nl,
        &blocks::UART,
        "uart",
        &[
            ("DATA_ADDR", word(UART_DATA)),
            ("STATUS_ADDR", word(UART_STATUS)),
            ("FIFO_BITS", Value::Int(RX_FIFO_BYTES.trailing_zeros())),
            ("TX_READY_BIT", bit(UART_TX_READY)),
            ("RX_VALID_BIT", bit(UART_RX_VALID)),
            ("OVERRUN_BIT", bit(UART_RX_OVERRUN)),
        ],
        &[
            ("clock", n.clock.into()),
            ("uart_rst", n.uart_rst.into()),
            ("rx", uart_rx.into()),
            ("tx", uart_tx.into()),
            ("addr", n.addr.into()),
            ("wr", n.wr.into()),
            ("rd", n.rd.into()),
            ("wdata", Src::Bits(n.wdata, 7, 0)),
            ("rdata", n.uart_rdata.into()),
        ],
    )?;
    inst(
        nl,
        &blocks::TIMER,
        "timer",
        &[("LO_ADDR", word(TIMER_LO)), ("HI_ADDR", word(TIMER_HI))],
        &[
            ("clock", n.clock.into()),
            ("rst", n.rst.into()),
            ("addr", n.addr.into()),
            ("rd", n.rd.into()),
            ("rdata", n.timer_rdata.into()),
        ],
    )?;
    inst(
        nl,
        &blocks::SYS,
        "sys",
        &[
            ("ID_ADDR", word(SYS_ID)),
            ("ID", word(SOC_ID_VALUE)),
            ("RAM_ADDR", word(SYS_RAM_BYTES)),
            ("RAM_BYTES", word(p.ram_bytes)),
            ("CLOCK_ADDR", word(SYS_CLOCK_HZ)),
            ("CLOCK_HZ", word(p.clock_hz)),
            ("FEATURES_ADDR", word(SYS_FEATURES)),
            (
                "FEATURES",
                word(SYS_FEATURE_DMA.put(1) | SYS_FEATURE_MM.put(1)),
            ),
            ("RESET_ADDR", word(SYS_RESET)),
            ("RESET_KEY", word(SYS_RESET_KEY)),
        ],
        &[
            ("clock", n.clock.into()),
            ("hard_reset", n.hard_reset.into()),
            ("addr", n.addr.into()),
            ("wr", n.wr.into()),
            ("wdata", n.wdata.into()),
            ("soft_reset", n.soft_reset.into()),
            ("rdata", n.sys_rdata.into()),
        ],
    )
}
