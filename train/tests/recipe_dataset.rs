//! docs/EXTENDING.md, "A new data set": a loader turns files into a `Dataset` (images scaled to
//! [0, 1], labels, a fixed train/test split), and the trainer takes it as it takes the shipped
//! sets. This one reads a CSV split pair (`label,pixel,...`, pixels 0..=15) of 4x4 images of
//! four kinds of bars, trains the MLP on it through the golden device with every operation
//! checked, and refuses a malformed line by naming the file, the line and what is wrong.

use std::path::Path;
use systole_core::Rounding;
use systole_train::data::{DataError, Dataset, Split};
use systole_train::model::ModelSpec;
use systole_train::run::{run, RunOptions};
use systole_train::{Precision, Quiet, TrainConfig};

const SIDE: usize = 4;
const CLASSES: usize = 4;
const MAX_PIXEL: f32 = 15.0;

/// The recipe's loader: `DIR/train.csv` and `DIR/test.csv`.
fn load_bars(dir: &Path) -> Result<Dataset, DataError> {
    Ok(Dataset {
        name: "bars".into(),
        channels: 1,
        height: SIDE,
        width: SIDE,
        classes: CLASSES,
        train: load_split(&dir.join("train.csv"))?,
        test: load_split(&dir.join("test.csv"))?,
        byte_divisor: None,
    })
}

fn load_split(path: &Path) -> Result<Split, DataError> {
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |line: usize, why: String| DataError::Format {
        what: format!("{} line {line}", path.display()),
        why,
    };
    let mut split = Split {
        images: Vec::new(),
        labels: Vec::new(),
    };
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != 1 + SIDE * SIDE {
            let want = 1 + SIDE * SIDE;
            return Err(bad(
                i + 1,
                format!("{} fields, expected {want}", fields.len()),
            ));
        }
        let label: u8 = fields[0]
            .parse()
            .ok()
            .filter(|&l| usize::from(l) < CLASSES)
            .ok_or_else(|| {
                bad(
                    i + 1,
                    format!("label '{}' is not 0 to {}", fields[0], CLASSES - 1),
                )
            })?;
        split.labels.push(label);
        for f in &fields[1..] {
            let p: u8 = f
                .parse()
                .ok()
                .filter(|&p| f32::from(p) <= MAX_PIXEL)
                .ok_or_else(|| bad(i + 1, format!("pixel '{f}' is not 0 to {MAX_PIXEL}")))?;
            split.images.push(f32::from(p) / MAX_PIXEL);
        }
    }
    Ok(split)
}

/// `n` images, a quarter of each kind: the bright half is left, right, top or bottom, with
/// noise from a fixed generator (the files a real data set would ship).
fn write_bars(path: &Path, n: usize, mut seed: u64) {
    let mut noise = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % 5
    };
    let mut text = String::new();
    for i in 0..n {
        let class = i % CLASSES;
        text.push_str(&class.to_string());
        for r in 0..SIDE {
            for c in 0..SIDE {
                let bright = match class {
                    0 => c < SIDE / 2,
                    1 => c >= SIDE / 2,
                    2 => r < SIDE / 2,
                    _ => r >= SIDE / 2,
                };
                let p = if bright { 11 + noise() } else { noise() };
                text.push_str(&format!(",{p}"));
            }
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn config(epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![16] },
        // The label a run records; this test hands the trainer its data set directly.
        dataset: systole_train::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: None,
        epochs,
        batch: 8,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: Rounding::Stochastic,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

#[test]
fn a_new_data_set_trains_on_the_device_checked_against_the_golden_model() {
    let dir = tempfile::tempdir().unwrap();
    write_bars(&dir.path().join("train.csv"), 160, 1);
    write_bars(&dir.path().join("test.csv"), 40, 2);
    let data = load_bars(dir.path()).unwrap();
    assert_eq!(
        (data.train.len(), data.test.len(), data.features()),
        (160, 40, 16)
    );
    let opts = RunOptions {
        device: systole_device::DeviceSpec::Golden,
        host_step: false,
        checkpoint_every: 1,
        check: true,
        out: None,
        resume: false,
        overwrite: false,
        trace: None,
    };
    let summary = run(&config(8), &data, &opts, &mut Quiet).unwrap();
    let h = &summary.history;
    let (first, last) = (&h[0], &h[h.len() - 1]);
    assert!(
        last.train_loss < first.train_loss * 0.5,
        "loss {} -> {}",
        first.train_loss,
        last.train_loss
    );
    assert!(last.test_acc >= 95.0, "test accuracy {}", last.test_acc);
}

#[test]
fn a_malformed_line_names_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    write_bars(&dir.path().join("train.csv"), 8, 1);
    let mut bad = std::fs::read_to_string(dir.path().join("train.csv")).unwrap();
    bad.push_str("7,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n");
    std::fs::write(dir.path().join("test.csv"), &bad).unwrap();
    let e = load_bars(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("test.csv line 9") && e.contains("label '7' is not 0 to 3"),
        "{e}"
    );
    std::fs::write(dir.path().join("test.csv"), "1,2,3\n").unwrap();
    let e = load_bars(dir.path()).unwrap_err().to_string();
    assert!(e.contains("3 fields, expected 17"), "{e}");
}
