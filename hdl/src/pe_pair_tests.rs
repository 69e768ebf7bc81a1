//! The pair's hand-written Verilog against its model (two PEs' separate multiplies) under
//! Icarus, and its packed arithmetic over every triple of 8-bit words.

use super::*;
use crate::differential::{compare, Outcome, Rng};
use systole_core::dsp_pack::MAX_PACK_WORD_BITS;

const W: u32 = MAX_PACK_WORD_BITS;

const INPUTS: [&str; 12] = [
    "reset",
    "u_a_in",
    "l_a_in",
    "b_in",
    "u_valid_in",
    "u_first_in",
    "u_last_in",
    "l_valid_in",
    "l_first_in",
    "l_last_in",
    "res_in",
    "shift_en",
];

/// A `W`-bit word sign-extended into the 16-bit port: an extreme (most often the most
/// negative, whose square is the product that needs all `2W` bits) or a random one.
fn word(rng: &mut Rng) -> u64 {
    let v = if rng.chance(50) {
        rng.pick(&[0x80, 0x80, 0x7F, 0, 0xFF, 1, 0x81])
    } else {
        rng.next() & 0xFF
    };
    (((v as u8) as i8) as i16 as u16) as u64
}

/// Stimulus at `W = 8`: words in range, `res_in` a sign-extended accumulator (`2W + 16` bits),
/// accumulations restarted often enough to stay inside the contract's K limit.
fn stimulus(cycles: usize, seed: u64) -> Vec<Vec<u64>> {
    let mut rng = Rng::new(seed);
    (0..cycles)
        .map(|c| {
            let res_in = ((rng.next() as u32) as i32 as i64 as u64) & ((1 << 48) - 1);
            vec![
                (c < 2 || rng.chance(3)) as u64,
                word(&mut rng),
                word(&mut rng),
                word(&mut rng),
                rng.chance(80) as u64,
                rng.chance(5) as u64,
                rng.chance(10) as u64,
                rng.chance(80) as u64,
                rng.chance(5) as u64,
                rng.chance(10) as u64,
                res_in,
                rng.chance(30) as u64,
            ]
        })
        .collect()
}

fn run(cycles: usize, mutation: Option<(&str, &str)>) -> Outcome {
    let stim = stimulus(cycles, 0x5EED_0018);
    compare(PePair::at(W), "pe_pair", &INPUTS, &stim, &[], mutation)
}

#[test]
fn packed_pair_verilog_equals_two_separate_multiplies() {
    let o = run(20_000, None);
    assert_eq!(
        (o.cycles, o.mismatches, o.unknown),
        (20_000, 0, 0),
        "{}",
        o.report
    );
    for (output, least) in [("captured", 800), ("res", 3000), ("b_out", 5000)] {
        assert!(o.covered(output) >= least, "{output}: {:?}", o.coverage);
    }
}

/// The alignment (the upper's A word of the last clock, not the current one) and the shift
/// `k = 2W` (one less loses the product of the two most negative words) are each needed.
#[test]
fn misaligned_or_narrow_packing_is_caught() {
    // The body as the module holds it, indented.
    let indent = |t: String| {
        t.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let body = indent(pe_pair_verilog(W));
    let narrow = indent(pair_body(W, pack_shift(W) - 1));
    assert_ne!(body, narrow);
    let mutations = [
        (
            "alignment register removed",
            ("{(K-W){ua_q[W-1]}}, ua_q}", "{(K-W){ua[W-1]}}, ua}"),
        ),
        ("k one too small", (body.as_str(), narrow.as_str())),
        (
            "no borrow correction",
            ("p[K+2*W-1:K] + {{(K-1){1'b0}}, p[K-1]}", "p[K+2*W-1:K]"),
        ),
    ];
    for (name, m) in mutations {
        let o = run(3_000, Some(m));
        assert!(o.mismatches > 0, "{name} not caught:\n{}", o.report);
    }
}

/// The packed arithmetic as the pair's text writes it, under Icarus, for all 2^24 triples of
/// 8-bit words (the shared B word, the upper's and the lower's A words).
#[test]
#[ignore = "heavy: 2^24 evaluations under Icarus"]
fn packed_arithmetic_is_exact_for_every_triple_of_8_bit_words() {
    let body = pe_pair_verilog(W);
    let start = body.find("wire signed [W:0] factor_high").unwrap();
    let end = body[start..].find("initial begin").unwrap() + start;
    let params: String = body
        .lines()
        .filter(|l| l.starts_with("localparam "))
        .map(|l| format!("{l}\n"))
        .collect();
    let tb = format!(
        "module exhaustive;
reg signed [7:0] ua_q;
reg signed [7:0] la;
reg signed [7:0] ub_q;
{params}{}
integer s, x, y, wrong;
initial begin
    wrong = 0;
    for (s = -128; s < 128; s = s + 1)
        for (x = -128; x < 128; x = x + 1)
            for (y = -128; y < 128; y = y + 1) begin
                ub_q = s; ua_q = x; la = y;
                #1;
                if (lo !== s * x || hi !== s * y) wrong = wrong + 1;
            end
    $display(\"WRONG %0d\", wrong);
    $finish;
end
endmodule
",
        &body[start..end]
    );
    let dir = std::env::temp_dir().join(format!("systole-pair-{}", std::process::id()));
    let out = crate::icarus::run(&dir, "exhaustive", &[("tb.v", &tb)], &[], &[])
        .unwrap()
        .stdout;
    assert!(out.contains("WRONG 0\n"), "{out}");
}

/// `pe_pair.v`'s ports are the ones rust-hdl declares for `PePair`.
#[test]
fn the_file_declares_the_ports_of_the_block() {
    let mut pair = PePair::at(W);
    pair.connect_all();
    let model = generate_verilog_unchecked(&pair);
    crate::vfile::assert_same_ports(super::PE_PAIR_V, &model);
}
