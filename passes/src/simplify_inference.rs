//! SimplifyInference (function pass, opt level 0, requires InferType): rewrites the
//! training-time normalisation operators into the arithmetic they compute in inference, as
//! TVM's `SimplifyInference` does, so that later passes (FoldConstant, FoldScaleAxis,
//! FuseOps) see plain elementwise ops.
//!
//! What it does (`C` is the length of `x` along `axis`; a 1-d parameter `p` of length `C` is
//! reshaped to `[C, 1, …, 1]` so that it broadcasts along `axis`, or used as is when `axis` is
//! the last axis):
//! - `batch_norm(x, gamma, beta, mean, var, axis, epsilon)` returns the tuple
//!   `(out, mean, var)`. Its projections are rewritten: `.0` becomes, with
//!   `scale = gamma / sqrt(var + epsilon)`, TVM's `x * scale + (beta - mean * scale)` (the
//!   form FoldScaleAxis folds into a preceding conv2d / dense) when `gamma` and `var` are
//!   atoms, else `(x - mean) * scale + beta` (each operand written once); `.1` becomes
//!   `mean` and `.2` becomes `var` (mean and variance pass through, as in TVM). A
//!   projection that drops arguments is rewritten only when the dropped arguments are pure.
//!   A let-bound `batch_norm` whose `mean` and `var` are atoms is rewritten too: when its
//!   variable is only projected, the binding becomes `out` itself (the variable's type
//!   becomes the first field's), `.0` the variable and `.1` / `.2` the atoms; when the
//!   variable is used another way, the binding becomes the literal tuple `(out, mean, var)`
//!   and `.1` / `.2` become the atoms;
//! - `layer_norm(x, gamma, beta, axis, epsilon)` becomes the block
//!   `{ let c = x - mean(x, axis, keepdims); let v = mean(c * c, axis, keepdims);
//!   c / sqrt(v + epsilon) * gamma + beta }` (biased variance, as the kernel computes); a
//!   compound `x` is bound first so that it is evaluated once;
//! - `dropout(x, rate)` becomes `x`: in this IR dropout returns a single tensor (not TVM's
//!   `(out, mask)` tuple) and is the identity in inference.
//!
//! Every new node gets the type its operator's relation gives; fresh variable names
//! (`%ln_c0`, `%ln_v0`, …) are chosen per function, deterministically, avoiding the names the
//! function already has.
//!
//! What it deliberately does not do: fold the parameter arithmetic into constants
//! (FoldConstant does), rewrite a call whose input type is unknown or whose attributes are
//! invalid (the call stays; InferType reports the error), rewrite a let-bound `batch_norm`
//! whose `mean` or `var` is a compound expression (the tuple would duplicate it), or remove
//! bindings that become unused (DeadCodeElimination).
//!
//! Phases:
//! 1. Quick scan for the three operators; none → the same `Arc`.
//! 2. One copy of the live nodes ([`passel_engine::ir::rewrite::Rewriter`]); each call and projection is
//!    rewritten once its operands are copied. The output has none of the three operators
//!    left where a rewrite applied, so a second run returns its input.

use std::sync::Arc;

use passel_engine::ir::{
    AttrValue, Attrs, Constant, DType, ExprKind, Function, FunctionBuilder, NodeId, OpId, Tensor, Type,
};
use passel_engine::op;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::census::{more, Counter};
use passel_engine::ir::rewrite::{bound_values, eval_order, Propagate, Rewriter, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "SimplifyInference";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `SimplifyInference` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 0, |func, _module, ctx| {
        Ok(crate::census::counted(ctx, &func, simplify_inference(&func), STATISTICS))
    })
    .with_required(&["InferType"])
}

pub(crate) static STATISTICS: &[Counter] =
    &[(&FUNCTIONS_CHANGED, |_, _| 1), (&CALLS_ADDED, |b, a| more(b.calls, a.calls))];
