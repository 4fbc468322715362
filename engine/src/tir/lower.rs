//! Loop-level definitions of graph operators (what LegalizeOps turns calls into), each a few
//! lines over the compute layer ([`super::compute`]).
//!
//! [`lower_call`] builds the PrimFunc for one call from the arguments' and the result's static
//! types and the call's attributes: its parameters are the arguments' buffers, then the output
//! buffer (destination passing, for `call_tir`). Floats of every width compute in the graph
//! dtype with the interpreter's rounding (each operation rounded to the dtype), so results
//! agree with the graph kernels to rounding.
//!
//! [`LOWERED_OPS`] lists the operators that have a definition; the coverage test in
//! `engine/tests/tir_lower.rs` pins it against the registry.

mod index;
mod multi;
mod nn;
mod sample;
mod scan;

use super::builder::PrimFuncBuilder;
use super::compute::{ex, Kernel, Value};
use super::ir::{BinOp, BufId, Intrinsic, PExprId, PType, PrimFunc, VarId};
use crate::ir::{Attrs, DType, TensorType};
use crate::op::kernels::{attr_bool, attr_dtype, attr_float, attr_float_req, attr_int, attr_ints, norm_axis};

/// The operators [`lower_call`] has a definition for.
pub const LOWERED_OPS: &[&str] = &[
    // unary
    "negative",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "reciprocal",
    "abs",
    "hard_swish",
    "floor",
    "ceil",
    "round",
    "sign",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "softplus",
    "softsign",
    "mish",
    "isnan",
    "isinf",
    "logical_not",
    "bitwise_not",
    // with attributes
    "clip",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "thresholded_relu",
    "shrink",
    "hard_sigmoid",
    "gelu",
    "cast",
    "dropout",
    // binary and friends
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "power",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "mod",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "left_shift",
    "right_shift",
    "where",
    // creation
    "zeros",
    "ones",
    // shape
    "reshape",
    "transpose",
    "broadcast_to",
    "concatenate",
    "split",
    // indexing
    "take",
    "gather_elements",
    "scatter_elements",
    "scatter_nd",
    "strided_slice",
    "pad",
    "trilu",
    "one_hot",
    // reductions and normalisation
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "softmax",
    "bias_add",
    "layer_norm",
    "batch_norm",
    "topk",
    // linear algebra and windows
    "matmul",
    "dense",
    "conv2d",
    "conv2d_transpose",
    "lrn",
    "einsum",
    "resize2d",
    "grid_sample",
    "max_pool2d",
    "avg_pool2d",
    "global_avg_pool2d",
    "global_max_pool2d",
];

/// The operators that cannot have a loop-level definition, each with the reason (docs/tir.md).
pub const NOT_LOWERED: &[(&str, &str)] = &[
    ("call_tir", "it is the lowered form itself: a call of a PrimFunc"),
    (
        "random_uniform",
        "it is stateful: its values come from the evaluator's random stream, which a pure PrimFunc cannot read",
    ),
    (
        "bitcast",
        "the loop level has no reinterpreting intrinsic (TVM's `reinterpret`): its casts convert values, not bits",
    ),
];

/// The PrimFunc computing `op(args…)` with result types `outs` (one per field of a tuple
/// result): `None` when the operator has no loop-level definition, an error when it has one
/// but not for these types or attributes.
pub fn lower_call(
    op: &str,
    args: &[TensorType],
    attrs: &Attrs,
    outs: &[TensorType],
) -> Option<Result<PrimFunc, String>> {
    if !LOWERED_OPS.contains(&op) {
        return None;
    }
    if outs.is_empty() {
        return Some(Err(format!("`{op}` has no result to lower")));
    }
    Some(lower(op, args, attrs, outs))
}

