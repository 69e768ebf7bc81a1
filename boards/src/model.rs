//! Resource model: how much of a part an `n x n` array needs, and the largest that fits.
//!
//! The model counts what is certain exactly and the rest linearly:
//! * Multipliers: one hard multiplier per MAC (`n^2`). On 7-series Yosys `synth_xilinx -flatten`
//!   puts each MAC's multiply into one DSP48E1, or with `ArrayConfig::dsp_pack` (8-bit words)
//!   each pair's into one: `n^2 / 2`. On the iCE40UP5K there are only
//!   eight SB_MAC16, so the largest array is 2x2 (a 3x3 array would need nine). We decided
//!   against fabric multipliers there: a 16x16 multiplier costs roughly 300 logic cells, so even
//!   one extra would eat most of the headroom left after buffers and converters, and a 2x2 array
//!   already exercises the whole design on real silicon. The 48-bit accumulator does not fit
//!   the SB_MAC16's 32-bit one, so on iCE40 it is a fabric adder (counted per PE below).
//! * Buffers: A and B each have `n` lanes of two banks of `buffer_depth` 16-bit words; both
//!   banks of a lane are one memory (the bank is the top address bit), rounded up to whole
//!   block RAMs. Yosys confirms it: the 8x8 array with 512-row banks uses 16 RAMB18E1 (one
//!   1024 x 16 block per lane of A and of B), the 2x2 on iCE40 16 EBR (four 256 x 16 per lane).
//!   The C buffer is `2 * n` rows and lives in LUT RAM.
//! * Logic: a fixed part (register file, controller, UART bridge) plus per-PE and per-column
//!   (converter with its LFSR) LUTs and flip-flops.
//! * Conv unit (`fm_depth` not 0): each of its two gather engines keeps one copy of the feature
//!   map per pair of lanes, a true dual-port block RAM written half a row of `fm_row_words`
//!   through each port (`hdl/src/gather/verilog.rs`), so a copy takes its bits in blocks but
//!   never fewer blocks than a half row needs ports (one 16-bit word per RAMB18 port in true
//!   dual-port use; iCE40 EBRs have no second read port, and no conv unit fits there); its logic (configuration registers, walkers,
//!   lane adders and comparators) is a fixed part plus a part per lane, fitted to Yosys.
//!
//! Fitting keeps `LUT_HEADROOM` of the LUTs free so that placement and routing can close.

use super::{Board, Family};
use systole_core::config::{MAX_FM_DEPTH, MAX_SIZE, MIN_FM_DEPTH, MIN_SIZE};
use systole_core::ArrayConfig;

/// Estimated resource use of one configuration on one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Look-up tables.
    pub luts: u32,
    /// Flip-flops.
    pub ffs: u32,
    /// Hard multipliers.
    pub dsps: u32,
    /// Block RAMs in the board budget's unit.
    pub brams: u32,
}

/// Linear logic coefficients of one family.
struct Coefficients {
    fixed_luts: u32,
    fixed_ffs: u32,
    pe_luts: u32,
    pe_ffs: u32,
    column_luts: u32,
    column_ffs: u32,
    conv_luts: u32,
    conv_ffs: u32,
    conv_lane_luts: u32,
    conv_lane_ffs: u32,
    /// 16-bit words one block RAM reads or writes per port and clock in true dual-port use.
    block_port_words: u32,
}

/// 7-series, fitted to Yosys 0.23 `synth_xilinx -flatten` on the bridge top (UART bridge
/// included, 512-row buffers): LUTs 1665 / 3776 / 10096 and flip-flops 1139 / 2896 / 9623 for
/// the 2x2 / 4x4 / 8x8 arrays (within 0.1%). A PE keeps its A/B pipeline and 48-bit shadow
/// registers in fabric, and a copy of its sum for the shadow register (the accumulator is in
/// its DSP48E1); a column's converter (shift, rounding, LFSR and saturation) is the largest
/// block. Before the converter computed at the widths it needs (`hdl/src/converter.v`) a
/// column took 881 LUTs and the 8x8 top 13,824.
const XC7: Coefficients = Coefficients {
    fixed_luts: 246,
    fixed_ffs: 455,
    pe_luts: 87,
    pe_ffs: 134,
    column_luts: 535,
    column_ffs: 74,
    conv_luts: CONV_XC7.0,
    conv_ffs: CONV_XC7.1,
    conv_lane_luts: CONV_XC7.2,
    conv_lane_ffs: CONV_XC7.3,
    block_port_words: 1,
};

