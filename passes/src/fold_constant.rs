//! FoldConstant (function pass, opt level 2): evaluates constant subexpressions at compile
//! time.
//!
//! What it does:
//! - folds an operator call whose arguments are all constants by running the operator's
//!   reference kernel, replacing the call with the resulting constant (a tuple of constants
//!   for operators with a tuple result);
//! - propagates let-bound constants into their uses; a binding whose value is (or folds to) a
//!   constant is then removed by this pass itself, since a constant has no effects;
//! - folds the projection of a literal tuple (`(a, b).1` → `b`) when the discarded fields are
//!   free of effects;
//! - folds `if` on a constant condition to the taken branch.
//!
//! What it deliberately does not do:
//! - fold stateful operators (`OpDef::stateful`) or zero-argument calls (`zeros()` stays a
//!   call: folding it would only trade a call for a large constant);
//! - fold when any input or result tensor has more than [`FOLD_ELEMENT_BUDGET`]
//!   elements, or when the operator's cost estimate of the call ([`OpDef::cost`]: output
//!   elements times the window, reduction or inner-product length) is over
//!   `relay.FoldConstant.max_cost`, so compile time and memory stay bounded — except an
//!   elementwise operator with a scalar kernel on `full` fills and scalars, whose result is a
//!   `full` fill (compact at any size, constant work) and is always folded;
//! - fold when the kernel fails, the attributes do not match the schema, or the kernel's
//!   result does not have the type the type relation promises: the call is left as it is;
//! - remove other dead bindings (that is DeadCodeElimination) or var-to-var rebindings (that
//!   is CanonicalizeBindings).
//!
//! Phases:
//! 1. Quick scan: if no call has only constant arguments, no binding is bound to a constant,
//!    no projection reads a literal tuple and no `if` has a constant condition, the input is
//!    returned as is.
//! 2. One copy of the live nodes in arena order ([`passel_engine::ir::rewrite::Rewriter`]), folding each
//!    node once its operands are copied; constants flow into uses through the rewriter's
//!    constant propagation. The output is idempotent: a second run returns its input.
//!    A call is evaluated only once all its arguments are known to be constants (nothing is
//!    allocated for the others). Calls on rank-0 `f32` constants of an operator with a scalar
//!    kernel ([`passel_engine::op::OpDef::scalar_f32`]: unary float ops and arithmetic) are
//!    evaluated directly, bit-identical to the tensor kernel (a fast path that shortcuts
//!    [`passel_engine::op::evaluate`], pinned equal to it by
//!    `fold_constant_scalar_fast_path_gives_the_kernel_results`); everything else goes
//!    through `op::evaluate`, the one evaluation path the interpreter and the ONNX importer
//!    take too, with the folding limits: [`FOLD_ELEMENT_BUDGET`] per tensor,
//!    `relay.FoldConstant.max_cost` per call, and the bytes left of
//!    `relay.FoldConstant.max_bytes` for the results (charged only for calls that fold).

use std::cell::RefCell;
use std::sync::Arc;

use passel_engine::ir::{Attrs, Constant, DType, ExprKind, Fill, Function, NodeId, OpId, Tensor, TensorData, Type};
use passel_engine::op::{self, KernelCtx, OpDef};
use passel_engine::transform::ConfigType;
use rustc_hash::FxHashMap;

use crate::scratch::{self, with_scratch};
use crate::census::{fewer, more, Counter};
use passel_engine::ir::rewrite::{Propagate, Rewriter, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "FoldConstant";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `FoldConstant` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 2, |func, _module, ctx| {
        let config = |key, default: u64| {
            u64::try_from(ctx.get_config::<i64>(key, i64::try_from(default).unwrap_or(i64::MAX))).unwrap_or(0)
        };
        let limits = FoldLimits {
            max_bytes: config(MAX_BYTES_KEY, DEFAULT_MAX_BYTES),
            max_cost: config(MAX_COST_KEY, DEFAULT_MAX_COST),
        };
        let min_work = config(MIN_PARALLEL_WORK_KEY, op::kernels::par::DEFAULT_MIN_PARALLEL_WORK as u64);
        let workers = ctx.workers().map(|pool| (pool, usize::try_from(min_work).unwrap_or(usize::MAX)));
        let (out, hit) = fold_constant_with_workers(&func, limits, workers);
        if hit.bytes {
            let message = format!(
                "constant folding stopped at {} bytes of folded constants ({MAX_BYTES_KEY}); later calls were kept",
                limits.max_bytes
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning(NAME, message));
        }
        if hit.cost {
            let message = format!(
                "constant folding kept calls whose estimated cost is over {} ({MAX_COST_KEY})",
                limits.max_cost
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning(NAME, message));
        }
        Ok(crate::census::counted(ctx, &func, out, STATISTICS))
    })
}

pub(crate) static STATISTICS: &[Counter] = &[
    (&CALLS_FOLDED, |b, a| fewer(b.calls, a.calls)),
    (&BYTES_MATERIALIZED, |b, a| more(b.dense_bytes, a.dense_bytes)),
];
static CALLS_FOLDED: Statistic = Statistic::new("FoldConstant", "calls folded", "operator calls replaced by constants");
static BYTES_MATERIALIZED: Statistic =
    Statistic::new("FoldConstant", "bytes materialized", "bytes of dense constants the folding added");

