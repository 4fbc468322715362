//! The default mode's edit store: the previous run's inputs and every stage's outputs, made
//! from salsa's results after a cold run. The edit propagation over it is `edit.rs`
//! ([`super::edit::run_edit`]): with every stage's outputs at hand, a stage's previous output
//! is read, not recomputed, and a module stage's input is assembled from the stored outputs of
//! the stage before.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{FnVal, StageCache, StageOut};
use super::edit::{
    add_referrers, referrers_in, Changed, EditStore, GiveUp, Named, Names, Positions, Referrers, StageDiagnostics,
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

    /// Builds the referrer index from every stage's input (once; later updates go through
    /// `note`). The callers of a function whose signature changed come from it.
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

    fn source(&self, name: &str) -> Option<Arc<Function>> {
        self.sources.get(name).cloned()
    }

    fn set_source(&mut self, name: &Arc<str>, new: Arc<Function>) {
        self.sources.insert(name.clone(), new);
    }

    fn note(&mut self, name: &Arc<str>, func: &Function) {
        if let Some(referrers) = &mut self.referrers {
            add_referrers(referrers, name, func);
        }
    }

    fn referrers_of(&mut self, callees: &FxHashSet<&str>) -> Vec<Arc<str>> {
        self.build_referrers();
        self.referrers.as_ref().map_or_else(Vec::new, |referrers| referrers_in(referrers, callees))
    }

    fn positions(&self, k: usize) -> Option<Positions> {
        matches!(self.stages.get(k), Some(StageCache::Function { .. })).then(|| self.index[k].clone())
    }

    fn names_at(&self, k: usize) -> Names {
        if k == 0 {
            return self.names.clone();
        }
        match &self.stages[k - 1] {
            StageCache::Function { names, .. } => names.clone(),
            StageCache::Module { out, .. } => Arc::new(out.entries().iter().map(|(n, _)| n.clone()).collect()),
        }
    }

    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        Cache::input(self, k, name)
    }

    /// As stored.
    fn previous_output(
        &self,
        _stage: &Stage,
        k: usize,
        at: usize,
        _name: &Arc<str>,
        _old_in: Arc<Function>,
        _last: bool,
    ) -> Result<Option<FnVal>, GiveUp> {
        match &self.stages[k] {
            StageCache::Function { outs, .. } => outs.get(at).map(|out| Some(out.func.clone())).ok_or(GiveUp),
            StageCache::Module { .. } => Err(GiveUp),
        }
    }

    fn record_output(
        &mut self,
        k: usize,
        at: usize,
        _name: &Arc<str>,
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

    /// The stored output of the last module stage before `k` holds them.
    fn prims_at(&self, k: usize) -> &Module {
        let last = self.stages[..k].iter().rev().find_map(|stage| match stage {
            StageCache::Module { out, .. } => Some(out),
            StageCache::Function { .. } => None,
        });
        last.unwrap_or(&self.prims)
    }

    /// As stored.
    fn previous_module_output(&self, k: usize, _input: &Module, _changed: &Changed) -> Result<Named, GiveUp> {
        match &self.stages[k] {
            StageCache::Module { out, .. } => Ok(out.entries().to_vec()),
            StageCache::Function { .. } => Err(GiveUp),
        }
    }

    fn record_module_output(
        &mut self,
        k: usize,
        _names: &Names,
        _input: &Module,
        new_out: Module,
        new_diags: Vec<Diagnostic>,
    ) -> Result<bool, GiveUp> {
        let StageCache::Module { out, diags } = &mut self.stages[k] else { return Err(GiveUp) };
        *out = new_out;
        let diags_changed = *diags != new_diags;
        *diags = new_diags;
        Ok(diags_changed)
    }

    fn stage_diagnostics(&self, k: usize) -> StageDiagnostics<'_> {
        match &self.stages[k] {
            StageCache::Function { outs, .. } => {
                StageDiagnostics::Function(outs.iter().map(|out| &*out.diags).collect())
            }
            StageCache::Module { diags, .. } => StageDiagnostics::Module(diags),
        }
    }

    fn output(&mut self, _changed: &Changed) -> (&mut Module, &mut Vec<Diagnostic>) {
        (&mut self.output, &mut self.diagnostics)
    }
}
