//! The C side of the tile driver: reading converted tiles out of the C banks, in the cycles
//! the driver would otherwise spend waiting.

use super::{DriverError, Res, Run, MAX_LANES};
use systole_core::bus::{RowBlock, RowRead};
use systole_core::{regmap, AcceleratorBus};

impl<B: AcceleratorBus> Run<'_, '_, B> {
    /// Waits for the gather engines in `bits`, reading finished C rows meanwhile so that the
    /// cycles are not lost.
    pub(super) fn wait_gathers(&mut self, bits: u32, out: &mut [i16]) -> Res<(), B::Error> {
        let mut waited = 0u32;
        let mut c_row = [0i16; MAX_LANES];
        let size = self.size;
        loop {
            let s = self.status()?;
            if s & regmap::STATUS_ERROR != 0 {
                return Err(DriverError::Device { status: s });
            }
            if s & bits == 0 {
                return Ok(());
            }
            match self.next_c_read(true)? {
                Some((bank, row)) => {
                    self.bus
                        .read_c_row(bank as u8, row as u16, &mut c_row[..size])
                        .map_err(DriverError::Bus)?;
                    self.stats.beats += 1;
                    self.store_c_row(bank, row, &c_row[..size], out);
                }
                None => self.idle_one(&mut waited, "the gather engines to fill the banks")?,
            }
        }
    }

    /// The next C row to read `(bank, row)`, oldest tile first, if one is known to be ready.
    /// Inlined: it runs every beat of the hot loop.
    #[inline(always)]
    pub(super) fn next_c_read(&mut self, poll: bool) -> Res<Option<(usize, usize)>, B::Error> {
        let oldest = match (self.pending[0], self.pending[1]) {
            (Some(x), Some(y)) => Some(if x.emit.wrapping_sub(y.emit) > 1 << 31 {
                x
            } else {
                y
            }),
            (x, y) => x.or(y),
        };
        let Some(p) = oldest else { return Ok(None) };
        let bank = (p.emit & 1) as usize;
        if !p.ready {
            if !poll {
                return Ok(None);
            }
            let done = self.read(regmap::DONE_COUNT)?.wrapping_sub(self.done0);
            if done.wrapping_sub(p.emit).wrapping_sub(1) >= 1 << 31 {
                return Ok(None);
            }
            if let Some(pp) = self.pending[bank].as_mut() {
                pp.ready = true;
            }
        }
        Ok(Some((bank, p.rows_read)))
    }

    /// Copies C row `row` of the tile pending in `bank` into `out`, dropping padding lanes.
    #[inline(always)]
    pub(super) fn store_c_row(&mut self, bank: usize, row: usize, data: &[i16], out: &mut [i16]) {
        let n = self.n;
        let Some(p) = self.pending[bank].as_mut() else {
            return;
        };
        let i = p.i0 + row;
        let cols = self.size.min(n - p.j0);
        out[i * n + p.j0..][..cols].copy_from_slice(&data[..cols]);
        p.rows_read += 1;
        self.stats.rows_read += 1;
        if p.rows_read == p.rows {
            self.pending[bank] = None;
        }
    }

    /// With a bus that moves blocks: reads every tile known (after one `DONE_COUNT` poll) to
    /// have finished converting, a block each.
    pub(super) fn read_ready_tiles(&mut self, out: &mut [i16]) -> Res<(), B::Error> {
        while let Some((bank, _)) = self.next_c_read(true)? {
            self.read_tile_block(bank, out)?;
        }
        Ok(())
    }

    /// Reads the unread rows of the (converted) tile pending in C bank `bank` as one block.
    fn read_tile_block(&mut self, bank: usize, out: &mut [i16]) -> Res<(), B::Error> {
        let Some(p) = self.pending[bank] else {
            return Ok(());
        };
        let n = self.n;
        let rows = p.rows - p.rows_read;
        let block = RowBlock {
            bank: bank as u8,
            first_row: p.rows_read as u16,
            rows: rows as u16,
            lanes: self.size.min(n - p.j0) as u16,
            offset: (p.i0 + p.rows_read) * n + p.j0,
            row_step: n,
            lane_step: 1,
        };
        self.bus
            .read_block(&block, self.size, out)
            .map_err(DriverError::Bus)?;
        self.stats.beats += rows as u64;
        self.stats.rows_read += rows as u64;
        self.pending[bank] = None;
        Ok(())
    }

    /// Waits for the tile pending in C bank `bank` (if any) and reads its remaining rows.
    pub(super) fn drain(&mut self, bank: usize, out: &mut [i16]) -> Res<(), B::Error> {
        let Some(p) = self.pending[bank] else {
            return Ok(());
        };
        let mut waited = 0u32;
        while !self.pending[bank].is_some_and(|x| x.ready) {
            let done = self.read(regmap::DONE_COUNT)?.wrapping_sub(self.done0);
            if done.wrapping_sub(p.emit).wrapping_sub(1) < 1 << 31 {
                if let Some(pp) = self.pending[bank].as_mut() {
                    pp.ready = true;
                }
                break;
            }
            self.check_error()?;
            self.idle_one(&mut waited, "a tile to finish converting")?;
        }
        if self.bus.moves_blocks() {
            return self.read_tile_block(bank, out);
        }
        let mut c_row = [0i16; MAX_LANES];
        let size = self.size;
        while let Some(p) = self.pending[bank] {
            let read = RowRead {
                bank: bank as u8,
                row: p.rows_read as u16,
            };
            self.bus
                .read_c_row(read.bank, read.row, &mut c_row[..size])
                .map_err(DriverError::Bus)?;
            self.stats.beats += 1;
            self.store_c_row(bank, p.rows_read, &c_row[..size], out);
        }
        Ok(())
    }
}
