//! The evaluation-order copier: a subtree of one function copied into a builder, with hooks.
//!
//! [`Copier`] walks an expression of a source function depth-first in evaluation order (the
//! order of [`Function::for_each_operand`]) with the IR's one walker ([`Walker`], an explicit
//! stack), so any nesting depth works, and pushes the copy into a [`FunctionBuilder`] that may belong to a different
//! function (Inline copies a callee into its caller, LambdaLift a closure into a new global).
//! Atoms are copied on first use; a node whose memo entry is already set is not descended
//! into (this is how a pass substitutes one node for another before the copy).
//!
//! Hooks ([`CopyHooks`]) see every compound node twice: before its operands are copied
//! (`enter`, which may return a replacement and skip the subtree) and after (`exit`, which may
//! build something else from the copied operands). `enter` also sees each atom the first time
//! the walk meets it (for a binding variable: its binding slot, right after its value). Passes that need no hook use [`NoHooks`].
//!
//! Unlike [`super::Rewriter`], this copier visits nodes in evaluation order rather
//! than arena order, so a pass may rely on a binding's value having been copied before any
//! use of its variable, whatever the arena layout.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::NONE;
use crate::ir::{Enter, ExprKind, Function, FunctionBuilder, NodeId, WalkHooks, Walker};

/// Hooks called by [`Copier::copy`] on compound nodes.
pub trait CopyHooks<'s> {
    /// Called before the operands of compound node `old` are copied (or the first time the
    /// walk meets atom `old`); `Some(new)` replaces the whole subtree.
    fn enter(&mut self, _cp: &mut Copier<'s>, _b: &mut FunctionBuilder, _old: NodeId) -> Option<NodeId> {
        None
    }

    /// Called once the operands of `old` are copied; `Some(new)` replaces the default copy.
    fn exit(&mut self, _cp: &mut Copier<'s>, _b: &mut FunctionBuilder, _old: NodeId) -> Option<NodeId> {
        None
    }
}

/// No hooks: a plain copy.
pub struct NoHooks;

impl CopyHooks<'_> for NoHooks {}

/// Copies nodes of `src` into a builder; see the module docs.
pub struct Copier<'s> {
    /// The function copied from.
    pub src: &'s Function,
    /// Old id → new id (`NONE` when not copied yet).
    pub memo: Vec<NodeId>,
    /// Prefix put before the names of copied variables (Inline uses the callee's name).
    pub var_prefix: String,
    /// With [`Copier::track_writes`]: every old id whose memo entry was set, so that
    /// [`Copier::reset_written`] can clear them in time proportional to the copy (LambdaLift
    /// copies many small bodies out of one large function with one copier).
    written: Option<Vec<NodeId>>,
    /// The walker [`Copier::copy`] reuses.
    walker: Walker,
}

/// The longest name [`Copier::fresh_var`] makes by prefixing (bytes).
pub const MAX_PREFIXED_NAME: usize = 32;

