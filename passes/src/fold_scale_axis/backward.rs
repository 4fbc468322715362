//! BackwardFoldScaleAxis (function pass, opt level 3, requires InferType): folds a constant
//! per-channel scale applied to the OUTPUT of a `conv2d` or `dense` into its weight.
//!
//! What it does: `multiply(L(x, w), s)` (or `multiply(s, …)`), where `L` is `conv2d` or
//! `dense` and `s` scales `L`'s output channels (axis 1 for conv2d, the last axis for dense),
//! becomes `L(x, w * s_w)` with `s_w` the scale reshaped along the weight's output axis
//! (`[O, 1, 1, 1]` for OIHW, `[M, 1]` for dense). Between `L` and the `multiply` there may be
//! - `bias_add(·, b)` along the channel axis: `(y + b) * s = y * s + b * s`, so the bias
//!   becomes `b * s` (reshaped to 1-d);
//! - `relu`: `relu(y) * s = relu(y * s)` only when every element of `s` is positive.
//!
//! Up to eight such steps, in any order, including other multiplies folded in the same run
//! (`multiply(multiply(conv2d(x, w), s1), s2)` folds both, so one run is enough). The shared conditions (constant finite scale, single
//! users, no broadcasting) are in [`super`].
//!
//! What it deliberately does not do: fold through other operators (TVM also handles `add`
//! of two scaled branches), fold a scale that is not constant, or fold when any value on the
//! path has another user.
//!
//! Phases:
//! 1. Analysis: for each `multiply`, walk down its single-use operand through `relu` /
//!    `bias_add` to a `conv2d` / `dense`, and record what to rewrite.
//! 2. One copy ([`passel_engine::ir::rewrite::Rewriter`]): the layer gets the scaled weight, each bias
//!    the scaled bias, and the `multiply` is replaced by its (rewritten) input.

use std::sync::Arc;

use passel_engine::ir::{ExprKind, Function, NodeId, Type};
use rustc_hash::FxHashMap;

use super::{reshaped_scale, split_multiply, typed_call, with_operand, Facts, Layer, Ops, Scale};
use passel_engine::ir::rewrite::{eval_order, Propagate, Rewriter};

/// Longest `relu` / `bias_add` path between the layer and the `multiply`.
const MAX_PATH: usize = 8;

/// Runs BackwardFoldScaleAxis on `func`; returns `func` itself (pointer-equal) when nothing
/// folds.
pub fn backward_fold_scale_axis(func: &Arc<Function>) -> Arc<Function> {
    let Some(ops) = Ops::worth_trying(func) else { return Arc::clone(func) };
    let facts = Facts::new(func);
    let live = func.live_mask();
    // multiply → its operand that replaces it.
    let mut replace: FxHashMap<u32, NodeId> = FxHashMap::default();
    // conv2d / dense → the scale of its output channels.
    let mut weight: FxHashMap<u32, (Vec<Scale>, Layer)> = FxHashMap::default();
    // bias_add → the scales of its bias.
    let mut bias: FxHashMap<u32, Vec<Scale>> = FxHashMap::default();
    // Evaluation order: an inner multiply is folded before the outer one looks through it.
    for id in eval_order(func) {
        if !live[id.index()] {
            continue;
        }
        let Some(sides) = split_multiply(&facts, &ops, id) else { continue };
        let Some(out_ty) = func.ty(id) else { continue };
        for (s, a) in sides {
            if func.ty(a) != Some(out_ty) {
                continue;
            }
            let Some((layer_node, layer, scale, biases)) = path(&facts, &ops, &replace, a, s, out_ty) else {
                continue;
            };
            replace.insert(id.0, a);
            for b in biases {
                bias.entry(b.0).or_default().push(scale.clone());
            }
            weight.entry(layer_node.0).or_insert_with(|| (Vec::new(), layer)).0.push(scale);
            break;
        }
    }
    if replace.is_empty() {
        return Arc::clone(func);
    }
    let rw = Rewriter::new(func, Propagate::Nothing);
    let out = rw.run(|rw, id| {
        if let Some(&a) = replace.get(&id.0) {
            return Some(rw.map(a));
        }
        if let Some((scales, layer)) = weight.get(&id.0) {
            let ExprKind::Call { args, .. } = *rw.func.kind(id) else { return None };
            let mut w = rw.map(rw.func.ids(args)[1]);
            for scale in scales {
                let shape: &[u64] = match layer {
                    Layer::Conv2d => &[scale.len, 1, 1, 1],
                    Layer::Dense => &[scale.len, 1],
                };
                let s = reshaped_scale(rw, &ops, scale, shape, false)?;
                w = typed_call(&mut rw.b, ops.multiply, &[w, s], Default::default());
            }
            return with_operand(rw, id, 1, w);
        }
        if let Some(scales) = bias.get(&id.0) {
            let ExprKind::Call { args, .. } = *rw.func.kind(id) else { return None };
            let mut b = rw.map(rw.func.ids(args)[1]);
            for scale in scales {
                let s = reshaped_scale(rw, &ops, scale, &[scale.len], scale.rank <= 1)?;
                b = typed_call(&mut rw.b, ops.multiply, &[b, s], Default::default());
            }
            return with_operand(rw, id, 1, b);
        }
        None
    });
    match out {
        Some(new) => Arc::new(new),
        None => Arc::clone(func),
    }
}

/// Walks from operand `a` of the `multiply` down to the layer: returns the layer call, its
/// kind, the checked scale and the `bias_add` calls on the way.
fn path(
    facts: &Facts<'_>,
    ops: &Ops,
    folded: &FxHashMap<u32, NodeId>,
    a: NodeId,
    s: NodeId,
    out_ty: &Type,
) -> Option<(NodeId, Layer, Scale, Vec<NodeId>)> {
    let func = facts.func;
    let rank = out_ty.as_tensor()?.shape.len();
    let mut cur = facts.single_use_value(a)?;
    let mut biases = Vec::new();
    let mut bias_axes = Vec::new();
    let mut through_relu = false;
    for _ in 0..=MAX_PATH {
        if func.ty(cur) != Some(out_ty) {
            return None;
        }
        if let Some(layer) = ops.layer(func, cur) {
            let axis = match layer {
                Layer::Conv2d if rank == 4 => 1,
                Layer::Conv2d => return None,
                Layer::Dense => rank.checked_sub(1)?,
            };
            let scale = facts.scale(s, out_ty, axis)?;
            if (through_relu && !scale.positive) || bias_axes.iter().any(|&b| b != axis) {
                return None;
            }
            return Some((cur, layer, scale, biases));
        }
        if let Some(&input) = folded.get(&cur.0) {
            // A multiply folded already (it is nearer the layer): look through it.
            cur = facts.single_use_value(input)?;
            continue;
        }
        let ExprKind::Call { op, attrs, args } = *func.kind(cur) else { return None };
        let args = func.ids(args);
        if op == ops.relu && args.len() == 1 {
            through_relu = true;
        } else if op == ops.bias_add && args.len() == 2 {
            let axis = match func.call_attrs(attrs).get("axis") {
                None => 1,
                Some(v) => v.as_int()?,
            };
            let axis = if axis < 0 { axis.checked_add(rank as i64)? } else { axis };
            bias_axes.push(usize::try_from(axis).ok()?);
            biases.push(cur);
        } else {
            return None;
        }
        cur = facts.single_use_value(args[0])?;
    }
    None
}
