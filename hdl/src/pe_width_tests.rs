//! The PE (`hdl/verilog/pe.v`) at `W` = 8, 12 and 16 under Icarus against plain `i64`
//! arithmetic: every output, every cycle, with extreme words so the `2W`-bit product and its
//! sign extension into the `2W + 16`-bit accumulator are exercised.

use super::PE_V;
use crate::icarus;
use std::fmt::Write as _;
use systole_core::numeric::{acc_bits, word_max, word_min};

/// `pe.v` at `W` inside a module with its ports at `W` (the array's PEs sit in 16- and 48-bit
/// ports): inputs sign-extended into the PE's, outputs their low bits.
fn pe_module(w: u32, pe_v: &str) -> String {
    let (wm, am) = (w - 1, acc_bits(w) - 1);
    let ext = |name: &str, from: u32, to: u32| match to - from {
        0 => name.to_string(),
        e => format!("{{{{{e}{{{name}[{}]}}}}, {name}}}", from - 1),
    };
    format!(
        "module pe(input wire clock, input wire reset,
    input wire signed [{wm}:0] a_in, input wire signed [{wm}:0] b_in,
    input wire valid_in, input wire first_in, input wire last_in,
    input wire signed [{am}:0] res_in, input wire shift_en,
    output wire signed [{wm}:0] a_out, output wire signed [{wm}:0] b_out,
    output wire valid_out, output wire first_out, output wire last_out,
    output wire signed [{am}:0] res, output wire captured);
wire signed [15:0] a16, b16;
wire signed [47:0] res48;
systole_pe #(.W({w}), .ACC({a})) u(.clock(clock), .reset(reset), .a_in({ea}), .b_in({eb}),
    .valid_in(valid_in), .first_in(first_in), .last_in(last_in), .res_in({er}),
    .shift_en(shift_en), .a_out(a16), .b_out(b16), .valid_out(valid_out),
    .first_out(first_out), .last_out(last_out), .res(res48), .captured(captured));
assign a_out = a16[{wm}:0];
assign b_out = b16[{wm}:0];
assign res = res48[{am}:0];
endmodule
{pe_v}",
        a = acc_bits(w),
        ea = ext("a_in", w, 16),
        eb = ext("b_in", w, 16),
        er = ext("res_in", acc_bits(w), 48),
    )
}

/// A deterministic 64-bit LCG (the stimulus only has to be varied and repeatable).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn word(&mut self, w: u32) -> i64 {
        match self.next() % 8 {
            0 | 1 => word_min(w),
            2 => word_max(w),
            _ => word_min(w) + (self.next() as i64).rem_euclid(1 << w),
        }
    }
}

/// `v` as a `bits`-wide hexadecimal Verilog literal.
fn lit(v: i64, bits: u32) -> String {
    format!("{bits}'h{:x}", (v as u64) & ((1u64 << bits) - 1))
}

/// A self-checking testbench: per cycle the inputs, a clock edge and the expected outputs
/// computed here with `i64` (the PE's timing: everything one register late).
fn testbench(w: u32, cycles: usize, seed: u64) -> String {
    let a_bits = acc_bits(w);
    let mut r = Lcg(seed);
    let (mut acc, mut res) = (0i64, 0i64);
    let mut s = String::from("module top;\nreg clock = 0, reset = 1, valid_in = 0, first_in = 0, last_in = 0, shift_en = 0;\n");
    let _ = writeln!(
        s,
        "reg signed [{}:0] a_in = 0, b_in = 0;\nreg signed [{}:0] res_in = 0;",
        w - 1,
        a_bits - 1
    );
    let _ = writeln!(s, "wire signed [{}:0] a_out, b_out;\nwire signed [{}:0] res;\nwire valid_out, first_out, last_out, captured;", w - 1, a_bits - 1);
    s.push_str("integer bad = 0;\npe uut(.clock(clock), .reset(reset), .a_in(a_in), .b_in(b_in), .valid_in(valid_in), .first_in(first_in), .last_in(last_in), .res_in(res_in), .shift_en(shift_en), .a_out(a_out), .b_out(b_out), .valid_out(valid_out), .first_out(first_out), .last_out(last_out), .res(res), .captured(captured));\ninitial begin\n");
    let mut left = 0;
    for cycle in 0..cycles {
        let reset = cycle < 2;
        let (a, b) = (r.word(w), r.word(w));
        let valid = !r.next().is_multiple_of(6);
        // Commands of 1 to 40 K steps, most cleared at the start, most emitted at the end.
        let first = valid && left == 0 && !r.next().is_multiple_of(4);
        if valid && left == 0 {
            left = 1 + r.next() as usize % 40;
        }
        let last = valid && left == 1 && !r.next().is_multiple_of(5);
        let shift = r.next().is_multiple_of(3);
        let res_in = (r.next() as i64) << 20 ^ r.next() as i64;
        let res_in = res_in.rem_euclid(1 << a_bits) - (1i64 << (a_bits - 1));
        let _ = writeln!(
            s,
            "reset = {}; a_in = {}; b_in = {}; valid_in = {}; first_in = {}; last_in = {}; shift_en = {}; res_in = {};",
            reset as u8,
            lit(a, w),
            lit(b, w),
            valid as u8,
            first as u8,
            last as u8,
            shift as u8,
            lit(res_in, a_bits)
        );
        // The model's clock edge.
        let sum = if first { 0 } else { acc } + a * b;
        if valid {
            acc = sum;
            left -= 1;
        }
        if valid && last {
            res = sum;
        } else if shift {
            res = res_in;
        }
        let cap = valid && last && !reset;
        let flags = (valid && !reset, first && !reset, last && !reset);
        let (a_q, b_q) = (a, b);
        s.push_str("#1 clock = 1; #1 clock = 0;\n");
        let _ = writeln!(
            s,
            "if (a_out !== {} || b_out !== {} || res !== {} || captured !== {} || valid_out !== {} || first_out !== {} || last_out !== {}) begin bad = bad + 1; $display(\"MISMATCH cycle {cycle}: res %h captured %b\", res, captured); end",
            lit(a_q, w),
            lit(b_q, w),
            lit(res, a_bits),
            cap as u8,
            flags.0 as u8,
            flags.1 as u8,
            flags.2 as u8
        );
    }
    s.push_str("if (bad == 0) $display(\"PASS\");\n$finish;\nend\nendmodule\n");
    s
}

