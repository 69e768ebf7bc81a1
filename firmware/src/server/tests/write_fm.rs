//! `WRITE_FM`, the feature-map write: literal requests and answers, refusals, batches and a
//! write longer than one frame.

use super::*;

/// `WRITE_FM` of one 2-word row (the 2x2 board's row width) ending exactly at `fm_depth`
/// (4096): accepted, words written in order at addresses 4094..4096.
#[test]
fn write_fm_literal() {
    let req = [
        0xA5, 0x5A, 0x08, 0x00, 0x0E, 0x09, 0xFE, 0x0F, 0x00, 0x00, 0x01, 0x00, 0xFE, 0xFF, 0x86,
        0x65,
    ];
    let (out, bus, _) = run(&req, 5);
    assert_eq!(out, [0xA5, 0x5A, 0x00, 0x00, 0x0E, 0x89, 0x6E, 0xA7]);
    assert_eq!(bus.log, [('F', 4094, 0, Vec::from([1, -2]))]);
}

/// Feature-map writes that are not whole rows (an odd address, an odd word count on the
/// 2-word rows of the 2x2 board) are refused before anything reaches the bus.
#[test]
fn write_fm_unaligned_literal() {
    let cases: [(&[u8], &[u8]); 2] = [
        (
            &[
                0xA5, 0x5A, 0x08, 0x00, 0x16, 0x09, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00,
                0xA1, 0xED,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x16, 0xFF, 0x05, 0x09, 0x00, 0x00, 0x4D, 0xD1,
            ],
        ),
        (
            &[
                0xA5, 0x5A, 0x06, 0x00, 0x17, 0x09, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x97, 0xFB,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x17, 0xFF, 0x05, 0x09, 0x00, 0x00, 0xED, 0x94,
            ],
        ),
    ];
    for (req, resp) in cases {
        let (out, bus, _) = run(req, 64);
        assert_eq!(out, resp, "request {req:02X?}");
        assert!(bus.log.is_empty());
    }
}

/// Out-of-range feature-map writes are refused before anything reaches the bus: past the end,
/// an address near `u32::MAX` (no wrap-around), and a bad entry inside a batch.
#[test]
fn write_fm_out_of_range_literal() {
    let cases: [(&[u8], &[u8]); 3] = [
        // Addresses 4095..4097 of a 4096-word buffer.
        (
            &[
                0xA5, 0x5A, 0x08, 0x00, 0x0F, 0x09, 0xFF, 0x0F, 0x00, 0x00, 0x05, 0x00, 0x06, 0x00,
                0x79, 0x03,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x0F, 0xFF, 0x05, 0x09, 0x00, 0x00, 0x2B, 0x83,
            ],
        ),
        // One word at 0xFFFF_FFFF.
        (
            &[
                0xA5, 0x5A, 0x06, 0x00, 0x10, 0x09, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00, 0xB9, 0x97,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x10, 0xFF, 0x05, 0x09, 0x00, 0x00, 0xAC, 0x5C,
            ],
        ),
        // BATCH of WRITE_REG (0x10) then WRITE_FM at 4096: refused at entry 1, the register
        // write never runs.
        (
            &[
                0xA5, 0x5A, 0x11, 0x00, 0x12, 0x08, 0x03, 0x05, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00,
                0x09, 0x06, 0x00, 0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0xF7, 0xEE,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x12, 0xFF, 0x05, 0x08, 0x01, 0x00, 0xED, 0xD3,
            ],
        ),
    ];
    for (req, resp) in cases {
        let (out, bus, stats) = run(&cat(&[req, PING]), 64);
        assert_eq!(out, cat(&[resp, PING_OK]), "request {req:02X?}");
        assert!(bus.log.is_empty());
        assert_eq!((stats.frames_ok, stats.frames_rejected), (1, 1));
    }
}

/// Without a conv unit (`fm_depth = 0`) even one word at address 0 is out of range.
#[test]
fn write_fm_without_conv_unit_literal() {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..config()
    };
    assert!(!cfg.has_conv_unit());
    let req = [
        0xA5, 0x5A, 0x06, 0x00, 0x11, 0x09, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0xBA, 0x5A,
    ];
    let (out, bus, _) = run_with(cfg, &req, 64);
    let err = [
        0xA5, 0x5A, 0x04, 0x00, 0x11, 0xFF, 0x05, 0x09, 0x00, 0x00, 0x0C, 0x19,
    ];
    assert_eq!(out, err);
    assert!(bus.log.is_empty());
}

/// An odd payload length and an address without words are malformed.
#[test]
fn write_fm_malformed_literal() {
    let cases: [(&[u8], &[u8]); 2] = [
        (
            &[
                0xA5, 0x5A, 0x05, 0x00, 0x13, 0x09, 0x00, 0x00, 0x00, 0x00, 0x01, 0x84, 0xD8,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x13, 0xFF, 0x04, 0x09, 0x00, 0x00, 0xF8, 0xE4,
            ],
        ),
        (
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x14, 0x09, 0x00, 0x00, 0x00, 0x00, 0x0A, 0x8A,
            ],
            &[
                0xA5, 0x5A, 0x04, 0x00, 0x14, 0xFF, 0x04, 0x09, 0x00, 0x00, 0xB9, 0x2C,
            ],
        ),
    ];
    for (req, resp) in cases {
        let (out, bus, _) = run(req, 64);
        assert_eq!(out, resp, "request {req:02X?}");
        assert!(bus.log.is_empty());
    }
}

/// A batch mixing a register write (GA_CFG, 0x10), two feature-map writes and an idle runs
/// them in order.
#[test]
fn write_fm_in_batch_literal() {
    let req = [
        0xA5, 0x5A, 0x25, 0x00, 0x15, 0x08, 0x03, 0x05, 0x00, 0x10, 0x01, 0x02, 0x03, 0x00, 0x09,
        0x08, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0A, 0x00, 0xF6, 0xFF, 0x07, 0x04, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x09, 0x08, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x80, 0x07, 0x00, 0x15, 0x64,
    ];
    let (out, bus, _) = run(&req, 7);
    assert_eq!(out, [0xA5, 0x5A, 0x00, 0x00, 0x15, 0x88, 0xC6, 0x68]);
    assert_eq!(
        bus.log,
        [
            ('R', 0x10, 0, Vec::from([0x0201])),
            ('F', 4, 0, Vec::from([10, -10])),
            ('F', 6, 0, Vec::from([-32768, 7])),
        ]
    );
    assert_eq!(bus.idle, 2);
}

/// A write longer than the board's conversion buffer reaches the bus as consecutive pieces
/// that together hold every word at its address, in order.
#[test]
fn long_write_fm_arrives_whole() {
    let words: Vec<i16> = (0..300).map(|i| (i * 37 - 5000) as i16).collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let req = Request::WriteFm {
        addr: 1000,
        words: crate::protocol::Words::from_le_bytes(&bytes),
    };
    let mut payload = [0u8; MAX_PAYLOAD];
    let n = req.encode_payload(&mut payload).unwrap();
    let mut f = [0u8; FRAME_CAPACITY];
    let len = frame::encode(0x30, req.cmd(), &payload[..n], &mut f).unwrap();
    let (out, bus, _) = run(&f[..len], 64);
    assert_eq!(out[4..6], [0x30, 0x89]);
    let mut next = 1000;
    let mut got = Vec::new();
    for (kind, addr, _, w) in &bus.log {
        assert_eq!((*kind, *addr), ('F', next));
        next += w.len() as u32;
        got.extend_from_slice(w);
    }
    assert!(bus.log.len() > 1, "expected the write in several pieces");
    assert_eq!(got, words);
}
