//! Neural-network operators without a recurrence: `Einsum` (`einsum`), `GridSample`
//! (`grid_sample`), and the ones decomposed into elementwise operators and reductions:
//! `Swish`, `SwiGLU`, `LpNormalization`, `GroupNormalization`, `MeanVarianceNormalization`,
//! and `AffineGrid` (a `matmul` with constant coordinates); `Col2Im` (2-D: a
//! `conv2d_transpose` with a constant 0/1 kernel; other ranks: a `scatter_elements` with
//! reduction add at constant indices) and `MaxUnpool` (a `scatter_elements` into zeros, padded
//! to a larger `output_shape`).

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
        other => return Err(format!("attribute `mode` = {other:?} is not supported (linear, nearest, cubic)").into()),
    };
    let padding = cx.string("padding_mode", "zeros")?;
    if !matches!(padding.as_str(), "zeros" | "border" | "reflection") {
        return Err(
            format!("attribute `padding_mode` = {padding:?} is not supported (zeros, border, reflection)").into()
        );
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
        )
        .into());
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
        other => return Err(format!("attribute `p` must be 1 or 2, got {other}").into()),
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
        return Err(format!("needs an input of rank 3 or more (N, C, spatial…), got rank {}", shape.len()).into());
    }
    let (n, c) = (shape[0], shape[1]);
    let g = u64::try_from(groups).ok().filter(|&g| g > 0 && c.is_multiple_of(g)).ok_or_else(|| {
        NodeError::from(format!("attribute `num_groups` = {groups} must be positive and divide the {c} channels"))
    })?;
    let per = if cx.opset >= 21 { c } else { g };
    if scale.shape() != [per] || bias.shape() != [per] {
        return Err(format!("scale {:?} and bias {:?} must have shape [{per}]", scale.shape(), bias.shape()).into());
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
        return Err(format!("theta {ts:?} must be [N, r, r+1] for size {size:?} [N, C, spatial…] with r 2 or 3").into());
    }
    let spatial = &size[2..];
    let points = product(spatial)?;
    if points.saturating_mul(r as u64 + 1) > cx.em_fold_limit() {
        return Err(format!("a grid of {points} points is too large to build at import").into());
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
    if image.len() != block.len() || image.is_empty() {
        return Err(
            format!("image_shape {image:?} and block_shape {block:?} must have one value per image axis").into()
        );
    }
    let (image, block) = (pos(image, "image size")?, pos(block, "block size")?);
    if image.len() != 2 {
        return col2im_scatter(cx, x, &image, &block);
    }
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1, 1]), "stride")?;
    let dilations = pos(cx.ints_opt("dilations")?.unwrap_or(vec![1, 1]), "dilation")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 4]), "pad")?;
    if strides.len() != 2 || dilations.len() != 2 || pads.len() != 4 || strides.contains(&0) || dilations.contains(&0) {
        return Err(format!(
            "strides {strides:?} and dilations {dilations:?} must be two positive values, pads {pads:?} four"
        )
        .into());
    }
    let shape = x.shape();
    let k = block[0].checked_mul(block[1]).filter(|&k| k > 0).ok_or("block_shape must be positive")?;
    if shape.len() != 3 || !shape[1].is_multiple_of(k) {
        return Err(format!("input must be [N, C·{k}, L] (C·block elements per column), got {shape:?}").into());
    }
    let (n, c) = (shape[0], shape[1] / k);
    // Blocks along each axis: (size + pads - extent) / stride + 1.
    let mut grid = [0u64; 2];
    let mut out_pad = [0u64; 2];
    for i in 0..2 {
        let ext = extent(block[i], dilations[i]).ok_or("the dilated block is too large")?;
        let padded = image[i] + pads[i] + pads[i + 2];
        if padded < ext {
            return Err(format!("the block {block:?} (dilations {dilations:?}) does not fit the padded image").into());
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
        )
        .into());
    }
    if (c * k).saturating_mul(k) > cx.em_fold_limit() {
        return Err(format!("a {c}x{k} block kernel is too large to make at import").into());
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

/// Col2Im over images that are not 2-D: a `scatter_elements` (reduction add) of every column
/// element into the flattened image, at indices computed here from the window attributes.
/// Elements that land in the padding go to one extra slot past the image, sliced off after.
fn col2im_scatter(cx: &mut Cx<'_>, x: Val, image: &[u64], block: &[u64]) -> R<Vec<Option<Val>>> {
    let d = image.len();
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1; d]), "stride")?;
    let dilations = pos(cx.ints_opt("dilations")?.unwrap_or(vec![1; d]), "dilation")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 2 * d]), "pad")?;
    if strides.len() != d
        || dilations.len() != d
        || pads.len() != 2 * d
        || strides.contains(&0)
        || dilations.contains(&0)
    {
        return Err(format!(
            "strides {strides:?} and dilations {dilations:?} must be {d} positive values, pads {pads:?} {}",
            2 * d
        )
        .into());
    }
    let shape = x.shape();
    let k = product(block)?;
    if k == 0 || shape.len() != 3 || !shape[1].is_multiple_of(k) {
        return Err(format!("input must be [N, C·{k}, L] (C·block elements per column), got {shape:?}").into());
    }
    let (n, c, l) = (shape[0], shape[1] / k, shape[2]);
    let mut grid = Vec::with_capacity(d);
    for i in 0..d {
        let ext = extent(block[i], dilations[i]).ok_or("the dilated block is too large")?;
        let padded = image[i] + pads[i] + pads[i + d];
        if padded < ext {
            return Err(format!("the block {block:?} (dilations {dilations:?}) does not fit the padded image").into());
        }
        grid.push((padded - ext) / strides[i] + 1);
    }
    if product(&grid)? != l {
        return Err(format!(
            "the input has {l} blocks, but image_shape {image:?}, block_shape {block:?} and the window attributes \
             give {grid:?}"
        )
        .into());
    }
    let size = product(image)?;
    let elems = n.checked_mul(c).and_then(|v| v.checked_mul(k)).and_then(|v| v.checked_mul(l));
    if elems.is_none_or(|e| e > cx.em_fold_limit()) {
        return Err(format!("{n}x{c}x{k}x{l} column indices are too many to make at import").into());
    }
    // Column element (block offset e, block b) lands at image position
    // b_i·stride_i + e_i·dilation_i - pad_begin_i on each axis.
    let digits = |mut v: u64, dims: &[u64]| -> Vec<u64> {
        let mut out = vec![0; dims.len()];
        for i in (0..dims.len()).rev() {
            out[i] = v % dims[i];
            v /= dims[i];
        }
        out
    };
    let mut per_column = Vec::with_capacity((k * l) as usize);
    for e in 0..k {
        let ei = digits(e, block);
        for b in 0..l {
            let bi = digits(b, &grid);
            let mut flat = 0i64;
            let mut inside = true;
            for i in 0..d {
                let p = (bi[i] * strides[i] + ei[i] * dilations[i]) as i64 - pads[i] as i64;
                inside &= (0..image[i] as i64).contains(&p);
                flat = flat * image[i] as i64 + p;
            }
            per_column.push(if inside { flat } else { size as i64 });
        }
    }
    let idx: Vec<f64> = (0..n * c).flat_map(|_| per_column.iter().map(|&i| i as f64)).collect();
    let idx = Tensor::from_f64s(&[n, c, k * l], DType::I64, &idx).map_err(|e| e.to_string())?;
    let idx = Val::Const(Arc::new(Constant::Dense(idx)));
    let updates = cx.reshape(&x, &[n, c, k * l], true)?;
    let zeros = filled(&[n, c, size + 1], x.ty().dtype, 0.0);
    let attrs = Attrs::new().with("axis", AttrValue::Int(2)).with("reduction", AttrValue::Str("add".into()));
    let y = cx.call_tmp("scatter_elements", &[&zeros, &idx, &updates], attrs)?;
    let attrs = Attrs::new().with("begin", ints(&[0])).with("end", ints(&[size])).with("axes", ints(&[2]));
    let y = cx.call_tmp("strided_slice", &[&y], attrs)?;
    let out: Vec<u64> = [n, c].into_iter().chain(image.iter().copied()).collect();
    one(cx.reshape(&y, &out, false)?)
}

