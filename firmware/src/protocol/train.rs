//! The requests that train on the board (protocol commands `0x10`..`0x13`): the
//! whole training state and the data set are uploaded once (chunked), the board runs N steps
//! on them, drawing each epoch's order itself, and the state is read back for checkpoints and
//! the end. A board that has them says so in its `PING` answer ([`CAP_TRAIN`], then its heap
//! in bytes). Field layouts are in the table of [`crate::protocol`]; this module parses and
//! encodes them. The state's own wire form is `systole_step::resident::TrainState::encode`.

use super::{u16_at, u32_at, ErrorCode, Writer};
use crate::frame::{EncodeError, MAX_PAYLOAD};

/// `PING` answer capability bit: the board trains on resident state and data.
pub const CAP_TRAIN: u8 = 0x02;
/// `PING` answer capability bit (with [`CAP_TRAIN`]): the board takes packed pixels
/// (`DATA_WRITE_PACKED`); a board without it takes only byte pixels (`DATA_WRITE`).
pub const CAP_PACKED_DATA: u8 = 0x04;
/// `PING` answer capability bit (with [`CAP_TRAIN`]): the board measures its heap
/// (`HEAP_USE`).
pub const CAP_HEAP_USE: u8 = 0x08;
/// `PING` answer capability bit (with [`CAP_TRAIN`]): the board reads the state's parameters
/// alone (`STATE_READ`'s part byte) and takes the remembered formats alone (`FORMATS_WRITE`).
pub const CAP_STATE_PARTS: u8 = 0x10;
/// `PING` answer capability bit (with [`CAP_TRAIN`] and [`CAP_PACKED_DATA`]): the board keeps
/// a test split beside the training set (`DATA_WRITE_PACKED` with [`TEST_SPLIT`]) and
/// evaluates the state on it (`EVALUATE`).
pub const CAP_EVALUATE: u8 = 0x20;
/// `PING` answer capability bit (with [`CAP_TRAIN`]): the board reports progress during a
/// `RUN_STEPS` that asks for it ([`PROGRESS`]): a [`WORKING`] frame when it accepts the request
/// and one after each step.
pub const CAP_PROGRESS: u8 = 0x40;
/// `PING` answer capability bit (with [`CAP_TRAIN`]): the board counts the saturation of the
/// steps and evaluations it runs, per operation, and answers `SATURATION` with them.
pub const CAP_SATURATION: u8 = 0x80;
/// `RUN_STEPS` flag (with [`CAP_PROGRESS`]): send [`WORKING`] frames while the steps run, so
/// the host knows the request arrived and the board is alive.
pub const PROGRESS: u8 = 0x02;
/// `CMD` of a progress frame: `SEQ` is the running request's, the payload the steps done so far
/// (u16; 0 when the request was just accepted). It is not the answer: the answer follows.
pub const WORKING: u8 = 0xFE;
/// Bytes of a [`WORKING`] frame's payload.
pub const WORKING_LEN: usize = 2;
/// `DATA_WRITE_PACKED`'s bits byte: this flag with the bits puts the records in the test
/// split's slot (without it, the training set's, as before).
pub const TEST_SPLIT: u8 = 0x80;
/// Bytes of an `EVALUATE` payload (epochs completed u32).
pub const EVALUATE_LEN: usize = 4;
/// Bytes of an `EVALUATE` answer ([`EvalAnswer`]).
pub const EVALUATE_REPLY: usize = 36;
/// `STATE_READ` part: the whole state (`TrainState::encode`).
pub const PART_WHOLE: u8 = 0;
/// `STATE_READ` part: the parameters and formats alone (`TrainState::encode_params`).
pub const PART_PARAMS: u8 = 1;
/// Bytes of a `PING` answer with [`CAP_TRAIN`]: the board-operations answer and the heap bytes
/// u32.
pub const PING_REPLY_WITH_TRAIN: usize = super::board_ops::PING_REPLY_WITH_CAPS + 4;
/// Bytes of a `STATE_WRITE` payload before its bytes (total u32, offset u32).
pub const STATE_WRITE_HEADER: usize = 8;
/// Bytes of a `DATA_WRITE` payload before its bytes (features u16, divisor u16, total u32,
/// offset u32).
pub const DATA_WRITE_HEADER: usize = 12;
/// Bytes of a `DATA_WRITE_PACKED` payload before its bytes (features u16, divisor u16, bits
/// u8, total u32, offset u32).
pub const DATA_WRITE_PACKED_HEADER: usize = 13;
/// Bytes of a `HEAP_USE` answer ([`HeapUse`]).
pub const HEAP_USE_REPLY: usize = 12;
/// Bytes of a `STATE_READ` answer before its bytes (the state's total length u32).
pub const STATE_READ_HEADER: usize = 4;
/// Bytes of a `RUN_STEPS` payload.
pub const RUN_STEPS_LEN: usize = 17;
/// `RUN_STEPS` flag: take the resident images in their stored order (the host uploaded the
/// epoch's next batches in its order) instead of drawing the epoch's order.
pub const IN_ORDER: u8 = 0x01;
/// Bytes of a `RUN_STEPS` answer before the per-step results: steps u16, CPU cycles u64, array
/// cycles u64, MAC cycles u64.
pub const RUN_REPLY_HEADER: usize = 26;
/// Bytes of one step's result in a `RUN_STEPS` answer: loss (f32 bits) u32, correct u16.
pub const STEP_RESULT_BYTES: usize = 6;
/// Bytes of a `SATURATION` payload (first entry u16).
pub const SATURATION_LEN: usize = 2;
/// Bytes of a `SATURATION` answer before its entries: entries in all u16, entries here u16.
pub const SATURATION_HEADER: usize = 4;
/// Bytes of a `SATURATION` entry besides its name: name length u8, then after the name device
/// operations u64, retries u64, saturated words u64.
pub const SATURATION_ENTRY_FIXED: usize = 25;
/// Most steps one `RUN_STEPS` runs (its answer holds every step's result).
pub const MAX_RUN_STEPS: usize = (MAX_PAYLOAD - RUN_REPLY_HEADER) / STEP_RESULT_BYTES;

