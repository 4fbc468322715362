//! Neural-network operators without a recurrence: `Einsum` (`einsum`), `GridSample`
//! (`grid_sample`), and the ones decomposed into elementwise operators and reductions:
//! `Swish`, `SwiGLU`, `LpNormalization`, `GroupNormalization`, `MeanVarianceNormalization`,
//! and `AffineGrid` (a `matmul` with constant coordinates); `Col2Im` (a `conv2d_transpose`
//! with a constant 0/1 kernel) and `MaxUnpool` (a `scatter_elements` into zeros).

use super::*;

pub(super) fn einsum(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let xs: Vec<Val> = (0..cx.n_inputs()).map(|i| cx.input(i)).collect::<R<_>>()?;
    let equation = cx.string("equation", "")?;
    if equation.is_empty() {
        return Err("attribute `equation` is required".into());
    }
    let refs: Vec<&Val> = xs.iter().collect();
    one(cx.call("einsum", &refs, Attrs::new().with("equation", AttrValue::Str(equation.replace(' ', "").into())))?)
}

/// GridSample: opset 16 names the modes bilinear / bicubic and takes 4-D input only; opset 20
/// names them linear / cubic and takes any rank.
pub(super) fn grid_sample(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, grid) = (cx.input(0)?, cx.input(1)?);
    let default = if cx.opset >= 20 { "linear" } else { "bilinear" };
    let mode = match cx.string("mode", default)?.as_str() {
        "linear" | "bilinear" => "linear",
        "nearest" => "nearest",
        "cubic" | "bicubic" => "cubic",
        other => return Err(format!("attribute `mode` = {other:?} is not supported (linear, nearest, cubic)")),
    };
    let padding = cx.string("padding_mode", "zeros")?;
    if !matches!(padding.as_str(), "zeros" | "border" | "reflection") {
        return Err(format!("attribute `padding_mode` = {padding:?} is not supported (zeros, border, reflection)"));
    }
    let align = cx.int("align_corners", 0)? != 0;
    let attrs = Attrs::new()
        .with("mode", AttrValue::Str(mode.into()))
        .with("padding_mode", AttrValue::Str(padding.into()))
        .with("align_corners", AttrValue::Bool(align));
    one(cx.call("grid_sample", &[&x, &grid], attrs)?)
}

/// Swish: `x * sigmoid(alpha * x)`.
pub(super) fn swish(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let alpha = cx.float("alpha", 1.0)?;
    let dtype = x.ty().dtype;
    let ax =
        if alpha == 1.0 { x.clone() } else { cx.call_tmp("multiply", &[&x, &Cx::scalar(dtype, alpha)], Attrs::new())? };
    let s = cx.call_tmp("sigmoid", &[&ax], Attrs::new())?;
    one(cx.call("multiply", &[&x, &s], Attrs::new())?)
}

/// SwiGLU: `a * sigmoid(alpha * a) * b`, `a` and `b` of one shape (no broadcasting).
pub(super) fn swiglu(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    if a.ty() != b.ty() {
        return Err(format!(
            "A and B must have one shape and dtype, got {:?} {} and {:?} {}",
            a.shape(),
            a.ty().dtype.name(),
            b.shape(),
            b.ty().dtype.name()
        ));
    }
    let alpha = cx.float("alpha", 1.0)?;
    let dtype = a.ty().dtype;
    let aa =
        if alpha == 1.0 { a.clone() } else { cx.call_tmp("multiply", &[&a, &Cx::scalar(dtype, alpha)], Attrs::new())? };
    let s = cx.call_tmp("sigmoid", &[&aa], Attrs::new())?;
    let swish = cx.call_tmp("multiply", &[&a, &s], Attrs::new())?;
    one(cx.call("multiply", &[&swish, &b], Attrs::new())?)
}

/// LpNormalization: `x / ||x||_p` along `axis` (p 1 or 2), 0 where the norm is 0 (onnx's
/// reference).
pub(super) fn lp_normalization(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let axis = norm_axis(cx.int("axis", -1)?, x.rank())?;
    let p = cx.int("p", 2)?;
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&[axis as i64]));
    let norm = match p {
        1 => {
            let a = cx.call_tmp("abs", &[&x], Attrs::new())?;
            cx.call_tmp("sum", &[&a], attrs)?
        }
        2 => {
            let sq = cx.call_tmp("multiply", &[&x, &x], Attrs::new())?;
            let s = cx.call_tmp("sum", &[&sq], attrs)?;
            cx.call_tmp("sqrt", &[&s], Attrs::new())?
        }
        other => return Err(format!("attribute `p` must be 1 or 2, got {other}")),
    };
    let zero = Cx::scalar(x.ty().dtype, 0.0);
    let is_zero = cx.call_tmp("equal", &[&norm, &zero], Attrs::new())?;
    let q = cx.call_tmp("divide", &[&x, &norm], Attrs::new())?;
    one(cx.call("where", &[&is_zero, &zero, &q], Attrs::new())?)
}

