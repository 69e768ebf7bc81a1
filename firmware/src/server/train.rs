//! The training requests of [`super::FrameServer`] (`0x10`..`0x13`, [`crate::protocol::train`];
//! feature `step`): the state and the data set on the board's heap, and the steps run on
//! them by `systole_step`'s step over [`BoardProducts`] on the server's own bus.

use super::Failure;
use crate::frame::MAX_PAYLOAD;
use crate::products::{BoardProducts, ProductsError};
use crate::protocol::train::{
    encode_saturation, EvalAnswer, HeapUse, RunCounters, SaturationEntry, StepFailure,
    TrainRequest, EVALUATE_REPLY, HEAP_USE_REPLY, IN_ORDER, PART_WHOLE, PROGRESS, RUN_REPLY_HEADER,
    STATE_READ_HEADER, STEP_RESULT_BYTES,
};
use crate::protocol::ErrorCode;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_step::resident::{
    decode_formats, evaluate_resident, image_bytes, run_steps, short_order, DataSet, RunSteps,
    TrainState, MAX_RESIDENT_IMAGES,
};
use systole_step::{Arith, SaturationCount, StepError};

/// What an epoch order is drawn from: run seed, epochs done (`None`: the stored order),
/// images.
type OrderKey = (u64, Option<u32>, usize);

/// A state or data set being received, chunk by chunk.
struct Upload<T> {
    total: usize,
    received: usize,
    into: T,
}

/// What the board holds for training.
pub struct Session {
    /// The heap's size in bytes (the `PING` answer).
    heap_bytes: u32,
    /// Free heap bytes now, if the board can tell.
    heap_free: Option<fn() -> usize>,
    /// `(bytes in use, their peak since the last call)`, if the board measures its heap
    /// (`HEAP_USE`).
    heap_peak: Option<fn() -> (usize, usize)>,
    state: Option<TrainState>,
    data: Option<DataSet>,
    /// The test split `EVALUATE` runs on (`DATA_WRITE_PACKED` with `TEST_SPLIT`).
    test: Option<DataSet>,
    /// The last epoch order drawn: `(run seed, epochs done (`None`: stored order), images)`
    /// and the order.
    order: Option<(OrderKey, Vec<u16>)>,
    state_upload: Option<Upload<Vec<u8>>>,
    data_upload: Option<Upload<DataSet>>,
    test_upload: Option<Upload<DataSet>>,
    /// The state's wire form (or its parameters-only form: `snapshot_part`) as a
    /// `STATE_READ` at offset 0 found it.
    snapshot: Vec<u8>,
    snapshot_part: u8,
    /// The saturation counts of the steps and evaluations run on the installed state
    /// (`SATURATION`).
    saturation: BTreeMap<String, SaturationCount>,
}

impl Session {
    /// A board with `heap_bytes` of heap; `heap_free` tells the free bytes in a refusal.
    pub fn new(heap_bytes: u32, heap_free: Option<fn() -> usize>) -> Self {
        Session {
            heap_bytes,
            heap_free,
            heap_peak: None,
            state: None,
            data: None,
            test: None,
            order: None,
            state_upload: None,
            data_upload: None,
            test_upload: None,
            snapshot: Vec::new(),
            snapshot_part: PART_WHOLE,
            saturation: BTreeMap::new(),
        }
    }

    /// Answers `HEAP_USE` with `probe`: `(bytes in use, their peak since the last call)`.
    pub fn with_heap_peak(mut self, probe: fn() -> (usize, usize)) -> Self {
        self.heap_peak = Some(probe);
        self
    }

    /// Whether the board answers `HEAP_USE`.
    pub fn measures_heap(&self) -> bool {
        self.heap_peak.is_some()
    }

    /// The heap's size, for `PING`.
    pub fn heap_bytes(&self) -> u32 {
        self.heap_bytes
    }

    /// The training state, if one is installed.
    pub fn state(&self) -> Option<&TrainState> {
        self.state.as_ref()
    }

    fn no_room(&self) -> Failure {
        let kib = self.heap_free.map_or(0, |f| f() / 1024);
        (
            ErrorCode::OutOfMemory,
            u16::try_from(kib).unwrap_or(u16::MAX),
        )
    }
}

/// Reserves `n` bytes' worth of `T`, or the out-of-memory refusal.
fn reserve<T>(s: &Session, n: usize) -> Result<Vec<T>, Failure> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| s.no_room())?;
    Ok(v)
}

/// The board's cycle counter, if it has one.
type Clock = Option<fn() -> u64>;
/// Sends a progress frame of the running request with the steps done.
type Progress<'a> = &'a mut dyn FnMut(u16);