static FUNCTIONS_CHANGED: Statistic =
    Statistic::new("SimplifyInference", "functions changed", "functions with inference-only operators rewritten");
static CALLS_ADDED: Statistic =
    Statistic::new("SimplifyInference", "calls added", "operator calls added by expanding batch_norm and friends");

struct Ops {
    batch_norm: OpId,
    layer_norm: OpId,
    dropout: OpId,
    add: OpId,
    subtract: OpId,
    multiply: OpId,
    divide: OpId,
    sqrt: OpId,
    mean: OpId,
    reshape: OpId,
}

impl Ops {
    fn lookup() -> Option<Ops> {
        Some(Ops {
            batch_norm: op::lookup("batch_norm")?,
            layer_norm: op::lookup("layer_norm")?,
            dropout: op::lookup("dropout")?,
            add: op::lookup("add")?,
            subtract: op::lookup("subtract")?,
            multiply: op::lookup("multiply")?,
            divide: op::lookup("divide")?,
            sqrt: op::lookup("sqrt")?,
            mean: op::lookup("mean")?,
            reshape: op::lookup("reshape")?,
        })
    }
}

/// Runs SimplifyInference on `func`; returns `func` itself (pointer-equal) when it has no
/// `batch_norm`, `layer_norm` or `dropout` call that can be rewritten.
pub fn simplify_inference(func: &Arc<Function>) -> Arc<Function> {
    let Some(ops) = Ops::lookup() else { return Arc::clone(func) };
    let any = func.nodes().iter().any(|n| {
        matches!(n.kind, ExprKind::Call { op, .. } if op == ops.batch_norm || op == ops.layer_norm || op == ops.dropout)
    });
    if !any || !func.is_well_formed() {
        return Arc::clone(func);
    }
    let impure = impurity(func);
    let bound = bound_values(func);
    // batch_norm calls that are the direct operand of a projection: the projection rewrites.
    let mut projected = vec![false; func.num_nodes()];
    for node in func.nodes() {
        if let ExprKind::Proj { tuple, .. } = node.kind {
            if is_call_of(func, tuple, ops.batch_norm) {
                projected[tuple.index()] = true;
            }
        }
    }
    let unpacked = unpackable(func, &ops, &bound);
    // New binding variables whose type changes from the tuple to its first field.
    let mut retype: Vec<(NodeId, Option<Type>)> = Vec::new();
    let mut names = FreshNames::new(func);
    let rw = Rewriter::new(func, Propagate::Nothing);
    let out = rw.run(|rw, id| {
        let f = rw.func;
        match *f.kind(id) {
            ExprKind::Call { op, attrs, args } if op == ops.dropout => {
                let &[x] = f.ids(args) else { return None };
                let attrs = f.call_attrs(attrs);
                // Only a call the type relation accepts is the identity.
                let x_ty = f.ty(x)?.clone();
                (op::try_get(op)?.type_rel)(std::slice::from_ref(&x_ty), attrs).ok()?;
                Some(rw.map(x))
            }
            ExprKind::Call { op, attrs, args } if op == ops.layer_norm => {
                let args = f.ids(args);
                let attrs = f.call_attrs(attrs).clone();
                layer_norm(rw, &ops, &mut names, args, &attrs)
            }
            ExprKind::Call { op, attrs, args } if op == ops.batch_norm && unpacked.contains_key(&id.0) => {
                let args = f.ids(args);
                let attrs = f.call_attrs(attrs).clone();
                let out = batch_norm_out(rw, &ops, args, &attrs)?;
                let new_var = rw.map(unpacked[&id.0]);
                retype.push((new_var, f.ty(args[0]).cloned()));
                Some(out)
            }
            ExprKind::Call { op, attrs, args } if op == ops.batch_norm && !projected[id.index()] => {
                let args = f.ids(args);
                let &[_, _, _, mean, var] = args else { return None };
                if !f.kind(mean).is_atom() || !f.kind(var).is_atom() {
                    return None;
                }
                let attrs = f.call_attrs(attrs).clone();
                let out = batch_norm_out(rw, &ops, args, &attrs)?;
                let (m, v) = (rw.map(mean), rw.map(var));
                let tuple = rw.b.tuple(&[out, m, v]);
                rw.b.set_ty(tuple, f.ty(id).cloned());
                Some(tuple)
            }
            ExprKind::Proj { tuple, index } => {
                let (call, direct) = if is_call_of(f, tuple, ops.batch_norm) {
                    (tuple, true)
                } else if matches!(f.kind(tuple), ExprKind::Var { .. }) {
                    let value = bound[tuple.index()];
                    if value == NONE || !is_call_of(f, value, ops.batch_norm) {
                        return None;
                    }
                    (value, false)
                } else {
                    return None;
                };
                let ExprKind::Call { attrs, args, .. } = *f.kind(call) else { return None };
                let args = f.ids(args);
                if args.len() != 5 {
                    return None;
                }
                let attrs = f.call_attrs(attrs).clone();
                // The tuple-typed call must be well typed for its projections to be meaningful.
                f.ty(call)?;
                match (index, direct) {
                    (0, true) => batch_norm_out(rw, &ops, args, &attrs),
                    // The binding now holds the first field itself.
                    (0, false) if unpacked.contains_key(&call.0) => Some(rw.map(tuple)),
                    (1 | 2, true) => {
                        let keep = args[index as usize + 2];
                        if args.iter().any(|&a| a != keep && impure[a.index()]) {
                            return None;
                        }
                        Some(rw.map(keep))
                    }
                    // Through a variable: the binding became `(out, mean, var)` with atom
                    // `mean` and `var`, which may be used again.
                    (1 | 2, false) => {
                        let keep = args[index as usize + 2];
                        f.kind(keep).is_atom().then(|| rw.map(keep))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    });
    match out {
        Some(new) if retype.is_empty() => Arc::new(new),
        Some(new) => {
            let mut types: Vec<Option<Type>> = new.node_ids().map(|id| new.ty(id).cloned()).collect();
            for (var, ty) in retype {
                if let Some(slot) = types.get_mut(var.index()) {
                    *slot = ty;
                }
            }
            Arc::new(new.with_types(types))
        }
        None => Arc::clone(func),
    }
}

/// Let-bound `batch_norm` calls whose variable is used only by projections, all after the
/// binding, with atom `mean` and `var` and a rewritable call: call → its variable. Such a
/// binding becomes the first field itself, `.0` the variable, `.1` / `.2` the atoms.
fn unpackable(func: &Function, ops: &Ops, bound: &[NodeId]) -> FxHashMap<u32, NodeId> {
    let live = func.live_mask();
    let mut uses = vec![0u32; func.num_nodes()];
    let mut proj_uses = vec![0u32; func.num_nodes()];
    // Position in evaluation order, and the earliest projection of each variable.
    let mut pos = vec![u32::MAX; func.num_nodes()];
    for (i, id) in eval_order(func).into_iter().enumerate() {
        pos[id.index()] = i as u32;
    }
    let mut first_proj = vec![u32::MAX; func.num_nodes()];
    for id in func.node_ids().filter(|id| live[id.index()]) {
        passel_engine::ir::rewrite::for_each_use(func, id, |o| uses[o.index()] += 1);
        if let ExprKind::Proj { tuple, .. } = *func.kind(id) {
            proj_uses[tuple.index()] += 1;
            first_proj[tuple.index()] = first_proj[tuple.index()].min(pos[id.index()]);
        }
    }
    let mut out = FxHashMap::default();
    for var in func.node_ids() {
        let value = bound[var.index()];
        if value == NONE || uses[var.index()] != proj_uses[var.index()] || first_proj[var.index()] <= pos[value.index()]
        {
            continue;
        }
        let ExprKind::Call { op, attrs, args } = *func.kind(value) else { continue };
        let args = func.ids(args);
        if op != ops.batch_norm || args.len() != 5 || !func.kind(args[3]).is_atom() || !func.kind(args[4]).is_atom() {
            continue;
        }
        if bn_checks(func, ops, args, func.call_attrs(attrs)).is_some() {
            out.insert(value.0, var);
        }
    }
    out
}

fn is_call_of(func: &Function, id: NodeId, op: OpId) -> bool {
    matches!(func.kind(id), ExprKind::Call { op: o, .. } if *o == op)
}

/// Whether each node's evaluation may have an effect (a stateful call or a function call in
/// it). Creating a closure has none.
fn impurity(func: &Function) -> Vec<bool> {
    let mut impure = vec![false; func.num_nodes()];
    for id in func.node_ids() {
        let mut imp = false;
        match *func.kind(id) {
            ExprKind::Func { .. } => {}
            ExprKind::Apply { .. } => imp = true,
            ExprKind::Call { op, .. } => imp = op::is_stateful(op),
            _ => {}
        }
        if !imp && !matches!(func.kind(id), ExprKind::Func { .. }) {
            func.for_each_operand(id, |o| imp |= impure.get(o.index()).copied().unwrap_or(true));
        }
        impure[id.index()] = imp;
    }
    impure
}

/// Deterministic fresh variable names for one function.
struct FreshNames {
    taken: FxHashSet<String>,
    next: u32,
}

impl FreshNames {
    fn new(func: &Function) -> FreshNames {
        let mut taken = FxHashSet::default();
        for node in func.nodes() {
            if let ExprKind::Var { name } = node.kind {
                taken.insert(func.sym(name).to_string());
            }
        }
        FreshNames { taken, next: 0 }
    }

    /// The next index `k` for which every `{prefix}{k}` is free.
    fn next_index(&mut self, prefixes: &[&str]) -> u32 {
        loop {
            let k = self.next;
            self.next += 1;
            if prefixes.iter().all(|p| !self.taken.contains(&format!("{p}{k}"))) {
                for p in prefixes {
                    self.taken.insert(format!("{p}{k}"));
                }
                return k;
            }
        }
    }
}

/// Pushes a call and gives it the type its relation computes from the operands' types.
fn typed_call(b: &mut FunctionBuilder, op: OpId, args: &[NodeId], attrs: Attrs) -> NodeId {
    let tys: Option<Vec<Type>> = args.iter().map(|&a| b.ty(a).cloned()).collect();
    let ty = tys.and_then(|tys| (op::get(op).type_rel)(&tys, &attrs).ok());
    let id = b.call(op, args, attrs);
    b.set_ty(id, ty);
    id
}

/// A rank-0 constant of `dtype`.
fn scalar(rw: &mut Rewriter<'_>, dtype: DType, v: f64) -> NodeId {
    rw.constant(Arc::new(Constant::Dense(Tensor::scalar(dtype, v))))
}

/// The data type, rank, normalised axis and channel count of `x` for an operator whose
/// `axis` attribute defaults to `default_axis`.
fn geometry(func: &Function, x: NodeId, attrs: &Attrs, default_axis: i64) -> Option<(DType, usize, usize, u64)> {
    let tt = func.ty(x)?.as_tensor()?;
    let rank = tt.shape.len();
    let axis = match attrs.get("axis") {
        None => default_axis,
        Some(v) => v.as_int()?,
    };
    let axis = if axis < 0 { axis.checked_add(rank as i64)? } else { axis };
    let axis = usize::try_from(axis).ok().filter(|&a| a < rank)?;
    Some((tt.dtype, rank, axis, tt.shape[axis]))
}

fn epsilon(attrs: &Attrs) -> Option<f64> {
    match attrs.get("epsilon") {
        None => Some(1e-5),
        Some(v) => v.as_float(),
    }
}

/// Reshapes 1-d parameter `p` (length `c`) to broadcast along `axis` of a rank-`rank` tensor.
fn along_axis(rw: &mut Rewriter<'_>, ops: &Ops, p: NodeId, c: u64, rank: usize, axis: usize) -> Option<NodeId> {
    if axis + 1 == rank {
        return Some(p);
    }
    let mut shape = vec![i64::try_from(c).ok()?];
    shape.resize(rank - axis, 1);
    Some(typed_call(&mut rw.b, ops.reshape, &[p], Attrs::new().with("newshape", AttrValue::Ints(shape.into()))))
}

/// Everything that can make the rewrite of `batch_norm` fail: arity, types, attributes,
/// sizes. Returns the dtype, rank, axis, channel count and epsilon.
fn bn_checks(f: &Function, ops: &Ops, args: &[NodeId], attrs: &Attrs) -> Option<(DType, usize, usize, u64, f64)> {
    if args.len() != 5 {
        return None;
    }
    let tys: Option<Vec<Type>> = args.iter().map(|&a| f.ty(a).cloned()).collect();
    (op::get(ops.batch_norm).type_rel)(&tys?, attrs).ok()?;
    let (dtype, rank, axis, c) = geometry(f, args[0], attrs, 1)?;
    i64::try_from(c).ok()?;
    Some((dtype, rank, axis, c, epsilon(attrs)?))
}

/// The inference form of `batch_norm`'s first result from its copied operands: with
/// `scale = gamma / sqrt(var + eps)`, TVM's `x * scale + (beta - mean * scale)` when `gamma`
/// and `var` are atoms (so `scale` can be written twice), else
/// `(x - mean) * scale + beta`. The first form puts the `multiply` right after `x`, where
/// FoldScaleAxis can fold it into a preceding conv2d / dense.
fn batch_norm_out(rw: &mut Rewriter<'_>, ops: &Ops, args: &[NodeId], attrs: &Attrs) -> Option<NodeId> {
    let f = rw.func;
    let (dtype, rank, axis, c, eps) = bn_checks(f, ops, args, attrs)?;
    let atoms = f.kind(args[1]).is_atom() && f.kind(args[4]).is_atom();
    let [x, gamma, beta, mean, var] = [0, 1, 2, 3, 4].map(|i| rw.map(args[i]));
    let eps = scalar(rw, dtype, eps);
    let scale = |rw: &mut Rewriter<'_>| {
        let var_eps = typed_call(&mut rw.b, ops.add, &[var, eps], Attrs::new());
        let std = typed_call(&mut rw.b, ops.sqrt, &[var_eps], Attrs::new());
        typed_call(&mut rw.b, ops.divide, &[gamma, std], Attrs::new())
    };
    if atoms {
        let s = scale(rw);
        let s = along_axis(rw, ops, s, c, rank, axis)?;
        let scaled = typed_call(&mut rw.b, ops.multiply, &[x, s], Attrs::new());
        let s2 = scale(rw);
        let mean_scaled = typed_call(&mut rw.b, ops.multiply, &[mean, s2], Attrs::new());
        let shift = typed_call(&mut rw.b, ops.subtract, &[beta, mean_scaled], Attrs::new());
        let shift = along_axis(rw, ops, shift, c, rank, axis)?;
        return Some(typed_call(&mut rw.b, ops.add, &[scaled, shift], Attrs::new()));
    }
    let mean = along_axis(rw, ops, mean, c, rank, axis)?;
    let centered = typed_call(&mut rw.b, ops.subtract, &[x, mean], Attrs::new());
    let s = scale(rw);
    let s = along_axis(rw, ops, s, c, rank, axis)?;
    let scaled = typed_call(&mut rw.b, ops.multiply, &[centered, s], Attrs::new());
    let beta = along_axis(rw, ops, beta, c, rank, axis)?;
    Some(typed_call(&mut rw.b, ops.add, &[scaled, beta], Attrs::new()))
}

/// The block computing `layer_norm` from its copied operands.
fn layer_norm(
    rw: &mut Rewriter<'_>,
    ops: &Ops,
    names: &mut FreshNames,
    args: &[NodeId],
    attrs: &Attrs,
) -> Option<NodeId> {
    let f = rw.func;
    if args.len() != 3 {
        return None;
    }
    let tys: Option<Vec<Type>> = args.iter().map(|&a| f.ty(a).cloned()).collect();
    (op::get(ops.layer_norm).type_rel)(&tys?, attrs).ok()?;
    let (dtype, rank, axis, c) = geometry(f, args[0], attrs, -1)?;
    if c == 0 {
        // The kernel returns an empty input unchanged; nothing to normalise.
        return None;
    }
    let eps = epsilon(attrs)?;
    let x_ty = f.ty(args[0]).cloned();
    let x_is_atom = f.kind(args[0]).is_atom();
    let [x, gamma, beta] = [0, 1, 2].map(|i| rw.map(args[i]));
    let k = names.next_index(&["ln_x", "ln_c", "ln_v"]);
    let mut bindings = Vec::with_capacity(3);
    let x = if x_is_atom {
        x
    } else {
        let v = rw.b.var(&format!("ln_x{k}"), x_ty.clone());
        bindings.push((v, x));
        v
    };
    let reduce =
        Attrs::new().with("axis", AttrValue::Ints(vec![axis as i64].into())).with("keepdims", AttrValue::Bool(true));
    let mean = typed_call(&mut rw.b, ops.mean, &[x], reduce.clone());
    let centered = typed_call(&mut rw.b, ops.subtract, &[x, mean], Attrs::new());
    let c_var = rw.b.var(&format!("ln_c{k}"), x_ty);
    bindings.push((c_var, centered));
    let sq = typed_call(&mut rw.b, ops.multiply, &[c_var, c_var], Attrs::new());
    let var = typed_call(&mut rw.b, ops.mean, &[sq], reduce);
    let var_ty = rw.b.ty(var).cloned();
    let v_var = rw.b.var(&format!("ln_v{k}"), var_ty);
    bindings.push((v_var, var));
    let eps = scalar(rw, dtype, eps);
    let var_eps = typed_call(&mut rw.b, ops.add, &[v_var, eps], Attrs::new());
    let std = typed_call(&mut rw.b, ops.sqrt, &[var_eps], Attrs::new());
    let normed = typed_call(&mut rw.b, ops.divide, &[c_var, std], Attrs::new());
    let gamma = along_axis(rw, ops, gamma, c, rank, axis)?;
    let scaled = typed_call(&mut rw.b, ops.multiply, &[normed, gamma], Attrs::new());
    let beta = along_axis(rw, ops, beta, c, rank, axis)?;
    let out = typed_call(&mut rw.b, ops.add, &[scaled, beta], Attrs::new());
    let ty = rw.b.ty(out).cloned();
    let block = rw.b.block(&bindings, out);
    rw.b.set_ty(block, ty);
    Some(block)
}

#[cfg(test)]
mod tests {
    use passel_engine::interp::{assert_values_close, eval_function, random_args};
    use passel_engine::ir::{parse_module, print_module, Module};

    use super::*;
    use crate::test_util::typed;

    /// Float tolerance of the rewrites: they reassociate one division, so results differ from
    /// the fused kernels by a few ulps of f32.
    const RTOL: f64 = 1e-5;
    const ATOL: f64 = 1e-5;

    fn run(module: &Module) -> Module {
        let mut out = module.clone();
        for (name, func) in module.iter() {
            out.insert(name, simplify_inference(func)).expect("a valid name");
        }
        out
    }

    /// Runs the pass on every function and compares the results of `@main` on random inputs.
    fn check_meaning(text: &str) -> Module {
        let before = typed(text);
        let after = run(&before);
        let main = before.get("main").expect("@main");
        for seed in 0..4 {
            let args = random_args(main, seed).expect("random args");
            let want = eval_function(&before, "main", &args).expect("input evaluates");
            let got = eval_function(&after, "main", &args).expect("output evaluates");
            assert_values_close(&got, &want, RTOL, ATOL).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        let text = print_module(&after);
        let reparsed = parse_module(&text).unwrap_or_else(|e| panic!("output does not parse: {e}\n{text}"));
        assert_eq!(print_module(&reparsed), text, "output does not print back the same");
        after
    }

    fn has_op(module: &Module, name: &str) -> bool {
        let op = op::lookup(name).expect("op");
        module.iter().any(|(_, f)| {
            let live = f.live_mask();
            f.nodes().iter().zip(live).any(|(n, l)| l && matches!(n.kind, ExprKind::Call { op: o, .. } if o == op))
        })
    }

    #[test]
    fn simplify_inference_keeps_batch_norm_meaning_on_channel_axis() {
        let after = check_meaning(
            "def @main(%x: Tensor[(2, 3, 4, 4), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32], \
             %m: Tensor[(3,), f32], %v: Tensor[(3,), f32]) {
               let %v1 = add(multiply(%v, %v), 0.5f);
               let %bn = batch_norm(%x, %g, %b, %m, %v1, axis=1, epsilon=0.001);
               (%bn.0, %bn.1, %bn.2)
             }",
        );
        assert!(!has_op(&after, "batch_norm"));
    }

    #[test]
    fn simplify_inference_keeps_batch_norm_meaning_on_last_axis_with_direct_projection() {
        let after = check_meaning(
            "def @main(%x: Tensor[(5, 3), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32], \
             %m: Tensor[(3,), f32], %v: Tensor[(3,), f32]) {
               batch_norm(%x, %g, %b, %m, exp(%v), axis=-1).0
             }",
        );
        assert!(!has_op(&after, "batch_norm"));
    }

    #[test]
    fn simplify_inference_keeps_layer_norm_meaning_on_any_axis() {
        for (axis, c) in [(-1, 6), (1, 4)] {
            let after = check_meaning(&format!(
                "def @main(%x: Tensor[(3, 4, 6), f32], %g: Tensor[({c},), f32], %b: Tensor[({c},), f32]) {{
                   layer_norm(relu(%x), %g, %b, axis={axis}, epsilon=0.01)
                 }}"
            ));
            assert!(!has_op(&after, "layer_norm"));
        }
    }

    #[test]
    fn simplify_inference_makes_dropout_the_identity() {
        let after = check_meaning(
            "def @main(%x: Tensor[(4,), f32]) {
               dropout(exp(%x), rate=0.25)
             }",
        );
        assert!(!has_op(&after, "dropout"));
    }

    #[test]
    fn simplify_inference_is_idempotent_and_returns_same_arc_without_candidates() {
        let after = check_meaning(
            "def @main(%x: Tensor[(2, 3), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32]) {
               let %y = dropout(layer_norm(%x, %g, %b), rate=0.1);
               %y
             }",
        );
        let func = after.get("main").expect("@main");
        let (again, _) = crate::infer_module(&after);
        let func2 = again.get("main").expect("@main");
        assert!(Arc::ptr_eq(&simplify_inference(func2), func2));
        assert_eq!(print_module(&run(&after)), print_module(&after));
        let _ = func;
    }

    #[test]
    fn simplify_inference_leaves_untyped_batch_norm_alone() {
        let module = parse_module(
            "def @main(%x, %g, %b, %m, %v) {
               batch_norm(%x, %g, %b, %m, %v).0
             }",
        )
        .expect("parses");
        let func = module.get("main").expect("@main");
        assert!(Arc::ptr_eq(&simplify_inference(func), func));
    }
}
