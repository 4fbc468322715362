//! ONNX operators to passel operator calls, one converter per ONNX operator type, with the
//! per-opset differences of the default domain (attributes that became inputs in opsets 10–18).
//!
//! Every attribute a converter reads is marked; an attribute left unread is reported as
//! unhandled, so an option passel cannot honour is an error, never silently dropped. Inputs
//! that must be known at import (shapes, axes, pads, scales, …) must be constants after
//! folding; otherwise the node is rejected with the input named.

use std::sync::Arc;

mod microsoft;

pub use microsoft::MICROSOFT_OPS;

use super::emit::{Emitter, Val};
use super::proto::onnx as pb;
use super::proto::shallow::{NodeHeader, NodeTensors, PackedFloats};
use super::tensor::{self, tensor_i64s};
use super::{ExternalData, NodeError};
use crate::ir::{AttrValue, Attrs, Constant, DType, Fill, Tensor, TensorType};

mod attention;
mod dropout;
mod gather;
mod layout;
mod linalg;
mod loss;
mod nn;
mod quant;
mod resize;
mod rnn;
mod signal;
mod sort;
mod state;
mod tfidf;

/// A converter: one ONNX node (its attributes, inputs and opset in [`Cx`]) to passel calls,
/// returning the node's outputs in order (`None` for outputs passel does not compute).
type Convert = fn(&mut Cx<'_>) -> R<Vec<Option<Val>>>;

/// One row of [`CONVERTERS`].
struct OnnxOp {
    /// ONNX operator type (default domain).
    name: &'static str,
    /// (first opset, most inputs), oldest first: the most inputs its ONNX schema takes
    /// (`max_input`; [`VARIADIC`] for variadic ones) from that opset on.
    max_inputs: &'static [(i64, usize)],
    /// The converter.
    convert: Convert,
}

/// The supported operators: for each its input counts per opset and its converter. This is
/// the one list of ONNX operators: [`SUPPORTED_OPS`], [`max_inputs`] and the dispatch of
/// [`convert`] are made from it. A row is `"Op": inputs[, from OPSET: inputs]… => converter;`
/// where the converter is a `fn(&mut Cx) -> R<Vec<Option<Val>>>` (a function of this module
/// or its family files, or a non-capturing closure).
macro_rules! onnx_ops {
    ($($name:literal: $inputs:expr $(, from $since:literal: $later:expr)* => $convert:expr;)*) => {
        /// ONNX operator types (default domain) the importer converts.
        pub const SUPPORTED_OPS: &[&str] = &[$($name),*];
        /// One row per entry of [`SUPPORTED_OPS`], in the same order.
        static CONVERTERS: &[OnnxOp] = &[$(OnnxOp {
            name: $name,
            max_inputs: &[(1, $inputs) $(, ($since, $later))*],
            convert: $convert,
        }),*];
    };
}

/// The input count of a variadic operator (no limit).
const VARIADIC: usize = usize::MAX;

onnx_ops! {
    "Abs": 1 => |cx| unary(cx, "abs");
    "Acos": 1 => |cx| unary(cx, "acos");
    "Acosh": 1 => |cx| unary(cx, "acosh");
    "Add": 2 => |cx| binary(cx, "add");
    "AffineGrid": 2 => nn::affine_grid;
    "And": 2 => |cx| binary(cx, "logical_and");
    "ArgMax": 1 => |cx| sort::arg(cx, "argmax");
    "ArgMin": 1 => |cx| sort::arg(cx, "argmin");
    "Asin": 1 => |cx| unary(cx, "asin");
    "Asinh": 1 => |cx| unary(cx, "asinh");
    "Atan": 1 => |cx| unary(cx, "atan");
    "Atanh": 1 => |cx| unary(cx, "atanh");
    "Attention": 6, from 24: 7 => attention::attention;
    "AveragePool": 1 => |cx| pool(cx, PoolKind::Avg);
    "BatchNormalization": 5 => batch_norm;
    "BitCast": 1 => bitcast;
    "BitShift": 2 => bit_shift;
    "BitwiseAnd": 2 => |cx| binary(cx, "bitwise_and");
    "BitwiseNot": 1 => |cx| unary(cx, "bitwise_not");
    "BitwiseOr": 2 => |cx| binary(cx, "bitwise_or");
    "BitwiseXor": 2 => |cx| binary(cx, "bitwise_xor");
    "BlackmanWindow": 1 => |cx| signal::window(cx, signal::SignalWindow::Blackman);
    "Cast": 1 => cast;
    "CastLike": 2 => cast_like;
    "CausalConvWithState": 4 => state::causal_conv_with_state;
    "Ceil": 1 => |cx| unary(cx, "ceil");
    "Celu": 1 => |cx| param_unary(cx, "celu", &[("alpha", 1.0)]);
    "CenterCropPad": 2 => layout::center_crop_pad;
    "Clip": 1, from 11: 3 => clip;
    "Col2Im": 3 => nn::col2im;
    "Concat": VARIADIC => concat;
    "Constant": 0 => constant;
    "ConstantOfShape": 1 => constant_of_shape;
    "Conv": 3 => conv;
    "ConvInteger": 4 => quant::conv_integer;
    "ConvTranspose": 3 => conv_transpose;
    "Cos": 1 => |cx| unary(cx, "cos");
    "Cosh": 1 => |cx| unary(cx, "cosh");
    "CumProd": 2 => |cx| sort::cum(cx, "cumprod");
    "CumSum": 2 => |cx| sort::cum(cx, "cumsum");
    "DFT": 2, from 20: 3 => signal::dft;
    "DeformConv": 5 => nn::deform_conv;
    "DepthToSpace": 1 => layout::depth_to_space;
    "DequantizeLinear": 3 => quant::dequantize_linear;
    "Det": 1 => linalg::det;
    "Div": 2 => |cx| binary(cx, "divide");
    "Dropout": 1, from 12: 3 => dropout::dropout;
    "DynamicQuantizeLinear": 1 => quant::dynamic_quantize_linear;
    "Einsum": VARIADIC => nn::einsum;
    "Elu": 1 => |cx| param_unary(cx, "elu", &[("alpha", 1.0)]);
    "Equal": 2 => |cx| binary(cx, "equal");
    "Erf": 1 => |cx| unary(cx, "erf");
    "Exp": 1 => |cx| unary(cx, "exp");
    "Expand": 2 => expand;
    "EyeLike": 1 => layout::eye_like;
    "Flatten": 1 => flatten;
    "FlexAttention": 3 => control_flow;
    "Floor": 1 => |cx| unary(cx, "floor");
    "GRU": 6 => rnn::gru;
    "Gather": 2 => gather;
    "GatherElements": 2 => gather::gather_elements;
    "GatherND": 2 => gather::gather_nd;
    "Gelu": 1 => gelu;
    "Gemm": 3 => gemm;
    "GlobalAveragePool": 1 => |cx| global_pool(cx, "global_avg_pool2d");
    "GlobalMaxPool": 1 => |cx| global_pool(cx, "global_max_pool2d");
    "Greater": 2 => |cx| binary(cx, "greater");
    "GreaterOrEqual": 2 => |cx| binary(cx, "greater_equal");
    "GridSample": 2 => nn::grid_sample;
    "GroupNormalization": 3 => nn::group_normalization;
    "HammingWindow": 1 => |cx| signal::window(cx, signal::SignalWindow::Hamming);
    "HannWindow": 1 => |cx| signal::window(cx, signal::SignalWindow::Hann);
    "HardSigmoid": 1 => |cx| param_unary(cx, "hard_sigmoid", &[("alpha", 0.2), ("beta", 0.5)]);
    "HardSwish": 1 => |cx| unary(cx, "hard_swish");
    "Hardmax": 1 => sort::hardmax;
    "Identity": 1 => |cx| one(cx.input(0)?);
    "If": 1 => control_flow;
    "InstanceNormalization": 3 => instance_norm;
    "IsInf": 1 => is_inf;
    "IsNaN": 1 => |cx| unary(cx, "isnan");
    "LRN": 1 => lrn;
    "LSTM": 8 => rnn::lstm;
    "LayerNormalization": 3 => layer_norm;
    "LeakyRelu": 1 => |cx| param_unary(cx, "leaky_relu", &[("alpha", 0.01)]);
    "Less": 2 => |cx| binary(cx, "less");
    "LessOrEqual": 2 => |cx| binary(cx, "less_equal");
    "LinearAttention": 6 => state::linear_attention;
    "Log": 1 => |cx| unary(cx, "log");
    "LogSoftmax": 1 => log_softmax;
    "Loop": VARIADIC => control_flow;
    "LpNormalization": 1 => nn::lp_normalization;
    "LpPool": 1 => |cx| pool(cx, PoolKind::Lp);
    "MatMul": 2 => |cx| binary(cx, "matmul");
    "MatMulInteger": 4 => quant::matmul_integer;
    "Max": VARIADIC => |cx| variadic(cx, "maximum");
    "MaxPool": 1 => |cx| pool(cx, PoolKind::Max);
    "MaxUnpool": 3 => nn::max_unpool;
    "Mean": VARIADIC => mean;
    "MeanVarianceNormalization": 1 => nn::mean_variance_normalization;
    "MelWeightMatrix": 5 => signal::mel_weight_matrix;
    "Min": VARIADIC => |cx| variadic(cx, "minimum");
    "Mish": 1 => |cx| unary(cx, "mish");
    "Mod": 2 => modulo;
    "Mul": 2 => |cx| binary(cx, "multiply");
    "Neg": 1 => |cx| unary(cx, "negative");
    "NegativeLogLikelihoodLoss": 3 => loss::nll_loss;
    "Not": 1 => |cx| unary(cx, "logical_not");
    "OneHot": 3 => layout::one_hot;
    "Or": 2 => |cx| binary(cx, "logical_or");
    "PRelu": 2 => prelu;
    "Pad": 1, from 11: 3, from 18: 4 => pad;
    "Pow": 2 => pow;
    "QLinearConv": 9 => quant::qlinear_conv;
    "QLinearMatMul": 8 => quant::qlinear_matmul;
    "QuantizeLinear": 3 => quant::quantize_linear;
    "RMSNormalization": 2 => rms_norm;
    "RNN": 6 => rnn::rnn;
    "Range": 3 => range;
    "Reciprocal": 1 => |cx| unary(cx, "reciprocal");
    "ReduceL1": 1, from 18: 2 => |cx| reduce_composite(cx, Composite::L1);
    "ReduceL2": 1, from 18: 2 => |cx| reduce_composite(cx, Composite::L2);
    "ReduceLogSum": 1, from 18: 2 => |cx| reduce_composite(cx, Composite::LogSum);
    "ReduceLogSumExp": 1, from 18: 2 => |cx| reduce_composite(cx, Composite::LogSumExp);
    "ReduceMax": 1, from 18: 2 => |cx| reduce(cx, "max", 18);
    "ReduceMean": 1, from 18: 2 => |cx| reduce(cx, "mean", 18);
    "ReduceMin": 1, from 18: 2 => |cx| reduce(cx, "min", 18);
    "ReduceProd": 1, from 18: 2 => |cx| reduce(cx, "prod", 18);
    "ReduceSum": 1, from 13: 2 => |cx| reduce(cx, "sum", 13);
    "ReduceSumSquare": 1, from 18: 2 => |cx| reduce_composite(cx, Composite::SumSquare);
    "Relu": 1 => |cx| unary(cx, "relu");
    "Reshape": 2 => reshape;
    "Resize": 2, from 11: 4 => resize::resize;
    "ReverseSequence": 2 => layout::reverse_sequence;
    "RoiAlign": 3 => nn::roi_align;
    "RotaryEmbedding": 4 => attention::rotary_embedding;
    "Round": 1 => |cx| unary(cx, "round");
    "STFT": 4 => signal::stft;
    "Scan": VARIADIC => control_flow;
    "Scatter": 3 => gather::scatter_elements;
    "ScatterElements": 3 => gather::scatter_elements;
    "ScatterND": 3 => gather::scatter_nd;
    "Selu": 1 => |cx| param_unary(cx, "selu", &[("alpha", 1.673_263_192_176_818_8), ("gamma", 1.050_701_022_148_132_3)]);
    "Shape": 1 => shape;
    "Shrink": 1 => |cx| param_unary(cx, "shrink", &[("bias", 0.0), ("lambd", 0.5)]);
    "Sigmoid": 1 => |cx| unary(cx, "sigmoid");
    "Sign": 1 => |cx| unary(cx, "sign");
    "SimplifiedLayerNormalization": 2 => microsoft::simplified_layer_norm;
    "Sin": 1 => |cx| unary(cx, "sin");
    "Sinh": 1 => |cx| unary(cx, "sinh");
    "Size": 1 => size;
    "Slice": 1, from 10: 5 => slice;
    "Softmax": 1 => softmax;
    "SoftmaxCrossEntropyLoss": 3 => loss::softmax_cross_entropy_loss;
    "Softplus": 1 => |cx| unary(cx, "softplus");
    "Softsign": 1 => |cx| unary(cx, "softsign");
    "SpaceToDepth": 1 => layout::space_to_depth;
    "Split": 1, from 13: 2 => split;
    "Sqrt": 1 => |cx| unary(cx, "sqrt");
    "Squeeze": 1, from 13: 2 => squeeze;
    "Sub": 2 => |cx| binary(cx, "subtract");
    "Sum": VARIADIC => |cx| variadic(cx, "add");
    "SwiGLU": 2 => nn::swiglu;
    "Swish": 1 => nn::swish;
    "Tan": 1 => |cx| unary(cx, "tan");
    "Tanh": 1 => |cx| unary(cx, "tanh");
    "TensorScatter": 3 => gather::tensor_scatter;
    "TfIdfVectorizer": 1 => tfidf::tfidf_vectorizer;
    "ThresholdedRelu": 1 => |cx| param_unary(cx, "thresholded_relu", &[("alpha", 1.0)]);
    "Tile": 2 => layout::tile;
    "TopK": 1, from 10: 2 => sort::topk;
    "Transpose": 1 => transpose;
    "Trilu": 2 => trilu;
    "Unsqueeze": 1, from 13: 2 => unsqueeze;
    "Upsample": 2 => resize::resize;
    "Where": 3 => |cx| ternary(cx, "where");
    "Xor": 2 => |cx| binary(cx, "logical_xor");
}

/// `If`, `Loop`, `Scan` and `FlexAttention` are converted with their subgraphs by
/// `control.rs`, never here.
fn control_flow(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    Err(NodeError::Structure(format!("`{}` is converted with its subgraphs, not as a plain node", cx.node.op_type())))
}

/// The row of supported operator `op`.
fn row(op: &str) -> Option<&'static OnnxOp> {
    CONVERTERS.iter().find(|r| r.name == op)
}

