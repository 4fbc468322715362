//! The session's one edit-propagation algorithm ([`run_edit`]), over a store of what the last
//! run kept ([`EditStore`]). The memory modes are the stores: the default mode's cache keeps
//! every stage's outputs (`fast.rs`), lean mode keeps signature stubs and replays the rest from
//! the sources (`lean.rs`). Both answer the same questions — what enters stage `k`, what a
//! caller sees of a callee there, what the pass produced for a function last time — and record
//! a stage's new results in their own way; the propagation itself is written once, here.
//!
//! After edits that only changed function bodies (no function added, removed, renamed or
//! reordered, same plan and settings), a run starts from the store and recomputes only what the
//! edits can reach, stage by stage, carrying the set of functions whose stage input changed
//! (with the old and the new input):
//! - a function stage re-runs its passes on the changed functions and on the callers of the
//!   changed functions whose signature changed (a function pass reads no more than its
//!   callees' signatures); an output equal to the previous one stops the change there;
//! - a module stage whose firewall holds for every change passes the changes through; any
//!   other module stage with a changed input re-runs its pass on the whole module and passes on
//!   the functions whose output differs; when the pass adds, removes or reorders functions,
//!   the edit path gives up (the session then runs cold: salsa in the default mode);
//! - the output module and diagnostics (pass-major within a function stage, as a serial run
//!   reports them) are assembled from the updated store.
//!
//! Invariant: an edit run's output and diagnostics are those of a cold serial run on the
//! edited module (the parity properties check it for both stores). What it deliberately does
//! not do: update salsa's memos (salsa stays consistent with its inputs and recomputes what
//! changed when next asked), run function stages in parallel (an edit touches few functions),
//! or handle list or plan changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{
    callees, extend_pass_major, replace_outputs, run_function_stage, run_module_stage, view_with, FnVal, StageOut,
};
use super::plan::Stage;
use super::same::{same_function, same_prims, same_signature};
use super::store::StageKey;
use super::FirewallCheck;
use crate::ir::{Function, Module};
use crate::transform::{Diagnostic, PassError};

/// Where each function is in a stage's list (or outputs).
pub(crate) type Positions = Arc<FxHashMap<Arc<str>, usize>>;

/// Global name → the functions referencing it.
pub(crate) type Referrers = FxHashMap<Arc<str>, FxHashSet<Arc<str>>>;

/// A function whose stage input changed: its old and new input.
pub(crate) type Changed = FxHashMap<Arc<str>, (Arc<Function>, Arc<Function>)>;

/// Functions with their names, in module order.
pub(crate) type Named = Vec<(Arc<str>, Arc<Function>)>;

/// A list of function names, in module order.
pub(crate) type Names = Arc<Vec<Arc<str>>>;

/// The store cannot answer for this edit (a replay failed, a list is not what was stored):
/// the edit path gives up and the session runs cold.
pub(crate) struct GiveUp;

