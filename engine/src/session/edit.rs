//! What the two edit paths share (`fast.rs` keeps every stage's outputs, `lean.rs` keeps
//! signature stubs and replays): the change set carried from stage to stage, the referrer
//! index, and the test of a module stage's firewall against a change set. Each path supplies
//! how it looks functions up and what it stored of the pass's last run.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::plan::Stage;
use super::FirewallCheck;
use crate::ir::Function;

/// Where each function is in a stage's list (or outputs).
pub(crate) type Positions = Arc<FxHashMap<Arc<str>, usize>>;

/// Global name → the functions referencing it.
pub(crate) type Referrers = FxHashMap<Arc<str>, FxHashSet<Arc<str>>>;

/// A function whose stage input changed: its old and new input.
pub(crate) type Changed = FxHashMap<Arc<str>, (Arc<Function>, Arc<Function>)>;

/// Whether module stage `stage` has a firewall that holds for every change in `changed`: each
/// changed function is unaffected by the firewall's test (`lookup` gives the functions
/// entering the pass now), and `left_as_it_came(name, old)` says the pass had dropped it or
/// left it as it came in the last run (so it would leave the new input as it comes).
pub(crate) fn firewall_holds(
    stage: &Stage,
    changed: &Changed,
    lookup: &dyn Fn(&str) -> Option<Arc<Function>>,
    left_as_it_came: impl Fn(&Arc<str>, &Arc<Function>) -> bool,
) -> bool {
    let Some(firewall) = &stage.firewall else {
        return false;
    };
    changed.iter().all(|(name, (old, new))| {
        let check = FirewallCheck { name, old, new, lookup, ctx: &stage.ctx };
        left_as_it_came(name, old) && (firewall.unaffected)(&check)
    })
}
