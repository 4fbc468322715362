//! Run records: the edit path across processes. A lean run over a persistent store leaves a
//! [`RunRecord`] — per function its source entry (key and place in its file), the functions
//! it may reference, per function stage the key of its result, per module stage the functions
//! the pass dropped and those it changed (each output kept as an entry of its own, keyed by
//! its content) and the output's function order — which the embedder keeps (the CLI: in its
//! cache, beside the printed text of each output function). A new process given the record and
//! the functions whose source changed runs the session's one edit propagation (`edit.rs`) over
//! [`RecordEdit`], a store that reads what the propagation asks for from the persistent store
//! on demand (a function's input to stage `k` is its source entry run through the entries the
//! record names, decoded, never recomputed), so an edit costs the functions it reaches, not the
//! module: no unchanged function is parsed, decoded or printed.
//!
//! What it does not handle it gives up on (the caller then runs the whole module through the
//! stage loop, `drive.rs`): a module stage whose firewall does not hold (its input would have
//! to be decoded whole), a signature change (the callers' verification would need their
//! sources), any diagnostic, an entry that is missing or damaged (evicted, say). A record is
//! made only for a run without diagnostics, PrimFuncs or functions added by a pass, whose
//! function stages are all stored (`Session::run_record`).
//!
//! Invariant: the output a run from a record gives (the record's output with the changed
//! functions replaced) is that of a cold run on the edited module; `cache_steps.rs` checks it
//! through the CLI, process by process.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::codec::{Reader, Writer};
use super::db::{view_with, FnVal, StageOut};
use super::edit::{Changed, EditStore, Entering, GiveUp, Named, Names, Output, Positions, StageDiagnostics};
use super::plan::Stage;
use super::same::{same_signature, span_base};
use super::store::{decode_function, decode_source, StageKey, StageStore};
use crate::ir::{verify_function, Function, Module};
use crate::transform::Diagnostic;

/// The version of the record encoding.
const RECORD_FORMAT: u32 = 1;

/// The key of a result that is not there (a function that did not enter the stage).
pub(crate) const NO_KEY: StageKey = StageKey([0; 16]);

/// What a run over a persistent store leaves for the next process (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Whether the run took the plan's unfused variant.
    pub(crate) unfused: bool,
    /// The variant's stage labels (a record of another plan is not used).
    pub(crate) labels: Vec<String>,
    /// The functions as loaded, in module order.
    pub(crate) names: Vec<Arc<str>>,
    /// Per function: its source entry's key and the byte its text starts at.
    pub(crate) sources: Vec<(StageKey, u32)>,
    /// Per function: the functions it references in some stage's input (a superset).
    pub(crate) callees: Vec<Vec<u32>>,
    pub(crate) stages: Vec<RecStage>,
    /// The output's functions, in order.
    pub(crate) outputs: Vec<u32>,
}

/// One stage of a record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RecStage {
    /// Per function (by its place in the record's names), its result's key ([`NO_KEY`] when it
    /// did not enter the stage).
    Function { keys: Vec<StageKey> },
    /// The functions the pass dropped and those it changed, with the key of the output's entry
    /// (spans relative to the function's source); both sorted.
    Module { dropped: Vec<u32>, modified: Vec<(u32, StageKey)> },
}

impl RunRecord {
    /// The functions as loaded, in module order.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// Per function: its source entry's key and where its text starts in its file.
    pub fn sources(&self) -> &[(StageKey, u32)] {
        &self.sources
    }