fn lower(op: &str, args: &[TensorType], attrs: &Attrs, outs: &[TensorType]) -> Result<PrimFunc, String> {
    let mut k = Kernel::new();
    let names = ["A", "B", "C", "D", "E", "F"];
    let mut ins = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        ins.push(k.input(names.get(i).copied().unwrap_or("X"), a)?);
    }
    let mut obufs = Vec::with_capacity(outs.len());
    for (i, t) in outs.iter().enumerate() {
        obufs.push(k.output(&if i == 0 { "out".to_string() } else { format!("out{i}") }, t)?);
    }
    let (out, o) = (&outs[0], obufs[0]);
    let od = out.dtype;
    let cx = LowerCx { op, args, attrs, out, outs, ins: &ins, out_bufs: &obufs, out_buf: o };
    match op {
        "negative" | "exp" | "log" | "sqrt" | "tanh" | "sigmoid" | "relu" | "erf" | "reciprocal" | "abs"
        | "hard_swish" | "floor" | "ceil" | "round" | "sign" | "sin" | "cos" | "tan" | "asin" | "acos" | "atan"
        | "sinh" | "cosh" | "asinh" | "acosh" | "atanh" | "softplus" | "softsign" | "mish" | "isnan" | "isinf"
        | "logical_not" | "bitwise_not" | "clip" | "leaky_relu" | "elu" | "selu" | "celu" | "thresholded_relu"
        | "shrink" | "hard_sigmoid" | "gelu" | "cast" | "dropout" => {
            let params = UnaryParams::read(op, attrs).map_err(err)?;
            let a = &args[0];
            k.compute(o, |b, iv| {
                let idx = ex::vars(b, iv);
                let x = b.load(ins[0], &idx)?;
                unary(b, op, &params, x, a.dtype, od)
            })?;
        }
        "add" | "subtract" | "multiply" | "divide" | "maximum" | "minimum" | "power" | "equal" | "not_equal"
        | "less" | "less_equal" | "greater" | "greater_equal" | "mod" | "logical_and" | "logical_or"
        | "logical_xor" | "bitwise_and" | "bitwise_or" | "bitwise_xor" | "left_shift" | "right_shift" => {
            let fmod = attr_bool(op, attrs, "fmod", false).map_err(err)?;
            k.compute(o, |b, iv| {
                let x = load_bcast(b, ins[0], &args[0], out, iv)?;
                let y = load_bcast(b, ins[1], &args[1], out, iv)?;
                binary(b, op, x, y, args[0].dtype, fmod)
            })?;
        }
        "zeros" | "ones" => {
            let v = if op == "ones" { 1.0 } else { 0.0 };
            k.compute(o, |b, _| ex::c(b, v, od))?;
        }
        "concatenate" => index::concatenate(&mut k, &cx)?,
        "take" => index::take(&mut k, &cx)?,
        "gather_elements" => index::gather_elements(&mut k, &cx)?,
        "scatter_elements" => index::scatter_elements(&mut k, &cx)?,
        "scatter_nd" => index::scatter_nd(&mut k, &cx)?,
        "strided_slice" => index::strided_slice(&mut k, &cx)?,
        "pad" => index::pad(&mut k, &cx)?,
        "trilu" => index::trilu(&mut k, &cx)?,
        "one_hot" => index::one_hot(&mut k, &cx)?,
        "argmax" | "argmin" => scan::arg(&mut k, &cx)?,
        "cumsum" | "cumprod" => scan::cum(&mut k, &cx)?,
        "conv2d_transpose" => nn::conv2d_transpose(&mut k, &cx)?,
        "lrn" => nn::lrn(&mut k, &cx)?,
        "einsum" => nn::einsum(&mut k, &cx)?,
        "resize2d" => nn::resize2d(&mut k, &cx)?,
        "grid_sample" => sample::grid_sample(&mut k, &cx)?,
        "split" => multi::split(&mut k, &cx)?,
        "batch_norm" => multi::batch_norm(&mut k, &cx)?,
        "topk" => multi::topk(&mut k, &cx)?,
        "where" => {
            k.compute(o, |b, iv| {
                let c = load_bcast(b, ins[0], &args[0], out, iv)?;
                let x = load_bcast(b, ins[1], &args[1], out, iv)?;
                let y = load_bcast(b, ins[2], &args[2], out, iv)?;
                b.select(c, x, y)
            })?;
        }
        "broadcast_to" => {
            k.compute(o, |b, iv| load_bcast(b, ins[0], &args[0], out, iv))?;
        }
        "reshape" => {
            let (ishape, oshape) = (args[0].shape.clone(), out.shape.clone());
            k.compute(o, |b, iv| {
                let idx = ex::unflatten(b, |b| ex::flat_index(b, iv, &oshape), &ishape)?;
                b.load(ins[0], &idx)
            })?;
        }
        "transpose" => {
            let rank = args[0].shape.len();
            let axes: Vec<usize> = match attr_ints(op, attrs, "axes").map_err(err)? {
                Some(a) => a.iter().map(|&x| norm_axis(op, x, rank)).collect::<Result<_, _>>().map_err(err)?,
                None => (0..rank).rev().collect(),
            };
            k.compute(o, |b, iv| {
                // out[i] = in[j] where j[axes[d]] = i[d].
                let mut idx = vec![None; rank];
                for (d, &a) in axes.iter().enumerate() {
                    idx[a] = Some(b.var_ref(iv[d]));
                }
                let idx: Vec<PExprId> =
                    idx.into_iter().map(|x| x.ok_or("`axes` is not a permutation")).collect::<Result<_, _>>()?;
                b.load(ins[0], &idx)
            })?;
        }
        "sum" | "mean" | "max" | "min" | "prod" => lower_reduce(&mut k, op, attrs, &args[0], out, ins[0], o)?,
        "softmax" => lower_softmax(&mut k, attrs, &args[0], ins[0], o)?,
        "bias_add" => {
            let rank = args[0].shape.len();
            let axis = norm_axis(op, attr_int(op, attrs, "axis", 1).map_err(err)?, rank).map_err(err)?;
            k.compute(o, |b, iv| {
                let idx = ex::vars(b, iv);
                let x = b.load(ins[0], &idx)?;
                let bi = b.var_ref(iv[axis]);
                let y = b.load(ins[1], &[bi])?;
                b.bin(BinOp::Add, x, y)
            })?;
        }
        "layer_norm" => lower_layer_norm(&mut k, attrs, args, &ins, o)?,
        "matmul" => lower_matmul(&mut k, args, out, &ins, o)?,
        "dense" => {
            let kdim = *args[0].shape.last().ok_or("dense of a scalar")? as i64;
            let rank = out.shape.len();
            k.reduce(
                o,
                &[kdim],
                BinOp::Add,
                |b| ex::c(b, 0.0, od),
                |b, iv, rv| {
                    let mut xi: Vec<PExprId> = iv[..rank - 1].iter().map(|&v| b.var_ref(v)).collect();
                    xi.push(b.var_ref(rv[0]));
                    let x = b.load(ins[0], &xi)?;
                    let (n, r) = (b.var_ref(iv[rank - 1]), b.var_ref(rv[0]));
                    let w = b.load(ins[1], &[n, r])?;
                    b.bin(BinOp::Mul, x, w)
                },
            )?;
        }
        "conv2d" => lower_conv2d(&mut k, attrs, args, out, &ins, o)?,
        "max_pool2d" | "avg_pool2d" => lower_pool2d(&mut k, op, attrs, &args[0], out, ins[0], o)?,
        "global_avg_pool2d" | "global_max_pool2d" => {
            let (h, w) = (args[0].shape[2] as i64, args[0].shape[3] as i64);
            let is_max = op == "global_max_pool2d";
            let (bop, init) = if is_max { (BinOp::Max, f64::NEG_INFINITY) } else { (BinOp::Add, 0.0) };
            k.reduce(
                o,
                &[h, w],
                bop,
                |b| ex::c(b, init, od),
                |b, iv, rv| {
                    let (n, c, y, x) = (b.var_ref(iv[0]), b.var_ref(iv[1]), b.var_ref(rv[0]), b.var_ref(rv[1]));
                    b.load(ins[0], &[n, c, y, x])
                },
            )?;
            if !is_max {
                scale_in_place(&mut k, o, 1.0 / (h * w) as f64)?;
            }
        }
        _ => return Err(format!("no loop-level definition of `{op}`")),
    }
    Ok(k.finish())
}

/// What a family's lowering reads: the call and the kernel's parameter buffers.
struct LowerCx<'a> {
    op: &'a str,
    args: &'a [TensorType],
    attrs: &'a Attrs,
    out: &'a TensorType,
    /// Every result's type (several for a tuple result).
    outs: &'a [TensorType],
    /// The input buffers, in argument order.
    ins: &'a [BufId],
    /// The output buffers, one per result.
    out_bufs: &'a [BufId],
    /// The (first) output buffer.
    out_buf: BufId,
}

