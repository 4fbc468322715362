//! The salsa database of a session: its inputs, its queries and the stage-by-stage run.
//!
//! Inputs: one [`Source`] per function (set only when the function really changed), and
//! [`Roots`] holding the function list and the stage plan.
//!
//! Queries, for a function `name` and a stage `k`:
//! - `source(name)`: the function as loaded; a firewall between the function list and the
//!   stages, so adding one function does not re-run the others;
//! - `stage_desc(k)`: stage `k` of the plan, equal (and so backdated) while its fingerprint
//!   is unchanged;
//! - `fn_stage(name, k)`: a function stage's passes run on the function;
//! - `signature(name, k)`: what callers see of the function entering stage `k` — the
//!   firewall that keeps a callee's body edit from re-running its callers;
//! - `barrier(k)`: a module pass over the whole module entering stage `k`; and
//!   `barrier_fn(name, k)`, one function of its output, backdated when unchanged so the next
//!   stage reuses its result;
//! - `names_at(k)`: the function list entering stage `k` (module passes may add or remove).
//!
//! A run asks them stage by stage through the session's one stage loop (`drive.rs`, with
//! [`Queries`] as its `Results`).
//!
//! Invariant: queries fan out only from [`Queries`], outside every tracked function, through
//! the executor's one fan-out (`fanout::map_items_with`), each worker with its own database
//! handle; a tracked function never starts parallel work over the
//! database. (A module pass run inside `barrier` may still fan out over functions with
//! `PassContext::map_functions`; those workers run pass bodies and never touch the database.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use rustc_hash::{FxHashMap, FxHashSet};

use super::drive::{FunctionResults, Results};
use super::plan::{Plan, Stage};
use super::prims::{prims_of, run_prim_stage, ModuleRun};
use super::same::{same_function, same_prims, same_signature};
use crate::ir::{ExprKind, Function, Module, Type};
use crate::transform::executor::{first_failure, run_stage_checked, StageChecks};
use crate::transform::fanout::map_items_with;
use crate::transform::{call_pass, Diagnostic, PassError, VERIFY_EACH};

/// One function as loaded.
#[salsa::input]
pub(crate) struct Source {
    #[returns(clone)]
    pub(crate) func: FnVal,
}

/// The function list, the loaded PrimFuncs and the stage plan.
#[salsa::input]
pub(crate) struct Roots {
    #[returns(clone)]
    pub(crate) funcs: Arc<FuncList>,
    #[returns(clone)]
    pub(crate) prims: Prims,
    #[returns(clone)]
    pub(crate) plan: Arc<Plan>,
}

/// The PrimFuncs of a module (held in a module without graph functions, so that lists are
/// shared, not copied), compared with [`same_prims`].
#[derive(Clone)]
pub(crate) struct Prims(pub(crate) Module);

impl PartialEq for Prims {
    fn eq(&self, other: &Prims) -> bool {
        same_prims(&self.0, &other.0)
    }
}

/// The loaded functions: names in module order, and each one's input.
#[derive(Default)]
pub(crate) struct FuncList {
    pub(crate) names: Arc<Vec<Arc<str>>>,
    pub(crate) map: FxHashMap<Arc<str>, Source>,
}

impl PartialEq for FuncList {
    fn eq(&self, other: &FuncList) -> bool {
        self.names == other.names && self.map == other.map
    }
}

/// A function at a stage.
#[salsa::interned]
pub(crate) struct Key<'db> {
    #[returns(ref)]
    pub(crate) name: Arc<str>,
    #[returns(copy)]
    pub(crate) stage: u32,
}

/// Set in a stage number for a stage of the plan's unfused variant ([`Plan::variant`]): the
/// two variants' queries never share a key.
pub(crate) const UNFUSED: u32 = 1 << 31;

/// The position of stage number `k` in its variant.
fn index(k: u32) -> u32 {
    k & !UNFUSED
}

/// A stage.
#[salsa::interned]
pub(crate) struct StageId<'db> {
    #[returns(copy)]
    pub(crate) stage: u32,
}

