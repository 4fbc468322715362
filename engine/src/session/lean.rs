//! The session's lean mode ([`super::MemoryMode::Lean`]): the edit path without stored
//! intermediate functions.
//!
//! The default mode keeps every stage's output for every function, in salsa's memos and in
//! the edit path's cache: about 13 KB per function on a 50-op chain, most of it intermediate
//! functions. Lean mode keeps, per function, its source, its final output (shared with the
//! result) and, per function stage, what a caller sees of it (a signature stub, shared between
//! stages while the signature stays the same) and the stage's diagnostics; per module stage,
//! only the functions the pass changed or dropped. Anything else an edit needs is recomputed
//! ("replayed") from the source:
//! - a function's input to stage `k` is its source run through the stages before `k`, with
//!   the stored stubs as the module view (a function pass reads no more than signatures) and,
//!   at a module stage, the stored output when the pass changed the function;
//! - a recomputed function's previous output is recomputed from its previous input with the
//!   previous stubs, so a change stops where an output equals the previous one, as with the
//!   default mode's store (`fast.rs`), and the same functions are reported recomputed.
//!
//! The runs themselves do not use salsa: a cold run runs the stages directly (fanning
//! function stages out like a plain run) and records the above; an edit of function bodies is
//! the session's one edit propagation (`edit.rs`) over this store ([`LeanEdit`]). Costs against the default mode: an edit runs each
//! recomputed function's stages but the last twice (new and previous input) plus the
//! replays; a module pass whose firewall does not hold replays every function up to it (in
//! parallel); a change of the function list, the plan or the settings, or a pass error,
//! means a cold run.

use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{callees, run_function_stage, view_with, FnVal, StageOut};
use super::drive::Record;
use super::edit::{
    add_referrers, referrers_in, Changed, EditRun, EditStore, Entering, GiveUp, Named, Names, Output, Positions,
    Referrers, StageDiagnostics,
};
use super::plan::Stage;
use super::prims::{prims_of, ModuleRun};
use super::record::{RecStage, RunRecord, NO_KEY};
use super::same::span_base;
use super::same::{same_function, same_signature};
use super::store::{encode_function, StageKey, StageStore};
use crate::ir::{ExprKind, Function, IdRange, Module, NodeId};
use crate::transform::fanout::map_items;
use crate::transform::Diagnostic;

/// Replayed stage inputs: (stage, function) → the function entering it, if it does.
type Replayed = FxHashMap<(usize, Arc<str>), Option<Arc<Function>>>;

/// One stage of the last run, as lean mode keeps it.
enum LeanStage {
    Function {
        /// The functions entering the stage, in module order.
        names: Names,
        index: Positions,
        /// Per function entering: what callers see of its input (the input itself when it
        /// is the source, else a signature stub).
        sigs: Vec<Arc<Function>>,
        /// By position, the functions that reported diagnostics: per pass of the stage.
        diags: FxHashMap<u32, Arc<Vec<Vec<Diagnostic>>>>,
        /// By position, each result's key in the stage's persistent store (when it has one):
        /// what a run record (`record.rs`) names the results by.
        keys: Option<Vec<StageKey>>,
    },
    Module {
        /// The functions leaving the stage, in order.
        out_names: Names,
        /// Functions that entered the stage but did not leave it.
        dropped: FxHashSet<Arc<str>>,
        /// Functions the pass did not leave as they came (or added), with its output.
        modified: FxHashMap<Arc<str>, Arc<Function>>,
        /// The PrimFuncs leaving the stage (a module without graph functions: a shared list).
        prims: Module,
        diags: Vec<Diagnostic>,
    },
}

/// What lean mode keeps of the last run.
pub(crate) struct Lean {
    /// The functions as loaded, in module order, and where each is in it.
    names: Names,
    index: Positions,
    /// The sources, in `names` order.
    sources: Vec<Arc<Function>>,
    /// The PrimFuncs as loaded (a module without graph functions).
    prims: Module,
    stages: Vec<LeanStage>,
    output: Module,
    diagnostics: Vec<Diagnostic>,
    /// Globals a function references in some stage's input but not in its source; with the
    /// sources, the superset the referrer index is built from.
    extra_callees: FxHashMap<Arc<str>, Vec<Arc<str>>>,
    referrers: Option<Referrers>,
}

