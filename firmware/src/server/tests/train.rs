//! The training requests on the behavioural array: `PING` announces them, refusals leave
//! everything as it was, and steps run in two requests equal the same steps run at once by
//! the step library over the board's products (the order, the rate, the step counter and the
//! remembered formats survive between requests).

use super::*;
use crate::driver::mock::MockArray;
use crate::products::BoardProducts;
use crate::protocol::train::{RunCounters, TrainRequest, PING_REPLY_WITH_TRAIN};
use std::boxed::Box;
use std::vec;
use systole_core::tensor::QMatrix;
use systole_core::Rounding;
use systole_step::graph::{builtin, Shape};
use systole_step::resident::{run_steps, DataSet, RunSteps, TrainState};
use systole_step::Widths;

/// A 4-3-2 MLP, stochastic rounding.
fn state() -> TrainState {
    let w1: Vec<i16> = (0..12).map(|i| (i * 2731 % 4001) as i16 - 2000).collect();
    let w2: Vec<i16> = (0..6).map(|i| (i * 1777 % 3001) as i16 - 1500).collect();
    let z = |r, c| QMatrix::zeros(r, c, 15);
    TrainState {
        graph: builtin::mlp(Shape::flat(4), &[3], 2).unwrap(),
        rounding: Rounding::Stochastic,
        widths: Widths::FULL,
        run_seed: 5,
        step: 7,
        momentum: 0.9,
        params: vec![
            QMatrix::from_vec(4, 3, 14, w1).unwrap(),
            z(1, 3),
            QMatrix::from_vec(3, 2, 14, w2).unwrap(),
            z(1, 2),
        ],
        velocity: vec![z(4, 3), z(1, 3), z(3, 2), z(1, 2)],
        fracs: Default::default(),
    }
}

fn data() -> DataSet {
    DataSet {
        features: 4,
        divisor: 16,
        bits: 8,
        pixels: (0..44).map(|i| (i * 7 % 17) as u8).collect(),
        labels: (0..11).map(|i| (i % 2) as u8).collect(),
    }
}

