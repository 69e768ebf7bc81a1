//! The arrays a data file holds (IDX or .npy) and the one place four of them (train images and
//! labels, test images and labels) become a [`Dataset`]: every check of shapes, counts, dtypes
//! and labels, the channels-last to NCHW reordering and the input scaling happen here, so IDX
//! and npz sets obey the same rules.

use super::{DataError, Dataset, Scaling, Split};
use systole_core::limits::{MAX_DATA_VALUES, MAX_TENSOR_WORDS};

/// What an element is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Unsigned integer.
    Uint,
    /// Signed integer.
    Int,
    /// IEEE float (4 or 8 bytes).
    Float,
}

/// An element type: kind, size in bytes, byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dtype {
    /// Integer or float.
    pub kind: Kind,
    /// Bytes per element (1, 2, 4 or 8).
    pub size: usize,
    /// Most significant byte first.
    pub big_endian: bool,
}

impl Dtype {
    /// Unsigned bytes.
    pub const U8: Dtype = Dtype {
        kind: Kind::Uint,
        size: 1,
        big_endian: false,
    };

    /// numpy's name for the type (`uint8`, `float32`, ...).
    pub fn name(self) -> String {
        let k = match self.kind {
            Kind::Uint => "uint",
            Kind::Int => "int",
            Kind::Float => "float",
        };
        format!("{k}{}", 8 * self.size)
    }
}

/// One decoded array: its shape, element type, order and raw element bytes.
#[derive(Clone, Debug)]
pub struct Array {
    /// Where it came from, for errors: a file, or `x_train in FILE`.
    pub what: String,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: Dtype,
    /// Column-major (numpy's `fortran_order`): the first index varies fastest.
    pub fortran: bool,
    /// Exactly `product(shape) * dtype.size` bytes.
    pub data: Vec<u8>,
}

/// `2x3x4`, or `scalar` for no dimensions.
pub fn shape_text(dims: &[usize]) -> String {
    if dims.is_empty() {
        return "scalar".into();
    }
    let d: Vec<String> = dims.iter().map(|x| x.to_string()).collect();
    d.join("x")
}

/// Bytes an array of `dims` and element size `size` holds, if that is at most `limit`.
pub fn data_bytes(dims: &[usize], size: usize, limit: u64) -> Option<usize> {
    let n = dims.iter().try_fold(size, |acc, &d| acc.checked_mul(d))?;
    (n as u64 <= limit).then_some(n)
}

impl Array {
    fn bad(&self, why: String) -> DataError {
        DataError::Format {
            what: self.what.clone(),
            why,
        }
    }

    /// Element `k` (in storage order) as a float.
    fn float(&self, k: usize) -> f64 {
        let b = &self.data[k * self.dtype.size..(k + 1) * self.dtype.size];
        match (self.dtype.kind, self.dtype.size) {
            (Kind::Float, 4) => f64::from(f32::from_bits(self.uint_of(b) as u32)),
            (Kind::Float, _) => f64::from_bits(self.uint_of(b)),
            (Kind::Uint, _) => self.uint_of(b) as f64,
            (Kind::Int, _) => self.int(k) as f64,
        }
    }

    fn uint_of(&self, b: &[u8]) -> u64 {
        let fold = |acc: u64, &x: &u8| (acc << 8) | u64::from(x);
        if self.dtype.big_endian {
            b.iter().fold(0, fold)
        } else {
            b.iter().rev().fold(0, fold)
        }
    }

    /// Element `k` as an integer (integer kinds only).
    fn int(&self, k: usize) -> i128 {
        let size = self.dtype.size;
        let u = self.uint_of(&self.data[k * size..(k + 1) * size]);
        match self.dtype.kind {
            Kind::Int => {
                let shift = 64 - 8 * size as u32;
                i128::from(((u << shift) as i64) >> shift)
            }
            _ => i128::from(u),
        }
    }

    /// Storage offsets of each index: C order (last index fastest) or Fortran order.
    fn strides(&self) -> Vec<usize> {
        let n = self.shape.len();
        let mut s = vec![1; n];
        if self.fortran {
            for i in 1..n {
                s[i] = s[i - 1] * self.shape[i - 1];
            }
        } else {
            for i in (0..n.saturating_sub(1)).rev() {
                s[i] = s[i + 1] * self.shape[i + 1];
            }
        }
        s
    }
}

/// Image geometry of an images array: (count, channels, height, width).
fn geometry(x: &Array) -> Result<(usize, usize, usize, usize), DataError> {
    let (n, h, w, c) = match x.shape[..] {
        [n, h, w] => (n, h, w, 1),
        [n, h, w, c] => (n, h, w, c),
        _ => {
            return Err(x.bad(format!(
                "images of shape {} (N x H x W, or N x H x W x C with channels last, is needed)",
                shape_text(&x.shape)
            )))
        }
    };
    if n == 0 {
        return Err(x.bad("holds no images".into()));
    }
    if h == 0 || w == 0 || c == 0 {
        return Err(x.bad(format!(
            "images of shape {} are empty",
            shape_text(&x.shape)
        )));
    }
    Ok((n, c, h, w))
}

