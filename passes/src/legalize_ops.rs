//! LegalizeOps (module pass, opt level 0, requires InferType): Relax's
//! `relax.transform.LegalizeOps`. Every graph operator call with a loop-level definition
//! becomes `call_tir(@prim, args…)` of a PrimFunc that computes it.
//!
//! What it does: for each call of an operator listed in `tir::lower::LOWERED_OPS` whose
//! arguments and result have known tensor types (run InferType first; it is required), it
//! builds the PrimFunc with [`lower_call`] and replaces the call. A tuple result (`split`,
//! `topk`, `batch_norm`) becomes a PrimFunc with one output buffer per field, called with
//! `call_tir(…, outputs=n)`, whose value is the tuple. Calls with the same operator,
//! attributes and types share one PrimFunc (one kernel for a network's repeated layers), as
//! TVM's block builder deduplicates; PrimFuncs are named after their operator (`@add`,
//! `@add_1`, … in order of first use), never colliding with existing globals.
//!
//! What it deliberately does not do: lower operators without a definition (they stay graph
//! calls, which the interpreter still runs, with a warning naming them once per operator),
//! nor calls whose types are unknown; fuse (FuseOps groups, FuseTIR merges), nor simplify the
//! PrimFuncs (the tir passes do).
//!
//! Phases: (1) every live call of every function is read (operator, attributes, types: its
//! key) on the context's workers, and the distinct keys are listed in order of first use
//! (functions in module order, nodes in arena order); (2) each distinct call is lowered once,
//! on the workers; (3) the PrimFuncs that lowered are named in order of first use; (4) per
//! function, a mutator replaces the planned calls, and the PrimFuncs are added after the
//! module's existing ones in that order. Only (1) and (2) run in parallel and their results
//! are taken in list order, so names, sharing and PrimFunc order do not depend on the thread
//! count.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use passel_engine::ir::{
    mutate, ExprKind, ExprMutator, Function, Module, NodeId, OpId, RewriteCx, TensorType, Type, TypeKind,
};
use passel_engine::tir::lower::lower_call;
use passel_engine::tir::PrimFunc;
use passel_engine::transform::{Diagnostic, ModulePass, PassContext, Statistic};
use rustc_hash::FxHashMap;

/// The pass's registry name.
pub const NAME: &str = "LegalizeOps";

passel_engine::register_pass!(NAME, || Box::new(pass()));

static CALLS_LOWERED: Statistic =
    Statistic::new(NAME, "calls lowered", "operator calls replaced by call_tir (before sharing)");
static PRIMFUNCS_MADE: Statistic =
    Statistic::new(NAME, "primfuncs made", "distinct PrimFuncs added (after sharing equal calls)");

/// The `LegalizeOps` pass as registered: a module pass at opt level 0 that requires InferType.
pub fn pass() -> ModulePass {
    passel_engine::transform::module_pass(NAME, 0, |module, ctx| Ok(legalize_ops(module, Some(ctx))))
        .with_required(&["InferType"])
}

/// `f` on every item, on `ctx`'s workers when there is a context (inline without), results in
/// item order. LegalizeOps and FuseTIR split their work with it.
pub(crate) fn fan_out<I: Sync, T: Send>(
    ctx: Option<&PassContext>,
    items: &[I],
    f: impl Fn(&I) -> T + Sync + Send,
) -> Vec<T> {
    match ctx {
        Some(ctx) => ctx.map_items(items, f),
        None => items.iter().map(f).collect(),
    }
}

/// The live nodes of `module`'s well-formed functions that `keep` selects, as (function
/// position, node), in module and arena order, with the functions by position. LegalizeOps
/// finds its calls and FuseTIR its group applications with it.
pub(crate) fn live_sites(
    module: &Module,
    keep: impl Fn(&ExprKind) -> bool,
) -> (Vec<&Arc<Function>>, Vec<(usize, NodeId)>) {
    let funcs: Vec<&Arc<Function>> = module.iter().map(|(_, f)| f).collect();
    let mut sites = Vec::new();
    for (fi, func) in funcs.iter().enumerate() {
        if !func.is_well_formed() {
            continue;
        }
        let live = func.live_mask();
        sites.extend(func.node_ids().filter(|id| live[id.index()] && keep(func.kind(*id))).map(|id| (fi, id)));
    }
    (funcs, sites)
}

