//! ONNX's recurrent layers `LSTM`, `GRU` and `RNN`, unrolled at import into plain graph
//! operators (`dense`, `add`, `multiply`, activations, `where`, `split`, `concatenate`, …),
//! so every pass sees, fuses and folds them like any other operator.
//!
//! passel's types are static, so the sequence length is known at import. Per direction the
//! input projection of all time steps is one `dense` over `[seq_length * batch, input]`
//! (biases added once), split into one `[batch, gates * hidden]` slice per step; each step
//! adds the recurrent `dense` of the previous hidden state, splits the gates and applies the
//! layer's equations (onnx/defs/rnn/defs.cc) with its activations, `clip` (on every gate's
//! pre-activation, not on the LSTM cell state before `h`, as onnxruntime does), peepholes,
//! `input_forget` and `linear_before_reset`. A step whose previous hidden or cell state is
//! known to be zero (the first step without `initial_h` / `initial_c`) leaves out the terms
//! that multiply it.
//!
//! `sequence_lens` masks each step: batch entry `b` takes the new state only at time steps
//! `t < sequence_lens[b]` and otherwise keeps its state, and `Y` is zero there. A reverse
//! direction walks `t` from `seq_length - 1` down to 0, so it starts at each sequence's own
//! last element, as onnxruntime does. A sequence of length 0 has zero `Y_h` and `Y_c` (not
//! its initial state), as onnxruntime gives. A length above `seq_length` acts as
//! `seq_length` and a negative one as 0 (onnxruntime refuses both at run time; passel refuses
//! them at import when `sequence_lens` is a constant). Masks of a constant `sequence_lens`
//! fold at import, and an all-true mask adds nothing.
//!
//! Activations are named as in the spec (matched case-insensitively, as onnxruntime does).
//! `activation_alpha` / `activation_beta` are consumed in the order of the activations, each
//! activation taking a value only if it has that parameter (Affine, ScaledTanh and HardSigmoid
//! take both; LeakyRelu, ThresholdedRelu and Elu take alpha), as onnxruntime's LSTM and GRU
//! do; a missing value is the default of the ONNX operator of that name (LeakyRelu 0.01,
//! ThresholdedRelu 1.0, HardSigmoid 0.2 / 0.5, Elu 1.0, the retired Affine 1.0 / 0.0).
//! ScaledTanh's operator had no defaults, so its values are required, and values left over
//! after every activation took its own are an error: they mean the model was written for
//! another reading of the lists.
//!
//! What it deliberately does not do: unroll without bound. The time steps unrolled (sequence
//! length times directions) are counted over the whole model and may not exceed
//! [`MAX_UNROLLED_STEPS`], so a small hostile model cannot make the import emit billions of
//! calls; such a node is refused with the count.

use std::sync::Arc;

use super::pb;
use super::Val;
use super::{Cx, NodeError, R};
use crate::ir::{AttrValue, Attrs, Constant, DType, Fill, Tensor, TensorType};

/// The most time steps (sequence length times directions, summed over every recurrent node
/// of a model) the importer unrolls. Each step costs 10 to 30 bindings, so the bound keeps a
/// model's unrolled recurrences below about half a million calls.
pub(super) const MAX_UNROLLED_STEPS: u64 = 16_384;

/// Which recurrent layer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lstm,
    Gru,
    Rnn,
}

impl Kind {
    fn op(self) -> &'static str {
        match self {
            Kind::Lstm => "LSTM",
            Kind::Gru => "GRU",
            Kind::Rnn => "RNN",
        }
    }

    /// Gates per direction: the row blocks of W and R.
    fn gates(self) -> u64 {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Rnn => 1,
        }
    }

    /// The activations of one direction by default (f, g, h as the spec names them).
    fn default_activations(self) -> &'static [Act] {
        match self {
            Kind::Lstm => &[Act::Sigmoid, Act::Tanh, Act::Tanh],
            Kind::Gru => &[Act::Sigmoid, Act::Tanh],
            Kind::Rnn => &[Act::Tanh],
        }
    }
}

/// An activation function of the recurrent layers, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    Relu,
    Tanh,
    Sigmoid,
    Affine { alpha: f64, beta: f64 },
    LeakyRelu { alpha: f64 },
    ThresholdedRelu { alpha: f64 },
    ScaledTanh { alpha: f64, beta: f64 },
    HardSigmoid { alpha: f64, beta: f64 },
    Elu { alpha: f64 },
    Softsign,
    Softplus,
}

const ACTIVATION_NAMES: &str =
    "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus";

/// Parses `names`, taking parameters from `alphas` and `betas` in order (see the module doc).
fn parse_activations(names: &[String], alphas: &[f32], betas: &[f32]) -> R<Vec<Act>> {
    let (mut alphas, mut betas) = (alphas.iter().map(|&a| f64::from(a)), betas.iter().map(|&b| f64::from(b)));
    let mut acts = Vec::with_capacity(names.len());
    for name in names {
        let lower = name.to_ascii_lowercase();
        let mut alpha = |default: Option<f64>| {
            alphas
                .next()
                .or(default)
                .ok_or_else(|| NodeError::from(format!("activation {name} needs a value in `activation_alpha`")))
        };
        let act = match lower.as_str() {
            "relu" => Act::Relu,
            "tanh" => Act::Tanh,
            "sigmoid" => Act::Sigmoid,
            "affine" => Act::Affine { alpha: alpha(Some(1.0))?, beta: betas.next().unwrap_or(0.0) },
            "leakyrelu" => Act::LeakyRelu { alpha: alpha(Some(0.01))? },
            "thresholdedrelu" => Act::ThresholdedRelu { alpha: alpha(Some(1.0))? },
            "scaledtanh" => {
                let alpha = alpha(None)?;
                let beta = betas
                    .next()
                    .ok_or_else(|| NodeError::from(format!("activation {name} needs a value in `activation_beta`")))?;
                Act::ScaledTanh { alpha, beta }
            }
            "hardsigmoid" => Act::HardSigmoid { alpha: alpha(Some(0.2))?, beta: betas.next().unwrap_or(0.5) },
            "elu" => Act::Elu { alpha: alpha(Some(1.0))? },
            "softsign" => Act::Softsign,
            "softplus" => Act::Softplus,
            _ => {
                return Err(format!(
                    "attribute `activations`: unknown activation function {name:?} (the spec's are {ACTIVATION_NAMES})"
                )
                .into())
            }
        };
        acts.push(act);
    }
    let (extra_a, extra_b) = (alphas.count(), betas.count());
    if extra_a > 0 || extra_b > 0 {
        return Err(format!(
            "attributes `activation_alpha` / `activation_beta` have {extra_a} / {extra_b} values more than the \
             activations {names:?} take (each value goes to the next activation that has that parameter)"
        )
        .into());
    }
    Ok(acts)
}