/// MeanVarianceNormalization, as onnx's function body computes it:
/// `(x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9)` over `axes` (default 0, 2, 3).
pub(super) fn mean_variance_normalization(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let axes = cx.ints_opt("axes")?.unwrap_or(vec![0, 2, 3]);
    let axes: Vec<i64> = axes.iter().map(|&a| norm_axis(a, rank).map(|a| a as i64)).collect::<R<_>>()?;
    let dtype = x.ty().dtype;
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&axes));
    let mean = cx.call_tmp("mean", &[&x], attrs.clone())?;
    let sq = cx.call_tmp("multiply", &[&x, &x], Attrs::new())?;
    let mean_sq = cx.call_tmp("mean", &[&sq], attrs)?;
    let sq_mean = cx.call_tmp("multiply", &[&mean, &mean], Attrs::new())?;
    let var = cx.call_tmp("subtract", &[&mean_sq, &sq_mean], Attrs::new())?;
    let std = cx.call_tmp("sqrt", &[&var], Attrs::new())?;
    let std = cx.call_tmp("add", &[&std, &Cx::scalar(dtype, 1e-9)], Attrs::new())?;
    let centred = cx.call_tmp("subtract", &[&x, &mean], Attrs::new())?;
    one(cx.call("divide", &[&centred, &std], Attrs::new())?)
}

/// GroupNormalization: `x` `[N, C, …]` normalised over each group of `C / num_groups`
/// channels and the spatial axes, then scaled and shifted per channel (opset 21: `scale`,
/// `bias` of shape `[C]`) or per group (opset 18: `[num_groups]`, each value repeated over the
/// group's channels).
pub(super) fn group_normalization(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let eps = cx.float("epsilon", 1e-5)?;
    cx.int_must("stash_type", |v| v == 1, "only float32 statistics")?;
    let groups = cx.int_opt("num_groups")?.ok_or("attribute `num_groups` is required")?;
    let shape = x.shape();
    if shape.len() < 3 {
        return Err(format!("needs an input of rank 3 or more (N, C, spatial…), got rank {}", shape.len()));
    }
    let (n, c) = (shape[0], shape[1]);
    let g = u64::try_from(groups)
        .ok()
        .filter(|&g| g > 0 && c.is_multiple_of(g))
        .ok_or_else(|| format!("attribute `num_groups` = {groups} must be positive and divide the {c} channels"))?;
    let per = if cx.opset >= 21 { c } else { g };
    if scale.shape() != [per] || bias.shape() != [per] {
        return Err(format!("scale {:?} and bias {:?} must have shape [{per}]", scale.shape(), bias.shape()));
    }
    let rest = product(&shape[1..])? / g;
    let xg = cx.reshape(&x, &[n, g, rest], true)?;
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&[2]));
    let mean = cx.call_tmp("mean", &[&xg], attrs)?;
    let centred = cx.call_tmp("subtract", &[&xg, &mean], Attrs::new())?;
    let normed = rms_scaled(cx, &centred, &[2], eps)?;
    let y = cx.reshape(&normed, &shape, true)?;
    let mut per_channel = vec![c];
    per_channel.extend(std::iter::repeat_n(1, shape.len() - 2));
    let (s, b) = if per == c {
        (cx.reshape(&scale, &per_channel, true)?, cx.reshape(&bias, &per_channel, true)?)
    } else {
        // [G] -> [G, C/G] -> [C, 1, …]: each group's value over its channels.
        let mut out = Vec::new();
        for v in [&scale, &bias] {
            let vg = cx.reshape(v, &[g, 1], true)?;
            let wide = cx.call_tmp("broadcast_to", &[&vg], Attrs::new().with("shape", ints(&[g, c / g])))?;
            out.push(cx.reshape(&wide, &per_channel, true)?);
        }
        let b = out.pop().ok_or("no bias")?;
        (out.pop().ok_or("no scale")?, b)
    };
    let ys = cx.call_tmp("multiply", &[&y, &s], Attrs::new())?;
    one(cx.call("add", &[&ys, &b], Attrs::new())?)
}