/// Sends `reqs` to a training board on the behavioural array; returns each answer.
fn exchange(cfg: ArrayConfig, reqs: &[Request<'_>]) -> Vec<(u8, Vec<u8>)> {
    exchange_with(cfg, reqs, None)
}

/// As [`exchange`], the board measuring its heap with `heap_peak` when given.
fn exchange_with(
    cfg: ArrayConfig,
    reqs: &[Request<'_>],
    heap_peak: Option<fn() -> (usize, usize)>,
) -> Vec<(u8, Vec<u8>)> {
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
    let store = Box::leak(vec![0i16; 64].into_boxed_slice());
    let board = FrameServer::new(pipe, MockArray::new(cfg), cfg)
        .with_store(store)
        .with_training(0x0003_0000, None);
    let mut board = match heap_peak {
        Some(probe) => board.with_heap_peak(probe),
        None => board,
    };
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

fn run(first_batch: u32, steps: u16) -> Request<'static> {
    Request::Train(TrainRequest::RunSteps {
        epochs_done: 1,
        first_batch,
        steps,
        batch: 3,
        lr_bits: 0.125f32.to_bits(),
        flags: 0,
    })
}

fn read(offset: u32) -> Request<'static> {
    Request::Train(TrainRequest::StateRead {
        offset,
        count: 100,
        part: 0,
    })
}

fn refused(a: &(u8, Vec<u8>), code: ErrorCode, detail: u16) {
    assert_eq!(a.0, ERROR, "{a:?}");
    let e = RemoteError::parse(&a.1).unwrap();
    assert_eq!((e.code, e.detail), (Some(code), detail), "{a:?}");
}

#[test]
fn steps_over_two_requests_equal_the_step_library() {
    let cfg = ArrayConfig::new(2, 8, 16).unwrap();
    let bytes = state().encode();
    let records = data().encode_records();
    let (s_total, d_total) = (bytes.len() as u32, records.len() as u32);
    let sw = |from: usize, to: usize| {
        Request::Train(TrainRequest::StateWrite {
            total: s_total,
            offset: from as u32,
            bytes: &bytes[from..to],
        })
    };
    let dw = |from: usize, to: usize| {
        Request::Train(TrainRequest::DataWrite {
            test: false,
            features: 4,
            divisor: 16,
            bits: None,
            total: d_total,
            offset: from as u32,
            bytes: &records[from..to],
        })
    };
    let half = bytes.len() / 2;
    let reqs = [
        Request::Ping,
        run(0, 1),
        sw(0, half),
        sw(half, bytes.len()),
        run(0, 1),
        dw(0, 7),
        // Out of order: refused, the upload goes on.
        dw(8, 12),
        dw(7, records.len()),
        run(0, 2),
        run(2, 2),
        // Batches 3..5 of an epoch of 4: refused before anything runs.
        run(3, 2),
        read(0),
        read(100),
        read(200),
        read(300),
    ];
    let a = exchange(cfg, &reqs);
    assert_eq!(a.len(), reqs.len());
    assert_eq!(a[0].1.len(), PING_REPLY_WITH_TRAIN);
    // Board operations, training, packed data sets, state parts, evaluation, progress,
    // saturation counts; no HEAP_USE without a heap probe.
    assert_eq!(a[0].1[11], 0xF7);
    assert_eq!(&a[0].1[16..], &0x0003_0000u32.to_le_bytes());
    refused(&a[1], ErrorCode::NotLoaded, 0);
    assert_eq!(a[3], (0x90, vec![]));
    refused(&a[4], ErrorCode::NotLoaded, 1);
    refused(&a[6], ErrorCode::BadData, 0);
    assert_eq!(a[7], (0x92, vec![]));
    refused(&a[10], ErrorCode::OutOfRange, 0);
    let mut losses = Vec::new();
    for r in &a[8..10] {
        assert_eq!(r.0, 0x93);
        let (c, steps) = RunCounters::parse(&r.1).unwrap();
        assert_eq!(c.steps, 2);
        assert!(c.mac_cycles > 0 && c.array_cycles >= c.mac_cycles, "{c:?}");
        losses.extend(steps);
    }
    // Read back in chunks of 100: the state has grown by the remembered formats.
    let mut back = Vec::new();
    for r in &a[11..15] {
        assert_eq!(r.0, 0x91);
        assert_eq!(r.1[..4], a[11].1[..4]);
        back.extend_from_slice(&r.1[4..]);
    }
    assert_eq!(
        back.len() as u32,
        u32::from_le_bytes(a[11].1[..4].try_into().unwrap())
    );
    assert!(back.len() > 300 && back.len() > bytes.len());
    let board = TrainState::decode(&back).unwrap();
    // The same four steps at once, by the library, on another behavioural array.
    let mut want = state();
    let d = data();
    let order = systole_step::resident::short_order(want.run_seed, 1, d.len()).unwrap();
    let mut mock = MockArray::new(cfg);
    let mut arith = want.arith(BoardProducts::new(&mut mock, cfg));
    let mut results = Vec::new();
    let req = RunSteps {
        epochs_done: 1,
        first_batch: 0,
        steps: 4,
        batch: 3,
        lr: 0.125,
    };
    run_steps(&mut arith, &mut want, &d, &order, &req, &mut |r| {
        results.push((r.loss, r.correct as u16))
    })
    .unwrap();
    assert_eq!(losses, results);
    assert_eq!(board, want);
    assert_eq!(board.step, 11);
    assert_ne!(board.params, state().params);
}

#[test]
fn a_bad_state_is_refused_and_nothing_installed() {
    let cfg = ArrayConfig::new(2, 8, 16).unwrap();
    let mut bytes = state().encode();
    bytes[0] = b'X';
    let reqs = [
        Request::Train(TrainRequest::StateWrite {
            total: bytes.len() as u32,
            offset: 0,
            bytes: &bytes,
        }),
        read(0),
    ];
    let a = exchange(cfg, &reqs);
    refused(&a[0], ErrorCode::BadTrainState, 2);
    refused(&a[1], ErrorCode::NotLoaded, 0);
}

/// A data set packed at 5 bits (`DATA_WRITE_PACKED`) trains exactly as the same pixels sent a
/// byte each (`DATA_WRITE`), and the board keeps it packed; `HEAP_USE` answers the probe's
/// numbers on a board that measures its heap and is refused as unknown on one that does not.
#[test]
fn packed_pixels_train_as_bytes_and_the_heap_is_measured() {
    let cfg = ArrayConfig::new(2, 8, 16).unwrap();
    let bytes = state().encode();
    let d = data();
    let packed = d.repacked(5).unwrap();
    assert_eq!(packed.image_bytes(), 3);
    let sw = Request::Train(TrainRequest::StateWrite {
        total: bytes.len() as u32,
        offset: 0,
        bytes: &bytes,
    });
    let (r8, r5) = (d.encode_records(), packed.encode_records());
    fn dw(bits: Option<u8>, records: &[u8]) -> Request<'_> {
        Request::Train(TrainRequest::DataWrite {
            test: false,
            features: 4,
            divisor: 16,
            bits,
            total: records.len() as u32,
            offset: 0,
            bytes: records,
        })
    }
    let heap_use = Request::Train(TrainRequest::HeapUse);
    fn probe() -> (usize, usize) {
        (0x1234, 0x5678)
    }
    let with_bytes = exchange(cfg, &[sw, dw(None, &r8), run(0, 3), heap_use, read(0)]);
    let with_bits = exchange_with(
        cfg,
        &[
            Request::Ping,
            sw,
            dw(Some(5), &r5),
            run(0, 3),
            heap_use,
            read(0),
        ],
        Some(probe),
    );
    assert_eq!(with_bits[0].1[11], 0xFF, "HEAP_USE announced");
    assert_eq!(with_bits[2], (0x94, vec![]));
    assert_eq!(with_bits[3], with_bytes[2], "the steps' answers");
    assert_eq!(with_bits[5], with_bytes[4], "the state after them");
    refused(&with_bytes[3], ErrorCode::UnknownCommand, 0);
    let mut want = vec![0, 0, 3, 0, 0x34, 0x12, 0, 0, 0x78, 0x56, 0, 0];
    want[..4].copy_from_slice(&0x0003_0000u32.to_le_bytes());
    assert_eq!(with_bits[4], (0x95, want));
    // Records of the wrong length for 5 bits: refused.
    let short = exchange(cfg, &[dw(Some(5), &r5[..r5.len() - 1])]);
    refused(&short[0], ErrorCode::BadData, 0);
}

