//! 32-bit register access: the [`Regs`] trait everything on the SoC is written against, and
//! [`Volatile`], its implementation by volatile loads and stores. The only module of the
//! firmware with `unsafe` code.
//!
//! [`Volatile`] can only reach the MMIO range of [`systole_core::soc`] (address bit 31 set,
//! word-aligned) but `DMA_CMD`: an address outside it reads 0 and ignores writes, as the SoC's
//! bus does for unmapped MMIO addresses. The row DMA, which reads and writes RAM, is started
//! only by [`Regs::dma_from_mem`] and [`Regs::dma_into_mem`], which take the memory as a slice
//! and check the transfer stays inside it. So safe code using it can never write RAM behind
//! the compiler's back. It exists only when compiling for the SoC (`riscv32`, no OS): on any other target
//! those addresses are not device registers.
//!
//! [`heap`] is the other raw-memory code: the training image's allocator.
#![allow(unsafe_code)]

pub mod heap;

use systole_core::bus::{ProductJob, RowBlock};
#[cfg(any(feature = "step", test))]
use systole_core::soc::MM_CMD;
use systole_core::soc::{DMA_CMD, MMIO_BASE};

/// Word-wide register access at absolute bus addresses.
pub trait Regs {
    /// Reads the 32-bit register at `addr`.
    fn read32(&mut self, addr: u32) -> u32;
    /// Writes `value` to the 32-bit register at `addr`.
    fn write32(&mut self, addr: u32, value: u32);

    /// Runs one row-DMA transfer that reads `mem` (`command`: the `DMA_CMD` word, a write of
    /// A, B or feature-map rows; `block`: the rows' layout in `mem`, whose `bank` and
    /// `first_row` are the command's): programs `DMA_ADDR` from where `mem` lies and the other
    /// registers from `block`, then writes `DMA_CMD`, which returns when the rows are in the
    /// buffers. `false` (nothing done) when this register file has no DMA or `block` does not
    /// lie inside `mem`.
    fn dma_from_mem(&mut self, command: u32, block: &RowBlock, mem: &[i16]) -> bool {
        let _ = (command, block, mem);
        false
    }

    /// [`Regs::dma_from_mem`] for a transfer that writes C rows into `mem`; when it returns
    /// the rows are in `mem` (and no stale copy of them in a data cache).
    fn dma_into_mem(&mut self, command: u32, block: &RowBlock, mem: &mut [i16]) -> bool {
        let _ = (command, block, mem);
        false
    }

    /// Runs `job` on the product sequencer (`MM_*`) with A, B and C in `a`, `b`, `c`: programs
    /// the descriptor from where the slices lie, writes `MM_CMD` (the store returns when the
    /// product is in `c` or refused) and returns `MM_STATUS`. `None` (nothing done) when this
    /// register file has no sequencer or an operand does not lie inside its slice
    /// ([`product_fits`]).
    fn product(&mut self, job: &ProductJob, a: &[i16], b: &[i16], c: &mut [i16]) -> Option<u32> {
        let _ = (job, a, b, c);
        None
    }
}

impl<R: Regs + ?Sized> Regs for &mut R {
    #[inline(always)]
    fn read32(&mut self, addr: u32) -> u32 {
        (**self).read32(addr)
    }
    #[inline(always)]
    fn write32(&mut self, addr: u32, value: u32) {
        (**self).write32(addr, value)
    }
    fn dma_from_mem(&mut self, command: u32, block: &RowBlock, mem: &[i16]) -> bool {
        (**self).dma_from_mem(command, block, mem)
    }
    fn dma_into_mem(&mut self, command: u32, block: &RowBlock, mem: &mut [i16]) -> bool {
        (**self).dma_into_mem(command, block, mem)
    }
    fn product(&mut self, job: &ProductJob, a: &[i16], b: &[i16], c: &mut [i16]) -> Option<u32> {
        (**self).product(job, a, b, c)
    }
}

/// True for the addresses [`Volatile`] may touch: word-aligned, at or above `MMIO_BASE`, not
/// `DMA_CMD` or (where the product sequencer is driven, feature `step`) `MM_CMD`, which only
/// the checked DMA and product methods write. The serving image leaves the second compare out:
/// it has no room for it (inlined into every register access) and never names `MM_CMD`.
pub const fn is_mmio(addr: u32) -> bool {
    addr >= MMIO_BASE && addr.is_multiple_of(4) && addr != DMA_CMD && !is_mm_cmd(addr)
}

