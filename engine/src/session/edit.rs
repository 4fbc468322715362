//! The session's one edit-propagation algorithm ([`run_edit`]), over a store of what the last
//! run kept ([`EditStore`]). Three stores: the default mode's cache keeps every stage's outputs
//! (`fast.rs`), lean mode keeps signature stubs and replays the rest from the sources
//! (`lean.rs`), a run record decodes what an edit reaches from the persistent store
//! (`record.rs`). They answer the same questions — what enters stage `k`, what a caller sees
//! of a callee there, what the pass produced for a function last time — and record a stage's
//! new results in their own way; the trait holds only what they answer differently, and the
//! propagation is written once, here.
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
use super::prims::prims_of;
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
/// run's updates of the stages before `k`. Only what the three stores answer differently is
/// here (docs/incremental.md, "The edit store"); the propagation, the order of the stored
/// diagnostics and what is skipped after the last stage are `edit.rs`'s. The module re-run
/// methods have defaults that give up, for a store that keeps too little to re-run a module
/// pass (`record.rs`).
pub(crate) trait EditStore {
    /// How many stages the store has results for.
    fn num_stages(&self) -> usize;
    /// Makes `new` the source of `name`; returns the source it replaces (`None`: the store has
    /// no function of that name, and nothing changed).
    fn swap_source(&mut self, name: &Arc<str>, new: Arc<Function>) -> Option<Arc<Function>>;
    /// What enters stage `k` now (`k` up to the number of stages: after the last one).
    fn entering(&self, k: usize) -> Entering<'_>;
    /// The function `name` entering stage `k` now, for a function whose input did not change
    /// at `k` (a changed one's input is in the change set).
    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>>;
    /// What a function pass at stage `k` sees of `callee` in its module view, for a callee
    /// whose input did not change at `k`: by default its input.
    fn callee(&self, k: usize, callee: &str) -> Option<Arc<Function>> {
        self.input(k, callee)
    }
    /// The referrer index (global → functions referencing it in some stage's input, a
    /// superset): notes that each of `noted` is now an input of some stage, then returns the
    /// functions referencing one of `callees` (nothing, and nothing built, when it is empty).
    fn referrers(&mut self, noted: Named, callees: &FxHashSet<&str>) -> Vec<Arc<str>>;
    /// Function stage `k`'s previous output for `name` (at position `at`), whose previous
    /// input was `old_in`. Asked for every function of a stage before any is recorded.
    fn previous_output(
        &self,
        stage: &Stage,
        k: usize,
        at: usize,
        name: &Arc<str>,
        old_in: Arc<Function>,
    ) -> Result<FnVal, GiveUp>;
    /// Records function stage `k`'s new output for `name` (at position `at`), whose input
    /// changed to `new_in` (`None`: the input is as stored) and whose key in the stage's
    /// persistent store is `key` (when the stage has one); returns whether its diagnostics
    /// changed.
    fn record_output(
        &mut self,
        k: usize,
        at: usize,
        name: &Arc<str>,
        new_in: Option<&Arc<Function>>,
        out: StageOut,
        key: Option<StageKey>,
    ) -> Result<bool, GiveUp>;
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
    /// Records module stage `k`'s new output `out` (from `input`, the functions `names`, of
    /// which `changed` changed) and diagnostics; returns its previous output, in order, and
    /// whether the diagnostics changed.
    fn record_module_output(
        &mut self,
        k: usize,
        names: &Names,
        input: &Module,
        changed: &Changed,
        out: Module,
        diags: Vec<Diagnostic>,
    ) -> Result<(Named, bool), GiveUp> {
        let _ = (k, names, input, changed, out, diags);
        Err(GiveUp)
    }
    /// The last run's output module and diagnostics (before moving them with their functions'
    /// spans), to update after the last stage, and, when `diagnostics` asks for them, every
    /// stage's diagnostics as stored now; `changed` are the functions whose final output
    /// changed (a store that keeps no output module takes them here).
    fn output(&mut self, changed: &Changed, diagnostics: bool) -> Output<'_>;
}

/// What enters a stage, as a store has it.
pub(crate) struct Entering<'a> {
    /// The functions, in order.
    pub(crate) names: Names,
    /// Where each is among them, for a function stage (`None` for any other stage).
    pub(crate) positions: Option<Positions>,
    /// The PrimFuncs (in a module without graph functions): those leaving the last module
    /// stage before it, else the loaded ones.
    pub(crate) prims: &'a Module,
}

/// The last run's output as a store keeps it ([`EditStore::output`]).
pub(crate) struct Output<'a> {
    pub(crate) module: &'a mut Module,
    pub(crate) diagnostics: &'a mut Vec<Diagnostic>,
    /// Per stage, its diagnostics as stored now, when asked for.
    pub(crate) stages: Option<Vec<StageDiagnostics<'a>>>,
}

