//! Loop-level definition of `grid_sample`: the sampling coordinates depend on the grid's
//! values, so they are computed in the PrimFunc, in f64 as the graph kernel computes them.
//!
//! Phases: (1) per spatial axis, a stage maps every grid point to its input coordinate
//! (`align_corners`, nearest rounding, then border clamping or reflection of points outside);
//! (2) a reduction over the taps (1, 2 or 4 per axis) sums weight × input where every tap's
//! source is inside (zeros padding) or mapped inside (border, reflection); a coordinate that
//! is not finite contributes nothing.

use super::super::builder::PrimFuncBuilder;
use super::super::compute::{ex, Kernel, Value};
use super::super::ir::{BinOp, Intrinsic, PExprId, VarId};
use super::{err, LowerCx};
use crate::ir::DType;
use crate::op::kernels::{attr_bool, attr_choice};

const F: DType = DType::F64;

fn c(b: &mut PrimFuncBuilder, v: f64) -> Value {
    ex::c(b, v, F)
}

/// The kernel's `reflect(x, lo, hi)`, `x` built by `mk` for each use.
fn reflect(b: &mut PrimFuncBuilder, mk: &dyn Fn(&mut PrimFuncBuilder) -> Value, lo: f64, hi: f64) -> Value {
    let range = hi - lo;
    if range <= 0.0 {
        return c(b, lo);
    }
    // One side: dx = |x - edge|; n = trunc(dx / range); r = dx - n * range; even n stays on
    // the near side (`near ± r`), odd n flips to the far one.
    let side = |b: &mut PrimFuncBuilder, below: bool| -> Value {
        let dx = |b: &mut PrimFuncBuilder| -> Value {
            let x = mk(b)?;
            if below {
                let l = c(b, lo)?;
                b.bin(BinOp::Sub, l, x)
            } else {
                let h = c(b, hi)?;
                b.bin(BinOp::Sub, x, h)
            }
        };
        let n = |b: &mut PrimFuncBuilder| -> Value {
            let d = dx(b)?;
            let rg = c(b, range)?;
            let q = b.bin(BinOp::Div, d, rg)?;
            b.call(Intrinsic::Trunc, &[q])
        };
        let d2 = dx(b)?;
        let n1 = n(b)?;
        let rg = c(b, range)?;
        let nr = b.bin(BinOp::Mul, n1, rg)?;
        let r = b.bin(BinOp::Sub, d2, nr)?;
        let r2 = b.copy_expr(r)?;
        let n2 = n(b)?;
        let ni = b.cast(n2, DType::I64);
        let two = b.i64(2);
        let m = b.bin(BinOp::FloorMod, ni, two)?;
        let z = b.i64(0);
        let even = b.bin(BinOp::Eq, m, z)?;
        let (l, h) = (c(b, lo)?, c(b, hi)?);
        let lo_r = b.bin(BinOp::Add, l, r)?;
        let hi_r = b.bin(BinOp::Sub, h, r2)?;
        if below {
            b.select(even, lo_r, hi_r)
        } else {
            b.select(even, hi_r, lo_r)
        }
    };
    let x1 = mk(b)?;
    let l = c(b, lo)?;
    let is_below = b.bin(BinOp::Lt, x1, l)?;
    let x2 = mk(b)?;
    let h = c(b, hi)?;
    let is_above = b.bin(BinOp::Gt, x2, h)?;
    let below = side(b, true)?;
    let above = side(b, false)?;
    let x3 = mk(b)?;
    let inner = b.select(is_above, above, x3)?;
    b.select(is_below, below, inner)
}

