reg active;
reg [5:0] row;
reg [31:0] lfsr;
reg [31:0] seed_q;
reg bank_q;
reg wr_en_q;
reg wr_bank_q;
reg [5:0] wr_row_q;
reg signed [15:0] wr_data_q;
initial begin
    active = 1'b0;
    row = 6'h0;
    lfsr = 32'h0;
    seed_q = 32'h0;
    bank_q = 1'b0;
    wr_en_q = 1'b0;
    wr_bank_q = 1'b0;
    wr_row_q = 6'h0;
    wr_data_q = 16'h0;
end
wire go = start | active;
wire [5:0] cur_row = start ? 6'h0 : row;
wire [31:0] lane_seed = seed_in ^ lane_mul;
wire [31:0] pre = start ? ((lane_seed == 32'h0) ? 32'h1 : lane_seed) : lfsr;
wire [31:0] cur = pre[0] ? ((pre >> 1) ^ taps) : (pre >> 1);
// The conversion of `systole_core::numeric::convert` (as `kernel` computes it in 64 bits) at
// the widths it needs, for every 6-bit shift and 2-bit rounding code (not only the contract's):
// `s` = the accumulator plus the stochastic bits (49 bits never wrap); one arithmetic shift of
// `{s, 0}` gives the quotient `floor(s / 2^sh)` and, below it, the last bit shifted out (the
// nearest-even guard bit); the bits under that one (sticky), the stochastic mask and the
// 16-bit range test all come from one thermometer code of the shift. `kernel`'s biased
// shift makes the quotient 0 at shift 63, kept here. (Yosys, 7-series: 449 LUTs a column,
// the 64-bit version 1,042.)
function automatic [15:0] convert(input [47:0] a, input [31:0] r, input [5:0] sh, input [1:0] mode);
    reg [48:0] below;
    reg [48:0] s;
    reg [16:0] w;
    reg [15:0] q;
    reg sticky;
    reg up;
    reg ovf;
    integer i;
    begin
        // below[i]: bit i lies below the shift.
        for (i = 0; i < 49; i = i + 1) below[i] = i < sh;
        s = {a[47], a} + {17'h0, (mode == 2'h2) ? r & below[31:0] : 32'h0};
        // A 50-bit shift, of which the quotient's low 16 bits and the guard bit are kept.
        w = $signed({s, 1'b0}) >>> sh;
        q = (sh == 6'h3f) ? 16'h0 : w[16:1];
        // Nearest-even rounds up when the guard bit (w[0], 0 at shift 0) is set and the bits
        // below it are not all zero (the accumulator's sign extends above bit 47), or the
        // quotient is odd.
        sticky = |(a & below[48:1]);
        up = (mode == 2'h1) & w[0] & (sticky | q[0]);
        // The quotient leaves the 16-bit range when a bit of `s` at or above 15 + shift
        // differs from its sign.
        ovf = |((s[47:15] ^ {33{s[48]}}) & ~below[32:0]);
        if (ovf) convert = s[48] ? sat_lo[15:0] : sat_hi[15:0];
        else if (up & (q != sat_hi[15:0])) convert = q + 16'h1;
        else convert = q;
    end
endfunction
// The model's 64-bit constants, which the widths above make unnecessary.
wire unused_model_constants = &{1'b0, bias, one, sign_ext};
always @(posedge clock) begin
    if (start) begin
        seed_q <= seed_in;
        bank_q <= bank_in;
    end
    // Outside drains `wr_data_q` holds (rust-hdl's `update` keeps converting): it reaches the C
    // buffer only with `wr_en`, which follows a drain edge.
    if (go) begin
        lfsr <= cur;
        row <= cur_row + 6'h1;
        active <= cur_row != last_row;
        wr_data_q <= convert(acc, cur, shift, rounding);
    end
    if (reset) active <= 1'b0;
    wr_en_q <= go & ~reset;
    wr_row_q <= cur_row;
    wr_bank_q <= start ? bank_in : bank_q;
end
assign shift_en = go;
assign seed_out = seed_q;
assign bank_out = bank_q;
assign wr_en = wr_en_q;
assign wr_bank = wr_bank_q;
assign wr_row = wr_row_q;
assign wr_data = wr_data_q;
assign done = wr_en_q & (wr_row_q == last_row);
