//! Reductions and scans along axes: `sum`, `mean`, `max`, `min` and `prod` over a set of axes
//! (default: all), with `keepdims`; `argmax` / `argmin` (ONNX ArgMax / ArgMin) and `topk`
//! (ONNX TopK) along one axis; `cumsum` (ONNX CumSum).

use ndarray::{ArcArray, ArrayD, Axis, IxDyn};

use super::elementwise::IntElem;
use super::{
    arr, attr_bool, attr_int, attr_ints, check_arity, elements, from_f32, invalid, norm_axis, out_dims,
    require_numeric, shape_str, tensor_arg, to_f32, type_err, types_of, with_elem, with_int, Elem, KResult,
};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
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
                        Reduce::Prod => a.fold_axis(Axis(ax), 1.0, |&p, &v| p * v),
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
            Reduce::Prod => a.fold_axis(Axis(ax), T::from_i64(1), |&p, &v| p.wmul(v)),
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

// ---- along one axis: argmax, argmin, topk, cumsum ----

/// `(outer, len, inner)` of `shape` around `axis`: element `(o, i, j)` is at
/// `(o * len + i) * inner + j`.
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

/// Whether `v` is NaN (the only value not equal to itself).
#[allow(clippy::eq_op)]
fn is_nan<T: PartialOrd>(v: T) -> bool {
    v.partial_cmp(&v).is_none()
}

/// The order of `topk` and `argmax`: NaN above every number (numpy's argmax and sort).
fn order<T: PartialOrd + Copy>(a: T, b: T) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (is_nan(a), is_nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Type relation of `argmax` / `argmin(x, axis=0, keepdims=false, select_last_index=false)`:
/// i64 positions along `axis`, which is dropped (or kept as 1).
pub(crate) fn arg_rel(op: &str, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_numeric(op, x)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, x.shape.len())?;
    let keepdims = attr_bool(op, attrs, "keepdims", false)?;
    attr_bool(op, attrs, "select_last_index", false)?;
    if x.shape[axis] == 0 {
        return Err(type_err(
            op,
            format_args!("cannot take the {op} of {} over the empty axis {axis}", shape_str(&x.shape)),
        ));
    }
    let mut shape = x.shape.to_vec();
    if keepdims {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    Ok(Type::tensor(shape, DType::I64))
}

/// Kernel of `argmax` (`max` true) and `argmin`: the first position of the extreme value, or
/// the last with `select_last_index`; NaN counts as the largest value (numpy's argmax).
pub(crate) fn arg(op: &str, max: bool, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = arg_rel(op, &types_of(args), attrs)?;
    let (shape, _) = out_dims(&ty)?;
    let xs = args[0].shape().to_vec();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, xs.len())?;
    let last = attr_bool(op, attrs, "select_last_index", false)?;
    let (outer, n, inner) = around(&xs, axis);
    let out: Vec<i64> = with_elem!(args[0].dtype(), T => {
        let a = arr::<T>(op, &args[0])?;
        let flat: Vec<T> = a.iter().copied().collect();
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for j in 0..inner {
                let at = |i: usize| flat[(o * n + i) * inner + j];
                let mut best = 0;
                for i in 1..n {
                    let c = order(at(i), at(best));
                    let c = if max { c } else { c.reverse() };
                    if c.is_gt() || (last && c.is_eq()) {
                        best = i;
                    }
                }
                out.push(best as i64);
            }
        }
        out
    });
    let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), out).map_err(|e| invalid(op, e))?;
    Ok(vec![Tensor(crate::ir::TensorData::I64(a.into_shared()))])
}

/// Type relation of `topk(x, k, axis=-1, largest=true, sorted=true)`: a tuple of the `k`
/// values and their i64 positions along `axis`.
pub(crate) fn topk_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "topk";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_numeric(op, x)?;
    if x.shape.is_empty() {
        return Err(type_err(op, "expected a tensor of rank 1 or more, got a scalar"));
    }
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, x.shape.len())?;
    let k = attr_int(op, attrs, "k", 0)?;
    attr_bool(op, attrs, "largest", true)?;
    attr_bool(op, attrs, "sorted", true)?;
    if k < 0 || k as u64 > x.shape[axis] {
        return Err(type_err(
            op,
            format_args!("k = {k} must be between 0 and the length {} of axis {axis}", x.shape[axis]),
        ));
    }
    let mut shape = x.shape.to_vec();
    shape[axis] = k as u64;
    Ok(Type::tuple(vec![Type::tensor(shape.clone(), x.dtype), Type::tensor(shape, DType::I64)]))
}

