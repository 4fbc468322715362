//! The session's stage plan: the planner's stages (`transform/plan.rs`, [`plan_with`], the
//! function the executor plans with) under a context, each annotated with a fingerprint that
//! changes exactly when what the stage would compute may change, its firewall and its
//! persistent identity.
//!
//! The session asks the planner for three things the executor does not need: nested
//! sequentials flattened (a session has no instruments whose hooks a nested call would need),
//! the module passes given a `ModuleSplit` with `Session::set_split` run in that form, and,
//! when a function-local module pass's form (e.g. InferType) joins a stage after its first
//! pass, an *unfused* variant of the plan where each such form starts a stage of its own. The
//! form's precondition is checked per function at run time (`db::run_function_stage`): the
//! stage's input declares the function's signature, and no earlier pass of the stage changed
//! that declaration before the form ran. When any function fails it, the session runs the
//! unfused variant, where the form sees every function as the previous pass left it, exactly
//! like the module pass (no precondition). Everything else — the calls, the grouping, a split
//! pass's prelude as a barrier of its own — is the executor's plan, stage for stage.
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

use super::db::EditResults;
use super::prims::PrimResults;
use super::store::{Persist, StoreConfig};
use crate::session::ModuleFirewall;
use crate::transform::plan::{plan_with, GivenSplit, Origin, Part, Planning, Stage as Planned};
use crate::transform::{canonical_pass_name, FunctionPass, Pass, PassContext, PassError, Sequential};

/// One stage of a session's plan: the planner's stage and what the session adds to it. Equality
/// is the fingerprint's: two stages with the same fingerprint compute the same thing.
#[derive(Clone)]
pub(crate) struct Stage {
    /// The stage as the executor plans it: a run of function passes, or a barrier (a module
    /// pass, or a split pass's prelude).
    pub(crate) planned: Planned,
    pub(crate) fingerprint: u64,
    pub(crate) label: String,
    /// The context the stage runs under (covered by the fingerprint).
    pub(crate) ctx: PassContext,
    /// A module stage's shortcut on the edit path (not part of the fingerprint: it changes
    /// how the result is obtained, not the result).
    pub(crate) firewall: Option<ModuleFirewall>,
    /// A function or PrimFunc stage's persistent identity and store, when the session has a
    /// store and every pass of the stage is registered (`session/store.rs`). Not part of the
    /// fingerprint: it changes where results may come from, not what they are.
    pub(crate) persist: Option<Persist>,
    /// The results the edit path computed since the last cold run (`db.rs`).
    pub(crate) edited: Arc<EditResults>,
    /// A PrimFunc stage's last result per PrimFunc (`prims.rs`).
    pub(crate) prims: Arc<PrimResults>,
}

impl PartialEq for Stage {
    fn eq(&self, other: &Stage) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Stage {
    /// Whether this is a (graph) function stage. Every other stage, a PrimFunc stage
    /// included, is a barrier to the session's stage loops (`prims.rs`).
    pub(crate) fn is_function(&self) -> bool {
        self.planned.function_passes().is_some()
    }

    /// The worker threads the stage may run on when the session has `threads`: one when a
    /// pass of it runs on the calling thread only
    /// ([`crate::transform::FunctionPass::on_calling_thread`]).
    pub(crate) fn threads(&self, threads: usize) -> usize {
        match self.planned.function_passes() {
            Some(passes) if passes.iter().any(FunctionPass::runs_on_calling_thread) => 1,
            _ => threads,
        }
    }
}

/// The stages of a pipeline under one context.
#[derive(Clone, Default)]
pub(crate) struct Plan {
    /// Module passes' per-function forms fused into the function stages.
    pub(crate) stages: Vec<Arc<Stage>>,
    /// Each form in a stage of its own, when `stages` has a form after a stage's first pass
    /// (whose precondition may fail at run time); `None` when `stages` has none.
    pub(crate) unfused: Option<Vec<Arc<Stage>>>,
}

impl Plan {
    /// Forgets the results the edit path computed (after a cold run: the memos hold them).
    pub(crate) fn forget_edit_results(&self) {
        for stage in self.stages.iter().chain(self.unfused.iter().flatten()) {
            stage.edited.clear();
        }
    }

