// The column converter (see hdl/src/converter.rs for its timing) for W-bit words inside the
// array's ports (a 48-bit `acc`, a 16-bit `wr_data`, which carry sign-extended values): it reads
// the low ACC = acc_bits(W) bits of `acc`, and its signed `wr_data_q` drives `wr_data`
// sign-extended. SUM = sum_bits(W) is the width of an accumulator plus the 32 stochastic bits.
// The parameters after SUM are the model's constants, which rust-hdl declares as localparams
// of the array's converter module.
module systole_converter #(
    parameter W = 16,
    parameter ACC = 48,
    parameter SUM = 49,
    parameter [31:0] lane_mul = 32'h0,
    parameter [31:0] taps = 32'h0,
    parameter [5:0] last_row = 6'h0,
    parameter [63:0] bias = 64'h0,
    parameter [63:0] one = 64'h0,
    parameter [63:0] sign_ext = 64'h0,
    parameter [63:0] sat_hi = 64'h0,
    parameter [63:0] sat_lo = 64'h0
) (
    input wire clock,
    input wire reset,
    input wire start,
    input wire signed [47:0] acc,
    input wire [31:0] seed_in,
    input wire bank_in,
    input wire [5:0] shift,
    input wire [1:0] rounding,
    output wire shift_en,
    output wire [31:0] seed_out,
    output wire bank_out,
    output wire wr_en,
    output wire wr_bank,
    output wire [5:0] wr_row,
    output wire signed [15:0] wr_data,
    output wire done
);
generate
    if (W < 16) begin : narrow
        // The sign-extension bits of `acc` above the accumulator, which carry nothing.
        wire unused_high_acc = &{1'b0, acc[47:ACC]};
    end
endgenerate
// The highest bit of `below` read: by the sticky bits (ACC) or the stochastic mask (31).
localparam B = ACC > 31 ? ACC : 31;
reg active;
reg [5:0] row;
reg [31:0] lfsr;
reg [31:0] seed_q;
reg bank_q;
// The first stage's registers: the stochastic sum, the sticky bit and the word's shift,
// rounding, row and bank, valid in `v_q`.
reg [SUM-1:0] s_q;
reg sticky_q;
reg [5:0] sh_q;
reg [1:0] mode_q;
reg v_q;
reg [5:0] row_q;
reg bank1_q;
reg wr_en_q;
reg wr_bank_q;
reg [5:0] wr_row_q;
reg signed [W-1:0] wr_data_q;
initial begin
    active = 1'b0;
    row = 6'h0;
    lfsr = 32'h0;
    seed_q = 32'h0;
    bank_q = 1'b0;
    s_q = {SUM{1'b0}};
    sticky_q = 1'b0;
    sh_q = 6'h0;
    mode_q = 2'h0;
    v_q = 1'b0;
    row_q = 6'h0;
    bank1_q = 1'b0;
    wr_en_q = 1'b0;
    wr_bank_q = 1'b0;
    wr_row_q = 6'h0;
    wr_data_q = {W{1'b0}};
end
wire go = start | active;
wire [5:0] cur_row = start ? 6'h0 : row;
wire [31:0] lane_seed = seed_in ^ lane_mul;
wire [31:0] pre = start ? ((lane_seed == 32'h0) ? 32'h1 : lane_seed) : lfsr;
wire [31:0] cur = pre[0] ? ((pre >> 1) ^ taps) : (pre >> 1);
// The conversion of `systole_core::numeric::convert` (as `kernel` computes it in 64 bits) at
// the widths it needs, for every 6-bit shift and 2-bit rounding code (not only the contract's),
// in two stages (one a clock at 50 MHz on the ECP5). First: `s` = the accumulator plus the
// stochastic bits (SUM bits never wrap) and the sticky bit (the bits of the accumulator more
// than one below the shift). Second, from the registered `s`: one arithmetic shift of `{s, 0}`
// gives the quotient `floor(s / 2^sh)` and, below it, the last bit shifted out (the
// nearest-even guard bit); the mask, sticky bits and W-bit range test all come from one
// thermometer code of the shift. `kernel`'s biased shift makes the quotient 0 at shift 63, kept
// here. (Yosys, 7-series, W = 16, one stage: 449 LUTs a column, the 64-bit version 1,042.)
function automatic [SUM:0] first(input [ACC-1:0] a, input [31:0] r, input [5:0] sh, input [1:0] mode);
    reg [B:0] below;
    reg [SUM-1:0] s;
    integer i;
    begin
        // below[i]: bit i lies below the shift.
        for (i = 0; i <= B; i = i + 1) below[i] = i < sh;
        s = {{(SUM-ACC){a[ACC-1]}}, a} + {{(SUM-32){1'b0}}, (mode == 2'h2) ? r & below[31:0] : 32'h0};
        // The sticky bit (the accumulator's sign extends above bit ACC - 1) below `s`.
        first = {s, |(a & below[ACC:1])};
    end
endfunction
function automatic [W-1:0] finish(input [SUM-1:0] s, input sticky, input [5:0] sh, input [1:0] mode);
    reg [SUM-W-1:0] below;
    reg [W:0] w;
    reg [W-1:0] q;
    reg up;
    reg ovf;
    integer i;
    begin
        for (i = 0; i < SUM-W; i = i + 1) below[i] = i < sh;
        // A (SUM + 1)-bit shift, of which the quotient's low W bits and the guard bit are kept.
        w = $signed({s, 1'b0}) >>> sh;
        q = (sh == 6'h3f) ? {W{1'b0}} : w[W:1];
        // Nearest-even rounds up when the guard bit (w[0], 0 at shift 0) is set and the bits
        // below it are not all zero, or the quotient is odd.
        up = (mode == 2'h1) & w[0] & (sticky | q[0]);
        // The quotient leaves the W-bit range when a bit of `s` at or above W - 1 + shift
        // differs from its sign.
        ovf = |((s[SUM-2:W-1] ^ {(SUM-W){s[SUM-1]}}) & ~below[SUM-W-1:0]);
        if (ovf) finish = s[SUM-1] ? sat_lo[W-1:0] : sat_hi[W-1:0];
        else if (up & (q != sat_hi[W-1:0])) finish = q + 1'b1;
        else finish = q;
    end
endfunction
// The first stage's result: the sum and, in bit 0, the sticky bit.
wire [SUM:0] first_d = first(acc[ACC-1:0], cur, shift, rounding);
// The model's 64-bit constants, which the widths above make unnecessary.
wire unused_model_constants = &{1'b0, bias, one, sign_ext};
always @(posedge clock) begin
    if (start) begin
        seed_q <= seed_in;
        bank_q <= bank_in;
    end
    // Outside drains the stages hold (rust-hdl's `update` keeps converting): `wr_data_q`
    // reaches the C buffer only with `wr_en`, which follows a drain edge by two edges.
    if (go) begin
        lfsr <= cur;
        row <= cur_row + 6'h1;
        active <= cur_row != last_row;
        s_q <= first_d[SUM:1];
        sticky_q <= first_d[0];
        sh_q <= shift;
        mode_q <= rounding;
    end
    if (v_q) wr_data_q <= finish(s_q, sticky_q, sh_q, mode_q);
    if (reset) active <= 1'b0;
    v_q <= go & ~reset;
    row_q <= cur_row;
    bank1_q <= start ? bank_in : bank_q;
    wr_en_q <= v_q & ~reset;
    wr_row_q <= row_q;
    wr_bank_q <= bank1_q;
end
assign shift_en = go;
assign seed_out = seed_q;
assign bank_out = bank_q;
assign wr_en = wr_en_q;
assign wr_bank = wr_bank_q;
assign wr_row = wr_row_q;
assign wr_data = wr_data_q;
assign done = wr_en_q & (wr_row_q == last_row);
endmodule
