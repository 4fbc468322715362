//! Structural equality and hashing of PrimFuncs: two PrimFuncs are equal when their canonical
//! texts are (names are made unique the same way, floats print every bit, so the text is a
//! faithful canonical form). Linear in the function's size.
//!
//! Fast paths: [`prim_structural_eq`] first compares the arenas entry by entry (floats by
//! their bits, spans ignored). Identical arenas print identically, so a match decides
//! without printing; that is the common case of a tir pass that rebuilt a function without
//! changing it in the same order. Then it walks both statement trees side by side
//! ([`tree_verdict`]): a pass that rebuilt its function in another order (Simplify builds its
//! expressions children first in a new arena) has the same tables and the same trees at other
//! ids. The walk decides "equal" when the trees match node for node over the same variable,
//! buffer and parameter tables (what the printer's text is a function of), and "different"
//! when two expressions differ in what the text shows of them (kind, operator, intrinsic,
//! immediate); anything else (other tables, `let` expressions, whose names the printer
//! assigns in arena order, a statement-level difference, a variable or buffer at one place
//! but not the other) falls back to the texts. `tree_verdict_agrees_with_the_text` pins the
//! walk to the general path, and `passes/tests/tir_properties.rs` checks it on every tir
//! pass's output over generated PrimFuncs.

use std::hash::{Hash, Hasher};

use super::ir::{PExprId, PExprKind, PrimFunc, StmtId, StmtKind};
use super::printer::print_prim_func;

/// The canonical form [`prim_structural_eq`] compares: equal keys, equal PrimFuncs. A pass
/// that merges many PrimFuncs computes each key once (in parallel, if it likes) and compares
/// keys, instead of calling [`prim_structural_eq`] per pair.
pub fn prim_structural_key(f: &PrimFunc) -> String {
    print_prim_func("f", f)
}

/// Whether `a` and `b` are the same PrimFunc up to arena layout and variable identity.
pub fn prim_structural_eq(a: &PrimFunc, b: &PrimFunc) -> bool {
    if same_arenas(a, b) {
        return true;
    }
    match tree_verdict(a, b) {
        Some(same) => same,
        None => prim_structural_key(a) == prim_structural_key(b),
    }
}