/// Names for new PrimFuncs: `base`, then `base_1`, `base_2`, … skipping names the module
/// holds. Each base remembers its next suffix, so making n names of one base is O(n), not
/// O(n²). LegalizeOps and FuseTIR name their PrimFuncs with it.
#[derive(Default)]
pub(crate) struct FreshNames {
    taken: BTreeSet<String>,
    next: FxHashMap<String, usize>,
}

impl FreshNames {
    /// The names of `module`'s functions of both kinds, taken.
    pub(crate) fn of(module: &Module) -> FreshNames {
        let mut names = FreshNames::default();
        names.taken.extend(module.iter().map(|(n, _)| n.to_string()));
        names.taken.extend(module.prim_funcs().map(|(n, _)| n.to_string()));
        names
    }

    /// A name not taken yet, from `base`; taken from now on.
    pub(crate) fn fresh(&mut self, base: &str) -> Arc<str> {
        let k = self.next.entry(base.to_string()).or_insert(0);
        let mut name = if *k == 0 { base.to_string() } else { format!("{base}_{k}") };
        while self.taken.contains(&name) {
            *k += 1;
            name = format!("{base}_{k}");
        }
        *k += 1;
        self.taken.insert(name.clone());
        name.into()
    }
}

/// A lowerable call as read from the old function: what `lower_call` needs, which is also
/// the key under which calls share a PrimFunc (equal operator, attributes and types).
#[derive(PartialEq, Eq, Hash)]
struct CallSite {
    op: &'static str,
    attrs: passel_engine::ir::Attrs,
    arg_tys: Vec<TensorType>,
    outs: Vec<TensorType>,
}

fn tensor(t: Option<&Type>) -> Option<TensorType> {
    match t?.kind() {
        TypeKind::Tensor(t) => Some(t.clone()),
        _ => None,
    }
}

/// Reads call `id` of `func`: `None` unless it is an operator call (not `call_tir`) whose
/// arguments and result (or each field of a tuple result) are typed tensors.
fn call_site(func: &Function, id: NodeId, call_tir: OpId) -> Option<CallSite> {
    let ExprKind::Call { op, attrs, args } = *func.kind(id) else { return None };
    if op == call_tir {
        return None;
    }
    let def = passel_engine::op::try_get(op)?;
    let out_ty = func.ty(id)?;
    // A tuple result (split, topk, batch_norm) becomes one output buffer per field.
    let outs: Vec<TensorType> = match out_ty.kind() {
        TypeKind::Tuple(fields) if !fields.is_empty() => fields.iter().map(|f| tensor(Some(f))).collect::<Option<_>>()?,
        _ => vec![tensor(Some(out_ty))?],
    };
    let arg_tys: Vec<TensorType> = func.ids(args).iter().map(|&a| tensor(func.ty(a))).collect::<Option<_>>()?;
    let attrs = func.call_attrs(attrs).clone();
    Some(CallSite { op: def.name, attrs, arg_tys, outs })
}

/// The plan for one module: which calls become which PrimFunc.
#[derive(Default)]
struct Plan {
    /// Per graph function (module order): lowered call (old id) → index into `kernels`.
    calls: Vec<FxHashMap<NodeId, usize>>,
    /// Per distinct key, in order of first use: the PrimFunc's name and graph type.
    kernels: Vec<(Arc<str>, Type)>,
    /// The new PrimFuncs, in order of first use.
    new: Vec<(Arc<str>, Arc<PrimFunc>)>,
    /// Operators without a definition (or whose definition refused these types), with the
    /// first reason in order of use.
    skipped: BTreeMap<String, String>,
}

