//! The step linked for the SoC's CPU, to measure its code: a `riscv32imac-unknown-none-elf`
//! binary that runs digits-MLP training steps with the products left to a stub (on the board
//! they are the firmware's tile driver, already in its image). Built by `./x test`:
//!
//! ```sh
//! cargo build --release -p systole-step --example rv32_probe --features rv32-probe \
//!     --target riscv32imac-unknown-none-elf
//! ```
//!
//! and measured by `cargo run -p systole-soc-image --bin step-budget`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use systole_step::graph::{builtin, Shape};
use systole_step::step::{train_step, Batch};
use systole_step::{Arith, Conv2dGeom, Fixed, OutputSpec, Products, QMatrix, StepError};

/// Products whose results the optimiser cannot know.
struct Stub;

fn out(rows: usize, cols: usize, spec: &OutputSpec) -> Result<QMatrix, StepError> {
    Ok(black_box(QMatrix::zeros(rows, cols, spec.frac)))
}

impl Products for Stub {
    type Error = StepError;
    fn name(&self) -> String {
        String::from("stub")
    }
    fn matmul(
        &mut self,
        _: &str,
        a: &QMatrix,
        b: &QMatrix,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        out(a.rows, black_box(b).cols, s)
    }
    fn conv2d_forward(
        &mut self,
        _: &str,
        x: &QMatrix,
        w: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        out(black_box(x).rows, w.rows * g.out_h() * g.out_w(), s)
    }
    fn conv2d_backward_input(
        &mut self,
        _: &str,
        dy: &QMatrix,
        _: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        out(black_box(dy).rows, g.in_ch * g.in_h * g.in_w, s)
    }
    fn conv2d_backward_weights(
        &mut self,
        _: &str,
        _: &QMatrix,
        _: &QMatrix,
        g: &Conv2dGeom,
        s: &OutputSpec,
    ) -> Result<QMatrix, StepError> {
        out(g.out_ch, g.in_ch * g.kernel * g.kernel, s)
    }
}

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let mut a = Fixed::new(
        Stub,
        black_box(systole_core::Rounding::Stochastic),
        black_box(1),
    );
    // The graph as the board decodes it, so every layer kind's code is linked.
    let graph = black_box(builtin::mlp(Shape::flat(64), &[32], 10).ok().unwrap());
    let mut params = Vec::new();
    let mut velocity = Vec::new();
    for &(r, c) in &[(64, 32), (1, 32), (32, 10), (1, 10)] {
        params.push(
            a.import("init", r, c, black_box(&alloc::vec![0.01; r * c]))
                .ok()
                .unwrap(),
        );
        velocity.push(a.zeros(r, c));
    }
    let images = black_box(alloc::vec![0.5f32; 32 * 64]);
    let labels = black_box(alloc::vec![3u8; 32]);
    let batch = Batch {
        graph: &graph,
        images: &images,
        labels: &labels,
    };
    let mut step = 0;
    loop {
        let r = train_step(
            &mut a,
            &batch,
            &mut params,
            &mut velocity,
            (step, 0.05, 0.9),
        );
        black_box(r.is_ok());
        step += 1;
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// A bump allocator over a static arena (the probe measures code, not the heap).
mod heap {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;

    const ARENA: usize = 32 * 1024;

    struct Bump {
        arena: UnsafeCell<[u8; ARENA]>,
        next: UnsafeCell<usize>,
    }

    // The probe runs on one hart with no interrupts.
    unsafe impl Sync for Bump {}

    unsafe impl GlobalAlloc for Bump {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let next = &mut *self.next.get();
            let start = (*next + l.align() - 1) & !(l.align() - 1);
            if start + l.size() > ARENA {
                return core::ptr::null_mut();
            }
            *next = start + l.size();
            (self.arena.get() as *mut u8).add(start)
        }
        unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
    }

    #[global_allocator]
    static HEAP: Bump = Bump {
        arena: UnsafeCell::new([0; ARENA]),
        next: UnsafeCell::new(0),
    };
}
