//! Pooling and local normalisation over NCHW data: `max_pool2d`, `avg_pool2d` (ONNX MaxPool
//! and AveragePool with explicit pads), `global_avg_pool2d`, `global_max_pool2d` and `lrn`
//! (ONNX LRN across channels). All are float-only (f16 computes in f32), except that
//! `max_pool2d` also takes i8, u8, i16 and u16, which f32 holds exactly.

use ndarray::{Array4, ArrayD, Ix4, IxDyn};

use super::nn::{padding4, pair};
use super::{
    attr_bool, attr_float, attr_int, attr_ints, check_arity, from_f32, invalid, out_dims, require_float, shape_str,
    tensor_arg, to_f32, type_err, types_of, KResult,
};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

/// Checked pooling geometry.
struct Pool {
    kernel: [u64; 2],
    strides: [u64; 2],
    /// top, left, bottom, right
    pad: [u64; 4],
    dilation: [u64; 2],
}

/// The output length of pooled axis `axis` (0 for H, 1 for W) of length `len`, as ONNX
/// computes it: with `ceil` the division rounds up, but a last window that would start in the
/// end padding is dropped.
fn pooled_len(op: &str, geo: &Pool, axis: usize, len: u64, ceil: bool) -> Result<u64, OpError> {
    let (k, s, d) = (geo.kernel[axis], geo.strides[axis], geo.dilation[axis]);
    let (pb, pe) = (geo.pad[axis], geo.pad[axis + 2]);
    let too_big = || type_err(op, "padding, dilation or pool size overflows");
    let extent = d.checked_mul(k - 1).and_then(|e| e.checked_add(1)).ok_or_else(too_big)?;
    let padded = len.checked_add(pb).and_then(|v| v.checked_add(pe)).ok_or_else(too_big)?;
    if padded < extent {
        return Err(type_err(op, format_args!("window extent {extent} is larger than the padded input {padded}")));
    }
    let span = padded - extent;
    let mut out = if ceil { span.div_ceil(s) + 1 } else { span / s + 1 };
    if ceil && (out - 1).saturating_mul(s) >= len.saturating_add(pb) {
        out -= 1;
    }
    Ok(out)
}

fn pool_geometry(op: &str, args: &[Type], attrs: &Attrs) -> Result<(Pool, Type), OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    // MaxPool also takes the integers that f32 holds exactly (ONNX allows int8 / uint8).
    if !(op == "max_pool2d" && small_int(x.dtype)) {
        require_float(op, x)?;
    }
    let &[n, c, h, w] = &*x.shape else {
        return Err(type_err(op, format_args!("expected 4-d data (NCHW), got shape {}", shape_str(&x.shape))));
    };
    if attr_ints(op, attrs, "pool_size")?.is_none() {
        return Err(type_err(op, "missing attribute `pool_size`"));
    }
    let kernel = pair(op, attrs, "pool_size")?;
    let strides = pair(op, attrs, "strides")?;
    let dilation = pair(op, attrs, "dilation")?;
    let pad = padding4(op, attrs)?;
    let ceil = attr_bool(op, attrs, "ceil_mode", false)?;
    attr_bool(op, attrs, "count_include_pad", false)?;
    let geo = Pool { kernel, strides, pad, dilation };
    let oh = pooled_len(op, &geo, 0, h, ceil)?;
    let ow = pooled_len(op, &geo, 1, w, ceil)?;
    Ok((geo, Type::tensor(vec![n, c, oh, ow], x.dtype)))
}

/// Type relation of `max_pool2d` / `avg_pool2d(x, pool_size, strides, padding, dilation,
/// ceil_mode[, count_include_pad])`; `padding` is `[p]`, `[ph, pw]` or `[top, left, bottom,
/// right]`.
pub(crate) fn pool2d_rel(op: &str, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    pool_geometry(op, args, attrs).map(|(_, ty)| ty)
}

/// The taps `k` in `0..taps` whose position `start + k * step` lies in `0..len` (`step` ≥ 1),
/// so that a window loop visits only input elements, however large the padding.
fn taps_inside(start: i128, step: i128, taps: i128, len: i128) -> std::ops::Range<i128> {
    let lo = if start >= 0 { 0 } else { (-start + step - 1) / step };
    let hi = if start >= len { 0 } else { ((len - start + step - 1) / step).min(taps) };
    lo..hi.max(lo)
}