/// A function compared with [`same_function`].
#[derive(Clone, Debug)]
pub(crate) struct FnVal(pub(crate) Arc<Function>);

impl PartialEq for FnVal {
    fn eq(&self, other: &FnVal) -> bool {
        same_function(&self.0, &other.0)
    }
}

/// A function compared with [`same_signature`].
#[derive(Clone)]
pub(crate) struct SigVal(Arc<Function>);

impl PartialEq for SigVal {
    fn eq(&self, other: &SigVal) -> bool {
        same_signature(&self.0, &other.0)
    }
}

/// A function stage's result: the function and, per pass of the stage, its diagnostics (an
/// empty list when no pass reported any).
#[derive(Clone, PartialEq)]
pub(crate) struct StageOut {
    pub(crate) func: FnVal,
    pub(crate) diags: Arc<Vec<Vec<Diagnostic>>>,
    /// The precondition of a per-function form after the stage's first pass failed on this
    /// function (see `plan.rs`): the run stopped before that form, and the whole stage must
    /// run unfused.
    pub(crate) unfusable: bool,
}

/// A function stage's failure: the index of the failing pass in the stage and its error. A
/// serial run reports the first failing pass's first failing function, so the pass index
/// decides between functions.
///
/// Memos hold it (and a barrier's per-function error) behind an `Arc`: salsa stores a memo's
/// value inline, and an inline `PassError` would make every memo ~70 bytes bigger.
pub(crate) type StageErr = (usize, PassError);

/// A module barrier's result. Never equal to another run's: per-function equality is decided
/// by `barrier_fn`.
#[derive(Clone)]
pub(crate) struct BarrierOut(pub(crate) Arc<Result<(Module, Vec<Diagnostic>), PassError>>);

impl PartialEq for BarrierOut {
    fn eq(&self, other: &BarrierOut) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A list of function names compared by value.
#[derive(Clone, PartialEq)]
pub(crate) struct Names(pub(crate) Arc<Vec<Arc<str>>>);

/// What the queries need beyond salsa.
#[salsa::db]
pub(crate) trait Db: salsa::Database {
    /// The session's roots.
    fn roots(&self) -> Roots;
    /// Notes that stage `stage` of `name` is being computed (for the run's statistics).
    fn record(&self, stage: u32, name: &Arc<str>);
}

/// The database. Clones are handles on the same storage; one per worker.
#[salsa::db]
#[derive(Clone)]
pub(crate) struct SessionDb {
    storage: salsa::Storage<Self>,
    roots: Option<Roots>,
    log: Arc<Mutex<Log>>,
}

/// (stage, function) pairs computed since the log was last taken.
type Log = Vec<(u32, Arc<str>)>;

#[salsa::db]
impl salsa::Database for SessionDb {}

#[salsa::db]
impl Db for SessionDb {
    fn roots(&self) -> Roots {
        // Set right after construction, before any query runs.
        self.roots.expect("session roots are set at construction")
    }

    fn record(&self, stage: u32, name: &Arc<str>) {
        self.log.lock().unwrap_or_else(PoisonError::into_inner).push((stage, name.clone()));
    }
}

impl SessionDb {
    /// A database with an empty function list and `plan`.
    pub(crate) fn new(plan: Plan) -> SessionDb {
        let mut db =
            SessionDb { storage: salsa::Storage::default(), roots: None, log: Arc::new(Mutex::new(Vec::new())) };
        let roots = Roots::new(&db, Arc::new(FuncList::default()), Prims(Module::new()), Arc::new(plan));
        db.roots = Some(roots);
        db
    }

