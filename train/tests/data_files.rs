//! `--dataset idx:DIR` and `npz:FILE`: a set given as files trains exactly as the same set built
//! in; channels-last and Fortran-ordered arrays become the same NCHW rows; archives as
//! numpy and Python's zipfile write them read. Bad and damaged files: data_errors.rs.

mod support;

use std::path::Path;
use support::{gzip, idx, npy, npz, ZipStyle, COMPRESSED, SAVEZ};
use systole_core::Rounding;
use systole_train::data::{self, Dataset, DatasetSpec, Scaling};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig};

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
        device: systole_device::DeviceSpec::Golden,
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
