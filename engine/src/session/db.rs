//! The salsa database of a session: its inputs, its queries and the stage-by-stage run.
//!
//! Inputs: one [`Source`] per function (set only when the function really changed), and
//! [`Roots`] holding the function list and the stage plan.
//!
//! Queries, for a function `name` and a stage `k`:
//! - `source(name)`: the function as loaded, with its fingerprint and signature; a firewall
//!   between the function list and the stages, so adding one function does not re-run the
//!   others;
//! - `stage_desc(k)`: stage `k` of the plan, equal (and so backdated) while its fingerprint
//!   is unchanged;
//! - `fn_stage(name, k)`: a function stage's passes run on the function; its value is the
//!   output's 128-bit fingerprint, signature stub and diagnostics, not the output (which
//!   only the plan's last function stage keeps);
//! - `signature(name, k)`: what callers see of the function entering stage `k` — the
//!   firewall that keeps a callee's body edit from re-running its callers;
//! - `barrier(k)`: a module pass over the whole module entering stage `k`, keeping only the
//!   functions the pass changed; and `barrier_fn(name, k)`, one function of its output,
//!   backdated when unchanged so the next stage reuses its result;
//! - `names_at(k)`: the function list entering stage `k` (module passes may add or remove).
//!
//! Intermediate functions are not memoised. A stage's outputs wait in [`Mirror`]'s side
//! table until the next stage has consumed them; a query that needs one that is gone (its
//! producer was reused, not recomputed) recomputes it from the source without salsa seeing
//! the reads ([`Mirror`] mirrors what that needs), so a query's dependencies stay exactly
//! its direct inputs. Passes are deterministic, so a recomputed function equals the one the
//! memo's fingerprint describes.
//!
//! Invariant: queries fan out only from [`run_stages`], outside every tracked function, each
//! worker with its own database handle; a tracked function never starts parallel work.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};

use super::fp::{fingerprint, Fp, Sig};
use super::plan::{Plan, Stage, StageKind};
use super::same::same_function;
use crate::ir::{fn_attr, ExprKind, Function, Module};
use crate::transform::{call_pass, Diagnostic, PassError};

/// One function as loaded.
#[salsa::input]
pub(crate) struct Source {
    #[returns(clone)]
    pub(crate) func: FnVal,
}

