//! [`MmioBus`]: the accelerator behind the SoC's MMIO windows.

use crate::mmio::{block_fits, Regs};
#[cfg(any(feature = "step", test))]
use systole_core::bus::ProductJob;
use systole_core::bus::{Beat, BlockTarget, RowBlock, RowWrite};
use systole_core::soc::{
    ACC_REGS, C_STAGE, ROW_CMD, ROW_CMD_BANK, ROW_CMD_KIND, ROW_CMD_ROW, ROW_KIND_READ_C,
    ROW_KIND_WRITE_A, ROW_KIND_WRITE_B, ROW_KIND_WRITE_FM, ROW_STAGE, STAGE_WORDS, SYS_FEATURES,
    SYS_FEATURE_DMA, TIMER_LO,
};
use systole_core::{regmap, AcceleratorBus, ArrayConfig, ConfigError};

/// Why the MMIO bus refused an access (nothing was written to the accelerator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MmioError {
    /// The accelerator's `CONFIG` register describes no valid array.
    Config(ConfigError),
    /// The array is wider than the SoC's row stage.
    TooWide {
        /// Lanes of the array.
        size: usize,
        /// Lanes the row stage holds.
        stage_lanes: usize,
    },
    /// A row or C-row buffer is not `size` words long.
    RowLength {
        /// Words given.
        len: usize,
        /// The array size.
        size: usize,
    },
    /// Bank other than 0 or 1.
    Bank(u8),
    /// A feature-map write not in whole rows of `row_words`, or beyond `fm_depth`.
    FmRange {
        /// First word address.
        addr: u32,
        /// Words.
        len: usize,
        /// Words per feature-map row.
        row_words: usize,
        /// Words of the feature map (0: no conv unit).
        fm_depth: usize,
    },
    /// A block of rows that does not lie inside its memory, or has more lanes than the array.
    Block {
        /// One past the block's last element (`None`: it overflows).
        end: Option<usize>,
        /// Elements of the memory.
        len: usize,
        /// Lanes of the block.
        lanes: u16,
    },
    /// A block of rows on a SoC without the row DMA (`SYS_FEATURES`; the driver asks
    /// `moves_blocks` first and writes rows through the stage instead), or one that the
    /// register file did not run.
    NoDma,
    /// A product for the sequencer whose operand `which` (`"a"`, `"b"` or `"c"`) does not lie
    /// inside its slice, or whose steps do not fit its 32-bit registers: nothing ran.
    Product {
        /// The operand.
        which: &'static str,
        /// One past its last element (`None`: it overflows).
        end: Option<usize>,
        /// Elements of its slice.
        len: usize,
    },
    /// A product on a SoC without the product sequencer, or one the register file did not run.
    NoSequencer,
}

impl core::fmt::Display for MmioError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            MmioError::Config(_) => f.write_str("the accelerator's CONFIG register is invalid"),
            MmioError::TooWide { size, stage_lanes } => write!(
                f,
                "a {size}-lane array does not fit the SoC's {stage_lanes}-lane row stage"
            ),
            MmioError::RowLength { len, size } => {
                write!(f, "row of {len} words for a {size}-lane array")
            }
            MmioError::Bank(b) => write!(f, "bank {b} (must be 0 or 1)"),
            MmioError::FmRange {
                addr,
                len,
                row_words,
                fm_depth,
            } => write!(
                f,
                "feature-map write of {len} words at {addr} is not whole {row_words}-word rows \
                 within {fm_depth} words"
            ),
            MmioError::Block { .. } => {
                f.write_str("a block of rows outside its memory or wider than the array")
            }
            MmioError::NoDma => f.write_str("no row DMA ran the block (SYS_FEATURES)"),
            MmioError::Product { which, end, len } => match end {
                Some(end) => write!(
                    f,
                    "a product's operand {which} reaches element {end} of a {len}-element slice"
                ),
                None => write!(f, "a product's operand {which} overflows the address space"),
            },
            MmioError::NoSequencer => {
                f.write_str("no product sequencer ran the product (SYS_FEATURES)")
            }
        }
    }
}

impl core::error::Error for MmioError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            MmioError::Config(e) => Some(e),
            _ => None,
        }
    }
}

/// The accelerator on the SoC's bus.
pub struct MmioBus<R> {
    regs: R,
    config: ArrayConfig,
    /// The SoC has the row DMA (`SYS_FEATURES`): blocks of rows move without the CPU.
    dma: bool,
    /// The SoC has the product sequencer (`SYS_FEATURES`), and this build drives it (the
    /// training image and tests: the serving image has no room for its code).
    #[cfg(any(feature = "step", test))]
    mm: bool,
}

