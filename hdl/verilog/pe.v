// The processing element (see hdl/src/pe.rs for its timing) for W-bit words inside the array's
// ports: 16-bit words and a 48-bit `res`, which carry sign-extended values. The body reads the
// low W (and ACC = acc_bits(W) = 2W + 16) bits of its inputs, multiplies W x W -> 2W bits, the
// real hardware width, sign-extends the product into the ACC-bit accumulator, and its signed
// registers drive the wider outputs sign-extended (Verilog extends a signed right-hand side).
// Synthesis then builds a W x W multiplier, and the word bits above W of the buffers and skew
// lines, which nothing reads, are removed. For Verilator's sake the `valid`, `first` and `last`
// flags share one register `ctl_q` (bits 0, 1, 2), which it passes to the next PE in one
// operation instead of three, and `acc` is assigned after its last read, so it needs no copy
// of the old value.
module systole_pe #(
    parameter W = 16,
    parameter ACC = 48
) (
    input wire clock,
    input wire reset,
    input wire signed [15:0] a_in,
    input wire signed [15:0] b_in,
    input wire valid_in,
    input wire first_in,
    input wire last_in,
    input wire signed [47:0] res_in,
    input wire shift_en,
    output wire signed [15:0] a_out,
    output wire signed [15:0] b_out,
    output wire valid_out,
    output wire first_out,
    output wire last_out,
    output wire signed [47:0] res,
    output wire captured
);
wire signed [W-1:0] a_w = a_in[W-1:0];
wire signed [W-1:0] b_w = b_in[W-1:0];
wire signed [ACC-1:0] res_w = res_in[ACC-1:0];
generate
    if (W < 16) begin : narrow
        // The sign-extension bits above, which carry nothing.
        wire unused_high_bits = &{1'b0, a_in[15:W], b_in[15:W], res_in[47:ACC]};
    end
endgenerate
reg signed [W-1:0] a_q;
reg signed [W-1:0] b_q;
reg [2:0] ctl_q;
reg signed [ACC-1:0] acc;
reg signed [ACC-1:0] res_q;
reg cap_q;
wire signed [2*W-1:0] prod = a_w * b_w;
wire signed [ACC-1:0] prod_ext = {{(ACC-2*W){prod[2*W-1]}}, prod};
initial begin
    a_q = {W{1'b0}};
    b_q = {W{1'b0}};
    ctl_q = 3'h0;
    acc = {ACC{1'b0}};
    res_q = {ACC{1'b0}};
    cap_q = 1'b0;
end
always @(posedge clock) begin
    a_q <= a_w;
    b_q <= b_w;
    ctl_q <= {last_in, first_in, valid_in} & {3{~reset}};
    cap_q <= valid_in & last_in & ~reset;
    if (valid_in & last_in) res_q <= (first_in ? {ACC{1'b0}} : acc) + prod_ext;
    else if (shift_en) res_q <= res_w;
    if (valid_in) acc <= (first_in ? {ACC{1'b0}} : acc) + prod_ext;
end
assign a_out = a_q;
assign b_out = b_q;
assign valid_out = ctl_q[0];
assign first_out = ctl_q[1];
assign last_out = ctl_q[2];
assign res = res_q;
assign captured = cap_q;
endmodule
