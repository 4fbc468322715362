//! VectorizeLoop (prim_func pass, opt level 0): TVM's `tir.transform.VectorizeLoop`, turning
//! `vectorized` loops into vector expressions (`ramp` / `broadcast`).
//!
//! Argument and config, as TVM has them: the pass takes `enable_vectorize` (TVM's
//! `VectorizeLoop(enable_vectorize=True)`); the registered pass reads it from the
//! `tir.disable_vectorize` config (default false), as TVM's lowering pipeline calls
//! `VectorizeLoop(not disable_vectorize)`. Disabled, every `vectorized` loop becomes
//! `serial` (TVM's `VectorizeSkipper`).
//!
//! What it does, with TVM's rules: a `vectorized` loop with a constant extent `n` (2 to
//! [`MAX_LANES`](passel_engine::tir::MAX_LANES)) disappears and its variable becomes
//! `ramp(min, 1, n)` in its body. Every expression that depends on the variable becomes an
//! `n`-lane vector, scalar operands broadcast to it; a store with a vector index or value
//! becomes a vector store (a scalar value is broadcast; a scalar index with a vector value
//! broadcasts its last index, so the last lane wins as the last iteration would). Statements
//! that cannot be vectorized are scalarized, each on its own (TVM's `Scalarize`): the
//! statement is wrapped in `for %i_s in serial(min, n)` with the variable renamed. That
//! happens for an `if` whose condition depends on the variable, a `let` or `attr` whose
//! value does, a loop whose bounds do, and any statement whose expressions would combine the
//! variable with a vector already present (`ramp`, `broadcast`, vector loads) or bind it in a
//! `let` expression (variables are scalars in this IR, so a vector `let` cannot exist).
//! Loops it cannot vectorize become `serial`, as TVM does: a non-constant extent, an extent
//! below 2 or above the lane limit, and a `vectorized` loop inside a loop being vectorized
//! (TVM warns and ignores it).
//!
//! The contract is TVM's: a `vectorized` loop promises that its iterations are independent,
//! so running all lanes of one statement before the next statement is allowed. A statement
//! that does not depend on the variable runs once, not once per iteration.
//!
//! What it deliberately does not do (and TVM does): predicate loads and stores under an `if`
//! for targets with masked vectors, scalable vectors, vectorize over `alloc`ated buffers (an
//! `alloc` inside a vectorized loop is fresh per iteration, so it is scalarized; TVM's current
//! vectorizer leaves it shared by all lanes).
//!
//! Phases:
//! 1. Expressions in ascending order (operands first): whether each depends on a variable
//!    being vectorized, and whether it can be vectorized.
//! 2. Statements in descending order (parents first): the mode of each (plain copy, vector,
//!    scalarized root, copy inside a scalarized root).
//! 3. Statements in ascending order rebuilt in their mode.
//! 4. No `vectorized` loop → the input `Arc`.

use std::sync::Arc;

use passel_engine::tir::{
    ForKind, PExprId, PExprKind, PrimFunc, PrimFuncBuilder, StmtId, StmtKind, VarId, MAX_LANES,
};
use passel_engine::transform::{ConfigType, PassContext, PrimFuncPass};
use rustc_hash::FxHashMap;

use super::copy::{Copier, VarMap};

/// The registry name.
pub const NAME: &str = "VectorizeLoop";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// Config key: turn `vectorized` loops into `serial` ones instead of vectorizing them.
pub const DISABLE_VECTORIZE_KEY: &str = "tir.disable_vectorize";

passel_engine::register_config!(
    DISABLE_VECTORIZE_KEY,
    ConfigType::Bool,
    "VectorizeLoop makes vectorized loops serial instead of vectorizing them (default false)"
);

/// The `VectorizeLoop` pass as registered: `enable_vectorize` is `!tir.disable_vectorize`.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, ctx| {
        Ok(vectorize_loop(&func, enable_vectorize(ctx)))
    })
}

/// `enable_vectorize` as the context configures it.
pub fn enable_vectorize(ctx: &PassContext) -> bool {
    !ctx.get_config(DISABLE_VECTORIZE_KEY, false)
}

type R<T> = Result<T, String>;

