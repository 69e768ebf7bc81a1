//! Runners for the external tools (Yosys, nextpnr-ice40, icepack, Vivado, openFPGALoader) and
//! parsers for their reports. A missing tool is a [`BoardError::ToolMissing`] with install
//! instructions, never a panic; each run's full output goes to a log file in the build folder.

use super::{Board, BoardError, Family};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Names of the files in the build folder. Every tool runs inside that folder and is handed
/// these names, never paths relative to the caller's folder (which the tool does not run in).
pub mod files {
    /// The bridge top's Verilog.
    pub const VERILOG: &str = "bridge_top.v";
    /// 7-series constraints.
    pub const XDC: &str = "board.xdc";
    /// iCE40 constraints.
    pub const PCF: &str = "board.pcf";
    /// Vivado batch script.
    pub const VIVADO_TCL: &str = "vivado.tcl";
    /// Yosys netlist for nextpnr-ice40.
    pub const JSON: &str = "top.json";
    /// nextpnr-ice40's placed and routed design.
    pub const ASC: &str = "top.asc";
    /// 7-series bitstream (Vivado's `write_bitstream`).
    pub const BIT: &str = "top.bit";
    /// iCE40 bitstream (icepack).
    pub const BIN: &str = "top.bin";
}

/// Cells of a synthesized netlist, from Yosys `stat` (and nextpnr's utilization for iCE40).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceReport {
    /// Logic LUTs (LUT1..LUT6 on 7-series, SB_LUT4 on iCE40).
    pub luts: u32,
    /// LUTs used as distributed RAM or shift registers (7-series RAM32M, RAM64M, SRL16E, ...;
    /// a RAM32M takes four LUTs but counts once here, as Yosys lists it).
    pub lutram: u32,
    /// Flip-flops (FD*, SB_DFF*).
    pub ffs: u32,
    /// Hard multipliers (DSP48E1, SB_MAC16).
    pub dsps: u32,
    /// Block RAMs in the board budget's unit (RAMB18E1 + 2 x RAMB36E1, or SB_RAM40_4K).
    pub brams: u32,
    /// RAMB36E1 cells among them (each counted as two in `brams`; 0 on iCE40).
    pub ramb36: u32,
    /// Carry cells (CARRY4, SB_CARRY).
    pub carry: u32,
    /// Wide multiplexers (MUXF7, MUXF8).
    pub muxes: u32,
    /// Placed logic cells reported by nextpnr (iCE40 only; 0 before place and route).
    pub logic_cells: u32,
}

/// Maximum clock frequency reported by a place-and-route tool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fmax {
    /// Achieved maximum frequency in MHz.
    pub mhz: f64,
    /// The clock the logic runs at, in MHz.
    pub target_mhz: f64,
}

impl Fmax {
    /// Whether the design runs at its clock.
    pub fn meets_target(&self) -> bool {
        self.mhz >= self.target_mhz
    }
}

/// One sentence: `fmax 8.09 MHz, timing met at the 6 MHz logic clock`.
impl std::fmt::Display for Fmax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.meets_target() {
            "timing met"
        } else {
            "timing NOT met (the board may compute wrong results)"
        };
        write!(
            f,
            "fmax {:.2} MHz, {verdict} at the {} MHz logic clock",
            self.mhz, self.target_mhz
        )
    }
}

/// Install instructions per tool.
fn install_hint(tool: &str) -> String {
    match tool {
        "yosys" => "install with apt-get install yosys (./x does this)".into(),
        "nextpnr-ice40" => "install with apt-get install nextpnr-ice40 (./x does this)".into(),
        "icepack" => "install with apt-get install fpga-icestorm (./x does this)".into(),
        "openFPGALoader" => "install with apt-get install openfpgaloader (./x does this)".into(),
        other => format!("install {other} and put it on PATH"),
    }
}

