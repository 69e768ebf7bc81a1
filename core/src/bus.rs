//! [`AcceleratorBus`]: the narrow interface to one accelerator instance.
//!
//! Two kinds of traffic: 32-bit registers (see [`crate::regmap`]) and row-wide buffer ports that
//! move one row of `size` words per clock. Implemented by the Verilator model (`systole-sim`),
//! by the firmware's MMIO layer on a board, and by test doubles. The tile driver in
//! `systole-firmware` is written once against this trait.

/// One row written into an A or B buffer bank.
#[derive(Clone, Copy, Debug)]
pub struct RowWrite<'a> {
    /// Bank 0 or 1 (double buffering: the host fills one while a command reads the other).
    pub bank: u8,
    /// Row index `k` within the bank, `< buffer_depth`.
    pub row: u16,
    /// `size` words, lane 0 first.
    pub data: &'a [i16],
}

/// One C-buffer row to read.
#[derive(Clone, Copy, Debug)]
pub struct RowRead {
    /// Bank 0 or 1.
    pub bank: u8,
    /// Row `r` of the output tile, `< size`.
    pub row: u16,
}

/// Everything that may happen on the buffer ports in one clock cycle.
#[derive(Clone, Copy, Debug, Default)]
pub struct Beat<'a> {
    /// A row to write into an A bank.
    pub a: Option<RowWrite<'a>>,
    /// A row to write into a B bank.
    pub b: Option<RowWrite<'a>>,
    /// A C row to read; its words are returned by [`AcceleratorBus::beat`].
    pub c: Option<RowRead>,
}

/// Which buffer a [`RowBlock`] is written into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockTarget {
    /// An A bank.
    A,
    /// A B bank.
    B,
}

/// Rows moved between memory and a buffer bank in one request ([`AcceleratorBus::write_block`],
/// [`AcceleratorBus::read_block`]): row `r`, lane `l` is element
/// `offset + r * row_step + l * lane_step` of the memory slice, so a transposed view or a tile
/// of a larger matrix needs no copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowBlock {
    /// Bank 0 or 1.
    pub bank: u8,
    /// Buffer row of the block's row 0 (A/B: `< buffer_depth`; C: row of the tile, `< size`).
    pub first_row: u16,
    /// Rows moved.
    pub rows: u16,
    /// Lanes that come from memory (A/B: the others are 0) or go to it (C: the others are not
    /// stored); at most the array size.
    pub lanes: u16,
    /// Element of row 0, lane 0.
    pub offset: usize,
    /// Elements from one row to the next.
    pub row_step: usize,
    /// Elements from one lane to the next.
    pub lane_step: usize,
}

impl RowBlock {
    /// Index of element `(r, l)`, `None` when it overflows.
    pub fn index(&self, r: usize, l: usize) -> Option<usize> {
        self.offset
            .checked_add(r.checked_mul(self.row_step)?)?
            .checked_add(l.checked_mul(self.lane_step)?)
    }

    /// One past the largest element index the block touches (`Some(0)` when it touches none),
    /// `None` when an index overflows: the block fits a slice of at least this many elements.
    pub fn end(&self) -> Option<usize> {
        if self.rows == 0 || self.lanes == 0 {
            return Some(0);
        }
        self.index(usize::from(self.rows) - 1, usize::from(self.lanes) - 1)?
            .checked_add(1)
    }
}

/// One whole product `C = op(A)·op(B)` for a bus that runs it in one command
/// ([`AcceleratorBus::run_product`], the SoC's product sequencer): `op(A)[i][k]` is element
/// `i·a_steps[0] + k·a_steps[1]` of A's slice, `op(B)[k][j]` element `k·b_steps[0] +
/// j·b_steps[1]` of B's, `C[i][j]` element `i·c_steps[0] + j·c_steps[1]` of C's; so an operand
/// stored transposed is the same job with its two steps swapped. Tiles, seeds and the one
/// conversion are the numeric contract's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductJob {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// The dot-product length.
    pub k: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Element steps of `op(A)` along `i` and `k`.
    pub a_steps: [usize; 2],
    /// Element steps of `op(B)` along `k` and `j`.
    pub b_steps: [usize; 2],
    /// Element steps of `C` along `i` and `j`.
    pub c_steps: [usize; 2],
    /// Output right shift, `0..=MAX_SHIFT`.
    pub shift: u32,
    /// Rounding code (`Rounding::code`).
    pub rounding: u32,
    /// Operation seed (tile `(i0, j0)` converts with `tile_seed(seed, i0, j0)`).
    pub seed: u32,
}

