//! Payload-level encode/decode with literal bytes, a round-trip property and malformed input.
//! Whole-frame literals (header and CRC) are in the board tests.

extern crate std;
use super::*;
use proptest::prelude::*;
use std::vec::Vec;

fn encode(r: &Request<'_>) -> Vec<u8> {
    let mut out = [0u8; MAX_PAYLOAD];
    let n = r.encode_payload(&mut out).unwrap();
    Vec::from(&out[..n])
}

#[test]
fn literal_payloads_both_ways() {
    let words = [0x01, 0x00, 0xFE, 0xFF];
    let cases: [(Request<'_>, u8, &[u8]); 10] = [
        (Request::Ping, 0x01, &[]),
        (Request::ReadReg { addr: 0x0C }, 0x02, &[0x0C]),
        (
            Request::WriteReg {
                addr: 0x08,
                value: 0xDEAD_BEEF,
            },
            0x03,
            &[0x08, 0xEF, 0xBE, 0xAD, 0xDE],
        ),
        (
            Request::WriteRows {
                buffer: Buffer::B,
                bank: 1,
                start: 0x0102,
                count: 1,
                words: Words::from_le_bytes(&words),
            },
            0x04,
            &[0x01, 0x01, 0x02, 0x01, 0x01, 0x00, 0x01, 0x00, 0xFE, 0xFF],
        ),
        (
            Request::ReadRows {
                bank: 0,
                start: 3,
                count: 4,
            },
            0x05,
            &[0x00, 0x03, 0x00, 0x04, 0x00],
        ),
        (Request::Status, 0x06, &[]),
        (Request::Counters, 0x0A, &[]),
        (
            Request::Idle { cycles: 70000 },
            0x07,
            &[0x70, 0x11, 0x01, 0x00],
        ),
        (
            Request::Batch(&[0x07, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00]),
            0x08,
            &[0x07, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00],
        ),
        (
            Request::WriteFm {
                addr: 0x0102_0304,
                words: Words::from_le_bytes(&[0x01, 0x00, 0x00, 0x80]),
            },
            0x09,
            &[0x04, 0x03, 0x02, 0x01, 0x01, 0x00, 0x00, 0x80],
        ),
    ];
    for (req, code, bytes) in cases {
        assert_eq!(req.cmd(), code);
        assert_eq!(encode(&req), bytes, "{req:?}");
        assert_eq!(Request::parse(code, bytes), Ok(req));
    }
    if let Ok(Request::WriteRows { words, .. }) = Request::parse(0x04, cases[3].2) {
        assert_eq!((words.len(), words.get(0), words.get(1)), (2, 1, -2));
    } else {
        panic!("WRITE_ROWS did not parse");
    }
}

mod board_ops;
mod train;

#[test]
fn batch_entry_literal() {
    let mut out = [0u8; 16];
    let n = Request::WriteReg {
        addr: 0x0B,
        value: 16,
    }
    .encode_batch_entry(&mut out)
    .unwrap();
    assert_eq!(&out[..n], &[0x03, 0x05, 0x00, 0x0B, 0x10, 0x00, 0x00, 0x00]);
}

#[test]
fn malformed_payloads_are_refused() {
    use ErrorCode::*;
    let cases: [(u8, &[u8], ErrorCode); 12] = [
        (0x01, &[0], Malformed),
        (0x03, &[1, 2, 3], Malformed),
        (0x04, &[0, 0, 0, 0, 1], Malformed),
        (0x04, &[2, 0, 0, 0, 1, 0, 1, 0], OutOfRange),
        (0x04, &[0, 0, 0, 0, 0, 0, 1, 0], Malformed),
        (0x04, &[0, 0, 0, 0, 2, 0, 1, 0], Malformed),
        (0x05, &[0, 0, 0, 0, 0], Malformed),
        (0x08, &[0x07, 0x05, 0x00, 1, 2], Malformed),
        (0x08, &[0x05, 0x00, 0x00], NotBatchable),
        (0x99, &[], UnknownCommand),
        // WRITE_FM: an address and no words; an odd word byte.
        (0x09, &[0, 0, 0, 0], Malformed),
        (0x09, &[0, 0, 0, 0, 1, 0, 2], Malformed),
    ];
    for (cmd, p, code) in cases {
        assert_eq!(Request::parse(cmd, p), Err(code), "cmd {cmd:#x} {p:?}");
    }
}

#[test]
fn error_payload_round_trip() {
    let p = RemoteError::payload(ErrorCode::OutOfRange, 0x04, 0x0203);
    assert_eq!(p, [5, 4, 3, 2]);
    let e = RemoteError::parse(&p).unwrap();
    assert_eq!(
        (e.code, e.cmd, e.detail),
        (Some(ErrorCode::OutOfRange), 4, 0x0203)
    );
    assert_eq!(RemoteError::parse(&[0xEE, 1, 0, 0]).unwrap().code, None);
    assert!(RemoteError::parse(&[1, 2]).is_none());
}

fn arb_request() -> impl Strategy<Value = (u8, Vec<u8>)> {
    // (cmd, payload) of a well-formed request, built by encoding a random request.
    prop_oneof![
        Just((0x01u8, Vec::new())),
        any::<u8>().prop_map(|addr| (0x02, encode(&Request::ReadReg { addr }))),
        (any::<u8>(), any::<u32>())
            .prop_map(|(addr, value)| (0x03, encode(&Request::WriteReg { addr, value }))),
        (
            any::<bool>(),
            0u8..2,
            any::<u16>(),
            1u16..8,
            1usize..8,
            any::<Vec<u8>>()
        )
            .prop_map(|(b, bank, start, count, lanes, seed)| {
                let n = 2 * usize::from(count) * lanes;
                let bytes: Vec<u8> = (0..n)
                    .map(|i| seed.get(i).copied().unwrap_or(i as u8))
                    .collect();
                let r = Request::WriteRows {
                    buffer: if b { Buffer::B } else { Buffer::A },
                    bank,
                    start,
                    count,
                    words: Words::from_le_bytes(&bytes),
                };
                (0x04, encode(&r))
            }),
        (any::<u8>(), any::<u16>(), 1u16..100).prop_map(|(bank, start, count)| (
            0x05,
            encode(&Request::ReadRows { bank, start, count })
        )),
        Just((0x06u8, Vec::new())),
        any::<u32>().prop_map(|cycles| (0x07, encode(&Request::Idle { cycles }))),
        (any::<u32>(), proptest::collection::vec(any::<u8>(), 1..40)).prop_map(|(addr, seed)| {
            let bytes: Vec<u8> = seed.iter().chain(seed.iter()).copied().collect();
            let r = Request::WriteFm {
                addr,
                words: Words::from_le_bytes(&bytes),
            };
            (0x09, encode(&r))
        }),
    ]
}

proptest! {
    #[test]
    fn parse_then_encode_is_identity((cmd, payload) in arb_request()) {
        let req = Request::parse(cmd, &payload).unwrap();
        prop_assert_eq!(req.cmd(), cmd);
        prop_assert_eq!(encode(&req), payload);
    }

    #[test]
    fn batches_round_trip(entries in proptest::collection::vec(arb_request(), 0..6)) {
        let mut batch = Vec::new();
        let mut kept = Vec::new();
        for (cmd, p) in entries {
            if matches!(cmd, 0x03 | 0x04 | 0x07) {
                let mut buf = [0u8; MAX_PAYLOAD];
                let n = Request::parse(cmd, &p).unwrap().encode_batch_entry(&mut buf).unwrap();
                batch.extend_from_slice(&buf[..n]);
                kept.push((cmd, p));
            }
        }
        let req = Request::parse(0x08, &batch).unwrap();
        prop_assert_eq!(req, Request::Batch(&batch));
        let back: Vec<(u8, Vec<u8>)> = BatchIter::new(&batch).map(|e| {
            let e = e.unwrap();
            (e.cmd(), encode(&e))
        }).collect();
        prop_assert_eq!(back, kept);
    }

    #[test]
    fn parse_never_panics(cmd: u8, payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Request::parse(cmd, &payload);
        for e in BatchIter::new(&payload) {
            let _ = e;
        }
    }
}
