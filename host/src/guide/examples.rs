//! The guide's worked examples: every number is computed here (tile seeds, LFSR states,
//! configuration words, command words) and every output comes from the golden model, after
//! the step-by-step arithmetic shown has been checked to give the same words.

use super::GuideError;
use std::fmt::Write;
use systole_core::gather::GatherConfig;
use systole_core::numeric::{convert, lane_seed, tile_seed, Lfsr32};
use systole_core::regmap::{self, gather_command, LaneMode};
use systole_core::{ArrayConfig, Rounding};
use systole_golden::tensor::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, ConvGeom, OutputSpec};

/// The examples' array: 4x4, default buffers and conv unit.
pub(crate) const N: usize = 4;

/// Small deterministic example values in `-lim..=lim`.
pub(crate) fn values(seed: u64, len: usize, lim: i64) -> Vec<i16> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as i64 % (2 * lim + 1) - lim) as i16
        })
        .collect()
}

fn golden_err(name: &'static str) -> impl Fn(golden::NumericError) -> GuideError {
    move |source| GuideError::Golden { name, source }
}

fn matrix(rows: usize, cols: usize, get: impl Fn(usize, usize) -> String) -> String {
    let mut s = String::from("```text\n");
    for r in 0..rows {
        let cells: Vec<String> = (0..cols).map(|c| format!("{:>7}", get(r, c))).collect();
        let _ = writeln!(s, "{}", cells.join(" "));
    }
    s.push_str("```\n");
    s
}

fn q(rows: usize, cols: usize, frac: u32, data: Vec<i16>) -> Result<QMatrix, GuideError> {
    QMatrix::from_vec(rows, cols, frac, data).map_err(golden_err("operands"))
}

/// One 4x4 tile `C = A·B`, K = 3, stochastic rounding, every intermediate number shown.
pub(super) fn matmul() -> Result<String, GuideError> {
    let (k, shift, seed) = (3usize, 8u32, 7u32);
    let a = q(N, k, 8, values(1, N * k, 900))?;
    let b = q(k, N, 8, values(2, k * N, 900))?;
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed,
    };
    let want = golden::matmul(&a, &b, &spec, N).map_err(golden_err("matmul"))?;
    let t = tile_seed(seed, 0, 0);
    let acc = |r: usize, c: usize| -> i64 {
        (0..k)
            .map(|kk| i64::from(a.data[r * k + kk]) * i64::from(b.data[kk * N + c]))
            .sum()
    };
    // The LFSR state each output uses: column c's LFSR after r + 1 steps.
    let random = |r: usize, c: usize| {
        let mut l = Lfsr32::new(lane_seed(t, c as u32));
        (0..=r).map(|_| l.step()).last().unwrap_or(0)
    };
    for r in 0..N {
        for c in 0..N {
            let got = convert(acc(r, c), shift, Rounding::Stochastic, random(r, c), 16) as i16;
            if got != want.data[r * N + c] {
                return Err(GuideError::Inconsistent {
                    name: "example-matmul",
                    reason: format!(
                        "output ({r},{c}): step by step {got}, golden model {}",
                        want.data[r * N + c]
                    ),
                });
            }
        }
    }
    let mut s = String::new();
    let _ = writeln!(s, "A (4x{k}, frac 8) and B ({k}x4, frac 8), output frac 8: `SHIFT` = 8 + 8 - 8 = {shift}; stochastic rounding; operation seed {seed}.\n");
    s.push_str(&matrix(N, k, |r, c| a.data[r * k + c].to_string()));
    s.push_str(&matrix(k, N, |r, c| b.data[r * N + c].to_string()));
    let _ = writeln!(
        s,
        "\nBus operations, in order (each write is one clock edge):\n"
    );
    let _ = writeln!(s, "1. `SHIFT` (0x{:02X}) <- {shift}; `ROUNDING` (0x{:02X}) <- {}; `SEED` (0x{:02X}) <- `tile_seed({seed}, 0, 0)` = 0x{t:08X}; `K_LEN` (0x{:02X}) <- {k}.", regmap::SHIFT, regmap::ROUNDING, Rounding::Stochastic.code(), regmap::SEED, regmap::K_LEN);
    for kk in 0..k {
        let ar: Vec<String> = (0..N).map(|r| a.data[r * k + kk].to_string()).collect();
        let br: Vec<String> = (0..N).map(|c| b.data[kk * N + c].to_string()).collect();
        let _ = writeln!(s, "{}. one beat: A bank 0 row {kk} <- [{}] (column {kk} of A), B bank 0 row {kk} <- [{}] (row {kk} of B).", kk + 2, ar.join(", "), br.join(", "));
    }
    let cmd = regmap::command(0, 0, 0, true, true);
    let _ = writeln!(
        s,
        "{}. `COMMAND` (0x{:02X}) <- 0x{cmd:02X} (a_bank 0, b_bank 0, c_bank 0, clear, emit).",
        k + 2,
        regmap::COMMAND
    );
    let _ = writeln!(
        s,
        "{}. poll until `DONE_COUNT` = 1 (or `STATUS.busy` = 0), then read C bank 0 rows 0..3.\n",
        k + 3
    );
    let _ = writeln!(
        s,
        "Exact accumulators `acc[r][c] = sum_k A[r][k]·B[k][c]` (16 fractional bits):\n"
    );
    s.push_str(&matrix(N, N, |r, c| acc(r, c).to_string()));
    let seeds: Vec<String> = (0..N)
        .map(|c| format!("0x{:08X}", lane_seed(t, c as u32)))
        .collect();
    let _ = writeln!(s, "\nColumn LFSR seeds `lane_seed(0x{t:08X}, c)`, c = 0..3: {}. The low {shift} bits of the state after `r + 1` steps, added before the floor shift:\n", seeds.join(", "));
    s.push_str(&matrix(N, N, |r, c| {
        (random(r, c) & ((1 << shift) - 1)).to_string()
    }));
    let _ = writeln!(
        s,
        "\nC = floor((acc + bits) / 2^{shift}), saturated: the rows read from C bank 0:\n"
    );
    s.push_str(&matrix(N, N, |r, c| want.data[r * N + c].to_string()));
    Ok(s)
}

