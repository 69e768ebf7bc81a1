//! W-bit dynamic fixed point (W from 8 to 16, [`crate::width`]): every matrix product and convolution runs on a [`Products`]
//! backend (the array); bias, ReLU, pooling and the SGD update run here, on the host or the
//! board's CPU, under the same contract.
//!
//! # How fractional bits are chosen (dynamic fixed point)
//!
//! * **Host-side results** (inputs, loss gradients, bias adds, bias gradients, momentum and
//!   weights after an update) are converted from values the host knows exactly, so each gets the
//!   largest `frac` (at most `W - 1`) for which its largest magnitude still fits a word
//!   ([`frac_for_exact_at`]): the full W bits are used every time.
//! * **Device results** must have their `frac` chosen before the device runs. Each operation
//!   (named like `layer 2 backward dW`) remembers the `frac` it used last. The first time, a safe
//!   bound is used (`max|A|·max|B|·K`). After each run: if any output word is saturated, the
//!   operation is run again with one bit less (a fresh seed, still deterministic); if the largest
//!   output magnitude is below `2^(W-3)` (`2^13` at 16 bits), the next step uses enough more
//!   bits to bring it into `[2^(W-3), 2^(W-2))`, leaving one bit of headroom for growth.
//!
//! A reduction longer than the device limit runs as chunks (the contract's "Long reductions"
//! rule, `systole_core::split`): each chunk starts at the operation's remembered `frac` and retries on
//! its own; the operation remembers the smallest `frac` its chunks would use next. Retries and
//! the saturated words of kept results are counted per operation name
//! ([`SaturationCount`], reported in `run.json` and after each epoch).
//!
//! Weights are W-bit words unless the run keeps master weights wider ([`Widths::master`]: the
//! weights and momentum the update writes are then `master`-bit words, rounded to W bits right
//! before each product): updates smaller than one unit in the last place survive only through
//! stochastic rounding, which is why it is the default. The SGD update is `v = m·v + g`, `w = w - lr·v` with `m` quantized to 15 and `lr`
//! to 16 fractional bits, each result formed exactly and converted once.
//!
//! Three files, each using only the ones before it: this one holds `Fixed`'s state, seeds and
//! conversions; `offload.rs` its offloaded product (the frac rule, retries and chunks);
//! `fixed_arith.rs` the [`Arith`](crate::Arith) operations on both.

use crate::seeds::{op_seed, shard_run_seed};
use crate::width::{fits, frac_for_exact_at, frac_for_max_at, saturate_to, Widths};
use crate::{numeric, Products};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use systole_core::elementwise::{convert_each, convert_each32, convert_sequential};
use systole_core::tensor::{OutputSpec, QMatrix};
use systole_core::Rounding;

pub use crate::arith::SaturationCount;

/// Largest `frac` in `0..=MAX_FRAC` at which `max_abs` fits a 16-bit word (`MAX_FRAC` for
/// zero): [`frac_for_max_at`] at 16 bits.
pub fn frac_for_max(max_abs: f64) -> u32 {
    frac_for_max_at(max_abs, systole_core::numeric::WORD_BITS)
}

/// Largest output `frac` for exact integers with `frac_in` fractional bits and largest
/// magnitude `max_abs`, within the contract's shift range `0..=MAX_SHIFT`: [`frac_for_exact_at`]
/// at 16 bits.
pub fn frac_for_exact(max_abs: i64, frac_in: u32) -> u32 {
    frac_for_exact_at(max_abs, frac_in, systole_core::numeric::WORD_BITS)
}

/// [`Arith`](crate::Arith) in W-bit fixed point, offloading products to `P`.
pub struct Fixed<P> {
    pub(crate) products: P,
    pub(crate) widths: Widths,
    pub(crate) rounding: Rounding,
    run_seed: u64,
    step: u64,
    op_index: u32,
    /// Shard of a sharded (data-parallel) step, see [`Fixed::begin_shard`].
    shard: Option<u32>,
    /// Remembered `frac` per operation (see the module docs).
    pub fracs: BTreeMap<String, u32>,
    /// Saturation counters per operation name (this process's operations).
    pub(crate) saturation: BTreeMap<String, SaturationCount>,
}

impl<P: Products> Fixed<P> {
    /// 16-bit fixed-point arithmetic with products on `products`, conversions rounded by
    /// `rounding`, seeds derived from `run_seed`.
    pub fn new(products: P, rounding: Rounding, run_seed: u64) -> Self {
        Self::with_widths(products, rounding, run_seed, Widths::FULL)
    }

    /// [`Fixed::new`] with words of `widths.word()` bits and master weights of
    /// `widths.master()`.
    pub fn with_widths(products: P, rounding: Rounding, run_seed: u64, widths: Widths) -> Self {
        Fixed {
            products,
            widths,
            rounding,
            run_seed,
            step: 0,
            op_index: 0,
            shard: None,
            fracs: BTreeMap::new(),
            saturation: BTreeMap::new(),
        }
    }

    /// The products' backend (the host reads its device's statistics).
    pub fn products(&self) -> &P {
        &self.products
    }

