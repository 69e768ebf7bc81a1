//! systole's SoC firmware: serves the frame protocol ([`systole_firmware::server::FrameServer`]) over
//! the SoC's UART, running each request on the accelerator behind the MMIO windows. A panic
//! sends the panic report ([`systole_firmware::protocol::panic`]) and resets the CPU.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

use core::fmt::Write as _;
use embedded_io::Write as _;
use systole_firmware::mmio::Volatile;
use systole_firmware::protocol::panic::{PanicMessage, PANIC_FRAME_CAPACITY};
use systole_firmware::server::{FrameServer, ServerError};
use systole_firmware::soc::{cycles, reset, MmioBus, Uart, UartError};

#[cfg(feature = "panic-test")]
mod panic_test;
mod stack;
#[cfg(feature = "training")]
mod training;

#[riscv_rt::entry]
fn main() -> ! {
    #[cfg(feature = "training")]
    let heap_bytes = training::init_heap();
    let uart = Uart::new(Volatile::new());
    let bus = match MmioBus::probe(Volatile::new()) {
        Ok(bus) => bus,
        // A SoC built without a valid array: say so (panic report) rather than serve nonsense.
        Err(e) => panic!("{e}"),
    };
    let config = *bus.config();
    #[cfg(feature = "panic-test")]
    let bus = panic_test::PanicTestBus(bus);
    let board = FrameServer::new(uart, bus, config)
        .with_clock(timer_cycles)
        .with_store(store())
        .with_stack_use(stack::stack_use);
    #[cfg(feature = "training")]
    let board = {
        // The step counts its cycles by section on the timer (`STEP_PROFILE`).
        systole_step::profile::set_clock(timer_cycles);
        board
            .with_training(heap_bytes, Some(training::heap_free))
            .with_heap_peak(training::heap_peak)
            .with_step_profile(systole_step::profile::encode)
    };
    let mut board = board;
    // The host learns that anything it sent before is gone (after a panic or a reset).
    let _ = board.announce_start();
    loop {
        // A UART overrun ends `serve`: the frame it damaged is dropped and its sender told to
        // resend it; the board goes on serving with its state intact.
        if let ServerError::Io(UartError::Overrun) = board.serve() {
            let _ = board.bytes_lost();
        }
    }
}

/// Words of the tensor store (the training image's is smaller: its heap holds the data set).
#[cfg(not(feature = "training"))]
const STORE_WORDS: usize = systole_core::soc::TENSOR_STORE_BYTES as usize / 2;
#[cfg(feature = "training")]
const STORE_WORDS: usize = systole_core::soc::TRAINING_TENSOR_STORE_BYTES as usize / 2;

/// The tensor store: a static array, so the image's RAM budget counts it (`bss`).
fn store() -> &'static mut [i16] {
    static mut STORE: [i16; STORE_WORDS] = [0; STORE_WORDS];
    // SAFETY: called once, from `main`, which never returns and is never re-entered (one
    // hart, no interrupts); nothing else names `STORE`, so this is its only reference.
    #[allow(unsafe_code)]
    unsafe {
        &mut *core::ptr::addr_of_mut!(STORE)
    }
}

/// The SoC's cycle counter: the board counts each request's cost with it (`COUNTERS`).
fn timer_cycles() -> u64 {
    cycles(&mut Volatile::new())
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut message = PanicMessage::new();
    let _ = write!(message, "{}", info.message());
    if let Some(at) = info.location() {
        let _ = write!(message, " at {}:{}", at.file(), at.line());
    }
    let mut frame = [0u8; PANIC_FRAME_CAPACITY];
    let n = message.encode(&mut frame);
    let mut uart = Uart::new(Volatile::new());
    let _ = uart.write_all(&frame[..n]);
    // Wait until the transmitter has taken the last byte before the reset.
    let _ = uart.flush();
    reset(&mut Volatile::new());
    loop {}
}