/// Runs VectorizeLoop on `func`; returns `func` itself when it has no `vectorized` loop.
pub fn vectorize_loop(func: &Arc<PrimFunc>, enable_vectorize: bool) -> Arc<PrimFunc> {
    let f: &PrimFunc = func;
    if !f.stmts().iter().any(|s| matches!(s.kind, StmtKind::For { kind: ForKind::Vectorized, .. })) {
        return func.clone();
    }
    match run(f, enable_vectorize) {
        Ok(new) => Arc::new(new),
        Err(_) => func.clone(),
    }
}

/// How a statement is rebuilt.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// Copied as it is (outside vectorized loops).
    Plain,
    /// Vectorized over the loop `ctx` (its statement id).
    Vector(StmtId),
    /// Scalarized: copied with the loop variable of `ctx` renamed, wrapped in a serial loop.
    ScalarRoot(StmtId),
    /// Inside a scalarized statement of the loop `ctx`: copied with the variable renamed.
    Scalar(StmtId),
}

/// A loop being vectorized.
#[derive(Clone, Copy)]
struct Ctx {
    var: VarId,
    min: PExprId,
    lanes: u16,
}

fn run(f: &PrimFunc, enable: bool) -> R<PrimFunc> {
    let n = f.stmts().len();
    // Phase 2 first decides which loops vectorize (top-down), so it runs before phase 1 needs
    // the set of their variables.
    let mut ctxs: FxHashMap<StmtId, Ctx> = FxHashMap::default();
    let mut ctx_of_var: FxHashMap<VarId, StmtId> = FxHashMap::default();
    let mut inside = vec![false; n];
    for i in (0..n).rev() {
        let s = StmtId(i as u32);
        let within = inside[i];
        if let StmtKind::For { var, min, extent, kind: ForKind::Vectorized, .. } = f.stmt(s).kind {
            let lanes = match f.expr(extent).kind {
                PExprKind::Int(v) if (2..=MAX_LANES as i64).contains(&v) => Some(v as u16),
                _ => None,
            };
            if let (true, false, Some(lanes)) = (enable, within, lanes) {
                ctxs.insert(s, Ctx { var, min, lanes });
                ctx_of_var.insert(var, s);
                for &c in f.children(s).as_slice() {
                    inside[c.index()] = true;
                }
                continue;
            }
        }
        for &c in f.children(s).as_slice() {
            inside[c.index()] = within;
        }
    }

    // Phase 1: per expression, the loop it depends on and whether it can be vectorized.
    let ne = f.exprs().len();
    let mut dep: Vec<Option<StmtId>> = vec![None; ne];
    let mut has_vec = vec![false; ne];
    let mut bad = vec![false; ne];
    let mut ops = Vec::new();
    for i in 0..ne {
        let e = PExprId(i as u32);
        let node = f.expr(e);
        ops.clear();
        f.expr_operands(e, &mut ops);
        let mut d = match node.kind {
            PExprKind::Var(v) => ctx_of_var.get(&v).copied(),
            _ => None,
        };
        let mut v = node.ty.lanes > 1;
        let mut b = false;
        for &o in &ops {
            d = d.or(dep[o.index()]);
            v |= has_vec[o.index()];
            b |= bad[o.index()];
        }
        if let PExprKind::Let(_, value, _) = node.kind {
            b |= dep[value.index()].is_some();
        }
        dep[i] = d;
        has_vec[i] = v;
        bad[i] = b || (d.is_some() && v);
    }

    // Phase 2: statement modes.
    let mut mode = vec![Mode::Plain; n];
    let mut exprs = Vec::new();
    for i in (0..n).rev() {
        let s = StmtId(i as u32);
        let m = mode[i];
        let child = match m {
            Mode::Plain if ctxs.contains_key(&s) => Mode::Vector(s),
            Mode::Plain => Mode::Plain,
            Mode::Vector(c) => {
                exprs.clear();
                f.stmt_exprs(s, &mut exprs);
                let depends = |e: &PExprId| dep[e.index()].is_some();
                let scalarize = match f.stmt(s).kind {
                    StmtKind::Store { .. } | StmtKind::Evaluate(_) => exprs.iter().any(|e| bad[e.index()]),
                    StmtKind::For { .. } | StmtKind::Let { .. } | StmtKind::If { .. } | StmtKind::Attr { .. } => {
                        exprs.iter().any(depends)
                    }
                    StmtKind::Alloc { .. } => true,
                    StmtKind::Seq(_) | StmtKind::Decl { .. } => false,
                };
                if scalarize {
                    mode[i] = Mode::ScalarRoot(c);
                    Mode::Scalar(c)
                } else {
                    Mode::Vector(c)
                }
            }
            Mode::ScalarRoot(c) | Mode::Scalar(c) => Mode::Scalar(c),
        };
        for &ch in f.children(s).as_slice() {
            mode[ch.index()] = child;
        }
    }

    // Phase 3: rebuild.
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    // The renamed variable of each scalarized root.
    let mut scalar_var: FxHashMap<StmtId, VarId> = FxHashMap::default();
    let mut root_of: Vec<Option<StmtId>> = vec![None; n];
    for i in (0..n).rev() {
        let s = StmtId(i as u32);
        if let Mode::ScalarRoot(c) = mode[i] {
            let ctx = ctxs[&c];
            let var = f.var(ctx.var);
            let renamed = b.var(&format!("{}_s", var.name), var.ty)?;
            scalar_var.insert(s, renamed);
            root_of[i] = Some(s);
        }
        if let Some(r) = root_of[i] {
            for &ch in f.children(s).as_slice() {
                root_of[ch.index()] = Some(r);
            }
        }
    }
    let mut out: Vec<StmtId> = Vec::with_capacity(n);
    let mut vec = Vectorizer { f, dep: &dep, map: FxHashMap::default() };
    for i in 0..n {
        let s = StmtId(i as u32);
        let m = |x: StmtId| out[x.index()];
        // Variable renaming for scalarized statements.
        let renamed = root_of[i].map(|r| (ctxs[&scalar_ctx(mode[r.index()])].var, scalar_var[&r]));
        if let Some((v, w)) = renamed {
            copier.vars.insert(v, VarMap::Var(w));
        }
        let new = match mode[i] {
            Mode::Vector(c) => {
                let ctx = ctxs[&c];
                vec.stmt(&mut b, &mut copier, ctx, s, &out)?
            }
            _ if ctxs.contains_key(&s) => {
                // The vectorized loop itself: its body, vectorized.
                let StmtKind::For { body, .. } = f.stmt(s).kind else { unreachable!("a vectorized loop") };
                m(body)
            }
            _ => copier.node(&mut b, s, &out, true)?,
        };
        let new = match mode[i] {
            Mode::ScalarRoot(c) => {
                let ctx = ctxs[&c];
                let w = scalar_var[&s];
                let min = copier.expr(&mut b, ctx.min)?;
                let ty = f.var(ctx.var).ty;
                let extent = b.int(ctx.lanes as i64, ty)?;
                b.for_(w, min, extent, ForKind::Serial, new)?
            }
            _ => new,
        };
        if let Some((v, _)) = renamed {
            copier.vars.remove(&v);
        }
        out.push(new);
    }
    Ok(b.finish(out[f.body().index()]))
}

