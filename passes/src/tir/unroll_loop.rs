//! UnrollLoop (prim_func pass, opt level 0): TVM's `tir.UnrollLoop`, configured by the
//! `tir.UnrollLoop` config's fields, each a typed key of its own:
//! `tir.UnrollLoop.auto_max_step` (default 0), `tir.UnrollLoop.auto_max_depth` (8),
//! `tir.UnrollLoop.auto_max_extent` (0), `tir.UnrollLoop.explicit_unroll` (true) and
//! `tir.UnrollLoop.unroll_local_access` (false).
//!
//! What it does, with TVM's rules: visiting statements in execution order with TVM's
//! counters (steps = stores and `eval`s, counted per sequence element; the depth of unrolled
//! and of normal loops below), a loop is unrolled when it is an `unroll` loop, or when it is
//! a serial loop with a constant extent, no normal loop inside, at most `auto_max_depth`
//! unrolled levels inside, and `extent × steps <= auto_max_step` or
//! `extent <= auto_max_extent`, or (with `unroll_local_access`) it accesses a `local` buffer.
//! With `explicit_unroll` the loop becomes one copy of its body per iteration, the loop
//! variable replaced by its value and every variable and buffer the body binds made fresh
//! per copy (TVM's `ConvertSSA`); without it, the loop is only marked `unroll`. A loop with
//! `auto_max_extent == 1` and extent at most 1 is always expanded. `attr
//! "pragma_auto_unroll_max_step"` and `attr "pragma_unroll_explicit"` override the config
//! inside their region, as in TVM.
//!
//! What it deliberately does not do: unroll loops whose extent or start is not an immediate
//! (run Simplify first; TVM also needs a constant extent), or expand a loop whose copies
//! would exceed [`MAX_UNROLLED_STMTS`] statements (it stays a loop: a bad input must not
//! exhaust memory). It does not simplify the copies (`add(0, 1)` stays; run Simplify).
//!
//! Phases:
//! 1. One walk in execution order (explicit stack, enter and exit events) computing TVM's
//!    counters and the decision for each loop.
//! 2. Nothing to unroll or mark → the input `Arc`; otherwise one copy of the body
//!    ([`Copier`](super::copy::Copier)) expanding the chosen loops.

use std::sync::Arc;

use passel_engine::tir::{ForKind, PExprKind, PrimFunc, PrimFuncBuilder, StmtId, StmtKind};
use passel_engine::transform::{ConfigType, PassContext, PrimFuncPass};

use super::copy::Copier;

/// The registry name.
pub const NAME: &str = "UnrollLoop";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// Config key: threshold of steps (`extent × steps in the body`) for automatic unrolling.
pub const AUTO_MAX_STEP_KEY: &str = "tir.UnrollLoop.auto_max_step";
/// Config key: the most nested unrolled levels below a loop that is automatically unrolled.
pub const AUTO_MAX_DEPTH_KEY: &str = "tir.UnrollLoop.auto_max_depth";
/// Config key: the largest extent of a loop that is automatically unrolled.
pub const AUTO_MAX_EXTENT_KEY: &str = "tir.UnrollLoop.auto_max_extent";
/// Config key: expand unrolled loops (else only mark them `unroll`).
pub const EXPLICIT_UNROLL_KEY: &str = "tir.UnrollLoop.explicit_unroll";
/// Config key: always unroll loops with a constant extent that access `local` buffers.
pub const UNROLL_LOCAL_ACCESS_KEY: &str = "tir.UnrollLoop.unroll_local_access";

passel_engine::register_config!(
    AUTO_MAX_STEP_KEY,
    ConfigType::Int,
    "UnrollLoop unrolls a serial loop automatically when its extent times the steps of its body is at most this (default 0)",
    min = 0
);
passel_engine::register_config!(
    AUTO_MAX_DEPTH_KEY,
    ConfigType::Int,
    "UnrollLoop unrolls a loop automatically only with at most this many unrolled levels inside (default 8)",
    min = 0
);
passel_engine::register_config!(
    AUTO_MAX_EXTENT_KEY,
    ConfigType::Int,
    "UnrollLoop unrolls a serial loop automatically when its extent is at most this (default 0)",
    min = 0
);
passel_engine::register_config!(
    EXPLICIT_UNROLL_KEY,
    ConfigType::Bool,
    "UnrollLoop expands unrolled loops into copies of their body; false only marks them unroll (default true)"
);
passel_engine::register_config!(
    UNROLL_LOCAL_ACCESS_KEY,
    ConfigType::Bool,
    "UnrollLoop always unrolls loops with a constant extent that access local buffers (default false)"
);

/// The most statements the copies of one function's unrolled loops may add.
pub const MAX_UNROLLED_STMTS: i64 = 1 << 20;

/// The `tir.UnrollLoop` config (TVM's `UnrollLoopConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnrollConfig {
    /// `auto_max_step`.
    pub auto_max_step: i64,
    /// `auto_max_depth`.
    pub auto_max_depth: i64,
    /// `auto_max_extent`.
    pub auto_max_extent: i64,
    /// `explicit_unroll`.
    pub explicit_unroll: bool,
    /// `unroll_local_access`.
    pub unroll_local_access: bool,
}

