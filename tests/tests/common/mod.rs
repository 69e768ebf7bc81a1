//! Shared by the conformance tests: a deterministic operand generator, and the simulated
//! bridge image opened through the bridge backend.
#![allow(dead_code)]

pub mod conformance;

use systole_device::board_sim::SimBoard;
use systole_device::serial::SerialDevice;
use systole_device::{self as device, Device, DeviceError};
use systole_golden::QMatrix;

/// The simulated bridge image (UART bridge, 4x4 array) on a pty and the bridge device opened on
/// it, or `None` (with a message) when this build has no board model.
pub fn bridge_image() -> Option<(SimBoard, Box<dyn Device>)> {
    bridge_image_at(systole_core::numeric::WORD_BITS)
}

/// [`bridge_image`] with the image's array at `W`-bit words (Verilated at run time below 16
/// bits), the device opened at `W`.
pub fn bridge_image_at(word_bits: u32) -> Option<(SimBoard, Box<dyn Device>)> {
    let (board, config) = match SimBoard::spawn_bridge_image_at(word_bits, None) {
        Ok(b) => b,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED bridge image: {e}");
            return None;
        }
        Err(e) => panic!("simulated bridge image: {e}"),
    };
    assert_eq!(config.word_bits, word_bits);
    let spec = format!("bridge:{}", board.path().display());
    let dev = device::open(&spec, config).unwrap_or_else(|e| panic!("{spec}: {e}"));
    Some((board, dev))
}

/// The simulated SoC image (the firmware on the VexRiscv CPU, UART, 4x4 array with its conv
/// unit) on a pty, as `systole-board-sim --soc` serves it, and the serial device opened on it,
/// or `None` (with a message) when this build has no SoC model.
pub fn soc_image() -> Option<(SimBoard, SerialDevice)> {
    soc_image_at(systole_core::numeric::WORD_BITS)
}

/// [`soc_image`] with the SoC's array at `W`-bit words (Verilated at run time below 16 bits:
/// minutes the first time), the device opened at `W`.
pub fn soc_image_at(word_bits: u32) -> Option<(SimBoard, SerialDevice)> {
    let (board, config) = match SimBoard::spawn_soc_image_at(word_bits, None) {
        Ok(b) => b,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED SoC image: {e}");
            return None;
        }
        Err(e) => panic!("simulated SoC image: {e}"),
    };
    assert_eq!(config.word_bits, word_bits);
    let path = board.path().display().to_string();
    let dev = SerialDevice::open(&path, config).unwrap_or_else(|e| panic!("{path}: {e}"));
    Some((board, dev))
}

/// The firmware's stack after a workload (`what`) on the SoC image: printed, and checked to
/// have stayed inside the reserve it was linked with (`STACK_USE`, painted at boot).
pub fn check_stack(dev: &mut SerialDevice, what: &str) {
    let stack = dev.stack_use().unwrap_or_else(|e| panic!("STACK_USE: {e}"));
    eprintln!(
        "{what}: the firmware's stack reached {} of its {} B reserve",
        stack.used, stack.reserve
    );
    assert_eq!(
        stack.reserve,
        systole_firmware::soc::STACK_RESERVE_BYTES,
        "the reserve the image was linked with"
    );
    assert!(
        stack.fits(),
        "{what}: the stack used {} B, its whole reserve of {} B: raise STACK_RESERVE_BYTES",
        stack.used,
        stack.reserve
    );
}

/// `e` and every cause under it, one line: what a conformance failure prints (each cause
/// once: `systole_device::error_chain`).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    systole_device::error_chain(e)
}

/// xorshift64: deterministic operands without an external generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// Words of one flavour: small, full-range, or extreme (saturation and -32768).
    pub fn matrix(&mut self, rows: usize, cols: usize, frac: u32) -> QMatrix {
        self.matrix_at(rows, cols, frac, 16)
    }
    /// [`Self::matrix`] with `w`-bit words (the same draws: at 16 the same words; below, a
    /// full-range word keeps its top `w` bits and the extremes are those of `w` bits).
    pub fn matrix_at(&mut self, rows: usize, cols: usize, frac: u32, w: u32) -> QMatrix {
        let (min, max) = (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1);
        let full = |x: u64| (x as i16) >> (16 - w);
        let flavour = self.below(3);
        let data = (0..rows * cols)
            .map(|_| match (flavour, self.below(4)) {
                (0, _) => self.below(64) as i16 - 32,
                (1, _) => full(self.next()),
                (_, 0) => min as i16,
                (_, 1) => max as i16,
                _ => full(self.next()),
            })
            .collect();
        QMatrix::from_vec(rows, cols, frac, data).unwrap()
    }
}
