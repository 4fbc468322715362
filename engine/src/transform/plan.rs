//! The planner: the one place that turns a `Sequential` under a context into pass calls and
//! stages. The executor runs its stages (`executor::run_plan`); crash reproducers list its
//! calls ([`planned_calls`]); the incremental session (`session/plan.rs`) plans with the same
//! function ([`plan_with`]) and only annotates the stages it gets (fingerprints, firewalls,
//! store identities, by stage index), so a session and a plain run agree on what runs and in
//! which stage by construction.
//!
//! # Calls
//! [`walk_calls`] walks a `Sequential`'s list exactly as the reference's rules 12–16 do: a pass
//! the context does not enable is skipped, with its `required` dependencies; the dependencies
//! of an enabled pass are looked up in the registry and come right before it, neither filtered
//! nor de-duplicated; a nested `Sequential` is a call of its own, followed, when flattening,
//! by its list's calls (the executor does not flatten: it calls a nested sequential as one
//! pass, with its own hooks, and that plans its own list in turn; a session flattens, since it
//! has no instruments whose hooks a nested call would need).
//!
//! # Stages
//! [`plan`] groups the calls into [`Stage`]s: maximal runs of function passes, maximal runs of
//! PrimFunc passes ([`Stage::Prim`], the loop level's function stages), and barriers. A
//! barrier is a module pass, a nested `Sequential` or any other pass.
//! A module pass with a per-function form ([`Pass::function_form`]) joins the function stage
//! as that form; one with a split form ([`Pass::split_form`]) is a short barrier, its prelude
//! ([`Stage::Prelude`]), and its per-function part starts the function stage right after it.
//! A function pass that runs on the calling thread ([`FunctionPass::on_calling_thread`]) is a
//! stage of its own ([`joins_function_stage`]). If the calls cannot be made (an unknown
//! required pass), the caller decides: the executor runs the `Sequential` pass by pass, so the
//! error comes exactly where the serial run reports it.
//!
//! What a session asks beyond that ([`Planning`]): flattening, its own per-function forms of
//! module passes given by name (`Session::set_split`), and the *unfused* variant, where each
//! function-local form starts a stage of its own.

use std::sync::Arc;

use super::context::PassContext;
use super::error::PassError;
use super::pass::{module_pass, FunctionPass, Pass, PassKind, PreludeBody, Sequential};
use super::prim_func_pass::PrimFuncPass;
use super::registry::get_pass;

/// One step of a planned `Sequential`.
#[derive(Clone, Debug)]
pub enum Stage {
    /// A maximal run of function passes (required dependencies included), in call order.
    Function(Vec<FunctionPass>),
    /// The module-wide part of a split module pass ([`Pass::split_form`]). The next stage is
    /// a function stage whose first pass is that pass's per-function part.
    Prelude(Prelude),
    /// A maximal run of PrimFunc passes, in call order: the loop level's function stage. It
    /// fans out over the module's PrimFuncs (graph functions pass through).
    Prim(Vec<PrimFuncPass>),
    /// A barrier: a module pass, a nested `Sequential`, or any other non-function pass. It is
    /// called through [`call_pass`](super::call_pass) with the whole module.
    Module(Arc<dyn Pass>),
}

impl Stage {
    /// The stage's function passes, for a function stage.
    pub fn function_passes(&self) -> Option<&[FunctionPass]> {
        match self {
            Stage::Function(passes) => Some(passes),
            Stage::Prelude(_) | Stage::Prim(_) | Stage::Module(_) => None,
        }
    }

    /// The stage's PrimFunc passes, for a PrimFunc stage.
    pub fn prim_passes(&self) -> Option<&[PrimFuncPass]> {
        match self {
            Stage::Prim(passes) => Some(passes),
            Stage::Function(_) | Stage::Prelude(_) | Stage::Module(_) => None,
        }
    }

    /// The pass a barrier runs over the whole module (a prelude's as a module pass named like
    /// its split pass).
    pub fn module_pass(&self) -> Option<&Arc<dyn Pass>> {
        match self {
            Stage::Module(pass) => Some(pass),
            Stage::Prelude(prelude) => Some(&prelude.pass),
            Stage::Function(_) | Stage::Prim(_) => None,
        }
    }

    /// The stage's passes by name, comma-separated.
    pub fn label(&self) -> String {
        match self {
            Stage::Function(passes) => passes.iter().map(|p| p.info().name.as_str()).collect::<Vec<_>>().join(","),
            Stage::Prim(passes) => passes.iter().map(|p| p.info().name.as_str()).collect::<Vec<_>>().join(","),
            Stage::Prelude(prelude) => prelude.pass.info().name.clone(),
            Stage::Module(pass) => pass.info().name.clone(),
        }
    }

    /// The worker threads a function stage fans out over under `ctx`: 1 when one of its passes
    /// runs on the calling thread, else the context's `num_threads`.
    pub fn threads(&self, ctx: &PassContext) -> usize {
        match self {
            Stage::Function(passes) => Stage::threads_of(passes, ctx),
            Stage::Prim(passes) => passes.iter().map(|p| p.threads(ctx)).min().unwrap_or(1),
            Stage::Prelude(_) | Stage::Module(_) => ctx.num_threads().max(1),
        }
    }

