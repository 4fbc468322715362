//! Quantization operators of the default domain, decomposed at import into passel graph
//! operators on the integer dtypes:
//!
//! - `DequantizeLinear`: `(x - zero_point) · scale`, per tensor, per axis or blocked;
//! - `QuantizeLinear`: `saturate(round_half_even(x / scale) + zero_point)` to int8 / uint8 /
//!   int16 / uint16 (the zero point's dtype, `output_dtype`, or uint8);
//! - `DynamicQuantizeLinear`: uint8 quantization with the scale and zero point computed from
//!   the data's range (which always includes 0), as ONNX specifies (also the quantized GEMM of
//!   `com.microsoft::DynamicQuantizeLSTM`, `quantized_gemm`);
//! - `MatMulInteger`, `ConvInteger`: products of zero-point-shifted integers, accumulated in
//!   f64 (exact: every partial sum of 8-bit products stays far below 2^53) and returned as
//!   int32, so the integer paths are exact;
//! - `QLinearMatMul`, `QLinearConv`: the integer product or convolution (plus the int32
//!   bias) requantized with the f32 multiplier `a_scale · b_scale / y_scale`.

use super::*;

/// The representable range of quantized dtype `d`.
fn qrange(d: DType) -> R<(f64, f64)> {
    Ok(match d {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::U16 => (0.0, 65535.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::I32 => (-2147483648.0, 2147483647.0),
        other => {
            return Err(
                format!("{} is not a quantized integer type (int8, uint8, int16, uint16, int32)", other.name()).into()
            )
        }
    })
}

fn cast(cx: &mut Cx<'_>, v: &Val, to: DType) -> R<Val> {
    if v.ty().dtype == to {
        return Ok(v.clone());
    }
    cx.call_tmp("cast", &[v], Attrs::new().with("dtype", AttrValue::DType(to)))
}

/// `p` (a scale or zero point of `DequantizeLinear` / `QuantizeLinear`) shaped to broadcast
/// against `x`: a scalar or one-element tensor as is, a 1-D `[x.shape[axis]]` along `axis`,
/// or a blocked `[…, ceil(D / block), …]` repeated `block` times along `axis`.
fn broadcast_param(cx: &mut Cx<'_>, p: &Val, x: &Val, axis: i64, block: i64, what: &str) -> R<Val> {
    let (ps, xs) = (p.shape(), x.shape());
    if ps.iter().product::<u64>() == 1 && block == 0 {
        return cx.reshape(p, &[], true);
    }
    let a = norm_axis(axis, xs.len())?;
    if block == 0 {
        if ps != [xs[a]] {
            return Err(format!(
                "{what} has shape {ps:?}; per-axis quantization along axis {a} of {xs:?} needs [{}]",
                xs[a]
            )
            .into());
        }
        let mut shape = vec![1; xs.len()];
        shape[a] = xs[a];
        return cx.reshape(p, &shape, true);
    }
    if block < 0 {
        return Err(format!("attribute `block_size` = {block} must not be negative").into());
    }
    let block = block as u64;
    let blocks = xs[a].div_ceil(block);
    let mut want = xs.clone();
    want[a] = blocks;
    if ps != want {
        return Err(format!("{what} has shape {ps:?}; blocks of {block} along axis {a} of {xs:?} need {want:?}").into());
    }
    // [.., B, ..] -> [.., B, 1, ..] -> broadcast [.., B, block, ..] -> [.., B·block, ..] -> slice to D.
    let mut split = want.clone();
    split.insert(a + 1, 1);
    let r = cx.reshape(p, &split, true)?;
    let mut wide = split.clone();
    wide[a + 1] = block;
    let b = cx.call_tmp("broadcast_to", &[&r], Attrs::new().with("shape", ints(&wide)))?;
    let mut merged = want.clone();
    merged[a] = blocks * block;
    let m = cx.reshape(&b, &merged, true)?;
    if merged[a] == xs[a] {
        return Ok(m);
    }
    let attrs =
        Attrs::new().with("begin", ints_i(&[0])).with("end", ints_i(&[xs[a] as i64])).with("axes", ints_i(&[a as i64]));
    cx.call_tmp("strided_slice", &[&m], attrs)
}

fn check_scale(scale: &Val) -> R<DType> {
    let d = scale.ty().dtype;
    if !matches!(d, DType::F32 | DType::F16 | DType::F64) {
        return Err(format!("the scale is {}; it must be a float tensor", d.name()).into());
    }
    if let Some(c) = scale.as_const() {
        let t = c.materialize().map_err(|e| e.to_string())?;
        if t.to_f64s().iter().any(|&s| s == 0.0 || !s.is_finite()) {
            return Err("the scale has a zero or non-finite value".into());
        }
    }
    Ok(d)
}

pub(super) fn dequantize_linear(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale, zp) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let axis = cx.int("axis", 1)?;
    let block = cx.int("block_size", 0)?;
    let out = check_scale(&scale)?;
    if let Some(d) = cx.int_opt("output_dtype")? {
        let want = tensor::dtype_of(d as i32)?;
        if want != out {
            return Err(format!("output_dtype {} differs from the scale's {}", want.name(), out.name()).into());
        }
    }
    qrange(x.ty().dtype)?;
    if let Some(z) = &zp {
        if z.ty().dtype != x.ty().dtype {
            return Err(
                format!("the zero point is {} but the input is {}", z.ty().dtype.name(), x.ty().dtype.name()).into()
            );
        }
    }
    let s = broadcast_param(cx, &scale, &x, axis, block, "the scale")?;
    let xf = cast(cx, &x, out)?;
    let shifted = match &zp {
        Some(z) => {
            let z = broadcast_param(cx, z, &x, axis, block, "the zero point")?;
            let zf = cast(cx, &z, out)?;
            cx.call_tmp("subtract", &[&xf, &zf], Attrs::new())?
        }
        None => xf,
    };
    one(cx.call("multiply", &[&shifted, &s], Attrs::new())?)
}

