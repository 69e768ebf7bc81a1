//! Data sets the trainer can use: the UCI optical digits shipped in `data/` and Fashion-MNIST
//! from Debian's `dataset-fashion-mnist` package. Nothing is downloaded at run time.

pub mod digits;
pub mod fashion;

use std::path::PathBuf;

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
    #[error("unknown data set '{0}': use digits or fashion-mnist")]
    Unknown(String),
    /// Fashion-MNIST's files are missing.
    #[error("Fashion-MNIST not found: {path} does not exist; install it with `apt-get install dataset-fashion-mnist` (or set SYSTOLE_FASHION_MNIST_DIR to a folder holding the four IDX .gz files)")]
    NotInstalled {
        /// The file that was looked for.
        path: PathBuf,
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

/// Loads a data set by its command-line name.
pub fn load(name: &str) -> Result<Dataset, DataError> {
    match name {
        "digits" => digits::load(),
        "fashion-mnist" | "fashion" => fashion::load(&fashion::default_dir()),
        other => Err(DataError::Unknown(other.to_string())),
    }
}

/// What the data set `name` divides its byte pixels by (digits' pixels are 0..=16,
/// Fashion-MNIST's 0..=255): a board that trains itself takes the bytes and divides them the
/// same way.
pub fn pixel_divisor(name: &str) -> u16 {
    match name {
        "fashion-mnist" | "fashion" => 255,
        _ => 16,
    }
}

/// The learning rate and its per-epoch decay factor `systole train` uses on data set `name`
/// unless `--lr` / `--lr-decay` say otherwise: measured per data set (docs/MEASUREMENTS.md,
/// "Learning rate"). The small digits set is still learning after 20 epochs and does best at a
/// constant 0.05 (any decay costs about a point); Fashion-MNIST's 60,000 images do best with a
/// lower rate that decays (f32 MLP 85.7% constant, 87.7% decaying).
pub fn default_rate(name: &str) -> (f32, f32) {
    match name {
        "fashion-mnist" | "fashion" => (0.02, 0.85),
        _ => (0.05, 1.0),
    }
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
}
