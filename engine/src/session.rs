//! Incremental sessions: a pipeline run again and again on a module that changes a little
//! between runs, recomputing only what an edit can affect (salsa 0.28 underneath).
//!
//! A [`Session`] holds a pipeline, the context settings it runs under and the current
//! module. Edits ([`Session::load`], [`Session::set_function`], add / remove / rename) are
//! diffed against what the session holds, so setting an identical function changes nothing.
//! [`Session::run`] returns the optimised module, the diagnostics and [`RunStats`] saying,
//! per stage, which functions were recomputed.
//!
//! How it works (see `docs/incremental.md`): the pipeline is flattened under the context into
//! stages — runs of function passes, and module passes as barriers — each with a fingerprint.
//! A module pass with a per-function form joins the run of function passes it falls in, as in
//! the executor, with the executor's precondition checked per function; when it fails the
//! session runs the plan's unfused variant (`session/plan.rs`).
//! Each (function, function stage) is a salsa query running that stage's passes on the
//! function; each module pass is a query over the whole module whose per-function outputs are
//! compared with the previous run's, so functions it did not change are reused by the next
//! stage. A function pass reads other functions only through a module view whose entries
//! come through a signature query: editing a callee's body without changing its signature
//! does not recompute its callers. After edits that only changed function bodies, a run
//! takes the edit path instead (`session/edit.rs`, over the memory mode's store): it starts
//! from what the previous run kept and recomputes only what the edits reach, without asking
//! salsa to verify every memo. In lean mode a cold run uses no queries: the stage loop of
//! `session/drive.rs` runs the plan on the whole module, asking a persistent store for a
//! stage's results in batches. What the session keeps changes only in `session/kept.rs`.
//!
//! What it deliberately does not do: run instruments (a context with instruments is
//! rejected: cached stages would skip their callbacks), or let a function pass depend on
//! more of another function than its signature.
//!
//! Invariant: a session run prints the same module and reports the same diagnostics as a
//! cold serial run of the same pipeline on the same module.

mod codec;
mod db;
mod drive;
mod edit;
mod fast;
mod kept;
mod lean;
mod plan;
mod prims;
mod record;
mod same;
mod store;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};
use salsa::Setter;

use self::db::{FnVal, FuncList, Prims, Queries, SessionDb, Source, StageCache};
use self::drive::{drive, drive_plan, Compute, Outputs};
use self::edit::{run_edit, EditRun};
use self::fast::Cache;
use self::kept::{Event, Kept, Store};
use self::lean::{LeanEdit, LeanRecord};
use self::plan::{plan, PassIds, Plan};
use self::prims::prims_of;
use self::record::RecordEdit;
pub use self::record::{prints_alone, RunRecord};
use self::same::{same_function, same_prim, same_prims, span_base};
use self::store::StoreConfig;
pub use self::store::{decode_source, encode_source, source_key, MemoryStore, StageKey, StageStore, STORE_FORMAT};
use crate::ir::{Function, Module, ModuleError};
use crate::transform::plan::GivenSplit;
use crate::transform::{Diagnostic, Pass, PassContext, PassError, PassKind, Sequential, Statistics};
pub use crate::transform::{FirewallCheck, ModuleFirewall};

/// Errors of a session.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// A pass failed (or the pipeline could not be planned).
    #[error(transparent)]
    Pass(#[from] PassError),
    /// An edit of the module failed (duplicate or unknown function).
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// The context has instruments, which a session cannot honour.
    #[error("a session cannot run instruments ({0}); run the pipeline without a session to use them")]
    Instruments(String),
    /// The run was cancelled by an edit made while it was in flight.
    #[error("the run was cancelled by an edit")]
    Cancelled,
}

/// A module pass's per-function form: running `prelude` (a module pass, if any) and then
/// `per_function` (a function pass) on every function computes exactly what the module pass
/// does. A session given one runs the module pass in that form, so after an edit only the
/// prelude sees the whole module again and the rest is recomputed per function.
///
/// The caller vouches for the equivalence; passel-passes' standard module passes come with
/// theirs, and the parity tests check them against cold runs. A module pass that declares its
/// own split (`ModulePass::with_prelude_and_function_form`, [`Pass::split_form`]) needs no
/// `ModuleSplit`: the session runs it split as the executor does (a `ModuleSplit` set for its
/// name takes precedence). `per_function` may read other
/// functions' signatures from its module view, nothing more.
#[derive(Clone)]
pub struct ModuleSplit {
    /// Whole-module work done first (e.g. removing unreachable functions).
    pub prelude: Option<Arc<dyn Pass>>,
    /// The per-function work; must be a function pass.
    pub per_function: Arc<dyn Pass>,
}

