//! A board whose array is built at `W`-bit words (its `CONFIG` says so): rows and feature-map
//! words inside the `W`-bit range reach the bus as they came (sign-extended 16-bit words); a
//! word outside it is refused (`WordRange`, detail: the batch entry) before anything reaches
//! the bus, as the array's ports would cut it.

use super::*;
use std::vec;

/// A frame of `cmd` with `payload` and sequence number `seq`.
fn frame(seq: u8, cmd: u8, payload: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; FRAME_CAPACITY];
    buf[HEADER..HEADER + payload.len()].copy_from_slice(payload);
    let n = frame::finish(&mut buf, seq, cmd, payload.len()).unwrap();
    buf[..n].to_vec()
}

fn words(w: &[i16]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `WRITE_ROWS` of one A row (bank 0, row 2) holding `row`.
fn write_row(seq: u8, row: &[i16]) -> Vec<u8> {
    let head = [0u8, 0, 2, 0, 1, 0];
    frame(
        seq,
        crate::protocol::cmd::WRITE_ROWS,
        &cat(&[&head, &words(row)]),
    )
}

/// `WRITE_FM` of `row` at word address 0.
fn write_fm(seq: u8, row: &[i16]) -> Vec<u8> {
    frame(
        seq,
        crate::protocol::cmd::WRITE_FM,
        &cat(&[&[0u8; 4], &words(row)]),
    )
}

fn refused(seq: u8, cmd: u8) -> Vec<u8> {
    frame(
        seq,
        ERROR,
        &RemoteError::payload(ErrorCode::WordRange, cmd, 0),
    )
}

/// A request, the board's answer and what it wrote to the bus (kind and words), if anything.
type Case = (Vec<u8>, Vec<u8>, Option<(char, Vec<i16>)>);

#[test]
fn words_outside_w_bits_are_refused_before_the_bus() {
    use crate::protocol::cmd::{WRITE_FM, WRITE_ROWS};
    // The server takes the array as its CONFIG describes it (the conv unit's words too).
    let cfg = ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::new(2, 4, 16).unwrap().with_word_bits(8)
    };
    let ok = |seq: u8, cmd: u8| frame(seq, cmd | RESPONSE, &[]);
    let cases: [Case; 6] = [
        (
            write_row(1, &[127, -128]),
            ok(1, WRITE_ROWS),
            Some(('A', vec![127, -128])),
        ),
        (write_row(2, &[128, 0]), refused(2, WRITE_ROWS), None),
        (write_row(3, &[0, -129]), refused(3, WRITE_ROWS), None),
        (
            write_fm(4, &[-1, 100]),
            ok(4, WRITE_FM),
            Some(('F', vec![-1, 100])),
        ),
        (write_fm(5, &[i16::MIN, 0]), refused(5, WRITE_FM), None),
        (write_fm(6, &[0, 255]), refused(6, WRITE_FM), None),
    ];
    for (req, answer, written) in cases {
        let (out, bus, _) = run_with(cfg, &req, 64);
        assert_eq!(out, answer, "request {req:02X?}");
        let log: Vec<(char, Vec<i16>)> = bus.log.into_iter().map(|e| (e.0, e.3)).collect();
        assert_eq!(log, Vec::from_iter(written), "request {req:02X?}");
    }
    // At 16 bits every word is in range.
    let wide = ArrayConfig::new(2, 8, 16).unwrap();
    let (out, _, _) = run_with(wide, &write_row(7, &[i16::MIN, i16::MAX]), 64);
    assert_eq!(out, ok(7, WRITE_ROWS));
}
