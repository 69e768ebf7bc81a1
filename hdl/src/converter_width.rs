//! The column converter's Verilog at `W`-bit words: `converter.v` (written for `W = 16`) with
//! every width tied to the word or the accumulator rewritten for `W` and `acc_bits(W) = 2W +
//! 16`. The array instantiates the 16-bit text today; the narrower ones are checked on their
//! own (the tests below run the conversion function under Icarus against
//! `systole_core::numeric::convert` at `W`).

use crate::HdlError;
use systole_core::numeric::{acc_bits, MAX_WORD_BITS, MIN_WORD_BITS};

/// The 16-bit converter (the array's).
pub(crate) const CONVERTER_16: &str = include_str!("converter.v");

/// Bits of the sum of an accumulator and the 32 stochastic bits: one more than the wider of
/// the two, so it never wraps (49 at `W = 16`; 34 at `W = 8`, where the 32 random bits are as
/// wide as the 32-bit accumulator and the sum reaches `2^31 + 2^32 - 2`).
pub(crate) fn sum_bits(word_bits: u32) -> u32 {
    (acc_bits(word_bits) + 1).max(34)
}

/// Each piece of `converter.v` that depends on `W`, as written at 16 bits and at `w`.
fn edits(w: u32) -> Vec<(String, String)> {
    let a = acc_bits(w);
    let t = sum_bits(w) - 1;
    // The highest bit of `below` read: by the sticky bits (`a`) or the stochastic mask (31).
    let b = a.max(31);
    // The accumulator sign-extended to the sum's width.
    let extended = if t == a {
        format!("{{a[{}], a}}", a - 1)
    } else {
        format!("{{{{{}{{a[{}]}}}}, a}}", t + 1 - a, a - 1)
    };
    let pairs: [(&str, String); 14] = [
        (
            "reg signed [15:0] wr_data_q;",
            format!("reg signed [{}:0] wr_data_q;", w - 1),
        ),
        ("wr_data_q = 16'h0;", format!("wr_data_q = {w}'h0;")),
        (
            "(49 bits never wrap)",
            format!("({} bits never wrap)", t + 1),
        ),
        ("// 16-bit range test", format!("// {w}-bit range test")),
        (
            "function automatic [15:0] convert(input [47:0] a,",
            format!(
                "function automatic [{}:0] convert(input [{}:0] a,",
                w - 1,
                a - 1
            ),
        ),
        (
            "    reg [48:0] below;\n    reg [48:0] s;\n    reg [16:0] w;\n    reg [15:0] q;",
            format!(
                "    reg [{b}:0] below;\n    reg [{t}:0] s;\n    reg [{w}:0] w;\n    reg [{}:0] q;",
                w - 1
            ),
        ),
        (
            "for (i = 0; i < 49; i = i + 1)",
            format!("for (i = 0; i < {}; i = i + 1)", b + 1),
        ),
        (
            "s = {a[47], a} + {17'h0,",
            format!("s = {extended} + {{{}'h0,", t + 1 - 32),
        ),
        (
            "// A 50-bit shift, of which the quotient's low 16 bits",
            format!(
                "// A {}-bit shift, of which the quotient's low {w} bits",
                t + 2
            ),
        ),
        (
            "q = (sh == 6'h3f) ? 16'h0 : w[16:1];",
            format!("q = (sh == 6'h3f) ? {w}'h0 : w[{w}:1];"),
        ),
        (
            "sticky = |(a & below[48:1]);",
            format!("sticky = |(a & below[{a}:1]);"),
        ),
        (
            "ovf = |((s[47:15] ^ {33{s[48]}}) & ~below[32:0]);",
            format!(
                "ovf = |((s[{}:{}] ^ {{{}{{s[{t}]}}}}) & ~below[{}:0]);",
                t - 1,
                w - 1,
                t - w + 1,
                t - w
            ),
        ),
        (
            "if (ovf) convert = s[48] ? sat_lo[15:0] : sat_hi[15:0];",
            format!(
                "if (ovf) convert = s[{t}] ? sat_lo[{0}:0] : sat_hi[{0}:0];",
                w - 1
            ),
        ),
        (
            "else if (up & (q != sat_hi[15:0])) convert = q + 16'h1;",
            format!(
                "else if (up & (q != sat_hi[{}:0])) convert = q + {w}'h1;",
                w - 1
            ),
        ),
    ];
    pairs
        .into_iter()
        .map(|(from, to)| (from.to_string(), to))
        .collect()
}

/// The converter's Verilog body for `W`-bit words (`W` in `MIN_WORD_BITS..=MAX_WORD_BITS`):
/// `W`-bit `wr_data`, the conversion function at `acc_bits(W)`-bit accumulators.
pub fn converter_verilog(word_bits: u32) -> Result<String, HdlError> {
    if !(MIN_WORD_BITS..=MAX_WORD_BITS).contains(&word_bits) {
        return Err(HdlError::Block(format!(
            "converter for {word_bits}-bit words: choose {MIN_WORD_BITS} to {MAX_WORD_BITS} bits"
        )));
    }
    let mut text = CONVERTER_16.to_string();
    for (from, to) in edits(word_bits) {
        if !text.contains(&from) {
            return Err(HdlError::Block(format!(
                "converter.v no longer holds {from:?}: update converter_width::edits"
            )));
        }
        text = text.replace(&from, &to);
    }
    Ok(text)
}

/// The converter's Verilog for `W`-bit words inside the ports rust-hdl declares for the array's
/// converter (a 48-bit `acc`, a 16-bit `wr_data`): [`CONVERTER_16`] at 16 bits; below, the
/// body at `W` reads the low `acc_bits(W)` bits of `acc` (a sign-extended value) and its signed
/// `wr_data_q` drives `wr_data` sign-extended.
pub fn converter_in_ports(word_bits: u32) -> Result<String, HdlError> {
    let body = converter_verilog(word_bits)?;
    if word_bits == MAX_WORD_BITS {
        return Ok(body);
    }
    Ok(format!(
        "// The sign-extension bits of `acc` above the accumulator, which carry nothing.\n\
         wire unused_high_acc = &{{1'b0, acc[{}:{}]}};\n{body}",
        acc_bits(MAX_WORD_BITS) - 1,
        acc_bits(word_bits)
    ))
}

#[cfg(test)]
#[path = "converter_width_tests.rs"]
mod tests;
