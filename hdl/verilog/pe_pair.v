// Two PEs of one column sharing one multiplier (see hdl/src/pe_pair.rs for the timing): W-bit
// words inside the array's 16-bit word and 48-bit `res` ports (which carry sign-extended
// values), both products from one W x (K + W + 1) multiply with the high factor at 2^K
// (K = dsp_pack::pack_shift(W)), into ACC = acc_bits(W)-bit accumulators.
module systole_pe_pair #(
    parameter W = 8,
    parameter K = 16,
    parameter ACC = 32
) (
    input wire clock,
    input wire reset,
    input wire signed [15:0] u_a_in,
    input wire signed [15:0] l_a_in,
    input wire signed [15:0] b_in,
    input wire u_valid_in,
    input wire u_first_in,
    input wire u_last_in,
    input wire l_valid_in,
    input wire l_first_in,
    input wire l_last_in,
    input wire signed [47:0] res_in,
    input wire shift_en,
    output wire signed [15:0] u_a_out,
    output wire signed [15:0] l_a_out,
    output wire signed [15:0] b_out,
    output wire u_valid_out,
    output wire u_first_out,
    output wire u_last_out,
    output wire l_valid_out,
    output wire l_first_out,
    output wire l_last_out,
    output wire signed [47:0] res,
    output wire captured
);
wire signed [W-1:0] ua = u_a_in[W-1:0];
wire signed [W-1:0] la = l_a_in[W-1:0];
wire signed [W-1:0] bw = b_in[W-1:0];
wire signed [ACC-1:0] rin = res_in[ACC-1:0];
generate
    if (W < 16) begin : narrow
        // The sign-extension bits above, which carry nothing.
        wire unused_high_bits = &{1'b0, u_a_in[15:W], l_a_in[15:W], b_in[15:W], res_in[47:ACC]};
    end
endgenerate
reg signed [W-1:0] ua_q;
reg signed [W-1:0] la_q;
reg signed [W-1:0] ub_q;
reg signed [W-1:0] lb_q;
reg [2:0] uctl_q;
reg [2:0] lctl_q;
reg signed [ACC-1:0] u_acc;
reg signed [ACC-1:0] l_acc;
reg signed [ACC-1:0] u_res_q;
reg signed [ACC-1:0] l_res_q;
reg cap_q;
// The packed factor la * 2^K + ua_q, K + W + 1 bits (ua_q: the upper's A word of the last
// clock), written as its bits: the low K are ua_q sign-extended, the top W + 1 la minus its sign.
wire signed [W:0] factor_high = la - $signed({1'b0, ua_q[W-1]});
wire signed [K+W:0] factor = {factor_high, {(K-W){ua_q[W-1]}}, ua_q};
// One multiply (a DSP48E1's 25 x 18) for both PEs: the shared B word times the packed factor.
wire signed [K+2*W-1:0] p = ub_q * factor;
wire signed [K-1:0] lo = p[K-1:0];
wire signed [K-1:0] hi = p[K+2*W-1:K] + {{(K-1){1'b0}}, p[K-1]};
wire signed [ACC-1:0] lo_ext = {{(ACC-K){lo[K-1]}}, lo};
wire signed [ACC-1:0] hi_ext = {{(ACC-K){hi[K-1]}}, hi};
initial begin
    ua_q = {W{1'b0}};
    la_q = {W{1'b0}};
    ub_q = {W{1'b0}};
    lb_q = {W{1'b0}};
    uctl_q = 3'h0;
    lctl_q = 3'h0;
    u_acc = {ACC{1'b0}};
    l_acc = {ACC{1'b0}};
    u_res_q = {ACC{1'b0}};
    l_res_q = {ACC{1'b0}};
    cap_q = 1'b0;
end
always @(posedge clock) begin
    ua_q <= ua;
    la_q <= la;
    ub_q <= bw;
    lb_q <= ub_q;
    uctl_q <= {u_last_in, u_first_in, u_valid_in} & {3{~reset}};
    lctl_q <= {l_last_in, l_first_in, l_valid_in} & {3{~reset}};
    cap_q <= l_valid_in & l_last_in & ~reset;
    if (l_valid_in & l_last_in) u_res_q <= (l_first_in ? {ACC{1'b0}} : u_acc) + lo_ext;
    else if (shift_en) u_res_q <= l_res_q;
    if (l_valid_in & l_last_in) l_res_q <= (l_first_in ? {ACC{1'b0}} : l_acc) + hi_ext;
    else if (shift_en) l_res_q <= rin;
    if (l_valid_in) begin
        u_acc <= (l_first_in ? {ACC{1'b0}} : u_acc) + lo_ext;
        l_acc <= (l_first_in ? {ACC{1'b0}} : l_acc) + hi_ext;
    end
end
assign u_a_out = ua_q;
assign l_a_out = la_q;
assign b_out = lb_q;
assign u_valid_out = uctl_q[0];
assign u_first_out = uctl_q[1];
assign u_last_out = uctl_q[2];
assign l_valid_out = lctl_q[0];
assign l_first_out = lctl_q[1];
assign l_last_out = lctl_q[2];
assign res = u_res_q;
assign captured = cap_q;
endmodule
