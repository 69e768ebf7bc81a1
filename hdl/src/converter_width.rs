//! The column converter's Verilog at `W`-bit words: `hdl/verilog/converter.v`, whose widths are
//! parameters of `W`, `acc_bits(W) = 2W + 16` and the stochastic sum's bits. The tests below run
//! its conversion function under Icarus against `systole_core::numeric::convert` at `W`.

use crate::HdlError;
use systole_core::numeric::{acc_bits, MAX_WORD_BITS, MIN_WORD_BITS};

/// The converter's hand-written Verilog (`hdl/verilog/converter.v`, module
/// `systole_converter` with parameters `W`, `ACC`, `SUM` and the model's constants).
pub(crate) const CONVERTER_V: &str = include_str!("../verilog/converter.v");

/// Bits of the sum of an accumulator and the 32 stochastic bits: one more than the wider of
/// the two, so it never wraps (49 at `W = 16`; 34 at `W = 8`, where the 32 random bits are as
/// wide as the 32-bit accumulator and the sum reaches `2^31 + 2^32 - 2`).
pub(crate) fn sum_bits(word_bits: u32) -> u32 {
    (acc_bits(word_bits) + 1).max(34)
}

/// The converter's Verilog body for `W`-bit words (`W` in `MIN_WORD_BITS..=MAX_WORD_BITS`)
/// inside the ports rust-hdl declares for the array's converter: `converter.v`'s body at `W`,
/// `acc_bits(W)` and [`sum_bits`]`(W)`.
pub fn converter_verilog(word_bits: u32) -> Result<String, HdlError> {
    if !(MIN_WORD_BITS..=MAX_WORD_BITS).contains(&word_bits) {
        return Err(HdlError::Block(format!(
            "converter for {word_bits}-bit words: choose {MIN_WORD_BITS} to {MAX_WORD_BITS} bits"
        )));
    }
    let values = [
        ("W", word_bits),
        ("ACC", acc_bits(word_bits)),
        ("SUM", sum_bits(word_bits)),
    ];
    Ok(crate::vfile::body_at(CONVERTER_V, &values))
}

#[cfg(test)]
#[path = "converter_width_tests.rs"]
mod tests;
