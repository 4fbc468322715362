//! The operator table: every operator passel knows, with its arity, attribute schema, fusion
//! pattern, stateful flag, type relation and reference kernel.
//!
//! Relations and kernels are shared by families and take the operator's name so that their
//! errors name it; the non-capturing closures below bind that name and coerce to the plain
//! function pointers of [`OpDef`].

use super::kernels::elementwise::{self, Arith, Bits2, Cmp, Param, Unary};
use super::kernels::reduce::{self, Reduce as ReduceKind};
use super::kernels::{create, einsum, grid_sample, index, linear, nn, pool, resize, scatter, shape};
use super::{Arity, AttrKind, AttrSpec, OpDef, OpPattern};

// Macros rather than `const fn`s so that `&[attr!(…)]` is promoted to a `'static` slice.
macro_rules! attr {
    ($name:literal, $kind:ident) => {
        AttrSpec { name: $name, kind: AttrKind::$kind, required: false }
    };
}

macro_rules! required {
    ($name:literal, $kind:ident) => {
        AttrSpec { name: $name, kind: AttrKind::$kind, required: true }
    };
}

const AXIS: AttrSpec = attr!("axis", Int);
const EPSILON: AttrSpec = attr!("epsilon", Float);
const REDUCE_ATTRS: &[AttrSpec] = &[attr!("axis", Ints), attr!("keepdims", Bool)];
const POOL_ATTRS: &[AttrSpec] = &[
    required!("pool_size", Ints),
    attr!("strides", Ints),
    attr!("padding", Ints),
    attr!("dilation", Ints),
    attr!("ceil_mode", Bool),
];
const AVG_POOL_ATTRS: &[AttrSpec] = &[
    required!("pool_size", Ints),
    attr!("strides", Ints),
    attr!("padding", Ints),
    attr!("dilation", Ints),
    attr!("ceil_mode", Bool),
    attr!("count_include_pad", Bool),
];
const ARG_ATTRS: &[AttrSpec] = &[attr!("axis", Int), attr!("keepdims", Bool), attr!("select_last_index", Bool)];
const CUM_ATTRS: &[AttrSpec] = &[attr!("axis", Int), attr!("exclusive", Bool), attr!("reverse", Bool)];
const FILL_ATTRS: &[AttrSpec] = &[required!("shape", Ints), attr!("dtype", DType)];

macro_rules! unary {
    ($name:literal, $f:ident, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(1),
            attrs: &[],
            pattern: OpPattern::Elementwise,
            stateful: false,
            tuple_result: false,
            type_rel: |args, _| elementwise::unary_rel($name, Unary::$f, args),
            kernel: |args, attrs, ctx| elementwise::unary($name, Unary::$f, args, attrs, ctx),
            scalar_f32: Some(|args| match *args {
                [x] => Some(Unary::$f.apply_f32(x)),
                _ => None,
            }),
            cost: linear,
            doc: $doc,
        }
    };
}

macro_rules! param_unary {
    ($name:literal, $f:ident, $attrs:expr, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(1),
            attrs: $attrs,
            pattern: OpPattern::Elementwise,
            stateful: false,
            tuple_result: false,
            type_rel: |args, attrs| elementwise::param_unary_rel($name, Param::$f, args, attrs),
            kernel: |args, attrs, ctx| elementwise::param_unary($name, Param::$f, args, attrs, ctx),
            // The scalar fast path sees no attributes.
            scalar_f32: None,
            cost: linear,
            doc: $doc,
        }
    };
}

macro_rules! arith {
    ($name:literal, $f:ident, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(2),
            attrs: &[],
            pattern: OpPattern::Broadcast,
            stateful: false,
            tuple_result: false,
            type_rel: |args, _| elementwise::arith_rel($name, args),
            kernel: |args, attrs, ctx| elementwise::arith($name, Arith::$f, args, attrs, ctx),
            scalar_f32: Some(|args| match *args {
                [x, y] => Some(Arith::$f.apply_f32(x, y)),
                _ => None,
            }),
            cost: linear,
            doc: $doc,
        }
    };
}

