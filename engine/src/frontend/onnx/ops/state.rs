//! The opset 27 operators of state-space and linear-attention models, which carry a state
//! from one call to the next: `CausalConvWithState` (a depthwise 1-D convolution over the
//! past state and the new input) and `LinearAttention` (a recurrent key-value state updated
//! once per time step). Both are decomposed as ONNX's function bodies define them:
//! `CausalConvWithState` into `concatenate`, `conv2d` and `strided_slice`; `LinearAttention`
//! unrolled over its (static) sequence length into `matmul`s and elementwise operators, as
//! `rnn.rs` unrolls the recurrent layers and under the same import bound.
//!
//! What it deliberately does not do: keep the recurrence rolled (a `Scan` would need the
//! control-flow import of `control.rs` for a body this file builds itself; unrolling gives the
//! graph passes plain operators, and the sequence lengths of these operators are the decode
//! and prefill chunks, short by design).

use super::*;

/// `v` as `to` (unchanged when it already is).
fn cast_to(cx: &mut Cx<'_>, v: &Val, to: DType) -> R<Val> {
    if v.ty().dtype == to {
        return Ok(v.clone());
    }
    cx.call_tmp("cast", &[v], Attrs::new().with("dtype", AttrValue::DType(to)))
}

/// `x[begin..end]` along `axis`.
fn slice_axis(cx: &mut Cx<'_>, x: &Val, axis: usize, begin: u64, end: u64) -> R<Val> {
    if begin == 0 && x.shape().get(axis) == Some(&end) {
        return Ok(x.clone());
    }
    let attrs = Attrs::new().with("begin", ints(&[begin])).with("end", ints(&[end])).with("axes", ints(&[axis as u64]));
    cx.call_tmp("strided_slice", &[x], attrs)
}

fn transpose_tmp(cx: &mut Cx<'_>, x: &Val, axes: &[i64]) -> R<Val> {
    cx.call_tmp("transpose", &[x], Attrs::new().with("axes", ints_i(axes)))
}

/// CausalConvWithState: `input [N, C, L]`, depthwise `weight [C, 1, K]`, optional `bias [C]`
/// and `past_state [N, C, K-1]` (zeros when absent). The output is the convolution of the
/// past state followed by the input (`[N, C, L]`, then SiLU when `activation` is `silu` or
/// `swish`); `present_state` is the last `K-1` steps of that concatenation.
pub(super) fn causal_conv_with_state(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, bias, past) = (cx.input(0)?, cx.input(1)?, cx.opt(2), cx.opt(3));
    let activation = cx.string("activation", "none")?;
    let silu = match activation.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        other => return Err(format!("attribute `activation` = {other:?} is not supported (none, silu, swish)").into()),
    };
    let (xs, ws) = (x.shape(), w.shape());
    let dtype = x.ty().dtype;
    if xs.len() != 3 {
        return Err(format!("input must have rank 3 [N, C, L], got shape {xs:?}").into());
    }
    let (n, c, l) = (xs[0], xs[1], xs[2]);
    if ws.len() != 3 || ws[0] != c || ws[1] != 1 || ws[2] == 0 {
        return Err(format!("weight must have shape [{c}, 1, K] (depthwise, K >= 1), got {ws:?}").into());
    }
    if w.ty().dtype != dtype {
        return Err(format!("weight is {} but input is {dtype}", w.ty().dtype).into());
    }
    let km1 = ws[2] - 1;
    if let Some(b) = &bias {
        if b.shape() != [c] || b.ty().dtype != dtype {
            return Err(format!("bias must be {dtype} of shape [{c}], got {} {:?}", b.ty().dtype, b.shape()).into());
        }
    }
    let past = match past {
        Some(p) => {
            if p.shape() != [n, c, km1] || p.ty().dtype != dtype {
                return Err(format!(
                    "past_state must be {dtype} of shape [{n}, {c}, {km1}], got {} {:?}",
                    p.ty().dtype,
                    p.shape()
                )
                .into());
            }
            p
        }
        None => Val::Const(Arc::new(Constant::Fill {
            ty: TensorType { shape: vec![n, c, km1].into(), dtype },
            fill: Fill::Full(0.0),
        })),
    };
    let padded = if km1 == 0 {
        x.clone()
    } else {
        cx.call_tmp("concatenate", &[&past, &x], Attrs::new().with("axis", AttrValue::Int(2)))?
    };
    let total = l + km1;
    let x4 = cx.reshape(&padded, &[n, c, 1, total], true)?;
    let w4 = cx.reshape(&w, &[c, 1, 1, ws[2]], true)?;
    let attrs = Attrs::new()
        .with("strides", ints(&[1, 1]))
        .with("padding", ints(&[0, 0, 0, 0]))
        .with("dilation", ints(&[1, 1]))
        .with("groups", AttrValue::Int(c as i64));
    let mut y = cx.call_tmp("conv2d", &[&x4, &w4], attrs)?;
    if let Some(b) = bias {
        y = cx.call_tmp("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?;
    }
    let y = cx.reshape(&y, &[n, c, l], true)?;
    let y = if silu {
        // The function body computes the activation in float32.
        let yf = cast_to(cx, &y, DType::F32)?;
        let s = cx.call_tmp("sigmoid", &[&yf], Attrs::new())?;
        let m = cx.call_tmp("multiply", &[&yf, &s], Attrs::new())?;
        cast_to(cx, &m, dtype)?
    } else {
        y
    };
    let present = slice_axis(cx, &padded, 2, total - km1, total)?;
    Ok(vec![Some(y), Some(present)])
}

