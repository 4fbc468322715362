//! Neural-network operators: `matmul`, `dense`, `conv2d`, `conv2d_transpose`, `bias_add`,
//! `batch_norm`, `layer_norm`, `softmax` and `dropout`. All are float-only (f32, or f16 computed in f32).

use ndarray::{s, Array2, Array3, Array4, ArrayD, Axis, Ix2, Ix4, IxDyn, Zip};

use super::{
    attr_float, attr_int, attr_ints, check_arity, from_f32, invalid, norm_axis, out_dims, require_float,
    require_numeric, same_dtype, shape_str, tensor_arg, to_f32, type_err, types_of, KResult,
};
use crate::ir::{Attrs, Tensor, TensorType, Type};
use crate::op::{KernelCtx, OpError};

fn shape_err(op: &str, e: ndarray::ShapeError) -> OpError {
    invalid(op, format_args!("internal shape error: {e}"))
}

// ---- matmul ----

/// The operands of `matmul` as numpy sees them: a 1-d `a` is a row `[1, K]` and a 1-d `b` a
/// column `[K, 1]` (the added axis is dropped from the result); leading dimensions are batch
/// dimensions that broadcast.
struct MatmulShape {
    batch: Vec<u64>,
    a_batch: Vec<u64>,
    b_batch: Vec<u64>,
    m: u64,
    k: u64,
    n: u64,
}

fn matmul_shape(args: &[Type]) -> Result<(MatmulShape, Type), OpError> {
    let op = "matmul";
    check_arity(op, args.len(), 2)?;
    let a = tensor_arg(op, args, 0)?;
    let b = tensor_arg(op, args, 1)?;
    same_dtype(op, a, b)?;
    require_float(op, a)?;
    let shapes = || format!("{} and {}", shape_str(&a.shape), shape_str(&b.shape));
    let (ra, rb) = (a.shape.len(), b.shape.len());
    if ra == 0 || rb == 0 {
        return Err(type_err(op, format_args!("operands must have rank 1 or more, got shapes {}", shapes())));
    }
    let (a_batch, m, k) =
        if ra == 1 { (&[][..], 1, a.shape[0]) } else { (&a.shape[..ra - 2], a.shape[ra - 2], a.shape[ra - 1]) };
    let (b_batch, k2, n) =
        if rb == 1 { (&[][..], b.shape[0], 1) } else { (&b.shape[..rb - 2], b.shape[rb - 2], b.shape[rb - 1]) };
    if k != k2 {
        return Err(type_err(op, format_args!("inner dimensions do not match: shapes {}", shapes())));
    }
    let batch = super::broadcast_shapes(op, a_batch, b_batch)
        .map_err(|_| type_err(op, format_args!("batch dimensions do not broadcast: shapes {}", shapes())))?;
    let mut shape = batch.clone();
    if ra > 1 {
        shape.push(m);
    }
    if rb > 1 {
        shape.push(n);
    }
    let ty = Type::tensor(shape, a.dtype);
    Ok((MatmulShape { batch, a_batch: a_batch.to_vec(), b_batch: b_batch.to_vec(), m, k, n }, ty))
}

/// Type relation of `matmul(a, b)` with numpy/ONNX MatMul semantics: `[…, M, K] x […, K, N]
/// -> […, M, N]` where the batch dimensions broadcast (`[2, 1, 4, 5] x [3, 5, 6] ->
/// [2, 3, 4, 6]`); a 1-d operand is a row (left) or column (right) whose axis is dropped.
pub(crate) fn matmul_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    matmul_shape(args).map(|(_, ty)| ty)
}

/// The index into a batch of shape `own` (right-aligned against `batch`, size-1 dimensions
/// broadcasting) of the `flat`-th batch entry of `batch`, both row-major.
fn batch_index(flat: usize, batch: &[usize], own: &[usize]) -> usize {
    let mut rest = flat;
    let mut idx = 0;
    let mut stride = 1;
    for (d, &len) in batch.iter().enumerate().rev() {
        let i = rest % len;
        rest /= len;
        if let Some(o) = (d + own.len()).checked_sub(batch.len()) {
            if own[o] != 1 {
                idx += i * stride;
            }
            stride *= own[o];
        }
    }
    idx
}