/// Largest number of elements of any input or output of a folded call.
pub const FOLD_ELEMENT_BUDGET: u64 = 1 << 20;

/// Runs FoldConstant on `func`; returns `func` itself (pointer-equal) when nothing folds.
pub fn fold_constant(func: &Arc<Function>) -> Arc<Function> {
    fold_constant_within(func, FoldLimits::default()).0
}

/// Config key: how many bytes of dense constants FoldConstant may materialize per function.
pub const MAX_BYTES_KEY: &str = "relay.FoldConstant.max_bytes";

/// Default of [`MAX_BYTES_KEY`]: 64 MiB per function.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

passel_engine::register_config!(
    MAX_BYTES_KEY,
    ConfigType::Int,
    "FoldConstant materializes at most this many bytes of dense constants per function (default 67108864); later calls stay calls, with a warning",
    min = 0
);

/// Config key: the largest estimated cost ([`OpDef::cost`]) of one call FoldConstant folds.
pub const MAX_COST_KEY: &str = "relay.FoldConstant.max_cost";

/// Default of [`MAX_COST_KEY`], shared with the ONNX importer's folding
/// ([`op::DEFAULT_MAX_FOLD_COST`], 2^30).
pub const DEFAULT_MAX_COST: u64 = op::DEFAULT_MAX_FOLD_COST;

passel_engine::register_config!(
    MAX_COST_KEY,
    ConfigType::Int,
    "FoldConstant folds a call only if its estimated cost (output elements times window, reduction or inner-product length) is at most this (default 1073741824); costlier calls stay calls, with a warning",
    min = 0
);

/// Config key: the element operations from which a folded call's kernel spreads its output
/// over the pass context's workers (with more than one thread).
pub const MIN_PARALLEL_WORK_KEY: &str = "relay.FoldConstant.min_parallel_work";

passel_engine::register_config!(
    MIN_PARALLEL_WORK_KEY,
    ConfigType::Int,
    "with more than one thread, a folded call of at least this many element operations spreads its output over the workers (default 65536); the output is the same either way",
    min = 1
);

/// FoldConstant's limits: [`MAX_BYTES_KEY`] per function, [`MAX_COST_KEY`] per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldLimits {
    /// Bytes of dense constants materialized per function.
    pub max_bytes: u64,
    /// Estimated cost of one folded call.
    pub max_cost: u64,
}

impl Default for FoldLimits {
    fn default() -> FoldLimits {
        FoldLimits { max_bytes: DEFAULT_MAX_BYTES, max_cost: DEFAULT_MAX_COST }
    }
}

/// Which limits left a call unfolded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitsHit {
    /// The byte budget ran out.
    pub bytes: bool,
    /// A call's estimated cost was over the limit.
    pub cost: bool,
}

/// Runs FoldConstant on `func` materializing at most `limits.max_bytes` bytes of dense results
/// (scalar results and `full` fills are compact and not counted) and folding no call whose
/// estimated cost is over `limits.max_cost`; calls evaluated in arena order, so the calls left
/// unfolded are the same on every run and thread count. Returns which limits left a call
/// unfolded. (A second run has a fresh byte budget and may fold further.)
pub fn fold_constant_within(func: &Arc<Function>, limits: FoldLimits) -> (Arc<Function>, LimitsHit) {
    fold_constant_with_workers(func, limits, None)
}

/// [`fold_constant_within`] with the kernels of calls of at least the given element
/// operations spreading their output over the pool (the pass context's,
/// [`passel_engine::transform::PassContext::workers`]); the output is the same with any pool
/// or none.
pub fn fold_constant_with_workers(
    func: &Arc<Function>,
    limits: FoldLimits,
    workers: Option<(Arc<rayon::ThreadPool>, usize)>,
) -> (Arc<Function>, LimitsHit) {
    if !has_candidate(func) || !func.is_well_formed() {
        return (Arc::clone(func), LimitsHit::default());
    }
    let mut budget = Budget::new(limits, workers.clone());
    let patched = with_scratch(&SCRATCH, |s| patch(func, s, &mut budget));
    match patched {
        Patch::Same => return (Arc::clone(func), budget.hit),
        Patch::Done(new) => return (new, budget.hit),
        Patch::Fallback => {}
    }
    // The rewriter evaluates the same calls again, from the full budget.
    let mut budget = Budget::new(limits, workers);
    let out = fold_with_rewriter(func, &mut budget);
    (out, budget.hit)
}

/// Bytes of dense results FoldConstant may still materialize in one function, the cost
/// limit of one call, and the workers the kernels may use.
struct Budget {
    left: u64,
    max_cost: u64,
    hit: LimitsHit,
    workers: Option<(Arc<rayon::ThreadPool>, usize)>,
}

impl Budget {
    fn new(limits: FoldLimits, workers: Option<(Arc<rayon::ThreadPool>, usize)>) -> Budget {
        Budget { left: limits.max_bytes, max_cost: limits.max_cost, hit: LimitsHit::default(), workers }
    }
}