    /// Takes the recorded (stage, function) computations.
    pub(crate) fn take_log(&self) -> Log {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[salsa::tracked(returns(clone))]
fn stage_desc<'db>(db: &'db dyn Db, id: StageId<'db>) -> Option<Arc<Stage>> {
    let k = id.stage(db);
    db.roots().plan(db).variant(k & UNFUSED != 0).get(index(k) as usize).cloned()
}

#[salsa::tracked(returns(clone))]
fn source<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<FnVal> {
    let src = *db.roots().funcs(db).map.get(key.name(db))?;
    Some(src.func(db))
}

#[salsa::tracked(returns(clone))]
fn names_at<'db>(db: &'db dyn Db, id: StageId<'db>) -> Names {
    let k = id.stage(db);
    if index(k) == 0 {
        return Names(db.roots().funcs(db).names.clone());
    }
    let prev = StageId::new(db, k - 1);
    match stage_desc(db, prev) {
        Some(stage) if !stage.is_function() => match &*barrier(db, prev).0 {
            Ok((module, _)) => Names(Arc::new(module.entries().iter().map(|(n, _)| n.clone()).collect())),
            Err(_) => names_at(db, prev),
        },
        _ => names_at(db, prev),
    }
}

/// The PrimFuncs entering stage `k`: those leaving the last barrier before it, else the loaded
/// ones (graph function stages leave PrimFuncs alone).
#[salsa::tracked(returns(clone))]
fn prims_at<'db>(db: &'db dyn Db, id: StageId<'db>) -> Prims {
    let k = id.stage(db);
    if index(k) == 0 {
        return db.roots().prims(db);
    }
    let prev = StageId::new(db, k - 1);
    match stage_desc(db, prev) {
        Some(stage) if !stage.is_function() => match &*barrier(db, prev).0 {
            Ok((module, _)) => Prims(prims_of(module)),
            Err(_) => prims_at(db, prev),
        },
        _ => prims_at(db, prev),
    }
}

/// The function `name` entering stage `k`: `None` when there is no such function then.
fn stage_input(db: &dyn Db, name: &Arc<str>, k: u32) -> Option<Result<Arc<Function>, PassError>> {
    if index(k) == 0 {
        return source(db, Key::new(db, name.clone(), 0)).map(|f| Ok(f.0));
    }
    let prev = k - 1;
    match stage_desc(db, StageId::new(db, prev))? {
        stage if stage.is_function() => {
            fn_stage(db, Key::new(db, name.clone(), prev)).map(|res| res.map(|out| out.func.0).map_err(|e| e.1.clone()))
        }
        _ => barrier_fn(db, Key::new(db, name.clone(), prev)).map(|res| res.map(|f| f.0).map_err(|e| (*e).clone())),
    }
}

#[salsa::tracked(returns(clone))]
fn signature<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<SigVal> {
    match stage_input(db, key.name(db), key.stage(db))? {
        Ok(func) => Some(SigVal(func)),
        Err(_) => None,
    }
}

/// The read-only module a function pass sees: the function itself and the globals it
/// references, each as it enters the stage. Callers depend only on their callees'
/// signatures, so a pass must read no more than a callee's signature from the view.
fn module_view(db: &dyn Db, name: &Arc<str>, func: &Arc<Function>, k: u32) -> Module {
    view_with(
        name,
        func,
        |callee| signature(db, Key::new(db, callee, k)).map(|sig| sig.0),
        || prims_at(db, StageId::new(db, k)).0,
    )
}

/// The globals `func` references other than itself, sorted, without repeats.
pub(crate) fn callees<'f>(name: &str, func: &'f Function) -> Vec<&'f str> {
    let mut callees: Vec<&str> = func
        .nodes()
        .iter()
        .filter_map(|node| match node.kind {
            ExprKind::Global { name } => func.try_sym(name),
            _ => None,
        })
        .filter(|callee| *callee != name)
        .collect();
    callees.sort_unstable();
    callees.dedup();
    callees
}

/// A module view of `func` with its callees as `lookup` gives them and, when one of them is
/// no graph function there (a PrimFunc, say, which a `call_tir` references), the PrimFuncs
/// `prims` gives (those entering the stage).
pub(crate) fn view_with(
    name: &Arc<str>,
    func: &Arc<Function>,
    lookup: impl Fn(&str) -> Option<Arc<Function>>,
    prims: impl FnOnce() -> Module,
) -> Module {
    let mut view = Module::new();
    // The names are distinct, so adding cannot fail.
    let _ = view.add_shared(name, func.clone());
    let mut missing = false;
    for callee in callees(name, func) {
        match lookup(callee) {
            Some(f) => {
                let _ = view.add(callee, f);
            }
            None => missing = true,
        }
    }
    if missing {
        view.set_prims_from(&prims());
    }
    view
}

