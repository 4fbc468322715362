//! The interning tables behind a function and its builder: the symbol table, the type table
//! (each distinct type once, looked up by address and by value), and the side tables shared
//! copy-on-write between a function, its copies and the builders made from it (spans among
//! them, stored in 4 bytes each when they fit).

use std::sync::Arc;

use super::expr::{Span, TyIdx};
use super::ids::Sym;
use super::ty::Type;

/// The symbol table of a function: every name's text in one buffer, so that interning a name
/// costs no allocation of its own (a function has one symbol per variable).
#[derive(Clone, Debug, Default)]
pub(super) struct SymTable {
    pub(super) text: String,
    /// `ends[i]` is where symbol `i` ends in `text`; it starts where symbol `i - 1` ends.
    pub(super) ends: Vec<u32>,
}

impl SymTable {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..end)
    }

    pub(super) fn push(&mut self, s: &str) -> Sym {
        let sym = Sym(self.ends.len() as u32);
        self.text.push_str(s);
        self.ends.push(self.text.len() as u32);
        sym
    }

    pub(super) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// A type table under construction: a node refers to its type by index. A type is looked up by
/// its allocation first (types are shared `Arc`s, so a copied node's type usually is the very
/// entry) and then by content, so the table holds each distinct type once. Equality of types is
/// by content everywhere, so a duplicate entry would be harmless, only wasteful.
#[derive(Debug)]
pub(super) struct TypeTable {
    pub(super) types: Vec<Type>,
    /// Addresses of the allocations of the entries and of `aliases`. The table keeps every keyed
    /// allocation alive, so an address is never reused for another type while it is a key.
    pub(super) by_addr: rustc_hash::FxHashMap<usize, TyIdx>,
    pub(super) by_value: rustc_hash::FxHashMap<Type, TyIdx>,
    /// Allocations equal to an entry but not the entry itself, kept alive for `by_addr`: type
    /// inference makes a fresh type per call and clones it to the users, so later lookups of
    /// the same allocation cost no hashing of the content.
    pub(super) aliases: Vec<Type>,
    /// Recently looked-up allocations and their indices, by a few bits of the address (a
    /// function uses few distinct types; address 0 marks an empty slot).
    pub(super) recent: [(usize, TyIdx); RECENT],
    /// How many leading entries the maps cover: a table copied from a function is indexed on
    /// its first lookup, so copying a function's table costs no hashing until a type is added.
    pub(super) indexed: usize,
}

pub(super) const RECENT: usize = 32;

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
    pub(super) fn from_types(types: &[Type]) -> TypeTable {
        TypeTable { types: types.to_vec(), ..TypeTable::default() }
    }

    /// The type at `idx`, or `None` for an untyped node.
    #[inline]
    pub(super) fn get(&self, idx: TyIdx) -> Option<&Type> {
        self.types.get(idx.get()?)
    }

    /// The index of `ty`, adding it when no equal type is in the table.
    #[inline]
    pub(super) fn intern(&mut self, ty: Option<&Type>) -> TyIdx {
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
    pub(super) fn lookup_or_add(&mut self, ty: &Type, addr: usize) -> TyIdx {
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

    pub(super) fn clear(&mut self) {
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
pub(super) struct Shared<T>(pub(super) Option<Arc<[T]>>);

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
    pub(super) fn make_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Some(table) => Arc::make_mut(table),
            None => &mut [],
        }
    }
}

/// A function's table as a [`Table`] shares it until its builder first adds to it.
pub(super) trait SharedTable<T>: Default {
    /// Number of entries.
    fn len(&self) -> usize;
    /// Appends the entries to `out`.
    fn append_to(&self, out: &mut Vec<T>);
    /// The table of the entries of `v`, which is left empty with its capacity.
    fn take_from(v: &mut Vec<T>) -> Self;
}

impl<T: Clone> SharedTable<T> for Shared<T> {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }

    fn append_to(&self, out: &mut Vec<T>) {
        out.extend_from_slice(self);
    }

    fn take_from(v: &mut Vec<T>) -> Self {
        if v.is_empty() {
            Shared(None)
        } else {
            Shared(Some(v.drain(..).collect()))
        }
    }
}

/// A function's source spans (node `i` has span `i`; `Span::default()` is "no span"), shared
/// like the other side tables. A parsed function's spans lie within a few kilobytes of its
/// text, so they are stored relative to their smallest start, as a `u16` offset and a `u16`
/// length: 4 bytes a node instead of 8. A function whose spans do not fit (one longer than
/// 64 KiB, such as a large dense literal) keeps them whole.
#[derive(Clone, Debug, Default)]
pub(super) enum Spans {
    /// No spans (a function built by a pass from nothing, or read from a binary module).
    #[default]
    None,
    /// `[start - base, end - start]` per node, or [`Spans::NO_SPAN`].
    Near { base: u32, spans: Arc<[[u16; 2]]> },
    /// The spans as they are.
    Far(Arc<[Span]>),
}

impl Spans {
    /// The entry of a node without a span in [`Spans::Near`]; no span encodes to it, since
    /// an offset of `u16::MAX` does not fit.
    const NO_SPAN: [u16; 2] = [u16::MAX; 2];

    /// The span of node `i` (`Span::default()` when it has none or is past the end).
    #[inline]
    pub(super) fn get(&self, i: usize) -> Span {
        match self {
            Spans::None => Span::default(),
            Spans::Near { base, spans } => match spans.get(i) {
                Some(&[offset, len]) if offset != u16::MAX => {
                    let start = base + u32::from(offset);
                    Span { start, end: start + u32::from(len) }
                }
                _ => Span::default(),
            },
            Spans::Far(spans) => spans.get(i).copied().unwrap_or_default(),
        }
    }

