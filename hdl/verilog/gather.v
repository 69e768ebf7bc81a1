// A gather engine of the conv unit (see hdl/src/gather.rs for what it does and its timing): N
// lanes, feature-map rows of ROW_WORDS words (a power of two), a map of FM_WORDS words of W bits.
// The parameters after W are the configuration layout of systole_core::gather::layout (word
// indices *_WORD, field positions *_LSB; the field widths are those declared below) and of
// regmap::gcmd, which the crate passes in; the last five are the model's constants, which
// rust-hdl declares as localparams of the engine's module.
//
// The lanes' per-lane ports are packed here (lane i at bits 16*i); the crate's wrapper joins them
// to the ports rust-hdl declares (`fm_data$i`, `wr_data$i`).
//
// For Verilator's sake the work sits inside the `if` of the state that uses it (the walkers'
// arithmetic under their step, the lanes' reads under state 3): an idle engine costs a few
// comparisons per clock. The map is one true dual-port block RAM per pair of lanes (lane 2c
// reads copy c through port A, lane 2c + 1 through port B), each entry half a row; a row write
// takes both ports of every copy, so while `fm_we` the reads pause (`hold`).
module systole_gather #(
    parameter N = 4,
    parameter ROW_WORDS = 4,
    parameter FM_WORDS = 512,
    parameter W = 16,
    parameter WORDS = 35,
    parameter WALK_WORDS = 17,
    parameter COUNTS01_WORD = 0,
    parameter COUNT2_MOD_WORD = 1,
    parameter STEP_Q0_WORD = 2,
    parameter STEP_A0_WORD = 3,
    parameter STEP_Q1_WORD = 4,
    parameter STEP_A1_WORD = 5,
    parameter STEP_Q2_WORD = 6,
    parameter STEP_A2_WORD = 7,
    parameter STEP_Q3_WORD = 8,
    parameter STEP_A3_WORD = 9,
    parameter CARRY_Q_WORD = 10,
    parameter CARRY_A_Y_WORD = 11,
    parameter CARRY_A_X_WORD = 12,
    parameter START_IDX01_WORD = 13,
    parameter START_IDX2_R_WORD = 14,
    parameter START_Q_WORD = 15,
    parameter START_ADDR_WORD = 16,
    parameter LIMITS_WORD = 34,
    parameter COUNT0_LSB = 0,
    parameter COUNT1_LSB = 16,
    parameter COUNT2_LSB = 0,
    parameter MODULUS_LSB = 16,
    parameter DQ_Y_LSB = 0,
    parameter DQ_X_LSB = 16,
    parameter DA_LSB = 0,
    parameter DR_Y_LSB = 24,
    parameter DR_X_LSB = 28,
    parameter CQ_Y_LSB = 0,
    parameter CQ_X_LSB = 16,
    parameter CA_Y_LSB = 0,
    parameter CA_X_LSB = 0,
    parameter START_IDX0_LSB = 0,
    parameter START_IDX1_LSB = 16,
    parameter START_IDX2_LSB = 0,
    parameter START_RY_LSB = 16,
    parameter START_RX_LSB = 24,
    parameter START_QY_LSB = 0,
    parameter START_QX_LSB = 16,
    parameter START_ADDR_LSB = 0,
    parameter LIMIT_Y_LSB = 0,
    parameter LIMIT_X_LSB = 16,
    parameter KLEN_LSB = 0,
    parameter BANK_LSB = 17,
    parameter LANES_LSB = 18,
    parameter K_NEXT_LSB = 20,
    parameter [7:0] a_cfg = 8'h0,
    parameter [7:0] a_cmd = 8'h0,
    parameter [16:0] depth = 17'h0,
    parameter [16:0] lanes_last = 17'h0,
    parameter enabled = 1'b1
) (
    input wire clock,
    input wire reset,
    input wire [7:0] reg_addr,
    input wire [31:0] reg_wdata,
    input wire reg_we,
    input wire fm_we,
    input wire [15:0] fm_row,
    input wire [ROW_WORDS*16-1:0] fm_data,
    input wire [1:0] bank_busy,
    output wire busy,
    output wire cmd_error,
    output wire wr_en,
    output wire wr_bank,
    output wire [15:0] wr_row,
    output wire [N*16-1:0] wr_data
);
// Rows of the map, bits of a row index and of a word address; an entry holds HALF words, SEL
// bits pick one; ENTRIES entries per copy, COPIES copies.
localparam ROW_BITS = $clog2(FM_WORDS / ROW_WORDS);
localparam ADDR_BITS = ROW_BITS + $clog2(ROW_WORDS);
localparam HALF = ROW_WORDS / 2;
localparam SEL_BITS = $clog2(HALF);
localparam SEL_W = SEL_BITS > 0 ? SEL_BITS : 1;
localparam ENTRIES = FM_WORDS / HALF;
localparam COPIES = (N + 1) / 2;