/// A stage's results the edit path computed (`edit.rs`), for the runs through salsa after it.
///
/// The edit path does not update salsa's memos (salsa stays consistent with its inputs and
/// recomputes what changed when next asked). So when a run after body edits goes through
/// salsa (after a function is added, removed or renamed, say), the edited functions' queries
/// run again; their results are here, and [`run_function_stage`] takes them instead of
/// running the passes. A result serves the same function (by [`same_function`]) with the same
/// callees' signatures in its module view, which is all a stage's result depends on. Emptied
/// by every cold run (the memos then hold what it held), so it holds at most what was edited
/// since.
#[derive(Default)]
pub(crate) struct EditResults {
    /// Whether `map` may be non-empty: a cold run's lookups cost one atomic load.
    any: AtomicBool,
    map: Mutex<FxHashMap<Arc<str>, EditResult>>,
}

struct EditResult {
    input: Arc<Function>,
    /// What the module view showed of each callee, in `callees` order.
    callees: Vec<Seen>,
    out: StageOut,
}

/// What a module view shows a caller of one of its callees.
pub(crate) enum Seen {
    /// A graph function (a caller depends on its signature).
    Function(Arc<Function>),
    /// A PrimFunc, by the type the graph level sees (`call_tir` is checked against it).
    Prim(Type),
    /// Nothing of that name.
    Absent,
}

impl Seen {
    /// What `view` shows of `callee`.
    pub(crate) fn of(view: &Module, callee: &str) -> Seen {
        match view.get(callee) {
            Some(f) => Seen::Function(f.clone()),
            None => view.get_prim(callee).map_or(Seen::Absent, |p| Seen::Prim(p.graph_type())),
        }
    }

    /// Whether a caller sees `self` and `other` alike.
    fn same(&self, other: &Seen) -> bool {
        match (self, other) {
            (Seen::Function(a), Seen::Function(b)) => same_signature(a, b),
            (Seen::Prim(a), Seen::Prim(b)) => a == b,
            (Seen::Absent, Seen::Absent) => true,
            _ => false,
        }
    }
}

impl EditResults {
    /// Keeps `out`, computed for `input` (the function `name`) with module view `view`.
    pub(crate) fn put(&self, name: &Arc<str>, input: &Arc<Function>, view: &Module, out: &StageOut) {
        let callees = callees(name, input).into_iter().map(|c| Seen::of(view, c)).collect();
        let entry = EditResult { input: input.clone(), callees, out: out.clone() };
        self.map.lock().unwrap_or_else(PoisonError::into_inner).insert(name.clone(), entry);
        self.any.store(true, Ordering::Release);
    }

    /// The result kept for `input` (the function `name`) with module view `view`, if any.
    fn get(&self, name: &Arc<str>, input: &Arc<Function>, view: &Module) -> Option<StageOut> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = map.get(name)?;
        let same_view = || {
            let now = callees(name, input);
            now.len() == kept.callees.len() && now.iter().zip(&kept.callees).all(|(c, was)| Seen::of(view, c).same(was))
        };
        (same_function(&kept.input, input) && same_view()).then(|| kept.out.clone())
    }

    /// Forgets every result.
    pub(crate) fn clear(&self) {
        if self.any.swap(false, Ordering::AcqRel) {
            self.map.lock().unwrap_or_else(PoisonError::into_inner).clear();
        }
    }
}

