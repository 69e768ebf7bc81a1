//! The flows the CLI runs: `systole bitstream` (the bridge top) and `systole program`.

use super::measured::Image;
use super::routed::{self, Build};
use super::timing::Timing;
use super::tools::{self, files, ResourceReport};
use super::{generate, vivado, Board, BoardError, Family};
use std::path::{Path, PathBuf};
use std::process::Command;
use systole_core::bridge::BAUD;
use systole_core::ArrayConfig;
use systole_hdl::bridge_top::{generate_bridge_verilog_with, BridgeTopOptions};

/// What [`bitstream`] produced.
#[derive(Debug, Clone)]
pub struct BitstreamReport {
    /// Board short name.
    pub board: &'static str,
    /// The array that was built.
    pub config: ArrayConfig,
    /// Build folder holding every generated file, log and report.
    pub out_dir: PathBuf,
    /// Generated Verilog of the bridge top (`bridge_top.v`).
    pub verilog: PathBuf,
    /// Constraints (`board.xdc`, `board.pcf` or `board.lpf`).
    pub constraints: PathBuf,
    /// Vivado batch script (7-series only).
    pub vivado_script: Option<PathBuf>,
    /// Yosys cell counts (for iCE40 and ECP5 with nextpnr's placed logic cells filled in).
    pub resources: ResourceReport,
    /// Routed timing (`timing.json`), when place and route ran (nextpnr, or Vivado).
    pub timing: Option<Timing>,
    /// The bitstream (`top.bit` or `top.bin`), when a vendor or open flow produced one.
    pub bitstream: Option<PathBuf>,
    /// What the user has to do to get the bitstream, when it could not be built here.
    pub next_step: Option<String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BoardError + '_ {
    move |source| BoardError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, BoardError> {
    std::fs::write(&path, text).map_err(io_err(&path))?;
    Ok(path)
}

/// The bridge top's Verilog for `board` (its clock, reset and LED polarity) with the array and
/// conv unit of `cfg`: what [`bitstream`] writes and `systole explore` synthesises.
pub fn bridge_verilog(board: &Board, cfg: &ArrayConfig) -> Result<String, BoardError> {
    let opts = BridgeTopOptions {
        clock_hz: board.design_clock_hz(),
        baud: BAUD,
        reset_active_low: board.reset.active_low,
        led_active_low: board.leds.first().is_some_and(|l| l.active_low),
        halve_clock: board.halve_clock,
        fm_depth: cfg.fm_depth,
    };
    generate_bridge_verilog_with(cfg, &opts).map_err(BoardError::Hdl)
}

/// Writes the bridge top's Verilog and the constraints into `out_dir` (with the conv unit when
/// `cfg.fm_depth` is not 0: conv ops then run on the board, their maps sent over the UART
/// bridge's `'F'` command), runs the Yosys estimate
/// (failing if the design does not fit), then places, routes and builds the bitstream: the
/// open flows (nextpnr-ice40 and icepack, nextpnr-ecp5 and ecppack), Vivado for 7-series if
/// it is on `PATH` (otherwise the report's `next_step` says how to get it; the generated TCL
/// is ready to run). Every routed build writes `timing.json` and fails when it misses its
/// clock.
pub fn bitstream(
    board: &Board,
    cfg: &ArrayConfig,
    out_dir: &Path,
) -> Result<BitstreamReport, BoardError> {
    cfg.validate()
        .map_err(|e| BoardError::Hdl(systole_hdl::HdlError::Config(e)))?;
    std::fs::create_dir_all(out_dir).map_err(io_err(out_dir))?;
    let verilog_text = bridge_verilog(board, cfg)?;
    let verilog = write(out_dir.join(files::VERILOG), &verilog_text)?;
    let mut report = BitstreamReport {
        board: board.name,
        config: *cfg,
        out_dir: out_dir.to_path_buf(),
        verilog: verilog.clone(),
        constraints: PathBuf::new(),
        vivado_script: None,
        resources: ResourceReport::default(),
        timing: None,
        bitstream: None,
        next_step: None,
    };
    let constraints = match board.family {
        Family::Xc7 => {
            let tcl = generate::generate_vivado_tcl(board, &[files::VERILOG, files::XDC], "top");
            report.vivado_script = Some(write(out_dir.join(files::VIVADO_TCL), &tcl)?);
            (files::XDC, generate::generate_xdc(board))
        }
        Family::Ice40Up => (files::PCF, generate::generate_pcf(board)),
        Family::Ecp5 => (files::LPF, generate::generate_lpf(board)),
    };
    report.constraints = write(out_dir.join(constraints.0), &constraints.1)?;
    // Look all tools up first, so a missing one is reported before minutes of synthesis.
    let open = routed::open_tools(board.family)?;
    report.resources = tools::yosys_synth(board, &[files::VERILOG], out_dir)?;
    tools::check_fits(board, &report.resources)?;
    let build = Build {
        board,
        image: Image::Bridge,
        cfg,
    };
    route(build, open.as_ref(), out_dir, &mut report)?;
    Ok(report)
}

/// Place and route after synthesis: the open flow (iCE40, ECP5), or Vivado on 7-series when it
/// is on `PATH` (otherwise the report's `next_step` says how to run the generated TCL). Writes
/// `timing.json`; a missed clock is [`BoardError::TimingNotMet`].
pub(crate) fn route(
    build: Build<'_>,
    open: Option<&routed::OpenTools>,
    out_dir: &Path,
    report: &mut BitstreamReport,
) -> Result<(), BoardError> {
    if let Some(t) = open {
        let (timing, bit) = routed::place_and_route(build, t, out_dir, &mut report.resources)?;
        report.timing = Some(timing);
        report.bitstream = Some(bit);
        return Ok(());
    }
    match tools::run_vivado(out_dir)? {
        tools::VivadoStep::Built => {
            let timing = vivado::timing_from_reports(build, out_dir)?;
            timing.write(out_dir)?;
            report.timing = Some(timing.clone());
            routed::finish(&timing, out_dir)?;
            report.bitstream = Some(out_dir.join(files::BIT));
        }
        tools::VivadoStep::NotInstalled(what) => report.next_step = Some(what),
    }
    Ok(())
}

/// The name of the bitstream file [`bitstream`] leaves in the build folder for this board.
pub fn bitstream_name(board: &Board) -> &'static str {
    match board.family {
        Family::Xc7 | Family::Ecp5 => files::BIT,
        Family::Ice40Up => files::BIN,
    }
}