/// What walking the statement trees of `a` and `b` side by side decides about their texts:
/// `Some(true)` when they print the same, `Some(false)` when they print differently, `None`
/// when the walk cannot tell (then only the texts can). Linear, with explicit stacks.
pub fn tree_verdict(a: &PrimFunc, b: &PrimFunc) -> Option<bool> {
    // The printer's names come from these tables and the tree, except for `let` expressions,
    // which it names in arena order.
    if a.params != b.params || a.vars != b.vars || a.bufs != b.bufs || a.attrs != b.attrs {
        return None;
    }
    if a.exprs.iter().chain(&b.exprs).any(|e| matches!(e.kind, PExprKind::Let(..))) {
        return None;
    }
    let mut stmts: Vec<(StmtId, StmtId)> = vec![(a.body, b.body)];
    let mut exprs: Vec<(PExprId, PExprId)> = Vec::new();
    let mut seen = 0usize;
    while let Some((s, t)) = stmts.pop() {
        seen += 1;
        let (x, y) = (a.stmts.get(s.index())?, b.stmts.get(t.index())?);
        match (x.kind, y.kind) {
            (
                StmtKind::For { var, min, extent, kind, body },
                StmtKind::For { var: var2, min: min2, extent: extent2, kind: kind2, body: body2 },
            ) if var == var2 && kind == kind2 => {
                exprs.extend([(min, min2), (extent, extent2)]);
                stmts.push((body, body2));
            }
            (
                StmtKind::Store { buf, indices, value },
                StmtKind::Store { buf: buf2, indices: indices2, value: value2 },
            ) if buf == buf2 && indices.len == indices2.len => {
                exprs.extend(a.operands(indices).iter().copied().zip(b.operands(indices2).iter().copied()));
                exprs.push((value, value2));
            }
            (StmtKind::Let { var, value, body }, StmtKind::Let { var: var2, value: value2, body: body2 })
                if var == var2 =>
            {
                exprs.push((value, value2));
                stmts.push((body, body2));
            }
            (StmtKind::If { cond, then_, else_ }, StmtKind::If { cond: cond2, then_: then2, else_: else2 }) => {
                exprs.push((cond, cond2));
                stmts.push((then_, then2));
                match (else_, else2) {
                    (Some(e), Some(e2)) => stmts.push((e, e2)),
                    (None, None) => {}
                    _ => return None,
                }
            }
            (StmtKind::Seq(r), StmtKind::Seq(r2)) if r.len == r2.len => {
                stmts.extend(a.stmt_list(r).iter().copied().zip(b.stmt_list(r2).iter().copied()));
            }
            (StmtKind::Alloc { buf, body }, StmtKind::Alloc { buf: buf2, body: body2 }) if buf == buf2 => {
                stmts.push((body, body2));
            }
            (StmtKind::Decl { buf, data, body }, StmtKind::Decl { buf: buf2, data: data2, body: body2 })
                if buf == buf2 && data == data2 =>
            {
                stmts.push((body, body2))
            }
            (StmtKind::Evaluate(e), StmtKind::Evaluate(e2)) => exprs.push((e, e2)),
            (StmtKind::Attr { key, value, body }, StmtKind::Attr { key: key2, value: value2, body: body2 })
                if a.strings.get(key as usize) == b.strings.get(key2 as usize) =>
            {
                exprs.push((value, value2));
                stmts.push((body, body2));
            }
            _ => return None,
        }
        while let Some((e, g)) = exprs.pop() {
            let (x, y) = (a.exprs.get(e.index())?, b.exprs.get(g.index())?);
            if x.ty != y.ty {
                return None;
            }
            let (ops, ops2) = match (x.kind, y.kind) {
                (PExprKind::Int(p), PExprKind::Int(q)) if p == q => continue,
                (PExprKind::Float(p), PExprKind::Float(q)) if p.to_bits() == q.to_bits() => continue,
                (PExprKind::Var(p), PExprKind::Var(q)) if p == q => continue,
                (PExprKind::Var(_), PExprKind::Var(_)) => return None,
                (PExprKind::Bin(o, p, q), PExprKind::Bin(o2, p2, q2)) if o == o2 => {
                    exprs.extend([(p, p2), (q, q2)]);
                    continue;
                }
                (PExprKind::Not(p), PExprKind::Not(p2))
                | (PExprKind::Cast(p), PExprKind::Cast(p2))
                | (PExprKind::Broadcast(p), PExprKind::Broadcast(p2)) => {
                    exprs.push((p, p2));
                    continue;
                }
                (PExprKind::Select(k, p, q), PExprKind::Select(k2, p2, q2)) => {
                    exprs.extend([(k, k2), (p, p2), (q, q2)]);
                    continue;
                }
                (PExprKind::Ramp(p, q), PExprKind::Ramp(p2, q2)) => {
                    exprs.extend([(p, p2), (q, q2)]);
                    continue;
                }
                (PExprKind::Load(buf, r), PExprKind::Load(buf2, r2)) if buf == buf2 && r.len == r2.len => (r, r2),
                (PExprKind::Load(..), PExprKind::Load(..)) => return None,
                (PExprKind::Call(i, r), PExprKind::Call(i2, r2)) if i == i2 && r.len == r2.len => (r, r2),
                // The text shows the kind, operator, intrinsic or immediate that differs.
                _ => return Some(false),
            };
            exprs.extend(a.operands(ops).iter().copied().zip(b.operands(ops2).iter().copied()));
        }
    }
    // Statements outside the tree still name variables (the printer numbers definitions).
    (seen == a.stmts.len() && seen == b.stmts.len()).then_some(true)
}

/// Whether `a` and `b` hold the same arenas, entry by entry: the same nodes at the same ids,
/// the same names, floats bit for bit (spans are not compared).
fn same_arenas(a: &PrimFunc, b: &PrimFunc) -> bool {
    a.body == b.body
        && a.params == b.params
        && a.operands == b.operands
        && a.stmt_lists == b.stmt_lists
        && a.stmts == b.stmts
        && a.vars == b.vars
        && a.bufs == b.bufs
        && a.strings == b.strings
        && a.attrs == b.attrs
        && a.exprs.len() == b.exprs.len()
        && a.exprs.iter().zip(&b.exprs).all(|(x, y)| {
            x.ty == y.ty
                && match (x.kind, y.kind) {
                    (PExprKind::Float(p), PExprKind::Float(q)) => p.to_bits() == q.to_bits(),
                    (p, q) => p == q,
                }
        })
}

