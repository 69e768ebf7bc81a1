//! Boards and bitstreams: FPGA development kits as data, constraint and build-script
//! generation, the open iCE40 flow, the Vivado flow, Yosys resource estimates and programming.
//!
//! Generation ([`generate`]) is pure: it turns a [`Board`] into XDC, Vivado TCL or PCF text and is
//! snapshot-tested. Running tools ([`tools`]) is separate, and every missing tool is a
//! [`BoardError::ToolMissing`] that says how to install it. [`flow`] ties both together for the
//! CLI: [`bitstream`] and [`program`] ([`soc`] the SoC's build); [`listing`] is `systole boards`.
//!
//! Adding a board is one entry in the table (`table.rs`).
#![deny(missing_docs)]

pub mod flow;
pub mod generate;
pub mod listing;
pub mod measured;
pub mod model;
pub mod routed;
pub mod routed_table;
pub mod soc;
mod table;
pub mod timing;
pub mod tools;
pub mod vivado;
#[cfg(test)]
mod width_resources;

use std::path::PathBuf;

pub use flow::{bitstream, program, BitstreamReport};
pub use generate::{generate_pcf, generate_vivado_tcl, generate_xdc};
pub use listing::boards_table;
pub use model::{estimate, largest_array, Estimate};
pub use timing::Timing;
pub use tools::ResourceReport;

/// FPGA family: decides the synthesis flow and what a MAC maps onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Xilinx 7-series (Artix-7): Yosys `synth_xilinx -family xc7` estimate, Vivado bitstream,
    /// one DSP48E1 per MAC.
    Xc7,
    /// Lattice iCE40 UltraPlus: Yosys `synth_ice40`, nextpnr-ice40, icepack; one SB_MAC16 per
    /// MAC multiply, the 48-bit accumulator in fabric.
    Ice40Up,
    /// Lattice ECP5: Yosys `synth_ecp5`, nextpnr-ecp5, ecppack (the YoWASP builds `./x`
    /// installs); one MULT18X18D per MAC multiply, the 48-bit accumulator in fabric.
    Ecp5,
}

/// One package pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pin {
    /// Package site (`E3` on a Xilinx BGA, `35` on the iCE40 SG48).
    pub site: &'static str,
    /// The signal is asserted when the pin is low (buttons and LEDs wired to ground).
    pub active_low: bool,
}

/// Logic resources of one part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Look-up tables (LUT6 on 7-series, LUT4 logic cells on iCE40).
    pub luts: u32,
    /// Flip-flops.
    pub ffs: u32,
    /// Multiplier blocks (DSP48E1 or SB_MAC16).
    pub dsps: u32,
    /// Block RAMs, counted in the unit Yosys reports most finely (RAMB18 on 7-series, 4-kbit
    /// EBR on iCE40).
    pub bram_blocks: u32,
    /// Data bits of one block RAM at 16-bit width.
    pub bram_block_bits: u32,
}

/// One development board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Board {
    /// Short name used on the command line (`arty-a7-35`).
    pub name: &'static str,
    /// Full product name.
    pub title: &'static str,
    /// FPGA family.
    pub family: Family,
    /// Full part number as the vendor tools spell it.
    pub part: &'static str,
    /// Package name.
    pub package: &'static str,
    /// Oscillator input pin.
    pub clock: Pin,
    /// Oscillator frequency in Hz.
    pub clock_hz: u32,
    /// The design clock made from the oscillator by the part's PLL (EHXPLLL on ECP5), in Hz;
    /// `None`: the oscillator is the design clock.
    pub pll_hz: Option<u32>,
    /// The bridge top runs its logic on half the oscillator frequency (see
    /// `systole_hdl::bridge_top::BridgeTopOptions::halve_clock`).
    pub halve_clock: bool,
    /// UART line into the FPGA (the USB bridge's TX).
    pub uart_rx: Pin,
    /// UART line out of the FPGA.
    pub uart_tx: Pin,
    /// User LEDs (the bridge top drives the first two).
    pub leds: &'static [Pin],
    /// Reset button.
    pub reset: Pin,
    /// IO standard of all the pins used (Xilinx `IOSTANDARD`, ECP5 `IO_TYPE`).
    pub io_standard: &'static str,
    /// Resource budget of the part.
    pub budget: Budget,
    /// RAM of the SoC (`systole bitstream --soc`) on this board, from `systole_core::soc`: the
    /// image's 64 KiB where the conv unit takes the block RAM (A7-35T), 256 KiB where a
    /// training run fits (A7-100T); `None` where there is no SoC (iCE40).
    pub soc_ram_bytes: Option<u32>,
    /// Board name for `openFPGALoader -b`.
    pub loader_board: &'static str,
}