/// The conv unit on 7-series (LUTs, flip-flops of the fixed part; LUTs, flip-flops per lane),
/// fitted so that the estimates equal Yosys 0.23 `synth_xilinx -flatten` on the bridge top
/// (LUT RAM and shift registers not counted): 8x8 with 4096 words 14,313 LUTs and 13,003
/// flip-flops, 4x4 with 512 words 6500 and 5804; 8x8 with 8192 words measured 14,288 and
/// 13,083, 16x16 with 8192 words 38,751 LUTs (the estimate 1% below). The fixed part is mostly
/// the two engines' configuration registers and walkers; a lane adds its walker state, address
/// adder and the multiplexers of its shared block-RAM port (address, and the word picked from
/// the half-row entry).
const CONV_XC7: (u32, u32, u32, u32) = (1226, 2437, 374, 118);

/// iCE40: one measured point (the 2x2 bridge top through nextpnr-ice40: 4452 logic cells,
/// 1350 flip-flops, before the converter computed at the widths it needs: not re-measured),
/// spread over the terms in the 7-series proportions of then. "LUTs" here are placed
/// logic cells (a LUT4 and a flip-flop each; carry chains and unpaired flip-flops cost cells
/// too), because that is what runs out.
const ICE40: Coefficients = Coefficients {
    fixed_luts: 684,
    fixed_ffs: 516,
    pe_luts: 174,
    pe_ffs: 163,
    column_luts: 1536,
    column_ffs: 91,
    // Not measured: the 7-series conv unit scaled by the ratio of the fixed parts (as first
    // measured on 7-series: 392 LUTs, 425 flip-flops).
    conv_luts: CONV_XC7.0 * 684 / 392,
    conv_ffs: CONV_XC7.1 * 516 / 425,
    conv_lane_luts: CONV_XC7.2 * 684 / 392,
    conv_lane_ffs: CONV_XC7.3 * 516 / 425,
    block_port_words: 1,
};

/// Fraction of LUTs and flip-flops (percent) a design may use and still be called a fit.
pub const LUT_HEADROOM_PERCENT: u32 = 85;

/// Estimates the resources of `cfg` on `family` (a budget's block size decides the BRAM count).
pub fn estimate(board: &Board, cfg: &ArrayConfig) -> Estimate {
    let n = cfg.size as u32;
    let k = match board.family {
        Family::Xc7 => &XC7,
        // Both LUT4 fabrics with the accumulator in fabric; ECP5's own fit comes from its
        // routed measurements (boards/data/routed.json).
        Family::Ice40Up | Family::Ecp5 => &ICE40,
    };
    let lane_bits = 2 * cfg.buffer_depth as u64 * u64::from(cfg.word_bits);
    let blocks_per_lane = lane_bits.div_ceil(u64::from(board.budget.bram_block_bits));
    // Two matrices (A, B), n lanes each; with the conv unit, each of its two gather engines
    // keeps a copy of the feature map per pair of lanes, written half a row through each port.
    let (fm_blocks, conv_luts, conv_ffs) = if cfg.has_conv_unit() {
        let bits = (cfg.fm_depth as u64 * u64::from(cfg.word_bits))
            .div_ceil(u64::from(board.budget.bram_block_bits));
        let ports = (cfg.fm_row_words() as u64 / 2).div_ceil(u64::from(k.block_port_words));
        (
            2 * u64::from(n.div_ceil(2)) * bits.max(ports),
            k.conv_luts + n * k.conv_lane_luts,
            k.conv_ffs + n * k.conv_lane_ffs,
        )
    } else {
        (0, 0, 0)
    };
    let brams = (2 * u64::from(n) * blocks_per_lane + fm_blocks).min(u64::from(u32::MAX)) as u32;
    Estimate {
        luts: k.fixed_luts + n * n * k.pe_luts + n * k.column_luts + conv_luts,
        ffs: k.fixed_ffs + n * n * k.pe_ffs + n * k.column_ffs + conv_ffs,
        dsps: match board.family {
            // Two MACs per DSP48E1 with packing (`ArrayConfig::dsp_pack`, measured).
            Family::Xc7 => n * n / cfg.macs_per_dsp(),
            // A packed `25 x 8` multiply does not fit one 16 x 16 SB_MAC16 (nor is it mapped
            // onto an 18 x 18 MULT18X18D): no saving counted.
            Family::Ice40Up | Family::Ecp5 => n * n,
        },
        brams,
    }
}