/// Kernel of `matmul`: one matrix product per output batch entry, each operand's batch entry
/// found by broadcasting (no operand is expanded in memory).
pub(crate) fn matmul(args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "matmul";
    let (geo, ty) = matmul_shape(&types_of(args))?;
    let (shape, dtype) = out_dims(&ty)?;
    let (a, b) = (to_f32(op, &args[0])?, to_f32(op, &args[1])?);
    let us = |v: &[u64]| v.iter().map(|&d| d as usize).collect::<Vec<usize>>();
    let (batch, a_batch, b_batch) = (us(&geo.batch), us(&geo.a_batch), us(&geo.b_batch));
    let (m, k, n) = (geo.m as usize, geo.k as usize, geo.n as usize);
    let a3 = a.to_shape((a_batch.iter().product::<usize>(), m, k)).map_err(|e| shape_err(op, e))?;
    let b3 = b.to_shape((b_batch.iter().product::<usize>(), k, n)).map_err(|e| shape_err(op, e))?;
    let total: usize = batch.iter().product();
    let mut out = Array3::<f32>::zeros((total, m, n));
    for i in 0..total {
        let ai = a3.index_axis(Axis(0), batch_index(i, &batch, &a_batch));
        let bi = b3.index_axis(Axis(0), batch_index(i, &batch, &b_batch));
        out.index_axis_mut(Axis(0), i).assign(&ai.dot(&bi));
    }
    let out = out.into_shape_with_order(IxDyn(&shape)).map_err(|e| shape_err(op, e))?;
    Ok(vec![from_f32(op, out, dtype)?])
}

/// Estimated cost of a `matmul` call: `K` multiply-adds per output element.
pub(crate) fn matmul_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    let k = args.first().and_then(Type::as_tensor).and_then(|a| a.shape.last().copied()).unwrap_or(1);
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(k))
}

// ---- dense ----

/// Type relation of `dense(x, w)`: `x[..., K]` times `w[M, K]` transposed gives `[..., M]`
/// (TVM's `nn.dense`).
pub(crate) fn dense_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    let op = "dense";
    check_arity(op, args.len(), 2)?;
    let x = tensor_arg(op, args, 0)?;
    let w = tensor_arg(op, args, 1)?;
    same_dtype(op, x, w)?;
    require_float(op, x)?;
    if x.shape.is_empty() || w.shape.len() != 2 {
        return Err(type_err(
            op,
            format_args!(
                "expected data of rank >= 1 and a 2-d weight, got shapes {} and {}",
                shape_str(&x.shape),
                shape_str(&w.shape)
            ),
        ));
    }
    let k = x.shape[x.shape.len() - 1];
    if w.shape[1] != k {
        return Err(type_err(
            op,
            format_args!(
                "weight {} does not match data {}: expected weight shape (M, {k})",
                shape_str(&w.shape),
                shape_str(&x.shape)
            ),
        ));
    }
    let mut shape = x.shape.to_vec();
    let last = shape.len() - 1;
    shape[last] = w.shape[0];
    Ok(Type::tensor(shape, x.dtype))
}

/// Kernel of `dense`.
pub(crate) fn dense(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "dense";
    let ty = dense_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let (x, w) = (to_f32(op, &args[0])?, to_f32(op, &args[1])?);
    let k = w.shape()[1];
    let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
    let x2 = x.to_shape((rows, k)).map_err(|e| shape_err(op, e))?;
    let w2 = w.view().into_dimensionality::<Ix2>().map_err(|e| shape_err(op, e))?;
    // `dot` lays its result out column-major when both operands are (e.g. transposed data),
    // so reshape by logical row-major order, copying only then.
    let prod = x2.dot(&w2.t());
    let out = prod.to_shape(IxDyn(&shape)).map_err(|e| shape_err(op, e))?.into_owned();
    Ok(vec![from_f32(op, out, dtype)?])
}

/// Estimated cost of a `dense` call: `K` multiply-adds per output element.
pub(crate) fn dense_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    let k = args.get(1).and_then(Type::as_tensor).and_then(|w| w.shape.get(1).copied()).unwrap_or(1);
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(k))
}

// ---- conv2d ----