/// `STATE_READ` of the parameters alone is the state's parameters-only form; `FORMATS_WRITE`
/// replaces the remembered formats and nothing else; a bad one is refused and changes
/// nothing.
#[test]
fn parameters_alone_and_formats_alone() {
    let cfg = ArrayConfig::new(2, 8, 16).unwrap();
    let st = state();
    let bytes = st.encode();
    let sw = Request::Train(TrainRequest::StateWrite {
        total: bytes.len() as u32,
        offset: 0,
        bytes: &bytes,
    });
    let part = |offset: u32, part: u8| {
        Request::Train(TrainRequest::StateRead {
            offset,
            count: 1000,
            part,
        })
    };
    let mut fracs = std::collections::BTreeMap::new();
    fracs.insert(std::string::String::from("layer 1 forward"), 9u32);
    let good = systole_step::resident::encode_formats(&fracs);
    let mut bad = good.clone();
    *bad.last_mut().unwrap() = 16;
    let fw = |b| Request::Train(TrainRequest::FormatsWrite { bytes: b });
    let (fw_good, fw_bad) = (fw(&good[..]), fw(&bad[..]));
    let a = exchange(
        cfg,
        &[
            fw_good,
            sw,
            part(0, 1),
            part(4, 0),
            fw_bad,
            fw_good,
            part(0, 0),
        ],
    );
    refused(&a[0], ErrorCode::NotLoaded, 0);
    assert_eq!(a[2].0, 0x91);
    assert_eq!(a[2].1[4..], st.encode_params()[..]);
    // Continuing a snapshot of the other part: refused.
    refused(&a[3], ErrorCode::BadData, 0);
    refused(&a[4], ErrorCode::BadTrainState, 3);
    assert_eq!(a[5], (0x96, vec![]));
    let back = TrainState::decode(&a[6].1[4..]).unwrap();
    assert_eq!(back, TrainState { fracs, ..state() });
}

