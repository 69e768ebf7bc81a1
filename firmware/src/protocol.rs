//! The command protocol spoken between the host (`SerialBus` in the `systole` crate) and the
//! board ([`crate::server::FrameServer`]), carried in [`crate::frame`] frames.
//!
//! The host sends one request frame and waits for the response frame with the same `SEQ`.
//! A successful response has `CMD = request CMD | 0x80` ([`RESPONSE`]); a failed one has
//! `CMD = 0xFF` ([`ERROR`]) and the payload `[code, request CMD, detail (u16)]` (see
//! [`ErrorCode`]; `detail` is the index of the failing entry of a batch, else 0). A board whose
//! firmware panics sends one unsolicited error frame, the [`panic`] report, and resets; a board
//! that starts (power-up, reset button, or after a panic) sends one unsolicited [`boot`] frame
//! before it serves, so a host in the middle of an operation knows the board's state is gone.
//!
//! | CMD | name | request payload | response payload | action |
//! |-----|------|-----------------|------------------|--------|
//! | 0x01 | `PING` | — | `ID` u32, `CONFIG` u32, [`VERSION`] u8, [`crate::frame::MAX_PAYLOAD`] u16; with a tensor store also capabilities u8 ([`board_ops::CAP_BOARD_OPS`]), store words u32; with [`train::CAP_TRAIN`] also the heap's bytes u32 | identifies the board; never replayed, so a restarted host resynchronises with it |
//! | 0x02 | `READ_REG` | addr u8 | value u32 | reads one register |
//! | 0x03 | `WRITE_REG` | addr u8, value u32 | — | writes one register (one clock) |
//! | 0x04 | `WRITE_ROWS` | buffer u8 (0 = A, 1 = B), bank u8, start u16, count u16, `count x size` words i16 | — | writes rows `start..start+count` of that bank, one row per clock |
//! | 0x05 | `READ_ROWS` | bank u8, start u16, count u16 | `count x size` words i16 | reads C rows `start..start+count`, one per clock |
//! | 0x06 | `STATUS` | — | `STATUS` u32, frames ok u32, frames rejected u32, garbage bytes u32 | accelerator status and link counters |
//! | 0x07 | `IDLE` | cycles u32 | — | lets `cycles` clocks pass (a delay on real hardware) |
//! | 0x08 | `BATCH` | entries: CMD u8, LEN u16, payload | — | runs `WRITE_REG`, `WRITE_ROWS`, `IDLE`, `WRITE_FM`, `WRITE_TENSOR` and `FREE_TENSORS` entries in order |
//! | 0x09 | `WRITE_FM` | addr u32, `count` words i16 (`count = (LEN - 4) / 2 >= 1`) | — | writes feature-map words `addr..addr+count` of the conv unit, one row of `R = fm_row_words` words per clock; `addr` and `count` multiples of `R`, `addr + count <= fm_depth` |
//! | 0x0A | `COUNTERS` | — | clock u8 (1: the board counts cycles), frames ok u32, busy cycles u64 | the firmware's own cost: cycles spent from each executed request's last byte received to its response ready (CRC check, execution, response), summed over the requests before this one (`COUNTERS` requests not counted); 0 and clock 0 on a board without a cycle counter |
//! | 0x0B | `WRITE_TENSOR` | id u8, rows u16, cols u16, offset u32, words i16 (`(LEN - 9) / 2`, may be 0) | — | stores words `offset..` of tensor `id` (`rows x cols`, row-major) in the board's tensor store; `offset = 0` first (re)creates `id` at that shape (the old `id` freed first), any other offset needs `id` to exist at exactly that shape; `offset + count <= rows·cols` |
//! | 0x0C | `READ_TENSOR` | id u8, offset u32, count u16 | `count` words i16 | reads words `offset..offset+count` of tensor `id` (`2·count <= MAX_PAYLOAD`) |
//! | 0x0D | `FREE_TENSORS` | ids u8 ... (`0xFF`: every tensor) | free words u32 (not in a batch) | frees the tensors in order; the ones above each move down, so the free space is one run |
//! | 0x0E | `MATMUL` | a u8, b u8, out u8, flags u8, shift u8, rounding u8, seed u32 | m u16, n u16, stats (36 B), the first `min(m·n, (MAX_PAYLOAD - 40) / 2)` words of C | `C = op(A)·op(B)`, `op(X) = Xᵀ` when flag bit 0 (A) / bit 1 (B) is set (the stored tensor is then `k x m` / `n x k`); run by the board's tile driver with the shift, rounding (0 truncate, 1 nearest-even, 2 stochastic) and seed exactly as a host-driven product; C (`m x n`) stored as tensor `out` (an old `out` freed first; `out` differs from `a` and `b`) |
//! | 0x0F | `CONV` | op u8 (0 forward, 1 input gradient, 2 weight gradient), x u8, dy u8, w u8, out u8, batch u16, in_ch u16, in_h u16, in_w u16, out_ch u16, kernel u8, stride u8, pad u8, shift u8, rounding u8, seed u32 | as `MATMUL` | one op of the conv driver on stored maps (`x`: `batch x in_ch·in_h·in_w`, `dy`: `batch x out_ch·oh·ow`, `w`: `out_ch x in_ch·k·k`; an operand the op does not use is `0xFF`); the lowered output (table of [`crate::conv`]) stored as `out` |
//! | 0x10 | `STATE_WRITE` | total u32, offset u32, bytes | — | bytes `offset..` of a training state (`systole_step::resident::TrainState`'s wire form) of `total` bytes; `offset = 0` starts a new one (the board drops the state it held), any other offset must be the bytes received so far; the last chunk installs it once it decodes and checks, else `BadTrainState` (detail: `systole_step::resident::StateError::code`) and nothing is installed |
//! | 0x11 | `STATE_READ` | offset u32, count u16, optional part u8 (0 or absent: the whole state; 1: the parameters and formats alone, `TrainState::encode_params`, with [`train::CAP_STATE_PARTS`]) | total u32, bytes `offset..` (at most `count`) | the state as it is now, for checkpoints and the end (part 1: for the host's evaluation between checkpoints); `offset = 0` takes a fresh snapshot of that part (its bytes reserved first: `OutOfMemory` when the heap has no room), other offsets continue it (another part than the snapshot's: `BadData`) |
//! | 0x12 | `DATA_WRITE` | features u16, divisor u16, total u32, offset u32, bytes | — | bytes `offset..` of a data set's records (each image's pixels, then its label; a value is `pixel / divisor`), `total` bytes in all; `offset = 0` starts a new data set (the old one dropped), other offsets continue in order |
//! | 0x13 | `RUN_STEPS` | epochs done u32, first batch u32, steps u16, batch u16, lr f32 bits, flags u8 (bit 0 [`train::IN_ORDER`]: the resident images in their stored order; bit 1 [`train::PROGRESS`]: progress frames, below) | steps u16, CPU cycles u64, array cycles u64, MAC cycles u64, then per step loss (f32 bits) u32 and correct u16 | batches `first..first + steps` (within the epoch) of epoch `epochs done + 1`, in the order the board draws with the trainer's shuffle (`systole_step::rng::epoch_order`) over the resident images; the state's step counter advances by `steps`; a step that fails drops the state (`StepFailed`, detail [`train::StepFailure`]) |
//! | 0x14 | `DATA_WRITE_PACKED` | features u16, divisor u16, bits u8 (1..=8), total u32, offset u32, bytes | — | as `DATA_WRITE`, each record's pixels packed at `bits` bits (`systole_step::resident::DataSet`: image `i` is `ceil(features·bits/8)` bytes, pixel `j` the `bits`-bit field at bit `j·bits`, least significant bit first, unused bits 0; then the label byte); at 8 bits the records are `DATA_WRITE`'s; the board keeps them packed. The bits byte with [`train::TEST_SPLIT`] (0x80, with [`train::CAP_EVALUATE`]) puts them in the test split's slot (`EVALUATE`'s), which replaces only the test split; without it the training set's, as before |
//! | 0x15 | `HEAP_USE` | — | heap bytes u32, in use u32, peak u32 ([`train::HeapUse`]) | the heap's bytes, the bytes allocated now and the most allocated at once since the previous `HEAP_USE` (or the start); the peak then restarts from what is in use, so two `HEAP_USE` around a `RUN_STEPS` measure its heap; refused as unknown on a board that cannot measure its heap |
//! | 0x16 | `FORMATS_WRITE` | the remembered formats (`systole_step::resident::encode_formats`: count u16, each key length u8, key, frac u8) | — | replaces the state's remembered formats (an evaluation on the host changed them) and leaves the rest; with [`train::CAP_STATE_PARTS`]; refused `NotLoaded` without a state, `BadTrainState` (detail: the error code) when they do not decode or a frac is over the state's word |
//! | 0x17 | `SATURATION` | first entry u16 | entries in all u16, entries here u16, then per entry: name length u8, name (UTF-8), device operations u64, retries u64, saturated words u64 ([`train::SaturationEntry`]) | the saturation counts (`systole_step::SaturationCount`) of every `RUN_STEPS` and `EVALUATE` run on the installed state, per operation in the order of their names, from entry `first`, as many as fit the answer (the next request starts where it ended); they start at zero when a state is installed; with [`train::CAP_SATURATION`]; read-only |
//! | 0x18 | `STACK_USE` | — | reserve bytes u32, deepest use u32 | the firmware's stack high-water mark ([`stack`]) |
//! | 0x19 | `STEP_PROFILE` | — | per section: cycles u32, entries u32 (`systole_step::profile::encode`, in `Section::ALL` order) | the training step's CPU cycles by section since the start (the training image, `with_step_profile`); a board without a profile refuses it as unknown; read-only |
//! | 0x1A | `EVALUATE` | epochs completed u32 | images u32, correct u32, mean loss f32 bits u32, CPU cycles u64, array cycles u64, MAC cycles u64 ([`train::EvalAnswer`]) | the state's evaluation on the resident test split (`systole_step::resident::evaluate_resident`: the host trainer's `systole_step::step::evaluate`, batches of `EVAL_BATCH` in the stored order, seeds from the epochs completed); the state's remembered formats change as the host's evaluation changes them; refused `NotLoaded` (detail 2) without a test split, `BadData` (detail 2) when it does not fit the model; a failure drops the state (`StepFailed`); with [`train::CAP_EVALUATE`] |
//!
//! Row words are little-endian, lane 0 first; `size` is the board's array size and every row of
//! a request must be exactly `size` words. An array of `W`-bit words (`W` in its `CONFIG` word)
//! takes and gives each word sign-extended to 16 bits; a row or feature-map word outside the
//! `W`-bit range is refused (`WordRange`). Feature-map words are little-endian too, lowest
//! address first; a board without a conv unit (`fm_depth = 0`) refuses every `WRITE_FM` as out
//! of range. The board checks a whole request (every batch entry, every bank, row and
//! feature-map index) before it touches the accelerator, so a rejected request has no effect.
//!
//! **Board operations** (`0x0B`..`0x0F`, on a board whose `PING` answer is 16 bytes long and
//! carries capability bit [`board_ops::CAP_BOARD_OPS`] and the store's size in words after the
//! 11 bytes above; a board without a store answers 11 bytes and refuses them as unknown). The
//! tensor store packs tensors in creation order with no gaps (the free words are one run);
//! at most [`crate::store::MAX_TENSORS`] tensors. `WRITE_TENSOR` and `FREE_TENSORS` may appear
//! in a `BATCH`. `stats` is [`board_ops::OpStats`]: cycles u64, MAC cycles u64, then rows
//! written, C rows read, register writes, register reads and feature-map words, u32 each, as
//! the driver counted them on the board. A C longer than the answer holds is read with
//! `READ_TENSOR` from the word after the last one answered. Refusals: `StoreFull` (detail: the
//! free words, or 0 with every table entry taken; nothing was stored), `UnknownTensor`
//! (detail: the id), `ShapeMismatch` (operand shapes that do not make the product, a chunk of
//! another shape, a word past a tensor's end), `Driver` (detail: [`DriverFailure`]). A refused
//! `MATMUL` / `CONV` may leave `out` holding a partial result; it is never answered as one.
//!
//! **Training on the board** (`0x10`..`0x17` and `0x1A`, [`train`]; on a board whose `PING`
//! answer is 20 bytes with capability bit [`train::CAP_TRAIN`] and the heap's bytes u32 after
//! the store's words; `0x14` with [`train::CAP_PACKED_DATA`] too, `0x15` with
//! [`train::CAP_HEAP_USE`], `0x16` and `STATE_READ`'s part with [`train::CAP_STATE_PARTS`],
//! `0x1A` and the test split's slot with [`train::CAP_EVALUATE`], `0x17` with
//! [`train::CAP_SATURATION`];
//! a host facing a board without a bit uses the first forms): the state and the data set live on the board's heap; the whole request
//! is checked before it changes anything. Refusals: `NotLoaded` (detail 0: no state, 1: no data
//! set, 2: no test split), `BadTrainState` (detail: the state's error code), `OutOfMemory` (detail: free heap in
//! KiB; nothing was kept), `BadData` (the data set does not fit the model, or a chunk out of
//! order), `StepFailed` (the state is dropped: upload it again).
//!
//! **Progress.** A board with [`train::CAP_PROGRESS`] sends, for a `RUN_STEPS` whose flags carry
//! [`train::PROGRESS`] (0x02), a [`train::WORKING`] frame (`CMD = 0xFE`, the request's `SEQ`,
//! payload: steps done u16) when it accepts the request (0 steps done) and one after each step,
//! then the answer. A progress frame is not an answer; a resent request is answered from the
//! stored response without them.
//!
//! **Retries.** The board remembers the `SEQ` and CRC of the last request it executed and the
//! response it sent. A frame with the same `SEQ` and CRC is a retry (the response was lost): the
//! stored response is sent again and nothing runs twice. The host therefore retries a frame with
//! the same `SEQ`, and uses a new `SEQ` for every new request. It resends as soon as the frame
//! is known lost: the board answered `BadCrc`, `Oversized` or `BytesLost` (the request arrived
//! damaged), an answer failed its CRC, bytes came that form no frame (or a frame cut short) and
//! then the line stayed quiet for the frame timeout, or a long `RUN_STEPS` was not
//! acknowledged by a progress frame within the frame's wait. Otherwise it waits for the
//! frame's wait: the request's and the longest answer's bytes on the line at the link's baud
//! rate plus the frame timeout (500 ms by default), and for work the board does before it
//! answers, `SLACK` (4) times the slowest pace measured so far on the link (per step between
//! two progress frames, per evaluation; per multiply-accumulate of `MATMUL` / `CONV`, at most
//! 60 s), or a fixed bound before the first measurement (120 s a step; 60 s for board
//! operations, the last chunk of a training upload and the first of a state read). A board that acknowledged a
//! `RUN_STEPS` and then sends nothing for that long has stopped: the host ends the operation
//! at once with that error instead of resending. When the tries run out the host says what it
//! saw: requests reported damaged, answers arriving damaged, or silence
//! (`systole_device::serial::exchange`).