/// What callers see of `func`: its attributes, parameters (names and types), declared result
/// type and the known type of its body, over a body of one node. Equal to `func` under
/// [`same_signature`].
pub(crate) fn stub(func: &Function) -> Function {
    let params = func.params();
    // Shares the function's names, so the parameters keep theirs without copying the table.
    let mut b = func.builder_sharing_names(params.len() + 1, 0);
    let ids: Vec<NodeId> = params
        .iter()
        .map(|&p| match *func.kind(p) {
            ExprKind::Var { name } => b.push(ExprKind::Var { name }, func.ty(p).cloned()),
            _ => b.var("p", func.ty(p).cloned()),
        })
        .collect();
    let body = b.push(ExprKind::Tuple { fields: IdRange::default() }, func.ty(func.body()).cloned());
    b.finish(&ids, body, func.ret_ty().cloned(), func.attrs().clone())
}

/// What callers see of `input` (the function `name` entering a function stage) given `prev`,
/// what they saw of it at the previous function stage, and its `source`: the source itself
/// when unchanged, `prev` when the signature is the same, else a new stub.
fn sig_for(input: &Arc<Function>, prev: Option<&Arc<Function>>, source: Option<&Arc<Function>>) -> Arc<Function> {
    if source.is_some_and(|s| Arc::ptr_eq(s, input)) {
        return input.clone();
    }
    match prev {
        Some(prev) if same_signature(prev, input) => prev.clone(),
        _ => Arc::new(stub(input)),
    }
}

/// The globals in `func` (named `name`) that `source` does not reference.
fn extra_of(name: &str, func: &Function, source: Option<&Arc<Function>>) -> Vec<Arc<str>> {
    let new = callees(name, func);
    if new.is_empty() {
        return Vec::new();
    }
    let old = source.map(|s| callees(name, s)).unwrap_or_default();
    new.into_iter().filter(|c| old.binary_search(c).is_err()).map(Arc::from).collect()
}

/// Adds `extra` to the globals recorded for `name` (sorted, without repeats).
fn add_extra(extra_callees: &mut FxHashMap<Arc<str>, Vec<Arc<str>>>, name: &Arc<str>, extra: Vec<Arc<str>>) {
    if extra.is_empty() {
        return;
    }
    let recorded = extra_callees.entry(name.clone()).or_default();
    recorded.extend(extra);
    recorded.sort_unstable();
    recorded.dedup();
}

/// What a lean cold run keeps, recorded stage by stage as the one stage loop (`drive.rs`)
/// runs the plan on the whole module.
pub(crate) struct LeanRecord {
    names: Names,
    names_index: Positions,
    sources: Vec<Arc<Function>>,
    prims: Module,
    threads: usize,
    kept: Vec<LeanStage>,
    extra_callees: FxHashMap<Arc<str>, Vec<Arc<str>>>,
    /// The last function stage's list, index and stubs, to share the index while the list
    /// stays and stubs while signatures stay.
    prev: Option<(Names, Positions, Vec<Arc<Function>>)>,
    /// The current function list (shared while a stage leaves it as it is).
    list: Names,
}

impl LeanRecord {
    /// A record of a cold run on `sources` (one per name of `names`) and the PrimFuncs
    /// `prims`, on `threads` workers; also the module the run starts from.
    pub(crate) fn new(
        names: Names,
        sources: Vec<Arc<Function>>,
        prims: Module,
        threads: usize,
    ) -> (LeanRecord, Module) {
        let mut module = Module::with_capacity(names.len());
        module.set_prims_from(&prims);
        for (name, f) in names.iter().zip(&sources) {
            // The names are distinct, so adding cannot fail.
            let _ = module.add_shared(name, f.clone());
        }
        let names_index: Positions = Arc::new(names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect());
        let record = LeanRecord {
            list: names.clone(),
            names,
            names_index,
            sources,
            prims,
            threads,
            kept: Vec::new(),
            extra_callees: FxHashMap::default(),
            prev: None,
        };
        (record, module)
    }

