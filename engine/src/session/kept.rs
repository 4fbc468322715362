//! What a session keeps of its runs besides salsa's database, and the one place it changes:
//! every edit, setting change and run reports what happened ([`Event`]) to [`Kept::on`], which
//! alone decides what stays valid.
//!
//! - `last`, the last output, is handed out again by a run with nothing set since; anything
//!   set drops it (a function that only moved in its source too: its diagnostics must move).
//! - `store`, the edit path's store of the last run (the memory mode's: every stage's outputs,
//!   or lean mode's stubs), stays across body edits, which `edited` collects for the next run;
//!   a change of the function list, the plan, the settings or the memory mode drops it.
//! - `unfused`, "this module fails the fused plan's run-time check", holds until the plan
//!   changes.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::fast::Cache;
use super::lean::Lean;
use super::{Last, SessionOutput};
use crate::ir::Function;

/// The edit path's store of the last run, by memory mode.
pub(crate) enum Store {
    /// Every stage's outputs (`fast.rs`).
    Full(Cache),
    /// Sources, stubs and the module stages' changes (`lean.rs`).
    Lean(Lean),
}

/// What happened to a session.
pub(crate) enum Event<'a> {
    /// A function's body changed (now `func`).
    Edited(&'a Arc<str>, &'a Arc<Function>),
    /// A function added, or unchanged but moved in its source.
    Touched,
    /// The function list changed (names or order).
    ListChanged,
    /// The plan changed (pipeline, splits, firewalls or settings).
    PlanChanged,
    /// The memory mode changed.
    ModeChanged,
    /// A run succeeded: its output, the store it left (if the mode keeps one) and whether it
    /// ran the plan's unfused variant.
    Ran { out: &'a SessionOutput, store: Option<Box<Store>>, unfused: bool },
}

/// See the module docs.
#[derive(Default)]
pub(crate) struct Kept {
    last: Option<Last>,
    store: Option<Store>,
    /// Functions whose body was set since `store` was made, as they are now.
    edited: FxHashMap<Arc<str>, Arc<Function>>,
    unfused: bool,
}

impl Kept {
    /// Applies `event`.
    pub(crate) fn on(&mut self, event: Event<'_>) {
        match event {
            Event::Edited(name, func) => {
                self.edited.insert(name.clone(), func.clone());
                self.last = None;
            }
            Event::Touched => self.last = None,
            Event::ListChanged | Event::ModeChanged => {
                self.last = None;
                self.store = None;
            }
            Event::PlanChanged => {
                self.last = None;
                self.store = None;
                self.unfused = false;
            }
            Event::Ran { out, store, unfused } => {
                self.last = Some(Last::of(out));
                self.store = store.map(|s| *s);
                self.edited.clear();
                self.unfused = unfused;
            }
        }
    }

    /// The last output, while nothing was set since.
    pub(crate) fn last(&self) -> Option<&Last> {
        self.last.as_ref()
    }

    /// Takes the store for an edit run (a run that fails or gives up leaves none: it may be
    /// partly updated).
    pub(crate) fn take_store(&mut self) -> Option<Store> {
        self.store.take()
    }

    /// The store of the last run, if the session has one.
    pub(crate) fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The bodies set since the store was made.
    pub(crate) fn edited(&self) -> &FxHashMap<Arc<str>, Arc<Function>> {
        &self.edited
    }

    /// Whether runs go straight to the plan's unfused variant.
    pub(crate) fn unfused(&self) -> bool {
        self.unfused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{FunctionBuilder, Module};
    use crate::session::RunStats;

    fn output() -> SessionOutput {
        SessionOutput { module: Module::new(), diagnostics: Vec::new(), stats: RunStats::default() }
    }

    fn store() -> Store {
        Store::Full(Cache::new(
            Arc::default(),
            FxHashMap::default(),
            Module::new(),
            Vec::new(),
            Module::new(),
            Vec::new(),
        ))
    }

    fn ran(kept: &mut Kept, unfused: bool) {
        kept.on(Event::Ran { out: &output(), store: Some(Box::new(store())), unfused });
    }

    fn func() -> Arc<Function> {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        Arc::new(b.finish(&[x], x, None, Default::default()))
    }

    #[test]
    fn a_run_keeps_its_output_and_store_and_clears_the_edits() {
        let mut kept = Kept::default();
        let name: Arc<str> = "f".into();
        kept.on(Event::Edited(&name, &func()));
        assert_eq!(kept.edited().len(), 1);
        ran(&mut kept, true);
        assert!(kept.last().is_some());
        assert!(kept.edited().is_empty());
        assert!(kept.unfused());
        assert!(kept.take_store().is_some());
    }

    #[test]
    fn a_body_edit_keeps_the_store_and_drops_only_the_output() {
        let mut kept = Kept::default();
        ran(&mut kept, true);
        let name: Arc<str> = "f".into();
        kept.on(Event::Edited(&name, &func()));
        assert!(kept.last().is_none());
        assert!(kept.unfused());
        assert_eq!(kept.edited().len(), 1);
        assert!(kept.take_store().is_some());
        ran(&mut kept, false);
        kept.on(Event::Touched);
        assert!(kept.last().is_none());
        assert!(kept.take_store().is_some());
    }

    #[test]
    fn list_mode_and_plan_changes_drop_the_store_and_only_a_plan_change_resets_unfused() {
        for (event, unfused_after) in
            [(Event::ListChanged, true), (Event::ModeChanged, true), (Event::PlanChanged, false)]
        {
            let mut kept = Kept::default();
            ran(&mut kept, true);
            kept.on(event);
            assert!(kept.last().is_none());
            assert!(kept.take_store().is_none());
            assert_eq!(kept.unfused(), unfused_after);
        }
    }
}
