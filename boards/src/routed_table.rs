//! The measured routed table `boards/data/routed.json`: the `timing.json` of routed builds
//! (`systole bitstream` on iCE40 and ECP5, or Vivado's reports), gathered by
//! `systole boards --routed DIR...` and printed by `systole boards` beside the Yosys table. The
//! file is the one source of these figures: nothing in it is typed by hand.

use super::measured::Image;
use super::timing::{trim_mhz, Timing};
use super::BoardError;
use serde::{Deserialize, Serialize};

/// Where the routed table lives in the repository.
pub const ROUTED_FILE: &str = "boards/data/routed.json";

/// The routed table as built into this program.
pub const ROUTED_JSON: &str = include_str!("../data/routed.json");

/// Routed builds, with the command that gathered them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutedFile {
    /// The day the table was written (UTC, `YYYY-MM-DD`).
    pub date: String,
    /// The command that wrote it.
    pub command: String,
    /// One `timing.json` per build (the command that built each is [`Timing::command`]).
    pub rows: Vec<Timing>,
}

fn bad(what: String) -> BoardError {
    BoardError::MeasuredTable { what, source: None }
}

impl RoutedFile {
    /// Parses a routed table and checks each row names a known board and a sane result.
    pub fn parse(text: &str) -> Result<RoutedFile, BoardError> {
        let file: RoutedFile =
            serde_json::from_str(text).map_err(|e| BoardError::MeasuredTable {
                what: format!("{ROUTED_FILE}: not the routed table's JSON"),
                source: Some(e),
            })?;
        for r in &file.rows {
            super::find(&r.board).map_err(|e| bad(format!("{ROUTED_FILE}: a row's board: {e}")))?;
            let sane = |f: f64| f.is_finite() && f > 0.0;
            if !sane(r.fmax_mhz)
                || !sane(r.clock_mhz)
                || r.met != r.clocks.iter().all(|c| c.fmax_mhz >= c.clock_mhz)
            {
                return Err(bad(format!(
                    "{ROUTED_FILE}: the {} row {}x{} has fmax {} MHz for {} MHz and met {}",
                    r.board, r.array, r.array, r.fmax_mhz, r.clock_mhz, r.met
                )));
            }
        }
        Ok(file)
    }

    /// The routed Fmax of a design, when the table has it: (fmax MHz, clock MHz, met).
    pub fn fmax(
        &self,
        board: &str,
        image: Image,
        array: usize,
        fm_depth: usize,
        word_bits: u32,
    ) -> Option<&Timing> {
        self.rows.iter().find(|r| {
            r.board == board
                && r.image == image
                && r.array == array
                && r.fm_depth == fm_depth
                && r.word_bits == word_bits
        })
    }

    /// The table as `systole boards` prints it: placed resources and routed Fmax per build,
    /// the tools named, then each worst path.
    pub fn table(&self) -> String {
        let mut s = format!(
            "Routed ({ROUTED_FILE}: {}, `{}`): placed LUTs (logic cells on iCE40 and ECP5), \
             flip-flops, multipliers, block RAMs, and the router's Fmax against the clock the \
             image is built for.\n",
            self.date, self.command
        );
        s.push_str(&format!(
            "{:<6} {:<11} {:>5} {:>5} {:>2} {:>6} {:>6} {:>4} {:>4} {:>6} {:>8}  {:<4}  tools\n",
            "image",
            "board",
            "array",
            "fm",
            "W",
            "LUT",
            "FF",
            "DSP",
            "BRAM",
            "clock",
            "fmax",
            "met"
        ));
        for r in &self.rows {
            let image = match r.image {
                Image::Bridge => "bridge",
                Image::Soc => "SoC",
            };
            s.push_str(&format!(
                "{:<6} {:<11} {:>5} {:>5} {:>2} {:>6} {:>6} {:>4} {:>4} {:>6} {:>8.2}  {:<4}  {}; {}\n",
                image,
                r.board,
                format!("{0}x{0}", r.array),
                r.fm_depth,
                r.word_bits,
                r.placed.luts,
                // Builds routed before the flip-flops were taken from Yosys on iCE40.
                if r.placed.ffs == 0 {
                    "n/a".to_string()
                } else {
                    r.placed.ffs.to_string()
                },
                r.placed.dsps,
                r.placed.brams,
                trim_mhz(r.clock_mhz),
                r.fmax_mhz,
                if r.met { "yes" } else { "NO" },
                r.synthesis,
                r.place_and_route
            ));
        }
        for r in &self.rows {
            if let Some(p) = &r.worst_path {
                s.push_str(&format!(
                    "worst path, {} {} {}x{} fm{}: {} -> {}\n",
                    r.board,
                    match r.image {
                        Image::Bridge => "bridge",
                        Image::Soc => "SoC",
                    },
                    r.array,
                    r.array,
                    r.fm_depth,
                    p.from,
                    p.to
                ));
            }
        }
        s
    }
}

/// The routed table built into this program.
pub fn routed_table() -> Result<RoutedFile, BoardError> {
    RoutedFile::parse(ROUTED_JSON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_parses_and_prints_every_row() {
        let t = routed_table().unwrap();
        // The smallest image of each open flow is measured.
        for (board, array) in [("icebreaker", 2), ("ulx3s-85f", 4)] {
            let row = t.fmax(board, Image::Bridge, array, 0, 16).unwrap();
            assert!(row.worst_path.is_some() && row.placed.dsps > 0, "{row:?}");
        }
        let text = t.table();
        assert!(
            text.contains(&t.command) && text.contains("nextpnr-ecp5"),
            "{text}"
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("bridge ") || l.starts_with("SoC "))
                .count(),
            t.rows.len()
        );
    }

    fn one_row(fmax: f64, met: bool) -> RoutedFile {
        use crate::timing::{ClockTiming, Placed};
        RoutedFile {
            date: "2026-12-06".into(),
            command: "systole boards --routed b --out t.json".into(),
            rows: vec![Timing {
                board: "icebreaker".into(),
                image: Image::Bridge,
                array: 2,
                fm_depth: 0,
                word_bits: 16,
                clock_mhz: 6.0,
                fmax_mhz: fmax,
                met,
                clocks: vec![ClockTiming {
                    name: "clk".into(),
                    fmax_mhz: fmax,
                    clock_mhz: 6.0,
                }],
                worst_path: None,
                placed: Placed::default(),
                synthesis: "Yosys 0.23".into(),
                place_and_route: "nextpnr-ice40 0.4".into(),
            }],
        }
    }

    #[test]
    fn a_row_whose_verdict_contradicts_its_clocks_is_refused() {
        let good = serde_json::to_string(&one_row(8.25, true)).unwrap();
        let parsed = RoutedFile::parse(&good).unwrap();
        assert!(parsed.table().contains("  8.25  yes"), "{}", parsed.table());
        for (fmax, met) in [(8.25, false), (5.0, true), (f64::NAN, true)] {
            let text = serde_json::to_string(&one_row(fmax, met)).unwrap();
            let e = RoutedFile::parse(&text);
            assert!(e.is_err(), "{fmax} {met}");
        }
        let e = RoutedFile::parse("{}").unwrap_err().to_string();
        assert!(e.contains("routed.json"), "{e}");
    }
}