    fn source_of(&self, name: &str) -> Option<&Arc<Function>> {
        self.names_index.get(name).map(|&i| &self.sources[i])
    }

    /// What lean mode keeps of the run that ended with `run`.
    pub(crate) fn finish(self, run: &EditRun) -> Lean {
        Lean {
            names: self.names,
            index: self.names_index,
            sources: self.sources,
            prims: self.prims,
            stages: self.kept,
            output: run.module.clone(),
            diagnostics: run.diagnostics.clone(),
            extra_callees: self.extra_callees,
            referrers: None,
        }
    }
}

impl Record for LeanRecord {
    fn function_stage(&mut self, _k: usize, input: &Module, outs: Vec<StageOut>, keys: Option<&[StageKey]>) {
        let entries = input.entries();
        let items: Vec<usize> = (0..entries.len()).collect();
        let this = &*self;
        let results = map_items(self.threads, &items, |&i| {
            let (name, input) = &entries[i];
            let source = this.source_of(name);
            let before = this.prev.as_ref().and_then(|(_, index, sigs)| index.get(name).map(|&j| &sigs[j]));
            (sig_for(input, before, source), extra_of(name, &outs[i].func.0, source))
        });
        let mut sigs = Vec::with_capacity(results.len());
        for ((name, _), (sig, extra)) in entries.iter().zip(results) {
            sigs.push(sig);
            add_extra(&mut self.extra_callees, name, extra);
        }
        if self.list.len() != entries.len() || self.list.iter().zip(entries).any(|(a, (b, _))| a != b) {
            self.list = Arc::new(entries.iter().map(|(n, _)| n.clone()).collect());
        }
        let index: Positions = match &self.prev {
            Some((names, index, _)) if Arc::ptr_eq(names, &self.list) => index.clone(),
            _ if Arc::ptr_eq(&self.names, &self.list) => self.names_index.clone(),
            _ => Arc::new(self.list.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect()),
        };
        let diags = outs
            .iter()
            .enumerate()
            .filter(|(_, o)| o.diags.iter().any(|d| !d.is_empty()))
            .map(|(i, o)| (i as u32, o.diags.clone()))
            .collect();
        self.prev = Some((self.list.clone(), index.clone(), sigs.clone()));
        let keys = keys.map(<[StageKey]>::to_vec);
        self.kept.push(LeanStage::Function { names: self.list.clone(), index, sigs, diags, keys });
    }

    fn module_stage(&mut self, _k: usize, input: &Module, run: &ModuleRun) {
        let out = &run.module;
        let dropped: FxHashSet<Arc<str>> =
            input.entries().iter().filter(|(n, _)| !out.contains(n)).map(|(n, _)| n.clone()).collect();
        let mut modified = FxHashMap::default();
        for (name, f) in out.entries() {
            if input.get(name).is_none_or(|input| !same_function(input, f)) {
                modified.insert(name.clone(), f.clone());
                let extra = extra_of(name, f, self.source_of(name));
                add_extra(&mut self.extra_callees, name, extra);
            }
        }
        if self.list.len() != out.len() || self.list.iter().zip(out.entries()).any(|(a, (b, _))| a != b) {
            self.list = Arc::new(out.entries().iter().map(|(n, _)| n.clone()).collect());
        }
        self.kept.push(LeanStage::Module {
            out_names: self.list.clone(),
            dropped,
            modified,
            prims: prims_of(out),
            diags: run.diags.clone(),
        });
    }
}

