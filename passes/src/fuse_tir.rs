//! FuseTIR (module pass, opt level 0, requires InferType): Relax's `relax.transform.FuseTIR`. Each fused group
//! that FuseOps made and LegalizeOps lowered — a `#[Primitive]` function applied in place
//! whose body is a tree of `call_tir` calls — becomes one PrimFunc, called with one
//! `call_tir`; the group's intermediate results become local buffers of that PrimFunc.
//!
//! What it does, per group `fn (%p0, …) { call_tir(@relu, call_tir(@add, %p0, C)) }(%x, …)`:
//! - the new PrimFunc's parameters are one buffer per group parameter (`%p0`, …), one per
//!   distinct constant the body uses (`%c0`, …; the call site passes the constants), and the
//!   output buffer `%out`: destination passing, as every `call_tir` callee;
//! - its body is each callee's body in evaluation order, copied with fresh loop variables
//!   and with the callee's buffers replaced: inputs by the buffers of the values passed,
//!   the output by `%out` for the group's result or by an `alloc`ated intermediate
//!   (`%t0`, …) that lives around the whole body;
//! - it is named after the operators of the group, as TVM names fused kernels
//!   (`fused_conv2d_add_relu`, `_1`, … when taken), and structurally identical fused
//!   PrimFuncs are made once (one kernel for a network's repeated blocks);
//! - per-operator PrimFuncs that no graph function calls any more afterwards are removed.
//!
//! What it deliberately does not do: fuse a group whose body holds anything but `call_tir`
//! calls of buffer-only PrimFuncs on the group's parameters and constants (an operator left
//! unlowered, a tuple, an `if`): such a group stays as it is and still runs; nor simplify the
//! fused body (the tir passes do, e.g. StorageRewrite for the intermediates).
//!
//! Phases: (1) every group application of every function is read (its calls, wiring and
//! types: its shape) on the context's workers, and the distinct shapes listed in order of
//! first use (functions in module order, nodes in arena order); (2) each distinct shape's
//! PrimFunc is built and its canonical key (`prim_structural_key`) made once, on the
//! workers; (3) structurally equal PrimFuncs (equal keys) are merged and named in order of
//! first use; (4) per function, a mutator replaces the planned applications, the PrimFuncs
//! are appended in that order and the per-operator PrimFuncs no longer called are removed.
//! Only (1) and (2) run in parallel and their results are taken in list order, so names,
//! sharing and PrimFunc order do not depend on the thread count.

use std::collections::BTreeSet;
use std::sync::Arc;

use passel_engine::ir::{
    fn_attr, mutate, Constant, ExprKind, ExprMutator, Function, Module, NodeId, OpId, RewriteCx, Type, TypeKind,
};
use passel_engine::tir::{prim_structural_key, Buffer, Param, PrimFunc, PrimFuncBuilder};
use passel_engine::transform::{ModulePass, PassContext, Statistic};
use rustc_hash::FxHashMap;

use crate::legalize_ops::{fan_out, live_sites, FreshNames};
use crate::tir::copy::Copier;

/// The pass's registry name.
pub const NAME: &str = "FuseTIR";

passel_engine::register_pass!(NAME, || Box::new(pass()));

static GROUPS_FUSED: Statistic =
    Statistic::new(NAME, "groups fused", "fused groups replaced by one call_tir (before sharing)");
static PRIMFUNCS_MADE: Statistic =
    Statistic::new(NAME, "primfuncs made", "distinct fused PrimFuncs added (after sharing equal groups)");

/// The `FuseTIR` pass as registered: a module pass at opt level 0 (as in TVM) that requires
/// InferType (a group's buffers come from its values' types).
pub fn pass() -> ModulePass {
    passel_engine::transform::module_pass(NAME, 0, |module, ctx| Ok(fuse_tir(module, Some(ctx)))).with_required(&["InferType"])
}

/// Where a value of the group lives in the fused PrimFunc.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Value {
    /// Group parameter `i`.
    Param(usize),
    /// Distinct constant `i` of the group.
    Const(usize),
    /// The result of the `i`-th call in evaluation order.
    Call(usize),
}

/// One group, read from the old function: what the fused PrimFunc is made of.
struct Group {
    /// Per call in evaluation order: the callee's name and its arguments.
    calls: Vec<(Arc<str>, Vec<Value>)>,
    /// The group's result (a call).
    result: usize,
    /// The constant nodes (old ids), in order of first use.
    consts: Vec<NodeId>,
    /// Types of the group's parameters.
    param_tys: Vec<Type>,
}

