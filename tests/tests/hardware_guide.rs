//! The hardware programming guide's own test: a testbench that knows only what
//! docs/HARDWARE.md states (register addresses, bit fields, the gather word layout and walk
//! rules, the numeric contract's text and constants, all read from the guide) drives a tiled
//! matmul with a K split and a strided convolution forward pass through the Verilated 4x4
//! `top`, and the outputs must equal the golden model and the guide's contract re-implemented
//! here. It also checks the guide's gather timing and out-of-range write rules.

#[path = "hardware_guide/bench.rs"]
mod bench;
mod common;
#[path = "hardware_guide/contract.rs"]
mod contract;
#[path = "hardware_guide/doc.rs"]
mod doc;

use bench::Bench;
use common::Rng;
use contract::Contract;
use doc::Guide;
use systole_core::AcceleratorBus;
use systole_core::{ArrayConfig, Rounding};
use systole_golden::QMatrix;
use systole_golden::{self as golden, Conv2dGeom, ConvGeom, OutputSpec};
use systole_sim::{SimError, VerilatedArray};

/// The 4x4 top, or `None` (with a message) when this build has no Verilated model.
fn bench() -> Option<Bench> {
    match VerilatedArray::new(&ArrayConfig::square(4)) {
        Ok(bus) => Some(Bench::new(bus, Guide::load())),
        Err(e @ (SimError::NotBuilt | SimError::SizeNotBuilt { .. })) => {
            eprintln!("SKIPPED hardware guide testbench: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn words(rng: &mut Rng, len: usize) -> Vec<i16> {
    (0..len).map(|_| rng.next() as i16).collect()
}

#[test]
fn matmul_driven_from_the_guide_matches_the_golden_model() {
    let Some(mut tb) = bench() else { return };
    let n = tb.n;
    let contract = Contract::new(&tb.g);
    // Two chunks per tile (K > buffer depth), ragged edges in both directions.
    let (m, k, cols) = (n + 2, tb.depth + 88, n + 3);
    let mut rng = Rng(0x5EED);
    let (a, b) = (words(&mut rng, m * k), words(&mut rng, k * cols));
    let (shift, seed) = (15, 0xC0FF_EE00u32);
    tb.write("SHIFT", shift);
    tb.write("ROUNDING", 2);
    let mut out = vec![0i16; m * cols];
    let mut done = 0;
    for i0 in (0..m).step_by(n) {
        for j0 in (0..cols).step_by(n) {
            for (chunk, k0) in (0..k).step_by(tb.depth).enumerate() {
                let (len, bank) = (tb.depth.min(k - k0), (chunk % 2) as u8);
                for r in 0..len {
                    let arow: Vec<i16> = (0..n)
                        .map(|l| {
                            if i0 + l < m {
                                a[(i0 + l) * k + k0 + r]
                            } else {
                                0
                            }
                        })
                        .collect();
                    let brow: Vec<i16> = (0..n)
                        .map(|l| {
                            if j0 + l < cols {
                                b[(k0 + r) * cols + j0 + l]
                            } else {
                                0
                            }
                        })
                        .collect();
                    tb.rows(bank, r, Some(&arow), Some(&brow));
                }
                let last = k0 + len == k;
                if last {
                    tb.write("SEED", contract.tile_seed(seed, i0 as u32, j0 as u32));
                }
                tb.write("K_LEN", len as u32);
                let bank = u32::from(bank);
                tb.command(bank, bank, 0, chunk == 0, last);
                // Running now: the command before it has left the other bank.
                tb.wait("the command to start", |b| !b.status("queue_full"));
            }
            done += 1;
            for (r, row) in tb.tile(done, 0, n.min(m - i0)).iter().enumerate() {
                for (c, &v) in row.iter().enumerate().take(cols.saturating_sub(j0).min(n)) {
                    out[(i0 + r) * cols + j0 + c] = v;
                }
            }
        }
    }
    let text = contract.matmul(&a, &b, (m, k, cols), shift, 2, seed, n);
    let qa = QMatrix::from_vec(m, k, 12, a).unwrap();
    let qb = QMatrix::from_vec(k, cols, 12, b).unwrap();
    let spec = OutputSpec {
        frac: 9,
        rounding: Rounding::Stochastic,
        seed,
    };
    let gold = golden::matmul(&qa, &qb, &spec, n).unwrap();
    assert_eq!(
        text, gold.data,
        "the guide's contract differs from the golden model"
    );
    assert_eq!(out, gold.data, "the hardware differs from the golden model");
}

/// `split(v)` of the guide: `(sign·floor(v / modulus), v mod modulus)`.
fn split(v: i64, modulus: i64, sign: i64) -> (i64, i64) {
    (sign * v.div_euclid(modulus), v.rem_euclid(modulus))
}

/// One walk as the guide's "How the walks of a convolution are built" states it, encoded into
/// `cfg` with the guide's word layout.
#[allow(clippy::too_many_arguments)]
fn walk(
    g: &Guide,
    cfg: &mut [u32; 35],
    walker: &str,
    counts: [i64; 3],
    inc: [[i64; 3]; 4],
    start: [i64; 3],
    (modulus, sign, wy): (i64, i64, i64),
) {
    let mut put = |name: &str, level: Option<usize>, v: i64| {
        let (i, bits) = g.word(walker, name, level);
        cfg[i] |= bits.put(v as u32);
    };
    for (name, c) in ["count0", "count1", "count2"].iter().zip(counts) {
        put(name, None, c);
    }
    if walker == "lane" {
        put("modulus", None, modulus);
    }
    for l in 0..4 {
        let mut d = inc[l];
        for j in 0..l {
            for (dv, iv) in d.iter_mut().zip(inc[j]) {
                *dv -= (counts[j] - 1) * iv;
            }
        }
        let ((qy, ry), (qx, rx)) = (split(d[0], modulus, sign), split(d[1], modulus, sign));
        for (name, v) in [("dq_y", qy), ("dq_x", qx), ("dr_y", ry), ("dr_x", rx)] {
            put(name, Some(l), v);
        }
        put("da", Some(l), d[2] + wy * qy + qx);
    }
    for (name, v) in [
        ("cq_y", sign),
        ("cq_x", sign),
        ("ca_y", sign * wy),
        ("ca_x", sign),
    ] {
        put(name, None, v);
    }
    let ((qy, ry), (qx, rx)) = (
        split(start[0], modulus, sign),
        split(start[1], modulus, sign),
    );
    for (name, v) in [
        ("start_qy", qy),
        ("start_qx", qx),
        ("start_ry", ry),
        ("start_rx", rx),
    ] {
        put(name, None, v);
    }
    put("start_addr", None, start[2] + wy * qy + qx);
}

#[test]
fn conv_forward_driven_from_the_guide_matches_the_golden_model() {
    let Some(mut tb) = bench() else { return };
    let n = tb.n;
    let geo = Conv2dGeom {
        batch: 2,
        shape: ConvGeom {
            in_ch: 2,
            in_h: 5,
            in_w: 5,
            out_ch: 3,
            kernel: 3,
            stride: 2,
            pad: 1,
        },
    };
    let (h, w, kk, s, p) = (5i64, 5i64, 3i64, 2i64, 1i64);
    let (oh, ow) = (geo.out_h(), geo.out_w());
    let (m, k) = (geo.batch * oh * ow, geo.in_ch * 9);
    let mut rng = Rng(0xC0DE);
    let x = words(&mut rng, geo.batch * geo.in_ch * 25);
    let wt = words(&mut rng, geo.out_ch * k);
    let contract = Contract::new(&tb.g);
    let (shift, seed) = (20, 99u32);
    // Feature map: rows of R words (R = largest power of two <= n), image b in slot b.
    let config = tb.read("CONFIG");
    let fm_depth = 1usize << (tb.g.field("CONFIG", "fm_code").get(config) + 8);
    let row = 1usize << n.ilog2();
    let slot = (geo.in_ch * 25).next_multiple_of(row);
    for b in 0..geo.batch {
        let mut map = x[b * geo.in_ch * 25..][..geo.in_ch * 25].to_vec();
        map.resize(slot, 0);
        tb.bus.write_fm((b * slot) as u32, &map).unwrap();
    }
    let slots = (fm_depth / slot) as i64;
    let mut cfg = [0u32; 35];
    let lane_inc = [[0, s, 0], [s, 0, 0], [0, 0, slot as i64], [0; 3]];
    walk(
        &tb.g,
        &mut cfg,
        "lane",
        [ow as i64, oh as i64, slots],
        lane_inc,
        [-p, -p, 0],
        (1, 1, w),
    );
    let k_inc = [[0, 1, 0], [1, 0, 0], [0, 0, h * w], [0; 3]];
    walk(
        &tb.g,
        &mut cfg,
        "k",
        [kk, kk, 65535],
        k_inc,
        [0; 3],
        (1, 1, w),
    );
    let (li, ly) = tb.g.word("limits", "limit_y", None);
    let (_, lx) = tb.g.word("limits", "limit_x", None);
    cfg[li] = ly.put(h as u32) | lx.put(w as u32);
    for word in cfg {
        tb.write("GA_CFG", word);
    }
    // B = Wᵀ, written once into B bank 0.
    for r in 0..k {
        let brow: Vec<i16> = (0..n)
            .map(|c| if c < geo.out_ch { wt[c * k + r] } else { 0 })
            .collect();
        tb.rows(0, r, None, Some(&brow));
    }
    tb.write("SHIFT", shift);
    tb.write("ROUNDING", 2);
    tb.write("K_LEN", k as u32);
    let mut out = vec![0i16; m * geo.out_ch];
    for t in 0..m.div_ceil(n) {
        let bank = (t % 2) as u32;
        let lanes = u32::from(t > 0); // load, then the next n lanes
        let gcmd = tb.word(
            "GA_CMD",
            &[
                ("klen", k as u32),
                ("bank", bank),
                ("lanes", lanes),
                ("k_next", 0),
            ],
        );
        tb.write("GA_CMD", gcmd);
        assert!(!tb.status("error"), "GA_CMD 0x{gcmd:x} was refused");
        let edges = tb.wait("the gather", |b| !b.status("gather_a"));
        assert_eq!(
            edges as usize,
            n + k + 2,
            "tile {t}: fill latency stated by the guide"
        );
        tb.write("SEED", contract.tile_seed(seed, (t * n) as u32, 0));
        tb.command(bank, 0, bank, true, true);
        for (r, row) in tb
            .tile(t as u32 + 1, bank as u8, n.min(m - t * n))
            .iter()
            .enumerate()
        {
            out[(t * n + r) * geo.out_ch..][..geo.out_ch].copy_from_slice(&row[..geo.out_ch]);
        }
    }
    // The guide's lowering: im2col(x)[(b, oy, ox)][(ci, ky, kx)], times Wᵀ.
    let mut cols = vec![0i16; m * k];
    for (i, c) in cols.iter_mut().enumerate() {
        let (pix, col) = (i / k, i % k);
        let (b, oy, ox) = (pix / (oh * ow), pix % (oh * ow) / ow, pix % ow);
        let (ci, ky, kx) = (col / 9, col % 9 / 3, col % 3);
        let (y, xx) = ((oy * 2 + ky) as i64 - p, (ox * 2 + kx) as i64 - p);
        if (0..h).contains(&y) && (0..w).contains(&xx) {
            *c = x[b * 50 + ci * 25 + (y * w + xx) as usize];
        }
    }
    let wt_t: Vec<i16> = (0..k * geo.out_ch)
        .map(|i| wt[(i % geo.out_ch) * k + i / geo.out_ch])
        .collect();
    let text = contract.matmul(&cols, &wt_t, (m, k, geo.out_ch), shift, 2, seed, n);
    let qx = QMatrix::from_vec(geo.batch, geo.in_ch * 25, 14, x).unwrap();
    let qw = QMatrix::from_vec(geo.out_ch, k, 14, wt).unwrap();
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed,
    };
    let y = golden::conv2d_forward(&qx, &qw, &geo, &spec, n).unwrap();
    let gold: Vec<i16> = (0..m * geo.out_ch)
        .map(|i| {
            let (pix, co) = (i / geo.out_ch, i % geo.out_ch);
            let (b, pp) = (pix / (oh * ow), pix % (oh * ow));
            y.data[b * geo.out_ch * oh * ow + co * oh * ow + pp]
        })
        .collect();
    assert_eq!(
        text, gold,
        "the guide's lowering and contract differ from the golden model"
    );
    assert_eq!(out, gold, "the hardware differs from the golden model");
    // The guide: reset clears the registers, not the gather configuration words, the feature
    // map or the B bank. So tile 0 runs again after a reset with only the registers rewritten.
    tb.bus.reset();
    assert_eq!(
        (tb.read("STATUS"), tb.read("SHIFT"), tb.read("DONE_COUNT")),
        (0, 0, 0)
    );
    tb.write("SHIFT", shift);
    tb.write("ROUNDING", 2);
    tb.write("K_LEN", k as u32);
    tb.write("SEED", contract.tile_seed(seed, 0, 0));
    let gcmd = tb.word(
        "GA_CMD",
        &[("klen", k as u32), ("bank", 0), ("lanes", 0), ("k_next", 0)],
    );
    tb.write("GA_CMD", gcmd);
    tb.wait("the gather", |b| !b.status("gather_a"));
    tb.command(0, 0, 0, true, true);
    let again: Vec<i16> = tb
        .tile(1, 0, n)
        .iter()
        .flat_map(|r| r[..geo.out_ch].to_vec())
        .collect();
    assert_eq!(again, gold[..n * geo.out_ch], "tile 0 after a reset");
}

#[test]
fn out_of_range_writes_behave_as_the_guide_says() {
    let Some(mut tb) = bench() else { return };
    tb.write("K_LEN", 4);
    tb.write("SHIFT", 64);
    assert_eq!(tb.read("SHIFT"), 0, "only the field's 6 bits are stored");
    assert!(tb.status("error"));
    tb.write("ERROR_CLEAR", 1);
    let w = tb.word("COMMAND", &[("clear", 1), ("emit", 1)]);
    tb.write("COMMAND", w);
    assert!(
        tb.status("error") && !tb.status("busy"),
        "the command is dropped"
    );
    tb.write("SHIFT", 3);
    tb.write("ERROR_CLEAR", 1);
    tb.write("COMMAND", w);
    assert!(!tb.status("error") && tb.status("busy"));
    let gcmd = tb.word("GA_CMD", &[("klen", 0)]);
    tb.write("GA_CMD", gcmd);
    assert!(
        tb.status("error") && !tb.status("gather_a"),
        "klen 0 is refused"
    );
    tb.bus.idle(1).unwrap();
}

#[test]
fn conv_weight_gradient_driven_from_the_guide_matches_the_golden_model() {
    let Some(mut tb) = bench() else { return };
    let n = tb.n;
    let geo = Conv2dGeom {
        batch: 2,
        shape: ConvGeom {
            in_ch: 2,
            in_h: 5,
            in_w: 5,
            out_ch: 3,
            kernel: 3,
            stride: 2,
            pad: 1,
        },
    };
    let (h, w, kk, s, p) = (5i64, 5i64, 3i64, 2i64, 1i64);
    let (oh, ow) = (geo.out_h(), geo.out_w());
    let (m, k, cols) = (geo.out_ch, geo.batch * oh * ow, geo.in_ch * 9);
    let (xw, dw) = (geo.in_ch * 25, geo.out_ch * oh * ow);
    let mut rng = Rng(0xD1CE);
    let x = words(&mut rng, geo.batch * xw);
    let dy = words(&mut rng, geo.batch * dw);
    let contract = Contract::new(&tb.g);
    let (shift, seed) = (18, 7u32);
    // Slot b: x[b] at 0, dy[b] at the next row boundary after it.
    let config = tb.read("CONFIG");
    let fm_depth = 1usize << (tb.g.field("CONFIG", "fm_code").get(config) + 8);
    let row = 1usize << n.ilog2();
    let dy_at = xw.next_multiple_of(row);
    let slot = dy_at + dw.next_multiple_of(row);
    for b in 0..geo.batch {
        let mut map = x[b * xw..][..xw].to_vec();
        map.resize(dy_at, 0);
        map.extend_from_slice(&dy[b * dw..][..dw]);
        map.resize(slot, 0);
        tb.bus.write_fm((b * slot) as u32, &map).unwrap();
    }
    let slots = (fm_depth / slot) as i64;
    let (plane, sl) = ((oh * ow) as i64, slot as i64);
    let limits = |tb: &Bench, cfg: &mut [u32; 35], y: i64, x: i64| {
        let (li, ly) = tb.g.word("limits", "limit_y", None);
        let (_, lx) = tb.g.word("limits", "limit_x", None);
        cfg[li] = ly.put(y as u32) | lx.put(x as u32);
    };
    // Engine A: lanes = output channels, K = (b, oy, ox) over dy.
    let mut a_cfg = [0u32; 35];
    walk(
        &tb.g,
        &mut a_cfg,
        "lane",
        [65535; 3],
        [[0, 0, plane]; 4],
        [0, 0, dy_at as i64],
        (1, 1, 0),
    );
    let k_inc = [[0, 1, 0], [1, 0, 0], [0, 0, sl], [0; 3]];
    walk(
        &tb.g,
        &mut a_cfg,
        "k",
        [ow as i64, oh as i64, slots],
        k_inc,
        [0; 3],
        (1, 1, ow as i64),
    );
    limits(&tb, &mut a_cfg, oh as i64, ow as i64);
    // Engine B: lanes = (ci, ky, kx) (the forward K walk), K = (b, oy, ox) (the forward lanes).
    let mut b_cfg = [0u32; 35];
    let kern = [[0, 1, 0], [1, 0, 0], [0, 0, h * w], [0; 3]];
    walk(
        &tb.g,
        &mut b_cfg,
        "lane",
        [kk, kk, 65535],
        kern,
        [0; 3],
        (1, 1, w),
    );
    let pix = [[0, s, 0], [s, 0, 0], [0, 0, sl], [0; 3]];
    walk(
        &tb.g,
        &mut b_cfg,
        "k",
        [ow as i64, oh as i64, slots],
        pix,
        [-p, -p, 0],
        (1, 1, w),
    );
    limits(&tb, &mut b_cfg, h, w);
    for (reg, cfg) in [("GA_CFG", a_cfg), ("GB_CFG", b_cfg)] {
        for word in cfg {
            tb.write(reg, word);
        }
    }
    tb.write("SHIFT", shift);
    tb.write("ROUNDING", 2);
    tb.write("K_LEN", k as u32);
    let mut out = vec![0i16; m * cols];
    for (t, j0) in (0..cols).step_by(n).enumerate() {
        let bank = (t % 2) as u32;
        // One row block: A's lanes load once, then stay; B's lanes load, then move on.
        let a_lanes = if t == 0 { 0 } else { 2 };
        let b_lanes = u32::from(t > 0);
        for (reg, lanes) in [("GA_CMD", a_lanes), ("GB_CMD", b_lanes)] {
            let gcmd = tb.word(
                "GA_CMD",
                &[("klen", k as u32), ("bank", bank), ("lanes", lanes)],
            );
            tb.write(reg, gcmd);
        }
        assert!(!tb.status("error"), "a gather command was refused");
        let edges = tb.wait("both gathers", |b| {
            !b.status("gather_a") && !b.status("gather_b")
        });
        // The two fills run side by side; B's (written one edge later) takes n + k + 2 edges.
        assert_eq!(
            edges as usize,
            n + k + 2,
            "tile {t}: fill latency stated by the guide"
        );
        tb.write("SEED", contract.tile_seed(seed, 0, j0 as u32));
        tb.command(bank, bank, bank, true, true);
        for (r, crow) in tb.tile(t as u32 + 1, bank as u8, m).iter().enumerate() {
            for (c, &v) in crow.iter().enumerate().take((cols - j0).min(n)) {
                out[r * cols + j0 + c] = v;
            }
        }
    }
    let qx = QMatrix::from_vec(geo.batch, xw, 12, x).unwrap();
    let qdy = QMatrix::from_vec(geo.batch, dw, 13, dy).unwrap();
    let spec = OutputSpec {
        frac: 7,
        rounding: Rounding::Stochastic,
        seed,
    };
    let gold = golden::conv2d_backward_weights(&qx, &qdy, &geo, &spec, n).unwrap();
    assert_eq!(out, gold.data, "the hardware differs from the golden model");
}