/// The most inputs a node of supported operator `op` takes at `opset`.
pub(super) fn max_inputs(op: &str, opset: i64) -> Option<usize> {
    row(op)?.max_inputs.iter().rev().find(|&&(since, _)| since <= opset).map(|&(_, n)| n)
}

type R<T> = Result<T, NodeError>;

/// One node being converted.
struct Cx<'a> {
    em: &'a mut Emitter,
    node: &'a NodeHeader<'a>,
    attribute: Vec<pb::AttributeProto>,
    /// The attributes' tensors, taken out of `attribute` (so a Constant's weights move into its
    /// constant), each with its packed `float_data` when that view decoded.
    tensors: Vec<Option<(pb::TensorProto, Option<PackedFloats>)>>,
    opset: i64,
    inputs: Vec<Option<Val>>,
    /// Where tensor attributes stored as external data come from (a `Constant` whose `value`
    /// was saved with `convert_attribute=True`).
    ext: Option<&'a dyn ExternalData>,
    read: Vec<bool>,
    /// Base name of the variables: the node's first output.
    name: String,
}

/// Converts the node of header `node` and attributes `attribute` (its body, [`NodeBody`])
/// and returns its outputs in order (`None` for outputs passel does not compute, such as
/// training statistics). `packed` is the node's attributes seen for packed `float_data`
/// ([`NodeTensors`]), when that view decoded; `ext` resolves external-data tensors. Errors are
/// messages about this node.
pub(super) fn convert<'a>(
    em: &'a mut Emitter,
    node: &'a NodeHeader<'a>,
    (mut attribute, packed): (Vec<pb::AttributeProto>, Option<NodeTensors>),
    opset: i64,
    inputs: Vec<Option<Val>>,
    ext: Option<&'a dyn ExternalData>,
) -> R<Vec<Option<Val>>> {
    // ONNX's checker and runtimes refuse extra inputs; converters read only the inputs they
    // know, so an extra one would be silently dropped.
    let op = node.op_type();
    let microsoft = node.domain() == "com.microsoft";
    if let Some(max) = max_inputs(op, opset).filter(|&max| !microsoft && node.n_inputs() > max) {
        return Err(NodeError::TooManyInputs { found: node.n_inputs(), op: op.to_string(), opset, max });
    }
    let name = node.outputs().next().unwrap_or_default().to_string();
    let mut packed = packed.map(|p| p.attribute).filter(|p| p.len() == attribute.len()).map(Vec::into_iter);
    let tensors = attribute
        .iter_mut()
        .map(|a| {
            let p = packed.as_mut().and_then(Iterator::next).and_then(|p| p.t);
            a.t.take().map(|t| (t, p))
        })
        .collect();
    let read = vec![false; attribute.len()];
    let mut cx = Cx { em, node, attribute, tensors, opset, inputs, ext, read, name };
    let outs = if microsoft { microsoft::convert_op(&mut cx)? } else { convert_op(&mut cx)? };
    if let Some(i) = cx.read.iter().position(|r| !r) {
        return Err(NodeError::UnhandledAttribute(cx.attribute[i].name().to_string()));
    }
    let mut outs: Vec<Option<Val>> = outs;
    outs.resize(node.n_outputs(), None);
    Ok(outs)
}

fn one(v: Val) -> R<Vec<Option<Val>>> {
    Ok(vec![Some(v)])
}

fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r.max(1)).contains(&a) && (a < r || rank == 0) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}").into())
    }
}

fn ints(v: &[u64]) -> AttrValue {
    AttrValue::Ints(v.iter().map(|&d| d as i64).collect::<Vec<_>>().into())
}

fn ints_i(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec().into())
}

impl<'a> Cx<'a> {
    // ---- attributes -------------------------------------------------------------------

    fn attr(&mut self, key: &str) -> Option<&pb::AttributeProto> {
        let i = self.attr_index(key)?;
        Some(&self.attribute[i])
    }

    /// The index of attribute `key`, marked as read.
    fn attr_index(&mut self, key: &str) -> Option<usize> {
        let i = self.attribute.iter().position(|a| a.name() == key)?;
        self.read[i] = true;
        Some(i)
    }

    fn kind_err(key: &str, want: &'static str) -> NodeError {
        NodeError::AttributeKind { attr: key.to_string(), want }
    }

    fn int_opt(&mut self, key: &str) -> R<Option<i64>> {
        use pb::attribute_proto::AttributeType as T;
        match self.attr(key) {
            None => Ok(None),
            Some(a) if matches!(a.r#type(), T::Int | T::Undefined) && a.i.is_some() => Ok(a.i),
            Some(_) => Err(Self::kind_err(key, "an int")),
        }
    }

    fn int(&mut self, key: &str, default: i64) -> R<i64> {
        Ok(self.int_opt(key)?.unwrap_or(default))
    }

    fn float_opt(&mut self, key: &str) -> R<Option<f64>> {
        use pb::attribute_proto::AttributeType as T;
        match self.attr(key) {
            None => Ok(None),
            Some(a) if matches!(a.r#type(), T::Float | T::Undefined) && a.f.is_some() => Ok(a.f.map(f64::from)),
            Some(_) => Err(Self::kind_err(key, "a float")),
        }
    }

    fn float(&mut self, key: &str, default: f64) -> R<f64> {
        Ok(self.float_opt(key)?.unwrap_or(default))
    }

    fn ints_opt(&mut self, key: &str) -> R<Option<Vec<i64>>> {
        use pb::attribute_proto::AttributeType as T;
        match self.attr(key) {
            None => Ok(None),
            Some(a) if matches!(a.r#type(), T::Ints | T::Undefined) => Ok(Some(a.ints.clone())),
            Some(_) => Err(Self::kind_err(key, "a list of ints")),
        }
    }

    fn floats_opt(&mut self, key: &str) -> R<Option<Vec<f32>>> {
        use pb::attribute_proto::AttributeType as T;
        match self.attr(key) {
            None => Ok(None),
            Some(a) if matches!(a.r#type(), T::Floats | T::Undefined) => Ok(Some(a.floats.clone())),
            Some(_) => Err(Self::kind_err(key, "a list of floats")),
        }
    }

    fn string(&mut self, key: &str, default: &str) -> R<String> {
        use pb::attribute_proto::AttributeType as T;
        match self.attr(key) {
            None => Ok(default.to_string()),
            Some(a) if matches!(a.r#type(), T::String | T::Undefined) && a.s.is_some() => {
                let s = a.s.as_deref().unwrap_or_default();
                String::from_utf8(s.to_vec()).map_err(|_| NodeError::AttributeNotUtf8(key.to_string()))
            }
            Some(_) => Err(Self::kind_err(key, "a string")),
        }
    }

    /// Tensor attribute `key`, taken: reading it twice gives `None` the second time.
    fn tensor_attr(&mut self, key: &str) -> R<Option<Constant>> {
        use pb::attribute_proto::AttributeType as T;
        let Some(i) = self.attr_index(key) else { return Ok(None) };
        if !matches!(self.attribute[i].r#type(), T::Tensor | T::Undefined) {
            return Err(Self::kind_err(key, "a tensor"));
        }
        match self.tensors.get_mut(i).and_then(Option::take) {
            Some((t, packed)) => tensor::constant(t, packed, self.ext)
                .map(Some)
                .map_err(|error| NodeError::AttributeTensor { attr: key.to_string(), error }),
            None => Err(Self::kind_err(key, "a tensor")),
        }
    }

    /// Reads an attribute that must have the value `ok` says is fine (e.g. a flag that only
    /// matters for an output passel does not compute).
    fn int_must(&mut self, key: &str, ok: impl Fn(i64) -> bool, why: &str) -> R<()> {
        match self.int_opt(key)? {
            Some(v) if !ok(v) => {
                Err(NodeError::UnsupportedValue { attr: key.to_string(), value: v.to_string(), why: why.to_string() })
            }
            _ => Ok(()),
        }
    }

    // ---- inputs -----------------------------------------------------------------------

    fn opt(&self, i: usize) -> Option<Val> {
        self.inputs.get(i).cloned().flatten()
    }

    fn input(&self, i: usize) -> R<Val> {
        self.opt(i).ok_or(NodeError::MissingInput(i))
    }

    fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Input `i` as exact integers; it must be known at import. `None` when absent.
    fn const_ints(&self, i: usize, what: &str) -> R<Option<Vec<i64>>> {
        let Some(v) = self.opt(i) else { return Ok(None) };
        let c = v.as_const().ok_or_else(|| NodeError::NotConstant {
            index: i,
            what: what.to_string(),
            kind: "shape expression",
        })?;
        let t = c.materialize()?;
        tensor_i64s(&t)
            .map(Some)
            .ok_or_else(|| NodeError::from(format!("input {i} ({what}) must be int64 or int32, got {}", t.dtype())))
    }

    /// Input `i` as floats; it must be known at import. `None` when absent.
    fn const_floats(&self, i: usize, what: &str) -> R<Option<Vec<f64>>> {
        let Some(v) = self.opt(i) else { return Ok(None) };
        let c = v.as_const().ok_or_else(|| NodeError::NotConstant {
            index: i,
            what: what.to_string(),
            kind: "expression",
        })?;
        Ok(Some(c.materialize()?.to_f64s()))
    }

    // ---- emission ---------------------------------------------------------------------

    fn call(&mut self, op: &str, args: &[&Val], attrs: Attrs) -> R<Val> {
        let name = self.name.clone();
        Ok(self.em.call(op, args, attrs, &name)?)
    }

    /// An intermediate call (its variable is named after the output plus the operator).
    fn call_tmp(&mut self, op: &str, args: &[&Val], attrs: Attrs) -> R<Val> {
        let name = format!("{}_{op}", self.name);
        Ok(self.em.call(op, args, attrs, &name)?)
    }

    fn reshape(&mut self, x: &Val, shape: &[u64], tmp: bool) -> R<Val> {
        if x.shape() == shape {
            return Ok(x.clone());
        }
        let attrs = Attrs::new().with("newshape", ints(shape));
        if tmp {
            self.call_tmp("reshape", &[x], attrs)
        } else {
            self.call("reshape", &[x], attrs)
        }
    }

    fn scalar(dtype: DType, v: f64) -> Val {
        Val::Const(Arc::new(Constant::Dense(Tensor::scalar(dtype, v))))
    }
}

fn product(dims: &[u64]) -> R<u64> {
    dims.iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| NodeError::from(format!("dimensions {dims:?} overflow")))
}

fn convert_op(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    match row(cx.node.op_type()) {
        Some(r) => (r.convert)(cx),
        None => Err(format!("operator `{}` is not supported", cx.node.op_type()).into()),
    }
}

fn ternary(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let (c, a, b) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    one(cx.call(op, &[&c, &a, &b], Attrs::new())?)
}

/// A unary operator with float attributes: each `(key, default)` is read from the node and
/// passed on under the same name.
fn param_unary(cx: &mut Cx<'_>, op: &str, keys: &[(&str, f64)]) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let mut attrs = Attrs::new();
    for &(key, default) in keys {
        attrs.set(key, AttrValue::Float(cx.float(key, default)?));
    }
    one(cx.call(op, &[&x], attrs)?)
}

fn gelu(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let approx = cx.string("approximate", "none")?;
    if approx != "none" && approx != "tanh" {
        return Err(format!("attribute `approximate` = {approx:?} is not supported (none, tanh)").into());
    }
    one(cx.call("gelu", &[&x], Attrs::new().with("approximate", AttrValue::Str(approx.into())))?)
}

fn lrn(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let size = cx.int_opt("size")?.ok_or("attribute `size` is required")?;
    let attrs = Attrs::new()
        .with("size", AttrValue::Int(size))
        .with("alpha", AttrValue::Float(cx.float("alpha", 1e-4)?))
        .with("beta", AttrValue::Float(cx.float("beta", 0.75)?))
        .with("bias", AttrValue::Float(cx.float("bias", 1.0)?));
    one(cx.call("lrn", &[&x], attrs)?)
}

/// GlobalAveragePool / GlobalMaxPool over any number of spatial axes (1-D, 2-D, 3-D, …): the
/// spatial axes are flattened into one, pooled by the 2-D operator as `[N, C, S, 1]`, and the
/// result reshaped to `[N, C, 1, …, 1]`. Averaging or taking the maximum over all spatial
/// elements does not depend on their arrangement, so this is exact.
fn global_pool(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    if shape.len() < 3 {
        return Err(format!("needs an input of rank 3 or more (N, C, spatial…), got rank {}", shape.len()).into());
    }
    if shape.len() == 4 {
        return one(cx.call(op, &[&x], Attrs::new())?);
    }
    let spatial = product(&shape[2..])?;
    let x4 = cx.reshape(&x, &[shape[0], shape[1], spatial, 1], true)?;
    let y = cx.call_tmp(op, &[&x4], Attrs::new())?;
    let mut out = shape[..2].to_vec();
    out.extend(std::iter::repeat_n(1, shape.len() - 2));
    one(cx.reshape(&y, &out, false)?)
}

fn trilu(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let upper = cx.int("upper", 1)? != 0;
    let k = match cx.const_ints(1, "k")? {
        Some(v) if v.len() == 1 => v[0],
        Some(v) => return Err(format!("input 1 (k) must be a scalar, got {} values", v.len()).into()),
        None => 0,
    };
    let attrs = Attrs::new().with("upper", AttrValue::Bool(upper)).with("k", AttrValue::Int(k));
    one(cx.call("trilu", &[&x], attrs)?)
}

fn is_inf(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let attrs = Attrs::new()
        .with("detect_positive", AttrValue::Bool(cx.int("detect_positive", 1)? != 0))
        .with("detect_negative", AttrValue::Bool(cx.int("detect_negative", 1)? != 0));
    one(cx.call("isinf", &[&x], attrs)?)
}

fn modulo(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let fmod = match cx.int("fmod", 0)? {
        0 => false,
        1 => true,
        v => return Err(format!("attribute `fmod` must be 0 or 1, got {v}").into()),
    };
    one(cx.call("mod", &[&a, &b], Attrs::new().with("fmod", AttrValue::Bool(fmod)))?)
}

fn bit_shift(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let dir = cx.string("direction", "")?;
    let op = match dir.as_str() {
        "LEFT" => "left_shift",
        "RIGHT" => "right_shift",
        "" => return Err("attribute `direction` is required (LEFT or RIGHT)".into()),
        other => return Err(format!("attribute `direction` must be LEFT or RIGHT, got {other:?}").into()),
    };
    one(cx.call(op, &[&a, &b], Attrs::new())?)
}

/// BitCast: the bytes of the input read as the `to` type (of the same width).
fn bitcast(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let to = cx.int_opt("to")?.ok_or("attribute `to` is required")?;
    let dtype = tensor::dtype_of(to as i32).map_err(|e| NodeError::from(format!("bitcast target: {e}")))?;
    if x.ty().dtype == dtype {
        return one(x);
    }
    one(cx.call("bitcast", &[&x], Attrs::new().with("dtype", AttrValue::DType(dtype)))?)
}

fn cast_like(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, like) = (cx.input(0)?, cx.input(1)?);
    // `saturate` only matters for float8 targets, which passel does not have.
    cx.int_opt("saturate")?;
    let dtype = like.ty().dtype;
    if x.ty().dtype == dtype {
        return one(x);
    }
    one(cx.call("cast", &[&x], Attrs::new().with("dtype", AttrValue::DType(dtype)))?)
}

/// Size: the element count of the input, an int64 scalar known at import.
fn size(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let n = product(&x.shape())?;
    let n =
        i64::try_from(n).map_err(|_| NodeError::from(format!("the input has {n} elements, more than int64 holds")))?;
    one(Val::Const(Arc::new(Constant::Dense(Tensor(crate::ir::TensorData::I64(ndarray::ArcArray::from_elem(
        ndarray::IxDyn(&[]),
        n,
    )))))))
}

/// PRelu: `x` where `x >= 0`, else `slope * x`, with `slope` broadcast to `x` (numpy's
/// `where(x < 0, x * slope, x)`, the ONNX reference).
fn prelu(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, slope) = (cx.input(0)?, cx.input(1)?);
    let dtype = x.ty().dtype;
    let zero = Cx::scalar(dtype, 0.0);
    let neg = cx.call_tmp("less", &[&x, &zero], Attrs::new())?;
    let scaled = cx.call_tmp("multiply", &[&x, &slope], Attrs::new())?;
    if broadcast_shapes(&x.shape(), &slope.shape())? != x.shape() {
        return Err(
            format!("slope of shape {:?} does not broadcast to the input {:?}", slope.shape(), x.shape()).into()
        );
    }
    one(cx.call("where", &[&neg, &scaled, &x], Attrs::new())?)
}

/// Mean of the inputs: their sum (broadcast) divided by their count.
fn mean(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let n = cx.n_inputs();
    let mut acc = cx.input(0)?;
    if n == 1 {
        return one(acc);
    }
    for i in 1..n {
        let x = cx.input(i)?;
        acc = cx.call_tmp("add", &[&acc, &x], Attrs::new())?;
    }
    let k = Cx::scalar(acc.ty().dtype, n as f64);
    one(cx.call("divide", &[&acc, &k], Attrs::new())?)
}

fn unary(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    one(cx.call(op, &[&x], Attrs::new())?)
}

fn binary(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    one(cx.call(op, &[&a, &b], Attrs::new())?)
}

fn pow(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, mut b) = (cx.input(0)?, cx.input(1)?);
    // ONNX lets the exponent have its own type; passel's `power` takes one dtype.
    if b.ty().dtype != a.ty().dtype {
        let attrs = Attrs::new().with("dtype", AttrValue::DType(a.ty().dtype));
        b = cx.call_tmp("cast", &[&b], attrs)?;
    }
    one(cx.call("power", &[&a, &b], Attrs::new())?)
}