/// A tile whose K (20) is longer than a 16-row buffer: two commands, one emitting.
pub(super) fn ksplit() -> Result<String, GuideError> {
    let (k, depth, seed) = (20usize, 16usize, 0x1234u32);
    let a = q(N, k, 6, values(3, N * k, 2000))?;
    let b = q(k, N, 6, values(4, k * N, 2000))?;
    let spec = OutputSpec {
        frac: 4,
        rounding: Rounding::NearestEven,
        seed,
    };
    let want = golden::matmul(&a, &b, &spec, N).map_err(golden_err("ksplit"))?;
    let first = regmap::command(0, 0, 0, true, false);
    let second = regmap::command(1, 1, 0, false, true);
    let t = tile_seed(seed, 0, 0);
    let mut s = String::new();
    let _ = writeln!(s, "A is 4x{k}, B {k}x4 (frac 6 each), output frac 4 (`SHIFT` = 8), nearest-even, seed 0x{seed:X}, on a 4x4 array built with `--buffer-depth {depth}`:\n");
    let _ = writeln!(s, "1. `SHIFT` <- 8, `ROUNDING` <- 1, `K_LEN` <- {depth}; A and B bank 0 rows 0..{} <- K columns 0..{} of A and rows 0..{} of B.", depth - 1, depth - 1, depth - 1);
    let _ = writeln!(s, "2. `COMMAND` <- 0x{first:02X} (banks 0, clear, no emit): the accumulators hold the partial sums of K 0..{}.", depth - 1);
    let _ = writeln!(s, "3. while it runs: A and B bank 1 rows 0..{} <- K {depth}..{}; `K_LEN` <- {}; `SEED` <- `tile_seed(0x{seed:X}, 0, 0)` = 0x{t:08X}.", k - depth - 1, k - 1, k - depth);
    let _ = writeln!(s, "4. wait until `STATUS.queue_full` = 0, then `COMMAND` <- 0x{second:02X} (banks 1, no clear, emit into C bank 0): it continues the sums and converts them once, with the SEED latched by this command.");
    let _ = writeln!(s, "5. poll until `DONE_COUNT` has grown by 1; read C bank 0. The result is the one-command result bit for bit:\n");
    s.push_str(&matrix(N, N, |r, c| want.data[r * N + c].to_string()));
    Ok(s)
}

/// The words of an engine configuration, five to a line.
fn words_block(cfg: &GatherConfig) -> String {
    let mut s = String::from("```text\n");
    for (i, chunk) in cfg.words().chunks(5).enumerate() {
        let w: Vec<String> = chunk.iter().map(|w| format!("0x{w:08X}")).collect();
        let _ = writeln!(s, "{:>2}: {}", i * 5, w.join(" "));
    }
    s.push_str("```\n");
    s
}

/// The forward example's convolution (the hardware test drives the same one).
pub(crate) const FORWARD: Conv2dGeom = Conv2dGeom {
    batch: 2,
    shape: ConvGeom {
        in_ch: 1,
        in_h: 4,
        in_w: 4,
        out_ch: 2,
        kernel: 3,
        stride: 1,
        pad: 1,
    },
};

