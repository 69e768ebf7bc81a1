//! The accelerator's side of the data bus, written per array size `N` (its ports name every
//! lane, so this module is generated): the accelerator's register window, the row stage the
//! CPU fills two 16-bit lanes per word (or the row DMA's lanes load in one clock), and the C
//! stage the row sequencer's `capture` fills from the accelerator's C words, each `W`-bit word
//! sign-extended into a 16-bit lane (see `systole_core::soc`).

use super::netlist::{Block, Dir, Port, Width};
use super::Plan;
use std::fmt::Write;
use systole_core::soc::*;

/// Module name of the generated block.
pub(super) const MODULE: &str = "soc_stage";

/// Words of the row stage (and of the C stage): two lanes each.
pub(super) fn words(n: usize) -> usize {
    n.div_ceil(2)
}

/// Bits of a lane number (holds `0..=n`).
pub(super) fn lane_bits(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

/// A 32-bit Verilog constant.
fn h(v: u32) -> String {
    format!("32'h{v:08x}")
}

/// The block's ports: the bus, the DMA's lanes, the C words in, the stage words out.
pub(super) fn block(p: &Plan) -> Block {
    let lb = lane_bits(p.n);
    let b = Width::Bits;
    let mut ports: Vec<Port> = [
        ("clock", Dir::In, b(1)),
        ("addr", Dir::In, b(32)),
        ("wr", Dir::In, b(1)),
        ("wdata", Dir::In, b(32)),
        ("rdata", Dir::Out, b(32)),
        ("acc_we", Dir::Out, b(1)),
        ("acc_rdata", Dir::In, b(32)),
        ("lane_we", Dir::In, b(1)),
        ("lane_idx", Dir::In, b(lb)),
        ("lane_data", Dir::In, b(16)),
        ("lanes_clear", Dir::In, b(1)),
        ("stage_load", Dir::In, b(1)),
        ("capture", Dir::In, b(1)),
        ("c_lane", Dir::In, b(lb)),
        ("c_word", Dir::Out, b(16)),
    ]
    .into_iter()
    .map(|(n, d, w)| Port::new(n, d, w))
    .collect();
    ports.extend((0..p.n).map(|i| Port::new(format!("c_rd_{i}"), Dir::In, b(p.word_bits))));
    ports.extend((0..words(p.n)).map(|i| Port::new(format!("stage_{i}"), Dir::Out, b(32))));
    Block {
        module: MODULE,
        params: Vec::new(),
        ports,
    }
}

/// `(addr & mask) == base` for the aligned power-of-two span holding `bytes` from `base`.
fn region_hit(base: u32, bytes: u32) -> String {
    let span = bytes.next_power_of_two();
    debug_assert_eq!(base % span, 0, "region {base:#x} is not aligned to {span}");
    format!("((addr & {}) == {})", h(!(span - 1)), h(base))
}

/// C word `c` sign-extended from the accelerator's `w` bits to the stage's 16-bit lane.
fn c_lane(c: usize, w: u32) -> String {
    match 16 - w {
        0 => format!("c_rd_{c}"),
        ext => format!("{{{{{ext}{{c_rd_{c}[{}]}}}}, c_rd_{c}}}", w - 1),
    }
}

/// The lanes `2i + 1` (high half, 0 past the last lane) and `2i` of stage word `i`.
fn pair(i: usize, n: usize, lane: impl Fn(usize) -> String) -> String {
    let hi = match 2 * i + 1 < n {
        true => lane(2 * i + 1),
        false => "16'd0".into(),
    };
    format!("{{{hi}, {}}}", lane(2 * i))
}

/// The module's Verilog.
pub(super) fn module(p: &Plan) -> String {
    let mut v = header(&block(p));
    let n = p.n;
    let lb = lane_bits(n);
    let idx_bits = STAGE_WORDS.trailing_zeros();
    let lanes: Vec<String> = (0..n).map(|l| format!("lane_{l}")).collect();
    let cregs: Vec<String> = (0..words(n)).map(|i| format!("cstage_{i}")).collect();
    let _ = writeln!(
        v,
        "\
wire acc_hit = {acc};
wire stage_hit = {stage};
wire cstage_hit = {cstage};
wire [{im}:0] stage_idx = addr[{ih}:2];
// The row DMA's lanes, loaded into the stage in one clock.
reg [15:0] {lanes};
reg [31:0] {cregs};
reg [15:0] c_word_q;
reg [31:0] rdata_q;
assign acc_we = wr & acc_hit;
assign c_word = c_word_q;
assign rdata = rdata_q;
always @(posedge clock) begin
    if (wr & stage_hit) begin
        case (stage_idx)",
        acc = region_hit(ACC_REGS, 4 * 256),
        stage = region_hit(ROW_STAGE, 4 * STAGE_WORDS),
        cstage = region_hit(C_STAGE, 4 * STAGE_WORDS),
        im = idx_bits - 1,
        ih = idx_bits + 1,
        lanes = lanes.join(", "),
        cregs = cregs.join(", "),
    );
    for i in 0..words(n) {
        let _ = writeln!(v, "            {idx_bits}'d{i}: stage_{i} <= wdata;");
    }
    v.push_str("            default: ;\n        endcase\n    end\n    if (stage_load) begin\n");
    for i in 0..words(n) {
        let _ = writeln!(
            v,
            "        stage_{i} <= {};",
            pair(i, n, |l| format!("lane_{l}"))
        );
    }
    v.push_str("    end\n    if (capture) begin\n");
    for (i, r) in cregs.iter().enumerate() {
        let _ = writeln!(
            v,
            "        {r} <= {};",
            pair(i, n, |c| c_lane(c, p.word_bits))
        );
    }
    v.push_str("    end\n    if (lane_we) begin\n");
    for l in &lanes {
        let i = &l["lane_".len()..];
        let _ = writeln!(v, "        if (lane_idx == {lb}'d{i}) {l} <= lane_data;");
    }
    v.push_str("    end\n    if (lanes_clear) begin\n");
    for l in &lanes {
        let _ = writeln!(v, "        {l} <= 16'd0;");
    }
    v.push_str("    end\nend\n");
    v.push_str(&muxes(n, idx_bits));
    v.push_str("endmodule\n");
    v
}

/// The C stage's lane the DMA stores, and the MMIO reads (0 outside the three windows).
fn muxes(n: usize, idx_bits: u32) -> String {
    let lb = lane_bits(n);
    let mut v = String::from("always @(*) begin\n    case (c_lane)\n");
    for l in 0..n {
        let bits = if l % 2 == 0 { "[15:0]" } else { "[31:16]" };
        let _ = writeln!(v, "        {lb}'d{l}: c_word_q = cstage_{}{bits};", l / 2);
    }
    v.push_str("        default: c_word_q = 16'd0;\n    endcase\nend\n");
    v.push_str("always @(*) begin\n    rdata_q = 32'd0;\n    if (acc_hit) rdata_q = acc_rdata;\n");
    for (name, hit) in [("stage", "stage_hit"), ("cstage", "cstage_hit")] {
        let _ = writeln!(v, "    if ({hit}) case (stage_idx)");
        for i in 0..words(n) {
            let _ = writeln!(v, "        {idx_bits}'d{i}: rdata_q = {name}_{i};");
        }
        v.push_str("        default: ;\n    endcase\n");
    }
    v.push_str("end\n");
    v
}

/// The module's header from its port list (outputs of stage words are registers).
fn header(b: &Block) -> String {
    let decls: Vec<String> = b
        .ports
        .iter()
        .map(|p| {
            let kind = match (p.dir, p.name.starts_with("stage_")) {
                (Dir::In, _) => "input wire",
                (Dir::Out, true) => "output reg",
                (Dir::Out, false) => "output wire",
            };
            match p.width.range() {
                Some(r) => format!("    {kind} [{r}] {}", p.name),
                None => format!("    {kind} {}", p.name),
            }
        })
        .collect();
    format!("module {} (\n{}\n);\n", b.module, decls.join(",\n"))
}
