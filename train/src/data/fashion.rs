//! Fashion-MNIST from Debian's `dataset-fashion-mnist` package (gzip-compressed IDX files).

use super::{idx, DataError, Dataset, Scaling};
use std::path::{Path, PathBuf};

/// The package's four files: training images and labels, test images and labels.
const FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

/// Where Debian's package installs the files.
pub const DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The folder to read: `SYSTOLE_FASHION_MNIST_DIR` if set, else [`DEBIAN_DIR`].
pub fn default_dir() -> PathBuf {
    std::env::var_os("SYSTOLE_FASHION_MNIST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_DIR))
}

/// Loads the official 60000/10000 split from `dir` with the default scaling (pixel / 255).
pub fn load(dir: &Path) -> Result<Dataset, DataError> {
    load_scaled(dir, Scaling::default())
}

/// Loads the official 60000/10000 split from `dir`, each pixel / 255 scaled by `scaling`:
/// the IDX reader of `--dataset idx:DIR`, with the checks this set must pass (28x28, 10
/// classes) and the package's name when files are missing.
pub fn load_scaled(dir: &Path, scaling: Scaling) -> Result<Dataset, DataError> {
    for name in FILES {
        let path = dir.join(name);
        if !path.exists() {
            return Err(DataError::NotInstalled { path });
        }
    }
    let files = FILES
        .iter()
        .map(|n| {
            let path = dir.join(n);
            Ok((path.display().to_string(), idx::read_file(&path)?))
        })
        .collect::<Result<Vec<_>, DataError>>()?;
    let mut d = idx::from_files(files, "fashion-mnist", scaling)?;
    if (d.channels, d.height, d.width, d.classes) != (1, 28, 28, 10) {
        return Err(DataError::Format {
            what: dir.display().to_string(),
            why: format!(
                "{} classes of {}x{}x{} images, Fashion-MNIST has 10 of 28x28x1",
                d.classes, d.height, d.width, d.channels
            ),
        });
    }
    d.name = "fashion-mnist".into();
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_when_installed() {
        let dir = default_dir();
        if !dir.join("t10k-labels-idx1-ubyte.gz").exists() {
            eprintln!("skipping: Fashion-MNIST not installed at {}", dir.display());
            return;
        }
        let d = load(&dir).unwrap();
        assert_eq!((d.train.len(), d.test.len()), (60000, 10000));
        assert_eq!(d.features(), 784);
        assert_eq!(d.byte_divisor, Some(255));
        // The first training image's pixels are its bytes / 255 in f32, as before the scaling.
        let raw = idx::read_file(&dir.join(FILES[0])).unwrap();
        let first = &raw[16..16 + 784];
        let want: Vec<f32> = first.iter().map(|&p| p as f32 / 255.0).collect();
        assert_eq!(&d.train.images[..784], &want[..]);
    }
}
