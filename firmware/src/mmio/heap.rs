//! [`Heap`]: the training image's global allocator, a first-fit free list over one RAM
//! region (riscv-rt's heap, from the end of the statics to the stack reserve).
//!
//! No allocator crate is available offline, and the SoC's VexRiscv has no AMO instructions, so
//! no lock built on atomic read-modify-write can guard it: it relies on the firmware running
//! on one hart without interrupts, which is also why it is `Sync` only on the SoC.
//!
//! Free blocks are kept in address order, each starting with its [`FreeBlock`] header; an
//! allocation carries no header (the caller's `Layout` gives its size back on free). Every
//! block's address and size are multiples of [`UNIT`], so any split leaves either nothing or
//! room for a header, and a freed block merges with free neighbours on both sides.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::fmt;
use core::ops::Range;
use core::ptr;
use systole_core::soc::RAM_BASE;

/// Why the training image cannot have its heap on this SoC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapRegionError {
    /// The SoC's RAM (`SYS_RAM_BYTES`) is smaller than the RAM the image was linked for: its
    /// heap would alias the code (the RAM decoder wraps addresses).
    BoardRamTooSmall {
        /// The SoC's RAM.
        board: u32,
        /// The RAM the image was linked for.
        linked: u32,
    },
    /// The statics end at or above the stack reserve: no room for a heap.
    NoRoom {
        /// First byte after the statics.
        heap_start: usize,
        /// The stack reserve's first byte.
        stack: usize,
    },
}

impl fmt::Display for HeapRegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeapRegionError::BoardRamTooSmall { board, linked } => write!(
                f,
                "the training image needs {linked} B of SoC RAM and this SoC has {board} B: \
                 load the standard image (soc-image without features) or use a board with \
                 {linked} B of SoC RAM (systole boards)"
            ),
            HeapRegionError::NoRoom { heap_start, stack } => write!(
                f,
                "no heap: the statics end at {heap_start:#x}, the stack reserve starts at \
                 {stack:#x}"
            ),
        }
    }
}

impl core::error::Error for HeapRegionError {}

/// The training image's heap: from `heap_start` (riscv-rt's `__sheap`, the end of the
/// statics) up to `stack_reserve` bytes below the top of the `linked` bytes of RAM the image
/// was linked for, on a SoC of `board` bytes of RAM (`SYS_RAM_BYTES`).
pub fn heap_region(
    heap_start: usize,
    linked: u32,
    board: u32,
    stack_reserve: u32,
) -> Result<Range<usize>, HeapRegionError> {
    if board < linked {
        return Err(HeapRegionError::BoardRamTooSmall { board, linked });
    }
    let stack = (RAM_BASE as usize + linked as usize).saturating_sub(stack_reserve as usize);
    if heap_start >= stack {
        return Err(HeapRegionError::NoRoom { heap_start, stack });
    }
    Ok(heap_start..stack)
}

/// The header of a free block: its size in bytes (a multiple of [`UNIT`]) and the next free
/// block at a higher address (null at the end).
#[repr(C)]
struct FreeBlock {
    size: usize,
    next: *mut FreeBlock,
}

/// Granule of every block's address and size: room for one [`FreeBlock`] header.
pub const UNIT: usize = core::mem::size_of::<FreeBlock>();

/// `n` rounded up to a multiple of `align` (a power of two), `None` on overflow.
fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// Bytes a block for `layout` takes: its size rounded up to [`UNIT`], at least one unit.
fn block_bytes(layout: Layout) -> Option<usize> {
    align_up(layout.size().max(1), UNIT)
}

/// A first-fit free list. Not thread-safe: see [`Heap`] for the shared form.
#[derive(Debug)]
pub struct FreeList {
    head: *mut FreeBlock,
    /// Bytes allocated now (whole blocks).
    in_use: usize,
    /// The most bytes allocated at once since [`FreeList::take_peak`] last ran.
    peak: usize,
}

impl FreeList {
    /// A list with no memory.
    pub const fn empty() -> Self {
        FreeList {
            head: ptr::null_mut(),
            in_use: 0,
            peak: 0,
        }
    }

    /// Gives the list `len` bytes from `start` (trimmed inward to [`UNIT`] alignment).
    ///
    /// # Safety
    /// The bytes are valid for reads and writes, used by nothing else, and outlive the list
    /// and every allocation made from it; they do not overlap memory already given.
    pub unsafe fn add_region(&mut self, start: *mut u8, len: usize) {
        let addr = start as usize;
        let Some(first) = align_up(addr, UNIT) else {
            return;
        };
        let end = addr.saturating_add(len) & !(UNIT - 1);
        if end > first && end - first >= UNIT {
            // SAFETY: `first..end` lies in the caller's region and is UNIT-aligned.
            unsafe { self.insert(start.add(first - addr), end - first) }
        }
    }

