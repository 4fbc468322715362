//! The session's stage plan: a pipeline flattened under a context into stages, each with a
//! fingerprint that changes exactly when what the stage would compute may change.
//!
//! Flattening follows `Sequential` (rules 12–18 of `reference/tvm-pass-semantics.md`): a pass
//! runs when the context enables it (disabled beats required beats opt level), its required
//! passes run right before it (resolved through the registry, neither filtered nor
//! de-duplicated), nested sequentials are flattened the same way, and the top-level
//! sequential's own opt level and required list are ignored (rule 16). Consecutive function
//! passes form one function stage; every other pass is a module barrier of its own.
//!
//! What it deliberately does not do: instruments. A session rejects contexts with
//! instruments, since cached stages would skip their callbacks.
//!
//! A pass is identified by the object: a registry dependency by its registry name (the
//! registry is static), any other pass by the `Arc` it came in, which the session keeps alive
//! so that an address is never reused for another pass.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::session::ModuleFirewall;
use crate::transform::{canonical_pass_name, get_pass, Pass, PassContext, PassError, PassKind, Sequential};

/// What a stage runs.
#[derive(Clone)]
pub(crate) enum StageKind {
    /// Function passes, run in order on each function in one task.
    Function(Vec<Arc<dyn Pass>>),
    /// One pass over the whole module.
    Module(Arc<dyn Pass>),
}

/// One stage and its fingerprint. Equality is the fingerprint's: two stages with the same
/// fingerprint compute the same thing.
#[derive(Clone)]
pub(crate) struct Stage {
    pub(crate) kind: StageKind,
    pub(crate) fingerprint: u64,
    pub(crate) label: String,
    /// The context the stage runs under (covered by the fingerprint).
    pub(crate) ctx: PassContext,
    /// Whether the stage's first pass is the per-function form of a module pass, which,
    /// unlike a function pass, also runs on functions marked `SkipOptimization`.
    pub(crate) split: bool,
    /// A module stage's shortcut on the edit path (not part of the fingerprint: it changes
    /// how the result is obtained, not the result).
    pub(crate) firewall: Option<ModuleFirewall>,
    /// Whether this is the last function stage, whose per-function outputs (the module's
    /// final functions unless a later module pass rewrites them) the session keeps; earlier
    /// stages' outputs are recomputed when needed (not part of the fingerprint).
    pub(crate) keep_output: bool,
}

