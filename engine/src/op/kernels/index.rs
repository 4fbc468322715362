//! Injective operators that select, pad or mask elements by position: `take` (ONNX Gather),
//! `strided_slice` (ONNX Slice), `pad` (ONNX Pad), `trilu` (ONNX Trilu) and `one_hot` (ONNX
//! OneHot). They work on every dtype.

use ndarray::{ArcArray, ArrayD, IxDyn};

use super::{
    arr, attr_bool, attr_choice, attr_float, attr_int, attr_ints, check_arity, invalid, norm_axis, out_dims, shape_str,
    tensor_arg, type_err, types_of, with_elem, Elem, KResult,
};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// The array whose element at `idx` is `a` at `lists[d][idx[d]]` along every axis `d`, or
/// `fill` where a list holds `None`. The caller has bounded the result size, and every listed
/// index is in range for `a`.
fn gather_axes<T: Elem>(a: &ArcArray<T, IxDyn>, lists: &[Vec<Option<usize>>], fill: T) -> ArrayD<T> {
    let shape: Vec<usize> = lists.iter().map(Vec::len).collect();
    if shape.contains(&0) {
        return ArrayD::from_elem(IxDyn(&shape), fill);
    }
    let mut src = IxDyn(&vec![0; shape.len()]);
    ArrayD::from_shape_fn(IxDyn(&shape), |idx| {
        for (d, list) in lists.iter().enumerate() {
            match list[idx[d]] {
                Some(i) => src[d] = i,
                None => return fill,
            }
        }
        a[&src]
    })
}

// ---- take ----

/// Type relation of `take(x, indices, axis=0)` (ONNX Gather): the result has shape
/// `x.shape[:axis] + indices.shape + x.shape[axis+1:]`; indices are i32 or i64.
pub(crate) fn take_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "take";
    check_arity(op, args.len(), 2)?;
    let x = tensor_arg(op, args, 0)?;
    let ind = tensor_arg(op, args, 1)?;
    if !matches!(ind.dtype, DType::I32 | DType::I64) {
        return Err(type_err(op, format_args!("indices must have dtype i32 or i64, got {}", ind.dtype)));
    }
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, x.shape.len())?;
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(&ind.shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    Ok(Type::tensor(shape, x.dtype))
}

/// Kernel of `take`: negative indices count from the end; an index out of range is an error.
pub(crate) fn take(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "take";
    let ty = take_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let xs = args[0].shape();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 0)?, xs.len())?;
    let dim = xs[axis];
    let raw: Vec<i64> = match args[1].dtype() {
        DType::I32 => arr::<i32>(op, &args[1])?.iter().map(|&v| v as i64).collect(),
        _ => arr::<i64>(op, &args[1])?.iter().copied().collect(),
    };
    let indices = raw
        .iter()
        .map(|&i| {
            let j = if i < 0 { i.checked_add(dim as i64) } else { Some(i) };
            match j {
                Some(j) if (0..dim as i64).contains(&j) => Ok(j as usize),
                _ => Err(invalid(op, format_args!("index {i} is out of range for axis {axis} of length {dim}"))),
            }
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let outer: usize = xs[..axis].iter().product();
    let inner: usize = xs[axis + 1..].iter().product();
    let out = with_elem!(dtype, T => {
        let flat: Vec<T> = arr::<T>(op, &args[0])?.iter().copied().collect();
        let mut out = Vec::with_capacity(outer * indices.len() * inner);
        for o in 0..outer {
            for &i in &indices {
                let start = (o * dim + i) * inner;
                out.extend_from_slice(&flat[start..start + inner]);
            }
        }
        let a = ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| invalid(op, e))?;
        T::wrap(a.into_shared())
    });
    Ok(vec![out])
}

// ---- strided_slice ----

/// Per axis `(start, step, len)`.
type SlicePlan = Vec<(i128, i128, u64)>;

