//! `resize2d`: ONNX Resize on the last two dimensions (nearest, linear and cubic
//! interpolation with ONNX's coordinate transformation and rounding modes).
//!
//! The kernel follows ONNX's reference implementation axis by axis: an output coordinate is
//! mapped to an input coordinate `x`, the `n` (2, or 4 for cubic) input positions nearest to
//! `x` in the edge-padded input are its taps, and the weights come from the fractional part of
//! `x`. Because each axis is independent, the 2-d result is the sum over tap pairs of the
//! product of the two axes' weights.

use ndarray::{ArrayD, IxDyn};

use super::{
    arr, attr_bool, attr_choice, attr_float, attr_ints, check_arity, invalid, out_dims, require_numeric, shape_str,
    tensor_arg, type_err, types_of, with_elem, Elem, KResult,
};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

const OP: &str = "resize2d";
const METHODS: &[&str] = &["nearest", "linear", "cubic"];
const COORDS: &[&str] = &[
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
    "half_pixel_symmetric",
];
const ROUNDING: &[&str] = &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];

/// Checked attributes.
struct Params {
    size: [u64; 2],
    /// Explicit scales (`scale_h`, `scale_w`), when the caller had ONNX `scales` rather than
    /// `sizes`: ONNX maps coordinates with the given scale, not with `out / in`.
    scales: [Option<f64>; 2],
    method: &'static str,
    coord: &'static str,
    rounding: &'static str,
    cubic_alpha: f64,
    exclude_outside: bool,
}

fn params(attrs: &Attrs) -> Result<Params, OpError> {
    let size = match attr_ints(OP, attrs, "size")? {
        None => return Err(type_err(OP, "missing attribute `size`")),
        Some(&[h, w]) if h >= 0 && w >= 0 => [h as u64, w as u64],
        Some(v) => {
            return Err(type_err(OP, format_args!("`size` must be two non-negative values [out_h, out_w], got {v:?}")))
        }
    };
    let mut scales = [None, None];
    for (slot, key) in scales.iter_mut().zip(["scale_h", "scale_w"]) {
        if attrs.get(key).is_some() {
            let v = attr_float(OP, attrs, key, 1.0)?;
            if !(v.is_finite() && v > 0.0) {
                return Err(type_err(OP, format_args!("`{key}` must be positive and finite, got {v}")));
            }
            *slot = Some(v);
        }
    }
    Ok(Params {
        size,
        scales,
        method: attr_choice(OP, attrs, "method", METHODS)?,
        coord: attr_choice(OP, attrs, "coordinate_transformation_mode", COORDS)?,
        rounding: attr_choice(OP, attrs, "rounding_method", ROUNDING)?,
        cubic_alpha: attr_float(OP, attrs, "cubic_alpha", -0.75)?,
        exclude_outside: attr_bool(OP, attrs, "exclude_outside", false)?,
    })
}

/// Type relation of `resize2d(x, size=[out_h, out_w], …)`: `x` has rank 2 or more and its last
/// two dimensions become `size`.
pub(crate) fn resize2d_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(OP, args.len(), 1)?;
    let x = tensor_arg(OP, args, 0)?;
    require_numeric(OP, x)?;
    let p = params(attrs)?;
    let r = x.shape.len();
    if r < 2 {
        return Err(type_err(
            OP,
            format_args!("expected a tensor of rank 2 or more, got shape {}", shape_str(&x.shape)),
        ));
    }
    for i in 0..2 {
        if x.shape[r - 2 + i] == 0 && p.size[i] > 0 {
            return Err(type_err(
                OP,
                format_args!("cannot resize the empty axis {} of {}", r - 2 + i, shape_str(&x.shape)),
            ));
        }
    }
    let mut shape = x.shape.to_vec();
    shape[r - 2..].copy_from_slice(&p.size);
    Ok(Type::tensor(shape, x.dtype))
}