/// A hash consistent with [`prim_structural_eq`].
pub fn prim_structural_hash(f: &PrimFunc) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prim_structural_key(f).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{parse_module, DType};

    fn prim(src: &str) -> PrimFunc {
        let m = parse_module(src).expect("parses");
        let f = m.get_prim("f").expect("@f");
        (**f).clone()
    }

    #[test]
    fn same_arenas_implies_same_text() {
        let src = "prim @f(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %B[%i] = add(%A[%i], 1.5f);
  }
}
";
        let (a, b) = (prim(src), prim(src));
        assert!(same_arenas(&a, &b));
        assert_eq!(prim_structural_key(&a), prim_structural_key(&b));
        // 0.0 and -0.0 are equal floats but different immediates: the shortcut does not
        // decide, and the texts tell them apart.
        let zero = prim(&src.replace("1.5f", "0.0f"));
        let neg_zero = prim(&src.replace("1.5f", "-0.0f"));
        assert!(!same_arenas(&zero, &neg_zero));
        assert!(!prim_structural_eq(&zero, &neg_zero));
        // Different names: different texts, different arenas.
        let renamed = prim(&src.replace("%i", "%j"));
        assert!(!same_arenas(&a, &renamed));
        assert!(prim_structural_eq(&a, &a.clone()));
    }

    #[test]
    fn tree_verdict_agrees_with_the_text() {
        // The same function built in another arena order: the constant and the load first.
        let src = "prim @f(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %B[%i] = add(%A[%i], 1.5f);
  }
}
";
        let a = prim(src);
        let mut b = crate::tir::PrimFuncBuilder::with_signature_of(&a);
        let (f32_, i64_) = (crate::tir::PType::scalar(DType::F32), crate::tir::PType::scalar(DType::I64));
        let k = b.float(1.5, f32_).expect("float");
        let i = b.var_ref(crate::tir::VarId(0));
        let load = b.load(crate::tir::BufId(0), &[i]).expect("load");
        let sum = b.bin(crate::tir::BinOp::Add, load, k).expect("add");
        let i2 = b.var_ref(crate::tir::VarId(0));
        let store = b.store(crate::tir::BufId(1), &[i2], sum).expect("store");
        let (lo, n) = (b.int(0, i64_).expect("int"), b.int(4, i64_).expect("int"));
        let body = b.for_(crate::tir::VarId(0), lo, n, crate::tir::ForKind::Serial, store).expect("for");
        let b = b.finish(body);
        assert!(!same_arenas(&a, &b), "built in another order");
        assert_eq!(prim_structural_key(&a), prim_structural_key(&b));
        assert_eq!(tree_verdict(&a, &b), Some(true));
        assert!(prim_structural_eq(&a, &b));
        // A different immediate or operator: different texts, decided by the walk.
        for other in [src.replace("1.5f", "2.5f"), src.replace("add(", "mul(")] {
            let c = prim(&other);
            assert_ne!(prim_structural_key(&a), prim_structural_key(&c));
            assert_eq!(tree_verdict(&a, &c), Some(false), "{other}");
            assert!(!prim_structural_eq(&a, &c));
        }
        // `let` expressions are named in arena order: the texts decide.
        let with_let = src.replace("add(%A[%i], 1.5f)", "let %x = %A[%i] in add(%x, 1.5f)");
        let (d, e) = (prim(&with_let), prim(&with_let));
        assert_eq!(tree_verdict(&d, &e), None);
        assert!(prim_structural_eq(&d, &e));
        // A renamed loop variable: another variable table; the texts decide.
        let renamed = prim(&src.replace("%i", "%j"));
        assert_eq!(tree_verdict(&a, &renamed), None);
        assert!(!prim_structural_eq(&a, &renamed));
    }
}
