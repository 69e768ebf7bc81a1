//! The `n x n` output-stationary systolic array with its input skew.
//!
//! Every lane is registered once on entry (the buffers' block RAM output and the multiply in
//! different cycles), and row `r` of A enters the array `r` cycles later still and column `c`
//! of B `c` cycles (the `DelayLine`s), so that A word `k` of row `r` and B word `k` of column
//! `c` meet in PE `(r, c)` in the same cycle, `2 + r + c` cycles after the controller issued K
//! step `k`. A words and
//! the `valid`/`first`/`last` flags travel right, B words travel down. The captured results of
//! column `c` leave through the top PE (`res_top[c]`) as the column's shadow chain shifts up,
//! and `cap_bottom[c]` tells the column's converter when all `n` rows are captured.
//!
//! With `ArrayConfig::dsp_pack` the PEs of rows `2p` and `2p + 1` of each column are one
//! [`PePair`] (two MACs on one multiplier, `crate::pe_pair`), wired as the two PEs are.

use crate::pe::Pe;
use crate::pe_pair::PePair;
use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::config::{MAX_SIZE, MIN_SIZE};
use systole_core::ArrayConfig;

/// A chain of `len >= 1` registers.
#[derive(LogicBlock)]
pub struct DelayLine<T: Synth> {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Value entering the line.
    pub d_in: Signal<In, T>,
    /// `input` delayed `len` cycles.
    pub d_out: Signal<Out, T>,
    stages: Vec<DFF<T>>,
    _len: usize,
}

impl<T: Synth> DelayLine<T> {
    /// A delay of `len` clock cycles (at least 1).
    pub fn new(len: usize) -> Result<Self, HdlError> {
        if len == 0 {
            return Err(HdlError::Block(
                "a delay line needs at least one stage".into(),
            ));
        }
        Ok(Self {
            clock: Default::default(),
            d_in: Default::default(),
            d_out: Default::default(),
            stages: (0..len).map(|_| DFF::default()).collect(),
            _len: len,
        })
    }

    /// One past the delay (a loop bound in the kernel).
    fn len_end(&self) -> usize {
        self._len + 1
    }
}

impl<T: Synth> Logic for DelayLine<T> {
    #[hdl_gen]
    fn update(&mut self) {
        for i in 0..self._len {
            self.stages[i].clock.next = self.clock.val();
        }
        self.stages[0].d.next = self.d_in.val();
        for i in 1..self._len {
            self.stages[i].d.next = self.stages[i - 1].q.val();
        }
        for i in self._len..self.len_end() {
            self.d_out.next = self.stages[i - 1].q.val();
        }
    }
}

/// The systolic array (see the module docs). PE `(r, c)` is `pes[r * n + c]`, or with
/// packing a half of `pairs[(r / 2) * n + c]` (`pes` then empty).
#[derive(LogicBlock)]
pub struct Array {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset (clears the travelling flags).
    pub reset: Signal<In, Bit>,
    /// A word of K step `k` for row `r`, unskewed (straight from the A buffer lane `r`).
    pub a_in: Vec<Signal<In, Signed<16>>>,
    /// B word of K step `k` for column `c`, unskewed.
    pub b_in: Vec<Signal<In, Signed<16>>>,
    /// The words on `a_in`/`b_in` are a K step.
    pub valid_in: Signal<In, Bit>,
    /// First K step of a clearing command.
    pub first_in: Signal<In, Bit>,
    /// Last K step of an emitting command.
    pub last_in: Signal<In, Bit>,
    /// Per column: shift the shadow chain up on this edge.
    pub shift_en: Vec<Signal<In, Bit>>,
    /// Per column: the top of the shadow chain.
    pub res_top: Vec<Signal<Out, Signed<48>>>,
    /// Per column: the bottom PE captured (all rows of the column are captured).
    pub cap_bottom: Vec<Signal<Out, Bit>>,
    a_skew: Vec<DelayLine<Signed<16>>>,
    v_skew: Vec<DelayLine<Bit>>,
    f_skew: Vec<DelayLine<Bit>>,
    l_skew: Vec<DelayLine<Bit>>,
    b_skew: Vec<DelayLine<Signed<16>>>,
    pes: Vec<Pe>,
    pairs: Vec<PePair>,
    zero: Constant<Signed<48>>,
    _n: usize,
    /// `n`, or 0 with packing (the PE wiring's one-pass loop then runs no pass).
    _pe_n: usize,
    /// `n / 2` rows of pairs with packing, else 0.
    _pair_rows: usize,
}

