// The row DMA: moves whole blocks of buffer rows between the SoC's RAM and the accelerator, so
// the CPU writes six registers instead of every operand word.
//
// A DMA_CMD write is held on the bus until the transfer is done (`hold`), like ROW_CMD: while
// it waits the CPU's data bus is busy with it, so the DMA takes the RAM's data port and no
// arbitration is needed. For a buffer write each row is read element by element (one RAM read
// a clock, element (r, l) at byte ADDR + 2 * (r * ROW_STEP + l * LANE_STEP)) into the lanes
// (`lane_*`, held by the row stage), then loaded into the stage and committed by the row
// sequencer in the same clock (`stage_load`, `row_cmd`): LANES + 2 clocks a row. A C row is read
// into the C stage by the same sequencer and written to RAM an element a clock (halfword byte
// enables, the C stage's lane `c_lane` as `c_word`): LANES + 3 clocks a row.
module soc_dma #(
    parameter N = 4,
    parameter LANE_BITS = 3,
    parameter ADDR_BITS = 14,
    parameter [31:0] ADDR_ADDR = 32'h0,
    parameter [31:0] ROW_STEP_ADDR = 32'h0,
    parameter [31:0] LANE_STEP_ADDR = 32'h0,
    parameter [31:0] LANES_ADDR = 32'h0,
    parameter [31:0] ROWS_ADDR = 32'h0,
    parameter [31:0] CMD_ADDR = 32'h0,
    parameter COUNT_LSB = 0,
    parameter ROW_LSB = 0,
    parameter BANK_LSB = 16,
    parameter KIND_LSB = 20,
    parameter [1:0] KIND_READ_C = 2'd2
) (
    input wire clock,
    input wire rst,
    input wire [31:0] addr,
    input wire wr,
    input wire [31:0] wdata,
    output wire [31:0] rdata,
    output wire hold,
    output wire ram_busy,
    output wire [ADDR_BITS-1:0] ram_addr,
    output wire [3:0] ram_we,
    output wire [31:0] ram_wdata,
    input wire [31:0] ram_q,
    input wire row_idle,
    output wire stage_load,
    output wire row_cmd,
    output reg [15:0] cmd_row,
    output reg cmd_bank,
    output reg [1:0] cmd_kind,
    output wire lane_we,
    output wire [LANE_BITS-1:0] lane_idx,
    output wire [15:0] lane_data,
    output wire lanes_clear,
    output wire [LANE_BITS-1:0] c_lane,
    input wire [15:0] c_word
);
localparam [LANE_BITS-1:0] ONE_LANE = 1;
wire cmd_hit = addr == CMD_ADDR;
reg [2:0] state; // 0 idle, 1 fetch, 2 settle, 3 commit, 4 C command, 5 C wait, 6 C write, 7 done
wire done = state == 3'd7;
assign ram_busy = state != 3'd0;
assign hold = cmd_hit & ~done;
reg [31:0] dma_addr, row_step, lane_step;
reg [15:0] lanes_reg, rows_reg;
reg [31:0] row_addr, cur;
reg [15:0] rows_left;
reg [LANE_BITS-1:0] lane, last_lane, rd_lane;
reg has_lanes, rd_valid, rd_half;
wire [31:0] row_next = row_addr + {row_step[30:0], 1'b0};
wire last_row = rows_left == 16'd1;
wire [15:0] cmd_count = wdata[COUNT_LSB + 15:COUNT_LSB];
wire [1:0] new_kind = wdata[KIND_LSB + 1:KIND_LSB];
// The row sequencer takes a row (state 3) or C-row (state 4) command when it is idle; the
// stage is loaded from the lanes on the same edge.
assign stage_load = (state == 3'd3) & row_idle;
assign row_cmd = stage_load | ((state == 3'd4) & row_idle);
// The lanes moved: LANES, at most the array's N.
wire [15:0] lanes_eff = lanes_reg > N ? N : lanes_reg;
assign ram_addr = cur[ADDR_BITS + 1:2];
assign ram_we = state == 3'd6 ? (cur[1] ? 4'b1100 : 4'b0011) : 4'b0000;
assign ram_wdata = {c_word, c_word};
// A fetched element lands in its lane the clock after its read; the lanes clear when a
// command starts and when a row goes into the stage.
assign lane_we = rd_valid;
assign lane_idx = rd_lane;
assign lane_data = rd_half ? ram_q[31:16] : ram_q[15:0];
assign lanes_clear = ((state == 3'd0) & wr & cmd_hit) | stage_load;
assign c_lane = lane;
/* verilator lint_off UNUSEDSIGNAL */
// Bit 0 of an element address, the bits above the RAM's index, the steps' top bits (a step is
// doubled into bytes) are not used.
wire [33:0] unused = {cur, row_step[31], lane_step[31]};
/* verilator lint_on UNUSEDSIGNAL */
always @(posedge clock) begin
    if (wr & (addr == ADDR_ADDR)) dma_addr <= wdata;
    if (wr & (addr == ROW_STEP_ADDR)) row_step <= wdata;
    if (wr & (addr == LANE_STEP_ADDR)) lane_step <= wdata;
    if (wr & (addr == LANES_ADDR)) lanes_reg <= cmd_count;
    if (wr & (addr == ROWS_ADDR)) rows_reg <= cmd_count;
    rd_valid <= 1'b0;
    case (state)
    3'd0: if (wr & cmd_hit) begin
        cmd_row <= wdata[ROW_LSB + 15:ROW_LSB];
        cmd_bank <= wdata[BANK_LSB];
        cmd_kind <= new_kind;
        rows_left <= rows_reg;
        row_addr <= dma_addr;
        cur <= dma_addr;
        lane <= {LANE_BITS{1'b0}};
        last_lane <= lanes_eff[LANE_BITS-1:0] - ONE_LANE;
        has_lanes <= lanes_eff != 16'd0;
        // Nothing to move: no rows, or C rows with no lanes to store.
        if (rows_reg == 16'd0 | (new_kind == KIND_READ_C & lanes_eff == 16'd0))
            state <= 3'd7;
        else if (new_kind == KIND_READ_C) state <= 3'd4;
        else if (lanes_eff == 16'd0) state <= 3'd3;
        else state <= 3'd1;
    end
    3'd1: begin // fetch lane `lane` of the row
        rd_valid <= 1'b1;
        rd_lane <= lane;
        rd_half <= cur[1];
        cur <= cur + {lane_step[30:0], 1'b0};
        lane <= lane + ONE_LANE;
        if (lane == last_lane) state <= 3'd2;
    end
    3'd2: state <= 3'd3; // the last element lands
    3'd3: if (row_idle) begin // the row into the stage and its command, one clock
        cmd_row <= cmd_row + 16'd1;
        rows_left <= rows_left - 16'd1;
        row_addr <= row_next;
        cur <= row_next;
        lane <= {LANE_BITS{1'b0}};
        state <= last_row ? 3'd7 : (has_lanes ? 3'd1 : 3'd3);
    end
    3'd4: if (row_idle) state <= 3'd5; // a C row into the C stage
    3'd5: if (row_idle) state <= 3'd6; // captured
    3'd6: begin // store lane `lane`
        cur <= cur + {lane_step[30:0], 1'b0};
        lane <= lane + ONE_LANE;
        if (lane == last_lane) begin
            cmd_row <= cmd_row + 16'd1;
            rows_left <= rows_left - 16'd1;
            row_addr <= row_next;
            cur <= row_next;
            lane <= {LANE_BITS{1'b0}};
            state <= last_row ? 3'd7 : 3'd4;
        end
    end
    default: state <= 3'd0; // 7: acknowledged this clock
    endcase
    if (rst) state <= 3'd0;
end
assign rdata = addr == ADDR_ADDR ? dma_addr
    : addr == ROW_STEP_ADDR ? row_step
    : addr == LANE_STEP_ADDR ? lane_step
    : addr == LANES_ADDR ? {16'd0, lanes_reg}
    : addr == ROWS_ADDR ? {16'd0, rows_reg}
    : 32'd0;
endmodule
