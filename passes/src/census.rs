//! Counts of what a function holds, for pass statistics: a pass's counters are the difference
//! between its input's and its output's census (`calls folded` = calls before − calls after),
//! so counting needs no hook inside the pass and is the same whichever form (module or
//! per-function) of the pass ran. Only live nodes count; a census is taken only when the context
//! collects statistics.

use std::sync::Arc;

use passel_engine::ir::{fn_attr, Constant, ExprKind, Function, Module};
use passel_engine::transform::{PassContext, Statistic};

/// What one function holds (live nodes only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Census {
    /// Functions (1 for one function; the count of a module's).
    pub functions: u64,
    /// Let-bindings.
    pub bindings: u64,
    /// Operator calls.
    pub calls: u64,
    /// Calls of a global function.
    pub global_calls: u64,
    /// Nested functions.
    pub closures: u64,
    /// Nested functions marked `Primitive` (fused groups).
    pub primitives: u64,
    /// Bytes of dense constants.
    pub dense_bytes: u64,
}

impl Census {
    /// The census of `func`.
    pub(crate) fn of(func: &Function) -> Census {
        let mut c = Census { functions: 1, ..Census::default() };
        if !func.is_well_formed() {
            return c;
        }
        let live = func.live_mask();
        for (i, node) in func.nodes().iter().enumerate() {
            if !live.get(i).copied().unwrap_or(false) {
                continue;
            }
            match node.kind {
                ExprKind::Block { bindings, .. } => c.bindings += u64::from(bindings.len / 2),
                ExprKind::Call { .. } => c.calls += 1,
                ExprKind::Apply { callee, .. } => {
                    if matches!(func.kind(callee), ExprKind::Global { .. }) {
                        c.global_calls += 1;
                    }
                }
                ExprKind::Func { idx } => {
                    c.closures += 1;
                    if func.closure(idx).attrs.flag(fn_attr::PRIMITIVE) {
                        c.primitives += 1;
                    }
                }
                ExprKind::Const { idx } => {
                    if let Constant::Dense(t) = &**func.constant(idx) {
                        c.dense_bytes += (t.len() * t.dtype().size_bytes()) as u64;
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// The sum of the censuses of `module`'s functions.
    pub(crate) fn of_module(module: &Module) -> Census {
        module.iter().map(|(_, f)| Census::of(f)).fold(Census::default(), |a, b| Census {
            functions: a.functions + b.functions,
            bindings: a.bindings + b.bindings,
            calls: a.calls + b.calls,
            global_calls: a.global_calls + b.global_calls,
            closures: a.closures + b.closures,
            primitives: a.primitives + b.primitives,
            dense_bytes: a.dense_bytes + b.dense_bytes,
        })
    }
}

/// How a counter is read off a pass's before and after census.
pub(crate) type Counter = (&'static Statistic, fn(&Census, &Census) -> u64);

/// Adds each counter's value for one function's run (`before` → `after`) to `ctx`. Costs
/// nothing unless `ctx` collects statistics, and nothing more when the pass changed nothing.
pub(crate) fn count_function(ctx: &PassContext, before: &Arc<Function>, after: &Arc<Function>, counters: &[Counter]) {
    if !ctx.collects_statistics() || Arc::ptr_eq(before, after) {
        return;
    }
    let (b, a) = (Census::of(before), Census::of(after));
    for (stat, f) in counters {
        stat.add(ctx, f(&b, &a));
    }
}

/// `after`, with its counters for one function's run counted (see [`count_function`]).
pub(crate) fn counted(
    ctx: &PassContext,
    before: &Arc<Function>,
    after: Arc<Function>,
    counters: &[Counter],
) -> Arc<Function> {
    count_function(ctx, before, &after, counters);
    after
}

/// `after`, with its counters for one module pass run (`before` → `after`, the censuses of the
/// whole modules) counted. Costs nothing unless `ctx` collects statistics.
pub(crate) fn counted_module(ctx: &PassContext, before: &Module, after: Module, counters: &[Counter]) -> Module {
    if ctx.collects_statistics() {
        let (b, a) = (Census::of_module(before), Census::of_module(&after));
        for (stat, f) in counters {
            stat.add(ctx, f(&b, &a));
        }
    }
    after
}

/// What decreased from `before` to `after` (0 when it grew).
pub(crate) fn fewer(before: u64, after: u64) -> u64 {
    before.saturating_sub(after)
}

/// What increased from `before` to `after` (0 when it shrank).
pub(crate) fn more(before: u64, after: u64) -> u64 {
    after.saturating_sub(before)
}
