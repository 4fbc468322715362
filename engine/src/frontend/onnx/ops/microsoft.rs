//! onnxruntime's `com.microsoft` operators that its transformer optimizer and quantizer write
//! into models users ship, following onnxruntime's contrib-op documentation
//! (`docs/ContribOperators.md`) and its CPU kernels. Each is decomposed at import into passel
//! graph operators, so every pass understands, fuses and folds the result:
//!
//! - `Gelu`, `BiasGelu` (erf GELU of `A + B`), `FastGelu` (tanh GELU of `X + bias`),
//!   `QuickGelu` (`X · sigmoid(alpha · X)`);
//! - `SkipLayerNormalization`, `SkipSimplifiedLayerNormalization` (LayerNorm / RMSNorm of
//!   `input + skip + bias` over the last axis; the sum is output 3), and
//!   `SimplifiedLayerNormalization` (RMSNorm; onnxruntime registers it in the default domain,
//!   where its optimizer writes it, so it is dispatched from there);
//! - `FusedMatMul` (`alpha · op(A) @ op(B)` with transposes of the last two axes);
//! - `Attention` (BERT / GPT-2 self-attention from one packed QKV projection: no past state;
//!   masks as 1-D valid lengths, 2-D or 3-D 0/1 masks, `unidirectional`, `attention_bias`) and
//!   `MultiHeadAttention` (separate 3-D query / key / value, optional packed bias, key padding
//!   mask, `attention_bias`, `unidirectional`; no past state);
//! - `QLinearAdd`, `QLinearMul`, `QLinearSigmoid`, `QLinearConcat` (the QOperator format of
//!   onnxruntime's static quantizer: dequantize, the float op, requantize; `quant.rs`);
//! - `RotaryEmbedding` (rotary position embedding with `[max_sequence, rotary_dim / 2]` cos /
//!   sin caches, looked up at `position_ids` or at a start position plus the sequence index;
//!   the rotation is ONNX's `RotaryEmbedding`'s, `attention.rs`);
//! - `DynamicQuantizeMatMul` (the matmul of onnxruntime's dynamic quantizer: `quant.rs`);
//! - `DynamicQuantizeLSTM` (an LSTM with int8 / uint8 weights whose GEMMs quantize their float
//!   operand dynamically, as onnxruntime's kernel does; `rnn.rs`).
//!
//! Outputs that only training or cached decoding read (statistics, `present` states) are not
//! computed: a model that uses them is refused, naming the output.

use super::*;

/// The `com.microsoft` operators the importer converts.
pub const MICROSOFT_OPS: &[&str] = &[
    "Attention",
    "BiasGelu",
    "DynamicQuantizeLSTM",
    "DynamicQuantizeMatMul",
    "FastGelu",
    "FusedMatMul",
    "Gelu",
    "MultiHeadAttention",
    "QLinearAdd",
    "QLinearConcat",
    "QLinearMul",
    "QLinearSigmoid",
    "QuickGelu",
    "RotaryEmbedding",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
];

/// The `com.microsoft` node of `cx` into passel calls.
pub(super) fn convert_op(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let op = cx.node.op_type().to_string();
    match op.as_str() {
        "Gelu" => {
            let x = cx.input(0)?;
            one(gelu(cx, &x, "none")?)
        }
        "BiasGelu" => {
            let (a, b) = (cx.input(0)?, cx.input(1)?);
            let s = cx.call_tmp("add", &[&a, &b], Attrs::new())?;
            one(gelu(cx, &s, "none")?)
        }
        "FastGelu" => {
            let x = cx.input(0)?;
            let x = match cx.opt(1) {
                Some(b) => cx.call_tmp("add", &[&x, &b], Attrs::new())?,
                None => x,
            };
            one(gelu(cx, &x, "tanh")?)
        }
        "QuickGelu" => {
            let x = cx.input(0)?;
            let alpha = cx.float("alpha", 1.702)?;
            let dtype = x.ty().dtype;
            let ax = cx.call_tmp("multiply", &[&x, &Cx::scalar(dtype, alpha)], Attrs::new())?;
            let s = cx.call_tmp("sigmoid", &[&ax], Attrs::new())?;
            one(cx.call("multiply", &[&x, &s], Attrs::new())?)
        }
        "SkipLayerNormalization" => skip_norm(cx, false),
        "SkipSimplifiedLayerNormalization" => skip_norm(cx, true),
        "FusedMatMul" => fused_matmul(cx),
        "DynamicQuantizeLSTM" => super::rnn::dynamic_quantize_lstm(cx),
        "DynamicQuantizeMatMul" => super::quant::dynamic_quantize_matmul(cx),
        "Attention" => attention(cx),
        "MultiHeadAttention" => multi_head_attention(cx),
        "RotaryEmbedding" => rotary_embedding(cx),
        "QLinearAdd" | "QLinearMul" | "QLinearSigmoid" | "QLinearConcat" => super::quant::qlinear_contrib(cx, &op),
        _ => Err(format!("passel has no converter for com.microsoft operator `{op}`").into()),
    }
}

