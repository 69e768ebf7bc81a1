//! Resources of a design point and whether it fits each board.
//!
//! [`Yosys`] synthesises a board image with `systole_boards::tools::yosys_synth`, the flow
//! `bitstream` runs: for a sweep the bridge top (`systole bitstream`'s Verilog: array, conv
//! unit, UART bridge) with Yosys `synth_xilinx -flatten -family xc7`; for the measured table of
//! `systole boards --synthesize` also the SoC and the iCE40 board's bridge top. Results are cached by design hash ([`Cached`]): the
//! hash of the Verilog, the Yosys version and the flow, so a rerun or another sweep with the
//! same design never synthesises it again, and a changed generator or Yosys always does.

use super::{DesignPoint, ExploreError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use systole_boards::measured::Image;
use systole_boards::tools::{self, ResourceReport};
use systole_boards::{model, Board, BoardError, Family};

mod yosys;
pub use yosys::Yosys;

/// Cells of a synthesised design (7-series units: LUT6, FD*, DSP48E1, RAMB18 with a RAMB36 as
/// two).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Logic LUTs.
    pub luts: u32,
    /// LUTs used as distributed RAM or shift registers.
    pub lutram: u32,
    /// Flip-flops.
    pub ffs: u32,
    /// DSP48E1 blocks.
    pub dsps: u32,
    /// Block RAM in RAMB18 (4-kbit EBR on iCE40).
    pub brams: u32,
    /// RAMB36E1 among them (each counted as two in `brams`). Absent in the results of older
    /// sweeps (`explore.json`), which never show it; the synthesis cache does not reuse their
    /// entries (`Yosys::flow`).
    #[serde(default)]
    pub ramb36: u32,
}

impl From<ResourceReport> for Resources {
    fn from(r: ResourceReport) -> Self {
        Resources {
            luts: r.luts,
            lutram: r.lutram,
            ffs: r.ffs,
            dsps: r.dsps,
            brams: r.brams,
            ramb36: r.ramb36,
        }
    }
}

/// Where a point's resources come from.
pub trait Synthesizer: Sync {
    /// What the numbers are, for the report (`yosys synth_xilinx`).
    fn source(&self) -> String;
    /// A hash of everything the result depends on (the design hash).
    fn design_hash(&self, point: &DesignPoint) -> Result<String, ExploreError>;
    /// Synthesises `point`.
    fn synthesize(&self, point: &DesignPoint) -> Result<Resources, ExploreError>;
    /// Whether results are worth keeping in the cache (not for an instant estimate, which
    /// must follow the model as it changes).
    fn cacheable(&self) -> bool {
        true
    }
    /// Why this synthesiser has no figures for `point` (the point then reports `n/a` and the
    /// reason), or `None`.
    fn cannot(&self, _point: &DesignPoint) -> Option<String> {
        None
    }
}

/// The 7-series board the Verilog is generated for (the first in the table; 7-series boards
/// differ only in the UART's clock divider).
pub fn reference_board() -> &'static Board {
    systole_boards::list()
        .iter()
        .find(|b| b.family == Family::Xc7)
        .expect("the board table has a 7-series board")
}

pub(super) fn synth_err(point: &DesignPoint) -> impl FnOnce(BoardError) -> ExploreError {
    let point = point.label();
    move |source| ExploreError::Synth { point, source }
}

/// The bridge top a sweep synthesises for `point` (`systole bitstream`'s Verilog for the
/// reference board).
#[cfg(test)]
pub(crate) fn board_verilog(point: &DesignPoint) -> Result<String, ExploreError> {
    systole_boards::flow::bridge_verilog(reference_board(), &point.config())
        .map_err(synth_err(point))
}

/// FNV-1a over the parts (with separators): a stable hash, unlike `std`'s hasher.
pub fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The resource model of `systole boards` (`systole_boards::model::estimate`): no synthesis.
pub struct Estimated;

