//! Element-wise indexing: `gather_elements` (ONNX GatherElements), `scatter_elements` (ONNX
//! ScatterElements and the older Scatter) and `scatter_nd` (ONNX ScatterND). They work on
//! every dtype; indices are i32 or i64, and a negative index counts from the end.
//!
//! The scatters copy `data` and write `updates` into the copy in the row-major order of the
//! indices, so with `reduction` "none" a repeated index keeps the last update (what onnx's
//! reference does; the spec leaves it undefined), and with "add", "mul", "max" or "min" every
//! update is combined into the element.

use super::elementwise::IntElem;
use super::{
    arr, attr_choice, attr_int, check_arity, invalid, norm_axis, out_dims, shape_str, tensor_arg, type_err, types_of,
    with_elem, with_int, Elem, KResult,
};
use crate::ir::{Attrs, DType, Tensor, TensorType, Type};
use crate::op::{KernelCtx, OpError};

/// The reductions of the scatters; "none" replaces.
const REDUCTIONS: &[&str] = &["none", "add", "mul", "max", "min"];

fn index_dtype(op: &str, t: &TensorType) -> Result<(), OpError> {
    if matches!(t.dtype, DType::I32 | DType::I64) {
        Ok(())
    } else {
        Err(type_err(op, format_args!("indices must have dtype i32 or i64, got {}", t.dtype)))
    }
}

/// The indices of `t` (i32 or i64) as i64.
pub(crate) fn index_values(op: &str, t: &Tensor) -> Result<Vec<i64>, OpError> {
    match t.dtype() {
        DType::I32 => Ok(arr::<i32>(op, t)?.iter().map(|&v| v as i64).collect()),
        _ => Ok(arr::<i64>(op, t)?.iter().copied().collect()),
    }
}

/// `i` (negative counts from the end) as an index into an axis of length `dim`.
pub(crate) fn wrap_index(op: &str, i: i64, dim: usize, axis: usize) -> Result<usize, OpError> {
    let d = dim as i64;
    let j = if i < 0 { i + d } else { i };
    if (0..d).contains(&j) {
        Ok(j as usize)
    } else {
        Err(invalid(op, format_args!("index {i} is out of range for axis {axis} of length {dim}")))
    }
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1] * shape[a + 1];
    }
    s
}

/// Calls `f` with every row-major multi-index of `shape` and its flat position.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize], usize) -> Result<(), OpError>) -> Result<(), OpError> {
    let total: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    for flat in 0..total {
        f(&idx, flat)?;
        for a in (0..shape.len()).rev() {
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    Ok(())
}

/// `indices` and `data` have one rank, and `indices` is no longer than `data` on every axis
/// but `axis` (so each index addresses an element of `data`).
fn elements_shapes(op: &str, data: &TensorType, ind: &TensorType, axis: usize) -> Result<(), OpError> {
    if ind.shape.len() != data.shape.len()
        || ind.shape.iter().zip(&data.shape).enumerate().any(|(a, (&i, &d))| a != axis && i > d)
    {
        return Err(type_err(
            op,
            format_args!(
                "indices of shape {} do not fit data of shape {} (same rank, no longer on axes other than {axis})",
                shape_str(&ind.shape),
                shape_str(&data.shape)
            ),
        ));
    }
    Ok(())
}

// ---- gather_elements ----

/// Type relation of `gather_elements(data, indices, axis=0)`: the result has the indices'
/// shape and the data's dtype.
pub(crate) fn gather_elements_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "gather_elements";
    check_arity(op, args.len(), 2)?;
    let data = tensor_arg(op, args, 0)?;
    let ind = tensor_arg(op, args, 1)?;
    index_dtype(op, ind)?;
    if data.shape.is_empty() {
        return Err(type_err(op, "the data must have rank 1 or more"));
    }
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, data.shape.len())?;
    elements_shapes(op, data, ind, axis)?;
    Ok(Type::tensor(ind.shape.to_vec(), data.dtype))
}

