//! `--dataset idx:DIR` and `npz:FILE`: a set given as files trains exactly as the same set built
//! in; channels-last and Fortran-ordered arrays become the same NCHW rows; every kind of bad
//! file is an error naming the file and what is wrong; damaged files never panic.

mod support;

use std::path::Path;
use support::{gzip, idx, npy, npz, ZipStyle};
use systole_core::Rounding;
use systole_train::data::{self, Dataset, DatasetSpec, Scaling};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig};

/// numpy's `np.savez`: stored members, ZIP64 local headers (`force_zip64`).
const SAVEZ: ZipStyle = ZipStyle {
    deflate: false,
    zip64_local: true,
    zip64_central: false,
    zip64_end: false,
};

/// `np.savez_compressed`.
const COMPRESSED: ZipStyle = ZipStyle {
    deflate: true,
    ..SAVEZ
};

/// The digits' byte pixels (0..=16) of one split.
fn bytes_of(images: &[f32]) -> Vec<u8> {
    images.iter().map(|&v| (v * 16.0).round() as u8).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The built-in digits written as an MNIST-style IDX folder (training images gzipped, the
/// rest plain) holding the bytes 0..=16.
fn write_idx_set(d: &Dataset, dir: &Path) {
    let (h, w) = (d.height as u32, d.width as u32);
    for (split, s, gz) in [("train", &d.train, true), ("t10k", &d.test, false)] {
        let n = s.len() as u32;
        let images = idx(8, &[n, h, w], &bytes_of(&s.images));
        let images = if gz { gzip(&images) } else { images };
        let suffix = if gz { ".gz" } else { "" };
        std::fs::write(
            dir.join(format!("{split}-images-idx3-ubyte{suffix}")),
            images,
        )
        .unwrap();
        std::fs::write(
            dir.join(format!("{split}-labels-idx1-ubyte")),
            idx(8, &[n], &s.labels),
        )
        .unwrap();
    }
}

/// The four arrays of `d` as .npy files: byte images N x H x W x 1 (channels last), or the f32
/// values N x H x W; labels int64.
fn npy_arrays(d: &Dataset, floats: bool) -> [Vec<u8>; 4] {
    let x = |images: &[f32], n: usize| {
        if floats {
            npy("<f4", &[n, d.height, d.width], false, &f32_bytes(images))
        } else {
            npy("|u1", &[n, d.height, d.width, 1], false, &bytes_of(images))
        }
    };
    let y = |labels: &[u8]| {
        let data: Vec<u8> = labels
            .iter()
            .flat_map(|&l| i64::from(l).to_le_bytes())
            .collect();
        npy("<i8", &[labels.len()], false, &data)
    };
    [
        x(&d.train.images, d.train.len()),
        y(&d.train.labels),
        x(&d.test.images, d.test.len()),
        y(&d.test.labels),
    ]
}

fn cfg(dataset: DatasetSpec, input_scale: f32) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Cnn { channels: vec![4] },
        dataset,
        input_scale,
        input_offset: 0.0,
        train_limit: Some(320),
        epochs: 2,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 3,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 8,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

/// (epoch, losses and accuracies as bits) of each epoch, and the final parameters.
fn trained(c: &TrainConfig) -> (Vec<[u32; 4]>, String) {
    let d = c.load_data().unwrap();
    let opts = RunOptions {
        device: "golden".into(),
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    let s = run(c, &d, &opts, &mut Quiet).unwrap();
    let h = s
        .history
        .iter()
        .map(|r| [r.train_loss, r.train_acc, r.test_loss, r.test_acc].map(f32::to_bits))
        .collect();
    (h, serde_json::to_string(&s.params).unwrap())
}

/// The digits as an IDX folder and as two npz files train bit for bit as the built-in set:
/// bytes 0..=16 under --input-scale 255/16 are exactly the built-in pixel / 16, and the
/// float32 values are taken as given.
#[test]
fn a_set_given_as_files_trains_as_the_built_in_set() {
    let d = data::load("digits").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    std::fs::create_dir(&dir).unwrap();
    write_idx_set(&d, &dir);
    let bytes_npz = tmp.path().join("bytes.npz");
    std::fs::write(&bytes_npz, npz(npy_arrays(&d, false), SAVEZ)).unwrap();
    let floats_npz = tmp.path().join("floats.npz");
    std::fs::write(&floats_npz, npz(npy_arrays(&d, true), COMPRESSED)).unwrap();

    let built_in = cfg(DatasetSpec::Digits, 1.0);
    let runs = [
        cfg(DatasetSpec::Idx(dir), 15.9375),
        cfg(DatasetSpec::Npz(bytes_npz), 15.9375),
        cfg(DatasetSpec::Npz(floats_npz), 1.0),
    ];
    for c in &runs {
        let f = c.load_data().unwrap();
        assert_eq!((f.channels, f.height, f.width, f.classes), (1, 8, 8, 10));
        assert_eq!(f.train.labels, d.train.labels, "{}", c.dataset);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&f.train.images),
            bits(&d.train.images),
            "{}",
            c.dataset
        );
        assert_eq!(bits(&f.test.images), bits(&d.test.images), "{}", c.dataset);
    }
    let want = trained(&built_in);
    assert_eq!(want.0.len(), 2);
    for c in &runs {
        assert!(trained(c) == want, "{} trains otherwise", c.dataset);
    }
    // The scaling is part of the run: another scale trains otherwise.
    assert!(trained(&cfg(runs[0].dataset.clone(), 8.0)) != want);
}

/// Byte images of 2 x 2 x 3 pixels in 2 channels, pixel (n, y, x, c) = 100c + 10y + x + n.
fn pixel(n: usize, y: usize, x: usize, c: usize) -> u8 {
    (100 * c + 10 * y + x + n) as u8
}

fn labels_npy() -> Vec<u8> {
    // Big-endian int16 labels of shape (N, 1), as Keras's CIFAR-10 gives them.
    npy(">i2", &[2, 1], false, &[0, 0, 0, 3])
}

#[test]
fn channels_last_and_fortran_order_become_nchw_rows() {
    let (n, h, w, c) = (2, 2, 3, 2);
    let mut c_order = Vec::new();
    for i in 0..n {
        for y in 0..h {
            for x in 0..w {
                for ch in 0..c {
                    c_order.push(pixel(i, y, x, ch));
                }
            }
        }
    }
    let mut f_order = Vec::new();
    for ch in 0..c {
        for x in 0..w {
            for y in 0..h {
                for i in 0..n {
                    f_order.push(pixel(i, y, x, ch));
                }
            }
        }
    }
    let mut want = Vec::new();
    for i in 0..n {
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    want.push(f32::from(pixel(i, y, x, ch)) / 255.0);
                }
            }
        }
    }
    for (data, fortran) in [(c_order, false), (f_order, true)] {
        let x = npy("|u1", &[n, h, w, c], fortran, &data);
        let bytes = npz([x.clone(), labels_npy(), x, labels_npy()], SAVEZ);
        let d = data::npz::parse(&bytes, "t.npz", "t", Scaling::default()).unwrap();
        assert_eq!(
            (d.channels, d.height, d.width),
            (2, 2, 3),
            "fortran {fortran}"
        );
        assert_eq!(d.train.images, want, "fortran {fortran}");
        assert_eq!((d.train.labels.clone(), d.classes), (vec![0, 3], 4));
        assert_eq!(d.byte_divisor, Some(255));
    }
}

