//! The guide's reference tables, each made from the one definition it restates.

use super::{table, GuideError};
use systole_core::config::{self, ArrayConfig};
use systole_core::field::Field;
use systole_core::gather::{self, layout};
use systole_core::numeric::{self, lane_seed, tile_seed, Lfsr32};
use systole_core::regmap::REGISTERS;
use systole_hdl::{PortDir, PortInfo};

/// `[msb:lsb]`, or `[lsb]` for one bit.
pub(crate) fn bits(f: &Field) -> String {
    if f.width == 1 {
        format!("[{}]", f.lsb)
    } else {
        format!("[{}:{}]", f.msb(), f.lsb)
    }
}

/// Width formula, timing and meaning of a port (by name, data ports without their index).
type PortText = (
    &'static str,
    fn(&ArrayConfig) -> u32,
    &'static str,
    &'static str,
);

fn port_text(name: &str) -> Option<PortText> {
    let aw: fn(&ArrayConfig) -> u32 = |c| c.row_addr_bits();
    let one: fn(&ArrayConfig) -> u32 = |_| 1;
    let word: fn(&ArrayConfig) -> u32 = |_| 16;
    Some(match name {
        "clock" => (
            "1",
            one,
            "-",
            "all registers and RAMs sample on its rising edge",
        ),
        "reset" => (
            "1",
            one,
            "edge",
            "synchronous, active high; hold it for at least one edge after power-up",
        ),
        "reg_addr" => (
            "8",
            |_| 8,
            "edge / comb.",
            "register index (table Registers); also selects `reg_rdata`",
        ),
        "reg_wdata" => ("32", |_| 32, "edge", "register write data"),
        "reg_we" => (
            "1",
            one,
            "edge",
            "write `reg_wdata` to `reg_addr` on this edge",
        ),
        "reg_rdata" => (
            "32",
            |_| 32,
            "comb.",
            "read data of `reg_addr`, combinational (no edge needed, no side effects)",
        ),
        "a_wr_en" | "b_wr_en" => (
            "1",
            one,
            "edge",
            "write one row into the A (B) buffer on this edge",
        ),
        "a_wr_bank" | "b_wr_bank" => ("1", one, "edge", "bank written"),
        "a_wr_row" | "b_wr_row" => (
            "log2(buffer_depth)",
            aw,
            "edge",
            "row = K index within the bank",
        ),
        "a_wr_data" => (
            "W each (16 by default), n ports",
            word,
            "edge",
            "lane `r` = `A[i0 + r][k]` (two's complement)",
        ),
        "b_wr_data" => (
            "W each (16 by default), n ports",
            word,
            "edge",
            "lane `c` = `B[k][j0 + c]`",
        ),
        "c_rd_bank" => ("1", one, "edge", "C bank read"),
        "c_rd_row" => (
            "max(1, ceil(log2 n))",
            |c| c.tile_row_bits().max(1),
            "edge",
            "tile row `r` read",
        ),
        "c_rd_data" => (
            "W each (16 by default), n ports",
            word,
            "after the edge",
            "lane `c` = `C[i0 + r][j0 + c]` of the row sampled at the last edge",
        ),
        "fm_wr_en" => (
            "1",
            one,
            "edge",
            "write one feature-map row (ignored without a conv unit)",
        ),
        "fm_wr_row" => (
            "log2(fm_depth) - log2(R)",
            |c| c.fm_addr_bits() - c.fm_row_words().trailing_zeros(),
            "edge",
            "feature-map row; log2(fm_depth) counts as 9 without a conv unit",
        ),
        "fm_wr_data" => (
            "W each (16 by default), R ports",
            word,
            "edge",
            "word `i` goes to feature-map address `row * R + i`",
        ),
        _ => return None,
    })
}

/// `(base, Some(index))` for a data port like `a_wr_data_3`.
fn split_data(name: &str) -> (&str, Option<usize>) {
    match name.rsplit_once('_') {
        Some((base, i)) if base.ends_with("_data") => (base, i.parse().ok()),
        _ => (name, None),
    }
}

/// The configurations the width formulas are checked against.
fn check_configs() -> Vec<ArrayConfig> {
    let mut v = vec![ArrayConfig::square(4), ArrayConfig::square(8)];
    for (n, depth, fm) in [(2, 16, 512), (3, 64, 0), (5, 512, 1024), (16, 65536, 32768)] {
        let mut c = ArrayConfig::square(n);
        (c.buffer_depth, c.fm_depth) = (depth, fm);
        v.push(c);
    }
    v
}

