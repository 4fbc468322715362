//! FoldConstant (function pass, opt level 2): evaluates constant subexpressions at compile
//! time.
//!
//! What it does:
//! - folds an operator call whose arguments are all constants by running the operator's
//!   reference kernel, replacing the call with the resulting constant (a tuple of constants
//!   for operators with a tuple result);
//! - propagates let-bound constants into their uses; a binding whose value is (or folds to) a
//!   constant is then removed by this pass itself, since a constant has no effects;
//! - folds the projection of a literal tuple (`(a, b).1` → `b`) when the discarded fields are
//!   free of effects;
//! - folds `if` on a constant condition to the taken branch.
//!
//! What it deliberately does not do:
//! - fold stateful operators (`OpDef::stateful`) or zero-argument calls (`zeros()` stays a
//!   call: folding it would only trade a call for a large constant);
//! - fold when any input or the declared output has more than [`FOLD_ELEMENT_BUDGET`]
//!   elements, so compile time and memory stay bounded;
//! - fold when the kernel fails, the attributes do not match the schema, or the kernel's
//!   result does not have the type the type relation promises: the call is left as it is;
//! - remove other dead bindings (that is DeadCodeElimination) or var-to-var rebindings (that
//!   is CanonicalizeBindings).
//!
//! Phases:
//! 1. Quick scan: if no call has only constant arguments, no binding is bound to a constant,
//!    no projection reads a literal tuple and no `if` has a constant condition, the input is
//!    returned as is.
//! 2. One copy of the live nodes in arena order ([`crate::rewrite::Rewriter`]), folding each
//!    node once its operands are copied; constants flow into uses through the rewriter's
//!    constant propagation. The output is idempotent: a second run returns its input.
//!    A call is evaluated only once all its arguments are known to be constants (nothing is
//!    allocated for the others). Calls on rank-0 `f32` constants of an operator with a scalar
//!    kernel ([`passel_engine::op::OpDef::scalar_f32`]: unary float ops and arithmetic) are
//!    evaluated directly, bit-identical to the tensor kernel; everything else goes through
//!    the reference kernel.

use std::sync::Arc;

use passel_engine::ir::{Constant, ExprKind, Function, NodeId, Tensor, TensorData, TensorType, Type, TypeKind};
use passel_engine::op::{self, KernelCtx, OpDef};
use rand_chacha::rand_core::SeedableRng;
use rustc_hash::FxHashMap;

use crate::rewrite::{is_stateful, well_formed, Propagate, Rewriter};

/// Largest number of elements of any input or output of a folded call.
pub const FOLD_ELEMENT_BUDGET: u64 = 1 << 20;

/// Runs FoldConstant on `func`; returns `func` itself (pointer-equal) when nothing folds.
pub fn fold_constant(func: &Arc<Function>) -> Arc<Function> {
    if !has_candidate(func) || !well_formed(func) {
        return Arc::clone(func);
    }
    let mut impure = vec![false; func.num_nodes()];
    // New tuple node → its constant fields, for projections of folded tuple-result calls.
    let mut folded_tuples: FxHashMap<u32, Vec<NodeId>> = FxHashMap::default();
    let rw = Rewriter::new(func, Propagate::Consts);
    let out = rw.run(|rw, id| {
        let f = rw.func;
        let mut imp = false;
        f.for_each_operand(id, |o| imp |= impure[o.index()]);
        match *f.kind(id) {
            ExprKind::Call { op, .. } => imp |= is_stateful(op),
            ExprKind::Apply { .. } => imp = true,
            ExprKind::Func { .. } => imp = false,
            _ => {}
        }
        impure[id.index()] = imp;
        fold_node(rw, id, &impure, &mut folded_tuples)
    });
    match out {
        Some(new) => Arc::new(new),
        None => Arc::clone(func),
    }
}