impl LowerCx<'_> {
    /// The shape of argument `i`, as loop extents.
    fn shape_of(&self, i: usize) -> Vec<i64> {
        self.args[i].shape.iter().map(|&d| d as i64).collect()
    }

    /// The shape of the result, as loop extents.
    fn out_shape(&self) -> Vec<i64> {
        self.out.shape.iter().map(|&d| d as i64).collect()
    }
}

/// An operator error as a lowering error.
fn err(e: crate::op::OpError) -> String {
    e.to_string()
}

/// `out[i] = out[i] * s` (a stage after a sum, for means).
fn scale_in_place(k: &mut Kernel, o: BufId, s: f64) -> Result<(), String> {
    let dtype = k.b.peek().buf(o).dtype;
    k.compute(o, |b, iv| {
        let idx = ex::vars(b, iv);
        let x = b.load(o, &idx)?;
        if dtype.is_float() {
            let c = ex::c(b, s, dtype)?;
            b.bin(BinOp::Mul, x, c)
        } else {
            let c = b.int((1.0 / s).round() as i64, PType::scalar(dtype))?;
            b.bin(BinOp::Div, x, c)
        }
    })
}

/// A load of input `buf` (type `ty`) at the output's loop variables, numpy-broadcast.
fn load_bcast(b: &mut PrimFuncBuilder, buf: BufId, ty: &TensorType, out: &TensorType, iv: &[VarId]) -> Value {
    let idx = ex::broadcast_index(b, &ty.shape, &out.shape, iv);
    b.load(buf, &idx)
}

/// Attributes of the unary family, read once per call.
struct UnaryParams {
    a: f64,
    b: f64,
    tanh_gelu: bool,
}

impl UnaryParams {
    fn read(op: &str, attrs: &Attrs) -> Result<UnaryParams, crate::op::OpError> {
        Ok(match op {
            "clip" => UnaryParams {
                a: attr_float_req(op, attrs, "a_min")?,
                b: attr_float_req(op, attrs, "a_max")?,
                tanh_gelu: false,
            },
            "leaky_relu" => UnaryParams { a: attr_float(op, attrs, "alpha", 0.01)?, b: 0.0, tanh_gelu: false },
            "elu" => UnaryParams { a: attr_float(op, attrs, "alpha", 1.0)?, b: 0.0, tanh_gelu: false },
            "selu" => UnaryParams {
                a: attr_float(op, attrs, "alpha", 1.673_263_192_176_818_8)?,
                b: attr_float(op, attrs, "gamma", 1.050_701_022_148_132_3)?,
                tanh_gelu: false,
            },
            "celu" | "thresholded_relu" => {
                UnaryParams { a: attr_float(op, attrs, "alpha", 1.0)?, b: 0.0, tanh_gelu: false }
            }
            "shrink" => UnaryParams {
                a: attr_float(op, attrs, "bias", 0.0)?,
                b: attr_float(op, attrs, "lambd", 0.5)?,
                tanh_gelu: false,
            },
            "isinf" => UnaryParams {
                a: attr_bool(op, attrs, "detect_positive", true)? as i64 as f64,
                b: attr_bool(op, attrs, "detect_negative", true)? as i64 as f64,
                tanh_gelu: false,
            },
            "hard_sigmoid" => UnaryParams {
                a: attr_float(op, attrs, "alpha", 0.2)?,
                b: attr_float(op, attrs, "beta", 0.5)?,
                tanh_gelu: false,
            },
            "gelu" => {
                let approx = match attrs.get("approximate") {
                    Some(crate::ir::AttrValue::Str(s)) => &**s == "tanh",
                    _ => false,
                };
                UnaryParams { a: 0.0, b: 0.0, tanh_gelu: approx }
            }
            "cast" => {
                attr_dtype(op, attrs, "dtype", None)?;
                UnaryParams { a: 0.0, b: 0.0, tanh_gelu: false }
            }
            _ => UnaryParams { a: 0.0, b: 0.0, tanh_gelu: false },
        })
    }
}

fn call1(b: &mut PrimFuncBuilder, f: Intrinsic, x: PExprId) -> Value {
    b.call(f, &[x])
}