macro_rules! bits2 {
    ($name:literal, $f:ident, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(2),
            attrs: &[],
            pattern: OpPattern::Broadcast,
            stateful: false,
            tuple_result: false,
            type_rel: |args, _| elementwise::bits2_rel($name, Bits2::$f, args),
            kernel: |args, attrs, ctx| elementwise::bits2($name, Bits2::$f, args, attrs, ctx),
            scalar_f32: None,
            cost: linear,
            doc: $doc,
        }
    };
}

macro_rules! compare {
    ($name:literal, $f:ident, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(2),
            attrs: &[],
            pattern: OpPattern::Broadcast,
            stateful: false,
            tuple_result: false,
            type_rel: |args, _| elementwise::compare_rel($name, args),
            kernel: |args, attrs, ctx| elementwise::compare($name, Cmp::$f, args, attrs, ctx),
            scalar_f32: None,
            cost: linear,
            doc: $doc,
        }
    };
}

macro_rules! reduction {
    ($name:literal, $f:ident, $doc:literal) => {
        OpDef {
            name: $name,
            arity: Arity::Exact(1),
            attrs: REDUCE_ATTRS,
            pattern: OpPattern::Reduce,
            stateful: false,
            tuple_result: false,
            type_rel: |args, attrs| reduce::reduce_rel($name, ReduceKind::$f, args, attrs),
            kernel: |args, attrs, ctx| reduce::reduce($name, ReduceKind::$f, args, attrs, ctx),
            scalar_f32: None,
            cost: linear,
            doc: $doc,
        }
    };
}

/// A pure operator with a single result, of linear cost (`OpDef { cost, ..simple(…) }` for
/// another).
#[allow(clippy::too_many_arguments)]
const fn simple(
    name: &'static str,
    arity: Arity,
    attrs: &'static [AttrSpec],
    pattern: OpPattern,
    type_rel: super::TypeRel,
    kernel: super::Kernel,
    doc: &'static str,
) -> OpDef {
    OpDef {
        name,
        arity,
        attrs,
        pattern,
        stateful: false,
        tuple_result: false,
        type_rel,
        kernel,
        scalar_f32: None,
        cost: linear,
        doc,
    }
}

