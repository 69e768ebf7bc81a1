// The row sequencer: a ROW_CMD write (or the row DMA's command, `dma_cmd`) commits the row
// stage into an A, B or feature-map row in one clock, or reads a C row into the C stage.
//
// A ROW_CMD write is held on the bus (`hold`) until its command is done: a write of a row is
// acknowledged on the edge the accelerator takes it, a C read after the accelerator sampled the
// row address on one edge and the C stage captured the words on the next (`capture`, the
// accelerator's port timing). So a load from C_STAGE after the command's store sees the row.
module soc_row_seq #(
    parameter [31:0] CMD_ADDR = 32'h0,
    parameter ROW_LSB = 0,
    parameter BANK_LSB = 16,
    parameter KIND_LSB = 20,
    parameter [1:0] KIND_WRITE_A = 2'd0,
    parameter [1:0] KIND_WRITE_B = 2'd1,
    parameter [1:0] KIND_READ_C = 2'd2,
    parameter [1:0] KIND_WRITE_FM = 2'd3
) (
    input wire clock,
    input wire rst,
    input wire [31:0] addr,
    input wire wr,
    input wire [31:0] wdata,
    input wire dma_cmd,
    input wire [15:0] dma_row,
    input wire dma_bank,
    input wire [1:0] dma_kind,
    output wire hold,
    output wire idle,
    output wire capture,
    output reg [15:0] cmd_row,
    output reg cmd_bank,
    output wire a_wr_en,
    output wire b_wr_en,
    output wire fm_wr_en
);
reg [1:0] state; // 0 idle, 1 command on the ports, 2 C row on the read port
reg [1:0] cmd_kind;
/* verilator lint_off UNUSEDSIGNAL */
// A command word's fields only.
wire [31:0] unused_wdata = wdata;
/* verilator lint_on UNUSEDSIGNAL */
wire go = state == 2'd1;
wire take = (wr & (addr == CMD_ADDR)) | dma_cmd;
assign idle = state == 2'd0;
assign capture = state[1];
always @(posedge clock) begin
    if (state == 2'd0) begin
        if (take) begin
            cmd_row <= dma_cmd ? dma_row : wdata[ROW_LSB + 15:ROW_LSB];
            cmd_bank <= dma_cmd ? dma_bank : wdata[BANK_LSB];
            cmd_kind <= dma_cmd ? dma_kind : wdata[KIND_LSB + 1:KIND_LSB];
            state <= 2'd1;
        end
    end else if (state == 2'd1) begin
        state <= cmd_kind == KIND_READ_C ? 2'd2 : 2'd0;
    end else begin
        state <= 2'd0;
    end
    if (rst) state <= 2'd0;
end
// A ROW_CMD write is acknowledged when its command is done.
wire done = go ? cmd_kind != KIND_READ_C : state == 2'd2;
assign hold = (addr == CMD_ADDR) & ~done;
assign a_wr_en = go & (cmd_kind == KIND_WRITE_A);
assign b_wr_en = go & (cmd_kind == KIND_WRITE_B);
assign fm_wr_en = go & (cmd_kind == KIND_WRITE_FM);
endmodule
