//! The arena-order copying rewriter.
//!
//! [`Rewriter`] copies the live nodes of a function, in arena (post-) order, into a new
//! [`FunctionBuilder`], keeping an old→new `Vec` memo. It works in one of two modes, chosen
//! from the input's garbage: *compact* copies every live node into a fresh arena that shares
//! the input's symbol table ([`Function::builder_sharing_names`], so no name is interned
//! again) and copies each used constant once; *append* starts from the input's own tables
//! ([`Function::to_builder`]) and pushes only the nodes that change (and their users up to the
//! enclosing binding), reusing every unchanged node by its id. Append mode avoids re-pushing
//! most nodes, at the price of leaving the replaced nodes behind as dead arena entries; once
//! dead nodes or dead extra entries are more than twice the live ones, the next rewrite
//! compacts. One backward sweep finds the live nodes and chooses the mode.
//!
//! A pass may, before the copy, drop bindings and alias variables to other atoms; during the
//! copy it may replace any compound node (its operands are already copied and can be
//! inspected through [`Rewriter::map`]). Atoms (variables, globals, constants) are copied
//! lazily, on first use, so atoms that become unused are never copied. Variables bound to
//! atoms may be propagated into their uses (see [`Propagate`]); such a binding is then
//! removed.
//!
//! The copy is a loop over ids, never a recursion, so any expression depth works. Nodes of a
//! subtree that a pass discards after it was copied (the untaken branch of a folded `if`)
//! stay in the new arena as dead nodes, which are never printed, evaluated or compared.

use std::sync::Arc;

use super::{bound_values, NONE};
use crate::ir::{Closure, ConstIdx, Constant, ExprKind, Function, FunctionBuilder, NodeId, Sym};

/// Which let-bound atoms the rewriter substitutes into uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Propagate {
    /// None.
    Nothing,
    /// Variables whose (rewritten) value is a constant.
    Consts,
    /// Variables whose (rewritten) value is any atom: a variable, global or constant.
    Atoms,
}

/// Copies a function's live nodes into a new builder; see the module docs.
#[derive(Debug)]
pub struct Rewriter<'f> {
    /// The function copied from.
    pub func: &'f Function,
    /// The new function: in append mode the input's arena plus what changed, in compact mode
    /// a fresh arena.
    pub b: FunctionBuilder,
    memo: Vec<NodeId>,
    /// Compact mode: old constant index → new one (`u32::MAX` when not copied yet), so that
    /// a constant used many times is copied into the new table once.
    const_memo: Vec<u32>,
    /// Old binding variable → old value (NONE when not bound, or bound twice).
    bound: Vec<NodeId>,
    /// Old variable → old atom it stands for (set by [`Rewriter::alias`]).
    alias: Vec<NodeId>,
    /// Old variable → its binding is removed.
    dropped: Vec<bool>,
    propagate: Propagate,
    /// Append mode (see the module docs): unchanged nodes keep their ids.
    append: bool,
    /// Set when the input turns out to be malformed; the result is then discarded.
    failed: bool,
    placeholder: NodeId,
    changed: bool,
    scratch: Vec<NodeId>,
    chain: Vec<NodeId>,
    /// Compact mode whatever the garbage ([`Rewriter::compacting`]).
    force_compact: bool,
    /// Old variable → the plain copy of it that binder slots (parameters) keep when its uses
    /// were substituted ([`Rewriter::substitute`]); empty until then.
    binder: Vec<NodeId>,
}

