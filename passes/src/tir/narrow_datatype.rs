//! NarrowDataType (prim_func pass, opt level 0): TVM's `tir.transform.NarrowDataType(target_bits)`,
//! computing `i64` index arithmetic that provably fits in `target_bits` bits in the narrower
//! type. The registered pass uses 32 bits, as TVM's lowering pipeline calls it.
//!
//! What it does: a loop whose variable is `i64` and whose constant range fits in
//! `i{target_bits}` gets a variable (and bounds) of that type. An `i64` expression built from
//! immediates, narrowed variables and `add sub mul div mod floordiv floormod min max select`
//! narrows when interval arithmetic over the loop ranges keeps it and every part of it inside
//! the narrower type (so no computation can wrap differently). Buffer indices, `cast`
//! operands and both operands of a comparison are narrowed where they can be; every other
//! use keeps its type, a narrowed variable there cast back to `i64` (exact: its values fit).
//! Only `i64` is narrowed (to `i32` or `i16`, …), as in TVM's tests; `let` variables and
//! parameters keep their types.
//!
//! Phases:
//! 1. The loops to narrow and the ranges of their variables; per expression, whether it can be
//!    narrowed (ascending order, operands first).
//! 2. Statements in ascending order rebuilt; each expression tree decided top-down (narrow or
//!    keep) and built bottom-up.
//! 3. Nothing to narrow → the input `Arc`.

use std::sync::Arc;

use passel_engine::ir::DType;
use passel_engine::tir::{BinOp, PExprId, PExprKind, PType, PrimFunc, PrimFuncBuilder, StmtId, StmtKind, VarId};
use passel_engine::transform::PrimFuncPass;
use rustc_hash::FxHashMap;

use super::copy::Copier;

/// The registry name.
pub const NAME: &str = "NarrowDataType";

/// The target width of the registered pass (TVM's pipeline: `NarrowDataType(32)`).
pub const DEFAULT_TARGET_BITS: u32 = 32;

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `NarrowDataType` pass as registered (32 bits).
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, _ctx| {
        Ok(narrow_datatype(&func, DEFAULT_TARGET_BITS))
    })
}

/// Runs NarrowDataType on `func`; returns `func` itself when nothing narrows. `target_bits`
/// other than 8, 16 or 32 narrows nothing.
pub fn narrow_datatype(func: &Arc<PrimFunc>, target_bits: u32) -> Arc<PrimFunc> {
    let target = match target_bits {
        8 => DType::I8,
        16 => DType::I16,
        32 => DType::I32,
        _ => return func.clone(),
    };
    super::rebuilt(func, run(func, target))
}

type R<T> = Result<T, String>;

fn fits(iv: (i128, i128), d: DType) -> bool {
    let (lo, hi) = super::simplify::type_range(d);
    iv.0 >= lo && iv.1 <= hi
}