/// What the last run kept, as the edit path reads and updates it: what entered each stage and
/// what it gave, what a caller saw of a callee, who references whom, and the output. Stage
/// numbers are positions in the plan variant the store was made with; "now" means after this
/// run's updates of the stages before `k`. The module-stage re-run methods have defaults that
/// give up, for a store that keeps too little to re-run a module pass (`record.rs`).
pub(crate) trait EditStore {
    /// How many stages the store has results for.
    fn num_stages(&self) -> usize;
    /// The source of `name` as last stored.
    fn source(&self, name: &str) -> Option<Arc<Function>>;
    /// Stores `new` as the source of `name`.
    fn set_source(&mut self, name: &Arc<str>, new: Arc<Function>);
    /// Notes that `func` is now an input of some stage for `name` (the referrer index is a
    /// superset of who references what).
    fn note(&mut self, name: &Arc<str>, func: &Function);
    /// The functions referencing one of `callees` in some stage's input (a superset).
    fn referrers_of(&mut self, callees: &FxHashSet<&str>) -> Vec<Arc<str>>;
    /// Where each function entering function stage `k` is in its list.
    fn positions(&self, k: usize) -> Option<Positions>;
    /// The functions entering stage `k`, in order.
    fn names_at(&self, k: usize) -> Names;
    /// The function `name` entering stage `k` now, for a function whose input did not change
    /// at `k` (a changed one's input is in the change set).
    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>>;
    /// What a function pass at stage `k` sees of `callee` in its module view, for a callee
    /// whose input did not change at `k`: by default its input.
    fn callee(&self, k: usize, callee: &str) -> Option<Arc<Function>> {
        self.input(k, callee)
    }
    /// Function stage `k`'s previous output for `name` (at position `at`), whose previous
    /// input was `old_in`. `Ok(None)` when the store does not need it: after the last stage
    /// only the new output matters.
    fn previous_output(
        &self,
        stage: &Stage,
        k: usize,
        at: usize,
        name: &Arc<str>,
        old_in: Arc<Function>,
        last: bool,
    ) -> Result<Option<FnVal>, GiveUp>;
    /// Records function stage `k`'s new output for `name` (at position `at`), whose key in
    /// the stage's persistent store is `key` (when the stage has one); returns whether its
    /// diagnostics changed.
    fn record_output(
        &mut self,
        k: usize,
        at: usize,
        name: &Arc<str>,
        out: StageOut,
        key: Option<StageKey>,
    ) -> Result<bool, GiveUp>;
    /// After function stage `k`: `changed` are the functions whose input to it changed.
    fn function_stage_done(&mut self, k: usize, changed: &Changed) {
        let _ = (k, changed);
    }
    /// Whether module stage `k`'s pass left `name` as it came in the last run (or dropped
    /// it), `old` being its input then.
    fn left_as_it_came(&self, k: usize, name: &Arc<str>, old: &Arc<Function>) -> bool;
    /// Module stage `k` passes `new` through for `name` (its firewall holds); returns whether
    /// `name` leaves the stage.
    fn pass_through(&mut self, k: usize, name: &Arc<str>, new: &Arc<Function>) -> bool;
    /// The module entering stage `k` now (`names`), the changed functions' new inputs
    /// included, for a module stage to re-run on.
    fn module_input(&self, k: usize, names: &Names, changed: &Changed) -> Result<Module, GiveUp> {
        let _ = (k, names, changed);
        Err(GiveUp)
    }
    /// Module stage `k`'s previous output, in order; `input` is its input now.
    fn previous_module_output(&self, k: usize, input: &Module, changed: &Changed) -> Result<Named, GiveUp> {
        let _ = (k, input, changed);
        Err(GiveUp)
    }
    /// Records module stage `k`'s new output `out` (from `input`, the functions `names`) and
    /// diagnostics; returns whether the diagnostics changed.
    fn record_module_output(
        &mut self,
        k: usize,
        names: &Names,
        input: &Module,
        out: Module,
        diags: Vec<Diagnostic>,
    ) -> Result<bool, GiveUp> {
        let _ = (k, names, input, out, diags);
        Err(GiveUp)
    }
    /// The PrimFuncs entering stage `k` now (in a module without graph functions): those
    /// leaving the last module stage before it, else the loaded ones.
    fn prims_at(&self, k: usize) -> &Module;
    /// Stage `k`'s diagnostics as stored now.
    fn stage_diagnostics(&self, k: usize) -> StageDiagnostics<'_>;
    /// The last run's output module and diagnostics (before moving them with their functions'
    /// spans), to update after the last stage; `changed` are the functions whose final output
    /// changed (a store that keeps no output module takes them here).
    fn output(&mut self, changed: &Changed) -> (&mut Module, &mut Vec<Diagnostic>);
}

