//! A small copying rewriter shared by the passes.
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
//! Passes that only merge, forward or delete values try [`Function::substituted`] first,
//! which patches a copy of the arena without pushing anything, and use the rewriter when it
//! refuses. A pass may, before the copy, drop
//! bindings and alias variables to other atoms; during the copy it may replace any compound
//! node (its operands are already copied and can be inspected through [`Rewriter::map`]).
//! Atoms (variables, globals, constants) are copied lazily, on first use, so atoms that
//! become unused are never copied. Variables bound to atoms may be propagated into their uses
//! (see [`Propagate`]); such a binding is then removed.
//!
//! The copy is a loop over ids, never a recursion, so any expression depth works. Nodes of a
//! subtree that a pass discards after it was copied (the untaken branch of a folded `if`)
//! stay in the new arena as dead nodes, which are never printed, evaluated or compared.
//!
//! A generic `ExprMutator` in the engine may replace this later.

use std::sync::Arc;

use passel_engine::ir::{ConstIdx, Constant, ExprKind, Function, FunctionBuilder, NodeId, OpId, Sym};
use passel_engine::op::{self, OpDef};

/// "No node" in memo tables.
pub(crate) const NONE: NodeId = NodeId(u32::MAX);

/// The definition of `op`, or `None` for an id outside the registry (malformed input).
#[inline]
pub(crate) fn op_def(op: OpId) -> Option<&'static OpDef> {
    op::try_get(op)
}

/// Whether a call of `op` has effects. Unknown operators count as stateful.
#[inline]
pub(crate) fn is_stateful(op: OpId) -> bool {
    op_def(op).is_none_or(|d| d.stateful)
}

/// The well-formedness a pass relies on: operands precede users and every id and table index
/// is in range. Passes return their input unchanged when this fails. The builder records it
/// while nodes are pushed ([`Function::is_well_formed`]), so this costs nothing per pass.
#[inline]
pub(crate) fn well_formed(func: &Function) -> bool {
    func.is_well_formed()
}

/// Which let-bound atoms the rewriter substitutes into uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Propagate {
    /// None.
    Nothing,
    /// Variables whose (rewritten) value is a constant.
    Consts,
    /// Variables whose (rewritten) value is any atom: a variable, global or constant.
    Atoms,
}

/// Copies a function's live nodes into a new builder; see the module docs.
pub(crate) struct Rewriter<'f> {
    pub(crate) func: &'f Function,
    pub(crate) b: FunctionBuilder,
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
    pairs: Vec<(NodeId, NodeId)>,
}

impl<'f> Rewriter<'f> {
    pub(crate) fn new(func: &'f Function, propagate: Propagate) -> Rewriter<'f> {
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
            pairs: Vec::new(),
        };
        if propagate != Propagate::Nothing {
            rw.bound = bound_values(func);
        }
        rw
    }

    /// Removes the binding of old variable `var` (its value is not copied).
    pub(crate) fn drop_binding(&mut self, var: NodeId) {
        self.dropped[var.index()] = true;
        self.changed = true;
    }

    /// Removes the binding of `var` and makes its uses refer to old atom `target` instead.
    pub(crate) fn alias(&mut self, var: NodeId, target: NodeId) {
        if self.alias.is_empty() {
            self.alias = vec![NONE; self.func.num_nodes()];
        }
        self.alias[var.index()] = target;
        self.drop_binding(var);
    }

    /// The constant of new node `new`, if it is a constant.
    pub(crate) fn new_const(&self, new: NodeId) -> Option<&Arc<Constant>> {
        match self.b.node(new).kind {
            ExprKind::Const { idx } => Some(self.b.constant_at(idx)),
            _ => None,
        }
    }