/// What one stage did in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    /// The stage's passes, comma-separated.
    pub label: String,
    /// Whether it is a module pass (a barrier) rather than a run of function passes. A
    /// PrimFunc stage is one to the graph level.
    pub is_module_pass: bool,
    /// Whether it is a run of PrimFunc passes (the loop level's function stage): then
    /// `recomputed` and `reused` count PrimFuncs.
    pub is_prim_stage: bool,
    /// Functions whose stage was computed in this run, in module order. For a module pass,
    /// every function when the pass ran again, else none.
    pub recomputed: Vec<Arc<str>>,
    /// Functions whose result from an earlier run was reused.
    pub reused: usize,
    /// Wall time of the stage.
    pub time: Duration,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Per stage, in order.
    pub stages: Vec<StageStats>,
    /// Wall time of the run.
    pub total: Duration,
}

impl RunStats {
    /// The function stages' statistics, in order (module passes left out).
    pub fn function_stages(&self) -> impl Iterator<Item = &StageStats> {
        self.stages.iter().filter(|s| !s.is_module_pass)
    }

    /// Per function stage and PrimFunc stage, its label and the functions (PrimFuncs) it
    /// recomputed (what `--cache-report` lists).
    pub fn recomputed_per_stage(&self) -> Vec<(String, Vec<Arc<str>>)> {
        self.stages
            .iter()
            .filter(|s| !s.is_module_pass || s.is_prim_stage)
            .map(|s| (s.label.clone(), s.recomputed.clone()))
            .collect()
    }

    /// The PrimFunc stages' statistics, in order.
    pub fn prim_stages(&self) -> impl Iterator<Item = &StageStats> {
        self.stages.iter().filter(|s| s.is_prim_stage)
    }

    /// Functions recomputed by any function stage, in first-seen order, without repeats.
    /// Linear in the total length of the stages' lists: a hash set remembers what was seen,
    /// the returned `Vec` keeps the order.
    pub fn recomputed_functions(&self) -> Vec<Arc<str>> {
        let mut seen: FxHashSet<Arc<str>> = FxHashSet::default();
        let mut order = Vec::new();
        for stage in self.function_stages() {
            for name in &stage.recomputed {
                if seen.insert(name.clone()) {
                    order.push(name.clone());
                }
            }
        }
        order
    }
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct SessionOutput {
    /// The optimised module.
    pub module: Module,
    /// Diagnostics, in the order a serial run reports them.
    pub diagnostics: Vec<Diagnostic>,
    /// What was recomputed and how long it took.
    pub stats: RunStats,
}

/// What a no-change run hands out again: the last successful run's output, without its
/// statistics' function lists.
struct Last {
    module: Module,
    diagnostics: Vec<Diagnostic>,
    /// Per stage: label, whether a module pass, whether a PrimFunc stage, how many functions
    /// entered it.
    stages: Vec<(String, bool, bool, usize)>,
}

impl Last {
    fn of(out: &SessionOutput) -> Last {
        Last {
            module: out.module.clone(),
            diagnostics: out.diagnostics.clone(),
            stages: out
                .stats
                .stages
                .iter()
                .map(|s| (s.label.clone(), s.is_module_pass, s.is_prim_stage, s.reused + s.recomputed.len()))
                .collect(),
        }
    }