/// A stage's diagnostics as a store has them.
pub(crate) enum StageDiagnostics<'a> {
    /// A function stage's: per function in module order (those that reported nothing may be
    /// left out), per pass.
    Function(Vec<&'a Vec<Vec<Diagnostic>>>),
    /// A module stage's.
    Module(&'a [Diagnostic]),
}

/// Every stage's diagnostics as a store has them (`per_stage`), in the order a serial run
/// reports them.
fn collect_diagnostics(stages: &[Arc<Stage>], per_stage: Vec<StageDiagnostics<'_>>) -> Result<Vec<Diagnostic>, GiveUp> {
    if per_stage.len() != stages.len() {
        return Err(GiveUp);
    }
    let mut diagnostics = Vec::new();
    for (stage, stored) in stages.iter().zip(per_stage) {
        match (stage.planned.function_passes(), stored) {
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
        let Some(old) = store.swap_source(name, new.clone()) else { return Err(Stop::GiveUp) };
        if same_function(&old, new) {
            // The same function: the stored source stays.
            store.swap_source(name, old);
        } else {
            changed.insert(name.clone(), (old, new.clone()));
        }
    }
    // New stage inputs not yet given to the referrer index (it is told in batches).
    let mut noted: Named = changed.iter().map(|(name, (_, new))| (name.clone(), new.clone())).collect();
    let mut stages = Vec::with_capacity(stages_in.len());
    let mut diags_changed = false;
    // Whether the PrimFuncs entering the stage differ from last time (a barrier before it
    // made other ones); the loaded PrimFuncs did not change (that is a list change).
    let mut prims_changed = false;
    for (k, stage) in stages_in.iter().enumerate() {
        let start = Instant::now();
        let (next, recomputed, entered) = if stage.is_function() {
            let last = k + 1 == stages_in.len();
            function_stage(stage, k, last, store, &changed, &mut noted, &mut diags_changed, remember)?
        } else {
            module_stage(stage, k, store, &changed, &mut prims_changed, &mut diags_changed)?
        };
        noted.extend(next.iter().map(|(name, (_, new))| (name.clone(), new.clone())));
        changed = next;
        stages.push(EditStage { recomputed, entered, time: start.elapsed() });
    }
    store.referrers(noted, &FxHashSet::default());
    // The functions whose final output changed are replaced in the previous output; the
    // function list is the same (a changed list gave up above).
    let prims = prims_changed.then(|| store.entering(stages_in.len()).prims.clone());
    let Output { module: output, diagnostics: kept_diagnostics, stages: stored } =
        store.output(&changed, diags_changed);
    if let Some(stored) = stored {
        *kept_diagnostics = collect_diagnostics(stages_in, stored)?;
    }
    replace_outputs(output, &changed);
    if let Some(prims) = prims {
        output.set_prims_from(&prims);
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

/// One recomputed function of a function stage, before the store records it.
struct Recomputed {
    at: usize,
    name: Arc<str>,
    out: StageOut,
    key: Option<StageKey>,
    /// The previous output; `None` after the last stage, where only the new output matters.
    previous: Option<FnVal>,
}

/// Function stage `k`: re-runs the changed functions and the callers of those whose signature
/// changed. Returns the functions whose output changed, those recomputed and how many entered.
#[allow(clippy::too_many_arguments)]
fn function_stage(
    stage: &Stage,
    k: usize,
    last: bool,
    store: &mut impl EditStore,
    changed: &Changed,
    noted: &mut Named,
    diags_changed: &mut bool,
    remember: bool,
) -> Result<(Changed, Vec<Arc<str>>, usize), Stop> {
    let positions = store.entering(k).positions.ok_or(GiveUp)?;
    let sig_changed: FxHashSet<&str> =
        changed.iter().filter(|(_, (old, new))| !same_signature(old, new)).map(|(n, _)| &**n).collect();
    let mut candidates: FxHashSet<Arc<str>> = changed.keys().cloned().collect();
    if !sig_changed.is_empty() {
        candidates.extend(store.referrers(std::mem::take(noted), &sig_changed));
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
    // Every new and previous output first, then the records: a store may answer a previous
    // output from what it keeps of this stage (lean mode's stubs), which the records update.
    let mut done = Vec::with_capacity(at.len());
    let mut recomputed = Vec::with_capacity(at.len());
    for (i, name) in at {
        let new_in = current(store, changed, k, &name).ok_or(GiveUp)?;
        let old_in = changed.get(&name).map_or_else(|| new_in.clone(), |(old, _)| old.clone());
        let view = view_with(
            &name,
            &new_in,
            |c| match changed.get(c) {
                Some((_, new)) => Some(new.clone()),
                None => store.callee(k, c),
            },
            || prims_of(store.entering(k).prims),
        );
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
        let previous = if last { None } else { Some(store.previous_output(stage, k, i, &name, old_in)?) };
        if computed.get() || stage.persist.is_none() {
            recomputed.push(name.clone());
        }
        done.push(Recomputed { at: i, name, out, key, previous });
    }
    let mut next: Changed = FxHashMap::default();
    for Recomputed { at, name, out, key, previous } in done {
        match previous {
            Some(old) if old == out.func => {}
            Some(old) => {
                next.insert(name.clone(), (old.0, out.func.0.clone()));
            }
            None => {
                next.insert(name.clone(), (out.func.0.clone(), out.func.0.clone()));
            }
        }
        let new_in = changed.get(&name).map(|(_, new)| new);
        *diags_changed |= store.record_output(k, at, &name, new_in, out, key)?;
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
    let entering = store.entering(k);
    let names = entering.names;
    let entered = match stage.planned.prim_passes() {
        Some(_) => entering.prims.num_prims(),
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
        input.set_prims_from(store.entering(k).prims);
        let run = run_module_stage(stage, input.clone()).map_err(Stop::Failed)?;
        let (out, diags) = (run.module, run.diags);
        *prims_changed = !same_prims(store.entering(k + 1).prims, &out);
        let (previous, diags) = store.record_module_output(k, &names, &input, changed, out.clone(), diags)?;
        *diags_changed |= diags;
        let same_names = previous.len() == out.len() && previous.iter().zip(out.entries()).all(|(a, b)| a.0 == b.0);
        if !same_names {
            return Err(Stop::GiveUp);
        }
        for ((name, old), (_, new)) in previous.into_iter().zip(out.entries()) {
            if !same_function(&old, new) {
                next.insert(name, (old, new.clone()));
            }
        }
        recomputed = run.prims_run.unwrap_or_else(|| names.to_vec());
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
