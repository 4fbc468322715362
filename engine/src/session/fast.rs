//! The session's edit path: after edits that only changed function bodies (no function
//! added, removed, renamed or reordered, same plan and settings), a run starts from the
//! previous run's per-stage results and recomputes only what the edits can reach, instead of
//! asking salsa to verify every memo of every stage (a few µs each, times functions times
//! stages).
//!
//! The per-stage results are small: per function and stage a fingerprint, a signature stub
//! and the diagnostics; functions only where a module pass changed one and for the last
//! function stage. A function entering a stage that is needed (a caller of a function whose
//! signature changed, or every function when a module pass runs again) is recomputed from
//! its source and the stored signatures of its callees.
//!
//! Phases, stage by stage, carrying the set of functions whose stage input changed (with the
//! old input's signature, the new input, and the old input while a later module pass has a
//! firewall that needs it):
//! - a function stage re-runs its passes on the changed functions and on the callers of the
//!   changed functions whose signature changed (a function pass reads no more than its
//!   callees' signatures); an output whose fingerprint equals the previous one stops the
//!   change there;
//! - a module stage skips its pass when its firewall holds, and otherwise re-runs it on the
//!   whole module (its inputs recomputed in parallel) and passes on the functions whose output
//!   differs; when the pass adds or removes functions, the edit path gives up and the session
//!   falls back to a salsa run;
//! - the output module and diagnostics (pass-major within a function stage, as a serial run
//!   reports them) are assembled from the updated per-stage results.
//!
//! What it deliberately does not do: update salsa's memos (salsa stays consistent with its
//! inputs, and recomputes what changed when it is next asked), run function stages in
//! parallel (an edit touches few functions), or handle list or plan changes (salsa does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use rayon::prelude::*;

use super::db::{callees, mod_out, run_function_stage, run_module_stage, run_passes, view_with, StageCache, Val};
use super::fp::{fingerprint, Fp, Sig};
use super::plan::{Plan, Stage, StageKind};
use super::same::same_function;
use super::FirewallCheck;
use crate::ir::{Function, Module};
use crate::transform::{Diagnostic, PassError};

/// Where each function is in a stage's outputs.
type Positions = Arc<FxHashMap<Arc<str>, usize>>;

/// The previous run's inputs and per-stage results (fingerprints, signatures, diagnostics;
/// functions only where a module pass changed one and for the last function stage).
pub(crate) struct Cache {
    /// The functions as loaded, in module order.
    pub(crate) names: Arc<Vec<Arc<str>>>,
    pub(crate) sources: FxHashMap<Arc<str>, Arc<Function>>,
    pub(crate) stages: Vec<StageCache>,
    /// For each stage, where each name is in its outputs (a function stage's outputs follow
    /// the names entering it, a module stage's the names leaving it). Stages with the same
    /// list share one map.
    index: Vec<Positions>,
    /// The output module of the run.
    output: Module,
    /// The run's diagnostics (before moving them with their functions' spans).
    diagnostics: Vec<Diagnostic>,
    /// For each global, functions that reference it in some stage's input: a superset
    /// (entries are added, never removed). Built on the first signature change rather than
    /// in the cold run, which it would slow down by a scan of every function.
    referrers: Option<Referrers>,
}

/// Global name → the functions referencing it.
type Referrers = FxHashMap<Arc<str>, FxHashSet<Arc<str>>>;

