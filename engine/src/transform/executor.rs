//! The parallel executor: runs a [`Sequential`]'s planned stages; each stage of function passes
//! fans out over the module's functions on a cached rayon pool.
//!
//! # Plan
//! The planner (`transform/plan.rs`: [`plan`], shared with the incremental session) turns a
//! `Sequential`'s list into [`Stage`]s; [`run_sequential`] runs them, or, when the plan cannot
//! be made (an unknown required pass), runs the list pass by pass ([`run_plain`]), so the
//! error comes exactly where the serial run reports it.
//!
//! A module pass with a per-function form ([`Pass::function_form`], declared with
//! `ModulePass::with_function_form`) is no barrier: the form joins the function stage. It
//! visits every function (`SkipOptimization` ones too), and its precondition is checked at run
//! time: every function of the stage's input declares its signature, and no earlier pass of the
//! stage changed a function's declared signature before the form ran on it (the form's view is
//! the stage's input). When either fails, the stage runs pass by pass and the form runs as its
//! module pass.
//!
//! A module pass with a split form ([`Pass::split_form`], declared with
//! `ModulePass::with_prelude_and_function_form`) is a short barrier: its module-wide prelude runs
//! on the whole module, and its per-function part starts a function stage that the function
//! passes after it join ([`Stage::Prelude`] and the function stage after it). Where that stage cannot be fused (see below) the pass
//! runs as its module pass instead, so it runs exactly as in the serial run.
//!
//! # Function stages
//! A stage of one pass, or a stage run while any instrument is attached to the context, or
//! while `testing.immutable_module` or `testing.verify_each` is set or opt-bisect is active,
//! runs pass by pass through [`call_pass`]: every hook is called in TVM's exact order around
//! its pass's body (`should_run`, `run_before_pass`, the body, `run_after_pass`, then the next
//! pass), sees the module exactly as in a serial run (and `verify_each` checks each pass's
//! output), and each pass still fans out over functions. So a pass body and an instrument that
//! observe each other (a Python pass reading what an instrument recorded, a log both write to)
//! see TVM's order, whatever the instrument.
//!
//! Otherwise the stage is *fused*: one task per function runs every pass of the stage on that
//! function, and the diagnostics and statistics are merged pass by pass in the serial order.
//! No hook exists to be called, so nothing can observe that the bodies ran together.
//!
//! # PrimFunc stages
//! Consecutive PrimFunc passes form a stage of their own ([`Stage::Prim`]), run like a function
//! stage over the module's PrimFuncs ([`run_prim_stage`]): fused under the same conditions, one
//! task per PrimFunc running every pass of the stage, diagnostics merged pass by pass in module
//! order; else pass by pass with each pass's hooks. So a lowering pipeline's tir passes are one
//! stage and one fan-out, not one per pass.
//!
//! A function pass reads other functions only through its read-only module view. In a fused
//! stage the view is the stage's input module for every pass of the stage; a function pass must
//! not depend on what an earlier function pass of the same stage did to *other* functions
//! (function passes cannot change signatures that others rely on; that is a module pass's job).
//!
//! # Determinism
//! Every task has its own worker copy of the context (`PassContext::current()` inside the task
//! returns it), one per (function, pass), so diagnostics are merged pass by pass in the module's
//! function order, as a serial run emits them. The error reported is that of the first failing
//! pass, and within it the first failing function in module order. Panics are caught per
//! function; the pool never sees them and stays usable.
//!
//! # Threads
//! `ctx.num_threads()` workers; with 1 the tasks run inline on the calling thread (no pool). A
//! pass built [`FunctionPass::on_calling_thread`] is planned as a stage of its own and runs
//! inline on the calling thread whatever the thread count.
//! Pools are built once per size and cached for the life of the process; rayon's work stealing
//! over single functions balances modules with a few huge and many tiny functions.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use super::config::{IMMUTABLE_MODULE, VERIFY_EACH};
use super::context::PassContext;
use super::diagnostics::{Diagnostic, Severity};
use super::error::PassError;
use super::fanout::{map_entries, map_items_largest_first, release};
use super::pass::{call_pass, run_in_worker, FunctionPass, Pass, PreludeBody};
use super::plan::Stage;
use super::prim_func_pass::PrimFuncPass;
use super::statistics::Statistics;
use super::verify_each::check_function;
use crate::ir::{Function, Module};
use crate::tir::PrimFunc;