fn variadic(cx: &mut Cx<'_>, op: &str) -> R<Vec<Option<Val>>> {
    let mut acc = cx.input(0)?;
    for i in 1..cx.n_inputs() {
        let x = cx.input(i)?;
        acc = if i + 1 == cx.n_inputs() {
            cx.call(op, &[&acc, &x], Attrs::new())?
        } else {
            cx.call_tmp(op, &[&acc, &x], Attrs::new())?
        };
    }
    one(acc)
}

fn cast(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let to = cx.int_opt("to")?.ok_or("attribute `to` is required")?;
    // `saturate` only matters for float8 targets, which passel rejects anyway.
    cx.int_opt("saturate")?;
    let dtype = tensor::dtype_of(to as i32).map_err(|e| NodeError::from(format!("cast target: {e}")))?;
    if x.ty().dtype == dtype {
        return one(x);
    }
    one(cx.call("cast", &[&x], Attrs::new().with("dtype", AttrValue::DType(dtype)))?)
}

fn constant(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    for key in ["sparse_value", "value_string", "value_strings"] {
        if cx.attr(key).is_some() {
            return Err(format!("attribute `{key}` is not supported").into());
        }
    }
    let c = if let Some(t) = cx.tensor_attr("value")? {
        t
    } else if let Some(v) = cx.float_opt("value_float")? {
        Constant::Dense(Tensor::scalar(DType::F32, v))
    } else if let Some(v) = cx.int_opt("value_int")? {
        Constant::Dense(Tensor(crate::ir::TensorData::I64(ndarray::ArcArray::from_elem(ndarray::IxDyn(&[]), v))))
    } else if let Some(v) = cx.floats_opt("value_floats")? {
        Constant::Dense(
            Tensor::from_f64s(&[v.len() as u64], DType::F32, &v.iter().map(|&x| x as f64).collect::<Vec<_>>())
                .map_err(|e| e.to_string())?,
        )
    } else if let Some(v) = cx.ints_opt("value_ints")? {
        let n = v.len();
        Constant::Dense(Tensor(crate::ir::TensorData::I64(
            ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(&[n]), v).map_err(|e| e.to_string())?,
        )))
    } else {
        return Err("has no value attribute".into());
    };
    one(Val::Const(Arc::new(c)))
}

fn i64_const(values: Vec<i64>) -> R<Val> {
    let n = values.len();
    let a = ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(&[n]), values).map_err(|e| e.to_string())?;
    Ok(Val::Const(Arc::new(Constant::Dense(Tensor(crate::ir::TensorData::I64(a))))))
}

fn shape(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let dims: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
    let r = dims.len() as i64;
    let clampi = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) };
    let start = clampi(cx.int("start", 0)?);
    let end = clampi(cx.int("end", r)?);
    let dims = if start < end { dims[start as usize..end as usize].to_vec() } else { Vec::new() };
    one(i64_const(dims)?)
}

fn constant_of_shape(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let dims = cx.const_ints(0, "shape")?.ok_or("input 0 (shape) is missing")?;
    let shape: Vec<u64> = dims
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| NodeError::from(format!("negative dimension {d}"))))
        .collect::<R<_>>()?;
    product(&shape)?;
    let (dtype, value) = match cx.tensor_attr("value")? {
        Some(c) => {
            let t = c.materialize().map_err(|e| e.to_string())?;
            if t.len() != 1 {
                return Err(format!("attribute `value` must have one element, got {}", t.len()).into());
            }
            (t.dtype(), t.to_f64s()[0])
        }
        None => (DType::F32, 0.0),
    };
    if dtype == DType::I64 && value.abs() > (1u64 << 53) as f64 {
        return Err("attribute `value` is an int64 too large to fill exactly".into());
    }
    one(Val::Const(Arc::new(Constant::Fill { ty: TensorType { shape: shape.into(), dtype }, fill: Fill::Full(value) })))
}

fn range(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let dtype = cx.input(0)?.ty().dtype;
    let scalar = |cx: &Cx<'_>, i: usize, what: &str| -> R<f64> {
        match cx.const_floats(i, what)? {
            Some(v) if v.len() == 1 => Ok(v[0]),
            Some(v) => Err(format!("input {i} ({what}) must be a scalar, got {} values", v.len()).into()),
            None => Err(format!("input {i} ({what}) is missing").into()),
        }
    };
    let (start, limit, delta) = (scalar(cx, 0, "start")?, scalar(cx, 1, "limit")?, scalar(cx, 2, "delta")?);
    if delta == 0.0 {
        return Err("delta is zero".into());
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    // `n` is NaN when the bounds are (then the comparison is false too).
    if n.is_nan() || n > cx.em_fold_limit() as f64 {
        return Err(format!("Range of {n} elements is too large to compute at import").into());
    }
    let n = n as usize;
    let t = match dtype {
        DType::I64 | DType::I32 => {
            let ints = cx.const_ints(0, "start")?.unwrap_or_default();
            let d = cx.const_ints(2, "delta")?.unwrap_or_default();
            let (s, d) = (ints.first().copied().unwrap_or(0), d.first().copied().unwrap_or(1));
            let v: Vec<f64> = (0..n as i64)
                .map(|i| i.checked_mul(d).and_then(|o| s.checked_add(o)).map(|v| v as f64))
                .collect::<Option<_>>()
                .ok_or("the range overflows int64")?;
            Tensor::from_f64s(&[n as u64], dtype, &v)
        }
        _ => {
            let v: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
            Tensor::from_f64s(&[n as u64], dtype, &v)
        }
    }
    .map_err(|e| e.to_string())?;
    one(Val::Const(Arc::new(Constant::Dense(t))))
}

impl Cx<'_> {
    fn em_fold_limit(&self) -> u64 {
        self.em.fold_limit()
    }
}

fn reshape(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let target = cx.const_ints(1, "shape")?.ok_or("input 1 (shape) is missing")?;
    let allowzero = cx.int("allowzero", 0)? != 0;
    let in_shape = x.shape();
    let total = product(&in_shape)?;
    let mut out: Vec<u64> = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(*in_shape.get(i).ok_or_else(|| {
                NodeError::from(format!("shape entry {i} is 0 but the input has rank {}", in_shape.len()))
            })?),
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            -1 => return Err("shape has more than one -1".into()),
            d if d < 0 => return Err(format!("shape entry {i} is {d}").into()),
            d => out.push(d as u64),
        }
    }
    let known = product(&out)?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {in_shape:?} to {target:?}").into());
        }
        out[i] = total / known;
    }
    if product(&out)? != total {
        return Err(format!("cannot reshape {in_shape:?} ({total} elements) to {out:?}").into());
    }
    one(cx.reshape(&x, &out, false)?)
}

