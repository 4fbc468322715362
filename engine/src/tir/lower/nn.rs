//! Loop-level definitions of the windowed network operators added beside `conv2d` and the
//! pools: `conv2d_transpose` and `lrn`.

use super::super::builder::PrimFuncBuilder;
use super::super::compute::{ex, Kernel, Value};
use super::super::ir::{BinOp, Intrinsic, PExprId};
use super::{err, two, LowerCx};
use crate::op::kernels::{attr_float, attr_int};

/// `conv2d_transpose` as a gather: output `(y, x)` sums input `(iy, ix)` and weight tap
/// `(i, j)` wherever `iy * stride + i * dilation - pad = y`, i.e. where
/// `y + pad - i * dilation` is a non-negative multiple of the stride inside the input.
pub(super) fn conv2d_transpose(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let op = cx.op;
    let (x, w) = (&cx.args[0], &cx.args[1]);
    let strides = two(op, cx.attrs, "strides", 1)?;
    let dil = two(op, cx.attrs, "dilation", 1)?;
    let pad = crate::op::kernels::nn::padding4(op, cx.attrs).map_err(err)?;
    let groups = attr_int(op, cx.attrs, "groups", 1).map_err(err)?.max(1);
    let (h, wd) = (x.shape[2] as i64, x.shape[3] as i64);
    let cig = x.shape[1] as i64 / groups;
    let (cog, kh, kw) = (w.shape[1] as i64, w.shape[2] as i64, w.shape[3] as i64);
    let d = cx.out.dtype;
    let (xi, wi) = (cx.ins[0], cx.ins[1]);
    k.reduce(
        cx.out_buf,
        &[cig, kh, kw],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            // Per spatial axis: t = out + pad - tap * dilation; valid when t >= 0, t divisible
            // by the stride and t / stride < size; the load index is clamped into range.
            let axis = |b: &mut PrimFuncBuilder, o: usize, r: usize, a: usize, size: i64| {
                let t = |b: &mut PrimFuncBuilder| -> Value {
                    let ov = b.var_ref(iv[o]);
                    let rv2 = b.var_ref(rv[r]);
                    let rd = ex::affine(b, rv2, dil[a], 0)?;
                    let s = ex::plus(b, ov, pad[a] as i64)?;
                    b.bin(BinOp::Sub, s, rd)
                };
                let (t1, t2) = (t(b)?, t(b)?);
                let st = b.i64(strides[a]);
                let rem = b.bin(BinOp::FloorMod, t1, st)?;
                let z = b.i64(0);
                let divisible = b.bin(BinOp::Eq, rem, z)?;
                let st2 = b.i64(strides[a]);
                let q = b.bin(BinOp::FloorDiv, t2, st2)?;
                let q2 = b.copy_expr(q)?;
                let inside = ex::in_range(b, q2, 0, size)?;
                let ok = b.bin(BinOp::And, divisible, inside)?;
                let at = ex::clamp(b, q, 0, size - 1)?;
                Ok::<_, String>((at, ok))
            };
            let (yi, yok) = axis(b, 2, 1, 0, h)?;
            let (xi2, xok) = axis(b, 3, 2, 1, wd)?;
            // Input channel g * cig + ic, where g = oc / cog; weight [g * cig + ic, oc % cog, i, j].
            let ch = |b: &mut PrimFuncBuilder| -> Value {
                let oc = b.var_ref(iv[1]);
                let cg = b.i64(cog);
                let g = b.bin(BinOp::FloorDiv, oc, cg)?;
                let base = ex::affine(b, g, cig, 0)?;
                let ic = b.var_ref(rv[0]);
                b.bin(BinOp::Add, base, ic)
            };
            let (c1, c2) = (ch(b)?, ch(b)?);
            let n = b.var_ref(iv[0]);
            let xv = b.load(xi, &[n, c1, yi, xi2])?;
            let ok = b.bin(BinOp::And, yok, xok)?;
            let zero = ex::c(b, 0.0, d)?;
            let xv = b.select(ok, xv, zero)?;
            let oc = b.var_ref(iv[1]);
            let cg = b.i64(cog);
            let co = b.bin(BinOp::FloorMod, oc, cg)?;
            let (ry, rx) = (b.var_ref(rv[1]), b.var_ref(rv[2]));
            let wv = b.load(wi, &[c2, co, ry, rx])?;
            b.bin(BinOp::Mul, xv, wv)
        },
    )
}