/// `op(x)` for the unary family (`x` of dtype `d`, result of dtype `od`).
fn unary(b: &mut PrimFuncBuilder, op: &str, p: &UnaryParams, x: PExprId, d: DType, od: DType) -> Value {
    use BinOp::*;
    use Intrinsic as I;
    let c = |b: &mut PrimFuncBuilder, v: f64| ex::c(b, v, d);
    Ok(match op {
        "negative" => call1(b, I::Neg, x)?,
        "exp" => call1(b, I::Exp, x)?,
        "log" => call1(b, I::Log, x)?,
        "sqrt" => call1(b, I::Sqrt, x)?,
        "tanh" => call1(b, I::Tanh, x)?,
        "sigmoid" => call1(b, I::Sigmoid, x)?,
        "erf" => call1(b, I::Erf, x)?,
        "abs" => call1(b, I::Abs, x)?,
        "floor" => call1(b, I::Floor, x)?,
        "ceil" => call1(b, I::Ceil, x)?,
        "round" => call1(b, I::Round, x)?,
        "sin" => call1(b, I::Sin, x)?,
        "cos" => call1(b, I::Cos, x)?,
        "tan" => call1(b, I::Tan, x)?,
        "asin" => call1(b, I::Asin, x)?,
        "acos" => call1(b, I::Acos, x)?,
        "atan" => call1(b, I::Atan, x)?,
        "sinh" => call1(b, I::Sinh, x)?,
        "cosh" => call1(b, I::Cosh, x)?,
        "asinh" => call1(b, I::Asinh, x)?,
        "acosh" => call1(b, I::Acosh, x)?,
        "atanh" => call1(b, I::Atanh, x)?,
        "isnan" => call1(b, I::IsNan, x)?,
        "isinf" if p.a != 0.0 && p.b != 0.0 => call1(b, I::IsInf, x)?,
        "isinf" => {
            // Infinite and of a detected sign.
            let x2 = reuse(b, x)?;
            let inf = call1(b, I::IsInf, x)?;
            let zero = c(b, 0.0)?;
            let sign = b.bin(if p.a != 0.0 { Gt } else { Lt }, x2, zero)?;
            let both = b.bin(And, inf, sign)?;
            if p.a == 0.0 && p.b == 0.0 {
                let f = b.int(0, PType::scalar(DType::Bool))?;
                b.bin(And, both, f)?
            } else {
                both
            }
        }
        "logical_not" => b.not(x)?,
        "bitwise_not" => call1(b, I::BitNot, x)?,
        "dropout" => x,
        "mish" => {
            let x2 = reuse(b, x)?;
            let sp = unary(b, "softplus", p, x, d, od)?;
            let t = call1(b, I::Tanh, sp)?;
            b.bin(Mul, x2, t)?
        }
        "selu" => {
            let e = elu(b, x, p.a, d)?;
            let g = c(b, p.b)?;
            b.bin(Mul, g, e)?
        }
        "celu" => {
            // max(x, 0) + min(0, alpha (exp(x / alpha) - 1)); NaN propagates through max.
            let (x2, x3) = (reuse(b, x)?, x);
            let z = c(b, 0.0)?;
            let pos = b.bin(Max, x2, z)?;
            let al = c(b, p.a)?;
            let xa = b.bin(Div, x3, al)?;
            let e = call1(b, I::Exp, xa)?;
            let one = c(b, 1.0)?;
            let em1 = b.bin(Sub, e, one)?;
            let al2 = c(b, p.a)?;
            let neg = b.bin(Mul, al2, em1)?;
            let z2 = c(b, 0.0)?;
            let negm = b.bin(Min, neg, z2)?;
            b.bin(Add, pos, negm)?
        }
        "thresholded_relu" => {
            // select(x <= alpha, 0, x): NaN stays.
            let x2 = reuse(b, x)?;
            let al = c(b, p.a)?;
            let le = b.bin(Le, x, al)?;
            let z = c(b, 0.0)?;
            b.select(le, z, x2)?
        }
        "shrink" if d.is_float() => {
            // select(x < -lambd, x + bias, select(x > lambd, x - bias, 0)).
            let (x2, x3, x4) = (reuse(b, x)?, reuse(b, x)?, reuse(b, x)?);
            let nl = c(b, -p.b)?;
            let below = b.bin(Lt, x, nl)?;
            let bi = c(b, p.a)?;
            let up = b.bin(Add, x2, bi)?;
            let l = c(b, p.b)?;
            let above = b.bin(Gt, x3, l)?;
            let bi2 = c(b, p.a)?;
            let down = b.bin(Sub, x4, bi2)?;
            let z = c(b, 0.0)?;
            let inner = b.select(above, down, z)?;
            b.select(below, up, inner)?
        }
        "reciprocal" => {
            let one = c(b, 1.0)?;
            b.bin(Div, one, x)?
        }
        // select(x < 0, 0, x): NaN stays NaN, as the graph kernel keeps it.
        "relu" => {
            let zero = c(b, 0.0)?;
            let lt = b.bin(Lt, x, zero)?;
            let (zero, x2) = (c(b, 0.0)?, reuse(b, x)?);
            b.select(lt, zero, x2)?
        }
        "sign" => {
            // select(x > 0, 1, select(x < 0, -1, select(x == x, 0, x))).
            let (z1, z2) = (c(b, 0.0)?, c(b, 0.0)?);
            let (x1, x2, x3, x4, x5) = (reuse(b, x)?, reuse(b, x)?, reuse(b, x)?, reuse(b, x)?, reuse(b, x)?);
            let gt = b.bin(Gt, x1, z1)?;
            let lt = b.bin(Lt, x2, z2)?;
            let same = b.bin(Eq, x3, x4)?;
            let (one, mone, zero) = (c(b, 1.0)?, c(b, -1.0)?, c(b, 0.0)?);
            let inner = b.select(same, zero, x5)?;
            let mid = b.select(lt, mone, inner)?;
            b.select(gt, one, mid)?
        }
        "softplus" => {
            // log(1 + exp(x)), as the kernel computes it for moderate x; large x gives x.
            let e = call1(b, I::Exp, x)?;
            let one = c(b, 1.0)?;
            let s = b.bin(Add, one, e)?;
            call1(b, I::Log, s)?
        }
        "softsign" => {
            let a = call1(b, I::Abs, x)?;
            let one = c(b, 1.0)?;
            let den = b.bin(Add, one, a)?;
            let x2 = reuse(b, x)?;
            b.bin(Div, x2, den)?
        }
        "hard_swish" => {
            let hs = hard_sigmoid(b, x, 1.0 / 6.0, 0.5, d)?;
            let x2 = reuse(b, x)?;
            b.bin(Mul, x2, hs)?
        }
        "hard_sigmoid" => hard_sigmoid(b, x, p.a, p.b, d)?,
        "clip" => {
            // min(max(x, lo), hi) with NaN kept: select(x < lo, lo, x) then select(y > hi, hi, y).
            let lo = c(b, p.a)?;
            let lt = b.bin(Lt, x, lo)?;
            let (lo2, x2) = (c(b, p.a)?, reuse(b, x)?);
            let y = b.select(lt, lo2, x2)?;
            let hi = c(b, p.b)?;
            let y2 = reuse(b, y)?;
            let gt = b.bin(Gt, y2, hi)?;
            let hi2 = c(b, p.b)?;
            b.select(gt, hi2, y)?
        }
        "leaky_relu" | "elu" => {
            let zero = c(b, 0.0)?;
            let ge = b.bin(Ge, x, zero)?;
            let x2 = reuse(b, x)?;
            let alpha = c(b, p.a)?;
            let neg = if op == "elu" {
                let x3 = reuse(b, x)?;
                let e = call1(b, I::Exp, x3)?;
                let one = c(b, 1.0)?;
                let em1 = b.bin(Sub, e, one)?;
                b.bin(Mul, alpha, em1)?
            } else {
                let x3 = reuse(b, x)?;
                b.bin(Mul, alpha, x3)?
            };
            b.select(ge, x2, neg)?
        }
        "gelu" => {
            let half = c(b, 0.5)?;
            let x2 = reuse(b, x)?;
            let hx = b.bin(Mul, half, x2)?;
            let inner = if p.tanh_gelu {
                // tanh(sqrt(2/pi) (x + 0.044715 x^3))
                let (x3, x4, x5) = (reuse(b, x)?, reuse(b, x)?, reuse(b, x)?);
                let sq = b.bin(Mul, x3, x4)?;
                let cube = b.bin(Mul, sq, x5)?;
                let k = c(b, 0.044715)?;
                let t = b.bin(Mul, k, cube)?;
                let s = b.bin(Add, x, t)?;
                let r = c(b, (2.0 / std::f64::consts::PI).sqrt())?;
                let a = b.bin(Mul, r, s)?;
                call1(b, I::Tanh, a)?
            } else {
                let r = c(b, std::f64::consts::FRAC_1_SQRT_2)?;
                let a = b.bin(Mul, x, r)?;
                call1(b, I::Erf, a)?
            };
            let one = c(b, 1.0)?;
            let s = b.bin(Add, one, inner)?;
            b.bin(Mul, hx, s)?
        }
        "cast" => {
            if d == od {
                x
            } else {
                b.cast(x, od)
            }
        }
        _ => return Err(format!("no loop-level definition of `{op}`")),
    })
}