/// Kernel of `topk`: the `k` largest (or smallest) elements of each line along `axis`, in
/// order (NaN above every number), equal values by increasing position (onnx's reference).
pub(crate) fn topk(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "topk";
    let ty = topk_rel(&types_of(args), attrs)?;
    let fields = ty.as_tuple().ok_or_else(|| invalid(op, "expected a tuple result"))?;
    let (shape, dtype) = out_dims(&fields[0])?;
    let xs = args[0].shape().to_vec();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, xs.len())?;
    let largest = attr_bool(op, attrs, "largest", true)?;
    let k = shape[axis];
    let (outer, n, inner) = around(&xs, axis);
    let total = outer * k * inner;
    let (values, positions) = with_elem!(dtype, T => {
        let flat: Vec<T> = arr::<T>(op, &args[0])?.iter().copied().collect();
        let mut values = vec![T::from_f64(0.0); total];
        let mut positions = vec![0i64; total];
        let mut line: Vec<usize> = Vec::with_capacity(n);
        for o in 0..outer {
            for j in 0..inner {
                let at = |i: usize| flat[(o * n + i) * inner + j];
                line.clear();
                line.extend(0..n);
                line.sort_by(|&a, &b| {
                    let c = order(at(a), at(b));
                    (if largest { c.reverse() } else { c }).then(a.cmp(&b))
                });
                for (r, &i) in line.iter().take(k).enumerate() {
                    let p = (o * k + r) * inner + j;
                    values[p] = at(i);
                    positions[p] = i as i64;
                }
            }
        }
        let v = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), values).map_err(|e| invalid(op, e))?;
        (T::wrap(v.into_shared()), positions)
    });
    let p = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), positions).map_err(|e| invalid(op, e))?;
    Ok(vec![values, Tensor(crate::ir::TensorData::I64(p.into_shared()))])
}

/// The cost of `topk`: a sort of each line, `n log n` comparisons.
pub(crate) fn topk_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    let n = elements(args.first().unwrap_or(out));
    let log = 64 - n.leading_zeros() as u64;
    n.saturating_mul(log.max(1)).saturating_add(elements(out))
}

/// Type relation of `cumsum` / `cumprod(x, axis=0, exclusive=false, reverse=false)`: the
/// type of `x`.
pub(crate) fn cum_rel(op: &str, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_numeric(op, x)?;
    norm_axis(op, attr_int(op, attrs, "axis", 0)?, x.shape.len())?;
    attr_bool(op, attrs, "exclusive", false)?;
    attr_bool(op, attrs, "reverse", false)?;
    Ok(args[0].clone())
}

/// Kernel of `cumsum` and (`prod`) `cumprod`: running sums or products along `axis`, from
/// the end with `reverse`, each without its own element with `exclusive` (which starts from
/// 0 or 1). Floats accumulate in f64, integers wrap.
pub(crate) fn cum(op: &str, prod: bool, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = cum_rel(op, &types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, shape.len())?;
    let exclusive = attr_bool(op, attrs, "exclusive", false)?;
    let reverse = attr_bool(op, attrs, "reverse", false)?;
    let (outer, n, inner) = around(&shape, axis);
    fn run<T: Elem, A: Copy>(
        flat: &[T],
        (outer, n, inner): (usize, usize, usize),
        (exclusive, reverse): (bool, bool),
        zero: A,
        add: impl Fn(A, T) -> A,
        back: impl Fn(A) -> T,
    ) -> Vec<T> {
        let mut out = flat.to_vec();
        for o in 0..outer {
            for j in 0..inner {
                let mut acc = zero;
                for step in 0..n {
                    let i = if reverse { n - 1 - step } else { step };
                    let p = (o * n + i) * inner + j;
                    if exclusive {
                        out[p] = back(acc);
                        acc = add(acc, flat[p]);
                    } else {
                        acc = add(acc, flat[p]);
                        out[p] = back(acc);
                    }
                }
            }
        }
        out
    }
    let dims = (outer, n, inner);
    let flags = (exclusive, reverse);
    let out = if dtype.is_float() {
        with_elem!(dtype, T => {
            let flat: Vec<T> = arr::<T>(op, &args[0])?.iter().copied().collect();
            let v = if prod {
                run(&flat, dims, flags, 1.0f64, |a, v: T| a * v.to_f64(), T::from_f64)
            } else {
                run(&flat, dims, flags, 0.0f64, |a, v: T| a + v.to_f64(), T::from_f64)
            };
            T::wrap(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).map_err(|e| invalid(op, e))?.into_shared())
        })
    } else {
        with_int!(dtype, T => {
            let flat: Vec<T> = arr::<T>(op, &args[0])?.iter().copied().collect();
            let v = if prod {
                run(&flat, dims, flags, T::from_i64(1), |a: T, v: T| a.wmul(v), |a| a)
            } else {
                run(&flat, dims, flags, T::ZERO, |a: T, v: T| a.wadd(v), |a| a)
            };
            T::wrap(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).map_err(|e| invalid(op, e))?.into_shared())
        })
    };
    Ok(vec![out])
}