/// AffineGrid: `theta` `[N, r, r+1]` applied to the normalised coordinates `(x, y[, z], 1)`
/// of every point of an output of `size` `[N, C, (D,) H, W]` (known at import), as one
/// `matmul` with the constant coordinates `[r+1, points]`, giving `[N, (D,) H, W, r]`.
pub(super) fn affine_grid(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let theta = cx.input(0)?;
    let size = cx.const_ints(1, "size")?.ok_or("input 1 (size) is missing")?;
    let align = cx.int("align_corners", 0)? != 0;
    let size = pos(size, "size")?;
    let r = size.len().saturating_sub(2);
    let ts = theta.shape();
    if !(2..=3).contains(&r) || ts.len() != 3 || ts[0] != size[0] || ts[1] != r as u64 || ts[2] != r as u64 + 1 {
        return Err(format!("theta {ts:?} must be [N, r, r+1] for size {size:?} [N, C, spatial…] with r 2 or 3"));
    }
    let spatial = &size[2..];
    let points = product(spatial)?;
    if points.saturating_mul(r as u64 + 1) > cx.em_fold_limit() {
        return Err(format!("a grid of {points} points is too large to build at import"));
    }
    let coord = |i: u64, n: u64| -> f64 {
        if align {
            if n <= 1 {
                -1.0
            } else {
                -1.0 + 2.0 * i as f64 / (n - 1) as f64
            }
        } else {
            -1.0 + (2 * i + 1) as f64 / n as f64
        }
    };
    // Row k of the coordinates: component k (x indexes the last axis), then ones.
    let mut base = vec![0.0; ((r + 1) as u64 * points) as usize];
    for p in 0..points {
        let mut rest = p;
        let mut at = vec![0u64; r];
        for a in (0..r).rev() {
            at[a] = rest % spatial[a];
            rest /= spatial[a];
        }
        for k in 0..r {
            let axis = r - 1 - k;
            base[(k as u64 * points + p) as usize] = coord(at[axis], spatial[axis]);
        }
        base[(r as u64 * points + p) as usize] = 1.0;
    }
    let dtype = theta.ty().dtype;
    let base = Val::Const(Arc::new(Constant::Dense(
        Tensor::from_f64s(&[r as u64 + 1, points], dtype, &base).map_err(|e| e.to_string())?,
    )));
    let g = cx.call_tmp("matmul", &[&theta, &base], Attrs::new())?;
    let t = cx.call_tmp("transpose", &[&g], Attrs::new().with("axes", ints_i(&[0, 2, 1])))?;
    let mut out = vec![size[0]];
    out.extend_from_slice(spatial);
    out.push(r as u64);
    one(cx.reshape(&t, &out, false)?)
}

