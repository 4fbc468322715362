//! Elementwise and broadcasting operators: unary math, binary arithmetic, comparisons,
//! `where` and `cast`.

use ndarray::{IxDyn, Zip};

use super::{
    arr, broadcast_shapes, broadcast_type, check_arity, check_dims, out_dims, require_float, require_numeric,
    same_dtype, shape_str, tensor_arg, to_f32, type_err, types_of, with_elem, zip2, Elem, KResult,
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
    Gelu,
}

impl Unary {
    /// `negative` and `relu` make sense on integers too; the rest are float-only.
    fn allows_int(self) -> bool {
        matches!(self, Unary::Negative | Unary::Relu)
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
            // The tanh approximation (TVM's `FastGelu`, PyTorch `approximate="tanh"`), which
            // needs no erf in std.
            Unary::Gelu => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
            }
        }
    }
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
pub(crate) fn unary(op: &str, f: Unary, args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = unary_rel(op, f, &types_of(args))?;
    let (_, dtype) = out_dims(&ty)?;
    let x = &args[0];
    let out = match dtype {
        DType::F32 | DType::F16 => super::from_f32(op, to_f32(op, x)?.mapv(|v| f.apply_f32(v)), dtype)?,
        DType::I64 => i64::wrap(int_unary(f, arr::<i64>(op, x)?).into_shared()),
        DType::I32 => i32::wrap(int_unary(f, arr::<i32>(op, x)?).into_shared()),
        DType::Bool => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![out])
}

fn int_unary<T: IntElem>(f: Unary, a: &ndarray::ArcArray<T, IxDyn>) -> ndarray::ArrayD<T> {
    match f {
        Unary::Negative => a.mapv(T::wneg),
        _ => a.mapv(|v| if v > T::ZERO { v } else { T::ZERO }),
    }
}

// ---- binary arithmetic ----

/// Integer element types with wrapping arithmetic (overflow never panics).
pub(crate) trait IntElem: Elem + Ord {
    const ZERO: Self;
    const MIN: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    /// Division truncating toward zero; the caller rules out a zero divisor.
    fn wdiv(self, o: Self) -> Self;
    fn wneg(self) -> Self;
    fn wpow(self, e: Self) -> Self;
}

macro_rules! impl_int {
    ($t:ty) => {
        impl IntElem for $t {
            const ZERO: Self = 0;
            const MIN: Self = <$t>::MIN;
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
                    let mut exp = e as u64;
                    let mut base = self;
                    let mut acc: Self = 1;
                    while exp > 0 {
                        if exp & 1 == 1 {
                            acc = acc.wrapping_mul(base);
                        }
                        base = base.wrapping_mul(base);
                        exp >>= 1;
                    }
                    acc
                }
            }
        }
    };
}
impl_int!(i64);
impl_int!(i32);

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
pub(crate) fn arith(op: &str, f: Arith, args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = arith_rel(op, &types_of(args))?;
    let (shape, dtype) = out_dims(&ty)?;
    let (x, y) = (&args[0], &args[1]);
    let out = match dtype {
        DType::F32 | DType::F16 => {
            let r = zip2(op, &to_f32(op, x)?, &to_f32(op, y)?, &shape, |a, b| f.apply_f32(a, b))?;
            super::from_f32(op, r, dtype)?
        }
        DType::I64 => i64::wrap(int_arith::<i64>(op, f, x, y, &shape)?.into_shared()),
        DType::I32 => i32::wrap(int_arith::<i32>(op, f, x, y, &shape)?.into_shared()),
        DType::Bool => return Err(type_err(op, "expected a numeric tensor, got dtype bool")),
    };
    Ok(vec![out])
}

fn int_arith<T: IntElem>(
    op: &str,
    f: Arith,
    x: &Tensor,
    y: &Tensor,
    shape: &[usize],
) -> Result<ndarray::ArrayD<T>, OpError> {
    let (a, b) = (arr::<T>(op, x)?, arr::<T>(op, y)?);
    if f == Arith::Div && b.iter().any(|&v| v == T::ZERO) {
        return Err(super::invalid(op, "integer division by zero"));
    }
    zip2(op, a, b, shape, |p, q| f.apply_int(p, q))
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
pub(crate) fn compare(op: &str, f: Cmp, args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = compare_rel(op, &types_of(args))?;
    let (shape, _) = out_dims(&ty)?;
    let r = with_elem!(args[0].dtype(), T => zip2(op, arr::<T>(op, &args[0])?, arr::<T>(op, &args[1])?, &shape, |a, b| f.apply(a, b))?);
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
