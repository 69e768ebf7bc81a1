//! Resources of a design point and whether it fits each board.
//!
//! [`Yosys`] synthesises the bridge top (`systole bitstream`'s Verilog: array, conv unit, UART
//! bridge) with `systole_boards::tools::yosys_synth`, the flow `bitstream` runs: Yosys
//! `synth_xilinx -flatten -family xc7`. Results are cached by design hash ([`Cached`]): the
//! hash of the Verilog, the Yosys version and the flow, so a rerun or another sweep with the
//! same design never synthesises it again, and a changed generator or Yosys always does.

use super::{DesignPoint, ExploreError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use systole_boards::tools::{self, files, ResourceReport};
use systole_boards::{model, Board, BoardError, Family};
use systole_hdl::bridge_top::{generate_bridge_verilog_with, BridgeTopOptions};

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
    /// Block RAM in RAMB18.
    pub brams: u32,
}

impl From<ResourceReport> for Resources {
    fn from(r: ResourceReport) -> Self {
        Resources {
            luts: r.luts,
            lutram: r.lutram,
            ffs: r.ffs,
            dsps: r.dsps,
            brams: r.brams,
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

fn synth_err(point: &DesignPoint) -> impl FnOnce(BoardError) -> ExploreError {
    let point = point.label();
    move |source| ExploreError::Synth { point, source }
}

pub(crate) fn board_verilog(point: &DesignPoint) -> Result<String, ExploreError> {
    let board = reference_board();
    let opts = BridgeTopOptions {
        clock_hz: board.clock_hz,
        baud: systole_core::bridge::BAUD,
        reset_active_low: board.reset.active_low,
        led_active_low: board.leds.first().is_some_and(|l| l.active_low),
        halve_clock: board.halve_clock,
        fm_depth: point.fm_depth,
    };
    generate_bridge_verilog_with(&point.config(), &opts)
        .map_err(BoardError::Hdl)
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

/// Yosys `synth_xilinx` on the bridge top, the flow of `systole bitstream`.
pub struct Yosys {
    /// Where each synthesis runs (a folder per design, removed after).
    pub work: PathBuf,
}

const YOSYS_FLOW: &str = "bridge_top synth_xilinx -flatten -family xc7";

impl Synthesizer for Yosys {
    fn source(&self) -> String {
        format!(
            "Yosys `synth_xilinx -flatten -family xc7` of the bridge top for {}",
            reference_board().name
        )
    }

    fn design_hash(&self, point: &DesignPoint) -> Result<String, ExploreError> {
        let yosys = tools::require("yosys").map_err(synth_err(point))?;
        let version = std::process::Command::new(yosys)
            .arg("-V")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let verilog = board_verilog(point)?;
        let w = point.word_bits.to_string();
        Ok(format!(
            "{:016x}",
            fnv1a(&[YOSYS_FLOW, &version, &w, &verilog])
        ))
    }

    fn synthesize(&self, point: &DesignPoint) -> Result<Resources, ExploreError> {
        let verilog = board_verilog(point)?;
        let (n, fm, w, pack) = point.hardware_key();
        let dir = self.work.join(format!(
            "synth-{n}x{n}-fm{fm}-w{w}-pack{}-{}",
            u8::from(pack),
            std::process::id()
        ));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ExploreError::Cache { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let v = dir.join(files::VERILOG);
        std::fs::write(&v, verilog).map_err(io(&v))?;
        let r = tools::yosys_synth(reference_board(), &[files::VERILOG], &dir);
        // The log stays for a failure (the error names it); a success leaves nothing behind.
        if r.is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(r.map_err(synth_err(point))?.into())
    }
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
}

/// `point` with `res` on `board`. 7-series boards are judged on the synthesised counts with
/// the check `systole bitstream` applies (every resource within the part); iCE40 boards on the
/// resource model (a different family: `synth_xilinx` counts do not apply).
pub fn fit(board: &Board, point: &DesignPoint, res: &Resources, cycles_per_epoch: u64) -> BoardFit {
    let (fits, note) = match board.family {
        Family::Xc7 => {
            let report = ResourceReport {
                luts: res.luts,
                lutram: res.lutram,
                ffs: res.ffs,
                dsps: res.dsps,
                brams: res.brams,
                ..ResourceReport::default()
            };
            match tools::check_fits(board, &report) {
                Ok(()) => (true, "fits".to_string()),
                Err(BoardError::DoesNotFit { what, .. }) => (false, what),
                Err(e) => (false, e.to_string()),
            }
        }
        Family::Ice40Up => {
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
    BoardFit {
        board: board.name.to_string(),
        fits,
        note,
        clock_hz,
        epoch_seconds: cycles_per_epoch as f64 / f64::from(clock_hz),
    }
}