/// Reads a group: `None` when it is not a fusable tree of `call_tir` calls (see the module doc).
fn read_group(module: &Module, func: &Function, callee: NodeId, call_tir: OpId) -> Option<Group> {
    let ExprKind::Func { idx } = *func.kind(callee) else { return None };
    let closure = func.closure(idx);
    if !closure.attrs.flag(fn_attr::PRIMITIVE) {
        return None;
    }
    let params = func.ids(closure.params).to_vec();
    let param_tys: Vec<Type> = params.iter().map(|&p| func.ty(p).cloned()).collect::<Option<_>>()?;
    // Nodes of the body, children first (the arena is in post-order).
    let mut nodes = Vec::new();
    let mut stack = vec![closure.body];
    let mut seen = BTreeSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        nodes.push(n);
        match *func.kind(n) {
            ExprKind::Call { args, .. } => stack.extend_from_slice(func.ids(args)),
            ExprKind::Block { bindings, result } => {
                stack.extend(func.ids(bindings).chunks(2).map(|b| b[1]));
                stack.push(result);
            }
            ExprKind::Var { .. } | ExprKind::Const { .. } | ExprKind::Global { .. } => {}
            _ => return None,
        }
    }
    nodes.sort_unstable();
    // A block's variables stand for their values.
    let mut alias: FxHashMap<NodeId, NodeId> = FxHashMap::default();
    for &n in &nodes {
        if let ExprKind::Block { bindings, result } = *func.kind(n) {
            for b in func.ids(bindings).chunks(2) {
                alias.insert(b[0], b[1]);
            }
            alias.insert(n, result);
        }
    }
    let resolve = |mut n: NodeId| {
        // Aliases point to earlier nodes, so this ends.
        while let Some(&to) = alias.get(&n) {
            n = to;
        }
        n
    };
    let mut value: FxHashMap<NodeId, Value> = FxHashMap::default();
    for (i, &p) in params.iter().enumerate() {
        value.insert(p, Value::Param(i));
    }
    let mut group = Group { calls: Vec::new(), result: 0, consts: Vec::new(), param_tys };
    for &n in &nodes {
        match *func.kind(n) {
            ExprKind::Const { .. } => {
                let ty = func.ty(n)?;
                if !matches!(ty.kind(), TypeKind::Tensor(_)) {
                    return None;
                }
                value.insert(n, Value::Const(group.consts.len()));
                group.consts.push(n);
            }
            ExprKind::Call { op, args, .. } if op == call_tir => {
                let args = func.ids(args);
                let ExprKind::Global { name } = *func.kind(*args.first()?) else { return None };
                let callee: Arc<str> = func.sym(name).into();
                let prim = module.get_prim(&callee)?;
                if prim.params().len() != args.len() || prim.params().iter().any(|p| !matches!(p, Param::Buf(_))) {
                    return None;
                }
                let inputs: Vec<Value> =
                    args[1..].iter().map(|&a| value.get(&resolve(a)).copied()).collect::<Option<_>>()?;
                value.insert(n, Value::Call(group.calls.len()));
                group.calls.push((callee, inputs));
            }
            ExprKind::Call { .. } => return None,
            // Parameters (mapped above), bound variables and blocks (aliases) and callees.
            _ => {}
        }
    }
    match value.get(&resolve(closure.body)) {
        Some(&Value::Call(i)) => group.result = i,
        _ => return None,
    }
    Some(group)
}