/// A copy of expression `x` (a load or variable use) as a new tree node, for a second use.
fn reuse(b: &mut PrimFuncBuilder, x: PExprId) -> Value {
    b.copy_expr(x)
}

/// `select(x >= 0, x, alpha (exp(x) - 1))`.
fn elu(b: &mut PrimFuncBuilder, x: PExprId, alpha: f64, d: DType) -> Value {
    let (x2, x3) = (reuse(b, x)?, reuse(b, x)?);
    let zero = ex::c(b, 0.0, d)?;
    let ge = b.bin(BinOp::Ge, x, zero)?;
    let e = b.call(Intrinsic::Exp, &[x3])?;
    let one = ex::c(b, 1.0, d)?;
    let em1 = b.bin(BinOp::Sub, e, one)?;
    let al = ex::c(b, alpha, d)?;
    let neg = b.bin(BinOp::Mul, al, em1)?;
    b.select(ge, x2, neg)
}

/// `max(0, min(1, alpha * x + beta))`.
fn hard_sigmoid(b: &mut PrimFuncBuilder, x: PExprId, alpha: f64, beta: f64, d: DType) -> Value {
    let x = reuse(b, x)?;
    let a = ex::c(b, alpha, d)?;
    let ax = b.bin(BinOp::Mul, a, x)?;
    let be = ex::c(b, beta, d)?;
    let y = b.bin(BinOp::Add, ax, be)?;
    let one = ex::c(b, 1.0, d)?;
    let m = b.bin(BinOp::Min, y, one)?;
    let zero = ex::c(b, 0.0, d)?;
    b.bin(BinOp::Max, m, zero)
}

/// `op(x, y)` for the binary family (`fmod`: `mod` truncates instead of flooring).
fn binary(b: &mut PrimFuncBuilder, op: &str, x: PExprId, y: PExprId, d: DType, fmod: bool) -> Value {
    use BinOp::*;
    let bits = |b: &mut PrimFuncBuilder, f: Intrinsic| b.call(f, &[x, y]);
    let bop = match op {
        "mod" if d.is_float() => return float_mod(b, x, y, d, fmod),
        "mod" if fmod => Mod,
        "mod" => FloorMod,
        "logical_and" => And,
        "logical_or" => Or,
        "logical_xor" => Ne,
        "bitwise_and" => return bits(b, Intrinsic::BitAnd),
        "bitwise_or" => return bits(b, Intrinsic::BitOr),
        "bitwise_xor" => return bits(b, Intrinsic::BitXor),
        "left_shift" => return bits(b, Intrinsic::ShiftLeft),
        "right_shift" => return bits(b, Intrinsic::ShiftRight),
        "add" => Add,
        "subtract" => Sub,
        "multiply" => Mul,
        "divide" => Div,
        "maximum" => Max,
        "minimum" => Min,
        "equal" => Eq,
        "not_equal" => Ne,
        "less" => Lt,
        "less_equal" => Le,
        "greater" => Gt,
        "greater_equal" => Ge,
        "power" if d.is_float() => return b.call(Intrinsic::Pow, &[x, y]),
        _ => return Err(format!("no loop-level definition of `{op}` on {d}")),
    };
    b.bin(bop, x, y)
}

/// Float `mod`: C's `fmod`, or (floored, numpy's) the remainder moved to the divisor's sign,
/// a zero remainder taking the divisor's sign.
fn float_mod(b: &mut PrimFuncBuilder, x: PExprId, y: PExprId, d: DType, fmod: bool) -> Value {
    use BinOp::*;
    let y2 = b.copy_expr(y)?;
    let r = b.call(Intrinsic::Fmod, &[x, y2])?;
    if fmod {
        return Ok(r);
    }
    // select(r == 0, select(y < 0, -0, 0), select((r < 0) != (y < 0), r + y, r))
    let (r1, r2, r3) = (b.copy_expr(r)?, b.copy_expr(r)?, b.copy_expr(r)?);
    let (ya, yb, yc) = (b.copy_expr(y)?, b.copy_expr(y)?, b.copy_expr(y)?);
    let z = ex::c(b, 0.0, d)?;
    let is_zero = b.bin(Eq, r, z)?;
    let z2 = ex::c(b, 0.0, d)?;
    let yneg = b.bin(Lt, ya, z2)?;
    let (nz, pz) = (ex::c(b, -0.0, d)?, ex::c(b, 0.0, d)?);
    let signed_zero = b.select(yneg, nz, pz)?;
    let z3 = ex::c(b, 0.0, d)?;
    let rneg = b.bin(Lt, r1, z3)?;
    let z4 = ex::c(b, 0.0, d)?;
    let yneg2 = b.bin(Lt, yb, z4)?;
    let differ = b.bin(Ne, rneg, yneg2)?;
    let moved = b.bin(Add, r2, yc)?;
    let nonzero = b.select(differ, moved, r3)?;
    b.select(is_zero, signed_zero, nonzero)
}