/// Checked conv2d geometry.
struct Conv {
    strides: [u64; 2],
    /// top, left, bottom, right
    pad: [u64; 4],
    dilation: [u64; 2],
    groups: u64,
    out: [u64; 4],
}

/// A positive `[h, w]` attribute given as `[v]` or `[h, w]` (default `[1, 1]`).
pub(crate) fn pair(op: &str, attrs: &Attrs, key: &str) -> Result<[u64; 2], OpError> {
    let v = match attr_ints(op, attrs, key)? {
        None => return Ok([1, 1]),
        Some(&[a]) => [a, a],
        Some(&[a, b]) => [a, b],
        Some(v) => return Err(type_err(op, format_args!("`{key}` must have 1 or 2 values, got {}", v.len()))),
    };
    if v.iter().any(|&d| d < 1) {
        return Err(type_err(op, format_args!("`{key}` must be positive, got [{}, {}]", v[0], v[1])));
    }
    Ok([v[0] as u64, v[1] as u64])
}

/// The `padding` attribute as `[top, left, bottom, right]` from `[p]`, `[ph, pw]` or four
/// values (default none), non-negative.
pub(crate) fn padding4(op: &str, attrs: &Attrs) -> Result<[u64; 4], OpError> {
    let pad = match attr_ints(op, attrs, "padding")? {
        None => [0, 0, 0, 0],
        Some(&[p]) => [p, p, p, p],
        Some(&[ph, pw]) => [ph, pw, ph, pw],
        Some(&[t, l, b, r]) => [t, l, b, r],
        Some(v) => return Err(type_err(op, format_args!("`padding` must have 1, 2 or 4 values, got {}", v.len()))),
    };
    if pad.iter().any(|&p| p < 0) {
        return Err(type_err(op, "`padding` must be non-negative"));
    }
    Ok(pad.map(|p| p as u64))
}

fn conv_geometry(args: &[Type], attrs: &Attrs) -> Result<(Conv, TensorType), OpError> {
    let op = "conv2d";
    check_arity(op, args.len(), 2)?;
    let x = tensor_arg(op, args, 0)?;
    let w = tensor_arg(op, args, 1)?;
    same_dtype(op, x, w)?;
    require_float(op, x)?;
    let (&[n, c, h, wd], &[o, cg, kh, kw]) = (&*x.shape, &*w.shape) else {
        return Err(type_err(
            op,
            format_args!(
                "expected 4-d data (NCHW) and weight (OIHW), got shapes {} and {}",
                shape_str(&x.shape),
                shape_str(&w.shape)
            ),
        ));
    };
    let strides = pair(op, attrs, "strides")?;
    let dilation = pair(op, attrs, "dilation")?;
    let pad = padding4(op, attrs)?;
    let groups = attr_int(op, attrs, "groups", 1)?;
    if groups < 1 {
        return Err(type_err(op, format_args!("`groups` must be positive, got {groups}")));
    }
    let groups = groups as u64;
    if cg.checked_mul(groups) != Some(c) {
        return Err(type_err(
            op,
            format_args!(
                "data has {c} channels but weight {} with groups {groups} expects {}",
                shape_str(&w.shape),
                cg.saturating_mul(groups)
            ),
        ));
    }
    if o % groups != 0 {
        return Err(type_err(op, format_args!("{o} output channels are not divisible by groups {groups}")));
    }
    if kh == 0 || kw == 0 {
        return Err(type_err(op, format_args!("weight {} has an empty kernel", shape_str(&w.shape))));
    }
    let too_big = || type_err(op, "padding, dilation or kernel size overflows");
    let mut out_hw = [0u64; 2];
    for (i, (size, k)) in [(h, kh), (wd, kw)].into_iter().enumerate() {
        let extent = dilation[i].checked_mul(k - 1).and_then(|e| e.checked_add(1)).ok_or_else(too_big)?;
        let padded = size.checked_add(pad[i]).and_then(|s| s.checked_add(pad[i + 2])).ok_or_else(too_big)?;
        if padded < extent {
            return Err(type_err(
                op,
                format_args!(
                    "kernel extent {extent} is larger than the padded input {padded} (data {}, weight {})",
                    shape_str(&x.shape),
                    shape_str(&w.shape)
                ),
            ));
        }
        out_hw[i] = (padded - extent) / strides[i] + 1;
    }
    let out = [n, o, out_hw[0], out_hw[1]];
    let ty = TensorType { shape: out.to_vec().into(), dtype: x.dtype };
    Ok((Conv { strides, pad, dilation, groups, out }, ty))
}

