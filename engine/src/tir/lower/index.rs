//! Loop-level definitions of the indexing family: `take`, `gather_elements`, the scatters,
//! `strided_slice`, `pad`, `concatenate`, `trilu` and `one_hot`.
//!
//! Positions read from index tensors are counted from the end when negative (ONNX), through
//! [`ex::wrap_negative`]; a position still out of range is an out-of-bounds access, which the
//! interpreter reports (the graph kernels report it as an invalid index).

use super::super::builder::PrimFuncBuilder;
use super::super::compute::{ex, Kernel, Value};
use super::super::ir::{BinOp, BufId, PExprId, VarId};
use super::{err, LowerCx};
use crate::ir::DType;
use crate::op::kernels::{attr_choice, attr_float, attr_int, attr_ints, norm_axis};

/// The i64 position `ind[idx]`, negative positions counted from the end of an axis of `dim`.
fn position(b: &mut PrimFuncBuilder, ind: BufId, idx: &[PExprId], dim: i64) -> Value {
    let raw = b.load(ind, idx)?;
    let i = ex::as_index(b, raw);
    ex::wrap_negative(b, i, dim)
}

/// `take(x, indices, axis)`: `out[pre…, j…, post…] = x[pre…, indices[j…], post…]`.
pub(super) fn take(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let (x, ind) = (&cx.args[0], &cx.args[1]);
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, x.shape.len()).map_err(err)?;
    let ni = ind.shape.len();
    let dim = x.shape[axis] as i64;
    k.compute(cx.out_buf, |b, iv| {
        let jdx = ex::vars(b, &iv[axis..axis + ni]);
        let p = position(b, cx.ins[1], &jdx, dim)?;
        let mut idx = ex::vars(b, &iv[..axis]);
        idx.push(p);
        idx.extend(ex::vars(b, &iv[axis + ni..]));
        b.load(cx.ins[0], &idx)
    })
}

/// `gather_elements(x, indices, axis)`: `out[i] = x[i with axis ← indices[i]]`.
pub(super) fn gather_elements(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, x.shape.len()).map_err(err)?;
    let dim = x.shape[axis] as i64;
    k.compute(cx.out_buf, |b, iv| {
        let idx = ex::vars(b, iv);
        let p = position(b, cx.ins[1], &idx, dim)?;
        let src = ex::replace_at(b, iv, axis, p);
        b.load(cx.ins[0], &src)
    })
}

/// `combine(old, update)` for a scatter's `reduction` (later updates win with `none`).
fn combine(b: &mut PrimFuncBuilder, reduction: &str, old: PExprId, upd: PExprId, d: DType) -> Value {
    let op = match (reduction, d == DType::Bool) {
        ("add", false) => BinOp::Add,
        ("mul", false) => BinOp::Mul,
        ("max", false) => BinOp::Max,
        ("min", false) => BinOp::Min,
        ("add" | "max", true) => BinOp::Or,
        ("mul" | "min", true) => BinOp::And,
        _ => return Ok(upd),
    };
    b.bin(op, old, upd)
}

/// A copy of input 0 into the output (the scatters start from the data).
fn copy_input(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    k.compute(cx.out_buf, |b, iv| {
        let idx = ex::vars(b, iv);
        b.load(cx.ins[0], &idx)
    })
}

const REDUCTIONS: &[&str] = &["none", "add", "mul", "max", "min"];

/// `scatter_elements(data, indices, updates, axis, reduction)`: the data, then for every `i`
/// of the indices in row-major order `out[i with axis ← indices[i]] ⊕= updates[i]`.
pub(super) fn scatter_elements(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, x.shape.len()).map_err(err)?;
    let reduction = attr_choice(cx.op, cx.attrs, "reduction", REDUCTIONS).map_err(err)?;
    let dim = x.shape[axis] as i64;
    copy_input(k, cx)?;
    let domain = cx.shape_of(1);
    let o = cx.out_buf;
    k.scatter(o, &domain, |b, iv| {
        let at = |b: &mut PrimFuncBuilder| -> Result<Vec<PExprId>, String> {
            let idx = ex::vars(b, iv);
            let p = position(b, cx.ins[1], &idx, dim)?;
            Ok(ex::replace_at(b, iv, axis, p))
        };
        let (dst, src) = (at(b)?, at(b)?);
        let old = b.load(o, &src)?;
        let ui = ex::vars(b, iv);
        let upd = b.load(cx.ins[2], &ui)?;
        let v = combine(b, reduction, old, upd, x.dtype)?;
        Ok((dst, v))
    })
}

