//! Functions: an immutable arena of expression nodes plus its side tables, and the builder
//! that makes one.

use std::sync::Arc;

use super::attrs::Attrs;
use super::expr::{ExprKind, Node, Span, TyIdx};
use super::ids::{AttrsIdx, ClosureIdx, ConstIdx, IdRange, NodeId, OpId, Sym};
use super::tensor::Constant;
use super::ty::{DType, Type};

/// The symbol table of a function: every name's text in one buffer, so that interning a name
/// costs no allocation of its own (a function has one symbol per variable).
#[derive(Clone, Debug, Default)]
struct SymTable {
    text: String,
    /// `ends[i]` is where symbol `i` ends in `text`; it starts where symbol `i - 1` ends.
    ends: Vec<u32>,
}

impl SymTable {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..end)
    }

    fn push(&mut self, s: &str) -> Sym {
        let sym = Sym(self.ends.len() as u32);
        self.text.push_str(s);
        self.ends.push(self.text.len() as u32);
        sym
    }

    fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// A type table under construction: a node refers to its type by index. A type is looked up by
/// its allocation first (types are shared `Arc`s, so a copied node's type usually is the very
/// entry) and then by content, so the table holds each distinct type once. Equality of types is
/// by content everywhere, so a duplicate entry would be harmless, only wasteful.
#[derive(Debug)]
struct TypeTable {
    types: Vec<Type>,
    /// Addresses of the allocations of the entries and of `aliases`. The table keeps every keyed
    /// allocation alive, so an address is never reused for another type while it is a key.
    by_addr: rustc_hash::FxHashMap<usize, TyIdx>,
    by_value: rustc_hash::FxHashMap<Type, TyIdx>,
    /// Allocations equal to an entry but not the entry itself, kept alive for `by_addr`: type
    /// inference makes a fresh type per call and clones it to the users, so later lookups of
    /// the same allocation cost no hashing of the content.
    aliases: Vec<Type>,
    /// Recently looked-up allocations and their indices, by a few bits of the address (a
    /// function uses few distinct types; address 0 marks an empty slot).
    recent: [(usize, TyIdx); RECENT],
    /// How many leading entries the maps cover: a table copied from a function is indexed on
    /// its first lookup, so copying a function's table costs no hashing until a type is added.
    indexed: usize,
}

const RECENT: usize = 32;

impl Default for TypeTable {
    fn default() -> Self {
        TypeTable {
            types: Vec::new(),
            by_addr: Default::default(),
            by_value: Default::default(),
            aliases: Vec::new(),
            recent: [(0, TyIdx::NONE); RECENT],
            indexed: 0,
        }
    }
}

impl TypeTable {
    /// A table starting with `types` (not yet indexed).
    fn from_types(types: &[Type]) -> TypeTable {
        TypeTable { types: types.to_vec(), ..TypeTable::default() }
    }

    /// The type at `idx`, or `None` for an untyped node.
    #[inline]
    fn get(&self, idx: TyIdx) -> Option<&Type> {
        self.types.get(idx.get()?)
    }

    /// The index of `ty`, adding it when no equal type is in the table.
    #[inline]
    fn intern(&mut self, ty: Option<&Type>) -> TyIdx {
        let Some(ty) = ty else { return TyIdx::NONE };
        let addr = ty.addr();
        // Allocations are at least 8-byte aligned; the `TypeKind` in an `Arc` follows the counts.
        let slot = (addr >> 4) % RECENT;
        if self.recent[slot].0 == addr {
            return self.recent[slot].1;
        }
        let idx = self.lookup_or_add(ty, addr);
        self.recent[slot] = (addr, idx);
        idx
    }

    #[inline(never)]
    fn lookup_or_add(&mut self, ty: &Type, addr: usize) -> TyIdx {
        while self.indexed < self.types.len() {
            let t = &self.types[self.indexed];
            let idx = TyIdx(self.indexed as u32);
            self.by_addr.entry(t.addr()).or_insert(idx);
            self.by_value.entry(t.clone()).or_insert(idx);
            self.indexed += 1;
        }
        if let Some(&idx) = self.by_addr.get(&addr) {
            return idx;
        }
        if let Some(&idx) = self.by_value.get(ty) {
            self.aliases.push(ty.clone());
            self.by_addr.insert(addr, idx);
            return idx;
        }
        let idx = TyIdx(self.types.len() as u32);
        self.types.push(ty.clone());
        self.by_addr.insert(addr, idx);
        self.by_value.insert(ty.clone(), idx);
        self.indexed = self.types.len();
        idx
    }

    fn clear(&mut self) {
        self.types.clear();
        self.by_addr.clear();
        self.by_value.clear();
        self.aliases.clear();
        self.recent = [(0, TyIdx::NONE); RECENT];
        self.indexed = 0;
    }
}

/// A side table of a function (spans, constants, call attributes, closures), shared by the
/// function and every copy made from it. Most copies (`substituted`, `with_type_table`,
/// `with_constants_forwarded`) change the arena and keep these tables, so sharing makes such a
/// copy cost one reference count per table instead of a copy of it (and, for constants, one
/// reference count per constant); dropping an intermediate copy then frees nothing but its arena.
/// An empty table holds no allocation, so a function without spans or closures pays nothing.
#[derive(Debug)]
struct Shared<T>(Option<Arc<[T]>>);

