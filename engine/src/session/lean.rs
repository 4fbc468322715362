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
//!   previous stubs, so a change stops where an output equals the previous one, as on the
//!   default edit path (`fast.rs`), and the same functions are reported recomputed.
//!
//! The runs themselves do not use salsa: a cold run runs the stages directly (fanning
//! function stages out like a plain run) and records the above; an edit of function bodies
//! follows `fast.rs` phase by phase. Costs against the default mode: an edit runs each
//! recomputed function's stages but the last twice (new and previous input) plus the
//! replays; a module pass whose firewall does not hold replays every function up to it (in
//! parallel); a change of the function list, the plan or the settings, or a pass error,
//! means a cold run.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::db::{
    callees, extend_pass_major, first_error, replace_outputs, run_function_stage, run_module_stage, view_with,
};
use super::edit::{self, Changed, Positions, Referrers};
use super::fast::{FastRun, FastStage};
use super::plan::{Stage, StageKind};
use super::same::{same_function, same_signature};
use crate::ir::{ExprKind, Function, IdRange, Module, NodeId};
use crate::transform::fanout::pool;
use crate::transform::{Diagnostic, PassError};

/// A list of function names, in module order.
type Names = Arc<Vec<Arc<str>>>;

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
    },
    Module {
        /// The functions leaving the stage, in order.
        out_names: Names,
        /// Functions that entered the stage but did not leave it.
        dropped: FxHashSet<Arc<str>>,
        /// Functions the pass did not leave as they came (or added), with its output.
        modified: FxHashMap<Arc<str>, Arc<Function>>,
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

/// Calls `f` on every item: inline with one thread, else on the executor's cached pool of
/// `threads` workers with work stealing over single items.
fn par_map<I: Sync, T: Send>(items: &[I], threads: usize, f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    match (threads > 1 && items.len() > 1).then(|| pool(threads)).flatten() {
        Some(pool) => pool.install(|| items.par_iter().map(&f).collect()),
        None => items.iter().map(f).collect(),
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

/// Runs `stages` on `sources` (one per name of `names`) from scratch. `Ok(None)` when a function
/// failed the run-time check of a fused stage (run the plan's unfused variant instead).
pub(crate) fn run_cold(
    stages: &[Arc<Stage>],
    names: Names,
    sources: Vec<Arc<Function>>,
    threads: usize,
) -> Result<Option<(Lean, FastRun)>, PassError> {
    let mut current = Module::with_capacity(names.len());
    for (name, f) in names.iter().zip(&sources) {
        // The names are distinct, so adding cannot fail.
        let _ = current.add_shared(name, f.clone());
    }
    let names_index: Positions = Arc::new(names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect());
    let source_of = |name: &str| names_index.get(name).map(|&i| &sources[i]);
    let mut kept = Vec::with_capacity(stages.len());
    let mut runs = Vec::with_capacity(stages.len());
    let mut diagnostics = Vec::new();
    let mut extra_callees: FxHashMap<Arc<str>, Vec<Arc<str>>> = FxHashMap::default();
    // The last function stage's list, index and stubs, to share the index while the list
    // stays and stubs while signatures stay.
    let mut prev: Option<(Names, Positions, Vec<Arc<Function>>)> = None;
    let mut list: Names = names.clone();
    for stage in stages {
        let start = Instant::now();
        let entered: Vec<Arc<str>> = current.entries().iter().map(|(n, _)| n.clone()).collect();
        match &stage.kind {
            StageKind::Function(passes) => {
                let entries = current.entries();
                let results = par_map(entries, stage.threads(threads), |(name, input)| {
                    let view = view_with(name, input, |c| current.get(c).cloned());
                    let out = run_function_stage(stage, name, input.clone(), &view, &|| {});
                    let source = source_of(name);
                    let before = prev.as_ref().and_then(|(_, index, sigs)| index.get(name).map(|&i| &sigs[i]));
                    let sig = sig_for(input, before, source);
                    let extra = match &out {
                        Ok(out) => extra_of(name, &out.func.0, source),
                        Err(_) => Vec::new(),
                    };
                    (out, sig, extra)
                });
                let mut outs = Vec::with_capacity(results.len());
                let mut sigs = Vec::with_capacity(results.len());
                for ((name, _), (out, sig, extra)) in entries.iter().zip(results) {
                    outs.push(out);
                    sigs.push(sig);
                    add_extra(&mut extra_callees, name, extra);
                }
                if outs.iter().any(|out| out.as_ref().is_ok_and(|o| o.unfusable)) {
                    return Ok(None);
                }
                let outs = first_error(outs)?;
                extend_pass_major(&mut diagnostics, passes.len(), outs.iter().map(|out| &*out.diags));
                if *list != entered {
                    list = Arc::new(entered.clone());
                }
                let index: Positions = match &prev {
                    Some((names, index, _)) if Arc::ptr_eq(names, &list) => index.clone(),
                    _ if Arc::ptr_eq(&names, &list) => names_index.clone(),
                    _ => Arc::new(list.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect()),
                };
                let mut next = Module::with_capacity(list.len());
                for (name, out) in list.iter().zip(&outs) {
                    let _ = next.add_shared(name, out.func.0.clone());
                }
                let diags = outs
                    .into_iter()
                    .enumerate()
                    .filter(|(_, o)| o.diags.iter().any(|d| !d.is_empty()))
                    .map(|(i, o)| (i as u32, o.diags))
                    .collect();
                prev = Some((list.clone(), index.clone(), sigs.clone()));
                kept.push(LeanStage::Function { names: list.clone(), index, sigs, diags });
                current = next;
            }
            StageKind::Module(_) => {
                let (out, diags) = run_module_stage(stage, current.clone())?;
                diagnostics.extend(diags.iter().cloned());
                let dropped: FxHashSet<Arc<str>> = entered.iter().filter(|n| !out.contains(n)).cloned().collect();
                let mut modified = FxHashMap::default();
                for (name, f) in out.entries() {
                    if current.get(name).is_none_or(|input| !same_function(input, f)) {
                        modified.insert(name.clone(), f.clone());
                        add_extra(&mut extra_callees, name, extra_of(name, f, source_of(name)));
                    }
                }
                let out_names: Vec<Arc<str>> = out.entries().iter().map(|(n, _)| n.clone()).collect();
                if *list != out_names {
                    list = Arc::new(out_names);
                }
                kept.push(LeanStage::Module { out_names: list.clone(), dropped, modified, diags });
                current = out;
            }
        }
        runs.push(FastStage { recomputed: entered.clone(), entered: entered.len(), time: start.elapsed() });
    }
    let lean = Lean {
        names,
        index: names_index,
        sources,
        stages: kept,
        output: current.clone(),
        diagnostics: diagnostics.clone(),
        extra_callees,
        referrers: None,
    };
    Ok(Some((lean, FastRun { module: current, diagnostics, stages: runs })))
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
            Some(referrers) => {
                for callee in callees(name, func) {
                    referrers.entry(Arc::from(callee)).or_default().insert(name.clone());
                }
            }
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
            for callee in callees(name, func) {
                referrers.entry(Arc::from(callee)).or_default().insert(name.clone());
            }
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

/// Recomputes inputs of the current state of a [`Lean`] during an edit run, remembering
/// them for the run.
struct Replay<'a> {
    stages: &'a [Arc<Stage>],
    memo: RefCell<Replayed>,
}

impl Replay<'_> {
    /// The function `name` entering stage `k` as things stand (every stage before `k`
    /// already updated by this run); `None` when it does not enter stage `k` or a pass
    /// failed on it.
    fn input(&self, lean: &Lean, k: usize, name: &Arc<str>) -> Option<Arc<Function>> {
        replayed(lean, self.stages, k, name, Some(&self.memo))
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
                let view = view_with(name, &input, |c| lean.sig(k - 1, c));
                run_function_stage(&stages[k - 1], name, input, &view, &|| {}).ok().map(|o| o.func.0)
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

/// Runs `stages_in` (the plan variant `lean` was made with) after the loaded functions in
/// `edited` changed, updating `lean`. `Ok(None)` means lean mode's edit path cannot handle
/// the edit (as for `fast::run_edit`); `lean` must then be dropped.
pub(crate) fn run_edit(
    stages_in: &[Arc<Stage>],
    lean: &mut Lean,
    edited: &FxHashMap<Arc<str>, Arc<Function>>,
    threads: usize,
) -> Result<Option<FastRun>, PassError> {
    if lean.stages.len() != stages_in.len() {
        return Ok(None);
    }
    let mut changed: Changed = FxHashMap::default();
    for (name, new) in edited {
        let Some(old) = lean.source(name) else { return Ok(None) };
        if !same_function(old, new) {
            changed.insert(name.clone(), (old.clone(), new.clone()));
        }
    }
    for (name, (_, new)) in &changed {
        if let Some(&i) = lean.index.get(name) {
            lean.sources[i] = new.clone();
        }
        lean.note(name, new);
    }
    let replay = Replay { stages: stages_in, memo: RefCell::default() };
    let mut stages = Vec::with_capacity(stages_in.len());
    let mut diags_changed = false;
    for (k, stage) in stages_in.iter().enumerate() {
        let start = Instant::now();
        let mut recomputed = Vec::new();
        let mut next: Changed = FxHashMap::default();
        let entered;
        match &stage.kind {
            StageKind::Function(_) => {
                let last = k + 1 == stages_in.len();
                let LeanStage::Function { index, .. } = &lean.stages[k] else { return Ok(None) };
                let index = index.clone();
                entered = index.len();
                let sig_changed: FxHashSet<&str> =
                    changed.iter().filter(|(_, (old, new))| !same_signature(old, new)).map(|(n, _)| &**n).collect();
                let mut candidates: FxHashSet<Arc<str>> = changed.keys().cloned().collect();
                if !sig_changed.is_empty() {
                    lean.build_referrers();
                    if let Some(referrers) = &lean.referrers {
                        for callee in &sig_changed {
                            candidates.extend(referrers.get(*callee).into_iter().flatten().cloned());
                        }
                    }
                }
                let current = |name: &Arc<str>| match changed.get(name) {
                    Some((_, new)) => Some(new.clone()),
                    None => replay.input(lean, k, name),
                };
                // The changed functions and the callers of those whose signature changed,
                // in module order.
                let mut at: Vec<(usize, Arc<str>)> = candidates
                    .into_iter()
                    .filter(|name| {
                        changed.contains_key(name)
                            || current(name).is_some_and(|f| callees(name, &f).iter().any(|c| sig_changed.contains(c)))
                    })
                    .filter_map(|n| index.get(&n).map(|&i| (i, n)))
                    .collect();
                at.sort_unstable_by_key(|(i, _)| *i);
                let mut outs = Vec::with_capacity(at.len());
                for (i, name) in &at {
                    let Some(new_in) = current(name) else { return Ok(None) };
                    let old_in = changed.get(name).map_or_else(|| new_in.clone(), |(old, _)| old.clone());
                    let new_view = view_with(name, &new_in, |c| match changed.get(c) {
                        Some((_, new)) => Some(new.clone()),
                        None => lean.sig(k, c),
                    });
                    let Ok(new_out) = run_function_stage(stage, name, new_in, &new_view, &|| {}) else {
                        return Ok(None);
                    };
                    if new_out.unfusable {
                        return Ok(None);
                    }
                    // The previous output, from the previous input and what callers saw then.
                    // After the last stage it would only decide whether the result gets the
                    // new output, which is harmless when they are equal: skipped.
                    let old = if last {
                        None
                    } else {
                        let old_view = view_with(name, &old_in, |c| lean.sig(k, c));
                        let Ok(old_out) = run_function_stage(stage, name, old_in, &old_view, &|| {}) else {
                            return Ok(None);
                        };
                        Some(old_out.func)
                    };
                    outs.push((*i, name.clone(), old, new_out));
                }
                let LeanStage::Function { sigs, diags, .. } = &mut lean.stages[k] else { return Ok(None) };
                for (i, name, old, new) in &outs {
                    match old {
                        Some(old) if *old == new.func => {}
                        Some(old) => {
                            next.insert(name.clone(), (old.0.clone(), new.func.0.clone()));
                        }
                        // Only the new output matters after the last stage.
                        None => {
                            next.insert(name.clone(), (new.func.0.clone(), new.func.0.clone()));
                        }
                    }
                    let reported = new.diags.iter().any(|d| !d.is_empty());
                    let before =
                        if reported { diags.insert(*i as u32, new.diags.clone()) } else { diags.remove(&(*i as u32)) };
                    diags_changed |= before.is_some() != reported || before.is_some_and(|b| b != new.diags);
                    recomputed.push(name.clone());
                }
                // What callers see of the functions whose input changed, for later edits
                // and replays.
                for (name, (_, new)) in &changed {
                    if let Some(&i) = index.get(name) {
                        let source = lean.index.get(name).map(|&j| &lean.sources[j]);
                        sigs[i] = sig_for(new, None, source);
                    }
                }
                for (name, (_, new)) in &next {
                    lean.note(name, new);
                }
            }
            StageKind::Module(_) if changed.is_empty() => entered = lean.names_at(k).len(),
            StageKind::Module(_) if firewall_holds(stage, k, lean, &replay, &changed) => {
                // The pass would leave the changed functions as they come and the rest as
                // they were.
                entered = lean.names_at(k).len();
                let LeanStage::Module { dropped, .. } = &lean.stages[k] else { return Ok(None) };
                for (name, (old, new)) in &changed {
                    if !dropped.contains(name) {
                        next.insert(name.clone(), (old.clone(), new.clone()));
                    }
                }
            }
            StageKind::Module(_) => {
                let names = lean.names_at(k);
                entered = names.len();
                // Every function's input, replayed in parallel (each replay is independent),
                // on the calling thread alone when a replayed stage must run there.
                let replay_threads = stages_in[..k].iter().map(|s| s.threads(threads)).min().unwrap_or(threads);
                let inputs = par_map(&names, replay_threads, |name| match changed.get(name) {
                    Some((_, new)) => Some(new.clone()),
                    None => replayed(lean, stages_in, k, name, None),
                });
                let mut module = Module::with_capacity(names.len());
                for (name, input) in names.iter().zip(inputs) {
                    match input {
                        Some(f) => {
                            // The names are distinct, so adding cannot fail.
                            let _ = module.add_shared(name, f);
                        }
                        None => return Ok(None),
                    }
                }
                let (new_out, new_diags) = run_module_stage(stage, module.clone())?;
                let LeanStage::Module { out_names, dropped, modified, diags } = &mut lean.stages[k] else {
                    return Ok(None);
                };
                let same_names = out_names.len() == new_out.len()
                    && out_names.iter().zip(new_out.entries()).all(|(a, (b, _))| a == b);
                if !same_names {
                    return Ok(None);
                }
                let mut now_modified = FxHashMap::default();
                for (name, new) in new_out.entries() {
                    let input = module.get(name);
                    // The previous output: as stored when the pass changed the function,
                    // else its previous input.
                    let old = match modified.get(name) {
                        Some(f) => Some(f.clone()),
                        None => changed.get(name).map(|(old, _)| old.clone()).or_else(|| input.cloned()),
                    };
                    match old {
                        Some(old) if same_function(&old, new) => {}
                        Some(old) => {
                            next.insert(name.clone(), (old, new.clone()));
                        }
                        None => return Ok(None),
                    }
                    if input.is_none_or(|input| !same_function(input, new)) {
                        now_modified.insert(name.clone(), new.clone());
                    }
                }
                *dropped = names.iter().filter(|n| !new_out.contains(n)).cloned().collect();
                *modified = now_modified;
                diags_changed |= *diags != new_diags;
                *diags = new_diags;
                let noted: Vec<_> = modified.iter().map(|(n, f)| (n.clone(), f.clone())).collect();
                for (name, f) in &noted {
                    lean.note(name, f);
                }
                recomputed = names.to_vec();
            }
        }
        changed = next;
        stages.push(FastStage { recomputed, entered, time: start.elapsed() });
    }
    replace_outputs(&mut lean.output, &changed);
    let module = lean.output.clone();
    if !diags_changed {
        return Ok(Some(FastRun { module, diagnostics: lean.diagnostics.clone(), stages }));
    }
    let mut diagnostics = Vec::new();
    for (stage, kept) in stages_in.iter().zip(&lean.stages) {
        match (&stage.kind, kept) {
            (StageKind::Function(passes), LeanStage::Function { diags, .. }) => {
                let mut reported: Vec<_> = diags.iter().collect();
                reported.sort_unstable_by_key(|(i, _)| **i);
                extend_pass_major(&mut diagnostics, passes.len(), reported.iter().map(|(_, d)| &***d));
            }
            (StageKind::Module(_), LeanStage::Module { diags, .. }) => diagnostics.extend(diags.iter().cloned()),
            _ => return Ok(None),
        }
    }
    lean.diagnostics = diagnostics.clone();
    Ok(Some(FastRun { module, diagnostics, stages }))
}

/// Whether module stage `k`'s firewall holds for every change in `changed`
/// ([`edit::firewall_holds`]), the pass's stored changes telling whether it left a function as
/// it came; functions not changed are replayed.
fn firewall_holds(stage: &Stage, k: usize, lean: &Lean, replay: &Replay<'_>, changed: &Changed) -> bool {
    let LeanStage::Module { modified, .. } = &lean.stages[k] else {
        return false;
    };
    let lookup = |name: &str| {
        let name: Arc<str> = Arc::from(name);
        match changed.get(&name) {
            Some((_, new)) => Some(new.clone()),
            None => replay.input(lean, k, &name),
        }
    };
    edit::firewall_holds(stage, changed, &lookup, |name, _| !modified.contains_key(name))
}
