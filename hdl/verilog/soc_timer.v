// The 64-bit cycle counter: reading the low word latches the high word, so the two reads form
// one value.
module soc_timer #(
    parameter [31:0] LO_ADDR = 32'h0,
    parameter [31:0] HI_ADDR = 32'h0
) (
    input wire clock,
    input wire rst,
    input wire [31:0] addr,
    input wire rd,
    output wire [31:0] rdata
);
reg [63:0] count;
reg [31:0] hi_q;
always @(posedge clock) begin
    count <= count + 64'd1;
    if (rd & (addr == LO_ADDR)) hi_q <= count[63:32];
    if (rst) begin
        count <= 64'd0;
        hi_q <= 32'd0;
    end
end
assign rdata = addr == LO_ADDR ? count[31:0] : addr == HI_ADDR ? hi_q : 32'd0;
endmodule