/// The forward pass of a small convolution, gathered on chip.
pub(super) fn conv_forward() -> Result<String, GuideError> {
    let g = FORWARD;
    let fm_depth = ArrayConfig::square(N).fm_depth;
    let slot = (g.in_ch * g.in_h * g.in_w).next_multiple_of(N);
    let slots = fm_depth / slot;
    let cfg = g.shape.forward_a(slots, slot);
    let x = q(
        g.batch,
        g.in_ch * g.in_h * g.in_w,
        8,
        values(5, g.batch * 16, 500),
    )?;
    let w = q(g.out_ch, g.in_ch * 9, 8, values(6, g.out_ch * 9, 500))?;
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::NearestEven,
        seed: 0,
    };
    let y = golden::conv2d_forward(&x, &w, &g, &spec, N).map_err(golden_err("conv forward"))?;
    let (oh, ow) = (g.out_h(), g.out_w());
    let m = g.batch * oh * ow;
    let mut s = String::new();
    let _ = writeln!(s, "Batch {}, 1 input channel of 4x4, 2 output channels, 3x3 kernel, stride 1, padding 1 (output 4x4), all frac 8 (`SHIFT` = 8), nearest-even, on the 4x4 top (fm_depth {fm_depth}). The product is `im2col(x)·Wᵀ`: M = {m} rows (b, oy, ox), K = 9 (ci, ky, kx), N = 2 (co).\n", g.batch);
    let _ = writeln!(s, "* Feature map: image b in slot b of {slot} words (a ring of {fm_depth} / {slot} = {slots} slots): `fm_wr_row` b·{} + i <- words 4i..4i+3 of x[b].", slot / N);
    let _ = writeln!(s, "* Lane walk over (ox, oy, slot), counts [{}, {}, {}]; K walk over (kx, ky, ci), counts [{}, {}, {}]; modulus 1; limits [{}, {}]. The 35 `GA_CFG` writes, in order:\n",
        cfg.lanes.counts[0], cfg.lanes.counts[1], cfg.lanes.counts[2], cfg.k.counts[0], cfg.k.counts[1], cfg.k.counts[2], cfg.limit[0], cfg.limit[1]);
    s.push_str(&words_block(&cfg));
    let _ = writeln!(s, "\n  The lane walk starts at q = (-1, -1) (0x{:04X} twice: the padding), address {}; a level-0 step adds (0, 1) and 1 to the address, a level-1 step (1, {}) and {}, a level-2 step (next slot) adds {} to the address.\n",
        cfg.lanes.start.q[0], cfg.lanes.start.addr as i32 - (1 << 24) * i32::from(cfg.lanes.start.addr >= 1 << 23), cfg.lanes.dq[1][1] as i16, cfg.lanes.da[1] as i32 - (1 << 24) * i32::from(cfg.lanes.da[1] >= 1 << 23), cfg.lanes.da[2] as i32 - (1 << 24) * i32::from(cfg.lanes.da[2] >= 1 << 23));
    let _ = writeln!(s, "* B bank 0 rows k = 0..8 <- [W[0][k], W[1][k], 0, 0] once (Wᵀ, padded to 4 lanes); every command reads B bank 0.");
    let _ = writeln!(s, "* `SHIFT` <- 8, `ROUNDING` <- 1, `K_LEN` <- 9. For output tile t = 0..{} (rows 4t..4t+3), bank b = t mod 2:", m / N - 1);
    let load = gather_command(9, 0, LaneMode::Load, false);
    let next = gather_command(9, 1, LaneMode::Next, false);
    let _ = writeln!(s, "  1. `GA_CMD` <- `klen 9 | bank b | lanes | k_next 0`: tile 0 0x{load:06X} (load), tile 1 0x{next:06X} (next: the lane walker continues), then alternating banks;");
    let _ = writeln!(
        s,
        "  2. wait until `STATUS.gather_a` = 0; `SEED` <- `tile_seed(0, 4t, 0)`;"
    );
    let _ = writeln!(s, "  3. wait until `STATUS.queue_full` = 0; `COMMAND` <- a_bank b, b_bank 0, c_bank b, clear, emit (tile 0: 0x{:02X}, tile 1: 0x{:02X});", regmap::command(0, 0, 0, true, true), regmap::command(1, 0, 1, true, true));
    let _ = writeln!(s, "  4. before tile t + 2 reuses C bank b: wait until `DONE_COUNT` counts tile t, read its rows.\n");
    let _ = writeln!(s, "Tiles 0 and 1 (rows (b, oy, ox) = (0, 0, 0..3) and (0, 1, 0..3); lanes 0, 1 = y[0][co][oy][ox], lanes 2, 3 padding = 0):\n");
    let (plane, img) = (oh * ow, g.out_ch * oh * ow);
    s.push_str(&matrix(2 * N, N, |r, c| {
        if c < g.out_ch {
            y.data[(r / plane) * img + c * plane + r % plane].to_string()
        } else {
            "0".into()
        }
    }));
    Ok(s)
}

