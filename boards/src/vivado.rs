//! Vivado's text reports, as the generated TCL writes them after routing: the timing summary
//! (`report_timing_summary`: the Design Timing Summary table's WNS, the Clock Summary's
//! periods, the first Max Delay Path's source and destination) and the utilization
//! (`report_utilization`: Slice LUTs, Slice Registers, Block RAM Tile, DSPs), turned into the
//! same [`Timing`] the open flows write. The layouts are those of Vivado's documentation
//! (UG906, "Report Timing Summary" and "Report Utilization").

use super::routed::Build;
use super::timing::{ClockTiming, Placed, Timing, WorstPath};
use super::BoardError;
use std::path::Path;

/// The routed timing summary the TCL writes.
pub const TIMING_RPT: &str = "timing.rpt";
/// The routed utilization the TCL writes.
pub const UTILIZATION_RPT: &str = "utilization.rpt";

fn bad(what: impl Into<String>) -> BoardError {
    BoardError::Parse {
        tool: "vivado",
        what: what.into(),
    }
}

/// The worst negative slack (ns) from the Design Timing Summary: the first number of the row
/// under the `WNS(ns)` header and its dashes.
pub fn parse_wns(text: &str) -> Result<f64, BoardError> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("WNS(ns)"));
    lines
        .next()
        .ok_or_else(|| bad("no `WNS(ns)` header in the timing summary"))?;
    // The row after the dashes (a negative slack starts with '-' too).
    let dashes = |l: &str| l.split_whitespace().all(|w| w.chars().all(|c| c == '-'));
    lines
        .find(|l| !dashes(l))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| bad("no WNS value under the `WNS(ns)` header"))
}

/// The clocks of the Clock Summary: (name, period ns, frequency MHz).
pub fn parse_clocks(text: &str) -> Vec<(String, f64, f64)> {
    let mut out = Vec::new();
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with("Clock ") && l.contains("Period(ns)")));
    if lines.next().is_none() {
        return out;
    }
    for l in lines.skip_while(|l| l.trim_start().starts_with('-')) {
        let words: Vec<&str> = l.split_whitespace().collect();
        // name {rise fall} period frequency
        let [name, _, _, period, mhz] = words[..] else {
            break;
        };
        let (Ok(period), Ok(mhz)) = (period.parse(), mhz.parse()) else {
            break;
        };
        out.push((name.to_string(), period, mhz));
    }
    out
}

/// Source and destination of the first `Max Delay Paths` entry (the worst setup path).
pub fn parse_worst_path(text: &str) -> Option<WorstPath> {
    let start = text.find("Max Delay Paths")?;
    let section = &text[start..];
    let field = |key: &str| {
        section
            .lines()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    let delay = field("Data Path Delay:").and_then(|v| {
        v.split_whitespace()
            .next()
            .and_then(|n| n.trim_end_matches("ns").parse().ok())
    });
    Some(WorstPath {
        from: field("Source:")?,
        to: field("Destination:")?,
        delay_ns: delay,
    })
}

/// The `Used` column of the utilization table row named `site` (`| Slice LUTs | 3776 | ...`).
fn used(text: &str, site: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut cols = l.split('|').map(str::trim).skip(1);
        (cols.next()? == site).then_some(())?;
        cols.next()?.parse().ok()
    })
}

/// Placed resources from `report_utilization`: LUTs, registers, DSPs, and block RAM in RAMB18
/// (a Block RAM Tile is a RAMB36: two; half tiles appear as `.5`).
pub fn parse_utilization(text: &str) -> Result<Placed, BoardError> {
    let need = |site: &str| used(text, site).ok_or_else(|| bad(format!("no `{site}` row")));
    let (luts, ffs, dsps) = (need("Slice LUTs")?, need("Slice Registers")?, need("DSPs")?);
    let tiles = text
        .lines()
        .find_map(|l| {
            let mut cols = l.split('|').map(str::trim).skip(1);
            (cols.next()? == "Block RAM Tile").then_some(())?;
            cols.next()?.parse::<f64>().ok()
        })
        .ok_or_else(|| bad("no `Block RAM Tile` row"))?;
    Ok(Placed {
        luts,
        ffs,
        dsps,
        brams: (tiles * 2.0).round() as u32,
    })
}

/// The Timing of a Vivado build from its two reports (`timing.rpt`, `utilization.rpt` in
/// `dir`): Fmax is `1000 / (period - WNS)` of the design clock.
pub fn timing_from_texts(
    build: Build<'_>,
    timing_rpt: &str,
    utilization_rpt: &str,
    version: String,
) -> Result<Timing, BoardError> {
    let wns = parse_wns(timing_rpt)?;
    let clocks = parse_clocks(timing_rpt);
    let (name, period, mhz) = clocks
        .into_iter()
        .next()
        .ok_or_else(|| bad("no clock in the Clock Summary (is the clock constrained?)"))?;
    let fmax = 1000.0 / (period - wns);
    Ok(Timing {
        board: build.board.name.to_string(),
        image: build.image,
        array: build.cfg.size,
        fm_depth: build.cfg.fm_depth,
        word_bits: build.cfg.word_bits,
        clock_mhz: mhz,
        fmax_mhz: fmax,
        met: wns >= 0.0,
        clocks: vec![ClockTiming {
            name,
            fmax_mhz: fmax,
            clock_mhz: mhz,
        }],
        worst_path: parse_worst_path(timing_rpt),
        placed: parse_utilization(utilization_rpt)?,
        synthesis: version.clone(),
        place_and_route: version,
    })
}

/// Reads the reports the generated TCL left in `dir` after Vivado ran.
pub fn timing_from_reports(build: Build<'_>, dir: &Path) -> Result<Timing, BoardError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|source| BoardError::Io { path, source })
    };
    let (t, u) = (read(TIMING_RPT)?, read(UTILIZATION_RPT)?);
    // `| Tool Version : Vivado v.2023.2 (lin64) Build ...` heads every report.
    let version = t
        .lines()
        .find_map(|l| l.split("Tool Version :").nth(1))
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "Vivado".into());
    timing_from_texts(build, &t, &u, version)
}

#[cfg(test)]
mod tests;
