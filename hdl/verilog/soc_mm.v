// The product sequencer: one MM_CMD runs a whole C = op(A)·op(B) from RAM into RAM. It walks
// the n x n output tiles (row blocks outer, column blocks inner, K in chunks of CHUNK rows) and
// issues, on the MMIO bus in the CPU's place, the writes the tile driver would: the row DMA's
// registers and DMA_CMD for each A block, B block and C tile, and the array's SHIFT, ROUNDING,
// K_LEN, SEED and COMMAND, polling the array's STATUS in between. So the DMA and the array are
// driven exactly as by firmware, and the numeric contract is theirs.
//
// An MM_CMD store is held on the bus (`hold`) until the product is done or refused, so the CPU
// cannot reach any MMIO block meanwhile; the bus (`addr`, `wr`, `rd`, `wdata`) is the CPU's
// (`cpu_*`) whenever the sequencer is idle. Tile seeds are computed here, tile_seed(SEED, i0, j0)
// with the multiplies by the two finaliser constants done serially (a bit a clock, beside the
// DMA's transfers); the i0 and j0 products are kept as running sums.
module soc_mm #(
    parameter N = 4,
    parameter CHUNK = 512,
    parameter [31:0] BASE = 32'h0,
    parameter [31:0] DMA_ADDR_ADDR = 32'h0,
    parameter [31:0] DMA_ROW_STEP_ADDR = 32'h0,
    parameter [31:0] DMA_LANE_STEP_ADDR = 32'h0,
    parameter [31:0] DMA_LANES_ADDR = 32'h0,
    parameter [31:0] DMA_ROWS_ADDR = 32'h0,
    parameter [31:0] DMA_CMD_ADDR = 32'h0,
    parameter [31:0] DMA_WRITE_A = 32'h0,
    parameter [31:0] DMA_WRITE_B = 32'h0,
    parameter [31:0] DMA_READ_C = 32'h0,
    parameter [31:0] ACC_STATUS = 32'h0,
    parameter [31:0] ACC_ERROR_CLEAR = 32'h0,
    parameter [31:0] ACC_SHIFT = 32'h0,
    parameter [31:0] ACC_ROUNDING = 32'h0,
    parameter [31:0] ACC_SEED = 32'h0,
    parameter [31:0] ACC_K_LEN = 32'h0,
    parameter [31:0] ACC_COMMAND = 32'h0,
    parameter [31:0] STATUS_WAIT = 32'h0,
    parameter [31:0] STATUS_ERROR = 32'h0,
    parameter [31:0] CMD_CLEAR = 32'h0,
    parameter [31:0] CMD_EMIT = 32'h0,
    parameter [31:0] SEED_STEP_I = 32'h0,
    parameter [31:0] SEED_STEP_J = 32'h0,
    parameter [31:0] SEED_MIX0 = 32'h0,
    parameter [31:0] SEED_MIX1 = 32'h0,
    parameter MAX_SHIFT = 32,
    parameter MAX_ROUNDING = 2
) (
    input wire clock,
    input wire rst,
    input wire [31:0] cpu_addr,
    input wire cpu_wr,
    input wire cpu_rd,
    input wire [31:0] cpu_wdata,
    output wire [31:0] addr,
    output wire wr,
    output wire rd,
    output wire [31:0] wdata,
    output wire [31:0] rdata,
    output wire hold,
    input wire [31:0] acc_rdata,
    input wire dma_hold
);
localparam [4:0] IDLE = 0, CHECK = 1, QUIET = 2, ECLR = 3, SHIFT = 4, ROUND = 5, TILE = 6,
    LOAD_B = 7, KLEN = 8, SEEDW = 9, COMMAND = 10, POLL = 11, STORE_C = 12, NEXT = 13,
    X_ADDR = 16, X_ROW = 17, X_LANE = 18, X_LANES = 19, X_ROWS = 20, X_CMD = 21, X_WAIT = 22,
    DONE = 31;
localparam [15:0] CHUNK_ROWS = CHUNK;
reg [4:0] state, ret;
// The descriptor (MM_* registers, word index = address bits 5:2).
reg [31:0] d [0:13];
wire hit = cpu_addr[31:6] == BASE[31:6];
wire [3:0] idx = cpu_addr[5:2];
wire [15:0] m = d[9][15:0], n = d[10][15:0];
wire [16:0] k = d[11][16:0];
wire [7:0] shift = d[12][7:0];
wire [7:0] rounding = d[12][15:8];
// Sizes and conversion checked on every bit written: a value past a field is refused, not cut.
wire bad_size = m == 16'd0 | n == 16'd0 | k == 17'd0 | d[9][31:16] != 16'd0
    | d[10][31:16] != 16'd0 | d[11][31:17] != 15'd0;
