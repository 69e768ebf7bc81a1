//! The requests that run whole operations on the board (protocol commands `0x0B`..`0x0F`):
//! tensors uploaded into the board's [`crate::store::TensorStore`] and products and
//! convolutions on them, run by the board's own tile and conv drivers. A board that has them
//! says so in its `PING` answer ([`CAP_BOARD_OPS`]). Field layouts are in the table of
//! [`crate::protocol`]; this module parses and encodes them.

use super::{u16_at, u32_at, ErrorCode, Words, Writer};
use crate::frame::EncodeError;
use systole_core::gather::ConvGeom;
use systole_core::Rounding;

/// `PING` answer capability bit: the board runs `MATMUL` and `CONV` on stored tensors.
pub const CAP_BOARD_OPS: u8 = 0x01;
/// Bytes of a `PING` answer with the capability fields (capabilities u8, store words u32).
pub const PING_REPLY_WITH_CAPS: usize = 16;
/// Bytes of a `PING` answer of a board without them.
pub const PING_REPLY: usize = 11;
/// Tensor id meaning "none" (an operand a convolution op does not use) or, in
/// `FREE_TENSORS`, "every tensor".
pub const NO_TENSOR: u8 = 0xFF;
/// Bytes of a `WRITE_TENSOR` payload before its words.
pub const WRITE_TENSOR_HEADER: usize = 9;
/// Bytes of a `MATMUL` / `CONV` answer before the output words: `m` u16, `n` u16 and the
/// driver's counters ([`OpStats`]).
pub const OP_REPLY_HEADER: usize = 4 + OpStats::BYTES;
/// `MATMUL` flag: A is stored transposed (the product uses `Aᵀ`).
pub const A_TRANSPOSED: u8 = 0x01;
/// `MATMUL` flag: B is stored transposed (the product uses `Bᵀ`).
pub const B_TRANSPOSED: u8 = 0x02;

/// The driver's counters a `MATMUL` / `CONV` answer carries (what the host's device
/// statistics need: cycles and the bytes through the array's ports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Array cycles from the first to the last register access.
    pub cycles: u64,
    /// Cycles the array consumed a K step.
    pub mac_cycles: u64,
    /// A and B rows written.
    pub rows_written: u32,
    /// C rows read.
    pub rows_read: u32,
    /// Register writes.
    pub reg_writes: u32,
    /// Register reads.
    pub reg_reads: u32,
    /// Feature-map words written.
    pub fm_words: u32,
}

impl OpStats {
    /// Encoded size.
    pub const BYTES: usize = 36;

    /// From the driver's counters (counts saturate at `u32::MAX`).
    pub fn from_driver(s: &crate::driver::DriverStats) -> Self {
        let c = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        OpStats {
            cycles: s.cycles,
            mac_cycles: s.mac_cycles,
            rows_written: c(s.rows_written),
            rows_read: c(s.rows_read),
            reg_writes: c(s.reg_writes),
            reg_reads: c(s.reg_reads),
            fm_words: c(s.fm_words),
        }
    }

    /// Little-endian, in field order.
    pub fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.cycles.to_le_bytes());
        out[8..16].copy_from_slice(&self.mac_cycles.to_le_bytes());
        for (i, v) in [
            self.rows_written,
            self.rows_read,
            self.reg_writes,
            self.reg_reads,
            self.fm_words,
        ]
        .into_iter()
        .enumerate()
        {
            out[16 + 4 * i..20 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Parses [`OpStats::BYTES`] bytes.
    pub fn parse(p: &[u8]) -> Option<Self> {
        if p.len() < Self::BYTES {
            return None;
        }
        let u64_at = |i: usize| u64::from(u32_at(p, i)) | (u64::from(u32_at(p, i + 4)) << 32);
        Some(OpStats {
            cycles: u64_at(0),
            mac_cycles: u64_at(8),
            rows_written: u32_at(p, 16),
            rows_read: u32_at(p, 20),
            reg_writes: u32_at(p, 24),
            reg_reads: u32_at(p, 28),
            fm_words: u32_at(p, 32),
        })
    }
}

/// `MATMUL`: `C = op(A)·op(B)` on stored tensors, `C` stored as `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulRequest {
    /// Tensor id of A.
    pub a: u8,
    /// Tensor id of B.
    pub b: u8,
    /// Tensor id the product is stored as (replacing one with that id; not `a` or `b`).
    pub out: u8,
    /// [`A_TRANSPOSED`], [`B_TRANSPOSED`].
    pub flags: u8,
    /// Output right shift.
    pub shift: u8,
    /// Rounding of the output conversion.
    pub rounding: Rounding,
    /// Operation seed.
    pub seed: u32,
}