/// The archive variants a zip writer may produce all read the same.
#[test]
fn zip64_records_and_fields_are_read() {
    let x = npy("|u1", &[2, 1, 1], false, &[7, 9]);
    let arrays = || [x.clone(), labels_npy(), x.clone(), labels_npy()];
    let want = data::npz::parse(&npz(arrays(), SAVEZ), "a", "t", Scaling::default()).unwrap();
    for style in [
        ZipStyle::default(),
        COMPRESSED,
        ZipStyle {
            zip64_central: true,
            ..SAVEZ
        },
        ZipStyle {
            zip64_end: true,
            zip64_central: true,
            ..COMPRESSED
        },
    ] {
        let d = data::npz::parse(&npz(arrays(), style), "a", "t", Scaling::default()).unwrap();
        assert_eq!(d, want);
    }
    let s = Scaling {
        scale: 2.0,
        offset: -1.0,
    };
    let d = data::npz::parse(&npz(arrays(), SAVEZ), "a", "t", s).unwrap();
    assert_eq!(
        d.train.images,
        [7.0 / 255.0 * 2.0 - 1.0, 9.0 / 255.0 * 2.0 - 1.0]
    );
    assert_eq!(
        d.byte_divisor, None,
        "scaled bytes are not the board's pixels"
    );
}