wire bad_convert = shift > MAX_SHIFT | rounding > MAX_ROUNDING;
reg [2:0] status;
// The walk: pointers in bytes, what is left of each dimension.
reg [31:0] a_row, b_col, c_row, c_tile, a_k, b_k;
reg [15:0] m_left, n_left;
reg [16:0] k_left;
reg a_held;
// The DMA transfer being issued, and the state after it.
reg [31:0] x_addr, x_row, x_lane, x_cmd;
reg [15:0] x_lanes, x_rows;
wire [15:0] lanes_m = m_left > N ? N : m_left;
wire [15:0] lanes_n = n_left > N ? N : n_left;
wire [16:0] klen = k_left > CHUNK ? CHUNK : k_left;
wire last_chunk = k_left <= CHUNK;
wire single_chunk = k <= CHUNK;
// The seed unit: tile_seed over the running products i0·MUL0 and j0·MUL1.
reg [31:0] seed_i, seed_j, s_acc, s_op, s_mul, seed_out;
reg [1:0] s_state;
reg [4:0] s_count;
reg seed_go;
wire [31:0] s_sum = s_acc + (s_mul[0] ? s_op : 32'd0);
wire [31:0] s_mix = s_sum ^ (s_sum >> 16);
wire [31:0] s_x = d[13] ^ seed_i ^ seed_j;
always @(posedge clock) begin
    if (seed_go) begin
        s_op <= s_x ^ (s_x >> 16);
        s_acc <= 32'd0;
        s_mul <= SEED_MIX0;
        s_count <= 5'd0;
        s_state <= 2'd1;
    end else if (s_state != 2'd0) begin
        s_acc <= s_sum;
        s_op <= s_op << 1;
        s_mul <= s_mul >> 1;
        s_count <= s_count + 5'd1;
        if (s_count == 5'd31) begin
            s_acc <= 32'd0;
            s_mul <= SEED_MIX1;
            s_op <= s_sum ^ (s_sum >> 15);
            s_state <= s_state == 2'd1 ? 2'd2 : 2'd0;
            if (s_state == 2'd2) seed_out <= s_mix == 32'd0 ? 32'd1 : s_mix;
        end
    end
    if (rst) s_state <= 2'd0;
end
wire seed_ready = s_state == 2'd0 & ~seed_go;
// The sequencer's own bus access in each state.
reg [31:0] m_addr, m_wdata;
reg m_wr;
always @(*) begin
    m_wr = 1'b1;
    m_wdata = 32'd0;
    m_addr = ACC_STATUS;
    case (state)
    ECLR: m_addr = ACC_ERROR_CLEAR;
    SHIFT: begin m_addr = ACC_SHIFT; m_wdata = {24'd0, shift}; end
    ROUND: begin m_addr = ACC_ROUNDING; m_wdata = {24'd0, rounding}; end
    KLEN: begin m_addr = ACC_K_LEN; m_wdata = {15'd0, klen}; end
    SEEDW: begin m_addr = ACC_SEED; m_wdata = seed_out; m_wr = seed_ready; end
    COMMAND: begin
        m_addr = ACC_COMMAND;
        m_wdata = (k_left == k ? CMD_CLEAR : 32'd0) | (last_chunk ? CMD_EMIT : 32'd0);
    end
    X_ADDR: begin m_addr = DMA_ADDR_ADDR; m_wdata = x_addr; end
    X_ROW: begin m_addr = DMA_ROW_STEP_ADDR; m_wdata = x_row; end
    X_LANE: begin m_addr = DMA_LANE_STEP_ADDR; m_wdata = x_lane; end
    X_LANES: begin m_addr = DMA_LANES_ADDR; m_wdata = {16'd0, x_lanes}; end
    X_ROWS: begin m_addr = DMA_ROWS_ADDR; m_wdata = {16'd0, x_rows}; end
    X_CMD: begin m_addr = DMA_CMD_ADDR; m_wdata = x_cmd; end
    X_WAIT: begin m_addr = DMA_CMD_ADDR; m_wr = 1'b0; end
    default: m_wr = 1'b0; // QUIET, POLL: reading the array's STATUS
    endcase
end
wire own = state != IDLE & state != CHECK & state != DONE;
assign addr = own ? m_addr : cpu_addr;
assign wr = own ? m_wr : cpu_wr;
assign rd = own ? 1'b0 : cpu_rd;
assign wdata = own ? m_wdata : cpu_wdata;
assign hold = hit & (idx == 4'd14) & (state != DONE);
assign rdata = ~hit ? 32'd0 : idx == 4'd15 ? {29'd0, status} : idx == 4'd14 ? 32'd0 : d[idx];
wire waiting = (acc_rdata & STATUS_WAIT) != 32'd0;
wire acc_error = (acc_rdata & STATUS_ERROR) != 32'd0;
always @(posedge clock) begin
    seed_go <= 1'b0;
    if (state == IDLE & cpu_wr & hit & idx < 4'd14) d[idx] <= cpu_wdata;
    case (state)
    IDLE: if (cpu_wr & hit & idx == 4'd14) state <= CHECK;
    CHECK: begin
        status <= {1'b0, bad_convert, bad_size};
        state <= bad_size | bad_convert ? DONE : QUIET;
        a_row <= d[0];
        b_col <= d[3];
        c_row <= d[6];
        c_tile <= d[6];
        m_left <= m;
        n_left <= n;
        seed_i <= 32'd0;
        seed_j <= 32'd0;
        a_held <= 1'b0;
    end
    QUIET: if (~waiting) state <= acc_error ? ECLR : SHIFT; // SHIFT only while idle
    ECLR: state <= SHIFT;
    SHIFT: state <= ROUND;
    ROUND: state <= TILE;
    TILE: begin // the tile's first K chunk; A again unless this row block's is in its bank
        seed_go <= 1'b1;
        k_left <= k;
        a_k <= a_row;
        b_k <= b_col;
        x_addr <= a_row;
        x_row <= d[2];
        x_lane <= d[1];
        x_lanes <= lanes_m;
        x_rows <= klen_full(k);
        x_cmd <= DMA_WRITE_A;
        ret <= LOAD_B;
        state <= a_held ? LOAD_B : X_ADDR;
    end
    LOAD_B: begin
        x_addr <= b_k;
        x_row <= d[4];
        x_lane <= d[5];
        x_lanes <= lanes_n;
        x_rows <= klen[15:0];
        x_cmd <= DMA_WRITE_B;
        a_held <= single_chunk;
        begin ret <= KLEN; state <= X_ADDR; end
    end
    KLEN: state <= last_chunk ? SEEDW : COMMAND;
    SEEDW: if (seed_ready) state <= COMMAND;
    COMMAND: state <= POLL;
    POLL: if (acc_error) begin
        status[2] <= 1'b1;
        state <= DONE;
    end else if (~waiting) begin
        if (last_chunk) state <= STORE_C;
        else begin // the next chunk of this tile: A and B again
            k_left <= k_left - CHUNK;
            a_k <= a_k + d[2] * (2 * CHUNK);
            b_k <= b_k + d[4] * (2 * CHUNK);
            x_addr <= a_k + d[2] * (2 * CHUNK);
            x_row <= d[2];
            x_lane <= d[1];
            x_lanes <= lanes_m;
            x_rows <= klen_full(k_left - CHUNK);
            x_cmd <= DMA_WRITE_A;
            begin ret <= LOAD_B; state <= X_ADDR; end
        end
    end
    STORE_C: begin
        x_addr <= c_tile;
        x_row <= d[7];
        x_lane <= d[8];
        x_lanes <= lanes_n;
        x_rows <= lanes_m;
        x_cmd <= DMA_READ_C;
        begin ret <= NEXT; state <= X_ADDR; end
    end
    NEXT: if (n_left > N) begin // the next column block
        n_left <= n_left - N;
        b_col <= b_col + d[5] * (2 * N);
        c_tile <= c_tile + d[8] * (2 * N);
        seed_j <= seed_j + SEED_STEP_J;
        state <= TILE;
    end else if (m_left > N) begin // the next row block
        m_left <= m_left - N;
        n_left <= n;
        a_row <= a_row + d[1] * (2 * N);
        b_col <= d[3];
        c_row <= c_row + d[7] * (2 * N);
        c_tile <= c_row + d[7] * (2 * N);
        seed_i <= seed_i + SEED_STEP_I;
        seed_j <= 32'd0;
        a_held <= 1'b0;
        state <= TILE;
    end else state <= DONE;
    X_ADDR: state <= X_ROW;
    X_ROW: state <= X_LANE;
    X_LANE: state <= X_LANES;
    X_LANES: state <= X_ROWS;
    X_ROWS: state <= X_CMD;
    X_CMD: state <= X_WAIT;
    X_WAIT: if (~dma_hold) state <= ret;
    DONE: state <= IDLE; // the MM_CMD store is acknowledged this clock
    default: state <= IDLE;
    endcase
    if (rst) state <= IDLE;
end
// The rows of a chunk starting with `left` K rows to go.
function [15:0] klen_full(input [16:0] left);
    klen_full = left > CHUNK ? CHUNK_ROWS : left[15:0];
endfunction
endmodule
