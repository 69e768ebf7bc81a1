//! The accelerator on the CPU's data bus: its registers at `ACC_REGS + 4 * r`, the row stage
//! the CPU fills two lanes per word, `ROW_CMD` committing the stage into an A, B or
//! feature-map row in one clock, and C rows read into the C stage (see `systole_core::soc`).
//!
//! A `ROW_CMD` write is held on the bus (no acknowledge) until the command is done: a write of
//! a row is acknowledged on the edge the accelerator takes it, a C read after the accelerator
//! sampled the row address on one edge and the C stage captured the words on the next (the
//! accelerator's port timing). So a load from `C_STAGE` after the command's store sees the row.

use super::periph::h;
use super::Plan;
use crate::PortInfo;
use std::fmt::Write;
use systole_core::field::Field;
use systole_core::soc::*;

/// The Verilog part-select of `f` in a 32-bit word: `[msb:lsb]`, or `[lsb]` for one bit.
pub(super) fn sl(f: Field) -> String {
    if f.width == 1 {
        format!("[{}]", f.lsb)
    } else {
        format!("[{}:{}]", f.msb(), f.lsb)
    }
}

/// `(d_addr & mask) == base` for the aligned power-of-two span holding `bytes` from `base`.
fn region_hit(base: u32, bytes: u32) -> String {
    let span = bytes.next_power_of_two();
    debug_assert_eq!(base % span, 0, "region {base:#x} is not aligned to {span}");
    format!("((d_addr & {}) == {})", h(!(span - 1)), h(base))
}

/// The low `bits` of lane `l` of a stage made of 32-bit words `{name}_{l / 2}` (a lane is 16
/// bits; a `W`-bit port takes its low `W`, the word the CPU wrote sign-extended).
fn lane(name: &str, l: usize, bits: u32) -> String {
    let lo = (l % 2) * 16;
    format!("{name}_{}[{}:{lo}]", l / 2, lo + bits as usize - 1)
}

/// C word `c` sign-extended from the accelerator's `w` bits to the stage's 16-bit lane.
fn c_lane(c: usize, w: u32) -> String {
    match 16 - w {
        0 => format!("c_rd_{c}"),
        ext => format!("{{{{{ext}{{c_rd_{c}[{}]}}}}, c_rd_{c}}}", w - 1),
    }
}

