// The CPU's buses. Every access is acknowledged one clock after the CPU raised STB (the RAM's
// registered read, and MMIO reads registered the same way), except while `hold`: a ROW_CMD or
// DMA_CMD write waits there until its command is done. A cache refill (an 8-beat burst)
// therefore takes two clocks a word. Addresses with bit 31 set are MMIO; every other address is
// the RAM, so every address answers (the CPU ignores bus errors and would wait forever on an
// address that never answered). The instruction bus reads the RAM only, through its own port.
module soc_bus (
    input wire clock,
    input wire rst,
    input wire i_cyc,
    input wire i_stb,
    output reg i_ack,
    input wire d_cyc,
    input wire d_stb,
    input wire d_we,
    input wire [29:0] d_adr,
    input wire [3:0] d_sel,
    output reg d_ack,
    output wire [31:0] d_dat_r,
    output wire [3:0] ram_we,
    input wire [31:0] ram_q,
    output wire [31:0] addr,
    output wire mmio_rd,
    output wire mmio_wr,
    input wire [31:0] mmio_rdata,
    input wire hold
);
// `d_req`: a request not yet acknowledged.
wire d_req = d_cyc & d_stb & ~d_ack;
wire d_mmio = d_adr[29];
assign addr = {d_adr, 2'b00};
assign mmio_rd = d_req & d_mmio & ~d_we;
assign mmio_wr = d_req & d_mmio & d_we;
assign ram_we = (d_req & ~d_mmio & d_we) ? d_sel : 4'h0;
reg [31:0] mmio_q;
reg d_from_mmio;
assign d_dat_r = d_from_mmio ? mmio_q : ram_q;
always @(posedge clock) begin
    i_ack <= i_cyc & i_stb & ~i_ack;
    d_ack <= 1'b0;
    if (d_req) begin
        d_from_mmio <= d_mmio;
        if (~d_mmio | ~d_we | ~hold) d_ack <= 1'b1;
    end
    if (rst) begin
        i_ack <= 1'b0;
        d_ack <= 1'b0;
    end
end
// MMIO reads: registered on the request's clock; unmapped addresses read 0.
always @(posedge clock) begin
    if (mmio_rd) mmio_q <= mmio_rdata;
end
endmodule
