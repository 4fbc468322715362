//! The equalities the session compares functions with.
//!
//! [`same_function`] decides whether a new version of a function may stand in for the old one
//! without re-running anything: it must print the same text and behave the same in every
//! pass, so it compares the arenas node by node — kinds, types, variable names, constants,
//! attributes — rather than [`structural_eq`](crate::ir::structural_eq), which ignores local
//! names (they print) and the types of non-variable nodes (passes read them). Absolute source
//! offsets are ignored as long as every span moved by the same amount, so a function that
//! only moved in its file (an edit above it) is not recomputed; [`span_base`] gives the offset
//! the session uses to move cached diagnostics along.
//!
//! [`same_signature`] is the firewall: what a caller can see of a callee.
//!
//! [`same_prims`] compares the PrimFuncs of two modules: the same names in the same order,
//! each the same `Arc` or equal arena for arena (spans included, so a PrimFunc that moved in
//! its file counts as changed and its diagnostics are recomputed where it now is).

use std::sync::Arc;

use crate::ir::{ExprKind, Function, Module, NodeId};
use crate::tir::PrimFunc;

/// The start of the first span of `func` (0 when it was not parsed). Spans of a function are
/// compared relative to it.
pub(crate) fn span_base(func: &Function) -> u32 {
    func.node_ids().find_map(|id| func.span(id)).map_or(0, |s| s.start)
}

/// Whether the PrimFuncs of `a` and `b` are the same (see the module docs); graph functions
/// are not looked at.
pub(crate) fn same_prims(a: &Module, b: &Module) -> bool {
    a.num_prims() == b.num_prims()
        && a.prim_entries().iter().zip(b.prim_entries()).all(|((n, f), (m, g))| n == m && same_prim(f, g))
}

/// Whether `a` and `b` are the same PrimFunc (the same `Arc`, or equal arenas and spans).
pub(crate) fn same_prim(a: &Arc<PrimFunc>, b: &Arc<PrimFunc>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// Whether `a` and `b` are the same function up to a uniform shift of their source spans.
pub(crate) fn same_function(a: &Arc<Function>, b: &Arc<Function>) -> bool {
    Arc::ptr_eq(a, b) || same_arena(a, b)
}

fn same_arena(a: &Function, b: &Function) -> bool {
    if a.num_nodes() != b.num_nodes()
        || a.body() != b.body()
        || a.ret_ty() != b.ret_ty()
        || a.attrs() != b.attrs()
        || a.try_params() != b.try_params()
    {
        return false;
    }
    let (base_a, base_b) = (span_base(a), span_base(b));
    let rel = |f: &Function, id: NodeId, base: u32| {
        f.span(id).map(|s| (s.start.wrapping_sub(base), s.end.wrapping_sub(base)))
    };
    for (i, node) in a.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        // Types compare by content: equal types may sit at different indices of the tables.
        if node.kind != b.nodes()[i].kind || a.ty(id) != b.ty(id) || rel(a, id, base_a) != rel(b, id, base_b) {
            return false;
        }
        let same = match node.kind {
            ExprKind::Var { name } | ExprKind::Global { name } => a.try_sym(name) == b.try_sym(name),
            ExprKind::Const { idx } => match (a.try_constant(idx), b.try_constant(idx)) {
                (Some(x), Some(y)) => Arc::ptr_eq(x, y) || x == y,
                (x, y) => x.is_none() && y.is_none(),
            },
            ExprKind::Call { attrs, args, .. } => {
                a.try_call_attrs(attrs) == b.try_call_attrs(attrs) && a.try_ids(args) == b.try_ids(args)
            }
            ExprKind::Apply { args, .. } => a.try_ids(args) == b.try_ids(args),
            ExprKind::Tuple { fields } => a.try_ids(fields) == b.try_ids(fields),
            ExprKind::Proj { .. } | ExprKind::If { .. } => true,
            ExprKind::Func { idx } => match (a.try_closure(idx), b.try_closure(idx)) {
                (Some(x), Some(y)) => x == y && a.try_ids(x.params) == b.try_ids(y.params),
                (x, y) => x.is_none() && y.is_none(),
            },
            ExprKind::Block { bindings, .. } => a.try_ids(bindings) == b.try_ids(bindings),
        };
        if !same {
            return false;
        }
    }
    true
}

/// Whether a caller sees `a` and `b` alike: attributes, parameter types, declared result type
/// and the known type of the body (InferType uses it when no result type is declared).
pub(crate) fn same_signature(a: &Arc<Function>, b: &Arc<Function>) -> bool {
    if Arc::ptr_eq(a, b) {
        return true;
    }
    let param_tys = |f: &Function| f.params().iter().map(|&p| f.ty(p).cloned()).collect::<Vec<_>>();
    a.attrs() == b.attrs()
        && a.ret_ty() == b.ret_ty()
        && a.ty(a.body()) == b.ty(b.body())
        && param_tys(a) == param_tys(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn func(text: &str) -> Arc<Function> {
        let m = parse_module(text).expect("test input parses");
        m.entries()[0].1.clone()
    }

    #[test]
    fn same_function_ignores_a_uniform_shift_of_spans() {
        let a = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n");
        let b = func("\n\n\ndef @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n");
        assert_ne!(span_base(&a), span_base(&b));
        assert!(same_function(&a, &b));
    }

    #[test]
    fn same_function_sees_renamed_locals_and_inner_whitespace() {
        let a = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n");
        let renamed = func("def @f(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%y, %y)\n}\n");
        let spaced = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x,  %x)\n}\n");
        assert!(!same_function(&a, &renamed));
        assert!(!same_function(&a, &spaced));
    }

    #[test]
    fn same_signature_ignores_the_body() {
        let a = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n");
        let b = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  multiply(%x, %x)\n}\n");
        let c = func("def @f(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {\n  add(%x, %x)\n}\n");
        assert!(same_signature(&a, &b));
        assert!(!same_signature(&a, &c));
    }

    #[test]
    fn same_function_compares_types_by_content_not_by_table_index() {
        use crate::ir::{Attrs, DType, FunctionBuilder, Type};
        let (t2, t5) = (Type::tensor(vec![2], DType::F32), Type::tensor(vec![5], DType::F32));
        let build = |tx: &Type, ty: &Type| {
            let mut b = FunctionBuilder::new();
            let x = b.var("x", Some(tx.clone()));
            let y = b.var("y", Some(ty.clone()));
            let body = b.tuple(&[x, y]);
            Arc::new(b.finish(&[x, y], body, None, Attrs::new()))
        };
        // `a` has x at index 0 and y at 1; `b` retypes a (x: t2, y: t5) copy, which puts them the
        // other way round in its table.
        let a = build(&t5, &t2);
        let base = build(&t2, &t5);
        let mut copy = base.to_builder();
        let (x, y) = (base.params()[0], base.params()[1]);
        copy.set_ty(x, Some(t5.clone()));
        copy.set_ty(y, Some(t2.clone()));
        let b = Arc::new(copy.finish(&[x, y], base.body(), None, Attrs::new()));
        assert_ne!(a.nodes()[x.index()].ty, b.nodes()[x.index()].ty);
        assert!(same_function(&a, &b));
        assert!(same_signature(&a, &b));
        assert!(crate::ir::structural_eq(&a, &b));
        assert_eq!(crate::ir::structural_hash(&a), crate::ir::structural_hash(&b));
        assert!(!same_function(&a, &base));
        assert!(!crate::ir::structural_eq(&a, &base));
    }
}