impl<'s> Copier<'s> {
    /// A copier from `src` with an empty memo.
    pub fn new(src: &'s Function) -> Copier<'s> {
        Copier {
            src,
            memo: vec![NONE; src.num_nodes()],
            var_prefix: String::new(),
            written: None,
            walker: Walker::new(),
        }
    }

    /// Records from now on which memo entries are set (see [`Copier::reset_written`]).
    pub fn track_writes(&mut self) {
        self.written.get_or_insert_with(Vec::new);
    }

    /// Sets the memo entry of `old`, recording it when tracking.
    #[inline]
    pub fn set_memo(&mut self, old: NodeId, new: NodeId) {
        self.memo[old.index()] = new;
        if let Some(w) = &mut self.written {
            w.push(old);
        }
    }

    /// Clears the memo entries set since tracking started (or since the last reset), so the
    /// copier can copy into a new builder.
    pub fn reset_written(&mut self) {
        if let Some(w) = &mut self.written {
            for old in w.drain(..) {
                self.memo[old.index()] = NONE;
            }
        }
    }

    /// The new id of old node `old`; an atom not copied yet is copied now. A compound node
    /// not copied yet (only possible for malformed input) is copied with [`NoHooks`].
    #[inline]
    pub fn map(&mut self, b: &mut FunctionBuilder, old: NodeId) -> NodeId {
        let m = self.memo[old.index()];
        if m != NONE {
            return m;
        }
        if self.src.kind(old).is_atom() {
            return self.copy_atom(b, old);
        }
        self.copy(b, old, &mut NoHooks)
    }

    /// A new variable with the name (plus prefix) and annotation of old variable `old`,
    /// recorded in the memo.
    pub fn fresh_var(&mut self, b: &mut FunctionBuilder, old: NodeId) -> NodeId {
        let name = self.src.name_of(old).unwrap_or("v");
        // A prefixed name longer than the limit keeps the variable's own name, so names do not
        // grow with every level of inlining (the printer numbers repeats).
        let prefixed = !self.var_prefix.is_empty() && self.var_prefix.len() + name.len() <= MAX_PREFIXED_NAME;
        let name = if prefixed { format!("{}{name}", self.var_prefix) } else { name.to_string() };
        let new = b.var(&name, self.src.ty(old).cloned());
        self.set_memo(old, new);
        new
    }

    fn copy_atom(&mut self, b: &mut FunctionBuilder, old: NodeId) -> NodeId {
        let src = self.src;
        let new = match *src.kind(old) {
            ExprKind::Var { .. } => return self.fresh_var(b, old),
            ExprKind::Global { name } => {
                let g = b.global(src.sym(name));
                b.set_ty(g, src.ty(old).cloned());
                g
            }
            ExprKind::Const { idx } => b.constant(Arc::clone(src.constant(idx))),
            _ => unreachable!("copy_atom on a compound node"),
        };
        self.set_memo(old, new);
        new
    }

    /// Copies the subtree of `root` (operands in evaluation order before their users) and
    /// returns the new id of `root`. The walk is the IR's one walker ([`Walker`]) with
    /// [`CopyWalk`] as its hooks.
    pub fn copy(&mut self, b: &mut FunctionBuilder, root: NodeId, hooks: &mut dyn CopyHooks<'s>) -> NodeId {
        let src = self.src;
        // A hook may copy again (`map` of a compound node not copied yet): that copy takes a
        // fresh walker, this one keeps its stack.
        let mut walker = std::mem::take(&mut self.walker);
        let mut walk = CopyWalk { cp: self, b, hooks };
        let ControlFlow::Continue(()) = walker.walk(src, root, &mut walk);
        self.walker = walker;
        self.map(b, root)
    }

    /// The walk meets atom `old` (an operand, a binding's variable or a closure's parameter):
    /// copies it unless it has a copy already.
    fn meet_atom(&mut self, b: &mut FunctionBuilder, old: NodeId, hooks: &mut dyn CopyHooks<'s>) {
        if self.memo[old.index()] != NONE {
            return;
        }
        match hooks.enter(self, b, old) {
            Some(new) => self.set_memo(old, new),
            None => {
                self.copy_atom(b, old);
            }
        }
    }

    /// Builds the plain copy of compound node `old` from its (already copied) operands, with
    /// its type.
    pub fn build_default(&mut self, b: &mut FunctionBuilder, old: NodeId) -> NodeId {
        let src = self.src;
        let new = match *src.kind(old) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => return self.map(b, old),
            ExprKind::Call { op, attrs, args } => {
                let args: Vec<NodeId> = src.ids(args).iter().map(|&a| self.map(b, a)).collect();
                b.call(op, &args, src.call_attrs(attrs).clone())
            }
            ExprKind::Apply { callee, args } => {
                let callee = self.map(b, callee);
                let args: Vec<NodeId> = src.ids(args).iter().map(|&a| self.map(b, a)).collect();
                b.apply(callee, &args)
            }
            ExprKind::Tuple { fields } => {
                let fields: Vec<NodeId> = src.ids(fields).iter().map(|&a| self.map(b, a)).collect();
                b.tuple(&fields)
            }
            ExprKind::Proj { tuple, index } => {
                let t = self.map(b, tuple);
                b.proj(t, index)
            }
            ExprKind::If { cond, then_, else_ } => {
                let (c, t, e) = (self.map(b, cond), self.map(b, then_), self.map(b, else_));
                b.if_(c, t, e)
            }
            ExprKind::Func { idx } => {
                let c = src.closure(idx);
                let params: Vec<NodeId> = src.ids(c.params).iter().map(|&p| self.map(b, p)).collect();
                let body = self.map(b, c.body);
                b.closure(&params, body, c.ret_ty.clone(), c.attrs.clone())
            }
            ExprKind::Block { bindings, result } => {
                let pairs: Vec<(NodeId, NodeId)> =
                    src.bindings(bindings).map(|(var, value)| (self.map(b, var), self.map(b, value))).collect();
                let r = self.map(b, result);
                return b.block(&pairs, r);
            }
        };
        if let Some(ty) = src.ty(old) {
            b.set_ty_ref(new, Some(ty));
        }
        new
    }
}