/// `com.microsoft::RotaryEmbedding` as onnxruntime's contrib-op documentation and CPU kernel
/// define it. Inputs: `input` (3-D `[B, S, hidden]` or 4-D `[B, N, S, H]`), `position_ids`
/// (int64; one element: the position of the first token, the others following, or `[B, S]`),
/// `cos_cache` and `sin_cache` (`[max_sequence, rotary_dim / 2]`). Attributes: `interleaved`
/// (0 or 1), `rotary_embedding_dim` (0: the whole head; otherwise `num_heads` must be given),
/// `num_heads` (0: derived from the caches for a 3-D input), `scale` and `is_packed_batching`.
///
/// `scale` only scales the caches onnxruntime would rebuild for a sequence longer than
/// `max_sequence`, which its kernel refuses, so it changes no output: it is read and checked to
/// be a float, nothing more. Packed batching (`is_packed_batching` = 1) is refused.
fn rotary_embedding(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, pos, cos, sin) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.input(3)?);
    let interleaved = match cx.int("interleaved", 0)? {
        0 => false,
        1 => true,
        v => {
            return Err(NodeError::UnsupportedValue {
                attr: "interleaved".into(),
                value: v.to_string(),
                why: "it is 0 or 1".into(),
            })
        }
    };
    let non_negative = |cx: &mut Cx<'_>, key: &str| -> R<u64> {
        let v = cx.int(key, 0)?;
        u64::try_from(v).map_err(|_| NodeError::from(format!("attribute `{key}` = {v} must not be negative")))
    };
    let rd = non_negative(cx, "rotary_embedding_dim")?;
    let heads = non_negative(cx, "num_heads")?;
    cx.float("scale", 1.0)?;
    cx.int_must("is_packed_batching", |v| v == 0, "packed batching is not supported")?;
    if rd > 0 && heads == 0 {
        return Err("attribute `num_heads` must be given when `rotary_embedding_dim` is".into());
    }
    let (shape, dtype) = (x.shape(), x.ty().dtype);
    if !dtype.is_float() {
        return Err(format!("the input must be a float tensor, got {dtype}").into());
    }
    let (cs, ss) = (cos.shape(), sin.shape());
    if cs.len() != 2 || cs != ss || cos.ty().dtype != dtype || sin.ty().dtype != dtype {
        return Err(format!(
            "cos_cache {:?} and sin_cache {:?} must be [max_sequence, rotary_dim / 2] tensors of the input's {dtype}",
            cos.ty(),
            sin.ty()
        )
        .into());
    }
    let (b, s, hidden) = match shape[..] {
        [b, s, hidden] => (b, s, hidden),
        [b, n, s, h] => (b, s, n * h),
        _ => return Err(format!("the input must be 3-D or 4-D, got shape {shape:?}").into()),
    };
    // onnxruntime's head size: twice the cache width when the whole head rotates, else the
    // hidden size over `num_heads`.
    let head = if rd == 0 { 2 * cs[1] } else { hidden / heads };
    let heads = match shape[..] {
        [_, n, _, h] if h == head => n,
        [_, _, _, h] => {
            return Err(format!("the input's head size is {h}, but the caches and attributes give {head}").into())
        }
        _ if head > 0 && hidden.is_multiple_of(head) && (heads == 0 || heads * head == hidden) => hidden / head,
        _ => {
            return Err(format!(
                "the hidden size {hidden} is not num_heads = {heads} heads of size {head} (twice the caches' {} \
                 columns when rotary_embedding_dim is 0)",
                cs[1]
            )
            .into())
        }
    };
    let rd = if rd == 0 { head } else { rd };
    if rd == 0 || rd > head || !rd.is_multiple_of(2) || cs[1] != rd / 2 {
        return Err(format!(
            "rotary_embedding_dim {rd} must be even, at most the head size {head}, and twice the caches' {} columns",
            cs[1]
        )
        .into());
    }
    if s > cs[0] {
        // onnxruntime would have to extend the caches (with `scale`), which it does not do.
        return Err(format!("the sequence of {s} is longer than the caches' {} rows", cs[0]).into());
    }
    if pos.ty().dtype != DType::I64 {
        return Err(format!("position_ids must be int64, got {}", pos.ty().dtype).into());
    }
    // The positions as indices into the caches' rows: `[S]` (one start position plus the
    // sequence index, the same for every batch) or `[B, S]`.
    let positions = match pos.shape()[..] {
        [] | [1] => {
            let start = cx.reshape(&pos, &[1], true)?;
            let steps = i64_const((0..s as i64).collect())?;
            cx.call_tmp("add", &[&start, &steps], Attrs::new())?
        }
        [pb, ps] if pb == b && ps == s => pos,
        _ => return Err(format!("position_ids has shape {:?}; expected one element or [{b}, {s}]", pos.shape()).into()),
    };
    if let Some(c) = positions.as_const() {
        let rows = cs[0] as i64;
        if let Some(p) = tensor_i64s(&c.materialize()?).and_then(|v| v.into_iter().find(|&p| p < 0 || p >= rows)) {
            return Err(format!("position {p} is outside the caches' {rows} rows").into());
        }
    }
    let lookup = |cx: &mut Cx<'_>, c: &Val| -> R<Val> {
        let rows = cx.call_tmp("take", &[c, &positions], Attrs::new().with("axis", AttrValue::Int(0)))?;
        let lead = if positions.rank() == 1 { 1 } else { b };
        cx.reshape(&rows, &[lead, s, rd / 2], true)
    };
    let (cos, sin) = (lookup(cx, &cos)?, lookup(cx, &sin)?);
    let x4 = super::attention::to_bsnh(cx, &x, heads)?;
    let y = super::attention::rotate(cx, &x4, (cos, sin), rd, interleaved)?;
    one(super::attention::from_bsnh(cx, &y, &shape)?)
}