/// Builds the fused PrimFunc of `group`, or an error naming what refused.
fn build_fused(module: &Module, func: &Function, group: &Group, out_ty: &Type) -> Result<PrimFunc, String> {
    let mut b = PrimFuncBuilder::new();
    let buffer_of = |name: &str, ty: &Type| -> Result<Buffer, String> {
        match ty.kind() {
            TypeKind::Tensor(t) => {
                let shape: Vec<i64> = t
                    .shape
                    .iter()
                    .map(|&d| i64::try_from(d).map_err(|_| format!("`{name}` has a dimension past i64")))
                    .collect::<Result<_, _>>()?;
                Ok(Buffer::new(name, t.dtype, &shape))
            }
            _ => Err(format!("`{name}` is not a tensor")),
        }
    };
    let mut params = Vec::new();
    for (i, ty) in group.param_tys.iter().enumerate() {
        params.push(b.buffer(buffer_of(&format!("p{i}"), ty)?)?);
    }
    let mut consts = Vec::new();
    for (i, &c) in group.consts.iter().enumerate() {
        let ty = func.ty(c).ok_or("an untyped constant")?;
        consts.push(b.buffer(buffer_of(&format!("c{i}"), ty)?)?);
    }
    let out = b.buffer(buffer_of("out", out_ty)?)?;
    for &p in params.iter().chain(&consts).chain(std::iter::once(&out)) {
        b.param(Param::Buf(p));
    }
    // One buffer per call result: `%out` for the group's result, a local one otherwise.
    let mut results = Vec::with_capacity(group.calls.len());
    let mut locals = Vec::new();
    for (i, (callee, _)) in group.calls.iter().enumerate() {
        if i == group.result {
            results.push(out);
            continue;
        }
        let prim = module.get_prim(callee).ok_or_else(|| format!("no PrimFunc `@{callee}`"))?;
        let Some(&Param::Buf(o)) = prim.params().last() else { return Err(format!("`@{callee}` has no output buffer")) };
        let mut buf = prim.buf(o).clone();
        buf.name = format!("t{}", locals.len()).into();
        buf.scope = "local".into();
        let id = b.buffer(buf)?;
        locals.push(id);
        results.push(id);
    }
    let mut body = Vec::with_capacity(group.calls.len());
    for (i, (callee, inputs)) in group.calls.iter().enumerate() {
        let prim = module.get_prim(callee).ok_or_else(|| format!("no PrimFunc `@{callee}`"))?;
        let mut copier = Copier::new(prim);
        copier.fresh = true;
        for (param, input) in prim.params().iter().zip(inputs.iter().map(Some).chain(std::iter::once(None))) {
            let Param::Buf(pb) = *param else { return Err(format!("`@{callee}` has a scalar parameter")) };
            let to = match input {
                Some(Value::Param(k)) => params[*k],
                Some(Value::Const(k)) => consts[*k],
                Some(Value::Call(k)) => results[*k],
                None => results[i],
            };
            if prim.buf(pb).shape != b.peek().buf(to).shape || prim.buf(pb).dtype != b.peek().buf(to).dtype {
                return Err(format!("`@{callee}`'s buffer `{}` does not match the value passed", prim.buf(pb).name));
            }
            copier.bufs.insert(pb, to);
        }
        body.push(copier.stmt(&mut b, prim.body())?);
    }
    let mut root = b.seq(&body);
    for &l in locals.iter().rev() {
        root = b.alloc(l, root);
    }
    Ok(b.finish(root))
}

/// The fused PrimFunc's base name: `fused_` and its callees' operator names.
fn fused_name(group: &Group) -> String {
    let mut name = String::from("fused");
    for (callee, _) in &group.calls {
        let op = match callee.rsplit_once('_') {
            Some((base, k)) if !k.is_empty() && k.bytes().all(|c| c.is_ascii_digit()) => base,
            _ => callee,
        };
        name.push('_');
        name.push_str(op);
    }
    name
}

/// A group as read at its call site: the group, its shape and the type of its result.
struct Site {
    group: Group,
    shape: Shape,
    out_ty: Type,
}

/// What a group's fused PrimFunc depends on: callees, wiring and types. Groups of one shape
/// make the same PrimFunc, so it is built once per shape.
#[derive(PartialEq, Eq, Hash)]
struct Shape {
    calls: Vec<(Arc<str>, Vec<Value>)>,
    result: usize,
    param_tys: Vec<Type>,
    const_tys: Vec<Option<Type>>,
    out_ty: Type,
}

/// Reads the group applied at `id` of `func`, if it is fusable.
fn read_site(module: &Module, func: &Function, id: NodeId, call_tir: OpId) -> Option<Site> {
    let ExprKind::Apply { callee, .. } = *func.kind(id) else { return None };
    let group = read_group(module, func, callee, call_tir)?;
    let out_ty = func.ty(id)?.clone();
    let shape = Shape {
        calls: group.calls.clone(),
        result: group.result,
        param_tys: group.param_tys.clone(),
        const_tys: group.consts.iter().map(|&c| func.ty(c).cloned()).collect(),
        out_ty: out_ty.clone(),
    };
    Some(Site { group, shape, out_ty })
}

/// The plan for one module: which group applications become which fused PrimFunc.
#[derive(Default)]
struct Plan {
    /// Per graph function (module order): fused application (old id) → (its site, its kernel).
    applies: Vec<FxHashMap<NodeId, (usize, usize)>>,
    /// The sites read, in module and arena order (`None`: not fusable).
    sites: Vec<Option<Site>>,
    /// Per kernel: name and graph type.
    kernels: Vec<(Arc<str>, Type)>,
    /// The new PrimFuncs, in order of first use.
    new: Vec<(Arc<str>, Arc<PrimFunc>)>,
}

