//! The boards systole knows, as data: one [`Board`] per development kit.
//!
//! Pin facts come from the vendors' master constraint files and reference manuals:
//! Digilent `Arty-A7-35-Master.xdc` / `Arty-A7-100-Master.xdc`, `Basys-3-Master.xdc`,
//! `Nexys-A7-100T-Master.xdc` (digilent-xdc), and 1BitSquared's iCEBreaker v1.0 pinout
//! (`icebreaker.pcf` in the icestorm examples), and Radiona's ULX3S constraint file
//! `ulx3s_v20.lpf` (github.com/emard/ulx3s, `doc/constraints/`, for ULX3S v2.x and v3.0.x).
//! Resource budgets are the Xilinx 7-series product table (DS180), Lattice's iCE40
//! UltraPlus data sheet (FPGA-DS-02008) and the ECP5 family data sheet (FPGA-DS-02012).

use super::{Board, Budget, Family, Pin};
use systole_core::soc::{BASE_RAM_BYTES, TRAINING_RAM_BYTES};

const fn pin(site: &'static str) -> Pin {
    Pin {
        site,
        active_low: false,
    }
}

const fn pin_n(site: &'static str) -> Pin {
    Pin {
        site,
        active_low: true,
    }
}

/// XC7A35T: 20,800 LUTs, 41,600 flip-flops, 90 DSP48E1, 50 BRAM36 (DS180, Artix-7 table),
/// counted here as 100 BRAM18 of 16 kbit data each (1024 x 16).
const XC7A35T: Budget = Budget {
    luts: 20_800,
    ffs: 41_600,
    dsps: 90,
    bram_blocks: 100,
    bram_block_bits: 16 * 1024,
};

/// XC7A100T: 63,400 LUTs, 126,800 flip-flops, 240 DSP48E1, 135 BRAM36 = 270 BRAM18 (DS180).
const XC7A100T: Budget = Budget {
    luts: 63_400,
    ffs: 126_800,
    dsps: 240,
    bram_blocks: 270,
    bram_block_bits: 16 * 1024,
};

/// iCE40UP5K: 5,280 logic cells (one LUT4 + one flip-flop each), 8 SB_MAC16, 30 EBR of
/// 4 kbit; the four 256-kbit SPRAMs are not counted (the buffers use EBR).
const ICE40UP5K: Budget = Budget {
    luts: 5_280,
    ffs: 5_280,
    dsps: 8,
    bram_blocks: 30,
    bram_block_bits: 4 * 1024,
};

/// LFE5U-85F: 83,640 LUT4 with as many flip-flops, 156 18x18 multipliers (MULT18X18D), 208
/// sysMEM blocks of 18 kbit (DP16KD, 1024 x 16 at 16 bits wide) (FPGA-DS-02012, family table).
const LFE5U85F: Budget = Budget {
    luts: 83_640,
    ffs: 83_640,
    dsps: 156,
    bram_blocks: 208,
    bram_block_bits: 16 * 1024,
};