/// onnxruntime's `SimplifiedLayerNormalization` (RMSNorm over the last axis; output 1, the
/// inverse standard deviation, is not computed).
pub(super) fn simplified_layer_norm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let eps = cx.float("epsilon", 1e-5)?;
    cx.int_must("stash_type", |v| v == 1, "only float32 statistics")?;
    let axis = norm_axis(cx.int("axis", -1)?, x.rank())?;
    if axis + 1 != x.rank() {
        return Err(format!("normalizes from axis {axis}; passel normalizes the last axis only").into());
    }
    one(rms_norm(cx, &x, &scale, eps, false)?)
}

fn gelu(cx: &mut Cx<'_>, x: &Val, approximate: &str) -> R<Val> {
    cx.call("gelu", &[x], Attrs::new().with("approximate", AttrValue::Str(approximate.into())))
}

/// Checks that `v` is a vector covering the last dimension `n` of the normalized input.
fn check_vector(v: &Val, n: u64, what: &str) -> R<()> {
    if v.shape() != [n] {
        return Err(format!("{what} has shape {:?}, expected [{n}] (the last dimension)", v.shape()).into());
    }
    Ok(())
}

/// RMSNorm over the last axis: `x / sqrt(mean(x²) + eps) · scale`.
fn rms_norm(cx: &mut Cx<'_>, x: &Val, scale: &Val, eps: f64, tmp: bool) -> R<Val> {
    let n = *x.shape().last().ok_or_else(|| "the input is a scalar".to_string())?;
    check_vector(scale, n, "the scale")?;
    let dtype = x.ty().dtype;
    let sq = cx.call_tmp("multiply", &[x, x], Attrs::new())?;
    let axis = AttrValue::Ints(vec![-1].into());
    let ms = cx.call_tmp("mean", &[&sq], Attrs::new().with("axis", axis).with("keepdims", AttrValue::Bool(true)))?;
    let e = cx.call_tmp("add", &[&ms, &Cx::scalar(dtype, eps)], Attrs::new())?;
    let r = cx.call_tmp("sqrt", &[&e], Attrs::new())?;
    let y = cx.call_tmp("divide", &[x, &r], Attrs::new())?;
    if tmp {
        cx.call_tmp("multiply", &[&y, scale], Attrs::new())
    } else {
        cx.call("multiply", &[&y, scale], Attrs::new())
    }
}