/// `saturate(round(x / scale) + zp)` as dtype `to` (scale and zp already broadcastable).
fn quantize(cx: &mut Cx<'_>, x: &Val, scale: &Val, zp: Option<&Val>, to: DType, last: bool) -> R<Val> {
    let (lo, hi) = qrange(to)?;
    let d = x.ty().dtype;
    let q = cx.call_tmp("divide", &[x, scale], Attrs::new())?;
    let mut q = cx.call_tmp("round", &[&q], Attrs::new())?;
    if let Some(z) = zp {
        let zf = cast(cx, z, d)?;
        q = cx.call_tmp("add", &[&q, &zf], Attrs::new())?;
    }
    let attrs = Attrs::new().with("a_min", AttrValue::Float(lo)).with("a_max", AttrValue::Float(hi));
    let q = cx.call_tmp("clip", &[&q], attrs)?;
    if last {
        cx.call("cast", &[&q], Attrs::new().with("dtype", AttrValue::DType(to)))
    } else {
        cast(cx, &q, to)
    }
}

pub(super) fn quantize_linear(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale, zp) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let axis = cx.int("axis", 1)?;
    let block = cx.int("block_size", 0)?;
    // `saturate` only matters for float8 outputs, which passel has no dtype for.
    cx.int_opt("saturate")?;
    check_scale(&scale)?;
    let to = match (cx.int_opt("output_dtype")?, &zp) {
        (Some(d), _) if d != 0 => tensor::dtype_of(d as i32)?,
        (_, Some(z)) => z.ty().dtype,
        _ => DType::U8,
    };
    if let Some(z) = &zp {
        if z.ty().dtype != to {
            return Err(format!("the zero point is {} but the output is {}", z.ty().dtype.name(), to.name()).into());
        }
    }
    let xd = x.ty().dtype;
    let s = broadcast_param(cx, &scale, &x, axis, block, "the scale")?;
    let s = cast(cx, &s, xd)?;
    let z = match &zp {
        Some(z) => Some(broadcast_param(cx, z, &x, axis, block, "the zero point")?),
        None => None,
    };
    one(quantize(cx, &x, &s, z.as_ref(), to, true)?)
}