    /// The stages of one variant.
    pub(crate) fn variant(&self, unfused: bool) -> &[Arc<Stage>] {
        match (&self.unfused, unfused) {
            (Some(stages), true) => stages,
            _ => &self.stages,
        }
    }
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

#[derive(Clone)]
enum Ident {
    Registered(String),
    Object(u64),
    /// A part of a split module pass ([`Pass::split_form`]): the prelude or the per-function form.
    Part(Box<Ident>, &'static str),
}

impl Ident {
    fn hash_into(&self, h: &mut FxHasher) {
        match self {
            Ident::Registered(name) => (0u8, name).hash(h),
            Ident::Object(id) => (1u8, id).hash(h),
            Ident::Part(whole, part) => {
                (2u8, part).hash(h);
                whole.hash_into(h);
            }
        }
    }
}

/// Plans `pipeline` under `ctx` with the planner ([`plan_with`]): nested sequentials
/// flattened, the module passes named in `splits` in their given per-function form. A module
/// stage gets the firewall named for its pass in `firewalls` (for a given split's prelude, the
/// split pass's name), else the one its pass declares ([`Pass::firewall`]).
pub(crate) fn plan(
    pipeline: &Sequential,
    ctx: &PassContext,
    ids: &mut PassIds,
    splits: &[GivenSplit],
    firewalls: &[(String, ModuleFirewall)],
    store: Option<&StoreConfig>,
) -> Result<Plan, PassError> {
    let mut settings = FxHasher::default();
    ctx.opt_level().hash(&mut settings);
    ctx.required_pass().hash(&mut settings);
    ctx.disabled_pass().hash(&mut settings);
    format!("{:?}", ctx.config()).hash(&mut settings);
    let settings = settings.finish();
    let store = store.map(|cfg| {
        let text =
            format!("{}|{:?}|{:?}|{:?}", ctx.opt_level(), ctx.required_pass(), ctx.disabled_pass(), ctx.config());
        (cfg, text)
    });
    let store = store.as_ref().map(|(cfg, text)| (*cfg, text.as_str()));
    let mut annotate = |planned: Vec<(Planned, Vec<Origin>)>| -> Vec<Arc<Stage>> {
        planned
            .into_iter()
            .map(|(planned, origins)| {
                let idents: Vec<Ident> = origins.iter().map(|o| ident(ids, o)).collect();
                let fingerprint = fingerprint(
                    settings,
                    if planned.function_passes().is_some() { 'f' } else { 'm' },
                    idents.iter().zip(&origins).map(|(i, o)| (i, o.part.is_form())),
                );
                let (firewall, persist) = match planned.function_passes() {
                    Some(passes) => {
                        let persist = store.and_then(|(cfg, settings)| {
                            let names: Option<Vec<(String, bool)>> = passes
                                .iter()
                                .zip(idents.iter().zip(&origins))
                                .map(|(pass, (ident, origin))| {
                                    Some((persistent_name(&pass.info().name, ident, origin)?, origin.part.is_form()))
                                })
                                .collect();
                            names.map(|names| Persist::new(cfg, settings, &names))
                        });
                        (None, persist)
                    }
                    None => {
                        // One set on the session by the called pass's name overrides the one it
                        // declares.
                        let call = origins.first().map(|o| &o.call);
                        let name = call.map(|c| c.info().name.as_str());
                        let set = firewalls.iter().find(|(n, _)| Some(n.as_str()) == name).map(|(_, f)| f.clone());
                        // A PrimFunc stage's results are stored as a function stage's are.
                        let persist = planned.prim_passes().and_then(|passes| {
                            let (cfg, settings) = store?;
                            let names: Option<Vec<String>> = passes
                                .iter()
                                .zip(idents.iter().zip(&origins))
                                .map(|(pass, (ident, origin))| persistent_name(&pass.info().name, ident, origin))
                                .collect();
                            Some(Persist::for_prims(cfg, settings, &names?))
                        });
                        (set.or_else(|| call.and_then(|c| c.firewall())), persist)
                    }
                };
                let label = planned.label();
                Arc::new(Stage {
                    planned,
                    fingerprint,
                    label,
                    ctx: ctx.clone(),
                    firewall,
                    persist,
                    edited: Arc::default(),
                    prims: Arc::default(),
                })
            })
            .collect()
    };
    let fused = plan_with(pipeline, ctx, &Planning { flatten: true, fuse_forms: true, splits })?;
    // A form whose precondition is checked at run time: one after its stage's first pass.
    let has_checked = fused.iter().any(|(s, _)| {
        s.function_passes().is_some_and(|passes| passes.iter().skip(1).any(FunctionPass::reads_signatures))
    });
    let stages = annotate(fused);
    let unfused = if has_checked {
        Some(annotate(plan_with(pipeline, ctx, &Planning { flatten: true, fuse_forms: false, splits })?))
    } else {
        None
    };
    Ok(Plan { stages, unfused })
}

/// The identity of a planned pass: a registry dependency by its name, any other pass by
/// object; a split pass's parts as parts of it.
fn ident(ids: &mut PassIds, origin: &Origin) -> Ident {
    let mut whole = || {
        if origin.registered {
            let name = &origin.call.info().name;
            Ident::Registered(canonical_pass_name(name).map_or_else(|| name.clone(), str::to_string))
        } else {
            Ident::Object(ids.id(&origin.call))
        }
    };
    match &origin.part {
        Part::Whole | Part::Form => whole(),
        Part::Prelude => Ident::Part(Box::new(whole()), "prelude"),
        Part::SplitForm => Ident::Part(Box::new(whole()), "form"),
        Part::Given(pass) => Ident::Object(ids.id(pass)),
    }
}

/// The name that identifies the pass named `pass` (planned as `ident`) across processes: its registry name,
/// with the part for a split pass's per-function form. `None` for a pass the registry does not
/// know under its name, and for a session's own `ModuleSplit` part.
fn persistent_name(pass: &str, ident: &Ident, origin: &Origin) -> Option<String> {
    match (ident, &origin.part) {
        (_, Part::Given(_)) => None,
        (Ident::Registered(name), _) => Some(name.clone()),
        (Ident::Object(_), _) => canonical_pass_name(pass).map(str::to_string),
        (Ident::Part(_, part), _) => canonical_pass_name(pass).map(|name| format!("{name}/{part}")),
    }
}

/// Hashes the settings, the stage kind and each pass's identity with whether it runs as a
/// module pass's per-function form.
fn fingerprint<'a>(settings: u64, kind: char, idents: impl IntoIterator<Item = (&'a Ident, bool)>) -> u64 {
    let mut h = FxHasher::default();
    settings.hash(&mut h);
    kind.hash(&mut h);
    for (ident, form) in idents {
        ident.hash_into(&mut h);
        form.hash(&mut h);
    }
    h.finish()
}
