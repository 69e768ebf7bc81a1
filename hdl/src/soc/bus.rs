//! The SoC's `top`: resets, the on-chip RAM on both CPU buses, the data bus's decode and
//! acknowledge, and the MMIO read multiplexer the peripherals contribute lines to.
//!
//! Bus timing: every access is acknowledged one clock after the CPU raised `STB` (the RAM's
//! registered read, and MMIO reads registered the same way), except a `ROW_CMD` write, held
//! until its command is done (`rows`), and a `DMA_CMD` write, held until its transfer is done
//! (`dma`), during which the DMA has the RAM's data port. A cache refill (an 8-beat burst) therefore takes two
//! clocks a word. Addresses with bit 31 set are MMIO; every other address is the RAM, its
//! index wrapping at the RAM size, so every address answers (the CPU ignores bus errors and
//! would wait forever on an address that never answered). The instruction bus reads the RAM
//! only (through its own port: a block RAM's second port).

use super::{dma, periph, rows, Plan};
use crate::PortInfo;
use std::fmt::Write;

/// The whole `top` module of the SoC.
pub(super) fn top_module(p: &Plan, acc_ports: &[PortInfo]) -> String {
    let aw = p.ram_addr_bits;
    let mut v = String::new();
    let load_ports = if p.backdoor {
        ", load_we, load_addr, load_data"
    } else {
        ""
    };
    let _ = writeln!(
        v,
        "module top(clock, reset_pin, uart_rx, uart_tx, led0, led1{load_ports});
input wire clock;
input wire reset_pin;
input wire uart_rx;
output wire uart_tx;
output wire led0;
output wire led1;"
    );
    if p.backdoor {
        let _ = writeln!(
            v,
            "\
// Simulation only: writes RAM words while the reset button is held (the program image).
input wire load_we;
input wire [{}:0] load_addr;
input wire [31:0] load_data;",
            aw - 1
        );
    }
    let _ = writeln!(
        v,
        "\
// Resets. The button (either polarity) through two flip-flops; a power-up reset of 15 clocks
// (the CPU needs one); the software reset of the SYS registers. All synchronous, active high,
// registered once more before it fans out.
reg reset_sync0 = 1'b1, reset_sync1 = 1'b1;
reg [3:0] por = 4'd0;
reg rst = 1'b1;
// The UART's reset: the button and power-up, not the software reset (see periph::uart).
reg uart_rst = 1'b1;
reg [3:0] soft_reset;
wire btn_reset = reset_sync1;
wire por_done = por == 4'd15;
always @(posedge clock) begin
    reset_sync0 <= reset_pin ^ 1'b{active_low};
    reset_sync1 <= reset_sync0;
    if (!por_done) por <= por + 4'd1;
    rst <= btn_reset | ~por_done | (soft_reset != 4'd0);
    uart_rst <= btn_reset | ~por_done;
end
reg [23:0] heartbeat;
always @(posedge clock) heartbeat <= heartbeat + 24'd1;
assign led0 = rst ^ 1'b{led_high};
assign led1 = heartbeat[23] ^ 1'b{led_low};
",
        active_low = u8::from(p.reset_active_low),
        // led0 lights while the CPU runs.
        led_high = u8::from(!p.led_active_low),
        led_low = u8::from(p.led_active_low),
    );
    v.push_str(&super::cpu::cpu_instance());
    let _ = writeln!(
        v,
        "\
// Data bus decode. `d_req`: a request not yet acknowledged.
wire [31:0] d_addr = {{d_adr, 2'b00}};
wire d_req = d_cyc & d_stb & ~d_ack;
wire d_mmio = d_adr[29];
wire mmio_rd = d_req & d_mmio & ~d_we;
wire mmio_wr = d_req & d_mmio & d_we;
reg [31:0] mmio_q;
reg d_from_mmio;
reg [31:0] d_ram_q;
assign d_dat_r = d_from_mmio ? mmio_q : d_ram_q;"
    );
    let (dma_decl, dma_logic, dma_reads) = dma::dma(p);
    v.push_str(&dma_decl);
    let pieces = [
        periph::uart(p),
        periph::timer(),
        periph::sys(p),
        rows::accelerator(p, acc_ports),
        (dma_logic, dma_reads),
    ];
    let mut reads = String::new();
    for (logic, r) in &pieces {
        v.push_str(logic);
        reads.push_str(r);
    }
    // The RAM: the instruction port reads; the data port reads and writes bytes. The row DMA
    // takes the data port while the CPU's data bus waits for its DMA_CMD write (dma). The
    // simulation's loader shares it too (only while the CPU is held in reset).
    let cpu_addr = format!("d_adr[{}:0]", aw - 1);
    let (mut dp_addr, mut dp_we, mut dp_wdata) = (
        format!("dma_busy ? dma_ram_addr : {cpu_addr}"),
        "dma_busy ? dma_ram_we : d_ram_we".to_string(),
        "dma_busy ? dma_ram_wdata : d_dat_w".to_string(),
    );
    if p.backdoor {
        dp_addr = format!("load_we ? load_addr : {dp_addr}");
        dp_we = format!("load_we ? 4'hf : {dp_we}");
        dp_wdata = format!("load_we ? load_data : {dp_wdata}");
    }
    let init = match &p.ram_init {
        Some(file) => format!("initial $readmemh(\"{file}\", ram);\n"),
        None => String::new(),
    };
    let _ = writeln!(
        v,
        "\
// On-chip RAM: {words} words.
reg [31:0] ram [0:{last}];
{init}wire [3:0] d_ram_we = (d_req & ~d_mmio & d_we) ? d_sel : 4'h0;
wire [{am1}:0] dp_addr = {dp_addr};
wire [3:0] dp_we = {dp_we};
wire [31:0] dp_wdata = {dp_wdata};
always @(posedge clock) begin
    if (dp_we[0]) ram[dp_addr][7:0] <= dp_wdata[7:0];
    if (dp_we[1]) ram[dp_addr][15:8] <= dp_wdata[15:8];
    if (dp_we[2]) ram[dp_addr][23:16] <= dp_wdata[23:16];
    if (dp_we[3]) ram[dp_addr][31:24] <= dp_wdata[31:24];
    d_ram_q <= ram[dp_addr];
end
always @(posedge clock) i_dat_r <= ram[i_adr[{am1}:0]];
/* verilator lint_off UNUSEDSIGNAL */
wire [{unused_hi}:0] i_adr_unused = i_adr[29:{aw}];
/* verilator lint_on UNUSEDSIGNAL */
wire mmio_hold = (row_cmd_hit & ~row_cmd_done) | (dma_cmd_hit & ~dma_done);
always @(posedge clock) begin
    i_ack <= i_cyc & i_stb & ~i_ack;
    d_ack <= 1'b0;
    if (d_req) begin
        d_from_mmio <= d_mmio;
        // ROW_CMD and DMA_CMD writes wait for their command (rows, dma); everything else
        // answers at once.
        if (~d_mmio | ~d_we | ~mmio_hold) d_ack <= 1'b1;
    end
    if (rst) begin
        i_ack <= 1'b0;
        d_ack <= 1'b0;
    end
end",
        words = p.ram_words(),
        last = p.ram_words() - 1,
        am1 = aw - 1,
        unused_hi = 29 - aw,
    );
    let _ = writeln!(
        v,
        "\
// MMIO reads: registered on the request's clock; unmapped addresses read 0.
always @(posedge clock) begin
    if (mmio_rd) begin
        mmio_q <= 32'd0;
{reads}    end
end
endmodule
"
    );
    v
}
