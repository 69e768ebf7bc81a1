//! Seeded stimulus for each hand-written block and the differential tests over it.
//!
//! Inputs are random with a bias towards edge values (the extreme words and accumulators, the
//! nearest-even ties of each shift, the seed whose lane seed is zero, every rounding code and
//! shift code, register writes to the engine's own and to other addresses, commands refused
//! and accepted, resets at any time). The `*_long` variants run ten times the cycles (`./x test
//! --all`); the `*_mutation_is_caught` tests change one character of each hand-written text
//! and require the comparison to see it.

use super::{compare, Outcome, Rng};
use crate::converter::ColumnConverter;
use crate::gather::GatherEngine;
use crate::pe::Pe;
use systole_core::gather::{ConvGeom, WORDS};
use systole_core::numeric::LANE_SEED_MUL;
use systole_core::regmap::{GA_CFG, GA_CMD};

const MASK48: u64 = (1 << 48) - 1;

/// A 16-bit word: an edge value or a random one.
fn word16(rng: &mut Rng) -> u64 {
    if rng.chance(40) {
        rng.pick(&[0x8000, 0x7FFF, 0, 0xFFFF, 1, 0x8001])
    } else {
        rng.next() & 0xFFFF
    }
}

const PE_INPUTS: [&str; 8] = [
    "reset", "a_in", "b_in", "valid_in", "first_in", "last_in", "res_in", "shift_en",
];

/// PE stimulus. Long stretches without `first_in` let the accumulator grow (with `long`, runs
/// of the largest product long enough to wrap the 48-bit accumulator).
fn pe_stimulus(cycles: usize, seed: u64, long: bool) -> Vec<Vec<u64>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(cycles);
    let mut max_run = 0;
    for c in 0..cycles {
        if long && max_run == 0 && rng.chance(1) {
            max_run = 140_000;
        }
        let (a, b, first) = if max_run > 0 {
            max_run -= 1;
            (0x8000, 0x8000, false)
        } else {
            (word16(&mut rng), word16(&mut rng), rng.chance(5))
        };
        let res_in = if rng.chance(50) {
            rng.pick(&[0, 1 << 47, MASK48 >> 1, MASK48])
        } else {
            rng.next()
        };
        out.push(vec![
            (c < 2 || rng.chance(3)) as u64,
            a,
            b,
            (max_run > 0 || rng.chance(80)) as u64,
            first as u64,
            (max_run == 0 && rng.chance(10)) as u64,
            res_in,
            rng.chance(30) as u64,
        ]);
    }
    out
}

fn pe_run(cycles: usize, long: bool, mutation: Option<(&str, &str)>) -> Outcome {
    let stim = pe_stimulus(cycles, 0x5EED_0001, long);
    compare(Pe::new(), "pe", &PE_INPUTS, &stim, &[], mutation)
}

const CONVERTER_INPUTS: [&str; 7] = [
    "reset", "start", "acc", "seed_in", "bank_in", "shift", "rounding",
];

/// Converter stimulus for `column`: drains of `rows` rows (and stray `start`s), a new shift
/// (any 6-bit code, mostly the contract's `0..=MAX_SHIFT`) and rounding code (all four) per drain.
fn converter_stimulus(column: usize, rows: usize, cycles: usize, seed: u64) -> Vec<Vec<u64>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(cycles);
    let (mut shift, mut rounding, mut left) = (0u64, 0u64, 0usize);
    let zero_lane_seed = LANE_SEED_MUL.wrapping_mul(column as u32 + 1) as u64;
    for c in 0..cycles {
        let start = if left == 0 {
            let go = rng.chance(60);
            if go {
                left = rows;
                shift = if rng.chance(90) {
                    rng.below(33)
                } else {
                    rng.below(64)
                };
                rounding = rng.below(4);
            }
            go
        } else {
            rng.chance(2)
        };
        left = left.saturating_sub(1);
        let acc = match rng.below(5) {
            0 => rng.pick(&[1 << 47, (1 << 47) + 1, MASK48 >> 1, 0, MASK48, 1 << 30]),
            1 if shift > 0 => {
                // A nearest-even tie plus a small multiple of the step.
                let k = rng.below(64) as i64 - 32;
                ((k << shift) + (1 << (shift - 1))) as u64
            }
            2 => rng.next() >> (16 + rng.below(48)),
            _ => rng.next(),
        };
        let seed_in = if rng.chance(3) {
            zero_lane_seed
        } else {
            rng.next()
        };
        out.push(vec![
            (c < 2 || rng.chance(2)) as u64,
            start as u64,
            acc & MASK48,
            seed_in,
            rng.chance(50) as u64,
            shift,
            rounding,
        ]);
    }
    out
}