/// Every port of `top`, with its width for the 4x4 default configuration.
pub(super) fn ports() -> Result<String, GuideError> {
    let bad = |reason: String| GuideError::Inconsistent {
        name: "ports",
        reason,
    };
    let hdl = |source| GuideError::Hdl {
        name: "ports",
        source,
    };
    let reference = ArrayConfig::square(4);
    for cfg in check_configs() {
        let ports = systole_hdl::ports(&cfg).map_err(hdl)?;
        for p in &ports {
            let (base, _) = split_data(&p.name);
            let (_, width, ..) = port_text(base)
                .ok_or_else(|| bad(format!("port {} has no description", p.name)))?;
            if width(&cfg) != p.width {
                return Err(bad(format!(
                    "{}: the guide's formula gives {} bits, systole_hdl::ports {} ({cfg:?})",
                    p.name,
                    width(&cfg),
                    p.width
                )));
            }
        }
    }
    let ports = systole_hdl::ports(&reference).map_err(hdl)?;
    let mut rows = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for p in &ports {
        let (base, index) = split_data(&p.name);
        if seen.contains(&base) {
            continue;
        }
        seen.push(base);
        let count = ports
            .iter()
            .filter(|q| split_data(&q.name).0 == base)
            .count();
        let shown = match index {
            Some(_) => format!("`{base}_0` .. `{base}_{}`", count - 1),
            None => format!("`{}`", p.name),
        };
        let (formula, _, timing, meaning) = port_text(base).expect("checked above");
        let dir = match p.dir {
            PortDir::Input => "in",
            PortDir::Output => "out",
        };
        rows.push(vec![
            shown,
            dir.into(),
            formula.into(),
            describe_width(p, count),
            timing.into(),
            meaning.into(),
        ]);
    }
    Ok(table(
        &["port", "dir", "width", "4x4 top", "timing", "meaning"],
        &rows,
    ))
}

fn describe_width(p: &PortInfo, count: usize) -> String {
    if count > 1 {
        format!("{count} x {}", p.width)
    } else {
        p.width.to_string()
    }
}

/// The register map.
pub(super) fn registers() -> String {
    let rows: Vec<Vec<String>> = REGISTERS
        .iter()
        .map(|r| {
            vec![
                format!("0x{:02X}", r.addr),
                format!("`{}`", r.name),
                r.access.name().into(),
                r.reset.into(),
                r.meaning.into(),
            ]
        })
        .collect();
    table(&["addr", "name", "access", "after reset", "meaning"], &rows)
}

/// The SoC's row DMA: its registers, the command's fields and the feature bit announcing it.
pub(super) fn soc_dma() -> String {
    use systole_core::soc::*;
    soc_block(
        &DMA_REGISTERS,
        &SYS_FEATURE_DMA,
        &[
            ("`DMA_CMD`", ROW_CMD_ROW),
            ("`DMA_CMD`", ROW_CMD_BANK),
            ("`DMA_CMD`", ROW_CMD_KIND),
            ("`DMA_LANES`, `DMA_ROWS`", DMA_COUNT),
        ],
    )
}

/// A SoC block's tables: its `registers` (name, address, meaning) with the `SYS_FEATURES` bit
/// announcing it, then its `fields` by register.
pub(super) fn soc_block(
    registers: &[(&str, u32, &str)],
    feature: &Field,
    fields: &[(&str, Field)],
) -> String {
    use systole_core::soc::SYS_FEATURES;
    let mut rows: Vec<Vec<String>> = registers
        .iter()
        .map(|&(name, addr, meaning)| {
            vec![
                format!("`0x{addr:08X}`"),
                format!("`{name}`"),
                meaning.into(),
            ]
        })
        .collect();
    rows.push(vec![
        format!("`0x{SYS_FEATURES:08X}`"),
        "`SYS_FEATURES`".into(),
        format!(
            "read-only; bit {} (`{}`): {}",
            feature.lsb, feature.name, feature.meaning
        ),
    ]);
    let mut out = table(&["address", "register", "meaning"], &rows);
    out.push('\n');
    let fields: Vec<Vec<String>> = fields
        .iter()
        .map(|(reg, f)| {
            vec![
                (*reg).into(),
                format!("`{}`", f.name),
                bits(f),
                f.meaning.into(),
            ]
        })
        .collect();
    out.push_str(&table(&["register", "field", "bits", "meaning"], &fields));
    out
}

