//! The gather engine's Verilog, written out here for each lane count instead of generated from
//! `GatherEngine::kernel`.
//!
//! rust-hdl turns every register into a submodule whose `d` input is combinational logic, and
//! Verilator evaluates all combinational logic on every clock. The idle engines' walkers, lane
//! sums and register copies cost about 45% of an 8x8 matmul simulation that never used
//! them. Here every register is assigned in one clocked block, and the walker arithmetic and the
//! feature-map reads sit inside the `if` of the state that uses them. An idle engine then costs
//! a few comparisons per clock.
//!
//! The logic is the same as `kernel`, which stays as what rust-hdl simulates (the unit tests in
//! `tests.rs`). Verilator runs this text, the conv conformance tests check it bit for bit
//! against the golden model, and the differential test (`crate::differential`) against the
//! Verilog rust-hdl generates from `kernel`, every output in every cycle. The differences
//! cannot be seen on the ports while `wr_en` is low: each lane's entry (the block RAM's
//! registered read, the word picked after it) and its valid bit change only while the engine
//! reads (the model's valid bit changes on every clock).
//!
//! The model's feature map has a read port per lane; here two lanes share a copy, a true
//! dual-port block RAM (see `engine_verilog`), which is why a feature-map row write pauses the
//! engine's reads for its clock in both (`hold` in `kernel`).

use std::fmt::Write;
use systole_core::field::Field;
use systole_core::gather::layout::{self as lay, *};
use systole_core::gather::{WALK_WORDS, WORDS};
use systole_core::regmap::gcmd;

/// The Verilog part-select of `f`: `[msb:lsb]`, or `[lsb]` for one bit.
fn sl(f: Field) -> String {
    if f.width == 1 {
        format!("[{}]", f.lsb)
    } else {
        format!("[{}:{}]", f.msb(), f.lsb)
    }
}

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

/// The sizes the engine's text is written for, derived from an [`EngineShape`].
struct Geometry {
    n: usize,
    /// `W`, and whether it is below the ports' 16 bits.
    w: usize,
    narrow: bool,
    row_words: usize,
    row_bits: usize,
    addr_bits: usize,
    /// Words of a memory entry (half a row), bits picking a word in it, entries per copy.
    half: usize,
    sel_bits: usize,
    entries: usize,
    copies: usize,
}

impl Geometry {
    fn new(shape: &EngineShape) -> Self {
        let (n, row_words, fm_words) = (shape.n, shape.row_words, shape.fm_words);
        let w = shape.word_bits as usize;
        let rows = fm_words / row_words;
        let row_bits = rows.trailing_zeros() as usize;
        let half = row_words / 2;
        Geometry {
            n,
            w,
            narrow: w < systole_core::numeric::MAX_WORD_BITS as usize,
            row_words,
            row_bits,
            addr_bits: row_bits + row_words.trailing_zeros() as usize,
            half,
            sel_bits: half.trailing_zeros() as usize,
            entries: fm_words / half,
            copies: n.div_ceil(2),
        }
    }

    /// `f` of every lane, concatenated.
    fn lanes(&self, f: &dyn Fn(usize) -> String) -> String {
        (0..self.n).map(f).collect()
    }
}

/// The body of the engine's module (ports and `localparam`s as rust-hdl declares them) of
/// `shape`. At `W` < 16 the map's entries hold `W`-bit words (the low bits of the 16-bit
/// words written) and each lane's word goes out sign-extended to 16 bits; at 16 bits the text
/// is the one the engine has always had.
pub(super) fn engine_verilog(shape: &EngineShape) -> String {
    if !shape.enabled {
        return absent_engine(shape.n, shape.row_words);
    }
    let g = Geometry::new(shape);
    let mut v = declarations(&g);
    v.push_str(&entries(&g));
    v.push_str(&run_and_setup(&g));
    v.push_str(&commands_and_writes(&g));
    v.push_str(&outputs(&g));
    v
}