impl PartialEq for Stage {
    fn eq(&self, other: &Stage) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Stage {
    /// Whether this is a function stage.
    pub(crate) fn is_function(&self) -> bool {
        matches!(self.kind, StageKind::Function(_))
    }
}

/// The stages of a pipeline under one context.
#[derive(Clone, Default)]
pub(crate) struct Plan {
    pub(crate) stages: Vec<Stage>,
}

/// Gives every pass object of a session a stable identity.
#[derive(Default)]
pub(crate) struct PassIds {
    pinned: Vec<Arc<dyn Pass>>,
}

impl PassIds {
    fn id(&mut self, pass: &Arc<dyn Pass>) -> u64 {
        let addr = Arc::as_ptr(pass) as *const () as usize;
        if let Some(i) = self.pinned.iter().position(|p| Arc::as_ptr(p) as *const () as usize == addr) {
            return i as u64;
        }
        self.pinned.push(pass.clone());
        (self.pinned.len() - 1) as u64
    }
}

enum Ident {
    Registered(String),
    Object(u64),
}

/// A module pass's equivalent per-function form (see [`crate::session::ModuleSplit`]).
pub(crate) struct Split {
    pub(crate) prelude: Option<Arc<dyn Pass>>,
    pub(crate) per_function: Arc<dyn Pass>,
}

/// Flattens `pipeline` under `ctx` into stages; a module pass named in `splits` is replaced
/// by its prelude (a barrier) and its per-function form, which starts a function stage (the
/// function passes right after it join that stage). A module stage whose pass is named in
/// `firewalls` gets that shortcut.
pub(crate) fn plan(
    pipeline: &Sequential,
    ctx: &PassContext,
    ids: &mut PassIds,
    splits: &[(String, Split)],
    firewalls: &[(String, ModuleFirewall)],
) -> Result<Plan, PassError> {
    let mut leaves: Vec<(Arc<dyn Pass>, Ident, bool)> = Vec::new();
    // An explicit work list instead of recursion over nesting depth.
    let mut work: Vec<Work> = pipeline.passes().iter().rev().map(|p| Work::Filtered(p.clone())).collect();
    while let Some(item) = work.pop() {
        let (pass, registered) = match item {
            Work::Filtered(pass) => {
                let info = pass.info();
                if !ctx.pass_enabled(info) {
                    continue;
                }
                work.push(Work::Direct(pass.clone(), false));
                for name in info.required.iter().rev() {
                    work.push(Work::Direct(get_pass(name)?, true));
                }
                continue;
            }
            Work::Direct(pass, registered) => (pass, registered),
        };
        match pass.kind() {
            PassKind::Sequential if pass.as_sequential().is_some() => {
                if let Some(seq) = pass.as_sequential() {
                    work.extend(seq.passes().iter().rev().map(|p| Work::Filtered(p.clone())));
                }
            }
            kind => {
                let split = splits.iter().find(|(name, _)| *name == pass.info().name).map(|(_, s)| s);
                match split {
                    Some(split) if kind != PassKind::Function => {
                        if let Some(prelude) = &split.prelude {
                            leaves.push((prelude.clone(), Ident::Object(ids.id(prelude)), false));
                        }
                        leaves.push((split.per_function.clone(), Ident::Object(ids.id(&split.per_function)), true));
                    }
                    _ => {
                        let ident = if registered {
                            let name = &pass.info().name;
                            Ident::Registered(canonical_pass_name(name).map_or_else(|| name.clone(), str::to_string))
                        } else {
                            Ident::Object(ids.id(&pass))
                        };
                        leaves.push((pass, ident, false));
                    }
                }
            }
        }
    }
    let mut settings = FxHasher::default();
    ctx.opt_level().hash(&mut settings);
    ctx.required_pass().hash(&mut settings);
    ctx.disabled_pass().hash(&mut settings);
    format!("{:?}", ctx.config()).hash(&mut settings);
    let settings = settings.finish();

    let mut stages: Vec<Stage> = Vec::new();
    let mut run: Vec<(Arc<dyn Pass>, Ident)> = Vec::new();
    let flush = |run: &mut Vec<(Arc<dyn Pass>, Ident)>, stages: &mut Vec<Stage>, split: bool| {
        if run.is_empty() {
            return;
        }
        let passes: Vec<_> = run.iter().map(|(p, _)| p.clone()).collect();
        let label = passes.iter().map(|p| p.info().name.as_str()).collect::<Vec<_>>().join(",");
        let fingerprint = fingerprint(settings, if split { 's' } else { 'f' }, run.iter().map(|(_, i)| i));
        stages.push(Stage {
            kind: StageKind::Function(passes),
            fingerprint,
            label,
            ctx: ctx.clone(),
            split,
            firewall: None,
            keep_output: false,
        });
        run.clear();
    };
    // Whether the run being collected starts with a split module pass.
    let mut run_split = false;
    for (pass, ident, alone) in leaves {
        if pass.kind() == PassKind::Function && pass.as_function().is_some() {
            // A split module pass sees every function as the previous pass left it, as the
            // module pass would: it starts a stage of its own. The function passes after it
            // join that stage (one query per function instead of one per stage), seeing
            // other functions as they entered it, like any function pass after the first
            // of a stage.
            if alone {
                flush(&mut run, &mut stages, run_split);
                run_split = true;
            }
            run.push((pass, ident));
            continue;
        }
        flush(&mut run, &mut stages, run_split);
        run_split = false;
        let fingerprint = fingerprint(settings, 'm', [&ident]);
        let label = pass.info().name.clone();
        let firewall = firewalls.iter().find(|(name, _)| *name == label).map(|(_, f)| f.clone());
        stages.push(Stage {
            kind: StageKind::Module(pass),
            fingerprint,
            label,
            ctx: ctx.clone(),
            split: false,
            firewall,
            keep_output: false,
        });
    }
    flush(&mut run, &mut stages, run_split);
    if let Some(last) = stages.iter_mut().rev().find(|s| s.is_function()) {
        last.keep_output = true;
    }
    Ok(Plan { stages })
}

enum Work {
    /// A pass of a sequential's list: filtered by the context, required passes first.
    Filtered(Arc<dyn Pass>),
    /// A pass run directly (a required dependency or an enabled list entry); the flag says
    /// whether it came from the registry.
    Direct(Arc<dyn Pass>, bool),
}

fn fingerprint<'a>(settings: u64, kind: char, idents: impl IntoIterator<Item = &'a Ident>) -> u64 {
    let mut h = FxHasher::default();
    settings.hash(&mut h);
    kind.hash(&mut h);
    for ident in idents {
        match ident {
            Ident::Registered(name) => (0u8, name).hash(&mut h),
            Ident::Object(id) => (1u8, id).hash(&mut h),
        }
    }
    h.finish()
}
