//! The SoC's small peripherals on the data bus: the UART (the project's `uart` blocks, with a
//! receive FIFO), the cycle timer and the SYS registers. Each function returns Verilog for the
//! body of the SoC's `top`: declarations and clocked logic, plus the read-mux lines that
//! [`super::bus`] places inside its MMIO read block (`mmio_q <= ...` when `mmio_rd`).

use super::Plan;
use systole_core::soc::*;

/// A 32-bit Verilog constant.
pub(super) fn h(v: u32) -> String {
    format!("32'h{v:08x}")
}

/// The UART: receiver into a FIFO of [`RX_FIFO_BYTES`] bytes (so bytes arriving while the
/// firmware is busy wait for it), transmitter fed by writes to `UART_DATA`.
/// Returns `(logic, read-mux lines)`.
pub(super) fn uart(_p: &Plan) -> (String, String) {
    let bits = RX_FIFO_BYTES.trailing_zeros();
    let logic = format!(
        "\
// UART. A write to UART_DATA while the transmitter is busy is dropped (firmware waits for
// TX_READY); a read of UART_DATA takes the oldest byte of the receive FIFO.
wire [7:0] rx_byte;
wire rx_strobe, tx_busy;
wire uart_tx_start = mmio_wr & (d_addr == {data}) & ~tx_busy;
soc_uart_rx uart_rx_unit(.clock(clock), .reset(uart_rst), .rx(uart_rx), .data(rx_byte), .valid(rx_strobe));
soc_uart_tx uart_tx_unit(.clock(clock), .reset(uart_rst), .data(d_dat_w[7:0]), .start(uart_tx_start),
    .busy(tx_busy), .tx(uart_tx));
reg [7:0] rx_fifo [0:{last}];
reg [{bits}:0] rx_head, rx_tail;
reg rx_overrun;
wire rx_empty = rx_head == rx_tail;
wire rx_full = (rx_tail - rx_head) == {bits1}'d{RX_FIFO_BYTES};
wire uart_data_read = mmio_rd & (d_addr == {data});
wire uart_status_read = mmio_rd & (d_addr == {status});
always @(posedge clock) begin
    if (rx_strobe & ~rx_full) rx_fifo[rx_tail[{bm1}:0]] <= rx_byte;
end
always @(posedge clock) begin
    if (uart_status_read) rx_overrun <= 1'b0;
    if (rx_strobe) begin
        if (rx_full) rx_overrun <= 1'b1;
        else rx_tail <= rx_tail + {bits1}'d1;
    end
    if (uart_data_read & ~rx_empty) rx_head <= rx_head + {bits1}'d1;
    if (uart_rst) begin
        rx_head <= {bits1}'d0;
        rx_tail <= {bits1}'d0;
        rx_overrun <= 1'b0;
    end
end
",
        data = h(UART_DATA),
        status = h(UART_STATUS),
        last = RX_FIFO_BYTES - 1,
        bits1 = bits + 1,
        bm1 = bits - 1,
    );
    let reads = format!(
        "\
        if (uart_data_read) mmio_q[7:0] <= rx_fifo[rx_head[{bm1}:0]];
        if (uart_status_read) begin
            mmio_q[{tx}] <= ~tx_busy;
            mmio_q[{rx}] <= ~rx_empty;
            mmio_q[{ov}] <= rx_overrun;
        end
",
        bm1 = bits - 1,
        tx = UART_TX_READY.lsb,
        rx = UART_RX_VALID.lsb,
        ov = UART_RX_OVERRUN.lsb,
    );
    (logic, reads)
}

/// The 64-bit cycle counter: reading `TIMER_LO` latches the high word for `TIMER_HI`, so the
/// two reads form one value.
pub(super) fn timer() -> (String, String) {
    let logic = format!(
        "\
// Cycle timer.
reg [63:0] timer;
reg [31:0] timer_hi_q;
always @(posedge clock) begin
    timer <= timer + 64'd1;
    if (mmio_rd & (d_addr == {lo})) timer_hi_q <= timer[63:32];
    if (rst) begin
        timer <= 64'd0;
        timer_hi_q <= 32'd0;
    end
end
",
        lo = h(TIMER_LO),
    );
    let reads = format!(
        "\
        if (d_addr == {lo}) mmio_q <= timer[31:0];
        if (d_addr == {hi}) mmio_q <= timer_hi_q;
",
        lo = h(TIMER_LO),
        hi = h(TIMER_HI),
    );
    (logic, reads)
}

/// SYS: identification, RAM size, clock, and the reset key. Writing the key starts a reset of
/// 16 clocks of everything but the RAM (the CPU restarts at the reset vector); the button's
/// reset (`btn_reset`) and power-up reset (`por`) are in [`super::bus`].
pub(super) fn sys(p: &Plan) -> (String, String) {
    let logic = format!(
        "\
// SYS registers and the software reset (`soft_reset` is declared with the other resets).
always @(posedge clock) begin
    if (soft_reset != 4'd0) soft_reset <= soft_reset - 4'd1;
    if (mmio_wr & (d_addr == {reset}) & (d_dat_w == {key})) soft_reset <= 4'd15;
    if (btn_reset | ~por_done) soft_reset <= 4'd0;
end
",
        reset = h(SYS_RESET),
        key = h(SYS_RESET_KEY),
    );
    let reads = format!(
        "\
        if (d_addr == {id}) mmio_q <= {idv};
        if (d_addr == {ram}) mmio_q <= {ramv};
        if (d_addr == {clk}) mmio_q <= {clkv};
",
        id = h(SYS_ID),
        idv = h(SOC_ID_VALUE),
        ram = h(SYS_RAM_BYTES),
        ramv = h(p.ram_bytes),
        clk = h(SYS_CLOCK_HZ),
        clkv = h(p.clock_hz),
    );
    (logic, reads)
}
