//! 32-bit register access: the [`Regs`] trait everything on the SoC is written against, and
//! [`Volatile`], its implementation by volatile loads and stores. The only module of the
//! firmware with `unsafe` code.
//!
//! [`Volatile`] can only reach the MMIO range of [`systole_core::soc`] (address bit 31 set,
//! word-aligned): an address outside it reads 0 and ignores writes, as the SoC's bus does for
//! unmapped MMIO addresses. So safe code using it can never write RAM behind the compiler's
//! back. It exists only when compiling for the SoC (`riscv32`, no OS): on any other target
//! those addresses are not device registers.
//!
//! [`heap`] is the other raw-memory code: the training image's allocator.
#![allow(unsafe_code)]

pub mod heap;

use systole_core::soc::MMIO_BASE;

/// Word-wide register access at absolute bus addresses.
pub trait Regs {
    /// Reads the 32-bit register at `addr`.
    fn read32(&mut self, addr: u32) -> u32;
    /// Writes `value` to the 32-bit register at `addr`.
    fn write32(&mut self, addr: u32, value: u32);
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
}

/// True for the addresses [`Volatile`] may touch: word-aligned, at or above `MMIO_BASE`.
pub const fn is_mmio(addr: u32) -> bool {
    addr >= MMIO_BASE && addr.is_multiple_of(4)
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
        // program owns.
        unsafe { core::ptr::write_volatile(addr as usize as *mut u32, value) }
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
    }
}
