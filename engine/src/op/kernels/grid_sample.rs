//! `grid_sample` (ONNX GridSample, opsets 16–22): samples `x` `[N, C, D1, …, Dr]` at the
//! normalised coordinates of `grid` `[N, O1, …, Or, r]` (the last component first: `x`, `y`,
//! `z` index the last, second-to-last, … spatial axis), with linear, nearest or cubic
//! interpolation and zeros, border or reflection padding, as onnx's reference does.
//!
//! Interpolation is separable: each output point takes per axis a list of (index, weight)
//! taps — 1 for nearest, 2 for linear, 4 for cubic — and sums the products over all tap
//! combinations, which is what onnx's axis-by-axis recursion computes.

use super::{
    attr_bool, attr_choice, check_arity, elements, from_f32, invalid, out_dims, require_float, shape_str, tensor_arg,
    to_f32, type_err, types_of, KResult,
};
use crate::ir::{Attrs, Tensor, Type};
use crate::op::{KernelCtx, OpError};

const OP: &str = "grid_sample";
const MODES: &[&str] = &["linear", "nearest", "cubic"];
const PADDING: &[&str] = &["zeros", "border", "reflection"];

/// Type relation of `grid_sample(x, grid, mode="linear", padding_mode="zeros",
/// align_corners=false)`: `[N, C, O1, …, Or]` in the dtype of `x`.
pub(crate) fn grid_sample_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(OP, args.len(), 2)?;
    let x = tensor_arg(OP, args, 0)?;
    let g = tensor_arg(OP, args, 1)?;
    require_float(OP, x)?;
    require_float(OP, g)?;
    attr_choice(OP, attrs, "mode", MODES)?;
    attr_choice(OP, attrs, "padding_mode", PADDING)?;
    attr_bool(OP, attrs, "align_corners", false)?;
    let r = x.shape.len().saturating_sub(2);
    if x.shape.len() < 3 || g.shape.len() != r + 2 || g.shape[0] != x.shape[0] || g.shape[r + 1] != r as u64 {
        return Err(type_err(
            OP,
            format_args!(
                "x [N, C, D1…Dr] (r >= 1) needs a grid [N, O1…Or, r]; got x {} and grid {}",
                shape_str(&x.shape),
                shape_str(&g.shape)
            ),
        ));
    }
    let mut shape = vec![x.shape[0], x.shape[1]];
    shape.extend_from_slice(&g.shape[1..=r]);
    Ok(Type::tensor(shape, x.dtype))
}

/// The cost: every output element times its taps (up to 4 per spatial axis).
pub(crate) fn grid_sample_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    let r = args.first().and_then(Type::as_tensor).map_or(0, |t| t.shape.len().saturating_sub(2));
    let taps = 4u64.saturating_pow(r as u32);
    elements(out).saturating_mul(taps).saturating_add(args.iter().map(elements).fold(0, u64::saturating_add))
}

/// onnx's `_gs_reflect`: `x` folded into `[lo, hi]`.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n as i64 % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n as i64 % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

/// Cubic convolution weights (alpha -0.75) of the four taps around a point `t` past the
/// first inner one.
fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let x = t.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

