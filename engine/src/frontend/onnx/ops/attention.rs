//! ONNX `Attention` (opsets 23–25), decomposed as onnx's reference computes it:
//!
//! 1. 3-D `Q`, `K`, `V` `[B, S, H·D]` are split into heads `[B, H, S, D]`;
//! 2. `past_key` / `past_value` are joined in front of `K` / `V` along the sequence axis
//!    (the `present_key` / `present_value` outputs);
//! 3. an additive bias `[…, Sq, Skv]` of 0 and -inf: the mask (a bool mask selects 0 / -inf,
//!    a float mask is added; one shorter than `Skv` is padded with -inf / false), the causal
//!    frontier `j <= i + offset` (offset: the past length, `nonpad_kv_seqlen[b] - Sq`, or 0),
//!    the sliding window (`left_window_size` / `right_window_size`, same offset) and the
//!    padding of `nonpad_kv_seqlen`. Parts that depend only on shapes and attributes are
//!    constants made here; the rest are calls;
//! 4. grouped-query attention repeats each K/V head `Hq / Hkv` times (interleaved);
//! 5. `softmax((Q·√s)(K·√s)ᵀ softcapped + bias)`, with rows whose bias is all -inf set to 0,
//!    times `V`; `qk_matmul_output` is the product (softcapped), the biased product, or the
//!    probabilities, as `qk_matmul_output_mode` 0–1, 2 or 3 says.
//!
//! `softmax_precision` is read and not needed: the softmax kernel computes in f32 for every
//! float dtype.

use super::*;

/// A constant `[rows, cols]` of 0 where `allowed(i, j)` and -inf elsewhere, in `dtype`.
fn bias_const(dtype: DType, rows: u64, cols: u64, allowed: impl Fn(i64, i64) -> bool) -> R<Val> {
    let mut v = Vec::with_capacity((rows * cols) as usize);
    for i in 0..rows as i64 {
        for j in 0..cols as i64 {
            v.push(if allowed(i, j) { 0.0 } else { f64::NEG_INFINITY });
        }
    }
    let t = Tensor::from_f64s(&[rows, cols], dtype, &v).map_err(|e| e.to_string())?;
    Ok(Val::Const(Arc::new(Constant::Dense(t))))
}

/// A constant i64 `[rows, cols]` of `f(i, j)`.
fn index_const(rows: u64, cols: u64, f: impl Fn(i64, i64) -> i64) -> R<Val> {
    let mut v = Vec::with_capacity((rows * cols) as usize);
    for i in 0..rows as i64 {
        for j in 0..cols as i64 {
            v.push(f(i, j) as f64);
        }
    }
    let t = Tensor::from_f64s(&[rows, cols], DType::I64, &v).map_err(|e| e.to_string())?;
    Ok(Val::Const(Arc::new(Constant::Dense(t))))
}

/// `[B, S, H·D]` as `[B, H, S, D]`.
fn heads(cx: &mut Cx<'_>, t: &Val, h: u64, what: &str) -> R<Val> {
    let s = t.shape();
    if h == 0 || !s[2].is_multiple_of(h) {
        return Err(format!("{what}'s hidden size {} is not a multiple of its {h} heads", s[2]).into());
    }
    let r = cx.reshape(t, &[s[0], s[1], h, s[2] / h], true)?;
    cx.call_tmp("transpose", &[&r], Attrs::new().with("axes", ints_i(&[0, 2, 1, 3])))
}

/// Adds `b` to the bias so far.
fn add_bias(cx: &mut Cx<'_>, bias: Option<Val>, b: Val) -> R<Option<Val>> {
    Ok(Some(match bias {
        None => b,
        Some(a) => cx.call_tmp("add", &[&a, &b], Attrs::new())?,
    }))
}

