//! SimplifyExpr (function pass, opt level 0, requires InferType): algebraic identities that
//! keep meaning exactly.
//!
//! What it does, when the operators exist in the registry (they are found by name):
//! - `multiply(x, 1)`, `multiply(1, x)`, `divide(x, 1)` → `x` (exact for every float, NaN,
//!   infinities and `-0.0` included);
//! - `add(x, 0)`, `add(0, x)`, `subtract(x, 0)` → `x` for integer dtypes. For floats only the
//!   exact cases are rewritten: `x + (-0.0)` and `x - (+0.0)` are `x` for every `x`, while
//!   `x + 0.0` maps `-0.0` to `+0.0` and is left alone;
//! - `subtract(x, x)` → a zero constant of `x`'s type, for integer dtypes only (for floats
//!   `inf - inf` and `NaN - NaN` are NaN);
//! - `negative(negative(x))` → `x` (integer negation wraps, so this is exact too);
//! - `reshape(reshape(x, a), b)` → `reshape(x, b)` when `b` has no shape codes that refer to
//!   the input shape (every entry positive or `-1`);
//! - `transpose(transpose(x, p), q)` → `transpose(x, p∘q)`, or `x` when that is the identity,
//!   when both calls give their axes explicitly.
//!
//! The constant of a binary identity must have all elements equal to the identity value
//! (a scalar, or a `full` fill). The rewrite is made only when the result type provably stays
//! the same: with `x`'s type known, the operator's type relation on `(x, c)` must give `x`'s
//! type; with `x`'s type unknown, `c` must be a rank-0 scalar (broadcasting a scalar never
//! changes the shape) and the call's type, when known, must match `c`'s dtype. A dtype
//! mismatch between an untyped `x` and `c` would be a type error that InferType (required
//! before this pass) reports.
//!
//! Inner calls are seen directly (`negative(negative(x))`) or through a let-bound variable;
//! through a variable the inner operand must be an atom, since expressions are trees.
//!
//! What it deliberately does not do: reassociate or fold constants (FoldConstant), change
//! float results in any bit, or remove the now unused inner bindings (DeadCodeElimination).
//!
//! Phases:
//! 1. Quick scan for calls of the operators above; none → the same `Arc`.
//! 2. When every identity that applies only forwards an existing value (`x * 1` → `x`,
//!    `-(-x)` → `x`), replace the calls by those values in a copy of the arena
//!    ([`Function::substituted`]); chains (`(x * 1) * 1`) resolve in the same step.
//! 3. Otherwise one copy of the live nodes ([`passel_engine::ir::rewrite::Rewriter`]), rewriting each call
//!    once its operands are copied, so nested chains (`transpose³`) simplify in one run.

use std::cell::RefCell;
use std::sync::Arc;

use passel_engine::ir::{
    AttrValue, Attrs, ConstIdx, Constant, DType, ExprKind, Fill, Function, NodeId, OpId, Tensor, TensorData, Type,
};
use passel_engine::op;
use rustc_hash::FxHashMap;

use crate::scratch::{self, with_scratch};
use crate::census::{fewer, Counter};
use passel_engine::ir::rewrite::{bound_values, bound_values_into, Propagate, Rewriter, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "SimplifyExpr";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `SimplifyExpr` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 0, |func, _module, ctx| {
        Ok(crate::census::counted(ctx, &func, simplify_expr(&func), STATISTICS))
    })
    .with_required(&["InferType"])
}

pub(crate) static STATISTICS: &[Counter] =
    &[(&FUNCTIONS_CHANGED, |_, _| 1), (&CALLS_REMOVED, |b, a| fewer(b.calls, a.calls))];
static FUNCTIONS_CHANGED: Statistic = Statistic::new("SimplifyExpr", "functions changed", "functions simplified");
static CALLS_REMOVED: Statistic = Statistic::new("SimplifyExpr", "calls removed", "operator calls simplified away");

struct Ops {
    add: Option<OpId>,
    subtract: Option<OpId>,
    multiply: Option<OpId>,
    divide: Option<OpId>,
    negative: Option<OpId>,
    reshape: Option<OpId>,
    transpose: Option<OpId>,
    /// Indexed by operator id: whether it is one of the above.
    mask: Vec<bool>,
}

