//! LoopPartition (prim_func pass, opt level 0): TVM's `tir.LoopPartition` (now
//! `s_tir.transform.LoopPartition`), splitting a loop whose body tests its variable into a
//! prologue, a body and an epilogue in which the tests are decided.
//!
//! Config, TVM's `tir.LoopPartition` config with one typed key per field:
//! `tir.LoopPartition.partition_const_loop` (default false),
//! `tir.LoopPartition.no_unroll_loop_with_extent_one` (false) and
//! `tir.LoopPartition.unroll_loop_with_partition_hint_no_interval` (false).
//!
//! What it does, with TVM's rules: a candidate is a loop with a constant range under
//! `partition_const_loop`, or a loop directly under `attr "pragma_loop_partition_hint" = c`
//! with `c` non-zero (TVM's loop annotation; always a candidate). Its conditions are the
//! comparisons (`lt le gt ge`, also as conjuncts of `and`) in the `if` and `select`
//! conditions of its body whose operands are affine in its variable and in other loop
//! variables of constant ranges. For each, interval arithmetic over those other variables
//! gives the subrange of the loop where it holds for every value they take, and where it
//! fails for every one. As TVM does, the loop is split around the intersection of the
//! subranges where the conditions hold (or, if there is none, where they fail): the middle
//! loop gets those conditions replaced by `true` (`false`), the loops before and after keep
//! the body as it is (every piece gets the conditions decided over its own subrange replaced
//! too, and an `if` whose condition is then decided keeps only the branch that runs, so no
//! piece holds code for values it never takes); then the pieces are partitioned again, outermost loops first. For a
//! hinted loop whose conditions have no common subrange, the conditions are intersected in
//! program order until the next one would make it empty (TVM's hinted search). A piece
//! of extent 1 is its body with the variable replaced by its value, unless
//! `no_unroll_loop_with_extent_one`. A hinted loop with no such subrange becomes an `unroll`
//! loop under `unroll_loop_with_partition_hint_no_interval`. The hints are removed (TVM's
//! `RemoveLikelyTagsAndHints`). Every copy of a body has fresh variables and buffers.
//!
//! Differences from TVM, because of this IR: there is no `likely` intrinsic, so every
//! comparison counts (TVM takes only `likely` ones on loops without a hint); pieces keep the
//! loop's variable range (`for %i in serial(1, 4)`) instead of TVM's zero-based copy with
//! `%i + 1` substituted. Not done: loops whose range is not constant (TVM deduces symbolic
//! bounds), thread-scope partitioning. At most [`MAX_PARTITIONS`] splits per function, so a
//! bad input cannot make the output explode. The decided conditions are left for Simplify
//! to fold (`and(true, c)`), as TVM leaves them to its simplifier.
//!
//! Phases (repeated until no loop splits):
//! 1. Expressions in ascending order: affine forms over loop variables with constant ranges.
//! 2. Statements in descending order (outer first): the first candidate loop whose conditions
//!    decide a subrange.
//! 3. The pieces are built ([`Copier`](super::copy::Copier) with fresh binders and the decided
//!    conditions as constants), then the function around them is copied.

use std::sync::Arc;

use passel_engine::tir::{BinOp, ForKind, PExprId, PExprKind, PrimFunc, PrimFuncBuilder, StmtId, StmtKind, VarId};
use passel_engine::transform::{ConfigType, PassContext, PrimFuncPass};
use rustc_hash::FxHashMap;

use super::copy::{Copier, VarMap};
use super::simplify::type_range;

/// The registry name.
pub const NAME: &str = "LoopPartition";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// Config key: partition loops with a constant range.
pub const PARTITION_CONST_LOOP_KEY: &str = "tir.LoopPartition.partition_const_loop";
/// Config key: keep pieces of extent 1 as loops.
pub const NO_UNROLL_LOOP_WITH_EXTENT_ONE_KEY: &str = "tir.LoopPartition.no_unroll_loop_with_extent_one";
/// Config key: mark hinted loops that cannot be partitioned `unroll`.
pub const UNROLL_LOOP_WITH_PARTITION_HINT_NO_INTERVAL_KEY: &str =
    "tir.LoopPartition.unroll_loop_with_partition_hint_no_interval";

