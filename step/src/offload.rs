//! One offloaded operation of [`Fixed`]: the fractional-bit rule with its saturation retries,
//! the split of a reduction longer than the contract's limit into chunks (the contract's "Long
//! reductions" rule, `systole_core::split`) and the saturation counters.

use crate::fixed::{add_exact_at, Fixed};
use crate::profile::{section, Section};
use crate::width::{frac_for_max_at, saturate_to, saturated_at};
use crate::{numeric, Products, SaturationCount, StepError};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;
use systole_core::conv2d::{check_backward_input, check_forward, Conv2dGeom};
use systole_core::gather::ConvGeom;
use systole_core::numeric::{word_max, word_min};
use systole_core::split::{channels_of, chunk_seed, cols_of, reduction_chunks, rows_of, SUM_FRAC};
use systole_core::tensor::{NumericError, OutputSpec, QMatrix};

/// Which product an offloaded operation is (the operands are its `a` and `b`).
#[derive(Clone, Copy)]
pub(crate) enum Product<'g> {
    /// `A·B`.
    Matmul,
    /// `A·Bᵀ`.
    MatmulNt,
    /// `Aᵀ·B`.
    MatmulTn,
    /// Forward convolution of `(x, w)`.
    ConvForward(&'g Conv2dGeom),
    /// Input gradient of `(dy, w)`.
    ConvBackwardInput(&'g Conv2dGeom),
    /// Weight gradient of `(x, dy)`.
    ConvBackwardWeights(&'g Conv2dGeom),
}

/// Cuts one operand's reduction dimension (rows, columns or channels) to a chunk of units.
type Slice<'s> = &'s dyn Fn(&QMatrix, Range<usize>) -> QMatrix;

/// The operands of each chunk of a reduction (the contract's "Long reductions" rule), borrowed
/// as they are when the whole reduction fits one device operation.
struct Chunks<'a> {
    whole: (&'a QMatrix, &'a QMatrix),
    ranges: Vec<Range<usize>>,
    parts: Vec<(QMatrix, QMatrix)>,
    /// Reduction length of the first (longest) chunk, for the first frac bound.
    k: usize,
}

impl<'a> Chunks<'a> {
    /// `a` and `b` with the length of their reduction dimension in units of `unit_len`
    /// indices and how to slice it.
    fn new(
        (a, units_a, slice_a): (&'a QMatrix, usize, Slice<'_>),
        (b, units_b, slice_b): (&'a QMatrix, usize, Slice<'_>),
        unit_len: usize,
    ) -> Result<Self, NumericError> {
        let ranges = reduction_chunks(units_a, unit_len)?;
        let mut parts = Vec::new();
        if ranges.len() > 1 {
            if units_a != units_b {
                return Err(NumericError::Shape(format!(
                    "the operands' reduction lengths differ: {units_a} and {units_b} units of \
                     {unit_len} products"
                )));
            }
            parts = ranges
                .iter()
                .map(|r| (slice_a(a, r.clone()), slice_b(b, r.clone())))
                .collect();
        }
        let k = ranges.first().map_or(0, |r| r.len() * unit_len);
        Ok(Chunks {
            whole: (a, b),
            ranges,
            parts,
            k,
        })
    }

    fn len(&self) -> usize {
        self.ranges.len()
    }

    fn a(&self, j: usize) -> &QMatrix {
        self.parts.get(j).map_or(self.whole.0, |p| &p.0)
    }

    fn b(&self, j: usize) -> &QMatrix {
        self.parts.get(j).map_or(self.whole.1, |p| &p.1)
    }

    /// Units (images of a weight gradient, channels of a forward product or input gradient) in
    /// chunk `j`.
    fn units(&self, j: usize) -> usize {
        self.ranges[j].len()
    }
}

/// Adds `add` to the counters of operation `op` (its key allocated the first time only).
fn count(counts: &mut BTreeMap<String, SaturationCount>, op: &str, add: SaturationCount) {
    match counts.get_mut(op) {
        Some(c) => c.add(&add),
        None => {
            counts.insert(String::from(op), add);
        }
    }
}

/// [`saturated_at`] and the largest magnitude of `y`'s words (W-bit words, as saturated), in
/// one pass: a word's offset from the range's bottom, minus one, reaches the top of the
/// range's span only at either end (0 wraps), one compare a word.
fn saturated_and_largest(y: &QMatrix, w: u32) -> (u64, u32) {
    let lo = word_min(w) as i32;
    let span = (word_max(w) - word_min(w)) as u32;
    let (sat, m) = y.data.iter().fold((0u32, 0u32), |(sat, m), &x| {
        let x = i32::from(x);
        let at_end = ((x - lo) as u32).wrapping_sub(1) >= span - 1;
        (sat + u32::from(at_end), m.max(x.unsigned_abs()))
    });
    (u64::from(sat), m)
}

fn max_abs(m: &QMatrix) -> f64 {
    m.data
        .iter()
        .map(|&w| (w as i32).unsigned_abs())
        .max()
        .unwrap_or(0) as f64
        / (1u64 << m.frac) as f64
}

/// A chunk's geometry: `g` with its reduction dimension cut to `units` (input channels of a
/// forward product, output channels of an input gradient, images of a weight gradient).
fn chunk_geom(kind: Product<'_>, units: usize) -> Option<Conv2dGeom> {
    Some(match kind {
        Product::ConvForward(g) => Conv2dGeom {
            batch: g.batch,
            shape: ConvGeom {
                in_ch: units,
                ..g.shape
            },
        },
        Product::ConvBackwardInput(g) => Conv2dGeom {
            batch: g.batch,
            shape: ConvGeom {
                out_ch: units,
                ..g.shape
            },
        },
        Product::ConvBackwardWeights(g) => Conv2dGeom { batch: units, ..*g },
        _ => return None,
    })
}

impl<P: Products> Fixed<P> {
    /// The chunks of product `kind` of `a` and `b`, checked.
    fn chunks<'a>(
        op: &str,
        kind: Product<'_>,
        a: &'a QMatrix,
        b: &'a QMatrix,
    ) -> Result<Chunks<'a>, StepError> {
        let chunks = match kind {
            Product::Matmul => Chunks::new((a, a.cols, &cols_of), (b, b.rows, &rows_of), 1),
            Product::MatmulNt => Chunks::new((a, a.cols, &cols_of), (b, b.cols, &cols_of), 1),
            Product::MatmulTn => Chunks::new((a, a.rows, &rows_of), (b, b.rows, &rows_of), 1),
            Product::ConvForward(g) => {
                // The reduction runs over (input channel, ky, kx): split between input channels.
                check_forward(a, b, g).map_err(numeric(op))?;
                let kk = g.kernel * g.kernel;
                let pix = g.in_h * g.in_w;
                let x_ch = |m: &QMatrix, r| channels_of(m, r, pix);
                let w_ch = |m: &QMatrix, r| channels_of(m, r, kk);
                Chunks::new((a, g.in_ch, &x_ch), (b, g.in_ch, &w_ch), kk)
            }
            Product::ConvBackwardInput(g) => {
                // The reduction runs over (output channel, ky, kx): split between output channels.
                check_backward_input(a, b, g).map_err(numeric(op))?;
                let pix = g.out_h() * g.out_w();
                let dy_ch = |m: &QMatrix, r| channels_of(m, r, pix);
                Chunks::new(
                    (a, g.out_ch, &dy_ch),
                    (b, g.out_ch, &rows_of),
                    g.kernel * g.kernel,
                )
            }
            Product::ConvBackwardWeights(g) => {
                // The reduction runs over every output pixel of the batch: split between images.
                if a.rows != g.batch || b.rows != g.batch {
                    return Err(StepError::Shape {
                        op: String::from(op),
                        msg: format!(
                            "{} input and {} gradient rows for a batch of {}",
                            a.rows, b.rows, g.batch
                        ),
                    });
                }
                let pix = g.out_h() * g.out_w();
                Chunks::new((a, g.batch, &rows_of), (b, g.batch, &rows_of), pix)
            }
        };
        chunks.map_err(numeric(op))
    }

    /// Runs chunk `j` of `p` on the products' backend.
    fn run_chunk(
        &mut self,
        op: &str,
        kind: Product<'_>,
        p: &Chunks<'_>,
        j: usize,
        spec: &OutputSpec,
    ) -> Result<QMatrix, P::Error> {
        let _p = section(Section::Drivers);
        let (a, b) = (p.a(j), p.b(j));
        let geom = chunk_geom(kind, p.units(j));
        let x = &mut self.products;
        match (kind, geom) {
            (Product::Matmul, _) => x.matmul(op, a, b, spec),
            (Product::MatmulNt, _) => x.matmul_nt(op, a, b, spec),
            (Product::MatmulTn, _) => x.matmul_tn(op, a, b, spec),
            (Product::ConvForward(_), Some(g)) => x.conv2d_forward(op, a, b, &g, spec),
            (Product::ConvBackwardInput(_), Some(g)) => x.conv2d_backward_input(op, a, b, &g, spec),
            (Product::ConvBackwardWeights(_), Some(g)) => {
                x.conv2d_backward_weights(op, a, b, &g, spec)
            }
            (_, None) => unreachable!("every convolution has a chunk geometry"),
        }
    }

    /// Runs product `kind` of `a` and `b` as one offloaded operation of one chunk (or several
    /// when its reduction is longer than the contract's limit) with the frac rule of the module
    /// docs. Each chunk starts at the operation's remembered `frac` and retries on its own; a
    /// split operation's chunks are summed exactly and converted once (`from_exact`), and it
    /// remembers the smallest `frac` its chunks would use next.
    pub(crate) fn product(
        &mut self,
        op: &str,
        kind: Product<'_>,
        a: &QMatrix,
        b: &QMatrix,
    ) -> Result<QMatrix, P::Error> {
        let _p = section(Section::Product);
        // Master-width weights are rounded to W bits first: the array sees W-bit words only.
        let (a, b) = (self.narrow(op, a)?, self.narrow(op, b)?);
        let (a, b) = (a.as_ref(), b.as_ref());
        let w = self.w();
        let p = Self::chunks(op, kind, a, b)?;
        let frac_in = a.frac + b.frac;
        let chunks = p.len();
        let (lo, hi) = (
            frac_in.saturating_sub(systole_core::numeric::MAX_SHIFT),
            frac_in.min(w - 1),
        );
        let key = self.frac_key(op);
        let start = self
            .fracs
            .get(&key)
            .copied()
            // The first time only: a safe bound from the operands' largest magnitudes.
            .unwrap_or_else(|| frac_for_max_at(max_abs(a) * max_abs(b) * p.k as f64, w))
            .clamp(lo, hi);
        let mut next = hi;
        let mut parts = Vec::with_capacity(chunks);
        for j in 0..chunks {
            let mut frac = start;
            let (y, m) = loop {
                let mut spec = self.spec(frac);
                if chunks > 1 {
                    spec.seed = chunk_seed(spec.seed, j);
                }
                // The 16-bit backend's words saturated to W: the W-bit conversion exactly.
                let y = saturate_to(self.run_chunk(op, kind, &p, j, &spec)?, w);
                let (sat, m) = saturated_and_largest(&y, w);
                let retry = frac > lo && sat > 0;
                let add = SaturationCount {
                    ops: 1,
                    retries: retry.into(),
                    saturated_words: if retry { 0 } else { sat },
                };
                count(&mut self.saturation, op, add);
                if retry {
                    frac -= 1;
                    continue;
                }
                break (y, m);
            };
            // Grow a small result into [2^(W-3), 2^(W-2)): one bit of headroom.
            next = next.min(if m > 0 && m < 1 << (w - 3) {
                frac + ((w - 2) - (32 - m.leading_zeros()))
            } else {
                frac
            });
            parts.push(y);
        }
        self.fracs.insert(key, next.clamp(lo, hi));
        if parts.len() == 1 {
            if let Some(y) = parts.pop() {
                return Ok(y);
            }
        }
        let (rows, cols) = parts.first().map_or((0, 0), |p| (p.rows, p.cols));
        let mut sum = vec![0i64; rows * cols];
        for p in &parts {
            add_exact_at(&mut sum, p, SUM_FRAC);
        }
        let y = self.from_exact(op, rows, cols, &sum, SUM_FRAC)?;
        if y.frac == 0 {
            // The sum did not fit even without fractional bits: its extreme words saturated.
            let saturated_words = saturated_at(&y, w);
            let add = SaturationCount {
                saturated_words,
                ..Default::default()
            };
            count(&mut self.saturation, op, add);
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word at every width (the words of a W-bit tensor, as the step saturates them):
    /// the count of `saturated_at` and the largest magnitude.
    #[test]
    fn one_pass_scan_is_the_count_and_the_max() {
        for w in systole_core::numeric::MIN_WORD_BITS..=16 {
            let words: Vec<i16> = (i16::MIN..=i16::MAX).collect();
            let y = saturate_to(QMatrix::from_vec(256, 256, 0, words).unwrap(), w);
            let m = y.data.iter().map(|&x| i32::from(x).unsigned_abs()).max();
            let got = saturated_and_largest(&y, w);
            assert_eq!(got, (saturated_at(&y, w), m.unwrap()), "W {w}");
            let one =
                QMatrix::from_vec(1, 3, 0, vec![(1 - (1i32 << (w - 1))) as i16, 0, 3]).unwrap();
            assert_eq!(saturated_and_largest(&one, w).0, 0, "W {w}");
        }
    }
}
