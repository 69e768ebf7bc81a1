// The SoC's resets and LEDs. The button (either polarity) through two flip-flops; a power-up
// reset of 15 clocks (the CPU needs one); the SYS registers' software reset. All synchronous,
// active high, registered once more before they fan out. `uart_rst` leaves out the software
// reset, so bytes arriving while the firmware restarts are kept.
module soc_reset #(
    parameter [0:0] BUTTON_ACTIVE_LOW = 1'b1,
    parameter [0:0] LED_ACTIVE_LOW = 1'b0
) (
    input wire clock,
    input wire reset_pin,
    input wire soft_reset,
    output wire hard_reset,
    output reg rst,
    output reg uart_rst,
    output wire led0,
    output wire led1
);
reg reset_sync0 = 1'b1, reset_sync1 = 1'b1;
reg [3:0] por = 4'd0;
wire por_done = por == 4'd15;
// The button or the power-up reset: what also ends a software reset.
assign hard_reset = reset_sync1 | ~por_done;
initial begin
    rst = 1'b1;
    uart_rst = 1'b1;
end
always @(posedge clock) begin
    reset_sync0 <= reset_pin ^ BUTTON_ACTIVE_LOW;
    reset_sync1 <= reset_sync0;
    if (!por_done) por <= por + 4'd1;
    rst <= hard_reset | soft_reset;
    uart_rst <= hard_reset;
end
reg [23:0] heartbeat;
always @(posedge clock) heartbeat <= heartbeat + 24'd1;
// led0 lights while the CPU runs; led1 blinks.
assign led0 = rst ^ ~LED_ACTIVE_LOW;
assign led1 = heartbeat[23] ^ LED_ACTIVE_LOW;
endmodule
