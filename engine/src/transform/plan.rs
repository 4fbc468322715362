//! The planner: the one place that turns a `Sequential` under a context into pass calls and
//! stages. The executor runs its stages (`executor::run_plan`); crash reproducers list its
//! calls ([`planned_calls`]); the incremental session (`session/plan.rs`) flattens the same
//! calls and groups them by the same rule, adding only its fingerprints, `ModuleSplit`s and
//! firewalls, so a session and a plain run agree on what runs and in which stage by
//! construction.
//!
//! # Calls
//! [`walk_calls`] walks a `Sequential`'s list exactly as the reference's rules 12–16 do: a pass
//! the context does not enable is skipped, with its `required` dependencies; the dependencies
//! of an enabled pass are looked up in the registry and come right before it, neither filtered
//! nor de-duplicated; a nested `Sequential` is a call of its own, followed, when flattening,
//! by its list's calls (the executor does not flatten: it calls a nested sequential as one
//! pass, with its own hooks, and that plans its own list in turn).
//!
//! # Stages
//! [`plan`] groups the calls into [`Stage`]s: maximal runs of function passes, and barriers. A
//! barrier is a module pass, a nested `Sequential` or any pass that is not a [`FunctionPass`].
//! A module pass with a per-function form ([`Pass::function_form`]) joins the function stage
//! as that form; one with a split form ([`Pass::split_form`]) is a short barrier whose
//! per-function part starts a stage ([`Stage::Split`]). A function pass that runs on the
//! calling thread ([`FunctionPass::on_calling_thread`]) is a stage of its own
//! ([`joins_function_stage`]). If the calls cannot be made (an unknown required pass), the
//! caller decides: the executor runs the `Sequential` pass by pass, so the error comes exactly
//! where the serial run reports it.

use std::sync::Arc;

use super::context::PassContext;
use super::error::PassError;
use super::pass::{FunctionPass, Pass, PreludeBody, Sequential};
use super::registry::get_pass;

/// One step of a planned `Sequential`.
#[derive(Clone, Debug)]
pub enum Stage {
    /// A maximal run of function passes (required dependencies included), in call order.
    Function(Vec<FunctionPass>),
    /// A split module pass ([`Pass::split_form`]): its prelude, then a run of function passes
    /// whose first is that pass's per-function part.
    Split(Prelude, Vec<FunctionPass>),
    /// A barrier: a module pass, a nested `Sequential`, or any other non-function pass. It is
    /// called through [`call_pass`](super::call_pass) with the whole module.
    Module(Arc<dyn Pass>),
}

/// The module-wide part of a split module pass, as planned into a [`Stage::Split`].
#[derive(Clone)]
pub struct Prelude(pub Arc<PreludeBody>);

impl std::fmt::Debug for Prelude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prelude")
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

/// Plans `seq`'s list under `ctx`: its calls (`walk_calls`, nested sequentials not
/// flattened) grouped into stages. Fails when a required pass is not registered.
pub fn plan(seq: &Sequential, ctx: &PassContext) -> Result<Vec<Stage>, PassError> {
    let mut calls = Vec::new();
    walk_calls(seq, ctx, false, &mut calls)?;
    let mut stages = Vec::new();
    for call in calls {
        push_call(&mut stages, call.pass);
    }
    Ok(stages)
}

/// Whether a function pass `next` joins the function stage whose passes so far are `run`
/// (else it starts a stage): a pass that runs on the calling thread is a stage of its own, so
/// that the passes around it still fan out. The session's planner applies the same rule.
pub(crate) fn joins_function_stage<'a>(mut run: impl Iterator<Item = &'a FunctionPass>, next: &FunctionPass) -> bool {
    !next.runs_on_calling_thread() && !run.any(FunctionPass::runs_on_calling_thread)
}

fn push_call(stages: &mut Vec<Stage>, pass: Arc<dyn Pass>) {
    if let Some(func_pass) = pass.as_function().cloned().or_else(|| pass.function_form()) {
        match stages.last_mut() {
            Some(Stage::Function(run)) | Some(Stage::Split(_, run)) if joins_function_stage(run.iter(), &func_pass) => {
                run.push(func_pass)
            }
            _ => stages.push(Stage::Function(vec![func_pass])),
        }
    } else if let Some((prelude, form)) = pass.split_form() {
        stages.push(Stage::Split(Prelude(prelude), vec![form]));
    } else {
        stages.push(Stage::Module(pass));
    }
}