#[cfg(any(feature = "step", test))]
const fn is_mm_cmd(addr: u32) -> bool {
    addr == MM_CMD
}

#[cfg(not(any(feature = "step", test)))]
const fn is_mm_cmd(_addr: u32) -> bool {
    false
}

/// True when every element `job` touches lies inside slices of `a`, `b` and `c` elements and
/// every step fits the sequencer's 32-bit registers.
pub fn product_fits(job: &ProductJob, a: usize, b: usize, c: usize) -> bool {
    let mut steps = job.a_steps.iter().chain(&job.b_steps).chain(&job.c_steps);
    let ends = job.ends();
    steps.all(|&s| u32::try_from(s).is_ok())
        && [a, b, c]
            .iter()
            .zip(ends)
            .all(|(&len, end)| end.is_some_and(|e| e <= len))
}

/// True when `block` lies inside a slice of `len` elements.
pub fn block_fits(block: &RowBlock, len: usize) -> bool {
    block.end().is_some_and(|end| end <= len)
}

/// The SoC's registers, reached by volatile 32-bit loads and stores (never cached, never
/// merged or reordered by the compiler).
#[derive(Debug)]
pub struct Volatile {
    _private: (),
}

#[cfg(all(target_arch = "riscv32", target_os = "none"))]
impl Volatile {
    /// The SoC's register space. Several handles are fine: every access is a single volatile
    /// load or store, and the firmware runs on one hart without interrupts.
    pub const fn new() -> Self {
        Volatile { _private: () }
    }
}

#[cfg(all(target_arch = "riscv32", target_os = "none"))]
impl Default for Volatile {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(target_arch = "riscv32", target_os = "none"))]
impl Regs for Volatile {
    #[inline(always)]
    fn read32(&mut self, addr: u32) -> u32 {
        if !is_mmio(addr) {
            return 0;
        }
        // SAFETY: `addr` is an aligned address of the SoC's MMIO range, where every word
        // answers a load (core::soc) and no Rust object lives.
        unsafe { core::ptr::read_volatile(addr as usize as *const u32) }
    }

    #[inline(always)]
    fn write32(&mut self, addr: u32, value: u32) {
        if !is_mmio(addr) {
            return;
        }
        // SAFETY: as in `read32`; a store there changes device state, never memory the
        // program owns (`is_mmio` excludes DMA_CMD).
        unsafe { core::ptr::write_volatile(addr as usize as *mut u32, value) }
    }

    fn dma_from_mem(&mut self, command: u32, block: &RowBlock, mem: &[i16]) -> bool {
        if !block_fits(block, mem.len()) {
            return false;
        }
        self.dma_program(block, mem.as_ptr() as usize);
        // SAFETY: an empty asm that takes `mem`'s address and may read memory: the compiler
        // must have stored `mem`'s elements before it (the data cache writes through to RAM).
        unsafe {
            core::arch::asm!("/* {0} */", in(reg) mem.as_ptr(), options(nostack, preserves_flags, readonly))
        };
        // SAFETY: the transfer reads only `mem` (checked above), which lives while it runs:
        // the bus holds this store until the DMA is done.
        unsafe { core::ptr::write_volatile(DMA_CMD as usize as *mut u32, command) };
        true
    }

    fn dma_into_mem(&mut self, command: u32, block: &RowBlock, mem: &mut [i16]) -> bool {
        if !block_fits(block, mem.len()) {
            return false;
        }
        let ptr = mem.as_mut_ptr();
        self.dma_program(block, ptr as usize);
        // SAFETY: the transfer writes only inside `mem` (checked above), which we borrow
        // mutably, and is done when the bus takes this store.
        unsafe { core::ptr::write_volatile(DMA_CMD as usize as *mut u32, command) };
        // SAFETY: VexRiscv's data-cache flush (`0x0000500F`, the instruction LiteX uses): its
        // write-through cache drops every line, so later loads read the DMA's rows from RAM.
        // The asm takes `mem`'s address and may write memory: the compiler reloads `mem`.
        unsafe {
            core::arch::asm!(".word 0x0000500F /* {0} */", in(reg) ptr, options(nostack, preserves_flags))
        };
        true
    }

