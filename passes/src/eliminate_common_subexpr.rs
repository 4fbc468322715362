//! EliminateCommonSubexpr (function pass, opt level 1, requires InferType): merges bindings
//! that compute the same pure value.
//!
//! What it does: when `let %b = e;` computes a value structurally identical to an earlier
//! `let %a = e';` that is in scope (same block, earlier, or an enclosing block or function),
//! uses of `%b` become `%a` and the binding of `%b` is removed. Identity is judged by value
//! numbers: atoms number by identity (variables by their binding, so `let b = a` and `a`
//! agree; constants by value, bitwise; globals by name), and a compound expression numbers by
//! its kind, operator, attributes (by value) and its operands' numbers, so whole expression
//! trees such as `add(relu(x), y)` match, and so do `g(%a)` and `g(f(x))` when `%a = f(x)`.
//!
//! What it deliberately does not do:
//! - merge anything containing a stateful operator call or an `Apply` (a function value may
//!   have effects), closures (`fn` values) or blocks;
//! - merge across sibling scopes (the two branches of an `if`, or two nested blocks): the
//!   earlier variable would be out of scope;
//! - merge identical subexpressions nested inside binding values (only whole binding values
//!   merge; nested duplicates need a new binding, which is ToANormalForm's business);
//! - remove bindings made dead by merging (DeadCodeElimination does).
//!
//! Phases:
//! 1. Number values in evaluation order (the IR's [`Walker`]), keeping a scoped table from
//!    value number to the variable that holds it; each block's entries are removed when the
//!    block ends.
//!
//!    With the pass context's workers (`-j2` and up) and at least
//!    `relay.EliminateCommonSubexpr.min_parallel_bytes` of large constants that share a
//!    fingerprint, the element-by-element comparisons of those constants run first, on the
//!    workers ([`const_classes`]); numbering then reads each constant's equality class. The
//!    classes are exactly the equalities the serial numbering finds, so value numbers — and
//!    the output — do not depend on the thread count.
//! 2. Remove the merged bindings and replace their variables ([`rewrite::substitute`]: a
//!    patched copy of the arena, or, when the patch is refused, a copy of the live nodes with
//!    the variables aliased); nothing merged → the same `Arc`.

use std::cell::RefCell;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::ops::ControlFlow;
use std::sync::Arc;

use passel_engine::ir::{Attrs, Constant, Enter, ExprKind, Function, NodeId, OpId, TensorData, WalkHooks, Walker};
use passel_engine::op;
use passel_engine::transform::ConfigType;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHasher};

use crate::scratch::{self, with_scratch};
use crate::census::{fewer, Counter};
use passel_engine::ir::rewrite::{self, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "EliminateCommonSubexpr";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `EliminateCommonSubexpr` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 1, |func, _module, ctx| {
        let min_bytes = ctx.get_config::<i64>(MIN_PARALLEL_BYTES_KEY, DEFAULT_MIN_PARALLEL_BYTES as i64);
        let workers = ctx.workers().map(|pool| (pool, u64::try_from(min_bytes).unwrap_or(0)));
        Ok(crate::census::counted(ctx, &func, eliminate_common_subexpr_with_workers(&func, workers), STATISTICS))
    })
    .with_required(&["InferType"])
}

pub(crate) static STATISTICS: &[Counter] = &[(&BINDINGS_MERGED, |b, a| fewer(b.bindings, a.bindings))];
static BINDINGS_MERGED: Statistic =
    Statistic::new("EliminateCommonSubexpr", "bindings merged", "bindings replaced by an equal earlier one");

/// Config key: the bytes of large constants sharing a fingerprint from which their
/// comparisons run on the pass context's workers before numbering ([`const_classes`]).
pub const MIN_PARALLEL_BYTES_KEY: &str = "relay.EliminateCommonSubexpr.min_parallel_bytes";

/// Default of [`MIN_PARALLEL_BYTES_KEY`]: 1 MiB (below it a fork-join costs about what it
/// saves).
pub const DEFAULT_MIN_PARALLEL_BYTES: u64 = 1 << 20;

passel_engine::register_config!(
    MIN_PARALLEL_BYTES_KEY,
    ConfigType::Int,
    "with more than one thread, EliminateCommonSubexpr compares a function's large constants on the workers before numbering when those sharing a fingerprint take at least this many bytes (default 1048576); the output is the same either way",
    min = 0
);

const NO_VN: u32 = u32::MAX;

/// Calls and tuples with more operands than this are never merged (their operands are not
/// compared).
const MAX_OPERANDS: usize = 8;