fn flatten(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let axis = cx.int("axis", 1)?;
    let r = shape.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&a) {
        return Err(format!("axis {axis} is out of range for rank {r}").into());
    }
    let (outer, inner) = (product(&shape[..a as usize])?, product(&shape[a as usize..])?);
    one(cx.reshape(&x, &[outer, inner], false)?)
}

fn axes_of(cx: &mut Cx<'_>, from_input_at: i64, input: usize) -> R<Option<Vec<i64>>> {
    if cx.opset >= from_input_at {
        cx.const_ints(input, "axes")
    } else {
        cx.ints_opt("axes")
    }
}

fn squeeze(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let axes = axes_of(cx, 13, 1)?;
    let drop: Vec<usize> = match axes {
        Some(axes) => axes.iter().map(|&a| norm_axis(a, shape.len())).collect::<R<_>>()?,
        None => (0..shape.len()).filter(|&i| shape[i] == 1).collect(),
    };
    for &a in &drop {
        if shape[a] != 1 {
            return Err(format!("cannot squeeze axis {a} of size {}", shape[a]).into());
        }
    }
    let out: Vec<u64> = shape.iter().enumerate().filter(|(i, _)| !drop.contains(i)).map(|(_, &d)| d).collect();
    one(cx.reshape(&x, &out, false)?)
}

fn unsqueeze(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let axes = axes_of(cx, 13, 1)?.ok_or("axes are required")?;
    let rank = shape.len() + axes.len();
    let mut ones: Vec<usize> = axes.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?;
    ones.sort_unstable();
    if ones.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("axes {axes:?} repeat an axis").into());
    }
    let mut rest = shape.iter();
    let out: Vec<u64> =
        (0..rank).map(|i| if ones.contains(&i) { 1 } else { rest.next().copied().unwrap_or(1) }).collect();
    one(cx.reshape(&x, &out, false)?)
}

fn transpose(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let perm = cx.ints_opt("perm")?.unwrap_or_else(|| (0..rank as i64).rev().collect());
    if perm.iter().enumerate().all(|(i, &p)| p == i as i64) && perm.len() == rank {
        return one(x);
    }
    one(cx.call("transpose", &[&x], Attrs::new().with("axes", ints_i(&perm)))?)
}

fn concat(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let xs: Vec<Val> = (0..cx.n_inputs()).map(|i| cx.input(i)).collect::<R<_>>()?;
    let first = xs.first().ok_or("has no inputs")?;
    let axis = norm_axis(cx.int_opt("axis")?.ok_or("attribute `axis` is required")?, first.rank())?;
    if xs.len() == 1 {
        return one(xs[0].clone());
    }
    let refs: Vec<&Val> = xs.iter().collect();
    one(cx.call("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(axis as i64)))?)
}

fn split(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let axis = norm_axis(cx.int("axis", 0)?, shape.len())?;
    let dim = shape[axis];
    let n_out = cx.node.n_outputs();
    let sizes: Option<Vec<i64>> = if cx.opset >= 13 { cx.const_ints(1, "split")? } else { cx.ints_opt("split")? };
    let num_outputs = cx.int_opt("num_outputs")?;
    let sizes: Vec<u64> = match sizes {
        Some(s) => s
            .iter()
            .map(|&v| u64::try_from(v).map_err(|_| NodeError::from(format!("negative split size {v}"))))
            .collect::<R<_>>()?,
        None => {
            let n = num_outputs.map(|n| n as u64).unwrap_or(n_out as u64);
            if n == 0 || n != n_out as u64 {
                return Err(format!("splits into {n} parts but has {n_out} outputs").into());
            }
            let chunk = dim.div_ceil(n);
            if num_outputs.is_none() && dim % n != 0 {
                return Err(format!("cannot split {dim} into {n} equal parts").into());
            }
            (0..n).map(|i| chunk.min(dim.saturating_sub(i * chunk))).collect()
        }
    };
    if sizes.len() != n_out {
        return Err(format!("{} split sizes for {n_out} outputs", sizes.len()).into());
    }
    if sizes.iter().try_fold(0u64, |a, &s| a.checked_add(s)) != Some(dim) {
        return Err(format!("split sizes {sizes:?} do not add up to {dim}").into());
    }
    if n_out == 1 {
        return one(x);
    }
    let attrs = if sizes.iter().all(|&s| s == sizes[0]) {
        Attrs::new().with("indices_or_sections", AttrValue::Int(n_out as i64))
    } else {
        let mut points = Vec::new();
        let mut acc = 0i64;
        for &s in &sizes[..sizes.len() - 1] {
            acc += s as i64;
            points.push(acc);
        }
        Attrs::new().with("indices", ints_i(&points))
    }
    .with("axis", AttrValue::Int(axis as i64));
    let name = cx.name.clone();
    let outs = cx.em.call_multi("split", &[&x], attrs, &name)?;
    Ok(outs.into_iter().map(Some).collect())
}

fn slice(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let (starts, ends, axes, steps) = if cx.opset >= 10 {
        (
            cx.const_ints(1, "starts")?.ok_or("input 1 (starts) is missing")?,
            cx.const_ints(2, "ends")?.ok_or("input 2 (ends) is missing")?,
            cx.const_ints(3, "axes")?,
            cx.const_ints(4, "steps")?,
        )
    } else {
        (
            cx.ints_opt("starts")?.ok_or("attribute `starts` is required")?,
            cx.ints_opt("ends")?.ok_or("attribute `ends` is required")?,
            cx.ints_opt("axes")?,
            None,
        )
    };
    if starts.len() != ends.len() {
        return Err(format!("{} starts but {} ends", starts.len(), ends.len()).into());
    }
    let axes: Vec<i64> = match axes {
        Some(a) => a.iter().map(|&a| norm_axis(a, rank).map(|a| a as i64)).collect::<R<_>>()?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    if steps.contains(&0) {
        return Err("a step is zero".into());
    }
    let attrs = Attrs::new()
        .with("begin", ints_i(&starts))
        .with("end", ints_i(&ends))
        .with("strides", ints_i(&steps))
        .with("axes", ints_i(&axes));
    one(cx.call("strided_slice", &[&x], attrs)?)
}

fn gather(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, idx) = (cx.input(0)?, cx.input(1)?);
    let axis = norm_axis(cx.int("axis", 0)?, x.rank())?;
    one(cx.call("take", &[&x, &idx], Attrs::new().with("axis", AttrValue::Int(axis as i64)))?)
}

/// The numpy broadcast of two shapes.
fn broadcast_shapes(a: &[u64], b: &[u64]) -> R<Vec<u64>> {
    let r = a.len().max(b.len());
    let get = |s: &[u64], i: usize| if i + s.len() >= r { s[i + s.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(format!("shapes {a:?} and {b:?} do not broadcast (dimension {x} vs {y})").into()),
        })
        .collect()
}

fn expand(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let target = cx.const_ints(1, "shape")?.ok_or("input 1 (shape) is missing")?;
    let target: Vec<u64> = target
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| NodeError::from(format!("negative dimension {d}"))))
        .collect::<R<_>>()?;
    let out = broadcast_shapes(&x.shape(), &target)?;
    product(&out)?;
    if out == x.shape() {
        return one(x);
    }
    one(cx.call("broadcast_to", &[&x], Attrs::new().with("shape", ints(&out)))?)
}

fn gemm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (a, b, c) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let alpha = cx.float("alpha", 1.0)?;
    let beta = cx.float("beta", 1.0)?;
    let trans_a = cx.int("transA", 0)? != 0;
    let trans_b = cx.int("transB", 0)? != 0;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(format!("Gemm needs 2-D operands, got ranks {} and {}", a.rank(), b.rank()).into());
    }
    let dtype = a.ty().dtype;
    let last = alpha == 1.0 && c.is_none();
    let a = if trans_a { cx.call_tmp("transpose", &[&a], Attrs::new().with("axes", ints_i(&[1, 0])))? } else { a };
    let mut y = if trans_b {
        // dense(x, w) = x · wᵀ, exactly Gemm's transB.
        if last {
            cx.call("dense", &[&a, &b], Attrs::new())?
        } else {
            cx.call_tmp("dense", &[&a, &b], Attrs::new())?
        }
    } else if last {
        cx.call("matmul", &[&a, &b], Attrs::new())?
    } else {
        cx.call_tmp("matmul", &[&a, &b], Attrs::new())?
    };
    if alpha != 1.0 {
        let k = Cx::scalar(dtype, alpha);
        y = if c.is_none() {
            cx.call("multiply", &[&y, &k], Attrs::new())?
        } else {
            cx.call_tmp("multiply", &[&y, &k], Attrs::new())?
        };
    }
    if let Some(mut c) = c {
        if beta != 1.0 {
            let k = Cx::scalar(dtype, beta);
            c = cx.call_tmp("multiply", &[&c, &k], Attrs::new())?;
        }
        y = cx.call("add", &[&y, &c], Attrs::new())?;
    }
    one(y)
}

/// `[begin_h, begin_w, end_h, end_w]` for `auto_pad` SAME_UPPER / SAME_LOWER (an error when
/// the sizes overflow).
fn same_pads(input: &[u64], kernel: &[u64], strides: &[u64], dilations: &[u64], upper: bool) -> R<Vec<u64>> {
    let mut begin = Vec::new();
    let mut end = Vec::new();
    for i in 0..input.len() {
        let out = input[i].div_ceil(strides[i].max(1));
        let total = extent(kernel[i], dilations[i])
            .and_then(|eff| out.saturating_sub(1).checked_mul(strides[i])?.checked_add(eff))
            .ok_or_else(|| NodeError::from(format!("the window {kernel:?} (dilations {dilations:?}) is too large")))?
            .saturating_sub(input[i]);
        let small = total / 2;
        let (b, e) = if upper { (small, total - small) } else { (total - small, small) };
        begin.push(b);
        end.push(e);
    }
    Ok(begin.into_iter().chain(end).collect())
}

/// The extent `(k - 1) * d + 1` of a kernel of size `k` dilated by `d`, unless it overflows.
fn extent(k: u64, d: u64) -> Option<u64> {
    k.saturating_sub(1).checked_mul(d)?.checked_add(1)
}

/// Spatial attributes shared by Conv, ConvTranspose and the pools: kernel, strides, dilations
/// and explicit pads `[t, l, b, r]` (auto_pad resolved against `spatial`).
struct Window {
    kernel: Vec<u64>,
    strides: Vec<u64>,
    dilations: Vec<u64>,
    pads: Vec<u64>,
    auto_pad: String,
}

fn pos(v: Vec<i64>, what: &str) -> R<Vec<u64>> {
    v.iter().map(|&d| u64::try_from(d).map_err(|_| NodeError::from(format!("negative {what} {d}")))).collect()
}

/// `v` of a 1-D window lifted to the 2-D window `[1, L]`: `[x]` becomes `[lead, x]`, and
/// pads `[b, e]` become `[0, b, 0, e]`; other lengths are left for the caller's checks.
fn lift_1d(v: Option<Vec<i64>>, lead: i64, pads: bool) -> Option<Vec<i64>> {
    v.map(|v| match (v.len(), pads) {
        (1, false) => vec![lead, v[0]],
        (2, true) => vec![0, v[0], 0, v[1]],
        _ => v,
    })
}

/// The window attributes; with `one_d` the node is 1-D (`[N, C, L]`, lifted by the caller to
/// `[N, C, 1, L]`) and its 1-element attributes are lifted alike.
fn window(
    cx: &mut Cx<'_>,
    spatial: &[u64],
    kernel_default: Option<Vec<u64>>,
    resolve_same: bool,
    one_d: bool,
) -> R<Window> {
    let lift = |v: Option<Vec<i64>>, lead: i64, pads: bool| if one_d { lift_1d(v, lead, pads) } else { v };
    let kernel = match lift(cx.ints_opt("kernel_shape")?, 1, false) {
        Some(k) => pos(k, "kernel size")?,
        None => kernel_default.ok_or("attribute `kernel_shape` is required")?,
    };
    if kernel.len() != 2 {
        return Err(format!("only 1-D and 2-D windows are supported, got kernel_shape {kernel:?}").into());
    }
    let strides = pos(lift(cx.ints_opt("strides")?, 1, false).unwrap_or(vec![1, 1]), "stride")?;
    let dilations = pos(lift(cx.ints_opt("dilations")?, 1, false).unwrap_or(vec![1, 1]), "dilation")?;
    let auto_pad = cx.string("auto_pad", "NOTSET")?;
    let pads = lift(cx.ints_opt("pads")?, 0, true);
    if strides.len() != 2 || dilations.len() != 2 || strides.contains(&0) || dilations.contains(&0) {
        return Err(format!("strides {strides:?} and dilations {dilations:?} must be two positive values").into());
    }
    let pads = match auto_pad.as_str() {
        "NOTSET" => pos(pads.unwrap_or(vec![0; 4]), "pad")?,
        "VALID" => vec![0; 4],
        "SAME_UPPER" | "SAME_LOWER" if resolve_same => {
            same_pads(spatial, &kernel, &strides, &dilations, auto_pad == "SAME_UPPER")?
        }
        "SAME_UPPER" | "SAME_LOWER" => vec![0; 4],
        other => return Err(format!("auto_pad {other:?} is not supported").into()),
    };
    if pads.len() != 4 {
        return Err(format!("pads {pads:?} must have 4 values for a 2-D window").into());
    }
    Ok(Window { kernel, strides, dilations, pads, auto_pad })
}

