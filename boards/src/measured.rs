//! The board images as Yosys counts them at each word width `W`: the measured table
//! `boards/data/yosys-w.json`, written by `systole boards --synthesize` (which runs Yosys
//! through `systole explore`'s cached synthesis) and printed by `systole boards` from this file
//! alone, with the resource model's estimate of the same design beside each row and whether the
//! image fits each board by the measured counts.
//!
//! The file is the one source of these figures: nothing here is typed by hand, and a row's
//! MACs per DSP and its fits are derived from its counts when printed.

use super::tools::{check_fits, ResourceReport};
use super::{model, soc, Board, BoardError, Family};
use serde::{Deserialize, Serialize};
use systole_core::ArrayConfig;

/// Where the measured table lives in the repository (and what `--out` regenerates).
pub const MEASURED_FILE: &str = "boards/data/yosys-w.json";

/// The measured table as built into this program.
pub const MEASURED_JSON: &str = include_str!("../data/yosys-w.json");

/// Which board image a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Image {
    /// The CPU-less bridge top (`systole bitstream`): array, conv unit, UART byte bridge.
    Bridge,
    /// The SoC (`systole bitstream --soc`): VexRiscv, RAM, UART, timer, DMA and the array.
    Soc,
}

/// A board and whether an image fits it (`Err`: what does not fit).
pub type BoardFit = (&'static Board, Result<(), String>);

/// One synthesis: an image for a board at one array, conv unit and `W`, and its cells.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredRow {
    /// The image.
    pub image: Image,
    /// The board whose build was synthesised (its family's flow, clock and pins; the SoC's
    /// RAM is this board's `soc_ram_bytes`).
    pub board: String,
    /// Array size n (n x n).
    pub array: usize,
    /// Conv unit feature-map words (0: none).
    pub fm_depth: usize,
    /// Word width W.
    pub word_bits: u32,
    /// The SoC's RAM in bytes (`None` for the bridge).
    pub ram_bytes: Option<u32>,
    /// Logic LUTs (LUT1..LUT6; SB_LUT4 on iCE40).
    pub luts: u32,
    /// LUTs used as distributed RAM or shift registers.
    pub lutram: u32,
    /// Flip-flops.
    pub ffs: u32,
    /// DSP48E1 (SB_MAC16 on iCE40).
    pub dsps: u32,
    /// Block RAM in the board budget's unit: RAMB18 with a RAMB36 as two (4-kbit EBR on iCE40).
    pub brams: u32,
    /// RAMB36E1 among them.
    pub ramb36: u32,
}

/// The measured table: what was measured with which Yosys, when and by which command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredFile {
    /// `yosys -V`.
    pub yosys: String,
    /// The day the table was written (UTC, `YYYY-MM-DD`).
    pub date: String,
    /// The command that wrote it.
    pub command: String,
    /// One row per synthesis.
    pub rows: Vec<MeasuredRow>,
}

impl MeasuredRow {
    /// The board the row was synthesised for.
    pub fn board(&self) -> Result<&'static Board, BoardError> {
        super::find(&self.board)
    }

    /// The accelerator of the row.
    pub fn config(&self) -> ArrayConfig {
        ArrayConfig {
            fm_depth: self.fm_depth,
            ..ArrayConfig::square(self.array)
        }
        .with_word_bits(self.word_bits)
    }

    /// The counts as the fit check takes them.
    pub fn report(&self) -> ResourceReport {
        ResourceReport {
            luts: self.luts,
            lutram: self.lutram,
            ffs: self.ffs,
            dsps: self.dsps,
            brams: self.brams,
            ramb36: self.ramb36,
            ..ResourceReport::default()
        }
    }

    /// MACs per hard multiplier: the array's `n^2` MACs over its DSPs (the SoC's less the
    /// CPU's [`soc::CPU_DSP48E1`]). 1.0 while every MAC takes its own DSP; two multiplies per
    /// DSP48E1 at `W <= 8` would show here as 2.0.
    pub fn macs_per_dsp(&self) -> Option<f64> {
        let cpu = match self.image {
            Image::Soc => soc::CPU_DSP48E1,
            Image::Bridge => 0,
        };
        let array_dsps = self.dsps.checked_sub(cpu).filter(|&d| d > 0)?;
        Some((self.array * self.array) as f64 / f64::from(array_dsps))
    }

    /// The resource model's estimate of the same design on the same board.
    pub fn estimate(&self, board: &Board) -> model::Estimate {
        match self.image {
            Image::Bridge => model::estimate(board, &self.config()),
            Image::Soc => soc::estimate(board, &self.config()),
        }
    }

    /// Whether the row's image fits each board it speaks for, by its counts and the check
    /// `systole bitstream` makes (every count within the part): the boards of its family, and
    /// for the SoC those whose SoC RAM is the row's (another RAM is another design). `Err`
    /// holds what does not fit.
    pub fn fits(&self) -> Result<Vec<BoardFit>, BoardError> {
        let family = self.board()?.family;
        Ok(super::list()
            .iter()
            .filter(|b| b.family == family)
            .filter(|b| self.image == Image::Bridge || Some(soc::ram_bytes(b)) == self.ram_bytes)
            .map(|b| {
                let fit = match check_fits(b, &self.report()) {
                    Ok(()) => Ok(()),
                    Err(BoardError::DoesNotFit { what, .. }) => Err(what),
                    Err(e) => Err(e.to_string()),
                };
                (b, fit)
            })
            .collect())
    }

    /// `bridge xc7`, `SoC xc7 64 KiB`, `bridge iCE40`.
    fn image_label(&self, board: &Board) -> String {
        let family = match board.family {
            Family::Xc7 => "xc7",
            Family::Ice40Up => "iCE40",
            Family::Ecp5 => "ECP5",
        };
        match (self.image, self.ram_bytes) {
            (Image::Soc, Some(r)) => format!("SoC {family} {} KiB", r / 1024),
            (Image::Soc, None) => format!("SoC {family}"),
            (Image::Bridge, _) => format!("bridge {family}"),
        }
    }
}

