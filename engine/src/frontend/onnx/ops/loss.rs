//! The loss operators, as onnx's reference computes them: `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss` (its `log_softmax` over axis 1, then the same loss).
//!
//! `x` `[N, C, d…]` is seen as `[N, C, D]` and `target` `[N, d…]` as `[N, 1, D]`; the loss
//! is `-x[n, target[n, d], d]` (`gather_elements` on axis 1), times the class weight
//! (`take` of the target clipped to the classes, as the reference's `mode="clip"`), 0 where
//! the target is `ignore_index` (whose index is replaced by 0 before gathering, so it never
//! reads out of range). `reduction` "mean" divides the sum by the sum of the weights when
//! there are weights or an ignored index, "sum" sums, "none" keeps `[N, d…]`.

use super::*;

pub(super) fn nll_loss(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    loss(cx, x, None)
}

pub(super) fn softmax_cross_entropy_loss(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    if x.rank() < 2 {
        return Err(format!("the scores need shape [N, C, …], got {:?}", x.shape()).into());
    }
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&[1]));
    let m = cx.call_tmp("max", &[&x], attrs.clone())?;
    let shifted = cx.call_tmp("subtract", &[&x, &m], Attrs::new())?;
    let e = cx.call_tmp("exp", &[&shifted], Attrs::new())?;
    let s = cx.call_tmp("sum", &[&e], attrs)?;
    let l = cx.call_tmp("log", &[&s], Attrs::new())?;
    let log_prob = cx.call_tmp("subtract", &[&shifted, &l], Attrs::new())?;
    let wants_log_prob = cx.node.outputs().nth(1).is_some_and(|o| !o.is_empty());
    loss(cx, log_prob.clone(), wants_log_prob.then_some(log_prob))
}

/// The loss of log-probabilities `x`; `extra` is a second output to return.
fn loss(cx: &mut Cx<'_>, x: Val, extra: Option<Val>) -> R<Vec<Option<Val>>> {
    let (target, weight) = (cx.input(1)?, cx.opt(2));
    let reduction = cx.string("reduction", "mean")?;
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
        return Err(format!("attribute `reduction` must be none, sum or mean, got {reduction:?}").into());
    }
    let ignore = cx.int_opt("ignore_index")?;
    let (xs, ts) = (x.shape(), target.shape());
    let dtype = x.ty().dtype;
    let tt = target.ty().dtype;
    if !dtype.is_float() || !matches!(tt, DType::I32 | DType::I64) {
        return Err(
            format!("needs float scores and int32 / int64 targets, got {} and {}", dtype.name(), tt.name()).into()
        );
    }
    if xs.len() < 2 || ts.len() + 1 != xs.len() || ts[0] != xs[0] || ts[1..] != xs[2..] {
        return Err(format!("scores {xs:?} need shape [N, C, d…] and targets {ts:?} shape [N, d…]").into());
    }
    let (n, c) = (xs[0], xs[1]);
    if c == 0 {
        return Err("the scores have no classes".into());
    }
    let d = product(&xs[2..])?;
    let x3 = cx.reshape(&x, &[n, c, d], true)?;
    let t3 = cx.reshape(&target, &[n, 1, d], true)?;
    let tzero = Cx::scalar(tt, 0.0);
    let zero = Cx::scalar(dtype, 0.0);
    let (valid, t3) = match ignore {
        Some(i) => {
            let valid = cx.call_tmp("not_equal", &[&t3, &Cx::scalar(tt, i as f64)], Attrs::new())?;
            let safe = cx.call_tmp("where", &[&valid, &t3, &tzero], Attrs::new())?;
            (Some(valid), safe)
        }
        None => (None, t3),
    };
    let g = cx.call_tmp("gather_elements", &[&x3, &t3], Attrs::new().with("axis", AttrValue::Int(1)))?;
    let mut l = cx.call_tmp("negative", &[&g], Attrs::new())?;
    if let Some(v) = &valid {
        l = cx.call_tmp("where", &[v, &l, &zero], Attrs::new())?;
    }
    let w = match (weight, &valid) {
        (Some(w), _) => {
            if w.shape() != [c] {
                return Err(format!("the weights need shape [{c}], got {:?}", w.shape()).into());
            }
            let bounds =
                Attrs::new().with("a_min", AttrValue::Float(0.0)).with("a_max", AttrValue::Float((c - 1) as f64));
            let clipped = cx.call_tmp("clip", &[&t3], bounds)?;
            let w = cx.call_tmp("take", &[&w, &clipped], Attrs::new().with("axis", AttrValue::Int(0)))?;
            Some(match &valid {
                Some(v) => cx.call_tmp("where", &[v, &w, &zero], Attrs::new())?,
                None => w,
            })
        }
        (None, Some(v)) => Some(cx.call_tmp("cast", &[v], Attrs::new().with("dtype", AttrValue::DType(dtype)))?),
        (None, None) => None,
    };
    if let Some(w) = &w {
        l = cx.call_tmp("multiply", &[&l, w], Attrs::new())?;
    }
    let all = Attrs::new().with("keepdims", AttrValue::Bool(false));
    let y = match (reduction.as_str(), &w) {
        ("none", _) => cx.reshape(&l, &ts, false)?,
        ("sum", _) => cx.call("sum", &[&l], all)?,
        ("mean", Some(w)) => {
            let s = cx.call_tmp("sum", &[&l], all.clone())?;
            let ws = cx.call_tmp("sum", &[w], all)?;
            cx.call("divide", &[&s, &ws], Attrs::new())?
        }
        _ => cx.call("mean", &[&l], all)?,
    };
    Ok(vec![Some(y), extra])
}