/// Phase 2 in general: the copying rewriter.
fn fold_with_rewriter(func: &Arc<Function>, budget: &mut Budget) -> Arc<Function> {
    let mut impure = vec![false; func.num_nodes()];
    // New tuple node → its constant fields, for projections of folded tuple-result calls.
    let mut folded_tuples: FxHashMap<u32, Vec<NodeId>> = FxHashMap::default();
    let rw = Rewriter::new(func, Propagate::Consts);
    let out = rw.run(|rw, id| {
        let f = rw.func;
        let mut imp = false;
        f.for_each_operand(id, |o| imp |= impure[o.index()]);
        match *f.kind(id) {
            ExprKind::Call { op, .. } => imp |= op::is_stateful(op),
            ExprKind::Apply { .. } => imp = true,
            ExprKind::Func { .. } => imp = false,
            _ => {}
        }
        impure[id.index()] = imp;
        fold_node(rw, id, &impure, &mut folded_tuples, budget)
    });
    match out {
        Some(new) => Arc::new(new),
        None => Arc::clone(func),
    }
}

fn has_candidate(func: &Function) -> bool {
    func.nodes().iter().any(|node| match node.kind {
        ExprKind::Call { op, args, .. } => {
            args.len > 0
                && !op::is_stateful(op)
                && func.ids(args).iter().all(|&a| matches!(func.kind(a), ExprKind::Const { .. }))
        }
        ExprKind::Block { bindings, .. } => {
            func.bindings(bindings).any(|(_, value)| matches!(func.kind(value), ExprKind::Const { .. }))
        }
        ExprKind::Proj { tuple, .. } => matches!(func.kind(tuple), ExprKind::Tuple { .. }),
        ExprKind::If { cond, .. } => matches!(func.kind(cond), ExprKind::Const { .. }),
        _ => false,
    })
}