/// Runs one training request; returns the answer's length in `out`.
pub(super) fn execute<B: AcceleratorBus>(
    req: &TrainRequest<'_>,
    s: &mut Session,
    (bus, config): (&mut B, &ArrayConfig),
    (clock, progress): (Clock, Progress<'_>),
    out: &mut [u8],
) -> Result<usize, Failure> {
    match *req {
        TrainRequest::StateWrite {
            total,
            offset,
            bytes,
        } => state_write(s, total as usize, offset as usize, bytes),
        TrainRequest::StateRead {
            offset,
            count,
            part,
        } => {
            if offset == 0 {
                s.snapshot = Vec::new();
                let st = s.state.as_ref().ok_or((ErrorCode::NotLoaded, 0))?;
                let whole = part == PART_WHOLE;
                // The room first: a heap without it refuses, no allocation fails.
                let room = reserve(s, st.encoded_len(whole))?;
                s.snapshot = st.encode_to(whole, room);
                s.snapshot_part = part;
            } else if s.state.is_none() {
                return Err((ErrorCode::NotLoaded, 0));
            } else if part != s.snapshot_part {
                return Err((ErrorCode::BadData, 0));
            }
            let from = (offset as usize).min(s.snapshot.len());
            let n = (s.snapshot.len() - from).min(usize::from(count));
            out[..4].copy_from_slice(&(s.snapshot.len() as u32).to_le_bytes());
            out[STATE_READ_HEADER..STATE_READ_HEADER + n]
                .copy_from_slice(&s.snapshot[from..from + n]);
            if from + n == s.snapshot.len() {
                // Read to the end: give the heap back.
                s.snapshot = Vec::new();
            }
            Ok(STATE_READ_HEADER + n)
        }
        TrainRequest::DataWrite {
            test,
            features,
            divisor,
            bits,
            total,
            offset,
            bytes,
        } => data_write(
            s,
            (test, features, divisor, bits.unwrap_or(8)),
            total as usize,
            offset as usize,
            bytes,
        ),
        TrainRequest::RunSteps {
            epochs_done,
            first_batch,
            steps,
            batch,
            lr_bits,
            flags,
        } => {
            let in_order = flags & IN_ORDER != 0;
            let mut quiet = |_: u16| {};
            let progress: &mut dyn FnMut(u16) = match flags & PROGRESS {
                0 => &mut quiet,
                _ => progress,
            };
            let run = RunSteps {
                epochs_done: epochs_done.into(),
                first_batch: first_batch as usize,
                steps: steps.into(),
                batch: batch.into(),
                lr: f32::from_bits(lr_bits),
            };
            run_request(s, (&run, in_order), (bus, config), (clock, progress), out)
        }
        TrainRequest::FormatsWrite { bytes } => {
            let st = s.state.as_mut().ok_or((ErrorCode::NotLoaded, 0))?;
            st.fracs = decode_formats(bytes, st.widths.word())
                .map_err(|e| (ErrorCode::BadTrainState, e.code()))?;
            Ok(0)
        }
        TrainRequest::Evaluate { epochs } => evaluate_request(s, epochs, bus, config, clock, out),
        TrainRequest::HeapUse => {
            let probe = s.heap_peak.ok_or((ErrorCode::UnknownCommand, 0))?;
            let (in_use, peak) = probe();
            let word = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            let h = HeapUse {
                heap: s.heap_bytes,
                in_use: word(in_use),
                peak: word(peak),
            };
            out[..HEAP_USE_REPLY].copy_from_slice(&h.encode());
            Ok(HEAP_USE_REPLY)
        }
        TrainRequest::Saturation { first } => {
            let total = u16::try_from(s.saturation.len()).unwrap_or(u16::MAX);
            let entries = s
                .saturation
                .iter()
                .skip(first.into())
                .map(|(op, c)| SaturationEntry {
                    op,
                    ops: c.ops,
                    retries: c.retries,
                    saturated_words: c.saturated_words,
                });
            Ok(encode_saturation(total, entries, &mut out[..MAX_PAYLOAD]))
        }
    }
}

/// Adds the counts of a request's arithmetic to the session's.
fn note_saturation(
    into: &mut BTreeMap<String, SaturationCount>,
    counts: &BTreeMap<String, SaturationCount>,
) {
    for (op, c) in counts {
        into.entry(op.clone()).or_default().add(c);
    }
}

fn state_write(
    s: &mut Session,
    total: usize,
    offset: usize,
    bytes: &[u8],
) -> Result<usize, Failure> {
    if offset == 0 {
        // A new state: the old one and any half-received one go first (their heap is needed).
        s.state = None;
        s.state_upload = None;
        s.snapshot = Vec::new();
        let into = reserve(s, total)?;
        s.state_upload = Some(Upload {
            total,
            received: 0,
            into,
        });
    }
    let up = s.state_upload.as_mut().ok_or((ErrorCode::BadData, 0))?;
    if offset != up.received || up.total != total || offset + bytes.len() > total {
        return Err((ErrorCode::BadData, 0));
    }
    up.into.extend_from_slice(bytes);
    up.received += bytes.len();
    if up.received == total {
        let Some(up) = s.state_upload.take() else {
            return Err((ErrorCode::BadData, 0));
        };
        let st = TrainState::decode(&up.into).map_err(|e| (ErrorCode::BadTrainState, e.code()))?;
        drop(up);
        s.state = Some(st);
        s.saturation = BTreeMap::new();
    }
    Ok(0)
}

fn data_write(
    s: &mut Session,
    (test, features, divisor, bits): (bool, u16, u16, u8),
    total: usize,
    offset: usize,
    bytes: &[u8],
) -> Result<usize, Failure> {
    let img = image_bytes(features.into(), bits);
    let rec = img + 1;
    if offset == 0 {
        // A new data set in this slot: the old one goes first (its heap is needed).
        if test {
            s.test = None;
            s.test_upload = None;
        } else {
            s.data = None;
            s.data_upload = None;
            s.order = None;
        }
        let n = total / rec;
        if features == 0 || divisor == 0 || !total.is_multiple_of(rec) || n > MAX_RESIDENT_IMAGES {
            return Err((ErrorCode::BadData, 0));
        }
        let pixels = reserve(s, n * img)?;
        let labels = reserve(s, n)?;
        let upload = Some(Upload {
            total,
            received: 0,
            into: DataSet {
                features: features.into(),
                divisor,
                bits,
                pixels,
                labels,
            },
        });
        match test {
            true => s.test_upload = upload,
            false => s.data_upload = upload,
        }
    }
    let slot = match test {
        true => &mut s.test_upload,
        false => &mut s.data_upload,
    };
    let up = slot.as_mut().ok_or((ErrorCode::BadData, 0))?;
    let set = &mut up.into;
    if offset != up.received
        || up.total != total
        || offset + bytes.len() > total
        || (set.features, set.divisor, set.bits) != (features.into(), divisor, bits)
    {
        return Err((ErrorCode::BadData, 0));
    }
    for (i, &b) in bytes.iter().enumerate() {
        if (offset + i) % rec == img {
            set.labels.push(b);
        } else {
            set.pixels.push(b);
        }
    }
    up.received += bytes.len();
    if up.received == total {
        let done = slot.take().map(|u| u.into);
        match test {
            true => s.test = done,
            false => s.data = done,
        }
    }
    Ok(0)
}

/// `EVALUATE`: the state on the resident test split, its remembered formats changed as the
/// host's evaluation changes them.
fn evaluate_request<B: AcceleratorBus>(
    s: &mut Session,
    epochs: u32,
    bus: &mut B,
    config: &ArrayConfig,
    clock: Option<fn() -> u64>,
    out: &mut [u8],
) -> Result<usize, Failure> {
    let t0 = clock.map(|now| now());
    let st = s.state.as_mut().ok_or((ErrorCode::NotLoaded, 0))?;
    let test = s.test.as_ref().ok_or((ErrorCode::NotLoaded, 2))?;
    test.check_model(st).map_err(|_| (ErrorCode::BadData, 2))?;
    // The next epoch draws a new order: this one's heap serves the evaluation.
    s.order = None;
    let mut a = st.arith(BoardProducts::new(&mut *bus, *config));
    let result = evaluate_resident(&mut a, st, test, epochs.into());
    let stats = *a.products().stats();
    let sat = a.saturation();
    drop(a);
    note_saturation(&mut s.saturation, &sat);
    let (loss, correct) = match result {
        Ok(r) => r,
        Err(e) => {
            // The formats are part-way through an evaluation: the state must go up again.
            s.state = None;
            return Err((ErrorCode::StepFailed, failure(&e) as u16));
        }
    };
    let word = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let answer = EvalAnswer {
        images: word(test.len()),
        correct: word(correct),
        loss,
        cpu_cycles: match (clock, t0) {
            (Some(now), Some(t0)) => now().wrapping_sub(t0),
            _ => 0,
        },
        array_cycles: stats.cycles,
        mac_cycles: stats.mac_cycles,
    };
    out[..EVALUATE_REPLY].copy_from_slice(&answer.encode());
    Ok(EVALUATE_REPLY)
}

fn failure<E>(e: &ProductsError<E>) -> StepFailure {
    match e {
        ProductsError::Step(StepError::Diverged { .. }) => StepFailure::Diverged,
        ProductsError::Driver { .. } => StepFailure::Driver,
        ProductsError::ConvNeedsLowering { .. } => StepFailure::ConvUnit,
        _ => StepFailure::Step,
    }
}

fn run_request<B: AcceleratorBus>(
    s: &mut Session,
    (run, in_order): (&RunSteps, bool),
    (bus, config): (&mut B, &ArrayConfig),
    (clock, progress): (Clock, Progress<'_>),
    out: &mut [u8],
) -> Result<usize, Failure> {
    let t0 = clock.map(|now| now());
    let st = s.state.as_mut().ok_or((ErrorCode::NotLoaded, 0))?;
    let data = s.data.as_ref().ok_or((ErrorCode::NotLoaded, 1))?;
    data.check_model(st).map_err(|_| (ErrorCode::BadData, 1))?;
    if !run.fits(data.len()) || RUN_REPLY_HEADER + run.steps * STEP_RESULT_BYTES > MAX_PAYLOAD {
        return Err((ErrorCode::OutOfRange, 0));
    }
    // The stored order has a key of its own (no epoch), so it is never taken for a drawn one.
    let key = match in_order {
        true => (st.run_seed, None, data.len()),
        false => (st.run_seed, Some(run.epochs_done as u32), data.len()),
    };
    if s.order.as_ref().is_none_or(|(k, _)| *k != key) {
        s.order = None;
        let order = match in_order {
            true => (0..data.len()).map(|i| i as u16).collect(),
            false => short_order(st.run_seed, run.epochs_done, data.len())
                .ok_or((ErrorCode::OutOfRange, 0))?,
        };
        s.order = Some((key, order));
    }
    let order = s.order.as_ref().map_or(&[][..], |(_, o)| o.as_slice());
    let mut a = st.arith(BoardProducts::new(&mut *bus, *config));
    let mut at = RUN_REPLY_HEADER;
    // Accepted: the host now waits a step's time, not the whole request's.
    progress(0);
    let mut done = 0u16;
    let result = run_steps(&mut a, st, data, order, run, &mut |r| {
        out[at..at + 4].copy_from_slice(&r.loss.to_bits().to_le_bytes());
        let correct = u16::try_from(r.correct).unwrap_or(u16::MAX);
        out[at + 4..at + 6].copy_from_slice(&correct.to_le_bytes());
        at += STEP_RESULT_BYTES;
        done += 1;
        progress(done);
    });
    let stats = *a.products().stats();
    let sat = a.saturation();
    drop(a);
    note_saturation(&mut s.saturation, &sat);
    if let Err(e) = result {
        // The state is part-way through a step: it must not be trained on or read back.
        s.state = None;
        return Err((ErrorCode::StepFailed, failure(&e) as u16));
    }
    let counters = RunCounters {
        steps: run.steps as u16,
        cpu_cycles: match (clock, t0) {
            (Some(now), Some(t0)) => now().wrapping_sub(t0),
            _ => 0,
        },
        array_cycles: stats.cycles,
        mac_cycles: stats.mac_cycles,
    };
    counters.encode(&mut out[..RUN_REPLY_HEADER]);
    Ok(at)
}

/// Adds the training capability to a `PING` answer whose capability fields (`caps_len` bytes,
/// 0 without a store) are in `out`: the bit and the heap's bytes. Returns the bytes added.
pub(super) fn train_caps(train: &Option<Session>, caps_len: usize, out: &mut [u8]) -> usize {
    match train {
        Some(s) if caps_len > 0 => {
            use crate::protocol::train::{
                CAP_EVALUATE, CAP_HEAP_USE, CAP_PACKED_DATA, CAP_PROGRESS, CAP_SATURATION,
                CAP_STATE_PARTS, CAP_TRAIN,
            };
            out[0] |= CAP_TRAIN
                | CAP_PACKED_DATA
                | CAP_STATE_PARTS
                | CAP_EVALUATE
                | CAP_PROGRESS
                | CAP_SATURATION;
            if s.measures_heap() {
                out[0] |= CAP_HEAP_USE;
            }
            out[caps_len..caps_len + 4].copy_from_slice(&s.heap_bytes().to_le_bytes());
            4
        }
        _ => 0,
    }
}
