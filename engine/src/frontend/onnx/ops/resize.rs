//! `Resize` and `Upsample`. Two-axis resizes of the last two axes of a rank-4 tensor become
//! `resize2d`. Everything `resize2d` does not do — antialiasing, `tf_crop_and_resize` (a
//! region of interest and an extrapolation value), other ranks and axes — is decomposed
//! exactly as onnx's reference computes it: resizing is separable, so each resized axis is a
//! product with a constant `[out, in]` interpolation matrix built here from the reference's
//! coefficients (`onnx/reference/ops/op_resize.py`, `_interpolate_1d_along_axis`), followed
//! for `tf_crop_and_resize` by a `where` that puts the extrapolation value at the output
//! positions whose source coordinate falls outside the input.

use super::*;

/// How one axis is resized.
struct Axis1d<'a> {
    input: u64,
    output: u64,
    scale: f64,
    coord: &'a str,
    roi: Option<(f64, f64)>,
}

/// The interpolation kernel shared by every axis.
struct Kernel<'a> {
    method: &'a str,
    antialias: bool,
    cubic_a: f64,
    exclude_outside: bool,
    nearest: &'a str,
}

impl Kernel<'_> {
    /// The reference's coefficients for the fractional position `ratio` in (0, 1].
    fn coeffs(&self, ratio: f64, scale: f64) -> R<Vec<f64>> {
        let a = self.cubic_a;
        Ok(match (self.method, self.antialias) {
            ("nearest", _) => {
                let up = if ratio == ratio.floor() {
                    true
                } else {
                    match self.nearest {
                        "round_prefer_floor" => ratio > 0.5,
                        "round_prefer_ceil" => ratio >= 0.5,
                        "floor" => false,
                        "ceil" => true,
                        other => return Err(format!("nearest_mode {other:?} is not supported").into()),
                    }
                };
                vec![f64::from(u8::from(!up)), f64::from(u8::from(up))]
            }
            ("linear", false) => vec![1.0 - ratio, ratio],
            ("linear", true) => {
                let s = scale.min(1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                let c: Vec<f64> = (start..start + 2 - 2 * start)
                    .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                    .collect();
                normalized(c)
            }
            ("cubic", false) => {
                let (r1, q) = (ratio + 1.0, 1.0 - ratio);
                let q1 = q + 1.0;
                vec![
                    ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                    ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0,
                    ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                    ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a,
                ]
            }
            _ => {
                let s = scale.min(1.0);
                let start = (-2.0 / s).floor() as i64 + 1;
                let coeff = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                normalized((start..2 - start).map(|i| coeff(s * (i as f64 - ratio))).collect())
            }
        })
    }
}

fn normalized(c: Vec<f64>) -> Vec<f64> {
    let sum: f64 = c.iter().sum();
    c.into_iter().map(|v| v / sum).collect()
}