/// Notes in `referrers` (when built) that `name` references `callees`.
fn note<'a>(referrers: &mut Option<Referrers>, name: &Arc<str>, callees: impl IntoIterator<Item = &'a str>) {
    if let Some(referrers) = referrers {
        for callee in callees {
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
        let mut index: Vec<Positions> = Vec::with_capacity(stages.len());
        let mut last: Option<(Arc<Vec<Arc<str>>>, Positions)> = None;
        for stage in &stages {
            let names = match stage {
                StageCache::Function { names, .. } | StageCache::Module { names, .. } => names,
            };
            let map = match &last {
                Some((list, map)) if Arc::ptr_eq(list, names) || **list == **names => map.clone(),
                _ => {
                    let map: Positions = Arc::new(names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect());
                    last = Some((names.clone(), map.clone()));
                    map
                }
            };
            index.push(map);
        }
        Cache { names, sources, stages, index, output, diagnostics, referrers: None }
    }

    /// Builds the referrer index (once; later updates go through [`note`]): every global a
    /// source references, a function stage added, or a module pass's changed output
    /// references. The callers of a function whose signature changed come from it.
    fn build_referrers(&mut self) {
        if self.referrers.is_some() {
            return;
        }
        let mut referrers = Some(Referrers::default());
        for (name, func) in &self.sources {
            note(&mut referrers, name, callees(name, func));
        }
        for stage in &self.stages {
            match stage {
                StageCache::Function { names, outs } => {
                    for (name, out) in names.iter().zip(outs) {
                        if let Some(added) = &out.added_refs {
                            note(&mut referrers, name, added.iter().map(|a| &**a));
                        }
                    }
                }
                StageCache::Module { names, outs, .. } => {
                    for (name, out) in names.iter().zip(outs) {
                        if let Some(kept) = &out.kept {
                            note(&mut referrers, name, callees(name, kept));
                        }
                    }
                }
            }
        }
        self.referrers = referrers;
    }

    /// The signature of `name` entering stage `k` (after this run's updates of earlier stages).
    fn sig_at(&self, k: usize, name: &str) -> Option<Sig> {
        if k == 0 {
            return self.sources.get(name).map(|f| Sig::of(f));
        }
        let i = *self.index[k - 1].get(name)?;
        match &self.stages[k - 1] {
            StageCache::Function { outs, .. } => Some(outs[i].sig.clone()),
            StageCache::Module { outs, .. } => Some(outs[i].sig.clone()),
        }
    }

    /// The fingerprint of `name` entering stage `k`.
    fn fp_at(&self, k: usize, name: &str) -> Option<Fp> {
        if k == 0 {
            return self.sources.get(name).map(|f| fingerprint(f));
        }
        let i = *self.index[k - 1].get(name)?;
        match &self.stages[k - 1] {
            StageCache::Function { outs, .. } => Some(outs[i].fp),
            StageCache::Module { outs, .. } => Some(outs[i].fp),
        }
    }

    /// The function `name` entering stage `k` (after this run's updates of earlier stages),
    /// recomputed from the nearest function at hand: the source, a module pass's changed
    /// output or a kept last-stage output. `None` when no such function enters stage `k`.
    fn materialize(&self, plan: &Plan, k: usize, name: &Arc<str>) -> Result<Option<Arc<Function>>, PassError> {
        if k > 0 && !self.index[k - 1].contains_key(name) {
            return Ok(None);
        }
        // Down to the nearest function at hand.
        let mut j = k;
        let mut func = loop {
            if j == 0 {
                match self.sources.get(name) {
                    Some(f) => break f.clone(),
                    None => return Ok(None),
                }
            }
            let kept = self.index[j - 1].get(name).and_then(|&i| match &self.stages[j - 1] {
                StageCache::Function { outs, .. } => outs[i].func.clone(),
                StageCache::Module { outs, .. } => outs[i].kept.clone(),
            });
            if let Some(f) = kept {
                break f;
            }
            j -= 1;
        };
        // Up again, running the function stages; module stages that left the function as
        // it came are skipped.
        while j < k {
            if let Some(stage) = plan.stages.get(j).filter(|s| s.is_function()) {
                let view = view_with(name, &func, |callee| self.sig_at(j, callee).map(|s| s.0));
                func = run_passes(stage, name, func, &view, &|| {})?.0;
            }
            j += 1;
        }
        Ok(Some(func))
    }

    /// The names entering stage `k`, in module order.
    fn names_at(&self, k: usize) -> &Arc<Vec<Arc<str>>> {
        if k == 0 {
            return &self.names;
        }
        match &self.stages[k - 1] {
            StageCache::Function { names, .. } | StageCache::Module { names, .. } => names,
        }
    }

    /// How many functions enter stage `k`.
    fn count_at(&self, k: usize) -> usize {
        if k == 0 {
            self.names.len()
        } else {
            self.index[k - 1].len()
        }
    }
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

/// A function whose stage input changed: the old input's signature, the old input itself
/// while a later module pass's firewall may need it, and the new input.
struct Change {
    old_sig: Sig,
    old: Option<Arc<Function>>,
    new: Val,
}

type Changed = FxHashMap<Arc<str>, Change>;

/// Runs `plan` after the loaded functions in `edited` changed, updating `cache`. `Ok(None)`
/// means the edit path cannot handle the edit (a module pass must run on the whole module
/// again, or changed the function list); on `Ok(None)` or an error, `cache` is left partly
/// updated and must be dropped.
pub(crate) fn run_edit(
    plan: &Plan,
    cache: &mut Cache,
    edited: &FxHashMap<Arc<str>, Arc<Function>>,
    threads: usize,
) -> Result<Option<FastRun>, PassError> {
    if cache.stages.len() != plan.stages.len() {
        return Ok(None);
    }
    // Whether a module pass with a firewall comes at or after each stage: its firewall
    // needs the changed functions' old inputs, which are then carried along.
    let mut need_old = vec![false; plan.stages.len() + 1];
    for k in (0..plan.stages.len()).rev() {
        need_old[k] = need_old[k + 1] || (!plan.stages[k].is_function() && plan.stages[k].firewall.is_some());
    }
    let mut changed: Changed = FxHashMap::default();
    for (name, new) in edited {
        let Some(old) = cache.sources.get(name) else { return Ok(None) };
        if !same_function(old, new) {
            let new = Val { func: new.clone(), fp: fingerprint(new), sig: Sig::of(new) };
            let change = Change { old_sig: Sig::of(old), old: Some(old.clone()), new };
            changed.insert(name.clone(), change);
        }
    }
    for (name, c) in &changed {
        cache.sources.insert(name.clone(), c.new.func.clone());
        note(&mut cache.referrers, name, callees(name, &c.new.func));
    }
    let mut stages = Vec::with_capacity(plan.stages.len());
    let mut diags_changed = false;
    for (k, stage) in plan.stages.iter().enumerate() {
        let start = Instant::now();
        let mut recomputed = Vec::new();
        let mut next: Changed = FxHashMap::default();
        let entered = cache.count_at(k);
        match &stage.kind {
            StageKind::Function(_) => {
                let sig_changed: FxHashSet<&str> =
                    changed.iter().filter(|(_, c)| c.old_sig != c.new.sig).map(|(n, _)| &**n).collect();
                // Inputs of unchanged functions recomputed to find the callers.
                let mut inputs: FxHashMap<Arc<str>, Arc<Function>> = FxHashMap::default();
                // The changed functions, and when a signature changed, every function
                // calling one of those, in module order.
                let mut at: Vec<(usize, Arc<str>)> = if sig_changed.is_empty() {
                    changed.keys().filter_map(|n| cache.index[k].get(n).map(|&i| (i, n.clone()))).collect()
                } else {
                    // Candidates from the referrer index (a superset), checked against the
                    // stage's input.
                    cache.build_referrers();
                    let mut candidates: FxHashSet<Arc<str>> = changed.keys().cloned().collect();
                    if let Some(referrers) = &cache.referrers {
                        for callee in &sig_changed {
                            candidates.extend(referrers.get(*callee).into_iter().flatten().cloned());
                        }
                    }
                    let mut at = Vec::new();
                    for name in candidates {
                        let Some(&i) = cache.index[k].get(&name) else { continue };
                        if !changed.contains_key(&name) {
                            let Some(input) = cache.materialize(plan, k, &name)? else { continue };
                            if !callees(&name, &input).iter().any(|c| sig_changed.contains(c)) {
                                continue;
                            }
                            inputs.insert(name.clone(), input);
                        }
                        at.push((i, name));
                    }
                    at
                };
                at.sort_unstable_by_key(|(i, _)| *i);
                for (i, name) in at {
                    let input = match (changed.get(&name), inputs.remove(&name)) {
                        (Some(c), _) => c.new.clone(),
                        (None, Some(func)) => {
                            let (Some(fp), Some(sig)) = (cache.fp_at(k, &name), cache.sig_at(k, &name)) else {
                                return Ok(None);
                            };
                            Val { func, fp, sig }
                        }
                        (None, None) => return Ok(None),
                    };
                    let view = view_with(&name, &input.func, |callee| cache.sig_at(k, callee).map(|s| s.0));
                    let (func, mut out) = run_function_stage(stage, &name, &input, &view, &|| {})?;
                    let old_out = if need_old[k + 1] {
                        // The old output, from the old input and the callees' old signatures.
                        let old_in = match changed.get(&name) {
                            Some(c) => c.old.clone(),
                            None => Some(input.func.clone()),
                        };
                        match old_in {
                            Some(old_in) => {
                                let old_view = view_with(&name, &old_in, |callee| match changed.get(callee) {
                                    Some(c) => Some(c.old_sig.0.clone()),
                                    None => cache.sig_at(k, callee).map(|s| s.0),
                                });
                                Some(run_passes(stage, &name, old_in, &old_view, &|| {})?.0)
                            }
                            None => None,
                        }
                    } else {
                        None
                    };
                    if let Some(added) = &out.added_refs {
                        note(&mut cache.referrers, &name, added.iter().map(|a| &**a));
                    }
                    if stage.keep_output {
                        out.func = Some(func.clone());
                    }
                    let StageCache::Function { outs, .. } = &mut cache.stages[k] else { return Ok(None) };
                    let prev = std::mem::replace(&mut outs[i], out);
                    let out = &outs[i];
                    if prev.fp != out.fp {
                        let new = Val { func, fp: out.fp, sig: out.sig.clone() };
                        next.insert(name.clone(), Change { old_sig: prev.sig, old: old_out, new });
                    }
                    diags_changed |= prev.diags != out.diags;
                    recomputed.push(name);
                }
            }
            StageKind::Module(_) if changed.is_empty() => {}
            StageKind::Module(_) if firewall_holds(plan, stage, k, cache, &changed)? => {
                // The pass would leave the changed functions as they come and the rest as
                // they were: update the previous output in place.
                let StageCache::Module { outs, .. } = &mut cache.stages[k] else { return Ok(None) };
                for (name, c) in changed {
                    if let Some(&i) = cache.index[k].get(&name) {
                        outs[i].fp = c.new.fp;
                        outs[i].sig = c.new.sig.clone();
                        next.insert(name, c);
                    }
                }
            }
            StageKind::Module(_) => {
                // The pass runs on the whole module again: every function entering it is
                // recomputed (in parallel) from the nearest function at hand.
                let names = cache.names_at(k).clone();
                let inputs = recompute_inputs(plan, cache, k, &names, &changed, threads)?;
                let mut module = Module::new();
                for (name, input) in names.iter().zip(&inputs) {
                    // The names are distinct, so adding cannot fail.
                    let _ = module.add(name, input.func.clone());
                }
                let (new_out, new_diags) = run_module_stage(stage, module)?;
                let StageCache::Module { names: out_names, outs, diags } = &mut cache.stages[k] else {
                    return Ok(None);
                };
                let same_names = out_names.len() == new_out.len()
                    && out_names.iter().zip(new_out.entries()).all(|(a, (b, _))| a == b);
                if !same_names {
                    return Ok(None);
                }
                let by_name: FxHashMap<&Arc<str>, &Val> = names.iter().zip(&inputs).collect();
                for (i, (name, func)) in new_out.entries().iter().enumerate() {
                    let input = by_name.get(name).copied();
                    let out = mod_out(input, func);
                    let prev = std::mem::replace(&mut outs[i], out);
                    if prev.fp != outs[i].fp {
                        // The old output: what the pass kept, or else its old input.
                        let old = match (&prev.kept, changed.get(name), input) {
                            (Some(kept), _, _) => Some(kept.clone()),
                            (None, Some(c), _) => c.old.clone(),
                            (None, None, Some(input)) => Some(input.func.clone()),
                            (None, None, None) => None,
                        };
                        let new = Val { func: func.clone(), fp: outs[i].fp, sig: outs[i].sig.clone() };
                        next.insert(name.clone(), Change { old_sig: prev.sig, old, new });
                    }
                    if let Some(kept) = &outs[i].kept {
                        note(&mut cache.referrers, name, callees(name, kept));
                    }
                }
                diags_changed |= *diags != new_diags;
                *diags = new_diags;
                recomputed = names.to_vec();
            }
        }
        changed = next;
        stages.push(FastStage { recomputed, entered, time: start.elapsed() });
    }
    // The functions whose final output changed are replaced in the previous output; the
    // function list is the same (a changed list gave up above).
    for (name, c) in &changed {
        if cache.output.contains(name) {
            cache.output.insert(name, c.new.func.clone());
        }
    }
    let module = cache.output.clone();
    if !diags_changed {
        return Ok(Some(FastRun { module, diagnostics: cache.diagnostics.clone(), stages }));
    }
    let mut diagnostics = Vec::new();
    for (stage, out) in plan.stages.iter().zip(&cache.stages) {
        match (&stage.kind, out) {
            (StageKind::Function(passes), StageCache::Function { outs, .. }) => {
                for j in 0..passes.len() {
                    for out in outs {
                        diagnostics.extend(out.diags.get(j).into_iter().flatten().cloned());
                    }
                }
            }
            (StageKind::Module(_), StageCache::Module { diags, .. }) => diagnostics.extend(diags.iter().cloned()),
            _ => return Ok(None),
        }
    }
    cache.diagnostics = diagnostics.clone();
    Ok(Some(FastRun { module, diagnostics, stages }))
}

/// Every function of `names` entering stage `k` (a changed one as it comes), recomputed on
/// up to `threads` workers.
fn recompute_inputs(
    plan: &Plan,
    cache: &Cache,
    k: usize,
    names: &[Arc<str>],
    changed: &Changed,
    threads: usize,
) -> Result<Vec<Val>, PassError> {
    let one = |name: &Arc<str>| -> Result<Val, PassError> {
        if let Some(c) = changed.get(name) {
            return Ok(c.new.clone());
        }
        let missing = || PassError::msg(format!("internal: no value of function {name} entering stage {k}"));
        let func = cache.materialize(plan, k, name)?.ok_or_else(missing)?;
        let (Some(fp), Some(sig)) = (cache.fp_at(k, name), cache.sig_at(k, name)) else { return Err(missing()) };
        Ok(Val { func, fp, sig })
    };
    if threads <= 1 || names.len() <= 1 {
        return names.iter().map(one).collect();
    }
    let chunk = names.len().div_ceil(threads);
    let done: Vec<Result<Vec<Val>, PassError>> =
        names.par_chunks(chunk).map(|chunk| chunk.iter().map(one).collect()).collect();
    let mut all = Vec::with_capacity(names.len());
    for part in done {
        all.extend(part?);
    }
    Ok(all)
}

/// Whether stage `k` (a module stage) has a firewall that holds for every change in
/// `changed`: each changed function is unaffected by the firewall's test, and the pass had
/// dropped it or left it as it came (so it would leave the new input as it comes).
fn firewall_holds(plan: &Plan, stage: &Stage, k: usize, cache: &Cache, changed: &Changed) -> Result<bool, PassError> {
    let (Some(firewall), StageCache::Module { outs, .. }) = (&stage.firewall, &cache.stages[k]) else {
        return Ok(false);
    };
    // Functions entering the pass now: the changed ones as they come, the others recomputed.
    let failed = std::cell::RefCell::new(None);
    let lookup = |name: &str| -> Option<Arc<Function>> {
        let name: Arc<str> = Arc::from(name);
        if let Some(c) = changed.get(&name) {
            return Some(c.new.func.clone());
        }
        match cache.materialize(plan, k, &name) {
            Ok(f) => f,
            Err(e) => {
                *failed.borrow_mut() = Some(e);
                None
            }
        }
    };
    for (name, c) in changed {
        let Some(old) = &c.old else { return Ok(false) };
        let left_as_it_came = cache.index[k].get(name).is_none_or(|&i| outs[i].kept.is_none());
        let check = FirewallCheck { name, old, new: &c.new.func, lookup: &lookup, ctx: &stage.ctx };
        let holds = left_as_it_came && (firewall.unaffected)(&check);
        if let Some(e) = failed.borrow_mut().take() {
            return Err(e);
        }
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}
