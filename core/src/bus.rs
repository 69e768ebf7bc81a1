//! [`AcceleratorBus`]: the narrow interface to one accelerator instance.
//!
//! Two kinds of traffic: 32-bit registers (see [`crate::regmap`]) and row-wide buffer ports that
//! move one row of `size` words per clock. Implemented by the Verilator model (`systole-sim`),
//! by the firmware's MMIO layer on a board, and by test doubles. The tile driver in
//! `systole-firmware` is written once against this trait.

/// One row written into an A or B buffer bank.
#[derive(Clone, Copy, Debug)]
pub struct RowWrite<'a> {
    /// Bank 0 or 1 (double buffering: the host fills one while a command reads the other).
    pub bank: u8,
    /// Row index `k` within the bank, `< buffer_depth`.
    pub row: u16,
    /// `size` words, lane 0 first.
    pub data: &'a [i16],
}

/// One C-buffer row to read.
#[derive(Clone, Copy, Debug)]
pub struct RowRead {
    /// Bank 0 or 1.
    pub bank: u8,
    /// Row `r` of the output tile, `< size`.
    pub row: u16,
}

/// Everything that may happen on the buffer ports in one clock cycle.
#[derive(Clone, Copy, Debug, Default)]
pub struct Beat<'a> {
    /// A row to write into an A bank.
    pub a: Option<RowWrite<'a>>,
    /// A row to write into a B bank.
    pub b: Option<RowWrite<'a>>,
    /// A C row to read; its words are returned by [`AcceleratorBus::beat`].
    pub c: Option<RowRead>,
}

/// Access to one accelerator.
pub trait AcceleratorBus {
    /// Transport error (a simulator fault, a dropped serial link, ...).
    type Error;

    /// Reads a register. Takes no clock cycle on the simulator.
    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error>;

    /// Writes a register; takes one clock cycle.
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error>;

    /// One clock cycle on the buffer ports: writes `beat.a` and `beat.b`, and if `beat.c` is set
    /// copies that C row (`size` words) into `c_out`, which must then be `size` long.
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error>;

    /// Lets `cycles` clock cycles pass with nothing on the ports.
    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error>;

    /// Writes `words` into the feature-map buffer of the conv unit at word addresses
    /// `addr..addr + words.len()` (below `fm_depth`), one row of `ArrayConfig::fm_row_words`
    /// words per clock: `addr` and `words.len()` must be multiples of that row width.
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error>;

    /// Writes one A row (one cycle).
    fn write_a_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                a: Some(RowWrite { bank, row, data }),
                ..Beat::default()
            },
            &mut [],
        )
    }

    /// Writes one B row (one cycle).
    fn write_b_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                b: Some(RowWrite { bank, row, data }),
                ..Beat::default()
            },
            &mut [],
        )
    }

    /// Reads one C row (one cycle).
    fn read_c_row(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), Self::Error> {
        self.beat(
            &Beat {
                c: Some(RowRead { bank, row }),
                ..Beat::default()
            },
            out,
        )
    }
}

/// A borrowed bus is a bus: the board's server lends its bus to the training step for one
/// request (`systole_firmware`'s `BoardProducts<&mut B>`). Every method forwards, the provided
/// ones too, so a bus's own row methods are kept.
impl<T: AcceleratorBus + ?Sized> AcceleratorBus for &mut T {
    type Error = T::Error;

    fn read_reg(&mut self, addr: u8) -> Result<u32, Self::Error> {
        (**self).read_reg(addr)
    }
    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), Self::Error> {
        (**self).write_reg(addr, value)
    }
    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), Self::Error> {
        (**self).beat(beat, c_out)
    }
    fn idle(&mut self, cycles: u32) -> Result<(), Self::Error> {
        (**self).idle(cycles)
    }
    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), Self::Error> {
        (**self).write_fm(addr, words)
    }
    fn write_a_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        (**self).write_a_row(bank, row, data)
    }
    fn write_b_row(&mut self, bank: u8, row: u16, data: &[i16]) -> Result<(), Self::Error> {
        (**self).write_b_row(bank, row, data)
    }
    fn read_c_row(&mut self, bank: u8, row: u16, out: &mut [i16]) -> Result<(), Self::Error> {
        (**self).read_c_row(bank, row, out)
    }
}