fn lower_reduce(
    k: &mut Kernel,
    op: &str,
    attrs: &Attrs,
    x: &TensorType,
    out: &TensorType,
    a: BufId,
    o: BufId,
) -> Result<(), String> {
    let err = |e: crate::op::OpError| e.to_string();
    let rank = x.shape.len();
    let axes: Vec<usize> = match attr_ints(op, attrs, "axis").map_err(err)? {
        Some(a) => {
            let mut v: Vec<usize> = a.iter().map(|&x| norm_axis(op, x, rank)).collect::<Result<_, _>>().map_err(err)?;
            v.sort_unstable();
            v.dedup();
            v
        }
        None => (0..rank).collect(),
    };
    let keepdims = attr_bool(op, attrs, "keepdims", false).map_err(err)?;
    let rshape: Vec<i64> = axes.iter().map(|&ax| x.shape[ax] as i64).collect();
    let d = out.dtype;
    let (bop, init) = match op {
        "sum" | "mean" => (BinOp::Add, 0.0),
        "prod" => (BinOp::Mul, 1.0),
        "max" => (BinOp::Max, if d.is_float() { f64::NEG_INFINITY } else { int_min(d) }),
        _ => (BinOp::Min, if d.is_float() { f64::INFINITY } else { int_max(d) }),
    };
    k.reduce(
        o,
        &rshape,
        bop,
        |b| ex::c(b, init, d),
        |b, iv, rv| {
            let mut idx = Vec::with_capacity(rank);
            let (mut oi, mut ri) = (0, 0);
            for dim in 0..rank {
                if axes.contains(&dim) {
                    idx.push(b.var_ref(rv[ri]));
                    ri += 1;
                    if keepdims {
                        oi += 1;
                    }
                } else {
                    idx.push(b.var_ref(iv[oi]));
                    oi += 1;
                }
            }
            b.load(a, &idx)
        },
    )?;
    if op == "mean" {
        let n: i64 = rshape.iter().product();
        if n > 0 {
            scale_in_place(k, o, 1.0 / n as f64)?;
        }
    }
    Ok(())
}

fn int_min(d: DType) -> f64 {
    d.int_range().map_or(0.0, |(lo, _)| lo as f64)
}

/// The largest value of `d` (`i64::MAX` for `u64` and the float types, as before).
fn int_max(d: DType) -> f64 {
    match d.int_range() {
        Some((_, hi)) if d != DType::U64 => hi as f64,
        _ => i64::MAX as f64,
    }
}

/// softmax over `axis`: max, exp(x - max) into the output, sum, divide.
fn lower_softmax(k: &mut Kernel, attrs: &Attrs, x: &TensorType, a: BufId, o: BufId) -> Result<(), String> {
    let err = |e: crate::op::OpError| e.to_string();
    let rank = x.shape.len();
    let axis = norm_axis("softmax", attr_int("softmax", attrs, "axis", -1).map_err(err)?, rank).map_err(err)?;
    let d = x.dtype;
    let mut rshape = x.shape.to_vec();
    rshape[axis] = 1;
    let mx = k.temp("max", d, &rshape)?;
    let sm = k.temp("sum", d, &rshape)?;
    let len = x.shape[axis] as i64;
    let red_idx = |b: &mut PrimFuncBuilder, iv: &[VarId], r: VarId| -> Vec<PExprId> {
        (0..rank).map(|dim| if dim == axis { b.var_ref(r) } else { b.var_ref(iv[dim]) }).collect()
    };
    k.reduce(
        mx,
        &[len],
        BinOp::Max,
        |b| ex::c(b, f64::NEG_INFINITY, d),
        |b, iv, rv| {
            let idx = red_idx(b, iv, rv[0]);
            b.load(a, &idx)
        },
    )?;
    let at_axis0 = |b: &mut PrimFuncBuilder, iv: &[VarId]| -> Vec<PExprId> {
        (0..rank).map(|dim| if dim == axis { b.i64(0) } else { b.var_ref(iv[dim]) }).collect()
    };
    k.compute(o, |b, iv| {
        let idx = ex::vars(b, iv);
        let xv = b.load(a, &idx)?;
        let mi = at_axis0(b, iv);
        let m = b.load(mx, &mi)?;
        let s = b.bin(BinOp::Sub, xv, m)?;
        b.call(Intrinsic::Exp, &[s])
    })?;
    k.reduce(
        sm,
        &[len],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let idx = red_idx(b, iv, rv[0]);
            b.load(o, &idx)
        },
    )?;
    k.compute(o, |b, iv| {
        let idx = ex::vars(b, iv);
        let e = b.load(o, &idx)?;
        let si = at_axis0(b, iv);
        let s = b.load(sm, &si)?;
        b.bin(BinOp::Div, e, s)
    })
}