impl<R: Regs> MmioBus<R> {
    /// The accelerator as its `CONFIG` register describes it, with the row DMA when
    /// `SYS_FEATURES` announces one (a SoC built before it reads 0 there).
    pub fn probe(mut regs: R) -> Result<Self, MmioError> {
        let word = regs.read32(reg_addr(regmap::CONFIG));
        let config = ArrayConfig::from_config_word(word);
        config.validate().map_err(MmioError::Config)?;
        let features = regs.read32(SYS_FEATURES);
        let dma = SYS_FEATURE_DMA.get(features) != 0;
        let bus = Self::new(regs, config)?.with_dma(dma);
        #[cfg(any(feature = "step", test))]
        let bus = bus.with_sequencer(systole_core::soc::SYS_FEATURE_MM.get(features) != 0);
        Ok(bus)
    }

    /// The same bus handing whole products to the product sequencer (`true`) or not.
    #[cfg(any(feature = "step", test))]
    pub fn with_sequencer(mut self, mm: bool) -> Self {
        self.mm = mm;
        self
    }

    /// The same bus using the row DMA for blocks of rows (`true`) or the row stage (`false`).
    pub fn with_dma(mut self, dma: bool) -> Self {
        self.dma = dma;
        self
    }

    /// Whether blocks of rows go through the row DMA.
    pub fn has_dma(&self) -> bool {
        self.dma
    }

    /// The accelerator described by `config`.
    pub fn new(regs: R, config: ArrayConfig) -> Result<Self, MmioError> {
        let stage_lanes = 2 * STAGE_WORDS as usize;
        if config.size > stage_lanes {
            return Err(MmioError::TooWide {
                size: config.size,
                stage_lanes,
            });
        }
        Ok(MmioBus {
            regs,
            config,
            dma: false,
            #[cfg(any(feature = "step", test))]
            mm: false,
        })
    }

    /// The array this bus drives.
    pub fn config(&self) -> &ArrayConfig {
        &self.config
    }

    /// The register file.
    pub fn regs(&mut self) -> &mut R {
        &mut self.regs
    }

    fn check_row(&self, w: &RowWrite<'_>) -> Result<(), MmioError> {
        check_bank(w.bank)?;
        self.check_len(w.data.len())
    }

    fn check_len(&self, len: usize) -> Result<(), MmioError> {
        if len != self.config.size {
            return Err(MmioError::RowLength {
                len,
                size: self.config.size,
            });
        }
        Ok(())
    }

    /// Fills the row stage with `data` (lanes `2i`, `2i + 1` in word `i`).
    /// One 32-bit store a lane pair, no per-word branch (the hot loop of every product).
    #[inline(always)]
    fn stage(&mut self, data: &[i16]) {
        let pairs = data.chunks_exact(2);
        let odd = pairs.remainder().first();
        let mut addr = ROW_STAGE;
        for pair in pairs {
            self.regs.write32(addr, lane_pair(pair[0], pair[1]));
            addr += 4;
        }
        if let Some(&lo) = odd {
            self.regs.write32(addr, lane_pair(lo, 0));
        }
    }

    fn command(&mut self, kind: u32, bank: u8, row: u32) {
        self.regs.write32(ROW_CMD, row_command(kind, bank, row));
    }

    /// Checks `block` against the array and a memory of `len` elements.
    fn check_block(&self, block: &RowBlock, size: usize, len: usize) -> Result<(), MmioError> {
        if !self.dma {
            return Err(MmioError::NoDma);
        }
        check_bank(block.bank)?;
        self.check_len(size)?;
        if !block_fits(block, len) || usize::from(block.lanes) > size {
            return Err(MmioError::Block {
                end: block.end(),
                len,
                lanes: block.lanes,
            });
        }
        Ok(())
    }
}

fn check_bank(bank: u8) -> Result<(), MmioError> {
    if bank > 1 {
        return Err(MmioError::Bank(bank));
    }
    Ok(())
}

/// The `ROW_CMD` (and `DMA_CMD`) word.
fn row_command(kind: u32, bank: u8, row: u32) -> u32 {
    ROW_CMD_ROW.put(row) | ROW_CMD_BANK.put(u32::from(bank)) | ROW_CMD_KIND.put(kind)
}

/// Lanes `lo`, `hi` packed into one stage word (`lo` in bits 15..0).
#[inline(always)]
fn lane_pair(lo: i16, hi: i16) -> u32 {
    u32::from(lo as u16) | u32::from(hi as u16) << 16
}

/// Bus address of accelerator register `addr`.
fn reg_addr(addr: u8) -> u32 {
    ACC_REGS + 4 * u32::from(addr)
}

impl<R: Regs> AcceleratorBus for MmioBus<R> {
    type Error = MmioError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, MmioError> {
        Ok(self.regs.read32(reg_addr(addr)))
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), MmioError> {
        self.regs.write32(reg_addr(addr), value);
        Ok(())
    }

