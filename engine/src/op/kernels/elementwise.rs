//! Elementwise and broadcasting operators: unary math, unary operators with attributes
//! (`clip`, `hard_sigmoid`, `gelu`), `logical_not`, binary arithmetic, comparisons, `where`
//! and `cast`.

use ndarray::{IxDyn, Zip};

use super::{
    arr, broadcast_shapes, broadcast_type, check_arity, check_dims, out_dims, require_float, require_numeric,
    same_dtype, shape_str, tensor_arg, to_f32, type_err, types_of, with_elem, with_int, zip2, Elem, KResult,
};
use crate::ir::{Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

// ---- unary ----

/// A unary elementwise operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unary {
    Negative,
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Relu,
    Erf,
    Reciprocal,
    Abs,
    HardSwish,
    Floor,
    Ceil,
    Round,
    Sign,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Softplus,
    Softsign,
    Mish,
}

impl Unary {
    /// `negative`, `relu`, `abs` and `sign` make sense on integers too; the rest are
    /// float-only.
    fn allows_int(self) -> bool {
        matches!(self, Unary::Negative | Unary::Relu | Unary::Abs | Unary::Sign)
    }

    pub(crate) fn apply_f32(self, x: f32) -> f32 {
        match self {
            Unary::Negative => -x,
            Unary::Exp => x.exp(),
            Unary::Log => x.ln(),
            Unary::Sqrt => x.sqrt(),
            Unary::Tanh => x.tanh(),
            Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            // `f32::max` would turn NaN into 0; follow numpy's `maximum(x, 0)` and keep it.
            Unary::Relu => {
                if x.is_nan() {
                    x
                } else {
                    x.max(0.0)
                }
            }
            Unary::Erf => erf(x as f64) as f32,
            Unary::Reciprocal => 1.0 / x,
            Unary::Abs => x.abs(),
            // ONNX HardSwish: x * max(0, min(1, alpha * x + beta)) with alpha = 1/6, beta = 0.5.
            Unary::HardSwish => x * hard_sigmoid(x, 1.0 / 6.0, 0.5),
            Unary::Floor => x.floor(),
            Unary::Ceil => x.ceil(),
            // ONNX Round rounds halves to even, as numpy does.
            Unary::Round => x.round_ties_even(),
            // NaN stays NaN; the sign of zero is 0.
            Unary::Sign => {
                if x.is_nan() {
                    x
                } else if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            Unary::Tan => x.tan(),
            Unary::Asin => x.asin(),
            Unary::Acos => x.acos(),
            Unary::Atan => x.atan(),
            Unary::Sinh => x.sinh(),
            Unary::Cosh => x.cosh(),
            Unary::Asinh => x.asinh(),
            Unary::Acosh => x.acosh(),
            Unary::Atanh => x.atanh(),
            Unary::Softplus => softplus(x),
            Unary::Softsign => x / (1.0 + x.abs()),
            // x * tanh(softplus(x)), softplus in f64 so large x does not overflow early.
            Unary::Mish => x * softplus(x).tanh(),
        }
    }
}

/// `ln(1 + e^x)` computed in f64 (no overflow of `e^x` for f32 inputs).
fn softplus(x: f32) -> f32 {
    let v = x as f64;
    (if v > 30.0 { v } else { v.exp().ln_1p() }) as f32
}

/// `max(0, min(1, alpha * x + beta))`, NaN propagating.
fn hard_sigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    let v = alpha * x + beta;
    if v.is_nan() {
        v
    } else {
        v.clamp(0.0, 1.0)
    }
}

/// The error function to double precision accuracy over the range that matters for `f32`
/// results: the Maclaurin series `2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))`, summed in
/// f64 for `|x| < 4` (the largest term there is below 1e6, so about 1e-10 of absolute accuracy
/// survives the cancellation), and `±1` beyond, where `1 - erf(x) < 1.6e-8` rounds away in
/// f32. NaN stays NaN.
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() >= 4.0 {
        return x.signum();
    }
    let x2 = x * x;
    // term_n = (-1)^n x^(2n+1) / n!
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0f64;
    while n < 200.0 {
        n += 1.0;
        term *= -x2 / n;
        let add = term / (2.0 * n + 1.0);
        sum += add;
        if add.abs() < 1e-17 * sum.abs().max(1e-300) {
            break;
        }
    }
    (sum * std::f64::consts::FRAC_2_SQRT_PI).clamp(-1.0, 1.0)
}

// ---- unary operators with attributes ----