impl<'f> Rewriter<'f> {
    /// A rewriter of `func` that propagates the let-bound atoms `propagate` names. The mode is
    /// chosen when [`Rewriter::run`] starts.
    pub fn new(func: &'f Function, propagate: Propagate) -> Rewriter<'f> {
        let n = func.num_nodes();
        let mut rw = Rewriter {
            func,
            b: FunctionBuilder::new(),
            memo: vec![NONE; n],
            const_memo: Vec::new(),
            bound: Vec::new(),
            alias: Vec::new(),
            dropped: vec![false; n],
            propagate,
            append: false,
            failed: false,
            placeholder: NONE,
            changed: false,
            scratch: Vec::with_capacity(8),
            chain: Vec::new(),
            force_compact: false,
            binder: Vec::new(),
        };
        if propagate != Propagate::Nothing {
            rw.bound = bound_values(func);
        }
        rw
    }

    /// Removes the binding of old variable `var` (its value is not copied).
    #[inline]
    pub fn drop_binding(&mut self, var: NodeId) {
        self.dropped[var.index()] = true;
        self.changed = true;
    }

    /// Whether the binding of old variable `var` is removed.
    #[inline]
    pub fn is_dropped(&self, var: NodeId) -> bool {
        self.dropped[var.index()]
    }

    /// Removes the binding of `var` and makes its uses refer to old atom `target` instead.
    pub fn alias(&mut self, var: NodeId, target: NodeId) {
        if self.alias.is_empty() {
            self.alias = vec![NONE; self.func.num_nodes()];
        }
        self.alias[var.index()] = target;
        self.drop_binding(var);
    }

    /// This rewriter in compact mode whatever the input's garbage: the result is a fresh
    /// arena holding only the live nodes' copies (and whatever the pass pushed).
    pub fn compacting(mut self) -> Rewriter<'f> {
        self.force_compact = true;
        self
    }

    /// Makes every use of old variable `var` read new node `new` and removes its binding;
    /// parameter lists keep a plain copy of the variable. Unlike [`Rewriter::alias`], `new`
    /// is a node of the new function (any kind), and `var` must not have been used yet.
    pub fn substitute(&mut self, var: NodeId, new: NodeId) {
        let copy = self.map(var);
        if self.binder.is_empty() {
            self.binder = vec![NONE; self.func.num_nodes()];
        }
        self.binder[var.index()] = copy;
        self.memo[var.index()] = new;
        self.drop_binding(var);
    }

    /// The new node of old node `old`, once it has been copied or replaced.
    #[inline]
    pub fn mapped(&self, old: NodeId) -> Option<NodeId> {
        self.memo.get(old.index()).copied().filter(|&m| m != NONE)
    }

    /// Records `new` as the copy of old node `old`; with `changed`, counts it as a change.
    #[inline]
    pub fn set_mapped(&mut self, old: NodeId, new: NodeId, changed: bool) {
        self.memo[old.index()] = new;
        self.changed |= changed;
    }

    /// The new node for old variable `var` in a binder slot (a parameter): a substituted
    /// variable keeps its plain copy there.
    #[inline]
    fn map_binder(&mut self, var: NodeId) -> NodeId {
        match self.binder.get(var.index()) {
            Some(&copy) if copy != NONE => copy,
            _ => self.map(var),
        }
    }

    /// The constant of new node `new`, if it is a constant.
    #[inline]
    pub fn new_const(&self, new: NodeId) -> Option<&Arc<Constant>> {
        match self.b.node(new).kind {
            ExprKind::Const { idx } => Some(self.b.constant_at(idx)),
            _ => None,
        }
    }

    /// Pushes a constant into the new function.
    #[inline]
    pub fn constant(&mut self, c: Arc<Constant>) -> NodeId {
        self.b.constant(c)
    }

    /// Copies old constant node `old` (compact mode), sharing one table entry per old entry.
    fn copy_const(&mut self, old: NodeId, idx: ConstIdx) -> NodeId {
        let ty = self.func.ty(old).cloned();
        self.set_span(old);
        let i = idx.0 as usize;
        if i >= self.const_memo.len() {
            self.const_memo.resize(i + 1, u32::MAX);
        }
        if self.const_memo[i] != u32::MAX {
            return self.b.push(ExprKind::Const { idx: ConstIdx(self.const_memo[i]) }, ty);
        }
        let c = Arc::clone(self.func.constant(idx));
        let ty = ty.unwrap_or_else(|| c.ty());
        let new = self.b.constant_typed(c, ty);
        if let ExprKind::Const { idx: new_idx } = self.b.node(new).kind {
            self.const_memo[i] = new_idx.0;
        }
        new
    }

    /// The new node for old node `old`. Atoms are copied (or substituted) on first use;
    /// compound nodes must have been visited already (they have smaller ids than their users),
    /// otherwise the result is a placeholder that [`Rewriter::run`] reports as failure.
    #[inline]
    pub fn map(&mut self, old: NodeId) -> NodeId {
        let m = self.memo[old.index()];
        if m != NONE {
            return m;
        }
        self.map_slow(old)
    }