/// The function list and the stage plan.
#[salsa::input]
pub(crate) struct Roots {
    #[returns(clone)]
    pub(crate) funcs: Arc<FuncList>,
    #[returns(clone)]
    pub(crate) plan: Arc<Plan>,
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

/// A function with its fingerprint and signature.
#[derive(Clone)]
pub(crate) struct Val {
    pub(crate) func: Arc<Function>,
    pub(crate) fp: Fp,
    pub(crate) sig: Sig,
}

/// A function as loaded, with its fingerprint and signature. Equal when the fingerprints are.
#[derive(Clone)]
pub(crate) struct SrcOut(pub(crate) Val);

impl PartialEq for SrcOut {
    fn eq(&self, other: &SrcOut) -> bool {
        self.0.fp == other.0.fp
    }
}

/// Per pass of a function stage, its diagnostics.
pub(crate) type StageDiags = Arc<Vec<Vec<Diagnostic>>>;

/// A function stage's result for one function: the output's fingerprint and signature, per
/// pass its diagnostics, the globals the output references that its input did not, and the
/// output itself only for the plan's last function stage (earlier outputs are recomputed
/// from the source when needed). Equal when fingerprints, diagnostics and added references
/// are.
#[derive(Clone)]
pub(crate) struct StageOut {
    pub(crate) fp: Fp,
    pub(crate) sig: Sig,
    pub(crate) diags: StageDiags,
    pub(crate) added_refs: Option<Arc<[Arc<str>]>>,
    pub(crate) func: Option<Arc<Function>>,
}

impl PartialEq for StageOut {
    fn eq(&self, other: &StageOut) -> bool {
        self.fp == other.fp && self.diags == other.diags && self.added_refs == other.added_refs
    }
}

/// One function of a module stage's result: its fingerprint and signature, and the output
/// itself only when the pass changed the function (otherwise it is the stage's input).
/// Equal when the fingerprints and whether the pass changed it are.
#[derive(Clone)]
pub(crate) struct ModOut {
    pub(crate) fp: Fp,
    pub(crate) sig: Sig,
    pub(crate) kept: Option<Arc<Function>>,
}

impl PartialEq for ModOut {
    fn eq(&self, other: &ModOut) -> bool {
        self.fp == other.fp && self.kept.is_some() == other.kept.is_some()
    }
}

/// A module stage's result: the output's function names (in order), each output function,
/// and the pass's diagnostics.
pub(crate) struct BarrierVal {
    pub(crate) names: Arc<Vec<Arc<str>>>,
    pub(crate) outs: FxHashMap<Arc<str>, ModOut>,
    pub(crate) diags: Vec<Diagnostic>,
}

/// A module barrier's result. Never equal to another run's: per-function equality is decided
/// by `barrier_fn`.
#[derive(Clone)]
pub(crate) struct BarrierOut(pub(crate) Arc<Result<BarrierVal, PassError>>);

impl PartialEq for BarrierOut {
    fn eq(&self, other: &BarrierOut) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A list of function names compared by value.
#[derive(Clone, PartialEq)]
pub(crate) struct Names(pub(crate) Arc<Vec<Arc<str>>>);

type FxDashMap<K, V> = DashMap<K, V, FxBuildHasher>;

/// What recomputing an intermediate function needs, readable without salsa recording a
/// dependency (a recomputation inside a query must not make the query depend on more than
/// it did). Each part mirrors salsa's current values: `sources` the inputs (set by the
/// session right after salsa's setter), `sigs` the last value of each `signature` query,
/// `kept` the functions module stages changed, `plan` the plan. `side` holds the
/// intermediate functions a run is about to consume: a stage's outputs live there until the
/// next stage has run.
#[derive(Default)]
pub(crate) struct Mirror {
    pub(crate) sources: FxDashMap<Arc<str>, Arc<Function>>,
    sigs: FxDashMap<Arc<str>, Vec<Option<Sig>>>,
    kept: FxDashMap<(Arc<str>, u32), Arc<Function>>,
    side: FxDashMap<(Arc<str>, u32), Arc<Function>>,
    pub(crate) plan: RwLock<Arc<Plan>>,
    /// The lowest stage recorded in the log since it was last taken (`u32::MAX`: none).
    first_logged: AtomicU32,
}

impl Mirror {
    fn set_sig(&self, name: &Arc<str>, k: u32, sig: Option<Sig>) {
        let mut row = self.sigs.entry(name.clone()).or_default();
        let k = k as usize;
        if row.len() <= k {
            row.resize(k + 1, None);
        }
        row[k] = sig;
    }

    fn sig(&self, name: &str, k: u32) -> Option<Arc<Function>> {
        self.sigs.get(name)?.get(k as usize)?.as_ref().map(|s| s.0.clone())
    }

    fn side(&self, name: &Arc<str>, k: u32) -> Option<Arc<Function>> {
        self.side.get(&(name.clone(), k)).map(|v| v.clone())
    }

    fn put_side(&self, name: &Arc<str>, k: u32, func: Arc<Function>) {
        self.side.insert((name.clone(), k), func);
    }

    /// Drops the intermediate functions entering stages up to `k`, on the rayon pool (freeing
    /// 10k functions one by one on the coordinating thread would hold up the next stage).
    fn drop_side_upto(&self, k: u32) {
        let gone: Vec<(Arc<str>, u32)> = self.side.iter().filter(|e| e.key().1 <= k).map(|e| e.key().clone()).collect();
        gone.par_iter().for_each(|key| {
            self.side.remove(key);
        });
    }

