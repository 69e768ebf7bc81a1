//! The row DMA: moves whole blocks of buffer rows between the SoC's RAM and the accelerator,
//! so the CPU writes six registers instead of every operand word (`systole_core::soc::DMA_*`).
//!
//! A `DMA_CMD` write is held on the bus until the transfer is done, like `ROW_CMD`: while it
//! waits the CPU's data bus is busy with it, so the DMA takes the RAM's data port (the
//! instruction bus keeps its own) and no arbitration is needed. For a buffer write each row is
//! read element by element (one RAM read a clock, element `(r, l)` at byte
//! `DMA_ADDR + 2 * (r * DMA_ROW_STEP + l * DMA_LANE_STEP)`) into the DMA's row register, then
//! loaded into the row stage and committed by the row sequencer of [`super::rows`] in the same
//! clock: `lanes + 2` clocks a row. A C row is read into the C stage by the same sequencer and
//! written to RAM an element a clock (halfword byte enables): `lanes + 3` clocks a row.
//!
//! Returns its pieces of `top` in three parts: declarations (before the row stage's logic,
//! which reads `dma_stage_load`, `dma_lane_*`, `dma_row_cmd` and `dma_row_cmd_word`), logic
//! (reads the row stage's `row_state` and `cstage_*`) and the MMIO read-mux lines. The RAM and
//! the acknowledge in [`super::bus`] read `dma_busy`, `dma_ram_*`, `dma_cmd_hit`, `dma_done`.

use super::periph::h;
use super::Plan;
use std::fmt::Write;
use systole_core::soc::*;

// `dma_row_cmd_word` packs the command as `{10'd0, kind, 3'd0, bank, row}`.
const _: () = assert!(
    ROW_CMD_ROW.lsb == 0
        && ROW_CMD_ROW.width == 16
        && ROW_CMD_BANK.lsb == 16
        && ROW_CMD_KIND.lsb == 20
        && ROW_CMD_KIND.width == 2
);

