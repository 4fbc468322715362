//! Loop-level definitions of the selections and scans along one axis: `argmax`, `argmin`,
//! `cumsum` and `cumprod`.

use super::super::builder::PrimFuncBuilder;
use super::super::compute::{ex, Kernel, Value};
use super::super::ir::{BinOp, Intrinsic, PExprId, VarId};
use super::{err, LowerCx};
use crate::ir::DType;
use crate::op::kernels::{attr_bool, attr_int, norm_axis};

/// The input index of a reduction over `axis` from output loop variables `iv` (the axis kept
/// as 1 or dropped), the axis at `at`.
fn with_axis(b: &mut PrimFuncBuilder, iv: &[VarId], axis: usize, keep: bool, at: PExprId) -> Vec<PExprId> {
    if keep {
        return ex::replace_at(b, iv, axis, at);
    }
    let mut idx = ex::vars(b, &iv[..axis]);
    idx.push(at);
    idx.extend(ex::vars(b, &iv[axis..]));
    idx
}

/// Whether `x` comes before `best` in `argmax`'s order (NaN above every number; with `last`,
/// an equal value also wins) or, with `max` false, `argmin`'s.
pub(super) fn better(b: &mut PrimFuncBuilder, x: PExprId, best: PExprId, max: bool, last: bool, d: DType) -> Value {
    let (x2, best2) = (b.copy_expr(x)?, b.copy_expr(best)?);
    let strict = b.bin(if max { BinOp::Gt } else { BinOp::Lt }, x, best)?;
    let wins = if last {
        let eq = b.bin(BinOp::Eq, x2, best2)?;
        b.bin(BinOp::Or, strict, eq)?
    } else {
        strict
    };
    if !d.is_float() {
        return Ok(wins);
    }
    // NaN: with argmax a NaN beats every number (and with `last` another NaN); a number never
    // beats a NaN. With argmin a NaN never wins, and every number beats a NaN best.
    let (x3, b3) = (b.copy_expr(x2)?, b.copy_expr(best2)?);
    let xn = b.call(Intrinsic::IsNan, &[x3])?;
    let bn = b.call(Intrinsic::IsNan, &[b3])?;
    let bn2 = b.copy_expr(bn)?;
    if max {
        // select(isnan(x), !isnan(best) || last, !isnan(best) && wins)
        let nb = b.not(bn)?;
        let lastc = b.int(last as i64, crate::tir::PType::scalar(DType::Bool))?;
        let nan_arm = b.bin(BinOp::Or, nb, lastc)?;
        let nb2 = b.not(bn2)?;
        let num_arm = b.bin(BinOp::And, nb2, wins)?;
        b.select(xn, nan_arm, num_arm)
    } else {
        // select(isnan(x), isnan(best) && last, isnan(best) || wins)
        let lastc = b.int(last as i64, crate::tir::PType::scalar(DType::Bool))?;
        let nan_arm = b.bin(BinOp::And, bn, lastc)?;
        let num_arm = b.bin(BinOp::Or, bn2, wins)?;
        b.select(xn, nan_arm, num_arm)
    }
}

/// `argmax` / `argmin`: the best value so far in a temporary, its position in the output.
pub(super) fn arg(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, x.shape.len()).map_err(err)?;
    let keep = attr_bool(cx.op, cx.attrs, "keepdims", false).map_err(err)?;
    let last = attr_bool(cx.op, cx.attrs, "select_last_index", false).map_err(err)?;
    let max = cx.op == "argmax";
    let n = x.shape[axis] as i64;
    let out_shape = cx.out_shape();
    let best = k.temp("best", x.dtype, &cx.out.shape)?;
    let (a, o) = (cx.ins[0], cx.out_buf);
    k.compute(best, |b, iv| {
        let z = b.i64(0);
        let idx = with_axis(b, iv, axis, keep, z);
        b.load(a, &idx)
    })?;
    k.compute(o, |b, _| Ok(b.i64(0)))?;
    let mut domain = out_shape.clone();
    domain.push(n);
    let r = out_shape.len();
    k.each(&domain, |b, iv| {
        let (ov, rv) = (&iv[..r], iv[r]);
        let at = b.var_ref(rv);
        let xi = with_axis(b, ov, axis, keep, at);
        let xv = b.load(a, &xi)?;
        let bi = ex::vars(b, ov);
        let bv = b.load(best, &bi)?;
        let cond = better(b, xv, bv, max, last, x.dtype)?;
        let at2 = b.var_ref(rv);
        let xi2 = with_axis(b, ov, axis, keep, at2);
        let xv2 = b.load(a, &xi2)?;
        let bi2 = ex::vars(b, ov);
        let set_best = b.store(best, &bi2, xv2)?;
        let oi = ex::vars(b, ov);
        let pos = b.var_ref(rv);
        let set_out = b.store(o, &oi, pos)?;
        let then_ = b.seq(&[set_best, set_out]);
        Ok(vec![b.if_(cond, then_, None)?])
    })
}

/// `cumsum` / `cumprod` along `axis` (from the end with `reverse`, each element left out
/// with `exclusive`): a running accumulator per line, in f64 for floats as the graph kernel
/// accumulates, wrapping for integers.
pub(super) fn cum(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let rank = x.shape.len();
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, rank).map_err(err)?;
    let exclusive = attr_bool(cx.op, cx.attrs, "exclusive", false).map_err(err)?;
    let reverse = attr_bool(cx.op, cx.attrs, "reverse", false).map_err(err)?;
    let prod = cx.op == "cumprod";
    let d = x.dtype;
    let ad = if d.is_float() { DType::F64 } else { d };
    let n = x.shape[axis] as i64;
    let mut ashape = x.shape.to_vec();
    ashape[axis] = 1;
    let acc = k.temp("acc", ad, &ashape)?;
    let (a, o) = (cx.ins[0], cx.out_buf);
    let init = if prod { 1.0 } else { 0.0 };
    k.compute(acc, |b, _| ex::c(b, init, ad))?;
    let shape = cx.shape_of(0);
    k.each(&shape, |b, iv| {
        let pos = |b: &mut PrimFuncBuilder| -> Value {
            let v = b.var_ref(iv[axis]);
            if reverse {
                ex::affine(b, v, -1, n - 1)
            } else {
                Ok(v)
            }
        };
        let at0 = |b: &mut PrimFuncBuilder| {
            let z = b.i64(0);
            ex::replace_at(b, iv, axis, z)
        };
        let to_out = |b: &mut PrimFuncBuilder, v: PExprId| if ad == d { v } else { b.cast(v, d) };
        // out[p] = acc (exclusive: before adding x[p]; inclusive: after).
        let write = |b: &mut PrimFuncBuilder| -> Result<_, String> {
            let ai = at0(b);
            let av = b.load(acc, &ai)?;
            let v = to_out(b, av);
            let p = pos(b)?;
            let oi = ex::replace_at(b, iv, axis, p);
            b.store(o, &oi, v)
        };
        let update = |b: &mut PrimFuncBuilder| -> Result<_, String> {
            let ai = at0(b);
            let av = b.load(acc, &ai)?;
            let p = pos(b)?;
            let xi = ex::replace_at(b, iv, axis, p);
            let xv = b.load(a, &xi)?;
            let xv = if ad == d { xv } else { b.cast(xv, ad) };
            let nv = b.bin(if prod { BinOp::Mul } else { BinOp::Add }, av, xv)?;
            let ai2 = at0(b);
            b.store(acc, &ai2, nv)
        };
        Ok(if exclusive { vec![write(b)?, update(b)?] } else { vec![update(b)?, write(b)?] })
    })?;
    Ok(())
}