/// The plan of `strided_slice` (ONNX Slice) and its result type.
pub(crate) fn slice_plan(args: &[Type], attrs: &Attrs) -> Result<(SlicePlan, Type), OpError> {
    let op = "strided_slice";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let missing = |k: &str| type_err(op, format_args!("missing attribute `{k}`"));
    let begin = attr_ints(op, attrs, "begin")?.ok_or_else(|| missing("begin"))?;
    let end = attr_ints(op, attrs, "end")?.ok_or_else(|| missing("end"))?;
    let n = begin.len();
    let default_axes: Vec<i64> = (0..n as i64).collect();
    let axes = attr_ints(op, attrs, "axes")?.unwrap_or(&default_axes);
    let ones = vec![1; n];
    let strides = attr_ints(op, attrs, "strides")?.unwrap_or(&ones);
    if end.len() != n || axes.len() != n || strides.len() != n {
        return Err(type_err(
            op,
            format_args!(
                "`begin`, `end`, `strides` and `axes` must have equal lengths, got {}, {}, {} and {}",
                n,
                end.len(),
                strides.len(),
                axes.len()
            ),
        ));
    }
    let rank = x.shape.len();
    // Axes not listed are taken whole.
    let mut plan: Vec<(i128, i128, u64)> = x.shape.iter().map(|&d| (0, 1, d)).collect();
    let mut seen = vec![false; rank];
    for i in 0..n {
        let axis = norm_axis(op, axes[i], rank)?;
        if std::mem::replace(&mut seen[axis], true) {
            return Err(type_err(op, format_args!("`axes` repeats axis {axis}")));
        }
        let step = strides[i] as i128;
        if step == 0 {
            return Err(type_err(op, format_args!("stride of axis {axis} is 0")));
        }
        let dim = x.shape[axis] as i128;
        let (mut start, mut stop) = (begin[i] as i128, end[i] as i128);
        if start < 0 {
            start += dim;
        }
        if stop < 0 {
            stop += dim;
        }
        let len = if step > 0 {
            let (start, stop) = (start.clamp(0, dim), stop.clamp(0, dim));
            plan[axis] = (start, step, 0);
            if stop > start {
                (stop - start + step - 1) / step
            } else {
                0
            }
        } else {
            // Counting down, both ends clamp to [-1, dim - 1] as in numpy (whose slicing is
            // ONNX's reference): -1 is one before the first element.
            let (start, stop) = (start.clamp(-1, dim - 1), stop.clamp(-1, dim - 1));
            plan[axis] = (start, step, 0);
            if start > stop {
                (start - stop + (-step) - 1) / (-step)
            } else {
                0
            }
        };
        plan[axis].2 = len as u64;
    }
    let shape: Vec<u64> = plan.iter().map(|p| p.2).collect();
    Ok((plan, Type::tensor(shape, x.dtype)))
}

/// Type relation of `strided_slice(x, begin, end, strides, axes)` with ONNX Slice semantics:
/// negative `begin`/`end` count from the end, out-of-range values clamp, negative strides walk
/// backwards, unlisted axes are kept whole.
pub(crate) fn strided_slice_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    slice_plan(args, attrs).map(|(_, ty)| ty)
}

/// Kernel of `strided_slice`.
pub(crate) fn strided_slice(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "strided_slice";
    let (plan, ty) = slice_plan(&types_of(args), attrs)?;
    let (_, dtype) = out_dims(&ty)?;
    // One index list per axis, each as long as that axis of the result: an empty axis must
    // not empty the others (`gather_axes` takes the result shape from the list lengths).
    let lists: Vec<Vec<Option<usize>>> = plan
        .iter()
        .map(|&(start, step, len)| (0..len as i128).map(|k| Some((start + k * step) as usize)).collect())
        .collect();
    let out = with_elem!(dtype, T => {
        let a = arr::<T>(op, &args[0])?;
        let r = gather_axes(a, &lists, T::from_f64(0.0));
        T::wrap(r.into_shared())
    });
    Ok(vec![out])
}

