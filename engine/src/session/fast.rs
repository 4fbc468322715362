//! The default mode's edit store: the previous run's inputs and every stage's outputs, made
//! from salsa's results after a cold run. The edit propagation over it is `edit.rs`
//! ([`super::edit::run_edit`]): with every stage's outputs at hand, a stage's previous output
//! is read, not recomputed, and a module stage's input is assembled from the stored outputs of
//! the stage before.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{FnVal, StageCache, StageOut};
use super::edit::{
    add_referrers, referrers_in, Changed, EditStore, Entering, GiveUp, Named, Names, Output, Positions, Referrers,
    StageDiagnostics,
};
use super::plan::Stage;
use super::same::same_function;
use super::store::StageKey;
use crate::ir::{Function, Module};
use crate::transform::Diagnostic;

/// The previous run's inputs and per-stage outputs.
pub(crate) struct Cache {
    /// The functions as loaded, in module order.
    pub(crate) names: Arc<Vec<Arc<str>>>,
    pub(crate) sources: FxHashMap<Arc<str>, Arc<Function>>,
    /// The PrimFuncs as loaded (in a module without graph functions).
    prims: Module,
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

impl Cache {
    /// A cache of a run on `sources` (in `names` order) that produced `stages` and `output`.
    pub(crate) fn new(
        names: Arc<Vec<Arc<str>>>,
        sources: FxHashMap<Arc<str>, Arc<Function>>,
        prims: Module,
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
        Cache { names, sources, prims, stages, index, output, diagnostics, referrers: None }
    }

    /// Builds the referrer index from every stage's input (once; later inputs are noted as
    /// they come). The callers of a function whose signature changed come from it.
    fn build_referrers(&mut self) {
        if self.referrers.is_some() {
            return;
        }
        let mut referrers = Referrers::default();
        for (name, func) in &self.sources {
            add_referrers(&mut referrers, name, func);
        }
        for stage in &self.stages {
            match stage {
                StageCache::Function { names, outs } => {
                    for (name, out) in names.iter().zip(outs) {
                        add_referrers(&mut referrers, name, &out.func.0);
                    }
                }
                StageCache::Module { out, .. } => {
                    for (name, func) in out.entries() {
                        add_referrers(&mut referrers, name, func);
                    }
                }
            }
        }
        self.referrers = Some(referrers);
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
}

/// A copy of `module` sharing its functions but not its list of graph functions.
fn unshared(module: &Module) -> Module {
    let mut copy = Module::with_capacity(module.len());
    copy.set_prims_from(module);
    for (name, func) in module.entries() {
        // The names of a module are distinct, so adding cannot fail.
        let _ = copy.add_shared(name, func.clone());
    }
    copy
}

impl EditStore for Cache {
    fn num_stages(&self) -> usize {
        self.stages.len()
    }

    fn swap_source(&mut self, name: &Arc<str>, new: Arc<Function>) -> Option<Arc<Function>> {
        self.sources.get_mut(name).map(|source| std::mem::replace(source, new))
    }

    /// A function stage's list is its own (the stage's outputs are in its order); any other
    /// stage's comes from the stage before.
    fn entering(&self, k: usize) -> Entering<'_> {
        let last = self.stages[..k].iter().rev().find_map(|stage| match stage {
            StageCache::Module { out, .. } => Some(out),
            StageCache::Function { .. } => None,
        });
        let prims = last.unwrap_or(&self.prims);
        if let Some(StageCache::Function { names, .. }) = self.stages.get(k) {
            return Entering { names: names.clone(), positions: Some(self.index[k].clone()), prims };
        }
        let names = match k.checked_sub(1).map(|j| &self.stages[j]) {
            None => self.names.clone(),
            Some(StageCache::Function { names, .. }) => names.clone(),
            Some(StageCache::Module { out, .. }) => Arc::new(out.entries().iter().map(|(n, _)| n.clone()).collect()),
        };
        Entering { names, positions: None, prims }
    }

    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        Cache::input(self, k, name)
    }