/// A prelude that ran ahead of its fused stage.
struct PreludeRun {
    /// The split pass's input (the stage's input before the prelude).
    input: Module,
    diagnostics: Vec<Diagnostic>,
    statistics: Statistics,
}

/// Runs planned stages in order.
pub fn run_plan(stages: &[Stage], mut module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    let mut stages = stages.iter();
    while let Some(stage) = stages.next() {
        module = match stage {
            Stage::Module(pass) => pass.run(module, ctx)?,
            Stage::Function(passes) => run_function_stage(passes, module, ctx)?,
            Stage::Prim(passes) => run_prim_stage(passes, module, ctx)?,
            // The planner puts the split pass's function stage right after its prelude.
            Stage::Prelude(prelude) => match stages.next() {
                Some(Stage::Function(passes)) => run_split_stage(&*prelude.body, passes, module, ctx)?,
                _ => return Err(PassError::msg("internal error: a prelude stage without its function stage")),
            },
        };
    }
    Ok(module)
}

/// Runs one function stage over `module` with the instrument hooks of each pass (fused when
/// allowed; see the module docs).
pub fn run_function_stage(passes: &[FunctionPass], module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    if !(may_fuse(passes, ctx) && signatures_allow_fusing(passes, &module)) {
        return run_unfused(passes, module, ctx);
    }
    run_fused(passes, module, ctx, None)
}

/// Runs a [`Stage::Prelude`] and the function stage after it: the prelude on the whole
/// module, then `passes` (the first being the split pass's per-function part) fused. Where the stage may not be fused or the prelude
/// panics, the split pass runs as its module pass (errors exactly as in a serial run) and the
/// other passes pass by pass.
pub fn run_split_stage(
    prelude: &PreludeBody,
    passes: &[FunctionPass],
    module: Module,
    ctx: &PassContext,
) -> Result<Module, PassError> {
    if !may_fuse(passes, ctx) {
        return run_unfused(passes, module, ctx);
    }
    // Under a worker copy, so that its diagnostics can be dropped if it is not used.
    let worker = ctx.worker_copy();
    let scope = worker.push_silently();
    let out = catch_unwind(AssertUnwindSafe(|| prelude(&module, &worker)));
    drop(scope);
    if let Ok(out) = out {
        if signatures_allow_fusing(passes, &out) {
            let run = PreludeRun {
                input: module,
                diagnostics: worker.diagnostics().take(),
                statistics: worker.take_statistics(),
            };
            return run_fused(passes, out, ctx, Some(run));
        }
    }
    run_unfused(passes, module, ctx)
}

/// Runs one PrimFunc stage over `module`: fused when allowed (as a function stage: one task
/// per PrimFunc runs every pass of the stage on it, see [`run_prim_stage_on`]), else pass by
/// pass with each pass's hooks.
pub fn run_prim_stage(passes: &[PrimFuncPass], mut module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    if !may_fuse_n(passes.len(), ctx) {
        for pass in passes {
            module = call_pass(pass, module, ctx)?;
        }
        return Ok(module);
    }
    let view = &module;
    let threads = passes.iter().map(|p| p.threads(ctx)).min().unwrap_or(1);
    // Largest PrimFuncs first, so the biggest kernel does not start last (arena sizes as the weight).
    let weight = |(_, f): &(Arc<str>, Arc<PrimFunc>)| f.exprs().len() + f.stmts().len();
    let runs = map_items_largest_first(threads, module.prim_entries(), weight, |(name, func)| {
        run_prim_stage_on(passes, name, func, view, ctx)
    });
    let failed = first_failure(runs.iter().map(|r| r.error.as_ref().map(|(i, _)| *i)));
    for i in 0..passes.len() {
        for run in &runs {
            for d in run.diagnostics.get(i).into_iter().flatten() {
                ctx.emit(d.clone());
            }
            if let Some(stats) = run.statistics.get(i) {
                ctx.merge_statistics(stats);
            }
        }
        if let Some((_, at)) = failed.filter(|(pass, _)| *pass == i) {
            let first = runs.into_iter().nth(at).and_then(|r| r.error).map(|(_, e)| e);
            return Err(first.unwrap_or_else(|| PassError::msg("internal error: failing PrimFunc not found")));
        }
    }
    let out: Vec<Arc<PrimFunc>> = runs.into_iter().map(|r| r.func).collect();
    module.replace_all_prims(out);
    Ok(module)
}