/// `SkipLayerNormalization` / `SkipSimplifiedLayerNormalization`: outputs (normalized, -,
/// -, input + skip + bias).
fn skip_norm(cx: &mut Cx<'_>, simplified: bool) -> R<Vec<Option<Val>>> {
    let (x, skip, gamma) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (beta, bias) = if simplified { (None, cx.opt(3)) } else { (cx.opt(3), cx.opt(4)) };
    let eps = cx.float("epsilon", 1e-12)?;
    let shape = x.shape();
    let n = *shape.last().ok_or_else(|| "input 0 is a scalar".to_string())?;
    if x.rank() < 2 {
        return Err(format!("input 0 has shape {shape:?}; it must have rank 2 or 3").into());
    }
    check_vector(&gamma, n, "gamma")?;
    let mut sum = cx.call_tmp("add", &[&x, &skip], Attrs::new())?;
    if sum.shape() != shape {
        return Err(
            format!("skip has shape {:?}, which does not broadcast to the input {shape:?}", skip.shape()).into()
        );
    }
    if let Some(b) = &bias {
        check_vector(b, n, "bias")?;
        sum = cx.call_tmp("add", &[&sum, b], Attrs::new())?;
    }
    let y = if simplified {
        rms_norm(cx, &sum, &gamma, eps, false)?
    } else {
        let beta = match beta {
            Some(b) => {
                check_vector(&b, n, "beta")?;
                b
            }
            None => Val::Const(Arc::new(Constant::Fill {
                ty: TensorType { shape: vec![n].into(), dtype: x.ty().dtype },
                fill: Fill::Full(0.0),
            })),
        };
        let attrs = Attrs::new().with("axis", AttrValue::Int(-1)).with("epsilon", AttrValue::Float(eps));
        cx.call("layer_norm", &[&sum, &gamma, &beta], attrs)?
    };
    Ok(vec![Some(y), None, None, Some(sum)])
}

/// Transposes the last two axes of `v`.
fn swap_last(cx: &mut Cx<'_>, v: &Val) -> R<Val> {
    let r = v.rank();
    let mut axes: Vec<i64> = (0..r as i64).collect();
    axes.swap(r - 2, r - 1);
    cx.call_tmp("transpose", &[v], Attrs::new().with("axes", ints_i(&axes)))
}

fn fused_matmul(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let alpha = cx.float("alpha", 1.0)?;
    let (ta, tb) = (cx.int("transA", 0)? != 0, cx.int("transB", 0)? != 0);
    cx.int_must("transBatchA", |v| v == 0, "batch transposes are not supported")?;
    cx.int_must("transBatchB", |v| v == 0, "batch transposes are not supported")?;
    for (v, what, t) in [(&a, "A", ta), (&b, "B", tb)] {
        if t && v.rank() < 2 {
            return Err(format!("trans{what} needs {what} of rank 2 or more, got rank {}", v.rank()).into());
        }
    }
    let a = if ta { swap_last(cx, &a)? } else { a };
    let b = if tb { swap_last(cx, &b)? } else { b };
    if alpha == 1.0 {
        return one(cx.call("matmul", &[&a, &b], Attrs::new())?);
    }
    let y = cx.call_tmp("matmul", &[&a, &b], Attrs::new())?;
    let dtype = y.ty().dtype;
    one(cx.call("multiply", &[&y, &Cx::scalar(dtype, alpha)], Attrs::new())?)
}