/// One training request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainRequest<'a> {
    /// `STATE_WRITE`: bytes `offset..` of a state of `total` bytes.
    StateWrite {
        /// The state's length.
        total: u32,
        /// Where these bytes go (0 starts a new state; else the bytes received so far).
        offset: u32,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// `STATE_READ`: bytes `offset..offset + count` of the state as it is now.
    StateRead {
        /// First byte (0 takes a fresh snapshot of the state).
        offset: u32,
        /// Bytes (`<= MAX_PAYLOAD - STATE_READ_HEADER`).
        count: u16,
        /// [`PART_WHOLE`] (sent as the 6-byte form) or [`PART_PARAMS`].
        part: u8,
    },
    /// `FORMATS_WRITE`: the remembered formats' wire form
    /// (`systole_step::resident::encode_formats`), replacing the state's.
    FormatsWrite {
        /// The formats' bytes.
        bytes: &'a [u8],
    },
    /// `DATA_WRITE` (`bits: None`: a byte a pixel) or `DATA_WRITE_PACKED` (`Some(bits)`, 1 to
    /// 8): bytes `offset..` of a data set's records (each image's `features` pixels packed at
    /// `bits`, `systole_step::resident::DataSet`, then its label), `total` bytes in all.
    DataWrite {
        /// The test split's slot ([`TEST_SPLIT`]; only in the packed form), else the
        /// training set's.
        test: bool,
        /// Pixels per image.
        features: u16,
        /// What a pixel is divided by.
        divisor: u16,
        /// Bits a pixel (`None`: 8, the first form, `DATA_WRITE`).
        bits: Option<u8>,
        /// Bytes of every record.
        total: u32,
        /// Where these bytes go (0 starts a new data set).
        offset: u32,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// `RUN_STEPS`: batches `first_batch..first_batch + steps` of epoch `epochs_done + 1`.
    RunSteps {
        /// Epochs completed (the order's stream is `epochs_done + 1`).
        epochs_done: u32,
        /// First batch of the epoch.
        first_batch: u32,
        /// Steps (`1..=MAX_RUN_STEPS`).
        steps: u16,
        /// Images per batch.
        batch: u16,
        /// The learning rate, f32 bits.
        lr_bits: u32,
        /// [`IN_ORDER`] or 0.
        flags: u8,
    },
    /// `HEAP_USE`: the heap's bytes, in use now, and the most in use since the last
    /// `HEAP_USE` (which this one restarts from what is in use now).
    HeapUse,
    /// `EVALUATE`: the state's evaluation on the resident test split after `epochs` completed
    /// epochs (`systole_step::resident::evaluate_resident`).
    Evaluate {
        /// Epochs completed (the evaluation's seeds derive from it).
        epochs: u32,
    },
    /// `SATURATION`: the saturation counts of the steps and evaluations run on the installed
    /// state, from entry `first` in the order of the operations' names.
    Saturation {
        /// First entry.
        first: u16,
    },
}

impl TrainRequest<'_> {
    /// The command code.
    pub fn cmd(&self) -> u8 {
        use super::cmd;
        match self {
            TrainRequest::StateWrite { .. } => cmd::STATE_WRITE,
            TrainRequest::StateRead { .. } => cmd::STATE_READ,
            TrainRequest::DataWrite {
                bits: None,
                test: false,
                ..
            } => cmd::DATA_WRITE,
            TrainRequest::DataWrite { .. } => cmd::DATA_WRITE_PACKED,
            TrainRequest::Evaluate { .. } => cmd::EVALUATE,
            TrainRequest::RunSteps { .. } => cmd::RUN_STEPS,
            TrainRequest::HeapUse => cmd::HEAP_USE,
            TrainRequest::FormatsWrite { .. } => cmd::FORMATS_WRITE,
            TrainRequest::Saturation { .. } => cmd::SATURATION,
        }
    }
}

