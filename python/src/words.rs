//! numpy arrays in and out: integer arrays of any integer dtype, layout and byte order become
//! the contract's words (checked against the word width W first), results become `int16` arrays.

use crate::errors::{Failure, Kind};
use numpy::ndarray::IxDyn;
use numpy::{PyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray};
use numpy::{PyUntypedArrayMethods, ToPyArray};
use pyo3::prelude::*;
use systole_core::numeric::{word_max, word_min};

/// An operand as the caller passed it: its shape and its words, row-major.
pub struct Words {
    /// numpy's shape.
    pub shape: Vec<usize>,
    /// The words, each inside the W-bit range.
    pub data: Vec<i16>,
}

/// `obj` (a numpy array or anything `numpy.asarray` takes) as `ndim`-dimensional words of
/// `word_bits` bits; `name` and `what` say which operand of which operation in the errors.
pub fn words(
    obj: &Bound<'_, PyAny>,
    name: &str,
    what: &str,
    ndim: usize,
    word_bits: u32,
) -> PyResult<Result<Words, Failure>> {
    let py = obj.py();
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => {
            let a = py.import("numpy")?.getattr("asarray")?.call1((obj,))?;
            match a.cast_into::<PyUntypedArray>() {
                Ok(a) => a,
                Err(_) => {
                    return Ok(Err(Failure::new(
                        Kind::DType,
                        format!("operand {name} of {what} is not an array: pass a numpy array of integer words"),
                    )))
                }
            }
        }
    };
    let dtype = arr.dtype();
    if !matches!(dtype.kind(), b'i' | b'u') {
        return Ok(Err(Failure::new(
            Kind::DType,
            format!(
                "operand {name} of {what} has dtype {}: pass integer words (a numpy integer dtype such as int16), e.g. np.round(x * 2**frac).astype(np.int16) for fixed point with frac fractional bits",
                dtype
            ),
        )));
    }
    if arr.ndim() != ndim {
        return Ok(Err(Failure::new(
            Kind::Shape,
            format!(
                "operand {name} of {what} has {} dimension(s) (shape {:?}): {what} takes {ndim}-D arrays",
                arr.ndim(),
                arr.shape()
            ),
        )));
    }
    let shape = arr.shape().to_vec();
    if shape.contains(&0) {
        return Ok(Err(Failure::new(
            Kind::Shape,
            format!(
                "operand {name} of {what} has shape {shape:?}: every dimension must be at least 1"
            ),
        )));
    }
    // Native byte order, so one of the casts below applies.
    let arr = if dtype.is_native_byteorder().unwrap_or(true) {
        arr
    } else {
        let native = dtype.call_method1("newbyteorder", ("=",))?;
        arr.call_method1("astype", (native,))?
            .cast_into::<PyUntypedArray>()?
    };
    let range = (word_min(word_bits), word_max(word_bits));
    macro_rules! try_dtypes {
        ($($t:ty),*) => {
            $(
                if let Ok(a) = arr.cast::<PyArrayDyn<$t>>() {
                    return Ok(checked(a.to_owned_array().iter().map(|&v| v as i128), range)
                        .map(|data| Words { shape, data })
                        .map_err(|(i, v)| outside(name, what, &arr.shape().to_vec(), i, v, word_bits)));
                }
            )*
        };
    }
    try_dtypes!(i8, i16, i32, i64, u8, u16, u32, u64);
    Ok(Err(Failure::new(
        Kind::DType,
        format!(
            "operand {name} of {what} has dtype {}: pass int8, int16, int32, int64 or an unsigned one",
            dtype
        ),
    )))
}

/// The words of `values`, or the first one outside `range` as (flat index, value).
fn checked(
    values: impl Iterator<Item = i128>,
    (lo, hi): (i64, i64),
) -> Result<Vec<i16>, (usize, i128)> {
    values
        .enumerate()
        .map(|(i, v)| {
            if v < lo as i128 || v > hi as i128 {
                Err((i, v))
            } else {
                Ok(v as i16)
            }
        })
        .collect()
}

/// The error of a word outside the W-bit range, naming where it is.
fn outside(name: &str, what: &str, shape: &[usize], flat: usize, v: i128, w: u32) -> Failure {
    let mut index = vec![0; shape.len()];
    let mut rest = flat;
    for (i, &d) in shape.iter().enumerate().rev() {
        index[i] = rest % d;
        rest /= d;
    }
    Failure::new(
        Kind::Range,
        format!(
            "operand {name} of {what} holds {v} at {index:?}, outside the {w}-bit range {}..={} of the device's words: quantise it to W = {w} bits first",
            word_min(w),
            word_max(w)
        ),
    )
}

/// Words as an `int16` array of `shape`.
pub fn to_array<'py>(
    py: Python<'py>,
    data: &[i16],
    shape: &[usize],
) -> PyResult<Bound<'py, PyArray<i16, IxDyn>>> {
    data.to_pyarray(py).reshape(IxDyn(shape))
}

/// A matrix of accumulators: its shape and its values, row-major.
pub type Accumulators = (Vec<usize>, Vec<i64>);

/// A caller's accumulators (any integer dtype) as `i64`, or why not.
pub fn accumulators(obj: &Bound<'_, PyAny>) -> PyResult<Result<Accumulators, Failure>> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let arr = np.getattr("asarray")?.call1((obj,))?;
    let arr = arr.cast_into::<PyUntypedArray>()?;
    if !matches!(arr.dtype().kind(), b'i' | b'u') {
        return Ok(Err(Failure::new(
            Kind::DType,
            format!(
                "the accumulators have dtype {}: pass integers (the exact sums, e.g. a.astype(np.int64) @ b)",
                arr.dtype()
            ),
        )));
    }
    if arr.ndim() != 2 {
        return Ok(Err(Failure::new(
            Kind::Shape,
            format!(
                "the accumulators have {} dimension(s): pass the 2-D output matrix of exact sums",
                arr.ndim()
            ),
        )));
    }
    let shape = arr.shape().to_vec();
    if shape.contains(&0) {
        return Ok(Err(Failure::new(
            Kind::Shape,
            format!("the accumulators have shape {shape:?}: every dimension must be at least 1"),
        )));
    }
    let as64 = arr.call_method1("astype", ("int64",))?;
    if arr.dtype().kind() == b'u' && arr.dtype().itemsize() == 8 {
        // astype wraps uint64 values past i64::MAX; such a value is no accumulator anyway.
        let big: bool = arr.call_method0("max")?.gt(i64::MAX)?;
        if big {
            return Ok(Err(Failure::new(
                Kind::Range,
                "the accumulators hold a value past 2^63 - 1: no accumulator of the contract is that large".to_string(),
            )));
        }
    }
    let a = as64.cast_into::<PyArrayDyn<i64>>()?;
    Ok(Ok((shape, a.to_owned_array().iter().copied().collect())))
}
