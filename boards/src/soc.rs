//! The SoC on a board (`systole bitstream --soc`): the VexRiscv CPU running the firmware from
//! on-chip RAM beside the accelerator (`systole_hdl::soc`), for 7-series and ECP5 boards.
//!
//! Generation ([`soc_files`]) is pure: the SoC's Verilog with the firmware image as the RAM's
//! `$readmemh` file, the constraints (XDC and the Vivado TCL, or the ECP5 LPF), from the board,
//! the array and the image words. [`bitstream`] refuses a design whose block RAM the model
//! already knows is too much (before any file), writes the files, copies the CPU's Verilog
//! beside them, runs the Yosys fit check on the whole SoC, then place and route: nextpnr-ecp5
//! on ECP5, Vivado when it is on `PATH` on 7-series.
//!
//! Block RAM is what limits the SoC: the CPU's caches and register file, the RAM holding the
//! firmware and the UART's receive FIFO come on top of the accelerator's buffers and feature
//! maps ([`bram_parts`], counted in RAMB18 and checked against Yosys in the tests).

use super::flow::BitstreamReport;
use super::measured::Image;
use super::routed::{self, Build};
use super::tools::{self, files, ResourceReport};
use super::{generate, model, Board, BoardError, Family};
use std::path::Path;
use systole_core::bridge::BAUD;
use systole_core::soc::BASE_RAM_BYTES;
use systole_core::soc::RX_FIFO_BYTES;
use systole_core::ArrayConfig;
use systole_hdl::soc::{generate_soc_verilog, SocOptions, VEXRISCV_FILE};

/// The SoC's Verilog in the build folder.
pub const SOC_VERILOG: &str = "soc_top.v";
/// The firmware image, one 32-bit word a line from RAM address 0 (`$readmemh`).
pub const FIRMWARE_HEX: &str = "firmware.hex";

/// The CPU (VexRiscv RV32IMAC, `VexRiscv_IMAC.v`) on 7-series, Yosys 0.23 `synth_xilinx
/// -flatten`: block RAMs in RAMB18 (the register file twice, instruction and data cache data
/// and tags).
pub const CPU_RAMB18: u32 = 10;
/// Logic the SoC adds to the accelerator's bridge top (LUTs, flip-flops, DSP48E1): the CPU,
/// bus, RAM ports, UART FIFO, timer and row stages, less the UART bridge it replaces. Fitted
/// to Yosys 0.23 `synth_xilinx -flatten`: the SoC with 8x8 and a 4096-word conv unit, 16,800
/// LUTs, 14,775 flip-flops, 68 DSP48E1, against the bridge top's 14,313 / 13,003 / 64 (with
/// 8192 words the difference is 2,820 LUTs and 1,773 flip-flops: ABC's choices vary by a few
/// hundred LUTs between designs).
pub const SOC_LOGIC: (u32, u32, u32) = (16_800 - 14_313, 14_775 - 13_003, CPU_DSP48E1);

/// DSP48E1 of the CPU (its multiplier, Yosys 0.23 on `VexRiscv_IMAC.v` alone): the SoC's DSPs
/// less these are the array's.
pub const CPU_DSP48E1: u32 = 4;

/// Data bits of a RAMB18 at 32 bits wide (512 x 32) and at 8 bits wide (2048 x 8).
const RAMB18_BITS: u64 = 16 * 1024;

/// The SoC's RAM on `board` (the table's `soc_ram_bytes`; the image's own 64 KiB for a board
/// without a SoC entry).
pub fn ram_bytes(board: &Board) -> u32 {
    board.soc_ram_bytes.unwrap_or(BASE_RAM_BYTES)
}