fn run(w: u32, body_edit: impl Fn(String) -> String) -> String {
    let dir = std::env::temp_dir().join(format!(
        "systole-pe-width-{w}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let module = body_edit(pe_module(w, PE_V));
    let tb = testbench(w, 600, 0x5EED ^ u64::from(w));
    let out = icarus::run(&dir, "top", &[("pe.v", &module), ("tb.v", &tb)], &[], &[])
        .unwrap_or_else(|e| panic!("Icarus at W = {w}: {e}"));
    out.stdout
}

#[test]
fn pe_at_8_12_and_16_bits_equals_i64() {
    for w in [8, 12, 16] {
        let out = run(w, |m| m);
        assert!(
            out.contains("PASS") && !out.contains("MISMATCH"),
            "W = {w}: {out}"
        );
    }
}

/// The test can fail: a product one bit narrow (it wraps `(-2^(W-1))^2`) and an accumulator
/// that zero-extends the product are both caught at W = 8 and 12.
#[test]
fn pe_width_test_catches_narrow_products_and_bad_extension() {
    for w in [8, 12] {
        let narrow = run(w, |m| {
            m.replace(
                "wire signed [2*W-1:0] prod = a_w * b_w;",
                "wire signed [2*W-1:0] prod0 = a_w * b_w;\n\
                 wire signed [2*W-1:0] prod = {prod0[2*W-2], prod0[2*W-2:0]};",
            )
        });
        assert!(
            narrow.contains("MISMATCH"),
            "W = {w}: narrow product not caught"
        );
        let zero_ext = run(w, |m| {
            m.replace("{(ACC-2*W){prod[2*W-1]}}", "{(ACC-2*W){1'b0}}")
        });
        assert!(
            zero_ext.contains("MISMATCH"),
            "W = {w}: zero extension not caught"
        );
    }
}

/// Cells whose kind starts with `prefix` in a Yosys `stat` report (lines `KIND COUNT`).
fn cells(stat: &str, prefix: &str) -> u64 {
    stat.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            match (it.next(), it.next(), it.next()) {
                (Some(k), Some(n), None) if k.starts_with(prefix) => n.parse::<u64>().ok(),
                _ => None,
            }
        })
        .sum()
}

/// Resource truth of one PE per `W` (the part of the design that grows as `n^2`): Yosys
/// `synth_xilinx` (LUT, FF, DSP48E1) and `synth_ice40 -dsp` (LCs, SB_MAC16). Heavy (Yosys):
/// `cargo test -p systole-hdl --lib pe_resources -- --ignored --nocapture`.
#[test]
#[ignore]
fn pe_resources_per_width() {
    let dir = std::env::temp_dir().join(format!("systole-pe-synth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!("| W | acc bits | LUT | FF | DSP48E1 | MACs per DSP48E1 | iCE40 SB_LUT4 | SB_DFF* | SB_MAC16 |");
    for w in [8, 12, 16] {
        let v = dir.join(format!("pe{w}.v"));
        std::fs::write(&v, pe_module(w, PE_V)).unwrap();
        let yosys = |script: String| {
            let out = std::process::Command::new("yosys")
                .args(["-q", "-p", &script])
                .arg(&v)
                .output()
                .expect("yosys on PATH (./x installs it)");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let x = yosys("synth_xilinx -flatten -family xc7 -top pe; tee -o /dev/stdout stat".into());
        let (luts, ffs, dsp) = (cells(&x, "LUT"), cells(&x, "FD"), cells(&x, "DSP48E1"));
        let i = yosys("synth_ice40 -dsp -top pe; tee -o /dev/stdout stat".into());
        let (lut4, dff, mac16) = (
            cells(&i, "SB_LUT4"),
            cells(&i, "SB_DFF"),
            cells(&i, "SB_MAC16"),
        );
        println!(
            "| {w} | {} | {luts} | {ffs} | {dsp} | {} | {lut4} | {dff} | {mac16} |",
            acc_bits(w),
            if dsp == 0 {
                "-".into()
            } else {
                format!("{:.1}", 1.0 / dsp as f64)
            }
        );
        // One MAC maps onto one DSP48E1 at every W (its 25x18 multiplier and 48-bit adder
        // hold the W x W product and the 2W + 16-bit accumulator).
        assert_eq!(dsp, 1, "W = {w}:\n{x}");
    }
}