/// A unary elementwise operator whose arithmetic depends on attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Param {
    /// `clip(x, a_min, a_max)`: numeric.
    Clip,
    /// `hard_sigmoid(x, alpha=0.2, beta=0.5)`: float.
    HardSigmoid,
    /// `gelu(x, approximate="none"|"tanh")`: float.
    Gelu,
    /// `elu(x, alpha=1)`: `x` for `x >= 0`, else `alpha (e^x - 1)`; float.
    Elu,
    /// `selu(x, alpha=1.67326…, gamma=1.05070…)`: `gamma * elu(x, alpha)`; float.
    Selu,
    /// `celu(x, alpha=1)`: `max(0, x) + min(0, alpha (e^(x/alpha) - 1))`; float.
    Celu,
    /// `leaky_relu(x, alpha=0.01)`: `x` for `x >= 0`, else `alpha x`; float.
    LeakyRelu,
    /// `thresholded_relu(x, alpha=1)`: `x` for `x > alpha`, else 0; float.
    ThresholdedRelu,
    /// `shrink(x, bias=0, lambd=0.5)`: `x + bias` below `-lambd`, `x - bias` above `lambd`,
    /// else 0; numeric.
    Shrink,
}

/// The f32 arithmetic of a [`Param`] operator with its attributes read and checked.
#[derive(Clone, Copy, Debug)]
enum ParamFn {
    Clip(f64, f64),
    HardSigmoid(f32, f32),
    GeluErf,
    GeluTanh,
    Elu(f32),
    Selu(f32, f32),
    Celu(f32),
    LeakyRelu(f32),
    ThresholdedRelu(f32),
    Shrink(f64, f64),
}

impl ParamFn {
    fn apply_f32(self, x: f32) -> f32 {
        match self {
            // `min(max(x, lo), hi)` as ONNX, onnxruntime and numpy compute it: with
            // `lo > hi` every number clips to `hi`. NaN stays NaN.
            ParamFn::Clip(lo, hi) => {
                let (lo, hi) = (lo as f32, hi as f32);
                let y = if x < lo { lo } else { x };
                if y > hi {
                    hi
                } else {
                    y
                }
            }
            ParamFn::HardSigmoid(alpha, beta) => hard_sigmoid(x, alpha, beta),
            ParamFn::GeluErf => {
                let v = x as f64;
                (0.5 * v * (1.0 + erf(v * std::f64::consts::FRAC_1_SQRT_2))) as f32
            }
            // The tanh approximation (TVM's `FastGelu`, PyTorch `approximate="tanh"`).
            ParamFn::GeluTanh => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
            }
            ParamFn::Elu(alpha) => elu(x, alpha),
            ParamFn::Selu(alpha, gamma) => gamma * elu(x, alpha),
            ParamFn::Celu(alpha) => x.max(0.0) + (alpha * ((x / alpha).exp() - 1.0)).min(0.0) + nan_of(x),
            ParamFn::LeakyRelu(alpha) => {
                if x < 0.0 {
                    alpha * x
                } else {
                    x
                }
            }
            ParamFn::ThresholdedRelu(alpha) => {
                if x > alpha || x.is_nan() {
                    x
                } else {
                    0.0
                }
            }
            ParamFn::Shrink(bias, lambd) => shrink(x as f64, bias, lambd) as f32,
        }
    }
}

/// 0, or NaN for a NaN `x` (so `max` / `min`, which drop NaN, keep it).
fn nan_of(x: f32) -> f32 {
    if x.is_nan() {
        x
    } else {
        0.0
    }
}

fn elu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 {
        alpha * (x.exp() - 1.0)
    } else {
        x
    }
}

fn shrink(x: f64, bias: f64, lambd: f64) -> f64 {
    if x < -lambd {
        x + bias
    } else if x > lambd {
        x - bias
    } else {
        0.0
    }
}