/// A slice of the installed Fashion-MNIST, written as IDX files and as an npz, reads back as
/// the built-in set's values bit for bit.
#[test]
fn a_fashion_mnist_slice_reads_as_the_built_in_set() {
    let dir = data::fashion::default_dir();
    if !dir.join("t10k-labels-idx1-ubyte.gz").exists() {
        eprintln!("skipping: Fashion-MNIST not installed at {}", dir.display());
        return;
    }
    let mut f = data::load("fashion-mnist").unwrap();
    f.train.truncate(1000, 784);
    f.test.truncate(300, 784);
    let byte = |v: &[f32]| {
        v.iter()
            .map(|&x| (x * 255.0).round() as u8)
            .collect::<Vec<_>>()
    };
    let tmp = tempfile::tempdir().unwrap();
    for (split, s) in [("train", &f.train), ("t10k", &f.test)] {
        let n = s.len() as u32;
        let images = gzip(&idx(8, &[n, 28, 28], &byte(&s.images)));
        std::fs::write(
            tmp.path().join(format!("{split}-images.idx3-ubyte.gz")),
            images,
        )
        .unwrap();
        let labels = idx(8, &[n], &s.labels);
        std::fs::write(
            tmp.path().join(format!("{split}-labels.idx1-ubyte")),
            labels,
        )
        .unwrap();
    }
    let x = |s: &data::Split| npy("|u1", &[s.len(), 28, 28], false, &byte(&s.images));
    let y = |s: &data::Split| npy("|u1", &[s.len()], false, &s.labels);
    let file = tmp.path().join("f.npz");
    let archive = npz(
        [x(&f.train), y(&f.train), x(&f.test), y(&f.test)],
        COMPRESSED,
    );
    std::fs::write(&file, archive).unwrap();
    for spec in [DatasetSpec::Idx(tmp.path().into()), DatasetSpec::Npz(file)] {
        let mut d = spec.load(Scaling::default()).unwrap();
        assert_eq!(d.name, spec.to_string());
        d.name = f.name.clone();
        assert!(d == f, "{spec} differs from the built-in slice");
    }
}

/// A small valid set: 3 + 2 images of 2 x 2 bytes, labels 0..=2.
fn small_arrays() -> [Vec<u8>; 4] {
    [
        npy(
            "|u1",
            &[3, 2, 2],
            false,
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        ),
        npy("|u1", &[3], false, &[0, 1, 2]),
        npy("|u1", &[2, 2, 2], false, &[9, 8, 7, 6, 5, 4, 3, 2]),
        npy("|u1", &[2], false, &[2, 0]),
    ]
}

