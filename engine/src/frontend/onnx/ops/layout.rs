//! Operators that repeat, rearrange or create elements by position: `Tile` (`reshape`,
//! `broadcast_to`, `reshape`), `SpaceToDepth` / `DepthToSpace` (`reshape`, `transpose`,
//! `reshape`), `OneHot` (`one_hot`) and `EyeLike` (a constant: its shape is static).

use super::*;

/// Tile: `x` of shape `[d0, …]` repeated `reps` times per axis, as `x` reshaped to
/// `[1, d0, 1, d1, …]`, broadcast to `[r0, d0, r1, d1, …]` and reshaped to `[r0·d0, …]`.
pub(super) fn tile(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let reps = cx.const_ints(1, "repeats")?.ok_or("input 1 (repeats) is missing")?;
    let shape = x.shape();
    if reps.len() != shape.len() {
        return Err(format!("{} repeats for an input of rank {}", reps.len(), shape.len()).into());
    }
    let reps = pos(reps, "repeat count")?;
    if reps.iter().all(|&r| r == 1) {
        return one(x);
    }
    let spread: Vec<u64> = shape.iter().flat_map(|&d| [1, d]).collect();
    let wide: Vec<u64> = shape.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
    let out: Vec<u64> = shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.checked_mul(r))
        .collect::<Option<_>>()
        .ok_or("the tiled shape overflows")?;
    product(&out)?;
    let xs = cx.reshape(&x, &spread, true)?;
    let b = cx.call_tmp("broadcast_to", &[&xs], Attrs::new().with("shape", ints(&wide)))?;
    one(cx.reshape(&b, &out, false)?)
}

/// The `blocksize` attribute, positive.
fn blocksize(cx: &mut Cx<'_>) -> R<u64> {
    let b = cx.int_opt("blocksize")?.ok_or("attribute `blocksize` is required")?;
    u64::try_from(b)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| NodeError::from(format!("attribute `blocksize` must be positive, got {b}")))
}

/// `x` reshaped to `split`, transposed by `perm` and reshaped to `out`.
fn rearrange(cx: &mut Cx<'_>, x: &Val, split: &[u64], perm: &[i64], out: &[u64]) -> R<Vec<Option<Val>>> {
    let xs = cx.reshape(x, split, true)?;
    let t = cx.call_tmp("transpose", &[&xs], Attrs::new().with("axes", ints_i(perm)))?;
    one(cx.reshape(&t, out, false)?)
}

fn nchw(x: &Val) -> R<[u64; 4]> {
    match x.shape()[..] {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(format!("needs a rank-4 NCHW input, got shape {:?}", x.shape()).into()),
    }
}

pub(super) fn space_to_depth(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let b = blocksize(cx)?;
    // `mode` (onnx 1.20's reference and schema): DCR puts the block offsets before the
    // channels, CRD after them.
    let perm: [i64; 6] = match cx.string("mode", "DCR")?.as_str() {
        "DCR" => [0, 3, 5, 1, 2, 4],
        "CRD" => [0, 1, 3, 5, 2, 4],
        other => return Err(format!("attribute `mode` must be DCR or CRD, got {other:?}").into()),
    };
    let [n, c, h, w] = nchw(&x)?;
    if !h.is_multiple_of(b) || !w.is_multiple_of(b) {
        return Err(format!("height {h} and width {w} must be multiples of the blocksize {b}").into());
    }
    let cb = c.checked_mul(b.checked_mul(b).ok_or("the blocksize overflows")?).ok_or("the channel count overflows")?;
    rearrange(cx, &x, &[n, c, h / b, b, w / b, b], &perm, &[n, cb, h / b, w / b])
}

pub(super) fn depth_to_space(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let b = blocksize(cx)?;
    let mode = cx.string("mode", "DCR")?;
    let [n, c, h, w] = nchw(&x)?;
    let bb = b.checked_mul(b).ok_or("the blocksize overflows")?;
    if !c.is_multiple_of(bb) {
        return Err(format!("the channels {c} must be a multiple of blocksize² {bb}").into());
    }
    let out =
        [n, c / bb, h.checked_mul(b).ok_or("the height overflows")?, w.checked_mul(b).ok_or("the width overflows")?];
    match mode.as_str() {
        "DCR" => rearrange(cx, &x, &[n, b, b, c / bb, h, w], &[0, 3, 4, 1, 5, 2], &out),
        "CRD" => rearrange(cx, &x, &[n, c / bb, b, b, h, w], &[0, 1, 4, 2, 5, 3], &out),
        other => Err(format!("attribute `mode` must be DCR or CRD, got {other:?}").into()),
    }
}

/// OneHot: `depth` a one-element input known at import (any numeric type, truncated),
/// `values` `[off, on]`.
pub(super) fn one_hot(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (indices, values) = (cx.input(0)?, cx.input(2)?);
    let depth = match cx.const_floats(1, "depth")?.as_deref() {
        Some([d]) if d.is_finite() && *d >= 1.0 && *d <= i64::MAX as f64 => *d as i64,
        Some([d]) => return Err(format!("input 1 (depth) must be a positive count, got {d}").into()),
        Some(v) => return Err(format!("input 1 (depth) must hold one value, got {}", v.len()).into()),
        None => return Err("input 1 (depth) is missing".into()),
    };
    let axis = cx.int("axis", -1)?;
    norm_axis(axis, indices.rank() + 1)?;
    let values = cx.reshape(&values, &[2], true)?;
    let attrs = Attrs::new().with("depth", AttrValue::Int(depth)).with("axis", AttrValue::Int(axis));
    one(cx.call("one_hot", &[&indices, &values], attrs)?)
}