/// Whether an estimate fits the board (hard blocks fully usable, logic up to the headroom).
pub fn fits(board: &Board, e: &Estimate) -> bool {
    let b = &board.budget;
    e.dsps <= b.dsps
        && e.brams <= b.bram_blocks
        && u64::from(e.luts) * 100 <= u64::from(b.luts) * u64::from(LUT_HEADROOM_PERCENT)
        && u64::from(e.ffs) * 100 <= u64::from(b.ffs) * u64::from(LUT_HEADROOM_PERCENT)
}

/// How far above a part's LUTs or flip-flops the estimate must be to refuse a design without
/// running Yosys (percent of the whole budget). The model is within 1% of Yosys at its
/// calibration points; anything between the fit line and this is left to Yosys's own count.
pub const CLEARLY_TOO_BIG_PERCENT: u64 = 150;

/// Why `cfg` cannot fit `board`, known from the configuration alone (so `systole bitstream`
/// refuses at once instead of after minutes of synthesis), or `None` when only synthesis can
/// tell. Multipliers are certain: the flows map every MAC onto one hard multiplier. LUTs and
/// flip-flops count only when the estimate exceeds the part by [`CLEARLY_TOO_BIG_PERCENT`].
pub fn clearly_too_big(board: &Board, cfg: &ArrayConfig) -> Option<String> {
    let e = estimate(board, cfg);
    let b = &board.budget;
    let n = cfg.size;
    let largest = match largest_array(board) {
        Some(c) => format!("the largest array that fits is {0}x{0}", c.size),
        None => "no array fits it".into(),
    };
    if e.dsps > b.dsps {
        return Some(format!(
            "a {n}x{n} array needs {} hard multipliers ({} MAC per multiplier) and the part has {}; {largest}",
            e.dsps, cfg.macs_per_dsp(), b.dsps
        ));
    }
    let over =
        |need: u32, have: u32| u64::from(need) * 100 > u64::from(have) * CLEARLY_TOO_BIG_PERCENT;
    for (what, need, have) in [("LUTs", e.luts, b.luts), ("flip-flops", e.ffs, b.ffs)] {
        if over(need, have) {
            return Some(format!(
                "a {n}x{n} array needs about {need} {what} by the resource model and the part has {have}; {largest}"
            ));
        }
    }
    None
}

/// The largest square array (with the default 512-row buffers, halved down to 16 rows when
/// block RAM is what runs out) that fits the board, or `None` if not even 2x2 does.
pub fn largest_array(board: &Board) -> Option<ArrayConfig> {
    let mut best = None;
    for n in MIN_SIZE..=MAX_SIZE {
        let mut depth = ArrayConfig::square(n).buffer_depth;
        let fit = loop {
            // The conv unit is an option of `systole bitstream` (`--fm-depth`), not a default.
            let cfg = ArrayConfig {
                buffer_depth: depth,
                fm_depth: 0,
                ..ArrayConfig::square(n)
            };
            if fits(board, &estimate(board, &cfg)) {
                break Some(cfg);
            }
            if depth <= 16 {
                break None;
            }
            depth /= 2;
        };
        match fit {
            Some(cfg) => best = Some(cfg),
            // Every resource grows with n, so the first miss ends the search.
            None => break,
        }
    }
    best
}

