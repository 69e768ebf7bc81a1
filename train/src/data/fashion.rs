//! Fashion-MNIST from Debian's `dataset-fashion-mnist` package (gzip-compressed IDX files).

use super::{DataError, Dataset, Split};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where Debian's package installs the files.
pub const DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The folder to read: `SYSTOLE_FASHION_MNIST_DIR` if set, else [`DEBIAN_DIR`].
pub fn default_dir() -> PathBuf {
    std::env::var_os("SYSTOLE_FASHION_MNIST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_DIR))
}

fn read_gz(path: &Path) -> Result<Vec<u8>, DataError> {
    if !path.exists() {
        return Err(DataError::NotInstalled {
            path: path.to_path_buf(),
        });
    }
    let file = std::fs::File::open(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut out)
        .map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(out)
}

/// Parses an IDX file of unsigned bytes: returns its dimensions and data.
pub fn parse_idx(bytes: &[u8], what: &str) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let bad = |why: String| DataError::Format {
        what: what.to_string(),
        why,
    };
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad("no IDX magic number".into()));
    }
    if bytes[2] != 0x08 {
        return Err(bad(format!(
            "element type 0x{:02x}, expected unsigned bytes (0x08)",
            bytes[2]
        )));
    }
    let ndim = bytes[3] as usize;
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad("truncated header".into()));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|i| u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize)
        .collect();
    let n: usize = dims.iter().product();
    if bytes.len() != header + n {
        return Err(bad(format!(
            "{} data bytes, dimensions {} need {n}",
            bytes.len() - header,
            shape(&dims)
        )));
    }
    Ok((dims, bytes[header..].to_vec()))
}

/// Dimensions in words: `60000x28x28`.
fn shape(dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(|x| x.to_string()).collect();
    d.join("x")
}

fn split(dir: &Path, prefix: &str) -> Result<Split, DataError> {
    let ip = dir.join(format!("{prefix}-images-idx3-ubyte.gz"));
    let lp = dir.join(format!("{prefix}-labels-idx1-ubyte.gz"));
    let (idims, pixels) = parse_idx(&read_gz(&ip)?, &ip.display().to_string())?;
    let (ldims, labels) = parse_idx(&read_gz(&lp)?, &lp.display().to_string())?;
    if idims.len() != 3 || idims[1..] != [28, 28] || ldims != [idims[0]] {
        return Err(DataError::Format {
            what: ip.display().to_string(),
            why: format!(
                "image dimensions {} and label dimensions {} do not match 28x28 images with one label each",
                shape(&idims),
                shape(&ldims)
            ),
        });
    }
    if let Some(&l) = labels.iter().find(|&&l| l > 9) {
        return Err(DataError::Format {
            what: lp.display().to_string(),
            why: format!("label {l} is not a class 0..=9"),
        });
    }
    Ok(Split {
        images: pixels.iter().map(|&p| p as f32 / 255.0).collect(),
        labels,
    })
}

/// Loads the official 60000/10000 split from `dir`.
pub fn load(dir: &Path) -> Result<Dataset, DataError> {
    Ok(Dataset {
        name: "fashion-mnist".into(),
        channels: 1,
        height: 28,
        width: 28,
        classes: 10,
        train: split(dir, "train")?,
        test: split(dir, "t10k")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idx_round_trip_and_errors() {
        let mut b = vec![0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3];
        b.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let (dims, data) = parse_idx(&b, "t").unwrap();
        assert_eq!(dims, vec![2, 3]);
        assert_eq!(data, vec![1, 2, 3, 4, 5, 6]);
        b.pop();
        assert!(parse_idx(&b, "t")
            .unwrap_err()
            .to_string()
            .contains("dimensions 2x3 need 6"));
        assert!(parse_idx(&[0, 0, 0x0D, 1], "t")
            .unwrap_err()
            .to_string()
            .contains("0x0d"));
    }

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
    }
}