/// Finds `tool` on `PATH`, as an absolute path (tools run inside the build folder, where a
/// relative `PATH` entry such as `bin` would no longer lead to it).
pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .and_then(|p| std::path::absolute(p).ok())
}

/// Finds `tool` or says how to install it.
pub fn require(tool: &'static str) -> Result<PathBuf, BoardError> {
    which(tool).ok_or_else(|| BoardError::ToolMissing {
        tool,
        hint: install_hint(tool),
    })
}

/// Runs `cmd` in `dir`, writing stdout and stderr to `dir/log_name`; returns the log text.
/// `cmd` runs inside `dir`, so the files it names must be names in `dir` (see
/// [`files`]), not paths relative to the caller's folder.
pub fn run_logged(
    tool: &'static str,
    mut cmd: Command,
    dir: &Path,
    log_name: &str,
) -> Result<String, BoardError> {
    let log = dir.join(log_name);
    let out = cmd
        .current_dir(dir)
        .output()
        .map_err(|source| BoardError::Io {
            path: PathBuf::from(tool),
            source,
        })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    std::fs::write(&log, &text).map_err(|source| BoardError::Io {
        path: log.clone(),
        source,
    })?;
    if !out.status.success() {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        return Err(BoardError::ToolFailed {
            tool,
            status: out.status.to_string(),
            log,
            tail,
        });
    }
    Ok(text)
}

/// Parses the cell table of Yosys `stat` output. With several module sections (no
/// `-flatten`), the last one (the top, which Yosys prints last) counts; `-flatten` leaves one.
pub fn parse_yosys_stat(text: &str) -> Result<ResourceReport, BoardError> {
    let section = text
        .rfind("Number of cells:")
        .map(|i| &text[i..])
        .ok_or_else(|| BoardError::Parse {
            tool: "yosys",
            what: "no `Number of cells` line in the stat output".into(),
        })?;
    let mut r = ResourceReport::default();
    for line in section.lines().skip(1) {
        let mut it = line.split_whitespace();
        let (Some(cell), Some(count), None) = (it.next(), it.next(), it.next()) else {
            if line.trim().is_empty() {
                continue;
            }
            break;
        };
        let Ok(count) = count.parse::<u32>() else {
            break;
        };
        let cell = cell.trim_start_matches('$');
        match cell {
            c if c.starts_with("LUT") || c == "SB_LUT4" => r.luts += count,
            c if c.starts_with("RAM32")
                || c.starts_with("RAM64")
                || c.starts_with("RAM128")
                || c.starts_with("SRL") =>
            {
                r.lutram += count
            }
            c if c.starts_with("FD") || c.starts_with("SB_DFF") => r.ffs += count,
            "DSP48E1" | "SB_MAC16" => r.dsps += count,
            "RAMB18E1" | "SB_RAM40_4K" => r.brams += count,
            "RAMB36E1" => {
                r.brams += 2 * count;
                r.ramb36 += count
            }
            "CARRY4" | "SB_CARRY" => r.carry += count,
            "MUXF7" | "MUXF8" => r.muxes += count,
            _ => {}
        }
    }
    Ok(r)
}

/// Synthesizes the Verilog files named `verilog` in `dir` (top module `top`) with Yosys for the
/// board's family, running inside `dir`, and returns the cell counts. 7-series uses `synth_xilinx -flatten -family xc7` (so each MAC with
/// its accumulator lands in one DSP48E1); iCE40 uses `synth_ice40 -dsp` and also writes
/// `top.json` for nextpnr.
pub fn yosys_synth(
    board: &Board,
    verilog: &[&str],
    dir: &Path,
) -> Result<ResourceReport, BoardError> {
    let yosys = require("yosys")?;
    let v = verilog.join(" ");
    let json = files::JSON;
    let script = match board.family {
        Family::Xc7 => format!(
            "read_verilog {v}; synth_xilinx -flatten -family xc7 -top top; tee -q -o yosys_stat.txt stat"
        ),
        Family::Ice40Up => format!(
            "read_verilog {v}; synth_ice40 -dsp -top top -json {json}; tee -q -o yosys_stat.txt stat"
        ),
    };
    let mut cmd = Command::new(yosys);
    cmd.arg("-q").arg("-p").arg(script);
    run_logged("yosys", cmd, dir, "yosys.log")?;
    let stat_path = dir.join("yosys_stat.txt");
    let stat = std::fs::read_to_string(&stat_path).map_err(|source| BoardError::Io {
        path: stat_path,
        source,
    })?;
    parse_yosys_stat(&stat)
}