/// A test split of `n` images of 4 pixels (0..=16), labels 0 and 1.
fn test_pixels(n: usize) -> (Vec<u8>, Vec<u8>) {
    let pixels = (0..4 * n).map(|i| (i * 5 % 17) as u8).collect();
    let labels = (0..n).map(|i| (i * 7 % 3 % 2) as u8).collect();
    (pixels, labels)
}

/// `EVALUATE` on a test split resident in its own slot (`DATA_WRITE_PACKED` with
/// `TEST_SPLIT`, packed at 5 bits) answers the loss and correct count the step library's
/// evaluation gives on the host's values (each pixel divided by 16 here, not by the data
/// set's code), cut in the same batches (40 images: 32 and 8), and leaves the state's
/// remembered formats as that evaluation leaves them; the training set's slot stays empty.
#[test]
fn the_board_evaluates_its_test_split_as_the_host_does() {
    use crate::protocol::train::{EvalAnswer, EVALUATE_REPLY};
    let cfg = ArrayConfig::new(2, 8, 16).unwrap();
    let bytes = state().encode();
    let (pixels, labels) = test_pixels(40);
    let test = DataSet::from_pixels(4, 16, 5, &pixels, &labels).unwrap();
    let records = test.encode_records();
    let tw = Request::Train(TrainRequest::DataWrite {
        test: true,
        features: 4,
        divisor: 16,
        bits: Some(5),
        total: records.len() as u32,
        offset: 0,
        bytes: &records,
    });
    let eval = Request::Train(TrainRequest::Evaluate { epochs: 3 });
    let reqs = [
        Request::Train(TrainRequest::StateWrite {
            total: bytes.len() as u32,
            offset: 0,
            bytes: &bytes,
        }),
        eval,
        tw,
        run(0, 1),
        eval,
        read(0),
        read(100),
        read(200),
        read(300),
    ];
    let a = exchange(cfg, &reqs);
    refused(&a[1], ErrorCode::NotLoaded, 2);
    assert_eq!(a[2], (0x94, vec![]));
    refused(&a[3], ErrorCode::NotLoaded, 1);
    assert_eq!((a[4].0, a[4].1.len()), (0x9A, EVALUATE_REPLY));
    let got = EvalAnswer::parse(&a[4].1).unwrap();
    let mut back = Vec::new();
    for r in &a[5..9] {
        back.extend_from_slice(&r.1[4..]);
    }
    let board = TrainState::decode(&back).unwrap();
    // The host's evaluation: the library on another behavioural array, the values divided
    // here.
    let mut want = state();
    let mut mock = MockArray::new(cfg);
    let mut arith = want.arith(BoardProducts::new(&mut mock, cfg));
    let mut cuts = Vec::new();
    let (loss, correct) = systole_step::step::evaluate(
        &mut arith,
        &want.graph,
        &want.params,
        (3, 40),
        &mut |range| {
            cuts.push(range.clone());
            let values = pixels[4 * range.start..4 * range.end]
                .iter()
                .map(|&p| f32::from(p) / 16.0)
                .collect();
            (values, labels[range].to_vec())
        },
    )
    .unwrap();
    want.fracs = core::mem::take(&mut arith.fracs);
    assert_eq!(cuts, [0..32, 32..40]);
    assert_eq!((got.images, got.correct), (40, correct as u32));
    assert_eq!(got.loss.to_bits(), loss.to_bits());
    assert!(got.mac_cycles > 0, "{got:?}");
    assert!(!want.fracs.is_empty());
    assert_eq!(board, want, "the state after the evaluation");
}
