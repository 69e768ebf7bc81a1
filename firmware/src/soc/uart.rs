//! [`Uart`]: the SoC's UART as an `embedded_io` byte stream.

use crate::mmio::Regs;
use embedded_io::{ErrorKind, ErrorType, Read, ReadReady, Write, WriteReady};
use systole_core::soc::{UART_DATA, UART_RX_OVERRUN, UART_RX_VALID, UART_STATUS, UART_TX_READY};

/// What the UART reports besides bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UartError {
    /// At least one received byte was lost (the receiver was full). Reported once, by a read
    /// that finds the receiver empty after the loss was seen: the lost bytes came after every
    /// byte the receiver held, so the frame being received then is the one they belonged to
    /// (the server answers it `BytesLost`, and the host resends it).
    Overrun,
}

impl core::fmt::Display for UartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UartError::Overrun => f.write_str("UART receive overrun: a received byte was lost"),
        }
    }
}

impl core::error::Error for UartError {}

impl embedded_io::Error for UartError {
    fn kind(&self) -> ErrorKind {
        match self {
            UartError::Overrun => ErrorKind::Other,
        }
    }
}

/// The UART at `UART_DATA` / `UART_STATUS`. Reads block until a byte arrives; writes block
/// while the transmitter is busy.
pub struct Uart<R> {
    regs: R,
    /// An overrun seen by a status read (which clears it) and not yet reported.
    overrun_seen: bool,
    overruns: u32,
}

impl<R: Regs> Uart<R> {
    /// The UART on the register file `regs`.
    pub fn new(regs: R) -> Self {
        Uart {
            regs,
            overrun_seen: false,
            overruns: 0,
        }
    }

    /// Overruns seen so far.
    pub fn overruns(&self) -> u32 {
        self.overruns
    }

    /// Reads `UART_STATUS`, keeping its sticky overrun bit.
    fn status(&mut self) -> u32 {
        let s = self.regs.read32(UART_STATUS);
        if UART_RX_OVERRUN.get(s) != 0 {
            self.overrun_seen = true;
            self.overruns = self.overruns.wrapping_add(1);
        }
        s
    }

    /// Sends one byte, waiting for the transmitter.
    pub fn send(&mut self, byte: u8) {
        while UART_TX_READY.get(self.status()) == 0 {}
        self.regs.write32(UART_DATA, u32::from(byte));
    }
}

impl<R> ErrorType for Uart<R> {
    type Error = UartError;
}

impl<R: Regs> Read for Uart<R> {
    /// Waits for the first byte, then takes the bytes already received, up to `buf.len()`.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, UartError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut n = 0;
        loop {
            let s = self.status();
            if UART_RX_VALID.get(s) != 0 {
                buf[n] = self.regs.read32(UART_DATA) as u8;
                n += 1;
                if n == buf.len() {
                    return Ok(n);
                }
            } else if n > 0 {
                return Ok(n);
            } else if core::mem::take(&mut self.overrun_seen) {
                // The receiver dropped the bytes that came while it was full: they followed
                // every byte it held then, all delivered now, so the frame received last is
                // the damaged one.
                return Err(UartError::Overrun);
            }
        }
    }
}

impl<R: Regs> ReadReady for Uart<R> {
    fn read_ready(&mut self) -> Result<bool, UartError> {
        Ok(UART_RX_VALID.get(self.status()) != 0)
    }
}

impl<R: Regs> Write for Uart<R> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, UartError> {
        for &b in buf {
            self.send(b);
        }
        Ok(buf.len())
    }

    /// Waits until the transmitter takes a byte again, i.e. has taken the last one written
    /// (the panic handler does this before it resets the CPU).
    fn flush(&mut self) -> Result<(), UartError> {
        while UART_TX_READY.get(self.status()) == 0 {}
        Ok(())
    }
}

impl<R: Regs> WriteReady for Uart<R> {
    fn write_ready(&mut self) -> Result<bool, UartError> {
        Ok(UART_TX_READY.get(self.status()) != 0)
    }
}
