//! Visitors over a function's arena: TVM's `ExprFunctor`, `ExprVisitor` and `ExprMutator`,
//! arena-style and without recursion.
//!
//! - [`ExprFunctor`] + [`fold`]: a post-order fold over the live nodes. Each node is handled
//!   once, with its operands' results already computed and kept in a [`Memo`] indexed by node
//!   id (the seed's `memo_`).
//! - [`ExprVisitor`] + [`visit`]: per-kind hooks called once per live node in post-order,
//!   plus enter/exit hooks around scopes (blocks, closures, `if` branches), driven by an
//!   explicit stack.
//! - [`ExprMutator`] + [`mutate`]: a bottom-up rewrite into a fresh arena. The memo maps old
//!   ids to new ids; when no hook changed anything the input `Arc` is returned unchanged (the
//!   seed's "functional update").
//!
//! All drivers expect a function that passes the verifier; their cost is linear in the
//! arena and their stack use is constant.

use std::collections::HashMap;
use std::sync::Arc;

use super::attrs::Attrs;
use super::expr::{ExprKind, Span};
use super::function::{Closure, Function, FunctionBuilder};
use super::ids::{AttrsIdx, ClosureIdx, IdRange, NodeId, OpId};
use super::tensor::Constant;
use super::ty::Type;

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

enum Walk {
    /// Expand a node: schedule its operands, then its `Post`.
    Pre(NodeId),
    /// All operands are done: call the node's hook (and close its scope).
    Post(NodeId),
    Enter(NodeId, Scope),
    Exit(NodeId, Scope),
}

/// Runs `visitor` over the live nodes of `func` (see [`ExprVisitor`]).
pub fn visit(func: &Function, visitor: &mut impl ExprVisitor) {
    let mut seen = vec![false; func.num_nodes()];
    let mut stack: Vec<Walk> = Vec::new();
    stack.push(Walk::Pre(func.body()));
    stack.extend(func.params().iter().rev().map(|&p| Walk::Pre(p)));
    let mut ops = Vec::new();
    while let Some(step) = stack.pop() {
        match step {
            Walk::Pre(id) => {
                if std::mem::replace(&mut seen[id.index()], true) {
                    continue;
                }
                let kind = *func.kind(id);
                let scope = match kind {
                    ExprKind::Block { .. } => Some(Scope::Block),
                    ExprKind::Func { .. } => Some(Scope::Closure),
                    _ => None,
                };
                if let Some(s) = scope {
                    stack.push(Walk::Exit(id, s));
                }
                stack.push(Walk::Post(id));
                if let ExprKind::If { cond, then_, else_ } = kind {
                    // Branches get their own scopes, entered in evaluation order.
                    stack.extend([
                        Walk::Exit(id, Scope::Else),
                        Walk::Pre(else_),
                        Walk::Enter(id, Scope::Else),
                        Walk::Exit(id, Scope::Then),
                        Walk::Pre(then_),
                        Walk::Enter(id, Scope::Then),
                        Walk::Pre(cond),
                    ]);
                } else {
                    ops.clear();
                    func.for_each_operand(id, |o| ops.push(o));
                    stack.extend(ops.iter().rev().map(|&o| Walk::Pre(o)));
                }
                if let Some(s) = scope {
                    stack.push(Walk::Enter(id, s));
                }
            }
            Walk::Post(id) => match func.kind(id) {
                ExprKind::Var { .. } => visitor.visit_var(func, id),
                ExprKind::Global { .. } => visitor.visit_global(func, id),
                ExprKind::Const { .. } => visitor.visit_const(func, id),
                ExprKind::Call { .. } => visitor.visit_call(func, id),
                ExprKind::Apply { .. } => visitor.visit_apply(func, id),
                ExprKind::Tuple { .. } => visitor.visit_tuple(func, id),
                ExprKind::Proj { .. } => visitor.visit_proj(func, id),
                ExprKind::If { .. } => visitor.visit_if(func, id),
                ExprKind::Func { .. } => visitor.visit_func(func, id),
                ExprKind::Block { .. } => visitor.visit_block(func, id),
            },
            Walk::Enter(id, s) => visitor.enter_scope(func, id, s),
            Walk::Exit(id, s) => visitor.exit_scope(func, id, s),
        }
    }
}