    /// Pushes a constant into the new function.
    pub(crate) fn constant(&mut self, c: Arc<Constant>) -> NodeId {
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
    pub(crate) fn map(&mut self, old: NodeId) -> NodeId {
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
    pub(crate) fn copy(&mut self, old: NodeId) -> NodeId {
        let func = self.func;
        if self.append && self.unchanged(old) {
            self.memo[old.index()] = old;
            return old;
        }
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        let new = match *func.kind(old) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {
                self.scratch = ids;
                return self.map(old);
            }
            ExprKind::Call { op, attrs, args } => {
                for &a in func.ids(args) {
                    ids.push(self.map(a));
                }
                self.set_span(old);
                self.b.call(op, &ids, func.call_attrs(attrs).clone())
            }
            ExprKind::Apply { callee, args } => {
                let callee = self.map(callee);
                for &a in func.ids(args) {
                    ids.push(self.map(a));
                }
                self.set_span(old);
                self.b.apply(callee, &ids)
            }
            ExprKind::Tuple { fields } => {
                for &a in func.ids(fields) {
                    ids.push(self.map(a));
                }
                self.set_span(old);
                self.b.tuple(&ids)
            }
            ExprKind::Proj { tuple, index } => {
                let t = self.map(tuple);
                self.set_span(old);
                self.b.proj(t, index)
            }
            ExprKind::If { cond, then_, else_ } => {
                let (c, t, e) = (self.map(cond), self.map(then_), self.map(else_));
                self.set_span(old);
                self.b.if_(c, t, e)
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                for &p in func.ids(c.params) {
                    ids.push(self.map(p));
                }
                let body = self.map(c.body);
                self.set_span(old);
                self.b.closure(&ids, body, c.ret_ty.clone(), c.attrs.clone())
            }
            ExprKind::Block { bindings, result } => {
                let mut pairs = std::mem::take(&mut self.pairs);
                pairs.clear();
                for (var, value) in func.bindings(bindings) {
                    if self.dropped[var.index()] {
                        continue;
                    }
                    let v = self.map(var);
                    if self.dropped[var.index()] {
                        continue;
                    }
                    pairs.push((v, self.map(value)));
                }
                let r = self.map(result);
                self.set_span(old);
                if pairs.is_empty() {
                    self.scratch = ids;
                    self.pairs = pairs;
                    self.memo[old.index()] = r;
                    return r;
                }
                let new = self.b.block(&pairs, r);
                self.pairs = pairs;
                new
            }
        };
        self.scratch = ids;
        if let Some(ty) = func.ty(old) {
            self.b.set_ty_ref(new, Some(ty));
        }
        self.memo[old.index()] = new;
        new
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
    pub(crate) fn run(
        mut self,
        mut visit: impl FnMut(&mut Rewriter<'f>, NodeId) -> Option<NodeId>,
    ) -> Option<Function> {
        let func = self.func;
        let live = self.live_mask_and_mode();
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
        let mut params = Vec::with_capacity(func.params().len());
        for &p in func.params() {
            params.push(self.map(p));
        }
        let body = self.map(func.body());
        if !self.changed || self.failed || body == NONE || params.contains(&NONE) {
            return None;
        }
        Some(self.b.finish(&params, body, func.ret_ty().cloned(), func.attrs().clone()))
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
        self.append = live_nodes * 3 >= func.num_nodes() && live_extra * 3 + 64 >= extra_end;
        self.b = if self.append { func.to_builder() } else { func.builder_sharing_names(live_nodes, live_extra) };
        live
    }
}

enum Forward {
    To(NodeId),
    Resolved(NodeId),
    Keep,
}

/// Old binding variable → its value, over all blocks (NONE when unbound or bound twice).
/// Calls `f` on each node that `id` uses: a block's bound values and result (not its binder
/// variables), a nested function's body, and any other node's operands. Summed over the live
/// nodes, this gives every node's number of users.
pub(crate) fn for_each_use(func: &Function, id: NodeId, mut f: impl FnMut(NodeId)) {
    match *func.kind(id) {
        ExprKind::Block { bindings, result } => {
            for (_, value) in func.bindings(bindings) {
                f(value);
            }
            f(result);
        }
        ExprKind::Func { idx } => f(func.closure(idx).body),
        _ => func.for_each_operand(id, f),
    }
}

pub(crate) fn bound_values(func: &Function) -> Vec<NodeId> {
    bound_values_of_live(func, &func.live_mask())
}

/// [`bound_values`] with the function's [`Function::live_mask`] already at hand.
pub(crate) fn bound_values_of_live(func: &Function, live: &[bool]) -> Vec<NodeId> {
    let mut bound = Vec::new();
    bound_values_into(func, live, &mut bound);
    bound
}

/// [`bound_values_of_live`] into a caller's buffer (cleared first).
pub(crate) fn bound_values_into(func: &Function, live: &[bool], bound: &mut Vec<NodeId>) {
    bound.clear();
    bound.resize(func.num_nodes(), NONE);
    let mut twice = Vec::new();
    // Only live blocks count: append mode leaves the old copy of a rewritten block behind, and
    // its bindings must not make every variable look bound twice.
    for (node, _) in func.nodes().iter().zip(live).filter(|(_, &l)| l) {
        if let ExprKind::Block { bindings, .. } = node.kind {
            for (var, value) in func.bindings(bindings) {
                if bound[var.index()] != NONE {
                    twice.push(var);
                }
                bound[var.index()] = value;
            }
        }
    }
    for v in twice {
        bound[v.index()] = NONE;
    }
}

/// Number of bindings in live blocks (dead arena nodes left by append mode do not count).
#[cfg(test)]
pub(crate) fn live_bindings(func: &Function) -> usize {
    let live = func.live_mask();
    func.nodes()
        .iter()
        .zip(live)
        .map(|(n, l)| match n.kind {
            ExprKind::Block { bindings, .. } if l => bindings.len as usize / 2,
            _ => 0,
        })
        .sum()
}

/// The live nodes in evaluation order: operands before their users and, in a block, each
/// binding's value before the later bindings and the result. Unlike arena order this puts a
/// let-bound value before every use of its variable also in arenas that append mode rewrote
/// (where an unchanged user keeps its small id and a rewritten value gets a large one).
/// Iterative, so any depth works.
pub(crate) fn eval_order(func: &Function) -> Vec<NodeId> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let n = func.num_nodes();
    let mut state = vec![NEW; n];
    let mut out = Vec::with_capacity(n);
    // Parameters first, then the body.
    let mut stack = vec![func.body()];
    stack.extend(func.params().iter().rev());
    let mut operands = Vec::new();
    while let Some(&id) = stack.last() {
        let Some(s) = state.get(id.index()).copied() else {
            stack.pop();
            continue;
        };
        match s {
            NEW => {
                state[id.index()] = OPEN;
                operands.clear();
                // Operands have smaller ids in a well-formed arena; anything else is skipped
                // so that a malformed arena cannot loop.
                func.for_each_operand(id, |o| {
                    if o.0 < id.0 {
                        operands.push(o)
                    }
                });
                stack.extend(operands.iter().rev().filter(|o| state[o.index()] == NEW));
            }
            OPEN => {
                stack.pop();
                state[id.index()] = DONE;
                out.push(id);
            }
            _ => {
                stack.pop();
            }
        }
    }
    out
}