/// Parses the payload of training command `cmd`.
pub(super) fn parse(cmd: u8, p: &[u8]) -> Result<TrainRequest<'_>, ErrorCode> {
    use super::cmd as c;
    let bad = ErrorCode::Malformed;
    Ok(match cmd {
        c::STATE_WRITE if p.len() > STATE_WRITE_HEADER => TrainRequest::StateWrite {
            total: u32_at(p, 0),
            offset: u32_at(p, 4),
            bytes: &p[STATE_WRITE_HEADER..],
        },
        c::STATE_READ if p.len() == 6 || p.len() == 7 => {
            let count = u16_at(p, 4);
            let part = p.get(6).copied().unwrap_or(PART_WHOLE);
            if count == 0
                || usize::from(count) > MAX_PAYLOAD - STATE_READ_HEADER
                || part > PART_PARAMS
            {
                return Err(bad);
            }
            TrainRequest::StateRead {
                offset: u32_at(p, 0),
                count,
                part,
            }
        }
        c::FORMATS_WRITE if p.len() >= 2 => TrainRequest::FormatsWrite { bytes: p },
        c::DATA_WRITE if p.len() > DATA_WRITE_HEADER => TrainRequest::DataWrite {
            test: false,
            features: u16_at(p, 0),
            divisor: u16_at(p, 2),
            bits: None,
            total: u32_at(p, 4),
            offset: u32_at(p, 8),
            bytes: &p[DATA_WRITE_HEADER..],
        },
        c::DATA_WRITE_PACKED if p.len() > DATA_WRITE_PACKED_HEADER => {
            let bits = p[4] & !TEST_SPLIT;
            if !(1..=8).contains(&bits) {
                return Err(bad);
            }
            TrainRequest::DataWrite {
                test: p[4] & TEST_SPLIT != 0,
                features: u16_at(p, 0),
                divisor: u16_at(p, 2),
                bits: Some(bits),
                total: u32_at(p, 5),
                offset: u32_at(p, 9),
                bytes: &p[DATA_WRITE_PACKED_HEADER..],
            }
        }
        c::HEAP_USE if p.is_empty() => TrainRequest::HeapUse,
        c::EVALUATE if p.len() == EVALUATE_LEN => TrainRequest::Evaluate {
            epochs: u32_at(p, 0),
        },
        c::SATURATION if p.len() == SATURATION_LEN => TrainRequest::Saturation {
            first: u16_at(p, 0),
        },
        c::RUN_STEPS if p.len() == RUN_STEPS_LEN => {
            let steps = u16_at(p, 8);
            if steps == 0
                || usize::from(steps) > MAX_RUN_STEPS
                || u16_at(p, 10) == 0
                || p[16] & !(IN_ORDER | PROGRESS) != 0
            {
                return Err(bad);
            }
            TrainRequest::RunSteps {
                epochs_done: u32_at(p, 0),
                first_batch: u32_at(p, 4),
                steps,
                batch: u16_at(p, 10),
                lr_bits: u32_at(p, 12),
                flags: p[16],
            }
        }
        _ => return Err(bad),
    })
}