/// A rewrite of a function (TVM's `ExprMutator`), driven by [`mutate`].
///
/// The driver copies every live node bottom-up into a new arena. Before copying node `old` it
/// calls [`ExprMutator::rewrite`] with the node's kind whose operands are already rewritten
/// (ids and ranges of the *new* arena, readable through the [`RewriteCx`]). Returning
/// `Some(new)` makes every user of `old` use `new` instead; `None` keeps the default copy.
///
/// - Substituting a `Var` substitutes all of its uses. A substituted block variable loses its
///   binding (its value is dropped; the hook decides whether that is safe); a substituted
///   parameter stays a parameter.
/// - [`ExprMutator::keep_binding`] can drop block bindings; a block left without bindings
///   becomes its result.
/// - A compound node used in two places (e.g. a var substituted by a call) is deep-copied for
///   every use after the first, with fresh variables for what it binds, so the output stays a
///   tree.
/// - Copied nodes keep their spans and types; nodes pushed by a hook get the span of the node
///   being rewritten and no type unless the hook sets one.
///
/// ```
/// use passel_engine::ir::{mutate, Attrs, ExprKind, ExprMutator, FunctionBuilder, NodeId, RewriteCx};
/// use std::sync::Arc;
///
/// /// `relu(relu(x))` → `relu(x)`.
/// struct ReluIdem;
/// impl ExprMutator for ReluIdem {
///     fn rewrite(&mut self, cx: &mut RewriteCx<'_>, _old: NodeId, kind: &ExprKind) -> Option<NodeId> {
///         let relu = passel_engine::op::lookup("relu")?;
///         let inner = cx.call_arg(kind, relu, 0)?;
///         cx.call_arg(cx.kind(inner), relu, 0).map(|_| inner)
///     }
/// }
///
/// let relu = passel_engine::op::lookup("relu").unwrap();
/// let mut b = FunctionBuilder::new();
/// let x = b.var("x", None);
/// let r1 = b.call(relu, &[x], Attrs::new());
/// let r2 = b.call(relu, &[r1], Attrs::new());
/// let func = Arc::new(b.finish(&[x], r2, None, Attrs::new()));
/// let out = mutate(&func, &mut ReluIdem);
/// assert_eq!(out.num_nodes(), 2);
/// ```
#[allow(unused_variables)]
pub trait ExprMutator {
    /// Rewrites node `old` (an id of the input function) whose kind, with operands already
    /// rewritten, is `kind`. Returns the new node to use instead, or `None` for the default
    /// copy. Ids returned must belong to the new arena (operands from `kind` or nodes pushed
    /// through `cx`).
    fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> Option<NodeId> {
        None
    }

    /// Whether to keep the binding of old variable `old_var` in block `old_block`; `value` is
    /// the binding's rewritten value. Called in binding order before the block is rewritten.
    fn keep_binding(&mut self, cx: &RewriteCx<'_>, old_block: NodeId, old_var: NodeId, value: NodeId) -> bool {
        true
    }
}

/// The state of a rewrite: the input function, the new arena, and helpers to inspect
/// rewritten nodes and push new ones.
#[derive(Debug)]
pub struct RewriteCx<'a> {
    old: &'a Function,
    b: FunctionBuilder,
    /// Per new node: already an operand of some pushed node (or the body).
    used: Vec<bool>,
    /// Per old node: its new id, once rewritten.
    memo: Vec<Option<NodeId>>,
    changed: bool,
}

