//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): little-endian, C-order arrays of
//! the dtypes passel's tensors have (f16, f32, f64, signed and unsigned 8- to 64-bit
//! integers, bool). `decode` / `encode` are pure
//! (bytes in, tensor out); `read` / `write` add the file IO.
//!
//! Rejected with an error saying why: a bad magic string or version, a malformed header,
//! Fortran order, big-endian or other dtypes (object arrays, strings, f64, …), shapes whose
//! element count overflows or exceeds what passel materializes, and data that is truncated
//! or longer than the shape says.

use std::io::{Read, Write};
use std::path::Path;

use passel_engine::ir::{DType, Tensor, TensorData, TensorError, MAX_MATERIALIZED_ELEMENTS};
use passel_engine::shown_name;

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
    /// The file is not a regular file (a FIFO, a device, a directory).
    #[error("{path}: {reason}")]
    NotRegular {
        /// The file.
        path: String,
        /// What it is instead.
        reason: String,
    },
    /// The bytes are not a supported `.npy` array.
    #[error("{path}: {problem}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        problem: NpyFormatError,
    },
}

/// What is wrong with bytes that should be a `.npy` array ([`decode`], [`read_from`]).
#[derive(Debug, thiserror::Error)]
pub enum NpyFormatError {
    /// The first six bytes are not `\x93NUMPY`.
    #[error("not a .npy file (bad magic string)")]
    BadMagic,
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error("unsupported .npy format version {major}.{minor}")]
    Version {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// The header announces more than [`MAX_HEADER_LEN`] bytes.
    #[error("header of {0} bytes is longer than {MAX_HEADER_LEN} bytes")]
    HeaderTooLong(usize),
    /// The bytes end inside the header.
    #[error("truncated header")]
    TruncatedHeader,
    /// The header is not UTF-8.
    #[error("header is not text")]
    HeaderNotText,
    /// The header is not the dict NumPy writes.
    #[error("malformed header ({what}): {header}")]
    MalformedHeader {
        /// What the parser expected.
        what: String,
        /// The header text (control characters shown escaped, long text cut).
        header: String,
    },
    /// The shape has more than 64 dimensions.
    #[error("rank {0} is above 64")]
    Rank(usize),
    /// `fortran_order: True`.
    #[error("Fortran-order arrays are not supported (save with np.ascontiguousarray)")]
    Fortran,
    /// A dtype passel's tensors do not have (or a big-endian one, or objects).
    #[error("{0}")]
    DType(String),
    /// The element count overflows or exceeds what passel materializes.
    #[error("shape {shape:?} has too many elements (limit {MAX_MATERIALIZED_ELEMENTS})")]
    TooManyElements {
        /// The header's shape.
        shape: Vec<u64>,
    },
    /// Fewer data bytes than the shape needs.
    #[error("truncated data: shape {shape:?} of {dtype} needs {need} bytes, found {found}")]
    TruncatedData {
        /// The header's shape.
        shape: Vec<u64>,
        /// The element type.
        dtype: DType,
        /// Bytes the shape needs.
        need: u64,
        /// Bytes there are.
        found: u64,
    },
    /// More data bytes than the shape needs (`extra` is `None` when the stream did not say
    /// how many).
    #[error("{} after the array's {need} bytes of data", match extra { Some(n) => format!("{n} bytes"), None => "more bytes".to_string() })]
    TrailingData {
        /// Bytes beyond the data, when known.
        extra: Option<u64>,
        /// Bytes the shape needs.
        need: u64,
    },
    /// The data's buffer cannot be allocated.
    #[error("cannot allocate {need} bytes for the data of shape {shape:?} of {dtype}")]
    Alloc {
        /// The header's shape.
        shape: Vec<u64>,
        /// The element type.
        dtype: DType,
        /// Bytes the shape needs.
        need: u64,
    },
    /// The tensor cannot be built from the data.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The reader failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// The header's three fields.
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<u64>,
}

