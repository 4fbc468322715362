//! The gather and scatter family beyond `Gather`: `GatherElements`, `ScatterElements` and
//! the older `Scatter` (graph operators `gather_elements`, `scatter_elements`), `ScatterND`
//! (`scatter_nd`), `GatherND`, and `TensorScatter` (a `scatter_elements` at computed indices).
//!
//! `GatherND` is decomposed into `take` on the data flattened over its first `batch_dims + K`
//! axes at the linear index `b · (rows per batch) + Σ indices[…, k] · stride_k` (negative
//! indices count from the end), computed at import when the indices are constants (as
//! exporters write them) and with integer operators otherwise.

use super::*;

pub(super) fn gather_elements(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (data, indices) = (cx.input(0)?, cx.input(1)?);
    let axis = norm_axis(cx.int("axis", 0)?, data.rank())?;
    one(cx.call("gather_elements", &[&data, &indices], Attrs::new().with("axis", AttrValue::Int(axis as i64)))?)
}

/// ScatterElements (and Scatter, its name before opset 11, without `reduction`).
pub(super) fn scatter_elements(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (data, indices, updates) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let axis = norm_axis(cx.int("axis", 0)?, data.rank())?;
    let reduction = reduction(cx)?;
    let attrs =
        Attrs::new().with("axis", AttrValue::Int(axis as i64)).with("reduction", AttrValue::Str(reduction.into()));
    one(cx.call("scatter_elements", &[&data, &indices, &updates], attrs)?)
}

pub(super) fn scatter_nd(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (data, indices, updates) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let reduction = reduction(cx)?;
    let attrs = Attrs::new().with("reduction", AttrValue::Str(reduction.into()));
    one(cx.call("scatter_nd", &[&data, &indices, &updates], attrs)?)
}

/// The `reduction` attribute of the scatters (opset 16 on; "none" before).
fn reduction(cx: &mut Cx<'_>) -> R<String> {
    let r = cx.string("reduction", "none")?;
    if !matches!(r.as_str(), "none" | "add" | "mul" | "max" | "min") {
        return Err(format!("attribute `reduction` = {r:?} is not supported (none, add, mul, max, min)").into());
    }
    Ok(r)
}