pub(super) fn attention(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (mask, past_k, past_v, nonpad) = (cx.opt(3), cx.opt(4), cx.opt(5), cx.opt(6));
    let outer = q.ty().dtype;
    if !outer.is_float() || k.ty().dtype != outer || v.ty().dtype != outer {
        return Err(format!(
            "Q, K and V must have one float dtype, got {}, {} and {}",
            outer.name(),
            k.ty().dtype.name(),
            v.ty().dtype.name()
        )
        .into());
    }
    // f16 attention computes in f32 and rounds its outputs once (onnx's reference rounds
    // fewer intermediates than a chain of f16 operators would).
    let dtype = if outer == DType::F16 { DType::F32 } else { outer };
    let widen = |cx: &mut Cx<'_>, v: Option<Val>| -> R<Option<Val>> {
        match v {
            Some(v) if v.ty().dtype == DType::F16 && dtype == DType::F32 => {
                Ok(Some(cx.call_tmp("cast", &[&v], Attrs::new().with("dtype", AttrValue::DType(DType::F32)))?))
            }
            v => Ok(v),
        }
    };
    let (q, k, v) =
        (widen(cx, Some(q))?.ok_or("no Q")?, widen(cx, Some(k))?.ok_or("no K")?, widen(cx, Some(v))?.ok_or("no V")?);
    let (mask, past_k, past_v) = (widen(cx, mask)?, widen(cx, past_k)?, widen(cx, past_v)?);
    let causal = cx.int("is_causal", 0)? != 0;
    let q_heads = cx.int_opt("q_num_heads")?;
    let kv_heads = cx.int_opt("kv_num_heads")?;
    let mode = cx.int("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(format!("attribute `qk_matmul_output_mode` must be 0 to 3, got {mode}").into());
    }
    let scale = cx.float_opt("scale")?;
    let softcap = cx.float("softcap", 0.0)?;
    cx.int_opt("softmax_precision")?;
    let left = cx.int("left_window_size", -1)?;
    let right = cx.int("right_window_size", -1)?;
    if left < -1 || right < -1 {
        return Err(format!("window sizes must be -1 or nonnegative, got {left} and {right}").into());
    }
    if past_k.is_some() != past_v.is_some() {
        return Err("past_key and past_value must be given together".into());
    }
    if nonpad.is_some() && past_k.is_some() {
        return Err("nonpad_kv_seqlen cannot be combined with past_key / past_value".into());
    }
    let three_d = match (q.rank(), k.rank(), v.rank()) {
        (3, 3, 3) => true,
        (4, 4, 4) => false,
        (a, b, c) => return Err(format!("Q, K and V must all be 3-D or all 4-D, got ranks {a}, {b} and {c}").into()),
    };
    let (q, k, v) = if three_d {
        let (hq, hkv) = match (q_heads, kv_heads) {
            (Some(a), Some(b)) if a > 0 && b > 0 => (a as u64, b as u64),
            _ => return Err("3-D inputs need positive `q_num_heads` and `kv_num_heads`".into()),
        };
        (heads(cx, &q, hq, "Q")?, heads(cx, &k, hkv, "K")?, heads(cx, &v, hkv, "V")?)
    } else {
        (q, k, v)
    };
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] || vs[1] != ks[1] || vs[2] != ks[2] {
        return Err(format!("Q {qs:?}, K {ks:?} and V {vs:?} (as [B, H, S, D]) do not fit together").into());
    }
    let join = |cx: &mut Cx<'_>, past: Option<Val>, now: Val| -> R<Val> {
        match past {
            Some(p) => cx.call_tmp("concatenate", &[&p, &now], Attrs::new().with("axis", AttrValue::Int(2))),
            None => Ok(now),
        }
    };
    let present_k = join(cx, past_k.clone(), k)?;
    let present_v = join(cx, past_v, v)?;
    let (b, hq, sq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let hkv = present_k.shape()[1];
    let skv = present_k.shape()[2];
    let past_len = past_k.as_ref().map_or(0, |p| p.shape().get(2).copied().unwrap_or(0)) as i64;
    if sq.saturating_mul(skv) > cx.em_fold_limit() {
        return Err(format!("a {sq}x{skv} attention bias is too large to build at import").into());
    }
    let zero = Cx::scalar(dtype, 0.0);
    let neg_inf = Cx::scalar(dtype, f64::NEG_INFINITY);

    // The mask, padded to Skv.
    let mask = match mask {
        None => None,
        Some(m) => {
            let ms = m.shape();
            let last = *ms.last().ok_or("attn_mask must have rank 1 or more")?;
            let m = if last < skv {
                let mut pads = vec![0i64; 2 * ms.len()];
                pads[2 * ms.len() - 1] = (skv - last) as i64;
                let fill = if m.ty().dtype == DType::Bool { 0.0 } else { f64::NEG_INFINITY };
                let attrs = Attrs::new().with("pad_width", ints_i(&pads)).with("pad_value", AttrValue::Float(fill));
                cx.call_tmp("pad", &[&m], attrs)?
            } else {
                m
            };
            Some(if m.ty().dtype == DType::Bool {
                cx.call_tmp("where", &[&m, &zero, &neg_inf], Attrs::new())?
            } else {
                m
            })
        }
    };
    // Per-batch offset `nonpad_kv_seqlen[b]` as i64 `[B, 1, 1, 1]`.
    let nonpad = match nonpad {
        None => None,
        Some(n) => {
            let n = if n.ty().dtype == DType::I64 {
                n
            } else {
                cx.call_tmp("cast", &[&n], Attrs::new().with("dtype", AttrValue::DType(DType::I64)))?
            };
            if product(&n.shape())? != b {
                return Err(format!(
                    "nonpad_kv_seqlen must hold one length per batch ({b}), got shape {:?}",
                    n.shape()
                )
                .into());
            }
            Some(cx.reshape(&n, &[b, 1, 1, 1], true)?)
        }
    };
    // A bias from `allowed(i, j, offset)`: a constant for a static offset, else calls on
    // `value(i, j) <= nonpad[b]` (the caller folds the offset's `- Sq` into `value`).
    let mut bias = mask;
    let frontier =
        |cx: &mut Cx<'_>, allowed: &dyn Fn(i64, i64, i64) -> bool, value: &dyn Fn(i64, i64) -> i64| -> R<Val> {
            match &nonpad {
                None => bias_const(dtype, sq, skv, |i, j| allowed(i, j, past_len)),
                Some(n) => {
                    let at = index_const(sq, skv, value)?;
                    let ok = cx.call_tmp("less_equal", &[&at, n], Attrs::new())?;
                    cx.call_tmp("where", &[&ok, &zero, &neg_inf], Attrs::new())
                }
            }
        };
    let sq_i = sq as i64;
    if causal {
        // j <= i + offset, with offset = nonpad - Sq: j - i + Sq <= nonpad.
        let c = frontier(cx, &|i, j, off| j <= i + off, &|i, j| j - i + sq_i)?;
        bias = add_bias(cx, bias, c)?;
    }
    if left >= 0 || right >= 0 {
        // diff = i + offset - j; left: diff <= left, right: -diff <= right. With nonpad both
        // are bounds on nonpad: left: i - j - Sq + nonpad <= left <=> nonpad <= left - i + j + Sq,
        // which `frontier`'s `<=` cannot say directly, so each side is its own comparison.
        let in_window = |i: i64, j: i64, off: i64| {
            let diff = i + off - j;
            (left < 0 || diff <= left) && (right < 0 || -diff <= right)
        };
        match &nonpad {
            None => {
                let w = bias_const(dtype, sq, skv, |i, j| in_window(i, j, past_len))?;
                bias = add_bias(cx, bias, w)?;
            }
            Some(n) => {
                if left >= 0 {
                    // nonpad <= left - i + j + Sq
                    let at = index_const(sq, skv, |i, j| left - i + j + sq_i)?;
                    let ok = cx.call_tmp("less_equal", &[n, &at], Attrs::new())?;
                    let w = cx.call_tmp("where", &[&ok, &zero, &neg_inf], Attrs::new())?;
                    bias = add_bias(cx, bias, w)?;
                }
                if right >= 0 {
                    // j - i - nonpad + Sq <= right <=> j - i + Sq - right <= nonpad
                    let at = index_const(sq, skv, |i, j| j - i + sq_i - right)?;
                    let ok = cx.call_tmp("less_equal", &[&at, n], Attrs::new())?;
                    let w = cx.call_tmp("where", &[&ok, &zero, &neg_inf], Attrs::new())?;
                    bias = add_bias(cx, bias, w)?;
                }
            }
        }
    }
    if let Some(n) = &nonpad {
        // Keys at or past nonpad[b] are padding: j < nonpad <=> j + 1 <= nonpad.
        let at = index_const(1, skv, |_, j| j + 1)?;
        let ok = cx.call_tmp("less_equal", &[&at, n], Attrs::new())?;
        let p = cx.call_tmp("where", &[&ok, &zero, &neg_inf], Attrs::new())?;
        bias = add_bias(cx, bias, p)?;
    }

    // Grouped-query attention: each K/V head repeated Hq / Hkv times, interleaved.
    let repeat = |cx: &mut Cx<'_>, t: &Val| -> R<Val> {
        if hq == hkv || hkv == 0 || !hq.is_multiple_of(hkv) {
            return Ok(t.clone());
        }
        let s = t.shape();
        let r = hq / hkv;
        let t5 = cx.reshape(t, &[s[0], s[1], 1, s[2], s[3]], true)?;
        let wide =
            cx.call_tmp("broadcast_to", &[&t5], Attrs::new().with("shape", ints(&[s[0], s[1], r, s[2], s[3]])))?;
        cx.reshape(&wide, &[s[0], hq, s[2], s[3]], true)
    };
    let kr = repeat(cx, &present_k)?;
    let vr = repeat(cx, &present_v)?;
    if kr.shape()[1] != hq {
        return Err(format!("{hq} query heads cannot attend to {hkv} key/value heads").into());
    }
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let s = Cx::scalar(dtype, scale.sqrt());
    let qs_ = cx.call_tmp("multiply", &[&q, &s], Attrs::new())?;
    let ks_ = cx.call_tmp("multiply", &[&kr, &s], Attrs::new())?;
    let kt = cx.call_tmp("transpose", &[&ks_], Attrs::new().with("axes", ints_i(&[0, 1, 3, 2])))?;
    let mut qk = cx.call_tmp("matmul", &[&qs_, &kt], Attrs::new())?;
    if softcap > 0.0 {
        let c = Cx::scalar(dtype, softcap);
        let y = cx.call_tmp("divide", &[&qk, &c], Attrs::new())?;
        let t = cx.call_tmp("tanh", &[&y], Attrs::new())?;
        qk = cx.call_tmp("multiply", &[&t, &c], Attrs::new())?;
    }
    let biased = match &bias {
        Some(bv) => cx.call_tmp("add", &[&qk, bv], Attrs::new())?,
        None => qk.clone(),
    };
    let mut p = cx.call_tmp("softmax", &[&biased], Attrs::new().with("axis", AttrValue::Int(-1)))?;
    if let Some(bv) = &bias {
        // Rows with no attendable key (their bias all -inf) are 0, decided on the bias.
        let attrs = Attrs::new().with("axis", ints_i(&[-1])).with("keepdims", AttrValue::Bool(true));
        let m = cx.call_tmp("max", &[bv], attrs)?;
        let attrs =
            Attrs::new().with("detect_positive", AttrValue::Bool(false)).with("detect_negative", AttrValue::Bool(true));
        let dead = cx.call_tmp("isinf", &[&m], attrs)?;
        p = cx.call_tmp("where", &[&dead, &zero, &p], Attrs::new())?;
    }
    let y = cx.call_tmp("matmul", &[&p, &vr], Attrs::new())?;
    let y = if three_d {
        let t = cx.call_tmp("transpose", &[&y], Attrs::new().with("axes", ints_i(&[0, 2, 1, 3])))?;
        let dv = vs[3];
        cx.reshape(&t, &[b, sq, hq * dv], false)?
    } else {
        y
    };
    let wants_qk = cx.node.outputs().nth(3).is_some_and(|o| !o.is_empty());
    let qk_out = if wants_qk {
        Some(match mode {
            0 | 1 => qk,
            2 => biased,
            _ => p,
        })
    } else {
        None
    };
    let narrow = |cx: &mut Cx<'_>, v: Val| -> R<Val> {
        if outer == dtype {
            return Ok(v);
        }
        cx.call_tmp("cast", &[&v], Attrs::new().with("dtype", AttrValue::DType(outer)))
    };
    let y = narrow(cx, y)?;
    let present_k = narrow(cx, present_k)?;
    let present_v = narrow(cx, present_v)?;
    let qk_out = qk_out.map(|q| narrow(cx, q)).transpose()?;
    Ok(vec![Some(y), Some(present_k), Some(present_v), qk_out])
}

