//! The UCI optical digits (8x8, 1797 images) shipped in `data/digits.csv.gz`, compiled into the
//! binary so it runs from any folder, with a fixed stratified 80/20 split.

use super::{DataError, Dataset, Scaling, Split};
use crate::rng;
use std::io::Read;

/// The file as shipped (copied unchanged from scikit-learn; see `data/README.md`).
static DIGITS_GZ: &[u8] = include_bytes!("../../../data/digits.csv.gz");

/// Seed of the train/test split; fixed so every run uses the same held-out images.
pub const SPLIT_SEED: u64 = 0x0D16_175E;

/// Fraction of each class held out for testing.
pub const TEST_FRACTION: f64 = 0.2;

/// Parses the CSV text: 64 pixels (`0..=16`) then the label, one image per line.
pub fn parse(text: &str) -> Result<(Vec<[u8; 64]>, Vec<u8>), DataError> {
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = |why: String| DataError::Format {
            what: "digits.csv.gz".into(),
            why: format!("line {}: {why}", n + 1),
        };
        let fields: Vec<&str> = line.trim().split(',').collect();
        if fields.len() != 65 {
            return Err(bad(format!("{} fields, expected 65", fields.len())));
        }
        let mut img = [0u8; 64];
        for (i, f) in fields.iter().enumerate() {
            // Values are written as integers, sometimes with a trailing ".0".
            let v: f64 = f
                .trim()
                .parse()
                .map_err(|_| bad(format!("'{f}' is not a number")))?;
            let limit = if i < 64 { 16.0 } else { 9.0 };
            if !(0.0..=limit).contains(&v) || v.fract() != 0.0 {
                return Err(bad(format!("value {v} out of range 0..={limit}")));
            }
            if i < 64 {
                img[i] = v as u8;
            } else {
                labels.push(v as u8);
            }
        }
        images.push(img);
    }
    Ok((images, labels))
}

/// Splits indices `0..labels.len()` into (train, test), holding out `round(0.2 * n_c)` images
/// of each class `c`, chosen by a shuffle seeded with [`SPLIT_SEED`]. Both lists are sorted.
pub fn stratified_split(labels: &[u8], classes: usize) -> (Vec<usize>, Vec<usize>) {
    let mut train = Vec::new();
    let mut test = Vec::new();
    for c in 0..classes {
        let mut idx: Vec<usize> = (0..labels.len())
            .filter(|&i| labels[i] as usize == c)
            .collect();
        rng::stream(SPLIT_SEED, c as u64).shuffle(&mut idx);
        let n_test = (idx.len() as f64 * TEST_FRACTION).round() as usize;
        test.extend_from_slice(&idx[..n_test]);
        train.extend_from_slice(&idx[n_test..]);
    }
    train.sort_unstable();
    test.sort_unstable();
    (train, test)
}

/// Loads the shipped digits with the fixed split; pixels are scaled by 1/16.
pub fn load() -> Result<Dataset, DataError> {
    load_scaled(Scaling::default())
}

/// Loads the shipped digits with the fixed split, each pixel / 16 scaled by `scaling`.
pub fn load_scaled(scaling: Scaling) -> Result<Dataset, DataError> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(DIGITS_GZ)
        .read_to_string(&mut text)
        .map_err(|e| DataError::Format {
            what: "digits.csv.gz".into(),
            why: e.to_string(),
        })?;
    let (images, labels) = parse(&text)?;
    let (tr, te) = stratified_split(&labels, 10);
    let pick = |idx: &[usize]| Split {
        images: idx
            .iter()
            .flat_map(|&i| images[i].iter().map(|&p| scaling.apply(f64::from(p), 16.0)))
            .collect(),
        labels: idx.iter().map(|&i| labels[i]).collect(),
    };
    Ok(Dataset {
        name: "digits".into(),
        channels: 1,
        height: 8,
        width: 8,
        classes: 10,
        train: pick(&tr),
        test: pick(&te),
        byte_divisor: scaling.is_identity().then_some(16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_all_images_with_a_stratified_split() {
        let d = load().unwrap();
        assert_eq!(d.train.len() + d.test.len(), 1797);
        assert_eq!(d.train.images.len(), d.train.len() * 64);
        for c in 0..10u8 {
            let tr = d.train.labels.iter().filter(|&&l| l == c).count();
            let te = d.test.labels.iter().filter(|&&l| l == c).count();
            let want = ((tr + te) as f64 * 0.2).round() as usize;
            assert_eq!(te, want, "class {c}");
        }
        assert!(d.train.images.iter().all(|&p| (0.0..=1.0).contains(&p)));
        // The first image in the file is a 0 (it has the known first row 0,0,5,13,9,1,0,0).
        let (imgs, labels) = parse("0,0,5,13,9,1,0,0,0,0,13,15,10,15,5,0,0,3,15,2,0,11,8,0,0,4,12,0,0,8,8,0,0,5,8,0,0,9,8,0,0,4,11,0,1,12,7,0,0,2,14,5,10,12,0,0,0,0,6,13,10,0,0,0,0\n").unwrap();
        assert_eq!((imgs[0][2], labels[0]), (5, 0));
    }

    #[test]
    fn split_is_fixed() {
        let a = load().unwrap();
        let b = load().unwrap();
        assert_eq!(a.test.labels, b.test.labels);
        assert_eq!(a.test.images, b.test.images);
    }

    #[test]
    fn malformed_lines_are_reported() {
        let e = parse("1,2,3\n").unwrap_err();
        assert!(e.to_string().contains("line 1: 3 fields"), "{e}");
        let mut line = vec!["0"; 64];
        line.push("12");
        let e = parse(&line.join(",")).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
