//! The session's one stage loop: [`drive`] runs a plan variant's stages in order on a whole
//! module, each function stage over every function entering it, each barrier on the module
//! entering it, and merges what they give as a serial run reports it (the first failing pass's
//! first failing function, diagnostics pass-major within a function stage, the unfused variant
//! when a fused stage's run-time check fails: [`drive_plan`]).
//!
//! *How* a stage's results are obtained is not the loop's business but its [`Results`]'s:
//! - [`Compute`]: every function stage fanned out over the functions on the executor's pool
//!   (`fanout::map_items`), each barrier run by `db::run_module_stage`. With a persistent store
//!   on the stage (`Stage::persist`), it computes every function's key first (chained:
//!   `store.rs` `Persist::key`), asks the store for all of a stage's keys in batches
//!   ([`super::store::StageStore::get_many`]: one round trip per batch to a remote store),
//!   decodes the hits and computes and stores only the misses, in parallel. Used by lean mode's
//!   cold runs, and so by `passel run --cache`.
//! - `db::Queries`: salsa's queries (`fn_stage`, `barrier`), asked on the same pool with one
//!   database handle per worker, so that salsa records what each result read and reuses and
//!   backdates it on the next run; the default mode's cold and cross-run path.
//!
//! What a caller keeps of the run it records as the stages finish ([`Record`]): lean mode's
//! stubs and changes (`lean.rs`), the default mode's edit store (`Outputs`, the stage outputs
//! `fast.rs` is made from). The edit path (`edit.rs`) propagates a changed set instead of
//! driving every function; it runs a function stage on one function through the same
//! `db::run_function_stage`, and so the same persistent store.
//!
//! Invariant: a driven run's output and diagnostics are those of a cold serial run (the
//! session's parity tests run both `Results`; `cache_steps.rs` runs `Compute` through the CLI).

use std::sync::Arc;
use std::time::Instant;

use super::db::{
    compute_function_stage, extend_pass_major, first_error, run_module_stage, view_with, StageCache, StageErr, StageOut,
};
use super::edit::{EditRun, EditStage, Names};
use super::plan::{Plan, Stage};
use super::prims::{prims_of, ModuleRun};
use super::store::StageKey;
use crate::ir::Module;
use crate::transform::fanout::map_items;
use crate::transform::PassError;

/// One function's result of a function stage.
pub(crate) type Out = Result<StageOut, StageErr>;

/// A function stage's results over the functions entering it.
pub(crate) struct FunctionResults {
    /// One per function, in module order.
    pub(crate) outs: Vec<Out>,
    /// Whether each was computed in this run (rather than reused or read from a store).
    pub(crate) computed: Vec<bool>,
    /// Their keys in the stage's persistent store, when it has one and they were asked.
    pub(crate) keys: Option<Vec<StageKey>>,
}

/// How a driven run obtains a stage's results. Stage numbers are positions in the variant.
pub(crate) trait Results {
    /// Function stage `k` (`stage`) on every function of `input`, on `threads` workers.
    fn function_stage(&self, k: usize, stage: &Stage, input: &Module, threads: usize) -> FunctionResults;
    /// Barrier `k` (`stage`) on `input`, and the functions (PrimFuncs for a PrimFunc stage) it
    /// recomputed in this run, in module order.
    fn module_stage(&self, k: usize, stage: &Stage, input: &Module) -> Result<(ModuleRun, Vec<Arc<str>>), PassError>;
}

/// What a caller keeps of a driven run, told stage by stage.
pub(crate) trait Record {
    /// Function stage `k` ran on `input` (every function entering it), giving `outs` (one per
    /// function, in module order), under `keys` in the stage's persistent store (when it has
    /// one).
    fn function_stage(&mut self, k: usize, input: &Module, outs: Vec<StageOut>, keys: Option<&[StageKey]>);
    /// Barrier `k` ran on `input`, giving `run`.
    fn module_stage(&mut self, k: usize, input: &Module, run: &ModuleRun);
}

/// Records nothing.
impl Record for () {
    fn function_stage(&mut self, _k: usize, _input: &Module, _outs: Vec<StageOut>, _keys: Option<&[StageKey]>) {}
    fn module_stage(&mut self, _k: usize, _input: &Module, _run: &ModuleRun) {}
}

/// Every stage's outputs, in the order the stages ran: what the default mode's edit store
/// (`fast.rs` `Cache`) is made from.
#[derive(Default)]
pub(crate) struct Outputs {
    pub(crate) stages: Vec<StageCache>,
    /// The names entering the current function stage, while no barrier changed them.
    names: Option<Names>,
}

impl Record for Outputs {
    fn function_stage(&mut self, _k: usize, input: &Module, outs: Vec<StageOut>, _keys: Option<&[StageKey]>) {
        let names = self
            .names
            .get_or_insert_with(|| Arc::new(input.entries().iter().map(|(n, _)| n.clone()).collect()))
            .clone();
        self.stages.push(StageCache::Function { names, outs });
    }

    fn module_stage(&mut self, _k: usize, _input: &Module, run: &ModuleRun) {
        self.names = None;
        self.stages.push(StageCache::Module { out: run.module.clone(), diags: run.diags.clone() });
    }
}