passel_engine::register_config!(
    PARTITION_CONST_LOOP_KEY,
    ConfigType::Bool,
    "LoopPartition partitions loops with a constant range (default false)"
);
passel_engine::register_config!(
    NO_UNROLL_LOOP_WITH_EXTENT_ONE_KEY,
    ConfigType::Bool,
    "LoopPartition keeps pieces of extent 1 as loops instead of substituting the variable (default false)"
);
passel_engine::register_config!(
    UNROLL_LOOP_WITH_PARTITION_HINT_NO_INTERVAL_KEY,
    ConfigType::Bool,
    "LoopPartition marks loops with a partition hint and no decided subrange unroll (default false)"
);

/// The attribute that marks the loop in its body as a partition candidate.
pub const PARTITION_HINT: &str = "pragma_loop_partition_hint";

/// The most splits LoopPartition makes in one function.
pub const MAX_PARTITIONS: usize = 256;

/// The `tir.LoopPartition` config (TVM's `LoopPartitionConfig`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionConfig {
    /// `partition_const_loop`.
    pub partition_const_loop: bool,
    /// `no_unroll_loop_with_extent_one`.
    pub no_unroll_loop_with_extent_one: bool,
    /// `unroll_loop_with_partition_hint_no_interval`.
    pub unroll_loop_with_partition_hint_no_interval: bool,
}

impl PartitionConfig {
    /// The config of `ctx`, defaults for absent fields.
    pub fn from_context(ctx: &PassContext) -> PartitionConfig {
        PartitionConfig {
            partition_const_loop: ctx.get_config(PARTITION_CONST_LOOP_KEY, false),
            no_unroll_loop_with_extent_one: ctx.get_config(NO_UNROLL_LOOP_WITH_EXTENT_ONE_KEY, false),
            unroll_loop_with_partition_hint_no_interval: ctx
                .get_config(UNROLL_LOOP_WITH_PARTITION_HINT_NO_INTERVAL_KEY, false),
        }
    }
}

/// The `LoopPartition` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, ctx| {
        Ok(loop_partition(&func, PartitionConfig::from_context(ctx)))
    })
}

type R<T> = Result<T, String>;

/// Runs LoopPartition on `func` with `cfg`; returns `func` itself when nothing changes.
pub fn loop_partition(func: &Arc<PrimFunc>, cfg: PartitionConfig) -> Arc<PrimFunc> {
    let mut cur: Option<PrimFunc> = None;
    for _ in 0..MAX_PARTITIONS {
        let f = cur.as_ref().unwrap_or(func);
        match step(f, cfg) {
            Ok(Some(next)) => cur = Some(next),
            Ok(None) => break,
            Err(_) => return func.clone(),
        }
    }
    let f = cur.as_ref().map(|f| f as &PrimFunc).unwrap_or(func);
    match remove_hints(f) {
        Ok(Some(g)) => Arc::new(g),
        Ok(None) => cur.map(Arc::new).unwrap_or_else(|| func.clone()),
        Err(_) => func.clone(),
    }
}

/// An affine form `k + Σ c·x` over loop variables, exact in i128.
#[derive(Clone, Debug, Default)]
struct Affine {
    k: i128,
    terms: Vec<(VarId, i128)>,
}

impl Affine {
    fn add(&self, o: &Affine, sign: i128) -> Option<Affine> {
        let mut terms = self.terms.clone();
        for &(v, c) in &o.terms {
            let c = c.checked_mul(sign)?;
            match terms.iter_mut().find(|(w, _)| *w == v) {
                Some(t) => t.1 = t.1.checked_add(c)?,
                None => terms.push((v, c)),
            }
        }
        terms.retain(|t| t.1 != 0);
        Some(Affine { k: self.k.checked_add(o.k.checked_mul(sign)?)?, terms })
    }