/// The largest conv unit that fits the board by the estimate: the largest square array with
/// the default 512-row buffers and a feature map of at least `MIN_FM_DEPTH` words, with the
/// deepest feature map that still fits beside it; `None` if not even 2x2 with the smallest map
/// does.
pub fn largest_conv_unit(board: &Board) -> Option<ArrayConfig> {
    largest_conv_unit_by(board, estimate)
}

/// The search of [`largest_conv_unit`] by any resource estimate (the SoC's adds its CPU).
pub(crate) fn largest_conv_unit_by(
    board: &Board,
    estimate: impl Fn(&Board, &ArrayConfig) -> Estimate,
) -> Option<ArrayConfig> {
    let mut best = None;
    for n in MIN_SIZE..=MAX_SIZE {
        let mut fit = None;
        let mut depth = MIN_FM_DEPTH;
        while depth <= MAX_FM_DEPTH {
            let cfg = ArrayConfig {
                fm_depth: depth,
                ..ArrayConfig::square(n)
            };
            if !fits(board, &estimate(board, &cfg)) {
                break;
            }
            fit = Some(cfg);
            depth *= 2;
        }
        match fit {
            Some(cfg) => best = Some(cfg),
            None => break,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::super::find;
    use super::*;

    /// An `n x n` array as the board flows build it by default: no conv unit.
    fn plain(n: usize) -> ArrayConfig {
        ArrayConfig {
            fm_depth: 0,
            ..ArrayConfig::square(n)
        }
    }

    #[test]
    fn dsp_count_is_one_per_mac() {
        let arty = find("arty-a7-35").unwrap();
        assert_eq!(estimate(arty, &plain(8)).dsps, 64);
        // Two 512 x 16 banks fill one RAMB18: one block per lane of A and of B.
        assert_eq!(estimate(arty, &plain(8)).brams, 16);
        let deep = ArrayConfig {
            buffer_depth: 2048,
            ..plain(8)
        };
        assert_eq!(estimate(arty, &deep).brams, 64);
        // A 4096-word feature map: 64 kbit per copy = 4 RAMB18, a copy per two of the 8
        // lanes, 2 engines.
        let conv = ArrayConfig {
            fm_depth: 4096,
            ..plain(8)
        };
        assert_eq!(estimate(arty, &conv).brams, 16 + 2 * 4 * 4);
        let ice = find("icebreaker").unwrap();
        // Two 512 x 16 banks are four 4-kbit EBR.
        assert_eq!(estimate(ice, &plain(2)).brams, 16);
        // Packed at 8 bits: a DSP48E1 per pair of MACs (measured), an SB_MAC16 still per MAC.
        let packed = plain(8).with_word_bits(8).with_dsp_pack(true);
        assert_eq!(estimate(arty, &packed).dsps, 32);
        assert_eq!(estimate(ice, &packed).dsps, 64);
    }

    /// Yosys 0.23 `synth_xilinx -flatten` on the bridge top with the conv unit (LUTs,
    /// flip-flops, RAMB18 with a RAMB36 counted as two).
    #[test]
    fn conv_unit_matches_the_yosys_measurements() {
        let arty = find("arty-a7-35").unwrap();
        for (n, fm_depth, luts, ffs, brams) in [
            (4, 512, 6500, 5804, 16),
            (8, 4096, 14313, 13003, 48),
            (8, 8192, 14288, 13083, 80),
        ] {
            let e = estimate(
                arty,
                &ArrayConfig {
                    fm_depth,
                    ..plain(n)
                },
            );
            let close = |got: u32, want: u32| got.abs_diff(want) * 100 <= 2 * want;
            assert!(
                close(e.luts, luts) && close(e.ffs, ffs),
                "{n} {fm_depth}: {e:?}"
            );
            // 512 words in rows of 4: half a RAMB18's bits, but a copy's two 32-bit ports
            // take two.
            assert_eq!(e.brams, brams, "{n} {fm_depth}");
        }
    }

    #[test]
    fn largest_conv_units_by_the_estimate() {
        let conv = |name| largest_conv_unit(find(name).unwrap()).map(|c| (c.size, c.fm_depth));
        // 9x9 (the most DSP48E1 allow) with 8192 words: 98 RAMB18 (16384 words: 178 of 100),
        // about 16,700 LUTs of the 17,680 (85%) the estimate allows.
        assert_eq!(conv("arty-a7-35"), Some((9, 8192)));
        // 15x15 (the most DSP48E1 allow) with 8192 words: 158 of 270 RAMB18 (16384: 286).
        assert_eq!(conv("arty-a7-100"), Some((15, 8192)));
        assert_eq!(conv("icebreaker"), None);
    }

    #[test]
    fn model_matches_the_yosys_calibration_points() {
        let arty = find("arty-a7-35").unwrap();
        for (n, luts, ffs) in [(2, 1665, 1139), (4, 3776, 2896), (8, 10096, 9623)] {
            let e = estimate(arty, &plain(n));
            let close = |got: u32, want: u32| got.abs_diff(want) * 100 <= want;
            assert!(close(e.luts, luts) && close(e.ffs, ffs), "{n}: {e:?}");
        }
        let ice = estimate(find("icebreaker").unwrap(), &plain(2));
        assert_eq!((ice.luts, ice.ffs, ice.dsps), (4452, 1350, 4));
    }

    #[test]
    fn largest_arrays_are_limited_by_multipliers() {
        let size = |name| largest_array(find(name).unwrap()).map(|c| c.size);
        // 9x9 = 81 <= 90 DSP48E1, 10x10 = 100 > 90.
        assert_eq!(size("arty-a7-35"), Some(9));
        assert_eq!(size("basys3"), Some(9));
        // 15x15 = 225 <= 240.
        assert_eq!(size("arty-a7-100"), Some(15));
        assert_eq!(size("nexys-a7-100"), Some(15));
        // 2x2 = 4 <= 8 SB_MAC16, 3x3 = 9 > 8.
        assert_eq!(size("icebreaker"), Some(2));
    }

    #[test]
    fn far_too_big_arrays_are_known_without_synthesis() {
        let ice = find("icebreaker").unwrap();
        let why = clearly_too_big(ice, &plain(16)).unwrap();
        assert!(
            why.contains("256 hard multipliers") && why.contains("2x2"),
            "{why}"
        );
        assert_eq!(clearly_too_big(ice, &plain(2)), None);
        let arty = find("arty-a7-35").unwrap();
        assert_eq!(clearly_too_big(arty, &plain(9)), None);
        assert!(clearly_too_big(arty, &plain(10)).is_some());
        // The borderline case is Yosys's: the 8x8 conv unit's LUT RAM is not in the model.
        let conv = ArrayConfig {
            fm_depth: 4096,
            ..plain(8)
        };
        assert_eq!(clearly_too_big(arty, &conv), None);
        // LUTs alone: a budget with multipliers to spare but few LUTs.
        let small = Board {
            budget: super::super::Budget {
                dsps: 10_000,
                ..arty.budget
            },
            ..*arty
        };
        let why = clearly_too_big(&small, &plain(20)).unwrap();
        assert!(why.contains("LUTs"), "{why}");
    }

    #[test]
    fn fit_respects_every_budget_line() {
        let arty = find("arty-a7-35").unwrap();
        let ok = estimate(arty, &plain(4));
        assert!(fits(arty, &ok));
        assert!(!fits(arty, &Estimate { dsps: 91, ..ok }));
        assert!(!fits(arty, &Estimate { brams: 101, ..ok }));
        assert!(!fits(arty, &Estimate { luts: 20_000, ..ok }));
        assert!(!fits(arty, &Estimate { ffs: 41_000, ..ok }));
    }
}