/// Every register bit field.
pub(super) fn fields() -> String {
    let mut rows = Vec::new();
    for r in REGISTERS.iter().filter(|r| !r.fields.is_empty()) {
        if r.name == "GB_CMD" {
            continue;
        }
        let name = if r.name == "GA_CMD" {
            "`GA_CMD`, `GB_CMD`".to_string()
        } else {
            format!("`{}`", r.name)
        };
        for f in r.fields {
            rows.push(vec![
                name.clone(),
                format!("`{}`", f.name),
                bits(f),
                f.meaning.into(),
            ]);
        }
    }
    table(&["register", "field", "bits", "meaning"], &rows)
}

/// The 35 configuration words of a gather engine, in shift-in order.
pub(super) fn gather_words() -> String {
    let rows: Vec<Vec<String>> = layout::engine_words()
        .map(|w| {
            let within = match w.walker {
                "limits" => "-".to_string(),
                "lane" => w.index.to_string(),
                _ => (w.index - gather::WALK_WORDS).to_string(),
            };
            let level = w.level.map_or("-".into(), |l| l.to_string());
            let fields: Vec<String> = w
                .fields
                .iter()
                .map(|f| format!("`{}` {}", f.name, bits(f)))
                .collect();
            vec![
                w.index.to_string(),
                w.walker.into(),
                within,
                level,
                fields.join(", "),
            ]
        })
        .collect();
    table(&["word", "walker", "walker word", "level", "fields"], &rows)
}

/// What each gather configuration field holds.
pub(super) fn gather_fields() -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for w in layout::engine_words() {
        for f in w.fields {
            if !names.contains(&f.name) {
                names.push(f.name);
                rows.push(vec![
                    format!("`{}`", f.name),
                    f.width.to_string(),
                    f.meaning.into(),
                ]);
            }
        }
    }
    table(&["field", "bits wide", "meaning"], &rows)
}

/// The limits, from the constants that enforce them.
pub(super) fn limits() -> String {
    let d = ArrayConfig::square(4);
    let row =
        |what: &str, value: String, source: &str| vec![what.into(), value, format!("`{source}`")];
    let rows = vec![
        row(
            "array size n",
            format!("{}..={}", config::MIN_SIZE, config::MAX_SIZE),
            "config::MIN_SIZE, MAX_SIZE",
        ),
        row(
            "word width W",
            format!(
                "{0}..={1} bits (default {2}): the array's top, its conv unit and the bridge and SoC images at every W (`ArrayConfig::validate_built`)",
                numeric::MIN_WORD_BITS,
                numeric::MAX_WORD_BITS,
                d.word_bits,
            ),
            "numeric::MIN_WORD_BITS, MAX_WORD_BITS; ArrayConfig::validate_built",
        ),
        row(
            "fractional bits of a tensor (frac)",
            format!("0..=W-1 (0..={} at W = {})", numeric::MAX_FRAC, d.word_bits),
            "numeric::max_frac",
        ),
        row(
            "accumulator width",
            format!(
                "2W + {} bits ({} at W = {})",
                numeric::K_BITS - 1,
                numeric::ACC_BITS,
                d.word_bits
            ),
            "numeric::acc_bits",
        ),
        row(
            "longest dot product K (MAX_K)",
            format!("{} ({})", numeric::MAX_K, pow2(numeric::MAX_K)),
            "numeric::MAX_K",
        ),
        row(
            "output shift",
            format!("0..={}", numeric::MAX_SHIFT),
            "numeric::MAX_SHIFT",
        ),
        row(
            "rounding codes",
            format!("0..={}", systole_core::Rounding::Stochastic.code()),
            "Rounding::code",
        ),
        row(
            "buffer_depth (rows per A/B bank; K_LEN and gather klen 1..=buffer_depth)",
            format!(
                "power of two, {}..={} (default {})",
                config::MIN_BUFFER_DEPTH,
                config::MAX_BUFFER_DEPTH,
                d.buffer_depth
            ),
            "config::MIN_BUFFER_DEPTH, MAX_BUFFER_DEPTH",
        ),
        row(
            "fm_depth (feature-map words)",
            format!(
                "0 (no conv unit) or a power of two, {}..={} (default {})",
                config::MIN_FM_DEPTH,
                config::MAX_FM_DEPTH,
                config::DEFAULT_FM_DEPTH
            ),
            "config::MIN_FM_DEPTH, MAX_FM_DEPTH",
        ),
        row(
            "feature-map row R (words per fm_wr row)",
            "largest power of two <= n".into(),
            "ArrayConfig::fm_row_words",
        ),
        row(
            "walker address",
            format!(
                "{} bits, wraps; the feature map uses it modulo fm_depth",
                layout::DA.width
            ),
            "gather::layout::DA",
        ),
        row(
            "remainder modulus (a stride)",
            format!("1..={}", gather::MAX_MODULUS),
            "gather::MAX_MODULUS",
        ),
        row(
            "padded input side, channels",
            format!("<= {}", gather::MAX_DIM),
            "gather::MAX_DIM",
        ),
        row(
            "image slots in a ring",
            format!("<= {}", gather::UNBOUNDED),
            "gather::UNBOUNDED",
        ),
        row(
            "gather configuration words",
            format!(
                "{} ({} per walker + limits)",
                gather::WORDS,
                gather::WALK_WORDS
            ),
            "gather::WORDS",
        ),
    ];
    table(&["what", "limit", "defined by"], &rows)
}

