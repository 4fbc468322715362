//! TVM's expression mutator (`ExprMutator` + `mutate`), the public API for rewrites written
//! outside this workspace, as a driver of the layer's [`Rewriter`].
//!
//! The [`Rewriter`] does the copying: its memo, its compact mode (a fresh arena sharing the
//! input's names, each used constant copied once), its block copy that skips dropped bindings,
//! its binder slots for substituted variables, and its finish. What this file adds is what the
//! TVM API promises beyond the passes' needs: a hook on every live node, atoms included, that
//! sees the node's kind with its operands already rewritten *before* the node is pushed; a
//! hook on each binding; and the tree shape of the output whatever a hook returns (a compound
//! node used a second time is deep-copied with fresh binders, `RewriteCx::attach`).

use std::collections::HashMap;
use std::sync::Arc;

use super::{Propagate, Rewriter};
use crate::ir::{
    Attrs, AttrsIdx, Closure, ClosureIdx, Constant, ExprKind, Function, FunctionBuilder, IdRange, NodeId, OpId, Span,
    Type,
};

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
    /// The copy: the input, the new function's builder and the old → new memo.
    rw: Rewriter<'a>,
    /// Per new node: already an operand of some pushed node (or the body).
    used: Vec<bool>,
}

impl<'a> RewriteCx<'a> {
    /// The input function.
    pub fn old(&self) -> &'a Function {
        self.rw.func
    }

    /// The new id of old node `old`, once it has been rewritten.
    pub fn mapped(&self, old: NodeId) -> Option<NodeId> {
        self.rw.mapped(old)
    }

    /// The kind of new node `id`.
    pub fn kind(&self, id: NodeId) -> &ExprKind {
        &self.rw.b.node(id).kind
    }

    /// The known type of new node `id`.
    pub fn ty(&self, id: NodeId) -> Option<&Type> {
        self.rw.b.ty(id)
    }

    /// Sets the type of new node `id`.
    pub fn set_ty(&mut self, id: NodeId, ty: Option<Type>) {
        self.rw.b.set_ty(id, ty);
    }

    /// The ids of a range of the new arena (arguments, fields, bindings of a `kind`).
    pub fn ids(&self, range: IdRange) -> &[NodeId] {
        self.rw.b.ids(range)
    }

    /// The constant of new node `id`, if it is a constant.
    pub fn constant(&self, id: NodeId) -> Option<&Arc<Constant>> {
        match *self.kind(id) {
            ExprKind::Const { idx } => Some(self.rw.b.constant_at(idx)),
            _ => None,
        }
    }

    /// The attributes of a call's `attrs` index.
    pub fn call_attrs(&self, idx: AttrsIdx) -> &Attrs {
        self.rw.b.call_attrs_at(idx)
    }

    /// The closure of a `Func` kind's index.
    pub fn closure(&self, idx: ClosureIdx) -> &Closure {
        self.rw.b.closure_at(idx)
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
        self.rw.b.var(name, ty)
    }

    /// Pushes a global reference.
    pub fn global(&mut self, name: &str) -> NodeId {
        self.rw.b.global(name)
    }

    /// Pushes a constant (typed).
    pub fn constant_node(&mut self, c: impl Into<Arc<Constant>>) -> NodeId {
        self.rw.b.constant(c)
    }

    /// Pushes an operator call.
    pub fn call(&mut self, op: OpId, args: &[NodeId], attrs: Attrs) -> NodeId {
        let attrs = self.rw.b.attrs(attrs);
        let args = self.attach_all(args);
        let args = self.rw.b.push_ids(&args);
        self.rw.b.push(ExprKind::Call { op, attrs, args }, None)
    }

    /// Pushes an application of `callee` (a global or a function value) to `args`.
    pub fn apply(&mut self, callee: NodeId, args: &[NodeId]) -> NodeId {
        let callee = self.attach(callee);
        let args = self.attach_all(args);
        let args = self.rw.b.push_ids(&args);
        self.rw.b.push(ExprKind::Apply { callee, args }, None)
    }

    /// Pushes a tuple.
    pub fn tuple(&mut self, fields: &[NodeId]) -> NodeId {
        let fields = self.attach_all(fields);
        let fields = self.rw.b.push_ids(&fields);
        self.rw.b.push(ExprKind::Tuple { fields }, None)
    }

    /// Pushes a projection.
    pub fn proj(&mut self, tuple: NodeId, index: u32) -> NodeId {
        let tuple = self.attach(tuple);
        self.rw.b.push(ExprKind::Proj { tuple, index }, None)
    }

    /// Pushes any node whose operands are new ids: operands already used elsewhere are
    /// deep-copied so that the arena stays a tree.
    pub fn push(&mut self, kind: ExprKind, ty: Option<Type>) -> NodeId {
        let kind = self.attach_kind(kind);
        self.rw.b.push(kind, ty)
    }

    fn attach_all(&mut self, ids: &[NodeId]) -> Vec<NodeId> {
        ids.iter().map(|&i| self.attach(i)).collect()
    }

    /// Marks `id` as used by a new user; a compound node used before is copied instead.
    fn attach(&mut self, id: NodeId) -> NodeId {
        if self.used.len() < self.rw.b.num_nodes() {
            self.used.resize(self.rw.b.num_nodes(), false);
        }
        if self.rw.b.node(id).kind.is_atom() {
            return id;
        }
        if std::mem::replace(&mut self.used[id.index()], true) {
            let copy = self.deep_copy(id);
            self.used.resize(self.rw.b.num_nodes(), false);
            self.used[copy.index()] = true;
            copy
        } else {
            id
        }
    }

    /// `kind` with each operand attached; ranges are re-pushed only when an operand changed.
    fn attach_kind(&mut self, kind: ExprKind) -> ExprKind {
        let range = |cx: &mut Self, r: IdRange, stride: usize| -> IdRange {
            let old: Vec<NodeId> = cx.rw.b.ids(r).to_vec();
            // In a binding range only the values (odd slots) are uses; variables are binders.
            let new: Vec<NodeId> =
                old.iter().enumerate().map(|(i, &o)| if i % stride == stride - 1 { cx.attach(o) } else { o }).collect();
            if new == old {
                r
            } else {
                cx.rw.b.push_ids(&new)
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
                let c = self.rw.b.closure_at(idx).clone();
                let body = self.attach(c.body);
                if body == c.body {
                    kind
                } else {
                    ExprKind::Func { idx: self.rw.b.push_closure(Closure { body, ..c }) }
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
            let kind = self.rw.b.node(id).kind;
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
                    for p in self.rw.b.ids(bindings).chunks_exact(2) {
                        binders.push(p[0]);
                        ops.push(p[1]);
                    }
                    ops.push(result);
                }
                ExprKind::Func { idx } => {
                    let c = self.rw.b.closure_at(idx);
                    binders.extend_from_slice(self.rw.b.ids(c.params));
                    ops.push(c.body);
                }
                _ => builder_operands(&self.rw.b, &kind, &mut ops),
            }
            stack.extend(ops.iter().rev().map(|&o| (o, false)));
        }
        // Pass 2: fresh binders, then copies in post-order with remapped operands.
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        for v in binders {
            let node = *self.rw.b.node(v);
            self.rw.b.set_span(self.rw.b.span_at(v));
            let fresh = self.rw.b.push_idx(node.kind, node.ty);
            map.insert(v, fresh);
        }
        let saved = self.rw.b.span_at(root);
        for id in order {
            let node = *self.rw.b.node(id);
            let m = |x: NodeId| map.get(&x).copied().unwrap_or(x);
            let kind = match node.kind {
                ExprKind::Call { op, attrs, args } => {
                    let args: Vec<NodeId> = self.rw.b.ids(args).iter().map(|&a| m(a)).collect();
                    ExprKind::Call { op, attrs, args: self.rw.b.push_ids(&args) }
                }
                ExprKind::Apply { callee, args } => {
                    let args: Vec<NodeId> = self.rw.b.ids(args).iter().map(|&a| m(a)).collect();
                    ExprKind::Apply { callee: m(callee), args: self.rw.b.push_ids(&args) }
                }
                ExprKind::Tuple { fields } => {
                    let fields: Vec<NodeId> = self.rw.b.ids(fields).iter().map(|&a| m(a)).collect();
                    ExprKind::Tuple { fields: self.rw.b.push_ids(&fields) }
                }
                ExprKind::Proj { tuple, index } => ExprKind::Proj { tuple: m(tuple), index },
                ExprKind::If { cond, then_, else_ } => ExprKind::If { cond: m(cond), then_: m(then_), else_: m(else_) },
                ExprKind::Func { idx } => {
                    let c = self.rw.b.closure_at(idx).clone();
                    let params: Vec<NodeId> = self.rw.b.ids(c.params).iter().map(|&a| m(a)).collect();
                    let params = self.rw.b.push_ids(&params);
                    ExprKind::Func { idx: self.rw.b.push_closure(Closure { params, body: m(c.body), ..c }) }
                }
                ExprKind::Block { bindings, result } => {
                    let b: Vec<NodeId> = self.rw.b.ids(bindings).iter().map(|&a| m(a)).collect();
                    ExprKind::Block { bindings: self.rw.b.push_ids(&b), result: m(result) }
                }
                atom => atom,
            };
            self.rw.b.set_span(self.rw.b.span_at(id));
            let copy = self.rw.b.push_idx(kind, node.ty);
            map.insert(id, copy);
        }
        self.rw.b.set_span(saved);
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
    let mut cx = RewriteCx {
        rw: Rewriter::new(old, Propagate::Nothing).compacting(),
        used: Vec::with_capacity(old.num_nodes()),
    };
    cx.rw.start();
    // Every node reachable from the parameters and the body gets its hook, unused parameters
    // included (the rewriter's own mask leaves binder slots to be copied on demand).
    let live = old.live_mask();
    for id in old.node_ids() {
        if !live[id.index()] {
            continue;
        }
        let kind = *old.kind(id);
        let new = if kind.is_atom() {
            // Atoms are copied before their hook, so the hook sees the copy's kind; a
            // substituted variable keeps the copy for binder slots.
            let copy = cx.rw.map(id);
            let new_kind = *cx.kind(copy);
            cx.rw.b.set_span(old.span(id).unwrap_or_default());
            match mutator.rewrite(&mut cx, id, &new_kind) {
                Some(n) if matches!(kind, ExprKind::Var { .. }) => {
                    cx.rw.substitute(id, n);
                    continue;
                }
                Some(n) => {
                    cx.rw.set_mapped(id, n, true);
                    continue;
                }
                None => copy,
            }
        } else {
            if let ExprKind::Block { bindings, .. } = kind {
                for (var, value) in old.bindings(bindings) {
                    if cx.rw.is_dropped(var) {
                        continue;
                    }
                    let new_value = cx.rw.map(value);
                    if !mutator.keep_binding(&cx, id, var, new_value) {
                        cx.rw.drop_binding(var);
                    }
                }
            }
            match cx.rw.mapped_kind(id) {
                // A block left without bindings is its result.
                Err(result) => result,
                Ok(new_kind) => {
                    cx.rw.b.set_span(old.span(id).unwrap_or_default());
                    match mutator.rewrite(&mut cx, id, &new_kind) {
                        Some(n) => {
                            cx.rw.set_mapped(id, n, true);
                            continue;
                        }
                        None => {
                            let new_kind = cx.attach_kind(new_kind);
                            cx.rw.push_mapped(id, new_kind)
                        }
                    }
                }
            }
        };
        cx.rw.set_mapped(id, new, false);
    }
    let params = cx.rw.map_params();
    let body = cx.rw.map(old.body());
    cx.rw.b.set_span(Span::default());
    let body = cx.attach(body);
    let RewriteCx { rw, .. } = cx;
    match rw.finish(&params, body) {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}