use crate::frame::MAX_PAYLOAD;

pub mod board_ops;
pub mod boot;
pub mod panic;
pub mod stack;
pub mod train;

pub use board_ops::{ConvRequest, MatmulRequest};

/// Protocol version reported by `PING`.
pub const VERSION: u8 = 1;
/// Flag added to a request's `CMD` in its successful response.
pub const RESPONSE: u8 = 0x80;
/// `CMD` of an error response.
pub const ERROR: u8 = 0xFF;
/// Largest array size the board supports (row buffers are sized for it).
pub const MAX_LANES: usize = 64;

/// Request command codes.
pub mod cmd {
    /// Identify the board.
    pub const PING: u8 = 0x01;
    /// Read a register.
    pub const READ_REG: u8 = 0x02;
    /// Write a register.
    pub const WRITE_REG: u8 = 0x03;
    /// Block write of A or B rows.
    pub const WRITE_ROWS: u8 = 0x04;
    /// Block read of C rows.
    pub const READ_ROWS: u8 = 0x05;
    /// Status and link counters.
    pub const STATUS: u8 = 0x06;
    /// Idle clocks.
    pub const IDLE: u8 = 0x07;
    /// Several writes in one frame.
    pub const BATCH: u8 = 0x08;
    /// Block write of feature-map words.
    pub const WRITE_FM: u8 = 0x09;
    /// The firmware's cycle counters.
    pub const COUNTERS: u8 = 0x0A;
    /// Store (a chunk of) a tensor on the board.
    pub const WRITE_TENSOR: u8 = 0x0B;
    /// Read (a chunk of) a stored tensor.
    pub const READ_TENSOR: u8 = 0x0C;
    /// Free stored tensors.
    pub const FREE_TENSORS: u8 = 0x0D;
    /// A product of stored tensors, run on the board.
    pub const MATMUL: u8 = 0x0E;
    /// A convolution op on stored tensors, run on the board.
    pub const CONV: u8 = 0x0F;
    /// Upload (a chunk of) the training state.
    pub const STATE_WRITE: u8 = 0x10;
    /// Read (a chunk of) the training state back.
    pub const STATE_READ: u8 = 0x11;
    /// Upload (a chunk of) the resident data set.
    pub const DATA_WRITE: u8 = 0x12;
    /// Run training steps on the resident state and data.
    pub const RUN_STEPS: u8 = 0x13;
    /// Upload (a chunk of) the resident data set, its pixels packed.
    pub const DATA_WRITE_PACKED: u8 = 0x14;
    /// The heap's use and its peak.
    pub const HEAP_USE: u8 = 0x15;
    /// Replace the state's remembered formats.
    pub const FORMATS_WRITE: u8 = 0x16;
    /// The saturation counts of the steps and evaluations run on the board.
    pub const SATURATION: u8 = 0x17;
    /// Evaluate the state on the resident test split.
    pub const EVALUATE: u8 = 0x1A;
}