impl Synthesizer for Estimated {
    fn source(&self) -> String {
        "the resource model of `systole boards` (estimate, no synthesis)".into()
    }
    fn design_hash(&self, point: &DesignPoint) -> Result<String, ExploreError> {
        let (n, fm, w, pack) = point.hardware_key();
        Ok(format!(
            "estimate-{n}x{n}-fm{fm}-w{w}-pack{}",
            u8::from(pack)
        ))
    }
    fn cacheable(&self) -> bool {
        false
    }
    // The model's logic terms are fitted to 16-bit designs: at another W it would report the
    // 16-bit design's figures.
    fn cannot(&self, point: &DesignPoint) -> Option<String> {
        (point.word_bits != systole_core::numeric::WORD_BITS).then(|| {
            "the resource model is fitted to 16-bit words: --resources yosys synthesises other widths".into()
        })
    }
    fn synthesize(&self, point: &DesignPoint) -> Result<Resources, ExploreError> {
        let e = model::estimate(reference_board(), &point.config());
        Ok(Resources {
            luts: e.luts,
            lutram: 0,
            ffs: e.ffs,
            dsps: e.dsps,
            brams: e.brams,
            ramb36: 0,
        })
    }
}

/// A [`Synthesizer`] whose results are kept in `dir/<design hash>.json`.
pub struct Cached<'s> {
    /// The synthesiser.
    pub inner: &'s dyn Synthesizer,
    /// The cache folder.
    pub dir: PathBuf,
}

impl Cached<'_> {
    /// The point's resources, and whether they came from the cache.
    pub fn get(&self, point: &DesignPoint) -> Result<(Resources, bool), ExploreError> {
        if !self.inner.cacheable() {
            return Ok((self.inner.synthesize(point)?, false));
        }
        let hash = self.inner.design_hash(point)?;
        let path = self.dir.join(format!("{hash}.json"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            // A damaged entry is synthesised again and replaced.
            if let Ok(r) = serde_json::from_str::<Resources>(&text) {
                return Ok((r, true));
            }
        }
        let r = self.inner.synthesize(point)?;
        std::fs::create_dir_all(&self.dir).map_err(|source| ExploreError::Cache {
            path: self.dir.clone(),
            source,
        })?;
        let json = serde_json::to_string_pretty(&r).unwrap_or_default();
        systole_train::write_atomic(&path, json.as_bytes())?;
        Ok((r, false))
    }
}

/// Whether a point fits one board and how long an epoch takes at its clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoardFit {
    /// Board name.
    pub board: String,
    /// Fits.
    pub fits: bool,
    /// What does not fit, or how the answer was found.
    pub note: String,
    /// The accelerator's clock on the board (Hz).
    pub clock_hz: u32,
    /// Cycles per epoch at that clock (device time only: no link, no host work).
    pub epoch_seconds: f64,
    /// The bridge image's routed Fmax on this board at this point, in MHz, when the routed
    /// table (`boards/data/routed.json`) has it.
    #[serde(default)]
    pub routed_fmax_mhz: Option<f64>,
}

/// `point` with `res` on `board`. 7-series boards are judged on the synthesised counts with
/// the check `systole bitstream` applies (every resource within the part); iCE40 and ECP5
/// boards on the resource model (other families: `synth_xilinx` counts do not apply).
pub fn fit(board: &Board, point: &DesignPoint, res: &Resources, cycles_per_epoch: u64) -> BoardFit {
    let (fits, note) = match board.family {
        Family::Xc7 => {
            let report = ResourceReport {
                luts: res.luts,
                lutram: res.lutram,
                ffs: res.ffs,
                dsps: res.dsps,
                brams: res.brams,
                ramb36: res.ramb36,
                ..ResourceReport::default()
            };
            match tools::check_fits(board, &report) {
                Ok(()) => (true, "fits".to_string()),
                Err(BoardError::DoesNotFit { what, .. }) => (false, what),
                Err(e) => (false, e.to_string()),
            }
        }
        Family::Ice40Up | Family::Ecp5 => {
            let cfg = point.config();
            let e = model::estimate(board, &cfg);
            match model::clearly_too_big(board, &cfg) {
                Some(why) => (false, format!("estimated: {why}")),
                None if model::fits(board, &e) => (true, "estimated: fits".into()),
                None => (false, "estimated: over the part's budget".into()),
            }
        }
    };
    let clock_hz = board.logic_clock_hz();
    // The built-in table is checked by its own tests; an unreadable one shows no Fmax.
    let routed_fmax_mhz = systole_boards::routed_table::routed_table()
        .ok()
        .and_then(|t| {
            t.fmax(
                board.name,
                Image::Bridge,
                point.array,
                point.fm_depth,
                point.word_bits,
            )
            .map(|r| r.fmax_mhz)
        });
    BoardFit {
        board: board.name.to_string(),
        fits,
        note,
        clock_hz,
        epoch_seconds: cycles_per_epoch as f64 / f64::from(clock_hz),
        routed_fmax_mhz,
    }
}
