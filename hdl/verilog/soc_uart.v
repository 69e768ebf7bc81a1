// The UART: the receiver into a FIFO of 2^FIFO_BITS bytes (bytes arriving while the firmware is
// busy wait for it), the transmitter fed by writes to DATA_ADDR. A write while the transmitter
// is busy is dropped (the firmware waits for TX_READY); a read of DATA_ADDR takes the oldest
// byte of the FIFO.
module soc_uart #(
    parameter [31:0] DATA_ADDR = 32'h0,
    parameter [31:0] STATUS_ADDR = 32'h0,
    parameter FIFO_BITS = 11,
    parameter TX_READY_BIT = 0,
    parameter RX_VALID_BIT = 1,
    parameter OVERRUN_BIT = 2
) (
    input wire clock,
    input wire uart_rst,
    input wire rx,
    output wire tx,
    input wire [31:0] addr,
    input wire wr,
    input wire rd,
    input wire [7:0] wdata,
    output wire [31:0] rdata
);
localparam [FIFO_BITS:0] ONE = 1;
localparam [FIFO_BITS:0] FULL = ONE << FIFO_BITS;
wire [7:0] rx_byte;
wire rx_strobe, tx_busy;
wire tx_start = wr & (addr == DATA_ADDR) & ~tx_busy;
soc_uart_rx uart_rx_unit(.clock(clock), .reset(uart_rst), .rx(rx), .data(rx_byte), .valid(rx_strobe));
soc_uart_tx uart_tx_unit(.clock(clock), .reset(uart_rst), .data(wdata), .start(tx_start),
    .busy(tx_busy), .tx(tx));
reg [7:0] rx_fifo [0:(1 << FIFO_BITS) - 1];
reg [FIFO_BITS:0] rx_head, rx_tail;
reg rx_overrun;
wire rx_empty = rx_head == rx_tail;
wire rx_full = (rx_tail - rx_head) == FULL;
wire data_read = rd & (addr == DATA_ADDR);
wire status_read = rd & (addr == STATUS_ADDR);
always @(posedge clock) begin
    if (rx_strobe & ~rx_full) rx_fifo[rx_tail[FIFO_BITS - 1:0]] <= rx_byte;
end
always @(posedge clock) begin
    if (status_read) rx_overrun <= 1'b0;
    if (rx_strobe) begin
        if (rx_full) rx_overrun <= 1'b1;
        else rx_tail <= rx_tail + ONE;
    end
    if (data_read & ~rx_empty) rx_head <= rx_head + ONE;
    if (uart_rst) begin
        rx_head <= {(FIFO_BITS + 1){1'b0}};
        rx_tail <= {(FIFO_BITS + 1){1'b0}};
        rx_overrun <= 1'b0;
    end
end
reg [31:0] status;
always @(*) begin
    status = 32'd0;
    status[TX_READY_BIT] = ~tx_busy;
    status[RX_VALID_BIT] = ~rx_empty;
    status[OVERRUN_BIT] = rx_overrun;
end
assign rdata = addr == DATA_ADDR ? {24'd0, rx_fifo[rx_head[FIFO_BITS - 1:0]]}
    : addr == STATUS_ADDR ? status
    : 32'd0;
endmodule