/// Encodes a training request's payload.
pub(super) fn encode(r: &TrainRequest<'_>, w: &mut Writer<'_>) -> Result<(), EncodeError> {
    match *r {
        TrainRequest::StateWrite {
            total,
            offset,
            bytes,
        } => {
            w.put(&total.to_le_bytes())?;
            w.put(&offset.to_le_bytes())?;
            w.put(bytes)
        }
        TrainRequest::StateRead {
            offset,
            count,
            part,
        } => {
            w.put(&offset.to_le_bytes())?;
            w.put(&count.to_le_bytes())?;
            match part {
                PART_WHOLE => Ok(()),
                part => w.put(&[part]),
            }
        }
        TrainRequest::FormatsWrite { bytes } => w.put(bytes),
        TrainRequest::DataWrite {
            test,
            features,
            divisor,
            bits,
            total,
            offset,
            bytes,
        } => {
            w.put(&features.to_le_bytes())?;
            w.put(&divisor.to_le_bytes())?;
            // The test split's records go in the packed form (a byte a pixel: 8 bits).
            match (bits, test) {
                (None, false) => {}
                (bits, test) => w.put(&[bits.unwrap_or(8) | if test { TEST_SPLIT } else { 0 }])?,
            }
            w.put(&total.to_le_bytes())?;
            w.put(&offset.to_le_bytes())?;
            w.put(bytes)
        }
        TrainRequest::RunSteps {
            epochs_done,
            first_batch,
            steps,
            batch,
            lr_bits,
            flags,
        } => {
            w.put(&epochs_done.to_le_bytes())?;
            w.put(&first_batch.to_le_bytes())?;
            w.put(&steps.to_le_bytes())?;
            w.put(&batch.to_le_bytes())?;
            w.put(&lr_bits.to_le_bytes())?;
            w.put(&[flags])
        }
        TrainRequest::HeapUse => Ok(()),
        TrainRequest::Evaluate { epochs } => w.put(&epochs.to_le_bytes()),
        TrainRequest::Saturation { first } => w.put(&first.to_le_bytes()),
    }
}

/// One operation's entry in a `SATURATION` answer (`systole_step::SaturationCount` under the
/// operation's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaturationEntry<'a> {
    /// The operation's name (at most 255 bytes of UTF-8).
    pub op: &'a str,
    /// Device operations run.
    pub ops: u64,
    /// Re-runs because an output saturated.
    pub retries: u64,
    /// Saturated words kept.
    pub saturated_words: u64,
}