    /// The worker threads a function stage of `passes` fans out over under `ctx`.
    pub(crate) fn threads_of(passes: &[FunctionPass], ctx: &PassContext) -> usize {
        passes.iter().map(|p| p.threads(ctx)).min().unwrap_or(1)
    }
}

/// The module-wide part of a split module pass, as planned into a [`Stage::Prelude`].
#[derive(Clone)]
pub struct Prelude {
    /// The prelude's body.
    pub body: Arc<PreludeBody>,
    /// The body as a module pass with the split pass's name and opt level, for a caller that
    /// runs the prelude as a barrier of its own (a session).
    pub pass: Arc<dyn Pass>,
}

impl std::fmt::Debug for Prelude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prelude({})", self.pass.info().name)
    }
}

/// One pass call of a pipeline run, as the planner and [`planned_calls`] list them.
#[derive(Clone, Debug)]
pub struct PlannedCall {
    /// The pass.
    pub pass: Arc<dyn Pass>,
    /// How many sequentials enclose the call (0 for the pipeline itself).
    pub depth: usize,
    /// For a required dependency, the index (in the list) of the call that required it.
    pub required_by: Option<usize>,
}

/// Appends to `calls` every pass call a run of `seq`'s list under `ctx` makes, in order (rules
/// 12–16, see the module docs); with `flatten`, each nested sequential's call is followed by
/// its own list's calls, one level deeper. `required_by` indices point into `calls`. Fails
/// when a required pass is not registered.
pub(crate) fn walk_calls(
    seq: &Sequential,
    ctx: &PassContext,
    flatten: bool,
    calls: &mut Vec<PlannedCall>,
) -> Result<(), PassError> {
    // Explicit stack of (remaining passes, depth of their calls): sequentials nest up to
    // `MAX_PIPELINE_DEPTH` levels.
    let mut stack: Vec<(std::slice::Iter<'_, Arc<dyn Pass>>, usize)> = vec![(seq.passes().iter(), 1)];
    while let Some((iter, depth)) = stack.last_mut() {
        let depth = *depth;
        let Some(pass) = iter.next() else {
            stack.pop();
            continue;
        };
        let info = pass.info();
        if !ctx.pass_enabled(info) {
            continue;
        }
        let owner = calls.len() + info.required.len();
        for name in &info.required {
            calls.push(PlannedCall { pass: get_pass(name)?, depth, required_by: Some(owner) });
        }
        calls.push(PlannedCall { pass: pass.clone(), depth, required_by: None });
        if let Some(inner) = pass.as_sequential().filter(|_| flatten) {
            stack.push((inner.passes().iter(), depth + 1));
        }
    }
    Ok(())
}

/// Every pass call a run of `seq` under `ctx` makes, in the order the instruments see them:
/// `seq` itself first, then the calls of its list (`walk_calls`), nested sequentials flattened. The K-th
/// `run_before_pass` of a run that no instrument vetoed and that opt-bisect did not limit is
/// call K of this list; crash reproducers use it to name the rest of a pipeline from a failing
/// call on. Fails when a required pass is not registered.
pub fn planned_calls(seq: &Sequential, ctx: &PassContext) -> Result<Vec<PlannedCall>, PassError> {
    let mut calls = vec![PlannedCall { pass: Arc::new(seq.clone()), depth: 0, required_by: None }];
    walk_calls(seq, ctx, true, &mut calls)?;
    Ok(calls)
}

/// Plans `seq`'s list under `ctx` as the executor runs it: its calls (`walk_calls`, nested
/// sequentials not flattened) grouped into stages. Fails when a required pass is not
/// registered.
pub fn plan(seq: &Sequential, ctx: &PassContext) -> Result<Vec<Stage>, PassError> {
    Ok(plan_with(seq, ctx, &Planning::EXECUTOR)?.into_iter().map(|(stage, _)| stage).collect())
}

/// A per-function form of a module pass given by a caller (a session's `ModuleSplit`): the
/// prelude, a module pass run first if any, then the per-function pass.
pub(crate) struct GivenSplit {
    /// The module pass's name.
    pub(crate) name: String,
    pub(crate) prelude: Option<Arc<dyn Pass>>,
    /// A function pass (checked when the split is given).
    pub(crate) per_function: Arc<dyn Pass>,
}

/// What a caller of [`plan_with`] asks beyond the executor's plan.
pub(crate) struct Planning<'a> {
    /// Follow nested sequentials' lists (their own calls get no stage).
    pub(crate) flatten: bool,
    /// Whether a function-local form joins the function stage it falls in; else it starts a
    /// stage of its own (a session's unfused variant, which needs no run-time check).
    pub(crate) fuse_forms: bool,
    /// Module passes to run in a given per-function form, by name, before their own split.
    pub(crate) splits: &'a [GivenSplit],
}

impl Planning<'_> {
    /// The executor's plan.
    pub(crate) const EXECUTOR: Planning<'static> = Planning { flatten: false, fuse_forms: true, splits: &[] };
}

