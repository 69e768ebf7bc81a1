//! The host's half of training on the board (`systole_firmware::protocol::train`): the state
//! and the data set go up in chunks, `RUN_STEPS` runs steps on them, the state comes back in
//! chunks. `board_train::TrainLink` is what the trainer sees of it (through
//! `Device::board_training`).

use super::exchange::{Kind, Work};
use super::{LinkError, SerialBus};
use crate::board_train::{Counts, TrainLink};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;
use systole_firmware::frame::MAX_PAYLOAD;
use systole_firmware::protocol::train::{
    parse_saturation, EvalAnswer, HeapUse, RunCounters, StepFailure, TrainRequest, CAP_EVALUATE,
    CAP_HEAP_USE, CAP_PACKED_DATA, CAP_PROGRESS, CAP_SATURATION, CAP_STATE_PARTS,
    DATA_WRITE_HEADER, DATA_WRITE_PACKED_HEADER, IN_ORDER, MAX_RUN_STEPS, PART_PARAMS, PART_WHOLE,
    PROGRESS, STATE_READ_HEADER, STATE_WRITE_HEADER,
};
use systole_firmware::protocol::{ErrorCode, Request};
use systole_step::resident::StateError;
use systole_step::SaturationCount;

/// How long the host waits for one step before any step's pace was measured on the link (a
/// real board at 100 MHz runs a digits step in well under a second; the simulated SoC a
/// hundred times slower); afterwards it waits `exchange::SLACK` times the slowest step seen.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// A training refusal in words.
pub(super) fn describe_refusal(code: ErrorCode, detail: u16) -> String {
    match code {
        ErrorCode::NotLoaded if detail == 0 => "no training state is on the board".into(),
        ErrorCode::NotLoaded if detail == 2 => "no test split is on the board".into(),
        ErrorCode::NotLoaded => "no data set is on the board".into(),
        ErrorCode::BadTrainState => StateError::describe(detail).into(),
        ErrorCode::OutOfMemory => format!(
            "its heap has no room for it ({detail} KiB free): train a smaller model or data set, or use --host-step"
        ),
        ErrorCode::BadData => {
            "the data set's chunks or shape do not fit the board's model".into()
        }
        ErrorCode::StepFailed => format!(
            "{} (the board dropped its state)",
            StepFailure::describe(detail)
        ),
        other => other.to_string(),
    }
}

impl<T: Read + Write> SerialBus<T> {
    /// Whether the board trains on resident state and data.
    pub fn trains(&self) -> bool {
        self.heap_bytes.is_some()
    }

    /// Uploads a data set's records into the training set's slot or (`test`) the test
    /// split's, in chunks.
    fn upload_records(
        &mut self,
        test: bool,
        (features, divisor, bits): (u16, u16, Option<u8>),
        records: &[u8],
    ) -> Result<(), LinkError> {
        let total = u32::try_from(records.len())
            .map_err(|_| LinkError::Protocol("a data set over 4 GiB".into()))?;
        let per = MAX_PAYLOAD
            - match (bits, test) {
                (None, false) => DATA_WRITE_HEADER,
                _ => DATA_WRITE_PACKED_HEADER,
            };
        let chunks = records.len().div_ceil(per);
        for (i, chunk) in records.chunks(per).enumerate() {
            let req = TrainRequest::DataWrite {
                test,
                features,
                divisor,
                bits,
                total,
                offset: (i * per) as u32,
                bytes: chunk,
            };
            self.upload_chunk(&req, i + 1 == chunks)?;
        }
        Ok(())
    }

    /// One chunk of an upload: the board stores it and answers at once, but for the `last`,
    /// which it decodes and checks whole ([`Self::train_request`]'s wait).
    fn upload_chunk(&mut self, req: &TrainRequest<'_>, last: bool) -> Result<(), LinkError> {
        match last {
            true => self.train_request(req),
            false => self.train_request_for(req, Work::FRAME),
        }
        .map(|_| ())
    }

    /// One training request. The board may work a while before it answers (the last chunk of
    /// a state is decoded and checked, a snapshot encoded): the wait is an operation's, not a
    /// frame's, so a slow answer is not resent (a resend is answered from the board's copy,
    /// but its bytes would cross the link again).
    fn train_request(&mut self, req: &TrainRequest<'_>) -> Result<Vec<u8>, LinkError> {
        let work = Work::Frame {
            extra: super::board_ops::OP_TIMEOUT,
        };
        self.train_request_for(req, work)
    }

    /// [`Self::train_request`] of a request that makes the board do `work`.
    fn train_request_for(
        &mut self,
        req: &TrainRequest<'_>,
        work: Work,
    ) -> Result<Vec<u8>, LinkError> {
        self.flush()?;
        let mut payload = [0u8; MAX_PAYLOAD];
        let r = Request::Train(*req);
        let len = r.encode_payload(&mut payload).map_err(LinkError::Encode)?;
        let r = self.transact_for(r.cmd(), &payload[..len], work);
        self.guard(r)
    }
}

impl<T: Read + Write> TrainLink for SerialBus<T> {
    fn heap_bytes(&self) -> u32 {
        self.heap_bytes.unwrap_or(0)
    }

    fn counts(&self) -> Counts {
        let c = &self.counters;
        (c.bytes_out, c.bytes_in, c.frames, c.resends)
    }

    fn write_state(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        let total = u32::try_from(bytes.len())
            .map_err(|_| LinkError::Protocol("a training state over 4 GiB".into()))?;
        let per = MAX_PAYLOAD - STATE_WRITE_HEADER;
        for (i, chunk) in bytes.chunks(per).enumerate() {
            let req = TrainRequest::StateWrite {
                total,
                offset: (i * per) as u32,
                bytes: chunk,
            };
            self.upload_chunk(&req, (i + 1) * per >= bytes.len())?;
        }
        Ok(())
    }

