//! `GatherND` (`batch_dims` = 0), decomposed into `take` on the data flattened over its
//! first `K` axes at the linear index `Σ indices[…, k] · stride_k` (negative indices count
//! from the end), computed at import when the indices are constants (as exporters write them)
//! and with integer operators otherwise.

use super::*;

pub(super) fn gather_nd(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (data, indices) = (cx.input(0)?, cx.input(1)?);
    let batch_dims = cx.int("batch_dims", 0)?;
    if batch_dims != 0 {
        return Err(format!("attribute `batch_dims` = {batch_dims} is not supported (0 is)"));
    }
    let (ds, is) = (data.shape(), indices.shape());
    let it = indices.ty().dtype;
    if it != DType::I64 && it != DType::I32 {
        return Err(format!("the indices are {}; they must be int64 or int32", it.name()));
    }
    let k = *is.last().ok_or("the indices are a scalar; they need at least one axis")? as usize;
    if k == 0 || k > ds.len() {
        return Err(format!(
            "the indices' last dimension is {k}; it must be between 1 and the data's rank {}",
            ds.len()
        ));
    }
    // Data flattened over its first k axes; strides of those axes.
    let flat = product(&ds[..k])?;
    let mut data_shape = vec![flat];
    data_shape.extend_from_slice(&ds[k..]);
    let mut strides = vec![1u64; k];
    for a in (0..k.saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * ds[a + 1];
    }
    let lead = &is[..is.len() - 1];
    let lin = match indices.as_const() {
        Some(c) => {
            let t = c.materialize().map_err(|e| e.to_string())?;
            let v = tensor_i64s(&t).ok_or("the indices are not integers")?;
            let mut lin = Vec::with_capacity(v.len() / k.max(1));
            for (n, row) in v.chunks(k).enumerate() {
                let mut at = 0i64;
                for (a, &i) in row.iter().enumerate() {
                    let d = ds[a] as i64;
                    let j = if i < 0 { i + d } else { i };
                    if !(0..d).contains(&j) {
                        return Err(format!("index {i} (row {n}, axis {a}) is out of range for dimension {d}"));
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
                let d = Cx::scalar(DType::I64, ds[a] as f64);
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
            lin.ok_or("no index axes")?
        }
    };
    let flat_data = cx.reshape(&data, &data_shape, true)?;
    one(cx.call("take", &[&flat_data, &lin], Attrs::new().with("axis", AttrValue::Int(0)))?)
}