/// A 1-D node's data `[N, C, L]` and weight `[O, I, K]` as the 2-D `[N, C, 1, L]` and
/// `[O, I, 1, K]` (`None` for a 2-D node; other ranks are errors).
fn lift_data_weight(cx: &mut Cx<'_>, x: Val, w: Val, what: &str) -> R<(Val, Val, bool)> {
    match (x.rank(), w.rank()) {
        (4, 4) => Ok((x, w, false)),
        (3, 3) => {
            let (xs, ws) = (x.shape(), w.shape());
            let x4 = cx.reshape(&x, &[xs[0], xs[1], 1, xs[2]], true)?;
            let w4 = cx.reshape(&w, &[ws[0], ws[1], 1, ws[2]], true)?;
            Ok((x4, w4, true))
        }
        (r, _) => Err(format!("only 1-D and 2-D {what} (rank-3 or rank-4 input) are supported, got rank {r}").into()),
    }
}

/// Calls `op` (then adds `bias` along axis 1 when there is one); a 1-D node's `[N, C, 1, L]`
/// result is reshaped back to `[N, C, L]`.
fn windowed(
    cx: &mut Cx<'_>,
    op: &str,
    args: &[&Val],
    attrs: Attrs,
    bias: Option<Val>,
    one_d: bool,
) -> R<Vec<Option<Val>>> {
    if !one_d {
        return bias_after(cx, op, args, attrs, bias);
    }
    let mut y = cx.call_tmp(op, args, attrs)?;
    if let Some(b) = bias {
        y = cx.call_tmp("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?;
    }
    let s = y.shape();
    one(cx.reshape(&y, &[s[0], s[1], s[3]], false)?)
}

fn conv(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, b) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let (x, w, one_d) = lift_data_weight(cx, x, w, "convolutions")?;
    let ws = w.shape();
    let win = window(cx, &x.shape()[2..], Some(ws[2..].to_vec()), true, one_d)?;
    if win.kernel != ws[2..] {
        return Err(format!("kernel_shape {:?} does not match the weight shape {ws:?}", win.kernel).into());
    }
    let groups = cx.int("group", 1)?;
    let attrs = Attrs::new()
        .with("strides", ints(&win.strides))
        .with("padding", ints(&win.pads))
        .with("dilation", ints(&win.dilations))
        .with("groups", AttrValue::Int(groups));
    windowed(cx, "conv2d", &[&x, &w], attrs, b, one_d)
}