impl Default for UnrollConfig {
    fn default() -> UnrollConfig {
        UnrollConfig {
            auto_max_step: 0,
            auto_max_depth: 8,
            auto_max_extent: 0,
            explicit_unroll: true,
            unroll_local_access: false,
        }
    }
}

impl UnrollConfig {
    /// The config of `ctx`, defaults for absent fields.
    pub fn from_context(ctx: &PassContext) -> UnrollConfig {
        let d = UnrollConfig::default();
        UnrollConfig {
            auto_max_step: ctx.get_config(AUTO_MAX_STEP_KEY, d.auto_max_step),
            auto_max_depth: ctx.get_config(AUTO_MAX_DEPTH_KEY, d.auto_max_depth),
            auto_max_extent: ctx.get_config(AUTO_MAX_EXTENT_KEY, d.auto_max_extent),
            explicit_unroll: ctx.get_config(EXPLICIT_UNROLL_KEY, d.explicit_unroll),
            unroll_local_access: ctx.get_config(UNROLL_LOCAL_ACCESS_KEY, d.unroll_local_access),
        }
    }
}

/// The `UnrollLoop` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, ctx| {
        Ok(unroll_loop(&func, UnrollConfig::from_context(ctx)))
    })
}

#[derive(Clone, Copy, Default)]
struct Counters {
    steps: i64,
    unroll_depth: i64,
    normal_depth: i64,
}

enum Event {
    Enter(StmtId, bool),
    Exit(StmtId, Option<Counters>, Option<(i64, bool)>),
}