/// Bytes of a `COUNTERS` response payload.
pub const COUNTERS_REPLY: usize = 13;

/// Bytes of a `WRITE_ROWS` payload before its words.
pub const WRITE_ROWS_HEADER: usize = 6;
/// Bytes of a `WRITE_FM` payload before its words (the address).
pub const WRITE_FM_HEADER: usize = 4;
/// Bytes of a batch entry before its payload.
pub const BATCH_ENTRY_HEADER: usize = 3;

mod error;
pub use error::{DriverFailure, ErrorCode, RemoteError};

/// Which input buffer a row block goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// The A (left operand) buffer.
    A = 0,
    /// The B (right operand) buffer.
    B = 1,
}

/// Little-endian 16-bit words borrowed from a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    /// Wraps raw bytes (their length must be even; [`Request::parse`] checks it).
    pub fn from_le_bytes(bytes: &'a [u8]) -> Self {
        Words(bytes)
    }
    /// Number of words.
    pub fn len(&self) -> usize {
        self.0.len() / 2
    }
    /// True when there are no words.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }
    /// Word `i`.
    pub fn get(&self, i: usize) -> i16 {
        i16::from_le_bytes([self.0[2 * i], self.0[2 * i + 1]])
    }
}

/// One request, parsed from (or to be encoded into) a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `PING`.
    Ping,
    /// `READ_REG`.
    ReadReg {
        /// Register address.
        addr: u8,
    },
    /// `WRITE_REG`.
    WriteReg {
        /// Register address.
        addr: u8,
        /// Value.
        value: u32,
    },
    /// `WRITE_ROWS`.
    WriteRows {
        /// A or B.
        buffer: Buffer,
        /// Bank 0 or 1.
        bank: u8,
        /// First row.
        start: u16,
        /// Number of rows (`>= 1`).
        count: u16,
        /// `count x size` words.
        words: Words<'a>,
    },
    /// `READ_ROWS` (C buffer).
    ReadRows {
        /// Bank 0 or 1.
        bank: u8,
        /// First row.
        start: u16,
        /// Number of rows (`>= 1`).
        count: u16,
    },
    /// `STATUS`.
    Status,
    /// `COUNTERS`.
    Counters,
    /// `IDLE`.
    Idle {
        /// Clock cycles.
        cycles: u32,
    },
    /// `BATCH`: the raw entries; iterate with [`BatchIter`].
    Batch(&'a [u8]),
    /// `WRITE_FM`.
    WriteFm {
        /// Feature-map word address of the first word.
        addr: u32,
        /// The words (`>= 1`), lowest address first.
        words: Words<'a>,
    },
    /// `WRITE_TENSOR`.
    WriteTensor {
        /// Tensor id.
        id: u8,
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
        /// Word offset of the first word.
        offset: u32,
        /// The words.
        words: Words<'a>,
    },
    /// `READ_TENSOR`.
    ReadTensor {
        /// Tensor id.
        id: u8,
        /// Word offset.
        offset: u32,
        /// Words.
        count: u16,
    },
    /// `FREE_TENSORS`: the ids.
    FreeTensors(&'a [u8]),
    /// `MATMUL`.
    Matmul(MatmulRequest),
    /// `CONV`.
    Conv(ConvRequest),
    /// A training request (`0x10`..`0x13`).
    Train(train::TrainRequest<'a>),
}

fn u16_at(p: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([p[i], p[i + 1]])
}

fn u32_at(p: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]])
}