/// The `[output, input]` interpolation matrix of one axis (row-major) and, for
/// `tf_crop_and_resize`, which output positions are extrapolated.
fn axis_matrix(ax: &Axis1d<'_>, k: &Kernel<'_>) -> R<(Vec<f64>, Vec<bool>)> {
    let (inw, outn) = (ax.input as f64, ax.output as usize);
    let out_w = ax.scale * inw;
    let mut m = vec![0.0; outn * ax.input as usize];
    let mut extrapolated = vec![false; outn];
    for (y, extra) in extrapolated.iter_mut().enumerate() {
        let yf = y as f64;
        let x = match ax.coord {
            "align_corners" if out_w == 1.0 => 0.0,
            "align_corners" => yf * (inw - 1.0) / (out_w - 1.0),
            "asymmetric" => yf / ax.scale,
            "tf_crop_and_resize" => {
                let (r0, r1) = ax.roi.unwrap_or((0.0, 1.0));
                let x = if out_w == 1.0 {
                    (r1 - r0) * (inw - 1.0) / 2.0
                } else {
                    yf * (r1 - r0) * (inw - 1.0) / (out_w - 1.0)
                };
                let x = x + r0 * (inw - 1.0);
                *extra = x < 0.0 || x > inw - 1.0;
                x
            }
            "pytorch_half_pixel" if out_w == 1.0 => -0.5,
            "pytorch_half_pixel" | "half_pixel" => (yf + 0.5) / ax.scale - 0.5,
            "half_pixel_symmetric" => {
                let offset = inw / 2.0 * (1.0 - ax.output as f64 / out_w);
                offset + (yf + 0.5) / ax.scale - 0.5
            }
            other => return Err(format!("coordinate_transformation_mode {other:?} is not supported").into()),
        };
        let floor = x.floor();
        let ratio = if x == floor { 1.0 } else { x - floor };
        let mut c = k.coeffs(ratio, ax.scale)?;
        let n = c.len() as i64;
        // The n source indices nearest x (ties to the smaller), in edge-padded coordinates.
        let pad = (n + 1) / 2;
        let xp = x + pad as f64;
        let p = xp.floor();
        let frac = xp - p;
        let offset = if n % 2 == 0 {
            if frac == 0.0 {
                -(n / 2)
            } else {
                -(n / 2) + 1
            }
        } else if frac <= 0.5 {
            -((n - 1) / 2)
        } else {
            -((n - 1) / 2) + 1
        };
        let start = p as i64 + offset - pad;
        let last = ax.input as i64 - 1;
        if k.exclude_outside {
            for (j, cj) in c.iter_mut().enumerate() {
                if !(0..=last).contains(&(start + j as i64)) {
                    *cj = 0.0;
                }
            }
            let sum: f64 = c.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            c.iter_mut().for_each(|cj| *cj /= sum);
        }
        for (j, cj) in c.iter().enumerate() {
            let i = (start + j as i64).clamp(0, last) as usize;
            m[y * ax.input as usize + i] += cj;
        }
    }
    Ok((m, extrapolated))
}

/// Resizes `x` to `out` one axis at a time (see the module doc); `scale[a]` is the factor
/// onnx maps coordinates with on axis `a`, `roi[a]` its region of interest.
fn separable(
    cx: &mut Cx<'_>,
    x: Val,
    out: &[u64],
    scale: &[f64],
    roi: &[Option<(f64, f64)>],
    (coord, k, extrapolation): (&str, &Kernel<'_>, f64),
) -> R<Val> {
    let dtype = x.ty().dtype;
    if !dtype.is_float() {
        return Err(format!(
            "antialias, tf_crop_and_resize and resizes other than 2-D need a float input, got {dtype}"
        )
        .into());
    }
    let rank = out.len();
    let mut y = x;
    for a in 0..rank {
        let input = y.shape()[a];
        let trivial_roi = roi[a].is_none_or(|(r0, r1)| (r0 - 0.0).abs() < 1e-9 && (r1 - 1.0).abs() < 1e-9);
        if (scale[a] - 1.0).abs() <= 1e-9 && out[a] == input && trivial_roi {
            continue;
        }
        if input == 0 || out[a] == 0 {
            return Err(
                format!("axis {a} resizes {input} elements to {}: empty resizes are not supported", out[a]).into()
            );
        }
        if out[a].saturating_mul(input) > cx.em_fold_limit() {
            return Err(format!(
                "the {}x{input} interpolation matrix of axis {a} is too large to make at import",
                out[a]
            )
            .into());
        }
        let ax = Axis1d { input, output: out[a], scale: scale[a], coord, roi: roi[a] };
        let (m, extrapolated) = axis_matrix(&ax, k)?;
        // y·Mᵀ along the last axis: move axis `a` last, multiply, move it back.
        let mut mt = vec![0.0; m.len()];
        for o in 0..out[a] as usize {
            for i in 0..input as usize {
                mt[i * out[a] as usize + o] = m[o * input as usize + i];
            }
        }
        let mt = Tensor::from_f64s(&[input, out[a]], dtype, &mt).map_err(|e| e.to_string())?;
        let mt = Val::Const(Arc::new(Constant::Dense(mt)));
        let perm: Vec<i64> = (0..rank as i64).filter(|&d| d != a as i64).chain([a as i64]).collect();
        let last = a == rank - 1;
        let moved =
            if last { y.clone() } else { cx.call_tmp("transpose", &[&y], Attrs::new().with("axes", ints_i(&perm)))? };
        let z = cx.call_tmp("matmul", &[&moved, &mt], Attrs::new())?;
        y = if last {
            z
        } else {
            let mut inverse = vec![0i64; rank];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p as usize] = i as i64;
            }
            cx.call_tmp("transpose", &[&z], Attrs::new().with("axes", ints_i(&inverse)))?
        };
        if extrapolated.iter().any(|&e| e) {
            let mut mask_shape = vec![1u64; rank];
            mask_shape[a] = out[a];
            let mask: Vec<f64> = extrapolated.iter().map(|&e| f64::from(u8::from(e))).collect();
            let mask = Tensor::from_f64s(&mask_shape, DType::Bool, &mask).map_err(|e| e.to_string())?;
            let mask = Val::Const(Arc::new(Constant::Dense(mask)));
            let value = Cx::scalar(dtype, extrapolation);
            y = cx.call_tmp("where", &[&mask, &value, &y], Attrs::new())?;
        }
    }
    Ok(y)
}

