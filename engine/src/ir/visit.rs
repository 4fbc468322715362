//! Visitors over a function's arena: TVM's `ExprFunctor` and `ExprVisitor`, arena-style and
//! without recursion. (TVM's `ExprMutator` is part of the rewriting layer,
//! [`crate::ir::rewrite`].)
//!
//! - [`ExprFunctor`] + [`fold`]: a post-order fold over the live nodes. Each node is handled
//!   once, with its operands' results already computed and kept in a [`Memo`] indexed by node
//!   id (the seed's `memo_`).
//! - [`ExprVisitor`] + [`visit`]: per-kind hooks called once per live node in post-order,
//!   plus enter/exit hooks around scopes (blocks, closures, `if` branches): hooks of the IR's
//!   one scoped walker ([`Walker`], `walk.rs`), as the verifier's, the interpreter's and the
//!   Python package's visitors are.
//!
//! All drivers expect a function that passes the verifier; their cost is linear in the
//! arena and their stack use is constant.

use std::convert::Infallible;
use std::ops::ControlFlow;

use super::expr::ExprKind;
use super::function::{Closure, Function};
use super::ids::{NodeId, OpId};
use super::walk::{Branch, Enter, WalkHooks, Walker};

/// Results of a fold so far, indexed by node id. Operands of the node being folded always have
/// a result.
#[derive(Debug)]
pub struct Memo<R> {
    results: Vec<Option<R>>,
}

impl<R> Memo<R> {
    /// The result of node `id`, if it was folded (dead nodes have none).
    pub fn get(&self, id: NodeId) -> Option<&R> {
        self.results.get(id.index()).and_then(|r| r.as_ref())
    }

    /// Results of all the ids of `ids`, or `None` if one is missing.
    pub fn all<'a>(&'a self, ids: &[NodeId]) -> Option<Vec<&'a R>> {
        ids.iter().map(|&i| self.get(i)).collect()
    }

    /// The results, indexed by node id.
    pub fn into_vec(self) -> Vec<Option<R>> {
        self.results
    }
}

/// A post-order fold over a function's live nodes (TVM's `ExprFunctor<R(const Expr&)>`).
///
/// [`fold`] calls one method per live node in arena order, so every operand's result is in the
/// memo when its user is folded. Each per-kind method defaults to
/// [`ExprFunctor::visit_default`], so an implementor writes only the kinds it cares about.
///
/// The seed's `ConstantChecker` — is an expression built from constants only?
///
/// ```
/// use passel_engine::ir::{fold, Constant, ExprFunctor, Function, FunctionBuilder, Memo, NodeId, Attrs};
///
/// struct ConstantChecker;
/// impl ExprFunctor<bool> for ConstantChecker {
///     fn visit_default(&mut self, _: &Function, _: NodeId, _: &Memo<bool>) -> bool {
///         false
///     }
///     fn visit_const(&mut self, _: &Function, _: NodeId, _: &Memo<bool>) -> bool {
///         true
///     }
///     fn visit_tuple(&mut self, _: &Function, _: NodeId, fields: &[NodeId], memo: &Memo<bool>) -> bool {
///         fields.iter().all(|&f| memo.get(f) == Some(&true))
///     }
/// }
///
/// let mut b = FunctionBuilder::new();
/// let c = b.constant(Constant::scalar_f32(1.0));
/// let t = b.tuple(&[c]);
/// let func = b.finish(&[], t, None, Attrs::new());
/// let res = fold(&func, &mut ConstantChecker);
/// assert_eq!(res[t.index()], Some(true));
/// ```
#[allow(unused_variables)]
pub trait ExprFunctor<R> {
    /// The result for a node whose kind has no overriding method.
    fn visit_default(&mut self, func: &Function, id: NodeId, memo: &Memo<R>) -> R;

