//! Linear algebra: `Det`, decomposed at import into Gaussian elimination with partial
//! pivoting, unrolled over the (static) matrix size: per column, the pivot row is found with
//! `argmax` of the absolute values, swapped in with `gather_elements`, multiplied into the
//! determinant (negated when a swap happened), and eliminated from the rows below. The
//! elimination runs in float64 whatever the input's float dtype, then the result is cast back.
//!
//! What it deliberately does not do: a graph operator of its own. The elimination is `O(M)`
//! steps of a handful of tensor operators on the whole `[…, M, M]` batch, so the graph passes
//! see ordinary operators; the matrix size is bounded by the recurrent layers' unrolling bound
//! (`rnn.rs`), counted with them.

use super::*;

fn i64_tensor(shape: &[u64], v: &[i64]) -> R<Val> {
    let f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    let t = Tensor::from_f64s(shape, DType::I64, &f).map_err(|e| e.to_string())?;
    Ok(Val::Const(Arc::new(Constant::Dense(t))))
}

/// `x[…, begin..end]` along `axis` (counted from the front).
fn cut(cx: &mut Cx<'_>, x: &Val, axis: usize, begin: u64, end: u64) -> R<Val> {
    if begin == 0 && x.shape()[axis] == end {
        return Ok(x.clone());
    }
    let attrs = Attrs::new().with("begin", ints(&[begin])).with("end", ints(&[end])).with("axes", ints(&[axis as u64]));
    cx.call_tmp("strided_slice", &[x], attrs)
}

/// Det: the determinant of each `[M, M]` matrix of `X [*, M, M]`, shape `[*]`.
pub(super) fn det(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    let dtype = x.ty().dtype;
    if rank < 2 || shape[rank - 1] != shape[rank - 2] {
        return Err(format!("X must be [..., M, M] (square matrices), got shape {shape:?}").into());
    }
    if !dtype.is_float() {
        return Err(format!("X must be a float tensor, got {dtype}").into());
    }
    let m = shape[rank - 1];
    let batch = shape[..rank - 2].to_vec();
    cx.em.unroll(m, super::rnn::MAX_UNROLLED_STEPS).map_err(|before| {
        format!(
            "eliminating a {m}x{m} matrix takes {m} unrolled steps, which would take the model's unrolled steps to \
             {}, over the import bound of {}",
            before.saturating_add(m),
            super::rnn::MAX_UNROLLED_STEPS
        )
    })?;
    let (row_axis, col_axis) = (rank - 2, rank - 1);
    let mut a = if dtype == DType::F64 {
        x.clone()
    } else {
        cx.call_tmp("cast", &[&x], Attrs::new().with("dtype", AttrValue::DType(DType::F64)))?
    };
    let mut det = filled(&batch, DType::F64, 1.0);
    let rows: Vec<i64> = (0..m as i64).collect();
    let rows = i64_tensor(&[m], &rows)?;
    let mut keep_shape = batch.clone();
    keep_shape.push(1);
    for k in 0..m {
        // Pivot: the row at or below k with the largest |a[., k]|.
        let col = cut(cx, &a, col_axis, k, k + 1)?;
        let below = cut(cx, &col, row_axis, k, m)?;
        let mag = cx.call_tmp("abs", &[&below], Attrs::new())?;
        let arg_attrs = Attrs::new()
            .with("axis", AttrValue::Int(row_axis as i64))
            .with("keepdims", AttrValue::Bool(true))
            .with("select_last_index", AttrValue::Bool(false));
        let p = cx.call_tmp("argmax", &[&mag], arg_attrs)?;
        let p = cx.reshape(&p, &keep_shape, true)?;
        let p = cx.call_tmp("add", &[&p, &Cx::scalar(DType::I64, k as f64)], Attrs::new())?;
        // Swap rows k and p: row i reads row idx[i].
        let kk = Cx::scalar(DType::I64, k as f64);
        let is_k = cx.call_tmp("equal", &[&rows, &kk], Attrs::new())?;
        let is_p = cx.call_tmp("equal", &[&rows, &p], Attrs::new())?;
        let idx = cx.call_tmp("where", &[&is_p, &kk, &rows], Attrs::new())?;
        let idx = cx.call_tmp("where", &[&is_k, &p, &idx], Attrs::new())?;
        let mut col_shape = idx.shape();
        col_shape.push(1);
        let idx = cx.reshape(&idx, &col_shape, true)?;
        let mut full = batch.clone();
        full.extend([m, m]);
        let idx = cx.call_tmp("broadcast_to", &[&idx], Attrs::new().with("shape", ints(&full)))?;
        a = cx.call_tmp("gather_elements", &[&a, &idx], Attrs::new().with("axis", AttrValue::Int(row_axis as i64)))?;
        // det *= ±pivot.
        let swapped = cx.call_tmp("equal", &[&p, &kk], Attrs::new())?;
        let sign = cx.call_tmp(
            "where",
            &[&swapped, &Cx::scalar(DType::F64, 1.0), &Cx::scalar(DType::F64, -1.0)],
            Attrs::new(),
        )?;
        let pivot_row = cut(cx, &a, row_axis, k, k + 1)?;
        let pivot = cut(cx, &pivot_row, col_axis, k, k + 1)?;
        let pivot_b = cx.reshape(&pivot, &batch, true)?;
        let sign_b = cx.reshape(&sign, &batch, true)?;
        let signed = cx.call_tmp("multiply", &[&pivot_b, &sign_b], Attrs::new())?;
        det = cx.call_tmp("multiply", &[&det, &signed], Attrs::new())?;
        if k + 1 == m {
            break;
        }
        // Eliminate column k below row k: a[i] -= a[i, k] / pivot · a[k] for i > k. A zero
        // pivot means the column is zero from row k down: nothing to eliminate (and det is 0).
        let zero = cx.call_tmp("equal", &[&pivot, &Cx::scalar(DType::F64, 0.0)], Attrs::new())?;
        let safe = cx.call_tmp("where", &[&zero, &Cx::scalar(DType::F64, 1.0), &pivot], Attrs::new())?;
        let col = cut(cx, &a, col_axis, k, k + 1)?;
        let factor = cx.call_tmp("divide", &[&col, &safe], Attrs::new())?;
        let below: Vec<f64> = (0..m).map(|i| f64::from(u8::from(i > k))).collect();
        let below = Tensor::from_f64s(&[m, 1], DType::F64, &below).map_err(|e| e.to_string())?;
        let factor =
            cx.call_tmp("multiply", &[&factor, &Val::Const(Arc::new(Constant::Dense(below)))], Attrs::new())?;
        let update = cx.call_tmp("multiply", &[&factor, &pivot_row], Attrs::new())?;
        a = cx.call_tmp("subtract", &[&a, &update], Attrs::new())?;
    }
    if dtype == DType::F64 {
        return one(det);
    }
    one(cx.call("cast", &[&det], Attrs::new().with("dtype", AttrValue::DType(dtype)))?)
}