pub(super) fn dynamic_quantize_linear(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let q = dynamic_quantize(cx, &x)?;
    Ok(vec![Some(q.y), Some(q.scale), Some(q.zero_point)])
}

/// `DynamicQuantizeLinear` of one value.
pub(super) struct DynamicQuant {
    /// The uint8 data.
    pub y: Val,
    /// The scale ONNX outputs (0 for an all-zero input).
    pub scale: Val,
    /// The scale the data was divided by (1 for an all-zero input, where any scale gives
    /// zeros; onnxruntime's `GetQuantizationParameter` uses 1 there too).
    pub safe_scale: Val,
    /// The uint8 zero point.
    pub zero_point: Val,
}

/// Quantizes float32 `x` to uint8 with the scale and zero point of its range (which always
/// includes 0), as `DynamicQuantizeLinear` specifies.
pub(super) fn dynamic_quantize(cx: &mut Cx<'_>, x: &Val) -> R<DynamicQuant> {
    if x.ty().dtype != DType::F32 {
        return Err(format!("input 0 is {}; DynamicQuantizeLinear takes float32", x.ty().dtype.name()).into());
    }
    let f = |v: f64| Cx::scalar(DType::F32, v);
    let all = Attrs::new().with("keepdims", AttrValue::Bool(false));
    let mn = cx.call_tmp("min", &[x], all.clone())?;
    let mx = cx.call_tmp("max", &[x], all)?;
    // The range always includes 0.
    let mn = cx.call_tmp("minimum", &[&mn, &f(0.0)], Attrs::new())?;
    let mx = cx.call_tmp("maximum", &[&mx, &f(0.0)], Attrs::new())?;
    let range = cx.call_tmp("subtract", &[&mx, &mn], Attrs::new())?;
    let scale = cx.call_tmp("divide", &[&range, &f(255.0)], Attrs::new())?;
    // An all-zero input has range 0: scale 0 would divide by zero; onnxruntime's result is
    // zero point 0 and zeros, which any positive scale gives.
    let zero = cx.call_tmp("equal", &[&scale, &f(0.0)], Attrs::new())?;
    let safe = cx.call_tmp("where", &[&zero, &f(1.0), &scale], Attrs::new())?;
    let neg = cx.call_tmp("negative", &[&mn], Attrs::new())?;
    let zp = cx.call_tmp("divide", &[&neg, &safe], Attrs::new())?;
    let zp = cx.call_tmp("round", &[&zp], Attrs::new())?;
    let zp = cx.call_tmp(
        "clip",
        &[&zp],
        Attrs::new().with("a_min", AttrValue::Float(0.0)).with("a_max", AttrValue::Float(255.0)),
    )?;
    let y = quantize(cx, x, &safe, Some(&zp), DType::U8, false)?;
    let zero_point = cast(cx, &zp, DType::U8)?;
    let scale = cx.call_tmp("where", &[&zero, &f(0.0), &scale], Attrs::new())?;
    Ok(DynamicQuant { y, scale, safe_scale: safe, zero_point })
}

/// onnxruntime's quantized GEMM of its dynamically quantized recurrent layers (and of
/// `DynamicQuantizeMatMul`): float32 `a` `[M, K]` quantized as a whole to uint8
/// (`dynamic_quantize`), its exact integer product with the quantized weights `b` `[K, N]`
/// (zero point `b_zp`), scaled by `a_scale · b_scale` (`b_scale` a scalar or one per column).
pub(super) fn quantized_gemm(cx: &mut Cx<'_>, a: &Val, (b, b_scale, b_zp): (&Val, &Val, &Val)) -> R<Val> {
    let q = dynamic_quantize(cx, a)?;
    let acc = integer_matmul(cx, (&q.y, Some(q.zero_point)), (b, Some(b_zp.clone())))?;
    let acc = cast(cx, &acc, DType::F32)?;
    let scale = cx.call_tmp("multiply", &[&q.safe_scale, b_scale], Attrs::new())?;
    cx.call_tmp("multiply", &[&acc, &scale], Attrs::new())
}