fn run(f: &PrimFunc, target: DType) -> R<Option<PrimFunc>> {
    let i64t = PType::scalar(DType::I64);
    // Phase 1: the loops to narrow.
    let mut range: FxHashMap<VarId, (i128, i128)> = FxHashMap::default();
    for s in f.stmts() {
        if let StmtKind::For { var, min, extent, .. } = s.kind {
            if f.var(var).ty != i64t {
                continue;
            }
            if let (PExprKind::Int(m), PExprKind::Int(e)) = (f.expr(min).kind, f.expr(extent).kind) {
                let (m, e) = (m as i128, e as i128);
                let iv = (m, m + e.max(1) - 1);
                if fits(iv, target) && fits((e, e), target) {
                    range.insert(var, iv);
                }
            }
        }
    }
    if range.is_empty() {
        return Ok(None);
    }
    let ne = f.exprs().len();
    let mut can: Vec<Option<(i128, i128)>> = vec![None; ne];
    for i in 0..ne {
        let e = f.expr(PExprId(i as u32));
        if e.ty != i64t {
            continue;
        }
        let get = |x: PExprId| can[x.index()];
        let iv = match e.kind {
            PExprKind::Int(v) => Some((v as i128, v as i128)),
            PExprKind::Var(v) => range.get(&v).copied(),
            PExprKind::Bin(op, a, b) => match (get(a), get(b)) {
                (Some(x), Some(y)) => interval(op, x, y),
                _ => None,
            },
            PExprKind::Select(_, a, b) => match (get(a), get(b)) {
                (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
                _ => None,
            },
            _ => None,
        };
        can[i] = iv.filter(|&iv| fits(iv, target));
    }
    // Phase 2.
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut new_var: FxHashMap<VarId, VarId> = FxHashMap::default();
    for &v in sorted_keys(&range).iter() {
        let w = b.var(&f.var(v).name, PType::scalar(target))?;
        new_var.insert(v, w);
    }
    let mut cx = Narrower { f, can: &can, new_var: &new_var, target };
    let mut copier = Copier::new(f);
    let n = f.stmts().len();
    let mut out: Vec<StmtId> = Vec::with_capacity(n);
    for i in 0..n {
        let s = StmtId(i as u32);
        let m = |x: StmtId| out[x.index()];
        let new = match f.stmt(s).kind {
            StmtKind::For { var, min, extent, kind, body } if new_var.contains_key(&var) => {
                let (min, extent) = (cx.build(&mut b, min, true)?, cx.build(&mut b, extent, true)?);
                b.for_(new_var[&var], min, extent, kind, m(body))?
            }
            StmtKind::For { var, min, extent, kind, body } => {
                let (min, extent) = (cx.build(&mut b, min, false)?, cx.build(&mut b, extent, false)?);
                b.for_(var, min, extent, kind, m(body))?
            }
            StmtKind::Store { buf, indices, value } => {
                let idx: Vec<PExprId> =
                    f.operands(indices).iter().map(|&i| cx.build(&mut b, i, true)).collect::<R<_>>()?;
                let value = cx.build(&mut b, value, false)?;
                b.store(buf, &idx, value)?
            }
            StmtKind::Let { var, value, body } => {
                let value = cx.build(&mut b, value, false)?;
                b.let_stmt(var, value, m(body))?
            }
            StmtKind::If { cond, then_, else_ } => {
                let cond = cx.build(&mut b, cond, false)?;
                b.if_(cond, m(then_), else_.map(m))?
            }
            StmtKind::Evaluate(e) => {
                let e = cx.build(&mut b, e, false)?;
                b.evaluate(e)
            }
            StmtKind::Attr { key, value, body } => {
                let value = cx.build(&mut b, value, false)?;
                b.attr(f.string(key), value, m(body))
            }
            StmtKind::Seq(_) | StmtKind::Alloc { .. } | StmtKind::Decl { .. } => copier.node(&mut b, s, &out, false)?,
        };
        out.push(new);
    }
    Ok(Some(b.finish(out[f.body().index()])))
}

fn sorted_keys(m: &FxHashMap<VarId, (i128, i128)>) -> Vec<VarId> {
    let mut k: Vec<VarId> = m.keys().copied().collect();
    k.sort_unstable();
    k
}

/// The interval of `x op y`, where it is known.
fn interval(op: BinOp, x: (i128, i128), y: (i128, i128)) -> Option<(i128, i128)> {
    let corners = |g: fn(i128, i128) -> i128| {
        let v = [g(x.0, y.0), g(x.0, y.1), g(x.1, y.0), g(x.1, y.1)];
        (v.iter().copied().min().unwrap_or(0), v.iter().copied().max().unwrap_or(0))
    };
    match op {
        BinOp::Add => Some((x.0 + y.0, x.1 + y.1)),
        BinOp::Sub => Some((x.0 - y.1, x.1 - y.0)),
        BinOp::Mul => Some(corners(|a, b| a * b)),
        BinOp::Min => Some((x.0.min(y.0), x.1.min(y.1))),
        BinOp::Max => Some((x.0.max(y.0), x.1.max(y.1))),
        // Division by a constant positive divisor only.
        BinOp::FloorDiv if y.0 == y.1 && y.0 > 0 => Some((x.0.div_euclid(y.0), x.1.div_euclid(y.0))),
        BinOp::Div if y.0 == y.1 && y.0 > 0 => Some((x.0 / y.0, x.1 / y.0)),
        BinOp::FloorMod if y.0 == y.1 && y.0 > 0 => Some((0, y.0 - 1)),
        BinOp::Mod if y.0 == y.1 && y.0 > 0 => Some((-(y.0 - 1).min(x.0.abs()), (y.0 - 1).min(x.1.abs()))),
        _ => None,
    }
}

struct Narrower<'a> {
    f: &'a PrimFunc,
    can: &'a [Option<(i128, i128)>],
    new_var: &'a FxHashMap<VarId, VarId>,
    target: DType,
}

