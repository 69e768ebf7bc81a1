//! The training image's additions (feature `training`): the global allocator over the RAM
//! between the statics and the stack reserve, and the training step on the board's drivers.

use systole_core::soc::{SYS_RAM_BYTES, TRAINING_RAM_BYTES};
use systole_core::{ArrayConfig, Rounding};
use systole_firmware::mmio::heap::{heap_region, Heap};
use systole_firmware::mmio::{Regs, Volatile};
use systole_firmware::products::BoardProducts;
use systole_firmware::soc::{MmioBus, STACK_RESERVE_BYTES};
use systole_step::step::{train_step, Batch};
use systole_step::{Fixed, QMatrix};

#[global_allocator]
static HEAP: Heap = Heap::empty();

/// Gives the allocator riscv-rt's heap: from the end of the statics (`heap_start`) to the
/// stack reserve below the top of `TRAINING_RAM_BYTES`. Called once, first thing in `main`.
/// On a SoC with less RAM it panics (the host gets the panic report saying so): the heap would
/// alias the code.
pub fn init_heap() {
    let start = riscv_rt::heap_start().cast::<u8>();
    let board = Volatile::new().read32(SYS_RAM_BYTES);
    let region = match heap_region(
        start as usize,
        TRAINING_RAM_BYTES,
        board,
        STACK_RESERVE_BYTES,
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
}

/// Free heap bytes now.
#[allow(dead_code)] // read by the request that runs steps (next)
pub fn heap_free() -> usize {
    HEAP.usage().0
}

/// The arithmetic of a step on the board: the fixed-point step over the board's array.
pub type BoardArith = Fixed<BoardProducts<MmioBus<Volatile>>>;

/// One training step `step` of `batch` on the board's array: the bits of the same step by the
/// host on any backend. Returns the mean loss and the correct count.
///
/// No request calls it yet: it is an exported symbol that build.rs keeps in the image
/// (`EXTERN`), so the image carries the whole step and its size is the training image's.
#[allow(unsafe_code)] // `no_mangle`: a named symbol, and nothing else in the image has it.
#[no_mangle]
pub fn systole_train_step(
    arith: &mut BoardArith,
    batch: &Batch<'_>,
    params: &mut [QMatrix],
    velocity: &mut [QMatrix],
    (step, lr, momentum): (u64, f32, f32),
) -> Option<(f32, usize)> {
    train_step(arith, batch, params, velocity, (step, lr, momentum)).ok()
}

/// The arithmetic over the board's array, for a run with `run_seed`.
#[allow(dead_code)] // used by the request that runs steps (next)
pub fn board_arith(bus: MmioBus<Volatile>, config: ArrayConfig, run_seed: u64) -> BoardArith {
    Fixed::new(
        BoardProducts::new(bus, config),
        Rounding::Stochastic,
        run_seed,
    )
}