/// Most header bytes a file may announce. NumPy's own headers are under 200 bytes for any
/// shape passel can hold (`np.load` refuses headers over 10000 bytes by default).
const MAX_HEADER_LEN: usize = 1 << 16;

/// What the header says the data is: dtype, shape, element count and data bytes.
struct Layout {
    dtype: DType,
    shape: Vec<u64>,
    n: usize,
    need: u64,
}

/// The header length and where the header starts, from the first 10 bytes (`prefix`); `more`
/// gives the two extra length bytes of versions 2.0 and 3.0.
fn header_len(
    prefix: &[u8],
    more: impl FnOnce() -> Result<[u8; 2], NpyFormatError>,
) -> Result<(usize, usize), NpyFormatError> {
    if prefix.len() < 10 || &prefix[..6] != MAGIC {
        return Err(NpyFormatError::BadMagic);
    }
    let (major, minor) = (prefix[6], prefix[7]);
    let (len, start) = match major {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10),
        2 | 3 => {
            let [a, b] = more()?;
            (u32::from_le_bytes([prefix[8], prefix[9], a, b]) as usize, 12)
        }
        _ => return Err(NpyFormatError::Version { major, minor }),
    };
    if len > MAX_HEADER_LEN {
        return Err(NpyFormatError::HeaderTooLong(len));
    }
    Ok((len, start))
}

/// The layout a header's text describes.
fn layout(header: &[u8]) -> Result<Layout, NpyFormatError> {
    let text = std::str::from_utf8(header).map_err(|_| NpyFormatError::HeaderNotText)?;
    let h = parse_header(text)?;
    if h.fortran {
        return Err(NpyFormatError::Fortran);
    }
    let dtype = match h.descr.as_str() {
        "<f4" => DType::F32,
        "<f2" => DType::F16,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|b1" | "<b1" => DType::Bool,
        "<f8" => DType::F64,
        "|i1" | "<i1" => DType::I8,
        "<i2" => DType::I16,
        "|u1" | "<u1" => DType::U8,
        "<u2" => DType::U16,
        "<u4" => DType::U32,
        "<u8" => DType::U64,
        d if d.starts_with('>') => {
            return Err(NpyFormatError::DType(format!("big-endian dtype `{}` is not supported", shown_name(d))))
        }
        d if d.contains('O') => return Err(NpyFormatError::DType("object arrays are not supported".into())),
        d => {
            return Err(NpyFormatError::DType(format!(
                "dtype `{}` is not supported (f32, f16, f64, i8, i16, i32, i64, u8, u16, u32, u64 and bool are)",
                shown_name(d)
            )))
        }
    };
    let n = h.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let n = match n {
        Some(n) if n <= MAX_MATERIALIZED_ELEMENTS => n,
        _ => return Err(NpyFormatError::TooManyElements { shape: h.shape }),
    };
    Ok(Layout { dtype, shape: h.shape, n: n as usize, need: n * dtype.size_bytes() as u64 })
}

/// Decodes a `.npy` file's bytes into a tensor.
pub fn decode(bytes: &[u8]) -> Result<Tensor, NpyFormatError> {
    let more = || bytes.get(10..12).map(|b| [b[0], b[1]]).ok_or(NpyFormatError::TruncatedHeader);
    let (len, start) = header_len(bytes, more)?;
    let end = start.checked_add(len).filter(|&e| e <= bytes.len()).ok_or(NpyFormatError::TruncatedHeader)?;
    let l = layout(&bytes[start..end])?;
    let data = &bytes[end..];
    check_data_len(&l, data.len() as u64)?;
    Ok(Tensor::from_le_bytes(&l.shape, l.dtype, data)?)
}

/// Checks that `found` data bytes are exactly what `l` needs.
fn check_data_len(l: &Layout, found: u64) -> Result<(), NpyFormatError> {
    if found < l.need {
        return Err(NpyFormatError::TruncatedData { shape: l.shape.clone(), dtype: l.dtype, need: l.need, found });
    }
    if found > l.need {
        return Err(NpyFormatError::TrailingData { extra: Some(found - l.need), need: l.need });
    }
    Ok(())
}

