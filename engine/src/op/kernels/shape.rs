//! Injective operators that rearrange elements: `reshape`, `transpose`, `concatenate`,
//! `split` and `broadcast_to`, and `bitcast`, which reinterprets them. They work on every
//! dtype.

use ndarray::{ArrayView, Axis, IxDyn, Slice};

use super::{
    arr, attr_int, attr_ints, attr_shape, check_dims, invalid, norm_axis, out_dims, shape_str, tensor_arg, type_err,
    types_of, with_elem, Elem, KResult,
};
use crate::ir::{Attrs, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// `t` with its elements in row-major order laid out as `dims` (same element count).
pub(crate) fn reshape_tensor(op: &str, t: &Tensor, dims: &[usize]) -> Result<Tensor, OpError> {
    with_elem!(t.dtype(), T => {
        let a = arr::<T>(op, t)?;
        let r = a.to_shape(IxDyn(dims)).map_err(|e| invalid(op, format_args!("cannot reshape: {e}")))?;
        Ok(T::wrap(r.into_owned().into_shared()))
    })
}

// ---- reshape ----

/// Type relation of `reshape(x, newshape=[…])`. One dimension may be `-1`, inferred from the
/// element count; `0` is a literal zero-sized dimension (not TVM's "copy this dimension").
pub(crate) fn reshape_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "reshape";
    super::check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let spec = attr_ints(op, attrs, "newshape")?.ok_or_else(|| type_err(op, "missing attribute `newshape`"))?;
    let total = x.num_elements().ok_or_else(|| type_err(op, "input element count overflows"))?;
    let mut infer = None;
    let mut known = 1u64;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => return Err(type_err(op, "`newshape` may contain at most one -1")),
            d if d < 0 => return Err(type_err(op, format_args!("invalid dimension {d} in `newshape`"))),
            d => known = known.checked_mul(d as u64).ok_or_else(|| type_err(op, "`newshape` overflows"))?,
        }
    }
    let mut shape: Vec<u64> = spec.iter().map(|&d| d.max(0) as u64).collect();
    let mismatch = || {
        type_err(op, format_args!("cannot reshape {} ({total} elements) to {}", shape_str(&x.shape), shape_str(spec)))
    };
    match infer {
        Some(i) => {
            if known == 0 || total % known != 0 {
                return Err(mismatch());
            }
            shape[i] = total / known;
        }
        None if known != total => return Err(mismatch()),
        None => {}
    }
    Ok(Type::tensor(shape, x.dtype))
}

/// Kernel of `reshape`.
pub(crate) fn reshape(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = reshape_rel(&types_of(args), attrs)?;
    let (shape, _) = out_dims(&ty)?;
    Ok(vec![reshape_tensor("reshape", &args[0], &shape)?])
}

// ---- transpose ----

fn transpose_axes(op: &str, attrs: &Attrs, rank: usize) -> Result<Vec<usize>, OpError> {
    let Some(axes) = attr_ints(op, attrs, "axes")? else {
        return Ok((0..rank).rev().collect());
    };
    if axes.len() != rank {
        return Err(type_err(op, format_args!("`axes` has {} entries for a tensor of rank {rank}", axes.len())));
    }
    let axes = axes.iter().map(|&a| norm_axis(op, a, rank)).collect::<Result<Vec<_>, _>>()?;
    let mut seen = vec![false; rank];
    for &a in &axes {
        if std::mem::replace(&mut seen[a], true) {
            return Err(type_err(op, format_args!("`axes` repeats axis {a}")));
        }
    }
    Ok(axes)
}

/// Type relation of `transpose(x, axes=[…])`; without `axes` the dimensions are reversed.
pub(crate) fn transpose_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "transpose";
    super::check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let axes = transpose_axes(op, attrs, x.shape.len())?;
    Ok(Type::tensor(axes.iter().map(|&a| x.shape[a]).collect::<Vec<_>>(), x.dtype))
}