/// Declarations and power-up values: configuration words, control, feature map, walkers,
/// lanes.
fn declarations(g: &Geometry) -> String {
    let (n, w, half, sel_bits) = (g.n, g.w, g.half, g.sel_bits);
    let mut v = String::new();
    v.push_str(
        "\
reg [1:0] state; // 0 idle, 1 start (walker loads), 2 setup (lane walk), 3 run (bank rows)
reg [16:0] count;
reg [16:0] klen;
reg bank;
reg [1:0] lane_mode;
reg k_next;
reg we_d;
reg [15:0] row_d;
",
    );
    // Configuration words: lane walker 0..16, K walker 17..33, bounds 34 (GatherConfig). Plain
    // registers, not a memory: they form a shift register.
    let cfg: Vec<String> = (0..WORDS).map(|i| format!("cfg_{i}")).collect();
    let _ = writeln!(v, "reg [31:0] {};", cfg.join(", "));
    // The feature map: one copy per pair of lanes, each a true dual-port block RAM whose
    // entries hold half a row (`half` words): lane `2c` reads copy `c` through port A, lane
    // `2c + 1` through port B, each an entry per clock into a register (`q_{i}`) with the word
    // picked after it (`sel_{i}`). A row write takes both ports of every copy (port A the low
    // half, port B the high half), so while `fm_we` the engine's reads pause (`hold`). Two
    // lanes per copy halve the block RAM of one copy per lane; a row-wide write port would
    // need a third port. `in_{i}` says whether the lane's coordinates were inside the map
    // (else the lane's word is 0). Words are `W` bits wide in the entries.
    let _ = writeln!(
        v,
        "reg [{}:0] {};",
        half * w - 1,
        (0..g.copies)
            .map(|c| format!("fm_{c} [0:{}]", g.entries - 1))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for w in ["lw", "kw"] {
        let _ = writeln!(
            v,
            "reg [15:0] {w}_idx0, {w}_idx1, {w}_idx2, {w}_qy, {w}_qx;\n\
             reg [3:0] {w}_ry, {w}_rx;\nreg [23:0] {w}_addr;"
        );
    }
    v.push_str(&g.lanes(&|i| {
        format!(
            "reg [15:0] l_qy_{i}, l_qx_{i};\nreg [3:0] l_ry_{i}, l_rx_{i};\nreg [23:0] l_addr_{i};\n\
             reg [{qm}:0] q_{i};\n{sel}reg in_{i};\n",
            qm = half * w - 1,
            sel = if sel_bits > 0 { format!("reg [{}:0] sel_{i};\n", sel_bits - 1) } else { String::new() }
        )
    }));
    // Power-up state: rust-hdl's registers start at zero (the feature map is written before
    // any read).
    v.push_str("initial begin\n");
    for i in 0..WORDS {
        let _ = writeln!(v, "    cfg_{i} = 32'h0;");
    }
    v.push_str(
        "    state = 2'h0;\n    count = 17'h0;\n    klen = 17'h0;\n    bank = 1'b0;\n    \
         lane_mode = 2'h0;\n    k_next = 1'b0;\n    we_d = 1'b0;\n    row_d = 16'h0;\n",
    );
    for w in ["lw", "kw"] {
        for r in ["idx0", "idx1", "idx2", "qy", "qx", "ry", "rx", "addr"] {
            let _ = writeln!(v, "    {w}_{r} = 0;");
        }
    }
    for i in 0..n {
        for r in ["l_qy", "l_qx", "l_ry", "l_rx", "l_addr", "q", "in"] {
            let _ = writeln!(v, "    {r}_{i} = 0;");
        }
        if sel_bits > 0 {
            let _ = writeln!(v, "    sel_{i} = 0;");
        }
    }
    v.push_str("end\n");
    v
}

/// The command decode and each port's entry: the row's half while a row is written, else the
/// lane's read (a port without a lane, the last of an odd count, only writes).
fn entries(g: &Geometry) -> String {
    let mut v = String::new();
    let _ = write!(
        v,
        "\
wire cmd_write = reg_we & (reg_addr == a_cmd);
wire [16:0] new_klen = reg_wdata{klen};
",
        klen = sl(gcmd::KLEN)
    );
    for i in 0..2 * g.copies {
        let (row_hi, bit) = (g.row_bits - 1, i % 2);
        let write = format!("{{fm_row[{row_hi}:0], 1'b{bit}}}");
        let entry = if i < g.n {
            let _ = writeln!(v, "wire [23:0] a_{i} = l_addr_{i} + kw_addr;");
            format!(
                "fm_we ? {write} : a_{i}[{}:{}]",
                g.addr_bits - 1,
                g.sel_bits
            )
        } else {
            write
        };
        let _ = writeln!(v, "wire [{}:0] e_{i} = {entry};", g.row_bits);
    }
    v
}

/// The clocked block's start, and its run (3), setup (2) and start (1) states.
fn run_and_setup(g: &Geometry) -> String {
    let n = g.n;
    let mut v = String::from(
        "\
wire refused = (state != 2'h0) | we_d | (new_klen == 17'h0) | (new_klen > depth);
always @(posedge clock) begin : engine
    reg [1:0] st;
    reg [16:0] cnt;
    reg lw_load, lw_step, kw_load, kw_step;
    reg last0, last1, last2, carry_y, carry_x;
    reg [31:0] dq, dd;
    reg [4:0] modulus, sum_y, sum_x;
    reg [3:0] diff_y, diff_x;
    reg [15:0] y, x;
    // Every register is read in this block before it is assigned (the states in reverse
    // order, the walkers after the lanes, commands and configuration last): then Verilator
    // keeps no copy of its old value, which it would make on every clock, busy or not.
    st = state;
    cnt = count;
    lw_load = 1'b0;
    lw_step = 1'b0;
    kw_load = 1'b0;
    kw_step = 1'b0;
    we_d <= 1'b0;
    if (st == 2'h3) begin
        // Every lane reads its entry (its word zero outside the map, after the read); the
        // first row waits while an array command still reads (or will read) the bank, and
        // every row while a feature-map row is written (the write takes the read ports).
",
    );
    let sel_bits = g.sel_bits;
    v.push_str(&g.lanes(&|i| {
        format!(
            "        y = l_qy_{i} + kw_qy;
        x = l_qx_{i} + kw_qx;
        in_{i} <= (l_ry_{i} == kw_ry) & (l_rx_{i} == kw_rx) & (y < cfg_{lim}{ly})
            & (x < cfg_{lim}{lx});
        if (~fm_we) q_{i} <= fm_{c}[e_{i}];
{sel}",
            c = i / 2,
            sel = if sel_bits > 0 {
                format!("        sel_{i} <= a_{i}[{}:0];\n", sel_bits - 1)
            } else {
                String::new()
            },
            lim = lay::LIMITS,
            ly = sl(LIMIT_Y),
            lx = sl(LIMIT_X),
        )
    }));
    v.push_str(
        "        if (~(((cnt == 17'h0) & bank_busy[bank]) | fm_we)) begin
            kw_step = 1'b1;
            we_d <= 1'b1;
            row_d <= cnt[15:0];
            count <= cnt + 17'h1;
            if ((cnt + 17'h1) == klen) state <= 2'h0;
        end
    end
    if (st == 2'h2) begin
        // The lane walker's states shift in from the top lane: after `n` steps lane `l`
        // holds the state after `l` steps.
        lw_step = 1'b1;
",
    );
    for r in ["qy", "qx", "ry", "rx", "addr"] {
        for i in 0..n - 1 {
            let _ = writeln!(v, "        l_{r}_{i} <= l_{r}_{};", i + 1);
        }
        let _ = writeln!(v, "        l_{r}_{} <= lw_{r};", n - 1);
    }
    v.push_str(
        "        count <= cnt + 17'h1;
        if (cnt == lanes_last) begin
            count <= 17'h0;
            state <= 2'h3;
        end
    end
    if (st == 2'h1) begin
        lw_load = lane_mode == 2'h0;
        kw_load = ~k_next;
        count <= 17'h0;
        state <= (lane_mode == 2'h2) ? 2'h3 : 2'h2;
    end
",
    );
    v
}

/// The clocked block's rest: the walkers, a command, the configuration's shift, the map's row
/// writes and the reset.
fn commands_and_writes(g: &Geometry) -> String {
    let (w, half, narrow) = (g.w, g.half, g.narrow);
    let mut v = String::new();
    let _ = writeln!(
        v,
        "    // Both walkers take the remainder modulus from word {w} of the lane walker.
    modulus = {{1'b0, cfg_{w}{m}}};",
        w = COUNT2_MOD,
        m = sl(MODULUS)
    );
    v.push_str(&walker("lw", 0));
    v.push_str(&walker("kw", WALK_WORDS));
    let _ = write!(
        v,
        "    if (cmd_write & ~refused) begin
        klen <= new_klen;
        bank <= reg_wdata{bank};
        lane_mode <= reg_wdata{lanes};
        k_next <= reg_wdata{k_next};
        state <= 2'h1;
    end
    // Configuration: each write shifts one word in at the end.
    if (reg_we & (reg_addr == a_cfg)) begin
",
        bank = sl(gcmd::BANK),
        lanes = sl(gcmd::LANES),
        k_next = sl(gcmd::K_NEXT)
    );
    for i in 0..WORDS - 1 {
        let _ = writeln!(v, "        cfg_{i} <= cfg_{};", i + 1);
    }
    let _ = writeln!(v, "        cfg_{} <= reg_wdata;\n    end", WORDS - 1);
    // Every copy takes the same row, through both ports. Blocking writes, after every read
    // of the maps in this block (so reads still see the old words): Verilator keeps a set
    // flag per non-blocking memory write and clears and tests them all on every clock, which
    // cost about a third of the 8x8 simulation speed. Nothing else reads the maps, so the
    // lint's rule against blocking writes is waived for these.
    // Below 16 bits an entry keeps the low `W` bits of each word (the core's words are
    // sign-extended, so no value is lost).
    let half_row = |h: usize| {
        (h * half..(h + 1) * half)
            .rev()
            .map(|i| match narrow {
                true => format!("fm_data${i}[{}:0]", w - 1),
                false => format!("fm_data${i}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    v.push_str("    /* verilator lint_off BLKSEQ */\n    if (fm_we) begin\n");
    for c in 0..g.copies {
        let _ = writeln!(v, "        fm_{c}[e_{}] = {{{}}};", 2 * c, half_row(0));
        let _ = writeln!(v, "        fm_{c}[e_{}] = {{{}}};", 2 * c + 1, half_row(1));
    }
    v.push_str("    end\n    /* verilator lint_on BLKSEQ */\n");
    v.push_str(
        "    if (reset) begin
        state <= 2'h0;
        we_d <= 1'b0;
    end
end
",
    );
    v
}

/// The outputs: status, the row written, each lane's word (sign-extended below 16 bits), and
/// the bits nothing reads.
fn outputs(g: &Geometry) -> String {
    let (w, narrow, sel_bits, row_bits) = (g.w, g.narrow, g.sel_bits, g.row_bits);
    let mut v = String::from(
        "assign busy = (state != 2'h0) | we_d;
assign cmd_error = cmd_write & refused;
assign wr_en = we_d;
assign wr_bank = bank;
assign wr_row = row_d;
",
    );
    v.push_str(&g.lanes(&|i| {
        if !narrow {
            let word = if sel_bits > 0 {
                format!("q_{i}[{{sel_{i}, 4'h0}} +: 16]")
            } else {
                format!("q_{i}")
            };
            return format!("assign wr_data${i} = in_{i} ? {word} : 16'h0;\n");
        }
        // The lane's `W`-bit word, sign-extended to the core's 16 bits.
        let word = if sel_bits > 0 {
            format!("q_{i}[sel_{i} * {w} +: {w}]")
        } else {
            format!("q_{i}")
        };
        format!(
            "wire [{wm}:0] word_{i} = {word};\n\
             assign wr_data${i} = in_{i} ? {{{{{ext}{{word_{i}[{wm}]}}}}, word_{i}}} : 16'h0;\n",
            wm = w - 1,
            ext = 16 - w
        )
    }));
    // `enabled` is always 1 here; rows above the map's size do not exist.
    let high_rows = if row_bits < 16 {
        format!(", fm_row[15:{row_bits}]")
    } else {
        String::new()
    };
    // Address bits above the map's size (it wraps).
    let high_addr: String = g.lanes(&|i| format!(", a_{i}[23:{}]", g.addr_bits));
    // Word bits above `W`, which the map does not keep.
    let high_words: String = match narrow {
        true => (0..g.row_words)
            .map(|i| format!(", fm_data${i}[15:{w}]"))
            .collect(),
        false => String::new(),
    };
    let _ = writeln!(
        v,
        "wire unused_gather = &{{1'b0, enabled{high_rows}{high_addr}{high_words}}};"
    );
    v
}

/// One walker's load and step (`systole_core::gather::Walk::step`), inside the engine's
/// clocked block; `w` names its registers, `base` is its first configuration word. Every
/// slice comes from the layout in `systole_core::gather::layout`.
fn walker(w: &str, base: usize) -> String {
    let c = |i: usize, f: Field| format!("cfg_{}{}", base + i, sl(f));
    let steps: String = (0..4)
        .map(|l| {
            let cond = match l {
                0 => "if (~last0) begin".to_string(),
                3 => "end else begin".to_string(),
                _ => format!("end else if (~last{l}) begin"),
            };
            format!(
                "        {cond}\n            dq = cfg_{};\n            dd = cfg_{};\n",
                base + step_q_word(l),
                base + step_a_word(l)
            )
        })
        .collect();
    format!(
        "    if ({w}_step) begin
        // The level that steps is the innermost one not at its last count. (Every read comes
        // before the first assignment.)
        last0 = ({w}_idx0 + 16'h1) == {count0};
        last1 = ({w}_idx1 + 16'h1) == {count1};
        last2 = ({w}_idx2 + 16'h1) == {count2};
{steps}        end
        sum_y = {{1'b0, {w}_ry}} + {{1'b0, dd{dr_y}}};
        sum_x = {{1'b0, {w}_rx}} + {{1'b0, dd{dr_x}}};
        carry_y = sum_y >= modulus;
        carry_x = sum_x >= modulus;
        diff_y = sum_y[3:0] - modulus[3:0];
        diff_x = sum_x[3:0] - modulus[3:0];
        {w}_idx0 <= last0 ? 16'h0 : {w}_idx0 + 16'h1;
        if (last0) {w}_idx1 <= last1 ? 16'h0 : {w}_idx1 + 16'h1;
        if (last0 & last1) {w}_idx2 <= last2 ? 16'h0 : {w}_idx2 + 16'h1;
        {w}_ry <= carry_y ? diff_y : sum_y[3:0];
        {w}_rx <= carry_x ? diff_x : sum_x[3:0];
        {w}_qy <= {w}_qy + dq{dq_y} + (carry_y ? {cq_y} : 16'h0);
        {w}_qx <= {w}_qx + dq{dq_x} + (carry_x ? {cq_x} : 16'h0);
        {w}_addr <= {w}_addr + dd{da} + (carry_y ? {ca_y} : 24'h0)
            + (carry_x ? {ca_x} : 24'h0);
    end
    // A load wins over a step (the two never come together).
    if ({w}_load) begin
        {w}_idx0 <= {s_idx0};
        {w}_idx1 <= {s_idx1};
        {w}_idx2 <= {s_idx2};
        {w}_ry <= {s_ry};
        {w}_rx <= {s_rx};
        {w}_qy <= {s_qy};
        {w}_qx <= {s_qx};
        {w}_addr <= {s_addr};
    end
",
        count0 = c(COUNTS01, COUNT0),
        count1 = c(COUNTS01, COUNT1),
        count2 = c(COUNT2_MOD, COUNT2),
        dr_y = sl(DR_Y),
        dr_x = sl(DR_X),
        dq_y = sl(DQ_Y),
        dq_x = sl(DQ_X),
        da = sl(DA),
        cq_y = c(CARRY_Q, CQ_Y),
        cq_x = c(CARRY_Q, CQ_X),
        ca_y = c(CARRY_A_Y, CA_Y),
        ca_x = c(CARRY_A_X, CA_X),
        s_idx0 = c(START_IDX01, START_IDX0),
        s_idx1 = c(START_IDX01, START_IDX1),
        s_idx2 = c(START_IDX2_R, START_IDX2),
        s_ry = c(START_IDX2_R, START_RY),
        s_rx = c(START_IDX2_R, START_RX),
        s_qy = c(START_Q, START_QY),
        s_qx = c(START_Q, START_QX),
        s_addr = c(START_ADDR, ADDR),
    )
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