/// `scatter_nd(data, indices, updates, reduction)`: the data, then for every index tuple
/// `indices[j…, :]` (row-major) the slice at it combined with `updates[j…, …]`.
pub(super) fn scatter_nd(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let (x, ind) = (&cx.args[0], &cx.args[1]);
    let reduction = attr_choice(cx.op, cx.attrs, "reduction", REDUCTIONS).map_err(err)?;
    let nj = ind.shape.len() - 1;
    let kk = ind.shape[nj] as usize;
    copy_input(k, cx)?;
    let domain = cx.shape_of(2);
    let o = cx.out_buf;
    k.scatter(o, &domain, |b, iv| {
        let at = |b: &mut PrimFuncBuilder| -> Result<Vec<PExprId>, String> {
            let mut idx = Vec::with_capacity(x.shape.len());
            for a in 0..kk {
                let mut ii = ex::vars(b, &iv[..nj]);
                ii.push(b.i64(a as i64));
                idx.push(position(b, cx.ins[1], &ii, x.shape[a] as i64)?);
            }
            idx.extend(ex::vars(b, &iv[nj..]));
            Ok(idx)
        };
        let (dst, src) = (at(b)?, at(b)?);
        let old = b.load(o, &src)?;
        let ui = ex::vars(b, iv);
        let upd = b.load(cx.ins[2], &ui)?;
        let v = combine(b, reduction, old, upd, x.dtype)?;
        Ok((dst, v))
    })
}

/// `strided_slice`: `out[i] = x[start_d + i_d * step_d]`, the plan (clamped starts, steps)
/// as the graph kernel makes it.
pub(super) fn strided_slice(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let ty = crate::ir::Type::tensor(cx.args[0].shape.to_vec(), cx.args[0].dtype);
    let (plan, _) = crate::op::kernels::index::slice_plan(&[ty], cx.attrs).map_err(err)?;
    k.compute(cx.out_buf, |b, iv| {
        let mut idx = Vec::with_capacity(iv.len());
        for (d, &(start, step, _)) in plan.iter().enumerate() {
            let v = b.var_ref(iv[d]);
            let (step, start) = (i64::try_from(step), i64::try_from(start));
            let (Ok(step), Ok(start)) = (step, start) else { return Err("slice bounds overflow i64".into()) };
            idx.push(ex::affine(b, v, step, start)?);
        }
        b.load(cx.ins[0], &idx)
    })
}

/// `pad`: constant (with `pad_value`), `edge` or `reflect` source positions per axis.
pub(super) fn pad(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let x = &cx.args[0];
    let rank = x.shape.len();
    let widths = attr_ints(cx.op, cx.attrs, "pad_width").map_err(err)?.ok_or("`pad` needs `pad_width`")?.to_vec();
    let mode = attr_choice(cx.op, cx.attrs, "pad_mode", &["constant", "reflect", "edge"]).map_err(err)?;
    let value = attr_float(cx.op, cx.attrs, "pad_value", 0.0).map_err(err)?;
    let d = x.dtype;
    if x.shape.contains(&0) {
        // Nothing to read: every element is the pad value (only constant mode pads empty axes).
        return k.compute(cx.out_buf, |b, _| ex::c(b, value, d));
    }
    k.compute(cx.out_buf, |b, iv| {
        let mut idx = Vec::with_capacity(rank);
        let mut valid: Option<PExprId> = None;
        for a in 0..rank {
            let dim = x.shape[a] as i64;
            let v = b.var_ref(iv[a]);
            let j = ex::plus(b, v, -widths[a])?;
            idx.push(match mode {
                "constant" => {
                    let j2 = b.copy_expr(j)?;
                    let ok = ex::in_range(b, j2, 0, dim)?;
                    valid = Some(match valid {
                        Some(p) => b.bin(BinOp::And, p, ok)?,
                        None => ok,
                    });
                    ex::clamp(b, j, 0, dim - 1)?
                }
                "edge" => ex::clamp(b, j, 0, dim - 1)?,
                _ if dim == 1 => b.i64(0),
                _ => {
                    // m = j mod 2(dim-1); m >= dim reflects to period - m.
                    let period = b.i64(2 * (dim - 1));
                    let m = b.bin(BinOp::FloorMod, j, period)?;
                    let (m2, m3) = (b.copy_expr(m)?, b.copy_expr(m)?);
                    let dd = b.i64(dim);
                    let hi = b.bin(BinOp::Ge, m, dd)?;
                    let p2 = b.i64(2 * (dim - 1));
                    let back = b.bin(BinOp::Sub, p2, m2)?;
                    b.select(hi, back, m3)?
                }
            });
        }
        let l = b.load(cx.ins[0], &idx)?;
        match valid {
            Some(ok) => {
                let pv = ex::c(b, value, d)?;
                b.select(ok, l, pv)
            }
            None => Ok(l),
        }
    })
}

