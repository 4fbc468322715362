//! PrimFunc stages in a session: the loop level's function stages (`transform::plan::Stage::Prim`,
//! consecutive PrimFunc passes) and the PrimFuncs every stage carries.
//!
//! PrimFuncs enter a session with the module it loads, and module passes make and change them
//! (LegalizeOps, FuseTIR). A graph function stage leaves them as they are, so the PrimFuncs
//! entering a stage are those leaving the last barrier before it (or the loaded ones). A
//! PrimFunc stage is one of those barriers to the session's stage loops: it sees the module
//! entering it and leaves the graph functions as they are (the same `Arc`s, so every function
//! after it is reused). Inside, it runs per PrimFunc with the executor's routine
//! ([`run_prim_stage_on`], fanned out as the executor fans out), and keeps each PrimFunc's
//! result with its input ([`PrimResults`]): when the stage runs again, a PrimFunc equal to
//! the one it computed last time ([`same_prim`]) takes that result, so an edit re-runs the tir
//! passes only on the PrimFuncs it changed. That is sound because a PrimFunc pass reads
//! nothing but its PrimFunc and its context (a PrimFunc calls no other function); the
//! context is the stage's, which its fingerprint covers (another plan has other stages, with
//! results of their own).
//!
//! With a persistent store (`store.rs`), a PrimFunc the stage kept no result for is looked up
//! there first, under a key of the stage (its passes' registered names, the settings, the
//! engine and build) and the PrimFunc's every table (`Persist::prim_key`), and a computed
//! result is stored: so a new process (or another machine sharing the store) re-runs the tir
//! passes only on PrimFuncs no earlier run gave them. An entry holds the output exactly
//! (`codec.rs`, "PrimFuncs") and is checked like a function stage's (header, checksum, key,
//! the tir verifier); a refused one is reported and recomputed. A result read from the store
//! is not counted as recomputed.
//!
//! What it deliberately does not do: reuse results under `testing.verify_each`, which checks
//! whole modules pass by pass.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use super::db::extend_pass_major;
use super::plan::Stage;
use super::same::same_prim;
use super::store::StageKey;
use crate::ir::Module;
use crate::tir::PrimFunc;
use crate::transform::executor::{first_failure, run_prim_stage_on};
use crate::transform::fanout::map_items;
use crate::transform::{call_pass, Diagnostic, PassError, PrimFuncPass, VERIFY_EACH};

/// What a barrier (a module pass, a prelude or a PrimFunc stage) produced in a session.
pub(crate) struct ModuleRun {
    pub(crate) module: Module,
    pub(crate) diags: Vec<Diagnostic>,
    /// For a PrimFunc stage, the PrimFuncs it ran its passes on (module order); `None` for a
    /// module pass, which ran on everything.
    pub(crate) prims_run: Option<Vec<Arc<str>>>,
}

/// A module holding the PrimFuncs of `module` and no graph function (shares its list).
pub(crate) fn prims_of(module: &Module) -> Module {
    let mut prims = Module::new();
    prims.set_prims_from(module);
    prims
}

/// A PrimFunc stage's last result per PrimFunc, by name (see the module docs).
#[derive(Default)]
pub(crate) struct PrimResults {
    map: Mutex<FxHashMap<Arc<str>, PrimResult>>,
}

struct PrimResult {
    input: Arc<PrimFunc>,
    output: Arc<PrimFunc>,
    /// Per pass of the stage.
    diags: Arc<Vec<Vec<Diagnostic>>>,
}

/// One PrimFunc's result in a run: its output, diagnostics per pass and whether it was computed.
type PrimOut = Result<(Arc<PrimFunc>, Arc<Vec<Vec<Diagnostic>>>, bool), (usize, PassError)>;