    /// [`Rewriter::map`] for a node not in the memo yet.
    #[inline(never)]
    fn map_slow(&mut self, old: NodeId) -> NodeId {
        if self.failed {
            return self.placeholder();
        }
        // Follow a chain of substituted variables iteratively: `let b = a; let c = b; …`.
        self.chain.clear();
        let mut cur = old;
        let resolved = loop {
            let m = self.memo[cur.index()];
            if m != NONE {
                break m;
            }
            if self.chain.len() > self.memo.len() {
                // A cycle of let-bound variables (`let a = b; let b = a;`): malformed input.
                self.failed = true;
                break NONE;
            }
            match *self.func.kind(cur) {
                ExprKind::Var { name } => match self.forward(cur) {
                    Forward::To(next) => {
                        self.chain.push(cur);
                        cur = next;
                    }
                    Forward::Resolved(new) => {
                        self.chain.push(cur);
                        break new;
                    }
                    Forward::Keep => break self.copy_var(cur, name),
                },
                ExprKind::Global { .. } | ExprKind::Const { .. } if self.append => {
                    self.memo[cur.index()] = cur;
                    break cur;
                }
                ExprKind::Global { name } => {
                    self.set_span(cur);
                    let new = self.b.push_ty_ref(ExprKind::Global { name }, self.func.ty(cur));
                    self.memo[cur.index()] = new;
                    break new;
                }
                ExprKind::Const { idx } => {
                    let new = self.copy_const(cur, idx);
                    self.memo[cur.index()] = new;
                    break new;
                }
                // A compound operand not visited yet: only possible in a malformed arena.
                _ => {
                    self.failed = true;
                    break NONE;
                }
            }
        };
        let resolved = if resolved == NONE { self.placeholder() } else { resolved };
        if self.propagate == Propagate::Consts && !self.chain.is_empty() && self.new_const(resolved).is_none() {
            // Only constants propagate in this mode: each variable of the chain stays.
            let chain = std::mem::take(&mut self.chain);
            for &v in &chain {
                if let ExprKind::Var { name } = *self.func.kind(v) {
                    self.copy_var(v, name);
                }
            }
            self.chain = chain;
            return self.memo[old.index()];
        }
        for i in 0..self.chain.len() {
            let v = self.chain[i];
            self.memo[v.index()] = resolved;
            self.dropped[v.index()] = true;
            self.changed = true;
        }
        resolved
    }

    /// A valid node to hand out once the input is known to be malformed, so the builder never
    /// sees a dangling operand; the result of the rewrite is discarded anyway.
    fn placeholder(&mut self) -> NodeId {
        if self.placeholder == NONE {
            let name = self.b.sym("");
            self.placeholder = self.b.push(ExprKind::Var { name }, None);
        }
        self.placeholder
    }

    fn copy_var(&mut self, var: NodeId, name: Sym) -> NodeId {
        if self.append {
            self.memo[var.index()] = var;
            return var;
        }
        self.set_span(var);
        let new = self.b.push_ty_ref(ExprKind::Var { name }, self.func.ty(var));
        self.memo[var.index()] = new;
        new
    }

    fn forward(&self, var: NodeId) -> Forward {
        if let Some(&t) = self.alias.get(var.index()) {
            if t != NONE {
                return Forward::To(t);
            }
        }
        if self.propagate == Propagate::Nothing || self.dropped[var.index()] {
            return Forward::Keep;
        }
        let value = self.bound[var.index()];
        if value == NONE {
            return Forward::Keep;
        }
        let is_atom = self.func.kind(value).is_atom();
        if is_atom && self.memo[value.index()] == NONE {
            return match (self.propagate, self.func.kind(value)) {
                (Propagate::Atoms, _) | (Propagate::Consts, ExprKind::Var { .. } | ExprKind::Const { .. }) => {
                    Forward::To(value)
                }
                _ => Forward::Keep,
            };
        }
        let new = self.memo[value.index()];
        if new == NONE {
            return Forward::Keep;
        }
        let ok = match self.b.node(new).kind {
            ExprKind::Const { .. } => true,
            ExprKind::Var { .. } | ExprKind::Global { .. } => self.propagate == Propagate::Atoms,
            _ => false,
        };
        if ok {
            Forward::Resolved(new)
        } else {
            Forward::Keep
        }
    }

    fn set_span(&mut self, old: NodeId) {
        self.b.set_span(self.func.span(old).unwrap_or_default());
    }