    /// The products' backend, to use its device otherwise (a board that trains itself).
    pub fn products_mut(&mut self) -> &mut P {
        &mut self.products
    }

    /// Adds counts of operations run elsewhere (a board that trained on its own copy of this
    /// arithmetic) to this one's, per operation name.
    pub fn add_saturation(&mut self, counts: &BTreeMap<String, SaturationCount>) {
        for (op, c) in counts {
            self.saturation.entry(op.clone()).or_default().add(c);
        }
    }

    /// The next operation's seed (from the run seed, the step or shard and the op index).
    pub(crate) fn next_seed(&mut self) -> u32 {
        let run_seed = match self.shard {
            None => self.run_seed,
            Some(k) => shard_run_seed(self.run_seed, k),
        };
        let s = op_seed(run_seed, self.step, self.op_index);
        self.op_index += 1;
        s
    }

    /// Starts shard `shard` of training step `step` (or, with `None`, the step's shared part:
    /// gradient conversion and update). Seeds and remembered fractional bits are kept per shard,
    /// so a shard's history does not depend on which other shards this process computed.
    pub fn begin_shard(&mut self, step: u64, shard: Option<u32>) {
        self.step = step;
        self.op_index = 0;
        self.shard = shard;
    }

    /// How many seeds the current step (or shard) has drawn: where a pipeline stage hands its
    /// work to the next one, which goes on with [`Fixed::continue_at`].
    pub fn op_index(&self) -> u32 {
        self.op_index
    }

    /// Goes on with shard `shard` of step `step` (see [`Fixed::begin_shard`]) after its first
    /// `op_index` seeds were drawn (by another stage of a pipeline, maybe in another process),
    /// so its operations get the seeds they get in one process.
    pub fn continue_at(&mut self, step: u64, shard: Option<u32>, op_index: u32) {
        self.begin_shard(step, shard);
        self.op_index = op_index;
    }

    /// Key of an operation's remembered `frac`.
    pub(crate) fn frac_key(&self, op: &str) -> String {
        match self.shard {
            None => String::from(op),
            Some(k) => shard_key(k, op),
        }
    }

    /// The word and master widths.
    pub fn widths(&self) -> Widths {
        self.widths
    }

    /// W.
    pub(crate) fn w(&self) -> u32 {
        self.widths.word()
    }

    /// Converts exact integers with `frac_in` (at most 47) fractional bits, e.g. a summed
    /// gradient, to a W-bit tensor with the usual host-side rule (largest frac that fits).
    pub fn from_exact(
        &mut self,
        op: &str,
        rows: usize,
        cols: usize,
        v: &[i64],
        frac_in: u32,
    ) -> Result<QMatrix, P::Error> {
        let w = self.w();
        let m = v.iter().map(|x| x.abs()).max().unwrap_or(0);
        let frac = frac_for_exact_at(m, frac_in, w);
        let seed = self.next_seed();
        let data = if m <= i64::from(i32::MAX) {
            // Every value fits i32: converted in 32-bit arithmetic, the same words.
            convert_each32(
                v.iter().map(|&x| x as i32),
                frac_in - frac,
                self.rounding,
                seed,
            )
        } else {
            convert_sequential(v, frac_in - frac, self.rounding, seed)
        };
        let q = QMatrix::from_vec(rows, cols, frac, data).map_err(numeric(op))?;
        Ok(saturate_to(q, w))
    }

    /// `q` as W-bit words: itself when it fits, else (a master-width weight) rounded to the
    /// largest `frac` at which it fits W bits, with its own seed.
    pub(crate) fn narrow<'q>(
        &mut self,
        op: &str,
        q: &'q QMatrix,
    ) -> Result<alloc::borrow::Cow<'q, QMatrix>, P::Error> {
        use alloc::borrow::Cow;
        let w = self.w();
        if fits(q, w) {
            return Ok(Cow::Borrowed(q));
        }
        let m = q.data.iter().map(|&x| (x as i64).abs()).max().unwrap_or(0);
        let frac = frac_for_exact_at(m, q.frac, w);
        let seed = self.next_seed();
        let exact = q.data.iter().map(|&x| x as i64);
        let data = convert_each(exact, q.frac - frac, self.rounding, seed);
        let n = QMatrix::from_vec(q.rows, q.cols, frac, data).map_err(numeric(op))?;
        Ok(Cow::Owned(saturate_to(n, w)))
    }

    pub(crate) fn spec(&mut self, frac: u32) -> OutputSpec {
        OutputSpec {
            frac,
            rounding: self.rounding,
            seed: self.next_seed(),
        }
    }
}

/// Key under which shard `k` remembers the `frac` of operation `op`.
pub fn shard_key(k: u32, op: &str) -> String {
    format!("shard {k}: {op}")
}

/// Adds a tensor's words, as exact integers with `frac` (>= its own) fractional bits, to `sum`:
/// how shard gradients and the chunks of a split reduction are combined.
pub fn add_exact_at(sum: &mut [i64], t: &QMatrix, frac: u32) {
    for (s, &w) in sum.iter_mut().zip(&t.data) {
        *s += (w as i64) << (frac - t.frac);
    }
}
