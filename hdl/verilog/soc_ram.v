// On-chip RAM of 2^ADDR_BITS words: the instruction port reads; the data port reads and writes
// bytes. The row DMA takes the data port while the CPU's data bus waits for its DMA_CMD write;
// the simulation's loader (`load_*`) takes it while the CPU is held in reset. With HAS_INIT the
// RAM starts from the $readmemh file INIT_FILE.
module soc_ram #(
    parameter ADDR_BITS = 14,
    parameter [0:0] HAS_INIT = 1'b0,
    parameter INIT_FILE = "none"
) (
    input wire clock,
    input wire [29:0] i_adr,
    output reg [31:0] i_q,
    input wire [29:0] cpu_adr,
    input wire [3:0] cpu_we,
    input wire [31:0] cpu_wdata,
    input wire dma_busy,
    input wire [ADDR_BITS-1:0] dma_addr,
    input wire [3:0] dma_we,
    input wire [31:0] dma_wdata,
    input wire load_we,
    input wire [ADDR_BITS-1:0] load_addr,
    input wire [31:0] load_wdata,
    output reg [31:0] d_q
);
reg [31:0] mem [0:(1 << ADDR_BITS) - 1];
generate
    if (HAS_INIT) begin : init
        initial $readmemh(INIT_FILE, mem);
    end
endgenerate
wire [ADDR_BITS-1:0] dp_addr = load_we ? load_addr : dma_busy ? dma_addr : cpu_adr[ADDR_BITS-1:0];
wire [3:0] dp_we = load_we ? 4'hf : dma_busy ? dma_we : cpu_we;
wire [31:0] dp_wdata = load_we ? load_wdata : dma_busy ? dma_wdata : cpu_wdata;
always @(posedge clock) begin
    if (dp_we[0]) mem[dp_addr][7:0] <= dp_wdata[7:0];
    if (dp_we[1]) mem[dp_addr][15:8] <= dp_wdata[15:8];
    if (dp_we[2]) mem[dp_addr][23:16] <= dp_wdata[23:16];
    if (dp_we[3]) mem[dp_addr][31:24] <= dp_wdata[31:24];
    d_q <= mem[dp_addr];
end
always @(posedge clock) i_q <= mem[i_adr[ADDR_BITS-1:0]];
/* verilator lint_off UNUSEDSIGNAL */
// Addresses wrap at the RAM's size.
wire [59-2*ADDR_BITS:0] adr_unused = {i_adr[29:ADDR_BITS], cpu_adr[29:ADDR_BITS]};
/* verilator lint_on UNUSEDSIGNAL */
endmodule