pub(super) fn grid_sample(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let op = cx.op;
    let mode = attr_choice(op, cx.attrs, "mode", &["linear", "nearest", "cubic"]).map_err(err)?;
    let padding = attr_choice(op, cx.attrs, "padding_mode", &["zeros", "border", "reflection"]).map_err(err)?;
    let align = attr_bool(op, cx.attrs, "align_corners", false).map_err(err)?;
    let x = &cx.args[0];
    let r = x.shape.len() - 2;
    let dims: Vec<i64> = x.shape[2..].iter().map(|&d| d as i64).collect();
    let (xi, gi) = (cx.ins[0], cx.ins[1]);
    if dims.contains(&0) {
        return k.compute(cx.out_buf, |b, _| ex::c(b, 0.0, cx.out.dtype));
    }
    let border = |d: usize| if align { (0.0, dims[d] as f64 - 1.0) } else { (-0.5, dims[d] as f64 - 0.5) };
    // Grid points: [N, O1..Or]; the output is [N, C, O1..Or].
    let pshape: Vec<u64> = cx.args[1].shape[..r + 1].to_vec();
    let mut coords = Vec::with_capacity(r);
    for (d, &dim) in dims.iter().enumerate() {
        let len = dim as f64;
        let co = k.temp(&format!("coord{d}"), F, &pshape)?;
        // Phase 1a: the unnormalised coordinate (rounded to even for nearest).
        k.compute(co, |b, iv| {
            let mut gidx = ex::vars(b, iv);
            gidx.push(b.i64((r - 1 - d) as i64));
            let g = b.load(gi, &gidx)?;
            let v = b.cast(g, F);
            let one = c(b, 1.0)?;
            let v1 = b.bin(BinOp::Add, v, one)?;
            let x = if align {
                let half = c(b, 2.0)?;
                let h = b.bin(BinOp::Div, v1, half)?;
                let l = c(b, len - 1.0)?;
                b.bin(BinOp::Mul, h, l)?
            } else {
                let l = c(b, len)?;
                let m = b.bin(BinOp::Mul, v1, l)?;
                let one = c(b, 1.0)?;
                let s = b.bin(BinOp::Sub, m, one)?;
                let two = c(b, 2.0)?;
                b.bin(BinOp::Div, s, two)?
            };
            if mode == "nearest" {
                b.call(Intrinsic::Round, &[x])
            } else {
                Ok(x)
            }
        })?;
        // Phase 1b: points outside the border, clamped or reflected.
        if padding != "zeros" {
            let (lo, hi) = border(d);
            k.compute(co, |b, iv| {
                let load = |b: &mut PrimFuncBuilder| -> Value {
                    let idx = ex::vars(b, iv);
                    b.load(co, &idx)
                };
                if padding == "border" {
                    // Only points outside [lo, hi] move; clamping an inside point is a no-op
                    // except between lo and 0 (or len - 1 and hi), which the kernel keeps.
                    let (x1, x2, x3) = (load(b)?, load(b)?, load(b)?);
                    let l = c(b, lo)?;
                    let below = b.bin(BinOp::Lt, x1, l)?;
                    let h = c(b, hi)?;
                    let above = b.bin(BinOp::Gt, x2, h)?;
                    let out = b.bin(BinOp::Or, below, above)?;
                    let z = c(b, 0.0)?;
                    let m = b.bin(BinOp::Max, x3, z)?;
                    let top = c(b, len - 1.0)?;
                    let clamped = b.bin(BinOp::Min, m, top)?;
                    let x4 = load(b)?;
                    b.select(out, clamped, x4)
                } else {
                    reflect(b, &load, lo, hi)
                }
            })?;
        }
        coords.push(co);
    }
    let taps: i64 = match mode {
        "nearest" => 1,
        "linear" => 2,
        _ => 4,
    };
    let acc = k.temp("acc", F, &cx.out.shape)?;
    let far = (1u64 << 40) as f64;
    k.reduce(
        acc,
        &vec![taps; r],
        BinOp::Add,
        |b| c(b, 0.0),
        |b, iv, rv| {
            // iv: [n, ch, o1..or]; the grid point is [n, o1..or].
            let point = |b: &mut PrimFuncBuilder| -> Vec<PExprId> {
                let mut p = vec![b.var_ref(iv[0])];
                p.extend(ex::vars(b, &iv[2..]));
                p
            };
            let coord = |b: &mut PrimFuncBuilder, d: usize| -> Value {
                let p = point(b);
                let x = b.load(coords[d], &p)?;
                let (lo, hi) = (c(b, -far)?, c(b, far)?);
                let m = b.bin(BinOp::Max, x, lo)?;
                b.bin(BinOp::Min, m, hi)
            };
            let mut ok: Option<PExprId> = None;
            let mut weight: Option<PExprId> = None;
            let mut src = Vec::with_capacity(r);
            let and = |b: &mut PrimFuncBuilder, acc: Option<PExprId>, v: PExprId| -> Value {
                match acc {
                    Some(a) => b.bin(BinOp::And, a, v),
                    None => Ok(v),
                }
            };
            for d in 0..r {
                let len = dims[d];
                // Finite coordinate.
                let p = point(b);
                let raw = b.load(coords[d], &p)?;
                let raw2 = b.copy_expr(raw)?;
                let nan = b.call(Intrinsic::IsNan, &[raw])?;
                let inf = b.call(Intrinsic::IsInf, &[raw2])?;
                let bad = b.bin(BinOp::Or, nan, inf)?;
                let finite = b.not(bad)?;
                ok = Some(and(b, ok, finite)?);
                // Tap index i (an expression built per use) and its weight.
                let tap = rv[d];
                let index = |b: &mut PrimFuncBuilder| -> Value {
                    let x = coord(b, d)?;
                    if mode == "nearest" {
                        return Ok(b.cast(x, DType::I64));
                    }
                    let fl = b.call(Intrinsic::Floor, &[x])?;
                    let i0 = b.cast(fl, DType::I64);
                    let t = b.var_ref(tap);
                    let i = b.bin(BinOp::Add, i0, t)?;
                    ex::plus(b, i, if mode == "cubic" { -1 } else { 0 })
                };
                let frac = |b: &mut PrimFuncBuilder| -> Value {
                    let x = coord(b, d)?;
                    let x2 = coord(b, d)?;
                    let fl = b.call(Intrinsic::Floor, &[x2])?;
                    b.bin(BinOp::Sub, x, fl)
                };
                let w = match mode {
                    "nearest" => c(b, 1.0)?,
                    "linear" => {
                        let w1 = frac(b)?;
                        let one = c(b, 1.0)?;
                        let w2 = frac(b)?;
                        let w0 = b.bin(BinOp::Sub, one, w2)?;
                        let t = b.var_ref(tap);
                        let z = b.i64(0);
                        let first = b.bin(BinOp::Eq, t, z)?;
                        b.select(first, w0, w1)?
                    }
                    _ => cubic_weight(b, &frac, tap)?,
                };
                weight = Some(match weight {
                    Some(wp) => b.bin(BinOp::Mul, wp, w)?,
                    None => w,
                });
                // Where the tap reads.
                match padding {
                    "zeros" => {
                        let i = index(b)?;
                        let inside = ex::in_range(b, i, 0, len)?;
                        ok = Some(and(b, ok, inside)?);
                        let i2 = index(b)?;
                        src.push(ex::clamp(b, i2, 0, len - 1)?);
                    }
                    "border" => {
                        let i = index(b)?;
                        src.push(ex::clamp(b, i, 0, len - 1)?);
                    }
                    _ => {
                        let (lo, hi) = border(d);
                        let mk = |b: &mut PrimFuncBuilder| -> Value {
                            let i = index(b)?;
                            Ok(b.cast(i, F))
                        };
                        let rf = reflect(b, &mk, lo, hi)?;
                        let j = b.cast(rf, DType::I64);
                        src.push(ex::clamp(b, j, 0, len - 1)?);
                    }
                }
            }
            let mut xidx = vec![b.var_ref(iv[0]), b.var_ref(iv[1])];
            xidx.extend(src);
            let xv = b.load(xi, &xidx)?;
            let xv = b.cast(xv, F);
            let w = weight.ok_or("grid_sample over no axes")?;
            let term = b.bin(BinOp::Mul, w, xv)?;
            let zero = c(b, 0.0)?;
            let ok = ok.ok_or("grid_sample over no axes")?;
            b.select(ok, term, zero)
        },
    )?;
    k.compute(cx.out_buf, |b, iv| {
        let idx = ex::vars(b, iv);
        let v = b.load(acc, &idx)?;
        Ok(b.cast(v, cx.out.dtype))
    })
}

