//! Signal processing. Windows (`HannWindow`, `HammingWindow`, `BlackmanWindow`) and
//! `MelWeightMatrix` are constants computed at import (their sizes are inputs that must be
//! known then, and nothing else varies), with onnx's reference formulas. `DFT` and `STFT` are
//! decomposed into `matmul`s with constant cosine and sine matrices (a transform of length
//! `N` costs `O(N²)` per signal, against `O(N log N)` for an FFT: the price of leaving the
//! graph passes ordinary operators); `STFT` first gathers its frames with `take`.
//!
//! The transforms run in float64 whatever the input's dtype, then cast back: in float32 the
//! `N`-term sums would leave errors of about `1e-7 · N · max|x|` on bins that are exactly zero
//! (the imaginary part of a real signal's DC bin), far outside ONNX's absolute tolerance. The
//! matrices' entries at multiples of a quarter turn are exact (`cos(π) = -1`, `sin(π) = 0`).

use super::*;

/// Which window.
#[derive(Clone, Copy)]
pub(super) enum SignalWindow {
    Hann,
    Hamming,
    Blackman,
}

pub(super) fn window(cx: &mut Cx<'_>, kind: SignalWindow) -> R<Vec<Option<Val>>> {
    let size = match cx.const_ints(0, "size")?.as_deref() {
        Some([n]) => *n,
        Some(v) => return Err(format!("input 0 (size) must hold one value, got {}", v.len()).into()),
        None => return Err("input 0 (size) is missing".into()),
    };
    let periodic = cx.int("periodic", 1)? != 0;
    let dtype = tensor::dtype_of(cx.int("output_datatype", 1)? as i32)
        .map_err(|e| NodeError::from(format!("attribute `output_datatype`: {e}")))?;
    let n =
        u64::try_from(size).map_err(|_| NodeError::from(format!("input 0 (size) must not be negative, got {size}")))?;
    if n > cx.em_fold_limit() {
        return Err(format!("a window of {n} elements is too large to make at import").into());
    }
    let big_n = if periodic { size } else { size - 1 } as f64;
    let pi = std::f64::consts::PI;
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let i = i as f64;
            match kind {
                SignalWindow::Hann => (i * pi / big_n).sin().powi(2),
                SignalWindow::Hamming => {
                    let alpha = 25.0 / 46.0;
                    alpha - (i * pi * 2.0 / big_n).cos() * (1.0 - alpha)
                }
                SignalWindow::Blackman => {
                    0.42 - 0.5 * (i * pi * 2.0 / big_n).cos() + 0.08 * (i * pi * 4.0 / big_n).cos()
                }
            }
        })
        .collect();
    let t = Tensor::from_f64s(&[n], dtype, &v).map_err(|e| e.to_string())?;
    one(Val::Const(Arc::new(Constant::Dense(t))))
}

/// `(cos, sin)` of `2π · m / n`, exact at multiples of a quarter turn.
fn unit_root(m: u64, n: u64) -> (f64, f64) {
    let m = m % n;
    if (4 * m).is_multiple_of(n) {
        return match 4 * m / n {
            0 => (1.0, 0.0),
            1 => (0.0, 1.0),
            2 => (-1.0, 0.0),
            _ => (0.0, -1.0),
        };
    }
    let a = 2.0 * std::f64::consts::PI * m as f64 / n as f64;
    (a.cos(), a.sin())
}

/// A float64 `[rows, cols]` constant with entries `f(r, c)`.
fn matrix(rows: u64, cols: u64, f: impl Fn(u64, u64) -> f64) -> R<Val> {
    let v: Vec<f64> = (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))).map(|(r, c)| f(r, c)).collect();
    let t = Tensor::from_f64s(&[rows, cols], DType::F64, &v).map_err(|e| e.to_string())?;
    Ok(Val::Const(Arc::new(Constant::Dense(t))))
}

/// What a transform computes along its axis.
#[derive(Clone, Copy)]
struct Transform {
    /// The transform length `N` (the signal is cut or zero-padded to it).
    n: u64,
    inverse: bool,
    /// Forward: only bins `0..=N/2` of a real signal. Inverse: the input is such a half
    /// spectrum of a real signal, and the output is that real signal.
    onesided: bool,
}

