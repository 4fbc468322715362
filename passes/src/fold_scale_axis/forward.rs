//! ForwardFoldScaleAxis (function pass, opt level 3, requires InferType): folds a constant
//! per-channel scale that FEEDS the data input of a `conv2d` or `dense` into its weight.
//!
//! What it does: `conv2d(multiply(x, s), w)` (or `multiply(s, x)`), where `s` scales the
//! data's input channels (axis 1 of NCHW), becomes `conv2d(x, w * s)`: the scale's shape,
//! `[C, 1, 1]` after dropping leading 1s, already broadcasts along the weight's input axis
//! (axis 1 of OIHW). Zero padding commutes with the scale because the scale is finite.
//! `dense(multiply(x, s), w)` with `s` along the last axis becomes `dense(x, w * s)` with `s`
//! reshaped to 1-d. Between the `multiply` and the layer there may be `relu`s when every
//! element of the scale is positive (`relu(x * s) = relu(x) * s`; the `relu` stays and the
//! `multiply` goes), and stacked multiplies all fold. The shared conditions (constant finite
//! scale, single users, no broadcasting) are in [`super`].
//!
//! What it deliberately does not do: fold into a grouped convolution (`groups` ≠ 1, where
//! input channels map to weight rows differently), fold through operators between the
//! `multiply` and the layer other than `relu` (TVM also passes through `add`), or fold a
//! scale that is not constant.
//!
//! Phases:
//! 1. Analysis: for each `conv2d` / `dense`, walk down its single-use data operand through
//!    `relu`s and `multiply`s by per-channel constants, and record the rewrite.
//! 2. One copy ([`passel_engine::ir::rewrite::Rewriter`]): the `multiply` is replaced by its data operand
//!    and the layer gets the scaled weight.

use std::sync::Arc;

use passel_engine::ir::{ExprKind, Function, NodeId};
use rustc_hash::FxHashMap;

use super::{reshaped_scale, split_multiply, typed_call, with_operand, Facts, Layer, Ops, Scale};
use passel_engine::ir::rewrite::{Propagate, Rewriter};

/// Longest path of `relu` / `multiply` calls between the scale and the layer.
const MAX_PATH: usize = 16;

/// Runs ForwardFoldScaleAxis on `func`; returns `func` itself (pointer-equal) when nothing
/// folds.
pub fn forward_fold_scale_axis(func: &Arc<Function>) -> Arc<Function> {
    let Some(ops) = Ops::worth_trying(func) else { return Arc::clone(func) };
    let facts = Facts::new(func);
    let live = func.live_mask();
    let mut replace: FxHashMap<u32, NodeId> = FxHashMap::default();
    let mut weight: FxHashMap<u32, (Vec<Scale>, Layer)> = FxHashMap::default();
    for id in func.node_ids() {
        if !live[id.index()] {
            continue;
        }
        let Some(layer) = ops.layer(func, id) else { continue };
        let ExprKind::Call { attrs, args, .. } = *func.kind(id) else { continue };
        let groups = func.call_attrs(attrs).get("groups").map(|g| g.as_int());
        if layer == Layer::Conv2d && !matches!(groups, None | Some(Some(1))) {
            continue;
        }
        let Some(mut cur) = facts.single_use_value(func.ids(args)[0]) else { continue };
        let Some(data_ty) = func.ty(cur) else { continue };
        let Some(rank) = data_ty.as_tensor().map(|t| t.shape.len()) else { continue };
        let axis = match layer {
            Layer::Conv2d if rank == 4 => 1,
            Layer::Conv2d => continue,
            Layer::Dense => match rank.checked_sub(1) {
                Some(a) => a,
                None => continue,
            },
        };
        // A chain `multiply(relu(multiply(x, s1)), s2)` folds completely, so one run is
        // enough; below a relu only positive scales fold.
        let mut scales = Vec::new();
        let mut through_relu = false;
        'chain: for _ in 0..MAX_PATH {
            if func.ty(cur) != Some(data_ty) {
                break;
            }
            if let ExprKind::Call { op, args, .. } = *func.kind(cur) {
                if op == ops.relu && args.len == 1 {
                    through_relu = true;
                    match facts.single_use_value(func.ids(args)[0]) {
                        Some(next) => {
                            cur = next;
                            continue;
                        }
                        None => break,
                    }
                }
            }
            let Some(sides) = split_multiply(&facts, &ops, cur) else { break };
            for (s, x) in sides {
                if func.ty(x) != Some(data_ty) {
                    continue;
                }
                let Some(scale) = facts.scale(s, data_ty, axis) else { continue };
                if through_relu && !scale.positive {
                    continue;
                }
                replace.insert(cur.0, x);
                scales.push(scale);
                match facts.single_use_value(x) {
                    Some(next) => {
                        cur = next;
                        continue 'chain;
                    }
                    None => break 'chain,
                }
            }
            break;
        }
        if !scales.is_empty() {
            weight.insert(id.0, (scales, layer));
        }
    }
    if replace.is_empty() {
        return Arc::clone(func);
    }
    let rw = Rewriter::new(func, Propagate::Nothing);
    let out = rw.run(|rw, id| {
        if let Some(&x) = replace.get(&id.0) {
            return Some(rw.map(x));
        }
        let (scales, layer) = weight.get(&id.0)?;
        let ExprKind::Call { args, .. } = *rw.func.kind(id) else { return None };
        let mut w = rw.map(rw.func.ids(args)[1]);
        for scale in scales {
            // Conv data is rank 4, so a channel scale has rank >= 3 and shape [C, 1, 1] at
            // the end: it already lines up with weight axis 1. A dense scale of rank <= 2
            // lines up with the weight's last axis; a higher rank is reshaped to 1-d.
            let keep = *layer == Layer::Conv2d || scale.rank <= 2;
            let s = reshaped_scale(rw, &ops, scale, &[scale.len], keep)?;
            w = typed_call(&mut rw.b, ops.multiply, &[w, s], Default::default());
        }
        with_operand(rw, id, 1, w)
    });
    match out {
        Some(new) => Arc::new(new),
        None => Arc::clone(func),
    }
}