/// The kernel's cubic weight (alpha -0.75) of tap `t` at fraction `frac`.
fn cubic_weight(b: &mut PrimFuncBuilder, frac: &dyn Fn(&mut PrimFuncBuilder) -> Value, tap: VarId) -> Value {
    let a = -0.75;
    // Each weight is a polynomial in s, with s = x + 1, x, 1 - x, 2 - x (x = |frac|).
    let poly = |b: &mut PrimFuncBuilder, k: usize| -> Value {
        let s = |b: &mut PrimFuncBuilder| -> Value {
            let x = frac(b)?;
            let x = b.call(Intrinsic::Abs, &[x])?;
            Ok(match k {
                0 => {
                    let one = c(b, 1.0)?;
                    b.bin(BinOp::Add, x, one)?
                }
                1 => x,
                2 => {
                    let one = c(b, 1.0)?;
                    b.bin(BinOp::Sub, one, x)?
                }
                _ => {
                    let two = c(b, 2.0)?;
                    b.bin(BinOp::Sub, two, x)?
                }
            })
        };
        let mul = |b: &mut PrimFuncBuilder, p: PExprId, q: PExprId| b.bin(BinOp::Mul, p, q);
        if k == 0 || k == 3 {
            // ((a s - 5a) s + 8a) s - 4a
            let s1 = s(b)?;
            let ca = c(b, a)?;
            let t = mul(b, ca, s1)?;
            let c5 = c(b, 5.0 * a)?;
            let t = b.bin(BinOp::Sub, t, c5)?;
            let s2 = s(b)?;
            let t = mul(b, t, s2)?;
            let c8 = c(b, 8.0 * a)?;
            let t = b.bin(BinOp::Add, t, c8)?;
            let s3 = s(b)?;
            let t = mul(b, t, s3)?;
            let c4 = c(b, 4.0 * a)?;
            b.bin(BinOp::Sub, t, c4)
        } else {
            // ((a + 2) s - (a + 3)) s s + 1
            let s1 = s(b)?;
            let ca = c(b, a + 2.0)?;
            let t = mul(b, ca, s1)?;
            let c3 = c(b, a + 3.0)?;
            let t = b.bin(BinOp::Sub, t, c3)?;
            let s2 = s(b)?;
            let t = mul(b, t, s2)?;
            let s3 = s(b)?;
            let t = mul(b, t, s3)?;
            let one = c(b, 1.0)?;
            b.bin(BinOp::Add, t, one)
        }
    };
    let w: Vec<PExprId> = (0..4).map(|k| poly(b, k)).collect::<Result<_, _>>()?;
    let mut out = w[3];
    for k in (0..3).rev() {
        let t = b.var_ref(tap);
        let kk = b.i64(k as i64);
        let is = b.bin(BinOp::Eq, t, kk)?;
        out = b.select(is, w[k], out)?;
    }
    Ok(out)
}
