//! Operators that create tensors from attributes alone: `zeros`, `ones` and the stateful
//! `random_uniform`.

use rand::Rng;

use super::{attr_dtype, attr_float, attr_shape, check_arity, dims_usize, out_dims, type_err, KResult};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// Type relation of `zeros` / `ones(shape=[…], dtype=f32)`.
pub(crate) fn fill_rel(op: &str, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 0)?;
    let shape = attr_shape(op, attrs, "shape")?;
    let dtype = attr_dtype(op, attrs, "dtype", Some(DType::F32))?;
    Ok(Type::tensor(shape, dtype))
}

/// Kernel of `zeros` / `ones`. An absurd shape is a [`crate::ir::TensorError::TooLarge`].
pub(crate) fn fill(op: &str, value: f64, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = fill_rel(op, &[], attrs)?;
    check_arity(op, args.len(), 0)?;
    let Some(t) = ty.as_tensor() else { return Err(type_err(op, "expected a tensor result type")) };
    Ok(vec![Tensor::full(&t.shape, t.dtype, value)?])
}

fn uniform_params(args: &[Type], attrs: &Attrs) -> Result<(Type, f64, f64), OpError> {
    let op = "random_uniform";
    check_arity(op, args.len(), 0)?;
    let shape = attr_shape(op, attrs, "shape")?;
    let dtype = attr_dtype(op, attrs, "dtype", Some(DType::F32))?;
    if !dtype.is_float() {
        return Err(type_err(op, format_args!("`dtype` must be f32, f16 or f64, got {dtype}")));
    }
    let low = attr_float(op, attrs, "low", 0.0)?;
    let high = attr_float(op, attrs, "high", 1.0)?;
    if !(low.is_finite() && high.is_finite() && low <= high) {
        return Err(type_err(op, format_args!("bounds must be finite with low <= high, got [{low}, {high})")));
    }
    Ok((Type::tensor(shape, dtype), low, high))
}

/// Type relation of `random_uniform(shape=[…], dtype=f32, low=0.0, high=1.0)`.
pub(crate) fn random_uniform_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    uniform_params(args, attrs).map(|(ty, _, _)| ty)
}

/// Kernel of `random_uniform`: draws row-major from the interpreter's random stream, so the
/// values depend on the seed and on how many draws came before.
pub(crate) fn random_uniform(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let (ty, low, high) = uniform_params(&[], attrs)?;
    check_arity("random_uniform", args.len(), 0)?;
    let (dims, dtype) = out_dims(&ty)?;
    let n: usize = dims.iter().product();
    let vals: Vec<f64> = (0..n).map(|_| low + (high - low) * ctx.rng.gen::<f64>()).collect();
    let shape: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    dims_usize(&shape)?;
    Ok(vec![Tensor::from_f64s(&shape, dtype, &vals)?])
}
