//! ONNX `TensorProto`s and element types to passel constants and dtypes.
//!
//! `raw_data`, external data and `float_data` written packed in one run (the little-endian
//! `f32`s, byte for byte what `raw_data` holds) become [`Constant::Raw`] slices of the shared
//! buffer (no copy); tensors of fewer than [`DENSE_BELOW`] elements and the other typed
//! repeated fields (`int64_data`, unpacked `float_data`, …) become dense tensors, so that small
//! values such as shape vectors and scalars look to the passes exactly like constants written
//! in text. The decoded tensor is taken by value, so its repeated fields move into the
//! constant instead of being copied.

use bytes::Bytes;
use half::f16;
use ndarray::{ArcArray, IxDyn};

use super::proto::onnx as pb;
use super::proto::shallow::PackedFloats;
use super::{ExternalData, TensorProtoError as E};
use crate::ir::{Constant, DType, Tensor, TensorData, TensorType, MAX_MATERIALIZED_ELEMENTS, MAX_RANK};

/// Raw tensors with fewer elements than this are decoded to dense tensors at import.
pub(super) const DENSE_BELOW: u64 = 64;

/// The ONNX name of element type `t` (for messages).
pub(super) fn onnx_dtype_name(t: i32) -> String {
    use pb::tensor_proto::DataType;
    match DataType::try_from(t) {
        Ok(d) => d.as_str_name().to_lowercase(),
        Err(_) => format!("unknown element type {t}"),
    }
}

/// The passel dtype of ONNX element type `t`.
pub(super) fn dtype_of(t: i32) -> Result<DType, E> {
    use pb::tensor_proto::DataType;
    match DataType::try_from(t) {
        Ok(DataType::Float) => Ok(DType::F32),
        Ok(DataType::Float16) => Ok(DType::F16),
        Ok(DataType::Double) => Ok(DType::F64),
        Ok(DataType::Int64) => Ok(DType::I64),
        Ok(DataType::Int32) => Ok(DType::I32),
        Ok(DataType::Int16) => Ok(DType::I16),
        Ok(DataType::Int8) => Ok(DType::I8),
        Ok(DataType::Uint64) => Ok(DType::U64),
        Ok(DataType::Uint32) => Ok(DType::U32),
        Ok(DataType::Uint16) => Ok(DType::U16),
        Ok(DataType::Uint8) => Ok(DType::U8),
        Ok(DataType::Bool) => Ok(DType::Bool),
        _ => Err(E::Dtype(onnx_dtype_name(t))),
    }
}

/// The shape of `t`: at most [`MAX_RANK`] non-negative dims whose element count fits the
/// materialization limit (a weight bigger than 2^28 elements is rejected, not silently
/// truncated).
fn shape_of(t: &pb::TensorProto) -> Result<Vec<u64>, E> {
    if t.dims.len() > MAX_RANK {
        return Err(E::Rank(t.dims.len()));
    }
    let mut n: u64 = 1;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        let d = u64::try_from(d).map_err(|_| E::NegativeDim(d))?;
        n = n.checked_mul(d).ok_or_else(|| E::Overflow(t.dims.clone()))?;
        shape.push(d);
    }
    if n > MAX_MATERIALIZED_ELEMENTS {
        return Err(E::TooLarge(n));
    }
    Ok(shape)
}

/// The bytes of an external-data tensor, through `ext`.
fn external_bytes(t: &pb::TensorProto, ext: Option<&dyn ExternalData>) -> Result<Bytes, E> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for entry in &t.external_data {
        match entry.key() {
            "location" => location = Some(entry.value()),
            "offset" => offset = entry.value().parse().map_err(|_| bad_field("offset", entry.value()))?,
            "length" => length = Some(entry.value().parse::<u64>().map_err(|_| bad_field("length", entry.value()))?),
            "checksum" => {}
            k => return Err(E::ExternalKey(k.to_string())),
        }
    }
    let location = location.ok_or(E::NoLocation)?;
    let ext = ext.ok_or_else(|| E::NoReader(location.to_string()))?;
    let file = ext.load(location).map_err(|error| E::External { location: location.to_string(), error })?;
    let len = file.len() as u64;
    let end = match length {
        Some(l) => offset.checked_add(l),
        None => Some(len),
    };
    match end {
        Some(end) if offset <= end && end <= len => Ok(file.slice(offset as usize..end as usize)),
        _ => Err(E::Range { location: location.to_string(), offset, length, len }),
    }
}

fn bad_field(key: &'static str, value: &str) -> E {
    E::ExternalField { key, value: value.to_string() }
}

/// The dense constant of `values` in `shape` (their count was checked by [`check_count`]).
fn dense<T>(shape: &[u64], values: Vec<T>, wrap: fn(ArcArray<T, IxDyn>) -> TensorData) -> Result<Constant, E> {
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let found = values.len();
    ArcArray::from_shape_vec(IxDyn(&dims), values).map(|a| Constant::Dense(Tensor(wrap(a)))).map_err(|_| E::Count {
        shape: shape.to_vec(),
        needed: shape.iter().product(),
        field: "values",
        found,
    })
}

fn check_count(shape: &[u64], found: usize, field: &'static str) -> Result<(), E> {
    let needed: u64 = shape.iter().product();
    if needed != found as u64 {
        return Err(E::Count { shape: shape.to_vec(), needed, field, found });
    }
    Ok(())
}