/// `concatenate`: one stage per input, each writing its range along `axis`.
pub(super) fn concatenate(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let rank = cx.out.shape.len();
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", 0).map_err(err)?, rank).map_err(err)?;
    let mut offset = 0i64;
    for (i, a) in cx.args.iter().enumerate() {
        let shape = cx.shape_of(i);
        let off = offset;
        k.scatter(cx.out_buf, &shape, |b, iv| {
            let v = b.var_ref(iv[axis]);
            let at = ex::plus(b, v, off)?;
            let dst = ex::replace_at(b, iv, axis, at);
            let src = ex::vars(b, iv);
            Ok((dst, b.load(cx.ins[i], &src)?))
        })?;
        offset += a.shape[axis] as i64;
    }
    Ok(())
}

/// `trilu`: zero where the diagonal offset `j - i` is below `k` (upper) or above it (lower).
pub(super) fn trilu(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let upper = crate::op::kernels::attr_bool(cx.op, cx.attrs, "upper", true).map_err(err)?;
    let kd = attr_int(cx.op, cx.attrs, "k", 0).map_err(err)?;
    let r = cx.out.shape.len();
    let d = cx.out.dtype;
    k.compute(cx.out_buf, |b, iv| {
        let (j, i) = (b.var_ref(iv[r - 1]), b.var_ref(iv[r - 2]));
        let diff = b.bin(BinOp::Sub, j, i)?;
        let kk = b.i64(kd);
        let zero_it = b.bin(if upper { BinOp::Lt } else { BinOp::Gt }, diff, kk)?;
        let zero = ex::c(b, 0.0, d)?;
        let idx = ex::vars(b, iv);
        let x = b.load(cx.ins[0], &idx)?;
        b.select(zero_it, zero, x)
    })
}

/// `one_hot(indices, [off, on], depth, axis)`: `on` where the position along the new axis is
/// the (wrapped) index, else `off`.
pub(super) fn one_hot(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let rank = cx.out.shape.len();
    let axis = norm_axis(cx.op, attr_int(cx.op, cx.attrs, "axis", -1).map_err(err)?, rank).map_err(err)?;
    let depth = attr_int(cx.op, cx.attrs, "depth", 0).map_err(err)?;
    k.compute(cx.out_buf, |b, iv| {
        let rest: Vec<VarId> = iv.iter().enumerate().filter(|&(d, _)| d != axis).map(|(_, &v)| v).collect();
        let idx = ex::vars(b, &rest);
        let p = position(b, cx.ins[0], &idx, depth)?;
        let here = b.var_ref(iv[axis]);
        let hit = b.bin(BinOp::Eq, p, here)?;
        let (i1, i0) = (b.i64(1), b.i64(0));
        let on = b.load(cx.ins[1], &[i1])?;
        let off = b.load(cx.ins[1], &[i0])?;
        b.select(hit, on, off)
    })
}