/// Kernel of `transpose` (a strided view; no copy).
pub(crate) fn transpose(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "transpose";
    transpose_rel(&types_of(args), attrs)?;
    let axes = transpose_axes(op, attrs, args[0].shape().len())?;
    let out = with_elem!(args[0].dtype(), T => T::wrap(arr::<T>(op, &args[0])?.clone().permuted_axes(IxDyn(&axes))));
    Ok(vec![out])
}

// ---- concatenate ----

/// Type relation of `concatenate(a, b, …, axis=0)`: same dtype and rank, equal dimensions
/// except along `axis`.
pub(crate) fn concatenate_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "concatenate";
    let first = tensor_arg(op, args, 0)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, first.shape.len())?;
    let mut shape = first.shape.to_vec();
    for i in 1..args.len() {
        let t = tensor_arg(op, args, i)?;
        super::same_dtype(op, first, t)?;
        let compatible = t.shape.len() == first.shape.len()
            && t.shape.iter().zip(first.shape.iter()).enumerate().all(|(d, (a, b))| d == axis || a == b);
        if !compatible {
            return Err(type_err(
                op,
                format_args!(
                    "argument {} has shape {}, incompatible with {} along axis {axis}",
                    i + 1,
                    shape_str(&t.shape),
                    shape_str(&first.shape)
                ),
            ));
        }
        shape[axis] = shape[axis].checked_add(t.shape[axis]).ok_or_else(|| type_err(op, "result too large"))?;
    }
    Ok(Type::tensor(shape, first.dtype))
}

/// Kernel of `concatenate`.
pub(crate) fn concatenate(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "concatenate";
    let ty = concatenate_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, shape.len())?;
    let out = with_elem!(dtype, T => {
        let views: Vec<ArrayView<'_, T, IxDyn>> =
            args.iter().map(|t| arr::<T>(op, t).map(|a| a.view())).collect::<Result<_, _>>()?;
        let r = ndarray::concatenate(Axis(axis), &views).map_err(|e| invalid(op, e))?;
        T::wrap(r.into_shared())
    });
    Ok(vec![out])
}

// ---- split ----

const MAX_SECTIONS: u64 = 1 << 16;

/// The `[start, end)` ranges of `split`'s parts along its axis, the axis, and the result type.
type SplitPlan = (usize, Vec<(u64, u64)>, Type);

fn split_plan(args: &[Type], attrs: &Attrs) -> Result<SplitPlan, OpError> {
    let op = "split";
    super::check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, x.shape.len())?;
    let len = x.shape[axis];
    let ranges: Vec<(u64, u64)> = match (attrs.get("indices_or_sections").is_some(), attr_ints(op, attrs, "indices")?) {
        (true, None) => {
            let sections = attr_int(op, attrs, "indices_or_sections", 0)?;
            if sections < 1 {
                return Err(type_err(
                    op,
                    format_args!("`indices_or_sections` must be a positive count, got {sections}"),
                ));
            }
            let sections = sections as u64;
            if len % sections != 0 {
                return Err(type_err(
                    op,
                    format_args!(
                        "axis {axis} of {} (length {len}) does not split into {sections} equal sections",
                        shape_str(&x.shape)
                    ),
                ));
            }
            // The tuple type has one field per section; keep it a sane size.
            if sections > MAX_SECTIONS {
                return Err(type_err(op, format_args!("too many sections: {sections} (limit {MAX_SECTIONS})")));
            }
            let part = len / sections;
            (0..sections).map(|i| (i * part, (i + 1) * part)).collect()
        }
        (false, Some(points)) => {
            if points.len() as u64 >= MAX_SECTIONS {
                return Err(type_err(
                    op,
                    format_args!("too many sections: {} (limit {MAX_SECTIONS})", points.len() + 1),
                ));
            }
            let mut prev = 0u64;
            let mut ranges = Vec::with_capacity(points.len() + 1);
            for &p in points {
                match u64::try_from(p) {
                    Ok(p) if p >= prev && p <= len => {
                        ranges.push((prev, p));
                        prev = p;
                    }
                    _ => {
                        return Err(type_err(
                            op,
                            format_args!(
                                "`indices` must be ascending split points in [0, {len}] (axis {axis} of {}), got {points:?}",
                                shape_str(&x.shape)
                            ),
                        ))
                    }
                }
            }
            ranges.push((prev, len));
            ranges
        }
        _ => return Err(type_err(op, "exactly one of `indices_or_sections` and `indices` must be given")),
    };
    let fields: Vec<Type> = ranges
        .iter()
        .map(|&(b, e)| {
            let mut shape = x.shape.to_vec();
            shape[axis] = e - b;
            Type::tensor(shape, x.dtype)
        })
        .collect();
    Ok((axis, ranges, Type::tuple(fields)))
}