/// The PrimFuncs leaving `stages` (a prefix of a lean run's stages) when `loaded` entered them.
fn lean_prims_before<'a>(stages: &'a [LeanStage], loaded: &'a Module) -> &'a Module {
    let last = stages.iter().rev().find_map(|stage| match stage {
        LeanStage::Module { prims, .. } => Some(prims),
        LeanStage::Function { .. } => None,
    });
    last.unwrap_or(loaded)
}

impl Lean {
    /// The source of `name`.
    fn source(&self, name: &str) -> Option<&Arc<Function>> {
        self.index.get(name).map(|&i| &self.sources[i])
    }

    /// The functions entering stage `k`.
    fn names_at(&self, k: usize) -> Names {
        if k == 0 {
            return self.names.clone();
        }
        match &self.stages[k - 1] {
            LeanStage::Function { names, .. } => names.clone(),
            LeanStage::Module { out_names, .. } => out_names.clone(),
        }
    }

    /// What callers see of `name` entering function stage `k`, as stored.
    fn sig(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        match &self.stages[k] {
            LeanStage::Function { index, sigs, .. } => index.get(name).map(|&i| sigs[i].clone()),
            LeanStage::Module { .. } => None,
        }
    }

    /// Notes that `func`, now an input of some stage for `name`, references its globals.
    fn note(&mut self, name: &Arc<str>, func: &Function) {
        match &mut self.referrers {
            Some(referrers) => add_referrers(referrers, name, func),
            None => {
                let extra = extra_of(name, func, self.source(name));
                add_extra(&mut self.extra_callees, name, extra);
            }
        }
    }

    /// Builds the referrer index (once) from the sources and the recorded extra callees.
    fn build_referrers(&mut self) {
        if self.referrers.is_some() {
            return;
        }
        let mut referrers = Referrers::default();
        for (name, func) in self.names.iter().zip(&self.sources) {
            add_referrers(&mut referrers, name, func);
        }
        for (name, extra) in &self.extra_callees {
            for callee in extra {
                referrers.entry(callee.clone()).or_default().insert(name.clone());
            }
        }
        self.referrers = Some(referrers);
        self.extra_callees = FxHashMap::default();
    }
}

