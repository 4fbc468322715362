//! The function builder: pushes nodes whose operands already exist (so the arena stays in
//! post-order), interns names and types, records well-formedness as it goes, and finishes
//! into an immutable [`Function`]. Also the two ways to start a builder from a function (sharing
//! its names, or appending to its arena).

use std::sync::Arc;

use super::attrs::Attrs;
use super::expr::{ExprKind, Node, Span, TyIdx};
use super::function::{Closure, Function};
use super::ids::{AttrsIdx, ClosureIdx, ConstIdx, IdRange, NodeId, OpId, Sym};
use super::tables::{Spans, SymTable, Table, TypeTable};
use super::tensor::Constant;
use super::ty::{DType, Type};

impl Function {
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

/// Builds a [`Function`]. Every push takes operands that already exist, so the arena stays in
/// post-order.
#[derive(Debug)]
pub struct FunctionBuilder {
    nodes: Vec<Node>,
    types: TypeTable,
    spans: Table<Span, Spans>,
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
            if spans.len() + 1 != self.nodes.len() {
                spans.resize(self.nodes.len() - 1, Span::default());
            }
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
        self.spans.get(id.index())
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A span for the span tables' property: none, within a few kilobytes (what the parser
    /// makes), or anywhere and of any length (what does not fit in 4 bytes).
    fn span_strategy() -> impl proptest::strategy::Strategy<Value = Span> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Span::default()),
            (1_000u32..5_000, 0u32..300).prop_map(|(start, len)| Span { start, end: start + len }),
            (0u32..u32::MAX / 2, 0u32..100_000).prop_map(|(start, len)| Span { start, end: start + len }),
        ]
    }

    #[test]
    fn parsed_functions_keep_spans_in_four_bytes() {
        let module = crate::ir::parse_module("def @f(%x) { let %y = relu(%x); %y }").expect("parses");
        let func = module.get("f").expect("defined");
        assert!(matches!(func.spans, Spans::Near { .. }), "{:?}", func.spans);
        let long = format!("def @g() {{ tensor<({}), f32>[{}] }}", 20_000, vec!["1.0"; 20_000].join(", "));
        let module = crate::ir::parse_module(&long).expect("parses");
        let func = module.get("g").expect("defined");
        assert!(matches!(func.spans, Spans::Far(_)), "a literal longer than 64 KiB");
        // `{ e }` is `e`: the body is the literal, which ends before ` }`.
        let body = func.span(func.body()).expect("the body has a span");
        let literal = long.find("tensor").expect("in the text");
        assert_eq!((body.start, body.end), (literal as u32, long.len() as u32 - 2));
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(cases()))]

        /// Whatever spans are pushed (none, near each other, or far apart and long), every
        /// node reads back its span from the finished function, from a copy that appends
        /// nodes, and from a builder that finishes and clears.
        #[test]
        fn every_node_reads_back_its_span(
            pushed in proptest::collection::vec(span_strategy(), 1..40),
            appended in proptest::collection::vec(span_strategy(), 0..10),
        ) {
            let mut b = FunctionBuilder::new();
            for (i, span) in pushed.iter().enumerate() {
                b.set_span(*span);
                b.var(&format!("v{i}"), None);
            }
            let n = pushed.len() as u32;
            let func = b.finish_and_clear(&[NodeId(0)], NodeId(n - 1), None, Attrs::new());
            let reread = |f: &Function, i: usize| f.span(NodeId(i as u32)).unwrap_or_default();
            for (i, span) in pushed.iter().enumerate() {
                proptest::prop_assert_eq!(reread(&func, i), *span);
                proptest::prop_assert_eq!(b.span_at(NodeId(i as u32)), Span::default());
            }
            let mut copy = func.to_builder();
            for (i, span) in appended.iter().enumerate() {
                copy.set_span(*span);
                copy.var(&format!("w{i}"), None);
            }
            let out = copy.finish(&[NodeId(0)], NodeId(n - 1), None, Attrs::new());
            for (i, span) in pushed.iter().chain(&appended).enumerate() {
                proptest::prop_assert_eq!(reread(&out, i), *span);
            }
            proptest::prop_assert_eq!(reread(&out, pushed.len() + appended.len()), Span::default());
        }

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