fn converter_run(
    column: usize,
    rows: usize,
    cycles: usize,
    mutation: Option<(&str, &str)>,
) -> Outcome {
    let stim = converter_stimulus(column, rows, cycles, 0x5EED_0002 + column as u64);
    let block = ColumnConverter::new(column, rows).unwrap();
    let name = format!("converter{column}of{rows}");
    // `wr_data` holds outside drains in the hand-written text (see `converter`).
    compare(
        block,
        &name,
        &CONVERTER_INPUTS,
        &stim,
        &[("wr_data", "m_wr_en")],
        mutation,
    )
}

/// A configuration word: mostly two small (or small negative) halves, so walks wrap their
/// levels and remainders and reads fall inside and outside the bounds; sometimes any word.
fn cfg_word(rng: &mut Rng) -> u64 {
    let half = |rng: &mut Rng| {
        if rng.chance(80) {
            rng.below(6)
        } else {
            0x1_0000 - 1 - rng.below(3)
        }
    };
    match rng.below(10) {
        0 | 1 => rng.next() & 0xFFFF_FFFF,
        2 => rng.pick(&[0, 0xFFFF_FFFF, 0xFFFF, 0xFFFF_0000]),
        _ => (half(rng) << 16) | half(rng),
    }
}

/// The configuration of one of the conv unit's real walks (forward, input gradient with its
/// stride remainders, weight gradient) for a small random convolution, two image slots.
fn conv_config(rng: &mut Rng) -> [u32; WORDS] {
    loop {
        let g = ConvGeom {
            in_ch: 1 + rng.below(3) as usize,
            in_h: 3 + rng.below(6) as usize,
            in_w: 3 + rng.below(6) as usize,
            out_ch: 1 + rng.below(3) as usize,
            kernel: 1 + rng.below(3) as usize,
            stride: 1 + rng.below(3) as usize,
            pad: rng.below(2) as usize,
        };
        if g.check().is_err() {
            continue;
        }
        let cfg = match rng.below(4) {
            0 => g.forward_a(2, g.in_words()),
            1 => g.backward_input_a(2, g.out_words()),
            2 => g.backward_weights_a(2, g.out_words(), 0),
            _ => g.backward_weights_b(2, g.in_words()),
        };
        return cfg.words();
    }
}

/// Gather engine stimulus: the feature map filled, then episodes of a configuration (35
/// words: a real conv walk or random ones; or keep the last), a command (any klen, bank, lane mode and K mode) and random
/// cycles with bank-busy changes, stray register and feature-map writes and rare resets.
fn gather_stimulus(row_words: usize, fm_words: usize, depth: u64, cycles: usize) -> Vec<Vec<u64>> {
    let mut rng = Rng::new(0x5EED_0003 + row_words as u64);
    let mut out = Vec::with_capacity(cycles);
    let mut busy = 0u64;
    let mut line = |rng: &mut Rng, reset: bool, reg: Option<(u64, u64)>, fm: Option<u64>| {
        let (addr, data) = reg.unwrap_or((rng.below(256), rng.next() & 0xFFFF_FFFF));
        let mut v = vec![
            reset as u64,
            addr,
            data,
            reg.is_some() as u64,
            fm.is_some() as u64,
            fm.unwrap_or_else(|| rng.next() & 0xFFFF),
        ];
        v.extend((0..row_words).map(|_| word16(rng)));
        if rng.chance(15) {
            busy = rng.below(4);
        }
        v.push(busy);
        v
    };
    for r in 0..fm_words / row_words {
        out.push(line(&mut rng, r == 0, None, Some(r as u64)));
    }
    while out.len() < cycles {
        if rng.chance(70) {
            let words: Vec<u64> = if rng.chance(50) {
                conv_config(&mut rng).iter().map(|&w| w as u64).collect()
            } else {
                (0..WORDS).map(|_| cfg_word(&mut rng)).collect()
            };
            for w in words {
                out.push(line(&mut rng, false, Some((GA_CFG as u64, w)), None));
            }
        }
        let any = rng.next() & 0x1_FFFF;
        let klen = match rng.below(10) {
            0 => rng.pick(&[0, depth + 1, any]),
            _ => 1 + rng.below(depth),
        };
        let cmd = klen | (rng.below(16) << 17) | ((rng.next() & 0x7FF) << 21);
        out.push(line(&mut rng, false, Some((GA_CMD as u64, cmd)), None));
        for _ in 0..rng.below(depth + 12) {
            let reg = match rng.below(100) {
                0..=2 => Some((GA_CMD as u64, rng.next() & 0xFF_FFFF)),
                3..=4 => Some((GA_CFG as u64, cfg_word(&mut rng))),
                5..=6 => Some((rng.below(256), rng.next() & 0xFFFF_FFFF)),
                _ => None,
            };
            let fm = rng
                .chance(3)
                .then(|| rng.below((fm_words / row_words) as u64));
            let reset = rng.chance(1);
            out.push(line(&mut rng, reset, reg, fm));
        }
    }
    out.truncate(cycles);
    out
}

