//! The training requests' payloads with literal bytes, both ways, their malformed forms, and
//! the `RUN_STEPS` answer.

use super::*;
use crate::protocol::train::{HeapUse, RunCounters, TrainRequest, MAX_RUN_STEPS};

#[test]
fn train_payloads_both_ways() {
    let cases: [(Request<'_>, u8, &[u8]); 8] = [
        (
            Request::Train(TrainRequest::StateWrite {
                total: 0x0102,
                offset: 0x10,
                bytes: &[7, 8],
            }),
            0x10,
            &[2, 1, 0, 0, 0x10, 0, 0, 0, 7, 8],
        ),
        (
            Request::Train(TrainRequest::StateRead {
                offset: 0x0203_0405,
                count: 0x0100,
                part: 0,
            }),
            0x11,
            &[5, 4, 3, 2, 0, 1],
        ),
        (
            Request::Train(TrainRequest::StateRead {
                offset: 7,
                count: 0x0100,
                part: 1,
            }),
            0x11,
            &[7, 0, 0, 0, 0, 1, 1],
        ),
        (
            Request::Train(TrainRequest::FormatsWrite {
                bytes: &[1, 0, 1, b'a', 9],
            }),
            0x16,
            &[1, 0, 1, b'a', 9],
        ),
        (
            Request::Train(TrainRequest::DataWrite {
                test: false,
                features: 64,
                divisor: 16,
                bits: None,
                total: 0x0001_0203,
                offset: 4,
                bytes: &[9],
            }),
            0x12,
            &[64, 0, 16, 0, 3, 2, 1, 0, 4, 0, 0, 0, 9],
        ),
        (
            Request::Train(TrainRequest::DataWrite {
                test: false,
                features: 64,
                divisor: 16,
                bits: Some(5),
                total: 0x0001_0203,
                offset: 4,
                bytes: &[9],
            }),
            0x14,
            &[64, 0, 16, 0, 5, 3, 2, 1, 0, 4, 0, 0, 0, 9],
        ),
        (Request::Train(TrainRequest::HeapUse), 0x15, &[]),
        (
            Request::Train(TrainRequest::RunSteps {
                epochs_done: 2,
                first_batch: 0x0102,
                steps: 45,
                batch: 32,
                lr_bits: 0x3D4C_CCCD,
                flags: 1,
            }),
            0x13,
            &[
                2, 0, 0, 0, 2, 1, 0, 0, 45, 0, 32, 0, 0xCD, 0xCC, 0x4C, 0x3D, 1,
            ],
        ),
    ];
    for (req, code, bytes) in cases {
        assert_eq!(req.cmd(), code);
        assert_eq!(encode(&req), bytes, "{req:?}");
        assert_eq!(Request::parse(code, bytes), Ok(req));
    }
    // None of them may be batched.
    let mut out = [0u8; 32];
    let n = cases[0].0.encode_batch_entry(&mut out).unwrap();
    assert_eq!(
        BatchIter::new(&out[..n]).next(),
        Some(Err((ErrorCode::NotBatchable, 0)))
    );
}

#[test]
fn malformed_train_payloads_are_refused() {
    let max = (MAX_RUN_STEPS as u16 + 1).to_le_bytes();
    let cases: [(u8, &[u8]); 14] = [
        // STATE_READ of an unknown part; FORMATS_WRITE shorter than its count.
        (0x11, &[0, 0, 0, 0, 1, 0, 2]),
        (0x16, &[1]),
        // STATE_WRITE and DATA_WRITE without a byte.
        (0x10, &[1, 0, 0, 0, 0, 0, 0, 0]),
        (0x12, &[1, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0]),
        (0x14, &[1, 0, 1, 0, 5, 2, 0, 0, 0, 0, 0, 0, 0]),
        // DATA_WRITE_PACKED at 0 and at 9 bits a pixel.
        (0x14, &[1, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7]),
        (0x14, &[1, 0, 1, 0, 9, 2, 0, 0, 0, 0, 0, 0, 0, 7]),
        // HEAP_USE with a payload.
        (0x15, &[0]),
        // STATE_READ of 0 bytes, of more than an answer holds.
        (0x11, &[0, 0, 0, 0, 0, 0]),
        (0x11, &[0, 0, 0, 0, 0xFD, 0x03]),
        // RUN_STEPS of 0 steps, of more than the answer holds, at batch 0.
        (0x13, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]),
        (
            0x13,
            &[0, 0, 0, 0, 0, 0, 0, 0, max[0], max[1], 1, 0, 0, 0, 0, 0, 0],
        ),
        (0x13, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        // An unknown flag.
        (0x13, &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]),
    ];
    for (cmd, p) in cases {
        assert_eq!(
            Request::parse(cmd, p),
            Err(ErrorCode::Malformed),
            "{cmd:#x} {p:?}"
        );
    }
    // The largest read fits an answer.
    assert!(Request::parse(0x11, &[0, 0, 0, 0, 0xFC, 0x03]).is_ok());
}

#[test]
fn heap_use_answer_with_literal_bytes() {
    let h = HeapUse {
        heap: 0x0001_C05C,
        in_use: 0x0102,
        peak: 0x0A0B_0C0D,
    };
    let bytes = [0x5C, 0xC0, 1, 0, 2, 1, 0, 0, 0x0D, 0x0C, 0x0B, 0x0A];
    assert_eq!(h.encode(), bytes);
    assert_eq!(HeapUse::parse(&bytes), Some(h));
    assert_eq!(HeapUse::parse(&bytes[..11]), None);
}