reg [1:0] state; // 0 idle, 1 start (walker loads), 2 setup (lane walk), 3 run (bank rows)
reg [16:0] count;
reg [16:0] klen;
reg bank;
reg [1:0] lane_mode;
reg k_next;
reg we_d;
reg [15:0] row_d;
// Configuration words (word i at bits 32*i): lane walker, K walker, limits. They form a shift
// register: each write shifts one word in at the top.
reg [32*WORDS-1:0] cfg;
// The lanes' walker states (lane i at bits 16*i, 4*i, 24*i), shifted in from the top lane.
reg [16*N-1:0] l_qy, l_qx;
reg [4*N-1:0] l_ry, l_rx;
reg [24*N-1:0] l_addr;
// The two walkers' states: walker 0 (the lane walker) in the low half, 1 (the K walker) above.
wire [31:0] w_qy, w_qx;
wire [7:0] w_ry, w_rx;
wire [47:0] w_addr;
wire [15:0] kw_qy = w_qy[31:16];
wire [15:0] kw_qx = w_qx[31:16];
wire [3:0] kw_ry = w_ry[7:4];
wire [3:0] kw_rx = w_rx[7:4];
wire [23:0] kw_addr = w_addr[47:24];
wire [31:0] limits = cfg[32*LIMITS_WORD +: 32];
wire [15:0] limit_y = limits[LIMIT_Y_LSB +: 16];
wire [15:0] limit_x = limits[LIMIT_X_LSB +: 16];
// Both walkers take the remainder modulus from the lane walker's word.
wire [4:0] modulus = {1'b0, cfg[32*COUNT2_MOD_WORD + MODULUS_LSB +: 4]};

wire cmd_write = reg_we & (reg_addr == a_cmd);
wire [16:0] new_klen = reg_wdata[KLEN_LSB +: 17];
wire refused = (state != 2'h0) | we_d | (new_klen == 17'h0) | (new_klen > depth);
// The first row waits while an array command still reads (or will read) the bank, and every
// row while a feature-map row is written (the write takes the read ports).
wire hold = ((count == 17'h0) & bank_busy[bank]) | fm_we;
wire [1:0] step = {(state == 2'h3) & ~hold, state == 2'h2};
wire [1:0] load = {(state == 2'h1) & ~k_next, (state == 2'h1) & (lane_mode == 2'h0)};

initial begin
    state = 2'h0;
    count = 17'h0;
    klen = 17'h0;
    bank = 1'b0;
    lane_mode = 2'h0;
    k_next = 1'b0;
    we_d = 1'b0;
    row_d = 16'h0;
    cfg = 0;
    l_qy = 0;
    l_qx = 0;
    l_ry = 0;
    l_rx = 0;
    l_addr = 0;
end

always @(posedge clock) begin
    we_d <= 1'b0;
    if (step[1]) begin
        we_d <= 1'b1;
        row_d <= count[15:0];
        count <= count + 17'h1;
        if ((count + 17'h1) == klen) state <= 2'h0;
    end
    if (state == 2'h2) begin
        // After N steps lane l holds the lane walker's state after l steps.
        l_qy <= {w_qy[15:0], l_qy[16*N-1:16]};
        l_qx <= {w_qx[15:0], l_qx[16*N-1:16]};
        l_ry <= {w_ry[3:0], l_ry[4*N-1:4]};
        l_rx <= {w_rx[3:0], l_rx[4*N-1:4]};
        l_addr <= {w_addr[23:0], l_addr[24*N-1:24]};
        count <= count + 17'h1;
        if (count == lanes_last) begin
            count <= 17'h0;
            state <= 2'h3;
        end
    end
    if (state == 2'h1) begin
        count <= 17'h0;
        state <= (lane_mode == 2'h2) ? 2'h3 : 2'h2;
    end
    if (cmd_write & ~refused) begin
        klen <= new_klen;
        bank <= reg_wdata[BANK_LSB];
        lane_mode <= reg_wdata[LANES_LSB +: 2];
        k_next <= reg_wdata[K_NEXT_LSB];
        state <= 2'h1;
    end
    if (reg_we & (reg_addr == a_cfg)) cfg <= {reg_wdata, cfg[32*WORDS-1:32]};
    if (reset) begin
        state <= 2'h0;
        we_d <= 1'b0;
    end
end

genvar g, c, i;
// The walkers (systole_core::gather::Walk::step): walker g reads words g * WALK_WORDS on.
generate
    for (g = 0; g < 2; g = g + 1) begin : walker
        localparam BASE = 32 * g * WALK_WORDS;
        reg [15:0] idx0, idx1, idx2, qy, qx;
        reg [3:0] ry, rx;
        reg [23:0] addr;
        initial begin
            idx0 = 0;
            idx1 = 0;
            idx2 = 0;
            qy = 0;
            qx = 0;
            ry = 0;
            rx = 0;
            addr = 0;
        end
        assign w_qy[16*g +: 16] = qy;
        assign w_qx[16*g +: 16] = qx;
        assign w_ry[4*g +: 4] = ry;
        assign w_rx[4*g +: 4] = rx;
        assign w_addr[24*g +: 24] = addr;
        always @(posedge clock) begin : walk
            reg last0, last1, last2, carry_y, carry_x;
            reg [31:0] dq, dd;
            reg [4:0] sum_y, sum_x;
            reg [3:0] diff_y, diff_x;
            if (step[g]) begin
                // The level that steps is the innermost one not at its last count.
                last0 = (idx0 + 16'h1) == cfg[BASE + 32*COUNTS01_WORD + COUNT0_LSB +: 16];
                last1 = (idx1 + 16'h1) == cfg[BASE + 32*COUNTS01_WORD + COUNT1_LSB +: 16];
                last2 = (idx2 + 16'h1) == cfg[BASE + 32*COUNT2_MOD_WORD + COUNT2_LSB +: 16];
                if (~last0) begin
                    dq = cfg[BASE + 32*STEP_Q0_WORD +: 32];
                    dd = cfg[BASE + 32*STEP_A0_WORD +: 32];
                end else if (~last1) begin
                    dq = cfg[BASE + 32*STEP_Q1_WORD +: 32];
                    dd = cfg[BASE + 32*STEP_A1_WORD +: 32];
                end else if (~last2) begin
                    dq = cfg[BASE + 32*STEP_Q2_WORD +: 32];
                    dd = cfg[BASE + 32*STEP_A2_WORD +: 32];
                end else begin
                    dq = cfg[BASE + 32*STEP_Q3_WORD +: 32];
                    dd = cfg[BASE + 32*STEP_A3_WORD +: 32];
                end
                sum_y = {1'b0, ry} + {1'b0, dd[DR_Y_LSB +: 4]};
                sum_x = {1'b0, rx} + {1'b0, dd[DR_X_LSB +: 4]};
                carry_y = sum_y >= modulus;
                carry_x = sum_x >= modulus;
                diff_y = sum_y[3:0] - modulus[3:0];
                diff_x = sum_x[3:0] - modulus[3:0];
                idx0 <= last0 ? 16'h0 : idx0 + 16'h1;
                if (last0) idx1 <= last1 ? 16'h0 : idx1 + 16'h1;
                if (last0 & last1) idx2 <= last2 ? 16'h0 : idx2 + 16'h1;
                ry <= carry_y ? diff_y : sum_y[3:0];
                rx <= carry_x ? diff_x : sum_x[3:0];
                qy <= qy + dq[DQ_Y_LSB +: 16]
                    + (carry_y ? cfg[BASE + 32*CARRY_Q_WORD + CQ_Y_LSB +: 16] : 16'h0);
                qx <= qx + dq[DQ_X_LSB +: 16]
                    + (carry_x ? cfg[BASE + 32*CARRY_Q_WORD + CQ_X_LSB +: 16] : 16'h0);
                addr <= addr + dd[DA_LSB +: 24]
                    + (carry_y ? cfg[BASE + 32*CARRY_A_Y_WORD + CA_Y_LSB +: 24] : 24'h0)
                    + (carry_x ? cfg[BASE + 32*CARRY_A_X_WORD + CA_X_LSB +: 24] : 24'h0);
            end
            // A load wins over a step (the two never come together).
            if (load[g]) begin
                idx0 <= cfg[BASE + 32*START_IDX01_WORD + START_IDX0_LSB +: 16];
                idx1 <= cfg[BASE + 32*START_IDX01_WORD + START_IDX1_LSB +: 16];
                idx2 <= cfg[BASE + 32*START_IDX2_R_WORD + START_IDX2_LSB +: 16];
                ry <= cfg[BASE + 32*START_IDX2_R_WORD + START_RY_LSB +: 4];
                rx <= cfg[BASE + 32*START_IDX2_R_WORD + START_RX_LSB +: 4];
                qy <= cfg[BASE + 32*START_Q_WORD + START_QY_LSB +: 16];
                qx <= cfg[BASE + 32*START_Q_WORD + START_QX_LSB +: 16];
                addr <= cfg[BASE + 32*START_ADDR_WORD + START_ADDR_LSB +: 24];
            end
        end
    end
endgenerate

// The map's copies and their lanes: copy c serves lane 2c (port A) and, when it exists, lane
// 2c + 1 (port B). A lane's word is zero where its coordinates fall outside the map (`in_*`).
generate
    for (c = 0; c < COPIES; c = c + 1) begin : copy
        localparam LA = 2 * c;
        // Port B's lane; the last copy of an odd lane count has none (its port B only writes).
        localparam HAS_B = 2 * c + 1 < N;
        localparam LB = HAS_B ? 2 * c + 1 : 2 * c;
        reg [HALF*W-1:0] mem [0:ENTRIES-1];
        reg [HALF*W-1:0] q_a, q_b;
        reg [SEL_W-1:0] sel_a, sel_b;
        reg in_a, in_b;
        wire [23:0] a_a = l_addr[24*LA +: 24] + kw_addr;
        wire [23:0] a_b = l_addr[24*LB +: 24] + kw_addr;
        wire [ROW_BITS:0] e_a = fm_we ? {fm_row[ROW_BITS-1:0], 1'b0} : a_a[ADDR_BITS-1:SEL_BITS];
        wire [ROW_BITS:0] e_b = (fm_we || !HAS_B) ? {fm_row[ROW_BITS-1:0], 1'b1}
            : a_b[ADDR_BITS-1:SEL_BITS];
        // Address bits above the map's size (it wraps).
        wire unused_high_addr = &{1'b0, a_a[23:ADDR_BITS], a_b[23:ADDR_BITS]};
        // An entry is half a row: port A takes the low half, port B the high half, each word
        // its low W bits (the core's words are sign-extended, so no value is lost).
        wire [HALF*W-1:0] half_lo, half_hi;
        for (i = 0; i < HALF; i = i + 1) begin : word
            assign half_lo[W*i +: W] = fm_data[16*i +: W];
            assign half_hi[W*i +: W] = fm_data[16*(HALF+i) +: W];
        end
        initial begin
            q_a = 0;
            q_b = 0;
            sel_a = 0;
            sel_b = 0;
            in_a = 1'b0;
            in_b = 1'b0;
        end
        always @(posedge clock) begin : lanes
            reg [15:0] y, x;
            if (state == 2'h3) begin
                y = l_qy[16*LA +: 16] + kw_qy;
                x = l_qx[16*LA +: 16] + kw_qx;
                in_a <= (l_ry[4*LA +: 4] == kw_ry) & (l_rx[4*LA +: 4] == kw_rx) & (y < limit_y)
                    & (x < limit_x);
                if (~fm_we) q_a <= mem[e_a];
                if (SEL_BITS > 0) sel_a <= a_a[SEL_W-1:0];
                if (HAS_B) begin
                    y = l_qy[16*LB +: 16] + kw_qy;
                    x = l_qx[16*LB +: 16] + kw_qx;
                    in_b <= (l_ry[4*LB +: 4] == kw_ry) & (l_rx[4*LB +: 4] == kw_rx)
                        & (y < limit_y) & (x < limit_x);
                    if (~fm_we) q_b <= mem[e_b];
                    if (SEL_BITS > 0) sel_b <= a_b[SEL_W-1:0];
                end
            end
            // Every copy takes the same row through both ports. Blocking writes, after the
            // reads above (so they still see the old words): Verilator keeps a flag per
            // non-blocking memory write and clears and tests them all on every clock. Nothing
            // else reads the map.
            /* verilator lint_off BLKSEQ */
            if (fm_we) begin
                mem[e_a] = half_lo;
                mem[e_b] = half_hi;
            end
            /* verilator lint_on BLKSEQ */
        end
        // The lanes' words, sign-extended to the core's 16 bits.
        wire [W-1:0] word_a = q_a[W*sel_a +: W];
        wire [W-1:0] word_b = q_b[W*sel_b +: W];
        wire [15:0] out_a, out_b;
        if (W < 16) begin : narrow
            assign out_a = {{(16-W){word_a[W-1]}}, word_a};
            assign out_b = {{(16-W){word_b[W-1]}}, word_b};
        end else begin : full
            assign out_a = word_a;
            assign out_b = word_b;
        end
        assign wr_data[16*LA +: 16] = in_a ? out_a : 16'h0;
        if (HAS_B) begin : lane_b
            assign wr_data[16*LB +: 16] = in_b ? out_b : 16'h0;
        end else begin : no_lane_b
            wire unused_lane_b = &{1'b0, out_b, in_b, sel_b};
        end
    end
endgenerate

assign busy = (state != 2'h0) | we_d;
assign cmd_error = cmd_write & refused;
assign wr_en = we_d;
assign wr_bank = bank;
assign wr_row = row_d;
// `enabled` is always 1 here (the crate writes the absent engine itself); rows above the map's
// size do not exist; word bits above W are not kept.
wire unused_gather = &{1'b0, enabled, fm_row[15:ROW_BITS], fm_data};
endmodule
