//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): little-endian, C-order arrays of
//! f32, f16, i64, i32 and bool, the dtypes passel's tensors have. `decode` / `encode` are pure
//! (bytes in, tensor out); `read` / `write` add the file IO.
//!
//! Rejected with an error saying why: a bad magic string or version, a malformed header,
//! Fortran order, big-endian or other dtypes (object arrays, strings, f64, …), shapes whose
//! element count overflows or exceeds what passel materializes, and data that is truncated
//! or longer than the shape says.

use std::path::Path;

use passel_engine::ir::{DType, Tensor, TensorError, MAX_MATERIALIZED_ELEMENTS};

/// Why a `.npy` file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bytes are not a supported `.npy` array.
    #[error("{path}: {msg}")]
    Format {
        /// The file (or `<bytes>`).
        path: String,
        /// What is wrong.
        msg: String,
    },
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// The header's three fields.
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<u64>,
}

/// Decodes a `.npy` file's bytes into a tensor.
pub fn decode(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file (bad magic string)".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated header".into());
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        _ => return Err(format!("unsupported .npy format version {major}.{minor}")),
    };
    let end = start.checked_add(header_len).filter(|&e| e <= bytes.len()).ok_or("truncated header")?;
    let text = std::str::from_utf8(&bytes[start..end]).map_err(|_| "header is not text")?;
    let h = parse_header(text)?;
    if h.fortran {
        return Err("Fortran-order arrays are not supported (save with np.ascontiguousarray)".into());
    }
    let dtype = match h.descr.as_str() {
        "<f4" => DType::F32,
        "<f2" => DType::F16,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|b1" | "<b1" => DType::Bool,
        d if d.starts_with('>') => return Err(format!("big-endian dtype `{d}` is not supported")),
        d if d.contains('O') => return Err("object arrays are not supported".into()),
        d => return Err(format!("dtype `{d}` is not supported (f32, f16, i64, i32 and bool are)")),
    };
    let n = h.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let n = match n {
        Some(n) if n <= MAX_MATERIALIZED_ELEMENTS => n,
        _ => return Err(format!("shape {:?} has too many elements (limit {MAX_MATERIALIZED_ELEMENTS})", h.shape)),
    };
    let need = n * dtype.size_bytes() as u64;
    let data = &bytes[end..];
    if (data.len() as u64) < need {
        return Err(format!("truncated data: shape {:?} of {dtype} needs {need} bytes, found {}", h.shape, data.len()));
    }
    if data.len() as u64 > need {
        return Err(format!("{} bytes after the array's {need} bytes of data", data.len() as u64 - need));
    }
    Tensor::from_le_bytes(&h.shape, dtype, data).map_err(|e: TensorError| e.to_string())
}

/// Parses `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` (any key order).
/// One linear scan; unknown keys are an error.
fn parse_header(text: &str) -> Result<Header, String> {
    let bad = |what: &str| format!("malformed header ({what}): {}", text.trim_end());
    let body = text.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(|| bad("not a dict"))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let (key, after) = quoted(rest).ok_or_else(|| bad("expected a quoted key"))?;
        let after = after.trim_start().strip_prefix(':').ok_or_else(|| bad("expected `:`"))?.trim_start();
        let after = match key {
            "descr" => {
                let (d, a) = quoted(after).ok_or_else(|| bad("descr must be a string"))?;
                descr = Some(d.to_string());
                a
            }
            "fortran_order" => {
                if let Some(a) = after.strip_prefix("True") {
                    fortran = Some(true);
                    a
                } else if let Some(a) = after.strip_prefix("False") {
                    fortran = Some(false);
                    a
                } else {
                    return Err(bad("fortran_order must be True or False"));
                }
            }
            "shape" => {
                let close = after.find(')').ok_or_else(|| bad("shape must be a tuple"))?;
                let inner = after.strip_prefix('(').ok_or_else(|| bad("shape must be a tuple"))?;
                let inner = &inner[..close - 1];
                let dims = inner
                    .split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|d| d.trim_end_matches('L').parse::<u64>().map_err(|_| bad("shape dims must be integers")))
                    .collect::<Result<Vec<u64>, String>>()?;
                if dims.len() > 64 {
                    return Err(format!("rank {} is above 64", dims.len()));
                }
                shape = Some(dims);
                &after[close + 1..]
            }
            other => return Err(bad(&format!("unknown key `{other}`"))),
        };
        let after = after.trim_start();
        rest = after.strip_prefix(',').unwrap_or(after).trim_start();
        if !after.starts_with(',') && !rest.is_empty() {
            return Err(bad("expected `,`"));
        }
    }
    match (descr, fortran, shape) {
        (Some(descr), Some(fortran), Some(shape)) => Ok(Header { descr, fortran, shape }),
        _ => Err(bad("descr, fortran_order and shape are all required")),
    }
}