fn param_fn(op: &str, f: Param, attrs: &Attrs) -> Result<ParamFn, OpError> {
    Ok(match f {
        Param::Clip => {
            let lo = super::attr_float_req(op, attrs, "a_min")?;
            let hi = super::attr_float_req(op, attrs, "a_max")?;
            if lo.is_nan() || hi.is_nan() {
                return Err(type_err(op, "`a_min` and `a_max` must not be NaN"));
            }
            ParamFn::Clip(lo, hi)
        }
        Param::HardSigmoid => ParamFn::HardSigmoid(
            super::attr_float(op, attrs, "alpha", 0.2)? as f32,
            super::attr_float(op, attrs, "beta", 0.5)? as f32,
        ),
        Param::Gelu => match super::attr_choice(op, attrs, "approximate", &["none", "tanh"])? {
            "tanh" => ParamFn::GeluTanh,
            _ => ParamFn::GeluErf,
        },
        Param::Elu => ParamFn::Elu(finite_attr(op, attrs, "alpha", 1.0)? as f32),
        Param::Selu => ParamFn::Selu(
            finite_attr(op, attrs, "alpha", 1.673_263_192_176_818_8)? as f32,
            finite_attr(op, attrs, "gamma", 1.050_701_022_148_132_3)? as f32,
        ),
        Param::Celu => {
            let alpha = finite_attr(op, attrs, "alpha", 1.0)?;
            if alpha == 0.0 {
                return Err(type_err(op, "`alpha` must not be 0"));
            }
            ParamFn::Celu(alpha as f32)
        }
        Param::LeakyRelu => ParamFn::LeakyRelu(finite_attr(op, attrs, "alpha", 0.01)? as f32),
        Param::ThresholdedRelu => ParamFn::ThresholdedRelu(finite_attr(op, attrs, "alpha", 1.0)? as f32),
        Param::Shrink => {
            let lambd = finite_attr(op, attrs, "lambd", 0.5)?;
            if lambd < 0.0 {
                return Err(type_err(op, format_args!("`lambd` must not be negative, got {lambd}")));
            }
            ParamFn::Shrink(finite_attr(op, attrs, "bias", 0.0)?, lambd)
        }
    })
}

/// A float attribute that must be finite.
fn finite_attr(op: &str, attrs: &Attrs, key: &str, default: f64) -> Result<f64, OpError> {
    let v = super::attr_float(op, attrs, key, default)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(type_err(op, format_args!("`{key}` must be finite, got {v}")))
    }
}

/// Type relation of the unary operators with attributes: the argument's type.
pub(crate) fn param_unary_rel(op: &str, f: Param, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    if matches!(f, Param::Clip | Param::Shrink) {
        require_numeric(op, x)?;
    } else {
        require_float(op, x)?;
    }
    param_fn(op, f, attrs)?;
    Ok(args[0].clone())
}

/// Kernel of the unary operators with attributes. `clip` on integers compares in f64 and
/// leaves in-range values untouched, so large i64 values survive exactly.
pub(crate) fn param_unary(op: &str, f: Param, args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let ty = param_unary_rel(op, f, &types_of(args), attrs)?;
    let (_, dtype) = out_dims(&ty)?;
    let g = param_fn(op, f, attrs)?;
    let x = &args[0];
    let out = match (dtype, g) {
        (d, _) if d.is_float() => super::from_f32(op, map_f32(ctx, &to_f32(op, x)?, |v| g.apply_f32(v)), dtype)?,
        (d, ParamFn::Clip(lo, hi)) if d.is_integer() => {
            with_int!(d, T => T::wrap(int_clip(arr::<T>(op, x)?, lo, hi).into_shared()))
        }
        // Integer shrink computes in f64 and wraps back into the dtype, as the ONNX reference
        // (numpy on the integer array) does.
        (d, ParamFn::Shrink(bias, lambd)) if d.is_integer() => {
            let vals: Vec<f64> = x.to_f64s().into_iter().map(|v| shrink(v, bias, lambd)).collect();
            let dims: Vec<u64> = x.shape().iter().map(|&n| n as u64).collect();
            let ints: Vec<f64> = vals.iter().map(|v| v.trunc()).collect();
            Tensor::from_f64s(&dims, d, &ints)?
        }
        (other, _) => return Err(type_err(op, format_args!("unexpected dtype {other}"))),
    };
    Ok(vec![out])
}

/// `min(max(v, lo), hi)` like the float path (with `lo > hi` everything becomes `hi`),
/// bounds rounded inward to integers.
fn int_clip<T: Elem>(a: &ndarray::ArcArray<T, IxDyn>, lo: f64, hi: f64) -> ndarray::ArrayD<T> {
    a.mapv(|v| {
        let f = v.to_f64();
        if f > hi || (f < lo && lo.ceil() > hi) {
            T::from_f64(hi.floor())
        } else if f < lo {
            T::from_f64(lo.ceil())
        } else {
            v
        }
    })
}

// ---- logical_not ----

/// Type relation of `logical_not(x)`: a bool tensor.
pub(crate) fn logical_not_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    let op = "logical_not";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    if x.dtype != DType::Bool {
        return Err(type_err(op, format_args!("expected a bool tensor, got dtype {}", x.dtype)));
    }
    Ok(args[0].clone())
}

/// Kernel of `logical_not`.
pub(crate) fn logical_not(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    logical_not_rel(&types_of(args), attrs)?;
    Ok(vec![bool::wrap(arr::<bool>("logical_not", &args[0])?.mapv(|b| !b).into_shared())])
}