impl Lean {
    /// The record of this run for a new process (`record.rs`), made with `stages` (the plan
    /// variant, `unfused` whether it is the unfused one) on sources whose entries are
    /// `sources`; the module passes' changed outputs are written to `store` as entries of
    /// their own. `None` when the run is not one a record can hold.
    pub(crate) fn record(
        &self,
        stages: &[Arc<Stage>],
        unfused: bool,
        sources: Vec<(StageKey, u32)>,
        store: &dyn StageStore,
    ) -> Option<RunRecord> {
        let n = self.names.len();
        if !self.diagnostics.is_empty() || self.prims.num_prims() > 0 || self.output.num_prims() > 0 {
            return None;
        }
        if sources.len() != n || stages.len() != self.stages.len() || n > u32::MAX as usize {
            return None;
        }
        let at = |name: &str| self.index.get(name).map(|&i| i as u32);
        // Who references whom: the sources' globals and those a stage's input added (or, once
        // built, the referrer index, which holds both).
        let mut refs: Vec<Vec<u32>> = vec![Vec::new(); n];
        match &self.referrers {
            Some(referrers) => {
                for (callee, users) in referrers {
                    if let Some(c) = at(callee) {
                        for user in users {
                            refs[at(user)? as usize].push(c);
                        }
                    }
                }
            }
            None => {
                for (i, (name, source)) in self.names.iter().zip(&self.sources).enumerate() {
                    refs[i].extend(callees(name, source).into_iter().filter_map(at));
                }
                for (name, extra) in &self.extra_callees {
                    let i = at(name)? as usize;
                    refs[i].extend(extra.iter().filter_map(|c| at(c)));
                }
            }
        }
        for r in &mut refs {
            r.sort_unstable();
            r.dedup();
        }
        let mut kept = Vec::with_capacity(stages.len());
        let mut list: Vec<u32> = (0..n as u32).collect();
        for (stage, this) in stages.iter().zip(&self.stages) {
            match this {
                LeanStage::Function { names, diags, keys, .. } => {
                    let keys = keys.as_ref()?;
                    stage.persist.as_ref()?;
                    // The stage's list must be the loaded one less what module stages dropped.
                    if !diags.is_empty() || names.len() != list.len() || keys.len() != list.len() {
                        return None;
                    }
                    let mut by_name = vec![NO_KEY; n];
                    for ((name, key), &i) in names.iter().zip(keys).zip(&list) {
                        if at(name)? != i {
                            return None;
                        }
                        by_name[i as usize] = *key;
                    }
                    kept.push(RecStage::Function { keys: by_name });
                }
                LeanStage::Module { out_names, dropped, modified, prims, diags } => {
                    if !diags.is_empty() || prims.num_prims() > 0 {
                        return None;
                    }
                    let mut dropped: Vec<u32> = dropped.iter().map(|d| at(d)).collect::<Option<_>>()?;
                    dropped.sort_unstable();
                    let mut changed = Vec::with_capacity(modified.len());
                    for (name, f) in modified {
                        let i = at(name)?;
                        let (key, entry) = encode_function(f, span_base(&self.sources[i as usize]))?;
                        store.put(&key, &entry);
                        changed.push((i, key));
                    }
                    changed.sort_unstable_by_key(|(i, _)| *i);
                    list.retain(|i| dropped.binary_search(i).is_err());
                    let same_list = out_names.len() == list.len()
                        && out_names.iter().zip(&list).all(|(name, &i)| at(name) == Some(i));
                    if !same_list {
                        return None;
                    }
                    kept.push(RecStage::Module { dropped, modified: changed });
                }
            }
        }
        let outputs = self.output.entries().iter().map(|(name, _)| at(name)).collect::<Option<_>>()?;
        Some(RunRecord {
            unfused,
            labels: stages.iter().map(|s| s.label.clone()).collect(),
            names: self.names.to_vec(),
            sources,
            callees: refs,
            stages: kept,
            outputs,
        })
    }
}

/// Lean mode's store for one edit run: what the last lean run kept, and the stage inputs
/// replayed so far in this run.
pub(crate) struct LeanEdit<'a> {
    pub(crate) lean: &'a mut Lean,
    stages: &'a [Arc<Stage>],
    /// The worker threads a whole-module replay may use.
    threads: usize,
    memo: RefCell<Replayed>,
}

impl<'a> LeanEdit<'a> {
    /// A store over `lean` for an edit run of `stages` (the plan variant it was made with).
    pub(crate) fn new(lean: &'a mut Lean, stages: &'a [Arc<Stage>], threads: usize) -> LeanEdit<'a> {
        LeanEdit { lean, stages, threads, memo: RefCell::default() }
    }
}

/// The function `name` entering stage `k` of `stages` as `lean` now stands, recomputed from its
/// source; `memo`, when given, remembers every stage input computed on the way.
fn replayed(
    lean: &Lean,
    stages: &[Arc<Stage>],
    k: usize,
    name: &Arc<str>,
    memo: Option<&RefCell<Replayed>>,
) -> Option<Arc<Function>> {
    if k == 0 {
        return lean.source(name).cloned();
    }
    if let Some(f) = memo.and_then(|m| m.borrow().get(&(k, name.clone())).cloned()) {
        return f;
    }
    let res = match &lean.stages[k - 1] {
        LeanStage::Function { index, .. } if index.contains_key(name) => replayed(lean, stages, k - 1, name, memo)
            .and_then(|input| {
                let prims = || prims_of(lean_prims_before(&lean.stages[..k - 1], &lean.prims));
                let view = view_with(name, &input, |c| lean.sig(k - 1, c), prims);
                run_function_stage(&stages[k - 1], name, input, &view, &|| {}, &|| {}).ok().map(|o| o.func.0)
            }),
        LeanStage::Function { .. } => None,
        LeanStage::Module { dropped, modified, .. } => match modified.get(name) {
            Some(f) => Some(f.clone()),
            None if dropped.contains(name) => None,
            None => replayed(lean, stages, k - 1, name, memo),
        },
    };
    if let Some(m) = memo {
        m.borrow_mut().insert((k, name.clone()), res.clone());
    }
    res
}

