//! RemoveNoOp (prim_func pass, opt level 0): TVM's `tir.RemoveNoOp`, removing statements that
//! do nothing.
//!
//! What it removes (expressions have no side effects at this level, so dropping one only
//! drops its value):
//! - `eval` of any expression;
//! - stores of a buffer element into itself (`%A[i] = %A[i]`, indices structurally equal);
//! - loops with a constant extent `<= 0` or an empty body;
//! - `if` with both branches empty; an empty `then` with an `else` becomes `if (not(c))`;
//!   an empty `else` is dropped;
//! - `let` whose body is empty, or whose variable is used nowhere (its body is kept);
//! - `alloc`, `decl` and `attr` over an empty body; empty sequences and their elements.
//!
//! What it deliberately does not do: remove stores whose value is overwritten later, or
//! loops whose body is a no-op only for some iterations (TVM's data-flow based removal),
//! or simplify conditions (Simplify does).
//!
//! Phases:
//! 1. Statements in ascending order (children first), each kept, replaced by a child, or
//!    dropped; expressions copied as they are ([`Copier`](super::copy::Copier)).
//! 2. Structurally unchanged → the input `Arc`.

use std::sync::Arc;

use passel_engine::tir::{prim_structural_eq, PExprId, PExprKind, PrimFunc, PrimFuncBuilder, StmtId, StmtKind};
use passel_engine::transform::PrimFuncPass;

use super::copy::Copier;

/// The registry name.
pub const NAME: &str = "RemoveNoOp";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `RemoveNoOp` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, _ctx| Ok(remove_no_op(&func)))
}

/// Runs RemoveNoOp on `func`; returns `func` itself when nothing is removed.
pub fn remove_no_op(func: &Arc<PrimFunc>) -> Arc<PrimFunc> {
    super::rebuilt(func, run(func))
}

fn run(f: &PrimFunc) -> Result<Option<PrimFunc>, String> {
    let n = f.stmts().len();
    // Variables referenced anywhere in the input: an unreferenced `let` is dead.
    let mut used = vec![false; f.vars().len()];
    for e in f.exprs() {
        if let PExprKind::Var(v) = e.kind {
            used[v.index()] = true;
        }
    }
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    let mut out: Vec<Option<StmtId>> = Vec::with_capacity(n);
    // Whether a rule removed or rewrote anything: otherwise the rebuilt function is the input
    // (the same statements, expressions copied as they are), and the input is returned
    // without comparing the two.
    let mut changed = false;
    for i in 0..n {
        let s = StmtId(i as u32);
        let m = |x: StmtId| out[x.index()];
        let new = match f.stmt(s).kind {
            StmtKind::For { var, min, extent, kind, body } => {
                let empty_range = matches!(f.expr(extent).kind, PExprKind::Int(v) if v <= 0);
                match m(body) {
                    Some(body) if !empty_range => {
                        let (min, extent) = (copier.expr(&mut b, min)?, copier.expr(&mut b, extent)?);
                        Some(b.for_(var, min, extent, kind, body)?)
                    }
                    _ => {
                        changed = true;
                        None
                    }
                }
            }
            StmtKind::Store { buf, indices, value } => {
                let self_store = match f.expr(value).kind {
                    PExprKind::Load(lb, lr) if lb == buf => {
                        f.operands(lr).iter().zip(f.operands(indices)).all(|(&x, &y)| tree_eq(f, x, y))
                    }
                    _ => false,
                };
                if self_store {
                    changed = true;
                    None
                } else {
                    let idx: Vec<PExprId> =
                        f.operands(indices).iter().map(|&e| copier.expr(&mut b, e)).collect::<Result<_, _>>()?;
                    let value = copier.expr(&mut b, value)?;
                    Some(b.store(buf, &idx, value)?)
                }
            }
            StmtKind::Let { var, value, body } => match m(body) {
                None => {
                    changed = true;
                    None
                }
                Some(body) if !used[var.index()] => {
                    changed = true;
                    Some(body)
                }
                Some(body) => {
                    let value = copier.expr(&mut b, value)?;
                    Some(b.let_stmt(var, value, body)?)
                }
            },
            StmtKind::If { cond, then_, else_ } => match (m(then_), else_.and_then(m)) {
                (None, None) => {
                    changed = true;
                    None
                }
                (Some(t), e) => {
                    // An `else` that became empty is dropped.
                    changed |= else_.is_some() && e.is_none();
                    let cond = copier.expr(&mut b, cond)?;
                    Some(b.if_(cond, t, e)?)
                }
                (None, Some(e)) => {
                    changed = true;
                    let cond = copier.expr(&mut b, cond)?;
                    let cond = b.not(cond)?;
                    Some(b.if_(cond, e, None)?)
                }
            },
            StmtKind::Seq(r) => {
                let list = f.stmt_list(r);
                let items: Vec<StmtId> = list.iter().filter_map(|&x| m(x)).collect();
                changed |= items.len() != list.len();
                (!items.is_empty()).then(|| b.seq(&items))
            }
            StmtKind::Alloc { buf, body } => {
                let body = m(body);
                changed |= body.is_none();
                body.map(|body| b.alloc(buf, body))
            }
            StmtKind::Decl { buf, data, body } => match m(body) {
                Some(body) => Some(b.decl(buf, data, body)?),
                None => {
                    changed = true;
                    None
                }
            },
            StmtKind::Evaluate(_) => {
                changed = true;
                None
            }
            StmtKind::Attr { key, value, body } => match m(body) {
                Some(body) => {
                    let value = copier.expr(&mut b, value)?;
                    Some(b.attr(f.string(key), value, body))
                }
                None => {
                    changed = true;
                    None
                }
            },
        };
        out.push(new);
    }
    if !changed {
        return Ok(None);
    }
    let body = match out[f.body().index()] {
        Some(body) => body,
        None => b.nop(),
    };
    let new = b.finish(body);
    Ok((!prim_structural_eq(f, &new)).then_some(new))
}

