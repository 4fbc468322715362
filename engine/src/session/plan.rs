//! The session's stage plan: a pipeline flattened under a context into stages, each with a
//! fingerprint that changes exactly when what the stage would compute may change.
//!
//! The calls and the grouping rule are the planner's (`transform/plan.rs`, which the executor
//! plans with): `walk_calls` lists the calls by rules 12–16 (a pass runs when the context
//! enables it, its required passes right before it, neither filtered nor de-duplicated), here
//! flattening nested sequentials, since a session has no instruments whose hooks a nested
//! call would need; consecutive function passes form one function stage as
//! `joins_function_stage` says; every other pass is a module barrier of its own.
//!
//! A module pass with a per-function form ([`Pass::function_form`], e.g. InferType) is planned
//! into the function stage the way the executor plans it (`transform/plan.rs`): the form
//! joins the run of function passes instead of stopping every function at a barrier. Its
//! precondition is checked per function at run time (`db::run_function_stage`): the stage's
//! input declares the function's signature, and no earlier pass of the stage changed that
//! declaration before the form ran. When any function fails it, the session runs the plan's
//! *unfused* variant instead, where each form starts a stage of its own and so sees every
//! function as the previous pass left it, exactly like the module pass (no precondition).
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

use super::store::{Persist, StoreConfig};
use crate::session::ModuleFirewall;
use crate::transform::plan::{joins_function_stage, walk_calls};
use crate::transform::{
    canonical_pass_name, module_pass, FunctionPass, Pass, PassContext, PassError, PassKind, Sequential,
};

/// What a stage runs.
#[derive(Clone)]
pub(crate) enum StageKind {
    /// Function passes, run in order on each function in one task (by the executor's stage
    /// runner); a module pass's per-function form visits functions marked `SkipOptimization`
    /// too ([`FunctionPass::visits_marked`]).
    Function(Vec<FunctionPass>),
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
    /// A module stage's shortcut on the edit path (not part of the fingerprint: it changes
    /// how the result is obtained, not the result).
    pub(crate) firewall: Option<ModuleFirewall>,
    /// A function stage of one pass that runs on the calling thread only
    /// ([`crate::transform::FunctionPass::on_calling_thread`]): its functions run one after
    /// the other there, whatever the session's thread count.
    pub(crate) on_calling_thread: bool,
    /// A function stage's persistent identity and store, when the session has a store and
    /// every pass of the stage is registered (`session/store.rs`). Not part of the
    /// fingerprint: it changes where results may come from, not what they are.
    pub(crate) persist: Option<Persist>,
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

