//! Operators along one axis: `ArgMax` / `ArgMin` (graph operators `argmax`, `argmin`),
//! `TopK` (`topk`), `CumSum` / `CumProd` (`cumsum`, `cumprod`) and `Hardmax` (`argmax`, then
//! `one_hot`).

use super::*;

pub(super) fn arg(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let axis = norm_axis(cx.int("axis", 0)?, x.rank())?;
    let keepdims = cx.int("keepdims", 1)? != 0;
    let last = cx.int("select_last_index", 0)? != 0;
    let attrs = Attrs::new()
        .with("axis", AttrValue::Int(axis as i64))
        .with("keepdims", AttrValue::Bool(keepdims))
        .with("select_last_index", AttrValue::Bool(last));
    one(cx.call(op, &[&x], attrs)?)
}

/// TopK: `k` an attribute before opset 10, an input (a one-element int64 tensor known at
/// import) from it; `largest` and `sorted` from opset 11. Unsorted output is sorted (the spec
/// leaves the order open).
pub(super) fn topk(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let k = if cx.opset >= 10 {
        match cx.const_ints(1, "K")?.as_deref() {
            Some([k]) => *k,
            Some(v) => return Err(format!("input 1 (K) must hold one value, got {}", v.len()).into()),
            None => return Err("input 1 (K) is missing".into()),
        }
    } else {
        cx.int_opt("k")?.ok_or("attribute `k` is required")?
    };
    let axis = norm_axis(cx.int("axis", -1)?, x.rank())?;
    let largest = cx.int("largest", 1)? != 0;
    let sorted = cx.int("sorted", 1)? != 0;
    let attrs = Attrs::new()
        .with("k", AttrValue::Int(k))
        .with("axis", AttrValue::Int(axis as i64))
        .with("largest", AttrValue::Bool(largest))
        .with("sorted", AttrValue::Bool(sorted));
    let name = cx.name.clone();
    let outs = cx.em.call_multi("topk", &[&x], attrs, &name)?;
    Ok(outs.into_iter().map(Some).collect())
}

/// CumSum / CumProd: the axis is a scalar input known at import.
pub(super) fn cum(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let axis = match cx.const_ints(1, "axis")?.as_deref() {
        Some([a]) => norm_axis(*a, x.rank())?,
        Some(v) => return Err(format!("input 1 (axis) must hold one value, got {}", v.len()).into()),
        None => return Err("input 1 (axis) is missing".into()),
    };
    let attrs = Attrs::new()
        .with("axis", AttrValue::Int(axis as i64))
        .with("exclusive", AttrValue::Bool(cx.int("exclusive", 0)? != 0))
        .with("reverse", AttrValue::Bool(cx.int("reverse", 0)? != 0));
    one(cx.call(op, &[&x], attrs)?)
}

/// Hardmax: 1 at the first largest element along the axis, 0 elsewhere, as `one_hot` of
/// `argmax`. Before opset 13 the input is coerced to 2-D `[prod(:axis), prod(axis:)]`
/// (default axis 1), from it the axis is a single axis (default -1).
pub(super) fn hardmax(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let dtype = x.ty().dtype;
    let (xf, axis) = if cx.opset >= 13 {
        (x.clone(), norm_axis(cx.int("axis", -1)?, shape.len())?)
    } else {
        let axis = norm_axis(cx.int("axis", 1)?, shape.len())?;
        let flat = [product(&shape[..axis])?, product(&shape[axis..])?];
        (cx.reshape(&x, &flat, true)?, 1)
    };
    let depth = xf.shape()[axis];
    let attrs = Attrs::new()
        .with("axis", AttrValue::Int(axis as i64))
        .with("keepdims", AttrValue::Bool(false))
        .with("select_last_index", AttrValue::Bool(false));
    let at = cx.call_tmp("argmax", &[&xf], attrs)?;
    let values =
        Val::Const(Arc::new(Constant::Dense(Tensor::from_f64s(&[2], dtype, &[0.0, 1.0]).map_err(|e| e.to_string())?)));
    let attrs = Attrs::new().with("depth", AttrValue::Int(depth as i64)).with("axis", AttrValue::Int(axis as i64));
    if xf.shape() == shape {
        return one(cx.call("one_hot", &[&at, &values], attrs)?);
    }
    let y = cx.call_tmp("one_hot", &[&at, &values], attrs)?;
    one(cx.reshape(&y, &shape, false)?)
}
