//! The state's wire form byte by byte, its refusals, the data set's records, and steps on
//! resident data equal to the same steps run the host's way.

use super::*;
use crate::graph::builtin::mlp;
use crate::graph::Shape;
use crate::step::{train_step, Batch};
use crate::tests::Exact;
use alloc::vec;

/// A 2-2 dense model: W 2x2, b 1x2.
fn tiny() -> TrainState {
    let mut fracs = BTreeMap::new();
    fracs.insert(String::from("ab"), 12);
    TrainState {
        graph: mlp(Shape::flat(2), &[], 2).unwrap(),
        rounding: Rounding::NearestEven,
        widths: Widths::FULL,
        run_seed: 0x0102,
        step: 3,
        momentum: 0.5,
        params: vec![
            QMatrix::from_vec(2, 2, 14, vec![1, -2, 3, -4]).unwrap(),
            QMatrix::from_vec(1, 2, 15, vec![0x0304, 5]).unwrap(),
        ],
        velocity: vec![QMatrix::zeros(2, 2, 15), QMatrix::zeros(1, 2, 15)],
        fracs,
    }
}

#[test]
fn wire_form_byte_by_byte() {
    let b = tiny().encode();
    // The network: input 2x1x1, 2 classes, one node: Dense (tag 0) of 2 outputs with a bias,
    // reading the input (0).
    let mut want = vec![b'S', b'T', b'S', b'2', 2, 0, 1, 0, 1, 0, 2, 0, 1, 0];
    want.extend_from_slice(&[6, b'd', b'e', b'n', b's', b'e', b'1', 0, 2, 0, 1, 0, 0, 0]);
    want.extend_from_slice(&[1, 16, 16]);
    want.extend_from_slice(&0x0102u64.to_le_bytes());
    want.extend_from_slice(&3u64.to_le_bytes());
    want.extend_from_slice(&0.5f32.to_bits().to_le_bytes());
    want.extend_from_slice(&[1, 0, 2, b'a', b'b', 12]);
    want.extend_from_slice(&[
        2, 0, 0, 0, 2, 0, 0, 0, 14, 1, 0, 0xFE, 0xFF, 3, 0, 0xFC, 0xFF,
    ]);
    want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 15, 0x04, 0x03, 5, 0]);
    want.extend_from_slice(&[2, 0, 0, 0, 2, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 15, 0, 0, 0, 0]);
    assert_eq!(b, want);
    assert_eq!(TrainState::decode(&b), Ok(tiny()));
}

#[test]
fn params_form_and_formats_byte_by_byte() {
    let full = tiny().encode();
    let p = tiny().encode_params();
    assert_eq!(full.len(), tiny().encoded_len(true));
    assert_eq!(p.len(), tiny().encoded_len(false));
    let into = tiny().encode_to(true, Vec::with_capacity(full.len()));
    assert_eq!((into.capacity(), &into), (full.len(), &full));
    // The same bytes under its own magic, less the two momentum tensors (17 + 13 bytes).
    assert_eq!(&p[..4], b"STP2");
    assert_eq!(p[4..], full[4..full.len() - 30]);
    let back = TrainState::decode_params(&p).unwrap();
    assert_eq!(
        back,
        TrainState {
            velocity: Vec::new(),
            ..tiny()
        }
    );
    // Neither form is taken for the other.
    assert_eq!(TrainState::decode(&p), Err(StateError::Magic));
    assert_eq!(TrainState::decode_params(&full), Err(StateError::Magic));
    assert_eq!(
        TrainState::decode_params(&p[..p.len() - 1]),
        Err(StateError::Truncated)
    );
    let f = encode_formats(&tiny().fracs);
    assert_eq!(f, vec![1, 0, 2, b'a', b'b', 12]);
    assert_eq!(decode_formats(&f, 16), Ok(tiny().fracs));
    assert_eq!(decode_formats(&[0, 0, 9], 16), Err(StateError::Trailing));
    assert!(matches!(
        decode_formats(&[1, 0, 1, b'a', 16], 16),
        Err(StateError::Field { .. })
    ));
}