/// A stage's diagnostics as a store has them.
pub(crate) enum StageDiagnostics<'a> {
    /// A function stage's: per function in module order (those that reported nothing may be
    /// left out), per pass.
    Function(Vec<&'a Vec<Vec<Diagnostic>>>),
    /// A module stage's.
    Module(&'a [Diagnostic]),
}

/// Every stage's diagnostics as `store` has them now, in the order a serial run reports them.
fn collect_diagnostics(stages: &[Arc<Stage>], store: &impl EditStore) -> Result<Vec<Diagnostic>, GiveUp> {
    let mut diagnostics = Vec::new();
    for (k, stage) in stages.iter().enumerate() {
        match (stage.planned.function_passes(), store.stage_diagnostics(k)) {
            (Some(passes), StageDiagnostics::Function(per_function)) => {
                extend_pass_major(&mut diagnostics, passes.len(), per_function.into_iter());
            }
            (None, StageDiagnostics::Module(diags)) => diagnostics.extend(diags.iter().cloned()),
            _ => return Err(GiveUp),
        }
    }
    Ok(diagnostics)
}

/// Notes in `referrers` the globals `func` (named `name`) references.
pub(crate) fn add_referrers(referrers: &mut Referrers, name: &Arc<str>, func: &Function) {
    for callee in callees(name, func) {
        referrers.entry(Arc::from(callee)).or_default().insert(name.clone());
    }
}

/// The functions `referrers` lists for one of `callees`.
pub(crate) fn referrers_in(referrers: &Referrers, callees: &FxHashSet<&str>) -> Vec<Arc<str>> {
    callees.iter().flat_map(|callee| referrers.get(*callee).into_iter().flatten().cloned()).collect()
}

/// One stage of an edit run (or of a lean cold run): the functions recomputed (module order),
/// the functions that entered it, and its wall time.
pub(crate) struct EditStage {
    pub(crate) recomputed: Vec<Arc<str>>,
    pub(crate) entered: usize,
    pub(crate) time: Duration,
}

/// The result of an edit run (or of a lean cold run).
pub(crate) struct EditRun {
    pub(crate) module: Module,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) stages: Vec<EditStage>,
}

/// Runs `stages_in` (the plan variant `store` was made with) after the loaded functions in
/// `edited` changed, updating `store`. `Ok(None)` means the edit path cannot handle the edit (a
/// module pass changed the function list, a recomputed function failed a fused stage's
/// run-time check, a function pass failed — the cold run picks the error a serial run reports
/// — or the store gave up); on `Ok(None)` or an error, `store` is left partly updated and must
/// be dropped.
///
/// With `remember`, every function-stage result computed is kept in its stage's
/// `EditResults`, for the next run through salsa (whose memos this run does not update).
pub(crate) fn run_edit(
    stages_in: &[Arc<Stage>],
    store: &mut impl EditStore,
    edited: &FxHashMap<Arc<str>, Arc<Function>>,
    remember: bool,
) -> Result<Option<EditRun>, PassError> {
    match propagate(stages_in, store, edited, remember) {
        Ok(run) => Ok(Some(run)),
        Err(Stop::GiveUp) => Ok(None),
        Err(Stop::Failed(e)) => Err(e),
    }
}

/// Why propagation stopped early.
enum Stop {
    GiveUp,
    Failed(PassError),
}

impl From<GiveUp> for Stop {
    fn from(_: GiveUp) -> Stop {
        Stop::GiveUp
    }
}

