//! The session's stage loop without salsa: [`drive`] runs a plan variant's stages in order on
//! a whole module, each function stage fanned out over the functions on the executor's pool
//! (`fanout::map_items`), each barrier through `db::run_module_stage`. What a caller keeps of
//! the run (lean mode's stubs and changes) it records as the stages finish ([`Record`]).
//!
//! Which function-stage results are reused is the store's decision, not the loop's: with a
//! persistent store on the stage (`Stage::persist`), the loop computes every function's key
//! first (chained: `store.rs` `Persist::key`), asks the store for all of a stage's keys at
//! once ([`super::store::StageStore::get_many`]: one round trip per batch to a remote store),
//! decodes the hits and computes and stores only the misses, in parallel. Without a store,
//! every function is computed.
//!
//! Users: lean mode's cold runs, and so `passel run --cache` (a one-shot run has no use for
//! salsa's memos). The salsa path (`db.rs`) keeps its own loop over queries, and the edit
//! path (`edit.rs`) its propagation over a changed set; both run a function stage on one
//! function through the same `db::run_function_stage` (and so the same persistent store).
//!
//! Invariant: a driven run's output and diagnostics are those of a cold serial run (the
//! session's parity tests run lean mode; `cache_steps.rs` runs it through the CLI).

use std::sync::Arc;
use std::time::Instant;

use super::db::{compute_function_stage, extend_pass_major, first_error, run_module_stage, view_with, StageOut};
use super::edit::{EditRun, EditStage};
use super::plan::Stage;
use super::prims::ModuleRun;
use super::store::StageKey;
use crate::ir::Module;
use crate::transform::fanout::map_items;
use crate::transform::PassError;

/// What a caller keeps of a driven run, told stage by stage.
pub(crate) trait Record {
    /// Function stage `k` ran on `input` (every function entering it), giving `outs` (one per
    /// function, in module order), under `keys` in the stage's persistent store (when it has
    /// one).
    fn function_stage(&mut self, k: usize, input: &Module, outs: &[StageOut], keys: Option<&[StageKey]>);
    /// Barrier `k` ran on `input`, giving `run`.
    fn module_stage(&mut self, k: usize, input: &Module, run: &ModuleRun);
}

/// Records nothing.
impl Record for () {
    fn function_stage(&mut self, _k: usize, _input: &Module, _outs: &[StageOut], _keys: Option<&[StageKey]>) {}
    fn module_stage(&mut self, _k: usize, _input: &Module, _run: &ModuleRun) {}
}

/// How many keys one store request asks for: small enough that the workers share the
/// requests of a stage, large enough that a remote store pays few round trips.
const BATCH: usize = 512;

/// Runs `stages` (one plan variant) on `module` from its first stage, on `threads` workers,
/// telling `record` what each stage did. `Ok(None)` when a function failed the run-time check
/// of a fused stage (the caller runs the plan's unfused variant instead).
pub(crate) fn drive(
    stages: &[Arc<Stage>],
    module: Module,
    threads: usize,
    record: &mut impl Record,
) -> Result<Option<EditRun>, PassError> {
    let mut current = module;
    let mut runs = Vec::with_capacity(stages.len());
    let mut diagnostics = Vec::new();
    for (k, stage) in stages.iter().enumerate() {
        let start = Instant::now();
        match stage.planned.function_passes() {
            Some(passes) => {
                let (outs, computed, keys) = function_stage(stage, &current, stage.threads(threads));
                if outs.iter().any(|out| out.as_ref().is_ok_and(|o| o.unfusable)) {
                    return Ok(None);
                }
                let outs = first_error(outs)?;
                extend_pass_major(&mut diagnostics, passes.len(), outs.iter().map(|out| &*out.diags));
                record.function_stage(k, &current, &outs, keys.as_deref());
                let recomputed =
                    current.entries().iter().zip(&computed).filter(|(_, c)| **c).map(|((n, _), _)| n.clone()).collect();
                runs.push(EditStage { recomputed, entered: current.len(), time: start.elapsed() });
                let mut next = current.clone();
                next.replace_all(outs.into_iter().map(|out| out.func.0).collect());
                current = next;
            }
            None => {
                let entered: Vec<_> = current.entries().iter().map(|(n, _)| n.clone()).collect();
                let prims_entered = current.num_prims();
                let run = run_module_stage(stage, current.clone())?;
                diagnostics.extend(run.diags.iter().cloned());
                record.module_stage(k, &current, &run);
                let stats = match &run.prims_run {
                    // A PrimFunc stage's statistics count PrimFuncs.
                    Some(prims) => {
                        EditStage { recomputed: prims.clone(), entered: prims_entered, time: start.elapsed() }
                    }
                    None => EditStage { entered: entered.len(), recomputed: entered, time: start.elapsed() },
                };
                runs.push(stats);
                current = run.module;
            }
        }
    }
    Ok(Some(EditRun { module: current, diagnostics, stages: runs }))
}

/// One function's result of a function stage.
type Out = Result<StageOut, super::db::StageErr>;

/// Function stage `stage` on every function of `input`: the results in module order, whether
/// each was computed (rather than read from the store), and their keys in the stage's store.
fn function_stage(stage: &Stage, input: &Module, threads: usize) -> (Vec<Out>, Vec<bool>, Option<Vec<StageKey>>) {
    let entries = input.entries();
    let run = |name: &Arc<str>, func: &Arc<crate::ir::Function>| {
        let view = view_with(name, func, |c| input.get(c).cloned());
        compute_function_stage(stage, name, func.clone(), &view, &|| {})
    };
    let Some(persist) = &stage.persist else {
        let outs = map_items(threads, entries, |(name, func)| run(name, func));
        let n = outs.len();
        return (outs, vec![true; n], None);
    };
    // Every function's key (its callees' signatures as they enter the stage: `input` holds them),
    // then the store's entries for a batch of keys at a time.
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
    (outs, computed, Some(keys))
}