/// Why a board operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BoardError {
    /// The board name is not in the table.
    #[error("unknown board '{name}': known boards are {known}")]
    UnknownBoard {
        /// What was asked for.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// An external tool is not installed.
    #[error("{tool} not found: {hint}")]
    ToolMissing {
        /// Program name.
        tool: &'static str,
        /// How to install it (and where the generated files are, when that helps).
        hint: String,
    },
    /// An external tool ran and failed.
    #[error("{tool} failed ({status}); its log is {log}:\n{tail}")]
    ToolFailed {
        /// Program name.
        tool: &'static str,
        /// Exit status as text.
        status: String,
        /// Full log file.
        log: PathBuf,
        /// Last lines of the log.
        tail: String,
    },
    /// A tool's report could not be read.
    #[error("could not read the {tool} report: {what}")]
    Parse {
        /// Program whose output was parsed.
        tool: &'static str,
        /// What was missing.
        what: String,
    },
    /// The synthesized design needs more of a resource than the board has.
    #[error("the design does not fit {board}: {what}")]
    DoesNotFit {
        /// Board name.
        board: &'static str,
        /// Which resource, needed versus available.
        what: String,
    },
    /// Place and route finished but the design misses its clock: `timing.json` and the logs
    /// are in the build folder; no bitstream was packed.
    #[error("{line}\n{} and the router's log are in {}; no bitstream was written (a bitstream that misses its clock may compute wrong results): {hint}", timing::TIMING_FILE, dir.display())]
    TimingNotMet {
        /// The flow's timing line, naming the failing path.
        line: String,
        /// The build folder.
        dir: PathBuf,
        /// What to do.
        hint: String,
    },
    /// `--clock-mhz` cannot be built on this board.
    #[error("{board}: {what}")]
    ClockOption {
        /// Board name.
        board: &'static str,
        /// Why.
        what: String,
    },
    /// The array configuration is invalid or the HDL generator refused it (the cause follows in
    /// the chain).
    #[error("cannot generate the design")]
    Hdl(#[source] systole_hdl::HdlError),
    /// The SoC's firmware image is empty or larger than its RAM.
    #[error("the firmware image has {words} words and the SoC's RAM {ram_words}: rebuild it (cargo run -p systole-soc-image prints its budget)")]
    FirmwareImage {
        /// Words in the image.
        words: usize,
        /// Words of the SoC's RAM.
        ram_words: usize,
    },
    /// The measured table (`boards/data/yosys-w.json`) cannot be read: regenerate it with
    /// `systole boards --synthesize`.
    #[error("the measured table {} is not valid ({what}): regenerate it with `systole boards --synthesize --out {}`", measured::MEASURED_FILE, measured::MEASURED_FILE)]
    MeasuredTable {
        /// What is wrong.
        what: String,
        /// The JSON parser's error, when that is what failed.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// A file or directory could not be written or read (the cause follows in the chain).
    #[error("{path}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Board {
    /// Frequency of the clock the top's logic is built from: the PLL's output where the board
    /// has one, else the oscillator.
    pub fn design_clock_hz(&self) -> u32 {
        self.pll_hz.unwrap_or(self.clock_hz)
    }

    /// Frequency the accelerator and UART bridge run at.
    pub fn logic_clock_hz(&self) -> u32 {
        if self.halve_clock {
            self.design_clock_hz() / 2
        } else {
            self.design_clock_hz()
        }
    }
}

/// Every known board.
pub fn list() -> &'static [Board] {
    &table::BOARDS
}

/// Looks a board up by its short name (case-insensitive).
pub fn find(name: &str) -> Result<&'static Board, BoardError> {
    list()
        .iter()
        .find(|b| b.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| BoardError::UnknownBoard {
            name: name.to_string(),
            known: list().iter().map(|b| b.name).collect::<Vec<_>>().join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_known_and_unknown() {
        assert_eq!(find("ARTY-A7-35").unwrap().part, "xc7a35ticsg324-1L");
        assert_eq!(find("basys3").unwrap().part, "xc7a35tcpg236-1");
        let e = find("zedboard").unwrap_err().to_string();
        assert!(e.contains("zedboard"), "{e}");
        for b in list() {
            assert!(e.contains(b.name), "{e} should list {}", b.name);
        }
    }

    #[test]
    fn table_is_consistent() {
        let mut names: Vec<_> = list().iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), list().len(), "board names must be unique");
        for b in list() {
            let sites = [b.clock.site, b.uart_rx.site, b.uart_tx.site, b.reset.site];
            let mut all: Vec<_> = sites.iter().chain(b.leds.iter().map(|l| &l.site)).collect();
            let n = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), n, "{}: a pin is used twice", b.name);
            assert!(
                b.leds.len() >= 2,
                "{}: the bridge top drives two LEDs",
                b.name
            );
            let ice = b.part.starts_with("iCE40");
            assert_eq!(ice, b.family == Family::Ice40Up, "{}", b.name);
            let ecp5 = b.part.starts_with("LFE5U");
            assert_eq!(ecp5, b.family == Family::Ecp5, "{}", b.name);
            // Only the ECP5 flow instantiates a PLL (EHXPLLL).
            assert!(b.pll_hz.is_none() || ecp5, "{}", b.name);
        }
    }
}