/// layer_norm(x, gamma, beta) over `axis`: mean, variance, normalise.
fn lower_layer_norm(k: &mut Kernel, attrs: &Attrs, args: &[TensorType], ins: &[BufId], o: BufId) -> Result<(), String> {
    let op = "layer_norm";
    let err = |e: crate::op::OpError| e.to_string();
    let x = &args[0];
    let rank = x.shape.len();
    let axis = norm_axis(op, attr_int(op, attrs, "axis", -1).map_err(err)?, rank).map_err(err)?;
    let eps = attr_float(op, attrs, "epsilon", 1e-5).map_err(err)?;
    let d = x.dtype;
    let len = x.shape[axis] as i64;
    if len == 0 {
        return k.compute(o, |b, iv| {
            let idx = ex::vars(b, iv);
            b.load(ins[0], &idx)
        });
    }
    let mut rshape = x.shape.to_vec();
    rshape[axis] = 1;
    let mean = k.temp("mean", d, &rshape)?;
    let var = k.temp("var", d, &rshape)?;
    let red_idx = |b: &mut PrimFuncBuilder, iv: &[VarId], r: VarId| -> Vec<PExprId> {
        (0..rank).map(|dim| if dim == axis { b.var_ref(r) } else { b.var_ref(iv[dim]) }).collect()
    };
    let at0 = |b: &mut PrimFuncBuilder, iv: &[VarId]| -> Vec<PExprId> {
        (0..rank).map(|dim| if dim == axis { b.i64(0) } else { b.var_ref(iv[dim]) }).collect()
    };
    k.reduce(
        mean,
        &[len],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let idx = red_idx(b, iv, rv[0]);
            b.load(ins[0], &idx)
        },
    )?;
    scale_in_place(k, mean, 1.0 / len as f64)?;
    k.reduce(
        var,
        &[len],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let (i1, i2) = (red_idx(b, iv, rv[0]), red_idx(b, iv, rv[0]));
            let (m1, m2) = (at0(b, iv), at0(b, iv));
            let (x1, x2) = (b.load(ins[0], &i1)?, b.load(ins[0], &i2)?);
            let (mu1, mu2) = (b.load(mean, &m1)?, b.load(mean, &m2)?);
            let (c1, c2) = (b.bin(BinOp::Sub, x1, mu1)?, b.bin(BinOp::Sub, x2, mu2)?);
            b.bin(BinOp::Mul, c1, c2)
        },
    )?;
    scale_in_place(k, var, 1.0 / len as f64)?;
    // gamma and beta have the normalised axis's shape, broadcast against x (as the kernel).
    let (gt, bt) = (args[1].clone(), args[2].clone());
    let xs = x.clone();
    k.compute(o, |b, iv| {
        let idx = ex::vars(b, iv);
        let xv = b.load(ins[0], &idx)?;
        let mi = at0(b, iv);
        let mu = b.load(mean, &mi)?;
        let c = b.bin(BinOp::Sub, xv, mu)?;
        let vi = at0(b, iv);
        let v = b.load(var, &vi)?;
        let e = ex::c(b, eps, d)?;
        let ve = b.bin(BinOp::Add, v, e)?;
        let sd = b.call(Intrinsic::Sqrt, &[ve])?;
        let n = b.bin(BinOp::Div, c, sd)?;
        let g = param_along_axis(b, ins[1], &gt, &xs, axis, iv)?;
        let be = param_along_axis(b, ins[2], &bt, &xs, axis, iv)?;
        let ng = b.bin(BinOp::Mul, n, g)?;
        b.bin(BinOp::Add, ng, be)
    })
}

/// A load of a per-axis parameter (shape `[len]` or broadcastable to x): rank-1 parameters
/// index by the axis variable, others broadcast numpy-style.
fn param_along_axis(
    b: &mut PrimFuncBuilder,
    buf: BufId,
    ty: &TensorType,
    x: &TensorType,
    axis: usize,
    iv: &[VarId],
) -> Value {
    if ty.shape.len() == 1 && x.shape.len() > 1 {
        let i = if ty.shape[0] == 1 { b.i64(0) } else { b.var_ref(iv[axis]) };
        return b.load(buf, &[i]);
    }
    load_bcast(b, buf, ty, x, iv)
}

/// matmul with numpy semantics: 1-d operands are promoted, batch dimensions broadcast.
fn lower_matmul(k: &mut Kernel, args: &[TensorType], out: &TensorType, ins: &[BufId], o: BufId) -> Result<(), String> {
    let (a, bt) = (&args[0], &args[1]);
    let (ra, rb) = (a.shape.len(), bt.shape.len());
    if ra == 0 || rb == 0 {
        return Err("matmul of a scalar".into());
    }
    let kdim = if ra == 1 { a.shape[0] } else { a.shape[ra - 1] } as i64;
    let ro = out.shape.len();
    let d = out.dtype;
    k.reduce(
        o,
        &[kdim],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            // Output index: batch…, [m], [n] (m absent when a is 1-d, n absent when b is 1-d).
            let has_m = ra > 1;
            let has_n = rb > 1;
            let nb = ro - has_m as usize - has_n as usize;
            let batch = &iv[..nb];
            let mut ai = Vec::with_capacity(ra);
            if ra > 1 {
                let lead = nb - (ra - 2).min(nb);
                for (j, &dim) in a.shape[..ra - 2].iter().enumerate() {
                    let v = batch[lead + j];
                    ai.push(if dim == 1 && out.shape[lead + j] != 1 { b.i64(0) } else { b.var_ref(v) });
                }
                ai.push(b.var_ref(iv[nb]));
            }
            ai.push(b.var_ref(rv[0]));
            let mut bi = Vec::with_capacity(rb);
            if rb > 1 {
                let lead = nb - (rb - 2).min(nb);
                for (j, &dim) in bt.shape[..rb - 2].iter().enumerate() {
                    let v = batch[lead + j];
                    bi.push(if dim == 1 && out.shape[lead + j] != 1 { b.i64(0) } else { b.var_ref(v) });
                }
            }
            bi.push(b.var_ref(rv[0]));
            if rb > 1 {
                bi.push(b.var_ref(iv[ro - 1]));
            }
            let x = b.load(ins[0], &ai)?;
            let y = b.load(ins[1], &bi)?;
            b.bin(BinOp::Mul, x, y)
        },
    )
}

fn two(op: &str, attrs: &Attrs, key: &str, default: i64) -> Result<[i64; 2], String> {
    Ok(match attr_ints(op, attrs, key).map_err(|e| e.to_string())? {
        None => [default, default],
        Some(&[v]) => [v, v],
        Some(&[h, w]) => [h, w],
        Some(v) => return Err(format!("`{op}`: `{key}` must have 1 or 2 values, got {}", v.len())),
    })
}

/// An index into a padded input: `clamped` is the in-range index to load, `valid` whether the
/// position is inside the unpadded input (select evaluates both arms, so the load must be
/// in bounds even where the value is padding).
fn window_index(
    b: &mut PrimFuncBuilder,
    o: VarId,
    r: VarId,
    stride: i64,
    dil: i64,
    pad: i64,
    size: i64,
) -> Result<(PExprId, PExprId), String> {
    let pos = |b: &mut PrimFuncBuilder| -> Value {
        let (ov, s) = (b.var_ref(o), b.i64(stride));
        let os = b.bin(BinOp::Mul, ov, s)?;
        let (rv, dl) = (b.var_ref(r), b.i64(dil));
        let rd = b.bin(BinOp::Mul, rv, dl)?;
        let sum = b.bin(BinOp::Add, os, rd)?;
        let p = b.i64(pad);
        b.bin(BinOp::Sub, sum, p)
    };
    let p1 = pos(b)?;
    let zero = b.i64(0);
    let ge = b.bin(BinOp::Ge, p1, zero)?;
    let p2 = pos(b)?;
    let sz = b.i64(size);
    let lt = b.bin(BinOp::Lt, p2, sz)?;
    let valid = b.bin(BinOp::And, ge, lt)?;
    let p3 = pos(b)?;
    let (z, top) = (b.i64(0), b.i64(size - 1));
    let lo = b.bin(BinOp::Max, p3, z)?;
    let clamped = b.bin(BinOp::Min, lo, top)?;
    Ok((clamped, valid))
}