/// A list-of-strings attribute.
fn strings_opt(cx: &mut Cx<'_>, key: &str) -> R<Option<Vec<String>>> {
    use pb::attribute_proto::AttributeType as T;
    match cx.attr(key) {
        None => Ok(None),
        Some(a) if matches!(a.r#type(), T::Strings | T::Undefined) => a
            .strings
            .iter()
            .map(|s| String::from_utf8(s.to_vec()).map_err(|_| NodeError::AttributeNotUtf8(key.to_string())))
            .collect::<R<Vec<_>>>()
            .map(Some),
        Some(_) => Err(Cx::kind_err(key, "a list of strings")),
    }
}

/// Converts an `LSTM` node.
pub(super) fn lstm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    convert(cx, Kind::Lstm, false)
}

/// Converts a `com.microsoft::DynamicQuantizeLSTM` node: an LSTM whose W `[num_directions,
/// input_size, 4*hidden_size]` and R `[num_directions, hidden_size, 4*hidden_size]` are int8 /
/// uint8 with per-direction (or per-column) scales and zero points (inputs 8 to 11). As
/// onnxruntime computes it, each of the layer's GEMMs quantizes its float operand as a whole
/// to uint8 (`DynamicQuantizeLinear`: all steps' X at once, each step's previous hidden state)
/// and scales the exact integer product by `x_scale · w_scale` (`quant::quantized_gemm`).
pub(super) fn dynamic_quantize_lstm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    convert(cx, Kind::Lstm, true)
}

/// Converts a `GRU` node.
pub(super) fn gru(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    convert(cx, Kind::Gru, false)
}

/// Converts an `RNN` node.
pub(super) fn rnn(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    convert(cx, Kind::Rnn, false)
}

/// Everything a recurrent node says, checked.
struct Layer {
    kind: Kind,
    /// X as the node has it (`layout` says its order).
    x: Val,
    w: Val,
    r: Val,
    b: Option<Val>,
    seq_lens: Option<Val>,
    /// As the node has them (`layout` says their order).
    initial_h: Option<Val>,
    initial_c: Option<Val>,
    p: Option<Val>,
    /// DynamicQuantizeLSTM: W's scale and zero point, then R's (`[num_directions]` or
    /// `[num_directions, 4*hidden_size]`); W and R are then `[num_directions, in, 4*hidden]`.
    quant: Option<[Val; 4]>,
    dtype: DType,
    seq: u64,
    batch: u64,
    hidden: u64,
    /// Direction `d` walks time backwards when `reverse[d]`.
    reverse: Vec<bool>,
    /// Per direction, this layer's activations (f, g, h).
    acts: Vec<Vec<Act>>,
    clip: Option<f64>,
    input_forget: bool,
    linear_before_reset: bool,
    layout: i64,
}

fn convert(cx: &mut Cx<'_>, kind: Kind, quantized: bool) -> R<Vec<Option<Val>>> {
    let layer = read_layer(cx, kind, quantized)?;
    let steps = layer.seq.saturating_mul(layer.reverse.len() as u64);
    cx.em.unroll(steps, MAX_UNROLLED_STEPS).map_err(|before| {
        format!(
            "unrolling seq_length {} x {} direction(s) = {steps} time steps would take the model's recurrent \
             layers to {} unrolled time steps, over the import bound of {MAX_UNROLLED_STEPS}",
            layer.seq,
            layer.reverse.len(),
            before.saturating_add(steps)
        )
    })?;
    let wanted: Vec<bool> = (0..3).map(|k| cx.node.outputs().nth(k).is_some_and(|o| !o.is_empty())).collect();
    // Variables are named after the first output the node has (Y is often left out).
    let base = cx.node.outputs().find(|o| !o.is_empty()).unwrap_or(kind.op()).to_string();
    let mut u = Unroll { cx, l: &layer, base };
    u.emit(&wanted)
}