    /// A variable (parameters and binding variables included).
    fn visit_var(&mut self, func: &Function, id: NodeId, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A global reference.
    fn visit_global(&mut self, func: &Function, id: NodeId, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A constant.
    fn visit_const(&mut self, func: &Function, id: NodeId, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// An operator call with arguments `args`.
    fn visit_call(&mut self, func: &Function, id: NodeId, op: OpId, args: &[NodeId], memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A call of a function value.
    fn visit_apply(&mut self, func: &Function, id: NodeId, callee: NodeId, args: &[NodeId], memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A tuple.
    fn visit_tuple(&mut self, func: &Function, id: NodeId, fields: &[NodeId], memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A projection.
    fn visit_proj(&mut self, func: &Function, id: NodeId, tuple: NodeId, index: u32, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A conditional.
    fn visit_if(
        &mut self,
        func: &Function,
        id: NodeId,
        cond: NodeId,
        then_: NodeId,
        else_: NodeId,
        memo: &Memo<R>,
    ) -> R {
        self.visit_default(func, id, memo)
    }
    /// A nested function (its parameters and body are folded before it).
    fn visit_func(&mut self, func: &Function, id: NodeId, closure: &Closure, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
    /// A block; `bindings` are flattened `(var, value)` pairs.
    fn visit_block(&mut self, func: &Function, id: NodeId, bindings: &[NodeId], result: NodeId, memo: &Memo<R>) -> R {
        self.visit_default(func, id, memo)
    }
}

/// Folds `functor` over the live nodes of `func` in post-order and returns every node's
/// result, indexed by node id (`None` for dead nodes).
pub fn fold<R>(func: &Function, functor: &mut impl ExprFunctor<R>) -> Vec<Option<R>> {
    let live = func.live_mask();
    let mut memo = Memo { results: Vec::with_capacity(func.num_nodes()) };
    for id in func.node_ids() {
        let r = if live[id.index()] {
            Some(match *func.kind(id) {
                ExprKind::Var { .. } => functor.visit_var(func, id, &memo),
                ExprKind::Global { .. } => functor.visit_global(func, id, &memo),
                ExprKind::Const { .. } => functor.visit_const(func, id, &memo),
                ExprKind::Call { op, args, .. } => functor.visit_call(func, id, op, func.ids(args), &memo),
                ExprKind::Apply { callee, args } => functor.visit_apply(func, id, callee, func.ids(args), &memo),
                ExprKind::Tuple { fields } => functor.visit_tuple(func, id, func.ids(fields), &memo),
                ExprKind::Proj { tuple, index } => functor.visit_proj(func, id, tuple, index, &memo),
                ExprKind::If { cond, then_, else_ } => functor.visit_if(func, id, cond, then_, else_, &memo),
                ExprKind::Func { idx } => functor.visit_func(func, id, func.closure(idx), &memo),
                ExprKind::Block { bindings, result } => {
                    functor.visit_block(func, id, func.ids(bindings), result, &memo)
                }
            })
        } else {
            None
        };
        memo.results.push(r);
    }
    memo.results
}

/// A scope entered by [`visit`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scope {
    /// A block (node id of the `Block`); its bindings are visible until the exit.
    Block,
    /// A nested function (node id of the `Func`); its parameters are visible until the exit.
    Closure,
    /// The `then` branch of an `if` (node id of the `If`).
    Then,
    /// The `else` branch of an `if` (node id of the `If`).
    Else,
}

/// An analysis over a function (TVM's `ExprVisitor`): per-kind hooks, all no-ops by default.
///
/// [`visit`] walks the expression tree from the parameters and the body, calling each node's
/// hook once, after its operands' hooks (post-order, children in evaluation order), and
/// [`ExprVisitor::enter_scope`] / [`ExprVisitor::exit_scope`] around blocks, closures and
/// `if` branches. Atoms referenced many times are visited at their first use only.
///
/// The seed's `CallChecker` — does the function call an operator?
///
/// ```
/// use passel_engine::ir::{visit, Attrs, ExprVisitor, Function, FunctionBuilder, NodeId};
///
/// #[derive(Default)]
/// struct CallChecker {
///     found: bool,
/// }
/// impl ExprVisitor for CallChecker {
///     fn visit_call(&mut self, _: &Function, _: NodeId) {
///         self.found = true;
///     }
/// }
///
/// let mut b = FunctionBuilder::new();
/// let x = b.var("x", None);
/// let relu = passel_engine::op::lookup("relu").unwrap();
/// let r = b.call(relu, &[x], Attrs::new());
/// let func = b.finish(&[x], r, None, Attrs::new());
/// let mut checker = CallChecker::default();
/// visit(&func, &mut checker);
/// assert!(checker.found);
/// ```
#[allow(unused_variables)]
pub trait ExprVisitor {
    /// Before the first node of a scope; `id` is the `Block`, `Func` or `If` node.
    fn enter_scope(&mut self, func: &Function, id: NodeId, scope: Scope) {}
    /// After the last node of a scope.
    fn exit_scope(&mut self, func: &Function, id: NodeId, scope: Scope) {}
    /// A variable: a parameter, a binding's variable (visited after its value) or a use.
    fn visit_var(&mut self, func: &Function, id: NodeId) {}
    /// A global reference.
    fn visit_global(&mut self, func: &Function, id: NodeId) {}
    /// A constant.
    fn visit_const(&mut self, func: &Function, id: NodeId) {}
    /// An operator call.
    fn visit_call(&mut self, func: &Function, id: NodeId) {}
    /// A call of a function value.
    fn visit_apply(&mut self, func: &Function, id: NodeId) {}
    /// A tuple.
    fn visit_tuple(&mut self, func: &Function, id: NodeId) {}
    /// A projection.
    fn visit_proj(&mut self, func: &Function, id: NodeId) {}
    /// A conditional.
    fn visit_if(&mut self, func: &Function, id: NodeId) {}
    /// A nested function.
    fn visit_func(&mut self, func: &Function, id: NodeId) {}
    /// A block.
    fn visit_block(&mut self, func: &Function, id: NodeId) {}
}

/// The [`ExprVisitor`] driver's hooks on the IR's one walker ([`Walker`]): each node's hook
/// after its operands, atoms at their first use, and the scope events.
struct VisitHooks<'f, V> {
    func: &'f Function,
    visitor: &'f mut V,
    /// Nodes already visited (atoms are shared; parameters are visited first).
    seen: Vec<bool>,
}

impl<V: ExprVisitor> VisitHooks<'_, V> {
    /// Calls the hook of node `id` unless it was visited before.
    fn post(&mut self, id: NodeId, kind: &ExprKind) {
        let func = self.func;
        if std::mem::replace(&mut self.seen[id.index()], true) {
            return;
        }
        let v = &mut *self.visitor;
        match kind {
            ExprKind::Var { .. } => v.visit_var(func, id),
            ExprKind::Global { .. } => v.visit_global(func, id),
            ExprKind::Const { .. } => v.visit_const(func, id),
            ExprKind::Call { .. } => v.visit_call(func, id),
            ExprKind::Apply { .. } => v.visit_apply(func, id),
            ExprKind::Tuple { .. } => v.visit_tuple(func, id),
            ExprKind::Proj { .. } => v.visit_proj(func, id),
            ExprKind::If { .. } => v.visit_if(func, id),
            ExprKind::Func { .. } => v.visit_func(func, id),
            ExprKind::Block { .. } => v.visit_block(func, id),
        }
    }
}

fn scope_of(kind: &ExprKind) -> Option<Scope> {
    match kind {
        ExprKind::Block { .. } => Some(Scope::Block),
        ExprKind::Func { .. } => Some(Scope::Closure),
        _ => None,
    }
}

fn scope_of_branch(branch: Branch) -> Scope {
    match branch {
        Branch::Then => Scope::Then,
        Branch::Else => Scope::Else,
    }
}

impl<V: ExprVisitor> WalkHooks for VisitHooks<'_, V> {
    type Break = Infallible;

    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        self.post(id, kind);
        ControlFlow::Continue(())
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        if self.seen[id.index()] {
            return ControlFlow::Continue(Enter::Skip);
        }
        if let Some(scope) = scope_of(kind) {
            self.visitor.enter_scope(self.func, id, scope);
        }
        // A closure's parameters are visited as it opens (the walk does not report binders).
        if let ExprKind::Func { idx } = *kind {
            if let Some(c) = self.func.try_closure(idx) {
                for &p in self.func.ids(c.params) {
                    let pk = *self.func.kind(p);
                    self.post(p, &pk);
                }
            }
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        self.post(id, kind);
        if let Some(scope) = scope_of(kind) {
            self.visitor.exit_scope(self.func, id, scope);
        }
        ControlFlow::Continue(())
    }

    fn bind(&mut self, var: NodeId, _value: NodeId) -> ControlFlow<Infallible> {
        let kind = *self.func.kind(var);
        self.post(var, &kind);
        ControlFlow::Continue(())
    }

    fn enter_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<Infallible, Enter> {
        self.visitor.enter_scope(self.func, if_, scope_of_branch(branch));
        ControlFlow::Continue(Enter::Descend)
    }

    fn leave_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<Infallible> {
        self.visitor.exit_scope(self.func, if_, scope_of_branch(branch));
        ControlFlow::Continue(())
    }
}

/// Runs `visitor` over the live nodes of `func` (see [`ExprVisitor`]): the parameters, then
/// the body through the IR's one walker ([`Walker`]).
pub fn visit(func: &Function, visitor: &mut impl ExprVisitor) {
    let mut hooks = VisitHooks { func, visitor, seen: vec![false; func.num_nodes()] };
    for &p in func.params() {
        let kind = *func.kind(p);
        hooks.post(p, &kind);
    }
    let ControlFlow::Continue(()) = Walker::new().walk(func, func.body(), &mut hooks);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ir::rewrite::{mutate, ExprMutator, RewriteCx};
    use crate::ir::{structural_eq, verify_function, Attrs, Constant, DType, FunctionBuilder, Span, Tensor, Type};
    use crate::op::{self, KernelCtx};

    fn ops() -> (OpId, OpId) {
        (op::lookup("add").unwrap(), op::lookup("relu").unwrap())
    }

    fn assert_valid(func: &Function) {
        assert_eq!(verify_function(None, "main", func), Ok(()));
    }

    fn assert_same(actual: &Function, expected: &Function) {
        assert_valid(actual);
        assert!(structural_eq(actual, expected), "got {actual:#?}\nexpected {expected:#?}");
    }

    /// The seed's `ConstantChecker`: whether an expression is built from constants only.
    struct ConstantChecker;

    impl ExprFunctor<bool> for ConstantChecker {
        fn visit_default(&mut self, _: &Function, _: NodeId, _: &Memo<bool>) -> bool {
            false
        }
        fn visit_const(&mut self, _: &Function, _: NodeId, _: &Memo<bool>) -> bool {
            true
        }
        fn visit_tuple(&mut self, _: &Function, _: NodeId, fields: &[NodeId], memo: &Memo<bool>) -> bool {
            fields.iter().all(|&f| memo.get(f) == Some(&true))
        }
    }

    #[test]
    fn fold_checks_constant_tuples() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c1 = b.constant(Constant::scalar_f32(1.0));
        let c2 = b.constant(Constant::scalar_f32(2.0));
        let inner = b.tuple(&[c1, c2]);
        let mixed = b.tuple(&[inner, x]);
        let dead = b.tuple(&[x]);
        let func = b.finish(&[x], mixed, None, Attrs::new());
        let res = fold(&func, &mut ConstantChecker);
        assert_eq!(res[inner.index()], Some(true));
        assert_eq!(res[mixed.index()], Some(false));
        assert_eq!(res[x.index()], Some(false));
        assert_eq!(res[dead.index()], None);
    }

    /// The seed's `CallChecker`, counting calls, and recording the scope events.
    #[derive(Default)]
    struct CallChecker {
        calls: usize,
        events: Vec<String>,
    }

    impl ExprVisitor for CallChecker {
        fn visit_call(&mut self, _: &Function, id: NodeId) {
            self.calls += 1;
            self.events.push(format!("call {id}"));
        }
        fn enter_scope(&mut self, _: &Function, id: NodeId, scope: Scope) {
            self.events.push(format!("enter {scope:?} {id}"));
        }
        fn exit_scope(&mut self, _: &Function, id: NodeId, scope: Scope) {
            self.events.push(format!("exit {scope:?} {id}"));
        }
    }

    #[test]
    fn visit_finds_calls_in_post_order_inside_scopes() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let r = b.call(relu, &[x], Attrs::new());
        let v = b.var("v", None);
        let p = b.var("p", None);
        let s = b.call(add, &[p, v], Attrs::new());
        let f = b.closure(&[p], s, None, Attrs::new());
        let iff = b.if_(c, f, x);
        let body = b.block(&[(v, r)], iff);
        let func = b.finish(&[x, c], body, None, Attrs::new());
        let mut checker = CallChecker::default();
        visit(&func, &mut checker);
        assert_eq!(checker.calls, 2);
        assert_eq!(
            checker.events,
            [
                "enter Block %8",
                "call %2",
                "enter Then %7",
                "enter Closure %6",
                "call %5",
                "exit Closure %6",
                "exit Then %7",
                "enter Else %7",
                "exit Else %7",
                "exit Block %8",
            ]
        );
    }

    /// SimplifyExpr-style: `relu(relu(e))` → `relu(e)` and `add(e, 0)` → `e`.
    struct Simplify;

    impl ExprMutator for Simplify {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, _old: NodeId, kind: &ExprKind) -> Option<NodeId> {
            let (add, relu) = ops();
            if let Some(inner) = cx.call_arg(kind, relu, 0) {
                return cx.call_arg(cx.kind(inner), relu, 0).map(|_| inner);
            }
            let rhs = cx.call_arg(kind, add, 1)?;
            let zero = cx.constant(rhs)?.as_uniform_value() == Some(0.0);
            if zero {
                cx.call_arg(kind, add, 0)
            } else {
                None
            }
        }
    }

    #[test]
    fn mutate_simplifies_patterns() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r1 = b.call(relu, &[x], Attrs::new());
        let r2 = b.call(relu, &[r1], Attrs::new());
        let zero = b.constant(Constant::scalar_f32(0.0));
        let a = b.call(add, &[r2, zero], Attrs::new());
        let r3 = b.call(relu, &[a], Attrs::new());
        let func = Arc::new(b.finish(&[x], r3, None, Attrs::new()));
        let out = mutate(&func, &mut Simplify);

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let expected = b.finish(&[x], r, None, Attrs::new());
        assert_same(&out, &expected);
        // The copy of the constant `0` is left dead: atoms are copied before their users'
        // hooks run. Nothing else is left over.
        assert_eq!(out.num_nodes(), 3);
    }

