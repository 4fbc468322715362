//! The session's edit path: after edits that only changed function bodies (no function
//! added, removed, renamed or reordered, same plan and settings), a run starts from the
//! previous run's per-stage outputs and recomputes only what the edits can reach, instead of
//! asking salsa to verify every memo of every stage (a few µs each, times functions times
//! stages).
//!
//! Phases, stage by stage, carrying the set of functions whose stage input changed (with the
//! old and the new input):
//! - a function stage re-runs its passes on the changed functions and on the callers of the
//!   changed functions whose signature changed (a function pass reads no more than its
//!   callees' signatures); an output equal to the previous one stops the change there;
//! - a module stage re-runs its pass on the whole module when any input changed, and passes
//!   on the functions whose output differs; when the pass adds or removes functions, the
//!   edit path gives up and the session falls back to a salsa run;
//! - the output module and diagnostics (pass-major within a function stage, as a serial run
//!   reports them) are assembled from the updated per-stage outputs.
//!
//! What it deliberately does not do: update salsa's memos (salsa stays consistent with its
//! inputs, and recomputes what changed when it is next asked), run in parallel (an edit
//! touches few functions), or handle list or plan changes (salsa does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{
    callees, extend_pass_major, replace_outputs, run_function_stage, run_module_stage, view_with, FnVal, StageCache,
};
use super::edit::{self, Changed, Positions, Referrers};
use super::plan::{Stage, StageKind};
use super::same::{same_function, same_signature};
use crate::ir::{Function, Module};
use crate::transform::{Diagnostic, PassError};

/// The previous run's inputs and per-stage outputs.
pub(crate) struct Cache {
    /// The functions as loaded, in module order.
    pub(crate) names: Arc<Vec<Arc<str>>>,
    pub(crate) sources: FxHashMap<Arc<str>, Arc<Function>>,
    pub(crate) stages: Vec<StageCache>,
    /// For each function stage, where each name is in its outputs.
    /// Stages entered by the same list share one map.
    index: Vec<Positions>,
    /// The output module of the run.
    output: Module,
    /// The run's diagnostics (before moving them with their functions' spans).
    diagnostics: Vec<Diagnostic>,
    /// For each global, functions that reference it in some stage's input: a superset
    /// (entries are added, never removed). Built on the first signature change rather than
    /// in the cold run, which it would slow down by a scan of every stage's functions.
    referrers: Option<Referrers>,
}

/// Notes in `referrers` (when built) the globals `func`, now stored for `name`, references.
fn note(referrers: &mut Option<Referrers>, name: &Arc<str>, func: &Function) {
    if let Some(referrers) = referrers {
        for callee in callees(name, func) {
            referrers.entry(Arc::from(callee)).or_default().insert(name.clone());
        }
    }
}

impl Cache {
    /// A cache of a run on `sources` (in `names` order) that produced `stages` and `output`.
    pub(crate) fn new(
        names: Arc<Vec<Arc<str>>>,
        sources: FxHashMap<Arc<str>, Arc<Function>>,
        stages: Vec<StageCache>,
        output: Module,
        diagnostics: Vec<Diagnostic>,
    ) -> Cache {
        // The edit path updates module stages' outputs in place: give them lists of their
        // own rather than ones shared with salsa's memos, which the first update would copy.
        let stages: Vec<StageCache> = stages
            .into_iter()
            .map(|stage| match stage {
                StageCache::Module { out, diags } => StageCache::Module { out: unshared(&out), diags },
                stage => stage,
            })
            .collect();
        let mut index: Vec<Positions> = Vec::with_capacity(stages.len());
        let mut last: Option<(Arc<Vec<Arc<str>>>, Positions)> = None;
        for stage in &stages {
            let map = match stage {
                StageCache::Function { names, .. } => match &last {
                    Some((list, map)) if Arc::ptr_eq(list, names) => map.clone(),
                    _ => {
                        let map: Positions = Arc::new(names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect());
                        last = Some((names.clone(), map.clone()));
                        map
                    }
                },
                StageCache::Module { .. } => Arc::default(),
            };
            index.push(map);
        }
        Cache { names, sources, stages, index, output, diagnostics, referrers: None }
    }

    /// Builds the referrer index from every stage's input (once; later updates go through
    /// [`note`]). The callers of a function whose signature changed come from it.
    fn build_referrers(&mut self) {
        if self.referrers.is_some() {
            return;
        }
        let mut referrers = Some(Referrers::default());
        for (name, func) in &self.sources {
            note(&mut referrers, name, func);
        }
        for stage in &self.stages {
            match stage {
                StageCache::Function { names, outs } => {
                    for (name, out) in names.iter().zip(outs) {
                        note(&mut referrers, name, &out.func.0);
                    }
                }
                StageCache::Module { out, .. } => {
                    for (name, func) in out.entries() {
                        note(&mut referrers, name, func);
                    }
                }
            }
        }
        self.referrers = referrers;
    }