/// Writes a `SATURATION` answer into `out`: `total` entries in all, then as many of `entries`
/// (the answer's, from its first) as fit whole. Returns the answer's length.
pub fn encode_saturation<'a>(
    total: u16,
    entries: impl Iterator<Item = SaturationEntry<'a>>,
    out: &mut [u8],
) -> usize {
    let mut at = SATURATION_HEADER;
    let mut count = 0u16;
    for e in entries {
        let name = e.op.as_bytes();
        let len = SATURATION_ENTRY_FIXED + name.len();
        if name.len() > usize::from(u8::MAX) || at + len > out.len() {
            break;
        }
        out[at] = name.len() as u8;
        out[at + 1..at + 1 + name.len()].copy_from_slice(name);
        let mut f = at + 1 + name.len();
        for v in [e.ops, e.retries, e.saturated_words] {
            out[f..f + 8].copy_from_slice(&v.to_le_bytes());
            f += 8;
        }
        at += len;
        count += 1;
    }
    out[..2].copy_from_slice(&total.to_le_bytes());
    out[2..4].copy_from_slice(&count.to_le_bytes());
    at
}

/// Reads a `SATURATION` answer: the entries in all and this answer's entries; `None` when it is
/// not one (lengths that do not add up, a name that is not UTF-8).
pub fn parse_saturation(p: &[u8]) -> Option<(u16, impl Iterator<Item = SaturationEntry<'_>> + '_)> {
    let (total, count) = (u16_at(p.get(..SATURATION_HEADER)?, 0), u16_at(p, 2));
    let entry = |at: usize| -> Option<(SaturationEntry<'_>, usize)> {
        let len = usize::from(*p.get(at)?);
        let name = core::str::from_utf8(p.get(at + 1..at + 1 + len)?).ok()?;
        let f = p.get(at + 1 + len..at + SATURATION_ENTRY_FIXED + len)?;
        let u64_at = |i: usize| u64::from(u32_at(f, i)) | (u64::from(u32_at(f, i + 4)) << 32);
        let e = SaturationEntry {
            op: name,
            ops: u64_at(0),
            retries: u64_at(8),
            saturated_words: u64_at(16),
        };
        Some((e, at + SATURATION_ENTRY_FIXED + len))
    };
    // Checked whole first, so the iterator below never stops early.
    let mut at = SATURATION_HEADER;
    for _ in 0..count {
        at = entry(at)?.1;
    }
    if at != p.len() || count > total {
        return None;
    }
    let mut at = SATURATION_HEADER;
    let entries = (0..count).map(move |_| {
        let (e, next) = entry(at).unwrap_or((
            SaturationEntry {
                op: "",
                ops: 0,
                retries: 0,
                saturated_words: 0,
            },
            at,
        ));
        at = next;
        e
    });
    Some((total, entries))
}

/// An `EVALUATE` answer: images u32, correct u32, mean loss (f32 bits) u32, then the board's
/// CPU cycles u64, array cycles u64 and MAC cycles u64 as in [`RunCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalAnswer {
    /// Images evaluated (the resident test split's).
    pub images: u32,
    /// Correct predictions.
    pub correct: u32,
    /// The mean loss, exactly as the host's evaluation computes it.
    pub loss: f32,
    /// The board's CPU cycles from the request's start to its answer (0 without a counter).
    pub cpu_cycles: u64,
    /// Array cycles the drivers spanned.
    pub array_cycles: u64,
    /// Cycles the array consumed a K step.
    pub mac_cycles: u64,
}

impl EvalAnswer {
    /// The answer's payload.
    pub fn encode(&self) -> [u8; EVALUATE_REPLY] {
        let mut out = [0u8; EVALUATE_REPLY];
        out[..4].copy_from_slice(&self.images.to_le_bytes());
        out[4..8].copy_from_slice(&self.correct.to_le_bytes());
        out[8..12].copy_from_slice(&self.loss.to_bits().to_le_bytes());
        out[12..20].copy_from_slice(&self.cpu_cycles.to_le_bytes());
        out[20..28].copy_from_slice(&self.array_cycles.to_le_bytes());
        out[28..].copy_from_slice(&self.mac_cycles.to_le_bytes());
        out
    }

    /// Reads an answer; `None` when it is not one.
    pub fn parse(p: &[u8]) -> Option<EvalAnswer> {
        let u64_at = |i: usize| u64::from(u32_at(p, i)) | (u64::from(u32_at(p, i + 4)) << 32);
        (p.len() == EVALUATE_REPLY).then(|| EvalAnswer {
            images: u32_at(p, 0),
            correct: u32_at(p, 4),
            loss: f32::from_bits(u32_at(p, 8)),
            cpu_cycles: u64_at(12),
            array_cycles: u64_at(20),
            mac_cycles: u64_at(28),
        })
    }
}