/// What running a PrimFunc stage's passes on one PrimFunc produced (as [`FunctionRun`]).
#[derive(Debug)]
pub struct PrimRun {
    /// The PrimFunc after the last pass that ran (after all of them when none failed).
    pub func: Arc<PrimFunc>,
    /// The diagnostics of each pass that ran, indexed by pass; their function is filled in.
    pub diagnostics: Vec<Vec<Diagnostic>>,
    /// The statistic counts of each pass that ran, indexed by pass.
    pub statistics: Vec<Statistics>,
    /// The first failure: the index of the pass and its error (naming pass and PrimFunc).
    pub error: Option<(usize, PassError)>,
}

/// The one routine that runs a PrimFunc stage's passes on one PrimFunc named `name`, for the
/// executor's fused PrimFunc stages and the incremental session: each pass in order under its
/// own worker copy of `ctx` ([`run_in_worker`]: panics caught, `SkipOptimization` honoured),
/// stopping at the first failure. `view` is the stage's input module; a PrimFunc pass reads no
/// other function from it (a PrimFunc calls nothing), which is what lets a session cache its
/// results per PrimFunc.
pub fn run_prim_stage_on(
    passes: &[PrimFuncPass],
    name: &str,
    func: &Arc<PrimFunc>,
    view: &Module,
    ctx: &PassContext,
) -> PrimRun {
    let mut run = PrimRun {
        func: func.clone(),
        diagnostics: Vec::with_capacity(passes.len()),
        statistics: Vec::with_capacity(passes.len()),
        error: None,
    };
    for (i, pass) in passes.iter().enumerate() {
        let info = pass.info();
        let (res, _elapsed, diags, stats) = run_in_worker(info, pass.body(), false, name, &run.func, view, ctx);
        let reported = diags.iter().filter(|_| ctx.errors_fail_pass()).find(|d| d.severity == Severity::Error).cloned();
        run.diagnostics.push(diags);
        run.statistics.push(stats);
        // `errors_fail_pass`: as `call_pass` does after a leaf pass.
        let checked = res.and_then(|out| match reported {
            Some(d) => Err(PassError::ErrorReported { pass: info.name.clone(), diagnostic: Box::new(d) }),
            None => Ok(out),
        });
        match checked {
            Ok(f) => run.func = f,
            Err(e) => {
                run.error = Some((i, e));
                break;
            }
        }
    }
    run
}

/// Whether a stage of `passes` may run fused under the context's instruments and config (the
/// module is checked by [`signatures_allow_fusing`]): only with no instrument attached, so
/// every hook is called in TVM's order around its own pass's body.
fn may_fuse(passes: &[FunctionPass], ctx: &PassContext) -> bool {
    may_fuse_n(passes.len(), ctx)
}

/// Whether a stage of `n` passes may run fused under the context (see [`may_fuse`]).
fn may_fuse_n(n: usize, ctx: &PassContext) -> bool {
    n > 1
        && !ctx.has_instruments()
        && !ctx.get_config(IMMUTABLE_MODULE, false)
        && !ctx.get_config(VERIFY_EACH, false)
        && ctx.opt_bisect().is_none()
}

/// Whether every function of `module` declares its signature, where a pass of the stage relies
/// on it (a function-local module pass's form).
fn signatures_allow_fusing(passes: &[FunctionPass], module: &Module) -> bool {
    passes.iter().all(|p| !p.reads_signatures()) || module.iter().all(|(_, f)| has_declared_signature(f))
}

/// Runs `passes` pass by pass, each with its hooks (a module pass's form runs as that module
/// pass).
fn run_unfused(passes: &[FunctionPass], mut module: Module, ctx: &PassContext) -> Result<Module, PassError> {
    for pass in passes {
        module = call_pass(pass, module, ctx)?;
    }
    Ok(module)
}

/// Whether every parameter of `f` and its result have a declared type: then the type other
/// functions see for it does not depend on its body.
pub(crate) fn has_declared_signature(f: &Function) -> bool {
    f.ret_ty().is_some() && f.params().iter().all(|&p| f.ty(p).is_some())
}