/// `v - zp` in f64, with `zp` shaped by `shape_zp` (already broadcastable).
fn shifted_f64(cx: &mut Cx<'_>, v: &Val, zp: Option<Val>, what: &str) -> R<Val> {
    qrange(v.ty().dtype).map_err(|e| NodeError::from(format!("{what}: {e}")))?;
    let vf = cast(cx, v, DType::F64)?;
    match zp {
        None => Ok(vf),
        Some(z) => {
            if z.ty().dtype != v.ty().dtype {
                return Err(format!(
                    "{what}'s zero point is {} but {what} is {}",
                    z.ty().dtype.name(),
                    v.ty().dtype.name()
                )
                .into());
            }
            let zf = cast(cx, &z, DType::F64)?;
            cx.call_tmp("subtract", &[&vf, &zf], Attrs::new())
        }
    }
}

/// The zero point of A (`[M]` per row, or a scalar) shaped against A `[.., M, K]`.
fn row_zero_point(cx: &mut Cx<'_>, z: Option<Val>, a: &Val) -> R<Option<Val>> {
    let Some(z) = z else { return Ok(None) };
    let (zs, as_) = (z.shape(), a.shape());
    if zs.iter().product::<u64>() == 1 {
        return Ok(Some(cx.reshape(&z, &[], true)?));
    }
    let m = as_.get(as_.len().wrapping_sub(2)).copied().unwrap_or(0);
    if zs != [m] {
        return Err(format!("A's zero point has shape {zs:?}; it must be a scalar or one per row ([{m}])").into());
    }
    Ok(Some(cx.reshape(&z, &[m, 1], true)?))
}

/// The zero point of B (`[N]` per column, or a scalar) shaped against B `[.., K, N]`.
fn col_zero_point(cx: &mut Cx<'_>, z: Option<Val>, b: &Val) -> R<Option<Val>> {
    let Some(z) = z else { return Ok(None) };
    let (zs, bs) = (z.shape(), b.shape());
    if zs.iter().product::<u64>() == 1 {
        return Ok(Some(cx.reshape(&z, &[], true)?));
    }
    let n = bs.last().copied().unwrap_or(0);
    if zs != [n] {
        return Err(format!("B's zero point has shape {zs:?}; it must be a scalar or one per column ([{n}])").into());
    }
    Ok(Some(cx.reshape(&z, &[n], true)?))
}

/// The exact integer product `(A - a_zp) @ (B - b_zp)` as f64.
fn integer_matmul(cx: &mut Cx<'_>, (a, a_zp): (&Val, Option<Val>), (b, b_zp): (&Val, Option<Val>)) -> R<Val> {
    let a_zp = row_zero_point(cx, a_zp, a)?;
    let b_zp = col_zero_point(cx, b_zp, b)?;
    let af = shifted_f64(cx, a, a_zp, "A")?;
    let bf = shifted_f64(cx, b, b_zp, "B")?;
    cx.call_tmp("matmul", &[&af, &bf], Attrs::new())
}

pub(super) fn matmul_integer(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let acc = integer_matmul(cx, (&a, cx.opt(2)), (&b, cx.opt(3)))?;
    one(cx.call("cast", &[&acc], Attrs::new().with("dtype", AttrValue::DType(DType::I32)))?)
}

pub(super) fn conv_integer(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, x_zp, w_zp) = (cx.input(0)?, cx.input(1)?, cx.opt(2), cx.opt(3));
    let y = integer_conv(cx, x, w, x_zp, w_zp)?;
    one(cx.call("cast", &[&y], Attrs::new().with("dtype", AttrValue::DType(DType::I32)))?)
}

