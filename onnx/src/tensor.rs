//! Constant tensors (initializers, `Constant` nodes) decoded into host values, every size checked
//! against `systole_core::limits` before anything is allocated; external data read from beside
//! the model file, only from inside its folder.

use crate::error::OnnxError;
use crate::proto::{data_type, TensorProto, DATA_LOCATION_EXTERNAL};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};
use systole_core::limits::MAX_TENSOR_WORDS;

/// A constant's values: floats (weights) or integers (shapes, axes).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// FLOAT or DOUBLE tensors, as f32 (doubles rounded to nearest).
    F32(Vec<f32>),
    /// INT64 or INT32 tensors.
    I64(Vec<i64>),
}

/// A decoded constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Const {
    /// Its dimensions (empty for a scalar).
    pub dims: Vec<usize>,
    /// Its values, row-major.
    pub values: Values,
}

impl Const {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.values {
            Values::F32(v) => v.len(),
            Values::I64(v) => v.len(),
        }
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as floats (`None` for an integer tensor).
    pub fn floats(&self) -> Option<&[f32]> {
        match &self.values {
            Values::F32(v) => Some(v),
            Values::I64(_) => None,
        }
    }

    /// The values as integers (`None` for a float tensor).
    pub fn ints(&self) -> Option<&[i64]> {
        match &self.values {
            Values::I64(v) => Some(v),
            Values::F32(_) => None,
        }
    }
}

/// Checked element count of `dims`, refused above [`MAX_TENSOR_WORDS`].
pub fn element_count(name: &str, dims: &[i64]) -> Result<(Vec<usize>, usize), OnnxError> {
    let mut n: usize = 1;
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let d = usize::try_from(d).map_err(|_| {
            OnnxError::Model(format!(
                "tensor '{name}' has a negative dimension ({dims:?})"
            ))
        })?;
        n = n.checked_mul(d).filter(|&n| n <= MAX_TENSOR_WORDS).ok_or_else(|| {
            OnnxError::Limit(format!(
                "tensor '{name}' of shape {dims:?} has more than {MAX_TENSOR_WORDS} (2^26) elements, the most systole allocates for one tensor"
            ))
        })?;
        out.push(d);
    }
    Ok((out, n))
}

/// Decodes `t`; `dir` is the model file's folder (for external data; `None` refuses it).
pub fn decode(t: &TensorProto, dir: Option<&Path>) -> Result<Const, OnnxError> {
    let name = t.name.as_str();
    let (dims, n) = element_count(name, &t.dims)?;
    if t.segment.is_some() {
        return Err(OnnxError::Model(format!(
            "tensor '{name}' is a segment of a larger tensor, which systole does not read"
        )));
    }
    let size = match t.data_type {
        data_type::BOOL | data_type::INT8 | data_type::UINT8 => 1,
        data_type::INT16 | data_type::UINT16 | data_type::FLOAT16 | data_type::BFLOAT16 => 2,
        data_type::FLOAT | data_type::INT32 => 4,
        data_type::DOUBLE | data_type::INT64 => 8,
        other => {
            return Err(OnnxError::Model(format!(
                "tensor '{name}' has element type {other} ({}); systole reads FLOAT, DOUBLE, FLOAT16 and BFLOAT16 constants and integer ones",
                type_name(other)
            )))
        }
    };
    let external;
    let raw: &[u8] = if t.data_location == DATA_LOCATION_EXTERNAL {
        external = read_external(t, dir, n * size)?;
        &external
    } else {
        &t.raw_data
    };
    let count = |got: usize| -> Result<(), OnnxError> {
        if got == n {
            Ok(())
        } else {
            Err(OnnxError::Model(format!(
                "tensor '{name}' of shape {dims:?} should hold {n} values but holds {got}: the file is corrupt"
            )))
        }
    };
    let values = if !raw.is_empty() || t.data_location == DATA_LOCATION_EXTERNAL {
        if raw.len() != n * size {
            return Err(OnnxError::Model(format!(
                "tensor '{name}' of shape {dims:?} should hold {} bytes of data but holds {}: the file is corrupt",
                n * size,
                raw.len()
            )));
        }
        from_raw(t.data_type, raw, size)
    } else {
        match t.data_type {
            data_type::FLOAT => {
                count(t.float_data.len())?;
                Values::F32(t.float_data.clone())
            }
            data_type::DOUBLE => {
                count(t.double_data.len())?;
                Values::F32(t.double_data.iter().map(|&v| v as f32).collect())
            }
            // ONNX keeps 16-bit floats' bit patterns in int32_data, one per element.
            data_type::FLOAT16 | data_type::BFLOAT16 => {
                count(t.int32_data.len())?;
                Values::F32(
                    t.int32_data
                        .iter()
                        .map(|&v| half_to_f32(t.data_type, v as u16))
                        .collect(),
                )
            }
            // ONNX keeps INT32, INT8, UINT8 and BOOL values in int32_data.
            data_type::INT32
            | data_type::BOOL
            | data_type::INT8
            | data_type::UINT8
            | data_type::INT16
            | data_type::UINT16 => {
                count(t.int32_data.len())?;
                Values::I64(t.int32_data.iter().map(|&v| v as i64).collect())
            }
            _ => {
                count(t.int64_data.len())?;
                Values::I64(t.int64_data.clone())
            }
        }
    };
    if let Values::F32(v) = &values {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(OnnxError::Model(format!(
                "tensor '{name}' holds a value that is not finite ({} at element {i})",
                v[i]
            )));
        }
    }
    Ok(Const { dims, values })
}