/// Type relation of `conv2d(x, w, strides, padding, dilation, groups)` in NCHW / OIHW layout.
/// `padding` is `[p]`, `[ph, pw]` or TVM's `[top, left, bottom, right]`.
pub(crate) fn conv2d_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (_, ty) = conv_geometry(args, attrs)?;
    Ok(Type::from(ty))
}

/// Elements of the im2col tile `conv2d` works in: the tile has `C_in / groups * kh * kw` rows
/// and as many output positions as fit in this many elements (at least one position), so a
/// large kernel costs a tile of a few MB, not a column matrix of every output position (a
/// 128 x 128 kernel needed 1 GB that way).
pub(crate) const CONV_TILE_ELEMENTS: u64 = 1 << 20;

/// Output positions per im2col tile for `ckk` rows and `positions` output positions.
fn conv_tile(ckk: u64, positions: u64) -> u64 {
    (CONV_TILE_ELEMENTS / ckk.max(1)).clamp(1, positions.max(1))
}

/// Elements of scratch `conv2d` allocates for a call on these argument types: one im2col tile,
/// at most `max(CONV_TILE_ELEMENTS, C_in / groups * kh * kw)` — a constant, or one column of
/// the weight. (The kernel sizes its tile with the same [`conv_tile`].)
#[cfg(test)]
pub(crate) fn conv2d_scratch_elements(args: &[Type], attrs: &Attrs) -> Result<u64, OpError> {
    let (geo, _) = conv_geometry(args, attrs)?;
    let ckk = per_element_taps(args);
    Ok(ckk.saturating_mul(conv_tile(ckk, geo.out[2].saturating_mul(geo.out[3]))))
}

/// Kernel of `conv2d`: per image and group, im2col over a tile of output positions at a time,
/// each tile one matrix product ([`CONV_TILE_ELEMENTS`]).
pub(crate) fn conv2d(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    conv2d_tiled(args, attrs, None)
}

/// [`conv2d`] with `tile` output positions per im2col tile (`None`: [`conv_tile`]'s choice).
/// One tile of every position is the plain im2col; the tests pin every tiling equal to it.
pub(crate) fn conv2d_tiled(args: &[Tensor], attrs: &Attrs, tile: Option<usize>) -> KResult {
    let op = "conv2d";
    let (geo, ty) = conv_geometry(&types_of(args), attrs)?;
    let out_dims = super::dims_usize(&geo.out)?;
    let x4 = to_f32(op, &args[0])?;
    let w4 = to_f32(op, &args[1])?;
    let x4 = x4.view().into_dimensionality::<Ix4>().map_err(|e| shape_err(op, e))?;
    let w4 = w4.view().into_dimensionality::<Ix4>().map_err(|e| shape_err(op, e))?;
    let (n, h, wd) = (x4.shape()[0], x4.shape()[2] as i128, x4.shape()[3] as i128);
    let (o, cg, kh, kw) = (w4.shape()[0], w4.shape()[1], w4.shape()[2], w4.shape()[3]);
    let (oh, ow) = (out_dims[2], out_dims[3]);
    let positions = oh * ow;
    let groups = geo.groups as usize;
    let og = o / groups;
    let ckk = cg * kh * kw;
    // `ckk` is at most the weight's size and the tile at most `CONV_TILE_ELEMENTS` or one
    // column, so the scratch is bounded by a constant or the input.
    let tile = tile.unwrap_or(conv_tile(ckk as u64, positions as u64) as usize).clamp(1, positions.max(1));
    let mut out = Array3::<f32>::zeros((n, o, positions));
    let mut col = Array2::<f32>::zeros((ckk, tile));
    let [sh, sw] = geo.strides.map(|v| v as i128);
    let [dh, dw] = geo.dilation.map(|v| v as i128);
    let (pt, pl) = (geo.pad[0] as i128, geo.pad[1] as i128);
    for b in 0..n {
        for g in 0..groups {
            let wg = w4.slice(s![g * og..(g + 1) * og, .., .., ..]);
            let wg = wg.to_shape((og, ckk)).map_err(|e| shape_err(op, e))?;
            for p0 in (0..positions).step_by(tile) {
                let p1 = (p0 + tile).min(positions);
                let mut cols = col.slice_mut(s![.., ..p1 - p0]);
                cols.fill(0.0);
                for c in 0..cg {
                    let xc = x4.slice(s![b, g * cg + c, .., ..]);
                    for i in 0..kh {
                        for j in 0..kw {
                            let mut row = cols.row_mut((c * kh + i) * kw + j);
                            for (t, p) in (p0..p1).enumerate() {
                                // i128 so that huge strides, dilations or paddings cannot overflow.
                                let ih = (p / ow) as i128 * sh + i as i128 * dh - pt;
                                let iw = (p % ow) as i128 * sw + j as i128 * dw - pl;
                                if (0..h).contains(&ih) && (0..wd).contains(&iw) {
                                    row[t] = xc[[ih as usize, iw as usize]];
                                }
                            }
                        }
                    }
                }
                out.slice_mut(s![b, g * og..(g + 1) * og, p0..p1]).assign(&wg.dot(&cols));
            }
        }
    }
    let out = out.into_shape_with_order((n, o, oh, ow)).map_err(|e| shape_err(op, e))?;
    Ok(vec![from_f32(op, out.into_dyn(), ty.dtype)?])
}