fn propagate(
    stages_in: &[Arc<Stage>],
    store: &mut impl EditStore,
    edited: &FxHashMap<Arc<str>, Arc<Function>>,
    remember: bool,
) -> Result<EditRun, Stop> {
    if store.num_stages() != stages_in.len() {
        return Err(Stop::GiveUp);
    }
    let mut changed: Changed = FxHashMap::default();
    for (name, new) in edited {
        let Some(old) = store.source(name) else { return Err(Stop::GiveUp) };
        if !same_function(&old, new) {
            changed.insert(name.clone(), (old, new.clone()));
        }
    }
    for (name, (_, new)) in &changed {
        store.set_source(name, new.clone());
        store.note(name, new);
    }
    let mut stages = Vec::with_capacity(stages_in.len());
    let mut diags_changed = false;
    // Whether the PrimFuncs entering the stage differ from last time (a barrier before it
    // made other ones); the loaded PrimFuncs did not change (that is a list change).
    let mut prims_changed = false;
    for (k, stage) in stages_in.iter().enumerate() {
        let start = Instant::now();
        let (next, recomputed, entered) = if stage.is_function() {
            let last = k + 1 == stages_in.len();
            function_stage(stage, k, last, store, &changed, &mut diags_changed, remember)?
        } else {
            module_stage(stage, k, store, &changed, &mut prims_changed, &mut diags_changed)?
        };
        changed = next;
        stages.push(EditStage { recomputed, entered, time: start.elapsed() });
    }
    // The functions whose final output changed are replaced in the previous output; the
    // function list is the same (a changed list gave up above).
    let prims = prims_changed.then(|| store.prims_at(stages_in.len()).clone());
    let diagnostics = if diags_changed { Some(collect_diagnostics(stages_in, store)?) } else { None };
    let (output, kept_diagnostics) = store.output(&changed);
    replace_outputs(output, &changed);
    if let Some(prims) = prims {
        output.set_prims_from(&prims);
    }
    if let Some(diagnostics) = diagnostics {
        *kept_diagnostics = diagnostics;
    }
    Ok(EditRun { module: output.clone(), diagnostics: kept_diagnostics.clone(), stages })
}

/// The function `name` entering stage `k` now: its new input when it changed, else the store's.
fn current(store: &impl EditStore, changed: &Changed, k: usize, name: &str) -> Option<Arc<Function>> {
    match changed.get(name) {
        Some((_, new)) => Some(new.clone()),
        None => store.input(k, name),
    }
}

/// Function stage `k`: re-runs the changed functions and the callers of those whose signature
/// changed. Returns the functions whose output changed, those recomputed and how many entered.
fn function_stage(
    stage: &Stage,
    k: usize,
    last: bool,
    store: &mut impl EditStore,
    changed: &Changed,
    diags_changed: &mut bool,
    remember: bool,
) -> Result<(Changed, Vec<Arc<str>>, usize), Stop> {
    let positions = store.positions(k).ok_or(GiveUp)?;
    let sig_changed: FxHashSet<&str> =
        changed.iter().filter(|(_, (old, new))| !same_signature(old, new)).map(|(n, _)| &**n).collect();
    let mut candidates: FxHashSet<Arc<str>> = changed.keys().cloned().collect();
    if !sig_changed.is_empty() {
        candidates.extend(store.referrers_of(&sig_changed));
    }
    // The changed functions and the callers of those whose signature changed (candidates
    // from the referrer index, a superset, checked against the stage's input), in module
    // order.
    let mut at: Vec<(usize, Arc<str>)> = candidates
        .into_iter()
        .filter(|name| {
            changed.contains_key(name)
                || current(store, changed, k, name)
                    .is_some_and(|f| callees(name, &f).iter().any(|c| sig_changed.contains(c)))
        })
        .filter_map(|n| positions.get(&n).map(|&i| (i, n)))
        .collect();
    at.sort_unstable_by_key(|(i, _)| *i);
    let mut next: Changed = FxHashMap::default();
    let mut recomputed = Vec::with_capacity(at.len());
    for (i, name) in at {
        let new_in = current(store, changed, k, &name).ok_or(GiveUp)?;
        let old_in = changed.get(&name).map_or_else(|| new_in.clone(), |(old, _)| old.clone());
        let view = view_with(&name, &new_in, |c| match changed.get(c) {
            Some((_, new)) => Some(new.clone()),
            None => store.callee(k, c),
        });
        // A failing pass: the cold run reports the error a serial run reports. A result the
        // persistent store gives is not counted as recomputed (as in `drive`).
        let computed = std::cell::Cell::new(false);
        let out = run_function_stage(stage, &name, new_in.clone(), &view, &|| {}, &|| computed.set(true))
            .map_err(|_| GiveUp)?;
        let key = stage.persist.as_ref().map(|p| p.key(&name, &new_in, &view));
        if out.unfusable {
            return Err(Stop::GiveUp);
        }
        if remember {
            stage.edited.put(&name, &new_in, &view, &out);
        }
        match store.previous_output(stage, k, i, &name, old_in, last)? {
            Some(old) if old == out.func => {}
            Some(old) => {
                next.insert(name.clone(), (old.0, out.func.0.clone()));
            }
            // Only the new output matters after the last stage.
            None => {
                next.insert(name.clone(), (out.func.0.clone(), out.func.0.clone()));
            }
        }
        *diags_changed |= store.record_output(k, i, &name, out, key)?;
        if computed.get() || stage.persist.is_none() {
            recomputed.push(name);
        }
    }
    store.function_stage_done(k, changed);
    for (name, (_, new)) in &next {
        store.note(name, new);
    }
    Ok((next, recomputed, positions.len()))
}