    /// The output's functions in order, as positions in [`RunRecord::names`].
    pub fn outputs(&self) -> impl Iterator<Item = usize> + '_ {
        self.outputs.iter().map(|&i| i as usize)
    }

    /// The record as bytes ([`RunRecord::decode`] reads them).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(self.names.len() * (32 + 16 * self.stages.len())));
        w.u32(RECORD_FORMAT);
        w.u8(u8::from(self.unfused));
        w.u32(self.labels.len() as u32);
        for label in &self.labels {
            w.str(label);
        }
        w.u32(self.names.len() as u32);
        for ((name, (key, at)), callees) in self.names.iter().zip(&self.sources).zip(&self.callees) {
            w.str(name);
            w.0.extend_from_slice(&key.0);
            w.u32(*at);
            w.u32(callees.len() as u32);
            for &c in callees {
                w.u32(c);
            }
        }
        w.u32(self.stages.len() as u32);
        for stage in &self.stages {
            match stage {
                RecStage::Function { keys } => {
                    w.u8(0);
                    for key in keys {
                        w.0.extend_from_slice(&key.0);
                    }
                }
                RecStage::Module { dropped, modified } => {
                    w.u8(1);
                    w.u32(dropped.len() as u32);
                    for &i in dropped {
                        w.u32(i);
                    }
                    w.u32(modified.len() as u32);
                    for (i, key) in modified {
                        w.u32(*i);
                        w.0.extend_from_slice(&key.0);
                    }
                }
            }
        }
        w.u32(self.outputs.len() as u32);
        for &i in &self.outputs {
            w.u32(i);
        }
        w.0
    }

    /// Reads what [`RunRecord::encode`] wrote; anything damaged or out of range is an error.
    pub fn decode(bytes: &[u8]) -> Result<RunRecord, &'static str> {
        let mut r = Reader(bytes);
        if r.u32()? != RECORD_FORMAT {
            return Err("record of another format version");
        }
        let unfused = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err("bad flag"),
        };
        let n_labels = r.count(8)?;
        let labels = (0..n_labels).map(|_| r.str().map(str::to_string)).collect::<Result<Vec<_>, _>>()?;
        let n = r.count(32)?;
        let index = |r: &mut Reader<'_>| -> Result<u32, &'static str> {
            let i = r.u32()?;
            if i as usize >= n {
                return Err("function index out of range");
            }
            Ok(i)
        };
        let key = |r: &mut Reader<'_>| -> Result<StageKey, &'static str> {
            let mut k = [0u8; 16];
            k.copy_from_slice(r.take(16)?);
            Ok(StageKey(k))
        };
        let (mut names, mut sources, mut callees) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            names.push(Arc::<str>::from(r.str()?));
            sources.push((key(&mut r)?, r.u32()?));
            let m = r.count(4)?;
            callees.push((0..m).map(|_| index(&mut r)).collect::<Result<Vec<_>, _>>()?);
        }
        let n_stages = r.count(1)?;
        let mut stages = Vec::with_capacity(n_stages);
        for _ in 0..n_stages {
            stages.push(match r.u8()? {
                0 => RecStage::Function { keys: (0..n).map(|_| key(&mut r)).collect::<Result<Vec<_>, _>>()? },
                1 => {
                    let d = r.count(4)?;
                    let dropped = (0..d).map(|_| index(&mut r)).collect::<Result<Vec<_>, _>>()?;
                    let m = r.count(20)?;
                    let modified =
                        (0..m).map(|_| Ok((index(&mut r)?, key(&mut r)?))).collect::<Result<Vec<_>, &'static str>>()?;
                    RecStage::Module { dropped, modified }
                }
                _ => return Err("bad stage tag"),
            });
        }
        let n_out = r.count(4)?;
        let outputs = (0..n_out).map(|_| index(&mut r)).collect::<Result<Vec<_>, _>>()?;
        if !r.0.is_empty() {
            return Err("trailing bytes after the record");
        }
        Ok(RunRecord { unfused, labels, names, sources, callees, stages, outputs })
    }
}

/// Decoded stage inputs: (stage, function) → the function entering it, if it does.
type Decoded = FxHashMap<(usize, u32), Option<Arc<Function>>>;