/// The product of a weight's dimensions after the first: the multiply-adds of one output
/// element of `conv2d` (`C_in / groups * kh * kw`), or the outputs one input element of
/// `conv2d_transpose` adds to (`C_out / groups * kh * kw`).
fn per_element_taps(args: &[Type]) -> u64 {
    let w = args.get(1).and_then(Type::as_tensor);
    w.map_or(1, |w| w.shape.iter().skip(1).fold(1u64, |n, &d| n.saturating_mul(d)))
}

/// Estimated cost of a `conv2d` call: `C_in / groups * kh * kw` multiply-adds per output
/// element.
pub(crate) fn conv2d_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    super::linear_cost(args, out).saturating_add(super::elements(out).saturating_mul(per_element_taps(args)))
}

/// Estimated cost of a `conv2d_transpose` call: every input element is scattered into
/// `C_out / groups * kh * kw` outputs.
pub(crate) fn conv2d_transpose_cost(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    let data = args.first().map_or(0, super::elements);
    super::linear_cost(args, out).saturating_add(data.saturating_mul(per_element_taps(args)))
}

// ---- bias_add ----

/// Shape `[1, …, len, …, 1]` of rank `rank` with `len` at `axis`: a 1-d parameter laid along
/// one axis so that it broadcasts against the data.
fn along_axis(rank: usize, axis: usize, len: usize) -> Vec<usize> {
    let mut shape = vec![1; rank];
    shape[axis] = len;
    shape
}

/// Checks that argument `i` is a 1-d tensor of `x`'s dtype and length `len`.
fn check_param(op: &str, args: &[Type], i: usize, name: &str, x: &TensorType, len: u64) -> Result<(), OpError> {
    let p = tensor_arg(op, args, i)?;
    same_dtype(op, x, p)?;
    if *p.shape != [len] {
        return Err(type_err(
            op,
            format_args!("{name} must have shape {}, got {}", shape_str(&[len]), shape_str(&p.shape)),
        ));
    }
    Ok(())
}

/// Type relation of `bias_add(x, b, axis=1)`: `b` is 1-d with `x`'s length along `axis`.
pub(crate) fn bias_add_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "bias_add";
    check_arity(op, args.len(), 2)?;
    let x = tensor_arg(op, args, 0)?;
    require_numeric(op, x)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 1)?, x.shape.len())?;
    check_param(op, args, 1, "bias", x, x.shape[axis])?;
    Ok(args[0].clone())
}