fn scalar_ctx(m: Mode) -> StmtId {
    match m {
        Mode::ScalarRoot(c) | Mode::Scalar(c) | Mode::Vector(c) => c,
        Mode::Plain => unreachable!("a scalarized statement has a loop"),
    }
}

/// Builds vector forms of expressions and statements inside a loop being vectorized.
struct Vectorizer<'a> {
    f: &'a PrimFunc,
    dep: &'a [Option<StmtId>],
    map: FxHashMap<PExprId, PExprId>,
}

impl Vectorizer<'_> {
    /// `e` vectorized: expressions that do not depend on the variable are copied.
    fn expr(&mut self, b: &mut PrimFuncBuilder, c: &mut Copier<'_>, ctx: Ctx, root: PExprId) -> R<PExprId> {
        let f = self.f;
        if self.dep[root.index()].is_none() {
            return c.expr(b, root);
        }
        let mut nodes = vec![root];
        let mut stack = vec![root];
        let mut ops = Vec::new();
        while let Some(e) = stack.pop() {
            ops.clear();
            f.expr_operands(e, &mut ops);
            for &o in &ops {
                if self.dep[o.index()].is_some() {
                    nodes.push(o);
                    stack.push(o);
                }
            }
        }
        nodes.sort_unstable();
        self.map.clear();
        for &e in &nodes {
            let node = *f.expr(e);
            ops.clear();
            f.expr_operands(e, &mut ops);
            let mut args = Vec::with_capacity(ops.len());
            for &o in &ops {
                let a = match self.map.get(&o) {
                    Some(&a) => a,
                    None => c.expr(b, o)?,
                };
                args.push(a);
            }
            let lanes = ctx.lanes;
            let out = match node.kind {
                PExprKind::Var(_) => {
                    // The loop variable (the only variable that depends on itself).
                    let min = c.expr(b, ctx.min)?;
                    let one = b.int(1, node.ty)?;
                    b.ramp(min, one, lanes)?
                }
                PExprKind::Bin(op, _, _) => {
                    let (x, y) = (widen(b, args[0], lanes)?, widen(b, args[1], lanes)?);
                    b.bin(op, x, y)?
                }
                PExprKind::Not(_) => b.not(args[0])?,
                PExprKind::Cast(_) => b.cast(args[0], node.ty.dtype),
                PExprKind::Select(..) => {
                    let (x, y) = (widen(b, args[1], lanes)?, widen(b, args[2], lanes)?);
                    b.select(args[0], x, y)?
                }
                PExprKind::Load(buf, _) => b.load(buf, &args)?,
                PExprKind::Call(intr, _) => {
                    let args: Vec<PExprId> = args.iter().map(|&a| widen(b, a, lanes)).collect::<R<_>>()?;
                    b.call(intr, &args)?
                }
                PExprKind::Let(v, _, _) => b.let_expr(v, args[0], args[1])?,
                PExprKind::Int(_) | PExprKind::Float(_) | PExprKind::Ramp(..) | PExprKind::Broadcast(_) => {
                    return Err(format!("expression {e} cannot be vectorized"));
                }
            };
            self.map.insert(e, out);
        }
        Ok(self.map[&root])
    }

    /// Statement `s` (mode `Vector`) over its rebuilt children.
    fn stmt(
        &mut self,
        b: &mut PrimFuncBuilder,
        c: &mut Copier<'_>,
        ctx: Ctx,
        s: StmtId,
        out: &[StmtId],
    ) -> R<StmtId> {
        let f = self.f;
        match f.stmt(s).kind {
            StmtKind::Store { buf, indices, value } => {
                let mut idx: Vec<PExprId> =
                    f.operands(indices).iter().map(|&i| self.expr(b, c, ctx, i)).collect::<R<_>>()?;
                let mut value = self.expr(b, c, ctx, value)?;
                let index_lanes = idx.iter().map(|&i| b.peek().expr(i).ty.lanes).max().unwrap_or(1);
                let value_lanes = b.peek().expr(value).ty.lanes;
                if index_lanes > 1 && value_lanes == 1 {
                    value = b.broadcast(value, index_lanes)?;
                } else if index_lanes == 1 && value_lanes > 1 {
                    match idx.last_mut() {
                        Some(last) => *last = b.broadcast(*last, value_lanes)?,
                        None => return Err(format!("vector store {s} into a rank-0 buffer")),
                    }
                }
                b.store(buf, &idx, value)
            }
            StmtKind::Evaluate(e) => {
                let e = self.expr(b, c, ctx, e)?;
                Ok(b.evaluate(e))
            }
            _ => c.node(b, s, out, true),
        }
    }
}