    /// Built from every stage's stored input on the first lookup; until then, noting is
    /// nothing (the stored inputs hold what is noted).
    fn referrers(&mut self, noted: Named, callees: &FxHashSet<&str>) -> Vec<Arc<str>> {
        if !callees.is_empty() {
            self.build_referrers();
        }
        let Some(referrers) = &mut self.referrers else { return Vec::new() };
        for (name, func) in &noted {
            add_referrers(referrers, name, func);
        }
        referrers_in(referrers, callees)
    }

    /// As stored.
    fn previous_output(
        &self,
        _stage: &Stage,
        k: usize,
        at: usize,
        _name: &Arc<str>,
        _old_in: Arc<Function>,
    ) -> Result<FnVal, GiveUp> {
        match &self.stages[k] {
            StageCache::Function { outs, .. } => outs.get(at).map(|out| out.func.clone()).ok_or(GiveUp),
            StageCache::Module { .. } => Err(GiveUp),
        }
    }

    fn record_output(
        &mut self,
        k: usize,
        at: usize,
        _name: &Arc<str>,
        _new_in: Option<&Arc<Function>>,
        out: StageOut,
        _key: Option<StageKey>,
    ) -> Result<bool, GiveUp> {
        let StageCache::Function { outs, .. } = &mut self.stages[k] else { return Err(GiveUp) };
        let slot = outs.get_mut(at).ok_or(GiveUp)?;
        let diags_changed = slot.diags != out.diags;
        *slot = out;
        Ok(diags_changed)
    }

    fn left_as_it_came(&self, k: usize, name: &Arc<str>, old: &Arc<Function>) -> bool {
        match &self.stages[k] {
            StageCache::Module { out, .. } => out.get(name).is_none_or(|prev| same_function(prev, old)),
            StageCache::Function { .. } => false,
        }
    }

    /// Updates the stored output in place.
    fn pass_through(&mut self, k: usize, name: &Arc<str>, new: &Arc<Function>) -> bool {
        let StageCache::Module { out, .. } = &mut self.stages[k] else { return false };
        if !out.contains(name) {
            return false;
        }
        // Present, so this replaces and cannot fail.
        let _ = out.insert(name, new.clone());
        true
    }

    /// From the stored outputs of the stage before (already updated by this run).
    fn module_input(&self, k: usize, names: &Names, _changed: &Changed) -> Result<Module, GiveUp> {
        let mut module = Module::with_capacity(names.len());
        for name in names.iter() {
            if let Some(f) = Cache::input(self, k, name) {
                // The names are distinct, so adding cannot fail.
                let _ = module.add_shared(name, f);
            }
        }
        Ok(module)
    }

    /// The previous output as stored, replaced.
    fn record_module_output(
        &mut self,
        k: usize,
        _names: &Names,
        _input: &Module,
        _changed: &Changed,
        new_out: Module,
        new_diags: Vec<Diagnostic>,
    ) -> Result<(Named, bool), GiveUp> {
        let StageCache::Module { out, diags } = &mut self.stages[k] else { return Err(GiveUp) };
        let previous = std::mem::replace(out, new_out).entries().to_vec();
        let diags_changed = *diags != new_diags;
        *diags = new_diags;
        Ok((previous, diags_changed))
    }

    fn output(&mut self, _changed: &Changed, diagnostics: bool) -> Output<'_> {
        let stages = diagnostics.then(|| {
            self.stages
                .iter()
                .map(|stage| match stage {
                    StageCache::Function { outs, .. } => {
                        StageDiagnostics::Function(outs.iter().map(|out| &*out.diags).collect())
                    }
                    StageCache::Module { diags, .. } => StageDiagnostics::Module(diags),
                })
                .collect()
        });
        Output { module: &mut self.output, diagnostics: &mut self.diagnostics, stages }
    }
}