/// ONNX `RotaryEmbedding` (opset 23), as onnx's reference computes it: the input as
/// `[B, S, H, D]` (4-D `[B, H, S, D]` transposed, 3-D split into `num_heads`), its first
/// `rotary_embedding_dim` features rotated by the cos / sin caches (looked up at
/// `position_ids` when given) in halves or interleaved pairs, the rest passed through.
pub(super) fn rotary_embedding(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, cos, sin, positions) = (cx.input(0)?, cx.input(1)?, cx.input(2)?, cx.opt(3));
    let interleaved = cx.int("interleaved", 0)? != 0;
    let rd = cx.int("rotary_embedding_dim", 0)?;
    let heads = cx.int("num_heads", 0)?;
    let shape = x.shape();
    let heads = match shape.len() {
        3 => u64::try_from(heads).ok().filter(|&h| h > 0 && shape[2].is_multiple_of(h)).ok_or_else(|| {
            NodeError::from(format!("a 3-D input needs `num_heads` dividing its hidden size {}, got {heads}", shape[2]))
        })?,
        4 => shape[1],
        r => return Err(format!("the input must be 3-D or 4-D, got rank {r}").into()),
    };
    let x4 = to_bsnh(cx, &x, heads)?;
    let s4 = x4.shape();
    let (b, s, d) = (s4[0], s4[1], s4[3]);
    let rd = if rd == 0 {
        d
    } else {
        u64::try_from(rd).map_err(|_| NodeError::from(format!("negative rotary_embedding_dim {rd}")))?
    };
    if rd > d || !rd.is_multiple_of(2) {
        return Err(format!("rotary_embedding_dim {rd} must be even and at most the head size {d}").into());
    }
    let half = rd / 2;
    let lookup = |cx: &mut Cx<'_>, c: Val| -> R<Val> {
        let c = match &positions {
            Some(p) => cx.call_tmp("take", &[&c, p], Attrs::new().with("axis", AttrValue::Int(0)))?,
            None => c,
        };
        if c.shape() != [b, s, half] {
            return Err(format!("the caches give shape {:?}, not [{b}, {s}, {half}]", c.shape()).into());
        }
        Ok(c)
    };
    let cos = lookup(cx, cos)?;
    let sin = lookup(cx, sin)?;
    let y = rotate(cx, &x4, (cos, sin), rd, interleaved)?;
    one(from_bsnh(cx, &y, &shape)?)
}

