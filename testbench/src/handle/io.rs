//! Reading and writing ports: by width, signed views, and word slices above 64 bits.
#![allow(unsafe_code)]

use super::{IntoPort, Port, Testbench};
use crate::ports::{Dir, PortInfo};
use crate::TestbenchError;
use core::ffi::c_void;

/// An input port of at most 64 bits, checked once by [`Testbench::input`]: [`Testbench::set`]
/// writes it without further checks or errors (for hot loops).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input(usize);

/// A port of at most 64 bits, checked once by [`Testbench::narrow_port`]: [`Testbench::get`]
/// reads it without further checks or errors (for hot loops).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Narrow(usize);

impl Testbench {
    /// The handle of the input `port` for [`Testbench::set`]: an error for an output or a port
    /// wider than 64 bits.
    pub fn input(&self, port: impl IntoPort) -> Result<Input, TestbenchError> {
        let (i, p) = self.narrow(port, "write_words")?;
        if p.dir != Dir::Input {
            return Err(TestbenchError::NotAnInput {
                name: p.name.clone(),
            });
        }
        Ok(Input(i))
    }

    /// The handle of `port` (either direction) for [`Testbench::get`]: an error for a port
    /// wider than 64 bits.
    pub fn narrow_port(&self, port: impl IntoPort) -> Result<Narrow, TestbenchError> {
        Ok(Narrow(self.narrow(port, "read_words")?.0))
    }

    /// Writes `value` to `input`, its bits above the port's width dropped (the checked
    /// [`Testbench::write`] refuses them instead).
    #[inline(always)]
    pub fn set(&mut self, input: Input, value: u64) {
        let slot = self.slots[input.0];
        let v = value & slot.mask;
        // SAFETY: the slot is the model's member for this port, of Verilator's type for its
        // width (shim.rs); the slot is this testbench's own, whichever handle came in, and a
        // port wider than 64 bits is written as its first 8 bytes only.
        unsafe {
            match slot.bytes {
                1 => slot.addr.cast::<u8>().write(v as u8),
                2 => slot.addr.cast::<u16>().write(v as u16),
                4 => slot.addr.cast::<u32>().write(v as u32),
                _ => slot.addr.cast::<u64>().write(v),
            }
        }
        self.dirty = true;
    }

    /// Reads `port`, after evaluating the logic when inputs changed since.
    #[inline(always)]
    pub fn get(&mut self, port: Narrow) -> u64 {
        self.settle();
        let slot = self.slots[port.0];
        // SAFETY: as in `set`.
        let v = unsafe {
            match slot.bytes {
                1 => u64::from(slot.addr.cast::<u8>().read()),
                2 => u64::from(slot.addr.cast::<u16>().read()),
                4 => u64::from(slot.addr.cast::<u32>().read()),
                _ => slot.addr.cast::<u64>().read(),
            }
        };
        v & slot.mask
    }