impl Narrower<'_> {
    /// Builds the tree `root`, narrowed when `narrow` is asked and it can be.
    fn build(&mut self, b: &mut PrimFuncBuilder, root: PExprId, narrow: bool) -> R<PExprId> {
        let f = self.f;
        // Top-down decisions.
        let mut want: FxHashMap<PExprId, bool> = FxHashMap::default();
        let mut nodes = Vec::new();
        let mut stack = vec![(root, narrow)];
        let mut ops = Vec::new();
        while let Some((e, w)) = stack.pop() {
            let w = w && self.can[e.index()].is_some();
            want.insert(e, w);
            nodes.push(e);
            ops.clear();
            f.expr_operands(e, &mut ops);
            let node = f.expr(e);
            match node.kind {
                PExprKind::Bin(op, a, c) if op.is_comparison() => {
                    let both = self.can[a.index()].is_some() && self.can[c.index()].is_some();
                    stack.extend([(a, both), (c, both)]);
                }
                PExprKind::Bin(..) => stack.extend(ops.iter().map(|&o| (o, w))),
                PExprKind::Select(c, x, y) => stack.extend([(c, false), (x, w), (y, w)]),
                PExprKind::Cast(a) => stack.push((a, true)),
                PExprKind::Load(..) => stack.extend(ops.iter().map(|&o| (o, true))),
                _ => stack.extend(ops.iter().map(|&o| (o, false))),
            }
        }
        nodes.sort_unstable();
        let mut map: FxHashMap<PExprId, PExprId> = FxHashMap::default();
        let narrow_t = PType::scalar(self.target);
        for &e in &nodes {
            let node = *f.expr(e);
            let w = want[&e];
            let m = |x: PExprId| map[&x];
            let out = match node.kind {
                PExprKind::Int(v) if w => b.int(v, narrow_t)?,
                PExprKind::Int(v) => b.int(v, node.ty)?,
                PExprKind::Float(v) => b.float(v, node.ty)?,
                PExprKind::Var(v) => match self.new_var.get(&v) {
                    Some(&nv) if w => b.var_ref(nv),
                    Some(&nv) => {
                        let r = b.var_ref(nv);
                        b.cast(r, DType::I64)
                    }
                    None => b.var_ref(v),
                },
                PExprKind::Bin(op, a, c) => b.bin(op, m(a), m(c))?,
                PExprKind::Not(a) => b.not(m(a))?,
                PExprKind::Select(c, x, y) => b.select(m(c), m(x), m(y))?,
                PExprKind::Cast(a) => b.cast(m(a), node.ty.dtype),
                PExprKind::Load(buf, r) => {
                    let idx: Vec<PExprId> = f.operands(r).iter().map(|&i| m(i)).collect();
                    b.load(buf, &idx)?
                }
                PExprKind::Call(intr, r) => {
                    let args: Vec<PExprId> = f.operands(r).iter().map(|&i| m(i)).collect();
                    b.call(intr, &args)?
                }
                PExprKind::Ramp(a, s) => b.ramp(m(a), m(s), node.ty.lanes)?,
                PExprKind::Broadcast(a) => b.broadcast(m(a), node.ty.lanes)?,
                PExprKind::Let(v, a, c) => b.let_expr(v, m(a), m(c))?,
            };
            map.insert(e, out);
        }
        Ok(map[&root])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn narrow_datatype_returns_the_same_arc_without_i64_loops_that_fit() {
        let f = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0i32, 4i32) { %A[%i] = 1.0f; } }");
        assert!(Arc::ptr_eq(&narrow_datatype(&f, 32), &f));
        let g = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[%i] = 1.0f; } }");
        assert!(!Arc::ptr_eq(&narrow_datatype(&g, 32), &g));
        assert!(Arc::ptr_eq(&narrow_datatype(&g, 64), &g));
    }
}
