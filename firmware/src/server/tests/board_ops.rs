//! The board operations: literal store requests and answers (frames from an independent
//! script), and `MATMUL` / `CONV` on the behavioural array equal to the host-driven driver,
//! words and counters.

use super::*;
use crate::conv::{conv2d, ConvJob, ConvOp};
use crate::driver::mock::MockArray;
use crate::driver::{matmul, MatmulJob};
use crate::protocol::board_ops::{OpStats, NO_TENSOR, OP_REPLY_HEADER};
use crate::protocol::{ConvRequest, MatmulRequest, Words};
use std::boxed::Box;
use std::vec;
use systole_core::gather::ConvGeom;
use systole_core::Rounding;

fn store(words: usize) -> &'static mut [i16] {
    Box::leak(vec![0i16; words].into_boxed_slice())
}

/// A board with a 16-word store: `PING` says so; a tensor is stored, read back and freed;
/// reading a freed id and storing more than fits are refused with their codes.
#[test]
fn store_requests_literal() {
    let input = cat(&[
        PING,
        &[
            0xA5, 0x5A, 0x11, 0x00, 0x10, 0x0B, 0x01, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x01, 0x00, 0xFE, 0xFF, 0x03, 0x00, 0x04, 0x00, 0x90, 0x50,
        ],
        &[
            0xA5, 0x5A, 0x07, 0x00, 0x11, 0x0C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x7B,
            0xCF,
        ],
        &[0xA5, 0x5A, 0x01, 0x00, 0x12, 0x0D, 0x01, 0x23, 0xF0],
        &[
            0xA5, 0x5A, 0x07, 0x00, 0x13, 0x0C, 0x01, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x1C,
            0x09,
        ],
        &[
            0xA5, 0x5A, 0x09, 0x00, 0x14, 0x0B, 0x02, 0x04, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,
            0x00, 0xC0, 0x13,
        ],
    ]);
    let want = cat(&[
        &[
            0xA5, 0x5A, 0x10, 0x00, 0x01, 0x81, 0x54, 0x53, 0x59, 0x53, 0x02, 0x10, 0x30, 0x84,
            0x01, 0x00, 0x04, 0x01, 0x10, 0x00, 0x00, 0x00, 0x70, 0xF6,
        ],
        &[0xA5, 0x5A, 0x00, 0x00, 0x10, 0x8B, 0x50, 0xA7],
        &[
            0xA5, 0x5A, 0x04, 0x00, 0x11, 0x8C, 0xFE, 0xFF, 0x03, 0x00, 0xAB, 0x6F,
        ],
        &[
            0xA5, 0x5A, 0x04, 0x00, 0x12, 0x8D, 0x10, 0x00, 0x00, 0x00, 0x9A, 0xB7,
        ],
        // UnknownTensor (13) for READ_TENSOR, detail: the id.
        &[
            0xA5, 0x5A, 0x04, 0x00, 0x13, 0xFF, 0x0D, 0x0C, 0x01, 0x00, 0x4E, 0xCF,
        ],
        // StoreFull (12) for WRITE_TENSOR, detail: the 16 free words.
        &[
            0xA5, 0x5A, 0x04, 0x00, 0x14, 0xFF, 0x0C, 0x0B, 0x10, 0x00, 0x69, 0xC4,
        ],
    ]);
    let cfg = config();
    let pipe = Pipe {
        input,
        pos: 0,
        chunk: 7,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockBus::new(&cfg), cfg).with_store(store(16));
    assert_eq!(board.serve(), ServerError::Closed);
    assert_eq!(board.store().map(|s| s.free_words()), Some(16));
    let (pipe, bus) = board.into_parts();
    assert_eq!(pipe.output, want);
    assert!(bus.log.is_empty(), "the store requests touched the array");
}

/// Sends `reqs` (sequence numbers from 1) to a board on the behavioural array with a store of
/// `words`; returns each answer's (CMD, payload).
fn exchange(cfg: ArrayConfig, words: usize, reqs: &[Request<'_>]) -> Vec<(u8, Vec<u8>)> {
    let mut input = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let mut p = [0u8; MAX_PAYLOAD];
        let n = r.encode_payload(&mut p).unwrap();
        let mut f = [0u8; FRAME_CAPACITY];
        let len = frame::encode(i as u8 + 1, r.cmd(), &p[..n], &mut f).unwrap();
        input.extend_from_slice(&f[..len]);
    }
    let pipe = Pipe {
        input,
        pos: 0,
        chunk: 64,
        output: Vec::new(),
    };
    let mut board = FrameServer::new(pipe, MockArray::new(cfg), cfg).with_store(store(words));
    assert_eq!(board.serve(), ServerError::Closed);
    let (pipe, _) = board.into_parts();
    let mut d = Decoder::new();
    let (mut out, mut at) = (Vec::new(), 0);
    while at < pipe.output.len() {
        at += d.push(&pipe.output[at..]);
        while let Some(Ok(f)) = d.next_frame() {
            out.push((f.cmd, Vec::from(f.payload)));
        }
    }
    out
}

fn le(words: &[i16]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn upload<'a>(id: u8, rows: u16, cols: u16, bytes: &'a [u8]) -> Request<'a> {
    Request::WriteTensor {
        id,
        rows,
        cols,
        offset: 0,
        words: Words::from_le_bytes(bytes),
    }
}

