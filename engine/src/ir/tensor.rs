//! Concrete tensors (ndarray-backed, cheap to clone) and IR constants, which are either dense
//! tensors, compact fills (`zeros`, `ones`, `full`, seeded `uniform` / `normal`) that stay
//! compact in the IR and in text and are materialized only when evaluated, or raw
//! little-endian bytes borrowed from a shared buffer (an imported model's weights, left in the
//! file mapping until something reads them). A raw constant is the same constant as the dense
//! tensor it decodes to: equality, hashing and printing cannot tell them apart.

use std::fmt;
use std::hash::{Hash, Hasher};

use half::f16;
use ndarray::{ArcArray, CowArray, IxDyn};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::ty::{DType, TensorType, Type};

/// Largest tensor (in elements) that passel will materialize: 2^28 elements (1 GiB of f32).
/// Declaring a bigger constant is fine; evaluating it is a [`TensorError::TooLarge`].
pub const MAX_MATERIALIZED_ELEMENTS: u64 = 1 << 28;

/// Errors from building or materializing tensors.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TensorError {
    /// The tensor would have more elements than [`MAX_MATERIALIZED_ELEMENTS`].
    #[error("tensor of shape {shape:?} has too many elements to materialize (limit {limit})")]
    TooLarge {
        /// The requested shape.
        shape: Vec<u64>,
        /// The element limit.
        limit: u64,
    },
    /// A byte buffer's length does not match the shape and dtype.
    #[error("shape {shape:?} of {dtype} needs {expected} bytes, got {found}")]
    WrongByteCount {
        /// The requested shape.
        shape: Vec<u64>,
        /// The requested dtype.
        dtype: DType,
        /// Bytes the shape and dtype need.
        expected: u64,
        /// Bytes given.
        found: usize,
    },
    /// Raw bytes do not fit the type of a raw constant.
    #[error("raw constant of type {ty:?} {dtype} needs {expected} bytes, got {found}")]
    RawLength {
        /// The shape.
        ty: Vec<u64>,
        /// The element type.
        dtype: DType,
        /// Bytes the type needs.
        expected: u64,
        /// Bytes given.
        found: usize,
    },
    /// Raw constants hold every dtype but bool.
    #[error("raw constants cannot hold {0} elements")]
    RawDType(DType),
    /// The number of values does not match the shape.
    #[error("shape {shape:?} needs {expected} values, got {found}")]
    WrongCount {
        /// The requested shape.
        shape: Vec<u64>,
        /// Elements the shape needs.
        expected: u64,
        /// Values given.
        found: usize,
    },
}

/// The storage of a tensor, one variant per dtype.
#[derive(Clone, Debug)]
pub enum TensorData {
    /// f32 elements.
    F32(ArcArray<f32, IxDyn>),
    /// f16 elements.
    F16(ArcArray<f16, IxDyn>),
    /// i64 elements.
    I64(ArcArray<i64, IxDyn>),
    /// i32 elements.
    I32(ArcArray<i32, IxDyn>),
    /// bool elements.
    Bool(ArcArray<bool, IxDyn>),
    /// f64 elements.
    F64(ArcArray<f64, IxDyn>),
    /// i8 elements.
    I8(ArcArray<i8, IxDyn>),
    /// i16 elements.
    I16(ArcArray<i16, IxDyn>),
    /// u8 elements.
    U8(ArcArray<u8, IxDyn>),
    /// u16 elements.
    U16(ArcArray<u16, IxDyn>),
    /// u32 elements.
    U32(ArcArray<u32, IxDyn>),
    /// u64 elements.
    U64(ArcArray<u64, IxDyn>),
}

/// A concrete tensor value. Cloning shares the buffer.
#[derive(Clone, Debug)]
pub struct Tensor(pub TensorData);

/// Applies `$body` to the array inside any variant of a [`TensorData`].
#[macro_export]
#[doc(hidden)]
macro_rules! for_each_dtype {
    ($data:expr, $a:ident => $body:expr) => {
        match $data {
            $crate::ir::TensorData::F32($a) => $body,
            $crate::ir::TensorData::F16($a) => $body,
            $crate::ir::TensorData::I64($a) => $body,
            $crate::ir::TensorData::I32($a) => $body,
            $crate::ir::TensorData::Bool($a) => $body,
            $crate::ir::TensorData::F64($a) => $body,
            $crate::ir::TensorData::I8($a) => $body,
            $crate::ir::TensorData::I16($a) => $body,
            $crate::ir::TensorData::U8($a) => $body,
            $crate::ir::TensorData::U16($a) => $body,
            $crate::ir::TensorData::U32($a) => $body,
            $crate::ir::TensorData::U64($a) => $body,
        }
    };
}