/// Kernel of `gather_elements`: `out[i] = data[i with axis replaced by indices[i]]`.
pub(crate) fn gather_elements(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "gather_elements";
    let ty = gather_elements_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let ds = args[0].shape().to_vec();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, ds.len())?;
    let st = strides(&ds);
    let ind = index_values(op, &args[1])?;
    let mut src = Vec::with_capacity(ind.len());
    for_each_index(&shape, |idx, flat| {
        let j = wrap_index(op, ind[flat], ds[axis], axis)?;
        src.push(idx.iter().zip(&st).enumerate().map(|(a, (&i, &s))| if a == axis { j * s } else { i * s }).sum());
        Ok(())
    })?;
    let out = with_elem!(dtype, T => {
        let a = arr::<T>(op, &args[0])?;
        let flat: Vec<T> = a.iter().copied().collect();
        let v: Vec<T> = src.iter().map(|&p: &usize| flat[p]).collect();
        T::wrap(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).map_err(|e| invalid(op, e))?.into_shared())
    });
    Ok(vec![out])
}

// ---- scatter_elements / scatter_nd ----

/// `data` with `updates[k]` combined into position `targets[k]` (flat), in order.
fn scatter_into(
    op: &str,
    data: &Tensor,
    updates: &Tensor,
    targets: &[usize],
    reduction: &str,
) -> Result<Tensor, OpError> {
    let dtype = data.dtype();
    if dtype.is_float() {
        with_elem!(dtype, T => scatter_typed::<T>(op, data, updates, targets, reduction, |a: T, b: T, r| {
            let (x, y) = (a.to_f64(), b.to_f64());
            T::from_f64(match r {
                "add" => x + y,
                "mul" => x * y,
                "max" => if x.is_nan() || y.is_nan() { f64::NAN } else { x.max(y) },
                "min" => if x.is_nan() || y.is_nan() { f64::NAN } else { x.min(y) },
                _ => y,
            })
        }))
    } else if dtype == DType::Bool {
        scatter_typed::<bool>(op, data, updates, targets, reduction, |a, b, r| match r {
            "add" | "max" => a | b,
            "mul" | "min" => a & b,
            _ => b,
        })
    } else {
        with_int!(dtype, T => scatter_typed::<T>(op, data, updates, targets, reduction, |a: T, b: T, r| match r {
            "add" => a.wadd(b),
            "mul" => a.wmul(b),
            "max" => a.max(b),
            "min" => a.min(b),
            _ => b,
        }))
    }
}

fn scatter_typed<T: Elem>(
    op: &str,
    data: &Tensor,
    updates: &Tensor,
    targets: &[usize],
    reduction: &str,
    combine: impl Fn(T, T, &str) -> T,
) -> Result<Tensor, OpError> {
    let mut out = arr::<T>(op, data)?.to_owned();
    let flat = out.as_slice_mut().ok_or_else(|| invalid(op, "the data copy is not contiguous"))?;
    let upd: Vec<T> = arr::<T>(op, updates)?.iter().copied().collect();
    for (&t, &u) in targets.iter().zip(&upd) {
        flat[t] = combine(flat[t], u, reduction);
    }
    Ok(T::wrap(out.into_shared()))
}

/// Type relation of `scatter_elements(data, indices, updates, axis=0, reduction="none")`: the
/// updates have the indices' shape and the data's dtype; the result has the data's type.
pub(crate) fn scatter_elements_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "scatter_elements";
    check_arity(op, args.len(), 3)?;
    let data = tensor_arg(op, args, 0)?;
    let ind = tensor_arg(op, args, 1)?;
    let upd = tensor_arg(op, args, 2)?;
    index_dtype(op, ind)?;
    if data.shape.is_empty() {
        return Err(type_err(op, "the data must have rank 1 or more"));
    }
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, data.shape.len())?;
    elements_shapes(op, data, ind, axis)?;
    if upd.shape != ind.shape || upd.dtype != data.dtype {
        return Err(type_err(
            op,
            format_args!(
                "updates must have the indices' shape {} and the data's dtype {}, got {}",
                shape_str(&ind.shape),
                data.dtype,
                Type::tensor(upd.shape.to_vec(), upd.dtype)
            ),
        ));
    }
    attr_choice(op, attrs, "reduction", REDUCTIONS)?;
    Ok(args[0].clone())
}