/// The two gradients: their configuration words and first outputs.
pub(super) fn conv_backward() -> Result<String, GuideError> {
    let g = Conv2dGeom {
        batch: 1,
        shape: ConvGeom {
            in_ch: 1,
            in_h: 5,
            in_w: 5,
            out_ch: 2,
            kernel: 3,
            stride: 2,
            pad: 1,
        },
    };
    let c = g.shape;
    let fm_depth = ArrayConfig::square(N).fm_depth;
    let (oh, ow) = (g.out_h(), g.out_w());
    let dy_slot = (g.out_ch * oh * ow).next_multiple_of(N);
    let bi = c.backward_input_a(fm_depth / dy_slot, dy_slot);
    let x_words = (g.in_ch * g.in_h * g.in_w).next_multiple_of(N);
    let bw_slot = x_words + dy_slot;
    let bw_slots = fm_depth / bw_slot;
    let bwa = c.backward_weights_a(bw_slots, bw_slot, x_words);
    let bwb = c.backward_weights_b(bw_slots, bw_slot);
    let dy = q(1, g.out_ch * oh * ow, 8, values(7, g.out_ch * oh * ow, 400))?;
    let x = q(1, 25, 8, values(8, 25, 400))?;
    let w = q(g.out_ch, 9, 8, values(9, g.out_ch * 9, 400))?;
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    let dx = golden::conv2d_backward_input(&dy, &w, &g, &spec, N)
        .map_err(golden_err("input gradient"))?;
    let dw = golden::conv2d_backward_weights(&x, &dy, &g, &spec, N)
        .map_err(golden_err("weight gradient"))?;
    let mut s = String::new();
    let _ = writeln!(s, "1 input channel of 5x5, 2 output channels, 3x3 kernel, stride 2, padding 1 (output 3x3), batch 1, frac 8 everywhere (`SHIFT` = 8), truncation.\n");
    let _ = writeln!(s, "**Input gradient** `gather(dy)·W'` (M = 25 input pixels, K = 18 = (co, ky, kx), N = 1): dy in slot 0 ({dy_slot} words); the K walk is the flipped kernel (steps -1) with remainders modulo the stride: modulus {}, K walk counts [{}, {}, ...]. `GA_CFG` words:\n", bi.modulus, bi.k.counts[0], bi.k.counts[1]);
    s.push_str(&words_block(&bi));
    let _ = writeln!(s, "\nB bank rows k = (co, ky, kx) <- [W[co][0][ky][kx], 0, 0, 0]; `K_LEN` <- 18; per tile as in the forward pass. dx[0][0][0][0..5] = {:?}.\n", &dx.data[..5]);
    let _ = writeln!(s, "**Weight gradient** `dy_rowsᵀ·im2col(x)` (M = 2 = co, K = 9 = (oy, ox), N = 9 = (ci, ky, kx)): slot of {bw_slot} words, x at offset 0, dy at offset {x_words}; both operands gathered: A by engine A (lanes = output channels, K = output pixels), B by engine B (lanes = (ci, ky, kx), K = output pixels). `GA_CFG` words:\n");
    s.push_str(&words_block(&bwa));
    let _ = writeln!(s, "\n`GB_CFG` words:\n");
    s.push_str(&words_block(&bwb));
    let _ = writeln!(s, "\nOutput tile (0, 0): `GA_CMD` <- 0x{:06X}, `GB_CMD` <- 0x{:06X} (both load, bank 0); tile (0, 4): `GA_CMD` <- 0x{:06X} (lanes kept: the same output channels), `GB_CMD` <- 0x{:06X} (next lanes), bank 1; wait until both `STATUS.gather_a` and `gather_b` are 0 before each `COMMAND`. dW[co][0..4] = {:?}, {:?}.",
        gather_command(9, 0, LaneMode::Load, false), gather_command(9, 0, LaneMode::Load, false),
        gather_command(9, 1, LaneMode::Keep, false), gather_command(9, 1, LaneMode::Next, false),
        &dw.data[..4], &dw.data[9..13]);
    Ok(s)
}
