//! The training step on the SoC's CPU: its code (the `rv32_probe` example of `systole-step`,
//! built for riscv32imac by `./x test`) and the RAM one step of each model needs (measured by
//! running the same step here with a counting allocator), beside the firmware image and its
//! stack, against each board's SoC RAM (the RAM budget table). `./x test` prints it:
//!
//! ```sh
//! cargo run -p systole-soc-image --bin step-budget -- target/riscv32imac-unknown-none-elf/release/examples/rv32_probe
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use systole_soc_image::board_fit::{table, Need};
use systole_soc_image::step_ram::{peak_step_heap, Case, CASES};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = IN_USE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        IN_USE.fetch_sub(l.size(), Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes in use at the peak of `case`'s two training steps, above what was in use before.
fn measure(case: &Case) -> usize {
    let base = IN_USE.load(Relaxed);
    PEAK.store(base, Relaxed);
    peak_step_heap(case);
    PEAK.load(Relaxed) - base
}

fn main() -> ExitCode {
    let Some(probe) = std::env::args_os().nth(1) else {
        eprintln!("step-budget: give the path of the riscv32imac build of systole-step's rv32_probe example");
        return ExitCode::FAILURE;
    };
    let code = match std::fs::read(&probe)
        .map_err(|e| e.to_string())
        .and_then(|elf| systole_soc_image::step_ram::code_bytes(&elf).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "step-budget: {}: {e}",
                std::path::Path::new(&probe).display()
            );
            return ExitCode::FAILURE;
        }
    };
    let firmware = match systole_soc_image::build(&[]) {
        Ok(image) => image.budget,
        Err(e) => {
            eprintln!("step-budget: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "training step on the SoC's CPU (riscv32imac): code {code} B (text + rodata + data of the \
         step, alloc, libm and soft-float; an upper bound: the firmware shares part of it); \
         firmware statics {} B, stack {} B; step heap measured here (64-bit pointers: an upper \
         bound for RV32); training set packed at the bits its pixels need (digits 5, \
         Fashion-MNIST 8), a byte per label",
        firmware.statics, firmware.stack_reserve
    );
    let rows: Vec<(&Case, Need)> = CASES
        .iter()
        .map(|case| (case, Need::new(case, measure(case), code, &firmware)))
        .collect();
    println!("{}", table(&rows));
    ExitCode::SUCCESS
}