    /// The worker threads the stage may run on when the session has `threads`.
    pub(crate) fn threads(&self, threads: usize) -> usize {
        if self.on_calling_thread {
            1
        } else {
            threads
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

/// A module pass's equivalent per-function form (see [`crate::session::ModuleSplit`]).
pub(crate) struct Split {
    pub(crate) prelude: Option<Arc<dyn Pass>>,
    pub(crate) per_function: Arc<dyn Pass>,
}

/// Flattens `pipeline` under `ctx` into stages; a module pass named in `splits` is replaced
/// by its prelude (a barrier) and its per-function form, which starts a function stage (the
/// function passes right after it join that stage). Any other module pass with a
/// per-function form ([`Pass::function_form`]) joins the function stage it is in (and starts
/// one in the unfused variant). A module stage gets the firewall named for its pass in
/// `firewalls`, else the one its pass declares ([`Pass::firewall`]; for a split's prelude,
/// the split pass's).
pub(crate) fn plan(
    pipeline: &Sequential,
    ctx: &PassContext,
    ids: &mut PassIds,
    splits: &[(String, Split)],
    firewalls: &[(String, ModuleFirewall)],
    store: Option<&StoreConfig>,
) -> Result<Plan, PassError> {
    let mut leaves: Vec<Leaf> = Vec::new();
    // The executor's walk (rules 12–16), flattening nested sequentials: a sequential's own call
    // has no stage, its list's calls do.
    let mut calls = Vec::new();
    walk_calls(pipeline, ctx, true, &mut calls)?;
    for call in calls {
        let (pass, registered) = (call.pass, call.required_by.is_some());
        match pass.kind() {
            PassKind::Sequential if pass.as_sequential().is_some() => {}
            kind => {
                let split = splits.iter().find(|(name, _)| *name == pass.info().name).map(|(_, s)| s);
                let ident = if registered {
                    let name = &pass.info().name;
                    Ident::Registered(canonical_pass_name(name).map_or_else(|| name.clone(), str::to_string))
                } else {
                    Ident::Object(ids.id(&pass))
                };
                if let (None, Some((prelude, form))) = (split, pass.split_form()) {
                    // The pass's own split (`Pass::split_form`), as the executor runs it: the
                    // prelude as a module stage of the pass's name (a firewall of that name
                    // covers it), the per-function part starting a function stage.
                    let info = pass.info();
                    let prelude_pass =
                        module_pass(&info.name, info.opt_level, move |m, ctx| Ok(prelude(&m, ctx))).shared();
                    leaves.push(Leaf {
                        pass: prelude_pass,
                        ident: Ident::Part(Box::new(ident.clone()), "prelude"),
                        form: None,
                        firewall: pass.firewall(),
                        firewall_name: None,
                    });
                    leaves.push(Leaf {
                        pass: Arc::new(form),
                        ident: Ident::Part(Box::new(ident), "form"),
                        form: Some(Form::Split),
                        firewall: None,
                        firewall_name: None,
                    });
                    continue;
                }
                match (split, pass.function_form()) {
                    (Some(split), _) if kind != PassKind::Function => {
                        if let Some(prelude) = &split.prelude {
                            leaves.push(Leaf {
                                pass: prelude.clone(),
                                ident: Ident::Object(ids.id(prelude)),
                                form: None,
                                firewall: pass.firewall(),
                                // `Session::set_firewall` names the split pass, not its prelude.
                                firewall_name: Some(pass.info().name.clone()),
                            });
                        }
                        let ident = Ident::Object(ids.id(&split.per_function));
                        leaves.push(Leaf {
                            pass: split.per_function.clone(),
                            ident,
                            form: Some(Form::Split),
                            firewall: None,
                            firewall_name: None,
                        });
                    }
                    (_, Some(form)) if kind != PassKind::Function => {
                        leaves.push(Leaf {
                            pass: Arc::new(form),
                            ident,
                            form: Some(Form::Local),
                            firewall: None,
                            firewall_name: None,
                        });
                    }
                    _ => {
                        let firewall = pass.firewall();
                        leaves.push(Leaf { pass, ident, form: None, firewall, firewall_name: None })
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
    let store = store.map(|cfg| {
        let text =
            format!("{}|{:?}|{:?}|{:?}", ctx.opt_level(), ctx.required_pass(), ctx.disabled_pass(), ctx.config());
        (cfg, text)
    });
    let store = store.as_ref().map(|(cfg, text)| (*cfg, text.as_str()));

    let stages: Vec<Arc<Stage>> =
        group(&leaves, settings, ctx, firewalls, true, store).into_iter().map(Arc::new).collect();
    // A form whose precondition is checked at run time: one after its stage's first pass.
    let has_checked = stages.iter().any(|s| match &s.kind {
        StageKind::Function(passes) => passes.iter().skip(1).any(FunctionPass::reads_signatures),
        StageKind::Module(_) => false,
    });
    let unfused =
        has_checked.then(|| group(&leaves, settings, ctx, firewalls, false, store).into_iter().map(Arc::new).collect());
    Ok(Plan { stages, unfused })
}

/// A flattened pass: the pass run, its identity, and whether it is a module pass's
/// per-function form.
struct Leaf {
    pass: Arc<dyn Pass>,
    ident: Ident,
    form: Option<Form>,
    /// The firewall the pass declared ([`Pass::firewall`]), for a module pass or the prelude
    /// of a split one.
    firewall: Option<ModuleFirewall>,
    /// The name a firewall set on the session is looked up by, when not the pass's own (a
    /// `ModuleSplit`'s prelude: the split pass's name).
    firewall_name: Option<String>,
}

/// The kinds of per-function forms of module passes.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// A [`crate::session::ModuleSplit`]'s: always starts a stage (no run-time check).
    Split,
    /// A [`Pass::function_form`]: joins the stage when `fuse`, with its precondition checked.
    Local,
}

/// Groups `leaves` into stages: consecutive function passes form a function stage, every
/// other pass a module stage. A split's form starts a stage, and so does a function-local
/// form unless `fuse`.
fn group(
    leaves: &[Leaf],
    settings: u64,
    ctx: &PassContext,
    firewalls: &[(String, ModuleFirewall)],
    fuse: bool,
    store: Option<(&StoreConfig, &str)>,
) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    // The function passes of the stage being formed, each with its identity and whether it is
    // a module pass's per-function form.
    let mut run: Vec<(FunctionPass, Ident, bool, Option<String>)> = Vec::new();
    let flush = |run: &mut Vec<(FunctionPass, Ident, bool, Option<String>)>, stages: &mut Vec<Stage>| {
        if run.is_empty() {
            return;
        }
        let passes: Vec<FunctionPass> = run.iter().map(|(p, _, _, _)| p.clone()).collect();
        let on_calling_thread = passes.iter().any(FunctionPass::runs_on_calling_thread);
        let label = passes.iter().map(|p| p.info().name.as_str()).collect::<Vec<_>>().join(",");
        let fingerprint = fingerprint(settings, 'f', run.iter().map(|(_, i, m, _)| (i, *m)));
        let persist = store.and_then(|(cfg, settings)| {
            let names: Option<Vec<(String, bool)>> =
                run.iter().map(|(_, _, form, name)| Some((name.clone()?, *form))).collect();
            names.map(|names| Persist::new(cfg, settings, &names))
        });
        stages.push(Stage {
            kind: StageKind::Function(passes),
            fingerprint,
            label,
            ctx: ctx.clone(),
            firewall: None,
            on_calling_thread,
            persist,
        });
        run.clear();
    };
    for leaf in leaves {
        if let Some(next) = leaf.pass.as_function().filter(|_| leaf.pass.kind() == PassKind::Function) {
            // A split module pass sees every function as the previous pass left it, as the
            // module pass would: it starts a stage of its own. The function passes after it
            // join that stage (one query per function instead of one per stage), seeing
            // other functions as they entered it, like any function pass after the first
            // of a stage. A function-local form joins the stage it is in (its precondition
            // makes the stage's input as good as the previous pass's output for it).
            // The executor's joining rule, then the session's own: a split's form, and in the
            // unfused variant a function-local form, starts a stage.
            let joins = joins_function_stage(run.iter().map(|(p, _, _, _)| p), next);
            if leaf.form == Some(Form::Split) || (leaf.form == Some(Form::Local) && !fuse) || !joins {
                flush(&mut run, &mut stages);
            }
            // A `ModuleSplit`'s per-function part is a plain function pass: as a module pass's
            // form it visits functions marked `SkipOptimization` too.
            let pass = if leaf.form.is_some() { next.clone().visiting_marked() } else { next.clone() };
            // A session's own `ModuleSplit` part has no registered identity of its own.
            let name = match (&leaf.ident, leaf.form) {
                (Ident::Object(_), Some(Form::Split)) => None,
                (ident, _) => persistent_name(next, ident),
            };
            run.push((pass, leaf.ident.clone(), leaf.form.is_some(), name));
            continue;
        }
        flush(&mut run, &mut stages);
        let fingerprint = fingerprint(settings, 'm', [(&leaf.ident, false)]);
        let label = leaf.pass.info().name.clone();
        // One set on the session by name overrides the one the pass declares.
        let key = leaf.firewall_name.as_deref().unwrap_or(&label);
        let firewall =
            firewalls.iter().find(|(name, _)| name == key).map(|(_, f)| f.clone()).or_else(|| leaf.firewall.clone());
        stages.push(Stage {
            kind: StageKind::Module(leaf.pass.clone()),
            fingerprint,
            label,
            ctx: ctx.clone(),
            firewall,
            on_calling_thread: false,
            persist: None,
        });
    }
    flush(&mut run, &mut stages);
    stages
}

/// The name that identifies `pass` (planned as `ident`) across processes: its registry name,
/// with the part for a split pass's per-function form. `None` for a pass the registry does not
/// know under its name.
fn persistent_name(pass: &FunctionPass, ident: &Ident) -> Option<String> {
    match ident {
        Ident::Registered(name) => Some(name.clone()),
        Ident::Object(_) => canonical_pass_name(&pass.info().name).map(str::to_string),
        Ident::Part(_, part) => canonical_pass_name(&pass.info().name).map(|name| format!("{name}/{part}")),
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
