//! Loop-level definitions of the operators with several results, one output buffer per
//! result (`call_tir(…, outputs=n)`): `split`, `batch_norm` and `topk`.

use super::super::builder::PrimFuncBuilder;
use super::super::compute::{ex, Kernel};
use super::super::ir::{BinOp, Intrinsic, PExprId, PType, VarId};
use super::{err, LowerCx};
use crate::ir::DType;
use crate::op::kernels::{attr_bool, attr_float, attr_int, norm_axis};

/// `split`: output `i` is the input from the sum of the earlier outputs' lengths along `axis`.
pub(super) fn split(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let rank = cx.args[0].shape.len();
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, rank).map_err(err)?;
    let mut offset = 0i64;
    for (i, t) in cx.outs.iter().enumerate() {
        let off = offset;
        k.compute(cx.out_bufs[i], |b, iv| {
            let v = b.var_ref(iv[axis]);
            let at = ex::plus(b, v, off)?;
            let idx = ex::replace_at(b, iv, axis, at);
            b.load(cx.ins[0], &idx)
        })?;
        offset += t.shape[axis] as i64;
    }
    Ok(())
}

/// `batch_norm(x, gamma, beta, mean, var)`: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// along `axis`, and the mean and variance passed through.
pub(super) fn batch_norm(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 1).map_err(err)?, x.shape.len()).map_err(err)?;
    // The graph kernel adds epsilon in f32.
    let eps = attr_float(cx.op, cx.attrs, "epsilon", 1e-5).map_err(err)? as f32 as f64;
    let d = x.dtype;
    let p = |b: &mut PrimFuncBuilder, i: usize, iv: &[VarId]| {
        let a = b.var_ref(iv[axis]);
        b.load(cx.ins[i], &[a])
    };
    k.compute(cx.out_bufs[0], |b, iv| {
        let idx = ex::vars(b, iv);
        let xv = b.load(cx.ins[0], &idx)?;
        let m = p(b, 3, iv)?;
        let c = b.bin(BinOp::Sub, xv, m)?;
        let v = p(b, 4, iv)?;
        let e = ex::c(b, eps, d)?;
        let ve = b.bin(BinOp::Add, v, e)?;
        let sd = b.call(Intrinsic::Sqrt, &[ve])?;
        let n = b.bin(BinOp::Div, c, sd)?;
        let g = p(b, 1, iv)?;
        let ng = b.bin(BinOp::Mul, n, g)?;
        let be = p(b, 2, iv)?;
        b.bin(BinOp::Add, ng, be)
    })?;
    for (o, i) in [(1, 3), (2, 4)] {
        k.compute(cx.out_bufs[o], |b, iv| {
            let idx = ex::vars(b, iv);
            b.load(cx.ins[i], &idx)
        })?;
    }
    Ok(())
}

/// `topk`: `k` rounds of selection per line; round `r` takes the best element not yet taken
/// (NaN above every number, earlier positions first among equals, as the graph kernel sorts).
pub(super) fn topk(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let rank = x.shape.len();
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", -1).map_err(err)?, rank).map_err(err)?;
    let largest = attr_bool(cx.op, cx.attrs, "largest", true).map_err(err)?;
    let n = x.shape[axis] as i64;
    let taken = k.temp("taken", DType::Bool, &x.shape)?;
    let mut lshape = x.shape.to_vec();
    lshape[axis] = 1;
    let best = k.temp("best", DType::I64, &lshape)?;
    let (a, vals, pos) = (cx.ins[0], cx.out_bufs[0], cx.out_bufs[1]);
    let d = x.dtype;
    let domain: Vec<i64> = cx.outs[0].shape.iter().map(|&s| s as i64).collect();
    k.each(&domain, |b, iv| {
        let at = |b: &mut PrimFuncBuilder, e: PExprId| ex::replace_at(b, iv, axis, e);
        let best_at = |b: &mut PrimFuncBuilder| {
            let z = b.i64(0);
            at(b, z)
        };
        // best = -1
        let bi = best_at(b);
        let m1 = b.i64(-1);
        let reset = b.store(best, &bi, m1)?;
        // for t in 0..n: if !taken[t] && (best < 0 || better(x[t], x[max(best, 0)])) { best = t }
        let t = b.var("t", PType::scalar(DType::I64))?;
        let tv = b.var_ref(t);
        let ti = at(b, tv);
        let tk = b.load(taken, &ti)?;
        let free = b.not(tk)?;
        let bi2 = best_at(b);
        let bv = b.load(best, &bi2)?;
        let z = b.i64(0);
        let none = b.bin(BinOp::Lt, bv, z)?;
        let tv2 = b.var_ref(t);
        let xi = at(b, tv2);
        let xv = b.load(a, &xi)?;
        let bi3 = best_at(b);
        let bv3 = b.load(best, &bi3)?;
        let bcl = ex::clamp(b, bv3, 0, n - 1)?;
        let xbi = at(b, bcl);
        let xb = b.load(a, &xbi)?;
        let wins = super::scan::better(b, xv, xb, largest, false, d)?;
        let either = b.bin(BinOp::Or, none, wins)?;
        let cond = b.bin(BinOp::And, free, either)?;
        let bi4 = best_at(b);
        let tv3 = b.var_ref(t);
        let set = b.store(best, &bi4, tv3)?;
        let body = b.if_(cond, set, None)?;
        let (lo, ext) = (b.i64(0), b.i64(n));
        let scan = b.for_(t, lo, ext, super::super::ir::ForKind::Serial, body)?;
        // taken[best] = true; values[i] = x[best]; positions[i] = best
        let chosen = |b: &mut PrimFuncBuilder| -> Result<Vec<PExprId>, String> {
            let bi = best_at(b);
            let bv = b.load(best, &bi)?;
            Ok(at(b, bv))
        };
        let ci = chosen(b)?;
        let yes = b.int(1, PType::scalar(DType::Bool))?;
        let mark = b.store(taken, &ci, yes)?;
        let ci2 = chosen(b)?;
        let xv = b.load(a, &ci2)?;
        let oi = ex::vars(b, iv);
        let put_v = b.store(vals, &oi, xv)?;
        let bi5 = best_at(b);
        let bv5 = b.load(best, &bi5)?;
        let oi2 = ex::vars(b, iv);
        let put_p = b.store(pos, &oi2, bv5)?;
        Ok(vec![reset, scan, mark, put_v, put_p])
    })
}