/// The exact integer convolution `(x - x_zp) * (w - w_zp)` as f64, with Conv's attributes.
fn integer_conv(cx: &mut Cx<'_>, x: Val, w: Val, x_zp: Option<Val>, w_zp: Option<Val>) -> R<Val> {
    if x_zp.as_ref().is_some_and(|z| z.shape().iter().product::<u64>() != 1) {
        return Err("x's zero point must be a scalar".into());
    }
    let x_zp = x_zp.map(|z| cx.reshape(&z, &[], true)).transpose()?;
    // w's zero point: a scalar, or one per output channel.
    let w_zp = match w_zp {
        Some(z) if z.shape().iter().product::<u64>() == 1 => Some(cx.reshape(&z, &[], true)?),
        Some(z) => {
            let (zs, ws) = (z.shape(), w.shape());
            if ws.is_empty() || zs != [ws[0]] {
                return Err(
                    format!("w's zero point has shape {zs:?}; it must be a scalar or one per output channel").into()
                );
            }
            let mut shape = vec![1; ws.len()];
            shape[0] = ws[0];
            Some(cx.reshape(&z, &shape, true)?)
        }
        None => None,
    };
    let xf = shifted_f64(cx, &x, x_zp, "x")?;
    let wf = shifted_f64(cx, &w, w_zp, "w")?;
    // The float convolution on the shifted operands, with Conv's attributes.
    cx.inputs = vec![Some(xf), Some(wf)];
    Ok(conv(cx)?.into_iter().next().flatten().ok_or("the convolution returned nothing")?)
}

/// QLinearConv: the exact integer convolution plus the int32 bias, requantized with the f32
/// multiplier `x_scale · w_scale / y_scale` (`w_scale` per tensor or per output channel).
pub(super) fn qlinear_conv(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias) = (
        cx.input(0)?,
        cx.input(1)?,
        cx.input(2)?,
        cx.input(3)?,
        cx.input(4)?,
        cx.input(5)?,
        cx.input(6)?,
        cx.opt(7),
        cx.opt(8),
    );
    let channels = w.shape().first().copied().unwrap_or(0);
    for (s, what, per_channel_ok) in [(&x_s, "x_scale", false), (&w_s, "w_scale", true), (&y_s, "y_scale", false)] {
        let n = s.shape().iter().product::<u64>();
        if n != 1 && !(per_channel_ok && s.shape() == [channels]) {
            return Err(format!(
                "{what} has shape {:?}; it must be a scalar{}",
                s.shape(),
                if per_channel_ok { format!(" or [{channels}] (one per output channel)") } else { String::new() }
            )
            .into());
        }
        check_scale(s)?;
    }
    if let Some(b) = &bias {
        if b.ty().dtype != DType::I32 || b.shape() != [channels] {
            return Err(format!("B must be int32 of shape [{channels}], got {} {:?}", b.ty().dtype, b.shape()).into());
        }
    }
    let to = y_zp.as_ref().map_or(x.ty().dtype, |z| z.ty().dtype);
    let acc = integer_conv(cx, x, w, Some(x_zp), Some(w_zp))?;
    let rank = acc.rank();
    let mut per_channel = vec![1; rank];
    if rank > 1 {
        per_channel[1] = channels;
    }
    let acc = match bias {
        Some(b) => {
            let b = cast(cx, &b, DType::F64)?;
            let b = cx.reshape(&b, &per_channel, true)?;
            cx.call_tmp("add", &[&acc, &b], Attrs::new())?
        }
        None => acc,
    };
    let acc = cast(cx, &acc, DType::F32)?;
    let mut scales = Vec::with_capacity(3);
    for s in [&x_s, &w_s, &y_s] {
        let shape = if s.shape().iter().product::<u64>() == 1 { vec![] } else { per_channel.clone() };
        let s = cx.reshape(s, &shape, true)?;
        scales.push(cast(cx, &s, DType::F32)?);
    }
    let [x_s, w_s, y_s]: [Val; 3] = scales.try_into().map_err(|_| "three scales".to_string())?;
    let xw = cx.call_tmp("multiply", &[&x_s, &w_s], Attrs::new())?;
    let mult = cx.call_tmp("divide", &[&xw, &y_s], Attrs::new())?;
    let real = cx.call_tmp("multiply", &[&acc, &mult], Attrs::new())?;
    let y_zp = y_zp.map(|z| cx.reshape(&z, &[], true)).transpose()?;
    one(quantize(cx, &real, &Cx::scalar(DType::F32, 1.0), y_zp.as_ref(), to, true)?)
}

