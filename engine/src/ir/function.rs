//! Functions (the read side): an immutable arena of expression nodes plus its side tables, the
//! accessors every pass reads through, liveness, free variables, and the copies that change
//! only types or attributes. The builder is in `builder.rs`, the tables in `tables.rs`, and
//! the in-place patchers (`substituted`, `with_constants_forwarded`) in the rewriting layer
//! (`rewrite/patch.rs`).

use std::sync::Arc;

use super::attrs::Attrs;
use super::expr::{ExprKind, Node, Span, TyIdx};
use super::ids::{AttrsIdx, ClosureIdx, ConstIdx, IdRange, NodeId, Sym};
use super::tables::{Shared, Spans, SymTable, TypeTable};
use super::tensor::Constant;
use super::ty::Type;

/// A nested function (closure) inside a function's arena. It may refer to variables of the
/// enclosing scopes.
#[derive(Clone, Debug, PartialEq)]
pub struct Closure {
    /// Parameters: `Var` nodes, in the extra table.
    pub params: IdRange,
    /// The body.
    pub body: NodeId,
    /// Declared result type.
    pub ret_ty: Option<Type>,
    /// Attributes (e.g. `Primitive`).
    pub attrs: Attrs,
}

/// A function: parameters, a body expression, a declared result type and attributes, over an
/// arena of nodes in post-order.
///
/// Immutable once built; share it as `Arc<Function>`. A pass that changes nothing returns the
/// same `Arc`.
#[derive(Clone, Debug)]
pub struct Function {
    pub(super) nodes: Vec<Node>,
    /// The types the nodes' [`TyIdx`] refer to.
    pub(super) types: Arc<[Type]>,
    pub(super) spans: Spans,
    pub(super) extra: Vec<NodeId>,
    // Shared with builders made by `to_builder`, which copy it only when they add a name.
    pub(super) syms: Arc<SymTable>,
    pub(super) consts: Shared<Arc<Constant>>,
    pub(super) call_attrs: Shared<Attrs>,
    pub(super) closures: Shared<Closure>,
    pub(super) params: IdRange,
    pub(super) body: NodeId,
    pub(super) ret_ty: Option<Type>,
    pub(super) attrs: Attrs,
    /// Set by the builder when every node's operands precede it and every id and table index
    /// is in range (see [`Function::is_well_formed`]).
    pub(super) well_formed: bool,
}

impl Function {
    /// Whether the arena is well formed: every operand (including a nested function's
    /// parameters and body) precedes its user, the parameters and the body are nodes of the
    /// arena, and every symbol, constant, attribute and closure index is in range. The builder
    /// checks this as nodes are pushed, so asking costs nothing; passes that index the arena
    /// directly return their input unchanged when it is false, and the verifier reports why.
    #[inline]
    pub fn is_well_formed(&self) -> bool {
        self.well_formed
    }

    /// The node `id`.
    #[inline]
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The kind of node `id`.
    #[inline]
    pub fn kind(&self, id: NodeId) -> &ExprKind {
        &self.nodes[id.index()].kind
    }

    /// The known type of node `id`.
    #[inline]
    pub fn ty(&self, id: NodeId) -> Option<&Type> {
        self.types.get(self.nodes[id.index()].ty.get()?)
    }

    /// The known type of node `id`, or `None` when it has none or `id` is outside the arena.
    #[inline]
    pub fn try_ty(&self, id: NodeId) -> Option<&Type> {
        self.types.get(self.nodes.get(id.index())?.ty.get()?)
    }

    /// The type table the nodes' [`TyIdx`] refer to: each distinct type of the nodes, in order
    /// of first use. It may hold a type no node uses any more (left by a copy); read a node's
    /// type with [`Function::ty`].
    pub fn type_table(&self) -> &[Type] {
        &self.types
    }

    /// All nodes, in post-order (operands before users). May include dead nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Number of nodes in the arena.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Ids of all nodes in arena order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// Source span of node `id`, when the function was parsed.
    pub fn span(&self, id: NodeId) -> Option<Span> {
        Some(self.spans.get(id.index())).filter(|s| *s != Span::default())
    }

    /// The ids of an [`IdRange`] (arguments, fields, closure params).
    #[inline]
    pub fn ids(&self, range: IdRange) -> &[NodeId] {
        &self.extra[range.as_range()]
    }

