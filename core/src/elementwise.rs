//! Elementwise ops in the numeric contract (run by the host or the board's CPU, never the
//! array): the sequential conversion of exact values, bias add, ReLU and its derivative.

use crate::numeric::{convert, convert32, Lfsr32, MAX_FRAC};
use crate::tensor::{output_shift, NumericError, OutputSpec, QMatrix};
use crate::Rounding;
use alloc::format;
use alloc::vec::Vec;

/// Converts a row-major sequence of exact values with one LFSR stepped once per element:
/// the rule for host-side elementwise ops.
pub fn convert_sequential(values: &[i64], shift: u32, rounding: Rounding, seed: u32) -> Vec<i16> {
    convert_each(values.iter().copied(), shift, rounding, seed)
}

/// [`convert_sequential`] of values computed one at a time, so no tensor of exact values is
/// ever stored (the board's CPU has little RAM): the same words for the same values.
pub fn convert_each(
    values: impl Iterator<Item = i64>,
    shift: u32,
    rounding: Rounding,
    seed: u32,
) -> Vec<i16> {
    let mut lfsr = Lfsr32::new(seed);
    values
        .map(|v| {
            let u = lfsr.step();
            convert(v, shift, rounding, u, 16) as i16
        })
        .collect()
}

/// [`convert_each`] of values that fit `i32`, converted in 32-bit arithmetic
/// ([`convert32`]): the same words, a few times fewer instructions on a 32-bit CPU.
pub fn convert_each32(
    values: impl Iterator<Item = i32>,
    shift: u32,
    rounding: Rounding,
    seed: u32,
) -> Vec<i16> {
    let mut lfsr = Lfsr32::new(seed);
    values
        .map(|v| convert32(v, shift, rounding, lfsr.step(), 16) as i16)
        .collect()
}

/// `y + bias`, with column `j` of `y` adding `bias[j / repeat]` (`repeat = 1` for a dense layer,
/// `h·w` for a convolution's NCHW rows). The sum is exact in `max(frac_y, frac_bias)`
/// fractional bits, then converted once to `out` (stochastic bits: one LFSR seeded with
/// `out.seed`, stepped once per element in row-major order).
pub fn bias_add(
    y: &QMatrix,
    bias: &QMatrix,
    repeat: usize,
    out: &OutputSpec,
) -> Result<QMatrix, NumericError> {
    let shifts = bias_check(y, bias, repeat)?;
    let shift = output_shift(y.frac.max(bias.frac), out.frac)?;
    let mut lfsr = Lfsr32::new(out.seed);
    let mut words = Vec::with_capacity(y.data.len());
    // One loop per mode, the conversion folded for its mode (fewer branches and registers a
    // word on the board's CPU): `convert32` of that mode.
    let mut put = |s: i32, mode: Rounding| {
        words.push(convert32(s, shift, mode, lfsr.step(), 16) as i16);
    };
    match out.rounding {
        Rounding::Stochastic => {
            bias_sums(y, bias, repeat, shifts, |s| put(s, Rounding::Stochastic))
        }
        Rounding::NearestEven => {
            bias_sums(y, bias, repeat, shifts, |s| put(s, Rounding::NearestEven))
        }
        Rounding::Truncate => bias_sums(y, bias, repeat, shifts, |s| put(s, Rounding::Truncate)),
    }
    QMatrix::from_vec(y.rows, y.cols, out.frac, words)
}

/// The largest magnitude of [`bias_add`]'s exact sums (in `max(frac_y, frac_bias)` fractional
/// bits), from which a caller chooses the output format; 0 for no words. Refused as
/// [`bias_add`] refuses them (shapes, a fraction past `MAX_FRAC`).
pub fn bias_add_largest(y: &QMatrix, bias: &QMatrix, repeat: usize) -> Result<i64, NumericError> {
    let shifts = bias_check(y, bias, repeat)?;
    let mut m = 0u32;
    bias_sums(y, bias, repeat, shifts, |s| m = m.max(s.unsigned_abs()));
    Ok(i64::from(m))
}

/// Checks a bias add's shapes and fractions and returns the shifts that bring `y` and `bias`
/// to their common `max(frac_y, frac_bias)`. One of them is 0 and the other at most 15 (a
/// fraction past `MAX_FRAC` is refused), so every sum `(y << sy) + (b << sb)` lies within
/// `2^30 + 2^15`: it fits i32.
fn bias_check(y: &QMatrix, bias: &QMatrix, repeat: usize) -> Result<(u32, u32), NumericError> {
    if repeat == 0 || bias.rows != 1 || bias.cols * repeat != y.cols {
        return Err(NumericError::Shape(format!(
            "bias is {}x{} (repeated {repeat} times) but the tensor has {} columns",
            bias.rows, bias.cols, y.cols
        )));
    }
    if let Some(f) = [y.frac, bias.frac].into_iter().find(|&f| f > MAX_FRAC) {
        return Err(NumericError::FracBits(f));
    }
    let f = y.frac.max(bias.frac);
    Ok((f - y.frac, f - bias.frac))
}