/// Structural equality of two expression trees of `f` (explicit stack).
fn tree_eq(f: &PrimFunc, a: PExprId, b: PExprId) -> bool {
    let mut stack = vec![(a, b)];
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    while let Some((x, y)) = stack.pop() {
        let (ex, ey) = (f.expr(x), f.expr(y));
        if ex.ty != ey.ty {
            return false;
        }
        let same_head = match (ex.kind, ey.kind) {
            (PExprKind::Int(p), PExprKind::Int(q)) => p == q,
            (PExprKind::Float(p), PExprKind::Float(q)) => p.to_bits() == q.to_bits(),
            (PExprKind::Var(p), PExprKind::Var(q)) => p == q,
            (PExprKind::Bin(p, _, _), PExprKind::Bin(q, _, _)) => p == q,
            (PExprKind::Load(p, _), PExprKind::Load(q, _)) => p == q,
            (PExprKind::Call(p, _), PExprKind::Call(q, _)) => p == q,
            (PExprKind::Let(p, _, _), PExprKind::Let(q, _, _)) => p == q,
            (p, q) => std::mem::discriminant(&p) == std::mem::discriminant(&q),
        };
        if !same_head {
            return false;
        }
        oa.clear();
        ob.clear();
        f.expr_operands(x, &mut oa);
        f.expr_operands(y, &mut ob);
        if oa.len() != ob.len() {
            return false;
        }
        stack.extend(oa.iter().copied().zip(ob.iter().copied()));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn remove_no_op_returns_the_same_arc_when_nothing_is_removed() {
        let f = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[%i] = 1.0f; } }");
        assert!(Arc::ptr_eq(&remove_no_op(&f), &f));
        let g = prim("prim @f(%A: Buffer[(4,), f32]) { eval 1; }");
        assert!(!Arc::ptr_eq(&remove_no_op(&g), &g));
    }
}