/// Returns `(logic, read-mux lines)`: the stages, the command sequencer, the register access
/// and the accelerator instance (module `systole_acc`, ports as [`crate::ports`]).
pub(super) fn accelerator(p: &Plan, ports: &[PortInfo]) -> (String, String) {
    let words = p.n.div_ceil(2);
    let idx_bits = (STAGE_WORDS as usize).trailing_zeros();
    let idx = format!("d_addr[{}:2]", idx_bits + 1);
    let stage_hit = region_hit(ROW_STAGE, 4 * STAGE_WORDS);
    let c_hit = region_hit(C_STAGE, 4 * STAGE_WORDS);
    let mut v = String::new();
    let c_wires: Vec<String> = (0..p.n).map(|i| format!("c_rd_{i}")).collect();
    let regs: Vec<String> = (0..words).map(|i| format!("stage_{i}")).collect();
    let cregs: Vec<String> = (0..words).map(|i| format!("cstage_{i}")).collect();
    let _ = writeln!(
        v,
        "\
// Accelerator: registers, row stage, ROW_CMD sequencer, C stage.
wire acc_hit = {acc_hit};
wire stage_hit = {stage_hit};
wire cstage_hit = {c_hit};
wire row_cmd_hit = d_addr == {cmd};
wire [31:0] acc_rdata;
wire [{c_msb}:0] {c_wires};
reg [31:0] {stage};
reg [31:0] {cstage};
reg [1:0] row_state; // 0 idle, 1 command on the ports, 2 C row on the read port
/* verilator lint_off UNUSEDSIGNAL */
// The accelerator's row ports use as many low bits as its configuration needs.
reg [15:0] cmd_row;
/* verilator lint_on UNUSEDSIGNAL */
reg cmd_bank;
reg [1:0] cmd_kind;
wire [{last_idx}:0] stage_idx = {idx};
wire row_go = row_state == 2'd1;
// A row command from the CPU (ROW_CMD) or from the row DMA (super::dma).
wire row_cmd_take = (mmio_wr & row_cmd_hit) | dma_row_cmd;
/* verilator lint_off UNUSEDSIGNAL */
// The command's fields only.
wire [31:0] row_cmd_word = dma_row_cmd ? dma_row_cmd_word : d_dat_w;
/* verilator lint_on UNUSEDSIGNAL */
always @(posedge clock) begin
    if (mmio_wr & stage_hit) begin
        case (stage_idx)",
        acc_hit = region_hit(ACC_REGS, 4 * 256),
        cmd = h(ROW_CMD),
        c_msb = p.word_bits - 1,
        c_wires = c_wires.join(", "),
        stage = regs.join(", "),
        cstage = cregs.join(", "),
        last_idx = idx_bits - 1,
    );
    for (i, r) in regs.iter().enumerate() {
        let _ = writeln!(v, "            {idx_bits}'d{i}: {r} <= d_dat_w;");
    }
    let _ = writeln!(
        v,
        "\
            default: ;
        endcase
    end
    if (dma_stage_load) begin
{dma_load}    end
    if (row_state == 2'd0) begin
        if (row_cmd_take) begin
            cmd_row <= row_cmd_word{row};
            cmd_bank <= row_cmd_word{bank};
            cmd_kind <= row_cmd_word{kind};
            row_state <= 2'd1;
        end
    end else if (row_state == 2'd1) begin
        row_state <= cmd_kind == 2'd{read_c} ? 2'd2 : 2'd0;
    end else begin
        row_state <= 2'd0;",
        row = sl(ROW_CMD_ROW),
        bank = sl(ROW_CMD_BANK),
        kind = sl(ROW_CMD_KIND),
        read_c = ROW_KIND_READ_C,
        dma_load = dma_load(p.n),
    );
    for (i, r) in cregs.iter().enumerate() {
        let hi = if 2 * i + 1 < p.n {
            c_lane(2 * i + 1, p.word_bits)
        } else {
            "16'd0".into()
        };
        let lo = c_lane(2 * i, p.word_bits);
        let _ = writeln!(v, "        {r} <= {{{hi}, {lo}}};");
    }
    let _ = writeln!(
        v,
        "\
    end
    if (rst) row_state <= 2'd0;
end
// A ROW_CMD write is acknowledged when its command is done (see the module docs).
wire row_cmd_done = row_go ? cmd_kind != 2'd{read_c} : row_state == 2'd2;",
        read_c = ROW_KIND_READ_C,
    );
    // The accelerator instance.
    let _ = writeln!(v, "systole_acc acc(");
    let conns: Vec<String> = ports
        .iter()
        .map(|port| format!("    .{}({})", port.name, connection(port)))
        .collect();
    let _ = writeln!(v, "{}\n);", conns.join(",\n"));
    let mut reads = String::new();
    let _ = writeln!(reads, "        if (acc_hit) mmio_q <= acc_rdata;");
    for (name, hit) in [("stage", "stage_hit"), ("cstage", "cstage_hit")] {
        let _ = writeln!(reads, "        if ({hit}) case (stage_idx)");
        for i in 0..words {
            let _ = writeln!(reads, "            {idx_bits}'d{i}: mmio_q <= {name}_{i};");
        }
        let _ = writeln!(reads, "            default: ;\n        endcase");
    }
    (v, reads)
}

/// The row stage loaded from the row DMA's lanes (`dma_lane_*`, see `super::dma`).
fn dma_load(n: usize) -> String {
    (0..n.div_ceil(2))
        .map(|i| {
            let hi = match 2 * i + 1 < n {
                true => format!("dma_lane_{}", 2 * i + 1),
                false => "16'd0".into(),
            };
            format!(
                "        stage_{i} <= {{{hi}, dma_lane_{}}};
",
                2 * i
            )
        })
        .collect()
}

/// What drives (or is driven by) accelerator port `port`.
fn connection(port: &PortInfo) -> String {
    let kind = |k: u32| format!("row_go & (cmd_kind == 2'd{k})");
    let row = |w: u32| format!("cmd_row[{}:0]", w - 1);
    let name = port.name.as_str();
    if let Some(l) = name.strip_prefix("c_rd_data_") {
        return format!("c_rd_{l}");
    }
    for m in ["a_wr_data_", "b_wr_data_", "fm_wr_data_"] {
        if let Some(l) = name.strip_prefix(m) {
            return lane("stage", l.parse().expect("lane number"), port.width);
        }
    }
    match name {
        "clock" => "clock".into(),
        "reset" => "rst".into(),
        "reg_addr" => "d_addr[9:2]".into(),
        "reg_wdata" => "d_dat_w".into(),
        "reg_we" => "mmio_wr & acc_hit".into(),
        "reg_rdata" => "acc_rdata".into(),
        "a_wr_en" => kind(ROW_KIND_WRITE_A),
        "b_wr_en" => kind(ROW_KIND_WRITE_B),
        "fm_wr_en" => kind(ROW_KIND_WRITE_FM),
        "a_wr_bank" | "b_wr_bank" | "c_rd_bank" => "cmd_bank".into(),
        "a_wr_row" | "b_wr_row" | "c_rd_row" | "fm_wr_row" => row(port.width),
        other => unreachable!("accelerator port {other} has no connection"),
    }
}
