//! Where a product's A and B words come from ([`Feed`]): a [`MatmulJob`]'s row-major
//! operands, the same stored transposed ([`Views`]), and the strided slices the row loop fills
//! rows from inline ([`Strided`]).

use super::{MatmulJob, Transposed};
use systole_core::bus::RowBlock;

/// Where the A and B words of a product come from: the host's memory (written through the
/// row ports) or, for the conv unit, gathered on chip.
pub(crate) trait Feed {
    /// `(m, k, n)`.
    fn shape(&self) -> (usize, usize, usize);
    /// `A[i][kk]`, for a host-written A (`i < m`).
    fn a(&self, i: usize, kk: usize) -> i16;
    /// `B[kk][j]`, for a host-written B (`j < n`).
    fn b(&self, kk: usize, j: usize) -> i16;
    /// A host-written A as one strided slice, when it is one (then the driver fills rows
    /// from it inline instead of calling [`Feed::a`] a word).
    fn strided_a(&self) -> Option<Strided<'_>> {
        None
    }
    /// A host-written B as one strided slice, when it is one.
    fn strided_b(&self) -> Option<Strided<'_>> {
        None
    }
}

/// An operand whose row `kk` lane `l` (lane index `i` below `lanes`) is
/// `data[kk * row_step + i * lane_step]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strided<'a> {
    data: &'a [i16],
    row_step: usize,
    lane_step: usize,
    /// Lanes that exist (`m` for A, `n` for B); the rest are padding.
    lanes: usize,
}

impl Strided<'_> {
    /// `row[l]` = the word of lane `first + l` in row `kk`, 0 past the last lane (padding).
    /// Out-of-range words (never for a validated job) read as 0: no panic, and no per-word
    /// bounds check in the driver's hot loop.
    #[inline(always)]
    pub(crate) fn fill(&self, kk: usize, first: usize, row: &mut [i16]) {
        let count = self.lanes.saturating_sub(first);
        let start = kk * self.row_step + first * self.lane_step;
        let src = self.data.get(start..).unwrap_or(&[]);
        let mut words = src.iter().step_by(self.lane_step.max(1));
        // One loop for words and padding: no `memcpy`/`memset` call, whose code lies
        // elsewhere in the image and would evict the loop from the I-cache every row.
        for (l, x) in row.iter_mut().enumerate() {
            *x = match l < count {
                true => words.next().copied().unwrap_or(0),
                false => 0,
            };
        }
    }
}

impl Strided<'_> {
    /// Rows `kk0..kk0 + rows` of lanes `first..first + size` as a [`RowBlock`] of
    /// [`Strided::data`] into `bank` rows `0..rows`: the rows [`Strided::fill`] makes.
    pub(crate) fn block(
        &self,
        kk0: usize,
        first: usize,
        rows: usize,
        size: usize,
        bank: u8,
    ) -> RowBlock {
        let lanes = self.lanes.saturating_sub(first).min(size);
        RowBlock {
            bank,
            first_row: 0,
            rows: rows as u16,
            lanes: lanes as u16,
            offset: kk0 * self.row_step + first * self.lane_step,
            row_step: self.row_step,
            lane_step: self.lane_step,
        }
    }

    /// The operand's words.
    pub(crate) fn data(&self) -> &[i16] {
        self.data
    }
}

impl Feed for MatmulJob<'_> {
    fn shape(&self) -> (usize, usize, usize) {
        (self.m, self.k, self.n)
    }
    fn a(&self, i: usize, kk: usize) -> i16 {
        self.a[i * self.k + kk]
    }
    fn b(&self, kk: usize, j: usize) -> i16 {
        self.b[kk * self.n + j]
    }
}

/// A [`MatmulJob`] whose operands may be stored transposed.
pub(super) struct Views<'j, 'a> {
    pub(super) job: &'j MatmulJob<'a>,
    pub(super) transposed: Transposed,
}

impl Feed for Views<'_, '_> {
    fn shape(&self) -> (usize, usize, usize) {
        self.job.shape()
    }
    fn a(&self, i: usize, kk: usize) -> i16 {
        match self.transposed.a {
            true => self.job.a[kk * self.job.m + i],
            false => self.job.a(i, kk),
        }
    }
    fn b(&self, kk: usize, j: usize) -> i16 {
        match self.transposed.b {
            true => self.job.b[j * self.job.k + kk],
            false => self.job.b(kk, j),
        }
    }
    fn strided_a(&self) -> Option<Strided<'_>> {
        let (m, k) = (self.job.m, self.job.k);
        // A[i][kk] = a[i * k + kk]; Aᵀ stored: a[kk * m + i].
        let (row_step, lane_step) = if self.transposed.a { (m, 1) } else { (1, k) };
        Some(Strided {
            data: self.job.a,
            row_step,
            lane_step,
            lanes: m,
        })
    }
    fn strided_b(&self) -> Option<Strided<'_>> {
        let (k, n) = (self.job.k, self.job.n);
        // B[kk][j] = b[kk * n + j]; Bᵀ stored: b[j * k + kk].
        let (row_step, lane_step) = if self.transposed.b { (1, k) } else { (n, 1) };
        Some(Strided {
            data: self.job.b,
            row_step,
            lane_step,
            lanes: n,
        })
    }
}