/// Runs PrimFunc stage `stage` (its passes `passes`) on `module`, reusing each PrimFunc's last
/// result when the PrimFunc did not change. Diagnostics in the order a serial run reports them
/// (pass-major, module order within a pass); the error a serial run reports (the first
/// failing pass's first failing PrimFunc).
pub(crate) fn run_prim_stage(stage: &Stage, passes: &[PrimFuncPass], module: Module) -> Result<ModuleRun, PassError> {
    let ctx = &stage.ctx;
    if ctx.get_config(VERIFY_EACH, false) {
        let all = module.prim_entries().iter().map(|(n, _)| n.clone()).collect();
        let worker = ctx.worker_copy();
        let res = {
            let _scope = worker.push_silently();
            passes.iter().try_fold(module, |m, pass| call_pass(pass, m, &worker))
        };
        ctx.merge_statistics(&worker.take_statistics());
        return res.map(|module| ModuleRun { module, diags: worker.diagnostics().take(), prims_run: Some(all) });
    }
    let results = &stage.prims;
    let kept = std::mem::take(&mut *results.map.lock().unwrap_or_else(PoisonError::into_inner));
    let view = &module;
    let threads = stage.planned.threads(ctx);
    let entries = module.prim_entries();
    let reused = |i: usize| {
        let (name, func) = &entries[i];
        kept.get(name).filter(|r| same_prim(&r.input, func))
    };
    // With a persistent store, the key of each PrimFunc the last run did not leave a result
    // for, and the store's entries for them (one request).
    let stored = stage.persist.as_ref().map(|persist| {
        let todo: Vec<usize> = (0..entries.len()).filter(|&i| reused(i).is_none()).collect();
        let keys: Vec<StageKey> = map_items(threads, &todo, |&i| persist.prim_key(&entries[i].0, &entries[i].1));
        let found = if keys.is_empty() { Vec::new() } else { persist.store.get_many(&keys) };
        let mut by_index: FxHashMap<usize, (StageKey, Option<Vec<u8>>)> = FxHashMap::default();
        by_index.extend(todo.into_iter().zip(keys.into_iter().zip(found)));
        (persist, by_index)
    });
    let items: Vec<usize> = (0..entries.len()).collect();
    let outs: Vec<PrimOut> = map_items(threads, &items, |&i| {
        let (name, func) = &entries[i];
        if let Some(r) = reused(i) {
            return Ok((r.output.clone(), r.diags.clone(), false));
        }
        let stored = stored.as_ref().and_then(|(persist, by_index)| Some((*persist, by_index.get(&i)?)));
        if let Some((persist, (key, entry))) = stored {
            if let Some((out, diags)) = entry.as_deref().and_then(|e| persist.open_prim(e, key, name, func)) {
                return Ok((out, diags, false));
            }
        }
        let run = run_prim_stage_on(passes, name, func, view, ctx);
        // A session counts what it computes.
        for stats in &run.statistics {
            ctx.merge_statistics(stats);
        }
        match run.error {
            Some(e) => Err(e),
            None => {
                let out = (run.func, Arc::new(run.diagnostics));
                if let Some((persist, (key, _))) = stored {
                    persist.save_prim(key, name, func, &out);
                }
                Ok((out.0, out.1, true))
            }
        }
    });
    if let Some((_, at)) = first_failure(outs.iter().map(|o| o.as_ref().err().map(|e| e.0))) {
        // What was kept is still right for its inputs.
        *results.map.lock().unwrap_or_else(PoisonError::into_inner) = kept;
        let first = outs.into_iter().nth(at).and_then(Result::err).map(|e| e.1);
        return Err(first.unwrap_or_else(|| PassError::msg("internal error: failing PrimFunc not found")));
    }
    drop(kept);
    let outs: Vec<_> = outs.into_iter().filter_map(Result::ok).collect();
    let mut diags = Vec::new();
    extend_pass_major(&mut diags, passes.len(), outs.iter().map(|(_, d, _)| &**d));
    let mut map = FxHashMap::with_capacity_and_hasher(outs.len(), Default::default());
    let mut prims_run = Vec::new();
    let mut new = Vec::with_capacity(outs.len());
    for ((name, input), (output, d, ran)) in module.prim_entries().iter().zip(outs) {
        if ran {
            prims_run.push(name.clone());
        }
        new.push(output.clone());
        map.insert(name.clone(), PrimResult { input: input.clone(), output, diags: d });
    }
    *results.map.lock().unwrap_or_else(PoisonError::into_inner) = map;
    let mut module = module;
    module.replace_all_prims(new);
    Ok(ModuleRun { module, diags, prims_run: Some(prims_run) })
}