/// Kernel of `bias_add`: reshapes the bias along the axis and adds with broadcasting.
pub(crate) fn bias_add(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let op = "bias_add";
    bias_add_rel(&types_of(args), attrs)?;
    let rank = args[0].shape().len();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 1)?, rank)?;
    let b = super::shape::reshape_tensor(op, &args[1], &along_axis(rank, axis, args[1].len()))?;
    super::elementwise::arith(op, super::elementwise::Arith::Add, &[args[0].clone(), b], &Attrs::new(), ctx)
}

// ---- batch_norm ----

/// Type relation of `batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=1e-5)`: the tuple
/// `(out, mean, var)` like TVM's `nn.batch_norm`.
pub(crate) fn batch_norm_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "batch_norm";
    check_arity(op, args.len(), 5)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 1)?, x.shape.len())?;
    attr_float(op, attrs, "epsilon", 1e-5)?;
    let c = x.shape[axis];
    for (i, name) in ["gamma", "beta", "mean", "var"].into_iter().enumerate() {
        check_param(op, args, i + 1, name, x, c)?;
    }
    Ok(Type::tuple(vec![args[0].clone(), args[3].clone(), args[4].clone()]))
}

/// Kernel of `batch_norm` in inference form: `(x - mean) / sqrt(var + epsilon) * gamma + beta`,
/// returning the given mean and variance unchanged.
pub(crate) fn batch_norm(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "batch_norm";
    batch_norm_rel(&types_of(args), attrs)?;
    let x = to_f32(op, &args[0])?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", 1)?, x.ndim())?;
    let eps = attr_float(op, attrs, "epsilon", 1e-5)? as f32;
    let bshape = along_axis(x.ndim(), axis, x.shape()[axis]);
    let mut params = Vec::with_capacity(4);
    for t in &args[1..5] {
        params.push(to_f32(op, t)?.into_shape_with_order(IxDyn(&bshape)).map_err(|e| shape_err(op, e))?);
    }
    let bad = || invalid(op, "parameters do not broadcast");
    let [g, b, m, v] = [0, 1, 2, 3].map(|i| params[i].broadcast(x.raw_dim()));
    let (g, b, m, v) = (g.ok_or_else(bad)?, b.ok_or_else(bad)?, m.ok_or_else(bad)?, v.ok_or_else(bad)?);
    let out = Zip::from(&x)
        .and(&g)
        .and(&b)
        .and(&m)
        .and(&v)
        .map_collect(|&x, &g, &b, &m, &v| (x - m) / (v + eps).sqrt() * g + b);
    Ok(vec![from_f32(op, out, args[0].dtype())?, args[3].clone(), args[4].clone()])
}

// ---- layer_norm ----

/// Type relation of `layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5)`.
pub(crate) fn layer_norm_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "layer_norm";
    check_arity(op, args.len(), 3)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, x.shape.len())?;
    attr_float(op, attrs, "epsilon", 1e-5)?;
    check_param(op, args, 1, "gamma", x, x.shape[axis])?;
    check_param(op, args, 2, "beta", x, x.shape[axis])?;
    Ok(args[0].clone())
}

/// Kernel of `layer_norm`: normalises over `axis` with the biased variance, then scales and
/// shifts.
pub(crate) fn layer_norm(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "layer_norm";
    layer_norm_rel(&types_of(args), attrs)?;
    let x = to_f32(op, &args[0])?;
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1)?, x.ndim())?;
    let eps = attr_float(op, attrs, "epsilon", 1e-5)? as f32;
    let len = x.shape()[axis];
    if len == 0 {
        // Nothing to normalise; the result is empty like the input.
        return Ok(vec![args[0].clone()]);
    }
    let bshape = along_axis(x.ndim(), axis, len);
    let bad = || invalid(op, "parameters do not broadcast");
    let mean = x.sum_axis(Axis(axis)).mapv(|s| s / len as f32).insert_axis(Axis(axis));
    let centered = &x - &mean.broadcast(x.raw_dim()).ok_or_else(bad)?;
    let var = centered.mapv(|d| d * d).sum_axis(Axis(axis)).mapv(|s| s / len as f32).insert_axis(Axis(axis));
    let var = var.broadcast(x.raw_dim()).ok_or_else(bad)?;
    let g = to_f32(op, &args[1])?.into_shape_with_order(IxDyn(&bshape)).map_err(|e| shape_err(op, e))?;
    let b = to_f32(op, &args[2])?.into_shape_with_order(IxDyn(&bshape)).map_err(|e| shape_err(op, e))?;
    let (g, b) = (g.broadcast(x.raw_dim()).ok_or_else(bad)?, b.broadcast(x.raw_dim()).ok_or_else(bad)?);
    let out = Zip::from(&centered).and(&var).and(&g).and(&b).map_collect(|&d, &v, &g, &b| d / (v + eps).sqrt() * g + b);
    Ok(vec![from_f32(op, out, args[0].dtype())?])
}