impl Array {
    /// An `n x n` array of 16-bit words, `MIN_SIZE <= n <= MAX_SIZE`.
    pub fn new(n: usize) -> Result<Self, HdlError> {
        Self::at(n, systole_core::numeric::WORD_BITS)
    }

    /// An `n x n` array whose PEs compute with `W`-bit words ([`Pe::at`]).
    pub fn at(n: usize, word_bits: u32) -> Result<Self, HdlError> {
        Self::build(n, word_bits, false)
    }

    /// The array of `cfg` (checked): its size and `W`, its PEs paired with `cfg.dsp_pack`.
    pub fn of(cfg: &ArrayConfig) -> Result<Self, HdlError> {
        cfg.validate_built().map_err(HdlError::Config)?;
        Self::build(cfg.size, cfg.word_bits, cfg.dsp_pack)
    }

    fn build(n: usize, word_bits: u32, pack: bool) -> Result<Self, HdlError> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&n) {
            return Err(HdlError::Block(format!(
                "systolic array of size {n}: must be {MIN_SIZE}..={MAX_SIZE}"
            )));
        }
        let sigs = |_| Signal::default();
        Ok(Self {
            clock: Default::default(),
            reset: Default::default(),
            a_in: (0..n).map(sigs).collect(),
            b_in: (0..n).map(sigs).collect(),
            valid_in: Default::default(),
            first_in: Default::default(),
            last_in: Default::default(),
            shift_en: (0..n).map(|_| Signal::default()).collect(),
            res_top: (0..n).map(|_| Signal::default()).collect(),
            cap_bottom: (0..n).map(|_| Signal::default()).collect(),
            a_skew: (1..=n).map(DelayLine::new).collect::<Result<_, _>>()?,
            v_skew: (1..=n).map(DelayLine::new).collect::<Result<_, _>>()?,
            f_skew: (1..=n).map(DelayLine::new).collect::<Result<_, _>>()?,
            l_skew: (1..=n).map(DelayLine::new).collect::<Result<_, _>>()?,
            b_skew: (1..=n).map(DelayLine::new).collect::<Result<_, _>>()?,
            pes: (0..if pack { 0 } else { n * n })
                .map(|_| Pe::at(word_bits))
                .collect(),
            pairs: (0..if pack { n / 2 * n } else { 0 })
                .map(|_| PePair::at(word_bits))
                .collect(),
            zero: Constant::new(Signed::default()),
            _n: n,
            _pe_n: if pack { 0 } else { n },
            _pair_rows: if pack { n / 2 } else { 0 },
        })
    }

    /// One past the size (a loop bound in the kernel, which binds `n` through a one-pass
    /// loop); no pass with packing.
    fn n_end(&self) -> usize {
        match self._pe_n {
            0 => 0,
            n => n + 1,
        }
    }

    /// One past the pair rows (binds their count through a one-pass loop).
    fn pair_rows_end(&self) -> usize {
        self._pair_rows + 1
    }

    /// The pair wiring's one-pass loop: `_n..pair_n_end()` is one pass with packing, else none.
    fn pair_n_end(&self) -> usize {
        match self._pair_rows {
            0 => self._n,
            _ => self._n + 1,
        }
    }
}

