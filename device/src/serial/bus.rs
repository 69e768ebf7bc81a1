//! [`SerialBus`]'s two faces: the [`AcceleratorBus`] the drivers run over (each register access,
//! row and feature-map write becomes a protocol request, batched where the protocol allows) and
//! the [`Link`] [`BusDevice`](crate::backend::BusDevice) asks for its parts: the counters
//! ([`Meter`]) always, and the board operations ([`BoardOps`]) and training when the board
//! announced them.

use super::{LinkError, SerialBus};
use crate::backend::{BoardOps, KeptProduct, KeptStore, Link, Meter, Traffic};
use std::io::{Read, Write};
use systole_core::{regmap, AcceleratorBus};
use systole_firmware::conv::ConvJob;
use systole_firmware::driver::{DriverStats, MatmulJob, Transposed};
use systole_firmware::protocol::{cmd, Request};

impl<T: Read + Write> AcceleratorBus for SerialBus<T> {
    type Error = LinkError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, LinkError> {
        let r = self
            .flush()
            .and_then(|()| self.transact(cmd::READ_REG, &[addr]));
        let p = self.guard(r)?;
        let b: [u8; 4] = p
            .as_slice()
            .try_into()
            .map_err(|_| LinkError::Protocol(format!("READ_REG answer of {} bytes", p.len())))?;
        Ok(u32::from_le_bytes(b))
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), LinkError> {
        if addr == regmap::COMMAND {
            self.c_cache = None;
        }
        let r = self
            .close_runs()
            .and_then(|()| self.push_entry(&Request::WriteReg { addr, value }));
        self.guard(r)
    }

    fn beat(
        &mut self,
        beat: &systole_core::bus::Beat<'_>,
        c_out: &mut [i16],
    ) -> Result<(), LinkError> {
        let mut r = Ok(());
        if let Some(a) = beat.a {
            r = self.add_row(0, a.bank, a.row, a.data);
        }
        if let (Ok(()), Some(b)) = (&r, beat.b) {
            r = self.add_row(1, b.bank, b.row, b.data);
        }
        if let (Ok(()), Some(c)) = (&r, beat.c) {
            r = self.read_c(c.bank, c.row, c_out);
        }
        self.guard(r)
    }

    fn idle(&mut self, cycles: u32) -> Result<(), LinkError> {
        let r = self
            .close_runs()
            .and_then(|()| self.push_entry(&Request::Idle { cycles }));
        self.guard(r)
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), LinkError> {
        let r = self.add_fm(addr, words);
        self.guard(r)
    }
}

impl<T: Read + Write> Link for SerialBus<T> {
    const KIND: &'static str = "serial";

    fn settle(&mut self) -> Result<(), LinkError> {
        self.flush()
    }

    fn meter(&mut self) -> Option<&mut dyn Meter<LinkError>> {
        Some(self)
    }

    /// A board that announced a tensor store runs operations itself.
    fn board(&mut self) -> Option<&mut dyn BoardOps<LinkError>> {
        if self.has_board_ops() {
            Some(self)
        } else {
            None
        }
    }

    /// A board that announced a heap trains itself.
    fn trainer(&mut self) -> Option<&mut dyn super::TrainLink> {
        if self.trains() {
            Some(self)
        } else {
            None
        }
    }
}

impl<T: Read + Write> Meter<LinkError> for SerialBus<T> {
    /// Every frame waits for its answer: each try (a resend too) is a round trip.
    fn traffic(&self) -> Traffic {
        let c = &self.counters;
        Traffic {
            bytes_out: c.bytes_out,
            bytes_in: c.bytes_in,
            frames: c.frames,
            round_trips: c.frames + c.resends,
            resends: c.resends,
        }
    }

    /// A board whose firmware predates `COUNTERS` refuses it as unknown: it reports none, and
    /// is not asked again.
    fn firmware_cycles(&mut self) -> Result<Option<u64>, LinkError> {
        if self.board_counts == Some(false) {
            return Ok(None);
        }
        match self.board_counters() {
            Ok((_, cycles)) => {
                self.board_counts = Some(true);
                Ok(cycles)
            }
            Err(LinkError::Refused { cmd: c, .. })
                if c == cmd::COUNTERS && self.board_counts.is_none() =>
            {
                self.board_counts = Some(false);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

// `Link::board` hands this out only on a board with a store; each method checks it is there.
impl<T: Read + Write> BoardOps<LinkError> for SerialBus<T> {
    fn matmul(
        &mut self,
        job: &MatmulJob<'_>,
        tr: Transposed,
        out: &mut [i16],
    ) -> Option<Result<DriverStats, LinkError>> {
        self.board_matmul(job, tr, out)
    }

    fn conv(
        &mut self,
        job: &ConvJob<'_>,
        out: &mut [i16],
    ) -> Option<Result<DriverStats, LinkError>> {
        self.board_conv(job, out)
    }

    fn store(&self) -> KeptStore {
        self.kept_store()
    }

    fn holds(&self, key: u64) -> bool {
        self.holds_kept(key)
    }

    fn keep(&mut self, key: u64, rows: usize, cols: usize, words: &[i16]) -> Result<(), LinkError> {
        SerialBus::keep(self, key, rows, cols, words)
    }

    fn read_kept(&mut self, key: u64, out: &mut [i16]) -> Result<(), LinkError> {
        SerialBus::read_kept(self, key, out)
    }

    fn free_kept(&mut self, key: u64) -> Result<(), LinkError> {
        SerialBus::free_kept(self, key)
    }

    fn matmul_kept(&mut self, p: &KeptProduct) -> Result<DriverStats, LinkError> {
        SerialBus::matmul_kept(self, p)
    }
}
