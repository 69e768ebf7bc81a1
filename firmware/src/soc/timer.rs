//! [`Timer`]: the SoC's cycle counter, and `embedded_hal::delay::DelayNs` on it.

use crate::mmio::Regs;
use embedded_hal::delay::DelayNs;
use systole_core::soc::{SYS_CLOCK_HZ, TIMER_HI, TIMER_LO};

/// Why the timer cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimerError {
    /// `SYS_CLOCK_HZ` reads 0: delays in time units cannot be converted to cycles.
    NoClock,
}

impl core::fmt::Display for TimerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TimerError::NoClock => f.write_str("SYS_CLOCK_HZ reads 0: the SoC's clock is unknown"),
        }
    }
}

impl core::error::Error for TimerError {}

/// Cycles since reset from the counter at `TIMER_LO` / `TIMER_HI` (reading `TIMER_LO`
/// latches the high word, so the pair is coherent).
pub fn cycles<R: Regs>(regs: &mut R) -> u64 {
    let lo = regs.read32(TIMER_LO);
    let hi = regs.read32(TIMER_HI);
    u64::from(hi) << 32 | u64::from(lo)
}

/// The 64-bit cycle counter at `TIMER_LO` / `TIMER_HI` and the SoC's clock frequency.
pub struct Timer<R> {
    regs: R,
    clock_hz: u32,
}

impl<R: Regs> Timer<R> {
    /// The timer, with the clock frequency read from `SYS_CLOCK_HZ`.
    pub fn new(mut regs: R) -> Result<Self, TimerError> {
        let clock_hz = regs.read32(SYS_CLOCK_HZ);
        if clock_hz == 0 {
            return Err(TimerError::NoClock);
        }
        Ok(Timer { regs, clock_hz })
    }

    /// Clock frequency in Hz.
    pub fn clock_hz(&self) -> u32 {
        self.clock_hz
    }

    /// Cycles since reset.
    pub fn cycles(&mut self) -> u64 {
        cycles(&mut self.regs)
    }

    /// Waits until `cycles` clock cycles have passed.
    pub fn wait_cycles(&mut self, cycles: u64) {
        let start = self.cycles();
        while self.cycles().wrapping_sub(start) < cycles {}
    }
}

impl<R: Regs> DelayNs for Timer<R> {
    /// Waits at least `ns` nanoseconds (rounded up to whole cycles).
    fn delay_ns(&mut self, ns: u32) {
        let cycles = (u64::from(ns) * u64::from(self.clock_hz)).div_ceil(1_000_000_000);
        self.wait_cycles(cycles);
    }
}