    // Inlined into the driver's row loop: on the SoC's 4 KiB direct-mapped instruction cache
    // a loop spread over several functions evicts itself every beat.
    #[inline(always)]
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), MmioError> {
        // Everything is checked before the first store, so a refused beat writes nothing.
        for w in [beat.a, beat.b].iter().flatten() {
            self.check_row(w)?;
        }
        if let Some(c) = beat.c {
            check_bank(c.bank)?;
            self.check_len(c_out.len())?;
        }
        for (w, kind) in [(beat.a, ROW_KIND_WRITE_A), (beat.b, ROW_KIND_WRITE_B)] {
            if let Some(w) = w {
                self.stage(w.data);
                self.command(kind, w.bank, u32::from(w.row));
            }
        }
        if let Some(c) = beat.c {
            // The bus holds this store until the row is in the C stage.
            self.command(ROW_KIND_READ_C, c.bank, u32::from(c.row));
            let mut pairs = c_out.chunks_exact_mut(2);
            let mut addr = C_STAGE;
            for pair in &mut pairs {
                let word = self.regs.read32(addr);
                pair[0] = word as u16 as i16;
                pair[1] = (word >> 16) as u16 as i16;
                addr += 4;
            }
            if let Some(lo) = pairs.into_remainder().first_mut() {
                *lo = self.regs.read32(addr) as u16 as i16;
            }
        }
        Ok(())
    }

    fn moves_blocks(&self) -> bool {
        self.dma
    }

    fn write_block(
        &mut self,
        target: BlockTarget,
        block: &RowBlock,
        size: usize,
        mem: &[i16],
    ) -> Result<(), MmioError> {
        self.check_block(block, size, mem.len())?;
        let kind = match target {
            BlockTarget::A => ROW_KIND_WRITE_A,
            BlockTarget::B => ROW_KIND_WRITE_B,
        };
        let command = row_command(kind, block.bank, u32::from(block.first_row));
        match self.regs.dma_from_mem(command, block, mem) {
            true => Ok(()),
            false => Err(MmioError::NoDma),
        }
    }

    fn read_block(
        &mut self,
        block: &RowBlock,
        size: usize,
        mem: &mut [i16],
    ) -> Result<(), MmioError> {
        self.check_block(block, size, mem.len())?;
        let command = row_command(ROW_KIND_READ_C, block.bank, u32::from(block.first_row));
        match self.regs.dma_into_mem(command, block, mem) {
            true => Ok(()),
            false => Err(MmioError::NoDma),
        }
    }

    #[cfg(any(feature = "step", test))]
    fn runs_products(&self) -> bool {
        self.mm
    }

    #[cfg(any(feature = "step", test))]
    fn run_product(
        &mut self,
        job: &ProductJob,
        a: &[i16],
        b: &[i16],
        c: &mut [i16],
    ) -> Result<Option<u32>, MmioError> {
        if !self.mm {
            return Ok(None);
        }
        let ends = job.ends();
        for ((which, len), end) in [("a", a.len()), ("b", b.len()), ("c", c.len())]
            .into_iter()
            .zip(ends)
        {
            if end.is_none_or(|e| e > len) {
                return Err(MmioError::Product { which, end, len });
            }
        }
        match self.regs.product(job, a, b, c) {
            Some(status) => Ok(Some(status)),
            None => Err(MmioError::NoSequencer),
        }
    }

    fn idle(&mut self, cycles: u32) -> Result<(), MmioError> {
        // The cycle counter runs on the accelerator's clock; wrapping differences stay right
        // for any wait below 2^32 cycles.
        let start = self.regs.read32(TIMER_LO);
        while self.regs.read32(TIMER_LO).wrapping_sub(start) < cycles {}
        Ok(())
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), MmioError> {
        let row_words = self.config.fm_row_words();
        let fm_depth = self.config.fm_depth;
        let refused = MmioError::FmRange {
            addr,
            len: words.len(),
            row_words,
            fm_depth,
        };
        let end = u64::from(addr) + words.len() as u64;
        let first_row = addr / row_words as u32;
        let rows = words.len() / row_words;
        if end > fm_depth as u64
            || !addr.is_multiple_of(row_words as u32)
            || !words.len().is_multiple_of(row_words)
            || u64::from(first_row) + rows as u64 > u64::from(ROW_CMD_ROW.max()) + 1
        {
            return Err(refused);
        }
        for (i, row) in words.chunks(row_words).enumerate() {
            self.stage(row);
            self.command(ROW_KIND_WRITE_FM, 0, first_row + i as u32);
        }
        Ok(())
    }
}
