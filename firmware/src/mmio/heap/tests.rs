//! The free list on a host buffer: placement, alignment, exhaustion, coalescing, realloc, and
//! a long random alloc/free sequence checked against the bytes each allocation was given.

extern crate std;

use super::*;
use std::vec::Vec;

const ARENA: usize = 4096;

#[repr(C, align(256))]
struct Arena([u8; ARENA]);

/// A heap over a fresh arena (boxed so its address is stable), and the arena's address range.
fn heap() -> (std::boxed::Box<Arena>, Heap, core::ops::Range<usize>) {
    let mut arena = std::boxed::Box::new(Arena([0; ARENA]));
    let heap = Heap::empty();
    let start = arena.0.as_mut_ptr();
    // SAFETY: the arena is ours, outlives every use of the heap in a test, and is given once.
    unsafe { heap.init(start, ARENA) };
    let range = start as usize..start as usize + ARENA;
    (arena, heap, range)
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

fn alloc(heap: &Heap, size: usize, align: usize) -> *mut u8 {
    // SAFETY: non-zero sizes only.
    unsafe { heap.alloc(layout(size, align)) }
}

fn free(heap: &Heap, p: *mut u8, size: usize, align: usize) {
    // SAFETY: `p` came from `alloc` on this heap with this layout.
    unsafe { heap.dealloc(p, layout(size, align)) }
}

#[test]
fn the_whole_region_is_one_free_block_at_first() {
    let (_arena, heap, _) = heap();
    assert_eq!(heap.usage(), (ARENA, 1, ARENA));
    // An unaligned start and end are trimmed inward to UNIT.
    let mut other = Arena([0; ARENA]);
    let list = Heap::empty();
    // SAFETY: as in `heap`.
    unsafe { list.init(other.0.as_mut_ptr().add(3), 2 * UNIT + 5) };
    assert_eq!(list.usage(), (UNIT, 1, UNIT));
}

#[test]
fn the_peak_is_the_most_in_use_between_two_readings() {
    let (_arena, heap, _) = heap();
    let u = |n| block_bytes(layout(n, 1)).unwrap();
    let a = alloc(&heap, 10, 1);
    let b = alloc(&heap, 100, 4);
    free(&heap, b, 100, 4);
    let c = alloc(&heap, 30, 2);
    // In use: a and c; the peak a and b.
    assert_eq!(heap.take_peak(), (u(10) + u(30), u(10) + u(100)));
    // Read again: the peak restarted from what was in use.
    assert_eq!(heap.take_peak(), (u(10) + u(30), u(10) + u(30)));
    free(&heap, a, 10, 1);
    free(&heap, c, 30, 2);
    assert_eq!(heap.take_peak(), (0, u(10) + u(30)));
    assert_eq!(heap.usage().0, ARENA);
}

#[test]
fn first_fit_places_in_order_aligned_and_reuses_the_lowest_hole() {
    let (_arena, heap, range) = heap();
    let a = alloc(&heap, 10, 1);
    let b = alloc(&heap, 100, 4);
    let c = alloc(&heap, 30, 2);
    assert_eq!(a as usize, range.start);
    assert_eq!(
        b as usize,
        range.start + block_bytes(layout(10, 1)).unwrap()
    );
    assert!(c as usize >= b as usize + 100);
    free(&heap, a, 10, 1);
    // The first hole fits a block of one unit: it is reused before the space after `c`.
    assert_eq!(alloc(&heap, UNIT, 1), a);
    // An alignment gap stays free and is used by a later small allocation.
    let wide = alloc(&heap, 64, 256);
    assert_eq!(wide as usize % 256, 0);
    let (bytes, blocks, _) = heap.usage();
    assert_eq!(blocks, 2, "the gap before the aligned block and the tail");
    let small = alloc(&heap, 8, 8);
    assert!((c as usize..wide as usize).contains(&(small as usize)));
    assert_eq!(heap.usage().0, bytes - block_bytes(layout(8, 8)).unwrap());
}

#[test]
fn exhaustion_and_impossible_layouts_return_null() {
    let (_arena, heap, _) = heap();
    assert!(alloc(&heap, ARENA + 1, 1).is_null());
    assert!(alloc(&heap, usize::MAX / 2, 1).is_null());
    let all = alloc(&heap, ARENA, 64);
    assert!(!all.is_null());
    assert!(alloc(&heap, 1, 1).is_null());
    assert_eq!(heap.usage(), (0, 0, 0));
    free(&heap, all, ARENA, 64);
    assert_eq!(heap.usage(), (ARENA, 1, ARENA));
}

#[test]
fn freed_neighbours_coalesce_on_both_sides() {
    let (_arena, heap, _) = heap();
    let blocks: Vec<*mut u8> = (0..6).map(|_| alloc(&heap, 64, 8)).collect();
    let tail = ARENA - 6 * 64;
    assert_eq!(heap.usage(), (tail, 1, tail));
    free(&heap, blocks[1], 64, 8);
    assert_eq!(heap.usage(), (tail + 64, 2, tail));
    // After a free block only: merges backward.
    free(&heap, blocks[2], 64, 8);
    assert_eq!(heap.usage(), (tail + 128, 2, tail));
    // Before a free block only (the tail): merges forward.
    free(&heap, blocks[5], 64, 8);
    assert_eq!(heap.usage(), (tail + 192, 2, tail + 64));
    free(&heap, blocks[3], 64, 8);
    assert_eq!(heap.usage(), (tail + 256, 2, tail + 64));
    // Between two free blocks: all three become one.
    free(&heap, blocks[4], 64, 8);
    assert_eq!(heap.usage(), (tail + 320, 1, tail + 320));
    free(&heap, blocks[0], 64, 8);
    assert_eq!(heap.usage(), (ARENA, 1, ARENA));
}

#[test]
fn realloc_keeps_the_contents_when_growing_and_shrinking() {
    let (_arena, heap, _) = heap();
    let l = layout(40, 4);
    let p = alloc(&heap, 40, 4);
    let _pin = alloc(&heap, 8, 8); // so growing cannot happen in place
    for i in 0..40 {
        // SAFETY: inside the 40-byte allocation.
        unsafe { p.add(i).write(i as u8 ^ 0x5A) };
    }
    // SAFETY: `p` is live with layout `l`.
    let grown = unsafe { heap.realloc(p, l, 400) };
    assert!(!grown.is_null());
    // SAFETY: `grown` has 400 bytes.
    let kept = unsafe { core::slice::from_raw_parts(grown, 40) };
    assert!(kept.iter().enumerate().all(|(i, &b)| b == i as u8 ^ 0x5A));
    // SAFETY: `grown` is live with 400 bytes at align 4.
    let shrunk = unsafe { heap.realloc(grown, layout(400, 4), 16) };
    // SAFETY: `shrunk` has 16 bytes.
    let kept = unsafe { core::slice::from_raw_parts(shrunk, 16) };
    assert!(kept.iter().enumerate().all(|(i, &b)| b == i as u8 ^ 0x5A));
    free(&heap, shrunk, 16, 4);
    free(&heap, _pin, 8, 8);
    assert_eq!(heap.usage(), (ARENA, 1, ARENA));
}

#[test]
fn random_allocations_never_overlap_and_keep_their_bytes() {
    let (_arena, heap, range) = heap();
    let mut live: Vec<(*mut u8, usize, usize, u8)> = Vec::new();
    let mut seed = 0x2545_F491_u32;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    for step in 0..4000u32 {
        let r = next();
        if r % 3 != 0 || live.is_empty() {
            let (size, align) = (1 + (r >> 8) as usize % 300, 1 << ((r >> 20) % 7));
            let p = alloc(&heap, size, align);
            if p.is_null() {
                continue;
            }
            assert_eq!(p as usize % align, 0);
            assert!(range.start <= p as usize && p as usize + size <= range.end);
            let fill = step as u8;
            // SAFETY: a fresh allocation of `size` bytes.
            unsafe { p.write_bytes(fill, size) };
            live.push((p, size, align, fill));
        } else {
            let (p, size, align, fill) = live.swap_remove((r >> 4) as usize % live.len());
            // SAFETY: live allocation of `size` bytes.
            let bytes = unsafe { core::slice::from_raw_parts(p, size) };
            assert!(
                bytes.iter().all(|&b| b == fill),
                "an allocation was overwritten"
            );
            free(&heap, p, size, align);
        }
    }
    for (p, size, align, _) in live.drain(..) {
        free(&heap, p, size, align);
    }
    assert_eq!(heap.usage(), (ARENA, 1, ARENA));
}

#[test]
fn the_heap_region_ends_at_the_stack_reserve_and_needs_the_linked_ram() {
    let k = 1024;
    assert_eq!(
        heap_region(90_000, 256 * k, 256 * k, 8 * k),
        Ok(90_000..(248 * 1024))
    );
    assert_eq!(
        heap_region(90_000, 256 * k, 512 * k, 8 * k),
        Ok(90_000..(248 * 1024))
    );
    let small = heap_region(90_000, 256 * k, 64 * k, 8 * k).unwrap_err();
    assert_eq!(
        small,
        HeapRegionError::BoardRamTooSmall {
            board: 64 * k,
            linked: 256 * k
        }
    );
    let text = std::format!("{small}");
    assert!(
        text.contains("needs 262144 B of SoC RAM and this SoC has 65536 B"),
        "{text}"
    );
    assert!(text.contains("load the standard image"), "{text}");
    let full = heap_region(248 * 1024, 256 * k, 256 * k, 8 * k).unwrap_err();
    assert!(matches!(full, HeapRegionError::NoRoom { .. }), "{full:?}");
    assert!(std::format!("{full}").contains("no heap"));
}