/// Parses `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` (any key order).
/// One linear scan; unknown keys are an error.
fn parse_header(text: &str) -> Result<Header, NpyFormatError> {
    let bad = |what: &str| NpyFormatError::MalformedHeader {
        what: what.to_string(),
        header: shown_name(text.trim_end()).to_string(),
    };
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
                    .collect::<Result<Vec<u64>, NpyFormatError>>()?;
                if dims.len() > 64 {
                    return Err(NpyFormatError::Rank(dims.len()));
                }
                shape = Some(dims);
                &after[close + 1..]
            }
            other => return Err(bad(&format!("unknown key `{}`", shown_name(other)))),
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

/// The `.npy` header of `t`: version 1.0 (2.0 if the header needs it), padded so the data
/// starts on a 64-byte boundary.
fn encode_header(t: &Tensor) -> Vec<u8> {
    let descr = match t.dtype() {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::Bool => "|b1",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
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
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out
}

/// Encodes a tensor as a version 1.0 `.npy` file (version 2.0 if the header needs it).
pub fn encode(t: &Tensor) -> Vec<u8> {
    let mut out = encode_header(t);
    out.extend_from_slice(&t.to_le_bytes());
    out
}

/// Bytes read or written per step when streaming data.
const CHUNK: usize = 1 << 16;

/// Writes `t` as a `.npy` file to `w`, the data streamed in chunks: no copy of the tensor.
pub fn write_to(w: &mut impl Write, t: &Tensor) -> std::io::Result<()> {
    fn put<T: Copy, const W: usize>(
        w: &mut impl Write,
        a: &ndarray::ArcArray<T, ndarray::IxDyn>,
        f: impl Fn(T) -> [u8; W],
    ) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(CHUNK);
        for &v in a.iter() {
            buf.extend_from_slice(&f(v));
            if buf.len() + W > CHUNK {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        w.write_all(&buf)
    }
    w.write_all(&encode_header(t))?;
    match &t.0 {
        TensorData::F32(a) => put(w, a, |v| v.to_bits().to_le_bytes()),
        TensorData::F16(a) => put(w, a, |v| v.to_bits().to_le_bytes()),
        TensorData::I64(a) => put(w, a, i64::to_le_bytes),
        TensorData::I32(a) => put(w, a, i32::to_le_bytes),
        TensorData::Bool(a) => put(w, a, |v| [v as u8]),
        TensorData::F64(a) => put(w, a, |v| v.to_bits().to_le_bytes()),
        TensorData::I8(a) => put(w, a, i8::to_le_bytes),
        TensorData::I16(a) => put(w, a, i16::to_le_bytes),
        TensorData::U8(a) => put(w, a, u8::to_le_bytes),
        TensorData::U16(a) => put(w, a, u16::to_le_bytes),
        TensorData::U32(a) => put(w, a, u32::to_le_bytes),
        TensorData::U64(a) => put(w, a, u64::to_le_bytes),
    }
}

/// Reads a `.npy` file from `r`: the header, then exactly the bytes it announces (never more,
/// so an endless reader cannot exhaust memory), then one more byte to check the data ends
/// there. The element buffer is reserved fallibly: a shape whose data cannot be allocated is
/// an error naming its size, not an abort. `len` is the whole file's length when known, to
/// check it before allocating.
pub fn read_from(r: &mut impl Read, len: Option<u64>) -> Result<Tensor, NpyFormatError> {
    let mut prefix = [0u8; 10];
    let got = read_full(r, &mut prefix)?;
    if got < 10 {
        return Err(if got >= 6 && prefix[..6] == *MAGIC {
            NpyFormatError::TruncatedHeader
        } else {
            NpyFormatError::BadMagic
        });
    }
    let more = || {
        let mut b = [0u8; 2];
        match read_full(r, &mut b)? {
            2 => Ok(b),
            _ => Err(NpyFormatError::TruncatedHeader),
        }
    };
    let (header_len, start) = header_len(&prefix, more)?;
    let mut header = vec![0u8; header_len];
    if read_full(r, &mut header)? < header_len {
        return Err(NpyFormatError::TruncatedHeader);
    }
    let l = layout(&header)?;
    if let Some(data_len) = len.map(|len| len.saturating_sub((start + header_len) as u64)) {
        check_data_len(&l, data_len)?;
    }
    let (dtype, need) = (l.dtype, l.need);
    let data = match dtype {
        DType::F32 => TensorData::F32(read_elems(r, &l, |b| f32::from_bits(u32::from_le_bytes(b)))?),
        DType::F16 => TensorData::F16(read_elems(r, &l, |b| half::f16::from_bits(u16::from_le_bytes(b)))?),
        DType::I64 => TensorData::I64(read_elems(r, &l, i64::from_le_bytes)?),
        DType::I32 => TensorData::I32(read_elems(r, &l, i32::from_le_bytes)?),
        DType::Bool => TensorData::Bool(read_elems(r, &l, |[b]: [u8; 1]| b != 0)?),
        DType::F64 => TensorData::F64(read_elems(r, &l, |b| f64::from_bits(u64::from_le_bytes(b)))?),
        DType::I8 => TensorData::I8(read_elems(r, &l, i8::from_le_bytes)?),
        DType::I16 => TensorData::I16(read_elems(r, &l, i16::from_le_bytes)?),
        DType::U8 => TensorData::U8(read_elems(r, &l, u8::from_le_bytes)?),
        DType::U16 => TensorData::U16(read_elems(r, &l, u16::from_le_bytes)?),
        DType::U32 => TensorData::U32(read_elems(r, &l, u32::from_le_bytes)?),
        DType::U64 => TensorData::U64(read_elems(r, &l, u64::from_le_bytes)?),
    };
    let mut one = [0u8; 1];
    if read_full(r, &mut one)? > 0 {
        return Err(NpyFormatError::TrailingData { extra: None, need });
    }
    Ok(Tensor(data))
}

/// Reads until `buf` is full or the reader ends; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads `l.n` elements of `W` bytes each, decoded by `f`, into a fallibly reserved buffer: the
/// streaming form of `Tensor::from_le_bytes` (which [`decode`] uses), with its rules, bool
/// included (any non-zero byte is true); `read_from_agrees_with_decode` pins the two equal.
fn read_elems<T, const W: usize>(
    r: &mut impl Read,
    l: &Layout,
    f: impl Fn([u8; W]) -> T,
) -> Result<ndarray::ArcArray<T, ndarray::IxDyn>, NpyFormatError> {
    let (shape, dtype, need) = (&l.shape, l.dtype, l.need);
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(l.n).map_err(|_| NpyFormatError::Alloc { shape: shape.clone(), dtype, need })?;
    let mut buf = vec![0u8; CHUNK / W * W];
    let mut done = 0u64;
    while done < need {
        let want = (need - done).min(buf.len() as u64) as usize;
        let got = read_full(r, &mut buf[..want])?;
        done += got as u64;
        if got < want {
            return Err(NpyFormatError::TruncatedData { shape: shape.clone(), dtype, need, found: done });
        }
        for c in buf[..want].chunks_exact(W) {
            let mut b = [0u8; W];
            b.copy_from_slice(c);
            out.push(f(b));
        }
    }
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    // `out` holds `l.n` elements, the product of these dims: only a shape ndarray cannot
    // index (over `isize::MAX` elements, which `layout` already refuses) could fail here.
    ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(&dims), out)
        .map_err(|_| NpyFormatError::TooManyElements { shape: shape.clone() })
}

/// Reads a `.npy` file, which must be a regular file (a FIFO or a device is refused before it
/// is opened: opening a FIFO blocks, and a device such as `/dev/zero` never ends).
pub fn read(path: &Path) -> Result<Tensor, NpyError> {
    let name = path.display().to_string();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(source) => return Err(NpyError::Io { path: name, source }),
    };
    if let Some(reason) = crate::files::not_regular(&meta) {
        return Err(NpyError::NotRegular { path: name, reason });
    }
    let file = std::fs::File::open(path).map_err(|source| NpyError::Io { path: name.clone(), source })?;
    read_from(&mut std::io::BufReader::new(file), Some(meta.len()))
        .map_err(|problem| NpyError::Format { path: name, problem })
}