fn check_size(shape: &[u64]) -> Result<Vec<usize>, TensorError> {
    let n = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    match n {
        Some(n) if n <= MAX_MATERIALIZED_ELEMENTS => Ok(shape.iter().map(|&d| d as usize).collect()),
        _ => Err(TensorError::TooLarge { shape: shape.to_vec(), limit: MAX_MATERIALIZED_ELEMENTS }),
    }
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match &self.0 {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::I64(_) => DType::I64,
            TensorData::I32(_) => DType::I32,
            TensorData::Bool(_) => DType::Bool,
            TensorData::F64(_) => DType::F64,
            TensorData::I8(_) => DType::I8,
            TensorData::I16(_) => DType::I16,
            TensorData::U8(_) => DType::U8,
            TensorData::U16(_) => DType::U16,
            TensorData::U32(_) => DType::U32,
            TensorData::U64(_) => DType::U64,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        for_each_dtype!(&self.0, a => a.shape())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        for_each_dtype!(&self.0, a => a.len())
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The IR type of this tensor.
    pub fn ty(&self) -> Type {
        Type::tensor(self.shape().iter().map(|&d| d as u64).collect::<Vec<_>>(), self.dtype())
    }

    /// The tensor type of this tensor.
    pub fn tensor_type(&self) -> TensorType {
        TensorType { shape: self.shape().iter().map(|&d| d as u64).collect(), dtype: self.dtype() }
    }

    /// A scalar f32.
    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor(TensorData::F32(ArcArray::from_elem(IxDyn(&[]), v)))
    }

    /// A scalar of `dtype` holding `v` converted (floats round, ints truncate, bool is `v != 0`).
    pub fn scalar(dtype: DType, v: f64) -> Tensor {
        Tensor::full(&[], dtype, v).expect("a scalar is never too large")
    }

    /// A tensor of `shape` filled with `v` converted to `dtype`.
    pub fn full(shape: &[u64], dtype: DType, v: f64) -> Result<Tensor, TensorError> {
        let dims = IxDyn(&check_size(shape)?);
        Ok(Tensor(match dtype {
            DType::F32 => TensorData::F32(ArcArray::from_elem(dims, v as f32)),
            DType::F16 => TensorData::F16(ArcArray::from_elem(dims, f16::from_f64(v))),
            DType::I64 => TensorData::I64(ArcArray::from_elem(dims, v as i64)),
            DType::I32 => TensorData::I32(ArcArray::from_elem(dims, v as i32)),
            DType::Bool => TensorData::Bool(ArcArray::from_elem(dims, v != 0.0)),
            DType::F64 => TensorData::F64(ArcArray::from_elem(dims, v)),
            DType::I8 => TensorData::I8(ArcArray::from_elem(dims, v as i8)),
            DType::I16 => TensorData::I16(ArcArray::from_elem(dims, v as i16)),
            DType::U8 => TensorData::U8(ArcArray::from_elem(dims, v as u8)),
            DType::U16 => TensorData::U16(ArcArray::from_elem(dims, v as u16)),
            DType::U32 => TensorData::U32(ArcArray::from_elem(dims, v as u32)),
            DType::U64 => TensorData::U64(ArcArray::from_elem(dims, v as u64)),
        }))
    }

    /// A tensor of `shape` from `values` (row-major), converted to `dtype`.
    pub fn from_f64s(shape: &[u64], dtype: DType, values: &[f64]) -> Result<Tensor, TensorError> {
        let dims = check_size(shape)?;
        let expected: usize = dims.iter().product();
        if expected != values.len() {
            return Err(TensorError::WrongCount {
                shape: shape.to_vec(),
                expected: expected as u64,
                found: values.len(),
            });
        }
        let dims = IxDyn(&dims);
        let build = |v: Vec<_>| v;
        Ok(Tensor(match dtype {
            DType::F32 => TensorData::F32(
                ArcArray::from_shape_vec(dims, build(values.iter().map(|&v| v as f32).collect()))
                    .expect("length checked"),
            ),
            DType::F16 => TensorData::F16(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| f16::from_f64(v)).collect())
                    .expect("length checked"),
            ),
            DType::I64 => TensorData::I64(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as i64).collect()).expect("length checked"),
            ),
            DType::I32 => TensorData::I32(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as i32).collect()).expect("length checked"),
            ),
            DType::Bool => TensorData::Bool(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v != 0.0).collect()).expect("length checked"),
            ),
            DType::F64 => TensorData::F64(ArcArray::from_shape_vec(dims, values.to_vec()).expect("length checked")),
            DType::I8 => TensorData::I8(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as i8).collect()).expect("length checked"),
            ),
            DType::I16 => TensorData::I16(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as i16).collect()).expect("length checked"),
            ),
            DType::U8 => TensorData::U8(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as u8).collect()).expect("length checked"),
            ),
            DType::U16 => TensorData::U16(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as u16).collect()).expect("length checked"),
            ),
            DType::U32 => TensorData::U32(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as u32).collect()).expect("length checked"),
            ),
            DType::U64 => TensorData::U64(
                ArcArray::from_shape_vec(dims, values.iter().map(|&v| v as u64).collect()).expect("length checked"),
            ),
        }))
    }

    /// The elements' little-endian bytes, row-major (bool is one byte, 0 or 1): the layout of
    /// the text format's resource blobs and of `.npy` data. Every bit is kept (NaN payloads,
    /// `-0.0`).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        fn le<T: Copy, const W: usize>(a: &ArcArray<T, IxDyn>, f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
            fn put<T, const W: usize>(out: &mut [u8], vals: impl Iterator<Item = T>, f: impl Fn(T) -> [u8; W]) {
                for (o, v) in out.chunks_exact_mut(W).zip(vals) {
                    o.copy_from_slice(&f(v));
                }
            }
            let mut out = vec![0u8; a.len() * W];
            // A row-major array is read as a slice (fast); any other layout in logical order.
            match a.as_slice() {
                Some(s) => put(&mut out, s.iter().copied(), f),
                None => put(&mut out, a.iter().copied(), f),
            }
            out
        }
        match &self.0 {
            TensorData::F32(a) => le(a, |v| v.to_bits().to_le_bytes()),
            TensorData::F16(a) => le(a, |v| v.to_bits().to_le_bytes()),
            TensorData::I64(a) => le(a, i64::to_le_bytes),
            TensorData::I32(a) => le(a, i32::to_le_bytes),
            TensorData::Bool(a) => le(a, |v| [v as u8]),
            TensorData::F64(a) => le(a, |v| v.to_bits().to_le_bytes()),
            TensorData::I8(a) => le(a, i8::to_le_bytes),
            TensorData::I16(a) => le(a, i16::to_le_bytes),
            TensorData::U8(a) => le(a, u8::to_le_bytes),
            TensorData::U16(a) => le(a, u16::to_le_bytes),
            TensorData::U32(a) => le(a, u32::to_le_bytes),
            TensorData::U64(a) => le(a, u64::to_le_bytes),
        }
    }

    /// A tensor of `shape` and `dtype` from little-endian, row-major bytes (the inverse of
    /// [`Tensor::to_le_bytes`]). The length must match exactly. A bool byte is true when it is
    /// not 0 (ONNX's and numpy's rule), so every decoder of bytes — `.pir` resources, ONNX raw
    /// data, `.npy` files, the Python package — reads booleans alike.
    pub fn from_le_bytes(shape: &[u64], dtype: DType, bytes: &[u8]) -> Result<Tensor, TensorError> {
        let dims = check_size(shape)?;
        let n: usize = dims.iter().product();
        let width = dtype.size_bytes();
        if n.checked_mul(width) != Some(bytes.len()) {
            return Err(TensorError::WrongByteCount {
                shape: shape.to_vec(),
                dtype,
                expected: n as u64 * width as u64,
                found: bytes.len(),
            });
        }
        let dims = IxDyn(&dims);
        fn arr<T, const W: usize>(dims: IxDyn, bytes: &[u8], f: impl Fn([u8; W]) -> T) -> ArcArray<T, IxDyn> {
            let v: Vec<T> = bytes
                .chunks_exact(W)
                .map(|c| {
                    let mut b = [0u8; W];
                    b.copy_from_slice(c);
                    f(b)
                })
                .collect();
            ArcArray::from_shape_vec(dims, v).expect("length checked")
        }
        Ok(Tensor(match dtype {
            DType::F32 => TensorData::F32(arr(dims, bytes, |b| f32::from_bits(u32::from_le_bytes(b)))),
            DType::F16 => TensorData::F16(arr(dims, bytes, |b| f16::from_bits(u16::from_le_bytes(b)))),
            DType::I64 => TensorData::I64(arr(dims, bytes, i64::from_le_bytes)),
            DType::I32 => TensorData::I32(arr(dims, bytes, i32::from_le_bytes)),
            DType::Bool => TensorData::Bool(arr(dims, bytes, |b: [u8; 1]| b[0] != 0)),
            DType::F64 => TensorData::F64(arr(dims, bytes, |b| f64::from_bits(u64::from_le_bytes(b)))),
            DType::I8 => TensorData::I8(arr(dims, bytes, i8::from_le_bytes)),
            DType::I16 => TensorData::I16(arr(dims, bytes, i16::from_le_bytes)),
            DType::U8 => TensorData::U8(arr(dims, bytes, u8::from_le_bytes)),
            DType::U16 => TensorData::U16(arr(dims, bytes, u16::from_le_bytes)),
            DType::U32 => TensorData::U32(arr(dims, bytes, u32::from_le_bytes)),
            DType::U64 => TensorData::U64(arr(dims, bytes, u64::from_le_bytes)),
        }))
    }

    /// Elements converted to f64, row-major (bool is 0/1).
    pub fn to_f64s(&self) -> Vec<f64> {
        match &self.0 {
            TensorData::F32(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::F16(a) => a.iter().map(|&v| v.to_f64()).collect(),
            TensorData::I64(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::I32(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::Bool(a) => a.iter().map(|&v| v as u8 as f64).collect(),
            TensorData::F64(a) => a.iter().copied().collect(),
            TensorData::I8(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::I16(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::U8(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::U16(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::U32(a) => a.iter().map(|&v| v as f64).collect(),
            TensorData::U64(a) => a.iter().map(|&v| v as f64).collect(),
        }
    }

    /// The bit pattern of a one-element tensor (as in equality and hashing), else `None`.
    pub fn to_bits_scalar(&self) -> Option<u64> {
        if self.len() != 1 {
            return None;
        }
        match &self.0 {
            TensorData::F32(a) => a.iter().next().map(|v| v.to_bits() as u64),
            TensorData::F16(a) => a.iter().next().map(|v| v.to_bits() as u64),
            TensorData::I64(a) => a.iter().next().map(|&v| v as u64),
            TensorData::I32(a) => a.iter().next().map(|&v| v as u32 as u64),
            TensorData::Bool(a) => a.iter().next().map(|&v| v as u64),
            TensorData::F64(a) => a.iter().next().map(|v| v.to_bits()),
            TensorData::I8(a) => a.iter().next().map(|&v| v as u8 as u64),
            TensorData::I16(a) => a.iter().next().map(|&v| v as u16 as u64),
            TensorData::U8(a) => a.iter().next().map(|&v| v as u64),
            TensorData::U16(a) => a.iter().next().map(|&v| v as u64),
            TensorData::U32(a) => a.iter().next().map(|&v| v as u64),
            TensorData::U64(a) => a.iter().next().copied(),
        }
    }

    /// Whether the two tensors have equal dtype, shape and element bits.
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && Bits::of_tensor(self).eq(&Bits::of_tensor(other))
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Self) -> bool {
        self.bit_eq(other)
    }
}

impl Eq for Tensor {}

impl Hash for Tensor {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.shape().hash(state);
        Bits::of_tensor(self).hash(state);
    }
}

/// A compact, deterministic fill pattern for a constant.
#[derive(Clone, Copy, Debug)]
pub enum Fill {
    /// Every element is the value.
    Full(f64),
    /// Uniform in `[low, high)` from a ChaCha8 stream seeded with `seed`.
    Uniform {
        /// Seed of the stream.
        seed: u64,
        /// Inclusive lower bound.
        low: f64,
        /// Exclusive upper bound.
        high: f64,
    },
    /// Normal with `mean` and `std` (Box–Muller on a ChaCha8 stream seeded with `seed`).
    Normal {
        /// Seed of the stream.
        seed: u64,
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}

impl Fill {
    fn key(&self) -> (u8, u64, u64, u64) {
        match *self {
            Fill::Full(v) => (0, v.to_bits(), 0, 0),
            Fill::Uniform { seed, low, high } => (1, seed, low.to_bits(), high.to_bits()),
            Fill::Normal { seed, mean, std } => (2, seed, mean.to_bits(), std.to_bits()),
        }
    }
}

impl PartialEq for Fill {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Fill {}
impl Hash for Fill {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

/// A constant of the IR.
#[derive(Clone, Debug)]
pub enum Constant {
    /// Explicit values.
    Dense(Tensor),
    /// A compact fill of a (possibly large) tensor type; see [`Fill`].
    Fill {
        /// The constant's type.
        ty: TensorType,
        /// How elements are generated.
        fill: Fill,
    },
    /// Explicit values as little-endian bytes in a shared buffer (built with
    /// [`Constant::raw`], which checks the length). Equal to, hashed and printed like the
    /// [`Constant::Dense`] tensor it decodes to.
    Raw {
        /// The constant's type.
        ty: TensorType,
        /// Exactly `elements × dtype size` bytes.
        data: bytes::Bytes,
    },
}

/// Byte size of an element that raw constants can hold.
fn raw_elem_size(dtype: DType) -> Option<usize> {
    match dtype {
        DType::Bool => None,
        other => Some(other.size_bytes()),
    }
}

/// The element bit patterns of a dense tensor or of raw little-endian bytes, row-major, as
/// `u64`s (floats by their bits, so NaN equals itself and `-0.0` differs from `0.0`; ints
/// zero-extended; bool 0 or 1): the identity that equality and hashing of tensors and
/// constants use. It reads the elements in place, chunk by chunk, so comparing or hashing a
/// 100 MB weight allocates nothing (a non-contiguous dense tensor is copied once to row-major).
enum Bits<'a> {
    F32(CowArray<'a, f32, IxDyn>),
    F16(CowArray<'a, f16, IxDyn>),
    I64(CowArray<'a, i64, IxDyn>),
    I32(CowArray<'a, i32, IxDyn>),
    Bool(CowArray<'a, bool, IxDyn>),
    F64(CowArray<'a, f64, IxDyn>),
    I8(CowArray<'a, i8, IxDyn>),
    I16(CowArray<'a, i16, IxDyn>),
    U8(CowArray<'a, u8, IxDyn>),
    U16(CowArray<'a, u16, IxDyn>),
    U32(CowArray<'a, u32, IxDyn>),
    U64(CowArray<'a, u64, IxDyn>),
    Raw(DType, &'a [u8]),
}

/// Elements per chunk of [`Bits`]: 2 KiB of `u64`s on the stack.
const BITS_CHUNK: usize = 256;

/// Elements that [`Constant::fingerprint`] reads at most.
pub const FINGERPRINT_SAMPLES: usize = 64;

impl<'a> Bits<'a> {
    fn of_tensor(t: &'a Tensor) -> Bits<'a> {
        match &t.0 {
            TensorData::F32(a) => Bits::F32(a.as_standard_layout()),
            TensorData::F16(a) => Bits::F16(a.as_standard_layout()),
            TensorData::I64(a) => Bits::I64(a.as_standard_layout()),
            TensorData::I32(a) => Bits::I32(a.as_standard_layout()),
            TensorData::Bool(a) => Bits::Bool(a.as_standard_layout()),
            TensorData::F64(a) => Bits::F64(a.as_standard_layout()),
            TensorData::I8(a) => Bits::I8(a.as_standard_layout()),
            TensorData::I16(a) => Bits::I16(a.as_standard_layout()),
            TensorData::U8(a) => Bits::U8(a.as_standard_layout()),
            TensorData::U16(a) => Bits::U16(a.as_standard_layout()),
            TensorData::U32(a) => Bits::U32(a.as_standard_layout()),
            TensorData::U64(a) => Bits::U64(a.as_standard_layout()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Bits::F32(a) => a.len(),
            Bits::F16(a) => a.len(),
            Bits::I64(a) => a.len(),
            Bits::I32(a) => a.len(),
            Bits::Bool(a) => a.len(),
            Bits::F64(a) => a.len(),
            Bits::I8(a) => a.len(),
            Bits::I16(a) => a.len(),
            Bits::U8(a) => a.len(),
            Bits::U16(a) => a.len(),
            Bits::U32(a) => a.len(),
            Bits::U64(a) => a.len(),
            Bits::Raw(dtype, data) => data.len() / raw_elem_size(*dtype).unwrap_or(1),
        }
    }

    /// Writes the bits of elements `start..` into `out` and returns how many it wrote
    /// (`out.len()` unless the elements run out).
    fn read(&self, start: usize, out: &mut [u64]) -> usize {
        fn put<T: Copy>(src: &[T], start: usize, out: &mut [u64], f: impl Fn(T) -> u64) -> usize {
            let src = src.get(start..).unwrap_or_default();
            let n = src.len().min(out.len());
            out.iter_mut().zip(&src[..n]).for_each(|(o, &v)| *o = f(v));
            n
        }
        fn raw<const W: usize>(data: &[u8], start: usize, out: &mut [u64], f: impl Fn([u8; W]) -> u64) -> usize {
            let data = data.get(start * W..).unwrap_or_default();
            let mut n = 0;
            for (o, c) in out.iter_mut().zip(data.chunks_exact(W)) {
                let mut b = [0u8; W];
                b.copy_from_slice(c);
                *o = f(b);
                n += 1;
            }
            n
        }
        // `as_standard_layout` made every dense variant contiguous, so `as_slice` succeeds.
        match self {
            Bits::F32(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v.to_bits() as u64),
            Bits::F16(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v.to_bits() as u64),
            Bits::I64(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u64),
            Bits::I32(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u32 as u64),
            Bits::Bool(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u64),
            Bits::F64(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v.to_bits()),
            Bits::I8(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u8 as u64),
            Bits::I16(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u16 as u64),
            Bits::U8(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u64),
            Bits::U16(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u64),
            Bits::U32(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v as u64),
            Bits::U64(a) => put(a.as_slice().unwrap_or_default(), start, out, |v| v),
            Bits::Raw(DType::F32 | DType::I32 | DType::U32, d) => {
                raw::<4>(d, start, out, |b| u32::from_le_bytes(b) as u64)
            }
            Bits::Raw(DType::F16 | DType::I16 | DType::U16, d) => {
                raw::<2>(d, start, out, |b| u16::from_le_bytes(b) as u64)
            }
            Bits::Raw(DType::I64 | DType::F64 | DType::U64, d) => raw::<8>(d, start, out, u64::from_le_bytes),
            Bits::Raw(DType::I8 | DType::U8, d) => raw::<1>(d, start, out, |b| b[0] as u64),
            Bits::Raw(DType::Bool, d) => raw::<1>(d, start, out, |b| (b[0] != 0) as u64),
        }
    }

    /// Calls `f` on consecutive chunks of the bits, in order.
    fn for_each_chunk(&self, mut f: impl FnMut(&[u64])) {
        let mut buf = [0u64; BITS_CHUNK];
        let mut start = 0;
        loop {
            let n = self.read(start, &mut buf);
            if n == 0 {
                break;
            }
            f(&buf[..n]);
            start += n;
        }
    }

    fn eq(&self, other: &Bits<'_>) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Raw bytes of one dtype are equal exactly when their bits are (raw never holds bool).
        if let (Bits::Raw(d1, a), Bits::Raw(d2, b)) = (self, other) {
            if d1 == d2 {
                return std::ptr::eq(*a, *b) || a == b;
            }
        }
        let (mut x, mut y) = ([0u64; BITS_CHUNK], [0u64; BITS_CHUNK]);
        let mut start = 0;
        loop {
            let n = self.read(start, &mut x);
            if n == 0 {
                return true;
            }
            if other.read(start, &mut y) != n || x[..n] != y[..n] {
                return false;
            }
            start += n;
        }
    }

    /// Hashes the element count and every element's bits (in chunks of little-endian bytes).
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        let mut bytes = [0u8; BITS_CHUNK * 8];
        self.for_each_chunk(|chunk| {
            for (b, v) in bytes.chunks_exact_mut(8).zip(chunk) {
                b.copy_from_slice(&v.to_le_bytes());
            }
            state.write(&bytes[..chunk.len() * 8]);
        });
    }
}

impl Constant {
    /// Whether the constant has tensor type `tt` (without building its type).
    pub fn has_type(&self, tt: &TensorType) -> bool {
        match self {
            Constant::Dense(t) => {
                t.dtype() == tt.dtype
                    && t.shape().len() == tt.shape.len()
                    && t.shape().iter().zip(tt.shape.iter()).all(|(&a, &b)| a as u64 == b)
            }
            Constant::Fill { ty, .. } | Constant::Raw { ty, .. } => ty == tt,
        }
    }

    /// A cheap 64-bit summary of the constant: its kind and type, and the bits of at most
    /// [`FINGERPRINT_SAMPLES`] elements spread evenly over it (all of them when it has no
    /// more; a fill by its parameters). Equal constants have equal fingerprints, and a dense
    /// constant has the fingerprint of the raw one it equals; unequal constants of one type
    /// usually differ, so a table keyed by fingerprints compares elements only for the few
    /// constants whose fingerprints meet (EliminateCommonSubexpr numbers a model's weights
    /// this way without reading them whole). It reads `O(FINGERPRINT_SAMPLES)` elements, not
    /// the whole buffer, and allocates nothing for a dense tensor in row-major layout.
    pub fn fingerprint(&self) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        match self {
            Constant::Fill { ty, fill } => {
                h.write_u8(1);
                ty.hash(&mut h);
                fill.hash(&mut h);
            }
            _ => {
                h.write_u8(0);
                if let Some((dtype, shape, bits)) = self.explicit_key() {
                    dtype.hash(&mut h);
                    shape.hash(&mut h);
                    let n = bits.len();
                    h.write_usize(n);
                    let mut one = [0u64; 1];
                    if n <= FINGERPRINT_SAMPLES {
                        bits.for_each_chunk(|chunk| chunk.iter().for_each(|&v| h.write_u64(v)));
                    } else {
                        // Evenly spread, always including the first and the last element.
                        for k in 0..FINGERPRINT_SAMPLES {
                            let at = k * (n - 1) / (FINGERPRINT_SAMPLES - 1);
                            if bits.read(at, &mut one) == 1 {
                                h.write_u64(one[0]);
                            }
                        }
                    }
                }
            }
        }
        h.finish()
    }

    /// Dtype, shape and element bits of a dense or raw constant (`None` for fills).
    fn explicit_key(&self) -> Option<(DType, Vec<usize>, Bits<'_>)> {
        match self {
            Constant::Dense(t) => Some((t.dtype(), t.shape().to_vec(), Bits::of_tensor(t))),
            Constant::Raw { ty, data } => {
                Some((ty.dtype, ty.shape.iter().map(|&d| d as usize).collect(), Bits::Raw(ty.dtype, data)))
            }
            Constant::Fill { .. } => None,
        }
    }
}

impl PartialEq for Constant {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Constant::Dense(a), Constant::Dense(b)) => a == b,
            (Constant::Fill { ty: t1, fill: f1 }, Constant::Fill { ty: t2, fill: f2 }) => t1 == t2 && f1 == f2,
            (Constant::Fill { .. }, _) | (_, Constant::Fill { .. }) => false,
            _ => match (self.explicit_key(), other.explicit_key()) {
                (Some((d1, s1, b1)), Some((d2, s2, b2))) => d1 == d2 && s1 == s2 && b1.eq(&b2),
                _ => false,
            },
        }
    }
}

impl Eq for Constant {}

impl Hash for Constant {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Constant::Fill { ty, fill } => {
                state.write_u8(1);
                ty.hash(state);
                fill.hash(state);
            }
            // Dense and raw hash alike: the same fields in the same order as `Tensor::hash`.
            _ => {
                state.write_u8(0);
                if let Some((dtype, shape, bits)) = self.explicit_key() {
                    dtype.hash(state);
                    shape.hash(state);
                    bits.hash(state);
                }
            }
        }
    }
}

impl Constant {
    /// A scalar f32 constant.
    pub fn scalar_f32(v: f32) -> Constant {
        Constant::Dense(Tensor::scalar_f32(v))
    }

    /// A raw constant of type `ty` over little-endian `data` (zero-copy: `data` is shared,
    /// not copied). The length must match the type, the dtype must not be bool, and
    /// the element count must not exceed [`MAX_MATERIALIZED_ELEMENTS`].
    pub fn raw(ty: TensorType, data: bytes::Bytes) -> Result<Constant, TensorError> {
        let size = raw_elem_size(ty.dtype).ok_or(TensorError::RawDType(ty.dtype))?;
        let n = check_size(&ty.shape)?.iter().product::<usize>();
        if n.checked_mul(size) != Some(data.len()) {
            return Err(TensorError::RawLength {
                ty: ty.shape.to_vec(),
                dtype: ty.dtype,
                expected: n as u64 * size as u64,
                found: data.len(),
            });
        }
        Ok(Constant::Raw { ty, data })
    }

    /// The constant's tensor type, without materializing it.
    pub fn tensor_type(&self) -> TensorType {
        match self {
            Constant::Dense(t) => t.tensor_type(),
            Constant::Fill { ty, .. } | Constant::Raw { ty, .. } => ty.clone(),
        }
    }

    /// The constant's type.
    pub fn ty(&self) -> Type {
        Type::from(self.tensor_type())
    }

    /// The concrete tensor. Fills larger than [`MAX_MATERIALIZED_ELEMENTS`] are an error.
    pub fn materialize(&self) -> Result<Tensor, TensorError> {
        match self {
            Constant::Dense(t) => Ok(t.clone()),
            Constant::Raw { ty, data } => decode_raw(ty, data),
            Constant::Fill { ty, fill } => match *fill {
                Fill::Full(v) => Tensor::full(&ty.shape, ty.dtype, v),
                Fill::Uniform { seed, low, high } => {
                    let n = check_size(&ty.shape)?.iter().product::<usize>();
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let vals: Vec<f64> = (0..n).map(|_| low + (high - low) * rng.gen::<f64>()).collect();
                    Tensor::from_f64s(&ty.shape, ty.dtype, &vals)
                }
                Fill::Normal { seed, mean, std } => {
                    let n = check_size(&ty.shape)?.iter().product::<usize>();
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let vals: Vec<f64> = (0..n)
                        .map(|_| {
                            let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
                            let u2: f64 = rng.gen();
                            mean + std * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
                        })
                        .collect();
                    Tensor::from_f64s(&ty.shape, ty.dtype, &vals)
                }
            },
        }
    }

    /// The scalar value as f64 if this is a rank-0 dense constant or a `Full` fill.
    pub fn as_uniform_value(&self) -> Option<f64> {
        match self {
            Constant::Dense(t) if t.len() == 1 => t.to_f64s().first().copied(),
            Constant::Fill { fill: Fill::Full(v), .. } => Some(*v),
            _ => None,
        }
    }
}

/// Decodes a raw constant (whose length [`Constant::raw`] checked) into a dense tensor: the
/// only place its bytes are copied (once, by [`Tensor::from_le_bytes`]).
fn decode_raw(ty: &TensorType, data: &[u8]) -> Result<Tensor, TensorError> {
    if ty.dtype == DType::Bool {
        return Err(TensorError::RawDType(DType::Bool));
    }
    Tensor::from_le_bytes(&ty.shape, ty.dtype, data).map_err(|e| match e {
        TensorError::WrongByteCount { .. } => {
            TensorError::RawLength { ty: ty.shape.to_vec(), dtype: ty.dtype, expected: 0, found: data.len() }
        }
        other => other,
    })
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor<{:?}, {}>", self.shape(), self.dtype())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_agree_for_equal_constants_and_sample_large_ones() {
        let vals: Vec<f64> = (0..1000).map(|i| i as f64 * 0.25).collect();
        let dense = Constant::Dense(Tensor::from_f64s(&[10, 100], DType::F32, &vals).unwrap());
        let Constant::Dense(t) = &dense else { unreachable!() };
        let ty = TensorType { shape: vec![10, 100].into(), dtype: DType::F32 };
        let raw = Constant::raw(ty.clone(), bytes::Bytes::from(t.to_le_bytes())).unwrap();
        assert_eq!(dense, raw);
        assert_eq!(dense.fingerprint(), raw.fingerprint());
        // Another shape or dtype of the same bytes differs.
        let flat = Constant::raw(
            TensorType { shape: vec![1000].into(), dtype: DType::F32 },
            bytes::Bytes::from(t.to_le_bytes()),
        );
        assert_ne!(flat.unwrap().fingerprint(), raw.fingerprint());
        // An element between the samples does not change the fingerprint; a sampled one does.
        let mut between = vals.clone();
        between[1] = -1.0;
        let between = Constant::Dense(Tensor::from_f64s(&[10, 100], DType::F32, &between).unwrap());
        assert_ne!(between, dense);
        assert_eq!(between.fingerprint(), dense.fingerprint());
        let mut last = vals;
        last[999] = -1.0;
        assert_ne!(
            Constant::Dense(Tensor::from_f64s(&[10, 100], DType::F32, &last).unwrap()).fingerprint(),
            dense.fingerprint()
        );
        // Small constants are fingerprinted whole.
        let a = Constant::Dense(Tensor::from_f64s(&[3], DType::F32, &[1.0, 2.0, 3.0]).unwrap());
        let b = Constant::Dense(Tensor::from_f64s(&[3], DType::F32, &[1.0, 2.5, 3.0]).unwrap());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let fill = Constant::Fill { ty, fill: Fill::Full(0.5) };
        assert_eq!(fill.fingerprint(), fill.clone().fingerprint());
    }

    #[test]
    fn huge_fill_is_an_error_not_an_allocation() {
        let c = Constant::Fill {
            ty: TensorType { shape: vec![1 << 20, 1 << 20, 1 << 20].into(), dtype: DType::F32 },
            fill: Fill::Full(0.0),
        };
        assert!(matches!(c.materialize(), Err(TensorError::TooLarge { .. })));
    }

    #[test]
    fn seeded_fill_is_deterministic() {
        let c = Constant::Fill {
            ty: TensorType { shape: vec![3, 5].into(), dtype: DType::F32 },
            fill: Fill::Uniform { seed: 7, low: -1.0, high: 1.0 },
        };
        let a = c.materialize().unwrap();
        let b = c.materialize().unwrap();
        assert_eq!(a, b);
        assert!(a.to_f64s().iter().all(|v| (-1.0..1.0).contains(v)));
    }

    fn hash_of(c: &Constant) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        BuildHasherDefault::<DefaultHasher>::default().hash_one(c)
    }

    #[test]
    fn raw_constant_equals_and_hashes_like_its_dense_tensor() {
        let values = [1.5f32, -0.0, f32::NAN, 3.0, 4.0, -2.25];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let ty = TensorType { shape: vec![2, 3].into(), dtype: DType::F32 };
        let raw = Constant::raw(ty, bytes::Bytes::from(bytes)).unwrap();
        let dense = Constant::Dense(
            Tensor::from_f64s(&[2, 3], DType::F32, &values.iter().map(|&v| v as f64).collect::<Vec<_>>()).unwrap(),
        );
        assert_eq!(raw, dense);
        assert_eq!(hash_of(&raw), hash_of(&dense));
        assert_eq!(raw.materialize().unwrap(), dense.materialize().unwrap());
        let other = Constant::Dense(Tensor::from_f64s(&[2, 3], DType::F32, &[0.0; 6]).unwrap());
        assert_ne!(raw, other);
        let reshaped = Constant::raw(
            TensorType { shape: vec![3, 2].into(), dtype: DType::F32 },
            bytes::Bytes::from(values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()),
        )
        .unwrap();
        assert_ne!(raw, reshaped);
    }

    #[test]
    fn raw_constant_checks_length_and_dtype() {
        let ty = TensorType { shape: vec![3].into(), dtype: DType::I64 };
        let err = Constant::raw(ty.clone(), bytes::Bytes::from(vec![0u8; 20])).unwrap_err();
        assert!(matches!(err, TensorError::RawLength { expected: 24, found: 20, .. }), "{err:?}");
        let ok = Constant::raw(ty, bytes::Bytes::from((-1i64..2).flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()));
        assert_eq!(ok.unwrap().materialize().unwrap().to_f64s(), vec![-1.0, 0.0, 1.0]);
        let b = TensorType { shape: vec![1].into(), dtype: DType::Bool };
        assert!(matches!(Constant::raw(b, bytes::Bytes::from(vec![1u8])), Err(TensorError::RawDType(DType::Bool))));
    }

    #[test]
    fn every_dtype_round_trips_through_bytes_and_raw_constants() {
        for dtype in DType::ALL {
            let vals = [0.0, 1.0, 100.0];
            let t = Tensor::from_f64s(&[3], dtype, &vals).unwrap();
            assert_eq!(t.dtype(), dtype);
            assert_eq!(t.to_f64s(), vals.map(|v| if dtype == DType::Bool { (v != 0.0) as u8 as f64 } else { v }));
            let bytes = t.to_le_bytes();
            assert_eq!(bytes.len(), 3 * dtype.size_bytes());
            assert_eq!(Tensor::from_le_bytes(&[3], dtype, &bytes).unwrap(), t);
            if dtype != DType::Bool {
                let raw = Constant::raw(t.tensor_type(), bytes::Bytes::from(bytes)).unwrap();
                assert_eq!(raw, Constant::Dense(t.clone()), "{dtype}");
                assert_eq!(hash_of(&raw), hash_of(&Constant::Dense(t.clone())), "{dtype}");
            }
        }
        // Narrow integers keep their bits: -1i8 is 0xff, u64::MAX survives.
        let t = Tensor::from_le_bytes(&[2], DType::I8, &[0xff, 0x7f]).unwrap();
        assert_eq!(t.to_f64s(), [-1.0, 127.0]);
        let m = Tensor::from_le_bytes(&[1], DType::U64, &[0xff; 8]).unwrap();
        assert!(matches!(&m.0, TensorData::U64(a) if a.iter().next() == Some(&u64::MAX)));
    }

    #[test]
    fn le_bytes_round_trip_every_bit() {
        let t = Tensor::from_le_bytes(&[3], DType::F32, &[1, 0, 0xc0, 0x7f, 0, 0, 0, 0x80, 0, 0, 0x80, 0x3f]).unwrap();
        let bits: Vec<u32> = match &t.0 {
            TensorData::F32(a) => a.iter().map(|v| v.to_bits()).collect(),
            _ => unreachable!(),
        };
        assert_eq!(bits, [0x7fc0_0001, 0x8000_0000, 0x3f80_0000]);
        assert_eq!(t.to_le_bytes(), [1, 0, 0xc0, 0x7f, 0, 0, 0, 0x80, 0, 0, 0x80, 0x3f]);
        assert!(matches!(
            Tensor::from_le_bytes(&[2], DType::I32, &[0; 7]),
            Err(TensorError::WrongByteCount { expected: 8, found: 7, .. })
        ));
        // Any non-zero byte is true, as in ONNX; the bytes written back are 0 or 1.
        let b = Tensor::from_le_bytes(&[3], DType::Bool, &[1, 0, 2]).unwrap();
        assert_eq!(b.to_le_bytes(), [1, 0, 1]);
    }

    #[test]
    fn equality_and_hash_read_every_chunk_and_any_layout() {
        // 1000 elements: several chunks of `BITS_CHUNK`, the last one partial.
        let values: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let ty = TensorType { shape: vec![10, 100].into(), dtype: DType::F32 };
        let raw = Constant::raw(ty.clone(), bytes::Bytes::from(bytes.clone())).unwrap();
        let dense = Constant::Dense(Tensor(TensorData::F32(
            ArcArray::from_shape_vec(IxDyn(&[10, 100]), values.clone()).unwrap(),
        )));
        assert_eq!(raw, dense);
        assert_eq!(hash_of(&raw), hash_of(&dense));
        // A difference in the last, partial chunk is seen, by raw and by dense comparison.
        let mut last = bytes.clone();
        last[999 * 4] ^= 1;
        let raw_last = Constant::raw(ty, bytes::Bytes::from(last)).unwrap();
        assert_ne!(raw, raw_last);
        assert_ne!(dense, raw_last);
        // A transposed (column-major) view compares by its logical, row-major elements.
        let v = &values;
        let t: Vec<f32> = (0..100).flat_map(|j| (0..10).map(move |i| v[i * 100 + j])).collect();
        let transposed = ArcArray::from_shape_vec(IxDyn(&[100, 10]), t).unwrap().reversed_axes();
        assert!(!transposed.is_standard_layout());
        let view = Constant::Dense(Tensor(TensorData::F32(transposed)));
        assert_eq!(view, dense);
        assert_eq!(hash_of(&view), hash_of(&dense));
    }

    #[test]
    fn tensor_equality_is_bitwise() {
        let nan = Tensor::scalar_f32(f32::NAN);
        assert_eq!(nan, nan.clone());
        assert_ne!(Tensor::scalar_f32(0.0), Tensor::scalar_f32(-0.0));
    }
}
