//! MNIST-format IDX files (the format of MNIST, Fashion-MNIST, KMNIST, ...), gzip-compressed
//! or not, and the folder layout those sets use: `train-images-idx3-ubyte`,
//! `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`.

use super::array::{self, assemble, Array, Dtype, Kind, Parts};
use super::{DataError, Dataset, Scaling};
use std::io::Read;
use std::path::{Path, PathBuf};
use systole_core::limits::MAX_DATA_FILE_BYTES;

/// The bytes of `path`, decompressed when they start with gzip's magic number; at most
/// [`MAX_DATA_FILE_BYTES`] either way.
pub fn read_file(path: &Path) -> Result<Vec<u8>, DataError> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() > MAX_DATA_FILE_BYTES {
        return Err(too_big(&path.display().to_string()));
    }
    let mut raw = Vec::new();
    file.take(MAX_DATA_FILE_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(io)?;
    gunzip(raw, &path.display().to_string())
}

fn too_big(what: &str) -> DataError {
    DataError::Format {
        what: what.to_string(),
        why: format!("larger than the {MAX_DATA_FILE_BYTES} bytes systole reads"),
    }
}

/// `raw` decompressed if it starts with gzip's magic number (an IDX file never does), else
/// unchanged; at most [`MAX_DATA_FILE_BYTES`] either way.
pub fn gunzip(raw: Vec<u8>, what: &str) -> Result<Vec<u8>, DataError> {
    if raw.len() as u64 > MAX_DATA_FILE_BYTES {
        return Err(too_big(what));
    }
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .take(MAX_DATA_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| DataError::Format {
            what: what.to_string(),
            why: format!("gzip data is damaged or truncated ({e})"),
        })?;
    if out.len() as u64 > MAX_DATA_FILE_BYTES {
        return Err(too_big(what));
    }
    Ok(out)
}

/// The element type of IDX type code `code`.
fn idx_dtype(code: u8) -> Option<Dtype> {
    let (kind, size) = match code {
        0x08 => (Kind::Uint, 1),
        0x09 => (Kind::Int, 1),
        0x0B => (Kind::Int, 2),
        0x0C => (Kind::Int, 4),
        0x0D => (Kind::Float, 4),
        0x0E => (Kind::Float, 8),
        _ => return None,
    };
    Some(Dtype {
        kind,
        size,
        big_endian: true,
    })
}

/// Parses an IDX file (`what` names it in errors): magic `0 0 type ndim`, `ndim` big-endian
/// u32 dimensions, then the elements, exactly as many as the dimensions say.
pub fn parse(mut bytes: Vec<u8>, what: &str) -> Result<Array, DataError> {
    let bad = |why: String| DataError::Format {
        what: what.to_string(),
        why,
    };
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad(
            "not an IDX file: it does not start with the IDX magic number (0x00 0x00 type dims)"
                .into(),
        ));
    }
    let dtype = idx_dtype(bytes[2]).ok_or_else(|| {
        bad(format!(
            "unknown IDX element type 0x{:02x} (0x08 unsigned byte, 0x09 byte, 0x0b short, 0x0c int, 0x0d float, 0x0e double)",
            bytes[2]
        ))
    })?;
    let ndim = usize::from(bytes[3]);
    if ndim == 0 {
        return Err(bad("the header gives no dimensions".into()));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad(format!(
            "truncated header: {ndim} dimensions need {header} bytes, the file has {}",
            bytes.len()
        )));
    }
    let shape: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize)
        .collect();
    let have = bytes.len() - header;
    match array::data_bytes(&shape, dtype.size, have as u64) {
        Some(n) if n == have => {}
        Some(n) => {
            return Err(bad(format!(
                "{have} data bytes after the header, but dimensions {} of {} need {n}: the file is longer than its header says",
                array::shape_text(&shape),
                dtype.name()
            )))
        }
        None => {
            return Err(bad(format!(
                "truncated: dimensions {} of {} need more than the {have} data bytes the file holds",
                array::shape_text(&shape),
                dtype.name()
            )))
        }
    }
    bytes.drain(..header);
    Ok(Array {
        what: what.to_string(),
        shape,
        dtype,
        fortran: false,
        data: bytes,
    })
}