/// A `'…'` or `"…"` string at the start of `s` (no escapes: header strings have none), and
/// the text after it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let q = s.chars().next().filter(|&c| c == '\'' || c == '"')?;
    let end = s[1..].find(q)? + 1;
    Some((&s[1..end], &s[end + 1..]))
}

/// Encodes a tensor as a version 1.0 `.npy` file (version 2.0 if the header needs it).
pub fn encode(t: &Tensor) -> Vec<u8> {
    let descr = match t.dtype() {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::Bool => "|b1",
    };
    let dims: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let v1 = header.len() + 11 <= u16::MAX as usize;
    let prefix = if v1 { 10 } else { 12 };
    // Pad with spaces so the data starts on a 64-byte boundary; the header ends in '\n'.
    let total = (prefix + header.len() + 1).div_ceil(64) * 64;
    header.push_str(&" ".repeat(total - prefix - header.len() - 1));
    header.push('\n');
    let mut out = Vec::with_capacity(total + t.len() * t.dtype().size_bytes());
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.to_le_bytes());
    out
}

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor, NpyError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io { path: name.clone(), source })?;
    decode(&bytes).map_err(|msg| NpyError::Format { path: name, msg })
}

/// Writes a `.npy` file.
pub fn write(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    std::fs::write(path, encode(t)).map_err(|source| NpyError::Io { path: path.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(descr: &str, fortran: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn round_trips_every_dtype_bit_exact() {
        let f = Tensor::from_le_bytes(
            &[2, 2],
            DType::F32,
            &[1, 0, 0xc0, 0x7f, 0, 0, 0, 0x80, 0, 0, 0x80, 0x3f, 0, 0, 0, 0],
        )
        .unwrap();
        let cases = [
            f,
            Tensor::from_f64s(&[3], DType::F16, &[1.5, -2.0, 0.0]).unwrap(),
            Tensor::from_f64s(&[], DType::I64, &[-7.0]).unwrap(),
            Tensor::from_f64s(&[2, 0], DType::I32, &[]).unwrap(),
            Tensor::from_f64s(&[3], DType::Bool, &[1.0, 0.0, 1.0]).unwrap(),
        ];
        for t in cases {
            let bytes = encode(&t);
            assert_eq!(bytes.len() % 64, (t.len() * t.dtype().size_bytes()) % 64);
            let back = decode(&bytes).unwrap();
            assert!(back.bit_eq(&t), "{t}");
        }
    }

    #[test]
    fn reads_what_numpy_writes() {
        // np.save of np.array([[1, 2, 3]], dtype=np.int32), byte for byte.
        let mut bytes = b"\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }".to_vec();
        bytes.resize(10 + 0x76 - 1, b' ');
        bytes.push(b'\n');
        for v in [1i32, 2, 3] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let t = decode(&bytes).unwrap();
        assert_eq!(t.shape(), &[1, 3]);
        assert_eq!(t.to_f64s(), [1.0, 2.0, 3.0]);
        assert_eq!(encode(&t), bytes);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let four = 1.0f32.to_le_bytes();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"NUMPY".to_vec(), "bad magic"),
            (header("<f4", "True", "(1,)", &four), "Fortran-order"),
            (header(">f4", "False", "(1,)", &four), "big-endian dtype `>f4`"),
            (header("|O", "False", "(1,)", &four), "object arrays"),
            (header("<f8", "False", "(1,)", &four), "dtype `<f8` is not supported"),
            (header("<f4", "False", "(2,)", &four), "truncated data: shape [2] of f32 needs 8 bytes, found 4"),
            (header("<f4", "False", "(1,)", &[0; 5]), "1 bytes after"),
            (header("<f4", "False", "(4294967296, 4294967296, 16)", &four), "too many elements"),
            (header("<f4", "False", "(-1,)", &four), "malformed header"),
            (header("|b1", "False", "(1,)", &[7]), "bool element 0 is byte 7"),
            (b"\x93NUMPY\x01\x00\xff\x00{".to_vec(), "truncated header"),
            (b"\x93NUMPY\x09\x00\x00\x00".to_vec(), "version 9.0"),
        ];
        for (bytes, want) in cases {
            let err = decode(&bytes).unwrap_err();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }
}