/// Every operator passel knows, in registry order.
pub(super) fn all() -> Vec<OpDef> {
    use Arity::{AtLeast, Exact};
    use OpPattern::*;
    vec![
        arith!("add", Add, "elementwise sum with numpy broadcasting"),
        arith!("subtract", Sub, "elementwise difference with numpy broadcasting"),
        arith!("multiply", Mul, "elementwise product with numpy broadcasting"),
        arith!(
            "divide",
            Div,
            "elementwise quotient with numpy broadcasting (integers truncate; dividing by zero is an error)"
        ),
        arith!(
            "power",
            Pow,
            "elementwise power a^b with numpy broadcasting (integers: exact modulo 2^bits, wrapping \
             like the other integer operators; a negative exponent truncates toward zero)"
        ),
        arith!("maximum", Max, "elementwise maximum with numpy broadcasting (NaN propagates)"),
        arith!("minimum", Min, "elementwise minimum with numpy broadcasting (NaN propagates)"),
        unary!("negative", Negative, "elementwise -x"),
        unary!("exp", Exp, "elementwise e^x"),
        unary!("log", Log, "elementwise natural logarithm"),
        unary!("sqrt", Sqrt, "elementwise square root"),
        unary!("tanh", Tanh, "elementwise hyperbolic tangent"),
        unary!("sigmoid", Sigmoid, "elementwise 1 / (1 + e^-x)"),
        unary!("relu", Relu, "elementwise max(x, 0)"),
        param_unary!(
            "gelu",
            Gelu,
            &[attr!("approximate", Str)],
            "elementwise gelu: `approximate` \"none\" (default) x/2 (1 + erf(x/sqrt 2)), or \"tanh\" 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))"
        ),
        unary!("erf", Erf, "elementwise error function"),
        unary!("reciprocal", Reciprocal, "elementwise 1 / x"),
        unary!("abs", Abs, "elementwise |x| (integers wrap: |MIN| = MIN)"),
        unary!("hard_swish", HardSwish, "elementwise x * max(0, min(1, x/6 + 0.5))"),
        unary!("floor", Floor, "elementwise largest integer <= x"),
        unary!("ceil", Ceil, "elementwise smallest integer >= x"),
        unary!("round", Round, "elementwise nearest integer, halves to even"),
        unary!("sign", Sign, "elementwise -1, 0 or 1 by the sign of x (NaN stays NaN); integers too"),
        unary!("sin", Sin, "elementwise sine"),
        unary!("cos", Cos, "elementwise cosine"),
        unary!("tan", Tan, "elementwise tangent"),
        unary!("asin", Asin, "elementwise arcsine"),
        unary!("acos", Acos, "elementwise arccosine"),
        unary!("atan", Atan, "elementwise arctangent"),
        unary!("sinh", Sinh, "elementwise hyperbolic sine"),
        unary!("cosh", Cosh, "elementwise hyperbolic cosine"),
        unary!("asinh", Asinh, "elementwise inverse hyperbolic sine"),
        unary!("acosh", Acosh, "elementwise inverse hyperbolic cosine"),
        unary!("atanh", Atanh, "elementwise inverse hyperbolic tangent"),
        unary!("softplus", Softplus, "elementwise ln(1 + e^x)"),
        unary!("softsign", Softsign, "elementwise x / (1 + |x|)"),
        unary!("mish", Mish, "elementwise x * tanh(ln(1 + e^x))"),
        param_unary!(
            "elu",
            Elu,
            &[attr!("alpha", Float)],
            "elementwise x for x >= 0, else alpha (e^x - 1); alpha 1 by default"
        ),
        param_unary!(
            "selu",
            Selu,
            &[attr!("alpha", Float), attr!("gamma", Float)],
            "elementwise gamma * elu(x, alpha), alpha 1.6732632 and gamma 1.0507010 by default"
        ),
        param_unary!(
            "celu",
            Celu,
            &[attr!("alpha", Float)],
            "elementwise max(0, x) + min(0, alpha (e^(x/alpha) - 1)); alpha (nonzero) 1 by default"
        ),
        param_unary!(
            "leaky_relu",
            LeakyRelu,
            &[attr!("alpha", Float)],
            "elementwise x for x >= 0, else alpha x; alpha 0.01 by default"
        ),
        param_unary!(
            "thresholded_relu",
            ThresholdedRelu,
            &[attr!("alpha", Float)],
            "elementwise x for x > alpha, else 0; alpha 1 by default"
        ),
        param_unary!(
            "shrink",
            Shrink,
            &[attr!("bias", Float), attr!("lambd", Float)],
            "elementwise x + bias below -lambd, x - bias above lambd, else 0 (bias 0, lambd 0.5 by default); numeric"
        ),
        simple(
            "isnan",
            Exact(1),
            &[],
            Elementwise,
            |args, attrs| elementwise::float_test_rel("isnan", args, attrs),
            |args, attrs, ctx| elementwise::float_test("isnan", false, args, attrs, ctx),
            "elementwise x is NaN, bool result",
        ),
        simple(
            "isinf",
            Exact(1),
            &[attr!("detect_positive", Bool), attr!("detect_negative", Bool)],
            Elementwise,
            |args, attrs| elementwise::float_test_rel("isinf", args, attrs),
            |args, attrs, ctx| elementwise::float_test("isinf", true, args, attrs, ctx),
            "elementwise x is +inf (with `detect_positive`, default true) or -inf (`detect_negative`, default true), bool result",
        ),
        simple(
            "mod",
            Exact(2),
            &[attr!("fmod", Bool)],
            Broadcast,
            elementwise::mod_rel,
            elementwise::mod_,
            "elementwise remainder with broadcasting: floored (sign of b, numpy mod) or with `fmod` truncated (sign of a, C fmod); integer b = 0 is an error",
        ),
        bits2!("logical_and", And, "elementwise a && b on bool tensors with broadcasting"),
        bits2!("logical_or", Or, "elementwise a || b on bool tensors with broadcasting"),
        bits2!("logical_xor", Xor, "elementwise a != b on bool tensors with broadcasting"),
        bits2!("bitwise_and", And, "elementwise a & b on integer tensors with broadcasting"),
        bits2!("bitwise_or", Or, "elementwise a | b on integer tensors with broadcasting"),
        bits2!("bitwise_xor", Xor, "elementwise a ^ b on integer tensors with broadcasting"),
        bits2!("left_shift", Shl, "elementwise a << b on integer tensors (0 when b is negative or >= the width)"),
        bits2!("right_shift", Shr, "elementwise a >> b on integer tensors, arithmetic when signed (the sign when b is negative or >= the width)"),
        simple(
            "bitwise_not",
            Exact(1),
            &[],
            Elementwise,
            elementwise::bitwise_not_rel,
            elementwise::bitwise_not,
            "elementwise ~x on an integer tensor",
        ),
        param_unary!(
            "clip",
            Clip,
            &[required!("a_min", Float), required!("a_max", Float)],
            "elementwise min(max(x, a_min), a_max) on any numeric dtype (a_min > a_max gives a_max; NaN stays NaN)"
        ),
        param_unary!(
            "hard_sigmoid",
            HardSigmoid,
            &[attr!("alpha", Float), attr!("beta", Float)],
            "elementwise max(0, min(1, alpha*x + beta)), alpha 0.2 and beta 0.5 by default"
        ),
        simple(
            "logical_not",
            Exact(1),
            &[],
            Elementwise,
            elementwise::logical_not_rel,
            elementwise::logical_not,
            "elementwise !x on a bool tensor",
        ),
        compare!("equal", Eq, "elementwise a == b with broadcasting, bool result"),
        compare!("not_equal", Ne, "elementwise a != b with broadcasting, bool result"),
        compare!("less", Lt, "elementwise a < b with broadcasting, bool result"),
        compare!("less_equal", Le, "elementwise a <= b with broadcasting, bool result"),
        compare!("greater", Gt, "elementwise a > b with broadcasting, bool result"),
        compare!("greater_equal", Ge, "elementwise a >= b with broadcasting, bool result"),
        simple(
            "where",
            Exact(3),
            &[],
            Broadcast,
            |args, _| elementwise::where_rel(args),
            elementwise::where_,
            "where(cond, a, b): a where cond is true, else b; all three broadcast",
        ),
        simple(
            "cast",
            Exact(1),
            &[required!("dtype", DType)],
            Elementwise,
            elementwise::cast_rel,
            elementwise::cast,
            "converts elements to `dtype` (floats to ints truncate and saturate, nonzero is true)",
        ),
        OpDef {
            cost: nn::matmul_cost,
            ..simple(
                "matmul",
                Exact(2),
                &[],
                OutEWiseFusable,
                nn::matmul_rel,
                nn::matmul,
                "numpy/ONNX MatMul: [...,M,K]x[...,K,N]->[...,M,N], batch dims broadcast, 1-d operands are a row/column",
            )
        },
        OpDef {
            cost: nn::dense_cost,
            ..simple(
                "dense",
                Exact(2),
                &[],
                OutEWiseFusable,
                nn::dense_rel,
                nn::dense,
                "fully connected layer: x[...,K] times w[M,K] transposed -> [...,M]",
            )
        },
        OpDef {
            cost: einsum::einsum_cost,
            ..simple(
                "einsum",
                AtLeast(1),
                &[required!("equation", Str)],
                OutEWiseFusable,
                einsum::einsum_rel,
                einsum::einsum,
                "ONNX Einsum: sum of products over the labelled axes of `equation` (\"bij,bjk->bik\"; `...` broadcasts, implicit output without `->`, repeated labels take diagonals)",
            )
        },
        OpDef {
            cost: nn::conv2d_cost,
            ..simple(
                "conv2d",
                Exact(2),
                &[attr!("strides", Ints), attr!("padding", Ints), attr!("dilation", Ints), attr!("groups", Int)],
                OutEWiseFusable,
                nn::conv2d_rel,
                nn::conv2d,
                "2-d convolution, data NCHW, weight OIHW; padding [p], [ph,pw] or [top,left,bottom,right]",
            )
        },
        OpDef {
            cost: nn::conv2d_transpose_cost,
            ..simple(
                "conv2d_transpose",
                Exact(2),
                &[
                    attr!("strides", Ints),
                    attr!("padding", Ints),
                    attr!("dilation", Ints),
                    attr!("groups", Int),
                    attr!("output_padding", Ints),
                ],
                OutEWiseFusable,
                nn::conv2d_transpose_rel,
                nn::conv2d_transpose,
                "2-d transposed convolution (ONNX ConvTranspose), data NCHW, weight IOHW [C_in, C_out/groups, kh, kw]",
            )
        },
        OpDef {
            cost: |args, attrs, out| pool::pool2d_cost("max_pool2d", args, attrs, out),
            ..simple(
                "max_pool2d",
                Exact(1),
                POOL_ATTRS,
                OutEWiseFusable,
                |args, attrs| pool::pool2d_rel("max_pool2d", args, attrs),
                |args, attrs, ctx| pool::pool2d("max_pool2d", false, args, attrs, ctx),
                "ONNX MaxPool over NCHW: `pool_size`, `strides`, `padding` [t,l,b,r], `dilation`, `ceil_mode`; padding never wins, NaN is skipped like padding (ONNX reference)",
            )
        },
        OpDef {
            cost: |args, attrs, out| pool::pool2d_cost("avg_pool2d", args, attrs, out),
            ..simple(
                "avg_pool2d",
                Exact(1),
                AVG_POOL_ATTRS,
                OutEWiseFusable,
                |args, attrs| pool::pool2d_rel("avg_pool2d", args, attrs),
                |args, attrs, ctx| pool::pool2d("avg_pool2d", true, args, attrs, ctx),
                "ONNX AveragePool over NCHW: like max_pool2d, dividing by the input elements (NaN skipped) or with `count_include_pad` the window size (NaN propagates)",
            )
        },
        simple(
            "global_avg_pool2d",
            Exact(1),
            &[],
            OutEWiseFusable,
            |args, attrs| pool::global_pool_rel("global_avg_pool2d", args, attrs),
            |args, attrs, ctx| pool::global_pool("global_avg_pool2d", true, args, attrs, ctx),
            "mean over the spatial axes of NCHW data, keeping them as 1: [N,C,1,1]",
        ),
        simple(
            "global_max_pool2d",
            Exact(1),
            &[],
            OutEWiseFusable,
            |args, attrs| pool::global_pool_rel("global_max_pool2d", args, attrs),
            |args, attrs, ctx| pool::global_pool("global_max_pool2d", false, args, attrs, ctx),
            "maximum over the spatial axes of NCHW data, keeping them as 1: [N,C,1,1]",
        ),
        OpDef {
            cost: pool::lrn_cost,
            ..simple(
                "lrn",
                Exact(1),
                &[required!("size", Int), attr!("alpha", Float), attr!("beta", Float), attr!("bias", Float)],
                Opaque,
                pool::lrn_rel,
                pool::lrn,
                "ONNX LRN across channels: x / (bias + alpha/size * sum of squares over `size` neighbouring channels)^beta",
            )
        },
        simple(
            "bias_add",
            Exact(2),
            &[AXIS],
            Broadcast,
            nn::bias_add_rel,
            nn::bias_add,
            "adds a 1-d bias along `axis` (default 1)",
        ),
        OpDef {
            name: "batch_norm",
            arity: Exact(5),
            attrs: &[AXIS, EPSILON],
            pattern: Opaque,
            stateful: false,
            tuple_result: true,
            type_rel: nn::batch_norm_rel,
            kernel: nn::batch_norm,
            scalar_f32: None,
            cost: linear,
            doc: "inference batch norm of (x, gamma, beta, mean, var) along `axis`; returns (out, mean, var)",
        },
        simple(
            "layer_norm",
            Exact(3),
            &[AXIS, EPSILON],
            Opaque,
            nn::layer_norm_rel,
            nn::layer_norm,
            "normalises x over `axis` (default -1), then scales by gamma and shifts by beta",
        ),
        simple("softmax", Exact(1), &[AXIS], Reduce, nn::softmax_rel, nn::softmax, "softmax over `axis` (default -1)"),
        // Dropout is the identity in inference, which is what the reference kernel computes;
        // it is therefore pure (not stateful), but opaque so that fusion leaves it for
        // SimplifyInference to remove.
        simple(
            "dropout",
            Exact(1),
            &[attr!("rate", Float)],
            Opaque,
            nn::dropout_rel,
            nn::dropout,
            "dropout with `rate` in [0, 1); the identity in inference semantics",
        ),
        simple(
            "reshape",
            Exact(1),
            &[required!("newshape", Ints)],
            Injective,
            shape::reshape_rel,
            shape::reshape,
            "reshapes to `newshape` (one -1 is inferred) keeping row-major element order",
        ),
        simple(
            "transpose",
            Exact(1),
            &[attr!("axes", Ints)],
            Injective,
            shape::transpose_rel,
            shape::transpose,
            "permutes dimensions by `axes` (default: reversed)",
        ),
        simple(
            "concatenate",
            AtLeast(1),
            &[AXIS],
            Injective,
            shape::concatenate_rel,
            shape::concatenate,
            "joins tensors along `axis` (default 0)",
        ),
        OpDef {
            name: "split",
            arity: Exact(1),
            attrs: &[attr!("indices_or_sections", Int), attr!("indices", Ints), AXIS],
            pattern: Injective,
            stateful: false,
            tuple_result: true,
            type_rel: shape::split_rel,
            kernel: shape::split,
            scalar_f32: None,
            cost: linear,
            doc: "splits x along `axis` into `indices_or_sections` equal parts, or at the split points `indices` (exactly one is given); a tuple",
        },
        simple(
            "broadcast_to",
            Exact(1),
            &[required!("shape", Ints)],
            Broadcast,
            shape::broadcast_to_rel,
            shape::broadcast_to,
            "broadcasts x to `shape` under numpy rules",
        ),
        simple(
            "bitcast",
            Exact(1),
            &[required!("dtype", DType)],
            Elementwise,
            shape::bitcast_rel,
            shape::bitcast,
            "ONNX BitCast: the bytes of x reinterpreted as `dtype`, of the same width",
        ),
        simple(
            "take",
            Exact(2),
            &[AXIS],
            Injective,
            index::take_rel,
            index::take,
            "ONNX Gather: picks slices of x along `axis` (default 0) at i32/i64 `indices` (negative count from the end)",
        ),
        simple(
            "strided_slice",
            Exact(1),
            &[required!("begin", Ints), required!("end", Ints), attr!("strides", Ints), attr!("axes", Ints)],
            Injective,
            index::strided_slice_rel,
            index::strided_slice,
            "ONNX Slice: x[begin:end:strides] on `axes` (default 0..len(begin)); negative indices, clamping, negative strides",
        ),
        simple(
            "pad",
            Exact(1),
            &[required!("pad_width", Ints), attr!("pad_value", Float), attr!("pad_mode", Str)],
            Injective,
            index::pad_rel,
            index::pad,
            "ONNX Pad: `pad_width` [x1_begin, x2_begin, …, x1_end, …] (negative crops), `pad_mode` constant (with `pad_value`), reflect or edge",
        ),
        OpDef {
            cost: resize::resize2d_cost,
            ..simple(
                "resize2d",
                Exact(1),
                &[
                    required!("size", Ints),
                    attr!("method", Str),
                    attr!("coordinate_transformation_mode", Str),
                    attr!("rounding_method", Str),
                    attr!("cubic_alpha", Float),
                    attr!("exclude_outside", Bool),
                    attr!("scale_h", Float),
                    attr!("scale_w", Float),
                ],
                Injective,
                resize::resize2d_rel,
                resize::resize2d,
                "ONNX Resize of the last two dims to `size` [h, w]: `method` nearest/linear/cubic, ONNX coordinate modes and rounding; optional `scale_h`/`scale_w` when ONNX gave scales",
            )
        },
        simple(
            "one_hot",
            Exact(2),
            &[required!("depth", Int), AXIS],
            Injective,
            index::one_hot_rel,
            index::one_hot,
            "ONNX OneHot: one_hot(indices, [off, on]) inserts an axis of length `depth` at `axis` (default -1), `on` at each index (negative counts from depth), `off` elsewhere",
        ),
        simple(
            "gather_elements",
            Exact(2),
            &[AXIS],
            Injective,
            scatter::gather_elements_rel,
            scatter::gather_elements,
            "ONNX GatherElements: out[i] = data[i with `axis` (default 0) replaced by indices[i]]; indices i32/i64, negative count from the end",
        ),
        simple(
            "scatter_elements",
            Exact(3),
            &[AXIS, attr!("reduction", Str)],
            Injective,
            scatter::scatter_elements_rel,
            scatter::scatter_elements,
            "ONNX ScatterElements: data with updates[i] written (`reduction` none, add, mul, max, min) at i with `axis` replaced by indices[i], in index order",
        ),
        simple(
            "scatter_nd",
            Exact(3),
            &[attr!("reduction", Str)],
            Injective,
            scatter::scatter_nd_rel,
            scatter::scatter_nd,
            "ONNX ScatterND: data with the slices updates[i…] written (`reduction` none, add, mul, max, min) at the index tuples indices[i…, :], in index order",
        ),
        OpDef {
            cost: grid_sample::grid_sample_cost,
            ..simple(
                "grid_sample",
                Exact(2),
                &[attr!("mode", Str), attr!("padding_mode", Str), attr!("align_corners", Bool)],
                Injective,
                grid_sample::grid_sample_rel,
                grid_sample::grid_sample,
                "ONNX GridSample: x [N,C,D1..Dr] sampled at grid [N,O1..Or,r] (normalised, x first), `mode` linear/nearest/cubic, `padding_mode` zeros/border/reflection, `align_corners`",
            )
        },
        simple(
            "trilu",
            Exact(1),
            &[attr!("upper", Bool), attr!("k", Int)],
            Injective,
            index::trilu_rel,
            index::trilu,
            "ONNX Trilu: keeps the upper (default) or lower triangle of the last two dims above/below diagonal `k`, zeroes the rest",
        ),
        reduction!("sum", Sum, "sum over `axis` (default all axes), `keepdims` keeps them as 1"),
        reduction!("mean", Mean, "mean over `axis` (default all axes), `keepdims` keeps them as 1"),
        reduction!("max", Max, "maximum over `axis` (default all axes), `keepdims` keeps them as 1"),
        reduction!("min", Min, "minimum over `axis` (default all axes), `keepdims` keeps them as 1"),
        reduction!("prod", Prod, "product over `axis` (default all axes), `keepdims` keeps them as 1; integers wrap"),
        simple(
            "argmax",
            Exact(1),
            ARG_ATTRS,
            Reduce,
            |args, attrs| reduce::arg_rel("argmax", args, attrs),
            |args, attrs, ctx| reduce::arg("argmax", true, args, attrs, ctx),
            "ONNX ArgMax: i64 position of the largest element along `axis` (default 0), first or with `select_last_index` last; NaN is largest; `keepdims` keeps the axis as 1",
        ),
        simple(
            "argmin",
            Exact(1),
            ARG_ATTRS,
            Reduce,
            |args, attrs| reduce::arg_rel("argmin", args, attrs),
            |args, attrs, ctx| reduce::arg("argmin", false, args, attrs, ctx),
            "ONNX ArgMin: i64 position of the smallest element along `axis` (default 0), first or with `select_last_index` last; `keepdims` keeps the axis as 1",
        ),
        OpDef {
            name: "topk",
            arity: Exact(1),
            attrs: &[required!("k", Int), attr!("axis", Int), attr!("largest", Bool), attr!("sorted", Bool)],
            pattern: Opaque,
            stateful: false,
            tuple_result: true,
            type_rel: reduce::topk_rel,
            kernel: reduce::topk,
            scalar_f32: None,
            cost: reduce::topk_cost,
            doc: "ONNX TopK: (values, i64 positions) of the `k` largest (`largest`, default) or smallest elements along `axis` (default -1), sorted, equal values by position",
        },
        simple(
            "cumsum",
            Exact(1),
            CUM_ATTRS,
            Injective,
            |args, attrs| reduce::cum_rel("cumsum", args, attrs),
            |args, attrs, ctx| reduce::cum("cumsum", false, args, attrs, ctx),
            "ONNX CumSum: running sums along `axis` (default 0), from the end with `reverse`, leaving each element out with `exclusive`",
        ),
        simple(
            "cumprod",
            Exact(1),
            CUM_ATTRS,
            Injective,
            |args, attrs| reduce::cum_rel("cumprod", args, attrs),
            |args, attrs, ctx| reduce::cum("cumprod", true, args, attrs, ctx),
            "ONNX CumProd: running products along `axis` (default 0), from the end with `reverse`, leaving each element out with `exclusive`",
        ),
        simple(
            "zeros",
            Exact(0),
            FILL_ATTRS,
            Elementwise,
            |args, attrs| create::fill_rel("zeros", args, attrs),
            |args, attrs, ctx| create::fill("zeros", 0.0, args, attrs, ctx),
            "a tensor of `shape` and `dtype` (default f32) filled with 0",
        ),
        simple(
            "ones",
            Exact(0),
            FILL_ATTRS,
            Elementwise,
            |args, attrs| create::fill_rel("ones", args, attrs),
            |args, attrs, ctx| create::fill("ones", 1.0, args, attrs, ctx),
            "a tensor of `shape` and `dtype` (default f32) filled with 1",
        ),
        OpDef {
            name: "random_uniform",
            arity: Exact(0),
            attrs: &[required!("shape", Ints), attr!("dtype", DType), attr!("low", Float), attr!("high", Float)],
            pattern: Opaque,
            stateful: true,
            tuple_result: false,
            type_rel: create::random_uniform_rel,
            kernel: create::random_uniform,
            scalar_f32: None,
            cost: linear,
            doc: "uniform samples in [low, high) from the evaluator's random stream (stateful)",
        },
        OpDef {
            name: "call_tir",
            arity: AtLeast(1),
            attrs: &[attr!("outputs", Int)],
            pattern: Opaque,
            stateful: false,
            tuple_result: false,
            type_rel: super::kernels::call_tir::call_tir_rel,
            kernel: super::kernels::call_tir::call_tir,
            scalar_f32: None,
            cost: linear,
            doc: "calls the PrimFunc `@f` on the inputs; its last `outputs` (default 1) parameters are the output buffers (destination passing), the result a tensor or, for several, a tuple",
        },
    ]
}
