//! [`BoardTraining`]: a device whose board trains itself (issue 17), as the trainer uses it:
//! the state and data set uploaded once, steps run on the board, the state read back. Every
//! request's link traffic and the board's cycles go into the device's [`DeviceStats`], as an
//! operation's do.

use crate::serial::link_error::LinkError;
use crate::{DeviceError, DeviceStats};
use systole_firmware::protocol::train::RunCounters;
use systole_step::resident::{DataSet, TrainState};

pub use systole_firmware::protocol::train::MAX_RUN_STEPS;

/// The link's counts the stats are kept from: bytes out, bytes in, frames, resends.
pub(crate) type Counts = (u64, u64, u64, u64);

/// What a board that trains itself offers the host: uploads, steps and the state back.
pub trait TrainLink {
    /// The board's heap in bytes (where the state, the data set and the step's tensors live).
    fn heap_bytes(&self) -> u32;
    /// The link's `(bytes out, bytes in, frames, resends)` so far.
    fn counts(&self) -> Counts;
    /// Uploads a training state's wire form (`TrainState::encode`); the board checks and
    /// installs it whole, replacing the one it held.
    fn write_state(&mut self, bytes: &[u8]) -> Result<(), LinkError>;
    /// Reads the board's state back (its wire form).
    fn read_state(&mut self) -> Result<Vec<u8>, LinkError>;
    /// Uploads a data set's records (`DataSet::encode_records`), replacing the one it held.
    fn write_data(&mut self, features: u16, divisor: u16, records: &[u8]) -> Result<(), LinkError>;
    /// Runs `steps` (at most [`MAX_RUN_STEPS`]) steps: batches `first_batch..` of epoch
    /// `epochs_done + 1` at batch size `batch` and rate `lr` (`in_order`: of the resident
    /// images in their stored order). Returns the board's counters and each step's loss and
    /// correct count.
    fn run_steps(
        &mut self,
        at: (u32, u32),
        steps: u16,
        batch: u16,
        rate: (f32, bool),
    ) -> Result<(RunCounters, Vec<(f32, u16)>), LinkError>;
}

/// A board that trains on resident state and data, borrowed from its device.
pub struct BoardTraining<'d> {
    pub(crate) link: &'d mut dyn TrainLink,
    pub(crate) stats: &'d mut DeviceStats,
    pub(crate) name: String,
    /// The device's mark of the board's firmware cycles, void once the board trained.
    pub(crate) firmware_mark: &'d mut Option<u64>,
}

impl BoardTraining<'_> {
    /// The board's heap in bytes.
    pub fn heap_bytes(&self) -> u32 {
        self.link.heap_bytes()
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs one exchange, adding its link traffic to the stats; a failure keeps the link's
    /// error as its source.
    fn counted<R>(
        &mut self,
        call: impl FnOnce(&mut dyn TrainLink) -> Result<R, LinkError>,
    ) -> Result<R, DeviceError> {
        let (o0, i0, f0, r0) = self.link.counts();
        *self.firmware_mark = None;
        let r = call(self.link);
        let (o1, i1, f1, r1) = self.link.counts();
        let s = &mut *self.stats;
        s.bytes_to_device += o1 - o0;
        s.bytes_from_device += i1 - i0;
        s.frames += f1 - f0;
        s.round_trips += (f1 + r1) - (f0 + r0);
        s.resends += r1 - r0;
        r.map_err(|e| DeviceError::Transport {
            device: self.name.clone(),
            source: Box::new(e),
        })
    }

    /// Uploads `state`, replacing the board's.
    pub fn write_state(&mut self, state: &TrainState) -> Result<(), DeviceError> {
        if !state.encodable() {
            return Err(DeviceError::Unsupported(
                "the model's description does not fit the board's training state (a layer wider than 65535, or more than 255 layers)".into(),
            ));
        }
        let bytes = state.encode();
        self.counted(|l| l.write_state(&bytes))
    }

    /// Reads the board's state back.
    pub fn read_state(&mut self) -> Result<TrainState, DeviceError> {
        let bytes = self.counted(|l| l.read_state())?;
        TrainState::decode(&bytes).map_err(|e| DeviceError::Transport {
            device: self.name.clone(),
            source: Box::new(e),
        })
    }

    /// Uploads `data`, replacing the board's data set.
    pub fn write_data(&mut self, data: &DataSet) -> Result<(), DeviceError> {
        let (Ok(features), records) = (u16::try_from(data.features), data.encode_records()) else {
            return Err(DeviceError::Unsupported(format!(
                "images of {} values do not fit the board's data set (at most 65535)",
                data.features
            )));
        };
        self.counted(|l| l.write_data(features, data.divisor, &records))
    }

    /// Runs `steps` steps (see [`TrainLink::run_steps`]; `in_order`: of the resident images
    /// in their stored order); the board's cycles go into the stats (`firmware_cycles`: its
    /// CPU's, `cycles` / `mac_cycles`: the array's).
    pub fn run_steps(
        &mut self,
        at: (u32, u32),
        steps: u16,
        batch: u16,
        lr: f32,
        in_order: bool,
    ) -> Result<(RunCounters, Vec<(f32, u16)>), DeviceError> {
        let (c, results) = self.counted(|l| l.run_steps(at, steps, batch, (lr, in_order)))?;
        let s = &mut *self.stats;
        s.firmware_cycles += c.cpu_cycles;
        s.cycles += c.array_cycles;
        s.mac_cycles += c.mac_cycles;
        s.board_steps += u64::from(c.steps);
        Ok((c, results))
    }
}
