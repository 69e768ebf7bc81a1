//! [`BusDevice`]'s kept tensors on a board that keeps them in its RAM ([`Link::board`]):
//! the table of handles is the device's ([`HostTensors`], words left on the board), the words
//! and the products the link's. Every refusal (no room, a foreign, freed or lost handle, a
//! bad format) comes before anything crosses the link.

use super::{BoardOps, BusDevice, KeptProduct, KeptStore, Link};
use crate::resident::{product_shape, HostTensors};
use crate::{Device, DeviceError, DeviceTensor, TensorRoom};
use systole_firmware::driver::{DriverStats, Transposed};
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

impl<L: Link> BusDevice<L>
where
    L::Error: std::error::Error + Send + Sync + 'static,
{
    /// Room for kept tensors on the board: its store, or the device's limit when lower.
    pub(super) fn board_room(&self, store: KeptStore) -> TensorRoom {
        TensorRoom {
            used: store.kept_words,
            capacity: store.capacity.min(self.tensors.limit()),
        }
    }

    /// Refuses `needed` more words, or one more tensor, that the board has no room for.
    fn check_board_room(&self, store: KeptStore, needed: usize) -> Result<(), DeviceError> {
        HostTensors::check_room(self.board_room(store), needed, &self.name())?;
        if store.kept >= store.most {
            return Err(DeviceError::TooManyTensors {
                device: self.name(),
                most: store.most,
            });
        }
        Ok(())
    }

    /// The board's key for `t`, refused when `t` is not alive here or the board lost it.
    fn board_key(&mut self, t: &DeviceTensor) -> Result<u64, DeviceError> {
        let key = self.tensors.key(t, &self.name())?;
        if !self.holds(key) {
            return Err(DeviceError::TensorLost {
                device: self.name(),
                tensor: t.describe(),
            });
        }
        Ok(key)
    }

    /// Runs `call` on the board's store, adding the bytes, frames and round trips it moved to
    /// the stats (also when it failed).
    fn on_store<R>(
        &mut self,
        call: impl FnOnce(&mut dyn BoardOps<L::Error>) -> Result<R, L::Error>,
    ) -> Result<R, DeviceError> {
        let before = self.traffic();
        let r = match self.bus.board() {
            Some(board) => call(board),
            None => {
                return Err(DeviceError::Unsupported(format!(
                    "{} keeps no tensors on the board",
                    self.name()
                )))
            }
        };
        self.count_traffic(before);
        r.map_err(|e| {
            // What the board spent on a failed request must not count for the next one.
            self.firmware_mark = None;
            self.transport(e)
        })
    }

    /// Whether the board holds kept tensor `key`.
    fn holds(&mut self, key: u64) -> bool {
        self.bus.board().is_some_and(|b| b.holds(key))
    }

    fn transport(&self, e: L::Error) -> DeviceError {
        DeviceError::Transport {
            device: self.name(),
            source: Box::new(e),
        }
    }

    pub(super) fn keep_on_board(
        &mut self,
        store: KeptStore,
        t: &QMatrix,
    ) -> Result<DeviceTensor, DeviceError> {
        // Its words and format at the array's W, as a product would check them.
        let spec = OutputSpec {
            frac: 0,
            rounding: systole_core::Rounding::Truncate,
            seed: 0,
        };
        systole_golden::check_at(t, t, &spec, self.config.word_bits)?;
        self.check_board_room(store, t.data.len())?;
        if u16::try_from(t.rows).is_err() || u16::try_from(t.cols).is_err() {
            return Err(DeviceError::Unsupported(format!(
                "{} keeps tensors of at most 65535 rows and columns; this one is {}x{}",
                self.name(),
                t.rows,
                t.cols
            )));
        }
        let key = self.tensors.next_key();
        self.on_store(|b| b.keep(key, t.rows, t.cols, &t.data))?;
        Ok(self.tensors.insert(t.rows, t.cols, t.frac, None))
    }

    pub(super) fn read_from_board(&mut self, t: &DeviceTensor) -> Result<QMatrix, DeviceError> {
        let key = self.board_key(t)?;
        let mut words = vec![0i16; t.words()];
        self.on_store(|b| b.read_kept(key, &mut words))?;
        Ok(QMatrix::from_vec(t.rows(), t.cols(), t.frac(), words)?)
    }

    pub(super) fn free_on_board(&mut self, t: &DeviceTensor) -> Result<(), DeviceError> {
        let key = self.tensors.key(t, &self.name())?;
        // A tensor the board lost is gone already: only the handle goes.
        if self.holds(key) {
            self.on_store(|b| b.free_kept(key))?;
        }
        self.tensors.remove(t, &self.name())
    }

    pub(super) fn matmul_on_board(
        &mut self,
        store: KeptStore,
        a: &DeviceTensor,
        b: &DeviceTensor,
        tr: Transposed,
        out: &OutputSpec,
    ) -> Result<DeviceTensor, DeviceError> {
        let (ka, kb) = (self.board_key(a)?, self.board_key(b)?);
        let (m, k, n) = product_shape(a, b, tr)?;
        let w = self.config.word_bits;
        for frac in [a.frac(), b.frac(), out.frac] {
            if frac >= w {
                return Err(NumericError::FracBitsAt { frac, word_bits: w }.into());
            }
        }
        let shift = systole_golden::output_shift(a.frac() + b.frac(), out.frac)?;
        self.check_board_room(store, m * n)?;
        let p = KeptProduct {
            a: ka,
            b: kb,
            out: self.tensors.next_key(),
            tr,
            m,
            n,
            shift,
            rounding: out.rounding,
            seed: out.seed,
        };
        // The board's cycles around the request, asked outside the counts (as `run` does):
        // the questions only measure.
        if self.firmware_mark.is_none() {
            self.firmware_mark = self.firmware_cycles().map_err(|e| self.transport(e))?;
        }
        let st: DriverStats = self.on_store(|b| b.matmul_kept(&p))?;
        self.count_firmware_cycles()
            .map_err(|e| self.transport(e))?;
        let (to, from) = crate::conv_unit::port_bytes(&self.config, &st);
        self.stats.port_bytes += to + from;
        self.stats.ops += 1;
        self.stats.board_ops += 1;
        self.stats.macs += (m * k * n) as u64;
        self.stats.tensor_bytes += 2 * (a.words() + b.words() + m * n) as u64;
        self.stats.cycles += st.cycles;
        self.stats.mac_cycles += st.mac_cycles;
        Ok(self.tensors.insert(m, n, out.frac, None))
    }
}