impl Ops {
    /// The operators, looked up by name once: the registry is fixed for the process.
    fn get() -> &'static Ops {
        static OPS: std::sync::OnceLock<Ops> = std::sync::OnceLock::new();
        OPS.get_or_init(Ops::lookup)
    }

    fn lookup() -> Ops {
        let mut ops = Ops {
            add: op::lookup("add"),
            subtract: op::lookup("subtract"),
            multiply: op::lookup("multiply"),
            divide: op::lookup("divide"),
            negative: op::lookup("negative"),
            reshape: op::lookup("reshape"),
            transpose: op::lookup("transpose"),
            mask: Vec::new(),
        };
        for op in [ops.add, ops.subtract, ops.multiply, ops.divide, ops.negative, ops.reshape, ops.transpose]
            .into_iter()
            .flatten()
        {
            let i = op.0 as usize;
            if ops.mask.len() <= i {
                ops.mask.resize(i + 1, false);
            }
            ops.mask[i] = true;
        }
        ops
    }

    #[inline]
    fn relevant(&self, op: OpId) -> bool {
        self.mask.get(op.0 as usize).copied().unwrap_or(false)
    }
}

/// A simplified reshape/transpose made by this run: its new operand and, for transposes,
/// its axes.
struct Made {
    arg: NodeId,
    axes: Option<(Arc<str>, Vec<i64>)>,
}

/// Per-thread buffers reused across functions (cleared, not freed).
#[derive(Default)]
struct Scratch {
    live: Vec<bool>,
    bound: Vec<NodeId>,
    subst: Vec<NodeId>,
    dropped: Vec<bool>,
    /// Per constant of the function: which identities it is (see [`identities`]).
    idents: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl scratch::Scratch for Scratch {
    fn retained(&self) -> usize {
        self.live.capacity()
    }
}

/// Binding variable → its value ([`bound_values`]), computed on first use.
struct Bound<'a> {
    func: &'a Function,
    /// The function's live mask, when at hand.
    live: Option<&'a [bool]>,
    table: &'a mut Vec<NodeId>,
    ready: bool,
}

impl Bound<'_> {
    fn value(&mut self, var: NodeId) -> NodeId {
        if !self.ready {
            match self.live {
                Some(live) => bound_values_into(self.func, live, self.table),
                None => *self.table = bound_values(self.func),
            }
            self.ready = true;
        }
        self.table[var.index()]
    }
}

/// Runs SimplifyExpr on `func`; returns `func` itself when no identity applies.
pub fn simplify_expr(func: &Arc<Function>) -> Arc<Function> {
    let ops = Ops::get();
    let any = func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Call { op, .. } if ops.relevant(op)));
    if !any || !func.is_well_formed() {
        return Arc::clone(func);
    }
    let patched = with_scratch(&SCRATCH, |s| simplify_by_substitution(func, ops, s));
    match patched {
        Some(out) => out,
        None => simplify_by_copy(func, ops),
    }
}