/// Whether `a` and `b` declare the same parameter and result types.
pub(crate) fn same_declared_signature(a: &Arc<Function>, b: &Arc<Function>) -> bool {
    Arc::ptr_eq(a, b)
        || (a.ret_ty() == b.ret_ty()
            && a.params().len() == b.params().len()
            && a.params().iter().zip(b.params()).all(|(&p, &q)| a.ty(p) == b.ty(q)))
}

/// What running a stage's passes on one function produced.
#[derive(Debug)]
pub struct FunctionRun {
    /// The function after the last pass that ran (after all of them when none failed).
    pub func: Arc<Function>,
    /// The diagnostics of each pass that ran, indexed by pass; their function is filled in.
    pub diagnostics: Vec<Vec<Diagnostic>>,
    /// Time spent in each pass that ran, indexed by pass.
    pub busy: Vec<Duration>,
    /// The statistic counts of each pass that ran, indexed by pass.
    pub statistics: Vec<Statistics>,
    /// The first failure: the index of the pass and its error (naming pass and function).
    pub error: Option<(usize, PassError)>,
    /// Whether the run stopped before a module pass's per-function form because its
    /// precondition failed (see [`run_stage_checked`]).
    pub signature_changed: bool,
}

/// Runs `passes` in order on one function named `name`, as a fused task does: each pass under
/// its own worker copy of `ctx` (pushed so that `current()` returns it), panics caught, functions
/// marked `SkipOptimization` left alone, stopping at the first failure. `view` is the module the
/// passes may read. No instrument is called. [`run_stage_checked`] with no checks.
pub fn run_stage_on_function(
    passes: &[FunctionPass],
    name: &str,
    func: &Arc<Function>,
    view: &Module,
    ctx: &PassContext,
) -> FunctionRun {
    run_stage_checked(passes, name, func, view, ctx, &StageChecks::NONE)
}

/// What [`run_stage_checked`] does around the passes besides running them.
pub(crate) struct StageChecks<'a> {
    /// Verify each pass's output against `view` (`testing.verify_each`); a failure is that
    /// pass's error.
    pub(crate) verify_each: bool,
    /// Called before each pass; it may unwind to abandon the run (a session's cancellation).
    pub(crate) cancel: &'a dyn Fn(),
}

impl StageChecks<'_> {
    /// No verification, no cancellation.
    pub(crate) const NONE: StageChecks<'static> = StageChecks { verify_each: false, cancel: &|| {} };
}

/// The one routine that runs a function stage's passes on one function, for the executor's
/// fused stages and every session mode: [`run_in_worker`] per pass, in order.
///
/// Before a pass after the first that reads signatures (a function-local module pass's form,
/// [`FunctionPass::reads_signatures`]) it checks the form's precondition: the function's input
/// declares its signature and the passes before the form left that declaration as it was (the
/// form's view holds every function as it entered the stage, so this is what makes the view
/// right for the functions calling this one). When it fails, the run stops there with
/// `signature_changed` set. (The executor also checks every function's declaration before
/// fusing, which a form at the stage's start needs.)
pub(crate) fn run_stage_checked(
    passes: &[FunctionPass],
    name: &str,
    func: &Arc<Function>,
    view: &Module,
    ctx: &PassContext,
    checks: &StageChecks<'_>,
) -> FunctionRun {
    let mut run = FunctionRun {
        func: func.clone(),
        diagnostics: Vec::with_capacity(passes.len()),
        busy: Vec::with_capacity(passes.len()),
        statistics: Vec::with_capacity(passes.len()),
        error: None,
        signature_changed: false,
    };
    for (i, pass) in passes.iter().enumerate() {
        (checks.cancel)();
        if i > 0
            && pass.reads_signatures()
            && !(has_declared_signature(func) && same_declared_signature(&run.func, func))
        {
            run.signature_changed = true;
            break;
        }
        let info = pass.info();
        let (res, elapsed, diags, stats) =
            run_in_worker(info, pass.body(), pass.visits_marked(), name, &run.func, view, ctx);
        run.diagnostics.push(diags);
        run.statistics.push(stats);
        run.busy.push(elapsed);
        let reported = run.diagnostics.last().into_iter().flatten();
        let reported = reported.filter(|_| ctx.errors_fail_pass()).find(|d| d.severity == Severity::Error);
        let checked = res.and_then(|out| {
            if checks.verify_each {
                check_function(&info.name, name, &run.func, &out, view)?;
            }
            // `errors_fail_pass`: as `call_pass` does after a leaf pass.
            if let Some(d) = reported {
                return Err(PassError::ErrorReported { pass: info.name.clone(), diagnostic: Box::new(d.clone()) });
            }
            Ok(out)
        });
        match checked {
            Ok(f) => run.func = f,
            Err(e) => {
                run.error = Some((i, e));
                break;
            }
        }
    }
    run
}