impl<T> Clone for Shared<T> {
    #[inline]
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared(None)
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl<T> From<Vec<T>> for Shared<T> {
    fn from(v: Vec<T>) -> Self {
        if v.is_empty() {
            Shared(None)
        } else {
            Shared(Some(v.into()))
        }
    }
}

impl<T: Clone> Shared<T> {
    /// The entries to change in place, copied first when another function shares them.
    fn make_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Some(table) => Arc::make_mut(table),
            None => &mut [],
        }
    }
}

/// A side table of a builder: the table of the function it started from, shared until the
/// builder first adds to it (most builders from `to_builder` and `builder_with_tables` add no
/// constant, attribute or closure), then a vector of its own.
#[derive(Debug)]
enum Table<T> {
    Shared(Shared<T>),
    Owned(Vec<T>),
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table::Owned(Vec::new())
    }
}

impl<T> std::ops::Deref for Table<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Table::Shared(t) => t,
            Table::Owned(v) => v,
        }
    }
}

impl<T: Clone> Table<T> {
    /// The vector to add to, copying a shared table first (with room for a few more entries,
    /// since a builder that adds one usually adds several).
    #[inline(always)]
    fn vec_mut(&mut self) -> &mut Vec<T> {
        // Inlined: builders push a span per node, and the table is nearly always owned.
        if let Table::Owned(v) = self {
            return v;
        }
        self.unshare()
    }

    #[cold]
    #[inline(never)]
    fn unshare(&mut self) -> &mut Vec<T> {
        let mut v = Vec::with_capacity(self.len() + self.len() / 4 + 4);
        v.extend_from_slice(self);
        *self = Table::Owned(v);
        match self {
            Table::Owned(v) => v,
            Table::Shared(_) => unreachable!("made owned above"),
        }
    }

    fn push(&mut self, value: T) {
        self.vec_mut().push(value);
    }

    /// The finished table; a shared one stays shared, a vector becomes exactly sized.
    fn finish(self) -> Shared<T> {
        match self {
            Table::Shared(t) => t,
            Table::Owned(v) => v.into(),
        }
    }

    /// The finished table, leaving this one empty with its vector (when it has one) kept for
    /// the next function.
    fn finish_and_clear(&mut self) -> Shared<T> {
        match self {
            Table::Shared(t) => {
                let t = std::mem::take(t);
                *self = Table::Owned(Vec::new());
                t
            }
            Table::Owned(v) if v.is_empty() => Shared(None),
            Table::Owned(v) => Shared(Some(v.drain(..).collect())),
        }
    }