impl ProductJob {
    /// One past the largest element index each of A, B and C touches (`None`: it overflows,
    /// `Some(0)` for an empty product), so each slice must hold at least that many elements.
    pub fn ends(&self) -> [Option<usize>; 3] {
        let end = |rows: usize, cols: usize, [sr, sc]: [usize; 2]| -> Option<usize> {
            if rows == 0 || cols == 0 {
                return Some(0);
            }
            (rows - 1)
                .checked_mul(sr)?
                .checked_add((cols - 1).checked_mul(sc)?)?
                .checked_add(1)
        };
        [
            end(self.m, self.k, self.a_steps),
            end(self.k, self.n, self.b_steps),
            end(self.m, self.n, self.c_steps),
        ]
    }
}

/// Access to one accelerator.
pub trait AcceleratorBus {
    /// Transport error (a simulator fault, a dropped serial link, ...).
    type Error;

    /// Reads a register. Takes no clock cycle on the simulator.
    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error>;

    /// Writes a register; takes one clock cycle.
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error>;

    /// One clock cycle on the buffer ports: writes `beat.a` and `beat.b`, and if `beat.c` is set
    /// copies that C row (`size` words) into `c_out`, which must then be `size` long.
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error>;

    /// Lets `cycles` clock cycles pass with nothing on the ports.
    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error>;

    /// Writes `words` into the feature-map buffer of the conv unit at word addresses
    /// `addr..addr + words.len()` (below `fm_depth`), one row of `ArrayConfig::fm_row_words`
    /// words per clock: `addr` and `words.len()` must be multiples of that row width.
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error>;

    /// Writes one A row (one cycle).
    fn write_a_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                a: Some(RowWrite { bank, row, data }),
                ..Beat::default()
            },
            &mut [],
        )
    }

    /// Writes one B row (one cycle).
    fn write_b_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                b: Some(RowWrite { bank, row, data }),
                ..Beat::default()
            },
            &mut [],
        )
    }

    /// Reads one C row (one cycle).
    fn read_c_row(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                c: Some(RowRead { bank, row }),
                ..Beat::default()
            },
            out,
        )
    }

    /// True when [`AcceleratorBus::write_block`] and [`AcceleratorBus::read_block`] move their
    /// rows without the caller (the SoC's row DMA), so a block costs about what one register
    /// write does: a driver then prefers them to beats.
    fn moves_blocks(&self) -> bool {
        false
    }

    /// Writes `block.rows` rows of a `size`-lane array into bank rows `first_row..` of
    /// `target`, from `mem` as `block` lays it out. The provided version writes a row a beat;
    /// an index past `mem` reads 0 and a row past `u16::MAX` is not written (a caller checks
    /// the block against `mem` first: [`RowBlock::end`]).
    fn write_block(
        &mut self,
        target: BlockTarget,
        block: &RowBlock,
        size: usize,
        mem: &[i16],
    ) -> Result<(), Self::Error> {
        write_block_by_rows(self, target, block, size, mem)
    }

    /// Reads C rows `first_row..` of bank `block.bank` (a `size`-lane array) into `mem` as
    /// `block` lays it out, storing only `block.lanes` lanes a row. The provided version reads
    /// a row a beat; an index past `mem` is not stored.
    fn read_block(
        &mut self,
        block: &RowBlock,
        size: usize,
        mem: &mut [i16],
    ) -> Result<(), Self::Error> {
        read_block_by_rows(self, block, size, mem)
    }

    /// True when [`AcceleratorBus::run_product`] runs a whole product in one command (the
    /// SoC's product sequencer): a driver then hands it every product it would tile itself.
    fn runs_products(&self) -> bool {
        false
    }

    /// Runs `job` from `a` and `b` into `c` in one command. `Ok(None)`: this bus has no
    /// product sequencer (nothing done); `Ok(Some(status))`: the sequencer's status word, 0
    /// when `c` holds the product (else its error bits, `systole_core::soc::MM_ERR_*`).
    fn run_product(
        &mut self,
        job: &ProductJob,
        a: &[i16],
        b: &[i16],
        c: &mut [i16],
    ) -> Result<Option<u32>, Self::Error> {
        let _ = (job, a, b, c);
        Ok(None)
    }
}