/// The transform of `x` (`[…, L, 1]` real or `[…, L, 2]` complex) along `axis` (not the
/// last): `[…, bins, 2]`, or `[…, N, 1]` for an inverse one-sided transform.
fn transform(cx: &mut Cx<'_>, x: &Val, axis: usize, tf: Transform) -> R<Val> {
    let shape = x.shape();
    let rank = shape.len();
    let dtype = x.ty().dtype;
    if rank < 2 || !matches!(shape[rank - 1], 1 | 2) || axis + 1 >= rank {
        return Err(format!(
            "the input must be [..., signal, 1] (real) or [..., signal, 2] (complex) with the transform axis before \
             the last, got shape {shape:?} and axis {axis}"
        )
        .into());
    }
    if !dtype.is_float() {
        return Err(format!("the input must be a float tensor, got {dtype}").into());
    }
    let complex = shape[rank - 1] == 2;
    let Transform { n, inverse, onesided } = tf;
    if n == 0 {
        return Err("the transform length must be positive".into());
    }
    if onesided && !inverse && complex {
        return Err("`onesided` needs a real input (last dimension 1)".into());
    }
    // Rows: the input positions (or bins) used; columns: the output bins (or positions).
    let len = shape[axis];
    let (rows, cols) = match (onesided, inverse) {
        (true, false) => (len.min(n), n / 2 + 1),
        (true, true) => (len.min(n / 2 + 1), n),
        (false, _) => (len.min(n), n),
    };
    if rows.saturating_mul(cols) > cx.em_fold_limit() {
        return Err(
            format!("a transform of length {n} needs a {rows}x{cols} matrix, too large to make at import").into()
        );
    }
    let x64 = if dtype == DType::F64 {
        x.clone()
    } else {
        cx.call_tmp("cast", &[x], Attrs::new().with("dtype", AttrValue::DType(DType::F64)))?
    };
    // Real and imaginary parts as `[…, rows]` with the transform axis last.
    let mut perm: Vec<i64> = (0..rank as i64 - 1).filter(|&a| a != axis as i64).collect();
    perm.push(axis as i64);
    let part = |cx: &mut Cx<'_>, i: u64| -> R<Val> {
        let attrs = Attrs::new()
            .with("begin", ints(&[i, 0]))
            .with("end", ints(&[i + 1, rows]))
            .with("axes", ints(&[rank as u64 - 1, axis as u64]));
        let p = cx.call_tmp("strided_slice", &[&x64], attrs)?;
        let ps = p.shape();
        let p = cx.reshape(&p, &ps[..rank - 1], true)?;
        cx.call_tmp("transpose", &[&p], Attrs::new().with("axes", ints_i(&perm)))
    };
    let xr = part(cx, 0)?;
    let xi = if complex { Some(part(cx, 1)?) } else { None };
    // y = Σ x · e^{∓2πi·rc/N} (÷ N when inverse): with C = cos and S = sin,
    // forward yr = xr C + xi S, yi = xi C - xr S; inverse yr = xr C - xi S, yi = xi C + xr S.
    // An inverse one-sided transform weighs bins 1..N/2 twice (their conjugates are implied)
    // and keeps only the real part.
    let weight = |r: u64| -> f64 {
        if !(onesided && inverse) || r == 0 || (n.is_multiple_of(2) && r == n / 2) {
            1.0
        } else {
            2.0
        }
    };
    let norm = if inverse { 1.0 / n as f64 } else { 1.0 };
    let c = matrix(rows, cols, |r, k| weight(r) * norm * unit_root(r * k, n).0)?;
    let s = matrix(rows, cols, |r, k| weight(r) * norm * unit_root(r * k, n).1)?;
    let mm = |cx: &mut Cx<'_>, a: &Val, b: &Val| cx.call_tmp("matmul", &[a, b], Attrs::new());
    let sign_s = if inverse { "subtract" } else { "add" };
    let rc = mm(cx, &xr, &c)?;
    let yr = match &xi {
        Some(xi) => {
            let is = mm(cx, xi, &s)?;
            cx.call_tmp(sign_s, &[&rc, &is], Attrs::new())?
        }
        None => rc,
    };
    let mut fields = vec![yr];
    if !(onesided && inverse) {
        let rs = mm(cx, &xr, &s)?;
        let yi = match &xi {
            Some(xi) => {
                let ic = mm(cx, xi, &c)?;
                let op = if inverse { "add" } else { "subtract" };
                cx.call_tmp(op, &[&ic, &rs], Attrs::new())?
            }
            None if inverse => rs,
            None => cx.call_tmp("negative", &[&rs], Attrs::new())?,
        };
        fields.push(yi);
    }
    // Back to the input's axis order, each field with a trailing axis of 1, then joined.
    let mut inv = vec![0i64; rank - 1];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    let mut parts = Vec::with_capacity(fields.len());
    for f in &fields {
        let t = cx.call_tmp("transpose", &[f], Attrs::new().with("axes", ints_i(&inv)))?;
        let mut ts = t.shape();
        ts.push(1);
        parts.push(cx.reshape(&t, &ts, true)?);
    }
    let refs: Vec<&Val> = parts.iter().collect();
    let y = if refs.len() == 1 {
        parts[0].clone()
    } else {
        cx.call_tmp("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(rank as i64 - 1)))?
    };
    if dtype == DType::F64 {
        return Ok(y);
    }
    cx.call("cast", &[&y], Attrs::new().with("dtype", AttrValue::DType(dtype)))
}