    /// The table of `spans`, 4 bytes a span when every span fits. Two branch-light passes over
    /// the spans (the parser encodes every function's spans when it finishes the function).
    fn encode(spans: &[Span]) -> Spans {
        if spans.is_empty() {
            return Spans::None;
        }
        // Over the spans that are not `Span::default()`: the smallest and largest start, and
        // whether every length fits (an end before its start wraps to a large length).
        let (mut base, mut last_start, mut longest) = (u32::MAX, 0, 0);
        for s in spans {
            let some = s.start | s.end != 0;
            base = base.min(if some { s.start } else { u32::MAX });
            last_start = last_start.max(if some { s.start } else { 0 });
            longest = longest.max(if some { s.end.wrapping_sub(s.start) } else { 0 });
        }
        let base = if base == u32::MAX { 0 } else { base };
        if longest > u32::from(u16::MAX) || last_start - base >= u32::from(u16::MAX) {
            return Spans::Far(spans.into());
        }
        let mut near = Vec::with_capacity(spans.len());
        near.extend(spans.iter().map(|s| {
            if s.start | s.end == 0 {
                Spans::NO_SPAN
            } else {
                [(s.start - base) as u16, (s.end - s.start) as u16]
            }
        }));
        Spans::Near { base, spans: near.into() }
    }

    /// Whether `a` and `b` are the same shared table (or both empty).
    #[cfg(test)]
    pub(super) fn same(a: &Spans, b: &Spans) -> bool {
        match (a, b) {
            (Spans::None, Spans::None) => true,
            (Spans::Near { spans: a, .. }, Spans::Near { spans: b, .. }) => Arc::ptr_eq(a, b),
            (Spans::Far(a), Spans::Far(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl From<Vec<Span>> for Spans {
    fn from(mut v: Vec<Span>) -> Self {
        Spans::take_from(&mut v)
    }
}

impl SharedTable<Span> for Spans {
    fn len(&self) -> usize {
        match self {
            Spans::None => 0,
            Spans::Near { spans, .. } => spans.len(),
            Spans::Far(spans) => spans.len(),
        }
    }

    fn append_to(&self, out: &mut Vec<Span>) {
        match self {
            Spans::Far(spans) => out.extend_from_slice(spans),
            _ => out.extend((0..self.len()).map(|i| self.get(i))),
        }
    }

    fn take_from(v: &mut Vec<Span>) -> Self {
        let spans = Spans::encode(v);
        v.clear();
        spans
    }
}

/// A side table of a builder: the table of the function it started from, shared until the
/// builder first adds to it (most builders from `to_builder` add no
/// constant, attribute or closure), then a vector of its own.
#[derive(Debug)]
pub(super) enum Table<T, S = Shared<T>> {
    Shared(S),
    Owned(Vec<T>),
}

impl<T, S> Default for Table<T, S> {
    fn default() -> Self {
        Table::Owned(Vec::new())
    }
}

impl<T: Clone> std::ops::Deref for Table<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Table::Shared(t) => t,
            Table::Owned(v) => v,
        }
    }
}

impl Table<Span, Spans> {
    /// The span of node `i` (`Span::default()` when it has none or is past the end).
    #[inline]
    pub(super) fn get(&self, i: usize) -> Span {
        match self {
            Table::Shared(t) => t.get(i),
            Table::Owned(v) => v.get(i).copied().unwrap_or_default(),
        }
    }
}

impl<T, S: SharedTable<T>> Table<T, S> {
    /// Number of entries.
    #[inline]
    pub(super) fn len(&self) -> usize {
        match self {
            Table::Shared(t) => t.len(),
            Table::Owned(v) => v.len(),
        }
    }

    /// Whether the table has no entry.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vector to add to, copying a shared table first (with room for a few more entries,
    /// since a builder that adds one usually adds several).
    #[inline(always)]
    pub(super) fn vec_mut(&mut self) -> &mut Vec<T> {
        // Inlined: builders push a span per node, and the table is nearly always owned.
        if let Table::Owned(v) = self {
            return v;
        }
        self.unshare()
    }

    #[cold]
    #[inline(never)]
    pub(super) fn unshare(&mut self) -> &mut Vec<T> {
        let len = self.len();
        let mut v = Vec::with_capacity(len + len / 4 + 4);
        if let Table::Shared(t) = self {
            t.append_to(&mut v);
        }
        *self = Table::Owned(v);
        match self {
            Table::Owned(v) => v,
            Table::Shared(_) => unreachable!("made owned above"),
        }
    }

    pub(super) fn push(&mut self, value: T) {
        self.vec_mut().push(value);
    }

    /// The finished table; a shared one stays shared, a vector becomes exactly sized.
    pub(super) fn finish(self) -> S {
        match self {
            Table::Shared(t) => t,
            Table::Owned(mut v) => S::take_from(&mut v),
        }
    }

    /// The finished table, leaving this one empty with its vector (when it has one) kept for
    /// the next function.
    pub(super) fn finish_and_clear(&mut self) -> S {
        match self {
            Table::Shared(t) => {
                let t = std::mem::take(t);
                *self = Table::Owned(Vec::new());
                t
            }
            Table::Owned(v) => S::take_from(v),
        }
    }

    /// Empties the table, keeping its vector (when it has one).
    pub(super) fn clear(&mut self) {
        match self {
            Table::Shared(_) => *self = Table::Owned(Vec::new()),
            Table::Owned(v) => v.clear(),
        }
    }
}