    fn reads_parts(&self) -> bool {
        self.train_caps & CAP_STATE_PARTS != 0
    }

    fn write_formats(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.train_request(&TrainRequest::FormatsWrite { bytes })
            .map(|_| ())
    }

    fn read_state(&mut self, params_only: bool) -> Result<Vec<u8>, LinkError> {
        let count = (MAX_PAYLOAD - STATE_READ_HEADER) as u16;
        let part = if params_only { PART_PARAMS } else { PART_WHOLE };
        let mut out = Vec::new();
        loop {
            let offset = out.len() as u32;
            let req = TrainRequest::StateRead {
                offset,
                count,
                part,
            };
            // The first takes the snapshot (the board encodes the state); the rest copy it.
            let p = match offset {
                0 => self.train_request(&req)?,
                _ => self.train_request_for(&req, Work::FRAME)?,
            };
            let bad = || LinkError::Protocol(format!("STATE_READ answer of {} bytes", p.len()));
            let total =
                u32::from_le_bytes(p.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
            let bytes = &p[STATE_READ_HEADER..];
            if bytes.is_empty() && out.len() < total as usize {
                return Err(bad());
            }
            out.extend_from_slice(bytes);
            if out.len() >= total as usize {
                out.truncate(total as usize);
                return Ok(out);
            }
        }
    }

    fn takes_packed(&self) -> bool {
        self.train_caps & CAP_PACKED_DATA != 0
    }

    fn measures_heap(&self) -> bool {
        self.train_caps & CAP_HEAP_USE != 0
    }

    fn heap_use(&mut self) -> Result<HeapUse, LinkError> {
        let p = self.train_request(&TrainRequest::HeapUse)?;
        HeapUse::parse(&p)
            .ok_or_else(|| LinkError::Protocol(format!("HEAP_USE answer of {} bytes", p.len())))
    }

    fn write_data(
        &mut self,
        (features, divisor, bits): (u16, u16, Option<u8>),
        records: &[u8],
    ) -> Result<(), LinkError> {
        self.upload_records(false, (features, divisor, bits), records)
    }

    fn evaluates(&self) -> bool {
        self.train_caps & CAP_EVALUATE != 0 && self.takes_packed()
    }

    fn write_test_data(
        &mut self,
        (features, divisor, bits): (u16, u16, u8),
        records: &[u8],
    ) -> Result<(), LinkError> {
        self.upload_records(true, (features, divisor, Some(bits)), records)
    }

    fn evaluate(&mut self, epochs: u32) -> Result<EvalAnswer, LinkError> {
        // The board answers when every batch has run: a few training steps' time.
        let work = Work::Paced {
            kind: Kind::Evaluate,
            units: 1,
            unmeasured: STEP_TIMEOUT * 4,
            capped: false,
        };
        let p = self.train_request_for(&TrainRequest::Evaluate { epochs }, work)?;
        EvalAnswer::parse(&p)
            .ok_or_else(|| LinkError::Protocol(format!("EVALUATE answer of {} bytes", p.len())))
    }

    fn counts_saturation(&self) -> bool {
        self.train_caps & CAP_SATURATION != 0
    }

    fn saturation(&mut self) -> Result<BTreeMap<String, SaturationCount>, LinkError> {
        let mut out = BTreeMap::new();
        loop {
            let first = u16::try_from(out.len())
                .map_err(|_| LinkError::Protocol("over 65,535 saturation entries".into()))?;
            let req = TrainRequest::Saturation { first };
            let p = self.train_request_for(&req, Work::FRAME)?;
            let bad = || LinkError::Protocol(format!("SATURATION answer of {} bytes", p.len()));
            let (total, entries) = parse_saturation(&p).ok_or_else(bad)?;
            let before = out.len();
            for e in entries {
                let c = SaturationCount {
                    ops: e.ops,
                    retries: e.retries,
                    saturated_words: e.saturated_words,
                };
                out.insert(e.op.to_string(), c);
            }
            if out.len() >= usize::from(total) {
                return Ok(out);
            }
            if out.len() == before {
                return Err(bad());
            }
        }
    }

    fn run_steps(
        &mut self,
        (epochs_done, first_batch): (u32, u32),
        steps: u16,
        batch: u16,
        (lr, in_order): (f32, bool),
    ) -> Result<(RunCounters, Vec<(f32, u16)>), LinkError> {
        if usize::from(steps) > MAX_RUN_STEPS {
            return Err(LinkError::Protocol(format!(
                "{steps} steps in one request (at most {MAX_RUN_STEPS})"
            )));
        }
        // The board answers when every step has run; one that reports progress is heard
        // from after each step.
        let reports = self.train_caps & CAP_PROGRESS != 0;
        let work = match reports {
            true => Work::Reported { steps },
            false => Work::Paced {
                kind: Kind::Step,
                units: steps.into(),
                unmeasured: STEP_TIMEOUT * u32::from(steps),
                capped: false,
            },
        };
        let flags = if in_order { IN_ORDER } else { 0 } | if reports { PROGRESS } else { 0 };
        let req = TrainRequest::RunSteps {
            epochs_done,
            first_batch,
            steps,
            batch,
            lr_bits: lr.to_bits(),
            flags,
        };
        let p = self.train_request_for(&req, work)?;
        let (c, results) = RunCounters::parse(&p)
            .filter(|(c, _)| c.steps == steps)
            .ok_or_else(|| LinkError::Protocol(format!("RUN_STEPS answer of {} bytes", p.len())))?;
        Ok((c, results.collect()))
    }
}