/// `Resize` (opsets 10–19+) and `Upsample` (opset 9: `(X, scales)`, like Resize-10).
pub(super) fn resize(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    let mode = cx.string("mode", "nearest")?;
    let method = match mode.as_str() {
        "nearest" => "nearest",
        "linear" | "bilinear" => "linear",
        "cubic" | "bicubic" => "cubic",
        other => return Err(format!("mode {other:?} is not supported").into()),
    };
    let (scales, sizes, coord, rounding, roi, extrapolation) = if cx.opset < 11 {
        // Opset 10: (X, scales), asymmetric coordinates, nearest rounds down.
        (cx.const_floats(1, "scales")?, None, "asymmetric".to_string(), "floor".to_string(), None, 0.0)
    } else {
        let coord = cx.string("coordinate_transformation_mode", "half_pixel")?;
        let extrapolation = cx.float("extrapolation_value", 0.0)?;
        let rounding = cx.string("nearest_mode", "round_prefer_floor")?;
        let roi = match coord.as_str() {
            "tf_crop_and_resize" => {
                Some(cx.const_floats(1, "roi")?.ok_or("input 1 (roi) is required by tf_crop_and_resize")?)
            }
            _ => None,
        };
        (cx.const_floats(2, "scales")?, cx.const_ints(3, "sizes")?, coord, rounding, roi, extrapolation)
    };
    let antialias = match cx.int("antialias", 0)? {
        0 => false,
        1 if method != "nearest" => true,
        1 => return Err("attribute `antialias` = 1 needs mode linear or cubic, not nearest".into()),
        v => return Err(format!("attribute `antialias` must be 0 or 1, got {v}").into()),
    };
    let policy = cx.string("keep_aspect_ratio_policy", "stretch")?;
    if !matches!(policy.as_str(), "stretch" | "not_larger" | "not_smaller") {
        return Err(
            format!("keep_aspect_ratio_policy {policy:?} is not supported (stretch, not_larger, not_smaller)").into()
        );
    }
    let axes: Vec<usize> = match cx.ints_opt("axes")? {
        Some(a) => a.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
        return Err(format!("axes {axes:?} repeat an axis").into());
    }
    let cubic_a = cx.float("cubic_coeff_a", -0.75)?;
    let exclude = cx.int("exclude_outside", 0)? != 0;
    // The output size, and per axis the scale ONNX maps coordinates with when it is not the
    // ratio out / in (given scales, or the common scale of a keep_aspect_ratio_policy).
    let mut out = shape.clone();
    let mut scale: Vec<Option<f64>> = vec![None; rank];
    // The factor onnx's reference maps coordinates with on each axis.
    let mut factor = vec![1.0; rank];
    match (sizes, scales) {
        (Some(s), _) if !s.is_empty() => {
            let s = pos(s, "size")?;
            if s.len() != axes.len() {
                return Err(format!("{} sizes for {} axes", s.len(), axes.len()).into());
            }
            let ratio = |i: usize| s[i] as f64 / shape[axes[i]] as f64;
            let common = match policy.as_str() {
                "stretch" => None,
                "not_larger" => Some((0..axes.len()).map(ratio).fold(f64::INFINITY, f64::min)),
                _ => Some((0..axes.len()).map(ratio).fold(0.0, f64::max)),
            };
            for (i, &a) in axes.iter().enumerate() {
                match common {
                    None => {
                        out[a] = s[i];
                        factor[a] = ratio(i);
                    }
                    Some(c) => {
                        // onnx rounds half up.
                        out[a] = (c * shape[a] as f64 + 0.5).floor() as u64;
                        scale[a] = Some(c);
                        factor[a] = c;
                    }
                }
            }
        }
        (_, Some(sc)) if !sc.is_empty() => {
            if sc.len() != axes.len() {
                return Err(format!("{} scales for {} axes", sc.len(), axes.len()).into());
            }
            for (&a, &s) in axes.iter().zip(&sc) {
                let o = (shape[a] as f64 * s as f32 as f64).floor();
                if o.is_nan() || o < 0.0 || o >= u32::MAX as f64 || s.is_nan() || s <= 0.0 {
                    return Err(format!("scale {s} gives an invalid size").into());
                }
                out[a] = o as u64;
                factor[a] = s as f32 as f64;
                if o > 0.0 && (o / shape[a] as f64) as f32 != s as f32 {
                    scale[a] = Some(s as f32 as f64);
                }
            }
        }
        _ => return Err("needs scales or sizes".into()),
    }
    let mut rois = vec![None; rank];
    if let Some(r) = &roi {
        if r.len() != 2 * axes.len() {
            return Err(format!(
                "input 1 (roi) has {} values, expected 2 per resized axis ({})",
                r.len(),
                2 * axes.len()
            )
            .into());
        }
        for (i, &a) in axes.iter().enumerate() {
            rois[a] = Some((r[i], r[axes.len() + i]));
        }
    }
    let two_d = rank == 4 && out[..2] == shape[..2] && scale[0].is_none() && scale[1].is_none();
    if antialias || roi.is_some() || !two_d {
        let kernel = Kernel { method, antialias, cubic_a, exclude_outside: exclude, nearest: &rounding };
        return one(separable(cx, x, &out, &factor, &rois, (&coord, &kernel, extrapolation))?);
    }
    let attrs = Attrs::new()
        .with("size", ints(&out[2..]))
        .with("method", AttrValue::Str(method.into()))
        .with("coordinate_transformation_mode", AttrValue::Str(coord.into()))
        .with("rounding_method", AttrValue::Str(rounding.into()))
        .with("cubic_alpha", AttrValue::Float(cubic_a))
        .with("exclude_outside", AttrValue::Bool(exclude));
    let attrs = match (scale[2], scale[3]) {
        (None, None) => attrs,
        (h, w) => attrs
            .with("scale_h", AttrValue::Float(h.unwrap_or(out[2] as f64 / shape[2] as f64)))
            .with("scale_w", AttrValue::Float(w.unwrap_or(out[3] as f64 / shape[3] as f64))),
    };
    one(cx.call("resize2d", &[&x], attrs)?)
}