/// Runs a function stage's passes on `func` (named `name`) with the module view `view`, by the
/// executor's stage runner ([`run_stage_checked`]): the same passes, worker copies,
/// `SkipOptimization` rule and per-function-form precondition as a fused stage of a plain run.
/// Under `testing.verify_each`, each pass's output is verified against `view`. When a form's
/// precondition fails, the output is marked `unfusable` (the whole stage must run unfused).
/// The statistics of what ran count at once (the session reports what it computed).
///
/// A result the edit path computed for the same input ([`EditResults`]) is used instead of
/// running the passes. With a persistent store (`store.rs`), a stored result for the same key
/// is used likewise, and a computed one is stored; `computing` is called only when the passes
/// really run.
pub(crate) fn run_function_stage(
    stage: &Stage,
    name: &Arc<str>,
    input: Arc<Function>,
    view: &Module,
    cancel: &dyn Fn(),
    computing: &dyn Fn(),
) -> Result<StageOut, StageErr> {
    if let Some(out) = stage.edited.get(name, &input, view) {
        return Ok(out);
    }
    let Some(persist) = &stage.persist else {
        computing();
        return compute_function_stage(stage, name, input, view, cancel);
    };
    let key = persist.key(name, &input, view);
    if let Some(out) = persist.lookup(&key, &input) {
        return Ok(out);
    }
    computing();
    let out = compute_function_stage(stage, name, input.clone(), view, cancel)?;
    persist.save(&key, &input, &out);
    Ok(out)
}

/// Runs function stage `stage`'s passes on `func` (named `name`) with the module view `view`
/// (see [`run_function_stage`]), with no store: what the store is asked for on a miss.
pub(crate) fn compute_function_stage(
    stage: &Stage,
    name: &Arc<str>,
    input: Arc<Function>,
    view: &Module,
    cancel: &dyn Fn(),
) -> Result<StageOut, StageErr> {
    let Some(passes) = stage.planned.function_passes() else {
        return Err((0, PassError::msg(format!("stage {} is not a function stage", stage.label))));
    };
    let checks = StageChecks { verify_each: stage.ctx.get_config(VERIFY_EACH, false), cancel };
    let run = run_stage_checked(passes, name, &input, view, &stage.ctx, &checks);
    for stats in &run.statistics {
        stage.ctx.merge_statistics(stats);
    }
    if let Some(error) = run.error {
        return Err(error);
    }
    // Most stages report nothing: share one empty list instead of allocating one per
    // function and stage.
    static NO_DIAGNOSTICS: LazyLock<Arc<Vec<Vec<Diagnostic>>>> = LazyLock::new(Arc::default);
    let diags =
        if run.diagnostics.iter().all(Vec::is_empty) { NO_DIAGNOSTICS.clone() } else { Arc::new(run.diagnostics) };
    Ok(StageOut { func: FnVal(run.func), diags, unfusable: run.signature_changed })
}

/// Runs a barrier on `module`: a module stage's pass, or a PrimFunc stage per PrimFunc
/// (`prims.rs`).
pub(crate) fn run_module_stage(stage: &Stage, module: Module) -> Result<ModuleRun, PassError> {
    if let Some(passes) = stage.planned.prim_passes() {
        return run_prim_stage(stage, passes, module);
    }
    let Some(pass) = stage.planned.module_pass() else {
        return Err(PassError::msg(format!("stage {} is not a module stage", stage.label)));
    };
    let worker = stage.ctx.worker_copy();
    let res = {
        let _scope = worker.push_silently();
        call_pass(&**pass, module, &worker)
    };
    stage.ctx.merge_statistics(&worker.take_statistics());
    res.map(|module| ModuleRun { module, diags: worker.diagnostics().take(), prims_run: None })
}

#[salsa::tracked(returns(clone))]
fn fn_stage<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<Result<StageOut, Arc<StageErr>>> {
    let (name, k) = (key.name(db).clone(), key.stage(db));
    let stage = stage_desc(db, StageId::new(db, k))?;
    if !stage.is_function() {
        return None;
    }
    let func = match stage_input(db, &name, k)? {
        Ok(func) => func,
        // An earlier stage's error: it is reported there, before this stage is reached.
        Err(e) => return Some(Err(Arc::new((0, e)))),
    };
    let view = module_view(db, &name, &func, k);
    Some(
        run_function_stage(&stage, &name, func, &view, &|| db.unwind_if_revision_cancelled(), &|| db.record(k, &name))
            .map_err(Arc::new),
    )
}

