//! The interning tables behind a function and its builder: the symbol table, the type table
//! (each distinct type once, looked up by address and by value), and the side tables shared
//! copy-on-write between a function, its copies and the builders made from it.

use std::sync::Arc;

use super::expr::TyIdx;
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

/// A side table of a builder: the table of the function it started from, shared until the
/// builder first adds to it (most builders from `to_builder` add no
/// constant, attribute or closure), then a vector of its own.
#[derive(Debug)]
pub(super) enum Table<T> {
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
        let mut v = Vec::with_capacity(self.len() + self.len() / 4 + 4);
        v.extend_from_slice(self);
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
    pub(super) fn finish(self) -> Shared<T> {
        match self {
            Table::Shared(t) => t,
            Table::Owned(v) => v.into(),
        }
    }

    /// The finished table, leaving this one empty with its vector (when it has one) kept for
    /// the next function.
    pub(super) fn finish_and_clear(&mut self) -> Shared<T> {
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
    pub(super) fn clear(&mut self) {
        match self {
            Table::Shared(_) => *self = Table::Owned(Vec::new()),
            Table::Owned(v) => v.clear(),
        }
    }
}