/// Phases (1)–(3) of the module docs: finds the calls, lowers each distinct one on the
/// context's workers, and names the results in order of first use.
fn plan(module: &Module, call_tir: OpId, ctx: Option<&PassContext>) -> Plan {
    // (1) Every live call of every well-formed function, in module and arena order.
    let (funcs, sites) = live_sites(module, |k| matches!(k, ExprKind::Call { .. }));
    let read = fan_out(ctx, &sites, |&(fi, id)| call_site(funcs[fi], id, call_tir));
    // Distinct keys in order of first use.
    let mut by_key: FxHashMap<&CallSite, usize> = FxHashMap::default();
    let mut distinct: Vec<&CallSite> = Vec::new();
    let mut site_kernel: Vec<Option<usize>> = Vec::with_capacity(read.len());
    for site in &read {
        site_kernel.push(site.as_ref().map(|site| {
            *by_key.entry(site).or_insert_with(|| {
                distinct.push(site);
                distinct.len() - 1
            })
        }));
    }
    // (2) Each distinct call lowered once.
    let lowered = fan_out(ctx, &distinct, |site| lower_call(site.op, &site.arg_tys, &site.attrs, &site.outs));
    // (3) Names in order of first use; a key that did not lower leaves its calls alone.
    let mut names = FreshNames::of(module);
    let mut out = Plan { calls: vec![FxHashMap::default(); funcs.len()], ..Plan::default() };
    let mut kernel_of: Vec<Option<usize>> = Vec::with_capacity(distinct.len());
    for (site, res) in distinct.iter().zip(lowered) {
        kernel_of.push(match res {
            None => {
                out.skipped.entry(site.op.to_string()).or_insert_with(|| "no loop-level definition yet".into());
                None
            }
            Some(Err(reason)) => {
                out.skipped.entry(site.op.to_string()).or_insert(reason);
                None
            }
            Some(Ok(prim)) => {
                let base: String =
                    site.op.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
                let name = names.fresh(&base);
                out.kernels.push((name.clone(), prim.graph_type()));
                out.new.push((name, Arc::new(prim)));
                Some(out.kernels.len() - 1)
            }
        });
    }
    for (&(fi, id), k) in sites.iter().zip(site_kernel) {
        if let Some(k) = k.and_then(|k| kernel_of[k]) {
            out.calls[fi].insert(id, k);
        }
    }
    out
}

/// Phase (4): replaces the planned calls of one function.
struct Legalize<'p> {
    calls: &'p FxHashMap<NodeId, usize>,
    kernels: &'p [(Arc<str>, Type)],
    call_tir: OpId,
}

impl ExprMutator for Legalize<'_> {
    fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> Option<NodeId> {
        let ExprKind::Call { args, .. } = *kind else { return None };
        let (name, prim_ty) = &self.kernels[*self.calls.get(&old)?];
        let out_ty = cx.old().ty(old)?.clone();
        let n_outs = match out_ty.kind() {
            TypeKind::Tuple(fields) if !fields.is_empty() => fields.len(),
            _ => 1,
        };
        let arg_ids: Vec<NodeId> = cx.ids(args).to_vec();
        let g = cx.global(name);
        cx.set_ty(g, Some(prim_ty.clone()));
        let mut call_args = Vec::with_capacity(arg_ids.len() + 1);
        call_args.push(g);
        call_args.extend_from_slice(&arg_ids);
        let mut tir_attrs = passel_engine::ir::Attrs::new();
        if n_outs > 1 {
            tir_attrs.set("outputs", passel_engine::ir::AttrValue::Int(n_outs as i64));
        }
        let call = cx.call(self.call_tir, &call_args, tir_attrs);
        cx.set_ty(call, Some(out_ty));
        Some(call)
    }
}

/// Lowers every call that has a loop-level definition (see the module docs). With `ctx`, the
/// distinct calls are lowered on its workers and a warning names the operators left as graph
/// calls; the result is the same at any thread count.
pub fn legalize_ops(module: Module, ctx: Option<&PassContext>) -> Module {
    let Some(call_tir) = passel_engine::op::lookup("call_tir") else { return module };
    let mut plan = plan(&module, call_tir, ctx);
    if let Some(ctx) = ctx {
        for (op, reason) in &plan.skipped {
            ctx.emit(Diagnostic::warning(NAME, format!("`{op}` stays a graph call: {reason}")));
        }
        CALLS_LOWERED.add(ctx, plan.calls.iter().map(|c| c.len() as u64).sum());
        PRIMFUNCS_MADE.add(ctx, plan.new.len() as u64);
    }
    if plan.new.is_empty() {
        return module;
    }
    let mut out = module.clone();
    for ((name, func), calls) in module.iter().zip(&plan.calls) {
        if calls.is_empty() {
            continue;
        }
        let mut m = Legalize { calls, kernels: &plan.kernels, call_tir };
        let new = mutate(func, &mut m);
        if !Arc::ptr_eq(&new, func) {
            // The name exists, so replacing cannot fail.
            let _ = out.insert(name, new);
        }
    }
    for (name, prim) in std::mem::take(&mut plan.new) {
        // Fresh names never collide.
        let _ = out.add_prim(&name, prim);
    }
    out
}
