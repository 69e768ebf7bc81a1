//! Elementwise ops in the numeric contract (run by the host or the board's CPU, never the
//! array): the sequential conversion of exact values, bias add, ReLU and its derivative.

use crate::numeric::{convert, Lfsr32};
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
    if repeat == 0 || bias.rows != 1 || bias.cols * repeat != y.cols {
        return Err(NumericError::Shape(format!(
            "bias is {}x{} (repeated {repeat} times) but the tensor has {} columns",
            bias.rows, bias.cols, y.cols
        )));
    }
    let f = y.frac.max(bias.frac);
    let shift = output_shift(f, out.frac)?;
    let (sy, sb) = (f - y.frac, f - bias.frac);
    let sums = with_bias(y, bias, repeat).map(|(v, b)| ((v as i64) << sy) + ((b as i64) << sb));
    QMatrix::from_vec(
        y.rows,
        y.cols,
        out.frac,
        convert_each(sums, shift, out.rounding, out.seed),
    )
}

/// Each word of `y` in row-major order with the bias word it adds, `bias[j / repeat]` for
/// column `j`, for a `bias` of `y.cols / repeat` words (checked by the caller); without a
/// division per word (the board's CPU divides in over 30 cycles).
pub fn with_bias<'a>(
    y: &'a QMatrix,
    bias: &'a QMatrix,
    repeat: usize,
) -> impl Iterator<Item = (i16, i16)> + 'a {
    WithBias {
        words: y.data.iter(),
        bias: &bias.data[..(y.cols / repeat.max(1)).min(bias.data.len())],
        repeat: repeat.max(1),
        at: 0,
        used: 0,
    }
}

/// [`with_bias`]'s walk: counters instead of a division per word.
struct WithBias<'a> {
    words: core::slice::Iter<'a, i16>,
    bias: &'a [i16],
    repeat: usize,
    /// The current bias word and the words of `y` it has been paired with so far.
    at: usize,
    used: usize,
}

impl Iterator for WithBias<'_> {
    type Item = (i16, i16);

    #[inline]
    fn next(&mut self) -> Option<(i16, i16)> {
        let v = *self.words.next()?;
        let b = *self.bias.get(self.at)?;
        self.used += 1;
        if self.used == self.repeat {
            self.used = 0;
            self.at += 1;
            if self.at == self.bias.len() {
                self.at = 0;
            }
        }
        Some((v, b))
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