fn values(n: usize, seed: i32) -> Vec<i16> {
    (0..n as i32)
        .map(|i| ((i * 7919 + seed * 31) % 2001 - 1000) as i16)
        .collect()
}

fn transpose(w: &[i16], rows: usize, cols: usize) -> Vec<i16> {
    (0..rows * cols)
        .map(|i| w[(i % rows) * cols + i / rows])
        .collect()
}

/// `MATMUL` on stored tensors, B read through its transpose and K longer than a bank (two
/// chunks), answers what the host-driven driver computes on the copy it transposed itself:
/// every word and the array's counters; the rest of C reads back with `READ_TENSOR`.
#[test]
fn matmul_on_the_board_equals_the_host_driven_product() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    // C is 520 words: 492 in the answer, the rest read back.
    let (m, k, n) = (26, 21, 20);
    let (a, bt) = (values(m * k, 1), values(n * k, 2));
    let (ab, bb) = (le(&a), le(&bt));
    let req = MatmulRequest {
        a: 1,
        b: 2,
        out: 0,
        flags: crate::protocol::board_ops::B_TRANSPOSED,
        shift: 9,
        rounding: Rounding::Stochastic,
        seed: 0xC0FFEE,
    };
    let read = Request::ReadTensor {
        id: 0,
        offset: 492,
        count: 28,
    };
    // A (546 words) in two chunks.
    let half = Request::WriteTensor {
        id: 1,
        rows: m as u16,
        cols: k as u16,
        offset: 300,
        words: Words::from_le_bytes(&ab[600..]),
    };
    let answers = exchange(
        cfg,
        2048,
        &[
            upload(1, m as u16, k as u16, &ab[..600]),
            half,
            upload(2, n as u16, k as u16, &bb),
            Request::Matmul(req),
            read,
        ],
    );
    let b = transpose(&bt, n, k);
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 9,
        rounding: Rounding::Stochastic,
        seed: 0xC0FFEE,
    };
    let mut want = vec![0i16; m * n];
    let st = matmul(&mut MockArray::new(cfg), &cfg, &job, &mut want).unwrap();
    let (cmd, p) = &answers[3];
    assert_eq!(*cmd, 0x8E, "{p:?}");
    assert_eq!(&p[..4], &[26, 0, 20, 0]);
    assert_eq!(OpStats::parse(&p[4..]), Some(OpStats::from_driver(&st)));
    assert_eq!(p[OP_REPLY_HEADER..], le(&want[..492])[..]);
    assert_eq!(answers[4], (0x8C, le(&want[492..])));
}

/// `CONV` (the weight gradient: both operands gathered) on stored maps equals the host-driven
/// conv driver; a product whose output does not fit the store is refused with `StoreFull`
/// and a product of shapes that do not meet with `ShapeMismatch`.
#[test]
fn conv_on_the_board_equals_the_host_driven_op_and_refusals_are_typed() {
    let cfg = ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::new(4, 8, 16).unwrap()
    };
    let geom = ConvGeom {
        in_ch: 2,
        in_h: 5,
        in_w: 5,
        out_ch: 3,
        kernel: 3,
        stride: 1,
        pad: 1,
    };
    let batch = 2;
    let (x, dy) = (
        values(batch * geom.in_words(), 3),
        values(batch * geom.out_words(), 4),
    );
    let (xb, dyb) = (le(&x), le(&dy));
    let conv = ConvRequest {
        op: ConvOp::BackwardWeights,
        x: 1,
        dy: 2,
        w: NO_TENSOR,
        out: 0,
        batch: batch as u16,
        geom,
        shift: 12,
        rounding: Rounding::NearestEven,
        seed: 5,
    };
    let bad = MatmulRequest {
        a: 1,
        b: 2,
        out: 0,
        flags: 0,
        shift: 0,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    let answers = exchange(
        cfg,
        320,
        &[
            upload(1, batch as u16, geom.in_words() as u16, &xb),
            upload(2, batch as u16, geom.out_words() as u16, &dyb),
            Request::Conv(conv),
            Request::Matmul(bad),
            upload(3, 16, 16, &[]),
        ],
    );
    let job = ConvJob {
        op: ConvOp::BackwardWeights,
        geom,
        batch,
        x: &x,
        dy: &dy,
        w: &[],
        shift: 12,
        rounding: Rounding::NearestEven,
        seed: 5,
    };
    let mut want = vec![0i16; 3 * 18];
    let st = conv2d(&mut MockArray::new(cfg), &cfg, &job, &mut want).unwrap();
    let (cmd, p) = &answers[2];
    assert_eq!(*cmd, 0x8F, "{p:?}");
    assert_eq!(&p[..4], &[3, 0, 18, 0]);
    assert_eq!(OpStats::parse(&p[4..]), Some(OpStats::from_driver(&st)));
    assert_eq!(p[OP_REPLY_HEADER..], le(&want)[..]);
    // x is 2x50, dy 2x75: x·dy does not meet.
    assert_eq!(answers[3], (ERROR, Vec::from([14, 0x0E, 0, 0])));
    // 100 + 150 + 54 words stored of 320: 16 free.
    assert_eq!(answers[4], (ERROR, Vec::from([12, 0x0B, 16, 0])));
}