/// The edit path's store over a record and the persistent store (see the module docs). It
/// updates the record as the propagation goes, so that afterwards it is the new run's record.
pub(crate) struct RecordEdit<'a> {
    pub(crate) rec: RunRecord,
    /// The sources as the record has them (the new ones are in `rec`).
    old_sources: Vec<(StageKey, u32)>,
    stages: &'a [Arc<Stage>],
    store: Arc<dyn StageStore>,
    index: FxHashMap<Arc<str>, u32>,
    memo: RefCell<Decoded>,
    /// An entry the record names was missing or damaged: the run's result is not used.
    failed: Cell<bool>,
    /// The functions entering a stage no module stage before dropped any function from.
    full: (Names, Positions),
    /// The functions whose final output changed, with it.
    pub(crate) finals: Vec<(Arc<str>, Arc<Function>)>,
    no_prims: Module,
    output: Module,
    diagnostics: Vec<Diagnostic>,
}

impl<'a> RecordEdit<'a> {
    /// A store over `rec` for a run of `stages` (the variant it was made with) on a module
    /// whose sources are now `sources` (one per function of the record).
    pub(crate) fn new(
        mut rec: RunRecord,
        sources: Vec<(StageKey, u32)>,
        stages: &'a [Arc<Stage>],
        store: Arc<dyn StageStore>,
    ) -> RecordEdit<'a> {
        let old_sources = std::mem::replace(&mut rec.sources, sources);
        let index: FxHashMap<Arc<str>, u32> =
            rec.names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
        let names: Names = Arc::new(rec.names.clone());
        let positions: Positions = Arc::new(index.iter().map(|(n, &i)| (n.clone(), i as usize)).collect());
        RecordEdit {
            rec,
            old_sources,
            stages,
            store,
            index,
            memo: RefCell::default(),
            failed: Cell::new(false),
            full: (names, positions),
            finals: Vec::new(),
            no_prims: Module::new(),
            output: Module::new(),
            diagnostics: Vec::new(),
        }
    }

    /// The source of `name` as the record has it (decoded from its entry).
    fn old_source(&self, name: &str) -> Option<Arc<Function>> {
        let &i = self.index.get(name)?;
        self.decode_source(i, self.old_sources[i as usize])
    }

    /// Whether an entry the run needed was missing or damaged.
    pub(crate) fn failed(&self) -> bool {
        self.failed.get()
    }

    fn fail<T>(&self) -> Option<T> {
        self.failed.set(true);
        None
    }

    /// Whether the run can take `edited` (new sources by name): each is a function of the
    /// record, keeps the signature it had, and verifies against its callees' sources (what
    /// verifying the whole module would say of it; with the same signature, the other
    /// functions verify as before).
    pub(crate) fn takes(&self, edited: &[(Arc<str>, Arc<Function>)]) -> bool {
        edited.iter().all(|(name, new)| {
            let Some(old) = self.old_source(name) else { return false };
            if !same_signature(&old, new) {
                return false;
            }
            // A record is of a module without PrimFuncs.
            let view = view_with(name, new, |c| self.input(0, c), Module::new);
            !self.failed() && verify_function(Some(&view), name, new).is_ok()
        })
    }

    /// The source of function `i` in the entry `key`, its text starting at byte `at`.
    fn decode_source(&self, i: u32, (key, at): (StageKey, u32)) -> Option<Arc<Function>> {
        let Some(entry) = self.store.get(&key) else { return self.fail() };
        match decode_source(&entry, &key, at) {
            Ok((name, func)) if *name == *self.rec.names[i as usize] => Some(Arc::new(func)),
            Ok(_) => self.fail(),
            Err(reason) => {
                self.store.rejected(&key, reason);
                self.fail()
            }
        }
    }

    /// The function `i` entering stage `k` now.
    fn input_at(&self, k: usize, i: u32) -> Option<Arc<Function>> {
        if let Some(f) = self.memo.borrow().get(&(k, i)) {
            return f.clone();
        }
        let res = if k == 0 {
            self.decode_source(i, self.rec.sources[i as usize])
        } else {
            match &self.rec.stages[k - 1] {
                RecStage::Function { keys } => {
                    let input = self.input_at(k - 1, i)?;
                    let persist = self.stages[k - 1].persist.as_ref();
                    match persist.and_then(|p| p.lookup(&keys[i as usize], &input)) {
                        Some(out) => Some(out.func.0),
                        None => self.fail(),
                    }
                }
                RecStage::Module { dropped, modified } => match modified.binary_search_by_key(&i, |(j, _)| *j) {
                    Ok(at) => {
                        let key = modified[at].1;
                        let source = self.input_at(0, i)?;
                        let base = span_base(&source);
                        match self.store.get(&key).map(|entry| decode_function(&entry, &key, base)) {
                            Some(Ok(f)) => Some(Arc::new(f)),
                            Some(Err(reason)) => {
                                self.store.rejected(&key, reason);
                                self.fail()
                            }
                            None => self.fail(),
                        }
                    }
                    Err(_) if dropped.binary_search(&i).is_ok() => None,
                    Err(_) => self.input_at(k - 1, i),
                },
            }
        };
        self.memo.borrow_mut().insert((k, i), res.clone());
        res
    }

    fn remember(&self, k: usize, name: &str, func: &Arc<Function>) {
        if let Some(&i) = self.index.get(name) {
            self.memo.borrow_mut().insert((k, i), Some(func.clone()));
        }
    }

    /// The functions entering stage `k` and where each is among them.
    fn list_at(&self, k: usize) -> (Names, Positions) {
        let dropped: FxHashSet<u32> = self.rec.stages[..k]
            .iter()
            .flat_map(|s| match s {
                RecStage::Module { dropped, .. } => dropped.as_slice(),
                RecStage::Function { .. } => &[],
            })
            .copied()
            .collect();
        if dropped.is_empty() {
            return self.full.clone();
        }
        let names: Vec<Arc<str>> = (0..self.rec.names.len() as u32)
            .filter(|i| !dropped.contains(i))
            .map(|i| self.rec.names[i as usize].clone())
            .collect();
        let positions = names.iter().enumerate().map(|(p, n)| (n.clone(), p)).collect();
        (Arc::new(names), Arc::new(positions))
    }
}

