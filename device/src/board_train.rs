//! [`BoardTraining`]: a device whose board trains itself, as the trainer uses it:
//! the state and data set uploaded once, steps run on the board, the state read back. Every
//! request's link traffic and the board's cycles go into the device's [`DeviceStats`], as an
//! operation's do.

use crate::serial::link_error::LinkError;
use crate::{DeviceError, DeviceStats};
use std::collections::BTreeMap;
use systole_firmware::protocol::train::RunCounters;
pub use systole_firmware::protocol::train::{EvalAnswer, HeapUse};
use systole_step::resident::{DataSet, TrainState};
use systole_step::SaturationCount;

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
    /// Reads the board's state back: its wire form, or with `params_only` its
    /// parameters-only form (`TrainState::encode_params`).
    fn read_state(&mut self, params_only: bool) -> Result<Vec<u8>, LinkError>;
    /// Whether the board reads the parameters alone and takes the formats alone
    /// (`CAP_STATE_PARTS`).
    fn reads_parts(&self) -> bool;
    /// Replaces the board's remembered formats (their wire form, `encode_formats`).
    fn write_formats(&mut self, bytes: &[u8]) -> Result<(), LinkError>;
    /// Whether the board takes packed pixels (`DATA_WRITE_PACKED`).
    fn takes_packed(&self) -> bool;
    /// Whether the board measures its heap (`HEAP_USE`).
    fn measures_heap(&self) -> bool;
    /// The board's heap use and its peak since the last call (`HEAP_USE`).
    fn heap_use(&mut self) -> Result<HeapUse, LinkError>;
    /// Uploads a data set's records (`DataSet::encode_records`) replacing the one it held;
    /// `form` is (features, divisor, bits): pixels packed at `bits` bits (`DATA_WRITE_PACKED`),
    /// or `None`, a byte a pixel (`DATA_WRITE`).
    fn write_data(&mut self, form: (u16, u16, Option<u8>), records: &[u8])
        -> Result<(), LinkError>;
    /// Whether the board keeps a test split and evaluates on it (`CAP_EVALUATE`).
    fn evaluates(&self) -> bool;
    /// Uploads the test split's records (packed at `form`'s bits: features, divisor, bits),
    /// replacing the one it held.
    fn write_test_data(&mut self, form: (u16, u16, u8), records: &[u8]) -> Result<(), LinkError>;
    /// Evaluates the board's state on its test split after `epochs` completed epochs
    /// (`EVALUATE`).
    fn evaluate(&mut self, epochs: u32) -> Result<EvalAnswer, LinkError>;
    /// Whether the board counts the saturation of what it runs (`CAP_SATURATION`).
    fn counts_saturation(&self) -> bool;
    /// The saturation counts of the steps and evaluations run on the board's installed state,
    /// per operation (`SATURATION`).
    fn saturation(&mut self) -> Result<BTreeMap<String, SaturationCount>, LinkError>;
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

    /// Whether the board keeps a data set packed (else a byte a pixel: older firmware).
    pub fn takes_packed(&self) -> bool {
        self.link.takes_packed()
    }

    /// The board's heap use and its peak since the last call; `None` on a board that cannot
    /// measure its heap (older firmware, the pty board simulator).
    pub fn heap_use(&mut self) -> Result<Option<HeapUse>, DeviceError> {
        if !self.link.measures_heap() {
            return Ok(None);
        }
        self.counted(|l| l.heap_use()).map(Some)
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
        let bytes = self.counted(|l| l.read_state(false))?;
        TrainState::decode(&bytes).map_err(|e| DeviceError::Transport {
            device: self.name.clone(),
            source: Box::new(e),
        })
    }

    /// Whether the board reads its parameters alone and takes formats alone (else only the
    /// whole state goes either way: older firmware).
    pub fn reads_parts(&self) -> bool {
        self.link.reads_parts()
    }

    /// Reads the board's parameters, formats and step counter (its `velocity` comes back
    /// empty): what an evaluation needs, half the bytes of the whole state.
    pub fn read_params(&mut self) -> Result<TrainState, DeviceError> {
        if !self.link.reads_parts() {
            return Err(DeviceError::Unsupported(
                "the board's firmware reads only the whole training state".into(),
            ));
        }
        let bytes = self.counted(|l| l.read_state(true))?;
        TrainState::decode_params(&bytes).map_err(|e| DeviceError::Transport {
            device: self.name.clone(),
            source: Box::new(e),
        })
    }

    /// Replaces the board's remembered formats with `fracs`.
    pub fn write_formats(
        &mut self,
        fracs: &std::collections::BTreeMap<String, u32>,
    ) -> Result<(), DeviceError> {
        let bytes = systole_step::resident::encode_formats(fracs);
        if !self.link.reads_parts()
            || bytes.len() > systole_firmware::frame::MAX_PAYLOAD
            || fracs.len() > usize::from(u16::MAX)
        {
            return Err(DeviceError::Unsupported(
                "the board takes the remembered formats only with the whole state".into(),
            ));
        }
        self.counted(|l| l.write_formats(&bytes))
    }

    /// Uploads `data`, replacing the board's data set: packed as it is, or a byte a pixel to a
    /// board that takes only those.
    pub fn write_data(&mut self, data: &DataSet) -> Result<(), DeviceError> {
        let Ok(features) = u16::try_from(data.features) else {
            return Err(DeviceError::Unsupported(format!(
                "images of {} values do not fit the board's data set (at most 65535)",
                data.features
            )));
        };
        let (bits, records) = match self.link.takes_packed() {
            true => (Some(data.bits), data.encode_records()),
            false => match data.repacked(8) {
                Some(bytes) => (None, bytes.encode_records()),
                None => {
                    return Err(DeviceError::Unsupported(
                        "the data set's pixels do not fit a byte".into(),
                    ))
                }
            },
        };
        self.counted(|l| l.write_data((features, data.divisor, bits), &records))
    }

    /// Whether the board evaluates on a resident test split (else the host evaluates on the
    /// parameters it reads back: older firmware).
    pub fn evaluates(&self) -> bool {
        self.link.evaluates()
    }

    /// Uploads `test`, packed, as the board's test split.
    pub fn write_test_data(&mut self, test: &DataSet) -> Result<(), DeviceError> {
        let features = u16::try_from(test.features)
            .ok()
            .filter(|_| self.link.evaluates());
        let Some(features) = features else {
            return Err(DeviceError::Unsupported(
                "the board keeps no test split of this shape".into(),
            ));
        };
        let records = test.encode_records();
        self.counted(|l| l.write_test_data((features, test.divisor, test.bits), &records))
    }

    /// Evaluates the board's state on its test split after `epochs` completed epochs; the
    /// board's cycles go into the stats as a step's do.
    pub fn evaluate(&mut self, epochs: u32) -> Result<EvalAnswer, DeviceError> {
        let a = self.counted(|l| l.evaluate(epochs))?;
        let s = &mut *self.stats;
        s.firmware_cycles += a.cpu_cycles;
        s.cycles += a.array_cycles;
        s.mac_cycles += a.mac_cycles;
        Ok(a)
    }

    /// The saturation counts of the steps and evaluations run on the board's installed state
    /// (they start at zero when a state goes up); `None` from a board that does not count them
    /// (older firmware).
    pub fn saturation(&mut self) -> Result<Option<BTreeMap<String, SaturationCount>>, DeviceError> {
        if !self.link.counts_saturation() {
            return Ok(None);
        }
        self.counted(|l| l.saturation()).map(Some)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A data upload's (features, divisor, bits) and records.
    type Upload = ((u16, u16, Option<u8>), Vec<u8>);

    /// A board link that records the data uploads it is asked for.
    struct Recording {
        packed: bool,
        uploads: Vec<Upload>,
    }

    impl TrainLink for Recording {
        fn heap_bytes(&self) -> u32 {
            1 << 20
        }
        fn counts(&self) -> Counts {
            (0, 0, 0, 0)
        }
        fn write_state(&mut self, _: &[u8]) -> Result<(), LinkError> {
            Ok(())
        }
        fn read_state(&mut self, _: bool) -> Result<Vec<u8>, LinkError> {
            Ok(Vec::new())
        }
        fn reads_parts(&self) -> bool {
            false
        }
        fn write_formats(&mut self, _: &[u8]) -> Result<(), LinkError> {
            Ok(())
        }
        fn takes_packed(&self) -> bool {
            self.packed
        }
        fn measures_heap(&self) -> bool {
            false
        }
        fn heap_use(&mut self) -> Result<HeapUse, LinkError> {
            Err(LinkError::Protocol("no HEAP_USE".into()))
        }
        fn write_data(
            &mut self,
            form: (u16, u16, Option<u8>),
            records: &[u8],
        ) -> Result<(), LinkError> {
            self.uploads.push((form, records.to_vec()));
            Ok(())
        }
        fn evaluates(&self) -> bool {
            false
        }
        fn write_test_data(&mut self, _: (u16, u16, u8), _: &[u8]) -> Result<(), LinkError> {
            Err(LinkError::Protocol("no test split".into()))
        }
        fn evaluate(&mut self, _: u32) -> Result<EvalAnswer, LinkError> {
            Err(LinkError::Protocol("no evaluation".into()))
        }
        fn counts_saturation(&self) -> bool {
            false
        }
        fn saturation(&mut self) -> Result<BTreeMap<String, SaturationCount>, LinkError> {
            Err(LinkError::Protocol("no saturation counts".into()))
        }
        fn run_steps(
            &mut self,
            _: (u32, u32),
            _: u16,
            _: u16,
            _: (f32, bool),
        ) -> Result<(RunCounters, Vec<(f32, u16)>), LinkError> {
            Err(LinkError::Protocol("no steps".into()))
        }
    }

    /// A board that takes packed pixels gets the records as packed; older firmware gets the
    /// same pixels a byte each (`DATA_WRITE`); neither is asked its heap it cannot measure.
    #[test]
    fn packed_to_new_firmware_bytes_to_old() {
        let set = DataSet::from_pixels(3, 16, 5, &[16, 1, 2, 3, 4, 5], &[7, 8]).unwrap();
        for packed in [true, false] {
            let mut link = Recording {
                packed,
                uploads: Vec::new(),
            };
            let (mut stats, mut mark) = (DeviceStats::default(), None);
            let mut board = BoardTraining {
                link: &mut link,
                stats: &mut stats,
                name: "fake".into(),
                firmware_mark: &mut mark,
            };
            board.write_data(&set).unwrap();
            assert_eq!(board.heap_use().unwrap(), None);
            let want = match packed {
                // 3 pixels of 5 bits in 2 bytes, then the label.
                true => ((3, 16, Some(5)), vec![0x30, 0x08, 7, 0x83, 0x14, 8]),
                false => ((3, 16, None), vec![16, 1, 2, 7, 3, 4, 5, 8]),
            };
            assert_eq!(link.uploads, vec![want]);
        }
    }
}