impl<'a> Request<'a> {
    /// The command code.
    pub fn cmd(&self) -> u8 {
        match self {
            Request::Ping => cmd::PING,
            Request::ReadReg { .. } => cmd::READ_REG,
            Request::WriteReg { .. } => cmd::WRITE_REG,
            Request::WriteRows { .. } => cmd::WRITE_ROWS,
            Request::ReadRows { .. } => cmd::READ_ROWS,
            Request::Status => cmd::STATUS,
            Request::Counters => cmd::COUNTERS,
            Request::Idle { .. } => cmd::IDLE,
            Request::Batch(_) => cmd::BATCH,
            Request::WriteFm { .. } => cmd::WRITE_FM,
            Request::WriteTensor { .. } => cmd::WRITE_TENSOR,
            Request::ReadTensor { .. } => cmd::READ_TENSOR,
            Request::FreeTensors(_) => cmd::FREE_TENSORS,
            Request::Matmul(_) => cmd::MATMUL,
            Request::Conv(_) => cmd::CONV,
            Request::Train(r) => r.cmd(),
        }
    }

    /// Parses a request payload. Checks structure only; ranges depend on the board's
    /// configuration and are checked by the board.
    pub fn parse(cmd: u8, p: &'a [u8]) -> Result<Request<'a>, ErrorCode> {
        let need = |n: usize| {
            if p.len() == n {
                Ok(())
            } else {
                Err(ErrorCode::Malformed)
            }
        };
        Ok(match cmd {
            cmd::PING => {
                need(0)?;
                Request::Ping
            }
            cmd::READ_REG => {
                need(1)?;
                Request::ReadReg { addr: p[0] }
            }
            cmd::WRITE_REG => {
                need(5)?;
                Request::WriteReg {
                    addr: p[0],
                    value: u32_at(p, 1),
                }
            }
            cmd::WRITE_ROWS => {
                if p.len() < WRITE_ROWS_HEADER {
                    return Err(ErrorCode::Malformed);
                }
                let buffer = match p[0] {
                    0 => Buffer::A,
                    1 => Buffer::B,
                    _ => return Err(ErrorCode::OutOfRange),
                };
                let count = u16_at(p, 4);
                let words = &p[WRITE_ROWS_HEADER..];
                if count == 0
                    || words.is_empty()
                    || !words.len().is_multiple_of(2 * usize::from(count))
                {
                    return Err(ErrorCode::Malformed);
                }
                Request::WriteRows {
                    buffer,
                    bank: p[1],
                    start: u16_at(p, 2),
                    count,
                    words: Words(words),
                }
            }
            cmd::READ_ROWS => {
                need(5)?;
                let count = u16_at(p, 3);
                if count == 0 {
                    return Err(ErrorCode::Malformed);
                }
                Request::ReadRows {
                    bank: p[0],
                    start: u16_at(p, 1),
                    count,
                }
            }
            cmd::STATUS => {
                need(0)?;
                Request::Status
            }
            cmd::COUNTERS => {
                need(0)?;
                Request::Counters
            }
            cmd::IDLE => {
                need(4)?;
                Request::Idle {
                    cycles: u32_at(p, 0),
                }
            }
            cmd::BATCH => {
                // Validate every entry now so a bad batch is refused before anything runs.
                for entry in BatchIter::new(p) {
                    entry.map_err(|(code, _)| code)?;
                }
                Request::Batch(p)
            }
            cmd::WRITE_FM => {
                let words = p.get(WRITE_FM_HEADER..).unwrap_or(&[]);
                if words.is_empty() || !words.len().is_multiple_of(2) {
                    return Err(ErrorCode::Malformed);
                }
                Request::WriteFm {
                    addr: u32_at(p, 0),
                    words: Words(words),
                }
            }
            cmd::WRITE_TENSOR => {
                let (id, rows, cols, offset, words) = board_ops::parse_write(p)?;
                Request::WriteTensor {
                    id,
                    rows,
                    cols,
                    offset,
                    words,
                }
            }
            cmd::READ_TENSOR => {
                need(7)?;
                Request::ReadTensor {
                    id: p[0],
                    offset: u32_at(p, 1),
                    count: u16_at(p, 5),
                }
            }
            cmd::FREE_TENSORS => Request::FreeTensors(p),
            cmd::MATMUL => Request::Matmul(board_ops::parse_matmul(p)?),
            cmd::CONV => Request::Conv(board_ops::parse_conv(p)?),
            cmd::STATE_WRITE..=cmd::SATURATION | cmd::EVALUATE => {
                Request::Train(train::parse(cmd, p)?)
            }
            _ => return Err(ErrorCode::UnknownCommand),
        })
    }

    /// Encodes the payload into `out`; returns its length.
    pub fn encode_payload(&self, out: &mut [u8]) -> Result<usize, crate::frame::EncodeError> {
        use crate::frame::EncodeError;
        let mut w = Writer { out, len: 0 };
        match *self {
            Request::Ping | Request::Status | Request::Counters => {}
            Request::ReadReg { addr } => w.put(&[addr])?,
            Request::WriteReg { addr, value } => {
                w.put(&[addr])?;
                w.put(&value.to_le_bytes())?;
            }
            Request::WriteRows {
                buffer,
                bank,
                start,
                count,
                words,
            } => {
                w.put(&[buffer as u8, bank])?;
                w.put(&start.to_le_bytes())?;
                w.put(&count.to_le_bytes())?;
                w.put(words.bytes())?;
            }
            Request::ReadRows { bank, start, count } => {
                w.put(&[bank])?;
                w.put(&start.to_le_bytes())?;
                w.put(&count.to_le_bytes())?;
            }
            Request::Idle { cycles } => w.put(&cycles.to_le_bytes())?,
            Request::Batch(entries) => w.put(entries)?,
            Request::WriteFm { addr, words } => {
                w.put(&addr.to_le_bytes())?;
                w.put(words.bytes())?;
            }
            Request::WriteTensor {
                id,
                rows,
                cols,
                offset,
                words,
            } => {
                w.put(&[id])?;
                w.put(&rows.to_le_bytes())?;
                w.put(&cols.to_le_bytes())?;
                w.put(&offset.to_le_bytes())?;
                w.put(words.bytes())?;
            }
            Request::ReadTensor { id, offset, count } => {
                w.put(&[id])?;
                w.put(&offset.to_le_bytes())?;
                w.put(&count.to_le_bytes())?;
            }
            Request::FreeTensors(ids) => w.put(ids)?,
            Request::Matmul(r) => board_ops::encode_matmul(&r, &mut w)?,
            Request::Conv(r) => board_ops::encode_conv(&r, &mut w)?,
            Request::Train(r) => train::encode(&r, &mut w)?,
        }
        if w.len > MAX_PAYLOAD {
            return Err(EncodeError::PayloadTooLong(w.len));
        }
        Ok(w.len)
    }

    /// Encodes this request as one `BATCH` entry (CMD, LEN, payload) into `out`.
    pub fn encode_batch_entry(&self, out: &mut [u8]) -> Result<usize, crate::frame::EncodeError> {
        if out.len() < BATCH_ENTRY_HEADER {
            return Err(crate::frame::EncodeError::BufferTooSmall);
        }
        let n = self.encode_payload(&mut out[BATCH_ENTRY_HEADER..])?;
        out[0] = self.cmd();
        out[1..3].copy_from_slice(&(n as u16).to_le_bytes());
        Ok(n + BATCH_ENTRY_HEADER)
    }
}

struct Writer<'o> {
    out: &'o mut [u8],
    len: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) -> Result<(), crate::frame::EncodeError> {
        let end = self.len + b.len();
        if end > self.out.len() {
            return Err(crate::frame::EncodeError::BufferTooSmall);
        }
        self.out[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }
}

mod batch;
pub use batch::BatchIter;

#[cfg(test)]
mod tests;