/// Every board, in the order `systole boards` prints them.
pub(super) static BOARDS: [Board; 6] = [
    // Arty-A7-35-Master.xdc: CLK100MHZ E3, uart_txd_in A9 (into the FPGA), uart_rxd_out D10,
    // led[0..3] H5 J5 T9 T10, ck_rst C2 (active low).
    Board {
        name: "arty-a7-35",
        title: "Digilent Arty A7-35T",
        family: Family::Xc7,
        part: "xc7a35ticsg324-1L",
        package: "csg324",
        clock: pin("E3"),
        clock_hz: 100_000_000,
        pll_hz: None,
        halve_clock: false,
        uart_rx: pin("A9"),
        uart_tx: pin("D10"),
        leds: &[pin("H5"), pin("J5"), pin("T9"), pin("T10")],
        reset: pin_n("C2"),
        io_standard: "LVCMOS33",
        budget: XC7A35T,
        soc_ram_bytes: Some(BASE_RAM_BYTES),
        loader_board: "arty_a7_35t",
    },
    // Arty-A7-100-Master.xdc: same pinout as the 35T.
    Board {
        name: "arty-a7-100",
        title: "Digilent Arty A7-100T",
        family: Family::Xc7,
        part: "xc7a100tcsg324-1",
        package: "csg324",
        clock: pin("E3"),
        clock_hz: 100_000_000,
        pll_hz: None,
        halve_clock: false,
        uart_rx: pin("A9"),
        uart_tx: pin("D10"),
        leds: &[pin("H5"), pin("J5"), pin("T9"), pin("T10")],
        reset: pin_n("C2"),
        io_standard: "LVCMOS33",
        budget: XC7A100T,
        soc_ram_bytes: Some(TRAINING_RAM_BYTES),
        loader_board: "arty_a7_100t",
    },
    // Basys-3-Master.xdc: clk W5, RsRx B18 (into the FPGA), RsTx A18, led[0..3] U16 E19 U19
    // V19, btnC U18 (active high; the board has no dedicated reset button).
    Board {
        name: "basys3",
        title: "Digilent Basys 3",
        family: Family::Xc7,
        part: "xc7a35tcpg236-1",
        package: "cpg236",
        clock: pin("W5"),
        clock_hz: 100_000_000,
        pll_hz: None,
        halve_clock: false,
        uart_rx: pin("B18"),
        uart_tx: pin("A18"),
        leds: &[pin("U16"), pin("E19"), pin("U19"), pin("V19")],
        reset: pin("U18"),
        io_standard: "LVCMOS33",
        budget: XC7A35T,
        soc_ram_bytes: Some(BASE_RAM_BYTES),
        loader_board: "basys3",
    },
    // Nexys-A7-100T-Master.xdc: CLK100MHZ E3, UART_TXD_IN C4 (into the FPGA), UART_RXD_OUT
    // D4, LED[0..3] H17 K15 J13 N14, CPU_RESETN C12 (active low).
    Board {
        name: "nexys-a7-100",
        title: "Digilent Nexys A7-100T",
        family: Family::Xc7,
        part: "xc7a100tcsg324-1",
        package: "csg324",
        clock: pin("E3"),
        clock_hz: 100_000_000,
        pll_hz: None,
        halve_clock: false,
        uart_rx: pin("C4"),
        uart_tx: pin("D4"),
        leds: &[pin("H17"), pin("K15"), pin("J13"), pin("N14")],
        reset: pin_n("C12"),
        io_standard: "LVCMOS33",
        budget: XC7A100T,
        soc_ram_bytes: Some(TRAINING_RAM_BYTES),
        loader_board: "nexys_a7_100",
    },
    // icebreaker.pcf (1BitSquared v1.0): CLK 35 (12 MHz), RX 6 (into the FPGA), TX 9,
    // LEDR_N 11, LEDG_N 37 (both active low), BTN_N 10 (active low).
    Board {
        name: "icebreaker",
        title: "1BitSquared iCEBreaker",
        family: Family::Ice40Up,
        part: "iCE40UP5K-SG48",
        package: "sg48",
        clock: pin("35"),
        clock_hz: 12_000_000,
        pll_hz: None,
        // The 2x2 bridge image routes at 24.7 MHz on the UP5K (nextpnr-ice40): the logic runs
        // at the oscillator's 12 MHz.
        halve_clock: false,
        uart_rx: pin("6"),
        uart_tx: pin("9"),
        leds: &[pin_n("11"), pin_n("37")],
        reset: pin_n("10"),
        io_standard: "LVCMOS33",
        budget: ICE40UP5K,
        soc_ram_bytes: None,
        loader_board: "ice40_generic",
    },
    // ulx3s_v20.lpf: clk_25mhz G2 (25 MHz), ftdi_txd M1 (the FTDI's TX, into the FPGA),
    // ftdi_rxd L4 (out of the FPGA), led[0..1] B2 C2 (active high), btn[0] D6 (BTN_PWRn,
    // active low, pulled up). The PLL makes the 50 MHz design clock from the oscillator.
    Board {
        name: "ulx3s-85f",
        title: "Radiona ULX3S (LFE5U-85F)",
        family: Family::Ecp5,
        part: "LFE5U-85F-6BG381C",
        package: "CABGA381",
        clock: pin("G2"),
        clock_hz: 25_000_000,
        pll_hz: Some(50_000_000),
        halve_clock: false,
        uart_rx: pin("M1"),
        uart_tx: pin("L4"),
        leds: &[pin("B2"), pin("C2"), pin("C1"), pin("D2")],
        reset: pin_n("D6"),
        io_standard: "LVCMOS33",
        budget: LFE5U85F,
        // Measured: with 256 KiB the 4x4 SoC needed 275 DP16KD of 208 (Yosys 0.70 maps the
        // byte-wide RAM lanes narrowly); the image's own 64 KiB leaves room for the arrays.
        soc_ram_bytes: Some(BASE_RAM_BYTES),
        loader_board: "ulx3s",
    },
];