    /// Copies compound node `old` with its operands mapped, keeping its type and span.
    pub fn copy(&mut self, old: NodeId) -> NodeId {
        if self.append && self.unchanged(old) {
            self.memo[old.index()] = old;
            return old;
        }
        let new = match self.mapped_kind(old) {
            Ok(kind) => self.push_mapped(old, kind),
            Err(new) => new,
        };
        self.memo[old.index()] = new;
        new
    }

    /// The kind of compound node `old` with its operands mapped (their ranges, call attributes
    /// and closure pushed to the new function, the node itself not), for a caller that looks
    /// at it before deciding what to push ([`super::mutate`]); [`Rewriter::push_mapped`]
    /// pushes it. `Err(new)` when the copy is an existing node: an atom's copy, or the result
    /// of a block whose bindings are all dropped.
    pub fn mapped_kind(&mut self, old: NodeId) -> Result<ExprKind, NodeId> {
        let func = self.func;
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        let kind = match *func.kind(old) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {
                self.scratch = ids;
                return Err(self.map(old));
            }
            ExprKind::Call { op, attrs, args } => {
                for &a in func.ids(args) {
                    ids.push(self.map(a));
                }
                let attrs = self.b.attrs(func.call_attrs(attrs).clone());
                ExprKind::Call { op, attrs, args: self.b.push_ids(&ids) }
            }
            ExprKind::Apply { callee, args } => {
                let callee = self.map(callee);
                for &a in func.ids(args) {
                    ids.push(self.map(a));
                }
                ExprKind::Apply { callee, args: self.b.push_ids(&ids) }
            }
            ExprKind::Tuple { fields } => {
                for &a in func.ids(fields) {
                    ids.push(self.map(a));
                }
                ExprKind::Tuple { fields: self.b.push_ids(&ids) }
            }
            ExprKind::Proj { tuple, index } => ExprKind::Proj { tuple: self.map(tuple), index },
            ExprKind::If { cond, then_, else_ } => {
                ExprKind::If { cond: self.map(cond), then_: self.map(then_), else_: self.map(else_) }
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                for &p in func.ids(c.params) {
                    ids.push(self.map_binder(p));
                }
                let body = self.map(c.body);
                let params = self.b.push_ids(&ids);
                let idx =
                    self.b.push_closure(Closure { params, body, ret_ty: c.ret_ty.clone(), attrs: c.attrs.clone() });
                ExprKind::Func { idx }
            }
            ExprKind::Block { bindings, result } => {
                for (var, value) in func.bindings(bindings) {
                    if self.dropped[var.index()] {
                        continue;
                    }
                    let v = self.map(var);
                    if self.dropped[var.index()] {
                        continue;
                    }
                    ids.push(v);
                    ids.push(self.map(value));
                }
                let r = self.map(result);
                if ids.is_empty() {
                    // `{ e }` is `e`.
                    self.set_span(old);
                    self.scratch = ids;
                    return Err(r);
                }
                ExprKind::Block { bindings: self.b.push_ids(&ids), result: r }
            }
        };
        self.scratch = ids;
        Ok(kind)
    }

    /// Pushes `kind` (from [`Rewriter::mapped_kind`]) as the copy of `old`, with `old`'s span
    /// and type. Does not record it in the memo.
    #[inline]
    pub fn push_mapped(&mut self, old: NodeId, kind: ExprKind) -> NodeId {
        self.set_span(old);
        self.b.push_ty_ref(kind, self.func.ty(old))
    }

    /// In append mode: whether `old` can be reused because its operands map to themselves
    /// and none of its bindings is removed.
    fn unchanged(&mut self, old: NodeId) -> bool {
        let func = self.func;
        let mut same = true;
        match *func.kind(old) {
            ExprKind::Block { bindings, result } => {
                for (var, value) in func.bindings(bindings) {
                    if self.dropped[var.index()] || self.map(var) != var || self.dropped[var.index()] {
                        return false;
                    }
                    same &= self.map(value) == value;
                }
                same && self.map(result) == result
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                for &p in func.ids(c.params) {
                    same &= self.map(p) == p;
                }
                same && self.map(c.body) == c.body
            }
            ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                for &a in func.ids(args) {
                    same &= self.map(a) == a;
                }
                same
            }
            ExprKind::Proj { tuple, .. } => self.map(tuple) == tuple,
            _ => {
                func.for_each_operand(old, |o| same &= self.map(o) == o);
                same
            }
        }
    }

    /// Copies the function. `visit` is called on every live compound node in arena order and
    /// returns `Some(new)` to replace it (counted as a change) or `None` for a plain copy.
    /// Returns `None` when nothing changed or the input is malformed.
    pub fn run(mut self, mut visit: impl FnMut(&mut Rewriter<'f>, NodeId) -> Option<NodeId>) -> Option<Function> {
        let func = self.func;
        let live = self.start();
        for (i, &is_live) in live.iter().enumerate() {
            let id = NodeId(i as u32);
            if self.failed {
                return None;
            }
            if !is_live || func.kind(id).is_atom() {
                continue;
            }
            match visit(&mut self, id) {
                Some(new) => {
                    self.memo[i] = new;
                    self.changed = true;
                }
                None => {
                    self.copy(id);
                }
            }
        }
        let params = self.map_params();
        let body = self.map(func.body());
        self.finish(&params, body)
    }

    /// Chooses the mode and starts the new function; returns the live nodes (see
    /// [`Rewriter::run`], which a driver of its own, like [`super::mutate`], replaces).
    pub fn start(&mut self) -> Vec<bool> {
        self.live_mask_and_mode()
    }

    /// The new parameters: the copies of the input's (mapped before the body, so that in
    /// compact mode they come first among what is left to copy).
    pub fn map_params(&mut self) -> Vec<NodeId> {
        let func = self.func;
        let mut params = Vec::with_capacity(func.params().len());
        for &p in func.params() {
            params.push(self.map_binder(p));
        }
        params
    }

    /// Finishes the new function with `params` and `body` (new ids) and the input's result
    /// type and attributes; `None` when nothing changed or the input is malformed.
    pub fn finish(self, params: &[NodeId], body: NodeId) -> Option<Function> {
        let func = self.func;
        if !self.changed || self.failed || body == NONE || params.contains(&NONE) {
            return None;
        }
        Some(self.b.finish(params, body, func.ret_ty().cloned(), func.attrs().clone()))
    }

    /// Marks the live nodes, like [`Function::live_mask`] except that the values of dropped
    /// bindings are not live, and chooses the mode: append to the input arena unless its dead
    /// nodes or dead extra entries outweigh the live ones. One backward sweep does both.
    fn live_mask_and_mode(&mut self) -> Vec<bool> {
        let func = self.func;
        let mut live = vec![false; func.num_nodes()];
        live[func.body().index()] = true;
        let (mut live_nodes, mut live_extra, mut extra_end) = (0usize, 0usize, 0usize);
        for i in (0..live.len()).rev() {
            let id = NodeId(i as u32);
            let is_live = live[i];
            let range = match *func.kind(id) {
                ExprKind::Block { bindings, result } => {
                    if is_live {
                        for (var, value) in func.bindings(bindings) {
                            if !self.dropped[var.index()] {
                                live[value.index()] = true;
                            }
                        }
                        live[result.index()] = true;
                    }
                    bindings
                }
                ExprKind::Func { idx } => {
                    let c = func.closure(idx);
                    if is_live {
                        live[c.body.index()] = true;
                    }
                    c.params
                }
                ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                    if is_live {
                        for &a in func.ids(args) {
                            live[a.index()] = true;
                        }
                    }
                    args
                }
                ExprKind::Apply { callee, args } => {
                    if is_live {
                        live[callee.index()] = true;
                        for &a in func.ids(args) {
                            live[a.index()] = true;
                        }
                    }
                    args
                }
                ExprKind::Proj { tuple, .. } => {
                    live[tuple.index()] |= is_live;
                    Default::default()
                }
                ExprKind::If { cond, then_, else_ } => {
                    if is_live {
                        live[cond.index()] = true;
                        live[then_.index()] = true;
                        live[else_.index()] = true;
                    }
                    Default::default()
                }
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => Default::default(),
            };
            extra_end = extra_end.max(range.as_range().end);
            if is_live {
                live_nodes += 1;
                live_extra += range.len as usize;
            }
        }
        // Garbage up to twice the live size is tolerated, so that a pipeline of passes that
        // each change a little compacts only every few passes.
        self.append = !self.force_compact && live_nodes * 3 >= func.num_nodes() && live_extra * 3 + 64 >= extra_end;
        self.b = if self.append { func.to_builder() } else { func.builder_sharing_names(live_nodes, live_extra) };
        live
    }
}

enum Forward {
    To(NodeId),
    Resolved(NodeId),
    Keep,
}