/// Type relation of the unary operators: the argument's type.
pub(crate) fn unary_rel(op: &str, f: Unary, args: &[Type]) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    if f.allows_int() {
        require_numeric(op, x)?;
    } else {
        require_float(op, x)?;
    }
    Ok(args[0].clone())
}

/// Kernel of the unary operators.
pub(crate) fn unary(op: &str, f: Unary, args: &[Tensor], _attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let ty = unary_rel(op, f, &types_of(args))?;
    let (_, dtype) = out_dims(&ty)?;
    let x = &args[0];
    let out = match dtype {
        d if d.is_float() => super::from_f32(op, map_f32(ctx, &to_f32(op, x)?, |v| f.apply_f32(v)), dtype)?,
        d if d.is_integer() => with_int!(d, T => T::wrap(int_unary(f, arr::<T>(op, x)?).into_shared())),
        _ => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![out])
}

/// `f` over every element of `a`, spread over `ctx`'s workers when `a` is large and row-major
/// (`par.rs`); ndarray's `mapv` otherwise.
fn map_f32(
    ctx: &KernelCtx,
    a: &ndarray::ArcArray<f32, IxDyn>,
    f: impl Fn(f32) -> f32 + Sync + Send,
) -> ndarray::ArrayD<f32> {
    match (super::par::workers(ctx, a.len()), a.as_slice()) {
        (Some(pool), Some(xs)) => {
            let out = super::par::map_slice(Some(pool), super::par::min_chunk(ctx), xs, &f);
            // A row-major slice has the array's shape, so this does not fail.
            ndarray::ArrayD::from_shape_vec(a.raw_dim(), out).unwrap_or_else(|_| a.mapv(&f))
        }
        _ => a.mapv(f),
    }
}

fn int_unary<T: IntElem>(f: Unary, a: &ndarray::ArcArray<T, IxDyn>) -> ndarray::ArrayD<T> {
    match f {
        Unary::Negative => a.mapv(T::wneg),
        Unary::Abs => a.mapv(|v| if v < T::ZERO { v.wneg() } else { v }),
        Unary::Sign => a.mapv(|v| {
            if v > T::ZERO {
                T::from_i64(1)
            } else if v < T::ZERO {
                T::from_i64(-1)
            } else {
                T::ZERO
            }
        }),
        _ => a.mapv(|v| if v > T::ZERO { v } else { T::ZERO }),
    }
}

// ---- binary arithmetic ----

/// Integer element types with wrapping arithmetic (overflow never panics).
pub(crate) trait IntElem: Elem + Ord {
    const ZERO: Self;
    const MIN: Self;
    const MAX: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    /// Division truncating toward zero; the caller rules out a zero divisor.
    fn wdiv(self, o: Self) -> Self;
    fn wneg(self) -> Self;
    fn wpow(self, e: Self) -> Self;
    /// The value, exactly.
    fn to_i128(self) -> i128;
    /// `v`, which the caller knows fits.
    fn from_i128(v: i128) -> Self;
    /// The two's complement bits, zero-extended to 64.
    fn to_u64_bits(self) -> u64;
    /// The low bits of `v`.
    fn from_u64_bits(v: u64) -> Self;
}

/// `base^exp` modulo 2^bits by square-and-multiply over the whole exponent (so exponents beyond
/// u32 are not clamped), `mul` a wrapping product and `one` its identity.
fn wrapping_pow<T: Copy>(mut base: T, mut exp: u64, one: T, mul: fn(T, T) -> T) -> T {
    let mut acc = one;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul(acc, base);
        }
        base = mul(base, base);
        exp >>= 1;
    }
    acc
}