    fn output(&self, start: Instant) -> SessionOutput {
        let stages = self
            .stages
            .iter()
            .map(|(label, is_module_pass, is_prim_stage, entered)| StageStats {
                label: label.clone(),
                is_module_pass: *is_module_pass,
                is_prim_stage: *is_prim_stage,
                recomputed: Vec::new(),
                reused: *entered,
                time: Duration::ZERO,
            })
            .collect();
        SessionOutput {
            module: self.module.clone(),
            diagnostics: self.diagnostics.clone(),
            stats: RunStats { stages, total: start.elapsed() },
        }
    }
}

/// What a session keeps between runs ([`Session::set_memory_mode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryMode {
    /// Every stage's output for every function, in salsa's memos and on the edit path: any
    /// edit, including adding, removing or renaming functions and changing the pipeline,
    /// recomputes only what it reaches. About 13 KB per function on a 50-op chain with the
    /// standard pipeline.
    #[default]
    Full,
    /// The sources, the result, and per function stage what callers see of each function (a
    /// signature stub) and its diagnostics; every other intermediate function is recomputed
    /// from its source when an edit needs it (`session/lean.rs`). Runs do not use salsa's
    /// memos. Edits of function bodies recompute the same functions as in `Full` mode, at
    /// up to about twice the cost per function; a change of the function list, the plan or the
    /// settings, a module pass whose firewall does not hold, or a pass error costs about a
    /// cold run. Under 1 KiB per function on the same chain.
    Lean,
}

struct Entry {
    input: Source,
    /// The function the input holds.
    stored: Arc<Function>,
    /// Where `stored` starts in its source.
    stored_base: u32,
    /// Where the function now starts in its source; cached diagnostics are moved by the
    /// difference to where `stored` starts.
    base: u32,
}

/// An incremental compilation session. See the module docs.
pub struct Session {
    db: SessionDb,
    pipeline: Sequential,
    ctx: PassContext,
    ids: PassIds,
    splits: Vec<GivenSplit>,
    firewalls: Vec<(String, ModuleFirewall)>,
    /// The persistent store stage results also go to ([`Session::set_store`]).
    store: Option<StoreConfig>,
    /// The PrimFuncs of the module last loaded (in a module without graph functions).
    prims: Module,
    order: Vec<Arc<str>>,
    entries: FxHashMap<Arc<str>, Entry>,
    /// Functions whose `base` differs from their `stored_base`.
    moved: FxHashSet<Arc<str>>,
    mode: MemoryMode,
    /// What the session keeps of its runs, and the one place it changes (`session/kept.rs`).
    kept: Kept,
}

impl Session {
    /// A session running `pipeline` under `ctx`'s opt level, required and disabled passes,
    /// config and thread count, on an empty module.
    pub fn new(pipeline: Sequential, ctx: &PassContext) -> Result<Session, SessionError> {
        check_no_instruments(ctx)?;
        // A cold run refuses such a pipeline; so does a session (its plan would not recurse).
        pipeline.check_depth()?;
        let mut ids = PassIds::default();
        let plan = plan(&pipeline, ctx, &mut ids, &[], &[], None)?;
        Ok(Session {
            db: SessionDb::new(plan),
            pipeline,
            ctx: ctx.clone(),
            ids,
            splits: Vec::new(),
            firewalls: Vec::new(),
            store: None,
            prims: Module::new(),
            order: Vec::new(),
            entries: FxHashMap::default(),
            moved: FxHashSet::default(),
            mode: MemoryMode::Full,
            kept: Kept::default(),
        })
    }

    /// Chooses what the session keeps between runs (see [`MemoryMode`]). Switching drops
    /// what the other mode kept (to `Lean`: salsa's memos too); the next run recomputes
    /// everything. [`Session::start_run`] always runs the `Full` way, with salsa.
    pub fn set_memory_mode(&mut self, mode: MemoryMode) {
        if mode == self.mode {
            return;
        }
        self.mode = mode;
        self.kept.on(Event::ModeChanged);
        self.roots().plan(&self.db).forget_edit_results();
        if mode == MemoryMode::Lean {
            self.reset_db();
        }
    }

    /// What the session keeps between runs.
    pub fn memory_mode(&self) -> MemoryMode {
        self.mode
    }

    /// Replaces the database by a new one holding the same inputs and no memos.
    fn reset_db(&mut self) {
        let plan = self.roots().plan(&self.db);
        self.db = SessionDb::new((*plan).clone());
        for name in &self.order {
            if let Some(entry) = self.entries.get_mut(name) {
                entry.input = Source::new(&self.db, FnVal(entry.stored.clone()));
            }
        }
        self.sync_list();
        let roots = self.roots();
        roots.set_prims(&mut self.db).to(Prims(self.prims.clone()));
    }

    /// The current (unoptimised) module.
    pub fn module(&self) -> Module {
        let mut m = Module::with_capacity(self.order.len());
        for name in &self.order {
            let _ = m.add_shared(name, self.entries[name].stored.clone());
        }
        m.set_prims_from(&self.prims);
        m
    }