fn has_candidate(func: &Function) -> bool {
    func.nodes().iter().any(|node| match node.kind {
        ExprKind::Call { op, args, .. } => {
            args.len > 0
                && !is_stateful(op)
                && func.ids(args).iter().all(|&a| matches!(func.kind(a), ExprKind::Const { .. }))
        }
        ExprKind::Block { bindings, .. } => {
            func.bindings(bindings).any(|(_, value)| matches!(func.kind(value), ExprKind::Const { .. }))
        }
        ExprKind::Proj { tuple, .. } => matches!(func.kind(tuple), ExprKind::Tuple { .. }),
        ExprKind::If { cond, .. } => matches!(func.kind(cond), ExprKind::Const { .. }),
        _ => false,
    })
}

/// Whether constant `c` has tensor type `tt` (without building its type).
fn has_type(c: &Constant, tt: &TensorType) -> bool {
    match c {
        Constant::Dense(t) => {
            t.dtype() == tt.dtype
                && t.shape().len() == tt.shape.len()
                && t.shape().iter().zip(tt.shape.iter()).all(|(&a, &b)| a as u64 == b)
        }
        Constant::Fill { ty, .. } => ty == tt,
    }
}

/// The scalar fast path: a call of an operator with an `f32` scalar kernel
/// ([`passel_engine::op::OpDef::scalar_f32`]) on rank-0 dense `f32` constants is evaluated
/// directly, with the kernel's own arithmetic, so the result is bit-identical to the general
/// path without the tensor and interpreter machinery. `None` when it does not apply; the
/// caller then takes the general path. Every argument is known to be a constant.
fn fold_scalar_f32(rw: &mut Rewriter<'_>, def: &OpDef, args: &[NodeId]) -> Option<NodeId> {
    let kernel = def.scalar_f32?;
    if def.tuple_result || args.len() > 3 {
        return None;
    }
    let f = rw.func;
    let mut vals = [0f32; 3];
    for (slot, &a) in vals.iter_mut().zip(args) {
        let c = match *f.kind(a) {
            ExprKind::Const { idx } => f.constant(idx),
            _ => {
                let new = rw.map(a);
                rw.new_const(new)?
            }
        };
        *slot = match &**c {
            Constant::Dense(Tensor(TensorData::F32(x))) if x.ndim() == 0 => *x.first()?,
            _ => return None,
        };
    }
    let v = kernel(&vals[..args.len()])?;
    Some(rw.constant(Arc::new(Constant::scalar_f32(v))))
}