/// Kernel of `max_pool2d` (`avg = false`) and `avg_pool2d`. Padding never contributes to a
/// maximum; an average divides by the number of input elements in the window, or with
/// `count_include_pad` by the full window size (as ONNX's reference does, also for the extra
/// padding `ceil_mode` adds).
///
/// NaN follows ONNX's reference (`onnx.reference`, which pads with NaN and drops the NaNs of
/// each window): a NaN element counts as padding, so a maximum is the maximum of the window's
/// numbers (onnxruntime agrees), and an average without `count_include_pad` is the mean of
/// its numbers; with `count_include_pad` a NaN propagates. A window with no number gives NaN.
/// (`global_max_pool2d`, the reductions and `maximum` propagate NaN, as the reference's
/// GlobalMaxPool, ReduceMax and Max do.)
pub(crate) fn pool2d(op: &str, avg: bool, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let (geo, ty) = pool_geometry(op, &types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let include_pad = attr_bool(op, attrs, "count_include_pad", false)?;
    let x = if small_int(dtype) { widen_small_int(op, &args[0])? } else { to_f32(op, &args[0])? };
    let x = x.view().into_dimensionality::<Ix4>().map_err(|e| invalid(op, e))?;
    let x = x.as_standard_layout();
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let [kh, kw] = geo.kernel.map(|v| v as i128);
    let [sh, sw] = geo.strides.map(|v| v as i128);
    let [dh, dw] = geo.dilation.map(|v| v as i128);
    let (pt, pl) = (geo.pad[0] as i128, geo.pad[1] as i128);
    let full = (kh * kw) as f32;
    let mut out = Array4::<f32>::zeros((shape[0], shape[1], shape[2], shape[3]));
    for ((b, ch, oy, ox), o) in out.indexed_iter_mut() {
        let plane = x.slice(ndarray::s![b, ch, .., ..]);
        let plane = plane.as_slice().ok_or_else(|| invalid(op, "data is not contiguous"))?;
        let (y0, x0) = (oy as i128 * sh - pt, ox as i128 * sw - pl);
        let cols = taps_inside(x0, dw, kw, w as i128);
        let (mut acc, mut numbers, mut nan) = (if avg { 0.0 } else { f32::NEG_INFINITY }, 0usize, false);
        for i in taps_inside(y0, dh, kh, h as i128) {
            let row = &plane[(y0 + i * dh) as usize * w..][..w];
            for j in cols.clone() {
                let v = row[(x0 + j * dw) as usize];
                if v.is_nan() {
                    nan = true;
                    continue;
                }
                numbers += 1;
                acc = if avg { acc + v } else { acc.max(v) };
            }
        }
        *o = if numbers == 0 || (avg && include_pad && nan) {
            f32::NAN
        } else if !avg {
            acc
        } else if include_pad {
            acc / full
        } else {
            acc / numbers as f32
        };
    }
    if small_int(dtype) {
        // Every window holds at least one number (the pads are smaller than the kernel), so
        // the maximum is one of the input's integers and converts back exactly.
        let vals: Vec<f64> = out.iter().map(|&v| v as f64).collect();
        let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        return Ok(vec![Tensor::from_f64s(&dims, dtype, &vals)?]);
    }
    Ok(vec![from_f32(op, out.into_dyn(), dtype)?])
}

/// Integer dtypes whose every value f32 holds exactly.
fn small_int(dtype: DType) -> bool {
    matches!(dtype, DType::I8 | DType::U8 | DType::I16 | DType::U16)
}

/// A tensor of a [`small_int`] dtype as exact f32 values.
fn widen_small_int(op: &str, t: &Tensor) -> Result<ndarray::ArcArray<f32, IxDyn>, OpError> {
    let vals: Vec<f32> = t.to_f64s().into_iter().map(|v| v as f32).collect();
    ndarray::ArcArray::from_shape_vec(IxDyn(t.shape()), vals).map_err(|e| invalid(op, e))
}

/// Estimated cost of a `max_pool2d` / `avg_pool2d` call: every output element visits its
/// window.
pub(crate) fn pool2d_cost(op: &str, args: &[Type], attrs: &Attrs, out: &Type) -> u64 {
    let window = pair(op, attrs, "pool_size").map_or(1, |[kh, kw]| kh.saturating_mul(kw));
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(window))
}