/// Module stage `k` (a module pass, a prelude or a PrimFunc stage): nothing when no input
/// changed; the changes passed through when the stage's firewall holds for each; else the
/// stage re-run on the whole module (a PrimFunc stage re-runs only the PrimFuncs that changed,
/// `prims.rs`). `prims_changed` says whether the PrimFuncs entering it changed, and then
/// whether those leaving it did.
fn module_stage(
    stage: &Stage,
    k: usize,
    store: &mut impl EditStore,
    changed: &Changed,
    prims_changed: &mut bool,
    diags_changed: &mut bool,
) -> Result<(Changed, Vec<Arc<str>>, usize), Stop> {
    let names = store.names_at(k);
    let entered = match stage.planned.prim_passes() {
        Some(_) => store.prims_at(k).num_prims(),
        None => names.len(),
    };
    let mut next: Changed = FxHashMap::default();
    if changed.is_empty() && !*prims_changed {
        return Ok((next, Vec::new(), entered));
    }
    let mut recomputed = Vec::new();
    if !*prims_changed && firewall_holds(stage, k, store, changed) {
        // The pass would leave the changed functions as they come and the rest as they were.
        for (name, (old, new)) in changed {
            if store.pass_through(k, name, new) {
                next.insert(name.clone(), (old.clone(), new.clone()));
            }
        }
    } else {
        let mut input = store.module_input(k, &names, changed)?;
        input.set_prims_from(store.prims_at(k));
        let run = run_module_stage(stage, input.clone()).map_err(Stop::Failed)?;
        let (out, diags) = (run.module, run.diags);
        *prims_changed = !same_prims(store.prims_at(k + 1), &out);
        let previous = store.previous_module_output(k, &input, changed)?;
        let same_names = previous.len() == out.len() && previous.iter().zip(out.entries()).all(|(a, b)| a.0 == b.0);
        if !same_names {
            return Err(Stop::GiveUp);
        }
        for ((name, old), (_, new)) in previous.into_iter().zip(out.entries()) {
            if !same_function(&old, new) {
                next.insert(name, (old, new.clone()));
            }
        }
        *diags_changed |= store.record_module_output(k, &names, &input, out, diags)?;
        recomputed = run.prims_run.unwrap_or_else(|| names.to_vec());
    }
    for (name, (_, new)) in &next {
        store.note(name, new);
    }
    Ok((next, recomputed, entered))
}

/// Whether module stage `k` has a firewall that holds for every change in `changed`: each
/// changed function is unaffected by the firewall's test (which may look up the functions
/// entering the pass now), and the pass left it as it came (or dropped it) in the last run, so
/// it would leave the new input as it comes.
fn firewall_holds(stage: &Stage, k: usize, store: &impl EditStore, changed: &Changed) -> bool {
    let Some(firewall) = &stage.firewall else {
        return false;
    };
    let lookup = |name: &str| current(store, changed, k, name);
    changed.iter().all(|(name, (old, new))| {
        let check = FirewallCheck { name, old, new, lookup: &lookup, ctx: &stage.ctx };
        store.left_as_it_came(k, name, old) && (firewall.unaffected)(&check)
    })
}