fn fold_node(
    rw: &mut Rewriter<'_>,
    id: NodeId,
    impure: &[bool],
    folded_tuples: &mut FxHashMap<u32, Vec<NodeId>>,
) -> Option<NodeId> {
    let f = rw.func;
    match *f.kind(id) {
        ExprKind::Call { op, attrs, args } => {
            let def = op::try_get(op)?;
            let args = f.ids(args);
            if def.stateful || args.is_empty() || !def.arity.accepts(args.len()) {
                return None;
            }
            // Most calls have a non-constant argument: find out before allocating anything.
            // (`rw.map` copies an atom on first use; it is called exactly as the loop below
            // would call it, and the loop's second call is a memo lookup.)
            for &a in args {
                if !matches!(f.kind(a), ExprKind::Const { .. }) {
                    let new = rw.map(a);
                    rw.new_const(new)?;
                }
            }
            let attrs = f.call_attrs(attrs);
            def.check_attrs(attrs).ok()?;
            if let Some(folded) = fold_scalar_f32(rw, def, args) {
                return Some(folded);
            }
            let mut consts = Vec::with_capacity(args.len());
            let mut tys = Vec::with_capacity(args.len());
            for &a in args {
                // Constant nodes carry their type, so reusing it avoids building a new one.
                let (c, ty) = match *f.kind(a) {
                    ExprKind::Const { idx } => (f.constant(idx), f.ty(a)),
                    _ => {
                        let new = rw.map(a);
                        (rw.new_const(new)?, rw.b.ty(new))
                    }
                };
                let ty = match ty {
                    Some(t) if t.as_tensor().is_some_and(|tt| has_type(c, tt)) => t.clone(),
                    _ => c.ty(),
                };
                if ty.as_tensor().and_then(|t| t.num_elements()).is_none_or(|n| n > FOLD_ELEMENT_BUDGET) {
                    return None;
                }
                consts.push(Arc::clone(c));
                tys.push(ty);
            }
            let out_ty = (def.type_rel)(&tys, attrs).ok()?;
            let out_tys: Vec<Type> = match (out_ty.kind(), def.tuple_result) {
                (TypeKind::Tensor(_), false) => vec![out_ty.clone()],
                (TypeKind::Tuple(fields), true) => fields.to_vec(),
                _ => return None,
            };
            let mut total = 0u64;
            for t in &out_tys {
                total = total.checked_add(t.as_tensor()?.num_elements()?)?;
            }
            if total > FOLD_ELEMENT_BUDGET {
                return None;
            }
            let mut tensors = Vec::with_capacity(consts.len());
            for c in &consts {
                tensors.push(c.materialize().ok()?);
            }
            let mut ctx = KernelCtx { rng: rand_chacha::ChaCha8Rng::seed_from_u64(0) };
            let results = (def.kernel)(&tensors, attrs, &mut ctx).ok()?;
            let results: Vec<Constant> = results.into_iter().map(Constant::Dense).collect();
            let same = |(r, t): (&Constant, &Type)| t.as_tensor().is_some_and(|t| has_type(r, t));
            if results.len() != out_tys.len() || !results.iter().zip(&out_tys).all(same) {
                return None;
            }
            let mut fields: Vec<NodeId> = results.into_iter().map(|c| rw.constant(Arc::new(c))).collect();
            if !def.tuple_result {
                return fields.pop();
            }
            let tuple = rw.b.tuple(&fields);
            rw.b.set_ty(tuple, Some(out_ty));
            folded_tuples.insert(tuple.0, fields);
            Some(tuple)
        }
        ExprKind::Proj { tuple, index } => {
            if let ExprKind::Tuple { fields } = *f.kind(tuple) {
                let fields = f.ids(fields);
                let keep = *fields.get(index as usize)?;
                if fields.iter().any(|&x| x != keep && impure[x.index()]) {
                    return None;
                }
                return Some(rw.map(keep));
            }
            let new_tuple = rw.map(tuple);
            folded_tuples.get(&new_tuple.0)?.get(index as usize).copied()
        }
        ExprKind::If { cond, then_, else_ } => {
            let c = rw.map(cond);
            let c = rw.new_const(c)?;
            let ty = c.tensor_type();
            if ty.dtype != passel_engine::ir::DType::Bool || ty.num_elements() != Some(1) {
                return None;
            }
            let taken = if c.as_uniform_value()? != 0.0 { then_ } else { else_ };
            Some(rw.map(taken))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, DType, FunctionBuilder, Tensor};
    use passel_engine::op;

    use super::*;

    fn add() -> passel_engine::ir::OpId {
        op::lookup("add").unwrap()
    }

    fn f32s(shape: &[u64], v: &[f64]) -> Constant {
        Constant::Dense(Tensor::from_f64s(shape, DType::F32, v).unwrap())
    }

    fn ty2() -> Type {
        Type::tensor(vec![2], DType::F32)
    }

    #[test]
    fn fold_constant_folds_add_of_constants_with_kernel_values() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(ty2()));
        let c1 = b.constant(f32s(&[2], &[1.0, 2.0]));
        let c2 = b.constant(f32s(&[2], &[10.0, 20.0]));
        let s = b.call(add(), &[c1, c2], Attrs::new());
        let body = b.call(add(), &[x, s], Attrs::new());
        let func = Arc::new(b.finish(&[x], body, Some(ty2()), Attrs::new()));
        let out = fold_constant(&func);

        let mut e = FunctionBuilder::new();
        let x = e.var("x", Some(ty2()));
        let c = e.constant(f32s(&[2], &[11.0, 22.0]));
        let body = e.call(add(), &[x, c], Attrs::new());
        let expected = e.finish(&[x], body, Some(ty2()), Attrs::new());
        assert!(structural_eq(&out, &expected));
        assert!(Arc::ptr_eq(&fold_constant(&out), &out));
    }

    #[test]
    fn fold_constant_propagates_let_bound_constants_and_drops_their_bindings() {
        // let c = 1.5; let d = add(c, c); let y = add(x, d); y
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.5));
        let c = b.var("c", None);
        let d_val = b.call(add(), &[c, c], Attrs::new());
        let d = b.var("d", None);
        let y_val = b.call(add(), &[x, d], Attrs::new());
        let y = b.var("y", None);
        let body = b.block(&[(c, k), (d, d_val), (y, y_val)], y);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = fold_constant(&func);

        let mut e = FunctionBuilder::new();
        let x = e.var("x", None);
        let k = e.constant(Constant::scalar_f32(3.0));
        let y_val = e.call(add(), &[x, k], Attrs::new());
        let y = e.var("y", None);
        let body = e.block(&[(y, y_val)], y);
        let expected = e.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
        assert!(Arc::ptr_eq(&fold_constant(&out), &out));
    }

    #[test]
    fn fold_constant_returns_same_arc_when_nothing_folds() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let body = b.call(add(), &[x, k], Attrs::new());
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&fold_constant(&func), &func));
    }

    #[test]
    fn fold_constant_keeps_call_when_kernel_fails() {
        // Integer division by zero is a kernel error: the call must stay.
        let mut b = FunctionBuilder::new();
        let c1 = b.constant(Constant::Dense(Tensor::scalar(DType::I32, 1.0)));
        let c2 = b.constant(Constant::Dense(Tensor::scalar(DType::I32, 0.0)));
        let divide = passel_engine::op::lookup("divide").expect("divide is a built-in operator");
        let body = b.call(divide, &[c1, c2], Attrs::new());
        let func = Arc::new(b.finish(&[], body, None, Attrs::new()));
        let out = fold_constant(&func);
        assert!(matches!(out.kind(out.body()), ExprKind::Call { .. }));
    }

    #[test]
    fn fold_constant_skips_inputs_over_the_budget() {
        let big = Constant::Fill {
            ty: passel_engine::ir::TensorType { shape: vec![1 << 21].into(), dtype: DType::F32 },
            fill: passel_engine::ir::Fill::Full(1.0),
        };
        let mut b = FunctionBuilder::new();
        let c1 = b.constant(big.clone());
        let c2 = b.constant(big);
        let body = b.call(add(), &[c1, c2], Attrs::new());
        let func = Arc::new(b.finish(&[], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&fold_constant(&func), &func));
    }

    #[test]
    fn fold_constant_skips_outputs_over_the_budget_even_from_small_inputs() {
        // [1024, 1] + [1, 2048] broadcasts to 2M elements: over the budget.
        let fill = |shape: Vec<u64>| Constant::Fill {
            ty: passel_engine::ir::TensorType { shape: shape.into(), dtype: DType::F32 },
            fill: passel_engine::ir::Fill::Full(1.0),
        };
        let mut b = FunctionBuilder::new();
        let c1 = b.constant(fill(vec![1024, 1]));
        let c2 = b.constant(fill(vec![1, 2048]));
        let body = b.call(add(), &[c1, c2], Attrs::new());
        let func = Arc::new(b.finish(&[], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&fold_constant(&func), &func));
    }

    #[test]
    fn fold_constant_keeps_projection_that_would_drop_a_stateful_field() {
        let Some(rand) = op::lookup("random_uniform") else { return };
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(rand, &[], Attrs::new());
        let t = b.tuple(&[x, r]);
        let body = b.proj(t, 0);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&fold_constant(&func), &func));
    }

    #[test]
    fn fold_constant_keeps_stateful_and_zero_argument_calls() {
        for name in ["random_uniform", "zeros"] {
            let Some(op) = op::lookup(name) else { continue };
            let mut b = FunctionBuilder::new();
            let body = b.call(op, &[], Attrs::new());
            let func = Arc::new(b.finish(&[], body, None, Attrs::new()));
            assert!(Arc::ptr_eq(&fold_constant(&func), &func));
        }
    }

    #[test]
    fn fold_constant_folds_projection_of_literal_tuple() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let y = b.var("y", None);
        let r = b.call(op::lookup("relu").unwrap(), &[y], Attrs::new());
        let t = b.tuple(&[x, r]);
        let body = b.proj(t, 1);
        let func = Arc::new(b.finish(&[x, y], body, None, Attrs::new()));
        let out = fold_constant(&func);

        let mut e = FunctionBuilder::new();
        let x = e.var("x", None);
        let y = e.var("y", None);
        let body = e.call(op::lookup("relu").unwrap(), &[y], Attrs::new());
        let expected = e.finish(&[x, y], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
        assert!(Arc::ptr_eq(&fold_constant(&out), &out));
    }

    #[test]
    fn fold_constant_folds_if_on_constant_condition() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let y = b.var("y", None);
        let c = b.constant(Constant::Dense(Tensor::scalar(DType::Bool, 0.0)));
        let body = b.if_(c, x, y);
        let func = Arc::new(b.finish(&[x, y], body, None, Attrs::new()));
        let out = fold_constant(&func);
        assert_eq!(out.body(), out.params()[1]);
    }

    #[test]
    fn fold_constant_handles_deep_nesting_without_recursion() {
        // relu(relu(…relu(add(1, 2))…)) nested 100,000 deep: folds completely.
        let mut b = FunctionBuilder::new();
        let c1 = b.constant(Constant::scalar_f32(-1.0));
        let c2 = b.constant(Constant::scalar_f32(3.0));
        let mut cur = b.call(add(), &[c1, c2], Attrs::new());
        for _ in 0..100_000 {
            cur = b.call(op::lookup("relu").unwrap(), &[cur], Attrs::new());
        }
        let func = Arc::new(b.finish(&[], cur, None, Attrs::new()));
        let out = fold_constant(&func);
        let ExprKind::Const { idx } = *out.kind(out.body()) else { panic!("not folded") };
        assert_eq!(out.constant(idx).as_uniform_value(), Some(2.0));
    }

    #[test]
    fn fold_constant_scalar_fast_path_gives_the_kernel_results() {
        // f32 scalars take the fast path, f16 and i32 scalars the kernel; both agree with
        // the operator's reference kernel, including rounding and NaN.
        let cases: [(&str, DType, f64, f64); 6] = [
            ("multiply", DType::F32, 3.0, 0.5),
            ("divide", DType::F32, 1.0, 3.0),
            ("maximum", DType::F32, f64::NAN, 1.0),
            ("power", DType::F32, 2.0, 0.5),
            ("multiply", DType::F16, 3.0, 0.1),
            ("subtract", DType::I32, 7.0, 9.0),
        ];
        for (name, dtype, a, b) in cases {
            let op = op::lookup(name).unwrap();
            let (ta, tb) = (Tensor::scalar(dtype, a), Tensor::scalar(dtype, b));
            let mut ctx = KernelCtx { rng: rand_chacha::ChaCha8Rng::seed_from_u64(0) };
            let expected = (op::get(op).kernel)(&[ta.clone(), tb.clone()], &Attrs::new(), &mut ctx).unwrap().remove(0);
            let mut fb = FunctionBuilder::new();
            let c1 = fb.constant(Constant::Dense(ta));
            let c2 = fb.constant(Constant::Dense(tb));
            let body = fb.call(op, &[c1, c2], Attrs::new());
            let func = Arc::new(fb.finish(&[], body, None, Attrs::new()));
            let out = fold_constant(&func);
            let ExprKind::Const { idx } = *out.kind(out.body()) else { panic!("{name} not folded") };
            let Constant::Dense(got) = &**out.constant(idx) else { panic!("{name}: not dense") };
            assert!(got.bit_eq(&expected), "{name} {dtype}: folded {got}, kernel {expected}");
            assert_eq!(out.ty(out.body()), Some(&Type::scalar(dtype)));
        }
    }
}