/// The attention options both attention operators take.
struct AttnOptions {
    heads: u64,
    unidirectional: bool,
    mask_filter_value: f64,
    scale: Option<f64>,
}

fn attn_options(cx: &mut Cx<'_>) -> R<AttnOptions> {
    let heads = cx.int_opt("num_heads")?.ok_or_else(|| "attribute `num_heads` is required".to_string())?;
    if heads < 1 {
        return Err(format!("attribute `num_heads` = {heads} must be positive").into());
    }
    let unidirectional = cx.int("unidirectional", 0)? != 0;
    let mask_filter_value = cx.float("mask_filter_value", -10000.0)?;
    let scale = cx.float_opt("scale")?.filter(|&s| s != 0.0);
    Ok(AttnOptions { heads: heads as u64, unidirectional, mask_filter_value, scale })
}

/// `[B, S, hidden]` to `[B, heads, S, hidden / heads]` (`[B, heads, hd, S]` when `keys`).
fn split_heads(cx: &mut Cx<'_>, t: &Val, heads: u64, keys: bool, what: &str) -> R<Val> {
    let s = t.shape();
    if s.len() != 3 || !s[2].is_multiple_of(heads) {
        return Err(format!(
            "{what} has shape {s:?}: expected [batch, sequence, hidden] with hidden divisible by num_heads = {heads}"
        )
        .into());
    }
    let r = cx.reshape(t, &[s[0], s[1], heads, s[2] / heads], true)?;
    let axes: &[i64] = if keys { &[0, 2, 3, 1] } else { &[0, 2, 1, 3] };
    cx.call_tmp("transpose", &[&r], Attrs::new().with("axes", ints_i(axes)))
}

/// An f32 constant of `shape` from `values`.
fn const_f32(shape: &[u64], values: &[f64]) -> R<Val> {
    Ok(Val::Const(Arc::new(Constant::Dense(Tensor::from_f64s(shape, DType::F32, values).map_err(|e| e.to_string())?))))
}

