//! Module-pass firewalls: what an incremental session may skip on the edit path. A module pass
//! declares its firewall where it declares its other facts ([`ModulePass::with_firewall`](super::ModulePass::with_firewall));
//! the session (`crate::session`) reads it from the pass.

use std::sync::Arc;

use super::context::PassContext;
use crate::ir::Function;

/// A shortcut for a module pass on the edit path: a promise that certain edits cannot change
/// what the pass does to the rest of the module, so a run after such an edit skips the pass
/// instead of running it on the whole module again.
///
/// The contract, which the caller vouches for: if `unaffected` holds for every function
/// whose input to the pass changed, then on the new module the pass drops exactly the
/// functions it dropped before, returns the functions it left unchanged before (as input)
/// unchanged again, gives every function whose input did not change the same output as
/// before, reports the same diagnostics, and keeps the order. A changed function that the
/// pass had rewritten before (not dropped, output different from its input) always makes the
/// session run the pass again. A module pass declares its own with [`ModulePass::with_firewall`](super::ModulePass::with_firewall)
/// (the standard passes that have one do so in their file); `Session::set_firewall` sets or
/// overrides one by pass name. It covers a module pass of that name, or the prelude of a split
/// of that name.
#[derive(Clone)]
pub struct ModuleFirewall {
    /// Whether a change of one function's input to the pass leaves the rest of the module
    /// unaffected in the sense above.
    pub unaffected: Arc<dyn Fn(&FirewallCheck<'_>) -> bool + Send + Sync>,
}

/// One function whose input to a module pass changed, as a [`ModuleFirewall`] sees it.
pub struct FirewallCheck<'a> {
    /// The function's name.
    pub name: &'a str,
    /// Its input to the pass in the previous run.
    pub old: &'a Arc<Function>,
    /// Its input now.
    pub new: &'a Arc<Function>,
    /// The functions entering the pass now (after every edit of this run), by name.
    pub lookup: &'a dyn Fn(&str) -> Option<Arc<Function>>,
    /// The context the pass runs under (its config, opt level).
    pub ctx: &'a PassContext,
}
