//! Reductions: `sum`, `mean`, `max` and `min` over a set of axes (default: all), with `keepdims`.

use ndarray::{ArcArray, ArrayD, Axis, IxDyn};

use super::elementwise::IntElem;
use super::{
    arr, attr_bool, attr_ints, check_arity, from_f32, invalid, norm_axis, out_dims, require_numeric, shape_str,
    tensor_arg, to_f32, type_err, types_of, with_int, Elem, KResult,
};
use crate::ir::{Attrs, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
}

/// The reduced axes, ascending. No `axis` means every axis; an empty list reduces nothing
/// (TVM's reading of `axis=[]`).
fn reduce_axes(op: &str, attrs: &Attrs, rank: usize) -> Result<Vec<usize>, OpError> {
    let Some(list) = attr_ints(op, attrs, "axis")? else {
        return Ok((0..rank).collect());
    };
    let mut axes = list.iter().map(|&a| norm_axis(op, a, rank)).collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    if let Some(w) = axes.windows(2).find(|w| w[0] == w[1]) {
        return Err(type_err(op, format_args!("`axis` repeats axis {}", w[0])));
    }
    Ok(axes)
}

/// Type relation of the reductions.
pub(crate) fn reduce_rel(op: &str, f: Reduce, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_numeric(op, x)?;
    let axes = reduce_axes(op, attrs, x.shape.len())?;
    let keepdims = attr_bool(op, attrs, "keepdims", false)?;
    let empty = axes.iter().any(|&a| x.shape[a] == 0);
    // `max` and `min` have no identity, and an integer mean of nothing has no value.
    if empty && (matches!(f, Reduce::Max | Reduce::Min) || (f == Reduce::Mean && !x.dtype.is_float())) {
        return Err(type_err(op, format_args!("cannot reduce {} over an empty axis", shape_str(&x.shape))));
    }
    let mut shape = Vec::with_capacity(x.shape.len());
    for (i, &d) in x.shape.iter().enumerate() {
        if !axes.contains(&i) {
            shape.push(d);
        } else if keepdims {
            shape.push(1);
        }
    }
    Ok(Type::tensor(shape, x.dtype))
}

/// Kernel of the reductions. Floats accumulate in f32; integers wrap, and an integer mean
/// truncates toward zero.
pub(crate) fn reduce(op: &str, f: Reduce, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = reduce_rel(op, f, &types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let x = &args[0];
    let axes = reduce_axes(op, attrs, x.shape().len())?;
    let count: usize = axes.iter().map(|&a| x.shape()[a]).product();
    let out = match dtype {
        d if d.is_float() => {
            let mut a: ArrayD<f32> = to_f32(op, x)?.into_owned();
            // Descending, so earlier axis numbers stay valid as axes disappear.
            for &ax in axes.iter().rev() {
                a =
                    match f {
                        Reduce::Sum | Reduce::Mean => a.sum_axis(Axis(ax)),
                        Reduce::Max => a.fold_axis(Axis(ax), f32::NEG_INFINITY, |&m, &v| {
                            if m.is_nan() || v.is_nan() {
                                f32::NAN
                            } else {
                                m.max(v)
                            }
                        }),
                        Reduce::Min => a.fold_axis(Axis(ax), f32::INFINITY, |&m, &v| {
                            if m.is_nan() || v.is_nan() {
                                f32::NAN
                            } else {
                                m.min(v)
                            }
                        }),
                    };
            }
            if f == Reduce::Mean {
                a.mapv_inplace(|s| s / count as f32);
            }
            from_f32(op, a, dtype)?
        }
        d if d.is_integer() => {
            with_int!(d, T => T::wrap(int_reduce(op, f, arr::<T>(op, x)?, &axes, count)?.into_shared()))
        }
        _ => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![super::shape::reshape_tensor(op, &out, &shape)?])
}

fn int_reduce<T: IntElem>(
    op: &str,
    f: Reduce,
    x: &ArcArray<T, IxDyn>,
    axes: &[usize],
    count: usize,
) -> Result<ArrayD<T>, OpError> {
    let mut a: ArrayD<T> = x.to_owned();
    for &ax in axes.iter().rev() {
        a = match f {
            Reduce::Sum | Reduce::Mean => a.fold_axis(Axis(ax), T::ZERO, |&s, &v| s.wadd(v)),
            Reduce::Max => a.fold_axis(Axis(ax), T::MIN, |&m, &v| m.max(v)),
            Reduce::Min => a.fold_axis(Axis(ax), T::MAX, |&m, &v| m.min(v)),
        };
    }
    if f == Reduce::Mean {
        let n = T::from_i64(i64::try_from(count).map_err(|_| invalid(op, "too many elements"))?);
        if n == T::ZERO {
            return Err(invalid(op, "cannot take the mean of no elements"));
        }
        a.mapv_inplace(|s| s.wdiv(n));
    }
    Ok(a)
}