pub(super) fn qlinear_matmul(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp) = (
        cx.input(0)?,
        cx.input(1)?,
        cx.input(2)?,
        cx.input(3)?,
        cx.input(4)?,
        cx.input(5)?,
        cx.input(6)?,
        cx.input(7)?,
    );
    for s in [&a_s, &b_s, &y_s] {
        if s.shape().iter().product::<u64>() != 1 {
            return Err("per-axis scales are not supported by QLinearMatMul here (scalars only)".into());
        }
        check_scale(s)?;
    }
    let acc = integer_matmul(cx, (&a, Some(a_zp)), (&b, Some(b_zp)))?;
    let acc = cast(cx, &acc, DType::F32)?;
    // The multiplier in f32 whatever the scales' float type.
    let mut scalars = Vec::with_capacity(3);
    for s in [&a_s, &b_s, &y_s] {
        let s = cx.reshape(s, &[], true)?;
        scalars.push(cast(cx, &s, DType::F32)?);
    }
    let [a_s, b_s, y_s]: [Val; 3] = scalars.try_into().map_err(|_| "three scales".to_string())?;
    let ab = cx.call_tmp("multiply", &[&a_s, &b_s], Attrs::new())?;
    let mult = cx.call_tmp("divide", &[&ab, &y_s], Attrs::new())?;
    let real = cx.call_tmp("multiply", &[&acc, &mult], Attrs::new())?;
    let to = y_zp.ty().dtype;
    let y_zp = cx.reshape(&y_zp, &[], true)?;
    one(quantize(cx, &real, &Cx::scalar(DType::F32, 1.0), Some(&y_zp), to, true)?)
}

/// `scale · (x - zero_point)` in float32 for a per-tensor quantized input of onnxruntime's
/// QOperator contrib ops (the zero point defaults to 0; onnxruntime's kernels compute exactly
/// this before requantizing).
fn dequantize_scalar(cx: &mut Cx<'_>, x: &Val, scale: &Val, zp: Option<&Val>, what: &str) -> R<Val> {
    qrange(x.ty().dtype).map_err(|e| NodeError::from(format!("{what}: {e}")))?;
    per_tensor(scale, &format!("{what}'s scale"))?;
    check_scale(scale).map_err(|e| NodeError::from(format!("{what}: {e}")))?;
    let xf = cast(cx, x, DType::F32)?;
    let shifted = match zp {
        Some(z) => {
            per_tensor(z, &format!("{what}'s zero point"))?;
            if z.ty().dtype != x.ty().dtype {
                return Err(format!(
                    "{what}'s zero point is {} but {what} is {}",
                    z.ty().dtype.name(),
                    x.ty().dtype.name()
                )
                .into());
            }
            let z = cx.reshape(z, &[], true)?;
            let zf = cast(cx, &z, DType::F32)?;
            cx.call_tmp("subtract", &[&xf, &zf], Attrs::new())?
        }
        None => xf,
    };
    let s = cx.reshape(scale, &[], true)?;
    let s = cast(cx, &s, DType::F32)?;
    cx.call_tmp("multiply", &[&shifted, &s], Attrs::new())
}