    /// Runs the module pass named `name` in its per-function form from now on.
    pub fn set_split(&mut self, name: &str, split: ModuleSplit) -> Result<(), SessionError> {
        let per_function = &split.per_function;
        if per_function.kind() != PassKind::Function || per_function.as_function().is_none() {
            return Err(PassError::msg(format!(
                "the per-function form of {name} must be a function pass, not {}",
                per_function.info().name
            ))
            .into());
        }
        if let Some(prelude) = split.prelude.as_ref().filter(|p| p.kind() == PassKind::Function) {
            return Err(PassError::msg(format!(
                "the prelude of {name} must be a module pass, not {}",
                prelude.info().name
            ))
            .into());
        }
        self.splits.retain(|s| s.name != name);
        self.splits.push(GivenSplit {
            name: name.to_string(),
            prelude: split.prelude,
            per_function: split.per_function,
        });
        let plan = plan(&self.pipeline, &self.ctx, &mut self.ids, &self.splits, &self.firewalls, self.store.as_ref())?;
        self.set_plan(plan);
        Ok(())
    }

    /// Gives the module pass named `name` (or the prelude of the split named `name`) the
    /// shortcut `firewall` on the edit path (see [`ModuleFirewall`]), in place of the one the
    /// pass declares itself ([`crate::transform::ModulePass::with_firewall`]), if any.
    pub fn set_firewall(&mut self, name: &str, firewall: ModuleFirewall) -> Result<(), SessionError> {
        self.firewalls.retain(|(n, _)| n != name);
        self.firewalls.push((name.to_string(), firewall));
        let plan = plan(&self.pipeline, &self.ctx, &mut self.ids, &self.splits, &self.firewalls, self.store.as_ref())?;
        self.set_plan(plan);
        Ok(())
    }

    /// Keeps function-stage results in `store` too, and looks them up there before running a
    /// stage (`session/store.rs`), so that another session or process given the same store
    /// reuses them. `build` names the code of the passes (the CLI gives a hash of its own
    /// executable): results of another build are never used. Only stages whose passes are
    /// all registered are stored. `None` stops using a store.
    pub fn set_store(&mut self, store: Option<(Arc<dyn StageStore>, String)>) -> Result<(), SessionError> {
        self.store = store.map(|(store, build)| StoreConfig::new(store, build));
        let plan = plan(&self.pipeline, &self.ctx, &mut self.ids, &self.splits, &self.firewalls, self.store.as_ref())?;
        self.set_plan(plan);
        Ok(())
    }

    /// Replaces the pipeline. Stages whose passes and settings are unchanged keep their
    /// results (passes are identified by object, registry dependencies by name).
    pub fn set_pipeline(&mut self, pipeline: Sequential) -> Result<(), SessionError> {
        let plan = plan(&pipeline, &self.ctx, &mut self.ids, &self.splits, &self.firewalls, self.store.as_ref())?;
        self.pipeline = pipeline;
        self.set_plan(plan);
        Ok(())
    }

    /// Replaces the context settings (opt level, required / disabled passes, config,
    /// threads). Everything computed under other settings is recomputed; a change of the
    /// thread count alone recomputes nothing.
    pub fn set_context(&mut self, ctx: &PassContext) -> Result<(), SessionError> {
        check_no_instruments(ctx)?;
        let plan = plan(&self.pipeline, ctx, &mut self.ids, &self.splits, &self.firewalls, self.store.as_ref())?;
        let same_settings = ctx.opt_level() == self.ctx.opt_level()
            && ctx.required_pass() == self.ctx.required_pass()
            && ctx.disabled_pass() == self.ctx.disabled_pass()
            && ctx.config() == self.ctx.config();
        self.ctx = ctx.clone();
        if same_settings {
            // Only the thread count changed: the stages compute what they computed (their
            // fingerprints are equal, so salsa backdates them and nothing is recomputed), but
            // the passes that fan out themselves must see the new count in their context.
            self.roots().set_plan(&mut self.db).to(Arc::new(plan));
        } else {
            self.set_plan(plan);
        }
        Ok(())
    }

    fn set_plan(&mut self, plan: Plan) {
        let roots = self.roots();
        roots.set_plan(&mut self.db).to(Arc::new(plan));
        self.kept.on(Event::PlanChanged);
    }