/// Runs UnrollLoop on `func` with `cfg`; returns `func` itself when nothing changes.
pub fn unroll_loop(func: &Arc<PrimFunc>, cfg: UnrollConfig) -> Arc<PrimFunc> {
    let f: &PrimFunc = func;
    let n = f.stmts().len();
    // Statements each subtree would have after expansion, and whether it touches a local buffer.
    let mut size = vec![0i64; n];
    let mut local = vec![false; n];
    let mut copier = Copier::new(f);
    let mut marks: Vec<StmtId> = Vec::new();
    let mut ops = Vec::new();
    let mut c = Counters::default();
    let (mut max_step, mut explicit) = (cfg.auto_max_step, cfg.explicit_unroll);
    let mut stack = vec![Event::Enter(f.body(), false)];
    while let Some(ev) = stack.pop() {
        match ev {
            Event::Enter(s, seq_child) => {
                let saved = seq_child.then(|| std::mem::take(&mut c));
                let mut swapped = None;
                match f.stmt(s).kind {
                    StmtKind::Store { .. } | StmtKind::Evaluate(_) => c.steps = c.steps.saturating_add(1),
                    StmtKind::Attr { key, value, .. } => {
                        if let PExprKind::Int(v) = f.expr(value).kind {
                            match f.string(key) {
                                "pragma_auto_unroll_max_step" => {
                                    swapped = Some((max_step, explicit));
                                    max_step = v;
                                }
                                "pragma_unroll_explicit" => {
                                    swapped = Some((max_step, explicit));
                                    explicit = v != 0;
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
                stack.push(Event::Exit(s, saved, swapped));
                let is_seq = matches!(f.stmt(s).kind, StmtKind::Seq(_));
                for &ch in f.children(s).as_slice().iter().rev() {
                    stack.push(Event::Enter(ch, is_seq));
                }
            }
            Event::Exit(s, saved, swapped) => {
                let children = f.children(s);
                size[s.index()] = children.as_slice().iter().fold(1i64, |a, ch| a.saturating_add(size[ch.index()]));
                local[s.index()] = children.as_slice().iter().any(|ch| local[ch.index()]) || {
                    ops.clear();
                    f.stmt_exprs(s, &mut ops);
                    touches_local(f, s, &ops)
                };
                if let StmtKind::For { min, extent, kind, body, .. } = f.stmt(s).kind {
                    let value = match f.expr(extent).kind {
                        PExprKind::Int(v) if (0..=i32::MAX as i64).contains(&v) => v,
                        _ => -1,
                    };
                    let mut auto = kind == ForKind::Serial
                        && value >= 0
                        && c.normal_depth == 0
                        && c.unroll_depth <= cfg.auto_max_depth
                        && (value.saturating_mul(c.steps) <= max_step || value <= cfg.auto_max_extent);
                    if cfg.unroll_local_access && value >= 0 && kind == ForKind::Serial && local[s.index()] {
                        auto = true;
                    }
                    if kind == ForKind::Unrolled && value >= 0 {
                        auto = true;
                    }
                    if auto {
                        c.steps = c.steps.saturating_mul(value);
                        c.unroll_depth += 1;
                    } else {
                        c.normal_depth += 1;
                    }
                    let expanded = value.saturating_mul(size[body.index()]);
                    let static_min = matches!(f.expr(min).kind, PExprKind::Int(_));
                    let expand = ((auto && explicit)
                        || (value >= 0 && value <= cfg.auto_max_extent && cfg.auto_max_extent == 1))
                        && static_min
                        && expanded <= MAX_UNROLLED_STMTS;
                    if expand {
                        copier.unroll[s.index()] = true;
                        size[s.index()] = expanded;
                    } else if auto && kind != ForKind::Unrolled {
                        marks.push(s);
                    }
                }
                if let Some((step, expl)) = swapped {
                    max_step = step;
                    explicit = expl;
                }
                if let Some(saved) = saved {
                    c.steps = c.steps.saturating_add(saved.steps);
                    c.normal_depth = c.normal_depth.max(saved.normal_depth);
                    c.unroll_depth = c.unroll_depth.max(saved.unroll_depth);
                }
            }
        }
    }
    if marks.is_empty() && !copier.unroll.iter().any(|&u| u) {
        return func.clone();
    }
    for s in marks {
        copier.kinds.insert(s, ForKind::Unrolled);
    }
    let mut b = PrimFuncBuilder::with_signature_of(f);
    match copier.stmt(&mut b, f.body()) {
        Ok(body) => Arc::new(b.finish(body)),
        Err(_) => func.clone(),
    }
}

/// Whether statement `s` (with expressions `exprs`) loads or stores a `local` buffer.
fn touches_local(f: &PrimFunc, s: StmtId, exprs: &[passel_engine::tir::PExprId]) -> bool {
    let is_local = |b: passel_engine::tir::BufId| &*f.buf(b).scope == "local";
    if let StmtKind::Store { buf, .. } = f.stmt(s).kind {
        if is_local(buf) {
            return true;
        }
    }
    let mut stack = exprs.to_vec();
    let mut ops = Vec::new();
    while let Some(e) = stack.pop() {
        if let PExprKind::Load(b, _) = f.expr(e).kind {
            if is_local(b) {
                return true;
            }
        }
        ops.clear();
        f.expr_operands(e, &mut ops);
        stack.extend_from_slice(&ops);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::tir::print_prim_func;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    fn check(src: &str, cfg: UnrollConfig, expect: expect_test::Expect) {
        let f = prim(src);
        expect.assert_eq(&print_prim_func("f", &unroll_loop(&f, cfg)));
    }

    const SERIAL: &str =
        "prim @f(%A: Buffer[(8,), i64]) { for %i in serial(0, 4) { %A[%i] = 1; %A[add(%i, 4)] = 2; } }";

    #[test]
    fn unroll_loop_leaves_serial_loops_by_default_and_returns_the_same_arc() {
        let f = prim(SERIAL);
        assert!(Arc::ptr_eq(&unroll_loop(&f, UnrollConfig::default()), &f));
    }

    #[test]
    fn unroll_loop_auto_unrolls_within_auto_max_step() {
        // 4 iterations × 2 steps = 8 steps.
        let cfg = UnrollConfig { auto_max_step: 8, ..UnrollConfig::default() };
        check(
            SERIAL,
            cfg,
            expect_test::expect![[r#"
                prim @f(%A: Buffer[(8,), i64]) {
                  %A[0] = 1;
                  %A[add(0, 4)] = 2;
                  %A[1] = 1;
                  %A[add(1, 4)] = 2;
                  %A[2] = 1;
                  %A[add(2, 4)] = 2;
                  %A[3] = 1;
                  %A[add(3, 4)] = 2;
                }
            "#]],
        );
        let f = prim(SERIAL);
        let cfg = UnrollConfig { auto_max_step: 7, ..UnrollConfig::default() };
        assert!(Arc::ptr_eq(&unroll_loop(&f, cfg), &f));
    }

    #[test]
    fn unroll_loop_without_explicit_unroll_only_marks_the_loop() {
        let cfg = UnrollConfig { auto_max_extent: 4, explicit_unroll: false, ..UnrollConfig::default() };
        check(
            SERIAL,
            cfg,
            expect_test::expect![[r#"
                prim @f(%A: Buffer[(8,), i64]) {
                  for %i in unroll(0, 4) {
                    %A[%i] = 1;
                    %A[add(%i, 4)] = 2;
                  }
                }
            "#]],
        );
    }

    #[test]
    fn unroll_loop_does_not_auto_unroll_around_a_normal_loop() {
        let src = "prim @f(%A: Buffer[(8,), i64], %n: i64) { for %i in serial(0, 2) { for %j in serial(0, %n) { %A[%i] = %j; } } }";
        let f = prim(src);
        let cfg = UnrollConfig { auto_max_extent: 4, ..UnrollConfig::default() };
        assert!(Arc::ptr_eq(&unroll_loop(&f, cfg), &f));
    }

    #[test]
    fn unroll_loop_reads_its_config_from_the_context() {
        let ctx = PassContext::builder()
            .config(AUTO_MAX_STEP_KEY, 16i64)
            .config(EXPLICIT_UNROLL_KEY, false)
            .build()
            .expect("valid config");
        let cfg = UnrollConfig::from_context(&ctx);
        assert_eq!(cfg, UnrollConfig { auto_max_step: 16, explicit_unroll: false, ..UnrollConfig::default() });
        assert!(PassContext::builder().config(AUTO_MAX_DEPTH_KEY, -1i64).build().is_err());
    }
}
