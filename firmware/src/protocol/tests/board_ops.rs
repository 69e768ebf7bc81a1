//! The board operations' payloads with literal bytes, both ways, and their malformed forms.

use super::*;
use crate::conv::ConvOp;
use systole_core::gather::ConvGeom;
use systole_core::Rounding;

#[test]
fn board_op_payloads_both_ways() {
    let words = [0x01, 0x00, 0xFE, 0xFF];
    let geom = ConvGeom {
        in_ch: 3,
        in_h: 0x0405,
        in_w: 6,
        out_ch: 7,
        kernel: 3,
        stride: 2,
        pad: 1,
    };
    let cases: [(Request<'_>, u8, &[u8]); 5] = [
        (
            Request::WriteTensor {
                id: 3,
                rows: 2,
                cols: 0x0102,
                offset: 0x0102_0304,
                words: Words::from_le_bytes(&words),
            },
            0x0B,
            &[3, 2, 0, 2, 1, 4, 3, 2, 1, 0x01, 0x00, 0xFE, 0xFF],
        ),
        (
            Request::ReadTensor {
                id: 5,
                offset: 0x10,
                count: 0x0203,
            },
            0x0C,
            &[5, 0x10, 0, 0, 0, 3, 2],
        ),
        (Request::FreeTensors(&[1, 0xFF]), 0x0D, &[1, 0xFF]),
        (
            Request::Matmul(MatmulRequest {
                a: 1,
                b: 2,
                out: 0,
                flags: 3,
                shift: 12,
                rounding: Rounding::Stochastic,
                seed: 0xDEAD_BEEF,
            }),
            0x0E,
            &[1, 2, 0, 3, 12, 2, 0xEF, 0xBE, 0xAD, 0xDE],
        ),
        (
            Request::Conv(ConvRequest {
                op: ConvOp::BackwardWeights,
                x: 1,
                dy: 2,
                w: 0xFF,
                out: 0,
                batch: 0x0102,
                geom,
                shift: 9,
                rounding: Rounding::NearestEven,
                seed: 0x0102_0304,
            }),
            0x0F,
            &[
                2, 1, 2, 0xFF, 0, 0x02, 0x01, 3, 0, 5, 4, 6, 0, 7, 0, 3, 2, 1, 9, 1, 4, 3, 2, 1,
            ],
        ),
    ];
    for (req, code, bytes) in cases {
        assert_eq!(req.cmd(), code);
        assert_eq!(encode(&req), bytes, "{req:?}");
        assert_eq!(Request::parse(code, bytes), Ok(req));
    }
    // Tensor writes and frees may be batched; the operations that answer with data may not.
    let mut out = [0u8; 16];
    let n = Request::FreeTensors(&[7])
        .encode_batch_entry(&mut out)
        .unwrap();
    assert!(BatchIter::new(&out[..n]).all(|e| e.is_ok()));
    let n = cases[3].0.encode_batch_entry(&mut out).unwrap();
    assert_eq!(
        BatchIter::new(&out[..n]).next(),
        Some(Err((ErrorCode::NotBatchable, 0)))
    );
}

#[test]
fn malformed_board_op_payloads_are_refused() {
    use ErrorCode::*;
    let cases: [(u8, &[u8], ErrorCode); 7] = [
        // WRITE_TENSOR: a short header; an odd word byte.
        (0x0B, &[1, 2, 0, 2, 0, 0, 0, 0], Malformed),
        (0x0B, &[1, 2, 0, 2, 0, 0, 0, 0, 0, 7], Malformed),
        (0x0C, &[1, 0, 0, 0, 0, 1], Malformed),
        // MATMUL: an unknown flag; rounding code 3; one byte short.
        (0x0E, &[1, 2, 0, 4, 0, 0, 0, 0, 0, 0], Malformed),
        (0x0E, &[1, 2, 0, 0, 0, 3, 0, 0, 0, 0], Malformed),
        (0x0E, &[1, 2, 0, 0, 0, 0, 0, 0, 0], Malformed),
        // CONV: op 3.
        (
            0x0F,
            &[
                3, 1, 2, 0xFF, 0, 1, 0, 1, 0, 4, 0, 4, 0, 1, 0, 3, 1, 0, 0, 0, 0, 0, 0, 0,
            ],
            Malformed,
        ),
    ];
    for (cmd, p, code) in cases {
        assert_eq!(Request::parse(cmd, p), Err(code), "cmd {cmd:#x} {p:?}");
    }
}