/// [`AcceleratorBus::write_block`] a row a beat (its provided version, for a bus without a
/// DMA).
pub fn write_block_by_rows<B: AcceleratorBus + ?Sized>(
    bus: &mut B,
    target: BlockTarget,
    block: &RowBlock,
    size: usize,
    mem: &[i16],
) -> Result<(), B::Error> {
    let mut row = [0i16; crate::config::MAX_SIZE];
    let size = size.min(row.len());
    for r in 0..usize::from(block.rows) {
        for (l, x) in row[..size].iter_mut().enumerate() {
            let inside = l < usize::from(block.lanes);
            let at = block.index(r, l).filter(|_| inside);
            *x = at.and_then(|i| mem.get(i)).copied().unwrap_or(0);
        }
        let Some(at) = u16::try_from(r)
            .ok()
            .and_then(|r| block.first_row.checked_add(r))
        else {
            break;
        };
        match target {
            BlockTarget::A => bus.write_a_row(block.bank, at, &row[..size])?,
            BlockTarget::B => bus.write_b_row(block.bank, at, &row[..size])?,
        }
    }
    Ok(())
}

/// [`AcceleratorBus::read_block`] a row a beat (its provided version).
pub fn read_block_by_rows<B: AcceleratorBus + ?Sized>(
    bus: &mut B,
    block: &RowBlock,
    size: usize,
    mem: &mut [i16],
) -> Result<(), B::Error> {
    let mut row = [0i16; crate::config::MAX_SIZE];
    let size = size.min(row.len());
    for r in 0..usize::from(block.rows) {
        let Some(at) = u16::try_from(r)
            .ok()
            .and_then(|r| block.first_row.checked_add(r))
        else {
            break;
        };
        bus.read_c_row(block.bank, at, &mut row[..size])?;
        let lanes = usize::from(block.lanes).min(size);
        for (l, &x) in row[..lanes].iter().enumerate() {
            if let Some(slot) = block.index(r, l).and_then(|i| mem.get_mut(i)) {
                *slot = x;
            }
        }
    }
    Ok(())
}

/// A borrowed bus is a bus: the board's server lends its bus to the training step for one
/// request (`systole_firmware`'s `BoardProducts<&mut B>`). Every method forwards, the provided
/// ones too, so a bus's own row methods are kept.
impl<T: AcceleratorBus + ?Sized> AcceleratorBus for &mut T {
    type Error = T::Error;

    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error> {
        (**self).read_reg(addr)
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error> {
        (**self).write_reg(addr, value)
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error> {
        (**self).beat(beat, c_out)
    }
    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error> {
        (**self).idle(cycles)
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error> {
        (**self).write_fm(addr, words)
    }
    fn write_a_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        (**self).write_a_row(bank, row, data)
    }
    fn write_b_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        (**self).write_b_row(bank, row, data)
    }
    fn read_c_row(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), Self::Error> {
        (**self).read_c_row(bank, row, out)
    }
    fn moves_blocks(&self) -> bool {
        (**self).moves_blocks()
    }
    fn write_block(
        &mut self,
        target: BlockTarget,
        block: &RowBlock,
        size: usize,
        mem: &[i16],
    ) -> Result<(), Self::Error> {
        (**self).write_block(target, block, size, mem)
    }
    fn read_block(
        &mut self,
        block: &RowBlock,
        size: usize,
        mem: &mut [i16],
    ) -> Result<(), Self::Error> {
        (**self).read_block(block, size, mem)
    }
    fn runs_products(&self) -> bool {
        (**self).runs_products()
    }
    fn run_product(
        &mut self,
        job: &ProductJob,
        a: &[i16],
        b: &[i16],
        c: &mut [i16],
    ) -> Result<Option<u32>, Self::Error> {
        (**self).run_product(job, a, b, c)
    }
}