/// The input coordinate of output coordinate `o` along an axis.
fn source_coord(p: &Params, o: usize, in_len: usize, out_len: usize, scale: f64, explicit: bool) -> f64 {
    let x = o as f64;
    let (in_f, out_int) = (in_len as f64, out_len as f64);
    // ONNX's reference uses the scaled length `scale * in`, which is `out` when sizes were given.
    let out_f = if explicit { scale * in_f } else { out_int };
    match p.coord {
        "asymmetric" => x / scale,
        "align_corners" if out_f == 1.0 => 0.0,
        "align_corners" => x * (in_f - 1.0) / (out_f - 1.0),
        "pytorch_half_pixel" if out_f == 1.0 => -0.5,
        "tf_half_pixel_for_nn" => (x + 0.5) / scale,
        "half_pixel_symmetric" => {
            let adjustment = out_int / out_f;
            let offset = in_f / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        // half_pixel, and pytorch_half_pixel for lengths above 1
        _ => (x + 0.5) / scale - 0.5,
    }
}

/// The weights of the `n` taps for fractional position `ratio` in (0, 1] (1 for an integer
/// coordinate).
fn coeffs(p: &Params, ratio: f64) -> Vec<f64> {
    match p.method {
        "nearest" if ratio == 1.0 => vec![0.0, 1.0],
        "nearest" => {
            let right = match p.rounding {
                "round_prefer_ceil" => ratio >= 0.5,
                "floor" => false,
                "ceil" => true,
                _ => ratio > 0.5,
            };
            if right {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        "linear" => vec![1.0 - ratio, ratio],
        _ => {
            let a = p.cubic_alpha;
            let (r1, s) = (ratio + 1.0, 1.0 - ratio);
            let s1 = s + 1.0;
            vec![
                ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0,
                ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                ((a * s1 - 5.0 * a) * s1 + 8.0 * a) * s1 - 4.0 * a,
            ]
        }
    }
}

/// For each output coordinate along an axis, its taps: (input index, weight).
fn axis_taps(p: &Params, axis: usize, in_len: usize, out_len: usize) -> Vec<Vec<(usize, f64)>> {
    let explicit = p.scales[axis].is_some();
    let scale = p.scales[axis].unwrap_or(out_len as f64 / in_len as f64);
    let n: i64 = if p.method == "cubic" { 4 } else { 2 };
    let pad = (n + 1) / 2;
    let padded_len = in_len as i64 + 2 * pad;
    (0..out_len)
        .map(|o| {
            let x = source_coord(p, o, in_len, out_len, scale, explicit);
            let ratio = if x.fract() == 0.0 { 1.0 } else { x - x.floor() };
            let mut w = coeffs(p, ratio);
            // The n positions nearest to x in the edge-padded input, ties to the left.
            let start = ((x + pad as f64).ceil() as i64 - n / 2).clamp(0, (padded_len - n).max(0));
            let idx: Vec<i64> = (0..n).map(|k| start + k - pad).collect();
            if p.exclude_outside {
                for (wk, &i) in w.iter_mut().zip(&idx) {
                    if i < 0 || i >= in_len as i64 {
                        *wk = 0.0;
                    }
                }
                let sum: f64 = w.iter().sum();
                w.iter_mut().for_each(|wk| *wk /= sum);
            }
            idx.iter()
                .zip(w)
                .filter(|&(_, wk)| wk != 0.0)
                .map(|(&i, wk)| (i.clamp(0, in_len as i64 - 1) as usize, wk))
                .collect()
        })
        .collect()
}

/// Per output coordinate along one axis, its taps: (input index, weight).
pub(crate) type AxisTaps = Vec<Vec<(usize, f64)>>;

/// The taps of every output row and column, `[rows, columns]`: per output coordinate, the
/// (input index, weight) pairs the kernel sums (the loop level computes with these tables).
pub(crate) fn taps(attrs: &Attrs, in_hw: [usize; 2], out_hw: [usize; 2]) -> Result<[AxisTaps; 2], OpError> {
    let p = params(attrs)?;
    Ok([axis_taps(&p, 0, in_hw[0], out_hw[0]), axis_taps(&p, 1, in_hw[1], out_hw[1])])
}

/// Estimated cost of a `resize2d` call: each output element reads at most 4 x 4 taps (cubic).
pub(crate) fn resize2d_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(16))
}

/// Kernel of `resize2d`; interpolates in f64 and converts back to the dtype (integers
/// truncate, like ONNX's reference).
pub(crate) fn resize2d(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = resize2d_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let p = params(attrs)?;
    let xs = args[0].shape().to_vec();
    let r = xs.len();
    let (ih, iw, oh, ow) = (xs[r - 2], xs[r - 1], shape[r - 2], shape[r - 1]);
    let planes: usize = xs[..r - 2].iter().product();
    let out = with_elem!(dtype, T => {
        if dtype == DType::Bool {
            return Err(type_err(OP, "expected a numeric tensor, got dtype bool"));
        }
        let a = arr::<T>(OP, &args[0])?;
        let mut vals: Vec<T> = Vec::with_capacity(shape.iter().product());
        if planes * oh * ow > 0 {
            let flat: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
            let (ty_taps, tx_taps) = (axis_taps(&p, 0, ih, oh), axis_taps(&p, 1, iw, ow));
            for plane in 0..planes {
                let base = plane * ih * iw;
                for ytaps in &ty_taps {
                    for xtaps in &tx_taps {
                        let mut acc = 0.0;
                        for &(iy, wy) in ytaps {
                            for &(ix, wx) in xtaps {
                                acc += wy * wx * flat[base + iy * iw + ix];
                            }
                        }
                        vals.push(T::from_f64(acc));
                    }
                }
            }
        }
        T::wrap(ArrayD::from_shape_vec(IxDyn(&shape), vals).map_err(|e| invalid(OP, e))?.into_shared())
    });
    Ok(vec![out])
}