/// Runs `passes` fused over `module` (no instrument is attached). With `prelude`, `module` is
/// the prelude's output and the first pass is the split pass's per-function part.
fn run_fused(
    passes: &[FunctionPass],
    mut module: Module,
    ctx: &PassContext,
    mut prelude: Option<PreludeRun>,
) -> Result<Module, PassError> {
    let view = &module;
    let threads = Stage::threads_of(passes, ctx);
    let runs = map_entries(threads, view, |name, func| run_stage_on_function(passes, name, func, view, ctx));
    if runs.iter().any(|r| r.signature_changed) {
        // A pass changed a declared signature before a module pass's per-function form: the
        // form's precondition fails, so the stage runs pass by pass, a split pass from its own
        // input. The bodies that already ran on some functions run again: function passes are
        // not meant to change signatures.
        drop(runs);
        return match prelude {
            Some(pre) => run_unfused(passes, pre.input, ctx),
            None => run_unfused(passes, module, ctx),
        };
    }
    let failed = first_failure(runs.iter().map(|r| r.error.as_ref().map(|(i, _)| *i)));
    let output = match failed {
        None => {
            let mut out = module.clone();
            out.replace_all(runs.iter().map(|r| r.func.clone()).collect());
            Some(out)
        }
        Some(_) => None,
    };
    for i in 0..passes.len() {
        if let Some(p) = prelude.as_ref().filter(|_| i == 0) {
            for d in &p.diagnostics {
                ctx.emit(d.clone());
            }
            ctx.merge_statistics(&p.statistics);
        }
        merge_diagnostics(ctx, &runs, i);
        if let Some((_, at)) = failed.filter(|(pass, _)| *pass == i) {
            let first = runs.into_iter().nth(at).and_then(|r| r.error).map(|(_, e)| e);
            return Err(first.unwrap_or_else(|| PassError::msg("internal error: failing function not found")));
        }
    }
    drop(runs);
    // Every pass ran, so nothing failed and the output exists.
    if let Some(out) = output {
        release_module(ctx, std::mem::replace(&mut module, out));
    }
    if let Some(pre) = prelude.take() {
        release_module(ctx, pre.input);
    }
    Ok(module)
}

/// Merges the diagnostics and statistic counts of pass `pass_idx` of every function's run.
fn merge_diagnostics(ctx: &PassContext, runs: &[FunctionRun], pass_idx: usize) {
    for run in runs {
        if let Some(diags) = run.diagnostics.get(pass_idx) {
            for d in diags {
                ctx.emit(d.clone());
            }
        }
        if let Some(stats) = run.statistics.get(pass_idx) {
            ctx.merge_statistics(stats);
        }
    }
}

/// The failure a serial run reports among a stage's per-function (or per-PrimFunc) runs, given
/// per run in module order the index of the pass it failed at, if any: the first failing pass,
/// and within it the first failing function in module order. Returns (pass, run). The one
/// rule for the executor's fused stages and every session path (`session/db.rs`
/// `first_error`).
pub(crate) fn first_failure(failed_at: impl IntoIterator<Item = Option<usize>>) -> Option<(usize, usize)> {
    failed_at.into_iter().enumerate().filter_map(|(run, pass)| pass.map(|pass| (pass, run))).min()
}

/// Drops `module`, freeing its functions on the pool (see [`release`]).
fn release_module(ctx: &PassContext, module: Module) {
    let funcs = module.entries().iter().map(|(_, f)| Arc::clone(f)).collect();
    drop(module);
    release(ctx.num_threads(), funcs);
}