/// Per-thread buffers of the patch path, reused across functions so that a function costs
/// no allocation until something folds.
#[derive(Default)]
struct Scratch {
    /// Binding variable → its value (`NONE` when not bound).
    bound: Vec<NodeId>,
    /// Node → the node of the constant it stands for (itself for a constant or a folded
    /// call, the value's constant for a variable bound to one), or `NONE`.
    cst: Vec<NodeId>,
    /// Variables bound to a value that follows them in the arena.
    late: Vec<NodeId>,
    /// Calls folded so far, with their values; emptied after every function.
    folds: Vec<(NodeId, Arc<Constant>)>,
    /// Variable → the node its uses take (`NONE`: kept).
    forward: Vec<NodeId>,
    /// Nodes that read or bind a forwarded variable.
    touched: Vec<NodeId>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl scratch::Scratch for Scratch {
    fn retained(&self) -> usize {
        self.bound.capacity().max(self.cst.capacity()).max(self.forward.capacity())
    }

    /// The folded constants now belong to the output (or to nobody): the thread keeps its
    /// buffers, not the constants, which would otherwise stay alive until its next fold.
    fn finish(&mut self) {
        self.folds.clear();
    }
}

enum Patch {
    /// Nothing folds: return the input.
    Same,
    /// The folded function.
    Done(Arc<Function>),
    /// The patch cannot express the change (or could not be sure): use the rewriter.
    Fallback,
}

/// Phase 2, the patch path: the common case — calls on constants fold to single constants and
/// let-bound constants are forwarded into their uses — done on a copy of the arena: each
/// folded call node becomes a constant node in place, and the forwarded variables' uses and
/// bindings are patched in the same copy ([`Function::with_constants_forwarded`]). The result
/// is structurally the rewriter's (folded dead nodes stay behind, and are never
/// printed, evaluated or compared). Anything else — tuple results, projections of literal
/// tuples, `if` on a constant, a variable bound twice or after its uses in the arena, a block
/// left without bindings — falls back to the rewriter.
fn patch(func: &Function, s: &mut Scratch, budget: &mut Budget) -> Patch {
    let n = func.num_nodes();
    let nodes = func.nodes();
    s.bound.clear();
    s.bound.resize(n, NONE);
    for node in nodes {
        if let ExprKind::Block { bindings, .. } = node.kind {
            for (var, value) in func.bindings(bindings) {
                let slot = &mut s.bound[var.index()];
                if *slot != NONE {
                    return Patch::Fallback;
                }
                *slot = value;
            }
        }
    }
    s.cst.clear();
    s.cst.resize(n, NONE);
    s.forward.clear();
    s.forward.resize(n, NONE);
    s.late.clear();
    s.folds.clear();
    let mut forwarded = false;
    s.touched.clear();
    for (i, node) in nodes.iter().enumerate() {
        let id = NodeId(i as u32);
        // Calls (most nodes) check their arguments below, in the same loop.
        if forwarded
            && !matches!(node.kind, ExprKind::Call { .. })
            && !node.kind.is_atom()
            && reads_forwarded(func, node.kind, &s.forward)
        {
            s.touched.push(id);
        }
        match node.kind {
            ExprKind::Const { .. } => s.cst[i] = id,
            ExprKind::Var { .. } => {
                let value = s.bound[i];
                if value == NONE {
                    continue;
                }
                if value.index() >= i {
                    s.late.push(id);
                    continue;
                }
                let c = s.cst[value.index()];
                if c != NONE {
                    s.cst[i] = c;
                    // Uses take the constant's node (a folded call's node becomes a constant
                    // node), and the binding is removed.
                    s.forward[i] = c;
                    forwarded = true;
                }
            }
            ExprKind::Call { op, attrs, args } => {
                let args = func.ids(args);
                let (mut all_const, mut reads) = (true, false);
                for a in args {
                    all_const &= s.cst[a.index()] != NONE;
                    reads |= s.forward[a.index()] != NONE;
                }
                if reads {
                    s.touched.push(id);
                }
                if args.is_empty() || !all_const {
                    continue;
                }
                let Some(def) = op::try_get(op) else { continue };
                if def.stateful || !def.arity.accepts(args.len()) {
                    continue;
                }
                let attrs = func.call_attrs(attrs);
                if def.check_attrs(attrs).is_err() {
                    continue;
                }
                let (cst, folds) = (&s.cst, &s.folds);
                let arg = |k: usize| {
                    let c = cst[args[k].index()];
                    match *func.kind(c) {
                        ExprKind::Const { idx } => Some((func.constant(idx), func.ty(c))),
                        // A call folded earlier (in id order, so `folds` is sorted).
                        _ => {
                            let at = folds.binary_search_by_key(&c, |&(id, _)| id).ok()?;
                            Some((&folds[at].1, None))
                        }
                    }
                };
                match eval_call(op, def, attrs, args.len(), arg, budget) {
                    None => {}
                    Some(Folded::Single(c)) => {
                        s.folds.push((id, c));
                        s.cst[i] = id;
                    }
                    Some(Folded::Tuple(..)) => return Patch::Fallback,
                }
            }
            ExprKind::Proj { tuple, .. } if matches!(func.kind(tuple), ExprKind::Tuple { .. }) => {
                return Patch::Fallback
            }
            ExprKind::If { cond, .. } if s.cst[cond.index()] != NONE => return Patch::Fallback,
            _ => {}
        }
    }
    if s.late.iter().any(|v| s.cst[s.bound[v.index()].index()] != NONE) {
        return Patch::Fallback;
    }
    if s.folds.is_empty() && !forwarded {
        return Patch::Same;
    }
    match func.with_constants_forwarded(&s.folds, &s.forward, &s.touched) {
        Some(f) => Patch::Done(Arc::new(f)),
        None => Patch::Fallback,
    }
}

/// Whether compound node `kind` reads a forwarded variable (as an operand, a binding's value
/// or its result) or binds one.
fn reads_forwarded(func: &Function, kind: ExprKind, forward: &[NodeId]) -> bool {
    let fwd = |o: &NodeId| forward[o.index()] != NONE;
    match kind {
        ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => func.ids(args).iter().any(fwd),
        ExprKind::Apply { callee, args } => fwd(&callee) || func.ids(args).iter().any(fwd),
        ExprKind::Block { bindings, result } => fwd(&result) || func.ids(bindings).iter().any(fwd),
        ExprKind::Proj { tuple, .. } => fwd(&tuple),
        ExprKind::If { cond, then_, else_ } => fwd(&cond) || fwd(&then_) || fwd(&else_),
        ExprKind::Func { idx } => fwd(&func.closure(idx).body),
        ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => false,
    }
}

/// A rank-0 `f32` constant. The same few values recur in thousands of functions, so each
/// thread keeps the last ones made (by bits, so `-0.0` and NaN payloads stay apart) and shares
/// them: building a tensor costs several allocations, sharing one costs a reference count.
fn scalar_f32(v: f32) -> Arc<Constant> {
    const SLOTS: usize = 64;
    type Slot = Option<(u32, Arc<Constant>)>;
    thread_local! {
        static RECENT: RefCell<[Slot; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
    }
    let bits = v.to_bits();
    let slot = (bits.wrapping_mul(0x9E37_79B9) >> 26) as usize % SLOTS;
    RECENT.with(|r| {
        let mut r = r.borrow_mut();
        match &r[slot] {
            Some((b, c)) if *b == bits => Arc::clone(c),
            _ => {
                let c = Arc::new(Constant::scalar_f32(v));
                r[slot] = Some((bits, Arc::clone(&c)));
                c
            }
        }
    })
}

/// The value of a folded call.
enum Folded {
    /// One tensor.
    Single(Arc<Constant>),
    /// One tensor per field of a tuple result, and the tuple's type.
    Tuple(Vec<Constant>, Type),
}

/// Evaluates a call of `op` (`def`; not stateful, arity and attributes checked) on `n`
/// constant arguments; `arg(k)` gives argument `k`'s constant and, when known, its node's
/// type. `None` when the call must stay: over a limit, a kernel error, or a result whose type
/// is not the one the type relation promises ([`op::evaluate`] decides all three).
///
/// Calls on rank-0 `f32` constants of an operator with a scalar kernel
/// ([`passel_engine::op::OpDef::scalar_f32`]) are evaluated directly, with the kernel's own
/// arithmetic, so the result is bit-identical to the general path without the tensor and
/// interpreter machinery.
fn eval_call<'c>(
    op: OpId,
    def: &OpDef,
    attrs: &Attrs,
    n: usize,
    arg: impl Fn(usize) -> Option<(&'c Arc<Constant>, Option<&'c Type>)>,
    budget: &mut Budget,
) -> Option<Folded> {
    if let Some(kernel) = def.scalar_f32.filter(|_| !def.tuple_result && n <= 3) {
        let mut vals = [0f32; 3];
        let mut scalar = true;
        let mut any_fill = false;
        for (k, slot) in vals.iter_mut().enumerate().take(n) {
            match &**arg(k)?.0 {
                Constant::Dense(Tensor(TensorData::F32(x))) if x.ndim() == 0 && x.first().is_some() => {
                    *slot = x.first().copied().unwrap_or_default()
                }
                // Every element of an f32 `full` fill is `v as f32` (`Tensor::full`).
                Constant::Fill { ty, fill: Fill::Full(v) } if ty.dtype == DType::F32 => {
                    *slot = *v as f32;
                    any_fill = true;
                }
                _ => {
                    scalar = false;
                    break;
                }
            }
        }
        if scalar && !any_fill {
            if let Some(v) = kernel(&vals[..n]) {
                return Some(Folded::Single(scalar_f32(v)));
            }
        }
        // An elementwise op on `full` fills and scalars is a `full` fill of the broadcast type:
        // every element is the scalar kernel's result, whatever the size, so the result stays
        // compact instead of materializing (`add(full<(1024, 1024), f32>(1.0), 1.0f)`).
        if scalar && any_fill {
            let tys: Option<Vec<Type>> = (0..n).map(|k| arg(k).map(|(c, _)| c.ty())).collect();
            if let (Some(tys), Some(v)) = (tys, kernel(&vals[..n])) {
                let out_ty = (def.type_rel)(&tys, attrs).ok()?;
                let tt = out_ty.as_tensor().filter(|t| t.dtype == DType::F32)?;
                return Some(Folded::Single(Arc::new(Constant::Fill {
                    ty: tt.clone(),
                    fill: Fill::Full(f64::from(v)),
                })));
            }
        }
    }
    let mut consts = Vec::with_capacity(n);
    let mut tys = Vec::with_capacity(n);
    for k in 0..n {
        let (c, ty) = arg(k)?;
        // Constant nodes carry their type, so reusing it avoids building a new one.
        tys.push(match ty {
            Some(t) if t.as_tensor().is_some_and(|tt| c.has_type(tt)) => t.clone(),
            _ => c.ty(),
        });
        consts.push(c);
    }
    let args: Vec<op::Known<'_>> =
        consts.iter().zip(&tys).map(|(&constant, ty)| op::Known { constant, ty }).collect();
    let limits = op::EvalLimits {
        max_result_bytes: budget.left,
        ..op::EvalLimits::fold(FOLD_ELEMENT_BUDGET, budget.max_cost)
    };
    let mut ctx = KernelCtx::seeded(0);
    if let Some((pool, min_work)) = &budget.workers {
        ctx = ctx.with_workers(Some(Arc::clone(pool)), *min_work);
    }
    let out = match op::evaluate(op, attrs, &args, limits, &mut ctx) {
        Ok(out) => out,
        Err(op::CallError::OverLimit(op::Limit::Cost)) => {
            budget.hit.cost = true;
            return None;
        }
        Err(op::CallError::OverLimit(op::Limit::Bytes)) => {
            budget.hit.bytes = true;
            return None;
        }
        Err(_) => return None,
    };
    budget.left -= out.bytes;
    let mut results: Vec<Constant> = out.results.into_iter().map(Constant::Dense).collect();
    if def.tuple_result {
        Some(Folded::Tuple(results, out.ty?))
    } else {
        results.pop().map(|c| Folded::Single(Arc::new(c)))
    }
}

fn fold_node(
    rw: &mut Rewriter<'_>,
    id: NodeId,
    impure: &[bool],
    folded_tuples: &mut FxHashMap<u32, Vec<NodeId>>,
    budget: &mut Budget,
) -> Option<NodeId> {
    let f = rw.func;
    match *f.kind(id) {
        ExprKind::Call { op, attrs, args } => {
            let def = op::try_get(op)?;
            let args = f.ids(args);
            if def.stateful || args.is_empty() || !def.arity.accepts(args.len()) {
                return None;
            }
            // Most calls have a non-constant argument: find out before allocating anything.
            // (`rw.map` copies an atom on first use; a second call is a memo lookup.)
            for &a in args {
                if !matches!(f.kind(a), ExprKind::Const { .. }) {
                    let new = rw.map(a);
                    rw.new_const(new)?;
                }
            }
            let attrs = f.call_attrs(attrs);
            def.check_attrs(attrs).ok()?;
            let mapped: Vec<NodeId> = args.iter().map(|&a| rw.map(a)).collect();
            let folded = {
                let rw = &*rw;
                let arg = |k: usize| match *f.kind(args[k]) {
                    ExprKind::Const { idx } => Some((f.constant(idx), f.ty(args[k]))),
                    _ => Some((rw.new_const(mapped[k])?, rw.b.ty(mapped[k]))),
                };
                eval_call(op, def, attrs, args.len(), arg, budget)?
            };
            match folded {
                Folded::Single(c) => Some(rw.constant(c)),
                Folded::Tuple(results, out_ty) => {
                    let fields: Vec<NodeId> = results.into_iter().map(|c| rw.constant(Arc::new(c))).collect();
                    let tuple = rw.b.tuple(&fields);
                    rw.b.set_ty(tuple, Some(out_ty));
                    folded_tuples.insert(tuple.0, fields);
                    Some(tuple)
                }
            }
        }
        ExprKind::Proj { tuple, index } => {
            if let ExprKind::Tuple { fields } = *f.kind(tuple) {
                let fields = f.ids(fields);
                let keep = *fields.get(index as usize)?;
                if fields.iter().any(|&x| x != keep && impure[x.index()]) {
                    return None;
                }
                return Some(rw.map(keep));
            }
            let new_tuple = rw.map(tuple);
            folded_tuples.get(&new_tuple.0)?.get(index as usize).copied()
        }
        ExprKind::If { cond, then_, else_ } => {
            let c = rw.map(cond);
            let c = rw.new_const(c)?;
            let ty = c.tensor_type();
            if ty.dtype != passel_engine::ir::DType::Bool || ty.num_elements() != Some(1) {
                return None;
            }
            let taken = if c.as_uniform_value()? != 0.0 { then_ } else { else_ };
            Some(rw.map(taken))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, DType, FunctionBuilder, Tensor};
    use passel_engine::op;

    use super::*;

    fn add() -> passel_engine::ir::OpId {
        op::lookup("add").unwrap()
    }

    fn f32s(shape: &[u64], v: &[f64]) -> Constant {
        Constant::Dense(Tensor::from_f64s(shape, DType::F32, v).unwrap())
    }

    fn ty2() -> Type {
        Type::tensor(vec![2], DType::F32)
    }

    /// `x + ([1, 2] + [10, 20])`.
    fn x_plus_sum_of_constants() -> Arc<Function> {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(ty2()));
        let c1 = b.constant(f32s(&[2], &[1.0, 2.0]));
        let c2 = b.constant(f32s(&[2], &[10.0, 20.0]));
        let s = b.call(add(), &[c1, c2], Attrs::new());
        let body = b.call(add(), &[x, s], Attrs::new());
        Arc::new(b.finish(&[x], body, Some(ty2()), Attrs::new()))
    }

    #[test]
    fn folded_constants_are_owned_by_the_output_only() {
        // Regression: the thread's scratch kept the folded values until its next fold, so a
        // model's folded weights stayed alive after the pipeline's output was dropped.
        let func = x_plus_sum_of_constants();
        let out = fold_constant(&func);
        let folded = f32s(&[2], &[11.0, 22.0]);
        let live = out.live_mask();
        let held: Vec<usize> = out
            .node_ids()
            .filter(|id| live[id.index()])
            .filter_map(|id| match out.kind(id) {
                ExprKind::Const { idx } if **out.constant(*idx) == folded => {
                    Some(Arc::strong_count(out.constant(*idx)))
                }
                _ => None,
            })
            .collect();
        assert_eq!(held, vec![1]);
    }

    /// FoldConstant on every function of `text`, by the patch path (which must apply) and by
    /// the rewriter: both give structurally equal functions, and a second run changes nothing.
    fn check_patch_matches_rewriter(text: &str, typed: bool) {
        let module = passel_engine::ir::parse_module(text).unwrap();
        let module = if typed { crate::test_util::typed(text) } else { module };
        for (name, func) in module.iter() {
            let patched = with_scratch(&SCRATCH, |s| patch(func, s, &mut full_budget()));
            let patched = match patched {
                Patch::Done(f) => f,
                Patch::Same => panic!("@{name}: the patch path found nothing to fold"),
                Patch::Fallback => panic!("@{name}: the patch path fell back"),
            };
            let rewritten = fold_with_rewriter(func, &mut full_budget());
            assert!(structural_eq(&patched, &rewritten), "@{name}: patch and rewriter differ");
            assert!(Arc::ptr_eq(&fold_constant(&patched), &patched), "@{name}: second run changed it");
            if typed {
                // A typed input stays fully typed, dead nodes included.
                assert!(patched.nodes().iter().all(|n| n.ty.is_some()), "@{name}: untyped node");
            }
        }
    }

    const LET_CHAINS: &str = r#"
def @f(%x: Tensor[(2, 2), f32]) -> Tensor[(2, 2), f32] {
  let %a = multiply(3.0f, 0.5f);
  let %b = %a;
  let %c = add(%b, %a);
  let %k = 2.0f;
  let %v1 = add(%x, %c);
  let %v2 = multiply(%v1, %k);
  let %t = (%v2, %b);
  let %g = fn (%y: Tensor[(2, 2), f32]) -> Tensor[(2, 2), f32] {
    let %inner = subtract(%c, 1.0f);
    let %w = add(%y, %inner);
    relu(%w)
  };
  let %v3 = %g(%v2);
  let %v4 = add(%v3, %t.1);
  add(%v4, negative(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0]))
}
def @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %z = exp(0.0f);
  add(%x, %z)
}
def @h() -> Tensor[(), f32] {
  let %c = multiply(2.0f, 0.5f);
  %c
}
"#;

    #[test]
    fn fold_constant_patch_path_matches_the_rewriter() {
        check_patch_matches_rewriter(LET_CHAINS, false);
        check_patch_matches_rewriter(LET_CHAINS, true);
    }

    #[test]
    fn fold_constant_falls_back_when_a_block_would_be_left_with_a_variable() {
        let text = "def @f(%x: Tensor[(), f32]) -> Tensor[(), f32] {\n  let %c = multiply(2.0f, 0.5f);\n  let %d = add(%c, 1.0f);\n  %x\n}\n";
        let module = passel_engine::ir::parse_module(text).unwrap();
        let func = module.get("f").unwrap();
        assert!(matches!(with_scratch(&SCRATCH, |s| patch(func, s, &mut full_budget())), Patch::Fallback));
        let out = fold_constant(func);
        assert_eq!(out.body(), out.params()[0]);
    }

    #[test]
    fn fold_constant_scalar_results_share_one_constant_across_functions() {
        let text = "def @f(%x: Tensor[(), f32]) -> Tensor[(), f32] {\n  let %c = multiply(2.0f, 0.25f);\n  add(%x, %c)\n}\n\
                    def @g(%x: Tensor[(), f32]) -> Tensor[(), f32] {\n  let %c = multiply(1.0f, 0.5f);\n  add(%x, %c)\n}\n";
        let module = passel_engine::ir::parse_module(text).unwrap();
        let consts: Vec<Arc<Constant>> = module
            .iter()
            .map(|(_, f)| {
                let out = fold_constant(f);
                let ExprKind::Call { args, .. } = *out.kind(out.body()) else { panic!("not a call") };
                let ExprKind::Const { idx } = *out.kind(out.ids(args)[1]) else { panic!("not folded") };
                Arc::clone(out.constant(idx))
            })
            .collect();
        assert_eq!(consts[0].as_uniform_value(), Some(0.5));
        assert!(Arc::ptr_eq(&consts[0], &consts[1]));
    }

    #[test]
    fn fold_constant_returns_same_arc_when_nothing_folds() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let body = b.call(add(), &[x, k], Attrs::new());
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&fold_constant(&func), &func));
    }

    /// The per-function byte budget (`relay.FoldConstant.max_bytes`) stops materializing
    /// dense results; the calls are taken in arena order, so which stay is deterministic.
    fn full_budget() -> Budget {
        Budget::new(FoldLimits::default(), None)
    }

    #[test]
    fn fold_constant_stops_at_the_byte_budget_with_a_warning() {
        let uniform = Constant::Fill {
            ty: passel_engine::ir::TensorType { shape: vec![1024].into(), dtype: DType::F32 },
            fill: passel_engine::ir::Fill::Uniform { seed: 1, low: 0.0, high: 1.0 },
        };
        let mut b = FunctionBuilder::new();
        let u1 = b.constant(uniform.clone());
        let u2 = b.constant(uniform);
        let one = b.constant(Constant::scalar_f32(1.0));
        let a = b.call(add(), &[u1, one], Attrs::new());
        let c = b.call(add(), &[u2, one], Attrs::new());
        let t = b.tuple(&[a, c]);
        let func = Arc::new(b.finish(&[], t, None, Attrs::new()));
        let count_calls = |f: &Function| {
            let live = f.live_mask();
            f.node_ids().filter(|id| live[id.index()] && matches!(f.kind(*id), ExprKind::Call { .. })).count()
        };
        let bytes = |max_bytes| FoldLimits { max_bytes, ..FoldLimits::default() };
        let (out, hit) = fold_constant_within(&func, bytes(5000));
        assert!(hit.bytes && !hit.cost);
        assert_eq!(count_calls(&out), 1, "the first call (4096 bytes) folds, the second stays");
        let (out, hit) = fold_constant_within(&func, bytes(8192));
        assert_eq!(hit, LimitsHit::default());
        assert_eq!(count_calls(&out), 0);
        // Through the registered pass: the key is read and the warning names it, the same at
        // every thread count.
        crate::link();
        let mut m = passel_engine::ir::Module::new();
        m.add("f", Arc::clone(&func)).expect("fresh");
        m.add("g", Arc::clone(&func)).expect("fresh");
        let mut outs = Vec::new();
        for threads in [1, 2] {
            let ctx = passel_engine::transform::PassContext::builder()
                .config(MAX_BYTES_KEY, 5000i64)
                .num_threads(threads)
                .build()
                .expect("key");
            let pass = passel_engine::transform::get_pass("FoldConstant").expect("registered");
            let res = ctx.scope(|| pass.run(m.clone(), &ctx)).expect("scope").expect("runs");
            let diags = ctx.diagnostics().take();
            assert_eq!(diags.len(), 2, "{diags:?}");
            assert!(diags[0].message.contains("relay.FoldConstant.max_bytes"), "{:?}", diags[0]);
            outs.push(passel_engine::ir::print_module(&res));
        }
        assert_eq!(outs[0], outs[1]);
    }

    #[test]
    fn fold_constant_keeps_stateful_and_zero_argument_calls() {
        for name in ["random_uniform", "zeros"] {
            let Some(op) = op::lookup(name) else { continue };
            let mut b = FunctionBuilder::new();
            let body = b.call(op, &[], Attrs::new());
            let func = Arc::new(b.finish(&[], body, None, Attrs::new()));
            assert!(Arc::ptr_eq(&fold_constant(&func), &func));
        }
    }

    #[test]
    fn fold_constant_handles_deep_nesting_without_recursion() {
        // relu(relu(…relu(add(1, 2))…)) nested 100,000 deep: folds completely.
        let mut b = FunctionBuilder::new();
        let c1 = b.constant(Constant::scalar_f32(-1.0));
        let c2 = b.constant(Constant::scalar_f32(3.0));
        let mut cur = b.call(add(), &[c1, c2], Attrs::new());
        for _ in 0..100_000 {
            cur = b.call(op::lookup("relu").unwrap(), &[cur], Attrs::new());
        }
        let func = Arc::new(b.finish(&[], cur, None, Attrs::new()));
        let out = fold_constant(&func);
        let ExprKind::Const { idx } = *out.kind(out.body()) else { panic!("not folded") };
        assert_eq!(out.constant(idx).as_uniform_value(), Some(2.0));
    }

    #[test]
    fn fold_constant_scalar_fast_path_gives_the_kernel_results() {
        // f32 scalars take the fast path, f16 and i32 scalars the kernel; both agree with
        // the operator's reference kernel, including rounding and NaN.
        let cases: [(&str, DType, f64, f64); 6] = [
            ("multiply", DType::F32, 3.0, 0.5),
            ("divide", DType::F32, 1.0, 3.0),
            ("maximum", DType::F32, f64::NAN, 1.0),
            ("power", DType::F32, 2.0, 0.5),
            ("multiply", DType::F16, 3.0, 0.1),
            ("subtract", DType::I32, 7.0, 9.0),
        ];
        for (name, dtype, a, b) in cases {
            let op = op::lookup(name).unwrap();
            let (ta, tb) = (Tensor::scalar(dtype, a), Tensor::scalar(dtype, b));
            let mut ctx = KernelCtx::seeded(0);
            let expected = (op::get(op).kernel)(&[ta.clone(), tb.clone()], &Attrs::new(), &mut ctx).unwrap().remove(0);
            let mut fb = FunctionBuilder::new();
            let c1 = fb.constant(Constant::Dense(ta));
            let c2 = fb.constant(Constant::Dense(tb));
            let body = fb.call(op, &[c1, c2], Attrs::new());
            let func = Arc::new(fb.finish(&[], body, None, Attrs::new()));
            let out = fold_constant(&func);
            let ExprKind::Const { idx } = *out.kind(out.body()) else { panic!("{name} not folded") };
            let Constant::Dense(got) = &**out.constant(idx) else { panic!("{name}: not dense") };
            assert!(got.bit_eq(&expected), "{name} {dtype}: folded {got}, kernel {expected}");
            assert_eq!(out.ty(out.body()), Some(&Type::scalar(dtype)));
        }
    }

    /// Large folded calls (broadcast arithmetic, unary maps, comparisons) give the same
    /// constants with their kernels spread over two workers, at any task size.
    #[test]
    fn fold_constant_folds_the_same_on_workers() {
        let dense = |shape: &[u64], seed: u64| {
            let n: u64 = shape.iter().product();
            let v: Vec<f64> = (0..n).map(|i| ((i * 7919 + seed * 31) % 1013) as f64 / 17.0 - 29.0).collect();
            Constant::Dense(Tensor::from_f64s(shape, DType::F32, &v).unwrap())
        };
        let op = |name: &str| op::lookup(name).unwrap();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c1 = b.constant(dense(&[64, 1024], 1));
        let c2 = b.constant(dense(&[1, 1024], 2));
        let c3 = b.constant(dense(&[64, 1], 3));
        let mut bindings = Vec::new();
        let mut bind = |b: &mut FunctionBuilder, name: &str, value: NodeId| {
            let v = b.var(name, None);
            bindings.push((v, value));
            v
        };
        let m = b.call(op("multiply"), &[c1, c2], Attrs::new());
        let m = bind(&mut b, "m", m);
        let s = b.call(op("sigmoid"), &[m], Attrs::new());
        let s = bind(&mut b, "s", s);
        let d = b.call(op("subtract"), &[s, c3], Attrs::new());
        let d = bind(&mut b, "d", d);
        let l = b.call(op("less"), &[d, c1], Attrs::new());
        let l = bind(&mut b, "l", l);
        let r = b.call(op("add"), &[x, d], Attrs::new());
        let r = bind(&mut b, "r", r);
        let tup = b.tuple(&[r, l]);
        let body = b.block(&bindings, tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let serial = fold_constant_within(&func, FoldLimits::default()).0;
        assert!(!Arc::ptr_eq(&serial, &func), "the calls fold");
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
        for min_work in [1, 7, 65536, usize::MAX] {
            let par = fold_constant_with_workers(&func, FoldLimits::default(), Some((pool.clone(), min_work))).0;
            assert!(structural_eq(&par, &serial), "tasks from {min_work} elements");
        }
    }
}