/// `e` broadcast to `lanes` when it is a scalar.
fn widen(b: &mut PrimFuncBuilder, e: PExprId, lanes: u16) -> R<PExprId> {
    if b.peek().expr(e).ty.lanes == 1 {
        b.broadcast(e, lanes)
    } else {
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::tir::print_prim_func;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    const VEC: &str = "prim @f(%A: Buffer[(16,), f32]) { for %j in vectorized(0, 4) { %A[%j] = 1.0f; } }";

    #[test]
    fn vectorize_loop_returns_the_same_arc_without_vectorized_loops() {
        let f = prim("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[%i] = 1.0f; } }");
        assert!(Arc::ptr_eq(&vectorize_loop(&f, true), &f));
    }

    #[test]
    fn vectorize_loop_disabled_makes_vectorized_loops_serial() {
        let f = prim(VEC);
        expect_test::expect![[r#"
            prim @f(%A: Buffer[(16,), f32]) {
              for %j in serial(0, 4) {
                %A[%j] = 1.0f;
              }
            }
        "#]]
        .assert_eq(&print_prim_func("f", &vectorize_loop(&f, false)));
    }

    #[test]
    fn vectorize_loop_reads_disable_vectorize_from_the_context() {
        let ctx = PassContext::builder().config(DISABLE_VECTORIZE_KEY, true).build().expect("valid config");
        assert!(!enable_vectorize(&ctx));
        assert!(enable_vectorize(&PassContext::builder().build().expect("default")));
    }
}