/// The little-endian elements of `raw` (`size` bytes each, the length checked) of ONNX element
/// type `ty`.
fn from_raw(ty: i32, raw: &[u8], size: usize) -> Values {
    let words = raw.chunks_exact(size);
    match ty {
        data_type::FLOAT => Values::F32(
            words
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        ),
        data_type::DOUBLE => Values::F32(
            words
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32)
                .collect(),
        ),
        data_type::FLOAT16 | data_type::BFLOAT16 => Values::F32(
            words
                .map(|b| half_to_f32(ty, u16::from_le_bytes([b[0], b[1]])))
                .collect(),
        ),
        data_type::BOOL | data_type::UINT8 => Values::I64(raw.iter().map(|&b| b as i64).collect()),
        data_type::INT8 => Values::I64(raw.iter().map(|&b| b as i8 as i64).collect()),
        data_type::INT16 => Values::I64(
            words
                .map(|b| i16::from_le_bytes([b[0], b[1]]) as i64)
                .collect(),
        ),
        data_type::UINT16 => Values::I64(
            words
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as i64)
                .collect(),
        ),
        data_type::INT32 => Values::I64(
            words
                .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as i64)
                .collect(),
        ),
        _ => Values::I64(
            words
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        ),
    }
}

/// A FLOAT16 (IEEE binary16) or BFLOAT16 bit pattern as the f32 of the same value (exact:
/// both are subsets of f32).
pub fn half_to_f32(ty: i32, h: u16) -> f32 {
    if ty == data_type::BFLOAT16 {
        return f32::from_bits((h as u32) << 16);
    }
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let (exp, man) = ((h >> 10) & 0x1f, (h & 0x3ff) as u32);
    match exp {
        // Subnormal: man x 2^-24.
        0 => sign * man as f32 * f32::from_bits(0x3380_0000),
        0x1f if man == 0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        _ => f32::from_bits(
            ((h as u32 & 0x8000) << 16) | ((exp as u32 + 127 - 15) << 23) | (man << 13),
        ),
    }
}

fn type_name(t: i32) -> &'static str {
    match t {
        0 => "UNDEFINED",
        8 => "STRING",
        10 => "FLOAT16",
        12 => "UINT32",
        13 => "UINT64",
        16 => "BFLOAT16",
        _ => "another type",
    }
}

/// Reads a tensor's external data: `location` relative to the model's folder (no absolute path,
/// no `..`), `offset` and `length` optional; `want` bytes exactly.
fn read_external(t: &TensorProto, dir: Option<&Path>, want: usize) -> Result<Vec<u8>, OnnxError> {
    let name = &t.name;
    let key = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let bad = |m: String| OnnxError::Model(format!("tensor '{name}': {m}"));
    let location = key("location").ok_or_else(|| bad("external data without a location".into()))?;
    let num = |k: &str| -> Result<Option<u64>, OnnxError> {
        key(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("external data {k} '{v}' is not a number")))
            })
            .transpose()
    };
    let (offset, length) = (num("offset")?.unwrap_or(0), num("length")?);
    let rel = Path::new(location);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(bad(format!(
            "external data location '{location}' must be a plain path inside the model's folder"
        )));
    }
    let dir = dir.ok_or_else(|| {
        bad("its data is in an external file, and the model was not read from a file".into())
    })?;
    let path = dir.join(rel);
    let io = |source| OnnxError::Io {
        path: path.clone(),
        source,
    };
    let mut f = std::fs::File::open(&path).map_err(|e| {
        bad(format!(
            "its external data file {} cannot be opened ({e}): keep the data file beside the model",
            path.display()
        ))
    })?;
    let len = f.metadata().map_err(io)?.len();
    if length.is_some_and(|l| l != want as u64) {
        return Err(bad(format!(
            "external data length {} is not the tensor's {want} bytes",
            length.unwrap()
        )));
    }
    if offset.checked_add(want as u64).is_none_or(|end| end > len) {
        return Err(bad(format!(
            "external data file {} holds {len} bytes, too few for {want} bytes at offset {offset}: the file is truncated",
            path.display()
        )));
    }
    let mut buf = vec![0u8; want];
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    f.read_exact(&mut buf).map_err(io)?;
    Ok(buf)
}