// ---- softmax ----

/// Type relation of `softmax(x, axis=-1)`.
pub(crate) fn softmax_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "softmax";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    norm_axis(op, attr_int(op, attrs, "axis", -1)?, x.shape.len())?;
    Ok(args[0].clone())
}

/// Kernel of `softmax`, subtracting the maximum first for stability.
pub(crate) fn softmax(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "softmax";
    softmax_rel(&types_of(args), attrs)?;
    let x = to_f32(op, &args[0])?;
    let axis = Axis(norm_axis(op, attr_int(op, attrs, "axis", -1)?, x.ndim())?);
    let bad = || invalid(op, "internal broadcast failure");
    let max = x.fold_axis(axis, f32::NEG_INFINITY, |&acc, &v| acc.max(v)).insert_axis(axis);
    let e: ArrayD<f32> = (&x - &max.broadcast(x.raw_dim()).ok_or_else(bad)?).mapv(f32::exp);
    let sum = e.sum_axis(axis).insert_axis(axis);
    let out = &e / &sum.broadcast(e.raw_dim()).ok_or_else(bad)?;
    Ok(vec![from_f32(op, out, args[0].dtype())?])
}

// ---- dropout ----

/// Type relation of `dropout(x, rate=0.5)`: `0 <= rate < 1`, result of `x`'s type.
pub(crate) fn dropout_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "dropout";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    let rate = attr_float(op, attrs, "rate", 0.5)?;
    if !(0.0..1.0).contains(&rate) {
        return Err(type_err(op, format_args!("`rate` must be in [0, 1), got {rate}")));
    }
    Ok(args[0].clone())
}

/// Kernel of `dropout`: the identity (inference semantics, as TVM after SimplifyInference).
pub(crate) fn dropout(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    dropout_rel(&types_of(args), attrs)?;
    Ok(vec![args[0].clone()])
}

// ---- conv2d_transpose ----

/// Checked conv2d_transpose geometry.
struct ConvT {
    strides: [u64; 2],
    /// top, left, bottom, right
    pad: [u64; 4],
    dilation: [u64; 2],
    groups: u64,
}