#[test]
fn every_cut_and_bad_field_is_refused() {
    let b = tiny().encode();
    for n in 0..b.len() {
        assert_eq!(
            TrainState::decode(&b[..n]),
            Err(StateError::Truncated),
            "{n}"
        );
    }
    let mut long = b.clone();
    long.push(0);
    assert_eq!(TrainState::decode(&long), Err(StateError::Trailing));
    let mut magic = b.clone();
    magic[0] = b'X';
    assert_eq!(TrainState::decode(&magic), Err(StateError::Magic));
    let mut rounding = b.clone();
    rounding[28] = 7;
    assert!(matches!(
        TrainState::decode(&rounding),
        Err(StateError::Field { .. })
    ));
    // W's rows say 3: not the layer's 2.
    let mut shape = b.clone();
    let at = b.len() - 13 - 17 - 13 - 17;
    shape[at] = 3;
    assert_eq!(
        TrainState::decode(&shape),
        Err(StateError::Shape { index: 0 })
    );
    // A frac of 16 in a 16-bit word.
    let mut frac = b.clone();
    frac[at + 8] = 16;
    assert_eq!(
        TrainState::decode(&frac),
        Err(StateError::Width { index: 0 })
    );
}

#[test]
fn records_round_trip_and_values_must_be_pixels() {
    let images = [0.0, 1.0, 0.5, 15.0 / 16.0];
    let d = DataSet::from_values(&images, &[3, 4], 2, 16).unwrap();
    // Largest pixel 16: 5 bits a pixel, an image of 2 in 2 bytes (10 bits, 6 unused).
    assert_eq!(d.bits, 5);
    assert_eq!(d.pixels, vec![0, 0b10, 0xE8, 1]);
    assert_eq!(d.encode_records(), vec![0, 2, 3, 0xE8, 1, 4]);
    assert_eq!(
        DataSet::from_records(2, 16, 5, &d.encode_records()),
        Ok(d.clone())
    );
    assert_eq!(d.images(&[1, 0]), vec![0.5, 15.0 / 16.0, 0.0, 1.0]);
    assert_eq!(d.memory_bytes(), 6);
    // At 8 bits a record is a byte a pixel, the first protocol's form.
    let bytes = d.repacked(8).unwrap();
    assert_eq!(bytes.encode_records(), vec![0, 16, 3, 8, 15, 4]);
    assert_eq!(bytes.images(&[1, 0]), d.images(&[1, 0]));
    assert_eq!(d.repacked(4), None, "16 does not fit 4 bits");
    assert_eq!(
        DataSet::from_values(&[0.0, 0.3], &[1], 2, 16),
        Err(DataError::NotPixels {
            index: 1,
            divisor: 16
        })
    );
    assert!(DataSet::from_records(2, 16, 8, &[1, 2, 3, 4]).is_err());
    assert!(DataSet::from_records(2, 16, 9, &[1, 2, 3]).is_err());
}

#[test]
fn pixels_take_the_bits_their_largest_value_needs() {
    assert_eq!(
        [0, 1, 2, 3, 15, 16, 127, 128, 255].map(bits_for),
        [1, 1, 2, 2, 4, 5, 7, 8, 8]
    );
    // Every width, fields that straddle bytes, images that end mid-byte: unpacked as packed.
    for bits in 1..=8u8 {
        let features = 7;
        let max = ((1u16 << bits) - 1) as u8;
        let px: Vec<u8> = (0..3 * features)
            .map(|i| ((i * 37 + 11) % (usize::from(max) + 1)) as u8)
            .collect();
        let d = DataSet::from_pixels(features, 255, bits, &px, &[0, 1, 2]).unwrap();
        assert_eq!(d.image_bytes(), (7 * usize::from(bits)).div_ceil(8));
        assert_eq!(d.pixels.len(), 3 * d.image_bytes());
        for i in 0..3 {
            for j in 0..features {
                assert_eq!(d.pixel(i, j), px[i * features + j], "{bits} bits, {i}, {j}");
            }
        }
        let sel = d.select(&[2, 0]);
        assert_eq!(sel.pixel(0, 6), d.pixel(2, 6));
        assert_eq!(sel.labels, vec![2, 0]);
        if bits < 8 {
            let over = vec![max + 1; features];
            assert_eq!(DataSet::from_pixels(features, 255, bits, &over, &[0]), None);
        }
    }
    // Digits' pixels (0..=16) in 5 bits: a 64-pixel image in 40 bytes, not 64.
    let px: Vec<u8> = (0..64).map(|i| (i % 17) as u8).collect();
    let d = DataSet::from_pixels(64, 16, 5, &px, &[9]).unwrap();
    assert_eq!(d.record_bytes(), 41);
}