/// `x` (3-D `[B, S, N·H]` of `heads` heads, or 4-D `[B, N, S, H]`) as `[B, S, N, H]`.
pub(super) fn to_bsnh(cx: &mut Cx<'_>, x: &Val, heads: u64) -> R<Val> {
    let shape = x.shape();
    if shape.len() == 4 {
        cx.call_tmp("transpose", &[x], Attrs::new().with("axes", ints_i(&[0, 2, 1, 3])))
    } else {
        cx.reshape(x, &[shape[0], shape[1], heads, shape[2] / heads], true)
    }
}

/// `y` (`[B, S, N, H]`) back in the layout of the input of shape `shape` ([`to_bsnh`]).
pub(super) fn from_bsnh(cx: &mut Cx<'_>, y: &Val, shape: &[u64]) -> R<Val> {
    if shape.len() == 3 {
        cx.reshape(y, shape, false)
    } else {
        cx.call("transpose", &[y], Attrs::new().with("axes", ints_i(&[0, 2, 1, 3])))
    }
}

/// The rotation of ONNX's `RotaryEmbedding` and onnxruntime's `com.microsoft` one: `x4` is
/// `[B, S, N, H]` and `cos` / `sin` are `[B or 1, S, rd / 2]` (the caches at each position).
/// The first `rd` features of each head are rotated as pairs `(2i, 2i + 1)` when
/// `interleaved`, else `(i, i + rd / 2)`: `x1·cos − x2·sin`, `x1·sin + x2·cos`; the rest pass
/// through.
pub(super) fn rotate(cx: &mut Cx<'_>, x4: &Val, (cos, sin): (Val, Val), rd: u64, interleaved: bool) -> R<Val> {
    let s4 = x4.shape();
    let (b, s, h, d) = (s4[0], s4[1], s4[2], s4[3]);
    let half = rd / 2;
    let cs = cos.shape();
    let cos = cx.reshape(&cos, &[cs[0], s, 1, half], true)?;
    let sin = cx.reshape(&sin, &[cs[0], s, 1, half], true)?;
    let slice = |cx: &mut Cx<'_>, v: &Val, begin: u64, end: u64, step: i64| -> R<Val> {
        let attrs = Attrs::new()
            .with("begin", ints_i(&[begin as i64]))
            .with("end", ints_i(&[end as i64]))
            .with("strides", ints_i(&[step]))
            .with("axes", ints_i(&[3]));
        cx.call_tmp("strided_slice", &[v], attrs)
    };
    let rot = if rd == d { x4.clone() } else { slice(cx, x4, 0, rd, 1)? };
    let (x1, x2) = if interleaved {
        (slice(cx, &rot, 0, rd, 2)?, slice(cx, &rot, 1, rd, 2)?)
    } else {
        (slice(cx, &rot, 0, half, 1)?, slice(cx, &rot, half, rd, 1)?)
    };
    let mul = |cx: &mut Cx<'_>, a: &Val, b: &Val| cx.call_tmp("multiply", &[a, b], Attrs::new());
    let (c1, s2) = (mul(cx, &cos, &x1)?, mul(cx, &sin, &x2)?);
    let real = cx.call_tmp("subtract", &[&c1, &s2], Attrs::new())?;
    let (s1, c2) = (mul(cx, &sin, &x1)?, mul(cx, &cos, &x2)?);
    let imag = cx.call_tmp("add", &[&s1, &c2], Attrs::new())?;
    let cat = |cx: &mut Cx<'_>, a: &Val, b: &Val| {
        cx.call_tmp("concatenate", &[a, b], Attrs::new().with("axis", AttrValue::Int(-1)))
    };
    let rotated = if interleaved {
        let r5 = cx.reshape(&real, &[b, s, h, half, 1], true)?;
        let i5 = cx.reshape(&imag, &[b, s, h, half, 1], true)?;
        let pairs = cat(cx, &r5, &i5)?;
        cx.reshape(&pairs, &[b, s, h, rd], true)?
    } else {
        cat(cx, &real, &imag)?
    };
    if rd == d {
        Ok(rotated)
    } else {
        let pass = slice(cx, x4, rd, d, 1)?;
        cat(cx, &rotated, &pass)
    }
}