// ---- pad ----

const PAD_MODES: &[&str] = &["constant", "reflect", "edge"];

/// Per axis `(begin, end)`; negative values crop.
type PadWidths = Vec<(i128, i128)>;

/// Checked `pad` parameters: the widths, the mode and the result type.
fn pad_plan(args: &[Type], attrs: &Attrs) -> Result<(PadWidths, &'static str, Type), OpError> {
    let op = "pad";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let widths = attr_ints(op, attrs, "pad_width")?.ok_or_else(|| type_err(op, "missing attribute `pad_width`"))?;
    let rank = x.shape.len();
    if widths.len() != 2 * rank {
        return Err(type_err(
            op,
            format_args!("`pad_width` needs {} values for a tensor of rank {rank}, got {}", 2 * rank, widths.len()),
        ));
    }
    let mode = attr_choice(op, attrs, "pad_mode", PAD_MODES)?;
    attr_float(op, attrs, "pad_value", 0.0)?;
    let mut pads = Vec::with_capacity(rank);
    let mut shape = Vec::with_capacity(rank);
    for (axis, &d) in x.shape.iter().enumerate() {
        let (b, e) = (widths[axis] as i128, widths[axis + rank] as i128);
        let out = d as i128 + b + e;
        if out < 0 {
            return Err(type_err(op, format_args!("pads ({b}, {e}) crop more than the length {d} of axis {axis}")));
        }
        if d == 0 && out > 0 && mode != "constant" {
            return Err(type_err(op, format_args!("cannot {mode}-pad the empty axis {axis}")));
        }
        let out = u64::try_from(out).map_err(|_| type_err(op, "padded shape overflows"))?;
        pads.push((b, e));
        shape.push(out);
    }
    Ok((pads, mode, Type::tensor(shape, x.dtype)))
}

/// Type relation of `pad(x, pad_width, pad_value=0, pad_mode="constant")`. `pad_width` is in
/// ONNX's `pads` layout `[x1_begin, x2_begin, …, x1_end, x2_end, …]`; negative values crop.
pub(crate) fn pad_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    pad_plan(args, attrs).map(|(_, _, ty)| ty)
}

/// Where output position `i` of an axis reads from an input axis of length `dim` padded by
/// `begin` in front: `Some(input index)`, or `None` for the constant.
fn pad_source(i: i128, begin: i128, dim: i128, mode: &str) -> Option<usize> {
    let j = i - begin;
    if (0..dim).contains(&j) {
        return Some(j as usize);
    }
    match mode {
        "edge" => Some(j.clamp(0, dim - 1) as usize),
        "reflect" if dim == 1 => Some(0),
        "reflect" => {
            // Reflection without repeating the edge has period 2 (dim - 1).
            let period = 2 * (dim - 1);
            let m = j.rem_euclid(period);
            Some(if m >= dim { period - m } else { m } as usize)
        }
        _ => None,
    }
}

/// Kernel of `pad`: constant fills with `pad_value` (converted to the dtype), `edge` repeats
/// the border element, `reflect` mirrors without repeating it (numpy's `reflect`).
pub(crate) fn pad(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "pad";
    let (pads, mode, ty) = pad_plan(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let value = attr_float(op, attrs, "pad_value", 0.0)?;
    let xs = args[0].shape();
    let lists: Vec<Vec<Option<usize>>> = if shape.contains(&0) {
        shape.iter().map(|_| Vec::new()).collect()
    } else {
        shape
            .iter()
            .zip(&pads)
            .zip(xs)
            .map(|((&n, &(b, _)), &d)| (0..n as i128).map(|i| pad_source(i, b, d as i128, mode)).collect())
            .collect()
    };
    let out = with_elem!(dtype, T => {
        let a = arr::<T>(op, &args[0])?;
        T::wrap(gather_axes(a, &lists, T::from_f64(value)).into_shared())
    });
    Ok(vec![out])
}

// ---- trilu ----

/// Type relation of `trilu(x, upper=true, k=0)`: `x` has rank at least 2.
pub(crate) fn trilu_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "trilu";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    if x.shape.len() < 2 {
        return Err(type_err(
            op,
            format_args!("expected a tensor of rank 2 or more, got shape {}", shape_str(&x.shape)),
        ));
    }
    attr_bool(op, attrs, "upper", true)?;
    attr_int(op, attrs, "k", 0)?;
    Ok(args[0].clone())
}