/// Where a planned pass came from: what identifies it to a caller that caches stage results.
#[derive(Clone)]
pub(crate) struct Origin {
    /// The pass called (for a form or a prelude, the module pass it belongs to).
    pub(crate) call: Arc<dyn Pass>,
    /// A required dependency, found in the registry by name.
    pub(crate) registered: bool,
    pub(crate) part: Part,
}

/// Which part of its call a planned pass is.
#[derive(Clone)]
pub(crate) enum Part {
    /// The pass itself.
    Whole,
    /// A function-local module pass's per-function form ([`Pass::function_form`]).
    Form,
    /// A split module pass's prelude ([`Pass::split_form`]).
    Prelude,
    /// A split module pass's per-function part.
    SplitForm,
    /// A part of a [`GivenSplit`]: its prelude or its per-function pass.
    Given(Arc<dyn Pass>),
}

impl Part {
    /// Whether the pass is a module pass's per-function form (it visits functions marked
    /// `SkipOptimization`).
    pub(crate) fn is_form(&self) -> bool {
        match self {
            Part::Form | Part::SplitForm => true,
            Part::Given(pass) => pass.kind() == PassKind::Function,
            Part::Whole | Part::Prelude => false,
        }
    }
}

/// Plans `seq`'s list under `ctx` as `how` asks: the stages, each with the origin of each of
/// its passes (one for a barrier). Fails when a required pass is not registered.
pub(crate) fn plan_with(
    seq: &Sequential,
    ctx: &PassContext,
    how: &Planning<'_>,
) -> Result<Vec<(Stage, Vec<Origin>)>, PassError> {
    let mut calls = Vec::new();
    walk_calls(seq, ctx, how.flatten, &mut calls)?;
    let mut stages: Vec<(Stage, Vec<Origin>)> = Vec::new();
    for call in calls {
        let registered = call.required_by.is_some();
        let pass = call.pass;
        if how.flatten && pass.as_sequential().is_some() {
            // Its list's calls follow.
            continue;
        }
        let origin = |part| Origin { call: pass.clone(), registered, part };
        if let Some(prim_pass) = pass.as_any().and_then(|p| p.downcast_ref::<PrimFuncPass>()) {
            // Consecutive PrimFunc passes share a stage, as function passes do; one that runs
            // on the calling thread is a stage of its own.
            let joins = |run: &[PrimFuncPass]| {
                !prim_pass.runs_on_calling_thread() && !run.iter().any(PrimFuncPass::runs_on_calling_thread)
            };
            match stages.last_mut() {
                Some((Stage::Prim(run), origins)) if joins(run) => {
                    run.push(prim_pass.clone());
                    origins.push(origin(Part::Whole));
                }
                _ => stages.push((Stage::Prim(vec![prim_pass.clone()]), vec![origin(Part::Whole)])),
            }
            continue;
        }
        if pass.kind() != PassKind::Function {
            if let Some(given) = how.splits.iter().find(|s| s.name == pass.info().name) {
                if let Some(prelude) = &given.prelude {
                    stages.push((Stage::Module(prelude.clone()), vec![origin(Part::Given(prelude.clone()))]));
                }
                if let Some(form) = given.per_function.as_function() {
                    let form = form.clone().visiting_marked();
                    stages.push((Stage::Function(vec![form]), vec![origin(Part::Given(given.per_function.clone()))]));
                }
                continue;
            }
        }
        let (func_pass, part) = match (pass.as_function(), pass.function_form()) {
            (Some(func_pass), _) => (func_pass.clone(), Part::Whole),
            (None, Some(form)) => (form, Part::Form),
            (None, None) => {
                match pass.split_form() {
                    Some((body, form)) => {
                        let info = pass.info();
                        let run = body.clone();
                        let as_pass = module_pass(&info.name, info.opt_level, move |m, ctx| Ok(run(&m, ctx))).shared();
                        stages.push((Stage::Prelude(Prelude { body, pass: as_pass }), vec![origin(Part::Prelude)]));
                        stages.push((Stage::Function(vec![form]), vec![origin(Part::SplitForm)]));
                    }
                    None => stages.push((Stage::Module(pass.clone()), vec![origin(Part::Whole)])),
                }
                continue;
            }
        };
        let starts = matches!(part, Part::Form) && !how.fuse_forms;
        match stages.last_mut() {
            Some((Stage::Function(run), origins)) if !starts && joins_function_stage(run.iter(), &func_pass) => {
                run.push(func_pass);
                origins.push(origin(part));
            }
            _ => stages.push((Stage::Function(vec![func_pass]), vec![origin(part)])),
        }
    }
    Ok(stages)
}

/// Whether a function pass `next` joins the function stage whose passes so far are `run`
/// (else it starts a stage): a pass that runs on the calling thread is a stage of its own, so
/// that the passes around it still fan out.
pub(crate) fn joins_function_stage<'a>(mut run: impl Iterator<Item = &'a FunctionPass>, next: &FunctionPass) -> bool {
    !next.runs_on_calling_thread() && !run.any(FunctionPass::runs_on_calling_thread)
}