/// A scalar (or one-element) input known at import.
fn const_scalar(cx: &Cx<'_>, i: usize, what: &str) -> R<Option<i64>> {
    match cx.const_ints(i, what)?.as_deref() {
        None => Ok(None),
        Some([v]) => Ok(Some(*v)),
        Some(v) => Err(format!("input {i} ({what}) must hold one value, got {}", v.len()).into()),
    }
}

/// DFT: opset 17 takes `axis` as an attribute (default 1), opset 20 as input 2 (default -2);
/// `dft_length` (input 1) defaults to the axis' length, or `2 · (bins - 1)` for an inverse
/// one-sided transform.
pub(super) fn dft(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank() as i64;
    let inverse = cx.int("inverse", 0)? != 0;
    let onesided = cx.int("onesided", 0)? != 0;
    let axis = if cx.opset >= 20 { const_scalar(cx, 2, "axis")?.unwrap_or(-2) } else { cx.int("axis", 1)? };
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank - 1).contains(&a) {
        return Err(
            format!("axis {axis} is out of range for an input of rank {rank} (the last axis holds re / im)").into()
        );
    }
    let len = x.shape()[a as usize];
    let n = match const_scalar(cx, 1, "dft_length")? {
        Some(n) => u64::try_from(n).map_err(|_| NodeError::from(format!("dft_length must be positive, got {n}")))?,
        None if onesided && inverse => 2 * len.saturating_sub(1),
        None => len,
    };
    one(transform(cx, &x, a as usize, Transform { n, inverse, onesided })?)
}

/// STFT: the frames `signal[:, f·step .. f·step + frame_length]` (times `window`) each
/// transformed: `[batch, frames, bins, 2]`.
pub(super) fn stft(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let window = cx.opt(2);
    let onesided = cx.int("onesided", 1)? != 0;
    let step = const_scalar(cx, 1, "frame_step")?.ok_or("input 1 (frame_step) is required")?;
    let frame = match (const_scalar(cx, 3, "frame_length")?, &window) {
        (Some(l), Some(w)) if w.shape() != [l as u64] => {
            return Err(format!("window of shape {:?} does not match frame_length {l}", w.shape()).into())
        }
        (Some(l), _) => l,
        (None, Some(w)) if w.rank() == 1 => w.shape()[0] as i64,
        (None, Some(w)) => return Err(format!("window must be 1-D, got shape {:?}", w.shape()).into()),
        (None, None) => return Err("either the window or frame_length is required".into()),
    };
    let shape = x.shape();
    if shape.len() != 3 {
        return Err(format!("signal must be [batch, length, 1 or 2], got shape {shape:?}").into());
    }
    let (step, frame) = match (u64::try_from(step), u64::try_from(frame)) {
        (Ok(s), Ok(f)) if s > 0 && f > 0 && f <= shape[1] => (s, f),
        _ => {
            return Err(format!(
                "frame_step {step} and frame_length {frame} must be positive, the frame at most the signal length {}",
                shape[1]
            )
            .into())
        }
    };
    let frames = (shape[1] - frame) / step + 1;
    if frames.saturating_mul(frame) > cx.em_fold_limit() {
        return Err(format!("{frames} frames of {frame} samples are too many to index at import").into());
    }
    let idx: Vec<f64> = (0..frames).flat_map(|f| (0..frame).map(move |j| (f * step + j) as f64)).collect();
    let idx = Tensor::from_f64s(&[frames, frame], DType::I64, &idx).map_err(|e| e.to_string())?;
    let idx = Val::Const(Arc::new(Constant::Dense(idx)));
    let mut framed = cx.call_tmp("take", &[&x, &idx], Attrs::new().with("axis", AttrValue::Int(1)))?;
    if let Some(w) = window {
        let w = if w.ty().dtype == x.ty().dtype {
            w
        } else {
            cx.call_tmp("cast", &[&w], Attrs::new().with("dtype", AttrValue::DType(x.ty().dtype)))?
        };
        let w = cx.reshape(&w, &[frame, 1], true)?;
        framed = cx.call_tmp("multiply", &[&framed, &w], Attrs::new())?;
    }
    one(transform(cx, &framed, 2, Transform { n: frame, inverse: false, onesided })?)
}