impl EditStore for RecordEdit<'_> {
    fn num_stages(&self) -> usize {
        self.rec.stages.len()
    }

    /// The old source as the record has it (decoded from its entry).
    fn swap_source(&mut self, name: &Arc<str>, new: Arc<Function>) -> Option<Arc<Function>> {
        let old = self.old_source(name)?;
        self.remember(0, name, &new);
        Some(old)
    }

    /// A record is of a module without PrimFuncs.
    fn entering(&self, k: usize) -> Entering<'_> {
        let (names, positions) = self.list_at(k);
        let positions = matches!(self.rec.stages.get(k), Some(RecStage::Function { .. })).then_some(positions);
        Entering { names, positions, prims: &self.no_prims }
    }

    /// Decoded from the entries the record names.
    fn input(&self, k: usize, name: &str) -> Option<Arc<Function>> {
        let &i = self.index.get(name)?;
        self.input_at(k, i)
    }

    /// The record's lists of who references whom.
    fn referrers(&mut self, noted: Named, callees: &FxHashSet<&str>) -> Vec<Arc<str>> {
        for (name, func) in &noted {
            let Some(&i) = self.index.get(name) else { continue };
            for callee in super::db::callees(name, func) {
                if let Some(&c) = self.index.get(callee) {
                    let known = &mut self.rec.callees[i as usize];
                    if !known.contains(&c) {
                        known.push(c);
                    }
                }
            }
        }
        if callees.is_empty() {
            return Vec::new();
        }
        let names = &self.rec.names;
        self.rec
            .callees
            .iter()
            .enumerate()
            .filter(|(_, cs)| cs.iter().any(|&c| callees.contains(&*names[c as usize])))
            .map(|(i, _)| names[i].clone())
            .collect()
    }

    /// The result the record names, decoded with the previous input.
    fn previous_output(
        &self,
        stage: &Stage,
        k: usize,
        _at: usize,
        name: &Arc<str>,
        old_in: Arc<Function>,
    ) -> Result<FnVal, GiveUp> {
        let (Some(&i), Some(persist), Some(RecStage::Function { keys })) =
            (self.index.get(name), stage.persist.as_ref(), self.rec.stages.get(k))
        else {
            return Err(GiveUp);
        };
        persist.lookup(&keys[i as usize], &old_in).map(|out| out.func).ok_or(GiveUp)
    }

    /// The new key, and a changed input for the stages after; a diagnostic gives up (a record
    /// is of a run without any).
    fn record_output(
        &mut self,
        k: usize,
        _at: usize,
        name: &Arc<str>,
        new_in: Option<&Arc<Function>>,
        out: StageOut,
        key: Option<StageKey>,
    ) -> Result<bool, GiveUp> {
        if out.diags.iter().any(|d| !d.is_empty()) {
            return Err(GiveUp);
        }
        if let Some(new) = new_in {
            self.remember(k, name, new);
        }
        let (Some(&i), Some(key), Some(RecStage::Function { keys })) =
            (self.index.get(name), key, self.rec.stages.get_mut(k))
        else {
            return Err(GiveUp);
        };
        keys[i as usize] = key;
        Ok(false)
    }

    fn left_as_it_came(&self, k: usize, name: &Arc<str>, _old: &Arc<Function>) -> bool {
        match (self.index.get(name), &self.rec.stages[k]) {
            (Some(i), RecStage::Module { modified, .. }) => modified.binary_search_by_key(i, |(j, _)| *j).is_err(),
            _ => false,
        }
    }

    fn pass_through(&mut self, k: usize, name: &Arc<str>, new: &Arc<Function>) -> bool {
        self.remember(k, name, new);
        match (self.index.get(name), &self.rec.stages[k]) {
            (Some(i), RecStage::Module { dropped, .. }) => dropped.binary_search(i).is_err(),
            _ => false,
        }
    }

    // A module stage's re-run gives up (the defaults): its whole input would have to be
    // decoded.

    /// Empty: the embedder keeps the output (as text); the changes go to `finals`. No stage
    /// has diagnostics (a diagnostic gave up).
    fn output(&mut self, changed: &Changed, diagnostics: bool) -> Output<'_> {
        self.finals = changed.iter().map(|(name, (_, new))| (name.clone(), new.clone())).collect();
        let stages = diagnostics.then(|| {
            self.rec
                .stages
                .iter()
                .map(|stage| match stage {
                    RecStage::Function { .. } => StageDiagnostics::Function(Vec::new()),
                    RecStage::Module { .. } => StageDiagnostics::Module(&[]),
                })
                .collect()
        });
        Output { module: &mut self.output, diagnostics: &mut self.diagnostics, stages }
    }
}

/// Whether `func` prints inside a module exactly as [`crate::ir::print_function`] prints it,
/// whatever the other functions are: it has no constant the printer could move to the
/// `resources` section (one with more elements than it keeps inline when repeated), so the
/// printed module is the functions' texts joined by blank lines. An embedder keeping each
/// function's printed output checks this before joining them.
pub fn prints_alone(func: &Function) -> bool {
    use crate::ir::{Constant, ExprKind};
    func.node_ids().all(|id| match *func.kind(id) {
        ExprKind::Const { idx } => match &**func.constant(idx) {
            Constant::Fill { .. } => true,
            c => c.tensor_type().num_elements().is_some_and(|n| n <= crate::ir::printer::REPEATED_INLINE_LIMIT as u64),
        },
        _ => true,
    })
}