impl<'a> RewriteCx<'a> {
    /// The input function.
    pub fn old(&self) -> &'a Function {
        self.old
    }

    /// The new id of old node `old`, once it has been rewritten.
    pub fn mapped(&self, old: NodeId) -> Option<NodeId> {
        self.memo.get(old.index()).copied().flatten()
    }

    /// The kind of new node `id`.
    pub fn kind(&self, id: NodeId) -> &ExprKind {
        &self.b.node(id).kind
    }

    /// The known type of new node `id`.
    pub fn ty(&self, id: NodeId) -> Option<&Type> {
        self.b.ty(id)
    }

    /// Sets the type of new node `id`.
    pub fn set_ty(&mut self, id: NodeId, ty: Option<Type>) {
        self.b.set_ty(id, ty);
    }

    /// The ids of a range of the new arena (arguments, fields, bindings of a `kind`).
    pub fn ids(&self, range: IdRange) -> &[NodeId] {
        self.b.ids(range)
    }

    /// The constant of new node `id`, if it is a constant.
    pub fn constant(&self, id: NodeId) -> Option<&Arc<Constant>> {
        match *self.kind(id) {
            ExprKind::Const { idx } => Some(self.b.constant_at(idx)),
            _ => None,
        }
    }

    /// The attributes of a call's `attrs` index.
    pub fn call_attrs(&self, idx: AttrsIdx) -> &Attrs {
        self.b.call_attrs_at(idx)
    }

    /// The closure of a `Func` kind's index.
    pub fn closure(&self, idx: ClosureIdx) -> &Closure {
        self.b.closure_at(idx)
    }

    /// If `kind` is a call of `op`, its argument `i`.
    pub fn call_arg(&self, kind: &ExprKind, op: OpId, i: usize) -> Option<NodeId> {
        match *kind {
            ExprKind::Call { op: o, args, .. } if o == op => self.ids(args).get(i).copied(),
            _ => None,
        }
    }

    /// Pushes a variable.
    pub fn var(&mut self, name: &str, ty: Option<Type>) -> NodeId {
        self.b.var(name, ty)
    }

    /// Pushes a global reference.
    pub fn global(&mut self, name: &str) -> NodeId {
        self.b.global(name)
    }

    /// Pushes a constant (typed).
    pub fn constant_node(&mut self, c: impl Into<Arc<Constant>>) -> NodeId {
        self.b.constant(c)
    }

    /// Pushes an operator call.
    pub fn call(&mut self, op: OpId, args: &[NodeId], attrs: Attrs) -> NodeId {
        let attrs = self.b.attrs(attrs);
        let args = self.attach_all(args);
        let args = self.b.push_ids(&args);
        self.b.push(ExprKind::Call { op, attrs, args }, None)
    }

    /// Pushes a tuple.
    pub fn tuple(&mut self, fields: &[NodeId]) -> NodeId {
        let fields = self.attach_all(fields);
        let fields = self.b.push_ids(&fields);
        self.b.push(ExprKind::Tuple { fields }, None)
    }

    /// Pushes a projection.
    pub fn proj(&mut self, tuple: NodeId, index: u32) -> NodeId {
        let tuple = self.attach(tuple);
        self.b.push(ExprKind::Proj { tuple, index }, None)
    }

    /// Pushes any node whose operands are new ids: operands already used elsewhere are
    /// deep-copied so that the arena stays a tree.
    pub fn push(&mut self, kind: ExprKind, ty: Option<Type>) -> NodeId {
        let kind = self.attach_kind(kind);
        self.b.push(kind, ty)
    }

    fn attach_all(&mut self, ids: &[NodeId]) -> Vec<NodeId> {
        ids.iter().map(|&i| self.attach(i)).collect()
    }

    /// Marks `id` as used by a new user; a compound node used before is copied instead.
    fn attach(&mut self, id: NodeId) -> NodeId {
        if self.used.len() < self.b.num_nodes() {
            self.used.resize(self.b.num_nodes(), false);
        }
        if self.b.node(id).kind.is_atom() {
            return id;
        }
        if std::mem::replace(&mut self.used[id.index()], true) {
            let copy = self.deep_copy(id);
            self.used.resize(self.b.num_nodes(), false);
            self.used[copy.index()] = true;
            copy
        } else {
            id
        }
    }

    /// `kind` with each operand attached; ranges are re-pushed only when an operand changed.
    fn attach_kind(&mut self, kind: ExprKind) -> ExprKind {
        let range = |cx: &mut Self, r: IdRange, stride: usize| -> IdRange {
            let old: Vec<NodeId> = cx.b.ids(r).to_vec();
            // In a binding range only the values (odd slots) are uses; variables are binders.
            let new: Vec<NodeId> =
                old.iter().enumerate().map(|(i, &o)| if i % stride == stride - 1 { cx.attach(o) } else { o }).collect();
            if new == old {
                r
            } else {
                cx.b.push_ids(&new)
            }
        };
        match kind {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => kind,
            ExprKind::Call { op, attrs, args } => ExprKind::Call { op, attrs, args: range(self, args, 1) },
            ExprKind::Apply { callee, args } => {
                let callee = self.attach(callee);
                ExprKind::Apply { callee, args: range(self, args, 1) }
            }
            ExprKind::Tuple { fields } => ExprKind::Tuple { fields: range(self, fields, 1) },
            ExprKind::Proj { tuple, index } => ExprKind::Proj { tuple: self.attach(tuple), index },
            ExprKind::If { cond, then_, else_ } => {
                ExprKind::If { cond: self.attach(cond), then_: self.attach(then_), else_: self.attach(else_) }
            }
            ExprKind::Func { idx } => {
                let c = self.b.closure_at(idx).clone();
                let body = self.attach(c.body);
                if body == c.body {
                    kind
                } else {
                    ExprKind::Func { idx: self.b.push_closure(Closure { body, ..c }) }
                }
            }
            ExprKind::Block { bindings, result } => {
                let bindings = range(self, bindings, 2);
                ExprKind::Block { bindings, result: self.attach(result) }
            }
        }
    }

    /// Copies the subtree at new node `root`, giving fresh variables to everything it binds
    /// (so no variable ends up bound twice). Atoms bound outside it are shared. Iterative.
    fn deep_copy(&mut self, root: NodeId) -> NodeId {
        // Pass 1: collect the subtree's nodes in post-order and the variables it binds.
        let mut order = Vec::new();
        let mut binders = Vec::new();
        let mut stack = vec![(root, false)];
        let mut ops = Vec::new();
        while let Some((id, expanded)) = stack.pop() {
            let kind = self.b.node(id).kind;
            if kind.is_atom() {
                continue;
            }
            if expanded {
                order.push(id);
                continue;
            }
            stack.push((id, true));
            ops.clear();
            match kind {
                ExprKind::Block { bindings, result } => {
                    for p in self.b.ids(bindings).chunks_exact(2) {
                        binders.push(p[0]);
                        ops.push(p[1]);
                    }
                    ops.push(result);
                }
                ExprKind::Func { idx } => {
                    let c = self.b.closure_at(idx);
                    binders.extend_from_slice(self.b.ids(c.params));
                    ops.push(c.body);
                }
                _ => builder_operands(&self.b, &kind, &mut ops),
            }
            stack.extend(ops.iter().rev().map(|&o| (o, false)));
        }
        // Pass 2: fresh binders, then copies in post-order with remapped operands.
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        for v in binders {
            let node = *self.b.node(v);
            self.b.set_span(self.b.span_at(v));
            let fresh = self.b.push_idx(node.kind, node.ty);
            map.insert(v, fresh);
        }
        let saved = self.b.span_at(root);
        for id in order {
            let node = *self.b.node(id);
            let m = |x: NodeId| map.get(&x).copied().unwrap_or(x);
            let kind = match node.kind {
                ExprKind::Call { op, attrs, args } => {
                    let args: Vec<NodeId> = self.b.ids(args).iter().map(|&a| m(a)).collect();
                    ExprKind::Call { op, attrs, args: self.b.push_ids(&args) }
                }
                ExprKind::Apply { callee, args } => {
                    let args: Vec<NodeId> = self.b.ids(args).iter().map(|&a| m(a)).collect();
                    ExprKind::Apply { callee: m(callee), args: self.b.push_ids(&args) }
                }
                ExprKind::Tuple { fields } => {
                    let fields: Vec<NodeId> = self.b.ids(fields).iter().map(|&a| m(a)).collect();
                    ExprKind::Tuple { fields: self.b.push_ids(&fields) }
                }
                ExprKind::Proj { tuple, index } => ExprKind::Proj { tuple: m(tuple), index },
                ExprKind::If { cond, then_, else_ } => ExprKind::If { cond: m(cond), then_: m(then_), else_: m(else_) },
                ExprKind::Func { idx } => {
                    let c = self.b.closure_at(idx).clone();
                    let params: Vec<NodeId> = self.b.ids(c.params).iter().map(|&a| m(a)).collect();
                    let params = self.b.push_ids(&params);
                    ExprKind::Func { idx: self.b.push_closure(Closure { params, body: m(c.body), ..c }) }
                }
                ExprKind::Block { bindings, result } => {
                    let b: Vec<NodeId> = self.b.ids(bindings).iter().map(|&a| m(a)).collect();
                    ExprKind::Block { bindings: self.b.push_ids(&b), result: m(result) }
                }
                atom => atom,
            };
            self.b.set_span(self.b.span_at(id));
            let copy = self.b.push_idx(kind, node.ty);
            map.insert(id, copy);
        }
        self.b.set_span(saved);
        map.get(&root).copied().unwrap_or(root)
    }
}