/// The gather engine of `n` lanes, `depth`-row banks and a map of `fm_depth` words of `W` =
/// `word_bits` bits, its hand-written Verilog against its model for `cycles` cycles (the
/// stimulus writes any 16-bit word into the map, so the bits above `W` are dropped by both).
fn gather_run(
    (n, depth, fm_depth, word_bits): (usize, usize, usize, u32),
    cycles: usize,
    mutation: Option<(&str, &str)>,
) -> Outcome {
    let row_words = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let stim = gather_stimulus(row_words, fm_depth.max(512), depth as u64, cycles);
    let mut inputs = vec![
        "reset",
        "reg_addr",
        "reg_wdata",
        "reg_we",
        "fm_we",
        "fm_row",
    ];
    let fm_data: Vec<String> = (0..row_words).map(|i| format!("fm_data${i}")).collect();
    inputs.extend(fm_data.iter().map(String::as_str));
    inputs.push("bank_busy");
    let block = GatherEngine::new(n, GA_CFG, GA_CMD, depth, fm_depth, word_bits).unwrap();
    // The lanes' words matter only with `wr_en` (see `gather::verilog`); the absent engine's
    // whole write port does.
    let only_when: &[(&str, &str)] = if fm_depth == 0 {
        &[("wr_", "m_wr_en")]
    } else {
        &[("wr_data", "m_wr_en")]
    };
    let name = format!("gather{n}x{fm_depth}w{word_bits}");
    compare(block, &name, &inputs, &stim, only_when, mutation)
}

/// Asserts a clean run of `cycles` cycles in which each output of `cover` was high (or changed)
/// at least as often as given: the stimulus reaches what the comparison is about.
fn assert_equal(name: &str, o: &Outcome, cycles: usize, cover: &[(&str, usize)]) {
    assert_eq!(o.cycles, cycles, "{name}: run ended early:\n{}", o.report);
    assert_eq!(
        (o.mismatches, o.unknown),
        (0, 0),
        "{name}: hand-written Verilog differs from the rust-hdl model:\n{}",
        o.report
    );
    for &(output, least) in cover {
        assert!(
            o.covered(output) >= least,
            "{name}: the stimulus moved {output} only {} times (want {least}): {:?}",
            o.covered(output),
            o.coverage
        );
    }
}

#[test]
fn pe_verilog_equals_its_model() {
    let cover = [
        ("captured", 800),
        ("first_out", 500),
        ("res", 3000),
        ("valid_out", 10_000),
    ];
    assert_equal("pe", &pe_run(20_000, false, None), 20_000, &cover);
}

#[test]
fn converter_verilog_equals_its_model() {
    for (column, rows) in [(3, 5), (0, 2)] {
        let o = converter_run(column, rows, 12_000, None);
        let cover = [("done", 1000), ("wr_data", 3000), ("seed_out", 1000)];
        assert_equal("converter", &o, 12_000, &cover);
    }
}

#[test]
fn gather_verilog_equals_its_model() {
    let enabled = [
        ("wr_en", 300),
        ("cmd_error", 50),
        ("wr_data$0", 25),
        ("wr_data$2", 25),
    ];
    for (n, depth, fm_depth, cycles) in [(3, 16, 512, 12_000), (4, 8, 1024, 8_000)] {
        let o = gather_run((n, depth, fm_depth, 16), cycles, None);
        assert_equal("gather", &o, cycles, &enabled);
    }
    // Feature-map words of `W` bits: 4 lanes at 12 (an entry of two 12-bit words), 3 at 8
    // (an entry of one word).
    for (n, w) in [(4, 12), (3, 8)] {
        let o = gather_run((n, 8, 512, w), 6_000, None);
        assert_equal("gather", &o, 6_000, &enabled);
    }
    let o = gather_run((4, 16, 0, 16), 2_000, None);
    assert_equal("absent gather", &o, 2_000, &[("cmd_error", 20)]);
}