/// MaxUnpool: zeros of the unpooled shape with `X`'s values written at `I`, the flat indices
/// (over the whole output) that MaxPool's second output gives: a `scatter_elements` into the
/// flattened zeros.
pub(super) fn max_unpool(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let shape = x.shape();
    let rank = shape.len();
    if rank < 3 {
        return Err(format!("X must be [N, C, spatial…], got {shape:?}").into());
    }
    let spatial = rank - 2;
    let kernel = pos(cx.ints_opt("kernel_shape")?.ok_or("attribute `kernel_shape` is required")?, "kernel size")?;
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1; spatial]), "stride")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 2 * spatial]), "pad")?;
    if kernel.len() != spatial || strides.len() != spatial || pads.len() != 2 * spatial || strides.contains(&0) {
        return Err(format!(
            "kernel_shape {kernel:?} and strides {strides:?} need {spatial} values (strides positive), pads {pads:?} {}",
            2 * spatial
        ).into());
    }
    if idx.shape() != shape || !matches!(idx.ty().dtype, DType::I64 | DType::I32) {
        return Err(
            format!("I must be integers of X's shape {shape:?}, got {} {:?}", idx.ty().dtype, idx.shape()).into()
        );
    }
    // onnx's reference scatters X into the unpooled size inferred from the window, then
    // places that block at the origin of a larger `output_shape` (zeros after it).
    let mut inferred = shape[..2].to_vec();
    for i in 0..spatial {
        let full = (shape[2 + i] - 1) * strides[i] + kernel[i];
        inferred.push(full.checked_sub(pads[i] + pads[i + spatial]).ok_or("the pads exceed the unpooled size")?);
    }
    let out: Vec<u64> = match cx.const_ints(2, "output_shape")? {
        Some(s) => {
            let s = pos(s, "output size")?;
            if s.len() != rank || s.iter().zip(&inferred).any(|(o, i)| o < i) {
                return Err(format!(
                    "output_shape {s:?} must be [N, C, spatial…] and at least the unpooled size {inferred:?}"
                )
                .into());
            }
            s
        }
        None => inferred.clone(),
    };
    let total = product(&inferred)?;
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
    if out == inferred {
        return one(cx.reshape(&y, &out, false)?);
    }
    let y = cx.reshape(&y, &inferred, true)?;
    let pad_width: Vec<i64> =
        std::iter::repeat_n(0, rank).chain(out.iter().zip(&inferred).map(|(o, i)| (o - i) as i64)).collect();
    let attrs = Attrs::new()
        .with("pad_width", ints_i(&pad_width))
        .with("pad_value", AttrValue::Float(0.0))
        .with("pad_mode", AttrValue::Str("constant".into()));
    one(cx.call("pad", &[&y], attrs)?)
}