/// The state update of a `LinearAttention` node (`update_rule`).
#[derive(Clone, Copy, PartialEq)]
enum Rule {
    /// `S += k vᵀ`.
    Linear,
    /// `S = exp(decay) · S + k vᵀ`.
    Gated,
    /// `S += k (beta · (v - Sᵀk))ᵀ`.
    Delta,
    /// Both: decay first, then the delta update.
    GatedDelta,
}

/// LinearAttention (opset 27): `query [B, T, Hq·dk]`, `key [B, T, Hkv·dk]`, `value
/// [B, T, Hkv·dv]`, optional `past_state [B, Hkv, dk, dv]`, `decay` (`[B, T, Hkv·dk]` or
/// per head `[B, T, Hkv]`) and `beta` (`[B, T, Hkv]` or `[B, T, 1]`). Per time step the state
/// is updated by `update_rule` and read by the query, `o_t = scale · q_tᵀ S_t` (query head
/// `h` reads key-value head `h / (Hq / Hkv)`), all in float32; outputs `[B, T, Hq·dv]` and
/// the final state, in the query's dtype.
pub(super) fn linear_attention(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (q, k, v) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let (past, decay, beta) = (cx.opt(3), cx.opt(4), cx.opt(5));
    let hq = cx.int_opt("q_num_heads")?.ok_or("attribute `q_num_heads` is required")?;
    let hkv = cx.int_opt("kv_num_heads")?.ok_or("attribute `kv_num_heads` is required")?;
    let rule = match cx.string("update_rule", "gated_delta")?.as_str() {
        "linear" => Rule::Linear,
        "gated" => Rule::Gated,
        "delta" => Rule::Delta,
        "gated_delta" => Rule::GatedDelta,
        other => {
            return Err(format!(
                "attribute `update_rule` = {other:?} is not supported (linear, gated, delta, gated_delta)"
            )
            .into())
        }
    };
    let scale = cx.float_opt("scale")?;
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        return Err(format!("q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}").into());
    }
    let (hq, hkv) = (hq as u64, hkv as u64);
    let dtype = q.ty().dtype;
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs.len() != 3 || ks.len() != 3 || vs.len() != 3 || ks[..2] != qs[..2] || vs[..2] != qs[..2] {
        return Err(format!("query {qs:?}, key {ks:?} and value {vs:?} must be [B, T, hidden] of one B and T").into());
    }
    let (b, t) = (qs[0], qs[1]);
    if t == 0 {
        return Err("the sequence length is 0".into());
    }
    if !qs[2].is_multiple_of(hq)
        || !ks[2].is_multiple_of(hkv)
        || !vs[2].is_multiple_of(hkv)
        || qs[2] / hq != ks[2] / hkv
    {
        return Err(format!(
            "query hidden {} / {hq} heads and key hidden {} / {hkv} heads must give one head size, value hidden {} \
             must divide by {hkv}",
            qs[2], ks[2], vs[2]
        )
        .into());
    }
    let (dk, dv) = (qs[2] / hq, vs[2] / hkv);
    let gated = matches!(rule, Rule::Gated | Rule::GatedDelta);
    let delta = matches!(rule, Rule::Delta | Rule::GatedDelta);
    let decay = match (gated, decay) {
        (true, Some(d)) => Some(d),
        (true, None) => return Err("update_rule needs the decay input (input 4)".into()),
        (false, _) => None,
    };
    let beta = match (delta, beta) {
        (true, Some(d)) => Some(d),
        (true, None) => return Err("update_rule needs the beta input (input 5)".into()),
        (false, _) => None,
    };
    cx.em.unroll(t, super::rnn::MAX_UNROLLED_STEPS).map_err(|before| {
        format!(
            "unrolling {t} time steps would take the model's recurrences to {} unrolled time steps, over the \
             import bound of {}",
            before.saturating_add(t),
            super::rnn::MAX_UNROLLED_STEPS
        )
    })?;
    // Per-step inputs, each as float32 `[T, B, H, d]` so step `i` is a slice of axis 0.
    let heads = |cx: &mut Cx<'_>, x: &Val, h: u64, what: &str| -> R<Val> {
        let s = x.shape();
        if s.len() != 3 || s[..2] != [b, t] || !s[2].is_multiple_of(h) {
            return Err(format!("{what} must be [{b}, {t}, multiple of {h}], got {s:?}").into());
        }
        let xf = cast_to(cx, x, DType::F32)?;
        let x4 = cx.reshape(&xf, &[b, t, h, s[2] / h], true)?;
        transpose_tmp(cx, &x4, &[1, 0, 2, 3])
    };
    let q4 = heads(cx, &q, hq, "query")?;
    let k4 = heads(cx, &k, hkv, "key")?;
    let v4 = heads(cx, &v, hkv, "value")?;
    let decay4 = match &decay {
        Some(d) => {
            let last = d.shape().get(2).copied().unwrap_or(0);
            if last != hkv * dk && last != hkv {
                return Err(format!(
                    "decay must be [{b}, {t}, {}] or per head [{b}, {t}, {hkv}], got {:?}",
                    hkv * dk,
                    d.shape()
                )
                .into());
            }
            Some(heads(cx, d, hkv, "decay")?)
        }
        None => None,
    };
    let beta4 = match &beta {
        Some(bt) => {
            let last = bt.shape().get(2).copied().unwrap_or(0);
            if last != hkv && last != 1 {
                return Err(format!("beta must be [{b}, {t}, {hkv}] or [{b}, {t}, 1], got {:?}", bt.shape()).into());
            }
            Some(heads(cx, bt, last, "beta")?)
        }
        None => None,
    };
    let mut state = match past {
        Some(p) => {
            if p.shape() != [b, hkv, dk, dv] {
                return Err(format!("past_state must be [{b}, {hkv}, {dk}, {dv}], got {:?}", p.shape()).into());
            }
            cast_to(cx, &p, DType::F32)?
        }
        None => Val::Const(Arc::new(Constant::Fill {
            ty: TensorType { shape: vec![b, hkv, dk, dv].into(), dtype: DType::F32 },
            fill: Fill::Full(0.0),
        })),
    };
    let scale = Cx::scalar(DType::F32, scale.unwrap_or(1.0 / (dk as f64).sqrt()));
    let group = hq / hkv;
    let mut outs = Vec::with_capacity(t as usize);
    let step = |cx: &mut Cx<'_>, x: &Val, i: u64| -> R<Val> {
        let s = x.shape();
        let xi = slice_axis(cx, x, 0, i, i + 1)?;
        cx.reshape(&xi, &s[1..], true)
    };
    for i in 0..t {
        let (qt, kt, vt) = (step(cx, &q4, i)?, step(cx, &k4, i)?, step(cx, &v4, i)?);
        // k as a column [B, Hkv, dk, 1].
        let k_col = cx.reshape(&kt, &[b, hkv, dk, 1], true)?;
        if let Some(d) = &decay4 {
            let dt = step(cx, d, i)?;
            let e = cx.call_tmp("exp", &[&dt], Attrs::new())?;
            let per = e.shape()[2];
            let e = cx.reshape(&e, &[b, hkv, per, 1], true)?;
            state = cx.call_tmp("multiply", &[&state, &e], Attrs::new())?;
        }
        let write = match &beta4 {
            Some(bt) => {
                // Sᵀ k: [B, Hkv, dv, dk] x [B, Hkv, dk, 1].
                let st = transpose_tmp(cx, &state, &[0, 1, 3, 2])?;
                let got = cx.call_tmp("matmul", &[&st, &k_col], Attrs::new())?;
                let got = cx.reshape(&got, &[b, hkv, dv], true)?;
                let diff = cx.call_tmp("subtract", &[&vt, &got], Attrs::new())?;
                let bt = step(cx, bt, i)?;
                cx.call_tmp("multiply", &[&bt, &diff], Attrs::new())?
            }
            None => vt,
        };
        let row = cx.reshape(&write, &[b, hkv, 1, dv], true)?;
        let outer = cx.call_tmp("matmul", &[&k_col, &row], Attrs::new())?;
        state = cx.call_tmp("add", &[&state, &outer], Attrs::new())?;
        let read = if group == 1 {
            state.clone()
        } else {
            let s5 = cx.reshape(&state, &[b, hkv, 1, dk, dv], true)?;
            let e = cx.call_tmp("broadcast_to", &[&s5], Attrs::new().with("shape", ints(&[b, hkv, group, dk, dv])))?;
            cx.reshape(&e, &[b, hq, dk, dv], true)?
        };
        let q_row = cx.reshape(&qt, &[b, hq, 1, dk], true)?;
        let o = cx.call_tmp("matmul", &[&q_row, &read], Attrs::new())?;
        let o = cx.call_tmp("multiply", &[&scale, &o], Attrs::new())?;
        outs.push(cx.reshape(&o, &[b, 1, hq * dv], true)?);
    }
    let refs: Vec<&Val> = outs.iter().collect();
    let y = if refs.len() == 1 {
        outs[0].clone()
    } else {
        cx.call_tmp("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(1)))?
    };
    let y = cast_to(cx, &y, dtype)?;
    let present = cast_to(cx, &state, dtype)?;
    Ok(vec![Some(y), Some(present)])
}