#[test]
#[ignore = "heavy: ten times the cycles, and a PE accumulator wrapping at 48 bits"]
fn hand_written_verilog_equals_its_model_long() {
    assert_equal("pe", &pe_run(400_000, true, None), 400_000, &[]);
    for (column, rows) in [(7, 8), (15, 16)] {
        let o = converter_run(column, rows, 120_000, None);
        assert_equal("converter", &o, 120_000, &[]);
    }
    for (n, depth, fm_depth, w) in [(3, 64, 512, 16), (8, 32, 2048, 16), (8, 32, 1024, 12)] {
        let o = gather_run((n, depth, fm_depth, w), 100_000, None);
        assert_equal("gather", &o, 100_000, &[]);
    }
}

/// One-character changes of each hand-written text; each must be seen.
#[test]
fn mutations_of_the_hand_written_verilog_are_caught() {
    let caught = |name: &str, o: Outcome| {
        assert!(
            o.mismatches > 0,
            "{name}: mutation not caught:\n{}",
            o.report
        );
    };
    caught(
        "pe",
        pe_run(
            2_000,
            false,
            Some(("valid_in & last_in & ~reset", "valid_in | last_in & ~reset")),
        ),
    );
    // The converter's narrow arithmetic: the stochastic mask, the sticky bits, the guard
    // bit, the range test and the quotient at shift 63.
    for (from, to) in [
        ("r & below[31:0]", "r & below[32:1]"),
        ("a & below[ACC:1]", "a & below[ACC-1:0]"),
        ("w[0] & (sticky | q[0])", "w[1] & (sticky | q[0])"),
        ("& ~below[SUM-W-1:0]", "& ~{below[SUM-W-2:0], 1'b1}"),
        ("(sh == 6'h3f)", "(sh == 6'h3e)"),
        ("(sh == 6'h3f) ?", "(sh != sh) ?"),
        // The second stage must use the shift and rounding its row was taken with: the next
        // drain's (its `start` cycle changes them) would convert the last row wrongly.
        (
            "finish(s_q, sticky_q, sh_q, mode_q)",
            "finish(s_q, sticky_q, shift, mode_q)",
        ),
        (
            "finish(s_q, sticky_q, sh_q, mode_q)",
            "finish(s_q, sticky_q, sh_q, rounding)",
        ),
    ] {
        caught("converter", converter_run(3, 5, 2_000, Some((from, to))));
    }
    caught(
        "gather",
        gather_run(
            (3, 16, 512, 16),
            4_000,
            Some((
                "x = l_qx[16*LA +: 16] + kw_qx",
                "x = l_qx[16*LA +: 16] - kw_qx",
            )),
        ),
    );
    // The feature map's layout: two lanes per copy, half a row per port, the word picked
    // after the registered entry, and the reads paused while a row is written.
    for (n, from, to) in [
        (4, "mem[e_b] = half_hi;", "mem[e_b] = half_lo;"),
        (4, "q_a[W*sel_a +: W]", "q_a[W*sel_b +: W]"),
        (
            3,
            "if (~fm_we) q_a <= mem[e_a];",
            "if (~fm_we) q_a <= mem[e_b];",
        ),
        (3, "bank_busy[bank]) | fm_we;", "bank_busy[bank]) & fm_we;"),
        // The walkers: level 1's coordinate step read from level 0's word.
        (
            4,
            "dq = cfg[BASE + 32*STEP_Q1_WORD +: 32];",
            "dq = cfg[BASE + 32*STEP_Q0_WORD +: 32];",
        ),
    ] {
        caught(
            "gather",
            gather_run((n, 16, 512, 16), 4_000, Some((from, to))),
        );
    }
    // At `W` = 12: a map word one bit narrow, a lane's word zero- instead of sign-extended,
    // and the word picked at 16-bit offsets in a 12-bit entry.
    for (from, to) in [
        (
            "fm_data[16*(HALF+i) +: W];",
            "{1'b0, fm_data[16*(HALF+i) +: W-1]};",
        ),
        (
            "{{(16-W){word_a[W-1]}}, word_a}",
            "{{(16-W){1'b0}}, word_a}",
        ),
        ("q_a[W*sel_a +: W]", "q_a[16*sel_a +: W]"),
    ] {
        caught(
            "gather",
            gather_run((4, 16, 512, 12), 4_000, Some((from, to))),
        );
    }
}