    /// Writes `value` to the input `port` (up to 64 bits wide; it must fit the width).
    pub fn write(&mut self, port: impl IntoPort, value: u64) -> Result<(), TestbenchError> {
        let (i, p) = self.narrow(port, "write_words")?;
        if p.dir != Dir::Input {
            return Err(TestbenchError::NotAnInput {
                name: p.name.clone(),
            });
        }
        if p.width < 64 && value >> p.width != 0 {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: format!("{value:#x}"),
            });
        }
        // SAFETY: `addrs[i]` is the model's member for this port, of Verilator's type for its
        // width (shim.rs).
        unsafe { store(self.addrs[i], p.width, value) };
        self.dirty = true;
        Ok(())
    }

    /// Writes a two's-complement `value` to the input `port`; it must fit the width as a
    /// signed number.
    pub fn write_signed(&mut self, port: impl IntoPort, value: i64) -> Result<(), TestbenchError> {
        let (_, p) = self.narrow(port, "write_words")?;
        let w = p.width as u32;
        let fits = w >= 64 || (value >= -(1i64 << (w - 1)) && value < (1i64 << (w - 1)));
        if !fits {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: value.to_string(),
            });
        }
        let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
        let port = self.port(&p.name.clone())?;
        self.write(port, value as u64 & mask)
    }

    /// Reads `port` (an input or an output, up to 64 bits), after evaluating the logic when
    /// inputs changed since.
    pub fn read(&mut self, port: impl IntoPort) -> Result<u64, TestbenchError> {
        let (i, p) = self.narrow(port, "read_words")?;
        let width = p.width;
        self.settle();
        // SAFETY: as in `write`.
        Ok(unsafe { load(self.addrs[i], width) })
    }

    /// Reads `port` as a two's-complement number of its width.
    pub fn read_signed(&mut self, port: impl IntoPort) -> Result<i64, TestbenchError> {
        let port = port.port_in(self)?;
        let w = self.ports[port.0].width as u32;
        let v = self.read(port)?;
        Ok(if w >= 64 {
            v as i64
        } else {
            ((v << (64 - w)) as i64) >> (64 - w)
        })
    }

    /// Writes a port of any width from 64-bit words, least significant first (`ceil(width /
    /// 64)` of them; bits above the width must be zero).
    pub fn write_words(
        &mut self,
        port: impl IntoPort,
        words: &[u64],
    ) -> Result<(), TestbenchError> {
        let port = port.port_in(self)?;
        let p = &self.ports[port.0];
        if p.dir != Dir::Input {
            return Err(TestbenchError::NotAnInput {
                name: p.name.clone(),
            });
        }
        self.check_words(port, words.len())?;
        if p.width <= 64 {
            return self.write(port, words[0]);
        }
        let top = p.width % 64;
        if top != 0 && words[words.len() - 1] >> top != 0 {
            return Err(TestbenchError::Overflow {
                name: p.name.clone(),
                width: p.width,
                value: format!("{words:x?}"),
            });
        }
        let base = self.addrs[port.0].cast::<u32>();
        for k in 0..p.words32() {
            let w = (words[k / 2] >> (32 * (k % 2))) as u32;
            // SAFETY: a port wider than 64 bits is `words32()` 32-bit words (VlWide).
            unsafe { base.add(k).write(w) };
        }
        self.dirty = true;
        Ok(())
    }

    /// Reads a port of any width as 64-bit words, least significant first.
    pub fn read_words(&mut self, port: impl IntoPort) -> Result<Vec<u64>, TestbenchError> {
        let port = port.port_in(self)?;
        let p = self.ports[port.0].clone();
        if p.width <= 64 {
            return Ok(vec![self.read(port)?]);
        }
        self.settle();
        let base = self.addrs[port.0].cast::<u32>();
        let mut out = vec![0u64; p.width.div_ceil(64)];
        for k in 0..p.words32() {
            // SAFETY: as in `write_words`.
            let w = u64::from(unsafe { base.add(k).read() });
            out[k / 2] |= w << (32 * (k % 2));
        }
        if !p.width.is_multiple_of(64) {
            let last = out.len() - 1;
            out[last] &= (1u64 << (p.width % 64)) - 1;
        }
        Ok(out)
    }

    fn narrow(
        &self,
        port: impl IntoPort,
        use_instead: &'static str,
    ) -> Result<(usize, &PortInfo), TestbenchError> {
        let i = port.port_in(self)?.0;
        let p = &self.ports[i];
        if p.width > 64 {
            return Err(TestbenchError::Width {
                name: p.name.clone(),
                width: p.width,
                words: p.width.div_ceil(64),
                use_instead,
            });
        }
        Ok((i, p))
    }

    fn check_words(&self, port: Port, got: usize) -> Result<(), TestbenchError> {
        let p = &self.ports[port.0];
        let want = p.width.div_ceil(64);
        if got != want {
            return Err(TestbenchError::WordCount {
                name: p.name.clone(),
                width: p.width,
                want,
                got,
            });
        }
        Ok(())
    }
}

/// Stores `value` in a port member of Verilator's type for `width` (8, 16, 32 or 64 bits).
#[inline]
unsafe fn store(addr: *mut c_void, width: usize, value: u64) {
    match width {
        0..=8 => addr.cast::<u8>().write(value as u8),
        9..=16 => addr.cast::<u16>().write(value as u16),
        17..=32 => addr.cast::<u32>().write(value as u32),
        _ => addr.cast::<u64>().write(value),
    }
}

/// Loads a port member of Verilator's type for `width`, masked to the width.
#[inline]
unsafe fn load(addr: *const c_void, width: usize) -> u64 {
    let v = match width {
        0..=8 => u64::from(addr.cast::<u8>().read()),
        9..=16 => u64::from(addr.cast::<u16>().read()),
        17..=32 => u64::from(addr.cast::<u32>().read()),
        _ => addr.cast::<u64>().read(),
    };
    if width >= 64 {
        v
    } else {
        v & ((1u64 << width) - 1)
    }
}

/// Where a port lives in the model, for [`Testbench::set`] and [`Testbench::get`]: the
/// member's address, its size in bytes (Verilator's type for the width; 8 above 64 bits: the
/// first two words of the wide port) and the width's mask.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub addr: *mut c_void,
    pub bytes: u8,
    pub mask: u64,
}

impl Slot {
    pub(crate) fn new(addr: *mut c_void, width: usize) -> Slot {
        let bytes = match width {
            0..=8 => 1,
            9..=16 => 2,
            17..=32 => 4,
            _ => 8,
        };
        let mask = if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        Slot { addr, bytes, mask }
    }
}