/// Operands of a non-binding kind in the builder's arena.
fn builder_operands(b: &FunctionBuilder, kind: &ExprKind, out: &mut Vec<NodeId>) {
    match *kind {
        ExprKind::Call { args, .. } => out.extend_from_slice(b.ids(args)),
        ExprKind::Apply { callee, args } => {
            out.push(callee);
            out.extend_from_slice(b.ids(args));
        }
        ExprKind::Tuple { fields } => out.extend_from_slice(b.ids(fields)),
        ExprKind::Proj { tuple, .. } => out.push(tuple),
        ExprKind::If { cond, then_, else_ } => out.extend_from_slice(&[cond, then_, else_]),
        _ => {}
    }
}

/// Rewrites `func` with `mutator` (see [`ExprMutator`]). Returns `func` itself (pointer-equal)
/// when no hook replaced a node or dropped a binding; otherwise a new function whose arena
/// holds the copies of the input's live nodes and whatever the hooks pushed. Nodes that a
/// rewrite made unreachable (e.g. the copy of a constant whose user was replaced) stay in the
/// arena as dead nodes, which are never printed, evaluated or compared.
pub fn mutate(func: &Arc<Function>, mutator: &mut impl ExprMutator) -> Arc<Function> {
    let old: &Function = func;
    let n = old.num_nodes();
    let live = old.live_mask();
    let mut cx = RewriteCx {
        old,
        b: old.builder_with_tables(),
        used: Vec::with_capacity(n),
        memo: vec![None; n],
        changed: false,
    };
    // The default copy of each variable, kept even when the hook substitutes its uses, so
    // parameter lists always hold variables.
    let mut var_copy: Vec<Option<NodeId>> = vec![None; n];
    // Lookups below are of operands of live nodes, which precede them and are therefore
    // already rewritten; the fallback only guards against unverified input.
    let get = |memo: &[Option<NodeId>], o: NodeId| memo.get(o.index()).copied().flatten().unwrap_or(o);
    for id in old.node_ids() {
        if !live[id.index()] {
            continue;
        }
        cx.b.set_span(old.span(id).unwrap_or_default());
        let ty = old.ty(id).cloned();
        let kind = *old.kind(id);
        let new = match kind {
            ExprKind::Var { .. } => {
                let copy = cx.b.push(kind, ty);
                var_copy[id.index()] = Some(copy);
                match mutator.rewrite(&mut cx, id, &kind) {
                    Some(n) => {
                        cx.changed = true;
                        n
                    }
                    None => copy,
                }
            }
            ExprKind::Global { .. } | ExprKind::Const { .. } => match mutator.rewrite(&mut cx, id, &kind) {
                Some(n) => {
                    cx.changed = true;
                    n
                }
                None => cx.b.push(kind, ty),
            },
            _ => {
                let new_kind = match kind {
                    ExprKind::Call { op, attrs, args } => {
                        let args: Vec<NodeId> = old.ids(args).iter().map(|&a| get(&cx.memo, a)).collect();
                        Ok(ExprKind::Call { op, attrs, args: cx.b.push_ids(&args) })
                    }
                    ExprKind::Apply { callee, args } => {
                        let args: Vec<NodeId> = old.ids(args).iter().map(|&a| get(&cx.memo, a)).collect();
                        Ok(ExprKind::Apply { callee: get(&cx.memo, callee), args: cx.b.push_ids(&args) })
                    }
                    ExprKind::Tuple { fields } => {
                        let fields: Vec<NodeId> = old.ids(fields).iter().map(|&a| get(&cx.memo, a)).collect();
                        Ok(ExprKind::Tuple { fields: cx.b.push_ids(&fields) })
                    }
                    ExprKind::Proj { tuple, index } => Ok(ExprKind::Proj { tuple: get(&cx.memo, tuple), index }),
                    ExprKind::If { cond, then_, else_ } => Ok(ExprKind::If {
                        cond: get(&cx.memo, cond),
                        then_: get(&cx.memo, then_),
                        else_: get(&cx.memo, else_),
                    }),
                    ExprKind::Func { idx } => {
                        let c = old.closure(idx);
                        let params: Vec<NodeId> = old.ids(c.params).iter().map(|&p| get(&var_copy, p)).collect();
                        let params = cx.b.push_ids(&params);
                        let body = get(&cx.memo, c.body);
                        let idx = cx.b.push_closure(Closure {
                            params,
                            body,
                            ret_ty: c.ret_ty.clone(),
                            attrs: c.attrs.clone(),
                        });
                        Ok(ExprKind::Func { idx })
                    }
                    ExprKind::Block { bindings, result } => {
                        let mut kept = Vec::new();
                        for (var, value) in old.bindings(bindings) {
                            let new_var = get(&var_copy, var);
                            let new_value = get(&cx.memo, value);
                            // A substituted variable has no uses left to bind for.
                            if get(&cx.memo, var) != new_var || !mutator.keep_binding(&cx, id, var, new_value) {
                                cx.changed = true;
                                continue;
                            }
                            kept.push(new_var);
                            kept.push(new_value);
                        }
                        let result = get(&cx.memo, result);
                        if kept.is_empty() {
                            // `{ e }` is `e`: the block becomes its result.
                            Err(result)
                        } else {
                            Ok(ExprKind::Block { bindings: cx.b.push_ids(&kept), result })
                        }
                    }
                    // Atoms were handled above.
                    atom => Ok(atom),
                };
                match new_kind {
                    Err(replacement) => replacement,
                    Ok(new_kind) => match mutator.rewrite(&mut cx, id, &new_kind) {
                        Some(n) => {
                            cx.changed = true;
                            n
                        }
                        None => cx.push(new_kind, ty),
                    },
                }
            }
        };
        cx.memo[id.index()] = Some(new);
    }
    if !cx.changed {
        return Arc::clone(func);
    }
    let params: Vec<NodeId> = old.params().iter().map(|&p| get(&var_copy, p)).collect();
    let body = get(&cx.memo, old.body());
    cx.b.set_span(Span::default());
    let body = cx.attach(body);
    Arc::new(cx.b.finish(&params, body, old.ret_ty().cloned(), old.attrs().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{structural_eq, verify_function, Attrs, Constant, DType, FunctionBuilder, Tensor, Type};
    use crate::op::{self, KernelCtx};
    use rand::SeedableRng;

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
            let mut ctx = KernelCtx { rng: rand_chacha::ChaCha8Rng::seed_from_u64(0) };
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
