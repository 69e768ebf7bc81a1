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
function automatic [15:0] convert(input [47:0] a, input [31:0] r, input [5:0] sh, input [1:0] mode);
    reg [63:0] x;
    reg [63:0] mask;
    reg [63:0] rem;
    reg [63:0] half;
    reg [63:0] sum;
    reg [63:0] q;
    reg [63:0] res;
    begin
        x = {16'h0, a};
        if (a[47]) x = x | sign_ext;
        mask = (one << sh) - one;
        rem = x & mask;
        half = (one << sh) >> 1;
        sum = (mode == 2'h2) ? x + ({32'h0, r} & mask) : x;
        q = ((sum + bias) >> sh) - (bias >> sh);
        res = q;
        if ((mode == 2'h1) && (sh != 6'h0) && ((rem > half) || ((rem == half) && q[0])))
            res = q + one;
        if (res[63]) begin
            if (res < sat_lo) res = sat_lo;
        end else if (res > sat_hi) begin
            res = sat_hi;
        end
        convert = res[15:0];
    end
endfunction
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
