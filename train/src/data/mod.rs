//! Data sets the trainer can use: the UCI optical digits shipped in `data/`, Fashion-MNIST
//! from Debian's `dataset-fashion-mnist` package, and the user's own: a folder of MNIST-format
//! IDX files (`idx:DIR`) or a numpy `.npz` archive (`npz:FILE`). Nothing is downloaded at run
//! time. The user-facing description is docs/DATA.md.

pub mod array;
pub mod digits;
pub mod fashion;
pub mod idx;
pub mod npy;
pub mod npz;
pub mod zip;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Images and labels of one split; pixels are scaled to `[0, 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// `len() * features` pixel values, one image per row.
    pub images: Vec<f32>,
    /// One class label per image.
    pub labels: Vec<u8>,
}

impl Split {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when the split has no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Keeps only the first `n` images (used to make quick runs on large sets).
    pub fn truncate(&mut self, n: usize, features: usize) {
        if n < self.len() {
            self.labels.truncate(n);
            self.images.truncate(n * features);
        }
    }
}

/// A labelled image data set with a fixed train/test split.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Name used on the command line (`digits`, `fashion-mnist`).
    pub name: String,
    /// Image channels (1 for both shipped sets).
    pub channels: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Image width in pixels.
    pub width: usize,
    /// Number of classes.
    pub classes: usize,
    /// Training images.
    pub train: Split,
    /// Held-out test images.
    pub test: Split,
    /// `Some(d)` when every value is a byte pixel divided by `d` (the form a board that trains
    /// itself takes): uint8 images under the default scaling; `None` otherwise.
    pub byte_divisor: Option<u16>,
}

impl Dataset {
    /// Values per image (`channels * height * width`).
    pub fn features(&self) -> usize {
        self.channels * self.height * self.width
    }
}

/// Why a data set could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// An unknown `--dataset` value.
    #[error("unknown data set '{0}': use digits, fashion-mnist, idx:DIR (a folder of MNIST-format IDX files) or npz:FILE (a numpy archive of x_train, y_train, x_test, y_test)")]
    Unknown(String),
    /// Fashion-MNIST's files are missing.
    #[error("Fashion-MNIST not found: {path} does not exist; install it with `apt-get install dataset-fashion-mnist` (or set SYSTOLE_FASHION_MNIST_DIR to a folder holding the four IDX .gz files)")]
    NotInstalled {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// A file or folder of the user's set is missing.
    #[error("{path} not found (looked for {looked_for})")]
    Missing {
        /// The file or folder.
        path: PathBuf,
        /// What was looked for.
        looked_for: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file's contents are not what the format says.
    #[error("{what} is malformed: {why}")]
    Format {
        /// The file or resource.
        what: String,
        /// What is wrong.
        why: String,
    },
}

/// The data set a run trains on, as `--dataset` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetSpec {
    /// The UCI optical digits shipped with systole.
    Digits,
    /// Fashion-MNIST from Debian's package (or `SYSTOLE_FASHION_MNIST_DIR`).
    FashionMnist,
    /// `idx:DIR`: MNIST-format IDX files in DIR.
    Idx(PathBuf),
    /// `npz:FILE`: a numpy archive of `x_train`, `y_train`, `x_test`, `y_test`.
    Npz(PathBuf),
}

impl FromStr for DatasetSpec {
    type Err = DataError;

    fn from_str(s: &str) -> Result<Self, DataError> {
        let path = |p: &str| {
            if p.is_empty() {
                Err(DataError::Unknown(s.to_string()))
            } else {
                Ok(PathBuf::from(p))
            }
        };
        match s {
            "digits" => Ok(DatasetSpec::Digits),
            "fashion-mnist" | "fashion" => Ok(DatasetSpec::FashionMnist),
            _ => match s.split_once(':') {
                Some(("idx", p)) => Ok(DatasetSpec::Idx(path(p)?)),
                Some(("npz", p)) => Ok(DatasetSpec::Npz(path(p)?)),
                _ => Err(DataError::Unknown(s.to_string())),
            },
        }
    }
}

impl fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetSpec::Digits => f.write_str("digits"),
            DatasetSpec::FashionMnist => f.write_str("fashion-mnist"),
            DatasetSpec::Idx(p) => write!(f, "idx:{}", p.display()),
            DatasetSpec::Npz(p) => write!(f, "npz:{}", p.display()),
        }
    }
}

/// Checkpoints and run.json hold the command-line text (`digits`, `npz:cifar.npz`).
impl serde::Serialize for DatasetSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for DatasetSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl DatasetSpec {
    /// Loads the set, every value scaled by `scaling`.
    pub fn load(&self, scaling: Scaling) -> Result<Dataset, DataError> {
        let name = self.to_string();
        match self {
            DatasetSpec::Digits => digits::load_scaled(scaling),
            DatasetSpec::FashionMnist => fashion::load_scaled(&fashion::default_dir(), scaling),
            DatasetSpec::Idx(dir) => idx::load_dir(dir, &name, scaling),
            DatasetSpec::Npz(file) => npz::load(file, &name, scaling),
        }
    }

    /// The learning rate and its per-epoch decay factor `systole train` uses on this set
    /// unless `--lr` / `--lr-decay` say otherwise: measured per data set (README, "Training
    /// defaults"). The small digits set is still learning after 20 epochs and does best at a
    /// constant 0.05 (any decay costs about a point); Fashion-MNIST's 60,000 images do best
    /// with a lower rate that decays (f32 MLP 85.7% constant, 87.7% decaying). A set of the
    /// user's gets Fashion-MNIST's: MNIST-style sets are its size and kind (docs/DATA.md).
    pub fn default_rate(&self) -> (f32, f32) {
        match self {
            DatasetSpec::Digits => (0.05, 1.0),
            _ => (0.02, 0.85),
        }
    }
}

/// How a pixel becomes the network's input: pixel / pixel_max * `scale` + `offset`
/// (`--input-scale`, `--input-offset`), pixel_max being 255 for byte images, 16 for the
/// digits, 1 for float images (taken as given).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    /// Factor after the division by pixel_max.
    pub scale: f32,
    /// Added last.
    pub offset: f32,
}

impl Default for Scaling {
    fn default() -> Self {
        Scaling {
            scale: 1.0,
            offset: 0.0,
        }
    }
}

impl Scaling {
    /// The input of `pixel` of a set whose pixels reach `pixel_max`. Computed in f64 and rounded
    /// once to f32: under the default (1, 0) that is exactly the f32 quotient pixel / pixel_max
    /// (a quotient rounded to f64 and then to f32 is the correctly rounded f32 quotient), so the
    /// built-in sets train as before; a scale such as 255/16 turns byte pixels / 255 into
    /// exactly pixel / 16.
    pub fn apply(self, pixel: f64, pixel_max: f64) -> f32 {
        (pixel / pixel_max * f64::from(self.scale) + f64::from(self.offset)) as f32
    }

    /// True for the default (1, 0), under which byte pixels stay pixel / pixel_max.
    pub fn is_identity(self) -> bool {
        self.scale == 1.0 && self.offset == 0.0
    }
}

/// Loads a data set by its command-line name with the default scaling.
pub fn load(name: &str) -> Result<Dataset, DataError> {
    name.parse::<DatasetSpec>()?.load(Scaling::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_name_is_an_error() {
        let e = load("cifar").unwrap_err();
        assert!(e.to_string().contains("unknown data set 'cifar'"), "{e}");
    }

    #[test]
    fn missing_fashion_names_the_package() {
        let e = fashion::load(std::path::Path::new("/nonexistent/fmnist")).unwrap_err();
        assert!(
            e.to_string()
                .contains("apt-get install dataset-fashion-mnist"),
            "{e}"
        );
    }

    #[test]
    fn specs_read_back_as_written() {
        for text in [
            "digits",
            "fashion-mnist",
            "idx:/data/mnist",
            "npz:cifar.npz",
        ] {
            let spec: DatasetSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<DatasetSpec>(&json).unwrap(), spec);
        }
        assert_eq!(
            "fashion".parse::<DatasetSpec>().unwrap(),
            DatasetSpec::FashionMnist
        );
        assert_eq!(
            "idx:a:b".parse::<DatasetSpec>().unwrap(),
            DatasetSpec::Idx("a:b".into())
        );
        for bad in ["idx:", "npz:", "csv:x", "Digits", ""] {
            assert!(bad.parse::<DatasetSpec>().is_err(), "{bad}");
        }
    }

    /// The default scaling leaves the built-in sets' pixels bit for bit what they were
    /// (p / 16 and p / 255 in f32), and 255/16 turns bytes / 255 into exactly p / 16.
    #[test]
    fn default_scaling_is_the_f32_quotient() {
        let id = Scaling::default();
        let to16 = Scaling {
            scale: 15.9375,
            offset: 0.0,
        };
        for p in 0..=255u8 {
            let q = f64::from(p);
            assert_eq!(
                id.apply(q, 255.0).to_bits(),
                (f32::from(p) / 255.0).to_bits(),
                "{p}"
            );
            assert_eq!(
                id.apply(q, 16.0).to_bits(),
                (f32::from(p) / 16.0).to_bits(),
                "{p}"
            );
            assert_eq!(
                to16.apply(q, 255.0).to_bits(),
                (f32::from(p) / 16.0).to_bits(),
                "{p}"
            );
        }
        let s = Scaling {
            scale: 2.0,
            offset: -1.0,
        };
        assert_eq!(s.apply(255.0, 255.0), 1.0);
        assert_eq!(s.apply(0.0, 255.0), -1.0);
        assert!(id.is_identity() && !s.is_identity());
    }
}