impl EditStore for LeanEdit<'_> {
    fn num_stages(&self) -> usize {
        self.lean.stages.len()
    }

    fn swap_source(&mut self, name: &Arc<str>, new: Arc<Function>) -> Option<Arc<Function>> {
        let &i = self.lean.index.get(name)?;
        Some(std::mem::replace(&mut self.lean.sources[i], new))
    }

    fn entering(&self, k: usize) -> Entering<'_> {
        let prims = lean_prims_before(&self.lean.stages[..k], &self.lean.prims);
        match self.lean.stages.get(k) {
            Some(LeanStage::Function { names, index, .. }) => {
                Entering { names: names.clone(), positions: Some(index.clone()), prims }
            }
            _ => Entering { names: self.lean.names_at(k), positions: None, prims },
        }
    }

    /// Replayed from the source (remembered for the run).
    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        // The name as the sources hold it (no allocation), else a new one (a function a
        // module pass added).
        let name = self.lean.index.get_key_value(name).map_or_else(|| Arc::from(name), |(n, _)| n.clone());
        replayed(self.lean, self.stages, k, &name, Some(&self.memo))
    }

    /// What callers saw of it at this stage: the stored stub.
    fn callee(&self, k: usize, callee: &str) -> Option<Arc<Function>> {
        self.lean.sig(k, callee)
    }

    /// Built from the sources and the globals recorded beyond them on the first lookup; until
    /// then, a noted function's globals beyond its source are recorded.
    fn referrers(&mut self, noted: Named, callees: &FxHashSet<&str>) -> Vec<Arc<str>> {
        for (name, func) in &noted {
            self.lean.note(name, func);
        }
        if callees.is_empty() {
            return Vec::new();
        }
        self.lean.build_referrers();
        self.lean.referrers.as_ref().map_or_else(Vec::new, |referrers| referrers_in(referrers, callees))
    }

    /// Recomputed from the previous input and what callers saw then (the stage's stubs are
    /// updated only when its outputs are recorded).
    fn previous_output(
        &self,
        stage: &Stage,
        k: usize,
        _at: usize,
        name: &Arc<str>,
        old_in: Arc<Function>,
    ) -> Result<FnVal, GiveUp> {
        let prims = || prims_of(lean_prims_before(&self.lean.stages[..k], &self.lean.prims));
        let old_view = view_with(name, &old_in, |c| self.lean.sig(k, c), prims);
        let old_out = run_function_stage(stage, name, old_in, &old_view, &|| {}, &|| {}).map_err(|_| GiveUp)?;
        Ok(old_out.func)
    }

    /// Keeps only the diagnostics (the output is replayed when needed), the key and, for a
    /// changed input, what callers see of it.
    fn record_output(
        &mut self,
        k: usize,
        at: usize,
        name: &Arc<str>,
        new_in: Option<&Arc<Function>>,
        out: StageOut,
        key: Option<StageKey>,
    ) -> Result<bool, GiveUp> {
        let lean = &mut *self.lean;
        let LeanStage::Function { diags, keys, sigs, .. } = &mut lean.stages[k] else { return Err(GiveUp) };
        if let Some(new) = new_in {
            let source = lean.index.get(name).map(|&j| &lean.sources[j]);
            *sigs.get_mut(at).ok_or(GiveUp)? = sig_for(new, None, source);
        }
        match (keys.as_mut(), key) {
            (Some(keys), Some(key)) if at < keys.len() => keys[at] = key,
            _ => *keys = None,
        }
        let reported = out.diags.iter().any(|d| !d.is_empty());
        let before = if reported { diags.insert(at as u32, out.diags.clone()) } else { diags.remove(&(at as u32)) };
        Ok(before.is_some() != reported || before.is_some_and(|b| b != out.diags))
    }

    /// The pass's stored changes tell.
    fn left_as_it_came(&self, k: usize, name: &Arc<str>, _old: &Arc<Function>) -> bool {
        match &self.lean.stages[k] {
            LeanStage::Module { modified, .. } => !modified.contains_key(name),
            LeanStage::Function { .. } => false,
        }
    }

    /// Nothing to store: the function's output there is its input.
    fn pass_through(&mut self, k: usize, name: &Arc<str>, _new: &Arc<Function>) -> bool {
        match &self.lean.stages[k] {
            LeanStage::Module { dropped, .. } => !dropped.contains(name),
            LeanStage::Function { .. } => false,
        }
    }

    /// Every function's input, replayed in parallel (each replay is independent), on the
    /// calling thread alone when a replayed stage must run there.
    fn module_input(&self, k: usize, names: &Names, changed: &Changed) -> Result<Module, GiveUp> {
        let replay_threads = self.stages[..k].iter().map(|s| s.threads(self.threads)).min().unwrap_or(self.threads);
        let inputs = map_items(replay_threads, names, |name| match changed.get(name) {
            Some((_, new)) => Some(new.clone()),
            None => replayed(self.lean, self.stages, k, name, None),
        });
        let mut module = Module::with_capacity(names.len());
        for (name, input) in names.iter().zip(inputs) {
            // The names are distinct, so adding cannot fail.
            let _ = module.add_shared(name, input.ok_or(GiveUp)?);
        }
        Ok(module)
    }

    /// The previous output: as stored when the pass changed the function, else its previous
    /// input. Keeps the functions the pass now dropped or changed.
    fn record_module_output(
        &mut self,
        k: usize,
        names: &Names,
        input: &Module,
        changed: &Changed,
        out: Module,
        new_diags: Vec<Diagnostic>,
    ) -> Result<(Named, bool), GiveUp> {
        let LeanStage::Module { out_names, dropped, modified, prims, diags } = &mut self.lean.stages[k] else {
            return Err(GiveUp);
        };
        let previous = |name: &Arc<str>| match modified.get(name) {
            Some(f) => Some(f.clone()),
            None => changed.get(name).map(|(old, _)| old.clone()).or_else(|| input.get(name).cloned()),
        };
        let previous: Named = out_names
            .iter()
            .map(|name| previous(name).map(|f| (name.clone(), f)).ok_or(GiveUp))
            .collect::<Result<_, _>>()?;
        *prims = prims_of(&out);
        *modified = out
            .entries()
            .iter()
            .filter(|(name, new)| input.get(name).is_none_or(|input| !same_function(input, new)))
            .map(|(name, new)| (name.clone(), new.clone()))
            .collect();
        *dropped = names.iter().filter(|n| !out.contains(n)).cloned().collect();
        let diags_changed = *diags != new_diags;
        *diags = new_diags;
        let noted: Vec<_> = modified.iter().map(|(n, f)| (n.clone(), f.clone())).collect();
        for (name, f) in &noted {
            self.lean.note(name, f);
        }
        Ok((previous, diags_changed))
    }

    fn output(&mut self, _changed: &Changed, diagnostics: bool) -> Output<'_> {
        let lean = &mut *self.lean;
        let stages = diagnostics.then(|| {
            lean.stages
                .iter()
                .map(|stage| match stage {
                    LeanStage::Function { diags, .. } => {
                        let mut reported: Vec<_> = diags.iter().collect();
                        reported.sort_unstable_by_key(|(i, _)| **i);
                        StageDiagnostics::Function(reported.into_iter().map(|(_, d)| &**d).collect())
                    }
                    LeanStage::Module { diags, .. } => StageDiagnostics::Module(diags),
                })
                .collect()
        });
        Output { module: &mut lean.output, diagnostics: &mut lean.diagnostics, stages }
    }
}