/// The constant of tensor `t` (an initializer, a Constant's value or an attribute tensor).
/// `packed` is the same tensor's `float_data` seen as packed runs ([`PackedFloats`]), when it
/// decoded as such.
pub(super) fn constant(
    t: pb::TensorProto,
    packed: Option<PackedFloats>,
    ext: Option<&dyn ExternalData>,
) -> Result<Constant, E> {
    let dtype = dtype_of(t.data_type())?;
    if t.segment.is_some() {
        return Err(E::Segmented);
    }
    let shape = shape_of(&t)?;
    let n: u64 = shape.iter().product();
    let external = t.data_location() == pb::tensor_proto::DataLocation::External;
    let raw = if external { Some(external_bytes(&t, ext)?) } else { t.raw_data.clone() };
    // One packed run of `float_data` holds exactly the bytes `raw_data` would.
    let packed = match packed {
        Some(mut p) if raw.is_none() && dtype == DType::F32 && !t.float_data.is_empty() && p.float_data.len() == 1 => {
            p.float_data.pop()
        }
        _ => None,
    };
    if let Some(raw) = raw.or(packed) {
        if dtype == DType::Bool {
            // Raw constants hold no booleans: decode at once, by the one byte decoder.
            return Ok(Tensor::from_le_bytes(&shape, dtype, &raw).map(Constant::Dense)?);
        }
        let ty = TensorType { shape: shape.into(), dtype };
        let c = Constant::raw(ty, raw)?;
        return if n < DENSE_BELOW { Ok(c.materialize().map(Constant::Dense)?) } else { Ok(c) };
    }
    match dtype {
        DType::F32 => {
            check_count(&shape, t.float_data.len(), "float_data")?;
            dense(&shape, exact(t.float_data), TensorData::F32)
        }
        DType::I64 => {
            check_count(&shape, t.int64_data.len(), "int64_data")?;
            dense(&shape, exact(t.int64_data), TensorData::I64)
        }
        DType::I32 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, exact(t.int32_data), TensorData::I32)
        }
        DType::F16 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| f16::from_bits(v as u16)).collect(), TensorData::F16)
        }
        DType::Bool => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| v != 0).collect(), TensorData::Bool)
        }
        DType::F64 => {
            check_count(&shape, t.double_data.len(), "double_data")?;
            dense(&shape, exact(t.double_data), TensorData::F64)
        }
        // ONNX stores the narrow integers one per `int32_data` entry, and uint32 / uint64 in
        // `uint64_data`; each value is taken modulo its type's width, as onnx's numpy_helper does.
        DType::I8 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| v as i8).collect(), TensorData::I8)
        }
        DType::I16 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| v as i16).collect(), TensorData::I16)
        }
        DType::U8 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| v as u8).collect(), TensorData::U8)
        }
        DType::U16 => {
            check_count(&shape, t.int32_data.len(), "int32_data")?;
            dense(&shape, t.int32_data.iter().map(|&v| v as u16).collect(), TensorData::U16)
        }
        DType::U32 => {
            check_count(&shape, t.uint64_data.len(), "uint64_data")?;
            dense(&shape, t.uint64_data.iter().map(|&v| v as u32).collect(), TensorData::U32)
        }
        DType::U64 => {
            check_count(&shape, t.uint64_data.len(), "uint64_data")?;
            dense(&shape, exact(t.uint64_data), TensorData::U64)
        }
    }
}

/// `values` without the spare capacity decoding left (a decoded repeated field grows by
/// doubling, and the constant keeps its buffer).
fn exact<T>(mut values: Vec<T>) -> Vec<T> {
    values.shrink_to_fit();
    values
}

/// The elements of an integer tensor as exact `i64`s (`None` for float or bool tensors).
pub(super) fn tensor_i64s(t: &Tensor) -> Option<Vec<i64>> {
    match &t.0 {
        TensorData::I64(a) => Some(a.iter().copied().collect()),
        TensorData::I32(a) => Some(a.iter().map(|&v| v as i64).collect()),
        TensorData::I16(a) => Some(a.iter().map(|&v| v as i64).collect()),
        TensorData::I8(a) => Some(a.iter().map(|&v| v as i64).collect()),
        TensorData::U8(a) => Some(a.iter().map(|&v| v as i64).collect()),
        TensorData::U16(a) => Some(a.iter().map(|&v| v as i64).collect()),
        TensorData::U32(a) => Some(a.iter().map(|&v| v as i64).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_onnx_element_type_has_a_dtype_and_the_rest_are_named_errors() {
        use pb::tensor_proto::DataType as D;
        let pairs = [
            (D::Float, DType::F32),
            (D::Float16, DType::F16),
            (D::Double, DType::F64),
            (D::Int8, DType::I8),
            (D::Int16, DType::I16),
            (D::Int32, DType::I32),
            (D::Int64, DType::I64),
            (D::Uint8, DType::U8),
            (D::Uint16, DType::U16),
            (D::Uint32, DType::U32),
            (D::Uint64, DType::U64),
            (D::Bool, DType::Bool),
        ];
        for (onnx, dtype) in pairs {
            assert_eq!(dtype_of(onnx as i32).ok(), Some(dtype));
        }
        let err = dtype_of(D::Complex64 as i32).unwrap_err().to_string();
        assert!(err.starts_with("element type complex64 is not supported"), "{err}");
        assert!(dtype_of(D::String as i32).is_err());
    }
}