    fn plan(&self) -> Arc<Plan> {
        self.plan.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The function `name` entering stage `k`, recomputed from the nearest value at hand:
    /// a kept intermediate, a module stage's changed output, or the source. Reads no salsa
    /// query; the stages before `k` must have been brought up to date in this revision (the
    /// stage-by-stage run guarantees it).
    fn materialize(&self, name: &Arc<str>, k: u32, cancel: &dyn Fn()) -> Result<Arc<Function>, PassError> {
        let plan = self.plan();
        let missing = || PassError::msg(format!("internal: no value of function {name} entering stage {k}"));
        // Down to the nearest value at hand.
        let mut j = k;
        let mut func = loop {
            if let Some(f) = self.side(name, j) {
                break f;
            }
            if j == 0 {
                break self.sources.get(name).map(|f| f.clone()).ok_or_else(missing)?;
            }
            let prev = plan.stages.get(j as usize - 1).ok_or_else(missing)?;
            if !prev.is_function() {
                if let Some(f) = self.kept.get(&(name.clone(), j - 1)) {
                    break f.clone();
                }
            }
            j -= 1;
        };
        // Up again, running the function stages (module stages that left the function as
        // it came are skipped; ones that changed it were found on the way down).
        while j < k {
            let stage = plan.stages.get(j as usize).ok_or_else(missing)?;
            if stage.is_function() {
                let view = view_with(name, &func, |callee| self.sig(callee, j));
                func = run_passes(stage, name, func, &view, cancel)?.0;
            } else if let Some(f) = self.kept.get(&(name.clone(), j)) {
                func = f.clone();
            }
            j += 1;
        }
        self.put_side(name, k, func.clone());
        Ok(func)
    }
}

/// What the queries need beyond salsa.
#[salsa::db]
pub(crate) trait Db: salsa::Database {
    /// The session's roots.
    fn roots(&self) -> Roots;
    /// Notes that stage `stage` of `name` is being computed (for the run's statistics).
    fn record(&self, stage: u32, name: &Arc<str>);
    /// The untracked mirror of what recomputing intermediates needs.
    fn mirror(&self) -> &Mirror;
}

/// The database. Clones are handles on the same storage; one per worker.
#[salsa::db]
#[derive(Clone)]
pub(crate) struct SessionDb {
    storage: salsa::Storage<Self>,
    roots: Option<Roots>,
    log: Arc<Mutex<Log>>,
    pub(crate) mirror: Arc<Mirror>,
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
        self.mirror.first_logged.fetch_min(stage, Ordering::Relaxed);
        self.log.lock().unwrap_or_else(PoisonError::into_inner).push((stage, name.clone()));
    }

    fn mirror(&self) -> &Mirror {
        &self.mirror
    }
}

impl SessionDb {
    /// A database with an empty function list and `plan`.
    pub(crate) fn new(plan: Plan) -> SessionDb {
        let plan = Arc::new(plan);
        let mirror =
            Mirror { plan: RwLock::new(plan.clone()), first_logged: AtomicU32::new(u32::MAX), ..Mirror::default() };
        let mut db = SessionDb {
            storage: salsa::Storage::default(),
            roots: None,
            log: Arc::new(Mutex::new(Vec::new())),
            mirror: Arc::new(mirror),
        };
        let roots = Roots::new(&db, Arc::new(FuncList::default()), plan);
        db.roots = Some(roots);
        db
    }