    fn scale(&self, s: i128) -> Option<Affine> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for &(v, c) in &self.terms {
            let c = c.checked_mul(s)?;
            if c != 0 {
                terms.push((v, c));
            }
        }
        Some(Affine { k: self.k.checked_mul(s)?, terms })
    }

    /// The interval over the variables' ranges, leaving out `skip`.
    fn interval(&self, ranges: &FxHashMap<VarId, (i128, i128)>, skip: Option<VarId>) -> Option<(i128, i128)> {
        let (mut lo, mut hi) = (self.k, self.k);
        for &(v, c) in &self.terms {
            if Some(v) == skip {
                continue;
            }
            let &(a, b) = ranges.get(&v)?;
            let (x, y) = (c.checked_mul(a)?, c.checked_mul(b)?);
            lo = lo.checked_add(x.min(y))?;
            hi = hi.checked_add(x.max(y))?;
        }
        Some((lo, hi))
    }

    fn coeff(&self, v: VarId) -> i128 {
        self.terms.iter().find(|t| t.0 == v).map_or(0, |t| t.1)
    }
}

const NEG_INF: i128 = i128::MIN / 4;
const POS_INF: i128 = i128::MAX / 4;

/// `v` such that `c·v <= k` (c ≠ 0), as an interval.
fn solve_le(c: i128, k: i128) -> (i128, i128) {
    if c > 0 {
        (NEG_INF, k.div_euclid(c))
    } else {
        // c·v <= k  ⇔  v >= ceil(k / c) with c < 0  ⇔  v >= -floor(k / -c)
        (-(k.div_euclid(-c)), POS_INF)
    }
}

/// `v` such that `c·v >= k` (c ≠ 0).
fn solve_ge(c: i128, k: i128) -> (i128, i128) {
    let (lo, hi) = solve_le(-c, -k);
    (lo, hi)
}

fn meet(a: (i128, i128), b: (i128, i128)) -> (i128, i128) {
    (a.0.max(b.0), a.1.min(b.1))
}

fn empty(a: (i128, i128)) -> bool {
    a.0 > a.1
}

/// One decided condition: the comparison node and where it holds / fails for sure.
struct Cond {
    e: PExprId,
    holds: (i128, i128),
    fails: (i128, i128),
}