#[salsa::tracked(returns(clone))]
fn barrier<'db>(db: &'db dyn Db, id: StageId<'db>) -> BarrierOut {
    let k = id.stage(db);
    let Some(stage) = stage_desc(db, id).filter(|stage| !stage.is_function()) else {
        return BarrierOut(Arc::new(Ok((Module::new(), Vec::new()))));
    };
    let names = names_at(db, id);
    let mut module = Module::with_capacity(names.0.len());
    for name in names.0.iter() {
        match stage_input(db, name, k) {
            Some(Ok(func)) => {
                let _ = module.add_shared(name, func);
            }
            Some(Err(e)) => return BarrierOut(Arc::new(Err(e))),
            None => {}
        }
    }
    module.set_prims_from(&prims_at(db, id).0);
    db.unwind_if_revision_cancelled();
    let run = run_module_stage(&stage, module);
    // A PrimFunc stage reports the PrimFuncs it ran on; a module pass ran on everything.
    match run.as_ref().ok().and_then(|r| r.prims_run.as_ref()) {
        Some(prims) => prims.iter().for_each(|name| db.record(k, name)),
        None => names.0.iter().for_each(|name| db.record(k, name)),
    }
    BarrierOut(Arc::new(run.map(|r| (r.module, r.diags))))
}

#[salsa::tracked(returns(clone))]
fn barrier_fn<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<Result<FnVal, Arc<PassError>>> {
    let out = barrier(db, StageId::new(db, key.stage(db)));
    match &*out.0 {
        Ok((module, _)) => module.get(key.name(db)).map(|f| Ok(FnVal(f.clone()))),
        Err(e) => Some(Err(Arc::new(e.clone()))),
    }
}

/// What one stage produced, for every function entering it (in module order).
#[derive(Clone)]
pub(crate) enum StageCache {
    /// A function stage: one output per name.
    Function { names: Arc<Vec<Arc<str>>>, outs: Vec<StageOut> },
    /// A module stage: the output module and the pass's diagnostics.
    Module { out: Module, diags: Vec<Diagnostic> },
}

/// A stage's results as salsa's queries give them (`drive.rs` [`Results`]): `fn_stage` per
/// function, fanned out over the functions with one database handle per worker job (cloned
/// outside any tracked function: dependencies read on a worker inside a tracked function would
/// be lost), and `barrier` for a barrier. What was recomputed is what the queries logged.
pub(crate) struct Queries<'a> {
    db: &'a SessionDb,
    /// [`UNFUSED`] for the plan's unfused variant, else 0.
    base: u32,
    /// Log entries taken but not yet claimed by their stage.
    pending: Mutex<Log>,
}

impl<'a> Queries<'a> {
    /// The queries of `db`'s plan variant (the unfused one when `unfused`).
    pub(crate) fn new(db: &'a SessionDb, unfused: bool) -> Queries<'a> {
        Queries { db, base: if unfused { UNFUSED } else { 0 }, pending: Mutex::new(Vec::new()) }
    }

    /// The module the run starts from: the loaded functions and PrimFuncs.
    pub(crate) fn loaded(&self) -> Module {
        let db = self.db;
        let funcs = db.roots().funcs(db);
        let mut module = Module::with_capacity(funcs.names.len());
        for name in funcs.names.iter() {
            // The names are distinct, so adding cannot fail.
            let _ = module.add_shared(name, funcs.map[name].func(db).0);
        }
        module.set_prims_from(&db.roots().prims(db).0);
        module
    }

    /// The functions the queries of stage `k` logged as computed.
    fn logged(&self, k: u32) -> FxHashSet<Arc<str>> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.extend(self.db.take_log());
        let mut done = FxHashSet::default();
        pending.retain(|(stage, name)| {
            if *stage == k {
                done.insert(name.clone());
            }
            *stage != k
        });
        done
    }
}