fn read_layer(cx: &mut Cx<'_>, kind: Kind, quantized: bool) -> R<Layer> {
    let direction = cx.string("direction", "forward")?;
    let reverse = match direction.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => {
            return Err(
                format!("attribute `direction` = {other:?} is not one of forward, reverse, bidirectional").into()
            )
        }
    };
    let dirs = reverse.len() as u64;
    let layout = cx.int("layout", 0)?;
    if layout != 0 && layout != 1 {
        return Err(format!("attribute `layout` = {layout} must be 0 or 1").into());
    }
    let clip = match cx.float_opt("clip")? {
        Some(c) if c.is_nan() || c <= 0.0 => return Err(format!("attribute `clip` = {c} must be positive").into()),
        c => c,
    };
    let input_forget = match kind {
        Kind::Lstm => cx.int("input_forget", 0)? != 0,
        _ => false,
    };
    let linear_before_reset = match kind {
        Kind::Gru => cx.int("linear_before_reset", 0)? != 0,
        _ => false,
    };
    let hidden_attr = cx.int_opt("hidden_size")?;

    let per_dir = kind.default_activations().len();
    let names = strings_opt(cx, "activations")?;
    let alphas = cx.floats_opt("activation_alpha")?.unwrap_or_default();
    let betas = cx.floats_opt("activation_beta")?.unwrap_or_default();
    let acts: Vec<Vec<Act>> = match names {
        None => {
            // Defaults take no parameters, so given values would be left over.
            parse_activations(&[], &alphas, &betas)?;
            vec![kind.default_activations().to_vec(); reverse.len()]
        }
        Some(names) => {
            let mut acts = parse_activations(&names, &alphas, &betas)?;
            // The schema's default for RNN is ["Tanh", "Tanh"] whatever the direction, so a
            // one-direction RNN with two activations uses the first, as onnxruntime does.
            if kind == Kind::Rnn && dirs == 1 && acts.len() == 2 {
                acts.truncate(1);
            }
            if acts.len() != per_dir * reverse.len() {
                return Err(format!(
                    "attribute `activations` has {} function(s), but a {direction} {} takes {} ({per_dir} per direction)",
                    names.len(),
                    kind.op(),
                    per_dir * reverse.len()
                ).into());
            }
            acts.chunks(per_dir).map(<[Act]>::to_vec).collect()
        }
    };

    let x = cx.input(0)?;
    let dtype = x.ty().dtype;
    if !matches!(dtype, DType::F32 | DType::F16) {
        return Err(format!("input 0 (X) must be a float tensor (f32 or f16), got {dtype}").into());
    }
    let xs = x.shape();
    if xs.len() != 3 {
        let order =
            if layout == 0 { "[seq_length, batch_size, input_size]" } else { "[batch_size, seq_length, input_size]" };
        return Err(format!("input 0 (X) must have rank 3 ({order}), got shape {xs:?}").into());
    }
    let (seq, batch, input_size) = if layout == 0 { (xs[0], xs[1], xs[2]) } else { (xs[1], xs[0], xs[2]) };
    let w = cx.input(1)?;
    let r = cx.input(2)?;
    let gates = kind.gates();
    let hidden = match hidden_attr {
        Some(h) if h <= 0 => return Err(format!("attribute `hidden_size` = {h} must be positive").into()),
        Some(h) => h as u64,
        None => match r.shape().as_slice() {
            [_, h, _] if quantized => *h,
            [_, _, h] => *h,
            s => {
                return Err(format!(
                "input 2 (R) must have rank 3 ([num_directions, {gates}*hidden_size, hidden_size]), got shape {s:?}"
            )
                .into())
            }
        },
    };
    if hidden == 0 {
        return Err("hidden_size is 0 (from R's shape)".into());
    }
    let gh = gates.checked_mul(hidden).ok_or_else(|| NodeError::from(format!("hidden_size {hidden} is too large")))?;
    // Y's element count bounds every product below (steps times batch, batch times hidden).
    [seq, dirs, batch, hidden, 2 * gates].iter().try_fold(1u64, |a, &d| a.checked_mul(d.max(1))).ok_or_else(|| {
        format!("the outputs of seq_length {seq}, batch {batch} and hidden_size {hidden} are too large")
    })?;
    let with_hidden = if hidden_attr.is_some() { format!(" with hidden_size {hidden}") } else { String::new() };
    let check = |v: &Val, i: usize, what: &str, want: &[u64], layout_doc: &str| -> R<()> {
        if v.ty().dtype != dtype {
            return Err(format!("input {i} ({what}) has dtype {}, but X has {dtype}", v.ty().dtype).into());
        }
        if v.shape() != want {
            return Err(format!(
                "input {i} ({what}) must have shape {want:?} ({layout_doc}{with_hidden}), got {:?}",
                v.shape()
            )
            .into());
        }
        Ok(())
    };
    let quant = if quantized {
        if dtype != DType::F32 {
            return Err(format!("input 0 (X) must be float32, got {dtype}").into());
        }
        let mut params = Vec::with_capacity(4);
        for (i, what, v, want) in [(1, "W", &w, [dirs, input_size, gh]), (2, "R", &r, [dirs, hidden, gh])] {
            if !matches!(v.ty().dtype, DType::I8 | DType::U8) || v.shape() != want {
                return Err(format!(
                    "input {i} ({what}) must be int8 or uint8 {want:?} ([num_directions, {}, {gates}*hidden_size]{with_hidden}), got {} {:?}",
                    if i == 1 { "input_size" } else { "hidden_size" },
                    v.ty().dtype,
                    v.shape()
                ).into());
            }
            let at = if i == 1 { 8 } else { 10 };
            let scale = cx.input(at).map_err(|_| NodeError::from(format!("input {at} ({what}_scale) is required")))?;
            let zp = cx
                .input(at + 1)
                .map_err(|_| NodeError::from(format!("input {} ({what}_zero_point) is required", at + 1)))?;
            let per_dir = scale.shape() == [dirs];
            if scale.ty().dtype != DType::F32 || !(per_dir || scale.shape() == [dirs, gh]) {
                return Err(format!(
                    "input {at} ({what}_scale) must be float32 [{dirs}] or [{dirs}, {gh}], got {} {:?}",
                    scale.ty().dtype,
                    scale.shape()
                )
                .into());
            }
            if zp.ty().dtype != v.ty().dtype || zp.shape() != scale.shape() {
                return Err(format!(
                    "input {} ({what}_zero_point) must be {} of the scale's shape {:?}, got {} {:?}",
                    at + 1,
                    v.ty().dtype,
                    scale.shape(),
                    zp.ty().dtype,
                    zp.shape()
                )
                .into());
            }
            params.push(scale);
            params.push(zp);
        }
        Some(<[Val; 4]>::try_from(params).map_err(|_| "four quantization parameters")?)
    } else {
        check(&w, 1, "W", &[dirs, gh, input_size], &format!("[num_directions, {gates}*hidden_size, input_size]"))?;
        check(&r, 2, "R", &[dirs, gh, hidden], &format!("[num_directions, {gates}*hidden_size, hidden_size]"))?;
        None
    };
    let b = cx.opt(3);
    if let Some(b) = &b {
        check(b, 3, "B", &[dirs, 2 * gh], &format!("[num_directions, {}*hidden_size]", 2 * gates))?;
    }
    let seq_lens = cx.opt(4);
    if let Some(s) = &seq_lens {
        if s.ty().dtype != DType::I32 {
            return Err(format!("input 4 (sequence_lens) must be int32, got {}", s.ty().dtype).into());
        }
        if s.shape() != [batch] {
            return Err(format!(
                "input 4 (sequence_lens) must have shape [{batch}] ([batch_size]), got {:?}",
                s.shape()
            )
            .into());
        }
        if let Some(c) = s.as_const() {
            let lens = c.materialize().map_err(|e| e.to_string())?.to_f64s();
            if let Some(bad) = lens.iter().find(|&&l| l < 0.0 || l > seq as f64) {
                return Err(format!("input 4 (sequence_lens) holds {bad}, outside 0..={seq} (seq_length)").into());
            }
        }
    }
    let state_doc = if layout == 0 {
        "[num_directions, batch_size, hidden_size]"
    } else {
        "[batch_size, num_directions, hidden_size]"
    };
    let state_shape = if layout == 0 { [dirs, batch, hidden] } else { [batch, dirs, hidden] };
    let initial_h = cx.opt(5);
    if let Some(h) = &initial_h {
        check(h, 5, "initial_h", &state_shape, state_doc)?;
    }
    let (initial_c, p) = match kind {
        Kind::Lstm => (cx.opt(6), cx.opt(7)),
        _ => (None, None),
    };
    if let Some(c) = &initial_c {
        check(c, 6, "initial_c", &state_shape, state_doc)?;
    }
    if let Some(p) = &p {
        check(p, 7, "P", &[dirs, 3 * hidden], "[num_directions, 3*hidden_size]")?;
    }
    Ok(Layer {
        kind,
        x,
        w,
        r,
        b,
        seq_lens,
        initial_h,
        initial_c,
        p,
        quant,
        dtype,
        seq,
        batch,
        hidden,
        reverse,
        acts,
        clip,
        input_forget,
        linear_before_reset,
        layout,
    })
}