/// What a pixel is divided by: 255 for bytes; floats are taken as given (1).
fn pixel_max(x: &Array) -> Result<Option<u16>, DataError> {
    match (x.dtype.kind, x.dtype.size) {
        (Kind::Uint, 1) => Ok(Some(255)),
        (Kind::Float, _) => Ok(None),
        _ => Err(x.bad(format!(
            "images of dtype {}: uint8, float32 or float64 is needed",
            x.dtype.name()
        ))),
    }
}

/// The labels of `y` for `n` images, checked to be integers in `0..=255`.
fn labels(y: &Array, n: usize) -> Result<Vec<u8>, DataError> {
    if y.dtype.kind == Kind::Float {
        return Err(y.bad(format!(
            "labels of dtype {}: an integer dtype is needed",
            y.dtype.name()
        )));
    }
    let count = match y.shape[..] {
        [m] | [m, 1] => m,
        _ => {
            return Err(y.bad(format!(
                "labels of shape {}: one label per image (N, or N x 1) is needed",
                shape_text(&y.shape)
            )))
        }
    };
    if count != n {
        return Err(y.bad(format!("{count} labels for {n} images")));
    }
    (0..count)
        .map(|k| {
            let l = y.int(k);
            u8::try_from(l).map_err(|_| {
                y.bad(format!(
                    "label {l} (number {k}) is out of range: labels are classes 0..=255"
                ))
            })
        })
        .collect()
}

/// The images of `x` as NCHW rows of `c*h*w` values, each `scaling` applied to pixel / `max`.
fn images(
    x: &Array,
    (n, c, h, w): (usize, usize, usize, usize),
    max: f64,
    scaling: Scaling,
) -> Result<Vec<f32>, DataError> {
    let s = x.strides();
    let sc = if s.len() == 4 { s[3] } else { 0 };
    let mut out = Vec::with_capacity(n * c * h * w);
    for i in 0..n {
        for ch in 0..c {
            for y in 0..h {
                for xx in 0..w {
                    let k = i * s[0] + y * s[1] + xx * s[2] + ch * sc;
                    let v = x.float(k);
                    let scaled = scaling.apply(v, max);
                    if !scaled.is_finite() {
                        return Err(x.bad(format!(
                            "image {i} holds the value {v}, which is {scaled} as the network's input: every input must be a finite number"
                        )));
                    }
                    out.push(scaled);
                }
            }
        }
    }
    Ok(out)
}

/// The four arrays of a set: train images, train labels, test images, test labels.
pub struct Parts {
    /// Training images.
    pub x_train: Array,
    /// Training labels.
    pub y_train: Array,
    /// Test images.
    pub x_test: Array,
    /// Test labels.
    pub y_test: Array,
}

/// Checks the four arrays against each other and builds the data set named `name`.
pub fn assemble(name: &str, p: &Parts, scaling: Scaling) -> Result<Dataset, DataError> {
    let gtr = geometry(&p.x_train)?;
    let gte = geometry(&p.x_test)?;
    if (gtr.1, gtr.2, gtr.3) != (gte.1, gte.2, gte.3) {
        return Err(p.x_test.bad(format!(
            "test images are {}x{}x{} (HxWxC), the training images {}x{}x{}: both splits need one image shape",
            gte.2, gte.3, gte.1, gtr.2, gtr.3, gtr.1
        )));
    }
    let max_tr = pixel_max(&p.x_train)?;
    let max_te = pixel_max(&p.x_test)?;
    if max_tr.is_some() != max_te.is_some() {
        return Err(p.x_test.bad(format!(
            "test images are {}, the training images {}: both splits need bytes, or both floats",
            p.x_test.dtype.name(),
            p.x_train.dtype.name()
        )));
    }
    let features = gtr.1 * gtr.2 * gtr.3;
    let total = (gtr.0 + gte.0).checked_mul(features);
    if features > MAX_TENSOR_WORDS || total.is_none_or(|t| t > MAX_DATA_VALUES) {
        return Err(p.x_train.bad(format!(
            "{} + {} images of {features} values are more than systole reads ({MAX_DATA_VALUES} values in all, {MAX_TENSOR_WORDS} per image)",
            gtr.0, gte.0
        )));
    }
    let train_labels = labels(&p.y_train, gtr.0)?;
    let test_labels = labels(&p.y_test, gte.0)?;
    let top = train_labels.iter().chain(&test_labels).max().copied();
    let classes = usize::from(top.unwrap_or(0)) + 1;
    if classes < 2 {
        return Err(p.y_train.bad(
            "every label (train and test) is 0: a classifier needs at least 2 classes".into(),
        ));
    }
    let max = f64::from(max_tr.unwrap_or(1));
    Ok(Dataset {
        name: name.to_string(),
        channels: gtr.1,
        height: gtr.2,
        width: gtr.3,
        classes,
        train: Split {
            images: images(&p.x_train, gtr, max, scaling)?,
            labels: train_labels,
        },
        test: Split {
            images: images(&p.x_test, gte, max, scaling)?,
            labels: test_labels,
        },
        byte_divisor: max_tr.filter(|_| scaling.is_identity()),
    })
}