impl MeasuredFile {
    /// Parses a measured table and checks each row names a known board and a design the
    /// hardware builds.
    pub fn parse(text: &str) -> Result<MeasuredFile, BoardError> {
        let file: MeasuredFile =
            serde_json::from_str(text).map_err(|e| BoardError::MeasuredTable {
                what: "not the table's JSON".into(),
                source: Some(e),
            })?;
        for r in &file.rows {
            let bad = |what: String| BoardError::MeasuredTable { what, source: None };
            let board = r.board().map_err(|e| bad(format!("a row's board: {e}")))?;
            r.config().validate_built().map_err(|e| {
                bad(format!(
                    "{}x{} at W = {}: {e}",
                    r.array, r.array, r.word_bits
                ))
            })?;
            let soc_ram = soc::has_soc(board).then(|| soc::ram_bytes(board));
            let want = match r.image {
                Image::Soc => soc_ram.map(Some),
                Image::Bridge => Some(None),
            };
            if want != Some(r.ram_bytes) {
                return Err(bad(format!(
                    "a {:?} row for {} with ram_bytes {:?}: the SoC (7-series only) has its board's RAM, the bridge none",
                    r.image, board.name, r.ram_bytes
                )));
            }
        }
        Ok(file)
    }

    /// The table as `systole boards` prints it: a header naming the Yosys version, the date and
    /// the command, then one line per row with its counts, MACs per DSP, the model's estimate
    /// and its LUT and flip-flop error, and the boards the image fits.
    pub fn table(&self) -> Result<String, BoardError> {
        let mut s = format!(
            "Yosys per word width W, measured ({MEASURED_FILE}: {}, {}, `{}`). model: the \
             resource model's estimate of the same design (on iCE40 its LUTs are placed logic \
             cells), err: its error, (model - Yosys) / Yosys; fits: every count within the part (the check of `systole \
             bitstream`); fm: the conv unit's feature-map words; BRAM in RAMB18 (RAMB36 as two, how many in brackets) or 4-kbit EBR.\n",
            self.yosys, self.date, self.command
        );
        s.push_str(&format!(
            "{:<18} {:>5} {:>5} {:>2} {:>12} {:>6} {:>4} {:>8} {:>7} | {:>6} {:>6} {:>4} {:>4} {:>10} | fits\n",
            "image", "array", "fm", "W", "LUT+LUTRAM", "FF", "DSP", "BRAM", "MAC/DSP", "LUT", "FF", "DSP",
            "BRAM", "err LUT/FF"
        ));
        for r in &self.rows {
            let board = r.board()?;
            let e = r.estimate(board);
            let err = |model: u32, got: u32| {
                if got == 0 {
                    "n/a".to_string()
                } else {
                    let pct = (f64::from(model) - f64::from(got)) * 100.0 / f64::from(got);
                    format!("{:+}%", pct.round() as i64)
                }
            };
            let macs = r.macs_per_dsp().map_or("n/a".into(), |m| format!("{m:.2}"));
            let fits = r.fits()?;
            let yes: Vec<&str> = fits
                .iter()
                .filter(|(_, f)| f.is_ok())
                .map(|(b, _)| b.name)
                .collect();
            let fits = match (
                yes.is_empty(),
                fits.iter().find_map(|(_, f)| f.clone().err()),
            ) {
                (false, _) => yes.join(" "),
                (true, Some(why)) => format!("none ({why})"),
                (true, None) => "none".into(),
            };
            s.push_str(&format!(
                "{:<18} {:>5} {:>5} {:>2} {:>12} {:>6} {:>4} {:>8} {:>7} | {:>6} {:>6} {:>4} {:>4} {:>10} | {fits}\n",
                r.image_label(board),
                format!("{0}x{0}", r.array),
                r.fm_depth,
                r.word_bits,
                format!("{}+{}", r.luts, r.lutram),
                r.ffs,
                r.dsps,
                format!("{} ({})", r.brams, r.ramb36),
                macs,
                e.luts,
                e.ffs,
                e.dsps,
                e.brams,
                format!("{}/{}", err(e.luts, r.luts), err(e.ffs, r.ffs)),
            ));
        }
        Ok(s)
    }
}

/// The table built into this program ([`MEASURED_JSON`]), printed.
pub fn measured_table() -> Result<String, BoardError> {
    MeasuredFile::parse(MEASURED_JSON)?.table()
}

#[cfg(test)]
mod tests;