fn lower_conv2d(
    k: &mut Kernel,
    attrs: &Attrs,
    args: &[TensorType],
    out: &TensorType,
    ins: &[BufId],
    o: BufId,
) -> Result<(), String> {
    let op = "conv2d";
    let (x, w) = (&args[0], &args[1]);
    let strides = two(op, attrs, "strides", 1)?;
    let dil = two(op, attrs, "dilation", 1)?;
    let pad = crate::op::kernels::nn::padding4(op, attrs).map_err(|e| e.to_string())?;
    let groups = attr_int(op, attrs, "groups", 1).map_err(|e| e.to_string())?.max(1);
    let (h, wd) = (x.shape[2] as i64, x.shape[3] as i64);
    let (cg, kh, kw) = (w.shape[1] as i64, w.shape[2] as i64, w.shape[3] as i64);
    let opg = out.shape[1] as i64 / groups;
    let d = out.dtype;
    k.reduce(
        o,
        &[cg, kh, kw],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let (yi, yv) = window_index(b, iv[2], rv[1], strides[0], dil[0], pad[0] as i64, h)?;
            let (xi, xv) = window_index(b, iv[3], rv[2], strides[1], dil[1], pad[1] as i64, wd)?;
            // Input channel: (oc / opg) * cg + ic.
            let (oc, g) = (b.var_ref(iv[1]), b.i64(opg));
            let grp = b.bin(BinOp::FloorDiv, oc, g)?;
            let cgi = b.i64(cg);
            let base = b.bin(BinOp::Mul, grp, cgi)?;
            let ic = b.var_ref(rv[0]);
            let ch = b.bin(BinOp::Add, base, ic)?;
            let n = b.var_ref(iv[0]);
            let xl = b.load(ins[0], &[n, ch, yi, xi])?;
            let valid = b.bin(BinOp::And, yv, xv)?;
            let zero = ex::c(b, 0.0, d)?;
            let xval = b.select(valid, xl, zero)?;
            let (oc2, ic2, ry, rx) = (b.var_ref(iv[1]), b.var_ref(rv[0]), b.var_ref(rv[1]), b.var_ref(rv[2]));
            let wl = b.load(ins[1], &[oc2, ic2, ry, rx])?;
            b.bin(BinOp::Mul, xval, wl)
        },
    )
}

fn lower_pool2d(
    k: &mut Kernel,
    op: &str,
    attrs: &Attrs,
    x: &TensorType,
    out: &TensorType,
    a: BufId,
    o: BufId,
) -> Result<(), String> {
    let err = |e: crate::op::OpError| e.to_string();
    let pool = two(op, attrs, "pool_size", 1)?;
    let strides = two(op, attrs, "strides", 1)?;
    let dil = two(op, attrs, "dilation", 1)?;
    let pad = crate::op::kernels::nn::padding4(op, attrs).map_err(err)?;
    let (h, wd) = (x.shape[2] as i64, x.shape[3] as i64);
    let d = out.dtype;
    if op == "max_pool2d" {
        // Padding never wins: out-of-range positions read -inf.
        return k.reduce(
            o,
            &[pool[0], pool[1]],
            BinOp::Max,
            |b| ex::c(b, f64::NEG_INFINITY, d),
            |b, iv, rv| {
                let (yi, yv) = window_index(b, iv[2], rv[0], strides[0], dil[0], pad[0] as i64, h)?;
                let (xi, xv) = window_index(b, iv[3], rv[1], strides[1], dil[1], pad[1] as i64, wd)?;
                let (n, c) = (b.var_ref(iv[0]), b.var_ref(iv[1]));
                let l = b.load(a, &[n, c, yi, xi])?;
                let valid = b.bin(BinOp::And, yv, xv)?;
                let ninf = ex::c(b, f64::NEG_INFINITY, d)?;
                b.select(valid, l, ninf)
            },
        );
    }
    let count_pad = attr_bool(op, attrs, "count_include_pad", false).map_err(err)?;
    // Sum of the in-range values, then divide by the window's count (with or without padding).
    k.reduce(
        o,
        &[pool[0], pool[1]],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let (yi, yv) = window_index(b, iv[2], rv[0], strides[0], dil[0], pad[0] as i64, h)?;
            let (xi, xv) = window_index(b, iv[3], rv[1], strides[1], dil[1], pad[1] as i64, wd)?;
            let (n, c) = (b.var_ref(iv[0]), b.var_ref(iv[1]));
            let l = b.load(a, &[n, c, yi, xi])?;
            let valid = b.bin(BinOp::And, yv, xv)?;
            let zero = ex::c(b, 0.0, d)?;
            b.select(valid, l, zero)
        },
    )?;
    if count_pad {
        return scale_in_place(k, o, 1.0 / (pool[0] * pool[1]) as f64);
    }
    // Divide each output by the number of in-range window positions: computed per output
    // from the same index arithmetic.
    let cnt = k.temp("count", d, &out.shape)?;
    k.reduce(
        cnt,
        &[pool[0], pool[1]],
        BinOp::Add,
        |b| ex::c(b, 0.0, d),
        |b, iv, rv| {
            let (_, yv) = window_index(b, iv[2], rv[0], strides[0], dil[0], pad[0] as i64, h)?;
            let (_, xv) = window_index(b, iv[3], rv[1], strides[1], dil[1], pad[1] as i64, wd)?;
            let valid = b.bin(BinOp::And, yv, xv)?;
            let (one, zero) = (ex::c(b, 1.0, d)?, ex::c(b, 0.0, d)?);
            b.select(valid, one, zero)
        },
    )?;
    k.compute(o, |b, iv| {
        let i1 = ex::vars(b, iv);
        let i2 = ex::vars(b, iv);
        let s = b.load(o, &i1)?;
        let c = b.load(cnt, &i2)?;
        b.bin(BinOp::Div, s, c)
    })
}