    /// FoldConstant-style: a call whose arguments are all constants becomes a constant.
    struct FoldConstant;

    impl ExprMutator for FoldConstant {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, _old: NodeId, kind: &ExprKind) -> Option<NodeId> {
            let ExprKind::Call { op, attrs, args } = *kind else { return None };
            let def = op::get(op);
            let values: Option<Vec<Tensor>> =
                cx.ids(args).iter().map(|&a| cx.constant(a)?.materialize().ok()).collect();
            let mut ctx = KernelCtx::seeded(0);
            let mut out = (def.kernel)(&values?, cx.call_attrs(attrs), &mut ctx).ok()?;
            (out.len() == 1 && !def.stateful).then(|| cx.constant_node(Constant::Dense(out.remove(0))))
        }
    }

    #[test]
    fn mutate_folds_constant_calls() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(Type::scalar(DType::F32)));
        let c1 = b.constant(Constant::scalar_f32(-1.0));
        let c2 = b.constant(Constant::scalar_f32(-2.0));
        let s = b.call(add, &[c1, c2], Attrs::new());
        let r = b.call(relu, &[s], Attrs::new());
        let a = b.call(add, &[x, r], Attrs::new());
        let func = Arc::new(b.finish(&[x], a, None, Attrs::new()));
        let out = mutate(&func, &mut FoldConstant);

        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(Type::scalar(DType::F32)));
        let c = b.constant(Constant::scalar_f32(0.0));
        let a = b.call(add, &[x, c], Attrs::new());
        let expected = b.finish(&[x], a, None, Attrs::new());
        assert_same(&out, &expected);
    }

    struct Nothing;
    impl ExprMutator for Nothing {}

    #[test]
    fn mutate_without_change_returns_same_arc() {
        let func = Arc::new(crate::ir::verifier::tests::nested(30));
        assert!(Arc::ptr_eq(&mutate(&func, &mut Nothing), &func));
        // Hooks that match nothing leave the function untouched too.
        assert!(Arc::ptr_eq(&mutate(&func, &mut Simplify), &func));
        let chain = Arc::new(crate::ir::verifier::tests::chain(10));
        assert!(Arc::ptr_eq(&mutate(&chain, &mut FoldConstant), &chain));
    }

    /// Substitutes the uses of chosen old variables by the rewritten node of another old node
    /// (or a fresh constant).
    struct Subst {
        by_node: Vec<(NodeId, NodeId)>,
        by_const: Vec<(NodeId, f32)>,
    }

    impl ExprMutator for Subst {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, _: &ExprKind) -> Option<NodeId> {
            if let Some(&(_, v)) = self.by_const.iter().find(|(o, _)| *o == old) {
                return Some(cx.constant_node(Constant::scalar_f32(v)));
            }
            let &(_, with) = self.by_node.iter().find(|(o, _)| *o == old)?;
            cx.mapped(with)
        }
    }

    #[test]
    fn mutate_substitutes_variable_and_drops_its_binding() {
        let (add, _) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let c = b.var("c", None);
        let s = b.call(add, &[x, c], Attrs::new());
        let body = b.block(&[(c, k)], s);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&func, &mut Subst { by_node: vec![], by_const: vec![(c, 1.0)] });

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let s = b.call(add, &[x, k], Attrs::new());
        let expected = b.finish(&[x], s, None, Attrs::new());
        assert_same(&out, &expected);

        // A substituted parameter stays a parameter; only its uses change.
        let out = mutate(&func, &mut Subst { by_node: vec![], by_const: vec![(x, 5.0)] });
        assert_valid(&out);
        assert_eq!(out.params().len(), 1);
        assert!(matches!(out.kind(out.params()[0]), ExprKind::Var { .. }));
    }

    #[test]
    fn mutate_copies_compound_substitute_for_each_use() {
        let (add, relu) = ops();
        // fn(%x) { let %a = { let %t = relu(%x); relu(%t) }; add(%a, %a) }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let t = b.var("t", None);
        let rt = b.call(relu, &[t], Attrs::new());
        let value = b.block(&[(t, r)], rt);
        let a = b.var("a", None);
        let s = b.call(add, &[a, a], Attrs::new());
        let body = b.block(&[(a, value)], s);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        // Inline `%a`: its value is a block binding `%t`, so the copy needs a fresh `%t`.
        let out = mutate(&func, &mut Subst { by_node: vec![(a, value)], by_const: vec![] });

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut inlined = || {
            let r = b.call(relu, &[x], Attrs::new());
            let t = b.var("t", None);
            let rt = b.call(relu, &[t], Attrs::new());
            b.block(&[(t, r)], rt)
        };
        let (v1, v2) = (inlined(), inlined());
        let s = b.call(add, &[v1, v2], Attrs::new());
        let expected = b.finish(&[x], s, None, Attrs::new());
        assert_same(&out, &expected);
    }

    /// DCE-style: drops bindings whose variable is never used (counted on the input).
    struct DropUnused {
        uses: Vec<u32>,
    }

    impl DropUnused {
        fn new(func: &Function) -> DropUnused {
            let mut uses = vec![0; func.num_nodes()];
            let live = func.live_mask();
            for id in func.node_ids().filter(|id| live[id.index()]) {
                // Binding variables are operands of their block but not uses.
                if let ExprKind::Block { bindings, result } = *func.kind(id) {
                    func.bindings(bindings).for_each(|(_, value)| uses[value.index()] += 1);
                    uses[result.index()] += 1;
                } else {
                    func.for_each_operand(id, |o| uses[o.index()] += 1);
                }
            }
            uses[func.body().index()] += 1;
            DropUnused { uses }
        }
    }

    impl ExprMutator for DropUnused {
        fn keep_binding(&mut self, _: &RewriteCx<'_>, _: NodeId, old_var: NodeId, _: NodeId) -> bool {
            self.uses[old_var.index()] > 0
        }
    }

    #[test]
    fn mutate_drops_bindings() {
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r1 = b.call(relu, &[x], Attrs::new());
        let r2 = b.call(relu, &[x], Attrs::new());
        let (a, c) = (b.var("a", None), b.var("c", None));
        let body = b.block(&[(a, r1), (c, r2)], c);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&func, &mut DropUnused::new(&func));

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r2 = b.call(relu, &[x], Attrs::new());
        let c = b.var("c", None);
        let body = b.block(&[(c, r2)], c);
        let expected = b.finish(&[x], body, None, Attrs::new());
        assert_same(&out, &expected);

        // Dropping every binding leaves the result.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let a = b.var("a", None);
        let body = b.block(&[(a, r)], x);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&func, &mut DropUnused::new(&func));
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let expected = b.finish(&[x], x, None, Attrs::new());
        assert_same(&out, &expected);
    }

    /// Replaces every `relu` call by a fresh copy (changes every node, structurally a no-op).
    struct Recall;

    impl ExprMutator for Recall {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, _: NodeId, kind: &ExprKind) -> Option<NodeId> {
            let (_, relu) = ops();
            let arg = cx.call_arg(kind, relu, 0)?;
            Some(cx.call(relu, &[arg], Attrs::new()))
        }
    }

    #[test]
    fn mutate_keeps_spans_and_types() {
        let (add, relu) = ops();
        let ty = Some(Type::scalar(DType::F32));
        let mut b = FunctionBuilder::new();
        b.set_span(Span::new(1, 2));
        let x = b.var("x", ty.clone());
        b.set_span(Span::new(3, 9));
        let r = b.call(relu, &[x], Attrs::new());
        b.set_ty(r, ty.clone());
        b.set_span(Span::new(10, 20));
        let a = b.call(add, &[r, x], Attrs::new());
        b.set_ty(a, ty.clone());
        let func = Arc::new(b.finish(&[x], a, ty.clone(), Attrs::new()));
        let out = mutate(&func, &mut Recall);
        assert!(!Arc::ptr_eq(&out, &func));
        assert_same(&out, &func);
        let body = out.body();
        assert_eq!((out.span(body), out.ty(body)), (Some(Span::new(10, 20)), ty.as_ref()));
        // The hook's new `relu` call gets the span of the node it replaces.
        let ExprKind::Call { args, .. } = *out.kind(body) else { panic!("body is a call") };
        let new_relu = out.ids(args)[0];
        assert_eq!(out.span(new_relu), Some(Span::new(3, 9)));
        assert_eq!(out.span(out.params()[0]), Some(Span::new(1, 2)));
    }

    #[test]
    fn visitors_handle_million_bindings() {
        let func = Arc::new(crate::ir::verifier::tests::chain(1_000_000));
        let res = fold(&func, &mut ConstantChecker);
        assert_eq!(res[func.body().index()], Some(false));
        let mut checker = CallChecker::default();
        visit(&func, &mut checker);
        assert_eq!(checker.calls, 1_000_000);
        assert!(Arc::ptr_eq(&mutate(&func, &mut Nothing), &func));
        let out = mutate(&func, &mut Recall);
        assert!(!Arc::ptr_eq(&out, &func));
        assert_same(&out, &func);
    }

    #[test]
    fn visitors_handle_deep_nesting() {
        let func = Arc::new(crate::ir::verifier::tests::nested(100_000));
        let res = fold(&func, &mut ConstantChecker);
        assert_eq!(res[func.body().index()], Some(false));
        let mut checker = CallChecker::default();
        visit(&func, &mut checker);
        assert_eq!(checker.calls, 1);
        assert_eq!(checker.events.len(), 1 + 2 * 100_000 + 2 * (100_000 / 3));
        assert!(Arc::ptr_eq(&mutate(&func, &mut Nothing), &func));
        let out = mutate(&func, &mut Recall);
        assert_same(&out, &func);

        // 100,000 nested relu calls collapse to one; the copy of a deep compound substitute
        // is iterative too.
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut e = x;
        for _ in 0..100_000 {
            e = b.call(relu, &[e], Attrs::new());
        }
        let a = b.var("a", None);
        let s = b.call(add, &[a, a], Attrs::new());
        let body = b.block(&[(a, e)], s);
        let deep = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&deep, &mut Simplify);
        assert_eq!(out.num_nodes(), deep.num_nodes() - 99_999);
        let inlined = mutate(&deep, &mut Subst { by_node: vec![(a, e)], by_const: vec![] });
        assert_valid(&inlined);
        assert_eq!(inlined.live_mask().iter().filter(|&&l| l).count(), 2 + 2 * 100_000);
    }
}
