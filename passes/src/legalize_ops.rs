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
//! Phases: (1) per function, a mutator replaces lowered calls, collecting new PrimFuncs in a
//! module-wide table keyed by (operator, attributes, types); (2) the PrimFuncs are added after
//! the module's existing ones, in order of first use. Deterministic: functions in module
//! order, nodes in arena order.

use std::collections::BTreeSet;
use std::sync::Arc;

use passel_engine::ir::{mutate, ExprKind, ExprMutator, Module, NodeId, RewriteCx, TensorType, Type, TypeKind};
use passel_engine::tir::lower::lower_call;
use passel_engine::tir::PrimFunc;
use passel_engine::transform::{Diagnostic, ModulePass, PassContext};
use rustc_hash::FxHashMap;

/// The pass's registry name.
pub const NAME: &str = "LegalizeOps";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `LegalizeOps` pass as registered: a module pass at opt level 0 that requires InferType.
pub fn pass() -> ModulePass {
    passel_engine::transform::module_pass(NAME, 0, |module, ctx| Ok(legalize_ops(module, Some(ctx))))
        .with_required(&["InferType"])
}

/// The table of PrimFuncs made so far.
#[derive(Default)]
struct Made {
    /// (operator, attributes, argument types, result type) → PrimFunc name and graph type.
    by_key: FxHashMap<String, (Arc<str>, Type)>,
    /// New PrimFuncs in order of first use.
    new: Vec<(Arc<str>, Arc<PrimFunc>)>,
    /// Operators without a definition (or whose definition refused these types), with the
    /// first reason.
    skipped: std::collections::BTreeMap<String, String>,
    /// Names taken in the module.
    taken: FreshNames,
}

impl Made {
    fn fresh_name(&mut self, op: &str) -> Arc<str> {
        let base: String = op.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        self.taken.fresh(&base)
    }
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

struct Legalize<'m> {
    made: &'m mut Made,
    call_tir: passel_engine::ir::OpId,
}

fn tensor(t: Option<&Type>) -> Option<TensorType> {
    match t?.kind() {
        TypeKind::Tensor(t) => Some(t.clone()),
        _ => None,
    }
}

impl ExprMutator for Legalize<'_> {
    fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> Option<NodeId> {
        let ExprKind::Call { op, attrs, args } = *kind else { return None };
        if op == self.call_tir {
            return None;
        }
        let def = passel_engine::op::try_get(op)?;
        let out_ty = cx.old().ty(old)?.clone();
        // A tuple result (split, topk, batch_norm) becomes one output buffer per field.
        let outs: Vec<TensorType> = match out_ty.kind() {
            TypeKind::Tuple(fields) if !fields.is_empty() => {
                fields.iter().map(|f| tensor(Some(f))).collect::<Option<_>>()?
            }
            _ => vec![tensor(Some(&out_ty))?],
        };
        let arg_ids: Vec<NodeId> = cx.ids(args).to_vec();
        let arg_tys: Option<Vec<TensorType>> = arg_ids.iter().map(|&a| tensor(cx.ty(a))).collect();
        let arg_tys = arg_tys?;
        let call_attrs = cx.call_attrs(attrs).clone();
        let key = format!("{}|{:?}|{:?}|{:?}", def.name, call_attrs, arg_tys, outs);
        let (name, prim_ty) = match self.made.by_key.get(&key) {
            Some(entry) => entry.clone(),
            None => match lower_call(def.name, &arg_tys, &call_attrs, &outs) {
                None => {
                    self.made
                        .skipped
                        .entry(def.name.to_string())
                        .or_insert_with(|| "no loop-level definition yet".into());
                    return None;
                }
                Some(Ok(prim)) => {
                    let name = self.made.fresh_name(def.name);
                    let ty = prim.graph_type();
                    self.made.by_key.insert(key, (name.clone(), ty.clone()));
                    self.made.new.push((name.clone(), Arc::new(prim)));
                    (name, ty)
                }
                Some(Err(reason)) => {
                    self.made.skipped.entry(def.name.to_string()).or_insert(reason);
                    return None;
                }
            },
        };
        let g = cx.global(&name);
        cx.set_ty(g, Some(prim_ty));
        let mut call_args = Vec::with_capacity(arg_ids.len() + 1);
        call_args.push(g);
        call_args.extend_from_slice(&arg_ids);
        let mut tir_attrs = passel_engine::ir::Attrs::new();
        if outs.len() > 1 {
            tir_attrs.set("outputs", passel_engine::ir::AttrValue::Int(outs.len() as i64));
        }
        let call = cx.call(self.call_tir, &call_args, tir_attrs);
        cx.set_ty(call, Some(out_ty));
        Some(call)
    }
}

/// Lowers every call that has a loop-level definition (see the module docs). With `ctx`, a
/// warning names the operators left as graph calls.
pub fn legalize_ops(module: Module, ctx: Option<&PassContext>) -> Module {
    let Some(call_tir) = passel_engine::op::lookup("call_tir") else { return module };
    let mut made = Made { taken: FreshNames::of(&module), ..Made::default() };
    let mut out = module.clone();
    let mut changed = false;
    for (name, func) in module.iter() {
        if !func.is_well_formed() {
            continue;
        }
        let mut m = Legalize { made: &mut made, call_tir };
        let new = mutate(func, &mut m);
        if !Arc::ptr_eq(&new, func) {
            changed = true;
            // The name exists, so replacing cannot fail.
            let _ = out.insert(name, new);
        }
    }
    for (name, prim) in std::mem::take(&mut made.new) {
        // Fresh names never collide.
        let _ = out.add_prim(&name, prim);
    }
    if let Some(ctx) = ctx {
        for (op, reason) in &made.skipped {
            ctx.emit(Diagnostic::warning(NAME, format!("`{op}` stays a graph call: {reason}")));
        }
    }
    if changed {
        out
    } else {
        module
    }
}