macro_rules! impl_int {
    ($t:ty) => {
        impl IntElem for $t {
            const ZERO: Self = 0;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn wdiv(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            fn to_i128(self) -> i128 {
                self as i128
            }
            fn from_i128(v: i128) -> Self {
                v as Self
            }
            fn to_u64_bits(self) -> u64 {
                self as u64 & (u64::MAX >> (64 - 8 * std::mem::size_of::<Self>()))
            }
            fn from_u64_bits(v: u64) -> Self {
                v as Self
            }
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            fn wpow(self, e: Self) -> Self {
                if e < 0 {
                    // Integer power with a negative exponent truncates toward zero.
                    match self {
                        1 => 1,
                        -1 if e % 2 == 0 => 1,
                        -1 => -1,
                        _ => 0,
                    }
                } else {
                    // Exact power modulo 2^bits (two's complement wrapping, like every other
                    // integer operator): square-and-multiply over the whole exponent, so
                    // exponents beyond u32 are not clamped.
                    wrapping_pow(self, e as u64, 1, <$t>::wrapping_mul)
                }
            }
        }
    };
}
impl_int!(i64);
impl_int!(i32);
impl_int!(i16);
impl_int!(i8);

macro_rules! impl_uint {
    ($t:ty) => {
        impl IntElem for $t {
            const ZERO: Self = 0;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn wdiv(self, o: Self) -> Self {
                self.checked_div(o).unwrap_or(0)
            }
            fn to_i128(self) -> i128 {
                self as i128
            }
            fn from_i128(v: i128) -> Self {
                v as Self
            }
            fn to_u64_bits(self) -> u64 {
                self as u64 & (u64::MAX >> (64 - 8 * std::mem::size_of::<Self>()))
            }
            fn from_u64_bits(v: u64) -> Self {
                v as Self
            }
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            fn wpow(self, e: Self) -> Self {
                wrapping_pow(self, e as u64, 1, <$t>::wrapping_mul)
            }
        }
    };
}
impl_uint!(u8);
impl_uint!(u16);
impl_uint!(u32);
impl_uint!(u64);

/// A binary arithmetic operator with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
}

impl Arith {
    /// The f64 arithmetic (f64 tensors compute in f64).
    pub(crate) fn apply_f64(self, x: f64, y: f64) -> f64 {
        match self {
            Arith::Add => x + y,
            Arith::Sub => x - y,
            Arith::Mul => x * y,
            Arith::Div => x / y,
            Arith::Pow => x.powf(y),
            Arith::Max if x.is_nan() || y.is_nan() => f64::NAN,
            Arith::Min if x.is_nan() || y.is_nan() => f64::NAN,
            Arith::Max => x.max(y),
            Arith::Min => x.min(y),
        }
    }

    pub(crate) fn apply_f32(self, x: f32, y: f32) -> f32 {
        match self {
            Arith::Add => x + y,
            Arith::Sub => x - y,
            Arith::Mul => x * y,
            Arith::Div => x / y,
            Arith::Pow => x.powf(y),
            // numpy's maximum/minimum propagate NaN; f32::max would drop it.
            Arith::Max if x.is_nan() || y.is_nan() => f32::NAN,
            Arith::Min if x.is_nan() || y.is_nan() => f32::NAN,
            Arith::Max => x.max(y),
            Arith::Min => x.min(y),
        }
    }

    fn apply_int<T: IntElem>(self, x: T, y: T) -> T {
        match self {
            Arith::Add => x.wadd(y),
            Arith::Sub => x.wsub(y),
            Arith::Mul => x.wmul(y),
            Arith::Div => x.wdiv(y),
            Arith::Pow => x.wpow(y),
            Arith::Max => x.max(y),
            Arith::Min => x.min(y),
        }
    }
}

/// Type relation of the arithmetic operators: same numeric dtype, broadcast shapes.
pub(crate) fn arith_rel(op: &str, args: &[Type]) -> Result<Type, OpError> {
    check_arity(op, args.len(), 2)?;
    let a = tensor_arg(op, args, 0)?;
    let b = tensor_arg(op, args, 1)?;
    same_dtype(op, a, b)?;
    require_numeric(op, a)?;
    broadcast_type(op, args, a, b, a.dtype)
}

/// Kernel of the arithmetic operators.
pub(crate) fn arith(op: &str, f: Arith, args: &[Tensor], _attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let ty = arith_rel(op, &types_of(args))?;
    let (shape, dtype) = out_dims(&ty)?;
    let (x, y) = (&args[0], &args[1]);
    let out = match dtype {
        DType::F32 | DType::F16 => {
            let (x, y) = (&to_f32(op, x)?, &to_f32(op, y)?);
            // One closure per operator, so the operator's match is not in the element loop.
            let r = match f {
                Arith::Add => zip2(op, ctx, x, y, &shape, |a, b| Arith::Add.apply_f32(a, b)),
                Arith::Sub => zip2(op, ctx, x, y, &shape, |a, b| Arith::Sub.apply_f32(a, b)),
                Arith::Mul => zip2(op, ctx, x, y, &shape, |a, b| Arith::Mul.apply_f32(a, b)),
                Arith::Div => zip2(op, ctx, x, y, &shape, |a, b| Arith::Div.apply_f32(a, b)),
                Arith::Pow => zip2(op, ctx, x, y, &shape, |a, b| Arith::Pow.apply_f32(a, b)),
                Arith::Max => zip2(op, ctx, x, y, &shape, |a, b| Arith::Max.apply_f32(a, b)),
                Arith::Min => zip2(op, ctx, x, y, &shape, |a, b| Arith::Min.apply_f32(a, b)),
            }?;
            super::from_f32(op, r, dtype)?
        }
        DType::F64 => f64::wrap(
            zip2(op, ctx, arr::<f64>(op, x)?, arr::<f64>(op, y)?, &shape, |a, b| f.apply_f64(a, b))?.into_shared(),
        ),
        d if d.is_integer() => with_int!(d, T => T::wrap(int_arith::<T>(op, ctx, f, x, y, &shape)?.into_shared())),
        _ => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![out])
}