fn conv_transpose_geometry(args: &[Type], attrs: &Attrs) -> Result<(ConvT, Type), OpError> {
    let op = "conv2d_transpose";
    check_arity(op, args.len(), 2)?;
    let x = tensor_arg(op, args, 0)?;
    let w = tensor_arg(op, args, 1)?;
    same_dtype(op, x, w)?;
    require_float(op, x)?;
    let (&[n, c, h, wd], &[ci, cog, kh, kw]) = (&*x.shape, &*w.shape) else {
        return Err(type_err(
            op,
            format_args!(
                "expected 4-d data (NCHW) and weight (IOHW), got shapes {} and {}",
                shape_str(&x.shape),
                shape_str(&w.shape)
            ),
        ));
    };
    let strides = pair(op, attrs, "strides")?;
    let dilation = pair(op, attrs, "dilation")?;
    let pad = padding4(op, attrs)?;
    let out_pad = match attr_ints(op, attrs, "output_padding")? {
        None => [0, 0],
        Some(&[p]) => [p, p],
        Some(&[a, b]) => [a, b],
        Some(v) => return Err(type_err(op, format_args!("`output_padding` must have 1 or 2 values, got {}", v.len()))),
    };
    let groups = attr_int(op, attrs, "groups", 1)?;
    if groups < 1 {
        return Err(type_err(op, format_args!("`groups` must be positive, got {groups}")));
    }
    let groups = groups as u64;
    if ci != c {
        return Err(type_err(
            op,
            format_args!("data has {c} channels but weight {} expects {ci}", shape_str(&w.shape)),
        ));
    }
    if c % groups != 0 {
        return Err(type_err(op, format_args!("{c} input channels are not divisible by groups {groups}")));
    }
    if kh == 0 || kw == 0 || h == 0 || wd == 0 {
        return Err(type_err(
            op,
            format_args!("empty data or kernel: shapes {} and {}", shape_str(&x.shape), shape_str(&w.shape)),
        ));
    }
    let too_big = || type_err(op, "strides, padding, dilation or kernel size overflows");
    let mut out_hw = [0u64; 2];
    for (i, (size, k)) in [(h, kh), (wd, kw)].into_iter().enumerate() {
        let op_i = out_pad[i];
        if op_i < 0 || (op_i as u64 >= strides[i] && op_i as u64 >= dilation[i]) {
            return Err(type_err(
                op,
                format_args!("`output_padding` {op_i} must be non-negative and less than the stride or dilation"),
            ));
        }
        // stride (in - 1) + output_padding + dilation (k - 1) + 1 - pads
        let full = strides[i]
            .checked_mul(size - 1)
            .and_then(|v| v.checked_add(op_i as u64))
            .and_then(|v| v.checked_add(dilation[i].checked_mul(k - 1)?))
            .and_then(|v| v.checked_add(1))
            .ok_or_else(too_big)?;
        let cut = pad[i].checked_add(pad[i + 2]).ok_or_else(too_big)?;
        if cut >= full {
            return Err(type_err(op, format_args!("padding {cut} removes the whole output of length {full}")));
        }
        out_hw[i] = full - cut;
    }
    let co = cog.checked_mul(groups).ok_or_else(too_big)?;
    let ty = Type::tensor(vec![n, co, out_hw[0], out_hw[1]], x.dtype);
    Ok((ConvT { strides, pad, dilation, groups }, ty))
}

/// Type relation of `conv2d_transpose(x, w, strides, padding, dilation, groups,
/// output_padding)`: data NCHW, weight IOHW `[C_in, C_out / groups, kh, kw]`; the output is
/// `stride (in - 1) + output_padding + dilation (k - 1) + 1 - pad_begin - pad_end` per axis
/// (ONNX ConvTranspose with explicit pads).
pub(crate) fn conv2d_transpose_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    conv_transpose_geometry(args, attrs).map(|(_, ty)| ty)
}

/// Kernel of `conv2d_transpose`: scatters every input element times the kernel into the
/// output.
pub(crate) fn conv2d_transpose(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "conv2d_transpose";
    let (geo, ty) = conv_transpose_geometry(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let x4 = to_f32(op, &args[0])?;
    let w4 = to_f32(op, &args[1])?;
    let x4 = x4.view().into_dimensionality::<Ix4>().map_err(|e| shape_err(op, e))?;
    let w4 = w4.view().into_dimensionality::<Ix4>().map_err(|e| shape_err(op, e))?;
    let (n, c, h, wd) = x4.dim();
    let (_, cog, kh, kw) = w4.dim();
    let (oh, ow) = (shape[2] as i128, shape[3] as i128);
    let groups = geo.groups as usize;
    let cig = c / groups;
    let [sh, sw] = geo.strides.map(|v| v as i128);
    let [dh, dw] = geo.dilation.map(|v| v as i128);
    let (pt, pl) = (geo.pad[0] as i128, geo.pad[1] as i128);
    let mut out = Array4::<f32>::zeros((shape[0], shape[1], shape[2], shape[3]));
    for b in 0..n {
        for ic in 0..c {
            let g = ic / cig;
            for iy in 0..h {
                for ix in 0..wd {
                    let v = x4[[b, ic, iy, ix]];
                    for co in 0..cog {
                        let oc = g * cog + co;
                        for i in 0..kh {
                            let y = iy as i128 * sh + i as i128 * dh - pt;
                            if !(0..oh).contains(&y) {
                                continue;
                            }
                            for j in 0..kw {
                                let xo = ix as i128 * sw + j as i128 * dw - pl;
                                if (0..ow).contains(&xo) {
                                    out[[b, oc, y as usize, xo as usize]] += v * w4[[ic, co, i, j]];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(vec![from_f32(op, out.into_dyn(), dtype)?])
}
