//! The gather engine's Verilog: `hdl/verilog/gather.v` (module `systole_gather`), its parameters
//! fixed here, inside the ports rust-hdl declares for [`super::GatherEngine`].
//!
//! rust-hdl turns every register into a submodule whose `d` input is combinational logic, and
//! Verilator evaluates all combinational logic on every clock: the idle engines' walkers, lane
//! sums and register copies would cost about 45% of an 8x8 matmul simulation that never used
//! them. The file keeps every register in clocked blocks, with the walker arithmetic and the
//! feature-map reads inside the `if` of the state that uses them.
//!
//! The logic is the same as `kernel`, which stays as what rust-hdl simulates (the unit tests in
//! `tests.rs`). Verilator runs this text, the conv conformance tests check it bit for bit
//! against the golden model, and the differential test (`crate::differential`) against the
//! Verilog rust-hdl generates from `kernel`, every output in every cycle. The differences
//! cannot be seen on the ports while `wr_en` is low: each lane's entry (the block RAM's
//! registered read, the word picked after it) and its valid bit change only while the engine
//! reads (the model's valid bit changes on every clock).
//!
//! The model's feature map has a read port per lane; the file's has a copy per pair of lanes,
//! a true dual-port block RAM, which is why a feature-map row write pauses the engine's reads
//! for its clock in both (`hold` in `kernel`).

use std::fmt::Write;
use systole_core::field::Field;
use systole_core::gather::layout::{self as lay, *};
use systole_core::gather::{WALK_WORDS, WORDS};
use systole_core::regmap::gcmd;

/// The engine's hand-written Verilog (parameters `N`, `ROW_WORDS`, `FM_WORDS`, `W`, then the
/// configuration layout, then the model's constants).
pub(crate) const GATHER_V: &str = include_str!("../../verilog/gather.v");

// The file declares each field's width; its positions come from the layout (see `params`).
const _: () = {
    const fn w(f: Field, width: u32) -> bool {
        f.width == width
    }
    assert!(w(COUNT0, 16) && w(COUNT1, 16) && w(COUNT2, 16) && w(MODULUS, 4));
    assert!(w(DQ_Y, 16) && w(DQ_X, 16) && w(DA, 24) && w(DR_Y, 4) && w(DR_X, 4));
    assert!(w(CQ_Y, 16) && w(CQ_X, 16) && w(CA_Y, 24) && w(CA_X, 24));
    assert!(w(START_IDX0, 16) && w(START_IDX1, 16) && w(START_IDX2, 16));
    assert!(w(START_RY, 4) && w(START_RX, 4) && w(START_QY, 16) && w(START_QX, 16));
    assert!(w(ADDR, 24) && w(LIMIT_Y, 16) && w(LIMIT_X, 16));
    assert!(w(gcmd::KLEN, 17) && w(gcmd::BANK, 1) && w(gcmd::LANES, 2) && w(gcmd::K_NEXT, 1));
};

/// What the engine's Verilog is written for.
pub(super) struct EngineShape {
    /// Lanes.
    pub n: usize,
    /// Words of a feature-map row (a power of two).
    pub row_words: usize,
    /// Words of the feature map.
    pub fm_words: usize,
    /// False: the absent engine (constant outputs, every command refused).
    pub enabled: bool,
    /// Bits `W` of a feature-map word (the ports carry 16).
    pub word_bits: u32,
}