    fn roots(&self) -> db::Roots {
        salsa_roots(&self.db)
    }

    /// Makes the session's module `module`: functions are added, removed, reordered and
    /// changed as needed; functions equal to what the session holds are left alone. Returns
    /// the names of the functions that changed or were added, then those of the PrimFuncs.
    pub fn load(&mut self, module: &Module) -> Vec<Arc<str>> {
        let mut prims_changed = Vec::new();
        if !same_prims(&self.prims, module) {
            // The loaded PrimFuncs are one input: a change goes through salsa, like a change of
            // the function list, and its PrimFunc stages re-run only the PrimFuncs that changed.
            prims_changed.extend(
                module
                    .prim_entries()
                    .iter()
                    .filter(|(n, f)| self.prims.get_prim(n).is_none_or(|old| !same_prim(old, f)))
                    .map(|(n, _)| n.clone()),
            );
            self.prims = prims_of(module);
            let roots = self.roots();
            roots.set_prims(&mut self.db).to(Prims(self.prims.clone()));
            self.kept.on(Event::ListChanged);
        }
        let mut changed = Vec::new();
        for (name, func) in module.entries() {
            if self.put(name, func) {
                changed.push(name.clone());
            }
        }
        let new_order: Vec<Arc<str>> = module.entries().iter().map(|(n, _)| n.clone()).collect();
        for name in &self.order {
            if !module.contains(name) {
                self.entries.remove(name);
                self.moved.remove(name);
            }
        }
        if new_order != self.order || !changed.is_empty() {
            self.order = new_order;
            self.sync_list();
        }
        changed.extend(prims_changed);
        changed
    }

    /// Sets (or adds, at the end) the function `name`. Returns whether anything changed.
    pub fn set_function(&mut self, name: &str, func: impl Into<Arc<Function>>) -> bool {
        let name: Arc<str> = name.into();
        let func = func.into();
        let added = !self.entries.contains_key(&name);
        let changed = self.put(&name, &func);
        if added {
            self.order.push(name);
            self.sync_list();
        }
        changed
    }

    /// Adds the function `name` at the end; a duplicate name is an error.
    pub fn add_function(&mut self, name: &str, func: impl Into<Arc<Function>>) -> Result<(), SessionError> {
        if self.entries.contains_key(name) {
            return Err(ModuleError::Duplicate(name.to_string()).into());
        }
        self.set_function(name, func);
        Ok(())
    }

    /// Removes the function `name`.
    pub fn remove_function(&mut self, name: &str) -> Result<(), SessionError> {
        if self.entries.remove(name).is_none() {
            return Err(ModuleError::Unknown(name.to_string()).into());
        }
        self.moved.remove(name);
        self.order.retain(|n| &**n != name);
        self.sync_list();
        Ok(())
    }

    /// Renames `old` to `new` in place (calls are not rewritten).
    pub fn rename_function(&mut self, old: &str, new: &str) -> Result<(), SessionError> {
        if self.entries.contains_key(new) {
            return Err(ModuleError::Duplicate(new.to_string()).into());
        }
        let entry = self.entries.remove(old).ok_or_else(|| ModuleError::Unknown(old.to_string()))?;
        let new: Arc<str> = new.into();
        for n in &mut self.order {
            if &**n == old {
                *n = new.clone();
            }
        }
        if self.moved.remove(old) {
            self.moved.insert(new.clone());
        }
        self.entries.insert(new, entry);
        self.sync_list();
        Ok(())
    }

    /// Stores `func` as `name` unless it is the same as what is stored; returns whether the
    /// input changed. Does not touch the function list.
    fn put(&mut self, name: &Arc<str>, func: &Arc<Function>) -> bool {
        let base = span_base(func);
        if let Some(entry) = self.entries.get_mut(name) {
            let moved_since_last_run = base != entry.base;
            entry.base = base;
            if same_function(&entry.stored, func) {
                if base != entry.stored_base {
                    self.moved.insert(name.clone());
                } else {
                    self.moved.remove(name);
                }
                // The function did not change, but its diagnostics in the last run's output
                // sit where it was: the next run must move them (the edit path does).
                if moved_since_last_run {
                    self.kept.on(Event::Touched);
                }
                return false;
            }
            self.moved.remove(name);
            entry.stored = func.clone();
            entry.stored_base = base;
            let input = entry.input;
            // One durability for every input: salsa backdates a result only when its durability
            // did not drop, so low-durability edits would stop module-pass outputs from being
            // reused after the first edit.
            input.set_func(&mut self.db).to(FnVal(func.clone()));
            self.kept.on(Event::Edited(name, func));
        } else {
            let input = Source::new(&self.db, FnVal(func.clone()));
            self.entries.insert(name.clone(), Entry { input, stored: func.clone(), stored_base: base, base });
            self.kept.on(Event::Touched);
        }
        true
    }

