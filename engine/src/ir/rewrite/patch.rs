//! In-place patches: copies of a function's arena with operands replaced, bindings removed
//! or values turned into constants, that push no node and keep every id. The cheap first
//! choice of a pass that only merges, forwards, deletes or folds values; each returns `None`
//! when it cannot be sure, and the caller then takes the copying path (see
//! [`super::substitute`], the entry point that does both).

use std::sync::Arc;

use crate::ir::expr::{ExprKind, Node, TyIdx};
use crate::ir::function::Function;
use crate::ir::ids::{ConstIdx, IdRange, NodeId};
use crate::ir::tables::Shared;
use crate::ir::tensor::Constant;
use crate::ir::ty::Type;

impl Function {
    /// A copy of this function in which every operand `o` is replaced by `subst[o]` (followed
    /// to the end of a chain; `NodeId(u32::MAX)` means "keep") and the bindings whose variable
    /// `v` has `dropped[v]` are removed, for passes that only merge, forward or delete values
    /// (EliminateCommonSubexpr, DeadCodeElimination, SimplifyExpr's identities). Binder slots
    /// (parameters, binding variables) are never replaced. The side tables are shared with the
    /// input (the closure table is copied only when a closure's body is replaced) and the nodes
    /// keep their ids and types, so this costs a copy of the arena (nodes and extra table) and
    /// nothing per node pushed; nodes that become unused stay behind as dead nodes.
    ///
    /// Returns `None` — the caller then rebuilds the function — when the input is not well
    /// formed, the tables have the wrong length, a replacement would not precede one of its
    /// users, the replacements form a cycle, a block would lose all its bindings, or a block
    /// that loses bindings shares its binding slots with another node. The tables never grow,
    /// so repeated patches cannot make a function bigger.
    pub fn substituted(&self, subst: &[NodeId], dropped: &[bool]) -> Option<Function> {
        const KEEP: NodeId = NodeId(u32::MAX);
        let n = self.nodes.len();
        if !self.well_formed || subst.len() != n || dropped.len() != n {
            return None;
        }
        // With no replacement only blocks change (a well-formed arena's operands already
        // precede their users). Nodes before the first replaced or dropped id cannot refer to
        // one (their operands, binders and closure bodies precede them), so they are skipped:
        // merges and forwards usually start well into the arena.
        let first_subst = first_where(subst, |t| t != KEEP);
        let first_dropped = first_where(dropped, |d| d);
        let (any_subst, any_dropped) = (first_subst.is_some(), first_dropped.is_some());
        let first = first_subst.unwrap_or(n).min(first_dropped.unwrap_or(n));
        // The end of `o`'s chain of replacements; `None` for a cycle or an id out of range.
        let resolve = |o: NodeId| -> Option<NodeId> {
            let mut cur = o;
            for _ in 0..=n {
                let next = *subst.get(cur.index())?;
                if next == KEEP {
                    return Some(cur);
                }
                cur = next;
            }
            None
        };
        // The replacement of operand `o` of node `user`, which must precede the user. Operands
        // that are kept precede their user already (the arena is well formed).
        let fix = |o: NodeId, user: u32| -> Option<NodeId> {
            match subst.get(o.index()) {
                Some(&KEEP) => Some(o),
                _ => resolve(o).filter(|t| t.0 < user),
            }
        };
        let mut f = self.clone();
        let mut compacted = false;
        let Function { nodes, extra, closures, .. } = &mut f;
        for (i, node) in nodes.iter_mut().enumerate().skip(first) {
            let id = i as u32;
            match node.kind {
                ExprKind::Block { bindings, result } => {
                    let result = fix(result, id)?;
                    let range = bindings.as_range();
                    let src = &self.extra[range.clone()];
                    if !(any_dropped && src.chunks_exact(2).any(|p| dropped[p[0].index()])) {
                        // No binding removed: only the values may change.
                        if any_subst {
                            for pair in extra[range].chunks_exact_mut(2) {
                                if subst.get(pair[1].index()) != Some(&KEEP) {
                                    pair[1] = fix(pair[1], id)?;
                                }
                            }
                        }
                        node.kind = ExprKind::Block { bindings, result };
                        continue;
                    }
                    // The kept pairs move to the front of the block's own range.
                    let dst = &mut extra[range];
                    let mut w = 0;
                    for pair in src.chunks_exact(2) {
                        let (var, value) = (pair[0], pair[1]);
                        if dropped[var.index()] {
                            continue;
                        }
                        let value = if any_subst { fix(value, id)? } else { value };
                        if let Some(slot) = dst.get_mut(w..w + 2) {
                            slot[0] = var;
                            slot[1] = value;
                        }
                        w += 2;
                    }
                    if w == 0 {
                        return None;
                    }
                    compacted |= w != dst.len();
                    let bindings = IdRange { start: bindings.start, len: w as u32 };
                    node.kind = ExprKind::Block { bindings, result };
                }
                _ if !any_subst => {}
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
                ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                    for e in &mut extra[args.as_range()] {
                        if subst.get(e.index()) != Some(&KEEP) {
                            *e = fix(*e, id)?;
                        }
                    }
                }
                ExprKind::Apply { callee, args } => {
                    for e in &mut extra[args.as_range()] {
                        *e = fix(*e, id)?;
                    }
                    node.kind = ExprKind::Apply { callee: fix(callee, id)?, args };
                }
                ExprKind::Proj { tuple, index } => node.kind = ExprKind::Proj { tuple: fix(tuple, id)?, index },
                ExprKind::If { cond, then_, else_ } => {
                    node.kind = ExprKind::If { cond: fix(cond, id)?, then_: fix(then_, id)?, else_: fix(else_, id)? };
                }
                ExprKind::Func { idx } => {
                    // The closure table is shared with the input: copy it only for a change.
                    let body = self.closures[idx.0 as usize].body;
                    let fixed = fix(body, id)?;
                    if fixed != body {
                        closures.make_mut()[idx.0 as usize].body = fixed;
                    }
                }
            }
        }
        if compacted && self.compacts_shared_slots(dropped) {
            return None;
        }
        f.body = resolve(f.body)?;
        Some(f)
    }

    /// The extra-table range node `kind` reads (arguments, fields, bindings, a closure's
    /// parameters).
    fn range_of(&self, kind: ExprKind) -> Option<IdRange> {
        match kind {
            ExprKind::Call { args, .. } | ExprKind::Apply { args, .. } | ExprKind::Tuple { fields: args } => Some(args),
            ExprKind::Block { bindings, .. } => Some(bindings),
            ExprKind::Func { idx } => Some(self.closures[idx.0 as usize].params),
            _ => None,
        }
    }

    /// Whether the nodes' extra-table ranges are disjoint and in node order, as they always
    /// are in parsed and copied arenas: then no slot has two readers, and a block's bindings
    /// can be compacted in place.
    fn ranges_disjoint(&self) -> bool {
        let mut prev_end = 0u32;
        self.nodes.iter().filter_map(|node| self.range_of(node.kind)).filter(|r| r.len != 0).all(|r| {
            let ok = r.start >= prev_end;
            prev_end = r.start + r.len;
            ok
        })
    }

    /// Whether a block that loses a binding of a `dropped` variable shares one of its binding
    /// slots with another node (compacting it in place would corrupt that node).
    fn compacts_shared_slots(&self, dropped: &[bool]) -> bool {
        if self.ranges_disjoint() {
            return false;
        }
        let mut readers = vec![0u8; self.extra.len()];
        for node in &self.nodes {
            if let Some(range) = self.range_of(node.kind) {
                for c in &mut readers[range.as_range()] {
                    *c = c.saturating_add(1);
                }
            }
        }
        self.nodes.iter().any(|node| match node.kind {
            ExprKind::Block { bindings, .. } => {
                let range = bindings.as_range();
                self.extra[range.clone()].iter().step_by(2).any(|v| dropped[v.index()])
                    && readers[range].iter().any(|&c| c > 1)
            }
            _ => false,
        })
    }

    /// A copy of this function in which each node `id` of `consts` is, in place, a constant
    /// node for `c` (a new constant-table entry; the node's type becomes the constant's type),
    /// and each binding variable `v` with `forward[v] != NodeId(u32::MAX)` is forwarded: its
    /// uses read `forward[v]` instead and its binding is removed (the variable stays behind as
    /// a dead node, given its replacement's type when it has none; a forwarded variable that
    /// no block binds is left as it is). For passes that fold
    /// values into constants (FoldConstant): nothing is pushed and ids stay, so this costs one
    /// copy of the arena and of the constant table (the other side tables are shared with the
    /// input) plus the work on the `touched` nodes.
    ///
    /// `touched` must list every node that reads a forwarded variable (as an operand, a
    /// binding's value or a block's result) or binds one; only those nodes are patched. A
    /// block that loses bindings keeps its kept pairs at the front of its own range when no
    /// two nodes share extra-table slots (always so for parsed and copied arenas), and
    /// otherwise gets them in a new range at the end of the table (its old slots become
    /// garbage, so no other reader of them is affected).
    ///
    /// Returns `None` — the caller then rebuilds the function — when the input is not well
    /// formed, `forward` has the wrong length, an id is outside the arena, a replacement does
    /// not precede a user or is itself forwarded, a parameter is forwarded, or a block whose
    /// result is a variable or global would lose all its bindings (a block left with only a
    /// computed or constant result becomes that result, in place).
    pub fn with_constants_forwarded(
        &self,
        consts: &[(NodeId, Arc<Constant>)],
        forward: &[NodeId],
        touched: &[NodeId],
    ) -> Option<Function> {
        const KEEP: NodeId = NodeId(u32::MAX);
        let n = self.nodes.len();
        if !self.well_formed
            || forward.len() != n
            || consts.iter().any(|(id, _)| id.index() >= n)
            || touched.iter().any(|id| id.index() >= n)
        {
            return None;
        }
        // Operands are in range in a well-formed function.
        let target = |o: NodeId| -> Option<NodeId> { Some(forward[o.index()]).filter(|&t| t != KEEP) };
        if self.params().iter().any(|&p| target(p).is_some()) {
            return None;
        }
        // A block that loses bindings keeps its pairs in place when no slot has two readers;
        // otherwise it gets a new range at the end of the extra table: reserve room for all of
        // them, so that the copy of the table is not copied again as it grows.
        let in_place = self.ranges_disjoint();
        let grow: usize = touched
            .iter()
            .filter(|_| !in_place)
            .map(|id| match self.nodes[id.index()].kind {
                ExprKind::Block { bindings, .. } => bindings.len as usize,
                _ => 0,
            })
            .sum();
        let mut extra = Vec::with_capacity(self.extra.len() + grow);
        extra.extend_from_slice(&self.extra);
        let mut f = self.with_parts(self.nodes.clone(), Arc::clone(&self.types), extra);
        f.put_constants(consts);
        // The replacement of operand `o` of node `user`: it must precede the user and not be
        // forwarded itself.
        let fix = |o: NodeId, user: usize| -> Option<NodeId> {
            match target(o) {
                None => Some(o),
                Some(t) if t.index() < user && target(t).is_none() => Some(t),
                Some(_) => None,
            }
        };
        for &id in touched {
            let i = id.index();
            let kind = match f.nodes[i].kind {
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => continue,
                ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                    for e in &mut f.extra[args.as_range()] {
                        *e = fix(*e, i)?;
                    }
                    continue;
                }
                ExprKind::Apply { callee, args } => {
                    for e in &mut f.extra[args.as_range()] {
                        *e = fix(*e, i)?;
                    }
                    ExprKind::Apply { callee: fix(callee, i)?, args }
                }
                ExprKind::Proj { tuple, index } => ExprKind::Proj { tuple: fix(tuple, i)?, index },
                ExprKind::If { cond, then_, else_ } => {
                    ExprKind::If { cond: fix(cond, i)?, then_: fix(then_, i)?, else_: fix(else_, i)? }
                }
                ExprKind::Func { idx } => {
                    let body = f.closures[idx.0 as usize].body;
                    let fixed = fix(body, i)?;
                    if fixed != body {
                        f.closures.make_mut()[idx.0 as usize].body = fixed;
                    }
                    continue;
                }
                ExprKind::Block { bindings, result } => {
                    // Listed twice in `touched`: the first visit patched it already.
                    if f.nodes[i].kind != self.nodes[i].kind {
                        continue;
                    }
                    let result = fix(result, i)?;
                    let range = bindings.as_range();
                    if !self.extra[range.clone()].iter().step_by(2).any(|&v| target(v).is_some()) {
                        for e in f.extra[range].iter_mut().skip(1).step_by(2) {
                            *e = fix(*e, i)?;
                        }
                        ExprKind::Block { bindings, result }
                    } else {
                        // Kept pairs go to the front of the block's own range (reading the
                        // input's slots, so nothing is overwritten before it is read), or to
                        // the end of the table.
                        let start = if in_place { range.start } else { f.extra.len() };
                        let mut w = start;
                        for k in range.step_by(2) {
                            let (var, value) = (self.extra[k], self.extra[k + 1]);
                            match target(var) {
                                None => {
                                    let value = fix(value, i)?;
                                    if in_place {
                                        f.extra[w] = var;
                                        f.extra[w + 1] = value;
                                    } else {
                                        f.extra.push(var);
                                        f.extra.push(value);
                                    }
                                    w += 2;
                                }
                                // The variable is dead now; a type keeps a typed function
                                // fully typed.
                                Some(t) => {
                                    if f.nodes[var.index()].ty.is_none() {
                                        f.nodes[var.index()].ty = f.nodes[t.index()].ty;
                                    }
                                }
                            }
                        }
                        if w == start {
                            // Only the result is left: the node becomes the result (a compound
                            // result has no other live user; a constant may be shared). A
                            // variable would need the block's users patched.
                            let r = f.nodes[result.index()];
                            if matches!(r.kind, ExprKind::Var { .. } | ExprKind::Global { .. }) {
                                return None;
                            }
                            if f.nodes[i].ty.is_none() {
                                f.nodes[i].ty = r.ty;
                            }
                            f.nodes[i].kind = r.kind;
                            continue;
                        }
                        let len = u32::try_from(w - start).ok()?;
                        ExprKind::Block { bindings: IdRange { start: u32::try_from(start).ok()?, len }, result }
                    }
                }
            };
            f.nodes[i].kind = kind;
        }
        f.body = fix(f.body, n)?;
        Some(f)
    }

    /// A copy of this function whose constant-table entries `idx` hold `c` instead, each of
    /// the same tensor type as the entry it replaces (the parser's `resource<…>` references
    /// are typed placeholders until the resources section is read). `None` when an index is
    /// out of range or a type differs.
    pub(crate) fn with_constants_replaced(&self, repl: &[(ConstIdx, Arc<Constant>)]) -> Option<Function> {
        let mut f = self.clone();
        let table = f.consts.make_mut();
        for (idx, c) in repl {
            let slot = table.get_mut(idx.0 as usize)?;
            if slot.tensor_type() != c.tensor_type() {
                return None;
            }
            *slot = Arc::clone(c);
        }
        Some(f)
    }

    /// Turns each node `id` of `consts` into a constant node for `c` (ids checked by the
    /// caller), typed with the constant's type: an equal type of the table when there is one.
    fn put_constants(&mut self, consts: &[(NodeId, Arc<Constant>)]) {
        // New types are rare (a folded constant's type is usually a type of its arguments).
        let mut table: Option<Vec<Type>> = None;
        // The constant table is shared with the input: the new one is made once, at the end.
        let mut new_consts = Vec::with_capacity(consts.len());
        for (id, c) in consts {
            let types: &[Type] = table.as_deref().unwrap_or(&self.types);
            let found = types.iter().position(|t| t.as_tensor().is_some_and(|t| c.has_type(t)));
            let ty = match found {
                Some(i) => TyIdx(i as u32),
                None => {
                    let v = table.get_or_insert_with(|| self.types.to_vec());
                    v.push(c.ty());
                    TyIdx(v.len() as u32 - 1)
                }
            };
            let idx = ConstIdx((self.consts.len() + new_consts.len()) as u32);
            new_consts.push(Arc::clone(c));
            self.nodes[id.index()] = Node { kind: ExprKind::Const { idx }, ty };
        }
        if let Some(v) = table {
            self.types = v.into();
        }
        if !new_consts.is_empty() {
            self.consts = Shared(Some(self.consts.iter().cloned().chain(new_consts).collect()));
        }
    }
}

