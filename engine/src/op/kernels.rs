//! Type relations and reference kernels (placeholder set, extended by the full op library).

use super::{KernelCtx, OpError};
use crate::ir::{Attrs, Tensor, TensorData, Type};

/// Result type = the single argument's type.
pub fn identity_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    Ok(args[0].clone())
}

/// Numpy broadcasting of two tensor types with the same dtype.
pub fn broadcast_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    let (Some(a), Some(b)) = (args[0].as_tensor(), args[1].as_tensor()) else {
        return Err(OpError::Type("expected tensor arguments".into()));
    };
    if a.dtype != b.dtype {
        return Err(OpError::Type(format!("dtype mismatch: {} vs {}", a.dtype, b.dtype)));
    }
    let n = a.shape.len().max(b.shape.len());
    let mut out = vec![0u64; n];
    for i in 0..n {
        let da = if i + a.shape.len() >= n { a.shape[i + a.shape.len() - n] } else { 1 };
        let db = if i + b.shape.len() >= n { b.shape[i + b.shape.len() - n] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(OpError::Type(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape))),
        };
    }
    Ok(Type::tensor(out, a.dtype))
}

/// `add`.
pub fn add(args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError> {
    match (&args[0].0, &args[1].0) {
        (TensorData::F32(a), TensorData::F32(b)) => Ok(vec![Tensor(TensorData::F32((a + b).into_shared()))]),
        _ => Err(OpError::Invalid("add: unsupported dtypes".into())),
    }
}

/// `relu`.
pub fn relu(args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError> {
    match &args[0].0 {
        TensorData::F32(a) => Ok(vec![Tensor(TensorData::F32(a.mapv(|v| v.max(0.0)).into_shared()))]),
        _ => Err(OpError::Invalid("relu: unsupported dtype".into())),
    }
}