    fn sync_list(&mut self) {
        let list = FuncList {
            names: Arc::new(self.order.clone()),
            map: self.order.iter().map(|n| (n.clone(), self.entries[n].input)).collect(),
        };
        let roots = self.roots();
        if *roots.funcs(&self.db) != list {
            roots.set_funcs(&mut self.db).to(Arc::new(list));
            self.kept.on(Event::ListChanged);
        } else {
            self.kept.on(Event::Touched);
        }
    }

    /// Removes and returns the pass statistics of the work this session did since the last
    /// call (its context must be built with `PassContextBuilder::statistics(true)`). A session
    /// counts only what it computes: a function it reuses from an earlier run counts nothing,
    /// so a cold run's totals equal a serial run's and a no-change run's are empty.
    pub fn take_statistics(&self) -> Statistics {
        self.ctx.take_statistics()
    }

    /// Runs the pipeline, recomputing only what changed since the last run.
    pub fn run(&mut self) -> Result<SessionOutput, SessionError> {
        if let Some(last) = self.kept.last() {
            return Ok(last.output(Instant::now()));
        }
        let (out, store, unfused) = match self.mode {
            MemoryMode::Lean => self.run_lean()?,
            MemoryMode::Full => match self.run_edit()? {
                Some(ran) => ran,
                None => self.run_salsa()?,
            },
        };
        self.kept.on(Event::Ran { out: &out, store: store.map(Box::new), unfused });
        Ok(out)
    }

    /// A run through salsa (the default mode's cold and cross-run path), leaving the edit
    /// path's store when every stage's outputs were computed.
    fn run_salsa(&mut self) -> Result<(SessionOutput, Option<Store>, bool), SessionError> {
        let pending = self.start_run();
        let start = Instant::now();
        let (run, outputs, unfused) = pending.ran()?;
        // The memos now hold what the edit path computed before.
        self.roots().plan(&self.db).forget_edit_results();
        let sources = self.order.iter().map(|n| (n.clone(), self.entries[n].stored.clone())).collect();
        let store = Store::Full(Cache::new(
            Arc::new(self.order.clone()),
            sources,
            prims_of(&self.prims),
            outputs,
            run.module.clone(),
            run.diagnostics.clone(),
        ));
        Ok((pending.output(run, unfused, start), Some(store), unfused))
    }

    /// The edit path (`session/edit.rs`) over the default mode's store, when the session has
    /// one; `None` when it has not or the edit path gave up.
    fn run_edit(&mut self) -> Result<Option<(SessionOutput, Option<Store>, bool)>, SessionError> {
        let Some(Store::Full(mut cache)) = self.kept.take_store() else { return Ok(None) };
        let start = Instant::now();
        let plan = self.roots().plan(&self.db);
        let unfused = self.kept.unfused();
        let variant = plan.variant(unfused);
        let Some(run) = run_edit(variant, &mut cache, self.kept.edited(), true)? else { return Ok(None) };
        Ok(Some((self.output_of(run, variant, start), Some(Store::Full(cache)), unfused)))
    }