/// The index of the first element of `xs` for which `hit` holds. Chunks are tested with a
/// fold first: folds vectorize and short-circuiting searches do not, and the hit is usually
/// far from the start.
fn first_where<T: Copy>(xs: &[T], hit: impl Fn(T) -> bool) -> Option<usize> {
    const CHUNK: usize = 64;
    let mut base = 0;
    for chunk in xs.chunks(CHUNK) {
        if chunk.iter().fold(false, |any, &x| any | hit(x)) {
            return chunk.iter().position(|&x| hit(x)).map(|i| base + i);
        }
        base += chunk.len();
    }
    None
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::function::tests::merge_candidate;
    use crate::ir::tables::{SharedTable, Spans};
    use crate::ir::{Attrs, Closure, FunctionBuilder, OpId, Span};

    fn relu() -> OpId {
        crate::op::lookup("relu").expect("relu is registered")
    }

    const KEEP: NodeId = NodeId(u32::MAX);

    /// Whether two side tables are one allocation (both empty counts as shared).
    fn same_table<T>(a: &Shared<T>, b: &Shared<T>) -> bool {
        match (&a.0, &b.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// `fn (x) { let k = 2.0; let g = fn (p) { relu(p) }; let c = sum(x, axis=0); (g, k, c) }`
    /// with spans on every node, and the ids of the closure's body, `relu(p)` and `c`'s value.
    fn function_with_every_table() -> (Function, [NodeId; 2]) {
        let sum = crate::op::lookup("sum").expect("sum is registered");
        let mut b = FunctionBuilder::new();
        b.set_span(Span { start: 1, end: 2 });
        let x = b.var("x", None);
        let kv = b.constant(Constant::scalar_f32(2.0));
        let k = b.var("k", None);
        let p = b.var("p", None);
        let r = b.call(relu(), &[p], Attrs::new());
        let fv = b.closure(&[p], r, None, Attrs::new());
        let g = b.var("g", None);
        let cv = b.call(sum, &[x], Attrs::new().with("axis", crate::ir::AttrValue::Int(0)));
        let c = b.var("c", None);
        let tup = b.tuple(&[g, k, c]);
        let body = b.block(&[(k, kv), (g, fv), (c, cv)], tup);
        (b.finish(&[x], body, None, Attrs::new()), [p, cv])
    }

    #[test]
    fn copies_share_unchanged_side_tables_and_copy_a_changed_one() {
        let (func, [p, cv]) = function_with_every_table();
        assert!(func.is_well_formed());
        assert!(func.spans.len() > 0 && !func.consts.is_empty() && !func.closures.is_empty());
        assert_eq!(func.call_attrs.len(), 2);
        let n = func.num_nodes();

        // A plain copy and a substitution that changes no closure share every table.
        let out = func.substituted(&vec![KEEP; n], &vec![false; n]).expect("nothing to change");
        for copy in [&func.clone(), &out, &func.with_attrs(Attrs::new())] {
            assert!(Spans::same(&copy.spans, &func.spans));
            assert!(same_table(&copy.consts, &func.consts));
            assert!(same_table(&copy.call_attrs, &func.call_attrs));
            assert!(same_table(&copy.closures, &func.closures));
        }

        // Folding `c`'s value into a constant makes a new constant table (the old entries
        // first) and leaves the input's table as it was.
        let two = Arc::new(Constant::scalar_f32(2.0));
        let folded = func.with_constants_forwarded(&[(cv, Arc::clone(&two))], &vec![KEEP; n], &[]).expect("in range");
        assert!(!same_table(&folded.consts, &func.consts));
        assert_eq!(func.consts.len(), 1);
        assert_eq!(folded.consts.len(), 2);
        assert!(Arc::ptr_eq(&folded.consts[0], &func.consts[0]));
        assert!(Arc::ptr_eq(&folded.consts[1], &two));
        assert!(Spans::same(&folded.spans, &func.spans));
        assert!(same_table(&folded.closures, &func.closures));

        // Redirecting the closure's body copies the closure table; the input keeps its body.
        let ExprKind::Func { idx } = *func.kind(NodeId(p.0 + 2)) else { unreachable!() };
        let mut subst = vec![KEEP; n];
        subst[func.closure(idx).body.index()] = p;
        let redirected = func.substituted(&subst, &vec![false; n]).expect("p precedes the closure");
        assert!(!same_table(&redirected.closures, &func.closures));
        assert_eq!(redirected.closure(idx).body, p);
        assert_eq!(func.closure(idx).body, NodeId(p.0 + 1));
        assert!(same_table(&redirected.consts, &func.consts));

        // A builder from the function shares the tables until it adds to one; adding to the
        // builder never changes the function.
        let mut b = func.to_builder();
        let k2 = b.constant(Constant::scalar_f32(3.0));
        let out = b.finish(&[], k2, None, Attrs::new());
        assert_eq!(func.consts.len(), 1);
        assert_eq!(out.consts.len(), 2);
        assert!(same_table(&out.call_attrs, &func.call_attrs));
        assert!(same_table(&out.closures, &func.closures));
        assert!(!Spans::same(&out.spans, &func.spans), "the pushed node has a span");
        assert_eq!(out.spans.len(), n + 1);
        assert_eq!(out.span(k2), None, "a builder from a function starts without a span");
        assert_eq!(out.span(p), Some(Span { start: 1, end: 2 }));
    }

    #[test]
    fn substituted_replaces_operands_and_removes_bindings_keeping_ids() {
        let (func, [a, bb, cv, body]) = merge_candidate();
        let n = func.num_nodes();
        let mut subst = vec![KEEP; n];
        let mut dropped = vec![false; n];
        subst[bb.index()] = a;
        dropped[bb.index()] = true;
        let out = func.substituted(&subst, &dropped).expect("a precedes every use of b");
        assert!(out.is_well_formed());
        assert_eq!(
            out.ids(match out.kind(cv) {
                ExprKind::Call { args, .. } => *args,
                _ => unreachable!(),
            }),
            &[a, a]
        );
        let ExprKind::Block { bindings, result } = *out.kind(body) else { unreachable!() };
        let pairs: Vec<NodeId> = out.bindings(bindings).map(|(v, _)| v).collect();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0], a);
        assert_eq!(result, NodeId(cv.0 + 1));
        // The input is untouched.
        assert_eq!(
            func.bindings(match func.kind(body) {
                ExprKind::Block { bindings, .. } => *bindings,
                _ => unreachable!(),
            })
            .len(),
            3
        );
    }

    #[test]
    fn first_where_finds_the_first_hit_in_any_chunk() {
        let mut xs = vec![false; 200];
        assert_eq!(first_where(&xs, |x| x), None);
        xs[150] = true;
        xs[199] = true;
        assert_eq!(first_where(&xs, |x| x), Some(150));
        xs[63] = true;
        assert_eq!(first_where(&xs, |x| x), Some(63));
        xs[0] = true;
        assert_eq!(first_where(&xs, |x| x), Some(0));
        assert_eq!(first_where(&[] as &[bool], |x| x), None);
    }

    #[test]
    fn substituted_refuses_what_would_break_the_arena() {
        let (func, [a, bb, cv, body]) = merge_candidate();
        let n = func.num_nodes();
        // The uses of parameter `x` would refer to a later node.
        let mut subst = vec![KEEP; n];
        subst[func.params()[0].index()] = cv;
        assert!(func.substituted(&subst, &vec![false; n]).is_none());
        // A cycle of replacements.
        let mut subst = vec![KEEP; n];
        subst[a.index()] = bb;
        subst[bb.index()] = a;
        assert!(func.substituted(&subst, &vec![false; n]).is_none());
        // A replacement outside the arena.
        let mut subst = vec![KEEP; n];
        subst[bb.index()] = NodeId(n as u32 + 3);
        assert!(func.substituted(&subst, &vec![false; n]).is_none());
        // A block left without bindings.
        let ExprKind::Block { bindings, .. } = *func.kind(body) else { unreachable!() };
        let mut dropped = vec![false; n];
        for (v, _) in func.bindings(bindings) {
            dropped[v.index()] = true;
        }
        assert!(func.substituted(&vec![KEEP; n], &dropped).is_none());
        // Tables of the wrong length.
        assert!(func.substituted(&[], &[]).is_none());

        // Two blocks reading the same binding slots: compacting one in place would corrupt
        // the other.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let cv = b.call(relu(), &[x], Attrs::new());
        let c = b.var("c", None);
        let pairs = b.push_ids(&[a, av, c, cv]);
        let first = b.push(ExprKind::Block { bindings: pairs, result: c }, None);
        let second = b.push(ExprKind::Block { bindings: pairs, result: c }, None);
        let tup = b.tuple(&[first, second]);
        let func = b.finish(&[x], tup, None, Attrs::new());
        assert!(func.is_well_formed());
        let mut dropped = vec![false; func.num_nodes()];
        dropped[a.index()] = true;
        assert!(func.substituted(&vec![KEEP; func.num_nodes()], &dropped).is_none());
    }

    #[test]
    fn forwarding_compacts_a_block_in_place_unless_its_slots_are_shared() {
        // `{ let %a = relu(%x); let %k = 2.0; let %m = multiply(%a, %k); %m }` with `%k`
        // forwarded to its constant.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let two = b.constant(Constant::scalar_f32(2.0));
        let k = b.var("k", None);
        let mv = b.call(crate::op::lookup("multiply").expect("multiply"), &[a, k], Attrs::new());
        let m = b.var("m", None);
        let body = b.block(&[(a, av), (k, two), (m, mv)], m);
        let func = b.finish(&[x], body, None, Attrs::new());
        let n = func.num_nodes();
        let mut forward = vec![KEEP; n];
        forward[k.index()] = two;
        let out = func.with_constants_forwarded(&[], &forward, &[mv, body, body]).expect("forwardable");
        // In place: the kept pairs move to the front of the block's own range and the extra
        // table keeps its length (listing the block twice changes nothing).
        let ExprKind::Block { bindings, .. } = *out.kind(body) else { unreachable!() };
        let ExprKind::Block { bindings: old, .. } = *func.kind(body) else { unreachable!() };
        assert_eq!(bindings.start, old.start);
        assert_eq!(out.bindings(bindings).collect::<Vec<_>>(), vec![(a, av), (m, mv)]);
        assert_eq!(out.extra.len(), func.extra.len());
        let ExprKind::Call { args, .. } = *out.kind(mv) else { unreachable!() };
        assert_eq!(out.ids(args), &[a, two]);

        // A second block reading the same slots: the kept pairs go to a new range at the end,
        // and the other block still reads all three bindings.
        let mut b = func.to_builder();
        let other = b.push(ExprKind::Block { bindings: old, result: m }, None);
        let tup = b.tuple(&[body, other]);
        let shared = b.finish(&[x], tup, None, Attrs::new());
        assert!(shared.is_well_formed());
        let mut forward = vec![KEEP; shared.num_nodes()];
        forward[k.index()] = two;
        let out = shared.with_constants_forwarded(&[], &forward, &[mv, body]).expect("forwardable");
        let ExprKind::Block { bindings, .. } = *out.kind(body) else { unreachable!() };
        assert_eq!(bindings.start as usize, shared.extra.len());
        assert_eq!(out.bindings(bindings).collect::<Vec<_>>(), vec![(a, av), (m, mv)]);
        let ExprKind::Block { bindings: kept, .. } = *out.kind(other) else { unreachable!() };
        assert_eq!(out.bindings(kept).count(), 3);
    }

    #[test]
    fn substituted_compacts_a_block_when_ranges_are_out_of_order_but_not_shared() {
        // The closure's parameter range is pushed before its body's call arguments, so the
        // ranges are not in node order; no slot has two readers, so the patch goes ahead.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let p = b.var("p", None);
        let params = b.push_ids(&[p]);
        let r = b.call(relu(), &[p], Attrs::new());
        let idx = b.push_closure(Closure { params, body: r, ret_ty: None, attrs: Attrs::new() });
        let fv = b.push(ExprKind::Func { idx }, None);
        let g = b.var("g", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let body = b.block(&[(g, fv), (a, av)], g);
        let func = b.finish(&[x], body, None, Attrs::new());
        assert!(func.is_well_formed());
        let n = func.num_nodes();
        let mut dropped = vec![false; n];
        dropped[a.index()] = true;
        let out = func.substituted(&vec![KEEP; n], &dropped).expect("no shared slots");
        let ExprKind::Block { bindings, .. } = *out.kind(body) else { unreachable!() };
        assert_eq!(out.bindings(bindings).collect::<Vec<_>>(), vec![(g, fv)]);
        assert_eq!(out.ids(out.closure(idx).params), &[p]);
    }
}
