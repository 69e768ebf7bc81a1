// The CPU: VexRiscv RV32IMAC with Wishbone instruction and data buses (word addresses), reset
// to RESET_VECTOR, no interrupts (the firmware polls), bus errors never signalled (every
// address acknowledges instead). Module VexRiscv is read from its own file.
module soc_cpu #(
    parameter [31:0] RESET_VECTOR = 32'h0
) (
    input wire clock,
    input wire rst,
    output wire i_cyc,
    output wire i_stb,
    output wire [29:0] i_adr,
    input wire i_ack,
    input wire [31:0] i_dat_r,
    output wire d_cyc,
    output wire d_stb,
    output wire d_we,
    output wire [29:0] d_adr,
    output wire [31:0] d_dat_w,
    output wire [3:0] d_sel,
    input wire d_ack,
    input wire [31:0] d_dat_r
);
/* verilator lint_off UNUSEDSIGNAL */
// The instruction bus only reads; burst tags are not needed (every beat is acknowledged).
wire i_we;
wire [31:0] i_dat_w;
wire [3:0] i_sel;
wire [2:0] i_cti, d_cti;
wire [1:0] i_bte, d_bte;
/* verilator lint_on UNUSEDSIGNAL */
VexRiscv cpu(
    .externalResetVector(RESET_VECTOR),
    .timerInterrupt(1'b0),
    .softwareInterrupt(1'b0),
    .externalInterruptArray(32'd0),
    .iBusWishbone_CYC(i_cyc), .iBusWishbone_STB(i_stb), .iBusWishbone_ACK(i_ack),
    .iBusWishbone_WE(i_we), .iBusWishbone_ADR(i_adr), .iBusWishbone_DAT_MISO(i_dat_r),
    .iBusWishbone_DAT_MOSI(i_dat_w), .iBusWishbone_SEL(i_sel), .iBusWishbone_ERR(1'b0),
    .iBusWishbone_CTI(i_cti), .iBusWishbone_BTE(i_bte),
    .dBusWishbone_CYC(d_cyc), .dBusWishbone_STB(d_stb), .dBusWishbone_ACK(d_ack),
    .dBusWishbone_WE(d_we), .dBusWishbone_ADR(d_adr), .dBusWishbone_DAT_MISO(d_dat_r),
    .dBusWishbone_DAT_MOSI(d_dat_w), .dBusWishbone_SEL(d_sel), .dBusWishbone_ERR(1'b0),
    .dBusWishbone_CTI(d_cti), .dBusWishbone_BTE(d_bte),
    .clk(clock), .reset(rst)
);
endmodule