    /// Takes the recorded (stage, function) computations.
    pub(crate) fn take_log(&self) -> Log {
        self.mirror.first_logged.store(u32::MAX, Ordering::Relaxed);
        std::mem::take(&mut *self.log.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[salsa::tracked(returns(clone))]
fn stage_desc<'db>(db: &'db dyn Db, id: StageId<'db>) -> Option<Stage> {
    db.roots().plan(db).stages.get(id.stage(db) as usize).cloned()
}

#[salsa::tracked(returns(clone))]
fn source<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<SrcOut> {
    let src = *db.roots().funcs(db).map.get(key.name(db))?;
    let func = src.func(db).0;
    Some(SrcOut(Val { fp: fingerprint(&func), sig: Sig::of(&func), func }))
}

#[salsa::tracked(returns(clone))]
fn names_at<'db>(db: &'db dyn Db, id: StageId<'db>) -> Names {
    let k = id.stage(db);
    if k == 0 {
        return Names(db.roots().funcs(db).names.clone());
    }
    let prev = StageId::new(db, k - 1);
    match stage_desc(db, prev) {
        Some(stage) if !stage.is_function() => match &*barrier(db, prev).0 {
            Ok(val) => Names(val.names.clone()),
            Err(_) => names_at(db, prev),
        },
        _ => names_at(db, prev),
    }
}

/// The function `name` entering stage `k`: `None` when there is no such function then.
/// Depends (in salsa's sense) on the previous stage's result for `name` only.
fn stage_input(db: &dyn Db, name: &Arc<str>, k: u32) -> Option<Result<Val, PassError>> {
    if k == 0 {
        return source(db, Key::new(db, name.clone(), 0)).map(|s| Ok(s.0));
    }
    let prev = k - 1;
    let (fp, sig, func) = match stage_desc(db, StageId::new(db, prev))? {
        stage if stage.is_function() => match fn_stage(db, Key::new(db, name.clone(), prev))? {
            Ok(out) => (out.fp, out.sig, out.func),
            Err(e) => return Some(Err(e)),
        },
        _ => match barrier_fn(db, Key::new(db, name.clone(), prev))? {
            Ok(out) => (out.fp, out.sig, out.kept),
            Err(e) => return Some(Err(e)),
        },
    };
    let func = match func.or_else(|| db.mirror().side(name, k)) {
        Some(func) => func,
        None => match db.mirror().materialize(name, k, &|| db.unwind_if_revision_cancelled()) {
            Ok(func) => func,
            Err(e) => return Some(Err(e)),
        },
    };
    Some(Ok(Val { func, fp, sig }))
}

#[salsa::tracked(returns(clone))]
fn signature<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<Sig> {
    let (name, k) = (key.name(db), key.stage(db));
    let sig = signature_of(db, name, k);
    db.mirror().set_sig(name, k, sig.clone());
    sig
}

fn signature_of(db: &dyn Db, name: &Arc<str>, k: u32) -> Option<Sig> {
    if k == 0 {
        return source(db, Key::new(db, name.clone(), 0)).map(|s| s.0.sig);
    }
    let prev = k - 1;
    match stage_desc(db, StageId::new(db, prev))? {
        stage if stage.is_function() => fn_stage(db, Key::new(db, name.clone(), prev))?.ok().map(|out| out.sig),
        _ => barrier_fn(db, Key::new(db, name.clone(), prev))?.ok().map(|out| out.sig),
    }
}

/// The read-only module a function pass sees: the function itself and the globals it
/// references, each as its signature entering the stage. Callers depend only on their
/// callees' signatures, so a pass must read no more than a callee's signature from the view.
fn module_view(db: &dyn Db, name: &Arc<str>, func: &Arc<Function>, k: u32) -> Module {
    view_with(name, func, |callee| signature(db, Key::new(db, Arc::from(callee), k)).map(|sig| sig.0))
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

/// A module view of `func` with its callees as `lookup` gives them.
pub(crate) fn view_with(
    name: &Arc<str>,
    func: &Arc<Function>,
    lookup: impl Fn(&str) -> Option<Arc<Function>>,
) -> Module {
    let mut view = Module::new();
    // The names are distinct, so adding cannot fail.
    let _ = view.add(name, func.clone());
    for callee in callees(name, func) {
        if let Some(f) = lookup(callee) {
            let _ = view.add(callee, f);
        }
    }
    view
}

/// Runs a function stage's passes on `func` (named `name`) with the module view `view`:
/// the output and, per pass, its diagnostics.
pub(crate) fn run_passes(
    stage: &Stage,
    name: &Arc<str>,
    mut func: Arc<Function>,
    view: &Module,
    cancel: &dyn Fn(),
) -> Result<(Arc<Function>, StageDiags), PassError> {
    let StageKind::Function(passes) = &stage.kind else {
        return Err(PassError::msg(format!("stage {} is not a function stage", stage.label)));
    };
    let mut diags = Vec::with_capacity(passes.len());
    for (i, pass) in passes.iter().enumerate() {
        cancel();
        let skip = !(stage.split && i == 0) && func.attrs().flag(fn_attr::SKIP_OPTIMIZATION);
        let (Some(fpass), false) = (pass.as_function(), skip) else {
            diags.push(Vec::new());
            continue;
        };
        let info = pass.info();
        let worker = stage.ctx.worker_copy();
        let res = {
            let _scope = worker.push_silently();
            match catch_unwind(AssertUnwindSafe(|| fpass.body()(func.clone(), view, &worker))) {
                Ok(res) => res.map_err(|e| e.in_pass(&info.name, Some(name))),
                Err(payload) => Err(PassError::panicked(&info.name, Some(name), &*payload)),
            }
        };
        worker.diagnostics().fill_function(name);
        diags.push(worker.diagnostics().take());
        func = res?;
    }
    // Most stages report nothing: share one empty list instead of allocating one per
    // function and stage.
    static NO_DIAGNOSTICS: LazyLock<StageDiags> = LazyLock::new(Arc::default);
    let diags = if diags.iter().all(Vec::is_empty) { NO_DIAGNOSTICS.clone() } else { Arc::new(diags) };
    Ok((func, diags))
}

/// Runs a function stage's passes on `input` and summarises the output (see [`StageOut`];
/// `func` is left `None`). Also returns the output.
pub(crate) fn run_function_stage(
    stage: &Stage,
    name: &Arc<str>,
    input: &Val,
    view: &Module,
    cancel: &dyn Fn(),
) -> Result<(Arc<Function>, StageOut), PassError> {
    let (out, diags) = run_passes(stage, name, input.func.clone(), view, cancel)?;
    // A pass that changed nothing returns its input.
    let fp = if Arc::ptr_eq(&out, &input.func) { input.fp } else { fingerprint(&out) };
    let sig = Sig::after(&input.func, &input.sig, &out);
    let added_refs = if fp == input.fp || Arc::ptr_eq(&out, &input.func) {
        None
    } else {
        let before = callees(name, &input.func);
        let added: Vec<Arc<str>> =
            callees(name, &out).into_iter().filter(|c| before.binary_search(c).is_err()).map(Arc::from).collect();
        (!added.is_empty()).then(|| Arc::from(added))
    };
    Ok((out, StageOut { fp, sig, diags, added_refs, func: None }))
}

/// Runs a module stage's pass on `module`.
pub(crate) fn run_module_stage(stage: &Stage, module: Module) -> Result<(Module, Vec<Diagnostic>), PassError> {
    let StageKind::Module(pass) = &stage.kind else {
        return Err(PassError::msg(format!("stage {} is not a module stage", stage.label)));
    };
    let worker = stage.ctx.worker_copy();
    let res = {
        let _scope = worker.push_silently();
        call_pass(&**pass, module, &worker)
    };
    res.map(|m| (m, worker.diagnostics().take()))
}

/// One function of a module stage's output, given its input (if it had one).
pub(crate) fn mod_out(input: Option<&Val>, out: &Arc<Function>) -> ModOut {
    match input {
        Some(v) if Arc::ptr_eq(&v.func, out) || same_function(&v.func, out) => {
            ModOut { fp: v.fp, sig: v.sig.clone(), kept: None }
        }
        Some(v) => ModOut { fp: fingerprint(out), sig: Sig::after(&v.func, &v.sig, out), kept: Some(out.clone()) },
        None => ModOut { fp: fingerprint(out), sig: Sig::of(out), kept: Some(out.clone()) },
    }
}

#[salsa::tracked(returns(clone))]
fn fn_stage<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<Result<StageOut, PassError>> {
    let (name, k) = (key.name(db).clone(), key.stage(db));
    let stage = stage_desc(db, StageId::new(db, k))?;
    if !stage.is_function() {
        return None;
    }
    let input = match stage_input(db, &name, k)? {
        Ok(input) => input,
        Err(e) => return Some(Err(e)),
    };
    let view = module_view(db, &name, &input.func, k);
    db.record(k, &name);
    let res = run_function_stage(&stage, &name, &input, &view, &|| db.unwind_if_revision_cancelled());
    Some(res.map(|(func, mut out)| {
        db.mirror().put_side(&name, k + 1, func.clone());
        if stage.keep_output {
            out.func = Some(func);
        }
        out
    }))
}

#[salsa::tracked(returns(clone))]
fn barrier<'db>(db: &'db dyn Db, id: StageId<'db>) -> BarrierOut {
    let k = id.stage(db);
    let stage = stage_desc(db, id);
    let empty = || BarrierVal { names: Arc::default(), outs: FxHashMap::default(), diags: Vec::new() };
    let Some(stage) = stage.filter(|s| !s.is_function()) else {
        return BarrierOut(Arc::new(Ok(empty())));
    };
    let names = names_at(db, id);
    let mut module = Module::new();
    let mut inputs: FxHashMap<Arc<str>, Val> = FxHashMap::default();
    for name in names.0.iter() {
        match stage_input(db, name, k) {
            Some(Ok(input)) => {
                let _ = module.add(name, input.func.clone());
                inputs.insert(name.clone(), input);
            }
            Some(Err(e)) => return BarrierOut(Arc::new(Err(e))),
            None => {}
        }
    }
    for name in names.0.iter() {
        db.record(k, name);
    }
    db.unwind_if_revision_cancelled();
    let mirror = db.mirror();
    mirror.kept.retain(|(_, s), _| *s != k);
    let res = run_module_stage(&stage, module).map(|(out, diags)| {
        let mut outs = FxHashMap::default();
        for (name, func) in out.entries() {
            let o = mod_out(inputs.get(name), func);
            if let Some(kept) = &o.kept {
                mirror.kept.insert((name.clone(), k), kept.clone());
            }
            mirror.put_side(name, k + 1, func.clone());
            outs.insert(name.clone(), o);
        }
        BarrierVal { names: Arc::new(out.entries().iter().map(|(n, _)| n.clone()).collect()), outs, diags }
    });
    BarrierOut(Arc::new(res))
}

#[salsa::tracked(returns(clone))]
fn barrier_fn<'db>(db: &'db dyn Db, key: Key<'db>) -> Option<Result<ModOut, PassError>> {
    let out = barrier(db, StageId::new(db, key.stage(db)));
    match &*out.0 {
        Ok(val) => val.outs.get(key.name(db)).map(|o| Ok(o.clone())),
        Err(e) => Some(Err(e.clone())),
    }
}

/// What one stage of a run did.
pub(crate) struct StageRun {
    pub(crate) names: Names,
    pub(crate) time: Duration,
}

/// The result of running every stage.
pub(crate) struct Ran {
    pub(crate) module: Module,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) stages: Vec<StageRun>,
    /// Every stage's output, when every function of every stage had one.
    pub(crate) outputs: Option<Vec<StageCache>>,
}

/// What one stage produced, for every function entering it (in module order).
#[derive(Clone)]
pub(crate) enum StageCache {
    /// A function stage: one output per name entering it.
    Function { names: Arc<Vec<Arc<str>>>, outs: Vec<StageOut> },
    /// A module stage: one output per name leaving it, and the pass's diagnostics.
    Module { names: Arc<Vec<Arc<str>>>, outs: Vec<ModOut>, diags: Vec<Diagnostic> },
}

/// Runs every stage in order, fanning function stages out over `threads` workers. May unwind
/// with `salsa::Cancelled` when an input is set meanwhile. `restructured` says the function
/// list or the plan changed since the last run, so module passes will likely run again.
pub(crate) fn run_stages(db: &SessionDb, threads: usize, restructured: bool) -> Result<Ran, PassError> {
    let mirror = db.mirror.clone();
    mirror.side.clear();
    let res = run_stages_inner(db, threads, restructured);
    mirror.side.clear();
    res
}

fn run_stages_inner(db: &SessionDb, threads: usize, restructured: bool) -> Result<Ran, PassError> {
    let plan = db.roots().plan(db);
    let mut diagnostics = Vec::new();
    let mut stages = Vec::with_capacity(plan.stages.len());
    let mut outputs = Some(Vec::with_capacity(plan.stages.len()));
    for (k, stage) in plan.stages.iter().enumerate() {
        let start = Instant::now();
        let k = k as u32;
        let id = StageId::new(db, k);
        let names = names_at(db, id);
        match &stage.kind {
            StageKind::Function(passes) => {
                let outs = fan_out(db, &names.0, threads, |db, name| fn_stage(db, Key::new(db, name.clone(), k)));
                let mut ok = Vec::with_capacity(outs.len());
                for out in outs.into_iter().flatten() {
                    ok.push(out?);
                }
                // Pass-major order, as a serial run reports them.
                for j in 0..passes.len() {
                    for out in &ok {
                        diagnostics.extend(out.diags.get(j).into_iter().flatten().cloned());
                    }
                }
                if ok.len() != names.0.len() {
                    outputs = None;
                }
                if let Some(outputs) = &mut outputs {
                    outputs.push(StageCache::Function { names: names.0.clone(), outs: ok });
                }
            }
            StageKind::Module(_) => {
                // The pass needs every function entering it: when functions were reused
                // rather than recomputed, recompute their inputs in parallel first (outside
                // any query), instead of one by one inside the barrier query.
                if restructured || db.mirror.first_logged.load(Ordering::Relaxed) < k {
                    let mirror = &db.mirror;
                    fan_out(db, &names.0, threads, |_, name| {
                        if mirror.side(name, k).is_none() && mirror.sources.contains_key(name) {
                            // An error here is met again, and reported, by the barrier.
                            let _ = mirror.materialize(name, k, &|| {});
                        }
                    });
                }
                match &*barrier(db, id).0 {
                    Ok(val) => {
                        diagnostics.extend(val.diags.iter().cloned());
                        let outs: Option<Vec<ModOut>> = val.names.iter().map(|n| val.outs.get(n).cloned()).collect();
                        match (&mut outputs, outs) {
                            (Some(outputs), Some(outs)) => outputs.push(StageCache::Module {
                                names: val.names.clone(),
                                outs,
                                diags: val.diags.clone(),
                            }),
                            _ => outputs = None,
                        }
                    }
                    Err(e) => return Err(e.clone()),
                }
            }
        }
        db.mirror.drop_side_upto(k);
        stages.push(StageRun { names, time: start.elapsed() });
    }
    let n = plan.stages.len() as u32;
    let names = names_at(db, StageId::new(db, n));
    let mut module = Module::new();
    for name in names.0.iter() {
        if let Some(res) = stage_input(db, name, n) {
            let _ = module.add(name, res?.func);
        }
    }
    Ok(Ran { module, diagnostics, stages, outputs })
}

fn fan_out<T: Send>(
    db: &SessionDb,
    names: &[Arc<str>],
    threads: usize,
    f: impl Fn(&SessionDb, &Arc<str>) -> T + Sync,
) -> Vec<T> {
    if threads <= 1 || names.len() <= 1 {
        return names.iter().map(|name| f(db, name)).collect();
    }
    let chunk = names.len().div_ceil(threads);
    let done: Vec<Vec<T>> = names
        .par_chunks(chunk)
        .map_with(db.clone(), |db, chunk| chunk.iter().map(|name| f(db, name)).collect())
        .collect();
    done.into_iter().flatten().collect()
}