/// Col2Im (2-D blocks): the sliding blocks `[N, C·kh·kw, L]` summed back into the image
/// `[N, C, H, W]`. Summing overlapping blocks is exactly a transposed convolution of the
/// blocks (as `[N, C·kh·kw, Lh, Lw]`) with a 0/1 kernel that puts block element `k` at its
/// offset, one group per channel: a `conv2d_transpose` with a constant weight.
pub(super) fn col2im(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let image = cx.const_ints(1, "image_shape")?.ok_or("input 1 (image_shape) is required")?;
    let block = cx.const_ints(2, "block_shape")?.ok_or("input 2 (block_shape) is required")?;
    if image.len() != 2 || block.len() != 2 {
        return Err(format!("only 2-D images are supported, got image_shape {image:?} and block_shape {block:?}"));
    }
    let (image, block) = (pos(image, "image size")?, pos(block, "block size")?);
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1, 1]), "stride")?;
    let dilations = pos(cx.ints_opt("dilations")?.unwrap_or(vec![1, 1]), "dilation")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 4]), "pad")?;
    if strides.len() != 2 || dilations.len() != 2 || pads.len() != 4 || strides.contains(&0) || dilations.contains(&0) {
        return Err(format!(
            "strides {strides:?} and dilations {dilations:?} must be two positive values, pads {pads:?} four"
        ));
    }
    let shape = x.shape();
    let k = block[0].checked_mul(block[1]).filter(|&k| k > 0).ok_or("block_shape must be positive")?;
    if shape.len() != 3 || !shape[1].is_multiple_of(k) {
        return Err(format!("input must be [N, C·{k}, L] (C·block elements per column), got {shape:?}"));
    }
    let (n, c) = (shape[0], shape[1] / k);
    // Blocks along each axis: (size + pads - extent) / stride + 1.
    let mut grid = [0u64; 2];
    let mut out_pad = [0u64; 2];
    for i in 0..2 {
        let ext = extent(block[i], dilations[i]).ok_or("the dilated block is too large")?;
        let padded = image[i] + pads[i] + pads[i + 2];
        if padded < ext {
            return Err(format!("the block {block:?} (dilations {dilations:?}) does not fit the padded image"));
        }
        grid[i] = (padded - ext) / strides[i] + 1;
        // What the transposed convolution leaves uncovered at the end.
        out_pad[i] = (padded - ext) % strides[i];
    }
    if grid[0] * grid[1] != shape[2] {
        return Err(format!(
            "the input has {} blocks, but image_shape {image:?}, block_shape {block:?} and the window attributes \
             give {} x {}",
            shape[2], grid[0], grid[1]
        ));
    }
    if (c * k).saturating_mul(k) > cx.em_fold_limit() {
        return Err(format!("a {c}x{k} block kernel is too large to make at import"));
    }
    let xs = cx.reshape(&x, &[n, c * k, grid[0], grid[1]], true)?;
    let weight: Vec<f64> = (0..c * k).flat_map(|ck| (0..k).map(move |e| f64::from(u8::from(ck % k == e)))).collect();
    let weight =
        Tensor::from_f64s(&[c * k, 1, block[0], block[1]], x.ty().dtype, &weight).map_err(|e| e.to_string())?;
    let weight = Val::Const(Arc::new(Constant::Dense(weight)));
    let attrs = Attrs::new()
        .with("strides", ints(&strides))
        .with("padding", ints(&pads))
        .with("dilation", ints(&dilations))
        .with("groups", AttrValue::Int(c as i64))
        .with("output_padding", ints(&out_pad));
    one(cx.call("conv2d_transpose", &[&xs, &weight], attrs)?)
}

/// MaxUnpool: zeros of the unpooled shape with `X`'s values written at `I`, the flat indices
/// (over the whole output) that MaxPool's second output gives: a `scatter_elements` into the
/// flattened zeros.
pub(super) fn max_unpool(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let shape = x.shape();
    let rank = shape.len();
    if rank < 3 {
        return Err(format!("X must be [N, C, spatial…], got {shape:?}"));
    }
    let spatial = rank - 2;
    let kernel = pos(cx.ints_opt("kernel_shape")?.ok_or("attribute `kernel_shape` is required")?, "kernel size")?;
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1; spatial]), "stride")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 2 * spatial]), "pad")?;
    if kernel.len() != spatial || strides.len() != spatial || pads.len() != 2 * spatial || strides.contains(&0) {
        return Err(format!(
            "kernel_shape {kernel:?} and strides {strides:?} need {spatial} values (strides positive), pads {pads:?} {}",
            2 * spatial
        ));
    }
    if idx.shape() != shape || !matches!(idx.ty().dtype, DType::I64 | DType::I32) {
        return Err(format!("I must be integers of X's shape {shape:?}, got {} {:?}", idx.ty().dtype, idx.shape()));
    }
    let out: Vec<u64> = match cx.const_ints(2, "output_shape")? {
        Some(s) => {
            let s = pos(s, "output size")?;
            if s.len() != rank || s[..2] != shape[..2] {
                return Err(format!("output_shape {s:?} must be [N, C, spatial…] with X's N and C {:?}", &shape[..2]));
            }
            s
        }
        None => {
            let mut s = shape[..2].to_vec();
            for i in 0..spatial {
                let full = (shape[2 + i] - 1) * strides[i] + kernel[i];
                s.push(full.checked_sub(pads[i] + pads[i + spatial]).ok_or("the pads exceed the unpooled size")?);
            }
            s
        }
    };
    let total = product(&out)?;
    let count = product(&shape)?;
    let zeros = filled(&[total], x.ty().dtype, 0.0);
    let xf = cx.reshape(&x, &[count], true)?;
    let idx = if idx.ty().dtype == DType::I64 {
        idx
    } else {
        cx.call_tmp("cast", &[&idx], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
    };
    let flat_idx = cx.reshape(&idx, &[count], true)?;
    let attrs = Attrs::new().with("axis", AttrValue::Int(0)).with("reduction", AttrValue::Str("none".into()));
    let y = cx.call_tmp("scatter_elements", &[&zeros, &flat_idx, &xf], attrs)?;
    one(cx.reshape(&y, &out, false)?)
}