/// Kernel of `trilu`: keeps the elements of the last two dimensions with `j - i >= k`
/// (`upper`) or `j - i <= k` (lower) and zeroes the rest.
pub(crate) fn trilu(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "trilu";
    let ty = trilu_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let upper = attr_bool(op, attrs, "upper", true)?;
    let k = attr_int(op, attrs, "k", 0)? as i128;
    let r = shape.len();
    let out = with_elem!(dtype, T => {
        let mut a = arr::<T>(op, &args[0])?.to_owned();
        let zero = T::from_f64(0.0);
        for (idx, v) in a.indexed_iter_mut() {
            let d = idx[r - 1] as i128 - idx[r - 2] as i128;
            if (upper && d < k) || (!upper && d > k) {
                *v = zero;
            }
        }
        T::wrap(a.into_shared())
    });
    Ok(vec![out])
}

// ---- one_hot ----

/// Type relation of `one_hot(indices, values, depth, axis=-1)` (ONNX OneHot): `values` is
/// `[off, on]`; the result has the indices' shape with an axis of length `depth` inserted at
/// `axis` (of the result), and the values' dtype.
pub(crate) fn one_hot_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "one_hot";
    check_arity(op, args.len(), 2)?;
    let ind = tensor_arg(op, args, 0)?;
    let values = tensor_arg(op, args, 1)?;
    if ind.dtype == DType::Bool {
        return Err(type_err(op, "indices must be numeric, got dtype bool"));
    }
    if values.shape[..] != [2] {
        return Err(type_err(
            op,
            format_args!("values must be [off, on] of shape (2,), got {}", shape_str(&values.shape)),
        ));
    }
    let depth = attr_int(op, attrs, "depth", 0)?;
    if depth < 1 {
        return Err(type_err(op, format_args!("`depth` must be positive, got {depth}")));
    }
    let rank = ind.shape.len() + 1;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, rank)?;
    let mut shape = ind.shape.to_vec();
    shape.insert(axis, depth as u64);
    Ok(Type::tensor(shape, values.dtype))
}

/// Kernel of `one_hot`: `on` where the position along `axis` equals the index (truncated;
/// a negative index counts from `depth`), `off` elsewhere, so an index out of range gives a
/// line of `off`.
pub(crate) fn one_hot(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "one_hot";
    let ty = one_hot_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let depth = attr_int(op, attrs, "depth", 0)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, shape.len())?;
    let ind: Vec<i64> = match args[0].dtype() {
        DType::I64 => arr::<i64>(op, &args[0])?.iter().copied().collect(),
        _ => args[0].to_f64s().iter().map(|&v| v.trunc() as i64).collect(),
    };
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let out = with_elem!(dtype, T => {
        let v: Vec<T> = arr::<T>(op, &args[1])?.iter().copied().collect();
        let (off, on) = (v[0], v[1]);
        let mut out = vec![off; outer * depth as usize * inner];
        for o in 0..outer {
            for j in 0..inner {
                let i = ind[o * inner + j];
                let i = if i < 0 { i + depth } else { i };
                if (0..depth).contains(&i) {
                    out[(o * depth as usize + i as usize) * inner + j] = on;
                }
            }
        }
        T::wrap(ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| invalid(op, e))?.into_shared())
    });
    Ok(vec![out])
}