/// DeformConv (2-D), as onnx's reference computes it: each output position `(i, j)` and
/// kernel tap `(a, b)` samples its input channel bilinearly (`grid_sample`, zeros outside,
/// align_corners) at `(i·stride - pad + a·dilation + Δh, j·stride - pad + b·dilation + Δw)`
/// with the offsets Δ of its offset group, scaled by the mask; the samples, laid out as
/// columns `[N, group, C/group·kH·kW, oH·oW]`, are multiplied by the weights `[group,
/// M/group, C/group·kH·kW]` (`matmul`) and the bias added.
pub(super) fn deform_conv(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, offset, b, mask) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.opt(3), cx.opt(4));
    let (xs, ws, os) = (x.shape(), w.shape(), offset.shape());
    let dtype = x.ty().dtype;
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(format!(
            "only 2-D deformable convolutions are supported: X {xs:?}, W {ws:?} and offset {os:?} must have rank 4"
        )
        .into());
    }
    if !dtype.is_float() || w.ty().dtype != dtype || offset.ty().dtype != dtype {
        return Err(format!(
            "X, W and offset must be of one float dtype, got {dtype}, {} and {}",
            w.ty().dtype,
            offset.ty().dtype
        )
        .into());
    }
    let (n, c, ih, iw) = (xs[0], xs[1], xs[2], xs[3]);
    let (m, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    if let Some(k) = cx.ints_opt("kernel_shape")? {
        if k != [kh as i64, kw as i64] {
            return Err(format!("kernel_shape {k:?} does not match the weight shape {ws:?}").into());
        }
    }
    let two = |v: Option<Vec<i64>>, default: u64, len: usize, what: &str| -> R<Vec<u64>> {
        let v = match v {
            Some(v) => pos(v, what)?,
            None => vec![default; len],
        };
        if v.len() != len {
            return Err(format!("{what}s {v:?} must have {len} values").into());
        }
        Ok(v)
    };
    let strides = two(cx.ints_opt("strides")?, 1, 2, "stride")?;
    let dilations = two(cx.ints_opt("dilations")?, 1, 2, "dilation")?;
    let pads = two(cx.ints_opt("pads")?, 0, 4, "pad")?;
    if strides.contains(&0) || dilations.contains(&0) {
        return Err(format!("strides {strides:?} and dilations {dilations:?} must be positive").into());
    }
    let group = cx.int("group", 1)?;
    let offset_group = cx.int("offset_group", 1)?;
    if group < 1 || offset_group < 1 {
        return Err(format!("group {group} and offset_group {offset_group} must be positive").into());
    }
    let (group, og) = (group as u64, offset_group as u64);
    if c != cg * group || !m.is_multiple_of(group) || !c.is_multiple_of(og) {
        return Err(format!(
            "X's {c} channels must be W's {cg} per group × group {group} and divide by offset_group {og}; W's {m} \
             output channels must divide by group"
        )
        .into());
    }
    if ih < 2 || iw < 2 {
        return Err(format!(
            "the input image {ih}x{iw} must be at least 2x2 (onnx normalises sample positions by size - 1)"
        )
        .into());
    }
    let (oh, ow) = (os[2], os[3]);
    for (i, (size, o)) in [(ih, oh), (iw, ow)].into_iter().enumerate() {
        let k = if i == 0 { kh } else { kw };
        let ext = extent(k, dilations[i]).ok_or("the dilated kernel is too large")?;
        let padded = size + pads[i] + pads[i + 2];
        if padded < ext || (padded - ext) / strides[i] + 1 != o {
            return Err(format!(
                "offset's output size {oh}x{ow} does not match the input, kernel and window attributes"
            )
            .into());
        }
    }
    let taps = kh * kw;
    if os[0] != n || os[1] != og * taps * 2 {
        return Err(format!("offset {os:?} must be [{n}, {}, oH, oW] (offset_group·kH·kW·2)", og * taps * 2).into());
    }
    if let Some(mk) = &mask {
        if mk.shape() != [n, og * taps, oh, ow] || mk.ty().dtype != dtype {
            return Err(format!(
                "mask must be {dtype} [{n}, {}, {oh}, {ow}], got {} {:?}",
                og * taps,
                mk.ty().dtype,
                mk.shape()
            )
            .into());
        }
    }
    if n * og * oh * kh * ow * kw * 2 > cx.em_fold_limit() {
        return Err("the sampling grid is too large".into());
    }
    let tr = |cx: &mut Cx<'_>, v: &Val, perm: &[i64]| {
        cx.call_tmp("transpose", &[v], Attrs::new().with("axes", ints_i(perm)))
    };
    let konst = |shape: &[u64], v: &[f64]| -> R<Val> {
        Ok(Val::Const(Arc::new(Constant::Dense(Tensor::from_f64s(shape, dtype, v).map_err(|e| e.to_string())?))))
    };
    // Offsets [N, og, kH, kW, 2, oH, oW] → per coordinate [N, og, oH, kH, oW, kW].
    let off = cx.reshape(&offset, &[n, og, kh, kw, 2, oh, ow], true)?;
    let mut coords = Vec::with_capacity(2);
    for (d, (size, stride, dil, pad)) in
        [(iw, strides[1], dilations[1], pads[1]), (ih, strides[0], dilations[0], pads[0])].into_iter().enumerate()
    {
        // The grid's last axis is (x = width, y = height); offset index 1 is width.
        let at = 1 - d as u64;
        let attrs = Attrs::new().with("begin", ints(&[at])).with("end", ints(&[at + 1])).with("axes", ints(&[4]));
        let part = cx.call_tmp("strided_slice", &[&off], attrs)?;
        let part = cx.reshape(&part, &[n, og, kh, kw, oh, ow], true)?;
        let part = tr(cx, &part, &[0, 1, 4, 2, 5, 3])?;
        // Base positions [oH, kH, oW, kW]: output index · stride - pad + tap · dilation.
        let mut base = Vec::with_capacity((oh * kh * ow * kw) as usize);
        for i in 0..oh {
            for a in 0..kh {
                for j in 0..ow {
                    for bb in 0..kw {
                        let (o, t) = if d == 0 { (j, bb) } else { (i, a) };
                        base.push((o * stride + t * dil) as f64 - pad as f64);
                    }
                }
            }
        }
        let base = konst(&[oh, kh, ow, kw], &base)?;
        let p = cx.call_tmp("add", &[&part, &base], Attrs::new())?;
        let p = cx.call_tmp("divide", &[&p, &Cx::scalar(dtype, (size - 1) as f64)], Attrs::new())?;
        let p = cx.call_tmp("multiply", &[&p, &Cx::scalar(dtype, 2.0)], Attrs::new())?;
        let p = cx.call_tmp("subtract", &[&p, &Cx::scalar(dtype, 1.0)], Attrs::new())?;
        coords.push(cx.reshape(&p, &[n, og, oh, kh, ow, kw, 1], true)?);
    }
    let grid = cx.call_tmp("concatenate", &[&coords[0], &coords[1]], Attrs::new().with("axis", AttrValue::Int(6)))?;
    let grid = cx.reshape(&grid, &[n * og, oh * kh, ow * kw, 2], true)?;
    let xg = cx.reshape(&x, &[n * og, c / og, ih, iw], true)?;
    let attrs = Attrs::new()
        .with("mode", AttrValue::Str("linear".into()))
        .with("padding_mode", AttrValue::Str("zeros".into()))
        .with("align_corners", AttrValue::Bool(true));
    let sampled = cx.call_tmp("grid_sample", &[&xg, &grid], attrs)?;
    let mut cols = cx.reshape(&sampled, &[n, og, c / og, oh, kh, ow, kw], true)?;
    if let Some(mk) = &mask {
        let mk = cx.reshape(mk, &[n, og, 1, kh, kw, oh, ow], true)?;
        let mk = tr(cx, &mk, &[0, 1, 2, 5, 3, 6, 4])?;
        cols = cx.call_tmp("multiply", &[&cols, &mk], Attrs::new())?;
    }
    // [N, C, oH, kH, oW, kW] → [N, C, kH, kW, oH, oW] → [N, group, C/group·kH·kW, oH·oW].
    let cols = cx.reshape(&cols, &[n, c, oh, kh, ow, kw], true)?;
    let cols = tr(cx, &cols, &[0, 1, 3, 5, 2, 4])?;
    let cols = cx.reshape(&cols, &[n, group, cg * taps, oh * ow], true)?;
    let wg = cx.reshape(&w, &[group, m / group, cg * taps], true)?;
    let y = cx.call_tmp("matmul", &[&wg, &cols], Attrs::new())?;
    let y = cx.reshape(&y, &[n, m, oh, ow], b.is_some())?;
    match b {
        None => one(y),
        Some(b) => one(cx.call("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?),
    }
}

/// RoiAlign, as onnx's reference computes it: each region's bin `(ph, pw)` takes
/// `sampling_ratio²` samples at `start + bin_size · (p + (i + ½) / sampling_ratio)`; a
/// sample outside `[-1, size]` counts 0, otherwise its coordinate is clamped to the image
/// and its four corners weighted bilinearly. `avg` averages `Σ wᵢ·vᵢ` over the bin; `max`
/// takes the largest single weighted corner `wᵢ·vᵢ` (the reference's definition). Sample
/// positions and weights are elementwise arithmetic on `rois`; the corner values are one
/// `take` each from the flattened `X` at `((batch·C + c)·H + y)·W + x`. The number of samples
/// must be known at import: `sampling_ratio` = 0 (adaptive, from each region's size) is
/// refused.
pub(super) fn roi_align(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, rois, batch) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (xs, rs, bs) = (x.shape(), rois.shape(), batch.shape());
    let dtype = x.ty().dtype;
    if xs.len() != 4 || !dtype.is_float() {
        return Err(format!("X must be a float [N, C, H, W], got {dtype} {xs:?}").into());
    }
    let r = rs.first().copied().unwrap_or(0);
    if rs.len() != 2 || rs[1] != 4 || rois.ty().dtype != dtype {
        return Err(format!("rois must be {dtype} [num_rois, 4], got {} {rs:?}", rois.ty().dtype).into());
    }
    if bs != [r] || !matches!(batch.ty().dtype, DType::I64 | DType::I32) {
        return Err(format!("batch_indices must be int64 [{r}], got {} {bs:?}", batch.ty().dtype).into());
    }
    let half = if cx.opset >= 16 {
        match cx.string("coordinate_transformation_mode", "half_pixel")?.as_str() {
            "half_pixel" => true,
            "output_half_pixel" => false,
            other => {
                return Err(format!(
                    "coordinate_transformation_mode {other:?} is not supported (half_pixel, output_half_pixel)"
                )
                .into())
            }
        }
    } else {
        false
    };
    let max = match cx.string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => return Err(format!("mode {other:?} is not supported (avg, max)").into()),
    };
    let (oh, ow) = (cx.int("output_height", 1)?, cx.int("output_width", 1)?);
    let sr = cx.int("sampling_ratio", 0)?;
    let scale = cx.float("spatial_scale", 1.0)?;
    if oh < 1 || ow < 1 {
        return Err(format!("output_height {oh} and output_width {ow} must be positive").into());
    }
    if sr < 1 {
        return Err(format!(
            "sampling_ratio {sr} (adaptive: samples per bin from each region's size at run time) is not supported; \
             give a positive sampling_ratio"
        )
        .into());
    }
    let (oh, ow, sr) = (oh as u64, ow as u64, sr as u64);
    let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let (ph, pw) = (oh * sr, ow * sr);
    if r.saturating_mul(c).saturating_mul(ph).saturating_mul(pw) > cx.em_fold_limit() {
        return Err("the sample grid is too large".into());
    }
    let s = |v: f64| Cx::scalar(dtype, v);
    let i64s = |shape: &[u64], v: &[f64]| -> R<Val> {
        let t = Tensor::from_f64s(shape, DType::I64, v).map_err(|e| e.to_string())?;
        Ok(Val::Const(Arc::new(Constant::Dense(t))))
    };
    let offset = if half { 0.5 } else { 0.0 };
    let col = |cx: &mut Cx<'_>, k: u64| -> R<Val> {
        let attrs = Attrs::new().with("begin", ints(&[k])).with("end", ints(&[k + 1])).with("axes", ints(&[1]));
        let v = cx.call_tmp("strided_slice", &[&rois], attrs)?;
        let v = cx.call_tmp("multiply", &[&v, &s(scale)], Attrs::new())?;
        cx.call_tmp("subtract", &[&v, &s(offset)], Attrs::new())
    };
    // Per axis (height, then width): [R, P] integer corners, weights and validity.
    let mut axes = Vec::with_capacity(2);
    for (k, size, bins) in [(1u64, h, oh), (0, w, ow)] {
        let start = col(cx, k)?;
        let end = col(cx, k + 2)?;
        let mut len = cx.call_tmp("subtract", &[&end, &start], Attrs::new())?;
        if !half {
            len = cx.call_tmp("maximum", &[&len, &s(1.0)], Attrs::new())?;
        }
        let bin = cx.call_tmp("divide", &[&len, &s(bins as f64)], Attrs::new())?;
        let steps: Vec<f64> =
            (0..bins).flat_map(|p| (0..sr).map(move |i| p as f64 + (i as f64 + 0.5) / sr as f64)).collect();
        let steps = Val::Const(Arc::new(Constant::Dense(
            Tensor::from_f64s(&[bins * sr], dtype, &steps).map_err(|e| e.to_string())?,
        )));
        let off = cx.call_tmp("multiply", &[&bin, &steps], Attrs::new())?;
        let p = cx.call_tmp("add", &[&start, &off], Attrs::new())?;
        let lo_ok = cx.call_tmp("greater_equal", &[&p, &s(-1.0)], Attrs::new())?;
        let hi_ok = cx.call_tmp("less_equal", &[&p, &s(size as f64)], Attrs::new())?;
        let valid = cx.call_tmp("logical_and", &[&lo_ok, &hi_ok], Attrs::new())?;
        let pc = cx.call_tmp("maximum", &[&p, &s(0.0)], Attrs::new())?;
        let pc = cx.call_tmp("minimum", &[&pc, &s((size - 1) as f64)], Attrs::new())?;
        let low = cx.call_tmp("floor", &[&pc], Attrs::new())?;
        let high = cx.call_tmp("add", &[&low, &s(1.0)], Attrs::new())?;
        let high = cx.call_tmp("minimum", &[&high, &s((size - 1) as f64)], Attrs::new())?;
        let l = cx.call_tmp("subtract", &[&pc, &low], Attrs::new())?;
        let hw = cx.call_tmp("subtract", &[&s(1.0), &l], Attrs::new())?;
        let to_i = |cx: &mut Cx<'_>, v: &Val| {
            cx.call_tmp("cast", &[v], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))
        };
        let (low, high) = (to_i(cx, &low)?, to_i(cx, &high)?);
        axes.push((valid, [(low, hw), (high, l)]));
    }
    let [(vy, ys), (vx, xs2)] = <[_; 2]>::try_from(axes).map_err(|_| "two axes")?;
    let col_y = |cx: &mut Cx<'_>, v: &Val| cx.reshape(v, &[r, ph, 1], true);
    let row_x = |cx: &mut Cx<'_>, v: &Val| cx.reshape(v, &[r, 1, pw], true);
    let (vy, vx) = (col_y(cx, &vy)?, row_x(cx, &vx)?);
    let valid = cx.call_tmp("logical_and", &[&vy, &vx], Attrs::new())?;
    let batch = if batch.ty().dtype == DType::I64 {
        batch
    } else {
        cx.call_tmp("cast", &[&batch], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
    };
    let image = cx.call_tmp("multiply", &[&batch, &Cx::scalar(DType::I64, (c * h * w) as f64)], Attrs::new())?;
    let image = cx.reshape(&image, &[r, 1, 1, 1], true)?;
    let channels: Vec<f64> = (0..c).map(|k| (k * h * w) as f64).collect();
    let image = cx.call_tmp("add", &[&image, &i64s(&[1, c, 1, 1], &channels)?], Attrs::new())?;
    let flat = cx.reshape(&x, &[n * c * h * w], true)?;
    let zero_i = Cx::scalar(DType::I64, 0.0);
    let mut acc: Option<Val> = None;
    for (yi, wy) in &ys {
        for (xi, wx) in &xs2 {
            let (yi, wy, xi, wx) = (col_y(cx, yi)?, col_y(cx, wy)?, row_x(cx, xi)?, row_x(cx, wx)?);
            let at = cx.call_tmp("multiply", &[&yi, &Cx::scalar(DType::I64, w as f64)], Attrs::new())?;
            let at = cx.call_tmp("add", &[&at, &xi], Attrs::new())?;
            let at = cx.call_tmp("where", &[&valid, &at, &zero_i], Attrs::new())?;
            let at = cx.reshape(&at, &[r, 1, ph, pw], true)?;
            let at = cx.call_tmp("add", &[&at, &image], Attrs::new())?;
            let v = cx.call_tmp("take", &[&flat, &at], Attrs::new().with("axis", AttrValue::Int(0)))?;
            let wt = cx.call_tmp("multiply", &[&wy, &wx], Attrs::new())?;
            let wt = cx.call_tmp("where", &[&valid, &wt, &s(0.0)], Attrs::new())?;
            let wt = cx.reshape(&wt, &[r, 1, ph, pw], true)?;
            let t = cx.call_tmp("multiply", &[&v, &wt], Attrs::new())?;
            acc = Some(match acc {
                None => t,
                Some(a) => cx.call_tmp(if max { "maximum" } else { "add" }, &[&a, &t], Attrs::new())?,
            });
        }
    }
    let acc = acc.ok_or("no corners")?;
    let acc = cx.reshape(&acc, &[r, c, oh, sr, ow, sr], true)?;
    let attrs = Attrs::new().with("axis", ints_i(&[3, 5])).with("keepdims", AttrValue::Bool(false));
    if max {
        return one(cx.call("max", &[&acc], attrs)?);
    }
    let sum = cx.call_tmp("sum", &[&acc], attrs)?;
    one(cx.call("divide", &[&sum, &s((sr * sr) as f64)], Attrs::new())?)
}