/// A 3-D ConvTranspose `[N, C, D, H, W]` as 2-D ones: input depth slice `i` through kernel
/// depth slice `k` lands on output depth `i·stride + k·dilation - pad_begin`, so each output
/// depth is the sum of the 2-D transposed convolutions that land on it (zeros where none
/// does), and the depths are stacked. Explicit pads only (no `auto_pad`, no `output_shape`).
fn conv_transpose_3d(cx: &mut Cx<'_>, x: Val, w: Val, b: Option<Val>) -> R<Vec<Option<Val>>> {
    let (xs, ws) = (x.shape(), w.shape());
    if ws.len() != 5 {
        return Err(format!("a 3-D transposed convolution needs a rank-5 weight, got {ws:?}").into());
    }
    let three = |v: Option<Vec<i64>>, default: u64, what: &str| -> R<Vec<u64>> {
        let v = match v {
            Some(v) => pos(v, what)?,
            None => vec![default; 3],
        };
        if v.len() != 3 {
            return Err(format!("{what}s {v:?} must have 3 values for a 3-D window").into());
        }
        Ok(v)
    };
    let kernel = three(
        cx.ints_opt("kernel_shape")?.or_else(|| Some(ws[2..].iter().map(|&d| d as i64).collect())),
        1,
        "kernel size",
    )?;
    if kernel != ws[2..] {
        return Err(format!("kernel_shape {kernel:?} does not match the weight shape {ws:?}").into());
    }
    let strides = three(cx.ints_opt("strides")?, 1, "stride")?;
    let dilations = three(cx.ints_opt("dilations")?, 1, "dilation")?;
    let output_padding = three(cx.ints_opt("output_padding")?, 0, "output padding")?;
    let pads = pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 6]), "pad")?;
    if strides.contains(&0) || dilations.contains(&0) || pads.len() != 6 {
        return Err(format!(
            "strides {strides:?} and dilations {dilations:?} must be positive, pads {pads:?} 6 values"
        )
        .into());
    }
    let auto_pad = cx.string("auto_pad", "NOTSET")?;
    if !matches!(auto_pad.as_str(), "NOTSET" | "VALID") || cx.ints_opt("output_shape")?.is_some() {
        return Err(
            "a 3-D transposed convolution takes explicit pads only (no auto_pad SAME_*, no output_shape)".into()
        );
    }
    let pads = if auto_pad == "VALID" { vec![0; 6] } else { pads };
    let groups = cx.int("group", 1)?;
    let (d_in, kd) = (xs[2], ws[2]);
    // Output depth before cropping the pads: stride·(D-1) + extent + output_padding.
    let ext = extent(kd, dilations[0]).ok_or("the dilated kernel is too large")?;
    let full = (d_in.saturating_sub(1)).checked_mul(strides[0]).and_then(|v| v.checked_add(ext + output_padding[0]));
    let d_out = full
        .and_then(|f| f.checked_sub(pads[0] + pads[3]))
        .filter(|&d| d > 0)
        .ok_or_else(|| NodeError::from(format!("pads {pads:?} leave no output depth")))?;
    let attrs = Attrs::new()
        .with("strides", ints(&strides[1..]))
        .with("padding", ints(&[pads[1], pads[2], pads[4], pads[5]]))
        .with("dilation", ints(&dilations[1..]))
        .with("groups", AttrValue::Int(groups))
        .with("output_padding", ints(&output_padding[1..]));
    let depth = |cx: &mut Cx<'_>, v: &Val, i: u64| -> R<Val> {
        let s = v.shape();
        let attrs = Attrs::new().with("begin", ints(&[i])).with("end", ints(&[i + 1])).with("axes", ints(&[2]));
        let d = cx.call_tmp("strided_slice", &[v], attrs)?;
        cx.reshape(&d, &[s[0], s[1], s[3], s[4]], true)
    };
    let mut sums: Vec<Option<Val>> = vec![None; d_out as usize];
    for k in 0..kd {
        let wk = depth(cx, &w, k)?;
        for i in 0..d_in {
            let at = (i * strides[0] + k * dilations[0]) as i64 - pads[0] as i64;
            if at < 0 || at >= d_out as i64 {
                continue;
            }
            let xi = depth(cx, &x, i)?;
            let y = cx.call_tmp("conv2d_transpose", &[&xi, &wk], attrs.clone())?;
            let slot = &mut sums[at as usize];
            *slot = Some(match slot.take() {
                None => y,
                Some(acc) => cx.call_tmp("add", &[&acc, &y], Attrs::new())?,
            });
        }
    }
    let plane = sums.iter().flatten().next().map(Val::shape).ok_or("no input depth reaches the output")?;
    let mut layers = Vec::with_capacity(sums.len());
    for s in sums {
        let s = s.unwrap_or_else(|| filled(&plane, x.ty().dtype, 0.0));
        layers.push(cx.reshape(&s, &[plane[0], plane[1], 1, plane[2], plane[3]], true)?);
    }
    let refs: Vec<&Val> = layers.iter().collect();
    let y = cx.call_tmp("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(2)))?;
    match b {
        None => one(y),
        Some(b) => one(cx.call("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?),
    }
}

/// Calls `op`, then adds `bias` along axis 1 when there is one.
fn bias_after(cx: &mut Cx<'_>, op: &str, args: &[&Val], attrs: Attrs, bias: Option<Val>) -> R<Vec<Option<Val>>> {
    match bias {
        None => one(cx.call(op, args, attrs)?),
        Some(b) => {
            let y = cx.call_tmp(op, args, attrs)?;
            one(cx.call("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?)
        }
    }
}

fn conv_transpose(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, w, b) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    if x.rank() == 5 {
        return conv_transpose_3d(cx, x, w, b);
    }
    let (x, w, one_d) = lift_data_weight(cx, x, w, "transposed convolutions")?;
    let ws = w.shape();
    let xs = x.shape();
    let win = window(cx, &xs[2..], Some(ws[2..].to_vec()), false, one_d)?;
    let groups = cx.int("group", 1)?;
    let lift = |v: Option<Vec<i64>>, lead: i64| if one_d { lift_1d(v, lead, false) } else { v };
    let output_padding = pos(lift(cx.ints_opt("output_padding")?, 0).unwrap_or(vec![0, 0]), "output padding")?;
    let output_shape = lift(cx.ints_opt("output_shape")?, 1);
    if output_padding.len() != 2 {
        return Err(format!("output_padding {output_padding:?} must have 2 values").into());
    }
    let same = win.auto_pad.starts_with("SAME");
    let pads = if output_shape.is_some() || same {
        // ONNX: total_padding = stride*(in-1) + output_padding + ((k-1)*d+1) - out_shape.
        let out: Vec<u64> = match &output_shape {
            Some(s) => {
                let s = pos(s.clone(), "output size")?;
                s[s.len().saturating_sub(2)..].to_vec()
            }
            None => (0..2)
                .map(|i| xs[2 + i].checked_mul(win.strides[i]))
                .collect::<Option<_>>()
                .ok_or_else(|| NodeError::from(format!("strides {:?} make the output too large", win.strides)))?,
        };
        if out.len() != 2 {
            return Err("output_shape must give the 2 spatial sizes".into());
        }
        let mut begin = Vec::new();
        let mut end = Vec::new();
        for i in 0..2 {
            let full = xs[2 + i]
                .saturating_sub(1)
                .checked_mul(win.strides[i])
                .and_then(|v| v.checked_add(output_padding[i]))
                .and_then(|v| v.checked_add(extent(win.kernel[i], win.dilations[i])?))
                .ok_or_else(|| "the output size overflows".to_string())?;
            // Negative when output_shape is larger than the full output: onnx's reference
            // splits it with floor division too, and a negative pad adds zeros there.
            let total = i64::try_from(full).map_err(|_| "the output size overflows")?
                - i64::try_from(out[i]).map_err(|_| "output_shape overflows")?;
            let half = total.div_euclid(2);
            let (bg, en) = if win.auto_pad == "SAME_UPPER" { (half, total - half) } else { (total - half, half) };
            begin.push(bg);
            end.push(en);
        }
        begin.into_iter().chain(end).collect::<Vec<i64>>()
    } else {
        win.pads.iter().map(|&p| p as i64).collect()
    };
    let crop: Vec<u64> = pads.iter().map(|&p| p.max(0) as u64).collect();
    let attrs = Attrs::new()
        .with("strides", ints(&win.strides))
        .with("padding", ints(&crop))
        .with("dilation", ints(&win.dilations))
        .with("groups", AttrValue::Int(groups))
        .with("output_padding", ints(&output_padding));
    if pads.iter().all(|&p| p >= 0) {
        return windowed(cx, "conv2d_transpose", &[&x, &w], attrs, b, one_d);
    }
    // Zeros where the output extends past the full transposed convolution, then the bias
    // over all of it (the reference adds it to every output element).
    let y = cx.call_tmp("conv2d_transpose", &[&x, &w], attrs)?;
    let widen: Vec<i64> =
        [0, 0, (-pads[0]).max(0), (-pads[1]).max(0), 0, 0, (-pads[2]).max(0), (-pads[3]).max(0)].to_vec();
    let pad_attrs = Attrs::new()
        .with("pad_width", ints_i(&widen))
        .with("pad_value", AttrValue::Float(0.0))
        .with("pad_mode", AttrValue::Str("constant".into()));
    let mut y = cx.call_tmp("pad", &[&y], pad_attrs)?;
    if let Some(b) = b {
        y = cx.call_tmp("bias_add", &[&y, &b], Attrs::new().with("axis", AttrValue::Int(1)))?;
    }
    let s = y.shape();
    let out_shape = if one_d { vec![s[0], s[1], s[3]] } else { s };
    one(cx.reshape(&y, &out_shape, false)?)
}

/// The pools: MaxPool, AveragePool, and LpPool as `(avg_pool(|x|^p) · window)^(1/p)` with
/// the padding counted (it adds zeros to the sum).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PoolKind {
    Max,
    Avg,
    Lp,
}

fn pool(cx: &mut Cx<'_>, kind: PoolKind) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let p = if kind == PoolKind::Lp { cx.int("p", 2)? } else { 1 };
    if p < 1 {
        return Err(format!("attribute `p` must be positive, got {p}").into());
    }
    let (x, dtype) = (x.clone(), x.ty().dtype);
    let xin = if kind == PoolKind::Lp {
        let a = cx.call_tmp("abs", &[&x], Attrs::new())?;
        if p == 1 {
            a
        } else {
            cx.call_tmp("power", &[&a, &Cx::scalar(dtype, p as f64)], Attrs::new())?
        }
    } else {
        x
    };
    let (y, kernel, indices) = if xin.rank() == 5 {
        if kind == PoolKind::Max && cx.node.n_outputs() > 1 {
            return Err("the Indices output of a 3-D MaxPool is not supported".into());
        }
        let (y, kernel) = pool_3d(cx, &xin, kind)?;
        (y, kernel, None)
    } else {
        pool_2d(cx, &xin, kind)?
    };
    if kind != PoolKind::Lp {
        return Ok(vec![Some(y), indices]);
    }
    let window = product(&kernel)?;
    let sum = cx.call_tmp("multiply", &[&y, &Cx::scalar(dtype, window as f64)], Attrs::new())?;
    if p == 1 {
        return one(sum);
    }
    one(cx.call("power", &[&sum, &Cx::scalar(dtype, 1.0 / p as f64)], Attrs::new())?)
}

/// The call attributes of a 2-D pool of `kind` and its check that no window is all padding.
fn pool_attrs(win: &Window, kind: PoolKind, ceil_mode: bool) -> R<(&'static str, Attrs)> {
    // A window that covers only padding has no value (NaN for AveragePool, -inf for MaxPool);
    // onnxruntime refuses such explicit pads ("Pad should be smaller than kernel").
    let (k, p) = (&win.kernel, &win.pads);
    if (0..2).any(|i| p[i] >= k[i] || p[i + 2] >= k[i]) {
        return Err(format!(
            "pads {p:?} must each be smaller than the kernel {k:?} (a window of only padding has no value)"
        )
        .into());
    }
    let mut attrs = Attrs::new()
        .with("pool_size", ints(&win.kernel))
        .with("strides", ints(&win.strides))
        .with("padding", ints(&win.pads))
        .with("dilation", ints(&win.dilations))
        .with("ceil_mode", AttrValue::Bool(ceil_mode));
    Ok(match kind {
        PoolKind::Max => ("max_pool2d", attrs),
        PoolKind::Avg | PoolKind::Lp => {
            attrs.set("count_include_pad", AttrValue::Bool(kind == PoolKind::Lp));
            ("avg_pool2d", attrs)
        }
    })
}

/// MaxPool's `storage_order` (whether its Indices output is column-major), checked.
fn pool_kind_attrs(cx: &mut Cx<'_>, kind: PoolKind) -> R<bool> {
    if kind != PoolKind::Max {
        return Ok(false);
    }
    match cx.int("storage_order", 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute `storage_order` must be 0 or 1, got {v}").into()),
    }
}

/// MaxPool's Indices output on `x` `[N, C, H, W]` pooled to `(oH, oW)`: per element the flat
/// index (over the whole input, column-major within an image when `column_major`) of the
/// first maximum of its window in window order, as onnx's reference picks it. The window
/// taps are gathered (`take` at constant positions; taps in the padding read an extra
/// lowest-value slot), `argmax` picks the tap, and a second `take` maps it to its index. A
/// padding tap stands for its window's first in-image tap, so a window whose maximum is the
/// lowest value still names that tap.
fn max_pool_indices(cx: &mut Cx<'_>, x: &Val, win: &Window, (oh, ow): (u64, u64), column_major: bool) -> R<Val> {
    let xs = x.shape();
    let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let (kh, kw) = (win.kernel[0], win.kernel[1]);
    let hw = h.checked_mul(w).ok_or("the shape overflows")?;
    let taps = kh * kw;
    let count = oh.checked_mul(ow).and_then(|v| v.checked_mul(taps)).ok_or("the window count overflows")?;
    if count > cx.em_fold_limit() || n.saturating_mul(c).saturating_mul(hw) > cx.em_fold_limit() {
        return Err(format!("{count} window taps are too many to index at import").into());
    }
    let mut slot = Vec::with_capacity(count as usize);
    let mut stored = Vec::with_capacity(count as usize);
    for i in 0..oh {
        for j in 0..ow {
            let start = stored.len();
            let mut first = None;
            for a in 0..kh {
                for b in 0..kw {
                    let y = (i * win.strides[0] + a * win.dilations[0]) as i64 - win.pads[0] as i64;
                    let x = (j * win.strides[1] + b * win.dilations[1]) as i64 - win.pads[1] as i64;
                    if (0..h as i64).contains(&y) && (0..w as i64).contains(&x) {
                        let at = if column_major { y + x * h as i64 } else { y * w as i64 + x };
                        slot.push((y * w as i64 + x) as f64);
                        stored.push(Some(at));
                        first.get_or_insert(at);
                    } else {
                        slot.push(hw as f64);
                        stored.push(None);
                    }
                }
            }
            let first = first.ok_or(format!("the window of output ({i}, {j}) covers only padding"))?;
            for s in &mut stored[start..] {
                s.get_or_insert(first);
            }
        }
    }
    let konst = |shape: &[u64], v: &[f64]| -> R<Val> {
        let t = Tensor::from_f64s(shape, DType::I64, v).map_err(|e| e.to_string())?;
        Ok(Val::Const(Arc::new(Constant::Dense(t))))
    };
    let dtype = x.ty().dtype;
    let lowest = reduce_identity("max", dtype).ok_or("no lowest value")?;
    let flat = cx.reshape(x, &[n, c, hw], true)?;
    let pad = filled(&[n, c, 1], dtype, lowest);
    let padded = cx.call_tmp("concatenate", &[&flat, &pad], Attrs::new().with("axis", AttrValue::Int(2)))?;
    let slot = konst(&[count], &slot)?;
    let g = cx.call_tmp("take", &[&padded, &slot], Attrs::new().with("axis", AttrValue::Int(2)))?;
    let g = cx.reshape(&g, &[n, c, oh * ow, taps], true)?;
    let attrs = Attrs::new()
        .with("axis", AttrValue::Int(3))
        .with("keepdims", AttrValue::Bool(false))
        .with("select_last_index", AttrValue::Bool(false));
    let tap = cx.call_tmp("argmax", &[&g], attrs)?;
    let base: Vec<f64> = (0..oh * ow).map(|k| (k * taps) as f64).collect();
    let tap = cx.call_tmp("add", &[&tap, &konst(&[oh * ow], &base)?], Attrs::new())?;
    let stored: Vec<f64> = stored.iter().map(|s| s.unwrap_or(0) as f64).collect();
    let idx = cx.call_tmp("take", &[&konst(&[count], &stored)?, &tap], Attrs::new().with("axis", AttrValue::Int(0)))?;
    let images: Vec<f64> = (0..n * c).map(|k| (k * hw) as f64).collect();
    let idx = cx.call_tmp("add", &[&idx, &konst(&[n, c, 1], &images)?], Attrs::new())?;
    cx.reshape(&idx, &[n, c, oh, ow], true)
}

/// AveragePool with `count_include_pad` = 1 and `ceil_mode` = 1, as onnx's reference computes
/// it: the input padded with zeros (the pads, plus half of the extra padding the ceiling needs
/// in front), windows cut at the end of the original padding, each window divided by the
/// elements it keeps, and no window starting past the input and its leading padding. Returns
/// the input padded (or cropped at the end) so that a pool without padding and without
/// `count_include_pad` computes that, and the reference's output size per spatial axis.
fn include_pad_ceil(
    cx: &mut Cx<'_>,
    x: &Val,
    kernel: &[u64],
    strides: &[u64],
    dilations: &[u64],
    pads: &[u64],
) -> R<(Val, Vec<u64>)> {
    let d = kernel.len();
    let lead = x.rank() - d;
    let mut y = x.clone();
    let mut outs = Vec::with_capacity(d);
    for i in 0..d {
        let axis = lead + i;
        let size = x.shape()[axis];
        let (pb, pe) = (pads[i], pads[d + i]);
        let ext = extent(kernel[i], dilations[i]).ok_or("the dilated kernel is too large")?;
        let limit = size + pb + pe;
        if limit < ext {
            return Err(format!("the window {ext} is larger than the padded input {limit}").into());
        }
        let mut out = (limit - ext).div_ceil(strides[i]) + 1;
        if (out - 1) * strides[i] >= size + pb {
            out -= 1;
        }
        let extra = ((out - 1) * strides[i] + ext).saturating_sub(limit);
        let begin = pb + extra / 2;
        let end = limit as i64 - (begin + size) as i64;
        if end < 0 {
            let keep = (size as i64 + end) as u64;
            let attrs =
                Attrs::new().with("begin", ints(&[0])).with("end", ints(&[keep])).with("axes", ints(&[axis as u64]));
            y = cx.call_tmp("strided_slice", &[&y], attrs)?;
        }
        if begin > 0 || end > 0 {
            let rank = y.rank();
            let mut width = vec![0i64; 2 * rank];
            width[axis] = begin as i64;
            width[rank + axis] = end.max(0);
            let attrs = Attrs::new()
                .with("pad_width", ints_i(&width))
                .with("pad_value", AttrValue::Float(0.0))
                .with("pad_mode", AttrValue::Str("constant".into()));
            y = cx.call_tmp("pad", &[&y], attrs)?;
        }
        outs.push(out);
    }
    Ok((y, outs))
}

/// `y` cut to `outs` along its last `outs.len()` axes.
fn crop_trailing(cx: &mut Cx<'_>, y: Val, outs: &[u64]) -> R<Val> {
    let lead = y.rank() - outs.len();
    let shape = y.shape();
    let axes: Vec<u64> = (0..outs.len()).filter(|&i| shape[lead + i] > outs[i]).map(|i| (lead + i) as u64).collect();
    if axes.is_empty() {
        return Ok(y);
    }
    let ends: Vec<u64> = axes.iter().map(|&a| outs[a as usize - lead]).collect();
    let attrs =
        Attrs::new().with("begin", ints(&vec![0; axes.len()])).with("end", ints(&ends)).with("axes", ints(&axes));
    cx.call_tmp("strided_slice", &[&y], attrs)
}

/// A 1-D or 2-D pool; returns the result, the window, and MaxPool's Indices output when the
/// node has one.
fn pool_2d(cx: &mut Cx<'_>, x: &Val, kind: PoolKind) -> R<(Val, Vec<u64>, Option<Val>)> {
    let one_d = match x.rank() {
        4 => false,
        3 => true,
        r => {
            return Err(
                format!("only 1-D, 2-D and 3-D pooling (rank-3 to rank-5 input) are supported, got rank {r}").into()
            )
        }
    };
    let x = if one_d {
        let xs = x.shape();
        cx.reshape(x, &[xs[0], xs[1], 1, xs[2]], true)?
    } else {
        x.clone()
    };
    let mut win = window(cx, &x.shape()[2..], None, true, one_d)?;
    let ceil_mode = cx.int("ceil_mode", 0)? != 0;
    let column_major = pool_kind_attrs(cx, kind)?;
    let mut include = kind == PoolKind::Avg && cx.int("count_include_pad", 0)? != 0;
    let (x, crop) = if include && ceil_mode {
        let (x, outs) = include_pad_ceil(cx, &x, &win.kernel, &win.strides, &win.dilations, &win.pads)?;
        win.pads = vec![0; 4];
        include = false;
        (x, Some(outs))
    } else {
        (x, None)
    };
    let (op, mut attrs) = pool_attrs(&win, kind, ceil_mode)?;
    if kind == PoolKind::Avg {
        attrs.set("count_include_pad", AttrValue::Bool(include));
    }
    let y = if kind == PoolKind::Lp {
        let y = cx.call_tmp(op, &[&x], attrs)?;
        if one_d {
            let s = y.shape();
            cx.reshape(&y, &[s[0], s[1], s[3]], true)?
        } else {
            y
        }
    } else {
        windowed(cx, op, &[&x], attrs, None, one_d)?.into_iter().next().flatten().ok_or("the pool has no result")?
    };
    let y = match crop {
        Some(outs) => crop_trailing(cx, y, if one_d { &outs[1..] } else { &outs })?,
        None => y,
    };
    let indices = if kind == PoolKind::Max && cx.node.n_outputs() > 1 {
        let ys = y.shape();
        let (oh, ow) = if one_d { (1, ys[2]) } else { (ys[2], ys[3]) };
        let idx = max_pool_indices(cx, &x, &win, (oh, ow), column_major)?;
        Some(if one_d { cx.reshape(&idx, &[ys[0], ys[1], ow], true)? } else { idx })
    } else {
        None
    };
    let kernel = if one_d { win.kernel[1..].to_vec() } else { win.kernel };
    Ok((y, kernel, indices))
}

/// A 3-D pool `[N, C, D, H, W]` as two 2-D pools: over (H, W) on `[N, C·D, H, W]`, then over
/// D on `[N, C, D, H'·W']` with a `[kd, 1]` window. The maximum, and the mean over a box of
/// elements (padding counted or not, since the counted region is a box), are separable, so
/// this is exact up to the rounding of the intermediate means.
fn pool_3d(cx: &mut Cx<'_>, x: &Val, kind: PoolKind) -> R<(Val, Vec<u64>)> {
    let xs = x.shape();
    let (n, c) = (xs[0], xs[1]);
    let kernel = pos(cx.ints_opt("kernel_shape")?.ok_or("attribute `kernel_shape` is required")?, "kernel size")?;
    let strides = pos(cx.ints_opt("strides")?.unwrap_or(vec![1; 3]), "stride")?;
    let dilations = pos(cx.ints_opt("dilations")?.unwrap_or(vec![1; 3]), "dilation")?;
    if kernel.len() != 3 || strides.len() != 3 || dilations.len() != 3 || strides.contains(&0) || dilations.contains(&0)
    {
        return Err(format!(
            "a 3-D pool needs 3 kernel sizes, strides and dilations (positive), got {kernel:?}, {strides:?} and {dilations:?}"
        ).into());
    }
    let auto_pad = cx.string("auto_pad", "NOTSET")?;
    let pads = match auto_pad.as_str() {
        "NOTSET" => pos(cx.ints_opt("pads")?.unwrap_or(vec![0; 6]), "pad")?,
        "VALID" => vec![0; 6],
        "SAME_UPPER" | "SAME_LOWER" => same_pads(&xs[2..], &kernel, &strides, &dilations, auto_pad == "SAME_UPPER")?,
        other => return Err(format!("auto_pad {other:?} is not supported").into()),
    };
    if pads.len() != 6 {
        return Err(format!("pads {pads:?} must have 6 values for a 3-D window").into());
    }
    let ceil_mode = cx.int("ceil_mode", 0)? != 0;
    pool_kind_attrs(cx, kind)?;
    let mut include = if kind == PoolKind::Avg { Some(cx.int("count_include_pad", 0)? != 0) } else { None };
    let (x, pads, crop) = if include == Some(true) && ceil_mode {
        let (x, outs) = include_pad_ceil(cx, x, &kernel, &strides, &dilations, &pads)?;
        include = Some(false);
        (x, vec![0; 6], Some(outs))
    } else {
        (x.clone(), pads, None)
    };
    let x = &x;
    let xs = x.shape();
    let (d, h, w) = (xs[2], xs[3], xs[4]);
    let plane = Window {
        kernel: kernel[1..].to_vec(),
        strides: strides[1..].to_vec(),
        dilations: dilations[1..].to_vec(),
        pads: vec![pads[1], pads[2], pads[4], pads[5]],
        auto_pad: "NOTSET".into(),
    };
    let depth = Window {
        kernel: vec![kernel[0], 1],
        strides: vec![strides[0], 1],
        dilations: vec![dilations[0], 1],
        pads: vec![pads[0], 0, pads[3], 0],
        auto_pad: "NOTSET".into(),
    };
    let cd = c.checked_mul(d).ok_or("the shape overflows")?;
    let x4 = cx.reshape(x, &[n, cd, h, w], true)?;
    let (op, mut attrs) = pool_attrs(&plane, kind, ceil_mode)?;
    if let Some(i) = include {
        attrs.set("count_include_pad", AttrValue::Bool(i));
    }
    let y = cx.call_tmp(op, &[&x4], attrs)?;
    let (h2, w2) = (y.shape()[2], y.shape()[3]);
    let hw = h2.checked_mul(w2).ok_or("the shape overflows")?;
    let y4 = cx.reshape(&y, &[n, c, d, hw], true)?;
    let (op, mut attrs) = pool_attrs(&depth, kind, ceil_mode)?;
    if let Some(i) = include {
        attrs.set("count_include_pad", AttrValue::Bool(i));
    }
    let z = cx.call_tmp(op, &[&y4], attrs)?;
    let d2 = z.shape()[2];
    let out = if kind == PoolKind::Lp || crop.is_some() {
        cx.reshape(&z, &[n, c, d2, h2, w2], true)?
    } else {
        cx.reshape(&z, &[n, c, d2, h2, w2], false)?
    };
    let out = match crop {
        Some(outs) => crop_trailing(cx, out, &outs)?,
        None => out,
    };
    Ok((out, kernel))
}

fn batch_norm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let args: Vec<Val> = (0..5).map(|i| cx.input(i)).collect::<R<_>>()?;
    let eps = cx.float("epsilon", 1e-5)?;
    let momentum = cx.float("momentum", 0.9)?;
    let training = cx.int("training_mode", 0)? != 0;
    if cx.node.outputs().skip(1).any(|o| !o.is_empty()) && cx.opset < 14 {
        // Before opset 14 the extra outputs exist only in training mode.
        return Err("training-mode outputs (mean, var, saved statistics) are not supported".into());
    }
    if training {
        return batch_norm_training(cx, &args, eps, momentum);
    }
    let refs: Vec<&Val> = args.iter().collect();
    let attrs = Attrs::new().with("axis", AttrValue::Int(1)).with("epsilon", AttrValue::Float(eps));
    let name = cx.name.clone();
    let mut outs = cx.em.call_multi("batch_norm", &refs, attrs, &name)?;
    if outs.is_empty() {
        return Err("batch_norm returned nothing".into());
    }
    one(outs.swap_remove(0))
}

/// BatchNormalization with `training_mode = 1` (opset 14): normalised by the batch's own
/// statistics (mean and biased variance over every axis but the channels), and the running
/// statistics updated as `running · momentum + batch · (1 - momentum)`.
fn batch_norm_training(cx: &mut Cx<'_>, args: &[Val], eps: f64, momentum: f64) -> R<Vec<Option<Val>>> {
    let [x, scale, bias, mean, var] = args else {
        return Err("needs the inputs X, scale, B, input_mean and input_var".into());
    };
    let rank = x.rank();
    if rank < 2 {
        return Err(format!("needs an input of rank 2 or more (N, C, …), got rank {rank}").into());
    }
    let dtype = x.ty().dtype;
    let c = x.shape()[1];
    let axes: Vec<i64> = (0..rank as i64).filter(|&a| a != 1).collect();
    let reduce = |keep: bool| Attrs::new().with("keepdims", AttrValue::Bool(keep)).with("axis", ints_i(&axes));
    let batch_mean = cx.call_tmp("mean", &[x], reduce(true))?;
    let d = cx.call_tmp("subtract", &[x, &batch_mean], Attrs::new())?;
    let sq = cx.call_tmp("multiply", &[&d, &d], Attrs::new())?;
    let batch_var = cx.call_tmp("mean", &[&sq], reduce(false))?;
    let batch_mean = cx.reshape(&batch_mean, &[c], true)?;
    let attrs = Attrs::new().with("axis", AttrValue::Int(1)).with("epsilon", AttrValue::Float(eps));
    let name = cx.name.clone();
    let mut outs = cx.em.call_multi("batch_norm", &[x, scale, bias, &batch_mean, &batch_var], attrs, &name)?;
    if outs.is_empty() {
        return Err("batch_norm returned nothing".into());
    }
    let y = outs.swap_remove(0);
    let (m, rest) = (Cx::scalar(dtype, momentum), Cx::scalar(dtype, 1.0 - momentum));
    let running = |cx: &mut Cx<'_>, old: &Val, batch: &Val| -> R<Val> {
        let a = cx.call_tmp("multiply", &[old, &m], Attrs::new())?;
        let b = cx.call_tmp("multiply", &[batch, &rest], Attrs::new())?;
        cx.call_tmp("add", &[&a, &b], Attrs::new())
    };
    let running_mean = running(cx, mean, &batch_mean)?;
    let running_var = running(cx, var, &batch_var)?;
    Ok(vec![Some(y), Some(running_mean), Some(running_var)])
}

