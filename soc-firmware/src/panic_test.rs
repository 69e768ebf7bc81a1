//! The `panic-test` feature: a bus that panics on one `IDLE` request and in a board operation
//! of one seed, so tests can provoke the panic path from the host.

use systole_core::bus::Beat;
use systole_core::AcceleratorBus;
use systole_core::numeric::tile_seed;
use systole_core::regmap;
use systole_firmware::protocol::panic::{PANIC_TEST_IDLE_CYCLES, PANIC_TEST_OP_SEED};

/// The board's bus, panicking on `idle(PANIC_TEST_IDLE_CYCLES)` and on the first tile's seed
/// of an operation seeded `PANIC_TEST_OP_SEED`.
pub struct PanicTestBus<B>(pub B);

impl<B: AcceleratorBus> AcceleratorBus for PanicTestBus<B> {
    type Error = B::Error;

    fn read_reg(&mut self, addr: u8) -> Result<u32, B::Error> {
        self.0.read_reg(addr)
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), B::Error> {
        if addr == regmap::SEED && value == tile_seed(PANIC_TEST_OP_SEED, 0, 0) {
            panic!("panic-test: an operation seeded {PANIC_TEST_OP_SEED:#x} asks for a panic");
        }
        self.0.write_reg(addr, value)
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), B::Error> {
        self.0.beat(beat, c_out)
    }
    fn idle(&mut self, cycles: u32) -> Result<(), B::Error> {
        if cycles == PANIC_TEST_IDLE_CYCLES {
            panic!("panic-test: IDLE {cycles:#x} asks for a panic");
        }
        self.0.idle(cycles)
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), B::Error> {
        self.0.write_fm(addr, words)
    }
}