/// Runs the plan's fused variant (its unfused one straight away when `unfused`) through
/// `attempt`, given whether to run the unfused variant; when the fused variant's run-time
/// check fails (`attempt` gives `None`), the unfused one. Returns the result and whether it is
/// the unfused variant's.
pub(crate) fn drive_plan<T>(
    plan: &Plan,
    unfused: bool,
    mut attempt: impl FnMut(bool) -> Result<Option<T>, PassError>,
) -> Result<(T, bool), PassError> {
    if !unfused {
        if let Some(ran) = attempt(false)? {
            return Ok((ran, false));
        }
    }
    // The unfused variant has no run-time check, so it always gives a result.
    let unfused = plan.unfused.is_some();
    let ran = attempt(unfused)?.ok_or_else(|| PassError::msg("internal error: unfused stage plan not runnable"))?;
    Ok((ran, unfused))
}

/// Runs `stages` (one plan variant) on `module` from its first stage, on `threads` workers,
/// each stage's results obtained from `results`, telling `record` what each stage did.
/// `Ok(None)` when a function failed the run-time check of a fused stage (the caller runs the
/// plan's unfused variant instead: [`drive_plan`]).
pub(crate) fn drive(
    stages: &[Arc<Stage>],
    module: Module,
    threads: usize,
    results: &impl Results,
    record: &mut impl Record,
) -> Result<Option<EditRun>, PassError> {
    let mut current = module;
    let mut runs = Vec::with_capacity(stages.len());
    let mut diagnostics = Vec::new();
    for (k, stage) in stages.iter().enumerate() {
        let start = Instant::now();
        match stage.planned.function_passes() {
            Some(passes) => {
                let FunctionResults { outs, computed, keys } =
                    results.function_stage(k, stage, &current, stage.threads(threads));
                if outs.iter().any(|out| out.as_ref().is_ok_and(|o| o.unfusable)) {
                    return Ok(None);
                }
                let outs = first_error(outs)?;
                extend_pass_major(&mut diagnostics, passes.len(), outs.iter().map(|out| &*out.diags));
                let recomputed =
                    current.entries().iter().zip(&computed).filter(|(_, c)| **c).map(|((n, _), _)| n.clone()).collect();
                runs.push(EditStage { recomputed, entered: current.len(), time: start.elapsed() });
                let mut next = current.clone();
                next.replace_all(outs.iter().map(|out| out.func.0.clone()).collect());
                record.function_stage(k, &current, outs, keys.as_deref());
                current = next;
            }
            None => {
                let entered = match stage.planned.prim_passes() {
                    // A PrimFunc stage's statistics count PrimFuncs.
                    Some(_) => current.num_prims(),
                    None => current.len(),
                };
                let (run, recomputed) = results.module_stage(k, stage, &current)?;
                diagnostics.extend(run.diags.iter().cloned());
                record.module_stage(k, &current, &run);
                runs.push(EditStage { recomputed, entered, time: start.elapsed() });
                current = run.module;
            }
        }
    }
    Ok(Some(EditRun { module: current, diagnostics, stages: runs }))
}

/// How many keys one store request asks for: small enough that the workers share the
/// requests of a stage, large enough that a remote store pays few round trips.
const BATCH: usize = 512;

/// A stage's results computed directly: no memo, a stage's persistent store asked first (see
/// the module docs).
pub(crate) struct Compute;

impl Results for Compute {
    fn function_stage(&self, _k: usize, stage: &Stage, input: &Module, threads: usize) -> FunctionResults {
        let entries = input.entries();
        let run = |name: &Arc<str>, func: &Arc<crate::ir::Function>| {
            let view = view_with(name, func, |c| input.get(c).cloned(), || prims_of(input));
            compute_function_stage(stage, name, func.clone(), &view, &|| {})
        };
        let Some(persist) = &stage.persist else {
            let outs = map_items(threads, entries, |(name, func)| run(name, func));
            let n = outs.len();
            return FunctionResults { outs, computed: vec![true; n], keys: None };
        };
        // Every function's key (its callees' signatures as they enter the stage: `input` holds
        // them), then the store's entries for a batch of keys at a time.
        let keys: Vec<StageKey> = map_items(threads, entries, |(name, func)| persist.key(name, func, input));
        let batches: Vec<&[StageKey]> = keys.chunks(BATCH).collect();
        let found: Vec<Option<Vec<u8>>> =
            map_items(threads, &batches, |batch| persist.store.get_many(batch)).into_iter().flatten().collect();
        let items: Vec<usize> = (0..entries.len()).collect();
        let results = map_items(threads, &items, |&i| {
            let (name, func) = &entries[i];
            let key = &keys[i];
            if let Some(out) = found.get(i).and_then(Option::as_ref).and_then(|entry| persist.open(entry, key, func)) {
                return (Ok(out), false);
            }
            let out = run(name, func);
            if let Ok(out) = &out {
                persist.save(key, func, out);
            }
            (out, true)
        });
        let (outs, computed) = results.into_iter().unzip();
        FunctionResults { outs, computed, keys: Some(keys) }
    }

    fn module_stage(&self, _k: usize, stage: &Stage, input: &Module) -> Result<(ModuleRun, Vec<Arc<str>>), PassError> {
        let run = run_module_stage(stage, input.clone())?;
        let recomputed = match &run.prims_run {
            Some(prims) => prims.clone(),
            None => input.entries().iter().map(|(n, _)| n.clone()).collect(),
        };
        Ok((run, recomputed))
    }
}
