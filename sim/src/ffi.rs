//! The C ABI of the generated shims (see `build/ports.rs`) and the table of compiled models.
#![allow(unsafe_code)]

use core::ffi::c_void;

/// Every input port of `top` for one clock beat, in the layout of the shim's `PortIn` (the
/// test `layout_tests` compiles the shim's struct against this one's offsets and sizes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortIn {
    pub reg_addr: u32,
    pub reg_wdata: u32,
    pub reg_we: u32,
    pub a_en: u32,
    pub a_bank: u32,
    pub a_row: u32,
    pub a_data: *const i16,
    pub b_en: u32,
    pub b_bank: u32,
    pub b_row: u32,
    pub b_data: *const i16,
    pub c_bank: u32,
    pub c_row: u32,
    pub fm_en: u32,
    pub fm_row: u32,
    pub fm_data: *const i16,
}

impl PortIn {
    /// A beat with nothing enabled.
    pub fn idle() -> Self {
        PortIn {
            reg_addr: 0,
            reg_wdata: 0,
            reg_we: 0,
            a_en: 0,
            a_bank: 0,
            a_row: 0,
            a_data: core::ptr::null(),
            b_en: 0,
            b_bank: 0,
            b_row: 0,
            b_data: core::ptr::null(),
            c_bank: 0,
            c_row: 0,
            fm_en: 0,
            fm_row: 0,
            fm_data: core::ptr::null(),
        }
    }
}

/// The shim functions of one compiled model.
pub(crate) struct ModelFns {
    pub size: usize,
    pub new: unsafe extern "C" fn() -> *mut c_void,
    pub delete: unsafe extern "C" fn(*mut c_void),
    pub reset: unsafe extern "C" fn(*mut c_void, u32),
    pub read_reg: unsafe extern "C" fn(*mut c_void, u32) -> u32,
    /// One clock cycle with all inputs; copies the C row into the pointer when it is not null.
    pub tick: unsafe extern "C" fn(*mut c_void, *const PortIn, *mut i16),
    pub idle: unsafe extern "C" fn(*mut c_void, u32),
}

/// The shim functions of the board image's model (`build.rs`, `build_board`).
pub(crate) struct BoardFns {
    /// Array size of the board's accelerator.
    pub size: usize,
    /// Oscillator frequency the image's UART timing was built for.
    pub clock_hz: u32,
    /// Baud rate of the image's UART.
    pub baud: u32,
    pub new: unsafe extern "C" fn() -> *mut c_void,
    pub delete: unsafe extern "C" fn(*mut c_void),
    /// `(state, reset_pin, rx, cycles, tx_out)`: runs `cycles` clocks, one tx level per clock.
    pub run: unsafe extern "C" fn(*mut c_void, u32, u32, u32, *mut u8),
    /// The RAM loader of an image with a CPU (the SoC), `None` for the bridge board.
    pub load: Option<Loader>,
}

/// The SoC image's RAM loader.
pub(crate) struct Loader {
    /// RAM size in bytes.
    pub ram_bytes: u32,
    /// Feature-map words of the accelerator's conv unit.
    pub fm_depth: usize,
    /// `(state, word address, words, count)`: writes RAM words with the CPU held in reset.
    pub load: unsafe extern "C" fn(*mut c_void, u32, *const u32, u32),
}

include!(concat!(env!("OUT_DIR"), "/models.rs"));
include!(concat!(env!("OUT_DIR"), "/firmware.rs"));