/// A 4-3-2 MLP and 10 images of 4 pixels.
fn mlp_and_data() -> (TrainState, DataSet) {
    let w1: Vec<i16> = (0..12).map(|i| (i * 2731 % 4001) as i16 - 2000).collect();
    let w2: Vec<i16> = (0..6).map(|i| (i * 1777 % 3001) as i16 - 1500).collect();
    let state = TrainState {
        graph: mlp(Shape::flat(4), &[3], 2).unwrap(),
        rounding: Rounding::NearestEven,
        widths: Widths::FULL,
        run_seed: 9,
        step: 0,
        momentum: 0.9,
        params: vec![
            QMatrix::from_vec(4, 3, 14, w1).unwrap(),
            QMatrix::zeros(1, 3, 15),
            QMatrix::from_vec(3, 2, 14, w2).unwrap(),
            QMatrix::zeros(1, 2, 15),
        ],
        velocity: vec![
            QMatrix::zeros(4, 3, 15),
            QMatrix::zeros(1, 3, 15),
            QMatrix::zeros(3, 2, 15),
            QMatrix::zeros(1, 2, 15),
        ],
        fracs: BTreeMap::new(),
    };
    let pixels: Vec<u8> = (0..40).map(|i| (i * 7 % 17) as u8).collect();
    let labels: Vec<u8> = (0..10).map(|i| (i % 2) as u8).collect();
    let data = DataSet {
        features: 4,
        divisor: 16,
        bits: 8,
        pixels,
        labels,
    };
    (state, data)
}

#[test]
fn resident_steps_are_the_hosts_steps() {
    let (mut board, data) = mlp_and_data();
    let (host0, _) = mlp_and_data();
    data.check_model(&board).unwrap();
    let order = crate::rng::epoch_order(board.run_seed, 0, data.len());
    let order16 = super::short_order(board.run_seed, 0, data.len()).unwrap();
    // The board: batches 1..4 of the epoch at batch 3 (the last one of 1 image).
    let mut a = board.arith(Exact::default());
    let mut results = Vec::new();
    let req = RunSteps {
        epochs_done: 0,
        first_batch: 0,
        steps: 4,
        batch: 3,
        lr: 0.25,
    };
    run_steps(&mut a, &mut board, &data, &order16, &req, &mut |r| {
        results.push(r)
    })
    .unwrap();
    // The host's way: its own arithmetic and batches.
    let mut h = host0.arith(Exact::default());
    let (mut params, mut velocity) = (host0.params.clone(), host0.velocity.clone());
    for (s, idx) in order.chunks(3).enumerate() {
        let images = data.images(idx);
        let labels: Vec<u8> = idx.iter().map(|&i| data.labels[i]).collect();
        let batch = Batch {
            graph: &host0.graph,
            images: &images,
            labels: &labels,
        };
        let (loss, correct) = train_step(
            &mut h,
            &batch,
            &mut params,
            &mut velocity,
            (s as u64, 0.25, 0.9),
        )
        .unwrap();
        assert_eq!(results[s], StepResult { loss, correct }, "step {s}");
    }
    assert_eq!(board.params, params);
    assert_eq!(board.velocity, velocity);
    assert_eq!(board.fracs, h.fracs);
    assert_eq!(board.step, 4);
    assert!(!board.fracs.is_empty());
    // Steps past the epoch's end are refused before anything runs.
    let past = RunSteps {
        first_batch: 3,
        steps: 2,
        ..req
    };
    let before = board.clone();
    assert!(run_steps(&mut a, &mut board, &data, &order16, &past, &mut |_| ()).is_err());
    assert_eq!(board, before);
}
