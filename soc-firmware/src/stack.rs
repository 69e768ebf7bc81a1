//! The stack's high-water mark (`STACK_USE`, `systole_firmware::protocol::stack`): riscv-rt's
//! `__pre_init` hook paints the stack reserve before any Rust code runs, and [`stack_use`] finds
//! how far down the paint was overwritten.
//!
//! The reserve is the `_hart_stack_size` bytes below `_stack_start` (the top of the image's
//! RAM), both set by build.rs in `memory.x`; the heap of the training image ends below it.

use systole_firmware::protocol::stack::{high_water, StackUse, PAINT};

// `__pre_init` runs before `.data` and `.bss` are set up, with `sp` at `_stack_start` and no
// stack in use: it paints every word from the bottom of the reserve up to `sp` and returns.
// riscv-rt's rules for it: assembly in `.init.pre_init`, and `s0`-`s2` and `a5` untouched.
// Unsafe as any assembly: it writes only the reserve, where nothing lives yet.
#[allow(unsafe_code)]
mod paint {
    use super::PAINT;
    core::arch::global_asm!(
        r#".section .init.pre_init, "ax"
        .global __pre_init
    __pre_init:
        la t0, _stack_start
        lui t1, %hi(_hart_stack_size)
        addi t1, t1, %lo(_hart_stack_size)
        sub t0, t0, t1
        li t2, {paint}
        bgeu t0, sp, 2f
    1:  sw t2, 0(t0)
        addi t0, t0, 4
        bltu t0, sp, 1b
    2:  ret"#,
        paint = const PAINT,
    );
}

extern "C" {
    /// The top of the stack (riscv-rt's symbol: the end of the image's RAM).
    static _stack_start: u8;
    /// The stack reserve in bytes: an absolute symbol, its address is its value.
    static _hart_stack_size: u8;
}

/// The reserve and the deepest the stack has been in it since the start.
pub fn stack_use() -> StackUse {
    let top = core::ptr::addr_of!(_stack_start) as usize as u32;
    let reserve = core::ptr::addr_of!(_hart_stack_size) as usize as u32;
    high_water(top - reserve, top, |addr| {
        // SAFETY: `addr` is a word-aligned address of the stack reserve, RAM of this SoC.
        // Below the deepest frame so far no Rust object lives (one hart, no interrupts), and
        // the scan stops at the first word a frame wrote, so it reads no live frame but, at
        // most, this call's own: a volatile load of an initialised word, never a reference.
        #[allow(unsafe_code)]
        unsafe {
            core::ptr::read_volatile(addr as usize as *const u32)
        }
    })
}