/// The weights of one direction, as `dense` takes them.
struct DirWeights {
    /// `[gates*hidden, input]`.
    w: Val,
    /// `[gates*hidden, hidden]`; for GRU only the z and r rows (`[2*hidden, hidden]`).
    r: Val,
    /// GRU: the h rows of R (`[hidden, hidden]`).
    r_h: Option<Val>,
    /// The bias added to the input projection (`[gates*hidden]`).
    bias_x: Option<Val>,
    /// GRU with `linear_before_reset`: Rbh (`[hidden]`).
    rb_h: Option<Val>,
    /// LSTM peepholes p_i, p_o, p_f (`[hidden]` each).
    peep: Option<[Val; 3]>,
    /// DynamicQuantizeLSTM: W's scale and zero point, then R's, of this direction (scalars or
    /// `[gates*hidden]`); `w` and `r` are then `[in, gates*hidden]` integers.
    quant: Option<[Val; 4]>,
}

/// One node being unrolled.
struct Unroll<'c, 'a, 'l> {
    cx: &'c mut Cx<'a>,
    l: &'l Layer,
    /// The base of the variables' names.
    base: String,
}

impl Unroll<'_, '_, '_> {
    fn call(&mut self, op: &str, args: &[&Val], attrs: Attrs, what: &str) -> R<Val> {
        let name = format!("{}_{what}", self.base);
        Ok(self.cx.em.call(op, args, attrs, &name)?)
    }

    fn call2(&mut self, op: &str, a: &Val, b: &Val, what: &str) -> R<Val> {
        self.call(op, &[a, b], Attrs::new(), what)
    }

    fn scalar(&self, v: f64) -> Val {
        Cx::scalar(self.l.dtype, v)
    }

    fn zeros(&self, shape: &[u64]) -> Val {
        Val::Const(Arc::new(Constant::Fill {
            ty: TensorType { shape: shape.to_vec().into(), dtype: self.l.dtype },
            fill: Fill::Full(0.0),
        }))
    }

    fn reshape(&mut self, x: &Val, shape: &[u64], what: &str) -> R<Val> {
        if x.shape() == shape {
            return Ok(x.clone());
        }
        let attrs = Attrs::new().with("newshape", ints(shape));
        self.call("reshape", &[x], attrs, what)
    }

    fn transpose(&mut self, x: &Val, axes: &[i64], what: &str) -> R<Val> {
        self.call("transpose", &[x], Attrs::new().with("axes", AttrValue::Ints(axes.to_vec().into())), what)
    }

    /// `x[begin..end]` along `axis`.
    fn slice(&mut self, x: &Val, axis: i64, begin: u64, end: u64, what: &str) -> R<Val> {
        if begin == 0 && x.shape().get(axis as usize) == Some(&end) {
            return Ok(x.clone());
        }
        let attrs = Attrs::new()
            .with("begin", AttrValue::Ints(vec![begin as i64].into()))
            .with("end", AttrValue::Ints(vec![end as i64].into()))
            .with("axes", AttrValue::Ints(vec![axis].into()));
        self.call("strided_slice", &[x], attrs, what)
    }

    /// `x` cut along `axis` at `points`.
    fn split(&mut self, x: &Val, axis: i64, points: &[u64], what: &str) -> R<Vec<Val>> {
        if points.is_empty() {
            return Ok(vec![x.clone()]);
        }
        let attrs = Attrs::new().with("indices", ints(points)).with("axis", AttrValue::Int(axis));
        let name = format!("{}_{what}", self.base);
        Ok(self.cx.em.call_multi("split", &[x], attrs, &name)?)
    }

    /// Slice `d` of a `[num_directions, …]` tensor, without its first axis.
    fn direction(&mut self, x: &Val, d: u64, what: &str) -> R<Val> {
        let s = self.slice(x, 0, d, d + 1, what)?;
        let shape = x.shape()[1..].to_vec();
        self.reshape(&s, &shape, what)
    }

    fn concat(&mut self, xs: &[Val], axis: i64, what: &str) -> R<Val> {
        if let [x] = xs {
            return Ok(x.clone());
        }
        let refs: Vec<&Val> = xs.iter().collect();
        self.call("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(axis)), what)
    }

    /// `a @ Wᵀ` for the float layers (`dense`); DynamicQuantizeLSTM's quantized GEMM with the
    /// integer W (`recurrent` false) or R (`recurrent` true) otherwise.
    fn project(&mut self, a: &Val, wt: &DirWeights, recurrent: bool, what: &str) -> R<Val> {
        let w = if recurrent { &wt.r } else { &wt.w };
        match &wt.quant {
            None => self.call2("dense", a, w, what),
            Some([ws, wz, rs, rz]) => {
                let (scale, zp) = if recurrent { (rs, rz) } else { (ws, wz) };
                super::quant::quantized_gemm(self.cx, a, (w, scale, zp))
            }
        }
    }

    /// `a + b`, where `None` is a known zero.
    fn add_opt(&mut self, a: Val, b: Option<Val>, what: &str) -> R<Val> {
        match b {
            Some(b) => self.call2("add", &a, &b, what),
            None => Ok(a),
        }
    }

    /// Applies `act` to the pre-activation `x` of a gate, after the layer's `clip`.
    fn activate(&mut self, act: Act, x: &Val, what: &str) -> R<Val> {
        let x = match self.l.clip {
            Some(c) => {
                let attrs = Attrs::new().with("a_min", AttrValue::Float(-c)).with("a_max", AttrValue::Float(c));
                self.call("clip", &[x], attrs, &format!("{what}_clip"))?
            }
            None => x.clone(),
        };
        self.apply(act, &x, what)
    }

    /// Applies `act` to `x`.
    fn apply(&mut self, act: Act, x: &Val, what: &str) -> R<Val> {
        let x = x.clone();
        let zero = self.scalar(0.0);
        match act {
            Act::Relu => self.call("relu", &[&x], Attrs::new(), what),
            Act::Tanh => self.call("tanh", &[&x], Attrs::new(), what),
            Act::Sigmoid => self.call("sigmoid", &[&x], Attrs::new(), what),
            Act::Affine { alpha, beta } => {
                let ax = self.call2("multiply", &x, &self.scalar(alpha), what)?;
                self.call2("add", &ax, &self.scalar(beta), what)
            }
            Act::LeakyRelu { alpha } => {
                let neg = self.call2("less", &x, &zero, what)?;
                let ax = self.call2("multiply", &x, &self.scalar(alpha), what)?;
                self.call("where", &[&neg, &ax, &x], Attrs::new(), what)
            }
            Act::ThresholdedRelu { alpha } => {
                let above = self.call2("greater", &x, &self.scalar(alpha), what)?;
                self.call("where", &[&above, &x, &zero], Attrs::new(), what)
            }
            Act::ScaledTanh { alpha, beta } => {
                let bx = self.call2("multiply", &x, &self.scalar(beta), what)?;
                let t = self.call("tanh", &[&bx], Attrs::new(), what)?;
                self.call2("multiply", &t, &self.scalar(alpha), what)
            }
            Act::HardSigmoid { alpha, beta } => {
                let attrs = Attrs::new().with("alpha", AttrValue::Float(alpha)).with("beta", AttrValue::Float(beta));
                self.call("hard_sigmoid", &[&x], attrs, what)
            }
            Act::Elu { alpha } => {
                let neg = self.call2("less", &x, &zero, what)?;
                let e = self.call("exp", &[&x], Attrs::new(), what)?;
                let em1 = self.call2("subtract", &e, &self.scalar(1.0), what)?;
                let scaled = self.call2("multiply", &em1, &self.scalar(alpha), what)?;
                self.call("where", &[&neg, &scaled, &x], Attrs::new(), what)
            }
            Act::Softsign => {
                let a = self.call("abs", &[&x], Attrs::new(), what)?;
                let d = self.call2("add", &a, &self.scalar(1.0), what)?;
                self.call2("divide", &x, &d, what)
            }
            Act::Softplus => {
                // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|), which does not overflow.
                let a = self.call("abs", &[&x], Attrs::new(), what)?;
                let na = self.call("negative", &[&a], Attrs::new(), what)?;
                let e = self.call("exp", &[&na], Attrs::new(), what)?;
                let e1 = self.call2("add", &e, &self.scalar(1.0), what)?;
                let lg = self.call("log", &[&e1], Attrs::new(), what)?;
                let rl = self.call("relu", &[&x], Attrs::new(), what)?;
                self.call2("add", &rl, &lg, what)
            }
        }
    }

    fn weights(&mut self, d: u64) -> R<DirWeights> {
        let (l, h) = (self.l, self.l.hidden);
        let gh = l.kind.gates() * h;
        let w = self.direction(&l.w, d, "w")?;
        let r_all = self.direction(&l.r, d, "r")?;
        let (r, r_h) = match l.kind {
            Kind::Gru => (self.slice(&r_all, 0, 0, 2 * h, "r_zr")?, Some(self.slice(&r_all, 0, 2 * h, 3 * h, "r_h")?)),
            _ => (r_all, None),
        };
        let (bias_x, rb_h) = match &l.b {
            None => (None, None),
            Some(b) => {
                let bd = self.direction(b, d, "b")?;
                let wb = self.slice(&bd, 0, 0, gh, "wb")?;
                let rb = self.slice(&bd, 0, gh, 2 * gh, "rb")?;
                if l.kind == Kind::Gru && l.linear_before_reset {
                    // Rbh is added inside the reset gate's product, not to the projection.
                    let rb_zr = self.slice(&rb, 0, 0, 2 * h, "rb_zr")?;
                    let rb_h = self.slice(&rb, 0, 2 * h, 3 * h, "rb_h")?;
                    let rb_x = self.concat(&[rb_zr, self.zeros(&[h])], 0, "rb")?;
                    (Some(self.call2("add", &wb, &rb_x, "bias")?), Some(rb_h))
                } else {
                    (Some(self.call2("add", &wb, &rb, "bias")?), None)
                }
            }
        };
        let peep = match &l.p {
            None => None,
            Some(p) => {
                let pd = self.direction(p, d, "p")?;
                Some([
                    self.slice(&pd, 0, 0, h, "p_i")?,
                    self.slice(&pd, 0, h, 2 * h, "p_o")?,
                    self.slice(&pd, 0, 2 * h, 3 * h, "p_f")?,
                ])
            }
        };
        let quant = match &l.quant {
            None => None,
            Some(q) => {
                let mut per_dir = Vec::with_capacity(4);
                for (k, v) in q.iter().enumerate() {
                    per_dir.push(self.direction(v, d, if k % 2 == 0 { "scale" } else { "zero_point" })?);
                }
                Some(<[Val; 4]>::try_from(per_dir).map_err(|_| "four quantization parameters")?)
            }
        };
        Ok(DirWeights { w, r, r_h, bias_x, rb_h, peep, quant })
    }

    /// Initial state `d` of a `[num_directions, batch, hidden]` input; `None` is zero.
    fn initial(&mut self, v: &Option<Val>, d: u64, what: &str) -> R<Option<Val>> {
        match v {
            Some(v) => Ok(Some(self.direction(v, d, what)?)),
            None => Ok(None),
        }
    }

    /// Per time step, the `[batch, 1]` mask of the batch entries still in their sequence,
    /// and last the mask of the entries whose sequence is not empty; `None` where every entry
    /// is (no masking needed).
    fn masks(&mut self) -> R<Vec<Option<Val>>> {
        let l = self.l;
        let Some(lens) = &l.seq_lens else { return Ok(vec![None; l.seq as usize + 1]) };
        let lens = self.reshape(lens, &[l.batch, 1], "lens")?;
        let mut masks = Vec::with_capacity(l.seq as usize + 1);
        for t in (0..l.seq).chain([0]) {
            let tv = Val::Const(Arc::new(Constant::Dense(Tensor::scalar(DType::I32, t as f64))));
            let m = self.call2("less", &tv, &lens, "mask")?;
            let all = match m.as_const() {
                Some(c) => c.materialize().map_err(|e| e.to_string())?.to_f64s().iter().all(|&v| v != 0.0),
                None => false,
            };
            masks.push(if all { None } else { Some(m) });
        }
        Ok(masks)
    }

    /// Emits the layer; returns (Y, Y_h, Y_c) for the outputs in `wanted`.
    fn emit(&mut self, wanted: &[bool]) -> R<Vec<Option<Val>>> {
        let l = self.l;
        let (n, h, seq) = (l.batch, l.hidden, l.seq);
        let x = if l.layout == 1 { self.transpose(&l.x, &[1, 0, 2], "x")? } else { l.x.clone() };
        let (initial_h, initial_c) = if l.layout == 1 {
            // [batch, num_directions, hidden] to [num_directions, batch, hidden]; with one
            // direction the elements keep their order.
            let dirs = l.reverse.len() as u64;
            let mut t = |v: &Option<Val>, what: &str| -> R<Option<Val>> {
                v.as_ref()
                    .map(|v| {
                        if dirs == 1 {
                            self.reshape(v, &[1, n, h], what)
                        } else {
                            self.transpose(v, &[1, 0, 2], what)
                        }
                    })
                    .transpose()
            };
            (t(&l.initial_h, "initial_h")?, t(&l.initial_c, "initial_c")?)
        } else {
            (l.initial_h.clone(), l.initial_c.clone())
        };
        let masks = self.masks()?;
        let input_size = x.shape()[2];
        let x2 = self.reshape(&x, &[seq * n, input_size], "x")?;
        let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
        for (d, &reverse) in l.reverse.iter().enumerate() {
            let d = d as u64;
            let wt = self.weights(d)?;
            let acts = l.acts[d as usize].clone();
            // The input projection of every step at once.
            let xw = if seq == 0 { None } else { Some(self.project(&x2, &wt, false, "xw")?) };
            let xw = match (xw, wt.bias_x.clone()) {
                (Some(xw), bias) => Some(self.add_opt(xw, bias, "xw")?),
                (None, _) => None,
            };
            let xw_steps = match &xw {
                Some(xw) => {
                    let points: Vec<u64> = (1..seq).map(|t| t * n).collect();
                    self.split(xw, 0, &points, "xw_t")?
                }
                None => Vec::new(),
            };
            let mut hid = self.initial(&initial_h, d, "h0")?;
            let mut cell = self.initial(&initial_c, d, "c0")?;
            let mut y: Vec<Option<Val>> = vec![None; seq as usize];
            let order: Vec<u64> = if reverse { (0..seq).rev().collect() } else { (0..seq).collect() };
            for t in order {
                let xw_t = xw_steps.get(t as usize).ok_or("the input projection has fewer steps than X")?;
                let (h_new, c_new) = match l.kind {
                    Kind::Rnn => {
                        let rec = hid.as_ref().map(|hv| self.call2("dense", hv, &wt.r, "hr")).transpose()?;
                        let pre = self.add_opt(xw_t.clone(), rec, "pre")?;
                        (self.activate(acts[0], &pre, "h")?, None)
                    }
                    Kind::Lstm => {
                        let (hn, cn) = self.lstm_step(xw_t, &wt, &acts, hid.as_ref(), cell.as_ref())?;
                        (hn, Some(cn))
                    }
                    Kind::Gru => (self.gru_step(xw_t, &wt, &acts, hid.as_ref())?, None),
                };
                let mask = mask_at(&masks, t)?;
                let keep = |u: &mut Self, new: Val, old: Option<Val>, what: &str| -> R<Val> {
                    match &mask {
                        None => Ok(new),
                        Some(m) => {
                            let old = old.unwrap_or_else(|| u.zeros(&[n, h]));
                            u.call("where", &[m, &new, &old], Attrs::new(), what)
                        }
                    }
                };
                if wanted[0] {
                    y[t as usize] = Some(keep(self, h_new.clone(), None, "y")?);
                }
                let next_h = keep(self, h_new, hid.take(), "h")?;
                hid = Some(next_h);
                if let Some(cn) = c_new {
                    let next_c = keep(self, cn, cell.take(), "c")?;
                    cell = Some(next_c);
                }
            }
            if wanted[0] {
                let steps: Vec<Val> = y.into_iter().flatten().collect();
                let yd = if steps.is_empty() {
                    self.zeros(&[0, 1, n, h])
                } else {
                    let cat = self.concat(&steps, 0, "y")?;
                    self.reshape(&cat, &[seq, 1, n, h], "y")?
                };
                ys.push(yd);
            }
            // An empty sequence ends in zero states, not its initial ones.
            let nonempty = mask_at(&masks, seq)?;
            let last = |u: &mut Self, state: Option<Val>, what: &str| -> R<Val> {
                let zeros = u.zeros(&[n, h]);
                match (state, &nonempty) {
                    (Some(s), Some(m)) => u.call("where", &[m, &s, &zeros], Attrs::new(), what),
                    (Some(s), None) => Ok(s),
                    (None, _) => Ok(zeros),
                }
            };
            if wanted[1] {
                let h_last = last(self, hid, "h")?;
                hs.push(h_last);
            }
            if wanted[2] {
                let c_last = last(self, cell, "c")?;
                cs.push(c_last);
            }
        }
        let dirs = l.reverse.len() as u64;
        let y = if wanted[0] {
            let y = self.concat(&ys, 1, "y")?;
            Some(if l.layout == 1 { self.transpose(&y, &[2, 0, 1, 3], "y")? } else { y })
        } else {
            None
        };
        let finals = |u: &mut Self, states: &[Val], what: &str| -> R<Val> {
            let cat = u.concat(states, 0, what)?;
            let s = u.reshape(&cat, &[dirs, n, h], what)?;
            if l.layout == 1 {
                if dirs == 1 {
                    u.reshape(&s, &[n, 1, h], what)
                } else {
                    u.transpose(&s, &[1, 0, 2], what)
                }
            } else {
                Ok(s)
            }
        };
        let y_h = if wanted[1] { Some(finals(self, &hs, "y_h")?) } else { None };
        let y_c = if wanted[2] && l.kind == Kind::Lstm { Some(finals(self, &cs, "y_c")?) } else { None };
        Ok(vec![y, y_h, y_c])
    }

    /// One LSTM step: gates i, o, f, c (in ONNX's order), peepholes, the new cell and hidden
    /// state. `hid` / `cell` are `None` when known to be zero.
    fn lstm_step(
        &mut self,
        xw_t: &Val,
        wt: &DirWeights,
        acts: &[Act],
        hid: Option<&Val>,
        cell: Option<&Val>,
    ) -> R<(Val, Val)> {
        let h = self.l.hidden;
        let rec = hid.map(|hv| self.project(hv, wt, true, "hr")).transpose()?;
        let gates = self.add_opt(xw_t.clone(), rec, "gates")?;
        let g = self.split(&gates, 1, &[h, 2 * h, 3 * h], "gates")?;
        let [i, o, f, c] = <[Val; 4]>::try_from(g).map_err(|_| "split of the LSTM gates is not four tensors")?;
        let peep = |u: &mut Self, x: Val, k: usize, state: Option<&Val>, what: &str| -> R<Val> {
            match (&wt.peep, state) {
                (Some(p), Some(s)) => {
                    let ps = u.call2("multiply", &p[k], s, what)?;
                    u.call2("add", &x, &ps, what)
                }
                _ => Ok(x),
            }
        };
        let i = peep(self, i, 0, cell, "i")?;
        let i = self.activate(acts[0], &i, "i")?;
        let f = if self.l.input_forget {
            self.call2("subtract", &self.scalar(1.0), &i, "f")?
        } else {
            let f = peep(self, f, 2, cell, "f")?;
            self.activate(acts[0], &f, "f")?
        };
        let c = self.activate(acts[1], &c, "c")?;
        let ic = self.call2("multiply", &i, &c, "c")?;
        let c_new = match cell {
            Some(cv) => {
                let fc = self.call2("multiply", &f, cv, "c")?;
                self.call2("add", &fc, &ic, "c")?
            }
            None => ic,
        };
        let o = peep(self, o, 1, Some(&c_new), "o")?;
        let o = self.activate(acts[0], &o, "o")?;
        // clip bounds the gates' pre-activations, not the cell state h() is applied to: the
        // spec's "input of activations" reads both ways, and onnxruntime does not clip C.
        let hc = self.apply(acts[2], &c_new, "hc")?;
        let h_new = self.call2("multiply", &o, &hc, "h")?;
        Ok((h_new, c_new))
    }

    /// One GRU step: gates z, r, h (in ONNX's order), with or without `linear_before_reset`.
    fn gru_step(&mut self, xw_t: &Val, wt: &DirWeights, acts: &[Act], hid: Option<&Val>) -> R<Val> {
        let h = self.l.hidden;
        let g = self.split(xw_t, 1, &[h, 2 * h], "gates")?;
        let [zx, rx, hx] = <[Val; 3]>::try_from(g).map_err(|_| "split of the GRU gates is not three tensors")?;
        let (z_pre, r_pre) = match hid {
            Some(hv) => {
                let zr = self.call2("dense", hv, &wt.r, "hr")?;
                let parts = self.split(&zr, 1, &[h], "hr")?;
                let [zh, rh] = <[Val; 2]>::try_from(parts).map_err(|_| "split of the GRU gates is not two tensors")?;
                (self.call2("add", &zx, &zh, "z")?, self.call2("add", &rx, &rh, "r")?)
            }
            None => (zx, rx),
        };
        let z = self.activate(acts[0], &z_pre, "z")?;
        let r = self.activate(acts[0], &r_pre, "r")?;
        let r_h = wt.r_h.as_ref().ok_or("GRU weights lack the h rows of R")?;
        let rec = if self.l.linear_before_reset {
            // r * (H Rh^T + Rbh)
            let lin = hid.map(|hv| self.call2("dense", hv, r_h, "hh")).transpose()?;
            let lin = match (lin, wt.rb_h.clone()) {
                (Some(a), Some(b)) => Some(self.call2("add", &a, &b, "hh")?),
                (a, b) => a.or(b),
            };
            lin.map(|v| self.call2("multiply", &r, &v, "hh")).transpose()?
        } else {
            // (r * H) Rh^T
            match hid {
                Some(hv) => {
                    let rh = self.call2("multiply", &r, hv, "rh")?;
                    Some(self.call2("dense", &rh, r_h, "hh")?)
                }
                None => None,
            }
        };
        let pre = self.add_opt(hx, rec, "hc")?;
        let hc = self.activate(acts[1], &pre, "hc")?;
        // H = (1 - z) * h~ + z * H
        let one_z = self.call2("subtract", &self.scalar(1.0), &z, "h")?;
        let a = self.call2("multiply", &one_z, &hc, "h")?;
        match hid {
            Some(hv) => {
                let zh = self.call2("multiply", &z, hv, "h")?;
                self.call2("add", &a, &zh, "h")
            }
            None => Ok(a),
        }
    }
}