/// Where the SoC's block RAM goes, in RAMB18 (a RAMB36 counts two): the CPU, its RAM, the UART
/// FIFO, the A/B operand buffers and the conv unit's feature-map copies.
pub fn bram_parts(board: &Board, cfg: &ArrayConfig) -> [(&'static str, u32); 5] {
    let acc = model::estimate(board, cfg);
    let fm = model::estimate(
        board,
        &ArrayConfig {
            fm_depth: 0,
            ..*cfg
        },
    );
    let blocks = |bytes: u64| (bytes * 8).div_ceil(RAMB18_BITS) as u32;
    [
        ("CPU", CPU_RAMB18),
        ("RAM", blocks(u64::from(ram_bytes(board)))),
        ("UART FIFO", blocks(RX_FIFO_BYTES as u64)),
        ("A/B buffers", fm.brams),
        ("feature maps", acc.brams - fm.brams),
    ]
}

/// The estimate of the whole SoC with the accelerator `cfg` (the CPU's logic and block RAM as
/// measured on 7-series, also on ECP5 until measured there).
pub fn estimate(board: &Board, cfg: &ArrayConfig) -> model::Estimate {
    let acc = model::estimate(board, cfg);
    let (luts, ffs, dsps) = SOC_LOGIC;
    model::Estimate {
        luts: acc.luts + luts,
        ffs: acc.ffs + ffs,
        dsps: acc.dsps + dsps,
        brams: bram_parts(board, cfg).iter().map(|p| p.1).sum(),
    }
}

/// The largest (array, feature-map words) that fits beside the CPU by the estimate: the largest
/// square array whose smallest conv unit fits, with the deepest map that still does; `None`
/// when the board has no SoC (iCE40) or nothing fits.
pub fn largest_conv_unit(board: &Board) -> Option<ArrayConfig> {
    if !has_soc(board) {
        return None;
    }
    model::largest_conv_unit_by(board, estimate)
}

/// Whether the SoC is built for `board`: 7-series and ECP5 (the iCE40UP5K's block RAM holds
/// no CPU beside the array).
pub fn has_soc(board: &Board) -> bool {
    matches!(board.family, Family::Xc7 | Family::Ecp5)
}

/// Why the SoC with `cfg` cannot fit `board`, known without synthesis: a board without the
/// SoC (iCE40), more hard multipliers than the part has, or more block RAM than it has (the
/// count is exact per memory, see [`bram_parts`]); `None` when only Yosys can tell.
pub fn clearly_too_big(board: &Board, cfg: &ArrayConfig) -> Option<String> {
    if !has_soc(board) {
        return Some(format!(
            "the SoC is built for 7-series and ECP5 boards only ({} is not one): build the \
             bridge image without --soc",
            board.name
        ));
    }
    if let Some(why) = model::clearly_too_big(board, cfg) {
        return Some(why);
    }
    let e = estimate(board, cfg);
    let have = board.budget.bram_blocks;
    if e.brams <= have {
        return None;
    }
    let parts: Vec<String> = bram_parts(board, cfg)
        .iter()
        .map(|(what, n)| format!("{what} {n}"))
        .collect();
    let largest = match largest_conv_unit(board) {
        Some(c) => format!(
            "the largest conv unit that fits beside the CPU is {0}x{0} with {1} words",
            c.size, c.fm_depth
        ),
        None => "no conv unit fits beside the CPU".into(),
    };
    Some(format!(
        "the SoC with a {0}x{0} array and {1} feature-map words needs {2} RAMB18 ({3}) and the \
         part has {have}; {largest} (or leave --fm-depth out)",
        cfg.size,
        cfg.fm_depth,
        e.brams,
        parts.join(", ")
    ))
}

/// The SoC's Verilog for `board` (its clock, pins and RAM) with the accelerator `cfg`, the RAM
/// starting from the `$readmemh` file `ram_init` (`None`: no initial contents, which changes no
/// cell: what the synthesis of `systole boards --synthesize` reads, so a firmware change does
/// not make it synthesise again).
pub fn soc_verilog(
    board: &Board,
    cfg: &ArrayConfig,
    ram_init: Option<String>,
) -> Result<String, BoardError> {
    let opts = SocOptions {
        clock_hz: board.logic_clock_hz(),
        baud: BAUD,
        reset_active_low: board.reset.active_low,
        led_active_low: board.leds.first().is_some_and(|l| l.active_low),
        ram_bytes: ram_bytes(board),
        fm_depth: cfg.fm_depth,
        ram_init,
        backdoor: false,
    };
    generate_soc_verilog(cfg, &opts).map_err(BoardError::Hdl)
}

/// The generated files of the SoC build, (name, text) in the order they are written: the SoC's
/// Verilog, the firmware image, and the XDC and the Vivado TCL (7-series) or the LPF (ECP5).
/// `image` is the firmware's RAM
/// words from address 0 (`systole_soc_image::Image::words`); the rest of the RAM is zero.
pub fn soc_files(
    board: &Board,
    cfg: &ArrayConfig,
    image: &[u32],
) -> Result<Vec<(&'static str, String)>, BoardError> {
    if let Some(what) = clearly_too_big(board, cfg) {
        return Err(BoardError::DoesNotFit {
            board: board.name,
            what,
        });
    }
    let ram_words = ram_bytes(board) as usize / 4;
    if image.is_empty() || image.len() > ram_words {
        return Err(BoardError::FirmwareImage {
            words: image.len(),
            ram_words,
        });
    }
    let verilog = soc_verilog(board, cfg, Some(FIRMWARE_HEX.into()))?;
    let mut hex = String::with_capacity(ram_words * 9);
    for i in 0..ram_words {
        hex.push_str(&format!("{:08x}\n", image.get(i).copied().unwrap_or(0)));
    }
    let mut out = vec![(SOC_VERILOG, verilog), (FIRMWARE_HEX, hex)];
    if board.family == Family::Ecp5 {
        out.push((files::LPF, generate::generate_lpf(board)));
    } else {
        let tcl =
            generate::generate_vivado_tcl(board, &[VEXRISCV_FILE, SOC_VERILOG, files::XDC], "top");
        out.push((files::XDC, generate::generate_xdc(board)));
        out.push((files::VIVADO_TCL, tcl));
    }
    Ok(out)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BoardError + '_ {
    move |source| BoardError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the SoC build into `out_dir` (the files of [`soc_files`] and a copy of the CPU's
/// Verilog `cpu`, so every tool runs inside the folder on names), runs the Yosys fit check of
/// the whole SoC (failing if it does not fit), then place and route (nextpnr-ecp5 and ecppack
/// on ECP5, Vivado if it is on `PATH` on 7-series), writing `timing.json`.
pub fn bitstream(
    board: &Board,
    cfg: &ArrayConfig,
    out_dir: &Path,
    image: &[u32],
    cpu: &Path,
) -> Result<BitstreamReport, BoardError> {
    let generated = soc_files(board, cfg, image)?;
    let open = routed::open_tools(board.family)?;
    std::fs::create_dir_all(out_dir).map_err(io_err(out_dir))?;
    let cpu_copy = out_dir.join(VEXRISCV_FILE);
    std::fs::copy(cpu, &cpu_copy).map_err(io_err(cpu))?;
    for (name, text) in &generated {
        let path = out_dir.join(name);
        std::fs::write(&path, text).map_err(io_err(&path))?;
    }
    let xc7 = board.family == Family::Xc7;
    let mut report = BitstreamReport {
        board: board.name,
        config: *cfg,
        out_dir: out_dir.to_path_buf(),
        verilog: out_dir.join(SOC_VERILOG),
        constraints: out_dir.join(if xc7 { files::XDC } else { files::LPF }),
        vivado_script: xc7.then(|| out_dir.join(files::VIVADO_TCL)),
        resources: ResourceReport::default(),
        timing: None,
        bitstream: None,
        next_step: None,
    };
    report.resources = tools::yosys_synth(board, &[VEXRISCV_FILE, SOC_VERILOG], out_dir)?;
    tools::check_fits(board, &report.resources)?;
    let build = Build {
        board,
        image: Image::Soc,
        cfg,
    };
    super::flow::route(build, open.as_ref(), out_dir, &mut report)?;
    Ok(report)
}

#[cfg(test)]
mod tests;