fn layer_norm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.opt(2));
    let eps = cx.float("epsilon", 1e-5)?;
    cx.int_must("stash_type", |v| v == 1, "only float32 statistics")?;
    let shape = x.shape();
    let axis = norm_axis(cx.int("axis", -1)?, shape.len())?;
    let norm = product(&shape[axis..])?;
    let dtype = x.ty().dtype;
    let bias = match bias {
        Some(b) => b,
        None => Val::Const(Arc::new(Constant::Fill {
            ty: TensorType { shape: vec![norm].into(), dtype },
            fill: Fill::Full(0.0),
        })),
    };
    if product(&scale.shape())? != norm || product(&bias.shape())? != norm {
        return Err(format!(
            "scale {:?} and bias {:?} must cover the normalized dimensions {:?}",
            scale.shape(),
            bias.shape(),
            &shape[axis..]
        )
        .into());
    }
    let scale = cx.reshape(&scale, &[norm], true)?;
    let bias = cx.reshape(&bias, &[norm], true)?;
    let attrs = Attrs::new().with("axis", AttrValue::Int(-1)).with("epsilon", AttrValue::Float(eps));
    let y = if axis + 1 == shape.len() {
        cx.call("layer_norm", &[&x, &scale, &bias], attrs)?
    } else {
        // Several trailing axes: normalize their flattening, then restore the shape.
        let mut flat: Vec<u64> = shape[..axis].to_vec();
        flat.push(norm);
        let xf = cx.reshape(&x, &flat, true)?;
        let y = cx.call_tmp("layer_norm", &[&xf, &scale, &bias], attrs)?;
        cx.reshape(&y, &shape, false)?
    };
    let mut outs = vec![Some(y)];
    if cx.node.outputs().skip(1).any(|o| !o.is_empty()) {
        let (mean, inv_std_dev) = layer_norm_statistics(cx, &x, axis, eps)?;
        outs.extend([Some(mean), Some(inv_std_dev)]);
    }
    Ok(outs)
}

/// LayerNormalization's optional outputs `Mean` and `InvStdDev` (`1 / sqrt(var + epsilon)`),
/// over axes `axis..` kept as 1, in float32 (the stash type), as ONNX's function body computes
/// them.
fn layer_norm_statistics(cx: &mut Cx<'_>, x: &Val, axis: usize, eps: f64) -> R<(Val, Val)> {
    let x = if x.ty().dtype == DType::F32 {
        x.clone()
    } else {
        cx.call_tmp("cast", &[x], Attrs::new().with("dtype", AttrValue::DType(DType::F32)))?
    };
    let axes: Vec<i64> = (axis as i64..x.rank() as i64).collect();
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&axes));
    let mean = cx.call_tmp("mean", &[&x], attrs.clone())?;
    let d = cx.call_tmp("subtract", &[&x, &mean], Attrs::new())?;
    let sq = cx.call_tmp("multiply", &[&d, &d], Attrs::new())?;
    let var = cx.call_tmp("mean", &[&sq], attrs)?;
    let e = Cx::scalar(DType::F32, eps);
    let v = cx.call_tmp("add", &[&var, &e], Attrs::new())?;
    let sd = cx.call_tmp("sqrt", &[&v], Attrs::new())?;
    let inv = cx.call_tmp("reciprocal", &[&sd], Attrs::new())?;
    Ok((mean, inv))
}

/// `x * rsqrt(mean(x * x over axes) + epsilon)`, each step a call; `axes` are kept as 1.
fn rms_scaled(cx: &mut Cx<'_>, x: &Val, axes: &[i64], eps: f64) -> R<Val> {
    let dtype = x.ty().dtype;
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(axes));
    let sq = cx.call_tmp("multiply", &[x, x], Attrs::new())?;
    let ms = cx.call_tmp("mean", &[&sq], attrs)?;
    let e = Cx::scalar(dtype, eps);
    let v = cx.call_tmp("add", &[&ms, &e], Attrs::new())?;
    let r = cx.call_tmp("sqrt", &[&v], Attrs::new())?;
    cx.call_tmp("divide", &[x, &r], Attrs::new())
}

/// RMSNormalization (opset 23): `x / sqrt(mean(x^2 over axis..) + epsilon) * scale`, `scale`
/// broadcast to `x`.
fn rms_norm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let eps = cx.float("epsilon", 1e-5)?;
    cx.int_must("stash_type", |v| v == 1, "only float32 statistics")?;
    let rank = x.rank();
    let axis = norm_axis(cx.int("axis", -1)?, rank)?;
    if broadcast_shapes(&x.shape(), &scale.shape())? != x.shape() {
        return Err(
            format!("scale of shape {:?} does not broadcast to the input {:?}", scale.shape(), x.shape()).into()
        );
    }
    let axes: Vec<i64> = (axis as i64..rank as i64).collect();
    let n = rms_scaled(cx, &x, &axes, eps)?;
    one(cx.call("multiply", &[&n, &scale], Attrs::new())?)
}

/// InstanceNormalization: each (sample, channel) normalised over its spatial axes, then
/// `scale[c] * … + bias[c]`.
fn instance_norm(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let eps = cx.float("epsilon", 1e-5)?;
    let shape = x.shape();
    if shape.len() < 3 {
        return Err(format!("needs an input of rank 3 or more (N, C, spatial…), got rank {}", shape.len()).into());
    }
    let c = shape[1];
    if scale.shape() != [c] || bias.shape() != [c] {
        return Err(format!(
            "scale {:?} and bias {:?} must both have shape [{c}] (the channels)",
            scale.shape(),
            bias.shape()
        )
        .into());
    }
    let axes: Vec<i64> = (2..shape.len() as i64).collect();
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&axes));
    let mean = cx.call_tmp("mean", &[&x], attrs)?;
    let centred = cx.call_tmp("subtract", &[&x, &mean], Attrs::new())?;
    let n = rms_scaled(cx, &centred, &axes, eps)?;
    let mut per_channel = vec![c];
    per_channel.extend(std::iter::repeat_n(1, shape.len() - 2));
    let s = cx.reshape(&scale, &per_channel, true)?;
    let b = cx.reshape(&bias, &per_channel, true)?;
    let y = cx.call_tmp("multiply", &[&n, &s], Attrs::new())?;
    one(cx.call("add", &[&y, &b], Attrs::new())?)
}