/// MelWeightMatrix: the `[dft_length / 2 + 1, num_mel_bins]` triangular filter bank, computed
/// at import as onnx's reference computes it.
pub(super) fn mel_weight_matrix(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let bins = const_scalar(cx, 0, "num_mel_bins")?.ok_or("input 0 (num_mel_bins) is required")?;
    let dft_length = const_scalar(cx, 1, "dft_length")?.ok_or("input 1 (dft_length) is required")?;
    let rate = const_scalar(cx, 2, "sample_rate")?.ok_or("input 2 (sample_rate) is required")?;
    let edge = |cx: &Cx<'_>, i: usize, what: &str| -> R<f64> {
        match cx.const_floats(i, what)?.as_deref() {
            Some([v]) => Ok(*v),
            Some(v) => Err(format!("input {i} ({what}) must hold one value, got {}", v.len()).into()),
            None => Err(format!("input {i} ({what}) is required").into()),
        }
    };
    let (lower, upper) = (edge(cx, 3, "lower_edge_hertz")?, edge(cx, 4, "upper_edge_hertz")?);
    let dtype = tensor::dtype_of(cx.int("output_datatype", 1)? as i32)
        .map_err(|e| NodeError::from(format!("attribute `output_datatype`: {e}")))?;
    if bins <= 0 || dft_length <= 0 || rate <= 0 || !(0.0..=upper).contains(&lower) {
        return Err(format!(
            "num_mel_bins {bins}, dft_length {dft_length} and sample_rate {rate} must be positive and \
             0 <= lower_edge_hertz {lower} <= upper_edge_hertz {upper}"
        )
        .into());
    }
    let (bins, spectrum) = (bins as u64, dft_length as u64 / 2 + 1);
    if bins.saturating_mul(spectrum) > cx.em_fold_limit() {
        return Err(format!("a {spectrum}x{bins} mel matrix is too large to make at import").into());
    }
    let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
    let (lo, hi) = (mel(lower), mel(upper));
    let step = (hi - lo) / (bins + 2) as f64;
    let points: Vec<i64> = (0..bins + 2)
        .map(|i| {
            let hz = 700.0 * ((i as f64 * step + lo) / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_length + 1) as f64 * hz) / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0f64; (spectrum * bins) as usize];
    let mut set = |j: i64, i: u64, v: f64| -> R<()> {
        let j = u64::try_from(j).ok().filter(|&j| j < spectrum).ok_or_else(|| {
            format!("the mel bin edges reach spectrum bin {j}, outside 0..{spectrum} (upper_edge_hertz above the Nyquist rate?)")
        })?;
        out[(j * bins + i) as usize] = v;
        Ok(())
    };
    for i in 0..bins {
        let (l, c, h) = (points[i as usize], points[i as usize + 1], points[i as usize + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let t = Tensor::from_f64s(&[spectrum, bins], dtype, &out).map_err(|e| e.to_string())?;
    one(Val::Const(Arc::new(Constant::Dense(t))))
}