pub(super) fn gather_nd(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (data, indices) = (cx.input(0)?, cx.input(1)?);
    let (ds, is) = (data.shape(), indices.shape());
    let b = cx.int("batch_dims", 0)?;
    if b < 0 || b as usize >= is.len() || b as usize >= ds.len() || ds[..b as usize] != is[..b as usize] {
        return Err(format!(
            "attribute `batch_dims` = {b} must be below both ranks, and the data {ds:?} and indices {is:?} must agree on those leading axes"
        ).into());
    }
    let b = b as usize;
    let it = indices.ty().dtype;
    if it != DType::I64 && it != DType::I32 {
        return Err(format!("the indices are {}; they must be int64 or int32", it.name()).into());
    }
    let k = *is.last().ok_or("the indices are a scalar; they need at least one axis")? as usize;
    if k == 0 || b + k > ds.len() {
        return Err(format!(
            "the indices' last dimension is {k}; it must be between 1 and the data's rank {} less batch_dims {b}",
            ds.len()
        )
        .into());
    }
    // Data flattened over its first b + k axes; strides of the k indexed axes; each batch
    // element spans `block` rows of the flattened data.
    let flat = product(&ds[..b + k])?;
    let block = product(&ds[b..b + k])?;
    let mut data_shape = vec![flat];
    data_shape.extend_from_slice(&ds[b + k..]);
    let mut strides = vec![1u64; k];
    for a in (0..k.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * ds[b + a + 1];
    }
    let lead = &is[..is.len() - 1];
    // Index rows per batch element.
    let per_batch = product(&lead[b..])?.max(1);
    let n_rows = product(lead)?;
    if n_rows > cx.em_fold_limit() {
        return Err(format!("{n_rows} index rows are too many to convert at import").into());
    }
    let lin = match indices.as_const() {
        Some(c) => {
            let t = c.materialize().map_err(|e| e.to_string())?;
            let v = tensor_i64s(&t).ok_or("the indices are not integers")?;
            let mut lin = Vec::with_capacity(v.len() / k.max(1));
            for (n, row) in v.chunks(k).enumerate() {
                let mut at = (n as u64 / per_batch * block) as i64;
                for (a, &i) in row.iter().enumerate() {
                    let d = ds[b + a] as i64;
                    let j = if i < 0 { i + d } else { i };
                    if !(0..d).contains(&j) {
                        return Err(
                            format!("index {i} (row {n}, axis {}) is out of range for dimension {d}", b + a).into()
                        );
                    }
                    at += j * strides[a] as i64;
                }
                lin.push(at as f64);
            }
            Val::Const(Arc::new(Constant::Dense(Tensor::from_f64s(lead, DType::I64, &lin).map_err(|e| e.to_string())?)))
        }
        None => {
            let idx = if it == DType::I64 {
                indices.clone()
            } else {
                cx.call_tmp("cast", &[&indices], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
            };
            let mut lin: Option<Val> = None;
            for a in 0..k {
                let at = Cx::scalar(DType::I64, a as f64);
                let i = cx.call_tmp("take", &[&idx, &at], Attrs::new().with("axis", AttrValue::Int(-1)))?;
                let d = Cx::scalar(DType::I64, ds[b + a] as f64);
                let neg = cx.call_tmp("less", &[&i, &Cx::scalar(DType::I64, 0.0)], Attrs::new())?;
                let wrapped = cx.call_tmp("add", &[&i, &d], Attrs::new())?;
                let i = cx.call_tmp("where", &[&neg, &wrapped, &i], Attrs::new())?;
                let term = if strides[a] == 1 {
                    i
                } else {
                    cx.call_tmp("multiply", &[&i, &Cx::scalar(DType::I64, strides[a] as f64)], Attrs::new())?
                };
                lin = Some(match lin {
                    None => term,
                    Some(l) => cx.call_tmp("add", &[&l, &term], Attrs::new())?,
                });
            }
            let mut lin = lin.ok_or("no index axes")?;
            if b > 0 {
                let offsets: Vec<f64> = (0..n_rows).map(|n| (n / per_batch * block) as f64).collect();
                let off = Val::Const(Arc::new(Constant::Dense(
                    Tensor::from_f64s(lead, DType::I64, &offsets).map_err(|e| e.to_string())?,
                )));
                lin = cx.call_tmp("add", &[&lin, &off], Attrs::new())?;
            }
            lin
        }
    };
    let flat_data = cx.reshape(&data, &data_shape, true)?;
    one(cx.call("take", &[&flat_data, &lin], Attrs::new().with("axis", AttrValue::Int(0)))?)
}

/// TensorScatter (opset 24, a KV-cache update): `past_cache` with, for each batch `b`, the
/// `S` steps of `update` along `axis` written from position `write_indices[b]` (wrapping
/// around in `circular` mode). Decomposed into a `scatter_elements` whose indices are
/// `write_indices[b] + s` (mod the cache length), broadcast over the other axes.
pub(super) fn tensor_scatter(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (past, update, write) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let circular = match cx.string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        other => return Err(format!("attribute `mode` = {other:?} is not supported (linear, circular)").into()),
    };
    let (ps, us) = (past.shape(), update.shape());
    let rank = ps.len();
    if rank < 2 {
        return Err(format!("past_cache must have rank 2 or more (batch, …, sequence, …), got {ps:?}").into());
    }
    let axis = norm_axis(cx.int("axis", -2)?, rank)?;
    if axis == 0 {
        return Err("axis must not be the batch axis 0".into());
    }
    let fits = us.len() == rank && (0..rank).all(|i| if i == axis { us[i] <= ps[i] } else { us[i] == ps[i] });
    if !fits || update.ty().dtype != past.ty().dtype {
        return Err(format!(
            "update {} {us:?} must match past_cache {} {ps:?} except along axis {axis}, where it may be shorter",
            update.ty().dtype,
            past.ty().dtype
        )
        .into());
    }
    let batch = ps[0];
    let write = match write {
        Some(w) => {
            if w.shape() != [batch] || !matches!(w.ty().dtype, DType::I64 | DType::I32) {
                return Err(format!(
                    "write_indices must be int64 of shape [{batch}], got {} {:?}",
                    w.ty().dtype,
                    w.shape()
                )
                .into());
            }
            if w.ty().dtype == DType::I64 {
                w
            } else {
                cx.call_tmp("cast", &[&w], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
            }
        }
        None => filled(&[batch], DType::I64, 0.0),
    };
    let mut at_batch = vec![1; rank];
    at_batch[0] = batch;
    let write = cx.reshape(&write, &at_batch, true)?;
    let mut at_axis = vec![1; rank];
    at_axis[axis] = us[axis];
    let steps: Vec<f64> = (0..us[axis]).map(|s| s as f64).collect();
    let steps = Tensor::from_f64s(&at_axis, DType::I64, &steps).map_err(|e| e.to_string())?;
    let mut idx = cx.call_tmp("add", &[&write, &Val::Const(Arc::new(Constant::Dense(steps)))], Attrs::new())?;
    if circular {
        let len = Cx::scalar(DType::I64, ps[axis] as f64);
        idx = cx.call_tmp("mod", &[&idx, &len], Attrs::new().with("fmod", AttrValue::Bool(false)))?;
    }
    let idx = cx.call_tmp("broadcast_to", &[&idx], Attrs::new().with("shape", ints(&us)))?;
    let attrs = Attrs::new().with("axis", AttrValue::Int(axis as i64)).with("reduction", AttrValue::Str("none".into()));
    one(cx.call("scatter_elements", &[&past, &idx, &update], attrs)?)
}