impl Results for Queries<'_> {
    fn function_stage(&self, k: usize, _stage: &Stage, input: &Module, threads: usize) -> FunctionResults {
        let k = self.base | k as u32;
        let outs = map_items_with(threads, input.entries(), self.db.clone(), |db, (name, _)| {
            match fn_stage(db, Key::new(db, name.clone(), k)) {
                Some(out) => out.map_err(|e| (*e).clone()),
                None => Err((0, PassError::msg(format!("internal error: {name} has no result at stage {k}")))),
            }
        });
        let done = self.logged(k);
        let computed = input.entries().iter().map(|(name, _)| done.contains(name)).collect();
        FunctionResults { outs, computed, keys: None }
    }

    fn module_stage(&self, k: usize, stage: &Stage, input: &Module) -> Result<(ModuleRun, Vec<Arc<str>>), PassError> {
        let k = self.base | k as u32;
        // On a handle of its own: salsa keeps a finished query's dependency set allocated
        // for the next query on the same handle and clears all of it each time, so after a
        // barrier (a dependency per function) every query run on `db` (a serial run's
        // function stages) would pay for clearing a table sized for the whole module.
        let out = {
            let handle = self.db.clone();
            barrier(&handle, StageId::new(&handle, k)).0
        };
        let (module, diags) = match &*out {
            Ok((module, diags)) => (module.clone(), diags.clone()),
            Err(e) => return Err(e.clone()),
        };
        let done = self.logged(k);
        let is_prim = stage.planned.prim_passes().is_some();
        let entered: Vec<&Arc<str>> = if is_prim {
            input.prim_entries().iter().map(|(n, _)| n).collect()
        } else {
            input.entries().iter().map(|(n, _)| n).collect()
        };
        let recomputed: Vec<Arc<str>> = entered.into_iter().filter(|n| done.contains(*n)).cloned().collect();
        let prims_run = is_prim.then(|| recomputed.clone());
        Ok((ModuleRun { module, diags, prims_run }, recomputed))
    }
}

/// Appends a function stage's diagnostics (per function in module order, per pass) in the
/// order a serial run reports them: pass-major.
pub(crate) fn extend_pass_major<'a>(
    diagnostics: &mut Vec<Diagnostic>,
    passes: usize,
    per_function: impl Iterator<Item = &'a Vec<Vec<Diagnostic>>> + Clone,
) {
    for j in 0..passes {
        for diags in per_function.clone() {
            diagnostics.extend(diags.get(j).into_iter().flatten().cloned());
        }
    }
}

/// The functions whose final output changed, `(name, (old, new))`, replaced in `output`;
/// functions no longer in it are skipped.
pub(crate) fn replace_outputs<'a>(
    output: &mut Module,
    changed: impl IntoIterator<Item = (&'a Arc<str>, &'a (Arc<Function>, Arc<Function>))>,
) {
    for (name, (_, new)) in changed {
        if output.contains(name) {
            // Present, so this replaces and cannot fail.
            let _ = output.insert(name, new.clone());
        }
    }
}

/// A function stage's results in module order, or the error a serial run reports among
/// them: the first failing pass's first failing function in module order.
pub(crate) fn first_error(
    outs: impl IntoIterator<Item = Result<StageOut, StageErr>>,
) -> Result<Vec<StageOut>, PassError> {
    let outs: Vec<_> = outs.into_iter().collect();
    if let Some((_, at)) = first_failure(outs.iter().map(|out| out.as_ref().err().map(|e| e.0))) {
        let first = outs.into_iter().nth(at).and_then(Result::err);
        return Err(first.map_or_else(|| PassError::msg("internal error: failing function not found"), |e| e.1));
    }
    // A new vector: collecting in place would keep `outs`' allocation, sized for the larger
    // `Result`s, alive in the session's cache.
    let mut ok = Vec::with_capacity(outs.len());
    ok.extend(outs.into_iter().filter_map(Result::ok));
    Ok(ok)
}