/// The candidate file names of one array, in the order they are looked for.
pub fn candidates(split: &str, part: &str) -> Vec<String> {
    let ranks: &[u8] = if part == "labels" { &[1] } else { &[3, 4] };
    let mut out = Vec::new();
    for r in ranks {
        for sep in ['-', '.'] {
            for gz in ["", ".gz"] {
                out.push(format!("{split}-{part}{sep}idx{r}-ubyte{gz}"));
            }
        }
    }
    out
}

/// The first file of [`candidates`] that exists in `dir`.
pub fn find(dir: &Path, split: &str, part: &str) -> Result<PathBuf, DataError> {
    let names = candidates(split, part);
    names
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .ok_or_else(|| DataError::Missing {
            path: dir.join(&names[0]),
            looked_for: names.join(", "),
        })
}

/// The set in `dir`, named `name`: training images and labels, then the test ones.
pub fn load_dir(dir: &Path, name: &str, scaling: Scaling) -> Result<Dataset, DataError> {
    if !dir.is_dir() {
        return Err(DataError::Missing {
            path: dir.to_path_buf(),
            looked_for: "a folder of IDX files".into(),
        });
    }
    let mut files = Vec::new();
    for (split, part) in [
        ("train", "images"),
        ("train", "labels"),
        ("t10k", "images"),
        ("t10k", "labels"),
    ] {
        let path = find(dir, split, part)?;
        files.push((path.display().to_string(), read_file(&path)?));
    }
    from_files(files, name, scaling)
}

/// The set from the four files' contents (name, bytes, gzip-compressed or not) in the order
/// training images, training labels, test images, test labels.
pub fn from_files(
    files: Vec<(String, Vec<u8>)>,
    name: &str,
    scaling: Scaling,
) -> Result<Dataset, DataError> {
    let mut arrays = Vec::with_capacity(4);
    for (what, bytes) in files {
        arrays.push(parse(gunzip(bytes, &what)?, &what)?);
    }
    let [x_train, y_train, x_test, y_test]: [Array; 4] =
        arrays.try_into().map_err(|_| DataError::Format {
            what: name.to_string(),
            why: "an IDX set is four files".into(),
        })?;
    let parts = Parts {
        x_train,
        y_train,
        x_test,
        y_test,
    };
    assemble(name, &parts, scaling)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, code, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn parses_bytes_and_big_endian_types() {
        let a = parse(idx(8, &[2, 3], &[1, 2, 3, 4, 5, 6]), "t").unwrap();
        assert_eq!((a.shape, a.data), (vec![2, 3], vec![1, 2, 3, 4, 5, 6]));
        let a = parse(idx(0x0B, &[1], &[0xFF, 0xFE]), "t").unwrap();
        assert_eq!(
            a.dtype,
            Dtype {
                kind: Kind::Int,
                size: 2,
                big_endian: true
            }
        );
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let err = |b: Vec<u8>| parse(b, "f.idx").unwrap_err().to_string();
        let mut short = idx(8, &[2, 3], &[1, 2, 3, 4, 5, 6]);
        short.pop();
        assert!(
            err(short).contains("truncated: dimensions 2x3 of uint8"),
            "truncated"
        );
        let long = idx(8, &[2, 3], &[0; 7]);
        assert!(err(long).contains("longer than its header"), "long");
        assert!(err(vec![1, 0, 8, 1]).contains("IDX magic"), "magic");
        assert!(err(vec![0, 0, 7, 1]).contains("element type 0x07"), "type");
        assert!(
            err(vec![0, 0, 8, 2, 0, 0]).contains("truncated header"),
            "header"
        );
        assert!(err(vec![0, 0, 8, 0]).contains("no dimensions"), "ndim");
        // A header claiming 2^32-1 x 2^32-1 x 255 images is refused from the length alone.
        let huge = idx(8, &[u32::MAX, u32::MAX, 255], &[0; 16]);
        assert!(
            err(huge).contains("need more than the 16 data bytes"),
            "huge"
        );
        assert!(err(huge_file()).starts_with("f.idx"), "names the file");
    }

    fn huge_file() -> Vec<u8> {
        idx(8, &[1 << 30], &[])
    }

    #[test]
    fn names_follow_mnist() {
        let c = candidates("t10k", "images");
        assert_eq!(c[0], "t10k-images-idx3-ubyte");
        assert_eq!(c[1], "t10k-images-idx3-ubyte.gz");
        assert!(c.contains(&"t10k-images.idx3-ubyte".to_string()));
        assert!(c.contains(&"t10k-images-idx4-ubyte.gz".to_string()));
        assert_eq!(candidates("train", "labels").len(), 4);
    }
}
