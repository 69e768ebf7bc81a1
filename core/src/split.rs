//! Reductions longer than the contract's limit, split into partial sums on the host (the rule
//! is written in the contract, docs/HARDWARE.md section 6, under "Long reductions").

use crate::numeric::MAX_K;
use crate::tensor::{NumericError, QMatrix};
use alloc::format;
use alloc::vec::Vec;
use core::ops::Range;

/// Common fractional bits at which chunk results are summed: a tensor never has more than
/// `MAX_FRAC`, so every chunk word is exact there.
pub const SUM_FRAC: u32 = crate::numeric::MAX_FRAC;

/// The chunks of a reduction over `units` units of `unit_len` reduction indices each (one index
/// per unit for a matrix product; one image of `out_h * out_w` indices for a convolution's weight
/// gradient; one channel of `k * k` indices for its forward product and input gradient):
/// consecutive ranges of units, each of `MAX_K / unit_len` units (the most whole units that fit
/// the limit) except the last, which holds the rest. One chunk when the whole reduction fits.
/// An error when one unit alone is longer than the limit.
pub fn reduction_chunks(units: usize, unit_len: usize) -> Result<Vec<Range<usize>>, NumericError> {
    let per = MAX_K / unit_len.max(1);
    if per == 0 {
        return Err(NumericError::Shape(format!(
            "one unit of the reduction ({unit_len} products: an image's output pixels, or a \
             kernel's window) is longer than the contract's limit of {MAX_K}, and a reduction is \
             only split between units: use smaller images or kernels"
        )));
    }
    // At least one chunk, so an empty reduction is still one operation (of zeros).
    Ok((0..units.div_ceil(per).max(1))
        .map(|j| j * per..((j + 1) * per).min(units))
        .collect())
}

/// Seed of chunk `j` of an operation seeded with `op_seed` (the same splitmix32-style
/// finaliser as `crate::numeric::tile_seed`, over the seed and `j + 1`; never 0).
pub fn chunk_seed(op_seed: u32, j: usize) -> u32 {
    let mut x = op_seed ^ (j as u32).wrapping_add(1).wrapping_mul(0x27D4_EB2F);
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^= x >> 16;
    x.max(1)
}

/// Rows `r` of `m` (a chunk of a reduction that runs down the rows).
pub fn rows_of(m: &QMatrix, r: Range<usize>) -> QMatrix {
    QMatrix {
        rows: r.len(),
        cols: m.cols,
        frac: m.frac,
        data: m.data[r.start * m.cols..r.end * m.cols].to_vec(),
    }
}

/// Columns `c` of `m` (a chunk of a reduction that runs along the rows).
pub fn cols_of(m: &QMatrix, c: Range<usize>) -> QMatrix {
    let mut data = Vec::with_capacity(m.rows * c.len());
    for row in m.data.chunks_exact(m.cols.max(1)).take(m.rows) {
        data.extend_from_slice(&row[c.clone()]);
    }
    QMatrix {
        rows: m.rows,
        cols: c.len(),
        frac: m.frac,
        data,
    }
}

/// Channels `c` of `m`, whose rows hold `m.cols / per_channel` channels of `per_channel`
/// consecutive words each (an NCHW map's rows, or the `in_ch·k·k` rows of conv weights).
pub fn channels_of(m: &QMatrix, c: Range<usize>, per_channel: usize) -> QMatrix {
    cols_of(m, c.start * per_channel..c.end * per_channel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn chunks_cover_the_reduction_once_and_fit_the_limit() {
        let one = |r: Range<usize>| vec![r];
        assert_eq!(reduction_chunks(10, 1).unwrap(), one(0..10));
        assert_eq!(reduction_chunks(0, 1).unwrap(), one(0..0));
        assert_eq!(reduction_chunks(MAX_K, 1).unwrap(), one(0..MAX_K));
        assert_eq!(
            reduction_chunks(MAX_K + 1, 1).unwrap(),
            [0..MAX_K, MAX_K..MAX_K + 1]
        );
        // 28x28 images: 167 per chunk (167 * 784 = 130,928 <= MAX_K < 168 * 784).
        let c = reduction_chunks(256, 784).unwrap();
        assert_eq!(c, [0..167, 167..256]);
        assert!(reduction_chunks(1, MAX_K + 1).is_err());
    }

    #[test]
    fn chunk_seeds_differ_and_are_never_zero() {
        let s: Vec<u32> = (0..100).map(|j| chunk_seed(7, j)).collect();
        let mut u = s.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), s.len());
        assert!(s.iter().all(|&x| x != 0) && chunk_seed(7, 0) != chunk_seed(8, 0));
    }

    #[test]
    fn slices_take_the_chunk() {
        let m = QMatrix::from_vec(2, 3, 4, vec![1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(rows_of(&m, 1..2).data, vec![4, 5, 6]);
        assert_eq!(cols_of(&m, 1..3).data, vec![2, 3, 5, 6]);
    }
}