/// The first line of `yosys -V` (`Yosys 0.23 (git sha1 7ce5011c24b)`): what a synthesis
/// result depends on besides its Verilog and flow, or how to install Yosys.
pub fn yosys_version() -> Result<String, BoardError> {
    let yosys = require("yosys")?;
    let out = Command::new(yosys)
        .arg("-V")
        .output()
        .map_err(|source| BoardError::Io {
            path: PathBuf::from("yosys"),
            source,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next().map(str::trim) {
        Some(v) if out.status.success() && !v.is_empty() => Ok(v.to_string()),
        _ => Err(BoardError::Parse {
            tool: "yosys",
            what: format!("`yosys -V` printed {text:?}"),
        }),
    }
}

/// Fails with [`BoardError::DoesNotFit`] if the report exceeds the board's budget.
pub fn check_fits(board: &Board, r: &ResourceReport) -> Result<(), BoardError> {
    let b = &board.budget;
    let luts = r.luts.max(r.logic_cells);
    for (what, need, have) in [
        ("LUTs", luts + r.lutram, b.luts),
        ("flip-flops", r.ffs, b.ffs),
        ("DSP blocks", r.dsps, b.dsps),
        ("block RAMs", r.brams, b.bram_blocks),
    ] {
        if need > have {
            return Err(BoardError::DoesNotFit {
                board: board.name,
                what: format!("{need} {what} needed, {have} available"),
            });
        }
    }
    Ok(())
}

/// Parses nextpnr-ice40's log: the slowest clock domain's final `Max frequency for clock`
/// (nextpnr prints the figures after placement and again after routing; the last per clock
/// counts) and the logic cell count from the utilization table.
pub fn parse_nextpnr(log: &str, target_mhz: f64) -> Result<(Fmax, u32), BoardError> {
    let mut per_clock: Vec<(&str, f64)> = Vec::new();
    for line in log
        .lines()
        .filter(|l| l.contains("Max frequency for clock"))
    {
        let Some((name, rest)) = line.split_once("':") else {
            continue;
        };
        let Some(mhz) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        match per_clock.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = mhz,
            None => per_clock.push((name, mhz)),
        }
    }
    let mhz = per_clock
        .iter()
        .map(|(_, f)| *f)
        .reduce(f64::min)
        .ok_or_else(|| BoardError::Parse {
            tool: "nextpnr-ice40",
            what: "no `Max frequency for clock` line".into(),
        })?;
    let lcs = log
        .lines()
        .rfind(|l| l.contains("ICESTORM_LC:"))
        .and_then(|l| l.split("ICESTORM_LC:").nth(1))
        .and_then(|rest| rest.split('/').next())
        .and_then(|n| n.trim().parse::<u32>().ok())
        .ok_or_else(|| BoardError::Parse {
            tool: "nextpnr-ice40",
            what: "no `ICESTORM_LC:` utilization line".into(),
        })?;
    Ok((Fmax { mhz, target_mhz }, lcs))
}

/// What the Vivado step of a 7-series flow gave: the bitstream, or the sentence saying how to
/// get Vivado and run the generated TCL (`files::VIVADO_TCL` in `out_dir`) by hand.
pub enum VivadoStep {
    /// Vivado ran the TCL; the bitstream's path.
    Built(PathBuf),
    /// Vivado is not on `PATH`: what to do.
    NotInstalled(String),
}

/// Runs the generated `files::VIVADO_TCL` in `out_dir` when Vivado is on `PATH` (log in
/// `vivado.log`); otherwise says how to install it and run the script.
pub fn run_vivado(out_dir: &Path) -> Result<VivadoStep, BoardError> {
    let Some(vivado) = which("vivado") else {
        return Ok(VivadoStep::NotInstalled(format!(
            "Vivado is not on PATH: install Vivado ML Standard from AMD and source \
             settings64.sh, then run `vivado -mode batch -source {}` in {}",
            files::VIVADO_TCL,
            out_dir.display()
        )));
    };
    let mut cmd = Command::new(vivado);
    cmd.args(["-mode", "batch", "-nojournal", "-source", files::VIVADO_TCL]);
    run_logged("vivado", cmd, out_dir, "vivado.log")?;
    Ok(VivadoStep::Built(out_dir.join(files::BIT)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_xilinx_stat() {
        let text = "\n=== top ===\n\n   Number of wires:                 12\n   \
            Number of cells:               1234\n     BUFG                            1\n     \
            CARRY4                         20\n     DSP48E1                        64\n     \
            FDRE                         1000\n     FDSE                            8\n     \
            LUT2                          100\n     LUT6                           50\n     \
            MUXF7                           3\n     RAM32M                          4\n     \
            RAMB18E1                        6\n     RAMB36E1                        2\n\n   \
            Estimated number of LCs:        150\n";
        let r = parse_yosys_stat(text).unwrap();
        assert_eq!(
            r,
            ResourceReport {
                luts: 150,
                lutram: 4,
                ffs: 1008,
                dsps: 64,
                brams: 10,
                ramb36: 2,
                carry: 20,
                muxes: 3,
                logic_cells: 0
            }
        );
        assert!(parse_yosys_stat("nothing here").is_err());
    }

    #[test]
    fn parses_nextpnr_log() {
        let log = "Info: Device utilisation:\nInfo: \t         ICESTORM_LC:  1840/ 5280    34%\n\
            Info: Max frequency for clock 'clock$SB_IO_IN_$glb_clk': 20.10 MHz (PASS at 12.00 MHz)\n\
            Info: Max frequency for clock 'sys_clock': 9.10 MHz (PASS at 6.00 MHz)\n\
            Info: Max frequency for clock 'clock$SB_IO_IN_$glb_clk': 18.52 MHz (PASS at 12.00 MHz)\n\
            Info: Max frequency for clock 'sys_clock': 8.25 MHz (PASS at 6.00 MHz)\n";
        let (f, lcs) = parse_nextpnr(log, 6.0).unwrap();
        assert_eq!(lcs, 1840);
        // The slowest domain's last figure.
        assert!((f.mhz - 8.25).abs() < 1e-9 && f.meets_target(), "{f:?}");
        assert_eq!(
            f.to_string(),
            "fmax 8.25 MHz, timing met at the 6 MHz logic clock"
        );
        let slow = parse_nextpnr(log, 8.5).unwrap().0;
        assert!(!slow.meets_target(), "{slow:?}");
        assert!(slow.to_string().contains("timing NOT met"), "{slow}");
        assert!(parse_nextpnr("Info: nothing", 12.0).is_err());
    }

    #[test]
    fn missing_tool_says_how_to_install() {
        let e = require("systole-no-such-tool").unwrap_err().to_string();
        assert!(e.contains("systole-no-such-tool not found"), "{e}");
        assert!(install_hint("yosys").contains("apt-get install yosys"));
    }

    #[test]
    fn fit_check_names_the_resource() {
        let b = super::super::find("icebreaker").unwrap();
        let r = ResourceReport {
            dsps: 9,
            ..ResourceReport::default()
        };
        let e = check_fits(b, &r).unwrap_err().to_string();
        assert!(e.contains("9 DSP blocks needed, 8 available"), "{e}");
        assert!(check_fits(b, &ResourceReport { dsps: 8, ..r }).is_ok());
    }
}