/// Per-thread buffers reused across functions (cleared, not freed), so that numbering a
/// function allocates nothing once the buffers have grown to the usual size.
#[derive(Default)]
struct Scratch {
    vn: Vec<u32>,
    /// Value number → an old node carrying it (to confirm hash matches).
    reps: Vec<NodeId>,
    /// Compound values by hash, and rank-0 dense constants by dtype and bits (hashing a
    /// `Constant` allocates).
    table: VnTable,
    /// Value number → the variable in scope that holds it (`NONE` when none).
    avail: Vec<NodeId>,
    /// Value numbers made available, in order, so that a block's entries can be withdrawn.
    log: Vec<u32>,
    /// `log`'s length when each open block was entered.
    marks: Vec<u32>,
    walker: Walker,
    /// Constant index → `(generation, value number)`: a function refers to few distinct
    /// constants, many times each.
    const_vn: Vec<(u32, u32)>,
    const_generation: u32,
    aliases: Vec<(NodeId, NodeId)>,
    subst: Vec<NodeId>,
    dropped: Vec<bool>,
    /// Operator id → 1 pure, 2 stateful, 0 not looked up yet: the registry lookup costs
    /// more than the rest of numbering a call.
    stateful: Vec<u8>,
}

impl Scratch {
    fn reset(&mut self, n: usize) {
        self.vn.clear();
        self.vn.resize(n, NO_VN);
        self.reps.clear();
        self.table.reset(n);
        self.const_generation = self.const_generation.wrapping_add(1);
        if self.const_generation == 0 {
            self.const_vn.clear();
            self.const_generation = 1;
        }
        self.avail.clear();
        self.avail.resize(n, NONE);
        self.log.clear();
        self.marks.clear();
        self.aliases.clear();
    }
}

impl scratch::Scratch for Scratch {
    fn retained(&self) -> usize {
        self.vn.capacity().max(self.table.slots.len())
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs EliminateCommonSubexpr on `func`; returns `func` itself when nothing merges.
pub fn eliminate_common_subexpr(func: &Arc<Function>) -> Arc<Function> {
    eliminate_common_subexpr_with_workers(func, None)
}

/// [`eliminate_common_subexpr`] comparing large constants on `workers` first when those
/// that share a fingerprint take at least the given bytes ([`const_classes`]); the output
/// is the same with any pool or none.
pub fn eliminate_common_subexpr_with_workers(
    func: &Arc<Function>,
    workers: Option<(Arc<rayon::ThreadPool>, u64)>,
) -> Arc<Function> {
    if !func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Block { bindings, .. } if bindings.len >= 4))
        || !func.is_well_formed()
    {
        return Arc::clone(func);
    }
    let classes = workers.map(|(pool, min_bytes)| const_classes(func, &pool, min_bytes)).unwrap_or_default();
    with_scratch(&SCRATCH, |s| merge(func, s, classes))
}