/// The same set as IDX files (training images, labels, test images, labels).
fn small_idx() -> [Vec<u8>; 4] {
    [
        idx(8, &[3, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
        idx(8, &[3], &[0, 1, 2]),
        idx(8, &[2, 2, 2], &[9, 8, 7, 6, 5, 4, 3, 2]),
        idx(8, &[2], &[2, 0]),
    ]
}

const IDX_NAMES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// Loads `files` written as an IDX folder (a `None` is left out): the error's text.
fn idx_error(files: [Option<Vec<u8>>; 4]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    for (name, f) in IDX_NAMES.iter().zip(files) {
        if let Some(bytes) = f {
            std::fs::write(tmp.path().join(name), bytes).unwrap();
        }
    }
    let spec = DatasetSpec::Idx(tmp.path().into());
    let e = spec.load(Scaling::default()).unwrap_err().to_string();
    e.replace(&tmp.path().display().to_string(), "DIR")
}

fn npz_error(bytes: Vec<u8>) -> String {
    data::npz::parse(&bytes, "s.npz", "s", Scaling::default())
        .unwrap_err()
        .to_string()
}

fn with<T, const N: usize>(mut a: [T; N], k: usize, v: T) -> [T; N] {
    a[k] = v;
    a
}

#[test]
fn bad_idx_sets_are_errors_naming_the_file() {
    let ok = small_idx().map(Some);
    assert!(idx_error([None, None, None, None]).contains("DIR/train-images-idx3-ubyte not found"));
    let mut missing = ok.clone();
    missing[3] = None;
    let e = idx_error(missing);
    assert!(e.contains("DIR/t10k-labels-idx1-ubyte not found (looked for t10k-labels-idx1-ubyte, t10k-labels-idx1-ubyte.gz"), "{e}");
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (0, small_idx()[0][..20].to_vec(), "train-images-idx3-ubyte is malformed: truncated"),
        (0, vec![1, 0, 8, 3], "train-images-idx3-ubyte is malformed: not an IDX file"),
        (1, idx(8, &[4], &[0, 1, 2, 1]), "train-labels-idx1-ubyte is malformed: 4 labels for 3 images"),
        (2, idx(8, &[2, 2, 3], &[0; 12]), "t10k-images-idx3-ubyte is malformed: test images are 2x3x1 (HxWxC), the training images 2x2x1"),
        (0, idx(8, &[3, 4], &[0; 12]), "train-images-idx3-ubyte is malformed: images of shape 3x4 (N x H x W"),
        (0, idx(0x0C, &[3, 2, 2], &[0; 48]), "images of dtype int32: uint8, float32 or float64 is needed"),
        (3, idx(0x0D, &[2], &[0; 8]), "t10k-labels-idx1-ubyte is malformed: labels of dtype float32: an integer dtype"),
        (3, idx(0x0B, &[2], &[1, 44, 0, 0]), "t10k-labels-idx1-ubyte is malformed: label 300 (number 0) is out of range"),
        (1, idx(0x09, &[3], &[0, 255, 1]), "label -1 (number 1) is out of range"),
        (0, gzip(&small_idx()[0])[..15].to_vec(), "train-images-idx3-ubyte is malformed: gzip data is damaged or truncated"),
        (2, idx(0x0D, &[2, 2, 2], &[0; 32]), "test images are float32, the training images uint8"),
        (0, idx(8, &[0, 2, 2], &[]), "train-images-idx3-ubyte is malformed: holds no images"),
    ];
    for (k, bytes, want) in cases {
        let e = idx_error(with(ok.clone(), k, Some(bytes)));
        assert!(e.contains(want), "want {want:?}, got: {e}");
    }
    let zeros = with(
        with(ok.clone(), 1, Some(idx(8, &[3], &[0; 3]))),
        3,
        Some(idx(8, &[2], &[0; 2])),
    );
    assert!(idx_error(zeros).contains("at least 2 classes"));
    // Float images (big-endian float32): the third value of the second test image is NaN.
    let mut test = [0x3f, 0x80, 0, 0].repeat(8);
    test[24..28].copy_from_slice(&[0x7f, 0xc0, 0, 0]);
    let floats = with(
        with(ok.clone(), 0, Some(idx(0x0D, &[3, 2, 2], &[0; 48]))),
        2,
        Some(idx(0x0D, &[2, 2, 2], &test)),
    );
    let e = idx_error(floats);
    assert!(
        e.contains("DIR/t10k-images-idx3-ubyte is malformed: image 1 holds the value NaN"),
        "{e}"
    );
}

#[test]
fn bad_npz_sets_are_errors_naming_the_file_and_member() {
    let ok = small_arrays();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not a zip at all".to_vec(), "s.npz is malformed: not a zip archive"),
        (support::zip(&[("notes.txt", b"hello".to_vec())], SAVEZ), "s.npz is malformed: no array x_train (member x_train.npy); it holds notes.txt"),
        (support::zip(&[("x_train.npy", ok[0].clone()), ("y_train.npy", ok[1].clone()), ("x_test.npy", ok[2].clone())], SAVEZ), "no array y_test (member y_test.npy); it holds x_train.npy, y_train.npy, x_test.npy"),
        (npz(with(ok.clone(), 0, npy("<c8", &[3, 2, 2], false, &[0; 96])), SAVEZ), "x_train in s.npz is malformed: unknown dtype '<c8'"),
        (npz(with(ok.clone(), 1, npy("<f8", &[3], false, &[0; 24])), SAVEZ), "y_train in s.npz is malformed: labels of dtype float64"),
        (npz(with(ok.clone(), 3, npy("<i4", &[2], false, &[0, 0, 0, 0, 0, 1, 0, 0])), SAVEZ), "y_test in s.npz is malformed: label 256 (number 1) is out of range"),
        (npz(with(ok.clone(), 1, npy("|u1", &[2], false, &[0, 1])), SAVEZ), "y_train in s.npz is malformed: 2 labels for 3 images"),
        (npz(with(ok.clone(), 1, npy("|u1", &[3, 2], false, &[0; 6])), SAVEZ), "labels of shape 3x2: one label per image"),
        (npz(with(ok.clone(), 2, npy("|u1", &[2, 2, 2, 2], false, &[0; 16])), SAVEZ), "x_test in s.npz is malformed: test images are 2x2x2 (HxWxC), the training images 2x2x1"),
        (npz(with(ok.clone(), 2, npy("<f4", &[2, 2, 2], false, &[0; 32])), SAVEZ), "test images are float32, the training images uint8"),
        (npz(with(ok.clone(), 0, npy("|u1", &[3, 2, 2], false, &[0; 11])), SAVEZ), "x_train in s.npz is malformed: truncated: shape 3x2x2 of uint8"),
        (npz(with(ok.clone(), 0, npy("|u1", &[1 << 40, 28, 28], false, &[0; 12])), SAVEZ), "truncated: shape 1099511627776x28x28"),
        (npz(with(ok.clone(), 0, b"\x93NUMPY\x01\x00\xff\xff{".to_vec()), SAVEZ), "x_train in s.npz is malformed: truncated: the header says 65535 bytes"),
        (npz(ok.clone(), SAVEZ)[..200].to_vec(), "s.npz is malformed: not a zip archive"),
    ];
    for (bytes, want) in cases {
        let e = npz_error(bytes);
        assert!(e.contains(want), "want {want:?}, got: {e}");
    }
    // One flipped bit in a stored member fails the member's CRC.
    let mut flipped = npz(ok.clone(), SAVEZ);
    // The local header (30 bytes, the name, a 20-byte ZIP64 field), the 64-byte .npy header.
    flipped[30 + "x_train.npy".len() + 20 + 64 + 5] ^= 0x10;
    let e = npz_error(flipped);
    assert!(
        e.contains("s.npz is malformed: member x_train.npy fails its CRC-32 check"),
        "{e}"
    );
    // A member claiming 2^40 bytes uncompressed is refused before it is inflated.
    let mut huge = npz(
        ok.clone(),
        ZipStyle {
            zip64_central: true,
            ..COMPRESSED
        },
    );
    let at = huge
        .windows(4)
        .position(|w| w == [0x50, 0x4b, 1, 2])
        .unwrap();
    let extra = at + 46 + "x_train.npy".len() + 4;
    huge[extra..extra + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = npz_error(huge);
    assert!(
        e.contains("member x_train.npy is 1099511627776 bytes uncompressed, more than"),
        "{e}"
    );
    let e = DatasetSpec::Npz("/nonexistent/set.npz".into())
        .load(Scaling::default())
        .unwrap_err();
    assert!(
        e.to_string().contains("/nonexistent/set.npz not found"),
        "{e}"
    );
}

/// A deterministic xorshift generator for the damage below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `bytes` damaged one of several ways: cut short, bits flipped, bytes overwritten (often with
/// 0xff or 0x00, which make huge or empty sizes), bytes inserted or removed.
fn damage(mut bytes: Vec<u8>, r: &mut Rng) -> Vec<u8> {
    let n = bytes.len();
    match r.below(5) {
        0 => bytes.truncate(r.below(n)),
        1 => {
            for _ in 0..1 + r.below(8) {
                let at = r.below(n);
                bytes[at] ^= 1 << r.below(8);
            }
        }
        2 => {
            let at = r.below(n);
            let v = [0x00, 0xff, 0x7f, r.next() as u8][r.below(4)];
            let end = (at + 1 + r.below(8)).min(n);
            bytes[at..end].fill(v);
        }
        3 => {
            let at = r.below(n);
            bytes.insert(at, r.next() as u8);
        }
        _ => {
            bytes.remove(r.below(n));
        }
    }
    bytes
}

/// A loaded set is whole: every image has its values, every label is a class.
fn consistent(d: &Dataset) {
    for s in [&d.train, &d.test] {
        assert_eq!(s.images.len(), s.len() * d.features());
        assert!(s.labels.iter().all(|&l| usize::from(l) < d.classes));
        assert!(s.images.iter().all(|v| v.is_finite()));
    }
    assert!(d.classes >= 2 && !d.train.is_empty() && !d.test.is_empty());
}

/// Thousands of damaged variants of valid npz archives (stored and deflated) and IDX sets
/// (plain and gzipped): each is an error or a whole data set, never a panic.
#[test]
fn damaged_files_are_errors_or_whole_sets_never_panics() {
    let mut r = Rng(0x5EED_DA7A);
    let archives = [
        npz(small_arrays(), SAVEZ),
        npz(small_arrays(), COMPRESSED),
        npz(
            small_arrays(),
            ZipStyle {
                zip64_end: true,
                zip64_central: true,
                ..SAVEZ
            },
        ),
    ];
    let (mut errors, mut sets) = (0, 0);
    for i in 0..3000 {
        let bytes = damage(archives[i % 3].clone(), &mut r);
        match data::npz::parse(&bytes, "f.npz", "f", Scaling::default()) {
            Ok(d) => {
                consistent(&d);
                sets += 1;
            }
            Err(e) => {
                let e = e.to_string();
                let named = ["x_", "y_", "f.npz"].iter().any(|n| e.starts_with(n));
                assert!(named, "{e}");
                errors += 1;
            }
        }
    }
    for i in 0..3000 {
        let mut files = small_idx().to_vec();
        if i % 2 == 1 {
            files = files.iter().map(|f| gzip(f)).collect();
        }
        let k = r.below(4);
        files[k] = damage(files[k].clone(), &mut r);
        let named = IDX_NAMES.iter().map(|n| n.to_string()).zip(files).collect();
        match data::idx::from_files(named, "f", Scaling::default()) {
            Ok(d) => {
                consistent(&d);
                sets += 1;
            }
            Err(e) => {
                let e = e.to_string();
                assert!(IDX_NAMES.iter().any(|n| e.starts_with(n)), "{e}");
                errors += 1;
            }
        }
    }
    // Both outcomes occur: the damage reaches past the first check.
    assert!(errors > 3000 && sets > 100, "{errors} errors, {sets} sets");
}

/// numpy's `savez` writes each member through Python's `zipfile` (`ZipFile.open(name, "w",
/// force_zip64=True)`); this writes the same archive with that module, stored and deflated,
/// where a Python 3 is installed, and reads it back.
#[test]
fn an_archive_from_pythons_zipfile_reads_as_numpy_writes_it() {
    const SCRIPT: &str = r#"
import struct, sys, zipfile
def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    h += " " * ((-(10 + len(h) + 1)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
method = zipfile.ZIP_DEFLATED if sys.argv[2] == "1" else zipfile.ZIP_STORED
arrays = [("x_train", npy("|u1", (3, 2, 2, 1), bytes(range(12)))),
          ("y_train", npy("<i8", (3,), struct.pack("<3q", 0, 1, 2))),
          ("x_test", npy("|u1", (1, 2, 2), bytes([3, 5, 7, 9]))),
          ("y_test", npy("<i8", (1,), struct.pack("<q", 2)))]
with zipfile.ZipFile(sys.argv[1], "w", compression=method, allowZip64=True) as z:
    for name, data in arrays:
        with z.open(name + ".npy", "w", force_zip64=True) as f:
            f.write(data)
"#;
    let tmp = tempfile::tempdir().unwrap();
    for deflate in ["0", "1"] {
        let file = tmp.path().join(format!("p{deflate}.npz"));
        let ran = std::process::Command::new("python3")
            .args(["-c", SCRIPT, file.to_str().unwrap(), deflate])
            .status();
        match ran {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("skipping: python3 did not run ({other:?})");
                return;
            }
        }
        let d = DatasetSpec::Npz(file).load(Scaling::default()).unwrap();
        let scaled = |v: &[u8]| v.iter().map(|&p| f32::from(p) / 255.0).collect::<Vec<_>>();
        assert_eq!(d.train.images, scaled(&(0..12).collect::<Vec<u8>>()));
        assert_eq!(d.test.images, scaled(&[3, 5, 7, 9]));
        assert_eq!(
            (d.train.labels, d.test.labels, d.classes),
            (vec![0, 1, 2], vec![2], 3)
        );
    }
}