/// `v` as a power of two, or one below one.
fn pow2(v: usize) -> String {
    if v.is_power_of_two() {
        format!("2^{}", v.ilog2())
    } else if (v + 1).is_power_of_two() {
        format!("2^{} - 1", (v + 1).ilog2())
    } else {
        v.to_string()
    }
}

/// The numeric contract's constants.
pub(super) fn contract_constants() -> String {
    let hex = |v: u32| format!("`0x{v:08X}`");
    let rows = vec![
        vec![
            "`LFSR_TAPS`".into(),
            hex(numeric::LFSR_TAPS),
            "Galois feedback mask, x^32 + x^22 + x^2 + x + 1".into(),
        ],
        vec![
            "`LANE_SEED_MUL`".into(),
            hex(numeric::LANE_SEED_MUL),
            "per-column seed multiplier".into(),
        ],
        vec![
            "`TILE_SEED_MUL[0]`".into(),
            hex(numeric::TILE_SEED_MUL[0]),
            "multiplies the tile's first row `i0`".into(),
        ],
        vec![
            "`TILE_SEED_MUL[1]`".into(),
            hex(numeric::TILE_SEED_MUL[1]),
            "multiplies the tile's first column `j0`".into(),
        ],
        vec![
            "`TILE_SEED_MIX[0]`".into(),
            hex(numeric::TILE_SEED_MIX[0]),
            "first finaliser multiplier".into(),
        ],
        vec![
            "`TILE_SEED_MIX[1]`".into(),
            hex(numeric::TILE_SEED_MIX[1]),
            "second finaliser multiplier".into(),
        ],
    ];
    table(&["constant", "value", "role"], &rows)
}

/// Values a re-implementation can check itself against.
pub(super) fn contract_checks() -> String {
    let hex = |v: u32| format!("`0x{v:08X}`");
    let mut rows = Vec::new();
    for (seed, i0, j0) in [
        (0, 0, 0),
        (1, 0, 0),
        (7, 0, 4),
        (7, 4, 0),
        (0xDEAD_BEEF, 8, 16),
    ] {
        rows.push(vec![
            format!("`tile_seed(0x{seed:X}, {i0}, {j0})`"),
            hex(tile_seed(seed, i0, j0)),
        ]);
    }
    let t = tile_seed(7, 0, 4);
    for c in 0..2 {
        rows.push(vec![
            format!("`lane_seed(tile_seed(7, 0, 4), {c})`"),
            hex(lane_seed(t, c)),
        ]);
    }
    let mut l = Lfsr32::new(1);
    let steps: Vec<String> = (0..3).map(|_| hex(l.step())).collect();
    rows.push(vec![
        "LFSR from 1, states after 1, 2, 3 steps".into(),
        steps.join(", "),
    ]);
    rows.push(vec![
        "LFSR started at 0".into(),
        format!("state {} (0 is replaced by 1)", hex(Lfsr32::new(0).state())),
    ]);
    table(&["expression", "value"], &rows)
}

/// Check values of the learning-rate schedule ([`systole_golden::schedule`]).
pub(super) fn lr_schedule() -> String {
    use systole_golden::schedule::{lr_q, quantize};
    let mut rows = Vec::new();
    for (lr, decay) in [(0.05f32, 0.8f32), (0.05, 1.0), (0.001, 0.5)] {
        let rates: Vec<String> = (0..5).map(|e| lr_q(lr, decay, e).to_string()).collect();
        rows.push(vec![
            format!("`{lr}`"),
            format!("`{decay}`"),
            format!("{} / {}", quantize(lr), quantize(decay)),
            rates.join(", "),
        ]);
    }
    table(
        &["lr", "decay", "units (lr / decay)", "lr_q of epochs 0..=4"],
        &rows,
    )
}