    /// Empties the table, keeping its vector (when it has one).
    fn clear(&mut self) {
        match self {
            Table::Shared(_) => *self = Table::Owned(Vec::new()),
            Table::Owned(v) => v.clear(),
        }
    }
}

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
    nodes: Vec<Node>,
    /// The types the nodes' [`TyIdx`] refer to.
    types: Arc<[Type]>,
    spans: Shared<Span>,
    extra: Vec<NodeId>,
    // Shared with builders made by `to_builder`, which copy it only when they add a name.
    syms: Arc<SymTable>,
    consts: Shared<Arc<Constant>>,
    call_attrs: Shared<Attrs>,
    closures: Shared<Closure>,
    params: IdRange,
    body: NodeId,
    ret_ty: Option<Type>,
    attrs: Attrs,
    /// Set by the builder when every node's operands precede it and every id and table index
    /// is in range (see [`Function::is_well_formed`]).
    well_formed: bool,
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
        self.spans.get(id.index()).copied().filter(|s| *s != Span::default())
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

    /// Variables referenced inside the subtree of `node` but bound outside it, sorted by id,
    /// each once. Binding variables of blocks and parameters of nested functions inside the
    /// subtree count as bound. (A closure's captures; the interpreter and LambdaLift's
    /// reference lifter use it.)
    pub fn free_vars(&self, node: NodeId) -> Vec<NodeId> {
        let mut referenced = Vec::new();
        let mut defined = rustc_hash::FxHashSet::default();
        let mut stack = vec![node];
        while let Some(id) = stack.pop() {
            match *self.kind(id) {
                ExprKind::Var { .. } => referenced.push(id),
                ExprKind::Func { idx } => {
                    let c = self.closure(idx);
                    defined.extend(self.ids(c.params).iter().copied());
                    stack.push(c.body);
                }
                ExprKind::Block { bindings, result } => {
                    for (var, value) in self.bindings(bindings) {
                        defined.insert(var);
                        stack.push(value);
                    }
                    stack.push(result);
                }
                _ => self.for_each_operand(id, |c| stack.push(c)),
            }
        }
        referenced.retain(|v| !defined.contains(v));
        referenced.sort_unstable();
        referenced.dedup();
        referenced
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
    fn with_nodes_and_types(&self, nodes: Vec<Node>, types: Arc<[Type]>) -> Function {
        self.with_parts(nodes, types, self.extra.clone())
    }

    /// A copy with `nodes`, `types` and `extra` replaced and the side tables shared.
    fn with_parts(&self, nodes: Vec<Node>, types: Arc<[Type]>, extra: Vec<NodeId>) -> Function {
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
            let found = types.iter().position(|t| t.as_tensor().is_some_and(|t| constant_has_type(c, t)));
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

    /// A builder with this function's symbol, constant and attribute tables but an empty arena:
    /// `Sym`, `ConstIdx` and `AttrsIdx` values of this function stay valid in it. Mutators copy
    /// nodes into it so that the result has no dead nodes from the input.
    pub fn builder_with_tables(&self) -> FunctionBuilder {
        let sym_index = self.syms.iter().enumerate().map(|(i, s)| (Box::from(s), Sym(i as u32))).collect();
        FunctionBuilder {
            nodes: Vec::new(),
            types: TypeTable::default(),
            spans: Table::default(),
            extra: Vec::new(),
            syms: self.syms.clone(),
            sym_index,
            scalar_consts: Default::default(),
            consts: Table::Shared(self.consts.clone()),
            call_attrs: Table::Shared(self.call_attrs.clone()),
            closures: Table::default(),
            span: Span::default(),
            malformed: false,
        }
    }

    /// An empty builder that shares this function's symbol table (without an index of it):
    /// `Sym` values of this function stay valid in it, so a copy need not intern names again.
    /// Constants and attributes start empty. `nodes` and `extra` are capacity hints.
    pub fn builder_sharing_names(&self, nodes: usize, extra: usize) -> FunctionBuilder {
        FunctionBuilder {
            nodes: Vec::with_capacity(nodes),
            extra: Vec::with_capacity(extra),
            syms: Arc::clone(&self.syms),
            ..FunctionBuilder::new()
        }
    }

    /// A builder that starts from this function's tables: nodes pushed to it may refer to this
    /// function's nodes by their ids. Used by mutators that append to an existing arena.
    pub fn to_builder(&self) -> FunctionBuilder {
        // Passes append a few nodes to a copy: leave room so the first push does not reallocate.
        fn copy<T: Clone>(v: &[T]) -> Vec<T> {
            let mut out = Vec::with_capacity(v.len() + v.len() / 4 + 4);
            out.extend_from_slice(v);
            out
        }
        FunctionBuilder {
            nodes: copy(&self.nodes),
            types: TypeTable::from_types(&self.types),
            spans: Table::Shared(self.spans.clone()),
            extra: copy(&self.extra),
            syms: Arc::clone(&self.syms),
            sym_index: Default::default(),
            scalar_consts: Default::default(),
            consts: Table::Shared(self.consts.clone()),
            call_attrs: Table::Shared(self.call_attrs.clone()),
            closures: Table::Shared(self.closures.clone()),
            span: Span::default(),
            malformed: !self.well_formed,
        }
    }
}

/// Whether constant `c` has tensor type `tt` (without building its type).
fn constant_has_type(c: &Constant, tt: &super::ty::TensorType) -> bool {
    match c {
        Constant::Dense(t) => {
            t.dtype() == tt.dtype
                && t.shape().len() == tt.shape.len()
                && t.shape().iter().zip(tt.shape.iter()).all(|(&a, &b)| a as u64 == b)
        }
        Constant::Fill { ty, .. } | Constant::Raw { ty, .. } => ty == tt,
    }
}

/// Builds a [`Function`]. Every push takes operands that already exist, so the arena stays in
/// post-order.
#[derive(Debug)]
pub struct FunctionBuilder {
    nodes: Vec<Node>,
    types: TypeTable,
    spans: Table<Span>,
    extra: Vec<NodeId>,
    syms: Arc<SymTable>,
    // Index of names interned by this builder; a builder from `to_builder` starts without one
    // and may then intern a name twice, which is harmless (names do not matter for identity).
    sym_index: rustc_hash::FxHashMap<Box<str>, Sym>,
    scalar_consts: rustc_hash::FxHashMap<(DType, u64), (ConstIdx, Type)>,
    consts: Table<Arc<Constant>>,
    call_attrs: Table<Attrs>,
    closures: Table<Closure>,
    span: Span,
    /// Set when a pushed node breaks well-formedness (see [`Function::is_well_formed`]).
    malformed: bool,
}

impl Default for FunctionBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl FunctionBuilder {
    /// An empty builder.
    pub fn new() -> FunctionBuilder {
        FunctionBuilder {
            nodes: Vec::new(),
            types: TypeTable::default(),
            spans: Table::default(),
            extra: Vec::new(),
            syms: Arc::new(SymTable::default()),
            sym_index: Default::default(),
            scalar_consts: Default::default(),
            consts: Table::default(),
            call_attrs: Table::Owned(vec![Attrs::new()]),
            closures: Table::default(),
            span: Span::default(),
            malformed: false,
        }
    }

    /// Sets the source span recorded for the nodes pushed next.
    pub fn set_span(&mut self, span: Span) {
        self.span = span;
    }

    /// Number of nodes pushed so far (including those of a function this builder started from).
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The node `id` pushed earlier.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The known type of node `id` pushed earlier.
    #[inline]
    pub fn ty(&self, id: NodeId) -> Option<&Type> {
        self.types.get(self.nodes[id.index()].ty)
    }

    /// Sets the type of an already-pushed node.
    pub fn set_ty(&mut self, id: NodeId, ty: Option<Type>) {
        self.set_ty_ref(id, ty.as_ref());
    }

    /// Sets the type of an already-pushed node to a borrowed type (when it is already in the
    /// table, as for a node copied from another function, this touches no reference count).
    #[inline]
    pub fn set_ty_ref(&mut self, id: NodeId, ty: Option<&Type>) {
        self.nodes[id.index()].ty = self.types.intern(ty);
    }

    /// Interns a string.
    pub fn sym(&mut self, s: &str) -> Sym {
        if let Some(&sym) = self.sym_index.get(s) {
            return sym;
        }
        let sym = Arc::make_mut(&mut self.syms).push(s);
        self.sym_index.insert(s.into(), sym);
        sym
    }

    /// The text of a symbol interned earlier.
    pub fn sym_str(&self, sym: Sym) -> &str {
        self.syms.get(sym.0 as usize).expect("symbol of this builder")
    }

    /// Pushes a raw node. Operands must already exist.
    pub fn push(&mut self, kind: ExprKind, ty: Option<Type>) -> NodeId {
        self.push_ty_ref(kind, ty.as_ref())
    }

    /// Pushes a raw node with a borrowed type (see [`FunctionBuilder::set_ty_ref`]). Operands
    /// must already exist.
    #[inline]
    pub fn push_ty_ref(&mut self, kind: ExprKind, ty: Option<&Type>) -> NodeId {
        let ty = self.types.intern(ty);
        self.push_idx(kind, ty)
    }

    /// Pushes a raw node whose type is `ty`, an index into this builder's type table (taken
    /// from a node pushed earlier). Operands must already exist.
    pub(crate) fn push_idx(&mut self, kind: ExprKind, ty: TyIdx) -> NodeId {
        debug_assert!(ty.get().is_none_or(|i| i < self.types.types.len()), "type index of another table");
        let id = NodeId(self.nodes.len() as u32);
        let operands_ok = self.operands_exist(&kind);
        debug_assert!(operands_ok, "operand of {kind:?} does not precede {id}");
        self.malformed |= !(operands_ok && self.indices_in_range(&kind));
        self.nodes.push(Node { kind, ty });
        if self.span != Span::default() || !self.spans.is_empty() {
            let spans = self.spans.vec_mut();
            spans.resize(self.nodes.len() - 1, Span::default());
            spans.push(self.span);
        }
        id
    }

    /// Pushes a raw node without the debug-build assertion that its operands exist (which
    /// [`FunctionBuilder::push`] makes to catch pass bugs early). Any ids are accepted: a node
    /// whose operands or indices are out of range marks the function malformed
    /// ([`Function::is_well_formed`]), which every consumer refuses or skips. For building
    /// malformed input on purpose, e.g. to test that tools refuse it.
    pub fn push_unchecked(&mut self, kind: ExprKind, ty: Option<Type>) -> NodeId {
        self.malformed |= !(self.operands_exist(&kind) && self.indices_in_range(&kind));
        let ty = self.types.intern(ty.as_ref());
        self.nodes.push(Node { kind, ty });
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Whether the operands of a node about to be pushed exist (for a nested function: its
    /// closure, parameters and body). Never panics, whatever the ids.
    fn operands_exist(&self, kind: &ExprKind) -> bool {
        let n = self.nodes.len() as u32;
        let range_ok = |r: IdRange| {
            let end = r.start.checked_add(r.len).map(|e| e as usize);
            end.and_then(|end| self.extra.get(r.start as usize..end)).is_some_and(|ids| ids.iter().all(|a| a.0 < n))
        };
        match *kind {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => true,
            ExprKind::Call { args, .. } => range_ok(args),
            ExprKind::Apply { callee, args } => callee.0 < n && range_ok(args),
            ExprKind::Tuple { fields } => range_ok(fields),
            ExprKind::Proj { tuple, .. } => tuple.0 < n,
            ExprKind::If { cond, then_, else_ } => cond.0 < n && then_.0 < n && else_.0 < n,
            ExprKind::Func { idx } => {
                self.closures.get(idx.0 as usize).is_some_and(|c| c.body.0 < n && range_ok(c.params))
            }
            ExprKind::Block { bindings, result } => range_ok(bindings) && result.0 < n,
        }
    }

    /// Whether the table indices of a node (symbol, constant, attributes) are in range and a
    /// block's binding range holds whole pairs.
    fn indices_in_range(&self, kind: &ExprKind) -> bool {
        match *kind {
            ExprKind::Var { name } | ExprKind::Global { name } => (name.0 as usize) < self.syms.len(),
            ExprKind::Const { idx } => (idx.0 as usize) < self.consts.len(),
            ExprKind::Call { op, attrs, .. } => {
                (attrs.0 as usize) < self.call_attrs.len() && crate::op::try_get(op).is_some()
            }
            // `{ e }` is `e` (see `block`), and bindings come in `(var, value)` pairs.
            ExprKind::Block { bindings, .. } => bindings.len > 0 && bindings.len % 2 == 0,
            _ => true,
        }
    }

    /// Whether the parameters and body of the function being finished are nodes of the arena
    /// and every pushed node was well formed.
    fn finish_well_formed(&self, params: IdRange, body: NodeId) -> bool {
        let n = self.nodes.len() as u32;
        !self.malformed && body.0 < n && self.extra[params.as_range()].iter().all(|p| p.0 < n)
    }

    fn range(&mut self, ids: &[NodeId]) -> IdRange {
        self.push_ids(ids)
    }

    /// Appends `ids` to the extra table without making a node, for building an [`ExprKind`] by
    /// hand (pass it to [`FunctionBuilder::push`]).
    pub fn push_ids(&mut self, ids: &[NodeId]) -> IdRange {
        let start = self.extra.len() as u32;
        self.extra.extend_from_slice(ids);
        IdRange { start, len: ids.len() as u32 }
    }

    /// The ids of a range made by this builder.
    pub fn ids(&self, range: IdRange) -> &[NodeId] {
        &self.extra[range.as_range()]
    }

    /// Adds a closure to the closure table without making its `Func` node.
    pub fn push_closure(&mut self, closure: Closure) -> ClosureIdx {
        self.closures.push(closure);
        ClosureIdx(self.closures.len() as u32 - 1)
    }

    /// The closure at `idx` of this builder.
    pub fn closure_at(&self, idx: ClosureIdx) -> &Closure {
        &self.closures[idx.0 as usize]
    }

    /// The constant at `idx` of this builder.
    pub fn constant_at(&self, idx: ConstIdx) -> &Arc<Constant> {
        &self.consts[idx.0 as usize]
    }

    /// The call attributes at `idx` of this builder.
    pub fn call_attrs_at(&self, idx: AttrsIdx) -> &Attrs {
        &self.call_attrs[idx.0 as usize]
    }

    /// The span recorded for node `id` (the default span when none was set).
    pub fn span_at(&self, id: NodeId) -> Span {
        self.spans.get(id.index()).copied().unwrap_or_default()
    }

    /// A variable named `name` with an optional type annotation. Variable names are not
    /// interned (each variable is defined once, so its name is rarely repeated).
    pub fn var(&mut self, name: &str, ty: Option<Type>) -> NodeId {
        let name = Arc::make_mut(&mut self.syms).push(name);
        self.push(ExprKind::Var { name }, ty)
    }

    /// A reference to global `name`.
    pub fn global(&mut self, name: &str) -> NodeId {
        let name = self.sym(name);
        self.push(ExprKind::Global { name }, None)
    }

    /// A constant; its node is typed. Scalars repeat a lot (`1.0f`, `0.5f`), so equal dense
    /// scalars share one table entry and one allocation within a function.
    pub fn constant(&mut self, c: impl Into<Arc<Constant>>) -> NodeId {
        let c = c.into();
        let scalar_key = match &*c {
            Constant::Dense(t) if t.shape().is_empty() => t.to_bits_scalar().map(|bits| (t.dtype(), bits)),
            _ => None,
        };
        if let Some(key) = scalar_key {
            if let Some(&(idx, ref ty)) = self.scalar_consts.get(&key) {
                let ty = ty.clone();
                return self.push(ExprKind::Const { idx }, Some(ty));
            }
        }
        let ty = c.ty();
        let idx = ConstIdx(self.consts.len() as u32);
        self.consts.push(c);
        if let Some(key) = scalar_key {
            self.scalar_consts.insert(key, (idx, ty.clone()));
        }
        self.push(ExprKind::Const { idx }, Some(ty))
    }

    /// A constant whose type the caller knows already (the parser shares scalar constants
    /// and their types across functions; a copy keeps the type of the node it copies). Unlike
    /// [`FunctionBuilder::constant`] it does not look for an equal scalar in the table.
    pub fn constant_typed(&mut self, c: Arc<Constant>, ty: Type) -> NodeId {
        let idx = ConstIdx(self.consts.len() as u32);
        self.consts.push(c);
        self.push(ExprKind::Const { idx }, Some(ty))
    }

    /// An operator call.
    pub fn call(&mut self, op: OpId, args: &[NodeId], attrs: Attrs) -> NodeId {
        let attrs = self.attrs(attrs);
        let args = self.range(args);
        self.push(ExprKind::Call { op, attrs, args }, None)
    }

    /// Interns call attributes (the empty set is always index 0).
    pub fn attrs(&mut self, attrs: Attrs) -> AttrsIdx {
        if attrs.is_empty() {
            return AttrsIdx(0);
        }
        self.call_attrs.push(attrs);
        AttrsIdx(self.call_attrs.len() as u32 - 1)
    }

    /// A call of a function value.
    pub fn apply(&mut self, callee: NodeId, args: &[NodeId]) -> NodeId {
        let args = self.range(args);
        self.push(ExprKind::Apply { callee, args }, None)
    }

    /// A tuple.
    pub fn tuple(&mut self, fields: &[NodeId]) -> NodeId {
        let fields = self.range(fields);
        self.push(ExprKind::Tuple { fields }, None)
    }

    /// A tuple projection.
    pub fn proj(&mut self, tuple: NodeId, index: u32) -> NodeId {
        self.push(ExprKind::Proj { tuple, index }, None)
    }

    /// A conditional.
    pub fn if_(&mut self, cond: NodeId, then_: NodeId, else_: NodeId) -> NodeId {
        self.push(ExprKind::If { cond, then_, else_ }, None)
    }

    /// A nested function.
    pub fn closure(&mut self, params: &[NodeId], body: NodeId, ret_ty: Option<Type>, attrs: Attrs) -> NodeId {
        let params = self.range(params);
        let idx = ClosureIdx(self.closures.len() as u32);
        self.closures.push(Closure { params, body, ret_ty, attrs });
        self.push(ExprKind::Func { idx }, None)
    }

    /// A block of `(var, value)` bindings and a result. A block without bindings is just its
    /// result, so `{ e }` and `e` are the same IR.
    pub fn block(&mut self, bindings: &[(NodeId, NodeId)], result: NodeId) -> NodeId {
        if bindings.is_empty() {
            return result;
        }
        let start = self.extra.len() as u32;
        for &(var, value) in bindings {
            self.extra.push(var);
            self.extra.push(value);
        }
        let bindings = IdRange { start, len: bindings.len() as u32 * 2 };
        self.push(ExprKind::Block { bindings, result }, None)
    }

    /// Empties the builder but keeps its buffers, for building the next function.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.types.clear();
        self.spans.clear();
        self.extra.clear();
        match Arc::get_mut(&mut self.syms) {
            Some(syms) => {
                syms.text.clear();
                syms.ends.clear();
            }
            None => self.syms = Arc::default(),
        }
        self.sym_index.clear();
        self.scalar_consts.clear();
        self.consts.clear();
        self.call_attrs.clear();
        self.call_attrs.push(Attrs::new());
        self.closures.clear();
        self.span = Span::default();
        self.malformed = false;
    }

    /// Finishes the function into exactly sized tables and leaves the builder empty with its
    /// buffers kept: a parser building thousands of functions grows its tables once, and the
    /// functions hold no growth slack.
    pub(crate) fn finish_and_clear(
        &mut self,
        params: &[NodeId],
        body: NodeId,
        ret_ty: Option<Type>,
        attrs: Attrs,
    ) -> Function {
        let params = self.range(params);
        if !self.spans.is_empty() && self.spans.len() != self.nodes.len() {
            self.spans.vec_mut().resize(self.nodes.len(), Span::default());
        }
        let syms = SymTable { text: self.syms.text.as_str().into(), ends: self.syms.ends.to_vec() };
        let well_formed = self.finish_well_formed(params, body);
        let f = Function {
            nodes: self.nodes.drain(..).collect(),
            types: self.types.types.drain(..).collect(),
            spans: self.spans.finish_and_clear(),
            extra: self.extra.to_vec(),
            syms: Arc::new(syms),
            consts: self.consts.finish_and_clear(),
            call_attrs: self.call_attrs.finish_and_clear(),
            closures: self.closures.finish_and_clear(),
            params,
            body,
            ret_ty,
            attrs,
            well_formed,
        };
        self.clear();
        f
    }

    /// Finishes the function.
    pub fn finish(mut self, params: &[NodeId], body: NodeId, ret_ty: Option<Type>, attrs: Attrs) -> Function {
        let params = self.range(params);
        if !self.spans.is_empty() && self.spans.len() != self.nodes.len() {
            self.spans.vec_mut().resize(self.nodes.len(), Span::default());
        }
        let well_formed = self.finish_well_formed(params, body);
        // A function lives long and is never appended to (`to_builder` copies): return the
        // growth slack of the tables when it is large. The slack `to_builder` leaves (a quarter)
        // is kept, since shrinking it would copy the table once more for little memory.
        fn shrink<T>(v: &mut Vec<T>) {
            if v.capacity() > v.len() + v.len() / 4 + 4 {
                v.shrink_to_fit();
            }
        }
        shrink(&mut self.nodes);
        shrink(&mut self.extra);
        if let Some(syms) = Arc::get_mut(&mut self.syms) {
            syms.shrink_to_fit();
        }
        Function {
            nodes: self.nodes,
            types: self.types.types.into(),
            spans: self.spans.finish(),
            extra: self.extra,
            syms: self.syms,
            consts: self.consts.finish(),
            call_attrs: self.call_attrs.finish(),
            closures: self.closures.finish(),
            params,
            body,
            ret_ty,
            attrs,
            well_formed,
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
    use crate::ir::{ClosureIdx, ConstIdx};

    fn relu() -> OpId {
        crate::op::lookup("relu").expect("relu is registered")
    }

    #[test]
    fn builder_marks_function_well_formed_and_keeps_the_mark_through_copies() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let p = b.var("p", None);
        let r = b.call(relu(), &[p], Attrs::new());
        let f = b.closure(&[p], r, None, Attrs::new());
        let g = b.var("g", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let tup = b.tuple(&[g, k, x]);
        let body = b.block(&[(g, f)], tup);
        let func = b.finish(&[x], body, None, Attrs::new());
        assert!(func.is_well_formed());
        assert!(func.with_types(vec![]).is_well_formed());
        assert!(func.with_attrs(Attrs::new()).is_well_formed());
        let mut b = func.to_builder();
        let y = b.call(relu(), &[x], Attrs::new());
        assert!(b.finish(&[x], y, None, Attrs::new()).is_well_formed());
    }

    #[test]
    fn builder_marks_function_malformed_for_any_bad_id_or_index() {
        type Bad = fn(&mut FunctionBuilder, NodeId) -> NodeId;
        let cases: [(&str, Bad); 10] = [
            ("block with an odd binding range", |b, x| {
                let bindings = b.push_ids(&[x, x, x]);
                b.push(ExprKind::Block { bindings, result: x }, None)
            }),
            ("block without bindings", |b, x| {
                b.push(ExprKind::Block { bindings: IdRange::default(), result: x }, None)
            }),
            ("forward operand", |b, _| b.push_unchecked(ExprKind::Proj { tuple: NodeId(50), index: 0 }, None)),
            ("range past the extra table", |b, _| {
                let args = IdRange { start: 1000, len: 2 };
                b.push_unchecked(ExprKind::Call { op: relu(), attrs: AttrsIdx(0), args }, None)
            }),
            ("unknown closure", |b, _| b.push_unchecked(ExprKind::Func { idx: ClosureIdx(3) }, None)),
            ("closure body after its node", |b, x| {
                let params = b.push_ids(&[x]);
                let idx = b.push_closure(Closure { params, body: NodeId(40), ret_ty: None, attrs: Attrs::new() });
                b.push_unchecked(ExprKind::Func { idx }, None)
            }),
            ("symbol out of range", |b, _| b.push(ExprKind::Global { name: Sym(99) }, None)),
            ("constant out of range", |b, _| b.push(ExprKind::Const { idx: ConstIdx(7) }, None)),
            ("operator out of range", |b, x| {
                let args = b.push_ids(&[x]);
                b.push(ExprKind::Call { op: OpId(u16::MAX), attrs: AttrsIdx(0), args }, None)
            }),
            ("attributes out of range", |b, x| {
                let args = b.push_ids(&[x]);
                b.push(ExprKind::Call { op: relu(), attrs: AttrsIdx(9), args }, None)
            }),
        ];
        for (what, bad) in cases {
            let mut b = FunctionBuilder::new();
            let x = b.var("x", None);
            let node = bad(&mut b, x);
            let func = b.finish(&[x], node, None, Attrs::new());
            assert!(!func.is_well_formed(), "{what}");
            // A builder started from a malformed function stays malformed.
            let b = func.to_builder();
            assert!(!b.finish(&[x], x, None, Attrs::new()).is_well_formed(), "{what} (copied)");
        }

        // A body or parameter outside the arena.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        assert!(!b.finish(&[x], NodeId(5), None, Attrs::new()).is_well_formed());
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        assert!(!b.finish(&[NodeId(9)], x, None, Attrs::new()).is_well_formed());
    }

    const KEEP: NodeId = NodeId(u32::MAX);

    /// `let a = relu(x); let b = relu(x); let c = add(b, b); c` with the ids of `a`, `b`, `c`'s
    /// value and the block.
    fn merge_candidate() -> (Function, [NodeId; 4]) {
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
        assert!(!func.spans.is_empty() && !func.consts.is_empty() && !func.closures.is_empty());
        assert_eq!(func.call_attrs.len(), 2);
        let n = func.num_nodes();

        // A plain copy and a substitution that changes no closure share every table.
        let out = func.substituted(&vec![KEEP; n], &vec![false; n]).expect("nothing to change");
        for copy in [&func.clone(), &out, &func.with_attrs(Attrs::new())] {
            assert!(same_table(&copy.spans, &func.spans));
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
        assert!(same_table(&folded.spans, &func.spans));
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
        assert!(!same_table(&out.spans, &func.spans), "the pushed node has a span");
        assert_eq!(out.spans.len(), n + 1);
        assert_eq!(out.span(k2), None, "a builder from a function starts without a span");
        assert_eq!(out.span(p), Some(Span { start: 1, end: 2 }));
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

    fn f32s(shape: &[u64]) -> Type {
        Type::tensor(shape.to_vec(), DType::F32)
    }

    #[test]
    fn node_is_plain_old_data_of_at_most_24_bytes() {
        fn copy<T: Copy>(t: &T) -> T {
            *t
        }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(f32s(&[2])));
        let node = copy(b.node(x));
        assert!(node.ty.is_some());
        assert!(std::mem::size_of::<Node>() <= 24, "{} bytes", std::mem::size_of::<Node>());
    }

    #[test]
    fn builder_stores_each_distinct_type_once_whatever_the_allocation() {
        let mut b = FunctionBuilder::new();
        // Equal types from distinct allocations, and clones of one allocation.
        let shared = f32s(&[4, 4]);
        let mut vars = Vec::new();
        for i in 0..20 {
            let ty = if i % 2 == 0 { f32s(&[4, 4]) } else { shared.clone() };
            vars.push(b.var(&format!("v{i}"), Some(ty)));
        }
        let other = b.var("o", Some(Type::scalar(DType::I32)));
        let untyped = b.var("u", None);
        let tup = b.tuple(&vars);
        let func = b.finish(&vars, tup, None, Attrs::new());
        assert_eq!(func.type_table(), &[f32s(&[4, 4]), Type::scalar(DType::I32)]);
        assert!(vars.iter().all(|&v| func.ty(v) == Some(&f32s(&[4, 4]))));
        assert_eq!(func.ty(other), Some(&Type::scalar(DType::I32)));
        assert_eq!(func.ty(untyped), None);
        assert_eq!(func.ty(tup), None);
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
    fn copies_and_set_ty_keep_types_by_content() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(f32s(&[2])));
        let y = b.var("y", Some(f32s(&[5])));
        let body = b.tuple(&[x, y]);
        let func = b.finish(&[x, y], body, None, Attrs::new());
        let mut b = func.to_builder();
        assert_eq!((b.ty(x), b.ty(y)), (Some(&f32s(&[2])), Some(&f32s(&[5]))));
        b.set_ty(x, Some(f32s(&[5])));
        b.set_ty(y, Some(f32s(&[7])));
        b.set_ty(body, Some(Type::tuple(vec![f32s(&[5]), f32s(&[7])])));
        let z = b.var("z", Some(f32s(&[2])));
        let w = b.push_ty_ref(ExprKind::Proj { tuple: body, index: 1 }, func.ty(y));
        let u = b.push_ty_ref(ExprKind::Proj { tuple: body, index: 0 }, None);
        b.set_ty_ref(u, func.ty(x));
        b.set_ty_ref(z, None);
        let out = b.finish(&[x, y, z], body, None, Attrs::new());
        assert_eq!((out.ty(x), out.ty(y), out.ty(z)), (Some(&f32s(&[5])), Some(&f32s(&[7])), None));
        assert_eq!((out.ty(w), out.ty(u)), (Some(&f32s(&[5])), Some(&f32s(&[2]))));
        assert_eq!(out.ty(body), Some(&Type::tuple(vec![f32s(&[5]), f32s(&[7])])));
        // The copied table is extended, not duplicated.
        assert_eq!(out.type_table().len(), 4);
        assert_eq!(func.ty(x), Some(&f32s(&[2])));
    }

    #[test]
    fn try_ty_is_none_outside_the_arena() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(f32s(&[2])));
        let func = b.finish(&[x], x, None, Attrs::new());
        assert_eq!(func.try_ty(x), Some(&f32s(&[2])));
        assert_eq!(func.try_ty(NodeId(7)), None);
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(cases()))]

        /// Whatever types are pushed, set and copied, every node reads back the type it was
        /// given, and the table holds no two equal types.
        #[test]
        fn every_node_reads_back_its_type(
            pushed in proptest::collection::vec(proptest::option::of(0usize..6), 1..40),
            later in proptest::collection::vec((0usize..40, proptest::option::of(0usize..6)), 0..20),
        ) {
            let pool = |k: usize| match k {
                0 => Type::scalar(DType::F32),
                1 => Type::scalar(DType::I64),
                2 => f32s(&[2, 3]),
                3 => f32s(&[3, 2]),
                4 => Type::tuple(vec![f32s(&[2]), Type::scalar(DType::Bool)]),
                _ => Type::func(vec![f32s(&[2])], f32s(&[2])),
            };
            let mut b = FunctionBuilder::new();
            let mut expect = Vec::new();
            for (i, k) in pushed.iter().enumerate() {
                b.var(&format!("v{i}"), k.map(pool));
                expect.push(k.map(pool));
            }
            let n = expect.len();
            let func = b.finish(&[NodeId(0)], NodeId(n as u32 - 1), None, Attrs::new());
            let mut b = func.to_builder();
            for &(i, k) in &later {
                let i = i % n;
                b.set_ty(NodeId(i as u32), k.map(pool));
                expect[i] = k.map(pool);
            }
            let out = b.finish(&[NodeId(0)], NodeId(n as u32 - 1), None, Attrs::new());
            let retyped = out.with_types(vec![]);
            for (i, want) in expect.iter().enumerate() {
                proptest::prop_assert_eq!(out.ty(NodeId(i as u32)), want.as_ref());
                proptest::prop_assert_eq!(retyped.ty(NodeId(i as u32)), want.as_ref());
            }
            let table = retyped.type_table();
            for (i, t) in table.iter().enumerate() {
                proptest::prop_assert!(!table[..i].contains(t));
            }
        }
    }
}