/// Writes a `.npy` file, streaming the data.
pub fn write(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    let io = |source| NpyError::Io { path: path.display().to_string(), source };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::new(file);
    write_to(&mut w, t).and_then(|()| w.flush()).map_err(io)
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
            Tensor::from_f64s(&[2], DType::F64, &[0.1, -1e300]).unwrap(),
            Tensor::from_f64s(&[2], DType::I8, &[-128.0, 127.0]).unwrap(),
            Tensor::from_f64s(&[2], DType::I16, &[-300.0, 300.0]).unwrap(),
            Tensor::from_f64s(&[2], DType::U8, &[0.0, 255.0]).unwrap(),
            Tensor::from_f64s(&[2], DType::U16, &[1.0, 65535.0]).unwrap(),
            Tensor::from_f64s(&[2], DType::U32, &[1.0, 4e9]).unwrap(),
            Tensor::from_le_bytes(&[1], DType::U64, &[0xff; 8]).unwrap(),
        ];
        for t in cases {
            let bytes = encode(&t);
            assert_eq!(bytes.len() % 64, (t.len() * t.dtype().size_bytes()) % 64);
            let back = decode(&bytes).unwrap();
            assert!(back.bit_eq(&t), "{t}");
        }
    }

    #[test]
    fn read_from_agrees_with_decode() {
        let int = Tensor::from_f64s(&[2], DType::I16, &[-300.0, 300.0]).unwrap();
        // Bool bytes other than 0 and 1 are true in both, as in numpy and ONNX.
        let mut odd_bools = encode(&Tensor::from_f64s(&[3], DType::Bool, &[1.0, 0.0, 1.0]).unwrap());
        let at = odd_bools.len() - 3;
        odd_bools[at] = 7;
        for bytes in [encode(&int), odd_bools] {
            let streamed = read_from(&mut &bytes[..], Some(bytes.len() as u64)).unwrap();
            assert!(streamed.bit_eq(&decode(&bytes).unwrap()), "{streamed}");
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
            (header("<c8", "False", "(1,)", &four), "dtype `<c8` is not supported"),
            (header("<f4", "False", "(2,)", &four), "truncated data: shape [2] of f32 needs 8 bytes, found 4"),
            (header("<f4", "False", "(1,)", &[0; 5]), "1 bytes after"),
            (header("<f4", "False", "(4294967296, 4294967296, 16)", &four), "too many elements"),
            (header("<f4", "False", "(-1,)", &four), "malformed header"),
            (b"\x93NUMPY\x01\x00\xff\x00{".to_vec(), "truncated header"),
            (b"\x93NUMPY\x09\x00\x00\x00".to_vec(), "version 9.0"),
        ];
        for (bytes, want) in cases {
            let err = decode(&bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
        // Names from the header are escaped and cut in messages (issue #26 item 14).
        let named: Vec<(Vec<u8>, String)> = vec![
            (header("<f\0\n\u{200b}", "False", "(1,)", &four), "<f\\u{0}\\u{a}\\u{200b}".to_string()),
            (header(&"x".repeat(5000), "False", "(1,)", &four), "… (5000 characters in all)".to_string()),
        ];
        for (bytes, want) in named {
            let err = decode(&bytes).unwrap_err().to_string();
            assert!(err.contains(&want), "{want:?} not in {err:?}");
            assert!(!err.contains('\0') && !err.contains('\n') && err.len() < 400, "{err:?}");
        }
    }
}