fn int_arith<T: IntElem>(
    op: &str,
    ctx: &KernelCtx,
    f: Arith,
    x: &Tensor,
    y: &Tensor,
    shape: &[usize],
) -> Result<ndarray::ArrayD<T>, OpError> {
    let (a, b) = (arr::<T>(op, x)?, arr::<T>(op, y)?);
    if f == Arith::Div && b.iter().any(|&v| v == T::ZERO) {
        return Err(super::invalid(op, "integer division by zero"));
    }
    zip2(op, ctx, a, b, shape, |p, q| f.apply_int(p, q))
}

// ---- comparisons ----

/// A comparison producing bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn apply<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            Cmp::Eq => x == y,
            Cmp::Ne => x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
        }
    }
}

/// Type relation of comparisons: same dtype (any), broadcast shapes, bool result.
pub(crate) fn compare_rel(op: &str, args: &[Type]) -> Result<Type, OpError> {
    check_arity(op, args.len(), 2)?;
    let a = tensor_arg(op, args, 0)?;
    let b = tensor_arg(op, args, 1)?;
    same_dtype(op, a, b)?;
    broadcast_type(op, args, a, b, DType::Bool)
}

/// Kernel of comparisons; compares in the element type itself (IEEE semantics for floats:
/// NaN is unequal to everything).
pub(crate) fn compare(op: &str, f: Cmp, args: &[Tensor], _attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let ty = compare_rel(op, &types_of(args))?;
    let (shape, _) = out_dims(&ty)?;
    let r = with_elem!(args[0].dtype(), T => zip2(op, ctx, arr::<T>(op, &args[0])?, arr::<T>(op, &args[1])?, &shape, |a, b| f.apply(a, b))?);
    Ok(vec![bool::wrap(r.into_shared())])
}

// ---- where ----

/// Type relation of `where(cond, a, b)`: bool condition, same-dtype branches, all three
/// broadcast together.
pub(crate) fn where_rel(args: &[Type]) -> Result<Type, OpError> {
    let op = "where";
    check_arity(op, args.len(), 3)?;
    let c = tensor_arg(op, args, 0)?;
    let a = tensor_arg(op, args, 1)?;
    let b = tensor_arg(op, args, 2)?;
    if c.dtype != DType::Bool {
        return Err(type_err(op, format_args!("condition must have dtype bool, got {}", c.dtype)));
    }
    same_dtype(op, a, b)?;
    let ab = broadcast_shapes(op, &a.shape, &b.shape)?;
    let shape = broadcast_shapes(op, &c.shape, &ab).map_err(|_| {
        type_err(
            op,
            format_args!(
                "shapes {}, {} and {} do not broadcast",
                shape_str(&c.shape),
                shape_str(&a.shape),
                shape_str(&b.shape)
            ),
        )
    })?;
    Ok(Type::tensor(shape, a.dtype))
}

/// Kernel of `where`.
pub(crate) fn where_(args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "where";
    let ty = where_rel(&types_of(args))?;
    let (shape, dtype) = out_dims(&ty)?;
    check_dims(&shape)?;
    let dims = IxDyn(&shape);
    let bad = || super::invalid(op, format_args!("cannot broadcast to {}", shape_str(&shape)));
    let c = arr::<bool>(op, &args[0])?;
    let cv = c.broadcast(dims.clone()).ok_or_else(bad)?;
    let out = with_elem!(dtype, T => {
        let av = arr::<T>(op, &args[1])?.broadcast(dims.clone()).ok_or_else(bad)?;
        let bv = arr::<T>(op, &args[2])?.broadcast(dims.clone()).ok_or_else(bad)?;
        T::wrap(Zip::from(&cv).and(&av).and(&bv).map_collect(|&c, &a, &b| if c { a } else { b }).into_shared())
    });
    Ok(vec![out])
}

// ---- cast ----

/// Type relation of `cast(x, dtype=…)`.
pub(crate) fn cast_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "cast";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    let to = super::attr_dtype(op, attrs, "dtype", None)?;
    Ok(Type::tensor(x.shape.clone(), to))
}