/// Kernel of `grid_sample`.
pub(crate) fn grid_sample(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = grid_sample_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let mode = attr_choice(OP, attrs, "mode", MODES)?;
    let padding = attr_choice(OP, attrs, "padding_mode", PADDING)?;
    let align = attr_bool(OP, attrs, "align_corners", false)?;
    let x = to_f32(OP, &args[0])?;
    let g = to_f32(OP, &args[1])?;
    let xs = x.shape().to_vec();
    let (n, c) = (xs[0], xs[1]);
    let dims = &xs[2..];
    let r = dims.len();
    let xf: Vec<f32> = x.iter().copied().collect();
    let gf: Vec<f32> = g.iter().copied().collect();
    let points: usize = shape[2..].iter().product();
    let spatial: usize = dims.iter().product();
    let xstr = super::scatter::strides(dims);
    // Borders for reflection, per axis.
    let border = |d: usize| if align { (0.0, dims[d] as f64 - 1.0) } else { (-0.5, dims[d] as f64 - 0.5) };
    // Where tap `i` of axis `d` reads: `None` outside (zeros padding).
    let source = |i: i64, d: usize| -> Option<usize> {
        let len = dims[d] as i64;
        match padding {
            "zeros" => (0..len).contains(&i).then_some(i as usize),
            "border" => Some(i.clamp(0, len - 1) as usize),
            _ => {
                let (lo, hi) = border(d);
                let j = reflect(i as f64, lo, hi) as i64;
                Some(j.clamp(0, len - 1) as usize)
            }
        }
    };
    let mut out = vec![0f32; n * c * points];
    if spatial == 0 {
        // Every tap is outside an empty image; padding has nothing to repeat.
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), out).map_err(|e| invalid(OP, e))?;
        return Ok(vec![from_f32(OP, a, dtype)?]);
    }
    let mut taps: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); r];
    for b in 0..n {
        for p in 0..points {
            let at = (b * points + p) * r;
            for d in 0..r {
                // Component r-1-d of the grid point indexes axis d.
                let v = gf[at + r - 1 - d] as f64;
                let len = dims[d] as f64;
                let mut x = if align { (v + 1.0) / 2.0 * (len - 1.0) } else { ((v + 1.0) * len - 1.0) / 2.0 };
                if mode == "nearest" {
                    // numpy's rint: halves to even.
                    let f = x.floor();
                    let diff = x - f;
                    x = if diff > 0.5 || (diff == 0.5 && f % 2.0 != 0.0) { f + 1.0 } else { f };
                }
                let (lo, hi) = border(d);
                if x < lo || x > hi {
                    match padding {
                        "border" => x = x.clamp(0.0, len - 1.0),
                        "reflection" => x = reflect(x, lo, hi),
                        _ => {}
                    }
                }
                let t = &mut taps[d];
                t.clear();
                if !x.is_finite() {
                    t.push((None, 0.0));
                    continue;
                }
                // Far outside, every tap is outside (zeros padding): keep the index arithmetic
                // in range.
                let far = (1u64 << 40) as f64;
                let x = x.clamp(-far, far);
                match mode {
                    "nearest" => t.push((source(x as i64, d), 1.0)),
                    "linear" => {
                        let x0 = x.floor();
                        let w = x - x0;
                        t.push((source(x0 as i64, d), 1.0 - w));
                        t.push((source(x0 as i64 + 1, d), w));
                    }
                    _ => {
                        let x0 = x.floor();
                        let w = cubic(x - x0);
                        for (k, &wk) in w.iter().enumerate() {
                            t.push((source(x0 as i64 - 1 + k as i64, d), wk));
                        }
                    }
                }
            }
            for ch in 0..c {
                let base = (b * c + ch) * spatial;
                let mut sum = 0.0f64;
                let mut k = vec![0usize; r];
                'combos: loop {
                    let mut w = 1.0f64;
                    let mut off = Some(base);
                    for d in 0..r {
                        let (src, wd) = taps[d][k[d]];
                        w *= wd;
                        off = match (off, src) {
                            (Some(o), Some(s)) => Some(o + s * xstr[d]),
                            _ => None,
                        };
                    }
                    if let Some(o) = off {
                        sum += w * xf[o] as f64;
                    }
                    for d in (0..r).rev() {
                        k[d] += 1;
                        if k[d] < taps[d].len() {
                            continue 'combos;
                        }
                        k[d] = 0;
                    }
                    break;
                }
                out[(b * c + ch) * points + p] = sum as f32;
            }
        }
    }
    let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), out).map_err(|e| invalid(OP, e))?;
    Ok(vec![from_f32(OP, a, dtype)?])
}