/// Phases (1)–(3) of the module docs: reads every group application and builds every
/// distinct shape on the context's workers, then merges structurally equal PrimFuncs and names
/// them in order of first use.
fn plan(module: &Module, call_tir: OpId, ctx: Option<&PassContext>) -> Plan {
    let (funcs, at) = live_sites(module, |k| matches!(k, ExprKind::Apply { .. }));
    // (1) The groups, and the distinct shapes in order of first use.
    let sites = fan_out(ctx, &at, |&(fi, id)| read_site(module, funcs[fi], id, call_tir));
    let mut by_shape: FxHashMap<&Shape, usize> = FxHashMap::default();
    let mut distinct: Vec<(usize, &Site)> = Vec::new();
    let mut shape_of: Vec<Option<usize>> = Vec::with_capacity(sites.len());
    for (&(fi, _), site) in at.iter().zip(&sites) {
        shape_of.push(site.as_ref().map(|site| {
            *by_shape.entry(&site.shape).or_insert_with(|| {
                distinct.push((fi, site));
                distinct.len() - 1
            })
        }));
    }
    // (2) One PrimFunc per shape (a shape that does not build leaves its groups alone).
    let built = fan_out(ctx, &distinct, |&(fi, site)| {
        build_fused(module, funcs[fi], &site.group, &site.out_ty).ok().map(|prim| {
            let key = prim_structural_key(&prim);
            (prim, key)
        })
    });
    // (3) Structurally equal PrimFuncs (equal canonical keys) merged, names in order of first use.
    let mut names = FreshNames::of(module);
    let mut by_key: FxHashMap<String, usize> = FxHashMap::default();
    let mut out = Plan { applies: vec![FxHashMap::default(); funcs.len()], ..Plan::default() };
    let mut kernel_of: Vec<Option<usize>> = Vec::with_capacity(distinct.len());
    for ((_, site), built) in distinct.iter().zip(built) {
        kernel_of.push(built.map(|(prim, key)| {
            if let Some(&k) = by_key.get(&key) {
                return k;
            }
            by_key.insert(key, out.new.len());
            let name = names.fresh(&fused_name(&site.group));
            out.kernels.push((name.clone(), prim.graph_type()));
            out.new.push((name, Arc::new(prim)));
            out.new.len() - 1
        }));
    }
    for (i, (&(fi, id), shape)) in at.iter().zip(shape_of).enumerate() {
        if let Some(k) = shape.and_then(|s| kernel_of[s]) {
            out.applies[fi].insert(id, (i, k));
        }
    }
    out.sites = sites;
    out
}

/// Phase (4): replaces the planned group applications of one function.
struct Fuse<'p> {
    plan: &'p Plan,
    applies: &'p FxHashMap<NodeId, (usize, usize)>,
    call_tir: OpId,
}

impl ExprMutator for Fuse<'_> {
    fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> Option<NodeId> {
        let ExprKind::Apply { args, .. } = *kind else { return None };
        let &(site, kernel) = self.applies.get(&old)?;
        let site = self.plan.sites[site].as_ref()?;
        let (name, prim_ty) = &self.plan.kernels[kernel];
        let func = cx.old();
        let mut call_args: Vec<NodeId> = Vec::with_capacity(1 + site.group.param_tys.len() + site.group.consts.len());
        let g = cx.global(name);
        cx.set_ty(g, Some(prim_ty.clone()));
        call_args.push(g);
        call_args.extend_from_slice(cx.ids(args));
        for &c in &site.group.consts {
            let ExprKind::Const { idx } = *func.kind(c) else { return None };
            let constant: Arc<Constant> = func.constant(idx).clone();
            let node = cx.constant_node(constant);
            cx.set_ty(node, func.ty(c).cloned());
            call_args.push(node);
        }
        let call = cx.call(self.call_tir, &call_args, passel_engine::ir::Attrs::new());
        cx.set_ty(call, Some(site.out_ty.clone()));
        Some(call)
    }
}

/// The PrimFuncs the graph functions of `module` call.
fn called_prims(module: &Module) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, func) in module.iter() {
        for name in func.live_globals() {
            if module.get_prim(name).is_some() {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// Fuses every fusable group of `module` (see the module docs). With `ctx`, groups are read
/// and built on its workers; the result is the same at any thread count.
pub fn fuse_tir(module: Module, ctx: Option<&PassContext>) -> Module {
    let Some(call_tir) = passel_engine::op::lookup("call_tir") else { return module };
    if module.num_prims() == 0 {
        return module;
    }
    let mut plan = plan(&module, call_tir, ctx);
    if let Some(ctx) = ctx {
        GROUPS_FUSED.add(ctx, plan.applies.iter().map(|a| a.len() as u64).sum());
        PRIMFUNCS_MADE.add(ctx, plan.new.len() as u64);
    }
    if plan.new.is_empty() {
        return module;
    }
    let before = called_prims(&module);
    let mut out = module.clone();
    for ((name, func), applies) in module.iter().zip(&plan.applies) {
        if applies.is_empty() {
            continue;
        }
        let mut m = Fuse { plan: &plan, applies, call_tir };
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
    let after = called_prims(&out);
    out.retain_prims(|name| !before.contains(name) || after.contains(name));
    out
}
