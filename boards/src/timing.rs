//! Routed timing: what place and route says about a build, read from the router's own report
//! (nextpnr's JSON `--report`, Vivado's `report_timing_summary` and `report_utilization` text)
//! and written as `timing.json` beside the bitstream. One record per build: the image, the
//! clock it is built for, the Fmax achieved, whether it is met, the worst path's ends, the
//! placed resources and the tool versions, so `systole boards --routed` can collect builds
//! into the measured routed table without re-reading any log.

use super::{BoardError, Family};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file every routed flow writes into its build folder.
pub const TIMING_FILE: &str = "timing.json";

/// One clock domain as the router reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockTiming {
    /// The clock's net name in the routed design.
    pub name: String,
    /// Achieved maximum frequency in MHz.
    pub fmax_mhz: f64,
    /// The frequency it is constrained to, in MHz.
    pub clock_mhz: f64,
}

impl ClockTiming {
    /// Achieved over constrained: below 1 the domain misses its clock.
    fn margin(&self) -> f64 {
        self.fmax_mhz / self.clock_mhz
    }
}

/// The worst path of the slowest domain: where it starts and ends (cell and pin).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorstPath {
    /// Launching cell and pin (a flip-flop's clock or output, a RAM's read port...).
    pub from: String,
    /// Capturing cell and pin.
    pub to: String,
    /// Total delay in ns, when the report gives it.
    pub delay_ns: Option<f64>,
}

/// Placed and routed resources (the router's utilization; LUTs are logic cells on iCE40 and
/// ECP5: a LUT4 slot each, carry cells taking theirs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    /// LUTs or logic cells.
    pub luts: u32,
    /// Flip-flops.
    pub ffs: u32,
    /// Hard multipliers.
    pub dsps: u32,
    /// Block RAMs in the board budget's unit.
    pub brams: u32,
}

/// What a routed build's timing is (`timing.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Board short name.
    pub board: String,
    /// Bridge top or SoC.
    pub image: super::measured::Image,
    /// Array size n (n x n).
    pub array: usize,
    /// Conv unit feature-map words (0: none).
    pub fm_depth: usize,
    /// Word width W.
    pub word_bits: u32,
    /// The clock the logic is built for, in MHz.
    pub clock_mhz: f64,
    /// Achieved Fmax of the domain with the least margin, in MHz.
    pub fmax_mhz: f64,
    /// Every domain meets its clock.
    pub met: bool,
    /// Every clock domain the router timed.
    pub clocks: Vec<ClockTiming>,
    /// The critical path of the domain with the least margin.
    pub worst_path: Option<WorstPath>,
    /// Placed resources.
    pub placed: Placed,
    /// Synthesis tool and version.
    pub synthesis: String,
    /// Place-and-route tool and version.
    pub place_and_route: String,
}

/// The router's verdict alone, before the build's identity is added.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterReport {
    /// Every clock domain.
    pub clocks: Vec<ClockTiming>,
    /// Critical path of the tightest domain.
    pub worst_path: Option<WorstPath>,
    /// Placed resources.
    pub placed: Placed,
}

impl RouterReport {
    /// The domain with the least margin (achieved over constrained).
    pub fn tightest(&self) -> Option<&ClockTiming> {
        self.clocks
            .iter()
            .min_by(|a, b| a.margin().total_cmp(&b.margin()))
    }
}

impl Timing {
    /// The one line the flows print: `timing met: fmax 61.20 MHz at the 50 MHz clock`, or
    /// what fails and where.
    pub fn line(&self) -> String {
        let verdict = if self.met {
            "timing met"
        } else {
            "timing NOT met"
        };
        let mut s = format!(
            "{verdict}: fmax {:.2} MHz for the {} MHz clock ({}, routed by {})",
            self.fmax_mhz,
            trim_mhz(self.clock_mhz),
            self.board,
            self.place_and_route
        );
        if let Some(p) = &self.worst_path {
            s.push_str(&format!("; worst path {} -> {}", p.from, p.to));
        }
        s
    }

    /// The `systole bitstream` command that builds this design (into `DIR`).
    pub fn command(&self) -> String {
        let mut s = format!("systole bitstream --board {}", self.board);
        if self.image == super::measured::Image::Soc {
            s.push_str(" --soc");
        }
        s.push_str(&format!(
            " --array {} --fm-depth {} --word-bits {}",
            self.array, self.fm_depth, self.word_bits
        ));
        let default = super::find(&self.board)
            .map(|b| f64::from(b.logic_clock_hz()) / 1e6)
            .ok();
        if default.is_some_and(|d| (d - self.clock_mhz).abs() > 1e-9) {
            s.push_str(&format!(" --clock-mhz {}", trim_mhz(self.clock_mhz)));
        }
        s + " --out DIR"
    }