    /// First fit: the lowest free block with room for `layout` at its alignment; null when
    /// none has (or the layout's size overflows).
    pub fn allocate(&mut self, layout: Layout) -> *mut u8 {
        let (Some(size), align) = (block_bytes(layout), layout.align().max(UNIT)) else {
            return ptr::null_mut();
        };
        let mut link: *mut *mut FreeBlock = &mut self.head;
        // SAFETY: every block on the list is a header the list wrote inside its regions.
        unsafe {
            while !(*link).is_null() {
                let block = *link;
                let addr = block as usize;
                let end = addr + (*block).size;
                let fits = align_up(addr, align)
                    .and_then(|start| Some((start, start.checked_add(size)?)))
                    .filter(|&(_, stop)| stop <= end);
                if let Some((start, stop)) = fits {
                    let base = block.cast::<u8>();
                    // What follows the allocation stays free (a multiple of UNIT, maybe 0).
                    let mut rest = (*block).next;
                    if end > stop {
                        let tail = base.add(stop - addr).cast::<FreeBlock>();
                        tail.write(FreeBlock {
                            size: end - stop,
                            next: rest,
                        });
                        rest = tail;
                    }
                    if start > addr {
                        // The alignment gap before it stays free as the block itself.
                        (*block).size = start - addr;
                        (*block).next = rest;
                    } else {
                        *link = rest;
                    }
                    self.in_use += size;
                    self.peak = self.peak.max(self.in_use);
                    return base.add(start - addr);
                }
                link = ptr::addr_of_mut!((*block).next);
            }
        }
        ptr::null_mut()
    }

    /// Returns an allocation to the list, merged with free neighbours.
    ///
    /// # Safety
    /// `block` came from [`FreeList::allocate`] on this list with this `layout` and is not
    /// used after.
    pub unsafe fn free(&mut self, block: *mut u8, layout: Layout) {
        if let Some(size) = block_bytes(layout) {
            self.in_use -= size;
            // SAFETY: the caller's allocation of `size` bytes, UNIT-aligned.
            unsafe { self.insert(block, size) }
        }
    }

    /// Inserts `size` free bytes at `at` in address order, merging with neighbours.
    unsafe fn insert(&mut self, at: *mut u8, size: usize) {
        let new = at.cast::<FreeBlock>();
        let mut prev: *mut FreeBlock = ptr::null_mut();
        let mut next = self.head;
        // SAFETY: list headers as in `allocate`; `at..at + size` is free memory we own.
        unsafe {
            while !next.is_null() && (next as usize) < (at as usize) {
                prev = next;
                next = (*next).next;
            }
            new.write(FreeBlock { size, next });
            if !next.is_null() && at as usize + size == next as usize {
                (*new).size += (*next).size;
                (*new).next = (*next).next;
            }
            if prev.is_null() {
                self.head = new;
            } else if prev as usize + (*prev).size == at as usize {
                (*prev).size += (*new).size;
                (*prev).next = (*new).next;
            } else {
                (*prev).next = new;
            }
        }
    }

    /// `(bytes allocated now, the most allocated at once since the last call)`; the peak
    /// then starts again from what is allocated now (the host measures a step between two
    /// calls: `HEAP_USE`).
    pub fn take_peak(&mut self) -> (usize, usize) {
        let peak = core::mem::replace(&mut self.peak, self.in_use);
        (self.in_use, peak)
    }

    /// `(free bytes, free blocks, largest free block)`: what is left, and how fragmented.
    pub fn usage(&self) -> (usize, usize, usize) {
        let (mut bytes, mut blocks, mut largest) = (0, 0, 0);
        let mut block = self.head;
        while !block.is_null() {
            // SAFETY: a header on the list.
            let (size, next) = unsafe { ((*block).size, (*block).next) };
            bytes += size;
            blocks += 1;
            largest = largest.max(size);
            block = next;
        }
        (bytes, blocks, largest)
    }
}

/// A [`FreeList`] as a global allocator (`#[global_allocator]` on the SoC).
#[derive(Debug)]
pub struct Heap {
    list: UnsafeCell<FreeList>,
}

// SAFETY: on the SoC the firmware runs on one hart with interrupts off, so no two calls ever
// overlap. Elsewhere `Heap` is not `Sync` and cannot be shared between threads.
#[cfg(all(target_arch = "riscv32", target_os = "none"))]
unsafe impl Sync for Heap {}

impl Heap {
    /// A heap with no memory (every allocation fails until [`Heap::init`]).
    pub const fn empty() -> Self {
        Heap {
            list: UnsafeCell::new(FreeList::empty()),
        }
    }

    /// Gives the heap its region.
    ///
    /// # Safety
    /// As [`FreeList::add_region`], and no allocation is in progress.
    pub unsafe fn init(&self, start: *mut u8, len: usize) {
        // SAFETY: the caller's region; no other reference to the list is live.
        unsafe { (*self.list.get()).add_region(start, len) }
    }

    /// `(free bytes, free blocks, largest free block)`.
    pub fn usage(&self) -> (usize, usize, usize) {
        // SAFETY: no allocation is in progress while this runs (one hart, no interrupts).
        unsafe { (*self.list.get()).usage() }
    }

    /// `(bytes allocated now, their peak since the last call)` ([`FreeList::take_peak`]).
    pub fn take_peak(&self) -> (usize, usize) {
        // SAFETY: as in `usage`.
        unsafe { (*self.list.get()).take_peak() }
    }
}

// SAFETY: `allocate` returns null or a block of at least `layout.size()` bytes at
// `layout.align()` that no other live allocation overlaps; `free` only takes such blocks.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: calls never overlap (see `Sync`), so this is the only reference.
        unsafe { (*self.list.get()).allocate(layout) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`; the caller passes a block from `alloc` with its layout.
        unsafe { (*self.list.get()).free(block, layout) }
    }
}

#[cfg(test)]
mod tests;