    #[cfg(feature = "step")]
    fn product(&mut self, job: &ProductJob, a: &[i16], b: &[i16], c: &mut [i16]) -> Option<u32> {
        self.run_product(job, a, b, c)
    }
}

#[cfg(all(target_arch = "riscv32", target_os = "none", feature = "step"))]
impl Volatile {
    /// [`Regs::product`] on the SoC (the training image only: the serving image has no room).
    fn run_product(
        &mut self,
        job: &ProductJob,
        a: &[i16],
        b: &[i16],
        c: &mut [i16],
    ) -> Option<u32> {
        use systole_core::soc::*;
        if !product_fits(job, a.len(), b.len(), c.len()) {
            return None;
        }
        let cp = c.as_mut_ptr();
        let words = [
            (MM_A_ADDR, a.as_ptr() as u32),
            (MM_A_STRIDE_I, job.a_steps[0] as u32),
            (MM_A_STRIDE_K, job.a_steps[1] as u32),
            (MM_B_ADDR, b.as_ptr() as u32),
            (MM_B_STRIDE_K, job.b_steps[0] as u32),
            (MM_B_STRIDE_J, job.b_steps[1] as u32),
            (MM_C_ADDR, cp as u32),
            (MM_C_STRIDE_I, job.c_steps[0] as u32),
            (MM_C_STRIDE_J, job.c_steps[1] as u32),
            (MM_M, job.m as u32),
            (MM_N, job.n as u32),
            (MM_K, job.k as u32),
            (
                MM_CONVERT,
                MM_SHIFT.put(job.shift) | MM_ROUNDING.put(job.rounding),
            ),
            (MM_SEED, job.seed),
        ];
        for (addr, value) in words {
            self.write32(addr, value);
        }
        // SAFETY: an empty asm that takes the operands' addresses and may read memory: the
        // compiler must have stored their elements before it (the data cache writes through).
        unsafe {
            core::arch::asm!("/* {0} {1} */", in(reg) a.as_ptr(), in(reg) b.as_ptr(), options(nostack, preserves_flags, readonly))
        };
        // SAFETY: the sequencer reads only inside `a` and `b` and writes only inside `c`
        // (checked above: every element the job names), which live while it runs: the bus
        // holds this store until the product is in `c` or refused.
        unsafe { core::ptr::write_volatile(MM_CMD as usize as *mut u32, 0) };
        // SAFETY: the data-cache flush of `dma_into_mem`: later loads read C from RAM.
        unsafe {
            core::arch::asm!(".word 0x0000500F /* {0} */", in(reg) cp, options(nostack, preserves_flags))
        };
        Some(self.read32(MM_STATUS))
    }
}

#[cfg(all(target_arch = "riscv32", target_os = "none"))]
impl Volatile {
    /// `DMA_ADDR` (`base`: where the slice's element 0 lies) and the layout registers.
    fn dma_program(&mut self, block: &RowBlock, base: usize) {
        use systole_core::soc::{DMA_ADDR, DMA_LANES, DMA_LANE_STEP, DMA_ROWS, DMA_ROW_STEP};
        let addr = (base as u32).wrapping_add(2 * block.offset as u32);
        self.write32(DMA_ADDR, addr);
        self.write32(DMA_ROW_STEP, block.row_step as u32);
        self.write32(DMA_LANE_STEP, block.lane_step as u32);
        self.write32(DMA_LANES, u32::from(block.lanes));
        self.write32(DMA_ROWS, u32::from(block.rows));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_aligned_mmio_addresses_are_reachable() {
        assert!(is_mmio(MMIO_BASE));
        assert!(is_mmio(systole_core::soc::SYS_RESET));
        assert!(!is_mmio(MMIO_BASE - 4));
        assert!(!is_mmio(systole_core::soc::RAM_BASE));
        assert!(!is_mmio(MMIO_BASE + 2));
        assert!(
            !is_mmio(DMA_CMD),
            "only the checked DMA methods start a transfer"
        );
        assert!(
            !is_mmio(MM_CMD),
            "only the checked product method starts one"
        );
        assert!(is_mmio(systole_core::soc::DMA_ADDR));
    }
}