/// The additive mask for `mask` (ORT's `mask_index` / `key_padding_mask`) over keys of length
/// `t`: 1-D valid lengths `[B]`, 2-D `[B, T]` or 3-D `[B, S, T]` 0/1 masks; broadcastable to
/// the scores `[B, heads, S, T]`.
fn padding_mask(cx: &mut Cx<'_>, mask: &Val, (b, s, t): (u64, u64, u64), filter: f64) -> R<Val> {
    let dtype = DType::F32;
    let ms = mask.shape();
    let keep = match ms.len() {
        1 if ms[0] == b => {
            // Right padding: key j of batch i is kept when j < lengths[i].
            let len = cx.call_tmp("cast", &[mask], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?;
            let len = cx.reshape(&len, &[b, 1], true)?;
            let pos: Vec<f64> = (0..t).map(|j| j as f64).collect();
            let pos = Val::Const(Arc::new(Constant::Dense(
                Tensor::from_f64s(&[1, t], DType::I64, &pos).map_err(|e| e.to_string())?,
            )));
            let keep = cx.call_tmp("less", &[&pos, &len], Attrs::new())?;
            cx.reshape(&keep, &[b, 1, 1, t], true)?
        }
        2 if ms == [b, t] => {
            let zero = Cx::scalar(mask.ty().dtype, 0.0);
            let keep = cx.call_tmp("not_equal", &[mask, &zero], Attrs::new())?;
            cx.reshape(&keep, &[b, 1, 1, t], true)?
        }
        3 if ms == [b, s, t] => {
            let zero = Cx::scalar(mask.ty().dtype, 0.0);
            let keep = cx.call_tmp("not_equal", &[mask, &zero], Attrs::new())?;
            cx.reshape(&keep, &[b, 1, s, t], true)?
        }
        _ => {
            return Err(format!(
            "the mask has shape {ms:?}; passel takes valid lengths [{b}], or 0/1 masks [{b}, {t}] or [{b}, {s}, {t}]"
        )
            .into())
        }
    };
    cx.call_tmp("where", &[&keep, &Cx::scalar(dtype, 0.0), &Cx::scalar(dtype, filter)], Attrs::new())
}

/// Scaled dot-product attention of heads `q` `[B, N, S, hd]`, `kt` `[B, N, hd, T]`, `v`
/// `[B, N, T, hv]` with the additive `masks`, merged back to `[B, S, N · hv]`.
fn attend(cx: &mut Cx<'_>, (q, kt, v): (&Val, &Val, &Val), masks: &[Val], o: &AttnOptions) -> R<Val> {
    let (qs, vs) = (q.shape(), v.shape());
    let (b, n, s, hd, hv) = (qs[0], qs[1], qs[2], qs[3], vs[3]);
    let t = kt.shape()[3];
    let scale = o.scale.unwrap_or(1.0 / (hd as f64).sqrt());
    let scores = cx.call_tmp("matmul", &[q, kt], Attrs::new())?;
    let mut scores = cx.call_tmp("multiply", &[&scores, &Cx::scalar(DType::F32, scale)], Attrs::new())?;
    for m in masks {
        scores = cx.call_tmp("add", &[&scores, m], Attrs::new())?;
    }
    if o.unidirectional {
        // Query i attends to keys j <= i (+ T - S when the keys are longer).
        let past = t.saturating_sub(s);
        let causal: Vec<f64> =
            (0..s).flat_map(|i| (0..t).map(move |j| if j > i + past { o.mask_filter_value } else { 0.0 })).collect();
        let causal = const_f32(&[s, t], &causal)?;
        scores = cx.call_tmp("add", &[&scores, &causal], Attrs::new())?;
    }
    let probs = cx.call_tmp("softmax", &[&scores], Attrs::new().with("axis", AttrValue::Int(-1)))?;
    let ctx = cx.call_tmp("matmul", &[&probs, v], Attrs::new())?;
    let ctx = cx.call_tmp("transpose", &[&ctx], Attrs::new().with("axes", ints_i(&[0, 2, 1, 3])))?;
    cx.reshape(&ctx, &[b, s, n * hv], false)
}

fn check_f32(v: &Val, what: &str) -> R<()> {
    if v.ty().dtype != DType::F32 {
        return Err(format!("{what} is {}; passel's attention takes float32", v.ty().dtype.name()).into());
    }
    Ok(())
}

fn attention(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, bias, mask) = (cx.input(0)?, cx.input(1)?, cx.opt(2), cx.opt(3));
    for (i, what) in [(4, "past"), (6, "past_sequence_length")] {
        if cx.opt(i).is_some() {
            return Err(format!("input {i} ({what}) is given; passel's Attention takes no past state").into());
        }
    }
    let attn_bias = cx.opt(5);
    let o = attn_options(cx)?;
    cx.int_must("do_rotary", |v| v == 0, "rotary embedding inside Attention is not supported")?;
    cx.int_must("past_present_share_buffer", |v| v == 0, "no past state")?;
    let _ = cx.int("rotary_embedding_dim", 0)?;
    check_f32(&x, "input 0")?;
    let (xs, ws) = (x.shape(), w.shape());
    if xs.len() != 3 || ws.len() != 2 || ws[0] != xs[2] {
        return Err(format!(
            "input {xs:?} and weights {ws:?}: expected [batch, sequence, hidden] and [hidden, 3 · hidden]"
        )
        .into());
    }
    let sizes: Vec<u64> = match cx.ints_opt("qkv_hidden_sizes")? {
        Some(v) if v.len() == 3 && v.iter().all(|&d| d > 0) => v.iter().map(|&d| d as u64).collect(),
        Some(v) => return Err(format!("attribute `qkv_hidden_sizes` = {v:?} must be three positive sizes").into()),
        None if ws[1].is_multiple_of(3) => vec![ws[1] / 3; 3],
        None => return Err(format!("weights {ws:?}: the packed width is not divisible by 3").into()),
    };
    if sizes.iter().sum::<u64>() != ws[1] || sizes[0] != sizes[1] {
        return Err(format!(
            "qkv hidden sizes {sizes:?} must add up to the weights' width {} with Q and K equal",
            ws[1]
        )
        .into());
    }
    let mut proj = cx.call_tmp("matmul", &[&x, &w], Attrs::new())?;
    if let Some(b) = &bias {
        check_vector(b, ws[1], "bias")?;
        proj = cx.call_tmp("add", &[&proj, b], Attrs::new())?;
    }
    let mut parts = Vec::with_capacity(3);
    let mut start = 0;
    for &len in &sizes {
        let attrs = Attrs::new()
            .with("begin", ints_i(&[start as i64]))
            .with("end", ints_i(&[(start + len) as i64]))
            .with("axes", ints_i(&[2]));
        parts.push(cx.call_tmp("strided_slice", &[&proj], attrs)?);
        start += len;
    }
    let q = split_heads(cx, &parts[0], o.heads, false, "Q")?;
    let kt = split_heads(cx, &parts[1], o.heads, true, "K")?;
    let v = split_heads(cx, &parts[2], o.heads, false, "V")?;
    let (b, s) = (xs[0], xs[1]);
    let mut masks = Vec::new();
    if let Some(m) = &mask {
        masks.push(padding_mask(cx, m, (b, s, s), o.mask_filter_value)?);
    }
    masks.extend(attn_bias);
    one(attend(cx, (&q, &kt, &v), &masks, &o)?)
}