/// EyeLike: ones on diagonal `k` of a 2-D tensor of the input's shape, as a constant.
pub(super) fn eye_like(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let dtype = match cx.int_opt("dtype")? {
        Some(d) => tensor::dtype_of(d as i32).map_err(|e| NodeError::from(format!("attribute `dtype`: {e}")))?,
        None => x.ty().dtype,
    };
    let k = cx.int("k", 0)?;
    let [rows, cols] = x.shape()[..] else {
        return Err(format!("needs a 2-D input, got shape {:?}", x.shape()).into());
    };
    let n = product(&[rows, cols])?;
    if n > cx.em_fold_limit() {
        return Err(format!("a {rows}x{cols} identity is too large to make at import").into());
    }
    let mut v = vec![0.0; n as usize];
    for i in 0..rows as i64 {
        let j = i.saturating_add(k);
        if (0..cols as i64).contains(&j) {
            v[(i as u64 * cols + j as u64) as usize] = 1.0;
        }
    }
    let t = Tensor::from_f64s(&[rows, cols], dtype, &v).map_err(|e| e.to_string())?;
    one(Val::Const(Arc::new(Constant::Dense(t))))
}

/// CenterCropPad: each listed axis cropped or zero-padded to its target length around the
/// centre (the odd element goes to the end), as `strided_slice` then `pad`.
pub(super) fn center_crop_pad(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let target = cx.const_ints(1, "shape")?.ok_or("input 1 (shape) is missing")?;
    let shape = x.shape();
    let rank = shape.len();
    let axes: Vec<usize> = match cx.ints_opt("axes")? {
        Some(a) => a.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?,
        None => (0..rank).collect(),
    };
    if axes.len() != target.len() {
        return Err(format!("{} target lengths for {} axes", target.len(), axes.len()).into());
    }
    let (mut begin, mut end, mut crop_axes) = (Vec::new(), Vec::new(), Vec::new());
    let mut pads = vec![0i64; 2 * rank];
    for (&a, &t) in axes.iter().zip(&target) {
        let t = u64::try_from(t).map_err(|_| NodeError::from(format!("negative target length {t}")))?;
        let dim = shape[a];
        if t < dim {
            let start = (dim - t) / 2;
            begin.push(start as i64);
            end.push((start + t) as i64);
            crop_axes.push(a as i64);
        } else if t > dim {
            let d = t - dim;
            pads[a] = (d / 2) as i64;
            pads[a + rank] = (d - d / 2) as i64;
        }
    }
    let mut y = x;
    if !crop_axes.is_empty() {
        let attrs =
            Attrs::new().with("begin", ints_i(&begin)).with("end", ints_i(&end)).with("axes", ints_i(&crop_axes));
        y = cx.call_tmp("strided_slice", &[&y], attrs)?;
    }
    if pads.iter().any(|&p| p != 0) {
        y = cx.call_tmp("pad", &[&y], Attrs::new().with("pad_width", ints_i(&pads)))?;
    }
    one(y)
}

/// ReverseSequence: along `time_axis`, the first `sequence_lens[b]` elements of batch `b`
/// reversed and the rest kept, as `gather_elements` at the index
/// `t < len[b] ? len[b] - 1 - t : t`.
pub(super) fn reverse_sequence(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, lens) = (cx.input(0)?, cx.input(1)?);
    let time = cx.int("time_axis", 0)?;
    let batch = cx.int("batch_axis", 1)?;
    if !matches!((time, batch), (0, 1) | (1, 0)) {
        return Err(format!("time_axis {time} and batch_axis {batch} must be 0 and 1 (in either order)").into());
    }
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(format!("needs an input of rank 2 or more, got shape {shape:?}").into());
    }
    let (t_len, b_len) = (shape[time as usize], shape[batch as usize]);
    if lens.shape() != [b_len] {
        return Err(format!("sequence_lens must have shape [{b_len}], got {:?}", lens.shape()).into());
    }
    let lens = if lens.ty().dtype == DType::I64 {
        lens
    } else {
        cx.call_tmp("cast", &[&lens], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
    };
    // Time positions and lengths laid out on the first two axes, the rest of rank 1.
    let mut t_shape = vec![1u64; shape.len()];
    t_shape[time as usize] = t_len;
    let mut l_shape = vec![1u64; shape.len()];
    l_shape[batch as usize] = b_len;
    let steps: Vec<f64> = (0..t_len).map(|t| t as f64).collect();
    let t = Val::Const(Arc::new(Constant::Dense(
        Tensor::from_f64s(&t_shape, DType::I64, &steps).map_err(|e| e.to_string())?,
    )));
    let l = cx.reshape(&lens, &l_shape, true)?;
    let inside = cx.call_tmp("less", &[&t, &l], Attrs::new())?;
    let last = cx.call_tmp("subtract", &[&l, &Cx::scalar(DType::I64, 1.0)], Attrs::new())?;
    let back = cx.call_tmp("subtract", &[&last, &t], Attrs::new())?;
    let idx = cx.call_tmp("where", &[&inside, &back, &t], Attrs::new())?;
    let idx = cx.call_tmp("broadcast_to", &[&idx], Attrs::new().with("shape", ints(&shape)))?;
    one(cx.call("gather_elements", &[&x, &idx], Attrs::new().with("axis", AttrValue::Int(time)))?)
}
