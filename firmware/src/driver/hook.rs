//! The hook through which the matmul driver lets an operand be gathered on chip instead of
//! written row by row. The driver owns this interface and the conv driver (`conv.rs`)
//! implements it, so the driver needs nothing of the conv driver.

use super::{Command, Res, Run};
use systole_core::AcceleratorBus;

/// What the gather hook did for one command.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Started {
    /// A is gathered (the host writes no A rows).
    pub a: bool,
    /// B is gathered (the host writes no B rows).
    pub b: bool,
    /// `STATUS` bits to wait on before queuing the command.
    pub busy_bits: u32,
}

/// The hook the matmul driver calls before writing a command's rows.
pub(crate) trait Gathers<B: AcceleratorBus> {
    /// Starts the gathers `cmd` needs into `bank` (`need_*`: the bank does not hold them yet).
    fn start(
        &mut self,
        run: &mut Run<'_, '_, B>,
        cmd: &Command,
        bank: usize,
        need_a: bool,
        need_b: bool,
    ) -> Res<Started, B::Error>;
}