/// Type relation of `split(x, indices_or_sections=n | indices=[…], axis=0)`: a tuple of `n`
/// equal parts, or of the parts between TVM-style split points (`[2, 5]` on length 7 gives
/// lengths 2, 3, 2).
pub(crate) fn split_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    split_plan(args, attrs).map(|(_, _, ty)| ty)
}

/// Kernel of `split`.
pub(crate) fn split(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "split";
    let (axis, ranges, _) = split_plan(&types_of(args), attrs)?;
    with_elem!(args[0].dtype(), T => {
        let a = arr::<T>(op, &args[0])?;
        Ok(ranges
            .iter()
            .map(|&(b, e)| {
                let part = a.slice_axis(Axis(axis), Slice::from(b as usize..e as usize));
                T::wrap(part.to_owned().into_shared())
            })
            .collect())
    })
}

// ---- broadcast_to ----

/// Type relation of `broadcast_to(x, shape=[…])` under numpy's rules.
pub(crate) fn broadcast_to_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "broadcast_to";
    super::check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let target = attr_shape(op, attrs, "shape")?;
    let ok =
        x.shape.len() <= target.len() && x.shape.iter().rev().zip(target.iter().rev()).all(|(&d, &t)| d == t || d == 1);
    if !ok {
        return Err(type_err(op, format_args!("cannot broadcast {} to {}", shape_str(&x.shape), shape_str(&target))));
    }
    Ok(Type::tensor(target, x.dtype))
}

/// Kernel of `broadcast_to`.
pub(crate) fn broadcast_to(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "broadcast_to";
    let ty = broadcast_to_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    check_dims(&shape)?;
    let out = with_elem!(dtype, T => {
        let a = arr::<T>(op, &args[0])?;
        let v = a.broadcast(IxDyn(&shape)).ok_or_else(|| invalid(op, "cannot broadcast"))?;
        T::wrap(v.to_owned().into_shared())
    });
    Ok(vec![out])
}

// ---- bitcast ----

/// Type relation of `bitcast(x, dtype)` (ONNX BitCast): the shape of `x` with elements of
/// `dtype`, which must have the width of `x`'s.
pub(crate) fn bitcast_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "bitcast";
    super::check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let to = super::attr_dtype(op, attrs, "dtype", None)?;
    if to.size_bytes() != x.dtype.size_bytes() {
        return Err(type_err(
            op,
            format_args!(
                "cannot reinterpret {} ({} bytes) as {to} ({} bytes)",
                x.dtype,
                x.dtype.size_bytes(),
                to.size_bytes()
            ),
        ));
    }
    Ok(Type::tensor(x.shape.to_vec(), to))
}

/// Kernel of `bitcast`: the same bytes (little-endian) read as `dtype`; a byte other than 0
/// or 1 read as bool is an error.
pub(crate) fn bitcast(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = bitcast_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    Ok(vec![Tensor::from_le_bytes(&dims, dtype, &args[0].to_le_bytes())?])
}
