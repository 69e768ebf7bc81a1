//! The training image's additions (feature `training`): the global allocator over the RAM
//! between the statics and the stack reserve, on which the server's training session
//! (`FrameServer::with_training`: the state, the data set and the step on the board's drivers)
//! lives.

use systole_core::soc::{SYS_RAM_BYTES, TRAINING_RAM_BYTES};
use systole_firmware::mmio::heap::{heap_region, Heap};
use systole_firmware::mmio::{Regs, Volatile};
use systole_firmware::soc::TRAINING_STACK_RESERVE_BYTES;

#[global_allocator]
static HEAP: Heap = Heap::empty();

/// Gives the allocator riscv-rt's heap: from the end of the statics (`heap_start`) to the
/// stack reserve below the top of `TRAINING_RAM_BYTES`, and returns its bytes. Called once,
/// first thing in `main`.
/// On a SoC with less RAM it panics (the host gets the panic report saying so): the heap would
/// alias the code.
pub fn init_heap() -> u32 {
    let start = riscv_rt::heap_start().cast::<u8>();
    let board = Volatile::new().read32(SYS_RAM_BYTES);
    let region = match heap_region(
        start as usize,
        TRAINING_RAM_BYTES,
        board,
        TRAINING_STACK_RESERVE_BYTES,
    ) {
        Ok(region) => region,
        Err(e) => panic!("{e}"),
    };
    // SAFETY: `region` is RAM of this SoC that no static and no stack frame uses (the linker
    // placed every static below `heap_start`, build.rs keeps the stack above its end); it is
    // given once, before any allocation.
    #[allow(unsafe_code)]
    unsafe {
        HEAP.init(start, region.len())
    }
    u32::try_from(region.len()).unwrap_or(u32::MAX)
}

/// Free heap bytes now (the board's answer to a request refused for want of room).
pub fn heap_free() -> usize {
    HEAP.usage().0
}

/// `(bytes in use, their peak since the last call)`: the board's answer to `HEAP_USE`.
pub fn heap_peak() -> (usize, usize) {
    HEAP.take_peak()
}