/// `gather.v`'s parameters for `shape`, in the file's order (the model's constants excepted):
/// the sizes, then every word index and field position of the configuration layout.
pub(super) fn params(shape: &EngineShape) -> Vec<(&'static str, u32)> {
    let word = |i: usize| i as u32;
    let mut p = vec![
        ("N", shape.n as u32),
        ("ROW_WORDS", shape.row_words as u32),
        ("FM_WORDS", shape.fm_words as u32),
        ("W", shape.word_bits),
        ("WORDS", word(WORDS)),
        ("WALK_WORDS", word(WALK_WORDS)),
        ("COUNTS01_WORD", word(COUNTS01)),
        ("COUNT2_MOD_WORD", word(COUNT2_MOD)),
    ];
    const STEPS: [(&str, &str); 4] = [
        ("STEP_Q0_WORD", "STEP_A0_WORD"),
        ("STEP_Q1_WORD", "STEP_A1_WORD"),
        ("STEP_Q2_WORD", "STEP_A2_WORD"),
        ("STEP_Q3_WORD", "STEP_A3_WORD"),
    ];
    for (level, (q, a)) in STEPS.into_iter().enumerate() {
        p.push((q, word(step_q_word(level))));
        p.push((a, word(step_a_word(level))));
    }
    p.extend([
        ("CARRY_Q_WORD", word(CARRY_Q)),
        ("CARRY_A_Y_WORD", word(CARRY_A_Y)),
        ("CARRY_A_X_WORD", word(CARRY_A_X)),
        ("START_IDX01_WORD", word(START_IDX01)),
        ("START_IDX2_R_WORD", word(START_IDX2_R)),
        ("START_Q_WORD", word(START_Q)),
        ("START_ADDR_WORD", word(START_ADDR)),
        ("LIMITS_WORD", word(lay::LIMITS)),
    ]);
    let fields: [(&str, Field); 27] = [
        ("COUNT0_LSB", COUNT0),
        ("COUNT1_LSB", COUNT1),
        ("COUNT2_LSB", COUNT2),
        ("MODULUS_LSB", MODULUS),
        ("DQ_Y_LSB", DQ_Y),
        ("DQ_X_LSB", DQ_X),
        ("DA_LSB", DA),
        ("DR_Y_LSB", DR_Y),
        ("DR_X_LSB", DR_X),
        ("CQ_Y_LSB", CQ_Y),
        ("CQ_X_LSB", CQ_X),
        ("CA_Y_LSB", CA_Y),
        ("CA_X_LSB", CA_X),
        ("START_IDX0_LSB", START_IDX0),
        ("START_IDX1_LSB", START_IDX1),
        ("START_IDX2_LSB", START_IDX2),
        ("START_RY_LSB", START_RY),
        ("START_RX_LSB", START_RX),
        ("START_QY_LSB", START_QY),
        ("START_QX_LSB", START_QX),
        ("START_ADDR_LSB", ADDR),
        ("LIMIT_Y_LSB", LIMIT_Y),
        ("LIMIT_X_LSB", LIMIT_X),
        ("KLEN_LSB", gcmd::KLEN),
        ("BANK_LSB", gcmd::BANK),
        ("LANES_LSB", gcmd::LANES),
        ("K_NEXT_LSB", gcmd::K_NEXT),
    ];
    p.extend(fields.map(|(name, f)| (name, f.lsb)));
    p
}

/// The body of the engine's module (ports and `localparam`s as rust-hdl declares them) of
/// `shape`: `gather.v` at its parameters, joined to rust-hdl's per-lane ports (`fm_data$i`,
/// `wr_data$i`), which the file takes packed.
pub(super) fn engine_verilog(shape: &EngineShape) -> String {
    if !shape.enabled {
        return absent_engine(shape.n, shape.row_words);
    }
    let fm: Vec<String> = (0..shape.row_words)
        .rev()
        .map(|i| format!("fm_data${i}"))
        .collect();
    let mut v = format!(
        "wire [{}:0] fm_data = {{{}}};\nwire [{}:0] wr_data;\n",
        16 * shape.row_words - 1,
        fm.join(", "),
        16 * shape.n - 1
    );
    for i in 0..shape.n {
        let _ = writeln!(
            v,
            "assign wr_data${i} = wr_data[{}:{}];",
            16 * i + 15,
            16 * i
        );
    }
    v.push_str(&crate::vfile::body_at(GATHER_V, &params(shape)));
    v
}

/// The engine of a configuration without a conv unit (`fm_depth` 0): nothing runs, every
/// command is refused (`cmd_error`), and synthesis keeps none of it.
fn absent_engine(n: usize, row_words: usize) -> String {
    let mut v = String::from(
        "\
assign busy = 1'b0;
assign cmd_error = reg_we & (reg_addr == a_cmd);
assign wr_en = 1'b0;
assign wr_bank = 1'b0;
assign wr_row = 16'h0;
",
    );
    for i in 0..n {
        let _ = writeln!(v, "assign wr_data${i} = 16'sh0;");
    }
    let fm: Vec<String> = (0..row_words).map(|i| format!("fm_data${i}")).collect();
    let _ = writeln!(
        v,
        "wire unused_gather = &{{1'b0, clock, reset, reg_wdata, fm_we, fm_row, {}, bank_busy, \
         a_cfg, depth, lanes_last, enabled}};",
        fm.join(", ")
    );
    v
}
