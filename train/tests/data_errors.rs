//! `--dataset idx:DIR` and `npz:FILE` on bad input: every kind of bad file is an error naming
//! the file (and array) and what is wrong; thousands of damaged files are each an error or a
//! whole set, never a panic.

mod support;

use support::{gzip, idx, npy, npz, ZipStyle, COMPRESSED, SAVEZ};
use systole_train::data::{self, Dataset, DatasetSpec, Scaling};

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