    /// The function `name` entering stage `k` (after this run's updates of earlier stages).
    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        if k == 0 {
            return self.sources.get(name).cloned();
        }
        match &self.stages[k - 1] {
            StageCache::Function { outs, .. } => self.index[k - 1].get(name).map(|&i| outs[i].func.0.clone()),
            StageCache::Module { out, .. } => out.get(name).cloned(),
        }
    }

    /// How many functions enter stage `k`.
    fn count_at(&self, k: usize) -> usize {
        if k == 0 {
            return self.names.len();
        }
        match &self.stages[k - 1] {
            StageCache::Function { names, .. } => names.len(),
            StageCache::Module { out, .. } => out.len(),
        }
    }

    /// The names entering stage `k`.
    fn names_at(&self, k: usize) -> Vec<Arc<str>> {
        if k == 0 {
            return self.names.to_vec();
        }
        match &self.stages[k - 1] {
            StageCache::Function { names, .. } => names.to_vec(),
            StageCache::Module { out, .. } => out.entries().iter().map(|(n, _)| n.clone()).collect(),
        }
    }
}

/// A copy of `module` sharing its functions but not its list.
fn unshared(module: &Module) -> Module {
    let mut copy = Module::with_capacity(module.len());
    for (name, func) in module.entries() {
        // The names of a module are distinct, so adding cannot fail.
        let _ = copy.add_shared(name, func.clone());
    }
    copy
}

/// One stage of an edit run: the functions recomputed (module order), the functions that
/// entered it, and its wall time.
pub(crate) struct FastStage {
    pub(crate) recomputed: Vec<Arc<str>>,
    pub(crate) entered: usize,
    pub(crate) time: Duration,
}

/// The result of an edit run.
pub(crate) struct FastRun {
    pub(crate) module: Module,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) stages: Vec<FastStage>,
}