impl Logic for Array {
    #[hdl_gen]
    fn update(&mut self) {
        // Line `i` delays row/column `i` by `i + 1` cycles: one register between the buffers'
        // read ports and the array for every lane (the block RAM's output and the multiply are
        // then in different cycles), then the skew.
        for i in 0..self._n {
            self.a_skew[i].clock.next = self.clock.val();
            self.v_skew[i].clock.next = self.clock.val();
            self.f_skew[i].clock.next = self.clock.val();
            self.l_skew[i].clock.next = self.clock.val();
            self.b_skew[i].clock.next = self.clock.val();
            self.a_skew[i].d_in.next = self.a_in[i].val();
            self.v_skew[i].d_in.next = self.valid_in.val();
            self.f_skew[i].d_in.next = self.first_in.val();
            self.l_skew[i].d_in.next = self.last_in.val();
            self.b_skew[i].d_in.next = self.b_in[i].val();
        }
        // `n` is bound by a one-pass loop so that index expressions can use it.
        for n in self._pe_n..self.n_end() {
            for r in 0..self._n {
                for c in 0..self._n {
                    self.pes[r * n + c].clock.next = self.clock.val();
                    self.pes[r * n + c].reset.next = self.reset.val();
                    self.pes[r * n + c].shift_en.next = self.shift_en[c].val();
                }
            }
            for r in 0..self._n {
                self.pes[r * n].a_in.next = self.a_skew[r].d_out.val();
                self.pes[r * n].valid_in.next = self.v_skew[r].d_out.val();
                self.pes[r * n].first_in.next = self.f_skew[r].d_out.val();
                self.pes[r * n].last_in.next = self.l_skew[r].d_out.val();
                self.pes[r].b_in.next = self.b_skew[r].d_out.val();
            }
            for r in 0..self._n {
                for c in 1..self._n {
                    self.pes[r * n + c].a_in.next = self.pes[r * n + c - 1].a_out.val();
                    self.pes[r * n + c].valid_in.next = self.pes[r * n + c - 1].valid_out.val();
                    self.pes[r * n + c].first_in.next = self.pes[r * n + c - 1].first_out.val();
                    self.pes[r * n + c].last_in.next = self.pes[r * n + c - 1].last_out.val();
                }
            }
            for c in 0..self._n {
                self.res_top[c].next = self.pes[c].res.val();
                self.cap_bottom[c].next = self.pes[(n - 1) * n + c].captured.val();
                self.pes[(n - 1) * n + c].res_in.next = self.zero.val();
            }
            for r in 1..self._n {
                for c in 0..self._n {
                    self.pes[r * n + c].b_in.next = self.pes[(r - 1) * n + c].b_out.val();
                    self.pes[(r - 1) * n + c].res_in.next = self.pes[r * n + c].res.val();
                }
            }
        }
        // With packing: pair `p` holds rows `2p` (`u_*`) and `2p + 1` (`l_*`), wired as they are.
        for n in self._n..self.pair_n_end() {
            for p in 0..self._pair_rows {
                for c in 0..self._n {
                    self.pairs[p * n + c].clock.next = self.clock.val();
                    self.pairs[p * n + c].reset.next = self.reset.val();
                    self.pairs[p * n + c].shift_en.next = self.shift_en[c].val();
                }
            }
            for c in 0..self._n {
                self.pairs[c].b_in.next = self.b_skew[c].d_out.val();
            }
            for p in 0..self._pair_rows {
                self.pairs[p * n].u_a_in.next = self.a_skew[2 * p].d_out.val();
                self.pairs[p * n].u_valid_in.next = self.v_skew[2 * p].d_out.val();
                self.pairs[p * n].u_first_in.next = self.f_skew[2 * p].d_out.val();
                self.pairs[p * n].u_last_in.next = self.l_skew[2 * p].d_out.val();
                self.pairs[p * n].l_a_in.next = self.a_skew[2 * p + 1].d_out.val();
                self.pairs[p * n].l_valid_in.next = self.v_skew[2 * p + 1].d_out.val();
                self.pairs[p * n].l_first_in.next = self.f_skew[2 * p + 1].d_out.val();
                self.pairs[p * n].l_last_in.next = self.l_skew[2 * p + 1].d_out.val();
                for c in 1..self._n {
                    self.pairs[p * n + c].u_a_in.next = self.pairs[p * n + c - 1].u_a_out.val();
                    self.pairs[p * n + c].u_valid_in.next =
                        self.pairs[p * n + c - 1].u_valid_out.val();
                    self.pairs[p * n + c].u_first_in.next =
                        self.pairs[p * n + c - 1].u_first_out.val();
                    self.pairs[p * n + c].u_last_in.next =
                        self.pairs[p * n + c - 1].u_last_out.val();
                    self.pairs[p * n + c].l_a_in.next = self.pairs[p * n + c - 1].l_a_out.val();
                    self.pairs[p * n + c].l_valid_in.next =
                        self.pairs[p * n + c - 1].l_valid_out.val();
                    self.pairs[p * n + c].l_first_in.next =
                        self.pairs[p * n + c - 1].l_first_out.val();
                    self.pairs[p * n + c].l_last_in.next =
                        self.pairs[p * n + c - 1].l_last_out.val();
                }
            }
            for c in 0..self._n {
                self.res_top[c].next = self.pairs[c].res.val();
            }
            for h in self._pair_rows..self.pair_rows_end() {
                for c in 0..self._n {
                    self.cap_bottom[c].next = self.pairs[(h - 1) * n + c].captured.val();
                    self.pairs[(h - 1) * n + c].res_in.next = self.zero.val();
                }
            }
            for p in 1..self._pair_rows {
                for c in 0..self._n {
                    self.pairs[p * n + c].b_in.next = self.pairs[(p - 1) * n + c].b_out.val();
                    self.pairs[(p - 1) * n + c].res_in.next = self.pairs[p * n + c].res.val();
                }
            }
        }
    }
}