/// Mask `i` of [`Unroll::masks`].
fn mask_at(masks: &[Option<Val>], i: u64) -> R<Option<Val>> {
    masks.get(i as usize).cloned().ok_or_else(|| NodeError::from(format!("no sequence mask for time step {i}")))
}

fn ints(v: &[u64]) -> AttrValue {
    AttrValue::Ints(v.iter().map(|&d| d as i64).collect::<Vec<_>>().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn activation_parameters_go_to_the_activations_that_take_them_in_order() {
        let acts = parse_activations(&names(&["Sigmoid", "LeakyRelu", "hardsigmoid"]), &[0.1, 0.3], &[0.7]).unwrap();
        assert_eq!(
            acts,
            vec![
                Act::Sigmoid,
                Act::LeakyRelu { alpha: 0.1f32 as f64 },
                Act::HardSigmoid { alpha: 0.3f32 as f64, beta: 0.7f32 as f64 }
            ]
        );
    }

    #[test]
    fn missing_activation_parameters_take_the_onnx_operators_defaults() {
        let acts =
            parse_activations(&names(&["LeakyRelu", "ThresholdedRelu", "HardSigmoid", "Elu", "Affine"]), &[], &[])
                .unwrap();
        assert_eq!(
            acts,
            vec![
                Act::LeakyRelu { alpha: 0.01 },
                Act::ThresholdedRelu { alpha: 1.0 },
                Act::HardSigmoid { alpha: 0.2, beta: 0.5 },
                Act::Elu { alpha: 1.0 },
                Act::Affine { alpha: 1.0, beta: 0.0 },
            ]
        );
    }

    #[test]
    fn scaled_tanh_without_parameters_and_left_over_parameters_are_errors() {
        let e = parse_activations(&names(&["ScaledTanh"]), &[1.0], &[]).unwrap_err();
        assert!(e.to_string().contains("ScaledTanh needs a value in `activation_beta`"), "{e}");
        let e = parse_activations(&names(&["Tanh", "LeakyRelu"]), &[0.0, 0.1], &[]).unwrap_err();
        assert!(e.to_string().contains("1 / 0 values more than the activations"), "{e}");
    }

    #[test]
    fn an_unknown_activation_is_named() {
        let e = parse_activations(&names(&["Swish"]), &[], &[]).unwrap_err();
        assert!(e.to_string().contains("unknown activation function \"Swish\""), "{e}");
    }
}