fn multi_head_attention(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (bias, kpm, attn_bias) = (cx.opt(3), cx.opt(4), cx.opt(5));
    for (i, what) in [(6, "past_key"), (7, "past_value"), (8, "past_sequence_length"), (9, "cache_indirection")] {
        if cx.opt(i).is_some() {
            return Err(format!("input {i} ({what}) is given; passel's MultiHeadAttention takes no past state").into());
        }
    }
    let o = attn_options(cx)?;
    for (t, what) in [(&q, "query"), (&k, "key"), (&v, "value")] {
        check_f32(t, what)?;
        if t.rank() != 3 {
            return Err(format!(
                "{what} has shape {:?}; passel takes 3-D [batch, sequence, hidden] query, key and value",
                t.shape()
            )
            .into());
        }
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs[0] != ks[0] || ks[0] != vs[0] || ks[1] != vs[1] || qs[2] != ks[2] {
        return Err(format!("query {qs:?}, key {ks:?} and value {vs:?} do not agree").into());
    }
    let (q, k, v) = match &bias {
        None => (q, k, v),
        Some(b) => {
            let width = qs[2] + ks[2] + vs[2];
            check_vector(b, width, "bias")?;
            let mut out = Vec::new();
            let mut start = 0;
            for (t, len) in [(&q, qs[2]), (&k, ks[2]), (&v, vs[2])] {
                let attrs = Attrs::new()
                    .with("begin", ints_i(&[start as i64]))
                    .with("end", ints_i(&[(start + len) as i64]))
                    .with("axes", ints_i(&[0]));
                let part = cx.call_tmp("strided_slice", &[b], attrs)?;
                out.push(cx.call_tmp("add", &[t, &part], Attrs::new())?);
                start += len;
            }
            let [q, k, v]: [Val; 3] = out.try_into().map_err(|_| "the bias splits into three parts".to_string())?;
            (q, k, v)
        }
    };
    let qh = split_heads(cx, &q, o.heads, false, "query")?;
    let kt = split_heads(cx, &k, o.heads, true, "key")?;
    let vh = split_heads(cx, &v, o.heads, false, "value")?;
    let mut masks = Vec::new();
    if let Some(m) = &kpm {
        masks.push(padding_mask(cx, m, (qs[0], qs[1], ks[1]), o.mask_filter_value)?);
    }
    masks.extend(attn_bias);
    one(attend(cx, (&qh, &kt, &vh), &masks, &o)?)
}