/// Runs `stages` (the plan variant `cache` was made with) after the loaded functions in
/// `edited` changed, updating `cache`. `Ok(None)` means the edit path cannot handle the edit
/// (a module pass changed the function list, a recomputed function failed a fused stage's
/// run-time check, or a function pass failed: salsa picks the error a serial run reports);
/// on `Ok(None)` or an error, `cache` is left partly updated and must be dropped.
pub(crate) fn run_edit(
    stages_in: &[Arc<Stage>],
    cache: &mut Cache,
    edited: &FxHashMap<Arc<str>, Arc<Function>>,
) -> Result<Option<FastRun>, PassError> {
    if cache.stages.len() != stages_in.len() {
        return Ok(None);
    }
    let mut changed: Changed = FxHashMap::default();
    for (name, new) in edited {
        let Some(old) = cache.sources.get(name) else { return Ok(None) };
        if !same_function(old, new) {
            changed.insert(name.clone(), (old.clone(), new.clone()));
        }
    }
    for (name, (_, new)) in &changed {
        cache.sources.insert(name.clone(), new.clone());
        note(&mut cache.referrers, name, new);
    }
    let mut stages = Vec::with_capacity(stages_in.len());
    let mut diags_changed = false;
    for (k, stage) in stages_in.iter().enumerate() {
        let start = Instant::now();
        let mut recomputed = Vec::new();
        let mut next: Changed = FxHashMap::default();
        let entered;
        match &stage.kind {
            StageKind::Function(_) => {
                entered = cache.index[k].len();
                let sig_changed: FxHashSet<&str> =
                    changed.iter().filter(|(_, (old, new))| !same_signature(old, new)).map(|(n, _)| &**n).collect();
                // The changed functions, and when a signature changed, every function
                // calling one of those (a scan of the stage's inputs), in module order.
                let to_run: Vec<Arc<str>> = if sig_changed.is_empty() {
                    let mut at: Vec<(usize, Arc<str>)> =
                        changed.keys().filter_map(|n| cache.index[k].get(n).map(|&i| (i, n.clone()))).collect();
                    at.sort_unstable_by_key(|(i, _)| *i);
                    at.into_iter().map(|(_, n)| n).collect()
                } else {
                    // Candidates from the referrer index (a superset), checked against the
                    // stage's input.
                    cache.build_referrers();
                    let mut candidates: FxHashSet<&Arc<str>> = changed.keys().collect();
                    if let Some(referrers) = &cache.referrers {
                        for callee in &sig_changed {
                            candidates.extend(referrers.get(*callee).into_iter().flatten());
                        }
                    }
                    let mut at: Vec<(usize, Arc<str>)> = candidates
                        .into_iter()
                        .filter(|name| {
                            changed.contains_key(*name)
                                || cache
                                    .input(k, name)
                                    .is_some_and(|f| callees(name, &f).iter().any(|c| sig_changed.contains(c)))
                        })
                        .filter_map(|n| cache.index[k].get(n).map(|&i| (i, n.clone())))
                        .collect();
                    at.sort_unstable_by_key(|(i, _)| *i);
                    at.into_iter().map(|(_, n)| n).collect()
                };
                for name in &to_run {
                    let Some(input) = cache.input(k, name) else { continue };
                    let view = view_with(name, &input, |callee| cache.input(k, callee));
                    let Ok(out) = run_function_stage(stage, name, input, &view, &|| {}) else { return Ok(None) };
                    if out.unfusable {
                        return Ok(None);
                    }
                    let (StageCache::Function { outs, .. }, Some(&i)) =
                        (&mut cache.stages[k], cache.index[k].get(name))
                    else {
                        return Ok(None);
                    };
                    if outs[i].func != out.func {
                        next.insert(name.clone(), (outs[i].func.0.clone(), out.func.0.clone()));
                    }
                    diags_changed |= outs[i].diags != out.diags;
                    note(&mut cache.referrers, name, &out.func.0);
                    outs[i] = out;
                    recomputed.push(name.clone());
                }
            }
            StageKind::Module(_) if changed.is_empty() => entered = cache.count_at(k),
            StageKind::Module(_) if firewall_holds(stage, k, cache, &changed) => {
                // The pass would leave the changed functions as they come and the rest as
                // they were: update the previous output in place.
                entered = cache.count_at(k);
                let StageCache::Module { out, .. } = &mut cache.stages[k] else { return Ok(None) };
                for (name, (_, new)) in &changed {
                    if let Some(prev) = out.get(name).cloned() {
                        // Present, so this replaces and cannot fail.
                        let _ = out.insert(name, new.clone());
                        note(&mut cache.referrers, name, new);
                        next.insert(name.clone(), (prev, new.clone()));
                    }
                }
            }
            StageKind::Module(_) => {
                let names = cache.names_at(k);
                entered = names.len();
                let mut module = Module::with_capacity(names.len());
                for name in &names {
                    if let Some(f) = cache.input(k, name) {
                        // The names are distinct, so adding cannot fail.
                        let _ = module.add_shared(name, f);
                    }
                }
                let (new_out, new_diags) = run_module_stage(stage, module)?;
                let StageCache::Module { out, diags, .. } = &mut cache.stages[k] else { return Ok(None) };
                let same_names = out.len() == new_out.len()
                    && out.entries().iter().zip(new_out.entries()).all(|((a, _), (b, _))| a == b);
                if !same_names {
                    return Ok(None);
                }
                for ((name, old), (_, new)) in out.entries().iter().zip(new_out.entries()) {
                    if FnVal(old.clone()) != FnVal(new.clone()) {
                        next.insert(name.clone(), (old.clone(), new.clone()));
                    }
                }
                *out = new_out;
                for (name, (_, new)) in &next {
                    note(&mut cache.referrers, name, new);
                }
                diags_changed |= *diags != new_diags;
                *diags = new_diags;
                recomputed = names.clone();
            }
        }
        changed = next;
        stages.push(FastStage { recomputed, entered, time: start.elapsed() });
    }
    // The functions whose final output changed are replaced in the previous output; the
    // function list is the same (a changed list gave up above).
    replace_outputs(&mut cache.output, &changed);
    let module = cache.output.clone();
    if !diags_changed {
        return Ok(Some(FastRun { module, diagnostics: cache.diagnostics.clone(), stages }));
    }
    let mut diagnostics = Vec::new();
    for (stage, out) in stages_in.iter().zip(&cache.stages) {
        match (&stage.kind, out) {
            (StageKind::Function(passes), StageCache::Function { outs, .. }) => {
                extend_pass_major(&mut diagnostics, passes.len(), outs.iter().map(|out| &*out.diags));
            }
            (StageKind::Module(_), StageCache::Module { diags, .. }) => diagnostics.extend(diags.iter().cloned()),
            _ => return Ok(None),
        }
    }
    cache.diagnostics = diagnostics.clone();
    Ok(Some(FastRun { module, diagnostics, stages }))
}

/// Whether module stage `k`'s firewall holds for every change in `changed`
/// ([`edit::firewall_holds`]), the pass's last output telling whether it left a function as
/// it came.
fn firewall_holds(stage: &Stage, k: usize, cache: &Cache, changed: &Changed) -> bool {
    let StageCache::Module { out, .. } = &cache.stages[k] else {
        return false;
    };
    let lookup = |name: &str| cache.input(k, name);
    edit::firewall_holds(stage, changed, &lookup, |name, old| out.get(name).is_none_or(|prev| same_function(prev, old)))
}