    /// A run in lean mode: the edit path over what the last lean run kept when the session has
    /// it and the path can handle the edits, else a cold run of the stages.
    fn run_lean(&mut self) -> Result<(SessionOutput, Option<Store>, bool), SessionError> {
        let start = Instant::now();
        let plan = self.roots().plan(&self.db);
        let threads = self.ctx.num_threads().max(1);
        let unfused = self.kept.unfused();
        if let Some(Store::Lean(mut lean)) = self.kept.take_store() {
            let variant = plan.variant(unfused);
            // Lean mode keeps no memos for results to serve (its cold runs do not use salsa).
            let store = &mut LeanEdit::new(&mut lean, variant, threads);
            if let Some(run) = run_edit(variant, store, self.kept.edited(), false)? {
                return Ok((self.output_of(run, variant, start), Some(Store::Lean(lean)), unfused));
            }
        }
        // The function list salsa's input holds (the same names in the same order).
        let names = self.roots().funcs(&self.db).names.clone();
        let sources: Vec<Arc<Function>> = names.iter().map(|n| self.entries[n].stored.clone()).collect();
        let ((record, run), unfused) = drive_plan(&plan, unfused, |unfused| {
            let (mut record, module) = LeanRecord::new(names.clone(), sources.clone(), self.prims.clone(), threads);
            Ok(drive(plan.variant(unfused), module, threads, &Compute, &mut record)?.map(|run| (record, run)))
        })?;
        let lean = record.finish(&run);
        Ok((self.output_of(run, plan.variant(unfused), start), Some(Store::Lean(lean)), unfused))
    }

    /// The output of an edit-path or lean run of `variant` that started at `start`.
    fn output_of(&self, run: EditRun, variant: &[Arc<plan::Stage>], start: Instant) -> SessionOutput {
        output_of(run, variant, start, &self.shifts())
    }

    /// Functions that moved in their source since their result was computed.
    fn shifts(&self) -> FxHashMap<Arc<str>, i64> {
        self.moved
            .iter()
            .filter_map(|name| {
                let e = self.entries.get(name)?;
                let delta = i64::from(e.base) - i64::from(e.stored_base);
                (delta != 0).then(|| (name.clone(), delta))
            })
            .collect()
    }

    /// The record of the last run for a new process (`session/record.rs`): `None` unless the
    /// last run was a lean run over a persistent store (`set_store`) whose every function
    /// stage is stored, without a diagnostic, PrimFuncs or functions a pass added. `sources`
    /// names each loaded function's source entry (its key and the byte its text starts at),
    /// in module order.
    pub fn run_record(&self, sources: Vec<(StageKey, u32)>) -> Option<RunRecord> {
        let Some(Store::Lean(lean)) = self.kept.store() else { return None };
        let cfg = self.store.as_ref()?;
        let plan = self.roots().plan(&self.db);
        let unfused = self.kept.unfused();
        lean.record(plan.variant(unfused), unfused, sources, &*cfg.store)
    }

    /// Runs the pipeline from `record`, the record of an earlier run of this session's plan
    /// (in another process, say), on the module whose sources are now `sources` (one per
    /// function of the record, in its order) of which `edited` changed: only what the edits
    /// reach is recomputed, the rest is neither decoded nor run. The session's own module is
    /// not used or changed. `None` when the path does not apply (see `session/record.rs`):
    /// the caller runs the whole module.
    pub fn run_from_record(
        &mut self,
        record: RunRecord,
        sources: Vec<(StageKey, u32)>,
        edited: Vec<(Arc<str>, Arc<Function>)>,
    ) -> Result<Option<RecordRun>, SessionError> {
        let start = Instant::now();
        let Some(cfg) = &self.store else { return Ok(None) };
        let plan = self.roots().plan(&self.db);
        if record.unfused && plan.unfused.is_none() {
            return Ok(None);
        }
        let variant = plan.variant(record.unfused);
        let same_plan = variant.len() == record.labels.len()
            && variant.iter().zip(&record.labels).all(|(s, l)| s.label == *l)
            && variant.iter().all(|s| !s.is_function() || s.persist.is_some());
        if !same_plan || sources.len() != record.names.len() {
            return Ok(None);
        }
        let mut store = RecordEdit::new(record, sources, variant, cfg.store.clone());
        if !store.takes(&edited) {
            return Ok(None);
        }
        let edited: FxHashMap<Arc<str>, Arc<Function>> = edited.into_iter().collect();
        // A pass error: the whole-module run reports the error a serial run reports.
        let Ok(Some(run)) = run_edit(variant, &mut store, &edited, false) else { return Ok(None) };
        if store.failed() {
            return Ok(None);
        }
        let stats = self.output_of(run, variant, start).stats;
        Ok(Some(RecordRun { changed: store.finals, stats, record: store.rec }))
    }

    /// A run that can go to another thread. An edit made on the session while it is in
    /// flight cancels it (it returns [`SessionError::Cancelled`]); the edit waits until the
    /// run has stopped.
    pub fn start_run(&self) -> PendingRun {
        let shifts = self.shifts();
        PendingRun { db: self.db.clone(), threads: self.ctx.num_threads().max(1), shifts, unfused: self.kept.unfused() }
    }
}

