//! The board operations of [`super::FrameServer`]: the tensor store's requests and `MATMUL` /
//! `CONV` run by the board's own drivers on stored tensors (see [`crate::protocol`]).

use super::Failure;
use crate::conv::{conv2d, ConvJob, ConvOp};
use crate::driver::{self, DriverError, DriverStats, MatmulJob, Transposed};
use crate::frame::MAX_PAYLOAD;
use crate::protocol::board_ops::{
    OpStats, A_TRANSPOSED, B_TRANSPOSED, CAP_BOARD_OPS, NO_TENSOR, OP_REPLY_HEADER,
};
use crate::protocol::{ConvRequest, DriverFailure, ErrorCode, MatmulRequest, Request};
use crate::store::{StoreError, Table, TensorStore};
use systole_core::{AcceleratorBus, ArrayConfig};

/// The board's tensor store, if it has one.
pub(super) type Store = Option<TensorStore<'static>>;

fn store_failure(e: StoreError, index: u16) -> Failure {
    match e {
        StoreError::Full { free, .. } => (
            ErrorCode::StoreFull,
            u16::try_from(free).unwrap_or(u16::MAX),
        ),
        StoreError::TooMany => (ErrorCode::StoreFull, 0),
        StoreError::UnknownId(id) => (ErrorCode::UnknownTensor, id.into()),
        StoreError::Range => (ErrorCode::ShapeMismatch, index),
    }
}

fn driver_failure<E>(e: DriverError<E>) -> Failure {
    match e {
        DriverError::Bus(_) => (ErrorCode::Bus, 0),
        e => (ErrorCode::Driver, DriverFailure::of(&e) as u16),
    }
}

/// The capability fields a `PING` answer ends with on a board with a store.
pub(super) fn ping_caps(store: &Store, out: &mut [u8]) -> usize {
    match store {
        Some(s) => {
            out[0] = CAP_BOARD_OPS;
            let words = u32::try_from(s.capacity()).unwrap_or(u32::MAX);
            out[1..5].copy_from_slice(&words.to_le_bytes());
            5
        }
        None => 0,
    }
}

/// Checks a tensor-store entry of a batch against `plan` (the store's bookkeeping as the
/// entries before it leave it), updating `plan`; other entries pass.
pub(super) fn check_entry(
    req: &Request<'_>,
    plan: &mut Option<Table>,
    index: u16,
) -> Result<(), Failure> {
    let unknown = (ErrorCode::UnknownCommand, index);
    match *req {
        Request::WriteTensor {
            id,
            rows,
            cols,
            offset,
            words,
        } => {
            let table = plan.as_mut().ok_or(unknown)?;
            table
                .write(id, rows, cols, offset as usize, words.len())
                .map(|_| ())
                .map_err(|e| store_failure(e, index))
        }
        Request::FreeTensors(ids) => {
            let table = plan.as_mut().ok_or(unknown)?;
            table
                .free_all_of(ids, NO_TENSOR)
                .map_err(|e| store_failure(e, index))
        }
        _ => Ok(()),
    }
}

/// Runs a tensor-store write (`WRITE_TENSOR`, `FREE_TENSORS`), in or out of a batch.
pub(super) fn run_store_write(req: &Request<'_>, store: &mut Store) -> Result<(), Failure> {
    let s = store.as_mut().ok_or((ErrorCode::UnknownCommand, 0))?;
    match *req {
        Request::WriteTensor {
            id,
            rows,
            cols,
            offset,
            words,
        } => s.write(id, rows, cols, offset as usize, words.bytes()),
        Request::FreeTensors(ids) => s.free_list(ids, NO_TENSOR),
        _ => return Err((ErrorCode::NotBatchable, 0)),
    }
    .map_err(|e| store_failure(e, 0))
}

/// Runs a board operation that answers with data; returns the answer's length in `out`.
pub(super) fn execute<B: AcceleratorBus>(
    req: &Request<'_>,
    bus: &mut B,
    config: &ArrayConfig,
    store: &mut Store,
    out: &mut [u8],
) -> Result<usize, Failure> {
    let s = store.as_mut().ok_or((ErrorCode::UnknownCommand, 0))?;
    match *req {
        Request::ReadTensor { id, offset, count } => {
            let t = s.get(id).map_err(|e| store_failure(e, 0))?;
            let (from, n) = (offset as usize, usize::from(count));
            if 2 * n > MAX_PAYLOAD || from.checked_add(n).is_none_or(|end| end > t.words.len()) {
                return Err((ErrorCode::ShapeMismatch, 0));
            }
            put_words(&t.words[from..from + n], out);
            Ok(2 * n)
        }
        Request::FreeTensors(_) => {
            run_store_write(req, store)?;
            let free = store.as_ref().map_or(0, |s| s.free_words());
            out[..4].copy_from_slice(&u32::try_from(free).unwrap_or(u32::MAX).to_le_bytes());
            Ok(4)
        }
        Request::Matmul(r) => matmul(&r, bus, config, s, out),
        Request::Conv(r) => conv(&r, bus, config, s, out),
        _ => Err((ErrorCode::UnknownCommand, 0)),
    }
}

fn put_words(words: &[i16], out: &mut [u8]) {
    for (w, b) in words.iter().zip(out.chunks_exact_mut(2)) {
        b.copy_from_slice(&w.to_le_bytes());
    }
}