#[test]
fn run_answer_parses_and_checks_its_length() {
    let mut p = std::vec![0u8; 26 + 12];
    let c = RunCounters {
        steps: 2,
        cpu_cycles: 0x0102_0304_0506_0708,
        array_cycles: 9,
        mac_cycles: 10,
    };
    c.encode(&mut p);
    assert_eq!(&p[..4], &[2, 0, 8, 7]);
    p[26..32].copy_from_slice(&[0, 0, 0x80, 0x3F, 3, 0]);
    let (got, steps) = RunCounters::parse(&p).unwrap();
    assert_eq!(got, c);
    assert_eq!(steps.collect::<std::vec::Vec<_>>(), [(1.0, 3), (0.0, 0)]);
    assert!(RunCounters::parse(&p[..p.len() - 1]).is_none());
}

/// `EVALUATE` (0x1A) and the test split's `DATA_WRITE_PACKED` (the bits byte's top bit) with
/// literal bytes, both ways; their malformed forms; the answer.
#[test]
fn evaluation_payloads_with_literal_bytes() {
    use crate::protocol::train::EvalAnswer;
    let cases: [(Request<'_>, u8, &[u8]); 2] = [
        (
            Request::Train(TrainRequest::Evaluate {
                epochs: 0x0102_0304,
            }),
            0x1A,
            &[4, 3, 2, 1],
        ),
        (
            Request::Train(TrainRequest::DataWrite {
                test: true,
                features: 64,
                divisor: 16,
                bits: Some(5),
                total: 0x0001_0203,
                offset: 4,
                bytes: &[9],
            }),
            0x14,
            &[64, 0, 16, 0, 0x85, 3, 2, 1, 0, 4, 0, 0, 0, 9],
        ),
    ];
    for (req, code, bytes) in cases {
        assert_eq!(req.cmd(), code);
        assert_eq!(encode(&req), bytes, "{req:?}");
        assert_eq!(Request::parse(code, bytes), Ok(req));
    }
    // EVALUATE of 3 and 5 bytes; the test split at 0 and 9 bits; another high bit.
    let malformed: [(u8, &[u8]); 5] = [
        (0x1A, &[1, 0, 0]),
        (0x1A, &[1, 0, 0, 0, 0]),
        (0x14, &[1, 0, 1, 0, 0x80, 2, 0, 0, 0, 0, 0, 0, 0, 7]),
        (0x14, &[1, 0, 1, 0, 0x89, 2, 0, 0, 0, 0, 0, 0, 0, 7]),
        (0x14, &[1, 0, 1, 0, 0x45, 2, 0, 0, 0, 0, 0, 0, 0, 7]),
    ];
    for (cmd, p) in malformed {
        assert_eq!(
            Request::parse(cmd, p),
            Err(ErrorCode::Malformed),
            "{cmd:#x} {p:?}"
        );
    }
    let a = EvalAnswer {
        images: 359,
        correct: 0x0102,
        loss: 1.0,
        cpu_cycles: 0x0102_0304_0506_0708,
        array_cycles: 9,
        mac_cycles: 0x0A,
    };
    let bytes = [
        0x67, 1, 0, 0, 2, 1, 0, 0, 0, 0, 0x80, 0x3F, 8, 7, 6, 5, 4, 3, 2, 1, 9, 0, 0, 0, 0, 0, 0,
        0, 0x0A, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(a.encode(), bytes);
    assert_eq!(EvalAnswer::parse(&bytes), Some(a));
    assert_eq!(EvalAnswer::parse(&bytes[..35]), None);
}

/// `SATURATION`: the request's first entry, and answers that hold the entries that fit, whole,
/// and read back as written; a name cut short or a count that does not add up is no answer.
#[test]
fn saturation_requests_and_answers() {
    use crate::protocol::train::{encode_saturation, parse_saturation, SaturationEntry};
    let req = Request::parse(0x17, &[3, 1]).unwrap();
    assert_eq!(
        req,
        Request::Train(TrainRequest::Saturation { first: 0x0103 })
    );
    assert_eq!(Request::parse(0x17, &[3]), Err(ErrorCode::Malformed));
    let entry = |op, n| SaturationEntry {
        op,
        ops: n,
        retries: n + 1,
        saturated_words: 1 << 40,
    };
    let all = [entry("layer 1 forward", 7), entry("layer 2 backward dW", 9)];
    let mut out = [0u8; 128];
    let len = encode_saturation(2, all.iter().copied(), &mut out);
    assert_eq!(len, 4 + 2 * 25 + 15 + 19);
    let (total, got) = parse_saturation(&out[..len]).unwrap();
    assert_eq!((total, got.collect::<Vec<_>>()), (2, all.to_vec()));
    // Room for one entry: the answer holds it and says there are two.
    let len = encode_saturation(2, all.iter().copied(), &mut out[..4 + 25 + 15 + 5]);
    let (total, got) = parse_saturation(&out[..len]).unwrap();
    assert_eq!((total, got.collect::<Vec<_>>()), (2, all[..1].to_vec()));
    assert!(parse_saturation(&out[..len - 1]).is_none());
    out[2] = 2;
    assert!(parse_saturation(&out[..len]).is_none());
}