fn merge(func: &Arc<Function>, s: &mut Scratch, classes: FxHashMap<u32, u32>) -> Arc<Function> {
    find_merges(func, s, classes);
    if s.aliases.is_empty() {
        return Arc::clone(func);
    }
    let n = func.num_nodes();
    s.subst.clear();
    s.subst.resize(n, NONE);
    s.dropped.clear();
    s.dropped.resize(n, false);
    for &(var, target) in &s.aliases {
        s.subst[var.index()] = target;
        s.dropped[var.index()] = true;
    }
    match rewrite::substitute(func, &s.subst, &s.dropped) {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}

/// An open-addressing map from `(key, aux)` to a value number, cleared in O(1) per function
/// by a generation stamp. `aux` is 0 for hashes of compound nodes and `1 + dtype tag` for
/// scalar constants, whose `key` is their bits.
#[derive(Default)]
struct VnTable {
    slots: Vec<Slot>,
    len: usize,
    generation: u32,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    aux: u32,
    val: u32,
    generation: u32,
}

impl VnTable {
    /// Empties the table, with room for about `n` entries.
    fn reset(&mut self, n: usize) {
        self.len = 0;
        self.generation = self.generation.wrapping_add(1);
        let want = (n * 2).next_power_of_two().max(64);
        if self.slots.len() < want || self.generation == 0 {
            self.slots.clear();
            self.slots.resize(want.max(self.slots.len()), Slot::default());
            self.generation = 1;
        }
    }

    #[inline]
    fn index(&self, key: u64, aux: u32) -> usize {
        (mix(key, aux as u64) >> 32) as usize & (self.slots.len() - 1)
    }

    #[cfg(test)]
    fn get(&self, key: u64, aux: u32) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.index(key, aux);
        loop {
            let slot = &self.slots[i];
            if slot.generation != self.generation {
                return None;
            }
            if slot.key == key && slot.aux == aux {
                return Some(slot.val);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds an entry for a key that is not in the table.
    fn insert(&mut self, key: u64, aux: u32, val: u32) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.index(key, aux);
        while self.slots[i].generation == self.generation {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { key, aux, val, generation: self.generation };
        self.len += 1;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let generation = self.generation;
        self.slots = vec![Slot::default(); old.len() * 2];
        self.generation = 1;
        self.len = 0;
        for slot in old.into_iter().filter(|s| s.generation == generation) {
            self.insert(slot.key, slot.aux, slot.val);
        }
    }

    /// The value of `(key, aux)`, or `None` after inserting `fresh` for it: one probe
    /// sequence for both, since most keys are new.
    #[inline]
    fn find_or_insert(&mut self, key: u64, aux: u32, fresh: u32) -> Option<u32> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.index(key, aux);
        loop {
            let slot = &mut self.slots[i];
            if slot.generation != self.generation {
                *slot = Slot { key, aux, val: fresh, generation: self.generation };
                self.len += 1;
                return None;
            }
            if slot.key == key && slot.aux == aux {
                return Some(slot.val);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `(key, aux)`, inserting `fresh` when there is none.
    #[inline]
    fn get_or_insert(&mut self, key: u64, aux: u32, fresh: u32) -> u32 {
        self.find_or_insert(key, aux, fresh).unwrap_or(fresh)
    }
}

/// One step of FxHash's mixing (the hash only picks candidates; [`Numbering::same`] confirms).
#[inline]
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0xf135_7aea_2e62_a9c5)
}

struct Numbering<'f, 's> {
    func: &'f Function,
    s: &'s mut Scratch,
    consts: ConstNumbers<'f>,
    globals: FxHashMap<&'f str, u32>,
}

impl Numbering<'_, '_> {
    #[inline]
    fn fresh(&mut self, rep: NodeId) -> u32 {
        self.s.reps.push(rep);
        self.s.reps.len() as u32 - 1
    }

    /// Numbers atom `id` (a variable not bound yet gets a fresh number).
    #[inline(always)]
    fn atom(&mut self, id: NodeId) {
        let func = self.func;
        match *func.kind(id) {
            ExprKind::Var { .. } if self.s.vn[id.index()] == NO_VN => {
                self.s.vn[id.index()] = self.fresh(id);
            }
            ExprKind::Var { .. } => {}
            ExprKind::Global { name } => {
                let next = self.s.reps.len() as u32;
                let v = *self.globals.entry(func.sym(name)).or_insert(next);
                if v == next {
                    self.s.reps.push(id);
                }
                self.s.vn[id.index()] = v;
            }
            ExprKind::Const { idx } => {
                let i = idx.0 as usize;
                let generation = self.s.const_generation;
                if let Some(&(g, v)) = self.s.const_vn.get(i) {
                    if g == generation {
                        self.s.vn[id.index()] = v;
                        return;
                    }
                }
                let next = self.s.reps.len() as u32;
                let c = &**func.constant(idx);
                let v = match scalar_key(c) {
                    Some((tag, bits)) => self.s.table.get_or_insert(bits, 1 + tag as u32, next),
                    None => self.consts.number(idx.0, c, next),
                };
                if v == next {
                    self.s.reps.push(id);
                }
                self.s.vn[id.index()] = v;
                if self.s.const_vn.len() <= i {
                    self.s.const_vn.resize(i + 1, (0, 0));
                }
                self.s.const_vn[i] = (generation, v);
            }
            _ => {}
        }
    }

    /// Numbers `id` right away when it is an atom, or a call or tuple of atoms (the usual
    /// binding value); `false` for anything else, with only some of its atom operands
    /// numbered (in order, as the caller's traversal would number them next anyway).
    ///
    /// This is [`Numbering::number`] fused with numbering the operands: one read of each
    /// operand and one probe of the table, with the same key.
    #[inline]
    fn simple(&mut self, id: NodeId) -> bool {
        let func = self.func;
        let (args, mut h, pure) = match *func.kind(id) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {
                self.atom(id);
                return true;
            }
            ExprKind::Call { op, attrs, args } => {
                let pure = !self.stateful(op);
                let mut h = mix(1, op.0 as u64);
                if pure && attrs.0 != 0 {
                    h = mix(h, attrs_hash(func.call_attrs(attrs)));
                }
                (args, h, pure)
            }
            ExprKind::Tuple { fields } => (fields, mix(2, 0), true),
            _ => return false,
        };
        let mut numbered = true;
        for &o in func.ids(args) {
            if !func.kind(o).is_atom() {
                return false;
            }
            self.atom(o);
            let v = self.s.vn[o.index()];
            numbered &= v != NO_VN;
            h = mix(h, v as u64);
        }
        self.s.vn[id.index()] = if pure && numbered { self.lookup(id, h) } else { NO_VN };
        true
    }

    /// Whether calls of `op` have effects ([`is_stateful`]), cached per operator.
    #[inline]
    fn stateful(&mut self, op: OpId) -> bool {
        let i = op.0 as usize;
        let cache = &mut self.s.stateful;
        match cache.get(i) {
            Some(&1) => false,
            Some(&2) => true,
            _ => {
                let stateful = op::is_stateful(op);
                if cache.len() <= i {
                    cache.resize(i + 1, 0);
                }
                cache[i] = if stateful { 2 } else { 1 };
                stateful
            }
        }
    }

    /// The number of compound node `id` whose hash key is `key`: the number of an earlier
    /// equal node, or a fresh one.
    #[inline]
    fn lookup(&mut self, id: NodeId, key: u64) -> u32 {
        let fresh = self.s.reps.len() as u32;
        match self.s.table.find_or_insert(key, 0, fresh) {
            Some(v) if self.same(self.s.reps[v as usize], id) => v,
            // A 64-bit hash collision: give up merging this node rather than compare deeper.
            Some(_) => self.fresh(id),
            None => {
                self.s.reps.push(id);
                fresh
            }
        }
    }

    /// `let var = value;` with `value` numbered: `var` gets its number, and becomes the
    /// holder of that value in scope, or merges into the earlier holder.
    fn bind(&mut self, var: NodeId, value: NodeId) {
        let v = self.s.vn[value.index()];
        if v == NO_VN {
            self.s.vn[var.index()] = self.fresh(var);
            return;
        }
        self.s.vn[var.index()] = v;
        if self.func.kind(value).is_atom() {
            return;
        }
        let s = &mut *self.s;
        if s.avail.len() <= v as usize {
            s.avail.resize(s.reps.len().max(v as usize + 1) * 2, NONE);
        }
        match s.avail[v as usize] {
            NONE => {
                s.avail[v as usize] = var;
                s.log.push(v);
            }
            earlier => s.aliases.push((var, earlier)),
        }
    }

    /// The number of compound node `id` whose operands are numbered, or `NO_VN`.
    fn number(&mut self, id: NodeId) -> u32 {
        let func = self.func;
        let kind = *func.kind(id);
        if let ExprKind::Call { op, .. } = kind {
            if self.stateful(op) {
                return NO_VN;
            }
        }
        let vn = &self.s.vn;
        let operand = |h: u64, o: NodeId| -> Option<u64> {
            let v = vn[o.index()];
            (v != NO_VN).then(|| mix(h, v as u64))
        };
        let h = match kind {
            ExprKind::Call { op, attrs, args } => {
                let mut h = mix(1, op.0 as u64);
                if attrs.0 != 0 {
                    h = mix(h, attrs_hash(func.call_attrs(attrs)));
                }
                func.ids(args).iter().try_fold(h, |h, &o| operand(h, o))
            }
            ExprKind::Tuple { fields } => func.ids(fields).iter().try_fold(mix(2, 0), |h, &o| operand(h, o)),
            ExprKind::Proj { tuple, index } => operand(mix(3, index as u64), tuple),
            ExprKind::If { cond, then_, else_ } => {
                operand(mix(4, 0), cond).and_then(|h| operand(h, then_)).and_then(|h| operand(h, else_))
            }
            _ => None,
        };
        let Some(key) = h else { return NO_VN };
        self.lookup(id, key)
    }

    fn same(&self, a: NodeId, b: NodeId) -> bool {
        let func = self.func;
        let vn = &self.s.vn;
        let same_ids = |x: &[NodeId], y: &[NodeId]| {
            x.len() == y.len()
                && x.len() <= MAX_OPERANDS
                && x.iter().zip(y).all(|(p, q)| vn[p.index()] == vn[q.index()])
        };
        let eq = |p: NodeId, q: NodeId| vn[p.index()] == vn[q.index()];
        match (*func.kind(a), *func.kind(b)) {
            (ExprKind::Call { op: o1, attrs: t1, args: a1 }, ExprKind::Call { op: o2, attrs: t2, args: a2 }) => {
                o1 == o2
                    && (t1 == t2 || func.call_attrs(t1) == func.call_attrs(t2))
                    && same_ids(func.ids(a1), func.ids(a2))
            }
            (ExprKind::Tuple { fields: f1 }, ExprKind::Tuple { fields: f2 }) => same_ids(func.ids(f1), func.ids(f2)),
            (ExprKind::Proj { index: i1, tuple: t1 }, ExprKind::Proj { index: i2, tuple: t2 }) => {
                i1 == i2 && eq(t1, t2)
            }
            (ExprKind::If { cond: c1, then_: x1, else_: y1 }, ExprKind::If { cond: c2, then_: x2, else_: y2 }) => {
                eq(c1, c2) && eq(x1, x2) && eq(y1, y2)
            }
            _ => false,
        }
    }
}

fn attrs_hash(attrs: &Attrs) -> u64 {
    let mut fx = FxHasher::default();
    attrs.hash(&mut fx);
    fx.finish()
}

/// Value numbers of a function's non-scalar constants, by value.
///
/// Hashing a constant reads every element, and a model's weights are megabytes that almost
/// never repeat; so constants are bucketed by [`Constant::fingerprint`] (type and a few
/// sampled elements) and compared element by element only with the constants of their own
/// bucket, which are, for real weights, the equal ones. A bucket that collects more than
/// [`MAX_BUCKET_CLASSES`] unequal constants (mostly-equal tensors: masks, sparse weights)
/// moves to a table keyed by the full hash, so no input makes numbering quadratic.
#[derive(Default)]
struct ConstNumbers<'f> {
    /// Constant index → the least index of an equal constant, for the constants
    /// [`const_classes`] compared on the workers (empty otherwise).
    classes: FxHashMap<u32, u32>,
    /// Such a least index → its value number.
    class_vn: FxHashMap<u32, u32>,
    buckets: FxHashMap<u64, Bucket<'f>>,
    /// The constants of the buckets that grew too big, by full value.
    by_value: FxHashMap<&'f Constant, u32>,
}

/// Unequal constants whose fingerprints are equal.
enum Bucket<'f> {
    /// At most [`MAX_BUCKET_CLASSES`] constants with their value numbers.
    Few(Vec<(&'f Constant, u32)>),
    /// Moved to [`ConstNumbers::by_value`].
    Many,
}

/// Unequal constants one fingerprint may stand for before its bucket is hashed in full.
const MAX_BUCKET_CLASSES: usize = 4;

impl<'f> ConstNumbers<'f> {
    /// The value number of `c` (at index `idx` of the constant table): that of an equal
    /// constant numbered before, else `fresh`.
    fn number(&mut self, idx: u32, c: &'f Constant, fresh: u32) -> u32 {
        if let Some(&class) = self.classes.get(&idx) {
            return *self.class_vn.entry(class).or_insert(fresh);
        }
        let bucket = self.buckets.entry(c.fingerprint()).or_insert_with(|| Bucket::Few(Vec::new()));
        match bucket {
            Bucket::Few(classes) => {
                if let Some(&(_, v)) = classes.iter().find(|(k, _)| std::ptr::eq(*k, c) || *k == c) {
                    return v;
                }
                if classes.len() < MAX_BUCKET_CLASSES {
                    classes.push((c, fresh));
                    return fresh;
                }
                for (k, v) in std::mem::replace(bucket, Bucket::Many).into_few() {
                    self.by_value.insert(k, v);
                }
                *self.by_value.entry(c).or_insert(fresh)
            }
            Bucket::Many => *self.by_value.entry(c).or_insert(fresh),
        }
    }
}

impl<'f> Bucket<'f> {
    fn into_few(self) -> Vec<(&'f Constant, u32)> {
        match self {
            Bucket::Few(classes) => classes,
            Bucket::Many => Vec::new(),
        }
    }
}

/// The equality classes of `func`'s non-scalar constants that share a fingerprint with
/// another one, compared on `pool`: constant index → the least index of an equal constant.
/// Empty when those constants take fewer than `min_bytes` bytes (numbering then compares them
/// itself, on the calling thread).
///
/// Per fingerprint bucket, in rounds: the first unclassified member is a class's
/// representative and every other unclassified member is compared with it (all buckets'
/// comparisons of a round at once, spread over the workers). These are the comparisons
/// [`ConstNumbers::number`] makes, in another order; a bucket still unclassified after
/// [`MAX_BUCKET_CLASSES`] rounds is left to the numbering (which hashes such buckets in
/// full), so no input makes this quadratic. Equality is the numbering's (`==` on
/// [`Constant`], bitwise), so the classes, and the value numbers, are the serial ones.
fn const_classes(func: &Function, pool: &rayon::ThreadPool, min_bytes: u64) -> FxHashMap<u32, u32> {
    let mut classes = FxHashMap::default();
    let bytes = |c: &Constant| {
        let ty = c.tensor_type();
        ty.num_elements().unwrap_or(0).saturating_mul(ty.dtype.size_bytes() as u64)
    };
    // An upper bound first (a constant read twice counts twice), so that a function of
    // scalars costs one scan of its nodes and no allocation.
    let bound = func.nodes().iter().fold(0u64, |acc, node| match node.kind {
        ExprKind::Const { idx } => acc.saturating_add(bytes(func.constant(idx))),
        _ => acc,
    });
    if bound < min_bytes.max(1) {
        return classes;
    }
    // Non-scalar constants in arena order, each table index once, by fingerprint.
    let mut seen = rustc_hash::FxHashSet::default();
    let mut bucket_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut buckets: Vec<Vec<u32>> = Vec::new();
    for node in func.nodes() {
        let ExprKind::Const { idx } = node.kind else { continue };
        let c = &**func.constant(idx);
        if !seen.insert(idx.0) || scalar_key(c).is_some() {
            continue;
        }
        let b = *bucket_of.entry(c.fingerprint()).or_insert_with(|| {
            buckets.push(Vec::new());
            buckets.len() - 1
        });
        buckets[b].push(idx.0);
    }
    let constant = |i: u32| &**func.constant(passel_engine::ir::ConstIdx(i));
    buckets.retain(|b| b.len() > 1);
    let total = buckets.iter().flatten().fold(0u64, |acc, &i| acc.saturating_add(bytes(constant(i))));
    if total < min_bytes.max(1) {
        return classes;
    }
    let mut pending: Vec<(usize, Vec<u32>)> = buckets.iter().cloned().enumerate().collect();
    for _round in 0..MAX_BUCKET_CLASSES {
        let pairs: Vec<(u32, u32)> = pending.iter().flat_map(|(_, b)| b[1..].iter().map(|&o| (b[0], o))).collect();
        if pairs.is_empty() {
            break;
        }
        let equal: Vec<bool> = pool.install(|| {
            pairs
                .par_iter()
                .with_max_len(1)
                .map(|&(r, o)| {
                    let (a, b) = (constant(r), constant(o));
                    std::ptr::eq(a, b) || a == b
                })
                .collect()
        });
        let mut verdicts = equal.into_iter();
        for (_, b) in &mut pending {
            let rep = b[0];
            classes.insert(rep, rep);
            let mut rest = Vec::new();
            for &o in &b[1..] {
                if verdicts.next() == Some(true) {
                    classes.insert(o, rep);
                } else {
                    rest.push(o);
                }
            }
            // A member left alone is its own class.
            if let [only] = rest[..] {
                classes.insert(only, only);
                rest.clear();
            }
            *b = rest;
        }
        pending.retain(|(_, b)| !b.is_empty());
    }
    // A bucket with more classes than the rounds found goes to the numbering, whole.
    for (bi, _) in &pending {
        for i in &buckets[*bi] {
            classes.remove(i);
        }
    }
    classes
}

/// Identity of a rank-0 dense constant: its dtype and element bits (so `-0.0` and `0.0`
/// differ and NaN payloads are kept apart, as in constant equality).
fn scalar_key(c: &Constant) -> Option<(u8, u64)> {
    let Constant::Dense(t) = c else { return None };
    if !t.shape().is_empty() {
        return None;
    }
    Some(match &t.0 {
        TensorData::F32(a) => (0, a.first()?.to_bits() as u64),
        TensorData::F16(a) => (1, a.first()?.to_bits() as u64),
        TensorData::I64(a) => (2, *a.first()? as u64),
        TensorData::I32(a) => (3, *a.first()? as u32 as u64),
        TensorData::Bool(a) => (4, *a.first()? as u64),
        TensorData::F64(a) => (5, a.first()?.to_bits()),
        TensorData::I8(a) => (6, *a.first()? as u8 as u64),
        TensorData::I16(a) => (7, *a.first()? as u16 as u64),
        TensorData::U8(a) => (8, *a.first()? as u64),
        TensorData::U16(a) => (9, *a.first()? as u64),
        TensorData::U32(a) => (10, *a.first()? as u64),
        TensorData::U64(a) => (11, *a.first()?),
    })
}

/// Phase 1 as hooks of the [`Walker`]: atoms and compound nodes are numbered on the way
/// up (a call or tuple of atoms at once, when entered), a binding makes its value available
/// in scope, and a block's exit withdraws what its bindings made available.
impl WalkHooks for Numbering<'_, '_> {
    type Break = Infallible;

    #[inline(always)]
    fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        Numbering::atom(self, id);
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        ControlFlow::Continue(match kind {
            ExprKind::Block { .. } => {
                let mark = self.s.log.len() as u32;
                self.s.marks.push(mark);
                Enter::Descend
            }
            // The usual binding value, a call or tuple of atoms, is numbered right here.
            ExprKind::Call { .. } | ExprKind::Tuple { .. } if self.simple(id) => Enter::Skip,
            _ => Enter::Descend,
        })
    }

    #[inline(always)]
    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        if let ExprKind::Block { .. } = kind {
            let s = &mut *self.s;
            let mark = s.marks.pop().unwrap_or(0);
            for v in s.log.drain(mark as usize..) {
                s.avail[v as usize] = NONE;
            }
        } else {
            let v = self.number(id);
            self.s.vn[id.index()] = v;
        }
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<Infallible> {
        Numbering::bind(self, var, value);
        ControlFlow::Continue(())
    }
}

/// Finds `(var, earlier var)` pairs to merge, into `s.aliases`; `classes` are the equality
/// classes [`const_classes`] found, if it ran.
fn find_merges(func: &Function, s: &mut Scratch, classes: FxHashMap<u32, u32>) {
    s.reset(func.num_nodes());
    let mut walker = std::mem::take(&mut s.walker);
    let consts = ConstNumbers { classes, ..ConstNumbers::default() };
    let mut num = Numbering { func, s, consts, globals: FxHashMap::default() };
    let ControlFlow::Continue(()) = walker.walk(func, func.body(), &mut num);
    num.s.walker = walker;
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, FunctionBuilder, OpId};
    use passel_engine::op;

    use super::*;

    fn add() -> OpId {
        op::lookup("add").unwrap()
    }
    fn relu() -> OpId {
        op::lookup("relu").unwrap()
    }

    #[test]
    fn eliminate_common_subexpr_merges_identical_trees_and_constants_by_value() {
        // let a = add(relu(x), 1.0); let b = add(relu(x), 1.0); add(a, b)
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r1 = b.call(relu(), &[x], Attrs::new());
        let k1 = b.constant(Constant::scalar_f32(1.0));
        let av = b.call(add(), &[r1, k1], Attrs::new());
        let a = b.var("a", None);
        let r2 = b.call(relu(), &[x], Attrs::new());
        let k2 = b.constant(Constant::scalar_f32(1.0));
        let bv = b.call(add(), &[r2, k2], Attrs::new());
        let bb = b.var("b", None);
        let res = b.call(add(), &[a, bb], Attrs::new());
        let body = b.block(&[(a, av), (bb, bv)], res);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = eliminate_common_subexpr(&func);

        let mut e = FunctionBuilder::new();
        let x = e.var("x", None);
        let r1 = e.call(relu(), &[x], Attrs::new());
        let k1 = e.constant(Constant::scalar_f32(1.0));
        let av = e.call(add(), &[r1, k1], Attrs::new());
        let a = e.var("a", None);
        let res = e.call(add(), &[a, a], Attrs::new());
        let body = e.block(&[(a, av)], res);
        let expected = e.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&out), &out));
    }

    #[test]
    fn eliminate_common_subexpr_patch_equals_rebuild() {
        // let a = relu(x); let b = relu(x); let c = add(a, b); let d = add(b, a); (c, d)
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let cv = b.call(add(), &[a, bb], Attrs::new());
        let c = b.var("c", None);
        let dv = b.call(add(), &[bb, a], Attrs::new());
        let d = b.var("d", None);
        let tup = b.tuple(&[c, d]);
        let body = b.block(&[(a, av), (bb, bv), (c, cv), (d, dv)], tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let mut scratch = Scratch::default();
        find_merges(&func, &mut scratch, FxHashMap::default());
        let aliases = scratch.aliases.clone();
        assert_eq!(aliases, vec![(bb, a), (d, c)]);
        let n = func.num_nodes();
        let (mut subst, mut dropped) = (vec![NONE; n], vec![false; n]);
        for &(var, target) in &aliases {
            subst[var.index()] = target;
            dropped[var.index()] = true;
        }
        let patched = func.substituted(&subst, &dropped).unwrap();
        let rebuilt = rewrite::substitute_by_copy(&func, &subst, &dropped).unwrap();
        assert!(structural_eq(&patched, &rebuilt));
        assert!(structural_eq(&eliminate_common_subexpr(&func), &rebuilt));
    }

    #[test]
    fn eliminate_common_subexpr_keeps_different_constants_and_sibling_scopes() {
        // let c = 1 > 0 … modelled as a parameter; if (c) { let a = relu(x); a } else { let b = relu(x); b }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let t = b.block(&[(a, av)], a);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let e = b.block(&[(bb, bv)], bb);
        let cond = b.if_(c, t, e);
        let k1 = b.constant(Constant::scalar_f32(0.0));
        let v1 = b.call(add(), &[x, k1], Attrs::new());
        let d1 = b.var("d1", None);
        let k2 = b.constant(Constant::scalar_f32(-0.0));
        let v2 = b.call(add(), &[x, k2], Attrs::new());
        let d2 = b.var("d2", None);
        let r = b.var("r", None);
        let tup = b.tuple(&[r, d1, d2]);
        let body = b.block(&[(r, cond), (d1, v1), (d2, v2)], tup);
        let func = Arc::new(b.finish(&[x, c], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&func), &func));
    }

    #[test]
    fn eliminate_common_subexpr_numbers_large_constants_by_value_through_fingerprint_buckets() {
        // Ten 1000-element weights that agree on every sampled element (all zero but one
        // element between samples), each bound twice (two equal tensors, not one shared):
        // one bucket, more classes than it keeps before it falls back to full hashing.
        // Equal weights merge, unequal ones never do.
        use passel_engine::ir::{DType, Tensor};
        let n = 1000usize;
        let weight = |i: usize| {
            let mut v = vec![0.0f64; n];
            v[1 + i] = 1.0 + i as f64;
            Tensor::from_f64s(&[n as u64], DType::F32, &v).unwrap()
        };
        assert_eq!(Constant::Dense(weight(0)).fingerprint(), Constant::Dense(weight(9)).fingerprint());
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut bindings = Vec::new();
        let mut firsts = Vec::new();
        for i in 0..10 {
            let t = weight(i);
            for copy in [Constant::Dense(t.clone()), Constant::Dense(weight(i))] {
                let k = b.constant(copy);
                let v = b.call(add(), &[x, k], Attrs::new());
                let var = b.var(&format!("v{i}_{}", bindings.len() % 2), None);
                bindings.push((var, v));
            }
            firsts.push(bindings[bindings.len() - 2].0);
        }
        let tup = b.tuple(&bindings.iter().map(|&(v, _)| v).collect::<Vec<_>>());
        let body = b.block(&bindings, tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let mut scratch = Scratch::default();
        find_merges(&func, &mut scratch, FxHashMap::default());
        let expected: Vec<(NodeId, NodeId)> = (0..10).map(|i| (bindings[2 * i + 1].0, firsts[i])).collect();
        assert_eq!(scratch.aliases, expected);
    }

    /// `n` pairs of identical `relu` bindings on a chain starting at the parameter.
    fn pairs_chain(n: usize) -> Arc<Function> {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut pairs = Vec::new();
        let mut cur = x;
        for i in 0..n {
            let v1 = b.call(relu(), &[cur], Attrs::new());
            let a = b.var(&format!("a{i}"), None);
            let v2 = b.call(relu(), &[cur], Attrs::new());
            let c = b.var(&format!("c{i}"), None);
            pairs.push((a, v1));
            pairs.push((c, v2));
            cur = c;
        }
        let body = b.block(&pairs, cur);
        Arc::new(b.finish(&[x], body, None, Attrs::new()))
    }

    #[test]
    fn eliminate_common_subexpr_gives_the_same_result_with_reused_scratch() {
        // The per-thread buffers carry state from one function to the next (a bigger one, a
        // smaller one, the same again); each result must equal a run on a fresh thread.
        let funcs = [pairs_chain(300), pairs_chain(3), pairs_chain(40), pairs_chain(3)];
        for func in &funcs {
            let here = eliminate_common_subexpr(func);
            let fresh = {
                let func = Arc::clone(func);
                std::thread::spawn(move || eliminate_common_subexpr(&func)).join().expect("no panic")
            };
            assert!(structural_eq(&here, &fresh));
            assert_eq!(crate::test_util::live_bindings(&here), crate::test_util::live_bindings(func) / 2);
        }
    }

    #[test]
    fn value_table_keeps_entries_through_growth_and_forgets_them_on_reset() {
        let mut t = VnTable::default();
        t.reset(4);
        for k in 0..1000u64 {
            assert_eq!(t.get(k, 0), None);
            t.insert(k, 0, k as u32);
        }
        // Same key, different aux: a different entry.
        assert_eq!(t.get_or_insert(7, 3, 99), 99);
        for k in 0..1000u64 {
            assert_eq!(t.get(k, 0), Some(k as u32));
        }
        assert_eq!(t.get(7, 3), Some(99));
        t.reset(4);
        assert!((0..1000u64).all(|k| t.get(k, 0).is_none()));
        assert_eq!(t.get_or_insert(5, 0, 1), 1);
        assert_eq!(t.get_or_insert(5, 0, 2), 1);
    }

    #[test]
    fn eliminate_common_subexpr_handles_a_million_bindings() {
        // Pairs of identical bindings on a chain: half of them merge.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut pairs = Vec::with_capacity(1_000_000);
        let mut cur = x;
        for i in 0..500_000 {
            let v1 = b.call(relu(), &[cur], Attrs::new());
            let a = b.var(&format!("a{i}"), None);
            let v2 = b.call(relu(), &[cur], Attrs::new());
            let c = b.var(&format!("c{i}"), None);
            pairs.push((a, v1));
            pairs.push((c, v2));
            cur = c;
        }
        let body = b.block(&pairs, cur);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = eliminate_common_subexpr(&func);
        assert_eq!(crate::test_util::live_bindings(&out), 500_000);
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&out), &out));
    }

    /// Comparing large constants on workers before numbering gives the serial numbering:
    /// equal constants in one bucket, unequal ones sharing a fingerprint (they differ only at
    /// an element the fingerprint does not sample), and a bucket with more classes than the
    /// rounds resolve, which is left to the numbering whole.
    #[test]
    fn eliminate_common_subexpr_merges_the_same_constants_when_comparing_them_on_workers() {
        use passel_engine::ir::{DType, Tensor};
        let big = |k: usize, base: f64| -> Constant {
            let mut v: Vec<f64> = (0..4096).map(|i| base + i as f64 * 0.5).collect();
            // Element 1 is never one of the fingerprint's samples.
            v[1] += k as f64;
            Constant::Dense(Tensor::from_f64s(&[4096], DType::F32, &v).unwrap())
        };
        // (variant, base): base 1.0 has six classes, base 2.0 one, base 3.0 two.
        let kinds = [(0, 1.0), (0, 2.0), (1, 1.0), (0, 3.0), (0, 2.0), (2, 1.0), (1, 3.0), (3, 1.0)];
        let kinds = kinds.iter().chain(&[(4, 1.0), (5, 1.0), (0, 3.0), (5, 1.0), (0, 2.0), (1, 3.0)]);
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut bindings = Vec::new();
        for (i, &(k, base)) in kinds.enumerate() {
            let c = b.constant(big(k, base));
            let value = b.call(add(), &[x, c], Attrs::new());
            let var = b.var(&format!("v{i}"), None);
            bindings.push((var, value));
        }
        let vars: Vec<NodeId> = bindings.iter().map(|&(v, _)| v).collect();
        let tup = b.tuple(&vars);
        let body = b.block(&bindings, tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let serial = eliminate_common_subexpr(&func);
        assert_eq!(serial.num_bindings(), 9, "five merges: two of base 2.0, two of 3.0, one of 1.0");
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
        let classes = const_classes(&func, &pool, 0);
        assert_eq!(classes.len(), 7, "buckets 2.0 (3) and 3.0 (4) resolved, 1.0 left to the numbering: {classes:?}");
        for min_bytes in [0, 1, u64::MAX] {
            let par = eliminate_common_subexpr_with_workers(&func, Some((pool.clone(), min_bytes)));
            assert!(structural_eq(&par, &serial), "min_bytes {min_bytes}");
        }
    }
}