/// The answer of `MATMUL` / `CONV`: the shape, the driver's counters and the first words.
fn reply(m: usize, n: usize, st: &DriverStats, c: &[i16], out: &mut [u8]) -> usize {
    out[..2].copy_from_slice(&(m as u16).to_le_bytes());
    out[2..4].copy_from_slice(&(n as u16).to_le_bytes());
    OpStats::from_driver(st).encode(&mut out[4..OP_REPLY_HEADER]);
    let words = c.len().min((MAX_PAYLOAD - OP_REPLY_HEADER) / 2);
    put_words(&c[..words], &mut out[OP_REPLY_HEADER..]);
    OP_REPLY_HEADER + 2 * words
}

/// `(rows, cols)` of a stored tensor as the product reads it.
fn dims(rows: usize, cols: usize, transposed: bool) -> (usize, usize) {
    if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    }
}

fn matmul<B: AcceleratorBus>(
    r: &MatmulRequest,
    bus: &mut B,
    config: &ArrayConfig,
    s: &mut TensorStore<'static>,
    out: &mut [u8],
) -> Result<usize, Failure> {
    if r.out == r.a || r.out == r.b {
        return Err((ErrorCode::Malformed, 0));
    }
    let tr = Transposed {
        a: r.flags & A_TRANSPOSED != 0,
        b: r.flags & B_TRANSPOSED != 0,
    };
    let fail = |e| store_failure(e, 0);
    let (a, b) = (s.get(r.a).map_err(fail)?, s.get(r.b).map_err(fail)?);
    let (m, k) = dims(a.rows, a.cols, tr.a);
    let (kb, n) = dims(b.rows, b.cols, tr.b);
    if k != kb {
        return Err((ErrorCode::ShapeMismatch, 0));
    }
    // Both come from u16 fields.
    let (view, c) = s.output(r.out, m as u16, n as u16).map_err(fail)?;
    let (a, b) = (view.get(r.a).map_err(fail)?, view.get(r.b).map_err(fail)?);
    let job = MatmulJob {
        a: a.words,
        b: b.words,
        m,
        k,
        n,
        shift: r.shift.into(),
        rounding: r.rounding,
        seed: r.seed,
    };
    let st = driver::matmul_views(bus, config, &job, tr, c).map_err(driver_failure)?;
    Ok(reply(m, n, &st, c, out))
}

fn conv<B: AcceleratorBus>(
    r: &ConvRequest,
    bus: &mut B,
    config: &ArrayConfig,
    s: &mut TensorStore<'static>,
    out: &mut [u8],
) -> Result<usize, Failure> {
    let g = r.geom;
    g.check()
        .map_err(|e| driver_failure(DriverError::<()>::Geometry(e)))?;
    // In u64: on the board `usize` is 32 bits and a wire geometry may be huge. Once the shapes
    // below are checked against stored tensors and the output against u16, every size the
    // drivers compute fits.
    let batch = u64::from(r.batch);
    let d = |v: usize| v as u64;
    let (oh, ow) = (d(g.out_h()), d(g.out_w()));
    let kk = d(g.in_ch) * d(g.kernel) * d(g.kernel);
    let used = |ops: &[ConvOp]| ops.contains(&r.op);
    let operands = [
        (
            r.x,
            used(&[ConvOp::Forward, ConvOp::BackwardWeights]),
            batch,
            d(g.in_ch) * d(g.in_h) * d(g.in_w),
        ),
        (
            r.dy,
            used(&[ConvOp::BackwardInput, ConvOp::BackwardWeights]),
            batch,
            d(g.out_ch) * oh * ow,
        ),
        (
            r.w,
            used(&[ConvOp::Forward, ConvOp::BackwardInput]),
            d(g.out_ch),
            kk,
        ),
    ];
    for (id, used, rows, cols) in operands {
        if !used {
            if id != NO_TENSOR {
                return Err((ErrorCode::Malformed, 0));
            }
            continue;
        }
        if id == r.out {
            return Err((ErrorCode::Malformed, 0));
        }
        let t = s.get(id).map_err(|e| store_failure(e, 0))?;
        if (d(t.rows), d(t.cols)) != (rows, cols) {
            return Err((ErrorCode::ShapeMismatch, 0));
        }
    }
    let (m, n) = match r.op {
        ConvOp::Forward => (batch * oh * ow, d(g.out_ch)),
        ConvOp::BackwardInput => (batch * d(g.in_h) * d(g.in_w), d(g.in_ch)),
        ConvOp::BackwardWeights => (d(g.out_ch), kk),
    };
    let (Ok(m16), Ok(n16)) = (u16::try_from(m), u16::try_from(n)) else {
        return Err((ErrorCode::ShapeMismatch, 0));
    };
    let (m, n) = (usize::from(m16), usize::from(n16));
    let probe = ConvJob {
        op: r.op,
        geom: g,
        batch: usize::from(r.batch),
        x: &[],
        dy: &[],
        w: &[],
        shift: r.shift.into(),
        rounding: r.rounding,
        seed: r.seed,
    };
    let (view, c) = s.output(r.out, m16, n16).map_err(|e| store_failure(e, 0))?;
    let words = |id: u8| match id {
        NO_TENSOR => Ok(&[][..]),
        id => view
            .get(id)
            .map(|t| t.words)
            .map_err(|e| store_failure(e, 0)),
    };
    let job = ConvJob {
        x: words(r.x)?,
        dy: words(r.dy)?,
        w: words(r.w)?,
        ..probe
    };
    let st = conv2d(bus, config, &job, c).map_err(driver_failure)?;
    Ok(reply(m, n, &st, c, out))
}