/// `(declarations, logic, read-mux lines)` of the DMA for the plan's array and RAM.
pub(super) fn dma(p: &Plan) -> (String, String, String) {
    let n = p.n;
    let aw = p.ram_addr_bits;
    let lane_bits = usize::BITS as usize - n.leading_zeros() as usize; // holds 0..=n
    let lanes: Vec<String> = (0..n).map(|l| format!("dma_lane_{l}")).collect();
    let mut decl = String::new();
    let _ = writeln!(
        decl,
        "\
// Row DMA (see systole_hdl::soc::dma): declarations the row stage reads.
reg [15:0] {lanes};
wire dma_stage_load;
wire dma_row_cmd;
wire [31:0] dma_row_cmd_word;
wire dma_cmd_hit = d_addr == {cmd};
reg [2:0] dma_state; // 0 idle, 1 fetch, 2 settle, 3 commit, 4 C command, 5 C wait, 6 C write, 7 done
wire dma_busy = dma_state != 3'd0;
wire dma_done = dma_state == 3'd7;
wire [{am1}:0] dma_ram_addr;
wire [3:0] dma_ram_we;
wire [31:0] dma_ram_wdata;",
        lanes = lanes.join(", "),
        cmd = h(DMA_CMD),
        am1 = aw - 1,
    );
    let mut v = String::new();
    let _ = writeln!(
        v,
        "\
// Row DMA: registers, walk, and the state machine.
reg [31:0] dma_addr, dma_row_step, dma_lane_step;
reg [15:0] dma_lanes_reg, dma_rows_reg;
reg [31:0] dma_row_addr, dma_cur;
reg [15:0] dma_rows_left, dma_tgt_row;
reg [{lb1}:0] dma_lane, dma_last_lane, dma_rd_lane;
reg dma_has_lanes, dma_bank, dma_rd_valid, dma_rd_half;
reg [1:0] dma_kind;
wire [31:0] dma_row_next = dma_row_addr + {{dma_row_step[30:0], 1'b0}};
wire dma_last_row = dma_rows_left == 16'd1;
// The row sequencer takes a row (state 3) or C-row (state 4) command when it is idle; the
// stage is loaded from the lanes on the same edge.
assign dma_stage_load = (dma_state == 3'd3) & (row_state == 2'd0);
assign dma_row_cmd = dma_stage_load | ((dma_state == 3'd4) & (row_state == 2'd0));
assign dma_row_cmd_word = {{10'd0, dma_kind, 3'd0, dma_bank, dma_tgt_row}};
// The lanes moved: DMA_LANES, at most the array's {n}.
wire [15:0] dma_lanes_eff = dma_lanes_reg > 16'd{n} ? 16'd{n} : dma_lanes_reg;
reg [15:0] dma_c_word;
assign dma_ram_addr = dma_cur[{ah}:2];
assign dma_ram_we = dma_state == 3'd6 ? (dma_cur[1] ? 4'b1100 : 4'b0011) : 4'b0000;
assign dma_ram_wdata = {{dma_c_word, dma_c_word}};
/* verilator lint_off UNUSEDSIGNAL */
// Bit 0 of an element address, the bits above the RAM's index and the steps' top bits (a
// step is doubled into bytes) are not used.
wire [33:0] dma_unused = {{dma_cur, dma_row_step[31], dma_lane_step[31]}};
/* verilator lint_on UNUSEDSIGNAL */
// The C stage's lane the C write state stores.
always @(*) begin
    case (dma_lane)",
        lb1 = lane_bits - 1,
        ah = aw + 1,
    );
    for l in 0..n {
        let word = format!("cstage_{}", l / 2);
        let bits = if l % 2 == 0 { "[15:0]" } else { "[31:16]" };
        let _ = writeln!(v, "        {lane_bits}'d{l}: dma_c_word = {word}{bits};");
    }
    let _ = writeln!(
        v,
        "\
        default: dma_c_word = 16'd0;
    endcase
end
always @(posedge clock) begin
    if (mmio_wr & (d_addr == {addr})) dma_addr <= d_dat_w;
    if (mmio_wr & (d_addr == {rstep})) dma_row_step <= d_dat_w;
    if (mmio_wr & (d_addr == {lstep})) dma_lane_step <= d_dat_w;
    if (mmio_wr & (d_addr == {nlanes})) dma_lanes_reg <= d_dat_w{count};
    if (mmio_wr & (d_addr == {nrows})) dma_rows_reg <= d_dat_w{count};
    // A fetched element lands in its lane the clock after its read.
    dma_rd_valid <= 1'b0;
    if (dma_rd_valid) begin",
        addr = h(DMA_ADDR),
        rstep = h(DMA_ROW_STEP),
        lstep = h(DMA_LANE_STEP),
        nlanes = h(DMA_LANES),
        nrows = h(DMA_ROWS),
        count = super::rows::sl(DMA_COUNT),
    );
    for (l, lane) in lanes.iter().enumerate() {
        let _ = writeln!(
            v,
            "        if (dma_rd_lane == {lane_bits}'d{l}) {lane} <= dma_rd_half ? d_ram_q[31:16] : d_ram_q[15:0];"
        );
    }
    let clear: String = lanes.iter().map(|l| format!(" {l} <= 16'd0;")).collect();
    let _ = writeln!(
        v,
        "\
    end
    case (dma_state)
    3'd0: if (mmio_wr & dma_cmd_hit) begin
        dma_tgt_row <= d_dat_w{row};
        dma_bank <= d_dat_w{bank};
        dma_kind <= d_dat_w{kind};
        dma_rows_left <= dma_rows_reg;
        dma_row_addr <= dma_addr;
        dma_cur <= dma_addr;
        dma_lane <= {lane_bits}'d0;
        dma_last_lane <= dma_lanes_eff[{lb1}:0] - {lane_bits}'d1;
        dma_has_lanes <= dma_lanes_eff != 16'd0;
       {clear}
        // Nothing to move: no rows, or C rows with no lanes to store.
        if (dma_rows_reg == 16'd0 | (d_dat_w{kind} == 2'd{read_c} & dma_lanes_eff == 16'd0))
            dma_state <= 3'd7;
        else if (d_dat_w{kind} == 2'd{read_c}) dma_state <= 3'd4;
        else if (dma_lanes_eff == 16'd0) dma_state <= 3'd3;
        else dma_state <= 3'd1;
    end
    3'd1: begin // fetch lane dma_lane of the row
        dma_rd_valid <= 1'b1;
        dma_rd_lane <= dma_lane;
        dma_rd_half <= dma_cur[1];
        dma_cur <= dma_cur + {{dma_lane_step[30:0], 1'b0}};
        dma_lane <= dma_lane + {lane_bits}'d1;
        if (dma_lane == dma_last_lane) dma_state <= 3'd2;
    end
    3'd2: dma_state <= 3'd3; // the last element lands
    3'd3: if (row_state == 2'd0) begin // the row into the stage and its command, one clock
       {clear}
        dma_tgt_row <= dma_tgt_row + 16'd1;
        dma_rows_left <= dma_rows_left - 16'd1;
        dma_row_addr <= dma_row_next;
        dma_cur <= dma_row_next;
        dma_lane <= {lane_bits}'d0;
        dma_state <= dma_last_row ? 3'd7 : (dma_has_lanes ? 3'd1 : 3'd3);
    end
    3'd4: if (row_state == 2'd0) dma_state <= 3'd5; // a C row into the C stage
    3'd5: if (row_state == 2'd0) dma_state <= 3'd6; // captured
    3'd6: begin // store lane dma_lane
        dma_cur <= dma_cur + {{dma_lane_step[30:0], 1'b0}};
        dma_lane <= dma_lane + {lane_bits}'d1;
        if (dma_lane == dma_last_lane) begin
            dma_tgt_row <= dma_tgt_row + 16'd1;
            dma_rows_left <= dma_rows_left - 16'd1;
            dma_row_addr <= dma_row_next;
            dma_cur <= dma_row_next;
            dma_lane <= {lane_bits}'d0;
            dma_state <= dma_last_row ? 3'd7 : 3'd4;
        end
    end
    default: dma_state <= 3'd0; // 7: acknowledged this clock
    endcase
    if (rst) dma_state <= 3'd0;
end",
        row = super::rows::sl(ROW_CMD_ROW),
        bank = super::rows::sl(ROW_CMD_BANK),
        kind = super::rows::sl(ROW_CMD_KIND),
        read_c = ROW_KIND_READ_C,
        lb1 = lane_bits - 1,
    );
    let reads = format!(
        "\
        if (d_addr == {addr}) mmio_q <= dma_addr;
        if (d_addr == {rstep}) mmio_q <= dma_row_step;
        if (d_addr == {lstep}) mmio_q <= dma_lane_step;
        if (d_addr == {nlanes}) mmio_q <= {{16'd0, dma_lanes_reg}};
        if (d_addr == {nrows}) mmio_q <= {{16'd0, dma_rows_reg}};
        if (d_addr == {features}) mmio_q <= {dma_bit};
",
        addr = h(DMA_ADDR),
        rstep = h(DMA_ROW_STEP),
        lstep = h(DMA_LANE_STEP),
        nlanes = h(DMA_LANES),
        nrows = h(DMA_ROWS),
        features = h(SYS_FEATURES),
        dma_bit = h(SYS_FEATURE_DMA.put(1)),
    );
    (decl, v, reads)
}