/// `saturate(round_half_even(v / scale) + zero_point)` as `to` (a per-tensor scale and zero
/// point; the zero point's dtype must be `to`).
fn requantize_scalar(cx: &mut Cx<'_>, v: &Val, scale: &Val, zp: Option<&Val>, to: DType, what: &str) -> R<Val> {
    per_tensor(scale, &format!("{what}'s scale"))?;
    check_scale(scale).map_err(|e| NodeError::from(format!("{what}: {e}")))?;
    let s = cx.reshape(scale, &[], true)?;
    let s = cast(cx, &s, DType::F32)?;
    let z = match zp {
        Some(z) => {
            per_tensor(z, &format!("{what}'s zero point"))?;
            if z.ty().dtype != to {
                return Err(
                    format!("{what}'s zero point is {} but the output is {}", z.ty().dtype.name(), to.name()).into()
                );
            }
            Some(cx.reshape(z, &[], true)?)
        }
        None => None,
    };
    quantize(cx, v, &s, z.as_ref(), to, true)
}

fn per_tensor(p: &Val, what: &str) -> R<()> {
    if p.shape().iter().product::<u64>() != 1 {
        return Err(
            format!("{what} has shape {:?}; this operator takes a per-tensor (one-element) value", p.shape()).into()
        );
    }
    Ok(())
}