/// Kernel of `cast`: floats to integers truncate toward zero and saturate (NaN becomes 0),
/// anything to bool is `x != 0`, integer to integer wraps, bool is 0/1.
pub(crate) fn cast(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let op = "cast";
    let ty = cast_rel(&types_of(args), attrs)?;
    let (_, to) = out_dims(&ty)?;
    let from = args[0].dtype();
    // Integers and bools go through i64 so that large i64 values survive exactly.
    let via_int = !from.is_float() && !to.is_float();
    let out = with_elem!(from, S => {
        let a = arr::<S>(op, &args[0])?;
        with_elem!(to, D => {
            let r = if via_int { a.mapv(|v| D::from_i64(v.to_i64())) } else { a.mapv(|v| D::from_f64(v.to_f64())) };
            D::wrap(r.into_shared())
        })
    });
    Ok(vec![out])
}

// ---- float predicates ----

/// Type relation of `isnan(x)` and `isinf(x, detect_positive, detect_negative)`: a float
/// tensor in, a bool tensor of its shape out.
pub(crate) fn float_test_rel(op: &str, args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    require_float(op, x)?;
    super::attr_bool(op, attrs, "detect_positive", true)?;
    super::attr_bool(op, attrs, "detect_negative", true)?;
    Ok(Type::tensor(x.shape.clone(), DType::Bool))
}

/// Kernel of `isnan` (`inf` false) and `isinf` (`inf` true: which infinities count comes from
/// `detect_positive` / `detect_negative`, both true by default).
pub(crate) fn float_test(op: &str, inf: bool, args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    float_test_rel(op, &types_of(args), attrs)?;
    let pos = super::attr_bool(op, attrs, "detect_positive", true)?;
    let neg = super::attr_bool(op, attrs, "detect_negative", true)?;
    // f16 and f32 widen to f32 exactly, so NaN and infinities keep their class.
    let x = to_f32(op, &args[0])?;
    let out = if args[0].dtype() == DType::F64 {
        let a = arr::<f64>(op, &args[0])?;
        a.mapv(|v| if inf { (v == f64::INFINITY && pos) || (v == f64::NEG_INFINITY && neg) } else { v.is_nan() })
    } else {
        x.mapv(|v| if inf { (v == f32::INFINITY && pos) || (v == f32::NEG_INFINITY && neg) } else { v.is_nan() })
    };
    Ok(vec![bool::wrap(out.into_shared())])
}

// ---- mod ----

/// Type relation of `mod(a, b, fmod=false)`: same numeric dtype, broadcast shapes.
pub(crate) fn mod_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let op = "mod";
    let ty = arith_rel(op, args)?;
    super::attr_bool(op, attrs, "fmod", false)?;
    Ok(ty)
}

/// Kernel of `mod`: with `fmod` the remainder of truncated division (sign of the dividend,
/// C's `fmod`), otherwise of floored division (sign of the divisor, numpy's `mod`: a zero
/// remainder takes the divisor's sign, `-3 mod inf` is `inf`). An integer divisor of zero is an
/// error.
pub(crate) fn mod_(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let op = "mod";
    let ty = mod_rel(&types_of(args), attrs)?;
    let fmod = super::attr_bool(op, attrs, "fmod", false)?;
    let (shape, dtype) = out_dims(&ty)?;
    let (x, y) = (&args[0], &args[1]);
    let out = match dtype {
        DType::F64 => {
            let r = zip2(op, ctx, arr::<f64>(op, x)?, arr::<f64>(op, y)?, &shape, |a, b| float_mod(a, b, fmod))?;
            f64::wrap(r.into_shared())
        }
        d if d.is_float() => {
            let r = zip2(op, ctx, &to_f32(op, x)?, &to_f32(op, y)?, &shape, |a, b| {
                float_mod(a as f64, b as f64, fmod) as f32
            })?;
            super::from_f32(op, r, dtype)?
        }
        d if d.is_integer() => with_int!(d, T => {
            let (a, b) = (arr::<T>(op, x)?, arr::<T>(op, y)?);
            if b.iter().any(|&v| v == T::ZERO) {
                return Err(super::invalid(op, "integer modulo by zero"));
            }
            T::wrap(zip2(op, ctx, a, b, &shape, |p, q| int_mod(p, q, fmod))?.into_shared())
        }),
        _ => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![out])
}