/// Loads the bitstream in `out_dir` onto the board with openFPGALoader (to SRAM on 7-series;
/// the iCEBreaker's FPGA always boots from its SPI flash, so there it writes the flash).
pub fn program(board: &Board, out_dir: &Path) -> Result<(), BoardError> {
    let name = bitstream_name(board);
    let file = out_dir.join(name);
    if !file.is_file() {
        return Err(BoardError::Io {
            path: file,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no bitstream here: run `systole bitstream` for this board first",
            ),
        });
    }
    let loader = tools::require("openFPGALoader")?;
    let mut cmd = Command::new(loader);
    cmd.args(["-b", board.loader_board, name]);
    tools::run_logged("openFPGALoader", cmd, out_dir, "program.log")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{find, model};
    use super::*;

    #[test]
    fn program_without_bitstream_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("systole-prog-{}", std::process::id()));
        // The cause is part of the error chain (as `systole` prints it).
        let e = format!(
            "{:#}",
            anyhow::Error::from(program(find("basys3").unwrap(), &dir).unwrap_err())
        );
        assert!(
            e.contains("top.bit") && e.contains("systole bitstream"),
            "{e}"
        );
    }

    #[test]
    fn bad_config_is_rejected_before_any_file_is_written() {
        let dir = std::env::temp_dir().join(format!("systole-bad-{}", std::process::id()));
        let cfg = ArrayConfig {
            size: 1,
            ..ArrayConfig::square(2)
        };
        let e = bitstream(find("arty-a7-35").unwrap(), &cfg, &dir).unwrap_err();
        // The configuration's own error stays the typed cause (not flattened into text).
        assert!(
            matches!(
                e,
                BoardError::Hdl(systole_hdl::HdlError::Config(
                    systole_core::config::ConfigError::Size(1)
                ))
            ),
            "{e:?}"
        );
        let cause = std::error::Error::source(&e).map(|c| c.to_string());
        assert!(cause.is_some_and(|c| c.contains("array size 1")), "{e:?}");
        assert!(!dir.exists());
    }

    fn build_dir(name: &str) -> PathBuf {
        std::env::var_os("SYSTOLE_BOARD_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir)
            .join(name)
    }

    /// The full open iCE40 flow for the largest array that fits the iCEBreaker (about a
    /// minute of Yosys and nextpnr): a real `top.bin`, one SB_MAC16 per MAC, timing met.
    #[test]
    #[ignore]
    fn icebreaker_open_flow_builds_a_bitstream() {
        let board = find("icebreaker").unwrap();
        let cfg = model::largest_array(board).unwrap();
        let dir = build_dir("systole-icebreaker");
        let r = bitstream(board, &cfg, &dir).unwrap();
        println!("{r:#?}");
        let bin = std::fs::metadata(r.bitstream.as_ref().unwrap()).unwrap();
        // An iCE40UP5K image is about 104 kB whatever the design.
        assert!(bin.len() > 100_000, "{} bytes", bin.len());
        assert_eq!(r.resources.dsps, (cfg.size * cfg.size) as u32);
        assert!(r.resources.logic_cells > 0 && r.resources.logic_cells <= 5280);
        let t = r.timing.unwrap();
        assert!(t.met && t.fmax_mhz >= t.clock_mhz, "{t:?}");
        assert_eq!(Timing::read(&dir).unwrap(), t);
    }

    /// Yosys `synth_xilinx` estimate of the 8x8 array on the Arty A7-35T (several minutes):
    /// every MAC on a DSP48E1 and the design within the part.
    #[test]
    #[ignore]
    fn arty_8x8_maps_each_mac_to_a_dsp48() {
        let board = find("arty-a7-35").unwrap();
        let dir = build_dir("systole-arty-8x8");
        let cfg = ArrayConfig {
            fm_depth: 0,
            ..ArrayConfig::square(8)
        };
        let r = bitstream(board, &cfg, &dir).unwrap();
        println!("{r:#?}");
        assert_eq!(r.resources.dsps, 64);
        assert!(r.bitstream.is_some() || r.next_step.as_deref().unwrap().contains("Vivado"));
    }
}