/// Gives `each` the exact sum `(v << sy) + (b << sb)` of every word `v` of `y` in row-major
/// order with its bias word `b = bias[j / repeat]` (shapes checked by [`bias_check`]): nested
/// loops over rows, bias words and their `repeat` columns, no division or counter per word
/// (the board's CPU divides in over 30 cycles).
fn bias_sums(
    y: &QMatrix,
    bias: &QMatrix,
    repeat: usize,
    (sy, sb): (u32, u32),
    mut each: impl FnMut(i32),
) {
    if y.cols == 0 {
        return;
    }
    for row in y.data.chunks_exact(y.cols) {
        for (group, &b) in row.chunks_exact(repeat).zip(&bias.data) {
            let b = i32::from(b) << sb;
            for &v in group {
                each((i32::from(v) << sy) + b);
            }
        }
    }
}

/// `max(x, 0)`: exact, same format.
pub fn relu(x: &QMatrix) -> QMatrix {
    QMatrix {
        rows: x.rows,
        cols: x.cols,
        frac: x.frac,
        data: x.data.iter().map(|&v| v.max(0)).collect(),
    }
}

/// Derivative of ReLU applied to an incoming gradient: `dy` where `x > 0`, else 0 (exact).
pub fn relu_backward(dy: &QMatrix, x: &QMatrix) -> Result<QMatrix, NumericError> {
    if dy.rows != x.rows || dy.cols != x.cols {
        return Err(NumericError::Shape(format!(
            "gradient is {}x{} but the ReLU input is {}x{}",
            dy.rows, dy.cols, x.rows, x.cols
        )));
    }
    let data = dy
        .data
        .iter()
        .zip(&x.data)
        .map(|(&d, &v)| if v > 0 { d } else { 0 })
        .collect();
    Ok(QMatrix {
        rows: dy.rows,
        cols: dy.cols,
        frac: dy.frac,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward bias add: every sum in i64, its bias word found by a division.
    fn bias_add_i64(y: &QMatrix, bias: &QMatrix, repeat: usize, out: &OutputSpec) -> QMatrix {
        let f = y.frac.max(bias.frac);
        let (sy, sb) = (f - y.frac, f - bias.frac);
        let sums: Vec<i64> = (y.data.iter().enumerate())
            .map(|(i, &v)| {
                let b = bias.data[(i % y.cols) / repeat];
                (i64::from(v) << sy) + (i64::from(b) << sb)
            })
            .collect();
        let data = convert_sequential(&sums, f - out.frac, out.rounding, out.seed);
        QMatrix::from_vec(y.rows, y.cols, out.frac, data).unwrap()
    }

    proptest::proptest! {
        /// The 32-bit bias add gives the i64 form's words and largest sum, at every pair of
        /// fractions, output format and rounding, extreme words included.
        #[test]
        fn bias_add_is_the_i64_sums_converted(
            seed: u32,
            fy in 0u32..=15,
            fb in 0u32..=15,
            drop in 0u32..=31,
            (rows, groups, repeat) in (1usize..5, 1usize..6, 1usize..4),
            words in proptest::collection::vec(proptest::num::i16::ANY, 120),
        ) {
            let cols = groups * repeat;
            let mut data: Vec<i16> = words.iter().cycle().take(rows * cols).copied().collect();
            data[0] = i16::MIN;
            let y = QMatrix::from_vec(rows, cols, fy, data).unwrap();
            let b: Vec<i16> = words.iter().rev().take(groups).copied().collect();
            let bias = QMatrix::from_vec(1, groups, fb, b).unwrap();
            let f = fy.max(fb);
            let largest = (0..rows * cols)
                .map(|i| {
                    let (v, bw) = (y.data[i], bias.data[(i % cols) / repeat]);
                    ((i64::from(v) << (f - fy)) + (i64::from(bw) << (f - fb))).abs()
                })
                .max()
                .unwrap();
            proptest::prop_assert_eq!(bias_add_largest(&y, &bias, repeat), Ok(largest));
            for rounding in Rounding::ALL {
                let out = OutputSpec { frac: f.saturating_sub(drop), rounding, seed };
                proptest::prop_assert_eq!(
                    bias_add(&y, &bias, repeat, &out).unwrap(),
                    bias_add_i64(&y, &bias, repeat, &out)
                );
            }
        }
    }
}