fn step(f: &PrimFunc, cfg: PartitionConfig) -> R<Option<PrimFunc>> {
    let n = f.stmts().len();
    // Loop variables with constant ranges, and the hinted loops.
    let mut ranges: FxHashMap<VarId, (i128, i128)> = FxHashMap::default();
    let mut hinted = vec![false; n];
    for s in f.stmts() {
        match s.kind {
            StmtKind::For { var, min, extent, .. } => {
                if let (PExprKind::Int(m), PExprKind::Int(e)) = (f.expr(min).kind, f.expr(extent).kind) {
                    if e > 0 {
                        ranges.insert(var, (m as i128, m as i128 + e as i128 - 1));
                    }
                }
            }
            StmtKind::Attr { key, value, body } if f.string(key) == PARTITION_HINT => {
                // The hinted loop, or the pieces it was split into.
                if matches!(f.expr(value).kind, PExprKind::Int(v) if v != 0) {
                    let loops: &[StmtId] = match f.stmt(body).kind {
                        StmtKind::Seq(r) => f.stmt_list(r),
                        _ => std::slice::from_ref(&body),
                    };
                    for &l in loops {
                        if matches!(f.stmt(l).kind, StmtKind::For { .. }) {
                            hinted[l.index()] = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // Phase 1: affine forms whose every sub-expression stays inside its dtype.
    let ne = f.exprs().len();
    let mut aff: Vec<Option<Affine>> = vec![None; ne];
    for i in 0..ne {
        let e = f.expr(PExprId(i as u32));
        if !e.ty.dtype.is_integer() || !e.ty.is_scalar() {
            continue;
        }
        let a = match e.kind {
            PExprKind::Int(k) => Some(Affine { k: k as i128, terms: Vec::new() }),
            PExprKind::Var(v) if ranges.contains_key(&v) => Some(Affine { k: 0, terms: vec![(v, 1)] }),
            PExprKind::Bin(op @ (BinOp::Add | BinOp::Sub), a, b) => match (&aff[a.index()], &aff[b.index()]) {
                (Some(x), Some(y)) => x.add(y, if op == BinOp::Add { 1 } else { -1 }),
                _ => None,
            },
            PExprKind::Bin(BinOp::Mul, a, b) => match (&aff[a.index()], &aff[b.index()]) {
                (Some(x), Some(y)) if y.terms.is_empty() => x.scale(y.k),
                (Some(x), Some(y)) if x.terms.is_empty() => y.scale(x.k),
                _ => None,
            },
            _ => None,
        };
        let (lo, hi) = type_range(e.ty.dtype);
        aff[i] = a.filter(|a| a.interval(&ranges, None).is_some_and(|(l, h)| l >= lo && h <= hi));
    }
    // Conditions: the comparison conjuncts of `if` and `select` conditions, by statement.
    let mut roots: Vec<Vec<PExprId>> = vec![Vec::new(); n];
    {
        let mut ops = Vec::new();
        let mut exprs = Vec::new();
        for (i, s) in f.stmts().iter().enumerate() {
            exprs.clear();
            f.stmt_exprs(StmtId(i as u32), &mut exprs);
            let mut stack = exprs.clone();
            while let Some(e) = stack.pop() {
                if let PExprKind::Select(c, _, _) = f.expr(e).kind {
                    conjuncts(f, c, &mut roots[i]);
                }
                ops.clear();
                f.expr_operands(e, &mut ops);
                stack.extend_from_slice(&ops);
            }
            if let StmtKind::If { cond, .. } = s.kind {
                conjuncts(f, cond, &mut roots[i]);
            }
        }
    }
    // Phase 2: the first candidate, outermost first.
    for i in (0..n).rev() {
        let s = StmtId(i as u32);
        let StmtKind::For { var, kind, body, .. } = f.stmt(s).kind else { continue };
        let Some(&(lo, hi)) = ranges.get(&var) else { continue };
        if !(cfg.partition_const_loop || hinted[i]) {
            continue;
        }
        // Conditions in the body.
        let mut conds = Vec::new();
        let mut stack = vec![body];
        while let Some(t) = stack.pop() {
            for &e in &roots[t.index()] {
                if let Some(c) = decide(f, &aff, &ranges, var, e) {
                    conds.push(c);
                }
            }
            stack.extend_from_slice(f.children(t).as_slice());
        }
        // In program order (the arenas are post-order), as the hinted search depends on it.
        conds.sort_unstable_by_key(|c| c.e);
        let range = (lo, hi);
        let pick = |want: bool| -> Option<((i128, i128), Vec<PExprId>)> {
            let mut mid = (NEG_INF, POS_INF);
            let mut set = Vec::new();
            for c in &conds {
                let iv = if want { c.holds } else { c.fails };
                if !empty(meet(iv, range)) {
                    mid = meet(mid, iv);
                    set.push(c.e);
                }
            }
            let mid = meet(mid, range);
            if !set.is_empty() && !empty(mid) {
                return Some((mid, set));
            }
            if !hinted[i] {
                return None;
            }
            // TVM's search for hinted loops: intersect the conditions in order until the
            // intersection would be empty.
            let (mut mid, mut set) = (range, Vec::new());
            for c in &conds {
                let iv = if want { c.holds } else { c.fails };
                if empty(meet(iv, range)) {
                    continue;
                }
                let next = meet(mid, iv);
                if empty(next) {
                    break;
                }
                mid = next;
                set.push(c.e);
            }
            (!set.is_empty()).then_some((mid, set))
        };
        let Some((want, (mid, set))) = pick(true).map(|p| (true, p)).or_else(|| pick(false).map(|p| (false, p)))
        else {
            if hinted[i] && cfg.unroll_loop_with_partition_hint_no_interval && hi > lo && kind != ForKind::Unrolled {
                let mut copier = Copier::new(f);
                copier.kinds.insert(s, ForKind::Unrolled);
                let mut b = PrimFuncBuilder::with_signature_of(f);
                let root = copier.stmt(&mut b, f.body())?;
                return Ok(Some(b.finish(root)));
            }
            continue;
        };
        // Phase 3: the pieces, then the function around them.
        let mut b = PrimFuncBuilder::with_signature_of(f);
        let mut copier = Copier::new(f);
        copier.fresh = true;
        let mut pieces = Vec::new();
        let parts = [((lo, mid.0 - 1), false), (mid, true), ((mid.1 + 1, hi), false)];
        for ((a, z), decided) in parts {
            if a > z {
                continue;
            }
            // Every condition decided over the piece, and the chosen ones in the middle.
            copier.consts.clear();
            for c in &conds {
                if meet(c.holds, (a, z)) == (a, z) {
                    copier.consts.insert(c.e, 1);
                } else if meet(c.fails, (a, z)) == (a, z) {
                    copier.consts.insert(c.e, 0);
                }
            }
            if decided {
                for &e in &set {
                    copier.consts.insert(e, want as i64);
                }
            }
            let ty = f.var(var).ty;
            if a == z && !cfg.no_unroll_loop_with_extent_one {
                copier.vars.insert(var, VarMap::Int(a));
                pieces.push(copier.stmt(&mut b, body)?);
            } else {
                let w = b.var(&f.var(var).name, ty)?;
                copier.vars.insert(var, VarMap::Var(w));
                let new_body = copier.stmt(&mut b, body)?;
                let bound = |x: i128| i64::try_from(x).map_err(|_| format!("loop {s}: bound {x} out of range"));
                let start = b.int(bound(a)?, ty)?;
                let len = b.int(bound(z - a + 1)?, ty)?;
                pieces.push(b.for_(w, start, len, kind, new_body)?);
            }
        }
        let whole = b.seq(&pieces);
        let mut outer = Copier::new(f);
        outer.replace.insert(s, whole);
        let root = outer.stmt(&mut b, f.body())?;
        return Ok(Some(b.finish(root)));
    }
    Ok(None)
}

/// The comparison conjuncts of condition `c` (through `and`).
fn conjuncts(f: &PrimFunc, c: PExprId, out: &mut Vec<PExprId>) {
    let mut stack = vec![c];
    while let Some(e) = stack.pop() {
        match f.expr(e).kind {
            PExprKind::Bin(BinOp::And, a, b) => stack.extend([b, a]),
            PExprKind::Bin(BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, _, _) if f.expr(e).ty.is_scalar() => {
                out.push(e)
            }
            _ => {}
        }
    }
}

/// Where comparison `e` holds and fails for every value of the variables other than `v`.
fn decide(
    f: &PrimFunc,
    aff: &[Option<Affine>],
    ranges: &FxHashMap<VarId, (i128, i128)>,
    v: VarId,
    e: PExprId,
) -> Option<Cond> {
    let PExprKind::Bin(op, a, b) = f.expr(e).kind else { return None };
    let (x, y) = (aff[a.index()].as_ref()?, aff[b.index()].as_ref()?);
    // d = a - b; with gt / ge use -d: every case becomes d < 0 or d <= 0.
    let (d, strict) = match op {
        BinOp::Lt => (x.add(y, -1)?, true),
        BinOp::Le => (x.add(y, -1)?, false),
        BinOp::Gt => (y.add(x, -1)?, true),
        BinOp::Ge => (y.add(x, -1)?, false),
        _ => return None,
    };
    let c = d.coeff(v);
    if c == 0 {
        return None;
    }
    let (rlo, rhi) = d.interval(ranges, Some(v))?;
    // Far from i128's ends, so the negations and the ±1 below cannot overflow.
    const LIMIT: i128 = 1 << 100;
    if c.abs() > LIMIT || rlo.abs() > LIMIT || rhi.abs() > LIMIT {
        return None;
    }
    // d = c·v + r with r in [rlo, rhi].
    let (holds, fails) = if strict {
        // holds: c·v + rhi < 0; fails: c·v + rlo >= 0.
        (solve_le(c, -rhi - 1), solve_ge(c, -rlo))
    } else {
        // holds: c·v + rhi <= 0; fails: c·v + rlo > 0.
        (solve_le(c, -rhi), solve_ge(c, -rlo + 1))
    };
    Some(Cond { e, holds, fails })
}

/// Removes the partition hints; `None` when there is none.
fn remove_hints(f: &PrimFunc) -> R<Option<PrimFunc>> {
    let hints: Vec<StmtId> = (0..f.stmts().len() as u32)
        .map(StmtId)
        .filter(|&s| matches!(f.stmt(s).kind, StmtKind::Attr { key, .. } if f.string(key) == PARTITION_HINT))
        .collect();
    if hints.is_empty() {
        return Ok(None);
    }
    // Copy each hint's body first, then the function with every hint replaced by it; the
    // outermost hints are copied last, so nested hints are replaced inside them too.
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    for &h in &hints {
        let StmtKind::Attr { body, .. } = f.stmt(h).kind else { continue };
        let new = copier.stmt(&mut b, body)?;
        copier.replace.insert(h, new);
    }
    let root = copier.stmt(&mut b, f.body())?;
    Ok(Some(b.finish(root)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::tir::print_prim_func;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn loop_partition_leaves_constant_loops_by_default_and_returns_the_same_arc() {
        let f = prim(
            "prim @f(%A: Buffer[(8,), i64]) { for %i in serial(0, 8) { if (lt(%i, 4)) { %A[%i] = 1; } } }",
        );
        assert!(Arc::ptr_eq(&loop_partition(&f, PartitionConfig::default()), &f));
    }

    #[test]
    fn loop_partition_splits_constant_loops_with_partition_const_loop() {
        let f = prim(
            "prim @f(%A: Buffer[(8,), i64]) { for %i in serial(0, 8) { if (lt(%i, 4)) { %A[%i] = 1; } } }",
        );
        let cfg = PartitionConfig { partition_const_loop: true, ..PartitionConfig::default() };
        expect_test::expect![[r#"
            prim @f(%A: Buffer[(8,), i64]) {
              for %i in serial(0, 4) {
                %A[%i] = 1;
              }
              for %i_1 in serial(4, 4) {
              }
            }
        "#]]
        .assert_eq(&print_prim_func("f", &loop_partition(&f, cfg)));
    }

    #[test]
    fn loop_partition_reads_its_config_from_the_context() {
        let ctx = PassContext::builder()
            .config(PARTITION_CONST_LOOP_KEY, true)
            .config(UNROLL_LOOP_WITH_PARTITION_HINT_NO_INTERVAL_KEY, true)
            .build()
            .expect("valid config");
        let cfg = PartitionConfig::from_context(&ctx);
        assert_eq!(
            cfg,
            PartitionConfig {
                partition_const_loop: true,
                no_unroll_loop_with_extent_one: false,
                unroll_loop_with_partition_hint_no_interval: true
            }
        );
    }

    #[test]
    fn solving_linear_bounds_rounds_toward_the_inside() {
        // 3·v <= 7 → v <= 2; -3·v <= 7 → v >= -2; 3·v >= 7 → v >= 3; -3·v >= 7 → v <= -3.
        assert_eq!(solve_le(3, 7).1, 2);
        assert_eq!(solve_le(-3, 7).0, -2);
        assert_eq!(solve_ge(3, 7).0, 3);
        assert_eq!(solve_ge(-3, 7).1, -3);
    }
}
