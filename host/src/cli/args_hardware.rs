//! The options of the hardware commands: `bitstream`, `boards`, `program`, `emit-verilog`.

use super::*;

/// Options of `bitstream`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct BitstreamArgs {
    /// Board name (see `systole boards`).
    #[arg(long)]
    pub board: String,
    /// Array size N (default: the largest that fits the board).
    #[arg(long, value_parser = whole)]
    pub array: Option<usize>,
    /// Feature-map words of the conv unit (0: no conv unit, convolutions are lowered on the
    /// host; else a power of two in 512..=32768, e.g. 4096). Costs block RAM: each of the two
    /// gather engines keeps a copy per pair of lanes.
    #[arg(long, value_parser = whole, default_value_t = 0)]
    pub fm_depth: usize,
    /// Word width W in bits (8 to 16) of the array (multipliers, 2W + 16-bit accumulators,
    /// converters); the bridge and the SoC's row stage carry each word sign-extended in 16
    /// bits. Below 16 without the conv unit (--fm-depth 0). Drive the board with the same
    /// --word-bits.
    #[arg(long, value_parser = whole_u32, default_value_t = 16)]
    pub word_bits: u32,
    /// Two multiplies per DSP48E1 (W <= 8, even array sizes): PEs in pairs sharing one
    /// packed multiply; the same results and cycles, half the DSP48E1s, more LUTs.
    #[arg(long)]
    pub dsp_pack: bool,
    /// Build the SoC (7-series and ECP5 boards): the VexRiscv CPU runs the firmware (its image
    /// built now and put into the RAM's initial contents) beside the array; drive it with
    /// `--device serial:PORT` instead of `bridge:`.
    #[arg(long)]
    pub soc: bool,
    /// Design clock in MHz: on a board with a PLL (ulx3s-85f: 50 by default) any frequency
    /// its dividers make exactly, for a design that does not close timing at the default; on
    /// one without, its oscillator or half of it (icebreaker: 12 by default, or 6).
    #[arg(long)]
    pub clock_mhz: Option<f64>,
    /// Build folder.
    #[arg(long, default_value = "build")]
    pub out: PathBuf,
}

/// Options of `boards`.
#[derive(Debug, Clone, Args)]
pub struct BoardsArgs {
    /// Run Yosys on each image at each W and write the measured table to --out (cached by
    /// design hash, so a rerun resumes where it stopped) instead of printing the tables.
    #[arg(long)]
    pub synthesize: bool,
    /// Images to synthesise: bridge (the 7-series bridge top), soc (the SoC at each 7-series
    /// board's RAM), ice40 (the iCE40 board's bridge top at its largest array).
    #[arg(long, default_value = "bridge,soc,ice40", requires = "synthesize")]
    pub image: String,
    /// Array sizes of the 7-series images.
    #[arg(long, default_value = "4,8", requires = "synthesize")]
    pub array: String,
    /// Feature-map words of the conv unit (0: none).
    #[arg(long, default_value = "0", requires = "synthesize")]
    pub fm_depth: String,
    /// Word widths W in bits (8 to 16).
    #[arg(long, default_value = "8,12,16", requires = "synthesize")]
    pub word_bits: String,
    /// Gather the `timing.json` of these build folders (each made by `systole bitstream` with
    /// a routed flow) into the routed table --out (the repository's is
    /// boards/data/routed.json), in the order given.
    #[arg(long, num_args = 1.., conflicts_with = "synthesize")]
    pub routed: Vec<PathBuf>,
    /// The measured table to write (the repository's is boards/data/yosys-w.json, or with
    /// --routed boards/data/routed.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace an existing --out.
    #[arg(long, requires = "out")]
    pub overwrite: bool,
    /// Folder of the synthesis cache [default: ~/.cache/systole/synth, shared with explore].
    #[arg(long, requires = "synthesize")]
    pub synth_cache: Option<PathBuf>,
}

/// Options of `program`.
#[derive(Debug, Clone, Args)]
pub struct ProgramArgs {
    /// Board name (see `systole boards`).
    #[arg(long)]
    pub board: String,
    /// Build folder holding the bitstream.
    #[arg(long, default_value = "build")]
    pub out: PathBuf,
}

/// Options of `emit-verilog`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct EmitArgs {
    /// Array size N.
    #[arg(long, value_parser = whole, default_value_t = 8)]
    pub array: usize,
    /// Rows of each A and B buffer bank (a power of two in 16..=65536): sets the width of
    /// `a_wr_row`/`b_wr_row` and the largest K_LEN.
    #[arg(long, value_parser = whole, default_value_t = 512)]
    pub buffer_depth: usize,
    /// Words of the conv unit's feature-map buffer (a power of two in 512..=32768), or 0 for a
    /// top without the conv unit (its gather commands are then refused).
    #[arg(long, value_parser = whole, default_value_t = systole_core::config::DEFAULT_FM_DEPTH)]
    pub fm_depth: usize,
    /// Word width W in bits (8 to 16): the word ports, multipliers (W x W), accumulators
    /// (2W + 16 bits) and converters of the array; below 16 without the conv unit
    /// (--fm-depth 0).
    #[arg(long, value_parser = whole_u32, default_value_t = 16)]
    pub word_bits: u32,
    /// Two multiplies per DSP48E1 (W <= 8, even array sizes): PEs in pairs sharing one
    /// packed multiply; the same results and cycles, half the DSP48E1s, more LUTs.
    #[arg(long)]
    pub dsp_pack: bool,
    /// Output file (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the Python constants of this `top` for a cocotb testbench (its ports, the
    /// register addresses and bit fields, `encode`/`decode`), e.g. systole_top.py; the same
    /// definitions the Verilog and the Rust drivers come from (tests/cocotb/ uses them).
    #[arg(long)]
    pub cocotb: Option<PathBuf>,
}