fn softmax(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    if cx.opset >= 13 {
        let axis = norm_axis(cx.int("axis", -1)?, rank)?;
        return one(cx.call("softmax", &[&x], Attrs::new().with("axis", AttrValue::Int(axis as i64)))?);
    }
    // Before opset 13, Softmax coerces the input to 2-D [prod(:axis), prod(axis:)].
    let axis = norm_axis(cx.int("axis", 1)?, rank)?;
    let attrs = Attrs::new().with("axis", AttrValue::Int(-1));
    if axis + 1 == rank {
        return one(cx.call("softmax", &[&x], attrs)?);
    }
    let flat = [product(&shape[..axis])?, product(&shape[axis..])?];
    let xf = cx.reshape(&x, &flat, true)?;
    let y = cx.call_tmp("softmax", &[&xf], attrs)?;
    one(cx.reshape(&y, &shape, false)?)
}

fn clip(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let (lo, hi) = if cx.opset >= 11 {
        let get = |cx: &Cx<'_>, i: usize, what: &str| -> R<Option<f64>> {
            match cx.const_floats(i, what)? {
                Some(v) if v.len() == 1 => Ok(Some(v[0])),
                Some(v) => Err(format!("input {i} ({what}) must be a scalar, got {} values", v.len()).into()),
                None => Ok(None),
            }
        };
        (get(cx, 1, "min")?, get(cx, 2, "max")?)
    } else {
        (cx.float_opt("min")?, cx.float_opt("max")?)
    };
    if lo.is_none() && hi.is_none() {
        return one(x);
    }
    let attrs = Attrs::new()
        .with("a_min", AttrValue::Float(lo.unwrap_or(f64::NEG_INFINITY)))
        .with("a_max", AttrValue::Float(hi.unwrap_or(f64::INFINITY)));
    one(cx.call("clip", &[&x], attrs)?)
}

/// The reductions ONNX defines as a sum with something before and after it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Composite {
    /// `sum(|x|)`.
    L1,
    /// `sqrt(sum(x * x))`.
    L2,
    /// `sum(x * x)`.
    SumSquare,
    /// `log(sum(x))`.
    LogSum,
    /// `log(sum(exp(x)))`, computed as `m + log(sum(exp(x - m)))` with `m` the maximum over
    /// the same axes, so large inputs do not overflow.
    LogSumExp,
}

/// ReduceL1 / L2 / SumSquare / LogSum / LogSumExp (axes an attribute before opset 18, an
/// input from it) as `sum` with the elementwise operators around it.
fn reduce_composite(cx: &mut Cx<'_>, kind: Composite) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let axes = axes_of(cx, 18, 1)?;
    let keepdims = cx.int("keepdims", 1)? != 0;
    let noop = cx.int("noop_with_empty_axes", 0)? != 0;
    let axes: Vec<i64> = match axes {
        Some(a) if !a.is_empty() => a.iter().map(|&a| norm_axis(a, rank).map(|a| a as i64)).collect::<R<_>>()?,
        _ if noop => return one(x),
        _ => (0..rank as i64).collect(),
    };
    let attrs = |keep: bool| Attrs::new().with("keepdims", AttrValue::Bool(keep)).with("axis", ints_i(&axes));
    let out_shape: Vec<u64> = x
        .shape()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&(i as i64)), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    match kind {
        Composite::L1 => {
            let a = cx.call_tmp("abs", &[&x], Attrs::new())?;
            one(cx.call("sum", &[&a], attrs(keepdims))?)
        }
        Composite::SumSquare | Composite::L2 => {
            let sq = cx.call_tmp("multiply", &[&x, &x], Attrs::new())?;
            if kind == Composite::SumSquare {
                return one(cx.call("sum", &[&sq], attrs(keepdims))?);
            }
            let s = cx.call_tmp("sum", &[&sq], attrs(keepdims))?;
            one(cx.call("sqrt", &[&s], Attrs::new())?)
        }
        Composite::LogSum => {
            let s = cx.call_tmp("sum", &[&x], attrs(keepdims))?;
            one(cx.call("log", &[&s], Attrs::new())?)
        }
        Composite::LogSumExp => {
            if x.shape().iter().enumerate().any(|(i, &d)| d == 0 && axes.contains(&(i as i64))) {
                // log(sum of no terms) = log(0).
                return one(filled(&out_shape, x.ty().dtype, f64::NEG_INFINITY));
            }
            let m = cx.call_tmp("max", &[&x], attrs(true))?;
            // An infinite maximum would make `x - m` NaN; the sum then decides (ONNX's own
            // reference computes the naive formula, which is what this is for such inputs).
            let shifted = cx.call_tmp("subtract", &[&x, &m], Attrs::new())?;
            let e = cx.call_tmp("exp", &[&shifted], Attrs::new())?;
            let s = cx.call_tmp("sum", &[&e], attrs(true))?;
            let l = cx.call_tmp("log", &[&s], Attrs::new())?;
            let y = cx.call_tmp("add", &[&l, &m], Attrs::new())?;
            one(cx.reshape(&y, &out_shape, false)?)
        }
    }
}

/// LogSoftmax as `x - m - log(sum(exp(x - m)))` with `m` the maximum along the axis (before
/// opset 13, over the 2-D coercion `[prod(:axis), prod(axis:)]`).
fn log_softmax(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    let rank = shape.len();
    let (xf, axis) = if cx.opset >= 13 {
        (x.clone(), norm_axis(cx.int("axis", -1)?, rank)?)
    } else {
        let axis = norm_axis(cx.int("axis", 1)?, rank)?;
        let flat = [product(&shape[..axis])?, product(&shape[axis..])?];
        (cx.reshape(&x, &flat, true)?, 1)
    };
    let attrs = Attrs::new().with("keepdims", AttrValue::Bool(true)).with("axis", ints_i(&[axis as i64]));
    let m = cx.call_tmp("max", &[&xf], attrs.clone())?;
    let shifted = cx.call_tmp("subtract", &[&xf, &m], Attrs::new())?;
    let e = cx.call_tmp("exp", &[&shifted], Attrs::new())?;
    let s = cx.call_tmp("sum", &[&e], attrs)?;
    let l = cx.call_tmp("log", &[&s], Attrs::new())?;
    if xf.shape() == shape {
        return one(cx.call("subtract", &[&shifted, &l], Attrs::new())?);
    }
    let y = cx.call_tmp("subtract", &[&shifted, &l], Attrs::new())?;
    one(cx.reshape(&y, &shape, false)?)
}

/// A constant of shape `shape` and type `dtype` holding `v` everywhere.
fn filled(shape: &[u64], dtype: DType, v: f64) -> Val {
    Val::Const(Arc::new(Constant::Fill { ty: TensorType { shape: shape.to_vec().into(), dtype }, fill: Fill::Full(v) }))
}

/// The identity element of reduction `op` over `dtype`: what ONNX's reductions give over an
/// empty set (`None` for `mean`, which has none).
fn reduce_identity(op: &str, dtype: DType) -> Option<f64> {
    let (lowest, highest) = match (dtype, dtype.int_range()) {
        (DType::Bool, _) => (0.0, 1.0),
        (_, Some((lo, hi))) => (lo as f64, hi as f64),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    match op {
        "max" => Some(lowest),
        "min" => Some(highest),
        "sum" => Some(0.0),
        "prod" => Some(1.0),
        _ => None,
    }
}

fn reduce(cx: &mut Cx<'_>, op: &str, axes_input_from: i64) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let axes = axes_of(cx, axes_input_from, 1)?;
    let keepdims = cx.int("keepdims", 1)? != 0;
    let noop = cx.int("noop_with_empty_axes", 0)? != 0;
    let mut attrs = Attrs::new().with("keepdims", AttrValue::Bool(keepdims));
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let a: Vec<usize> = a.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?;
            attrs.set("axis", ints_i(&a.iter().map(|&a| a as i64).collect::<Vec<_>>()));
            a
        }
        _ if noop => return one(x),
        _ => (0..rank).collect(),
    };
    let shape = x.shape();
    let dtype = x.ty().dtype;
    if let Some(v) = reduce_identity(op, dtype).filter(|_| axes.iter().any(|&a| shape[a] == 0)) {
        let out: Vec<u64> = (0..rank)
            .filter_map(|i| match (axes.contains(&i), keepdims) {
                (false, _) => Some(shape[i]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        return one(filled(&out, dtype, v));
    }
    if dtype == DType::Bool && matches!(op, "max" | "min") {
        // Over bool, max is `any` and min is `all`: the same reductions over 0 / 1.
        let u = cx.call_tmp("cast", &[&x], Attrs::new().with("dtype", AttrValue::DType(DType::U8)))?;
        let r = cx.call_tmp(op, &[&u], attrs)?;
        return one(cx.call("cast", &[&r], Attrs::new().with("dtype", AttrValue::DType(DType::Bool)))?);
    }
    one(cx.call(op, &[&x], attrs)?)
}

fn pad(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let mode = cx.string("mode", "constant")?;
    if !matches!(mode.as_str(), "constant" | "reflect" | "edge" | "wrap") {
        return Err(format!("mode {mode:?} is not supported (constant, reflect, edge, wrap)").into());
    }
    let (pads, value, axes) = if cx.opset >= 11 {
        let pads = cx.const_ints(1, "pads")?.ok_or("input 1 (pads) is missing")?;
        let value = match cx.const_floats(2, "constant_value")? {
            Some(v) if v.len() == 1 => v[0],
            Some(v) => return Err(format!("input 2 (constant_value) must be a scalar, got {} values", v.len()).into()),
            None => 0.0,
        };
        (pads, value, cx.const_ints(3, "axes")?)
    } else {
        (cx.ints_opt("pads")?.ok_or("attribute `pads` is required")?, cx.float("value", 0.0)?, None)
    };
    let pads = match axes {
        None => pads,
        Some(axes) => {
            if pads.len() != 2 * axes.len() {
                return Err(format!("{} pads for {} axes", pads.len(), axes.len()).into());
            }
            let mut full = vec![0i64; 2 * rank];
            for (j, &a) in axes.iter().enumerate() {
                let a = norm_axis(a, rank)?;
                full[a] = pads[j];
                full[a + rank] = pads[j + axes.len()];
            }
            full
        }
    };
    if pads.len() != 2 * rank {
        return Err(format!("{} pads for rank {rank}", pads.len()).into());
    }
    if pads.iter().all(|&p| p == 0) {
        return one(x);
    }
    if mode == "wrap" {
        return one(wrap_pad(cx, x, &pads)?);
    }
    let attrs = Attrs::new()
        .with("pad_width", ints_i(&pads))
        .with("pad_value", AttrValue::Float(value))
        .with("pad_mode", AttrValue::Str(mode.into()));
    one(cx.call("pad", &[&x], attrs)?)
}

/// Pad mode `wrap` (opset 19): per axis, the last `begin` elements before `x` and the first
/// `end` after it, as `strided_slice`s and a `concatenate`; a negative pad crops. Pads up to
/// the axis' length (one wrap-around), as onnx's reference (`numpy.pad`) takes them.
fn wrap_pad(cx: &mut Cx<'_>, x: Val, pads: &[i64]) -> R<Val> {
    let rank = x.rank();
    let mut y = x;
    for axis in 0..rank {
        let (begin, end) = (pads[axis], pads[axis + rank]);
        if begin == 0 && end == 0 {
            continue;
        }
        let len = y.shape()[axis] as i64;
        let kept = len - (-begin).max(0) - (-end).max(0);
        if kept < 0 || begin > kept || end > kept {
            return Err(format!(
                "wrap pads ({begin}, {end}) on axis {axis} of length {len} crop past it or wrap around more than once"
            )
            .into());
        }
        let slice = |cx: &mut Cx<'_>, v: &Val, b: i64, e: i64| {
            let attrs =
                Attrs::new().with("begin", ints_i(&[b])).with("end", ints_i(&[e])).with("axes", ints_i(&[axis as i64]));
            cx.call_tmp("strided_slice", &[v], attrs)
        };
        // Crops first, then wrap-around copies of what is left.
        let (b0, e0) = ((-begin).max(0), len - (-end).max(0));
        let core = if (b0, e0) == (0, len) { y.clone() } else { slice(cx, &y, b0, e0)? };
        let n = e0 - b0;
        let mut parts = Vec::new();
        if begin > 0 {
            parts.push(slice(cx, &core, n - begin, n)?);
        }
        parts.push(core.clone());
        if end > 0 {
            parts.push(slice(cx, &core, 0, end)?);
        }
        let refs: Vec<&Val> = parts.iter().collect();
        y = if refs.len() == 1 {
            core
        } else {
            cx.call_tmp("concatenate", &refs, Attrs::new().with("axis", AttrValue::Int(axis as i64)))?
        };
    }
    Ok(y)
}