// ---- global pools ----

/// Type relation of `global_avg_pool2d` / `global_max_pool2d(x)`: every axis after the
/// channels becomes 1 (`[N, C, H, W] -> [N, C, 1, 1]`).
pub(crate) fn global_pool_rel(op: &str, args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    if x.shape.len() < 3 {
        return Err(type_err(
            op,
            format_args!("expected data with spatial axes (NCHW), got shape {}", shape_str(&x.shape)),
        ));
    }
    if x.shape[2..].contains(&0) {
        return Err(type_err(op, format_args!("cannot pool the empty spatial axes of {}", shape_str(&x.shape))));
    }
    let mut shape = x.shape.to_vec();
    shape[2..].fill(1);
    Ok(Type::tensor(shape, x.dtype))
}

/// Kernel of the global pools (NaN propagates).
pub(crate) fn global_pool(op: &str, avg: bool, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = global_pool_rel(op, &types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let x = to_f32(op, &args[0])?;
    let planes = shape[0] * shape[1];
    let area: usize = x.shape()[2..].iter().product();
    let flat = x.to_shape((planes, area)).map_err(|e| invalid(op, e))?;
    let vals: Vec<f32> = flat
        .rows()
        .into_iter()
        .map(|r| {
            if avg {
                r.sum() / area as f32
            } else {
                r.fold(f32::NEG_INFINITY, |m, &v| if m.is_nan() || v.is_nan() { f32::NAN } else { m.max(v) })
            }
        })
        .collect();
    let out = ArrayD::from_shape_vec(IxDyn(&shape), vals).map_err(|e| invalid(op, e))?;
    Ok(vec![from_f32(op, out, dtype)?])
}

// ---- lrn ----

/// Type relation of `lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0)` over channels (axis 1).
pub(crate) fn lrn_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "lrn";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    if x.shape.len() < 2 {
        return Err(type_err(op, format_args!("expected data with a channel axis, got shape {}", shape_str(&x.shape))));
    }
    if attrs.get("size").is_none() {
        return Err(type_err(op, "missing attribute `size`"));
    }
    let size = attr_int(op, attrs, "size", 1)?;
    if size < 1 {
        return Err(type_err(op, format_args!("`size` must be positive, got {size}")));
    }
    for (key, default) in [("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)] {
        attr_float(op, attrs, key, default)?;
    }
    Ok(args[0].clone())
}

/// Estimated cost of an `lrn` call: each element sums the squares of at most `size`
/// channels.
pub(crate) fn lrn_cost(args: &[Type], attrs: &Attrs, out: &Type) -> u64 {
    let channels = args.first().and_then(Type::as_tensor).and_then(|x| x.shape.get(1).copied()).unwrap_or(1);
    let size = attr_int("lrn", attrs, "size", 1).map_or(1, |s| s.max(1) as u64);
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(size.min(channels)))
}

/// Kernel of `lrn`: `y = x / (bias + alpha / size * sum of x^2 over channels
/// [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta`, as ONNX defines it.
pub(crate) fn lrn(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "lrn";
    lrn_rel(&types_of(args), attrs)?;
    let size = attr_int(op, attrs, "size", 1)?;
    let alpha = attr_float(op, attrs, "alpha", 1e-4)? as f32;
    let beta = attr_float(op, attrs, "beta", 0.75)? as f32;
    let bias = attr_float(op, attrs, "bias", 1.0)? as f32;
    let x = to_f32(op, &args[0])?;
    let c = x.shape()[1] as i64;
    let (before, after) = ((size - 1) / 2, size / 2);
    let out = ArrayD::from_shape_fn(x.raw_dim(), |idx| {
        let ch = idx[1] as i64;
        let (lo, hi) = ((ch - before).max(0), (ch + after).min(c - 1));
        let mut nb = idx.clone();
        let mut sq = 0.0f32;
        for k in lo..=hi {
            nb[1] = k as usize;
            let v = x[&nb];
            sq += v * v;
        }
        x[&idx] / (bias + alpha / size as f32 * sq).powf(beta)
    });
    Ok(vec![from_f32(op, out, args[0].dtype())?])
}
