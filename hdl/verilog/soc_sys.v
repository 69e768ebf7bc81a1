// SYS: identification, RAM size, clock, features and the reset key. Writing the key starts a
// reset of 16 clocks of everything but the RAM (the CPU restarts at the reset vector).
module soc_sys #(
    parameter [31:0] ID_ADDR = 32'h0,
    parameter [31:0] ID = 32'h0,
    parameter [31:0] RAM_ADDR = 32'h0,
    parameter [31:0] RAM_BYTES = 32'h0,
    parameter [31:0] CLOCK_ADDR = 32'h0,
    parameter [31:0] CLOCK_HZ = 32'h0,
    parameter [31:0] FEATURES_ADDR = 32'h0,
    parameter [31:0] FEATURES = 32'h0,
    parameter [31:0] RESET_ADDR = 32'h0,
    parameter [31:0] RESET_KEY = 32'h0
) (
    input wire clock,
    input wire hard_reset,
    input wire [31:0] addr,
    input wire wr,
    input wire [31:0] wdata,
    output wire soft_reset,
    output wire [31:0] rdata
);
reg [3:0] count;
always @(posedge clock) begin
    if (count != 4'd0) count <= count - 4'd1;
    if (wr & (addr == RESET_ADDR) & (wdata == RESET_KEY)) count <= 4'd15;
    if (hard_reset) count <= 4'd0;
end
assign soft_reset = count != 4'd0;
assign rdata = addr == ID_ADDR ? ID
    : addr == RAM_ADDR ? RAM_BYTES
    : addr == CLOCK_ADDR ? CLOCK_HZ
    : addr == FEATURES_ADDR ? FEATURES
    : 32'd0;
endmodule
