//! numpy's `.npy` array format (versions 1 to 3): the magic `\x93NUMPY`, a version, a header
//! that is a Python dict literal (`{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`),
//! then the elements.

use super::array::{self, Array, Dtype, Kind};
use super::DataError;
use systole_core::limits::MAX_DATA_FILE_BYTES;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The element type of a numpy `descr` such as `<f4`, `|u1` or `>i8`.
fn dtype(descr: &str) -> Option<Dtype> {
    let b = descr.as_bytes();
    if b.len() != 3 {
        return None;
    }
    let big_endian = match b[0] {
        b'<' | b'|' | b'=' => false,
        b'>' => true,
        _ => return None,
    };
    let kind = match b[1] {
        b'u' => Kind::Uint,
        b'i' => Kind::Int,
        b'f' => Kind::Float,
        _ => return None,
    };
    let size = match (kind, b[2]) {
        (Kind::Float, b'4') => 4,
        (Kind::Float, b'8') => 8,
        (Kind::Float, _) => return None,
        (_, b'1') => 1,
        (_, b'2') => 2,
        (_, b'4') => 4,
        (_, b'8') => 8,
        _ => return None,
    };
    Some(Dtype {
        kind,
        size,
        big_endian,
    })
}

/// A value of the header dict.
#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A tiny reader of the header's dict literal: string keys; string, bool or int-tuple values.
struct Lexer<'a> {
    s: &'a [u8],
    at: usize,
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    /// Consumes `c` (after spaces) if it is next.
    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        let hit = self.s.get(self.at) == Some(&c);
        self.at += usize::from(hit);
        hit
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.at))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let q = match self.s.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a quoted string at byte {}", self.at)),
        };
        let start = self.at + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or("an unterminated string")?;
        self.at = start + len + 1;
        String::from_utf8(self.s[start..start + len].to_vec())
            .map_err(|_| "a string that is not UTF-8".into())
    }

    fn number(&mut self) -> Result<usize, String> {
        self.skip_space();
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at].is_ascii_digit() {
            self.at += 1;
        }
        // Python 2 wrote long integers as `3L`.
        let text = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        let n = text
            .parse()
            .map_err(|_| format!("expected a dimension at byte {start}"))?;
        self.eat(b'L');
        Ok(n)
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        let s = self.s;
        let rest = &s[self.at.min(s.len())..];
        for (word, v) in [("True", true), ("False", false)] {
            if rest.starts_with(word.as_bytes()) {
                self.at += word.len();
                return Ok(Value::Bool(v));
            }
        }
        match rest.first() {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => {
                self.at += 1;
                let mut dims = Vec::new();
                while !self.eat(b')') {
                    dims.push(self.number()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Value::Tuple(dims))
            }
            _ => Err(format!(
                "a value that is not a string, a bool or a tuple of dimensions at byte {} (a structured or object dtype?)",
                self.at
            )),
        }
    }

    fn dict(&mut self) -> Result<Vec<(String, Value)>, String> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        while !self.eat(b'}') {
            let k = self.string()?;
            self.expect(b':')?;
            out.push((k, self.value()?));
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        Ok(out)
    }
}

/// Parses a `.npy` file's bytes (`what` names it in errors).
pub fn parse(mut bytes: Vec<u8>, what: &str) -> Result<Array, DataError> {
    let bad = |why: String| DataError::Format {
        what: what.to_string(),
        why,
    };
    if !bytes.starts_with(MAGIC) || bytes.len() < 10 {
        return Err(bad("not a .npy array (no \\x93NUMPY magic)".into()));
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => {
            let l = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (l as usize, 12)
        }
        v => {
            return Err(bad(format!(
                "a truncated header, or .npy version {v} (1 to 3 are read)"
            )))
        }
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            bad(format!(
                "truncated: the header says {len} bytes, the file ends first"
            ))
        })?;
    let fields = Lexer {
        s: &bytes[start..end],
        at: 0,
    }
    .dict()
    .map_err(|e| bad(format!("unreadable header: {e}")))?;
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("the header has no '{key}'")))
    };
    let dtype = match get("descr")? {
        Value::Str(d) => dtype(d).ok_or_else(|| {
            bad(format!(
                "unknown dtype '{d}': integers (u1..u8, i1..i8) and floats (f4, f8) are read"
            ))
        })?,
        v => return Err(bad(format!("dtype {v:?} is not a plain numeric dtype"))),
    };
    let Value::Bool(fortran) = *get("fortran_order")? else {
        return Err(bad("'fortran_order' is not True or False".into()));
    };
    let Value::Tuple(shape) = get("shape")? else {
        return Err(bad("'shape' is not a tuple of dimensions".into()));
    };
    let have = bytes.len() - end;
    match array::data_bytes(shape, dtype.size, MAX_DATA_FILE_BYTES) {
        Some(n) if n == have => {}
        Some(n) if n < have => {
            return Err(bad(format!(
                "{have} data bytes, but shape {} of {} needs {n}: the file is longer than its header says",
                array::shape_text(shape),
                dtype.name()
            )))
        }
        _ => {
            return Err(bad(format!(
                "truncated: shape {} of {} needs more than the {have} data bytes the file holds",
                array::shape_text(shape),
                dtype.name()
            )))
        }
    }
    let shape = shape.clone();
    bytes.drain(..end);
    Ok(Array {
        what: what.to_string(),
        shape,
        dtype,
        fortran,
        data: bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn reads_numpy_headers() {
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }          \n";
        let a = parse(npy(h, &[0; 8]), "a.npy").unwrap();
        assert_eq!(a.shape, vec![2, 1]);
        assert_eq!(a.dtype.name(), "float32");
        let h = "{'descr': '>i2', 'fortran_order': True, 'shape': (3,), }";
        let a = parse(npy(h, &[0; 6]), "a.npy").unwrap();
        assert!(a.fortran && a.dtype.big_endian);
        let h = "{\"shape\": (2L, 2L), \"fortran_order\": False, \"descr\": \"|u1\"}";
        assert_eq!(parse(npy(h, &[0; 4]), "a").unwrap().shape, vec![2, 2]);
    }

    #[test]
    fn bad_headers_are_errors() {
        let err = |h: &str, n: usize| parse(npy(h, &vec![0; n]), "a.npy").unwrap_err().to_string();
        let e = err(
            "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
            8,
        );
        assert!(e.contains("unknown dtype '<c8'"), "{e}");
        let e = err(
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
            4,
        );
        assert!(e.contains("structured or object"), "{e}");
        let e = err("{'descr': '<f4', 'shape': (1,), }", 4);
        assert!(e.contains("no 'fortran_order'"), "{e}");
        let e = err(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            8,
        );
        assert!(e.contains("truncated: shape 3 of float32"), "{e}");
        let e = err(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
            8,
        );
        assert!(e.contains("truncated"), "{e}");
        let e = err("{'descr': '<f4', 'fortran_order': False, 'shape': (1, }", 4);
        assert!(e.contains("unreadable header"), "{e}");
        let e = parse(b"PK\x03\x04".to_vec(), "a.npy")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no \\x93NUMPY magic"), "{e}");
    }
}