/// What [`Session::run_from_record`] gives.
pub struct RecordRun {
    /// The functions whose output changed, with the new output (the others' output is the
    /// record's).
    pub changed: Vec<(Arc<str>, Arc<Function>)>,
    /// What each stage recomputed.
    pub stats: RunStats,
    /// The record of this run.
    pub record: RunRecord,
}

fn salsa_roots(db: &SessionDb) -> db::Roots {
    use self::db::Db;
    db.roots()
}

fn check_no_instruments(ctx: &PassContext) -> Result<(), SessionError> {
    let insts = ctx.instruments();
    if insts.is_empty() {
        Ok(())
    } else {
        Err(SessionError::Instruments(insts.iter().map(|i| i.name().to_string()).collect::<Vec<_>>().join(", ")))
    }
}

/// A run started with [`Session::start_run`].
pub struct PendingRun {
    db: SessionDb,
    threads: usize,
    /// Functions that moved in their source since their result was computed.
    shifts: FxHashMap<Arc<str>, i64>,
    /// Run the plan's unfused variant without trying the fused one first.
    unfused: bool,
}

impl PendingRun {
    /// Runs the pipeline. Consumes the run so its database handle is released when it ends.
    pub fn run(self) -> Result<SessionOutput, SessionError> {
        let start = Instant::now();
        let (run, _, unfused) = self.ran()?;
        Ok(self.output(run, unfused, start))
    }

    /// The run through salsa's queries (`db::Queries`) by the one stage loop: its result,
    /// every stage's outputs and whether it ran the plan's unfused variant.
    fn ran(&self) -> Result<(EditRun, Vec<StageCache>, bool), SessionError> {
        self.db.take_log();
        let plan = salsa_roots(&self.db).plan(&self.db);
        let ran = salsa::Cancelled::catch(AssertUnwindSafe(|| {
            drive_plan(&plan, self.unfused, |unfused| {
                let queries = Queries::new(&self.db, unfused);
                let mut outputs = Outputs::default();
                let run = drive(plan.variant(unfused), queries.loaded(), self.threads, &queries, &mut outputs)?;
                Ok(run.map(|run| (run, outputs.stages)))
            })
        }));
        let ((run, outputs), unfused) = ran.map_err(|_| SessionError::Cancelled)??;
        Ok((run, outputs, unfused))
    }

    fn output(&self, run: EditRun, unfused: bool, start: Instant) -> SessionOutput {
        let plan = salsa_roots(&self.db).plan(&self.db);
        output_of(run, plan.variant(unfused), start, &self.shifts)
    }
}

/// The output of a driven or edit-path run of `variant` that started at `start`, the
/// diagnostics of the functions in `shifts` moved with them.
fn output_of(
    run: EditRun,
    variant: &[Arc<plan::Stage>],
    start: Instant,
    shifts: &FxHashMap<Arc<str>, i64>,
) -> SessionOutput {
    let stages = run
        .stages
        .into_iter()
        .zip(variant)
        .map(|(run, stage)| StageStats {
            label: stage.label.clone(),
            is_module_pass: !stage.is_function(),
            is_prim_stage: stage.planned.prim_passes().is_some(),
            reused: run.entered - run.recomputed.len(),
            recomputed: run.recomputed,
            time: run.time,
        })
        .collect();
    let mut diagnostics = run.diagnostics;
    shift_diagnostics(&mut diagnostics, shifts);
    SessionOutput { module: run.module, diagnostics, stats: RunStats { stages, total: start.elapsed() } }
}

/// Moves the diagnostics of functions that moved in their source along with them.
fn shift_diagnostics(diagnostics: &mut [Diagnostic], shifts: &FxHashMap<Arc<str>, i64>) {
    if shifts.is_empty() {
        return;
    }
    for d in diagnostics {
        if let (Some(func), Some(span)) = (&d.function, &mut d.span) {
            if let Some(&delta) = shifts.get(func.as_str()) {
                span.start = shift(span.start, delta);
                span.end = shift(span.end, delta);
            }
        }
    }
}

fn shift(offset: u32, delta: i64) -> u32 {
    u32::try_from((i64::from(offset) + delta).max(0)).unwrap_or(u32::MAX)
}