/// Phase 3: the copy that may rewrite a call into new nodes.
fn simplify_by_copy(func: &Arc<Function>, ops: &Ops) -> Arc<Function> {
    let mut table = Vec::new();
    let mut bound = Bound { func, live: None, table: &mut table, ready: false };
    let mut made: FxHashMap<u32, Made> = FxHashMap::default();
    let mut idents = Vec::new();
    let rw = Rewriter::new(func, Propagate::Nothing);
    let out = rw.run(|rw, id| {
        let ExprKind::Call { op, attrs, args } = *rw.func.kind(id) else { return None };
        if !ops.relevant(op) {
            return None;
        }
        let args = rw.func.ids(args);
        match args.len() {
            2 => {
                if Some(op) == ops.subtract {
                    if let Some(zero) = self_subtract(rw, id, args[0], args[1]) {
                        return Some(zero);
                    }
                }
                let keep = binary(rw.func, ops, id, op, args[0], args[1], &mut idents)?;
                Some(rw.map(keep))
            }
            1 if Some(op) == ops.negative => {
                let y = double_negative(rw.func, op, args[0], &mut bound)?;
                Some(rw.map(y))
            }
            1 if Some(op) == ops.reshape || Some(op) == ops.transpose => {
                let is_transpose = Some(op) == ops.transpose;
                let outer_attrs = rw.func.call_attrs(attrs);
                let (inner, via_var) = inner_value(rw.func, args[0], &mut bound)?;
                let new_inner = rw.map(inner);
                if new_inner == NONE {
                    return None;
                }
                let (y, inner_axes) = match made.get(&new_inner.0) {
                    Some(m) => (m.arg, m.axes.clone()),
                    None => match *rw.func.kind(inner) {
                        ExprKind::Call { op: o, attrs: ia, args: a, .. } if o == op && a.len == 1 => {
                            let axes = if is_transpose { Some(single_ints(rw.func.call_attrs(ia))?) } else { None };
                            (rw.map(rw.func.ids(a)[0]), axes)
                        }
                        _ => return None,
                    },
                };
                if via_var && !rw.b.node(y).kind.is_atom() {
                    return None;
                }
                let ty = rw.func.ty(id).cloned();
                if is_transpose {
                    let (key, p) = inner_axes?;
                    let (key2, q) = single_ints(outer_attrs)?;
                    if key != key2 {
                        return None;
                    }
                    let r = compose(&p, &q)?;
                    if r.iter().enumerate().all(|(i, &a)| a == i as i64) {
                        return Some(y);
                    }
                    let new = rw.b.call(op, &[y], Attrs::new().with(&key, AttrValue::Ints(r.clone().into())));
                    rw.b.set_ty(new, ty);
                    made.insert(new.0, Made { arg: y, axes: Some((key, r)) });
                    Some(new)
                } else {
                    let codes_ok = outer_attrs.iter().all(|(_, v)| match v {
                        AttrValue::Ints(s) => s.iter().all(|&d| d > 0 || d == -1),
                        _ => true,
                    });
                    if !codes_ok {
                        return None;
                    }
                    let new = rw.b.call(op, &[y], outer_attrs.clone());
                    rw.b.set_ty(new, ty);
                    made.insert(new.0, Made { arg: y, axes: None });
                    Some(new)
                }
            }
            _ => None,
        }
    });
    match out {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}

/// Phase 2 when every identity that applies forwards an existing value (`x * 1`, `-(-x)`):
/// the calls are replaced by those values in a copy of the arena
/// ([`Function::substituted`]). `None` when some rewrite needs a new node (a merged
/// reshape or transpose, a zero for `x - x`) or the patch is refused: the caller then copies
/// the function with the [`Rewriter`]. The identities are decided on the input's nodes, as
/// the copy decides them, so both give the same result.
fn simplify_by_substitution(func: &Arc<Function>, ops: &Ops, s: &mut Scratch) -> Option<Arc<Function>> {
    let n = func.num_nodes();
    let Scratch { live, bound: table, subst, dropped, idents } = s;
    idents.clear();
    func.live_mask_into(live);
    let live = &*live;
    let mut bound = Bound { func, live: Some(live), table, ready: false };
    let mut any = false;
    for (i, &is_live) in live.iter().enumerate() {
        let id = NodeId(i as u32);
        let ExprKind::Call { op, args, .. } = *func.kind(id) else { continue };
        if !is_live || !ops.relevant(op) {
            continue;
        }
        let args = func.ids(args);
        let keep = match args.len() {
            2 => {
                if Some(op) == ops.subtract && args[0] == args[1] && func.kind(args[0]).is_atom() {
                    return None;
                }
                binary(func, ops, id, op, args[0], args[1], idents)
            }
            1 if Some(op) == ops.negative => double_negative(func, op, args[0], &mut bound),
            1 if Some(op) == ops.reshape || Some(op) == ops.transpose => match inner_value(func, args[0], &mut bound) {
                Some((inner, _)) if matches!(*func.kind(inner), ExprKind::Call { op: o, .. } if o == op) => {
                    return None
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(keep) = keep {
            if !any {
                any = true;
                subst.clear();
                subst.resize(n, NONE);
            }
            subst[i] = keep;
        }
    }
    if !any {
        return Some(Arc::clone(func));
    }
    dropped.clear();
    dropped.resize(n, false);
    func.substituted(subst, dropped).map(Arc::new)
}

/// `negative(negative(y))`, directly or through a let-bound variable: the old `y`.
fn double_negative(func: &Function, op: OpId, arg: NodeId, bound: &mut Bound<'_>) -> Option<NodeId> {
    let (inner, via_var) = inner_value(func, arg, bound)?;
    match *func.kind(inner) {
        ExprKind::Call { op: o, args: a, .. } if o == op && a.len == 1 => {
            let y = func.ids(a)[0];
            (!via_var || func.kind(y).is_atom()).then_some(y)
        }
        _ => None,
    }
}

/// The expression an operand stands for: itself if compound, or the value of the binding of
/// a let-bound variable (with `true`).
fn inner_value(func: &Function, arg: NodeId, bound: &mut Bound<'_>) -> Option<(NodeId, bool)> {
    match func.kind(arg) {
        ExprKind::Var { .. } => {
            let value = bound.value(arg);
            (value != NONE && !func.kind(value).is_atom()).then_some((value, true))
        }
        kind if kind.is_atom() => None,
        _ => Some((arg, false)),
    }
}

/// The only attribute, if it is an integer list (the axes of a transpose).
fn single_ints(attrs: &Attrs) -> Option<(Arc<str>, Vec<i64>)> {
    let mut it = attrs.iter();
    let (key, value) = it.next()?;
    if it.next().is_some() {
        return None;
    }
    Some((key.into(), value.as_ints()?.to_vec()))
}

/// `transpose(transpose(x, p), q) = transpose(x, r)` with `r[j] = p[q[j]]`.
fn compose(p: &[i64], q: &[i64]) -> Option<Vec<i64>> {
    let rank = p.len();
    if q.len() != rank {
        return None;
    }
    let norm = |axes: &[i64]| -> Option<Vec<usize>> {
        let mut seen = vec![false; rank];
        let mut out = Vec::with_capacity(rank);
        for &a in axes {
            let a = if a < 0 { a + rank as i64 } else { a };
            let a = usize::try_from(a).ok().filter(|&a| a < rank)?;
            if std::mem::replace(&mut seen[a], true) {
                return None;
            }
            out.push(a);
        }
        Some(out)
    };
    let (p, q) = (norm(p)?, norm(q)?);
    Some(q.iter().map(|&j| p[j] as i64).collect())
}

/// The value every element of `c` has, converted exactly as the dtype stores it.
fn uniform_value(c: &Constant) -> Option<(f64, DType)> {
    match c {
        Constant::Dense(t) if t.len() == 1 => {
            let v = match &t.0 {
                TensorData::F32(a) => a.first().map(|&v| v as f64),
                TensorData::F16(a) => a.first().map(|v| v.to_f64()),
                TensorData::I64(a) => a.first().map(|&v| v as f64),
                TensorData::I32(a) => a.first().map(|&v| v as f64),
                TensorData::Bool(a) => a.first().map(|&v| v as u8 as f64),
                TensorData::F64(a) => a.first().copied(),
                TensorData::I8(a) => a.first().map(|&v| v as f64),
                TensorData::I16(a) => a.first().map(|&v| v as f64),
                TensorData::U8(a) => a.first().map(|&v| v as f64),
                TensorData::U16(a) => a.first().map(|&v| v as f64),
                TensorData::U32(a) => a.first().map(|&v| v as f64),
                // A u64 above 2^53 has no exact f64; it is no identity element anyway.
                TensorData::U64(a) => a.first().map(|&v| v as f64),
            };
            Some((v?, t.dtype()))
        }
        Constant::Fill { ty, fill: Fill::Full(v) } => {
            let stored = Tensor::scalar(ty.dtype, *v).to_f64s()[0];
            Some((stored, ty.dtype))
        }
        _ => None,
    }
}

/// Whether `c` is rank 0, and its dtype.
fn scalar_dtype(c: &Constant) -> (bool, DType) {
    match c {
        Constant::Dense(t) => (t.shape().is_empty(), t.dtype()),
        Constant::Fill { ty, .. } | Constant::Raw { ty, .. } => (ty.shape.is_empty(), ty.dtype),
    }
}

#[derive(Clone, Copy, PartialEq)]
#[repr(u8)]
enum Identity {
    One,
    /// Zero for `x + c`: integers any zero, floats only `-0.0`.
    AddZero,
    /// Zero for `x - c`: integers any zero, floats only `+0.0`.
    SubZero,
}

/// Whether a constant whose every element is `v` (of `dtype`) is identity `want`.
fn is_identity(v: f64, dtype: DType, want: Identity) -> bool {
    let int = dtype.is_int();
    match want {
        Identity::One => v == 1.0 && (int || dtype.is_float()),
        Identity::AddZero => v == 0.0 && (int || (dtype.is_float() && v.is_sign_negative())),
        Identity::SubZero => v == 0.0 && (int || (dtype.is_float() && v.is_sign_positive())),
    }
}

/// The old operand that binary call `id` reduces to by an identity (not counting `x - x`).
fn binary(
    func: &Function,
    ops: &Ops,
    id: NodeId,
    op: OpId,
    l: NodeId,
    r: NodeId,
    memo: &mut Vec<u8>,
) -> Option<NodeId> {
    let o = Some(op);
    // Whether `keep` is what the call reduces to when `c` is a constant with identity `want`.
    let mut reduces = |keep: NodeId, c: NodeId, want: Identity| {
        let ExprKind::Const { idx } = *func.kind(c) else { return false };
        identities(func, idx, memo) & (1 << want as u8) != 0
            && type_preserved(func, id, op, keep, c, func.constant(idx))
    };
    let (first, second) = if o == ops.multiply {
        (Identity::One, Some(Identity::One))
    } else if o == ops.divide {
        (Identity::One, None)
    } else if o == ops.add {
        (Identity::AddZero, Some(Identity::AddZero))
    } else if o == ops.subtract {
        (Identity::SubZero, None)
    } else {
        return None;
    };
    if reduces(l, r, first) {
        Some(l)
    } else if second.is_some_and(|want| reduces(r, l, want)) {
        Some(r)
    } else {
        None
    }
}

/// Which identities constant `idx` is, one bit per [`Identity`], memoized in `memo` (indexed
/// by constant, 0 when not computed yet) because a function uses few distinct constants.
fn identities(func: &Function, idx: ConstIdx, memo: &mut Vec<u8>) -> u8 {
    const KNOWN: u8 = 0x80;
    let i = idx.0 as usize;
    if let Some(&m) = memo.get(i) {
        if m & KNOWN != 0 {
            return m & !KNOWN;
        }
    }
    // The value is read once for all three identities (reading it walks the tensor).
    let bits = match uniform_value(func.constant(idx)) {
        Some((v, dtype)) => [Identity::One, Identity::AddZero, Identity::SubZero]
            .into_iter()
            .filter(|&want| is_identity(v, dtype, want))
            .fold(0u8, |bits, want| bits | 1 << want as u8),
        None => 0,
    };
    if memo.len() <= i {
        memo.resize(i + 1, 0);
    }
    memo[i] = KNOWN | bits;
    bits
}

/// Whether `op(keep, c)` (in the call's operand order) has the type of `keep`. `op` is one of
/// the arithmetic operators (`add`, `subtract`, `multiply`, `divide`), which broadcast.
fn type_preserved(func: &Function, call: NodeId, op: OpId, keep: NodeId, c: NodeId, cst: &Constant) -> bool {
    let Some(def) = op::try_get(op) else { return false };
    let ExprKind::Call { attrs, args, .. } = *func.kind(call) else { return false };
    match func.ty(keep) {
        Some(kt) => {
            let same_call_ty = func.ty(call).is_none_or(|t| t == kt);
            // The arithmetic operators broadcast: a rank-0 constant of `keep`'s (numeric) dtype
            // gives `keep`'s type, as the type relation below would say, without building types.
            let (rank0, dtype) = scalar_dtype(cst);
            if rank0
                && keep != c
                && (dtype.is_int() || dtype.is_float())
                && kt.as_tensor().is_some_and(|t| t.dtype == dtype)
            {
                return same_call_ty;
            }
            let ct = cst.ty();
            let tys: Vec<Type> = func.ids(args).iter().map(|&a| if a == c { ct.clone() } else { kt.clone() }).collect();
            same_call_ty && (def.type_rel)(&tys, func.call_attrs(attrs)).is_ok_and(|t| &t == kt)
        }
        None => {
            let (rank0, dtype) = scalar_dtype(cst);
            rank0 && func.ty(call).is_none_or(|t| t.as_tensor().is_some_and(|t| t.dtype == dtype))
        }
    }
}

/// `subtract(x, x)` for an integer `x` of known type: a zero constant.
fn self_subtract(rw: &mut Rewriter<'_>, call: NodeId, l: NodeId, r: NodeId) -> Option<NodeId> {
    let func = rw.func;
    if l != r || !func.kind(l).is_atom() {
        return None;
    }
    let ty = func.ty(l).or(func.ty(call))?.as_tensor()?.clone();
    if !ty.dtype.is_int() || func.ty(call).is_some_and(|t| t.as_tensor() != Some(&ty)) {
        return None;
    }
    Some(rw.constant(Arc::new(Constant::Fill { ty, fill: Fill::Full(0.0) })))
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, FunctionBuilder, TensorType};

    use super::*;

    fn add() -> OpId {
        op::lookup("add").unwrap()
    }

    fn scalar(dtype: DType, v: f64) -> Constant {
        Constant::Dense(Tensor::scalar(dtype, v))
    }

    /// `fn(x: ty) { op(x, c) }` or with operands swapped.
    fn binary_fn(op: OpId, ty: Option<Type>, c: Constant, swap: bool) -> Arc<Function> {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", ty);
        let k = b.constant(c);
        let args = if swap { [k, x] } else { [x, k] };
        let body = b.call(op, &args, Attrs::new());
        Arc::new(b.finish(&[x], body, None, Attrs::new()))
    }

    fn is_param(f: &Function) -> bool {
        f.body() == f.params()[0]
    }

    #[test]
    fn simplify_expr_substitution_equals_copy() {
        // let a = multiply(x, 1); let b = negative(a); let c = negative(b);
        // let d = multiply(multiply(c, 1.0), 1.0); (a, d)
        let mul = op::lookup("multiply").unwrap();
        let neg = op::lookup("negative").unwrap();
        let ty = Some(Type::tensor(vec![4], DType::F32));
        let mut b = FunctionBuilder::new();
        let x = b.var("x", ty.clone());
        let one = b.constant(scalar(DType::F32, 1.0));
        let av = b.call(mul, &[x, one], Attrs::new());
        b.set_ty(av, ty.clone());
        let a = b.var("a", ty.clone());
        let bv = b.call(neg, &[a], Attrs::new());
        let bb = b.var("b", ty.clone());
        let cv = b.call(neg, &[bb], Attrs::new());
        let c = b.var("c", ty.clone());
        let inner = b.call(mul, &[c, one], Attrs::new());
        b.set_ty(inner, ty.clone());
        let dv = b.call(mul, &[inner, one], Attrs::new());
        let d = b.var("d", ty.clone());
        let tup = b.tuple(&[a, d]);
        let body = b.block(&[(a, av), (bb, bv), (c, cv), (d, dv)], tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let patched = simplify_by_substitution(&func, Ops::get(), &mut Scratch::default()).unwrap();
        let copied = simplify_by_copy(&func, Ops::get());
        assert!(!Arc::ptr_eq(&patched, &func));
        assert!(structural_eq(&patched, &copied));
        assert!(Arc::ptr_eq(&simplify_expr(&patched), &patched));
    }

    /// Typed operands are covered by `filetests/SimplifyExpr/identity-operands.pir`; an operand
    /// whose type is unknown (no InferType ran) cannot be written there, since the filetests
    /// type their input.
    #[test]
    fn simplify_expr_removes_add_of_zero_on_an_untyped_operand_only_for_a_rank_0_zero() {
        let zeros =
            Constant::Fill { ty: TensorType { shape: vec![4, 3].into(), dtype: DType::I32 }, fill: Fill::Full(0.0) };
        let f = binary_fn(add(), None, zeros, false);
        assert!(Arc::ptr_eq(&simplify_expr(&f), &f));
        let f = binary_fn(add(), None, scalar(DType::I64, 0.0), false);
        assert!(is_param(&simplify_expr(&f)));
    }

    /// A fill stored as an integer is truncated, so `full<(), i32>(0.5)` is zero; the parser
    /// refuses such a fill, so only a builder can make it.
    #[test]
    fn simplify_expr_counts_a_fill_truncating_to_zero_as_zero() {
        let half = Constant::Fill { ty: TensorType { shape: vec![].into(), dtype: DType::I32 }, fill: Fill::Full(0.5) };
        let f = binary_fn(add(), Some(Type::tensor(vec![2], DType::I32)), half, false);
        assert!(is_param(&simplify_expr(&f)));
    }

    #[test]
    fn compose_of_transposes_matches_applying_both() {
        assert_eq!(compose(&[1, 2, 0], &[1, 2, 0]), Some(vec![2, 0, 1]));
        assert_eq!(compose(&[1, 0], &[1, 0]), Some(vec![0, 1]));
        assert_eq!(compose(&[0, 0], &[1, 0]), None);
        assert_eq!(compose(&[-1, 0], &[1, 0]), Some(vec![0, 1]));
    }
}