/// `a mod b` in floats: truncated (`fmod`) or floored like numpy's `mod`.
fn float_mod(a: f64, b: f64, fmod: bool) -> f64 {
    let r = a % b;
    if fmod {
        r
    } else if r == 0.0 {
        0f64.copysign(b)
    } else if (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

/// `p mod q` for `q != 0`, in i128 so `MIN % -1` cannot overflow.
fn int_mod<T: IntElem>(p: T, q: T, fmod: bool) -> T {
    let (a, b) = (p.to_i128(), q.to_i128());
    let r = a % b;
    let r = if !fmod && r != 0 && ((r < 0) != (b < 0)) { r + b } else { r };
    T::from_i128(r)
}

// ---- logical and bitwise ----

/// A binary logical (bool) or bitwise (integer) operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bits2 {
    And,
    Or,
    Xor,
    /// `a << b` (bits shifted out are lost; a shift by a negative amount or the width or more
    /// gives 0).
    Shl,
    /// `a >> b`, arithmetic for signed dtypes (a shift by a negative amount or the width or
    /// more gives -1 for a negative `a`, else 0).
    Shr,
}

impl Bits2 {
    /// Logical operators take bool; bitwise ones and shifts integers (ONNX BitShift took
    /// unsigned ones, later opsets signed ones too).
    fn accepts(op: &str, dtype: DType) -> Result<(), OpError> {
        let logical = op.starts_with("logical_");
        if (logical && dtype == DType::Bool) || (!logical && dtype.is_integer()) {
            Ok(())
        } else {
            let want = if logical { "a bool tensor" } else { "an integer tensor" };
            Err(type_err(op, format_args!("expected {want}, got dtype {dtype}")))
        }
    }
}

/// Type relation of the logical / bitwise binary operators: one dtype, broadcast shapes.
pub(crate) fn bits2_rel(op: &str, f: Bits2, args: &[Type]) -> Result<Type, OpError> {
    check_arity(op, args.len(), 2)?;
    let a = tensor_arg(op, args, 0)?;
    let b = tensor_arg(op, args, 1)?;
    same_dtype(op, a, b)?;
    let _ = f;
    Bits2::accepts(op, a.dtype)?;
    broadcast_type(op, args, a, b, a.dtype)
}

/// Kernel of the logical / bitwise binary operators.
pub(crate) fn bits2(op: &str, f: Bits2, args: &[Tensor], _attrs: &Attrs, ctx: &mut KernelCtx) -> KResult {
    let ty = bits2_rel(op, f, &types_of(args))?;
    let (shape, dtype) = out_dims(&ty)?;
    let (x, y) = (&args[0], &args[1]);
    let out = if dtype == DType::Bool {
        let g = move |a: bool, b: bool| match f {
            Bits2::And => a & b,
            Bits2::Or => a | b,
            _ => a ^ b,
        };
        bool::wrap(zip2(op, ctx, arr::<bool>(op, x)?, arr::<bool>(op, y)?, &shape, g)?.into_shared())
    } else {
        with_int!(dtype, T => {
            let g = move |a: T, b: T| -> T {
                let (p, q) = (a.to_u64_bits(), b.to_u64_bits());
                let bits = 8 * std::mem::size_of::<T>() as i128;
                let shift = b.to_i128();
                let in_range = (0..bits).contains(&shift);
                match f {
                    Bits2::And => T::from_u64_bits(p & q),
                    Bits2::Or => T::from_u64_bits(p | q),
                    Bits2::Xor => T::from_u64_bits(p ^ q),
                    Bits2::Shl if in_range => T::from_u64_bits(p << shift),
                    Bits2::Shr if in_range => T::from_i128(a.to_i128() >> shift),
                    Bits2::Shl => T::ZERO,
                    Bits2::Shr => T::from_i128(if a.to_i128() < 0 { -1 } else { 0 }),
                }
            };
            T::wrap(zip2(op, ctx, arr::<T>(op, x)?, arr::<T>(op, y)?, &shape, g)?.into_shared())
        })
    };
    Ok(vec![out])
}

/// Type relation of `bitwise_not(x)`: an integer tensor.
pub(crate) fn bitwise_not_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    let op = "bitwise_not";
    check_arity(op, args.len(), 1)?;
    let x = tensor_arg(op, args, 0)?;
    if !x.dtype.is_integer() {
        return Err(type_err(op, format_args!("expected an integer tensor, got dtype {}", x.dtype)));
    }
    Ok(args[0].clone())
}

/// Kernel of `bitwise_not`: every bit flipped.
pub(crate) fn bitwise_not(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    bitwise_not_rel(&types_of(args), attrs)?;
    let out = with_int!(args[0].dtype(), T => {
        T::wrap(arr::<T>("bitwise_not", &args[0])?.mapv(|v| T::from_u64_bits(!v.to_u64_bits())).into_shared())
    });
    Ok(vec![out])
}