/// [`Copier::copy`]'s hooks on the [`Walker`]: atoms are copied when met, a compound node
/// with a copy already (a substitution) or replaced by `enter` is skipped, and the others are
/// built at their exit from their copied operands.
struct CopyWalk<'c, 's, 'h> {
    cp: &'c mut Copier<'s>,
    b: &'c mut FunctionBuilder,
    hooks: &'h mut dyn CopyHooks<'s>,
}

impl WalkHooks for CopyWalk<'_, '_, '_> {
    type Break = Infallible;

    fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        self.cp.meet_atom(self.b, id, self.hooks);
        ControlFlow::Continue(())
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        if self.cp.memo[id.index()] != NONE {
            return ControlFlow::Continue(Enter::Skip);
        }
        if let Some(new) = self.hooks.enter(self.cp, self.b, id) {
            self.cp.set_memo(id, new);
            return ControlFlow::Continue(Enter::Skip);
        }
        // A closure's parameters come before its body (the walk does not report binders).
        if let ExprKind::Func { idx } = *kind {
            let src = self.cp.src;
            for &p in src.ids(src.closure(idx).params) {
                self.cp.meet_atom(self.b, p, self.hooks);
            }
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn exit(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        if self.cp.memo[id.index()] == NONE {
            let new = match self.hooks.exit(self.cp, self.b, id) {
                Some(new) => new,
                None => self.cp.build_default(self.b, id),
            };
            self.cp.set_memo(id, new);
        }
        ControlFlow::Continue(())
    }

    fn bind(&mut self, var: NodeId, _: NodeId) -> ControlFlow<Infallible> {
        // The binding slot: right after its value, as in evaluation order.
        self.cp.meet_atom(self.b, var, self.hooks);
        ControlFlow::Continue(())
    }
}

/// Copies every parameter of `src` into the copier (so that parameters come first in the new
/// arena) and returns their new ids.
pub fn copy_params(cp: &mut Copier<'_>, b: &mut FunctionBuilder) -> Vec<NodeId> {
    let params: Vec<NodeId> = cp.src.params().to_vec();
    params.iter().map(|&p| cp.fresh_var(b, p)).collect()
}

/// Copies the whole function `src` with `hooks`: parameters, then the body.
pub fn copy_function<'s>(src: &'s Function, hooks: &mut dyn CopyHooks<'s>) -> Function {
    let mut b = FunctionBuilder::new();
    let mut cp = Copier::new(src);
    let params = copy_params(&mut cp, &mut b);
    let body = cp.copy(&mut b, src.body(), hooks);
    b.finish(&params, body, src.ret_ty().cloned(), src.attrs().clone())
}