/// Which convolution op a `CONV` runs (the wire code is the index).
pub const CONV_OPS: [crate::conv::ConvOp; 3] = [
    crate::conv::ConvOp::Forward,
    crate::conv::ConvOp::BackwardInput,
    crate::conv::ConvOp::BackwardWeights,
];

/// `CONV`: one convolution op on stored tensors, the lowered output stored as `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvRequest {
    /// The op.
    pub op: crate::conv::ConvOp,
    /// Tensor id of the input maps (`batch x in_ch·in_h·in_w`), or [`NO_TENSOR`].
    pub x: u8,
    /// Tensor id of the output gradients (`batch x out_ch·oh·ow`), or [`NO_TENSOR`].
    pub dy: u8,
    /// Tensor id of the weights (`out_ch x in_ch·k·k`), or [`NO_TENSOR`].
    pub w: u8,
    /// Tensor id the lowered output is stored as.
    pub out: u8,
    /// Images.
    pub batch: u16,
    /// The convolution of one image.
    pub geom: ConvGeom,
    /// Output right shift.
    pub shift: u8,
    /// Rounding of the output conversion.
    pub rounding: Rounding,
    /// Operation seed.
    pub seed: u32,
}

/// Bytes of a `MATMUL` payload.
pub const MATMUL_LEN: usize = 10;
/// Bytes of a `CONV` payload.
pub const CONV_LEN: usize = 24;

fn rounding(code: u8) -> Result<Rounding, ErrorCode> {
    Rounding::from_code(code.into()).ok_or(ErrorCode::Malformed)
}

/// Parses a `WRITE_TENSOR` payload: `(id, rows, cols, offset, words)`.
pub(super) fn parse_write(p: &[u8]) -> Result<(u8, u16, u16, u32, Words<'_>), ErrorCode> {
    if p.len() < WRITE_TENSOR_HEADER || !(p.len() - WRITE_TENSOR_HEADER).is_multiple_of(2) {
        return Err(ErrorCode::Malformed);
    }
    Ok((
        p[0],
        u16_at(p, 1),
        u16_at(p, 3),
        u32_at(p, 5),
        Words(&p[WRITE_TENSOR_HEADER..]),
    ))
}

pub(super) fn parse_matmul(p: &[u8]) -> Result<MatmulRequest, ErrorCode> {
    if p.len() != MATMUL_LEN || p[3] & !(A_TRANSPOSED | B_TRANSPOSED) != 0 {
        return Err(ErrorCode::Malformed);
    }
    Ok(MatmulRequest {
        a: p[0],
        b: p[1],
        out: p[2],
        flags: p[3],
        shift: p[4],
        rounding: rounding(p[5])?,
        seed: u32_at(p, 6),
    })
}

pub(super) fn parse_conv(p: &[u8]) -> Result<ConvRequest, ErrorCode> {
    if p.len() != CONV_LEN {
        return Err(ErrorCode::Malformed);
    }
    let op = *CONV_OPS
        .get(usize::from(p[0]))
        .ok_or(ErrorCode::Malformed)?;
    let d = |i: usize| usize::from(u16_at(p, i));
    Ok(ConvRequest {
        op,
        x: p[1],
        dy: p[2],
        w: p[3],
        out: p[4],
        batch: u16_at(p, 5),
        geom: ConvGeom {
            in_ch: d(7),
            in_h: d(9),
            in_w: d(11),
            out_ch: d(13),
            kernel: p[15].into(),
            stride: p[16].into(),
            pad: p[17].into(),
        },
        shift: p[18],
        rounding: rounding(p[19])?,
        seed: u32_at(p, 20),
    })
}

pub(super) fn encode_matmul(r: &MatmulRequest, w: &mut Writer<'_>) -> Result<(), EncodeError> {
    w.put(&[r.a, r.b, r.out, r.flags, r.shift, r.rounding as u8])?;
    w.put(&r.seed.to_le_bytes())
}

pub(super) fn encode_conv(r: &ConvRequest, w: &mut Writer<'_>) -> Result<(), EncodeError> {
    let op = CONV_OPS.iter().position(|&o| o == r.op).unwrap_or(0) as u8;
    w.put(&[op, r.x, r.dy, r.w, r.out])?;
    w.put(&r.batch.to_le_bytes())?;
    let g = &r.geom;
    for d in [g.in_ch, g.in_h, g.in_w, g.out_ch] {
        // The host checks every dimension fits before it encodes.
        w.put(&(d.min(u16::MAX as usize) as u16).to_le_bytes())?;
    }
    for d in [g.kernel, g.stride, g.pad] {
        w.put(&[d.min(u8::MAX as usize) as u8])?;
    }
    w.put(&[r.shift, r.rounding as u8])?;
    w.put(&r.seed.to_le_bytes())
}
