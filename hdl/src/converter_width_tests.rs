//! The converter's conversion function at `W` = 8, 12 and 16 under Icarus against
//! `systole_core::numeric::convert`: every rounding mode, every contract shift, accumulators
//! at and near the extremes of `acc_bits(W)` and of the `W`-bit range.

use super::{converter_verilog, CONVERTER_V};
use crate::icarus;
use std::fmt::Write as _;
use systole_core::numeric::{acc_bits, acc_max, acc_min, convert, word_max, word_min, Rounding};

/// The conversion function of `converter_verilog(w)` (after `body_edit`) in a module of its own:
/// `y` = the two stages' functions composed (`finish` of `first`), with the saturation constants the converter module declares.
fn function_module(w: u32, body_edit: &dyn Fn(String) -> String) -> String {
    let body = body_edit(converter_verilog(w).unwrap());
    // The width parameters the function reads, fixed in front of the body.
    let params: String = body
        .lines()
        .filter(|l| l.starts_with("localparam "))
        .map(|l| format!("{l}\n"))
        .collect();
    let start = body.find("function automatic").unwrap();
    let end = body.rfind("endfunction").unwrap() + "endfunction".len();
    let (wm, am) = (w - 1, acc_bits(w) - 1);
    format!(
        "module conv(input wire [{am}:0] a, input wire [31:0] r, input wire [5:0] sh,
    input wire [1:0] mode, output wire [{wm}:0] y);
localparam [63:0] sat_hi = 64'h{:x};
localparam [63:0] sat_lo = 64'h{:x};
{params}{}
wire [SUM:0] f = first(a, r, sh, mode);
assign y = finish(f[SUM:1], f[0], sh, mode);
endmodule
",
        word_max(w) as u64,
        word_min(w) as u64,
        &body[start..end]
    )
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
}

/// Accumulators of `w`: the extremes, the word range's edges shifted, and random values.
fn accumulator(r: &mut Lcg, w: u32, shift: u32) -> i64 {
    let (lo, hi) = (acc_min(w), acc_max(w));
    // The word range's edges at this shift, give or take 2, inside the accumulator's range.
    let jitter = (r.next() % 5) as i64 - 2;
    let edge = |v: i64| ((v << shift.min(30)) + jitter).clamp(lo, hi);
    match r.next() % 8 {
        0 => lo,
        1 => hi,
        2 => edge(word_max(w)),
        3 => edge(word_min(w)),
        4 => (r.next() % 64) as i64 - 32,
        _ => lo + (r.next() as i64).rem_euclid(1i64 << acc_bits(w)),
    }
}

/// Runs `vectors` cases through the function and returns Icarus's report (`PASS` or the
/// mismatches).
fn run(w: u32, vectors: usize, body_edit: &dyn Fn(String) -> String) -> String {
    let a = acc_bits(w);
    let mut r = Lcg(0xC0FFEE ^ u64::from(w));
    let mut tb = format!(
        "module top;\nreg [{}:0] a; reg [31:0] r; reg [5:0] sh; reg [1:0] mode; wire [{}:0] y;\n\
         integer bad = 0;\nconv uut(.a(a), .r(r), .sh(sh), .mode(mode), .y(y));\ninitial begin\n",
        a - 1,
        w - 1
    );
    for i in 0..vectors {
        let shift = (i as u32) % 33;
        let rounding = Rounding::ALL[(i / 33) % 3];
        // First every shift and mode with both accumulator extremes and all-ones or all-zeros
        // random bits (the widest stochastic sums), then random cases.
        let (acc, random) = match i / 99 {
            k @ 0..=3 => ([acc_min(w), acc_max(w)][k % 2], [u32::MAX, 0][k / 2]),
            _ => (accumulator(&mut r, w, shift), r.next() as u32),
        };
        let want = convert(acc, shift, rounding, random, w);
        let mask = |v: i64, bits: u32| (v as u64) & ((1u64 << bits) - 1);
        let _ = writeln!(
            tb,
            "a = {a}'h{:x}; r = 32'h{random:x}; sh = {shift}; mode = {}; #1 \
             if (y !== {w}'h{:x}) begin bad = bad + 1; $display(\"MISMATCH {i}: acc {acc} shift {shift} {} got %d\", $signed(y)); end",
            mask(acc, a),
            rounding.code(),
            mask(want, w),
            rounding.name()
        );
    }
    tb.push_str("if (bad == 0) $display(\"PASS\");\n$finish;\nend\nendmodule\n");
    let dir = std::env::temp_dir().join(format!(
        "systole-conv-width-{w}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let module = function_module(w, body_edit);
    icarus::run(&dir, "top", &[("conv.v", &module), ("tb.v", &tb)], &[], &[])
        .unwrap_or_else(|e| panic!("Icarus at W = {w}: {e}"))
        .stdout
}

#[test]
fn the_file_declares_the_converters_ports_and_bad_widths_are_refused() {
    use rust_hdl_core::prelude::*;
    let mut c = crate::converter::ColumnConverter::new(0, 4).unwrap();
    c.connect_all();
    crate::vfile::assert_same_ports(CONVERTER_V, &generate_verilog_unchecked(&c));
    for w in [7, 17] {
        let e = converter_verilog(w).unwrap_err().to_string();
        assert!(e.contains("choose 8 to 16 bits"), "{e}");
    }
}

#[test]
fn conversion_at_8_12_and_16_bits_equals_the_contract() {
    for w in [8, 12, 16] {
        let out = run(w, 33 * 3 * 8, &|t| t);
        assert!(
            out.contains("PASS") && !out.contains("MISMATCH"),
            "W = {w}: {out}"
        );
    }
}

/// The test can fail: the saturation test one bit off (the range test on `s` moved down a
/// bit) is caught at W = 8 and 12, and the sum register one bit narrow at W = 8 (33 bits, the
/// 16-bit text's "accumulator + 1": the bug this test found, as the 32 random bits are as
/// wide as the 8-bit words' accumulator).
#[test]
fn conversion_width_test_catches_a_range_test_off_by_one_and_a_narrow_sum() {
    for w in [8, 12] {
        let off = run(w, 33 * 3 * 8, &|text| {
            text.replace("s[SUM-2:W-1]", "s[SUM-3:W-2]")
                .replace("{(SUM-W){s[SUM-1]}}", "{(SUM-W){s[SUM-2]}}")
        });
        assert!(
            off.contains("MISMATCH"),
            "W = {w}: off-by-one range test not caught"
        );
    }
    // W = 8 with the sum register at acc_bits + 1 = 33 bits, as the 16-bit text has it.
    let narrow = run(8, 33 * 3 * 4, &|text| {
        text.replace(
            "reg [SUM-1:0] s;\n    integer i;",
            "reg [SUM-2:0] s;\n    integer i;",
        )
    });
    assert!(
        narrow.contains("MISMATCH"),
        "narrow stochastic sum not caught"
    );
}