    /// The `(var, value)` pairs of a block's binding range.
    pub fn bindings(&self, range: IdRange) -> impl ExactSizeIterator<Item = (NodeId, NodeId)> + '_ {
        self.extra[range.as_range()].chunks_exact(2).map(|p| (p[0], p[1]))
    }

    /// The text of a symbol.
    #[inline]
    pub fn sym(&self, sym: Sym) -> &str {
        self.syms.get(sym.0 as usize).expect("symbol of this function")
    }

    /// The name of a `Var` or `Global` node.
    pub fn name_of(&self, id: NodeId) -> Option<&str> {
        match *self.kind(id) {
            ExprKind::Var { name } | ExprKind::Global { name } => Some(self.sym(name)),
            _ => None,
        }
    }

    /// The constant at `idx`.
    #[inline]
    pub fn constant(&self, idx: ConstIdx) -> &Arc<Constant> {
        &self.consts[idx.0 as usize]
    }

    /// The attributes at `idx` of a call.
    #[inline]
    pub fn call_attrs(&self, idx: AttrsIdx) -> &Attrs {
        &self.call_attrs[idx.0 as usize]
    }

    /// The closure at `idx`.
    #[inline]
    pub fn closure(&self, idx: ClosureIdx) -> &Closure {
        &self.closures[idx.0 as usize]
    }

    /// Parameters: `Var` nodes.
    pub fn params(&self) -> &[NodeId] {
        self.ids(self.params)
    }

    /// The body expression.
    pub fn body(&self) -> NodeId {
        self.body
    }

    /// Declared result type.
    pub fn ret_ty(&self) -> Option<&Type> {
        self.ret_ty.as_ref()
    }

    /// Function attributes (`SkipOptimization`, `Primitive`, `Inline`, …).
    pub fn attrs(&self) -> &Attrs {
        &self.attrs
    }

    /// The function type, when every parameter and the result are annotated.
    pub fn signature(&self) -> Option<Type> {
        let params: Option<Vec<Type>> = self.params().iter().map(|&p| self.ty(p).cloned()).collect();
        Some(Type::func(params?, self.ret_ty.clone()?))
    }

    /// Calls `f` on each operand of node `id` in evaluation order. For a block that is, for
    /// each binding, its value and then its variable, and finally the result; for a nested
    /// function, its parameters and then its body.
    pub fn for_each_operand(&self, id: NodeId, mut f: impl FnMut(NodeId)) {
        match *self.kind(id) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
            ExprKind::Call { args, .. } => self.ids(args).iter().for_each(|&a| f(a)),
            ExprKind::Apply { callee, args } => {
                f(callee);
                self.ids(args).iter().for_each(|&a| f(a));
            }
            ExprKind::Tuple { fields } => self.ids(fields).iter().for_each(|&a| f(a)),
            ExprKind::Proj { tuple, .. } => f(tuple),
            ExprKind::If { cond, then_, else_ } => {
                f(cond);
                f(then_);
                f(else_);
            }
            ExprKind::Func { idx } => {
                let c = self.closure(idx);
                self.ids(c.params).iter().for_each(|&p| f(p));
                f(c.body);
            }
            ExprKind::Block { bindings, result } => {
                for (var, value) in self.bindings(bindings) {
                    f(value);
                    f(var);
                }
                f(result);
            }
        }
    }

    /// Marks the nodes reachable from the parameters and the body. Dead nodes (left over by a
    /// builder) are never printed, evaluated or compared.
    pub fn live_mask(&self) -> Vec<bool> {
        let mut live = Vec::new();
        self.live_mask_into(&mut live);
        live
    }

    /// The globals the live nodes reference (the function itself included when it recurses),
    /// sorted, each once.
    pub fn live_globals(&self) -> Vec<&str> {
        let live = self.live_mask();
        let mut refs: Vec<&str> = self
            .nodes
            .iter()
            .zip(&live)
            .filter_map(|(node, &l)| match node.kind {
                ExprKind::Global { name } if l => self.try_sym(name),
                _ => None,
            })
            .collect();
        refs.sort_unstable();
        refs.dedup();
        refs
    }

    /// [`Function::live_mask`] into a caller's buffer (cleared first), so that a pass can reuse
    /// one buffer across functions.
    pub fn live_mask_into(&self, live: &mut Vec<bool>) {
        let n = self.nodes.len();
        live.clear();
        live.resize(n, false);
        for &p in self.params() {
            live[p.index()] = true;
        }
        live[self.body.index()] = true;
        // Operands have smaller ids than their users, so one backward sweep suffices.
        for i in (0..n).rev() {
            if !live[i] {
                continue;
            }
            match self.nodes[i].kind {
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
                // Binding variables and values alike.
                ExprKind::Call { args: range, .. } | ExprKind::Tuple { fields: range } => {
                    for &a in &self.extra[range.as_range()] {
                        live[a.index()] = true;
                    }
                }
                ExprKind::Block { bindings, result } => {
                    for &a in &self.extra[bindings.as_range()] {
                        live[a.index()] = true;
                    }
                    live[result.index()] = true;
                }
                _ => self.for_each_operand(NodeId(i as u32), |c| live[c.index()] = true),
            }
        }
    }

    /// Number of let-bindings in all blocks of the function (a size measure for benchmarks).
    pub fn num_bindings(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match n.kind {
                ExprKind::Block { bindings, .. } => bindings.len as usize / 2,
                _ => 0,
            })
            .sum()
    }

    /// A copy with different function attributes.
    pub fn with_attrs(&self, attrs: Attrs) -> Function {
        Function { attrs, ..self.clone() }
    }

    /// A copy in which node `i` has source span `spans[i]` (nodes past the end of `spans`, and
    /// entries equal to `Span::default()`, have none). The session's persistent store uses it
    /// to give a function read back from its text the spans it was computed with.
    pub fn with_spans(&self, spans: Vec<Span>) -> Function {
        Function { spans: spans.into(), ..self.clone() }
    }

    /// A copy in which node `i` has type `types[i]` (nodes past the end of `types` keep
    /// theirs). This is how type inference writes its results. The copy has a type table of its
    /// own holding each distinct type once.
    pub fn with_types(&self, types: Vec<Option<Type>>) -> Function {
        let mut table = TypeTable::default();
        let mut types = types.into_iter();
        let nodes = self
            .nodes
            .iter()
            .map(|n| {
                let ty = match types.next() {
                    Some(t) => table.intern(t.as_ref()),
                    None => table.intern(n.ty.get().and_then(|i| self.types.get(i))),
                };
                Node { kind: n.kind, ty }
            })
            .collect();
        self.with_nodes_and_types(nodes, table.types.into())
    }

    /// A copy with `nodes` and `types` replaced, sharing the side tables and copying the extra
    /// table.
    pub(super) fn with_nodes_and_types(&self, nodes: Vec<Node>, types: Arc<[Type]>) -> Function {
        self.with_parts(nodes, types, self.extra.clone())
    }

    /// A copy with `nodes`, `types` and `extra` replaced and the side tables shared.
    pub(super) fn with_parts(&self, nodes: Vec<Node>, types: Arc<[Type]>, extra: Vec<NodeId>) -> Function {
        Function {
            nodes,
            types,
            spans: self.spans.clone(),
            extra,
            syms: Arc::clone(&self.syms),
            consts: self.consts.clone(),
            call_attrs: self.call_attrs.clone(),
            closures: self.closures.clone(),
            params: self.params,
            body: self.body,
            ret_ty: self.ret_ty.clone(),
            attrs: self.attrs.clone(),
            well_formed: self.well_formed,
        }
    }

    /// A copy in which node `i` has type `table[tys[i]]` (untyped for [`TyIdx::NONE`]). This
    /// is how type inference writes its results when it interned them itself: no type is
    /// hashed or reference-counted per node. `table` becomes the copy's type table; it may
    /// hold types no node uses. Returns `None` when `tys` does not have one entry per node or
    /// an index is outside `table`.
    ///
    /// `table` may be a slice (the types are cloned straight into the copy's shared table) or
    /// a vector (moved into it), so a caller that keeps its table for the next function need
    /// not clone it into a vector first.
    pub fn with_type_table(&self, table: impl Into<Arc<[Type]>>, tys: &[TyIdx]) -> Option<Function> {
        let table = table.into();
        // `NONE` is `u32::MAX`, which wraps to 0: the largest `index + 1` of the typed nodes.
        let end = tys.iter().fold(0u32, |end, t| end.max(t.0.wrapping_add(1)));
        if tys.len() != self.nodes.len() || end as usize > table.len() {
            return None;
        }
        let nodes = self.nodes.iter().zip(tys).map(|(n, &ty)| Node { kind: n.kind, ty }).collect();
        Some(self.with_nodes_and_types(nodes, table))
    }

    /// The ids of `range`, or `None` when it lies outside the extra table (malformed arenas;
    /// the verifier uses the `try_` accessors so that it never panics).
    pub fn try_ids(&self, range: IdRange) -> Option<&[NodeId]> {
        let end = range.start.checked_add(range.len)?;
        self.extra.get(range.start as usize..end as usize)
    }

    /// The closure at `idx`, or `None` when out of range.
    pub fn try_closure(&self, idx: ClosureIdx) -> Option<&Closure> {
        self.closures.get(idx.0 as usize)
    }

    /// The constant at `idx`, or `None` when out of range.
    pub fn try_constant(&self, idx: ConstIdx) -> Option<&Arc<Constant>> {
        self.consts.get(idx.0 as usize)
    }

    /// The call attributes at `idx`, or `None` when out of range.
    pub fn try_call_attrs(&self, idx: AttrsIdx) -> Option<&Attrs> {
        self.call_attrs.get(idx.0 as usize)
    }

    /// The text of `sym`, or `None` when out of range.
    pub fn try_sym(&self, sym: Sym) -> Option<&str> {
        self.syms.get(sym.0 as usize)
    }

    /// Whether `sym` is a symbol of this function (as [`Function::try_sym`], without reading
    /// the text).
    pub(crate) fn has_sym(&self, sym: Sym) -> bool {
        (sym.0 as usize) < self.syms.len()
    }

    /// The parameter ids, or `None` when the parameter range is malformed.
    pub fn try_params(&self) -> Option<&[NodeId]> {
        self.try_ids(self.params)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::{DType, FunctionBuilder, OpId};

    fn relu() -> OpId {
        crate::op::lookup("relu").expect("relu is registered")
    }

    /// `let a = relu(x); let b = relu(x); let c = add(b, b); c` with the ids of `a`, `b`, `c`'s
    /// value and the block.
    pub(crate) fn merge_candidate() -> (Function, [NodeId; 4]) {
        let add = crate::op::lookup("add").expect("add is registered");
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let cv = b.call(add, &[bb, bb], Attrs::new());
        let c = b.var("c", None);
        let body = b.block(&[(a, av), (bb, bv), (c, cv)], c);
        (b.finish(&[x], body, None, Attrs::new()), [a, bb, cv, body])
    }

    #[test]
    fn with_type_table_checks_every_index_against_the_table() {
        let (func, [a, ..]) = merge_candidate();
        let n = func.num_nodes();
        let table = [f32s(&[2]), f32s(&[3])];
        let mut tys = vec![TyIdx::NONE; n];
        tys[a.index()] = TyIdx(1);
        // A slice and a vector give the same copy; untyped nodes need no entry.
        let out = func.with_type_table(&table[..], &tys).expect("index 1 is in the table");
        assert_eq!(out.ty(a), Some(&table[1]));
        assert_eq!(out.ty(NodeId(0)), None);
        assert_eq!(out.type_table(), &table[..]);
        assert!(func.with_type_table(table.to_vec(), &tys).is_some());
        // One past the end, far past it, a short table and a wrong number of entries.
        tys[a.index()] = TyIdx(2);
        assert!(func.with_type_table(&table[..], &tys).is_none());
        tys[a.index()] = TyIdx(u32::MAX - 1);
        assert!(func.with_type_table(&table[..], &tys).is_none());
        tys[a.index()] = TyIdx(1);
        assert!(func.with_type_table(&table[..1], &tys).is_none());
        assert!(func.with_type_table(&table[..], &tys[1..]).is_none());
    }

    fn f32s(shape: &[u64]) -> Type {
        Type::tensor(shape.to_vec(), DType::F32)
    }

    #[test]
    fn with_types_replaces_clears_and_keeps_types_in_a_fresh_table() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(f32s(&[3])));
        let y = b.var("y", Some(Type::scalar(DType::Bool)));
        let r = b.call(relu(), &[x], Attrs::new());
        let func = b.finish(&[x, y], r, None, Attrs::new());
        // x loses its type, y's stays (past the end of the list)... and r gets one.
        let out = func.with_types(vec![None]);
        assert_eq!((out.ty(x), out.ty(y), out.ty(r)), (None, Some(&Type::scalar(DType::Bool)), None));
        let out = func.with_types(vec![Some(f32s(&[3])), Some(f32s(&[3])), Some(f32s(&[3]))]);
        assert_eq!(out.ty(r), Some(&f32s(&[3])));
        assert_eq!(out.ty(y), Some(&f32s(&[3])));
        assert_eq!(out.type_table(), &[f32s(&[3])]);
        // The input is untouched.
        assert_eq!(func.ty(y), Some(&Type::scalar(DType::Bool)));
        assert_eq!(func.ty(r), None);
    }

    #[test]
    fn try_ty_is_none_outside_the_arena() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(f32s(&[2])));
        let func = b.finish(&[x], x, None, Attrs::new());
        assert_eq!(func.try_ty(x), Some(&f32s(&[2])));
        assert_eq!(func.try_ty(NodeId(7)), None);
    }
}