    /// Writes `dir/timing.json`.
    pub fn write(&self, dir: &Path) -> Result<(), BoardError> {
        let path = dir.join(TIMING_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| BoardError::Parse {
            tool: "timing.json",
            what: e.to_string(),
        })? + "\n";
        std::fs::write(&path, text).map_err(|source| BoardError::Io { path, source })
    }

    /// Reads `dir/timing.json` (a build folder of `systole bitstream`).
    pub fn read(dir: &Path) -> Result<Timing, BoardError> {
        let path = dir.join(TIMING_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| BoardError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| BoardError::Parse {
            tool: "timing.json",
            what: format!("{}: {e}", path.display()),
        })
    }
}

/// `50` for 50.0, `12.5` for 12.5.
pub fn trim_mhz(mhz: f64) -> String {
    let s = format!("{mhz:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn bad(tool: &'static str, what: impl Into<String>) -> BoardError {
    BoardError::Parse {
        tool,
        what: what.into(),
    }
}

/// Reads nextpnr's JSON report (`--report`): `fmax` per clock (achieved and constraint),
/// `critical_paths` (the tightest clock's path gives the worst path's ends) and `utilization`
/// (used cells per bel type). `family` picks the bel types that are LUTs, flip-flops,
/// multipliers and block RAMs.
pub fn parse_nextpnr_report(text: &str, family: Family) -> Result<RouterReport, BoardError> {
    const TOOL: &str = "nextpnr";
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(TOOL, format!("report is not JSON: {e}")))?;
    let fmax = v.get("fmax").and_then(|f| f.as_object()).ok_or_else(|| {
        bad(
            TOOL,
            "report has no `fmax` object (was timing analysis run?)",
        )
    })?;
    let mut clocks = Vec::new();
    for (name, c) in fmax {
        let num = |key: &str| c.get(key).and_then(serde_json::Value::as_f64);
        let (Some(achieved), Some(constraint)) = (num("achieved"), num("constraint")) else {
            return Err(bad(
                TOOL,
                format!("clock {name} lacks `achieved` or `constraint`"),
            ));
        };
        clocks.push(ClockTiming {
            name: name.clone(),
            fmax_mhz: achieved,
            clock_mhz: constraint,
        });
    }
    if clocks.is_empty() {
        return Err(bad(TOOL, "report times no clock"));
    }
    let mut report = RouterReport {
        clocks,
        worst_path: None,
        placed: placed_from_utilization(&v, family),
    };
    let tight = report.tightest().map(|c| c.name.clone());
    let paths = v
        .get("critical_paths")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    // A path's clocks are `posedge NAME` (nextpnr 0.11) or `NAME` (0.4).
    let clock = |p: &serde_json::Value, key: &str| {
        p.get(key).and_then(|f| f.as_str()).map(|c| {
            c.trim_start_matches("posedge ")
                .trim_start_matches("negedge ")
                .to_string()
        })
    };
    // The tightest clock's own path (launch and capture in it), else any path that ends in it.
    let pick = paths
        .iter()
        .find(|p| clock(p, "from") == tight && clock(p, "to") == tight)
        .or_else(|| paths.iter().find(|p| clock(p, "to") == tight));
    if let Some(p) = pick {
        report.worst_path = path_ends(p);
    }
    Ok(report)
}

/// `cell.port` of a path segment's end.
fn pin_name(end: Option<&serde_json::Value>) -> Option<String> {
    let end = end?;
    let cell = end.get("cell")?.as_str()?;
    Some(match end.get("port").and_then(|p| p.as_str()) {
        Some(port) => format!("{cell}.{port}"),
        None => cell.to_string(),
    })
}

fn path_ends(p: &serde_json::Value) -> Option<WorstPath> {
    let segs = p.get("path")?.as_array()?;
    let from = pin_name(segs.first()?.get("from"))?;
    let to = pin_name(segs.last()?.get("to"))?;
    let delay: f64 = segs
        .iter()
        .filter_map(|s| s.get("delay").and_then(serde_json::Value::as_f64))
        .sum();
    Some(WorstPath {
        from,
        to,
        delay_ns: (delay > 0.0).then_some(delay),
    })
}

fn placed_from_utilization(v: &serde_json::Value, family: Family) -> Placed {
    let used = |bel: &str| {
        v.get("utilization")
            .and_then(|u| u.get(bel))
            .and_then(|b| b.get("used"))
            .and_then(serde_json::Value::as_u64)
            .map_or(0, |n| n as u32)
    };
    match family {
        // An ICESTORM_LC is a LUT4 and a flip-flop; what runs out is the cells.
        Family::Ice40Up => Placed {
            luts: used("ICESTORM_LC"),
            ffs: 0,
            dsps: used("ICESTORM_DSP"),
            brams: used("ICESTORM_RAM"),
        },
        Family::Ecp5 => Placed {
            luts: used("TRELLIS_COMB"),
            ffs: used("TRELLIS_FF"),
            dsps: used("MULT18X18D"),
            brams: used("DP16KD"),
        },
        Family::Xc7 => Placed::default(),
    }
}

#[cfg(test)]
mod tests;