/// A `HEAP_USE` answer: heap bytes u32, bytes in use u32, peak u32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapUse {
    /// The heap's bytes (as `PING` says).
    pub heap: u32,
    /// Bytes allocated now (the state, the data set, what a request left).
    pub in_use: u32,
    /// The most bytes allocated at once since the previous `HEAP_USE` (or the start).
    pub peak: u32,
}

impl HeapUse {
    /// The answer's payload.
    pub fn encode(&self) -> [u8; HEAP_USE_REPLY] {
        let mut out = [0u8; HEAP_USE_REPLY];
        out[..4].copy_from_slice(&self.heap.to_le_bytes());
        out[4..8].copy_from_slice(&self.in_use.to_le_bytes());
        out[8..].copy_from_slice(&self.peak.to_le_bytes());
        out
    }

    /// Reads an answer; `None` when it is not one.
    pub fn parse(p: &[u8]) -> Option<HeapUse> {
        (p.len() == HEAP_USE_REPLY).then(|| HeapUse {
            heap: u32_at(p, 0),
            in_use: u32_at(p, 4),
            peak: u32_at(p, 8),
        })
    }
}

/// The counters a `RUN_STEPS` answer starts with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounters {
    /// Steps run.
    pub steps: u16,
    /// The board's CPU cycles from the request's start to its answer (0 without a cycle
    /// counter).
    pub cpu_cycles: u64,
    /// Array cycles the drivers spanned (first to last register access of each product).
    pub array_cycles: u64,
    /// Cycles the array consumed a K step.
    pub mac_cycles: u64,
}

impl RunCounters {
    /// Encodes into the first [`RUN_REPLY_HEADER`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.steps.to_le_bytes());
        out[2..10].copy_from_slice(&self.cpu_cycles.to_le_bytes());
        out[10..18].copy_from_slice(&self.array_cycles.to_le_bytes());
        out[18..26].copy_from_slice(&self.mac_cycles.to_le_bytes());
    }

    /// Parses an answer: the counters and each step's `(loss, correct)`; `None` when its
    /// length is not the steps' it says.
    pub fn parse(p: &[u8]) -> Option<(RunCounters, impl Iterator<Item = (f32, u16)> + '_)> {
        if p.len() < RUN_REPLY_HEADER {
            return None;
        }
        let u64_at = |i: usize| u64::from(u32_at(p, i)) | (u64::from(u32_at(p, i + 4)) << 32);
        let c = RunCounters {
            steps: u16_at(p, 0),
            cpu_cycles: u64_at(2),
            array_cycles: u64_at(10),
            mac_cycles: u64_at(18),
        };
        let rest = &p[RUN_REPLY_HEADER..];
        if rest.len() != usize::from(c.steps) * STEP_RESULT_BYTES {
            return None;
        }
        let steps = rest
            .chunks_exact(STEP_RESULT_BYTES)
            .map(|s| (f32::from_bits(u32_at(s, 0)), u16_at(s, 4)));
        Some((c, steps))
    }
}

/// Why a step failed on the board (the detail of [`ErrorCode::StepFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum StepFailure {
    /// Anything else the step refused (a numeric or shape error).
    Step = 0,
    /// The loss was not finite: the run diverged.
    Diverged = 1,
    /// The array's driver failed.
    Driver = 2,
    /// A convolution does not fit the array's conv unit.
    ConvUnit = 3,
}

impl StepFailure {
    /// What a detail means, in words.
    pub fn describe(detail: u16) -> &'static str {
        match detail {
            1 => "the loss is not finite: the run diverged (lower --lr)",
            2 => "the array's driver failed",
            3 => "a convolution does not fit the array's conv unit",
            _ => "the step refused an operation (numeric contract or shapes)",
        }
    }
}