/// `lrn`: `x / (bias + alpha / size * Σ x²)^beta`, the sum over the `size` channels around
/// each one (those outside the tensor add nothing).
pub(super) fn lrn(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let op = cx.op;
    let size = attr_int(op, cx.attrs, "size", 1).map_err(err)?;
    // The graph kernel computes its constants in f32.
    let alpha = attr_float(op, cx.attrs, "alpha", 1e-4).map_err(err)? as f32;
    let beta = attr_float(op, cx.attrs, "beta", 0.75).map_err(err)? as f32;
    let bias = attr_float(op, cx.attrs, "bias", 1.0).map_err(err)? as f32;
    let scale = (alpha / size as f32) as f64;
    let x = &cx.args[0];
    let d = x.dtype;
    let c = x.shape[1] as i64;
    let before = (size - 1) / 2;
    let sq = k.temp("sq", d, &x.shape)?;
    let a = cx.ins[0];
    k.reduce(
        sq,
        &[size],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let ch = |b: &mut PrimFuncBuilder| -> Value {
                let cv = b.var_ref(iv[1]);
                let r = b.var_ref(rv[0]);
                let s = b.bin(BinOp::Add, cv, r)?;
                ex::plus(b, s, -before)
            };
            let (c1, c2) = (ch(b)?, ch(b)?);
            let ok = ex::in_range(b, c1, 0, c)?;
            let at = ex::clamp(b, c2, 0, c - 1)?;
            let idx = |b: &mut PrimFuncBuilder, at| ex::replace_at(b, iv, 1, at);
            let at2 = b.copy_expr(at)?;
            let (i1, i2) = (idx(b, at), idx(b, at2));
            let (v1, v2) = (b.load(a, &i1)?, b.load(a, &i2)?);
            let p = b.bin(BinOp::Mul, v1, v2)?;
            let zero = ex::c(b, 0.0, d)?;
            b.select(ok, p, zero)
        },
    )?;
    k.compute(cx.out_buf, |b, iv| {
        let i1 = ex::vars(b, iv);
        let s = b.load(sq, &i1)?;
        let sc = ex::c(b, scale, d)?;
        let m = b.bin(BinOp::Mul, sc, s)?;
        let bi = ex::c(b, bias as f64, d)?;
        let den = b.bin(BinOp::Add, bi, m)?;
        let be = ex::c(b, beta as f64, d)?;
        let p = b.call(Intrinsic::Pow, &[den, be])?;
        let i2 = ex::vars(b, iv);
        let xv = b.load(a, &i2)?;
        b.bin(BinOp::Div, xv, p)
    })
}

/// `einsum`: the output's labels are the loop variables, every other label a reduction
/// variable; each term is the product of the inputs at their labels (in f64 for floats, as
/// the graph kernel accumulates; wrapping for integers).
pub(super) fn einsum(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    let tys: Vec<crate::ir::Type> =
        cx.args.iter().map(|a| crate::ir::Type::tensor(a.shape.to_vec(), a.dtype)).collect();
    let plan = crate::op::kernels::einsum::plan(&tys, cx.attrs).map_err(err)?;
    let d = cx.out.dtype;
    let ad = if d.is_float() { crate::ir::DType::F64 } else { d };
    let reduced: Vec<usize> = (0..plan.sizes.len()).filter(|l| !plan.output.contains(l)).collect();
    let rshape: Vec<i64> = reduced.iter().map(|&l| plan.sizes[l] as i64).collect();
    let acc = if ad == d { cx.out_buf } else { k.temp("acc", ad, &cx.out.shape)? };
    k.reduce(
        acc,
        &rshape,
        BinOp::Add,
        |b| ex::c(b, 0.0, ad),
        |b, iv, rv| {
            let var_of = |l: usize| match plan.output.iter().position(|&o| o == l) {
                Some(p) => iv[p],
                None => rv[reduced.iter().position(|&r| r == l).unwrap_or(0)],
            };
            let mut prod: Option<PExprId> = None;
            for (i, labels) in plan.inputs.iter().enumerate() {
                let idx: Vec<PExprId> = labels.iter().map(|&l| b.var_ref(var_of(l))).collect();
                let v = b.load(cx.ins[i], &idx)?;
                let v = if ad == d { v } else { b.cast(v, ad) };
                prod = Some(match prod {
                    Some(p) => b.bin(BinOp::Mul, p, v)?,
                    None => v,
                });
            }
            prod.ok_or_else(|| "einsum of no inputs".to_string())
        },
    )?;
    if acc != cx.out_buf {
        k.compute(cx.out_buf, |b, iv| {
            let idx = ex::vars(b, iv);
            let v = b.load(acc, &idx)?;
            Ok(b.cast(v, d))
        })?;
    }
    Ok(())
}