/// Kernel of `scatter_elements`.
pub(crate) fn scatter_elements(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "scatter_elements";
    let ty = scatter_elements_rel(&types_of(args), attrs)?;
    out_dims(&ty)?;
    let reduction = attr_choice(op, attrs, "reduction", REDUCTIONS)?;
    let ds = args[0].shape().to_vec();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, ds.len())?;
    let st = strides(&ds);
    let ind = index_values(op, &args[1])?;
    let mut targets = Vec::with_capacity(ind.len());
    for_each_index(args[1].shape(), |idx, flat| {
        let j = wrap_index(op, ind[flat], ds[axis], axis)?;
        targets.push(idx.iter().zip(&st).enumerate().map(|(a, (&i, &s))| if a == axis { j * s } else { i * s }).sum());
        Ok(())
    })?;
    Ok(vec![scatter_into(op, &args[0], &args[2], &targets, reduction)?])
}

/// Type relation of `scatter_nd(data, indices, updates, reduction="none")`: indices
/// `[…, k]` address the first `k` axes of the data, and the updates have shape
/// `indices.shape[:-1] + data.shape[k:]`; the result has the data's type.
pub(crate) fn scatter_nd_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "scatter_nd";
    check_arity(op, args.len(), 3)?;
    let data = tensor_arg(op, args, 0)?;
    let ind = tensor_arg(op, args, 1)?;
    let upd = tensor_arg(op, args, 2)?;
    index_dtype(op, ind)?;
    let k = *ind.shape.last().ok_or_else(|| type_err(op, "the indices must have rank 1 or more"))?;
    if k == 0 || k as usize > data.shape.len() {
        return Err(type_err(
            op,
            format_args!("the indices' last dimension {k} must be between 1 and the data's rank {}", data.shape.len()),
        ));
    }
    let mut want = ind.shape[..ind.shape.len() - 1].to_vec();
    want.extend_from_slice(&data.shape[k as usize..]);
    if upd.shape[..] != want[..] || upd.dtype != data.dtype {
        return Err(type_err(
            op,
            format_args!(
                "updates must have shape {} and the data's dtype {}, got {}",
                shape_str(&want),
                data.dtype,
                Type::tensor(upd.shape.to_vec(), upd.dtype)
            ),
        ));
    }
    attr_choice(op, attrs, "reduction", REDUCTIONS)?;
    Ok(args[0].clone())
}

/// Kernel of `scatter_nd`.
pub(crate) fn scatter_nd(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "scatter_nd";
    let ty = scatter_nd_rel(&types_of(args), attrs)?;
    out_dims(&ty)?;
    let reduction = attr_choice(op, attrs, "reduction", REDUCTIONS)?;
    let ds = args[0].shape().to_vec();
    let is = args[1].shape();
    let k = is[is.len() - 1];
    let st = strides(&ds);
    let slice: usize = ds[k..].iter().product();
    let ind = index_values(op, &args[1])?;
    let mut targets = Vec::with_capacity(args[2].len());
    for row in ind.chunks(k.max(1)) {
        let mut base = 0;
        for (a, &i) in row.iter().enumerate() {
            base += wrap_index(op, i, ds[a], a)? * st[a];
        }
        targets.extend(base..base + slice);
    }
    Ok(vec![scatter_into(op, &args[0], &args[2], &targets, reduction)?])
}