/// onnxruntime's QOperator contrib ops (`com.microsoft`, written by its static quantizer in
/// the QOperator format), per onnxruntime's `ContribOperators.md` and CPU kernels: each input
/// is dequantized with its per-tensor scale and zero point, the float operation applied, and
/// the result quantized with the output's scale and zero point (the output dtype is the
/// first input's, as the kernels require):
///
/// - `QLinearAdd` / `QLinearMul`: `A`, `A_scale`, `A_zero_point`, `B`, …, `C_scale`,
///   `C_zero_point`, with broadcasting;
/// - `QLinearSigmoid`: `X`, `X_scale`, `X_zero_point`, `Y_scale`, `Y_zero_point`;
/// - `QLinearConcat`: `Y_scale`, `Y_zero_point`, then a (tensor, scale, zero point) triple per
///   input, attribute `axis`; each input is requantized to the output's parameters.
///
/// onnxruntime's x86 kernels for Add compute in fixed point, which can differ from this float
/// form by one quantum in rare ties; the real-model check's tolerance covers that.
pub(super) fn qlinear_contrib(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    match op {
        "QLinearAdd" | "QLinearMul" => {
            let (a, b) = (cx.input(0)?, cx.input(3)?);
            let to = a.ty().dtype;
            if b.ty().dtype != to {
                return Err(
                    format!("A is {} but B is {}; they must have one dtype", to.name(), b.ty().dtype.name()).into()
                );
            }
            let (a_s, a_zp, b_s, b_zp) = (cx.input(1)?, cx.opt(2), cx.input(4)?, cx.opt(5));
            let (c_s, c_zp) = (cx.input(6)?, cx.opt(7));
            let af = dequantize_scalar(cx, &a, &a_s, a_zp.as_ref(), "A")?;
            let bf = dequantize_scalar(cx, &b, &b_s, b_zp.as_ref(), "B")?;
            let float_op = if op == "QLinearAdd" { "add" } else { "multiply" };
            let c = cx.call_tmp(float_op, &[&af, &bf], Attrs::new())?;
            one(requantize_scalar(cx, &c, &c_s, c_zp.as_ref(), to, "C")?)
        }
        "QLinearSigmoid" => {
            let x = cx.input(0)?;
            let to = x.ty().dtype;
            let (x_s, x_zp, y_s, y_zp) = (cx.input(1)?, cx.opt(2), cx.input(3)?, cx.opt(4));
            let xf = dequantize_scalar(cx, &x, &x_s, x_zp.as_ref(), "X")?;
            let y = cx.call_tmp("sigmoid", &[&xf], Attrs::new())?;
            one(requantize_scalar(cx, &y, &y_s, y_zp.as_ref(), to, "Y")?)
        }
        "QLinearConcat" => {
            let n = cx.n_inputs();
            if n < 5 || !(n - 2).is_multiple_of(3) {
                return Err(format!(
                    "has {n} inputs; it takes Y_scale, Y_zero_point and then a (tensor, scale, zero point) triple per input"
                ).into());
            }
            let (y_s, y_zp) = (cx.input(0)?, cx.input(1)?);
            let to = y_zp.ty().dtype;
            let mut parts = Vec::with_capacity((n - 2) / 3);
            for k in 0..(n - 2) / 3 {
                let at = 2 + 3 * k;
                let x = cx.input(at)?;
                if x.ty().dtype != to {
                    return Err(
                        format!("input {at} is {} but Y_zero_point is {}", x.ty().dtype.name(), to.name()).into()
                    );
                }
                let what = format!("input {at}");
                let (x_s, x_zp) = (cx.input(at + 1)?, cx.opt(at + 2));
                let xf = dequantize_scalar(cx, &x, &x_s, x_zp.as_ref(), &what)?;
                parts.push(requantize_scalar(cx, &xf, &y_s, Some(&y_zp), to, "Y")?);
            }
            let first = parts.first().ok_or("has no inputs")?;
            let axis = norm_axis(cx.int_opt("axis")?.ok_or("attribute `axis` is required")?, first.rank())?;
            if let [x] = parts.as_slice() {
                return one(x.clone());
            }
            let refs: Vec<&Val> = parts.iter().collect();
            one(cx.call("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(axis as i64)))?)
        }
        _ => Err(format!("passel has no converter for com.microsoft operator `{op}`").into()),
    }
}

/// onnxruntime's `DynamicQuantizeMatMul` (`com.microsoft`): float32 `A` `[.., M, K]` quantized
/// as a whole to uint8 (`DynamicQuantizeLinear`), its exact integer product with the quantized
/// weights `B` `[K, N]` (zero point a scalar or one per column, default 0), scaled by
/// `a_scale · b_scale` (`b_scale` a scalar or one per column), plus the optional float `bias` `[N]`.
pub(super) fn dynamic_quantize_matmul(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b, b_scale, b_zp, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.opt(3), cx.opt(4));
    if a.ty().dtype != DType::F32 {
        return Err(format!("A is {}; DynamicQuantizeMatMul takes float32", a.ty().dtype.name()).into());
    }
    if b.rank() != 2 {
        return Err(format!("B has shape {:?}; it must be [K, N]", b.shape()).into());
    }
    let n = b.shape()[1];
    let per_column = |v: &Val| v.shape().iter().product::<u64>() == 1 || v.shape() == [n];
    if !per_column(&b_scale) {
        return Err(
            format!("b_scale has shape {:?}; it must be a scalar or [{n}] (one per column)", b_scale.shape()).into()
        );
    }
    check_scale(&b_scale).map_err(|e| NodeError::from(format!("b_scale: {e}")))?;
    let scale_shape: &[u64] = if b_scale.shape().iter().product::<u64>() == 1 { &[] } else { &[n] };
    let b_scale = cx.reshape(&b_scale, scale_shape, true)?;
    let b_scale = cast(cx, &b_scale, DType::F32)?;
    let b_zp = match b_zp {
        Some(z) => z,
        None => Cx::scalar(b.ty().dtype, 0.0),
    };
    let y = quantized_gemm(cx, &a, (&b, &b_scale, &b_zp))?;
    match bias {
        Some(bias) => {
            if bias.ty().dtype != DType::F32 || bias.shape() != [n] {
                return Err(
                    format!("bias must be float32 of shape [{n}], got {} {:?}", bias.ty().dtype, bias.shape()).into()
                );
            }
            one(cx.call("add", &[&y, &bias], Attrs::new())?)
        }
        None => one(y),
    }
}