/// `resize2d`: the taps (input index and weight per output row and column) are fixed by the
/// shapes and attributes, so they are tables the PrimFunc fills first; each output sums
/// `wy * wx * x` over its row and column taps in f64 (as the graph kernel), a zero weight
/// adding nothing.
pub(super) fn resize2d(k: &mut Kernel, cx: &LowerCx) -> Result<(), String> {
    use crate::ir::DType;
    let x = &cx.args[0];
    let r = x.shape.len();
    let (ih, iw) = (x.shape[r - 2] as usize, x.shape[r - 1] as usize);
    let (oh, ow) = (cx.out.shape[r - 2] as usize, cx.out.shape[r - 1] as usize);
    if x.dtype == DType::Bool {
        return Err("`resize2d` of a bool tensor".into());
    }
    let taps = crate::op::kernels::resize::taps(cx.attrs, [ih, iw], [oh, ow]).map_err(err)?;
    let nt = taps.iter().flatten().map(Vec::len).max().unwrap_or(1).max(1);
    let mut tables = Vec::with_capacity(2);
    for (a, axis_taps) in taps.iter().enumerate() {
        let len = axis_taps.len() as u64;
        let name = if a == 0 { "row" } else { "col" };
        let idx = k.temp(&format!("{name}_index"), DType::I64, &[len.max(1), nt as u64])?;
        let w = k.temp(&format!("{name}_weight"), DType::F64, &[len.max(1), nt as u64])?;
        let entries: Vec<(i64, i64, i64, f64)> = axis_taps
            .iter()
            .enumerate()
            .flat_map(|(o, ts)| ts.iter().enumerate().map(move |(t, &(i, wt))| (o as i64, t as i64, i as i64, wt)))
            .collect();
        k.each(&[], |b, _| {
            let mut stmts = Vec::with_capacity(2 * entries.len());
            for &(o, t, i, wt) in &entries {
                let (o1, t1, iv) = (b.i64(o), b.i64(t), b.i64(i));
                stmts.push(b.store(idx, &[o1, t1], iv)?);
                let (o2, t2) = (b.i64(o), b.i64(t));
                let wv = ex::c(b, wt, DType::F64)?;
                stmts.push(b.store(w, &[o2, t2], wv)?);
            }
            if stmts.is_empty() {
                return Ok(vec![b.nop()]);
            }
            Ok(stmts)
        })?;
        tables.push((idx, w));
    }
    let acc = k.temp("acc", DType::F64, &cx.out.shape)?;
    let ((ri, rw), (ci, cw)) = (tables[0], tables[1]);
    let a = cx.ins[0];
    k.reduce(
        acc,
        &[nt as i64, nt as i64],
        BinOp::Add,
        |b| ex::c(b, 0.0, DType::F64),
        |b, iv, rv| {
            let tab = |b: &mut PrimFuncBuilder, t: super::super::ir::BufId, o: usize, rr: usize| {
                let (ov, tv) = (b.var_ref(iv[o]), b.var_ref(rv[rr]));
                b.load(t, &[ov, tv])
            };
            let (wy, wx) = (tab(b, rw, r - 2, 0)?, tab(b, cw, r - 1, 1)?);
            let wyx = b.bin(BinOp::Mul, wy, wx)?;
            let (y, xx) = (tab(b, ri, r - 2, 0)?, tab(b, ci, r - 1, 1)?);
            let mut idx = ex::vars(b, &iv[..r - 2]);
            idx.push(y);
            idx.push(xx);
            let v = b.load(a, &idx)?;
            let v = b.cast(v, DType::F64);
            let term = b.bin(BinOp::Mul, wyx, v)?;
            // A zero weight (a padded tap) adds nothing, even against inf or NaN.
            let (wy2, wx2) = (tab(b, rw, r - 2, 0)?, tab(b, cw, r - 1, 1)?);
            let wyx2 = b.bin(BinOp::Mul, wy2, wx2)?;
            let z = ex::c(b, 0.0, DType::F64)?;
            let zero_w = b.bin(BinOp::Eq, wyx2, z)?;
            let z2 = ex::c(b, 0.0, DType::F64)?;
            b.select(zero_w, z2, term)
        },
    )?;
    k.compute(cx.out_buf, |b, iv| {
        let idx = ex::vars(b, iv);
        let v = b.load(acc, &idx)?;
        Ok(b.cast(v, cx.out.dtype))
    })
}
