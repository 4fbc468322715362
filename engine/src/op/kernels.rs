//! Type relations and reference kernels of the operator library, plus the helpers they share:
//! argument and attribute access with lowercase errors naming the operator, numpy
//! broadcasting, and dtype dispatch.
//!
//! Every kernel starts by running its own type relation on the types of its concrete
//! arguments, so a kernel called on unchecked tensors reports exactly the errors type
//! inference would, and never panics on a bad shape or attribute. Float kernels compute in
//! f32; f16 tensors are widened to f32 and narrowed back, and so are f64 tensors except in the
//! arithmetic operators, comparisons and casts, which compute in f64. Integer arithmetic wraps, as in
//! TVM's generated code, so overflow is never a panic.
//!
//! The kernels are split by family: `elementwise` (unary, binary, comparisons, `where`,
//! `cast`), `nn` (matmul, dense, conv2d, normalisations, softmax, dropout, einsum), `shape`
//! (reshape, transpose, concatenate, split, broadcast_to), `index` (take, strided_slice, pad,
//! trilu, one_hot), `scatter` (gather_elements, scatter_elements, scatter_nd), `reduce`
//! (sum, mean, max, min, prod, argmax, argmin, topk, cumsum), `pool`, `resize` (resize2d,
//! grid_sample) and `create` (zeros, ones, random_uniform).

pub(crate) mod call_tir;
pub(crate) mod create;
pub(crate) mod einsum;
pub(crate) mod elementwise;
pub(crate) mod grid_sample;
pub(crate) mod index;

pub(crate) mod nn;
pub mod par;
pub(crate) mod pool;

pub(crate) mod reduce;
pub(crate) mod resize;
pub(crate) mod scatter;

pub(crate) mod shape;
#[cfg(test)]
mod tests;

use half::f16;
use ndarray::{ArcArray, ArrayD, IxDyn, Zip};

use super::{KernelCtx, OpError};
use crate::ir::{
    AttrValue, Attrs, DType, Tensor, TensorData, TensorError, TensorType, Type, MAX_MATERIALIZED_ELEMENTS,
};

/// What every kernel returns: one tensor per result field.
pub(crate) type KResult = Result<Vec<Tensor>, OpError>;

/// Result type = the single argument's type (any value).
pub fn identity_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    args.first().cloned().ok_or_else(|| OpError::Type("expected one argument, got none".into()))
}

/// Numpy broadcasting of two tensor types with the same dtype (generic messages; the
/// registered operators use per-operator relations that name the operator).
pub fn broadcast_rel(args: &[Type], _attrs: &Attrs) -> Result<Type, OpError> {
    check_arity("broadcast", args.len(), 2)?;
    let a = tensor_arg("broadcast", args, 0)?;
    let b = tensor_arg("broadcast", args, 1)?;
    same_dtype("broadcast", a, b)?;
    Ok(Type::tensor(broadcast_shapes("broadcast", &a.shape, &b.shape)?, a.dtype))
}

/// `add` on any numeric dtype (kept for callers of the original placeholder table).
pub fn add(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError> {
    elementwise::arith("add", elementwise::Arith::Add, args, attrs, ctx)
}

/// `relu` on any numeric dtype (kept for callers of the original placeholder table).
pub fn relu(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError> {
    elementwise::unary("relu", elementwise::Unary::Relu, args, attrs, ctx)
}

// ---- cost estimates ([`super::CostFn`]) ----

/// Elements of a tensor type, or of a tuple's fields; `u64::MAX` when unknown or overflowing.
pub(crate) fn elements(ty: &Type) -> u64 {
    match (ty.as_tensor(), ty.as_tuple()) {
        (Some(t), _) => t.num_elements().unwrap_or(u64::MAX),
        (None, Some(fields)) => fields.iter().fold(0u64, |n, f| n.saturating_add(elements(f))),
        _ => u64::MAX,
    }
}

/// Every element of the arguments and the result, once.
pub(crate) fn linear_cost(args: &[Type], out: &Type) -> u64 {
    args.iter().fold(elements(out), |n, a| n.saturating_add(elements(a)))
}

/// The cost of an operator whose kernel touches each element of its arguments and result a
/// bounded number of times (elementwise, injective, reductions, normalisations): [`linear_cost`].
pub(crate) fn linear(args: &[Type], _attrs: &Attrs, out: &Type) -> u64 {
    linear_cost(args, out)
}

// ---- error and formatting helpers ----

/// `op: msg` as a type error.
pub(crate) fn type_err(op: &str, msg: impl std::fmt::Display) -> OpError {
    OpError::Type(format!("{op}: {msg}"))
}

/// `op: msg` as an invalid-value error.
pub(crate) fn invalid(op: &str, msg: impl std::fmt::Display) -> OpError {
    OpError::Invalid(format!("{op}: {msg}"))
}

/// A shape in the text syntax of types: `(2, 3)`, `(4,)`, `()`.
pub(crate) fn shape_str<D: std::fmt::Display>(shape: &[D]) -> String {
    let inner: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if inner.len() == 1 {
        format!("({},)", inner[0])
    } else {
        format!("({})", inner.join(", "))
    }
}

pub(crate) fn check_arity(op: &str, n: usize, expected: usize) -> Result<(), OpError> {
    if n == expected {
        Ok(())
    } else {
        Err(type_err(op, format_args!("expected {expected} arguments, got {n}")))
    }
}

/// Argument `i` as a tensor type; tuples and functions are errors.
pub(crate) fn tensor_arg<'a>(op: &str, args: &'a [Type], i: usize) -> Result<&'a TensorType, OpError> {
    match args.get(i).map(|t| (t.as_tensor(), t)) {
        Some((Some(t), _)) => Ok(t),
        Some((None, other)) => Err(type_err(op, format_args!("argument {} must be a tensor, got {other}", i + 1))),
        None => Err(type_err(op, format_args!("missing argument {}", i + 1))),
    }
}

pub(crate) fn same_dtype(op: &str, a: &TensorType, b: &TensorType) -> Result<(), OpError> {
    if a.dtype == b.dtype {
        Ok(())
    } else {
        Err(type_err(op, format_args!("dtype mismatch: {} vs {}", a.dtype, b.dtype)))
    }
}

pub(crate) fn require_float(op: &str, t: &TensorType) -> Result<(), OpError> {
    if t.dtype.is_float() {
        Ok(())
    } else {
        Err(type_err(op, format_args!("expected a float tensor (f32, f16 or f64), got dtype {}", t.dtype)))
    }
}

pub(crate) fn require_numeric(op: &str, t: &TensorType) -> Result<(), OpError> {
    if t.dtype == DType::Bool {
        Err(type_err(op, "expected a numeric tensor, got dtype bool"))
    } else {
        Ok(())
    }
}

/// Numpy broadcasting of two shapes.
pub(crate) fn broadcast_shapes(op: &str, a: &[u64], b: &[u64]) -> Result<Vec<u64>, OpError> {
    let n = a.len().max(b.len());
    let dim = |s: &[u64], i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    (0..n)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(type_err(op, format_args!("shapes {} and {} do not broadcast", shape_str(a), shape_str(b)))),
        })
        .collect()
}

/// The type of broadcasting `a` (the tensor type of `args[0]`) with `b` (of `args[1]`) to
/// element type `dtype`. When the result has the shape and dtype of an argument (equal shapes,
/// or a scalar or smaller operand against a tensor) that argument's type is returned (one
/// reference count, no allocation); otherwise a new type is built by [`broadcast_shapes`].
pub(crate) fn broadcast_type(
    op: &str,
    args: &[Type],
    a: &TensorType,
    b: &TensorType,
    dtype: DType,
) -> Result<Type, OpError> {
    if a.dtype == dtype && broadcasts_into(&b.shape, &a.shape) {
        return Ok(args[0].clone());
    }
    if b.dtype == dtype && broadcasts_into(&a.shape, &b.shape) {
        return Ok(args[1].clone());
    }
    Ok(Type::tensor(broadcast_shapes(op, &a.shape, &b.shape)?, dtype))
}

/// Whether broadcasting `small` with `big` gives `big`'s shape: `small` has no more
/// dimensions and each of its trailing-aligned dimensions equals `big`'s or is 1.
fn broadcasts_into(small: &[u64], big: &[u64]) -> bool {
    small.len() <= big.len() && small.iter().rev().zip(big.iter().rev()).all(|(&s, &b)| s == b || s == 1)
}

/// Normalises a possibly negative axis against `rank`.
pub(crate) fn norm_axis(op: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(type_err(op, format_args!("axis {axis} is out of range for a tensor of rank {rank}")))
    }
}

// ---- attributes ----

fn attr_kind_err(op: &str, key: &str, want: &str, got: &AttrValue) -> OpError {
    type_err(op, format_args!("attribute `{key}` must be {want}, got {}", got.kind_name()))
}

pub(crate) fn attr_int(op: &str, attrs: &Attrs, key: &str, default: i64) -> Result<i64, OpError> {
    match attrs.get(key) {
        None => Ok(default),
        Some(AttrValue::Int(v)) => Ok(*v),
        Some(v) => Err(attr_kind_err(op, key, "int", v)),
    }
}

pub(crate) fn attr_float(op: &str, attrs: &Attrs, key: &str, default: f64) -> Result<f64, OpError> {
    match attrs.get(key) {
        None => Ok(default),
        Some(v @ (AttrValue::Float(_) | AttrValue::Int(_))) => Ok(v.as_float().unwrap_or(default)),
        Some(v) => Err(attr_kind_err(op, key, "float", v)),
    }
}

pub(crate) fn attr_bool(op: &str, attrs: &Attrs, key: &str, default: bool) -> Result<bool, OpError> {
    match attrs.get(key) {
        None => Ok(default),
        Some(AttrValue::Bool(b)) => Ok(*b),
        Some(v) => Err(attr_kind_err(op, key, "bool", v)),
    }
}

/// A required float attribute.
pub(crate) fn attr_float_req(op: &str, attrs: &Attrs, key: &str) -> Result<f64, OpError> {
    if attrs.get(key).is_none() {
        return Err(type_err(op, format_args!("missing attribute `{key}`")));
    }
    attr_float(op, attrs, key, 0.0)
}

/// A string attribute that must be one of `choices` (the first is the default).
pub(crate) fn attr_choice<'c>(op: &str, attrs: &Attrs, key: &str, choices: &[&'c str]) -> Result<&'c str, OpError> {
    let default = choices.first().copied().unwrap_or("");
    match attrs.get(key) {
        None => Ok(default),
        Some(AttrValue::Str(s)) => choices
            .iter()
            .copied()
            .find(|c| **c == **s)
            .ok_or_else(|| type_err(op, format_args!("`{key}` must be one of {}, got {s:?}", choices.join(", ")))),
        Some(v) => Err(attr_kind_err(op, key, "str", v)),
    }
}

pub(crate) fn attr_ints<'a>(op: &str, attrs: &'a Attrs, key: &str) -> Result<Option<&'a [i64]>, OpError> {
    match attrs.get(key) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v)),
        Some(v) => Err(attr_kind_err(op, key, "ints", v)),
    }
}

pub(crate) fn attr_dtype(op: &str, attrs: &Attrs, key: &str, default: Option<DType>) -> Result<DType, OpError> {
    match (attrs.get(key), default) {
        (Some(AttrValue::DType(d)), _) => Ok(*d),
        (Some(v), _) => Err(attr_kind_err(op, key, "dtype", v)),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(type_err(op, format_args!("missing attribute `{key}`"))),
    }
}

/// A shape attribute: required, every dimension non-negative.
pub(crate) fn attr_shape(op: &str, attrs: &Attrs, key: &str) -> Result<Vec<u64>, OpError> {
    let dims = attr_ints(op, attrs, key)?.ok_or_else(|| type_err(op, format_args!("missing attribute `{key}`")))?;
    dims.iter()
        .map(|&d| u64::try_from(d).map_err(|_| type_err(op, format_args!("`{key}` has negative dimension {d}"))))
        .collect()
}

// ---- kernel plumbing ----

/// The IR types of concrete arguments, to run a type relation inside a kernel.
pub(crate) fn types_of(args: &[Tensor]) -> Vec<Type> {
    args.iter().map(Tensor::ty).collect()
}

/// The tensor type of a relation's result, as `usize` dims.
pub(crate) fn out_dims(ty: &Type) -> Result<(Vec<usize>, DType), OpError> {
    match ty.as_tensor() {
        Some(t) => Ok((dims_usize(&t.shape)?, t.dtype)),
        None => Err(OpError::Invalid("expected a tensor result type".into())),
    }
}

/// `shape` as `usize` dims, checked against [`MAX_MATERIALIZED_ELEMENTS`] so that a kernel
/// never tries to allocate an absurd tensor.
pub(crate) fn dims_usize(shape: &[u64]) -> Result<Vec<usize>, OpError> {
    match shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= MAX_MATERIALIZED_ELEMENTS => Ok(shape.iter().map(|&d| d as usize).collect()),
        _ => Err(TensorError::TooLarge { shape: shape.to_vec(), limit: MAX_MATERIALIZED_ELEMENTS }.into()),
    }
}

/// Number of elements of `shape`, or [`TensorError::TooLarge`] when it exceeds
/// [`MAX_MATERIALIZED_ELEMENTS`] (or overflows).
pub fn element_count(shape: &[u64]) -> Result<usize, TensorError> {
    match shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= MAX_MATERIALIZED_ELEMENTS => Ok(n as usize),
        _ => Err(TensorError::TooLarge { shape: shape.to_vec(), limit: MAX_MATERIALIZED_ELEMENTS }),
    }
}

/// Checks that `dims` (already `usize`) is small enough to materialize.
pub(crate) fn check_dims(dims: &[usize]) -> Result<(), OpError> {
    dims_usize(&dims.iter().map(|&d| d as u64).collect::<Vec<_>>()).map(|_| ())
}

/// An element type of a tensor variant, so kernels can be written once generically.
pub(crate) trait Elem: Copy + Default + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The array inside `t` if it has this element type.
    fn array(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>>;
    /// Wraps an array as a tensor.
    fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_i64(self) -> i64;
    fn from_i64(v: i64) -> Self;
}

macro_rules! impl_elem {
    ($t:ty, $variant:ident, to_f64: |$a:ident| $to:expr, from_f64: |$b:ident| $from:expr,
     to_i64: |$c:ident| $toi:expr, from_i64: |$d:ident| $fromi:expr) => {
        impl Elem for $t {
            fn array(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>> {
                match &t.0 {
                    TensorData::$variant(a) => Some(a),
                    _ => None,
                }
            }
            fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor {
                Tensor(TensorData::$variant(a))
            }
            fn to_f64(self) -> f64 {
                let $a = self;
                $to
            }
            fn from_f64(v: f64) -> Self {
                let $b = v;
                $from
            }
            fn to_i64(self) -> i64 {
                let $c = self;
                $toi
            }
            fn from_i64(v: i64) -> Self {
                let $d = v;
                $fromi
            }
        }
    };
}

impl_elem!(f32, F32, to_f64: |a| a as f64, from_f64: |v| v as f32, to_i64: |a| a as i64, from_i64: |v| v as f32);
impl_elem!(f16, F16, to_f64: |a| a.to_f64(), from_f64: |v| f16::from_f64(v),
    to_i64: |a| a.to_f64() as i64, from_i64: |v| f16::from_f64(v as f64));
impl_elem!(i64, I64, to_f64: |a| a as f64, from_f64: |v| v as i64, to_i64: |a| a, from_i64: |v| v);
impl_elem!(i32, I32, to_f64: |a| a as f64, from_f64: |v| v as i32, to_i64: |a| a as i64, from_i64: |v| v as i32);
impl_elem!(bool, Bool, to_f64: |a| a as u8 as f64, from_f64: |v| v != 0.0, to_i64: |a| a as i64, from_i64: |v| v != 0);
impl_elem!(f64, F64, to_f64: |a| a, from_f64: |v| v, to_i64: |a| a as i64, from_i64: |v| v as f64);
impl_elem!(i8, I8, to_f64: |a| a as f64, from_f64: |v| v as i8, to_i64: |a| a as i64, from_i64: |v| v as i8);
impl_elem!(i16, I16, to_f64: |a| a as f64, from_f64: |v| v as i16, to_i64: |a| a as i64, from_i64: |v| v as i16);
impl_elem!(u8, U8, to_f64: |a| a as f64, from_f64: |v| v as u8, to_i64: |a| a as i64, from_i64: |v| v as u8);
impl_elem!(u16, U16, to_f64: |a| a as f64, from_f64: |v| v as u16, to_i64: |a| a as i64, from_i64: |v| v as u16);
impl_elem!(u32, U32, to_f64: |a| a as f64, from_f64: |v| v as u32, to_i64: |a| a as i64, from_i64: |v| v as u32);
// u64 goes through i64 bit for bit (`as` both ways), so integer casts through i64 keep it.
impl_elem!(u64, U64, to_f64: |a| a as f64, from_f64: |v| v as u64, to_i64: |a| a as i64, from_i64: |v| v as u64);

/// Runs `$body` with `$t` bound to the Rust element type of `$dtype`.
macro_rules! with_elem {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::ir::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::ir::DType::F16 => {
                type $t = half::f16;
                $body
            }
            $crate::ir::DType::I64 => {
                type $t = i64;
                $body
            }
            $crate::ir::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::ir::DType::Bool => {
                type $t = bool;
                $body
            }
            $crate::ir::DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::ir::DType::I8 => {
                type $t = i8;
                $body
            }
            $crate::ir::DType::I16 => {
                type $t = i16;
                $body
            }
            $crate::ir::DType::U8 => {
                type $t = u8;
                $body
            }
            $crate::ir::DType::U16 => {
                type $t = u16;
                $body
            }
            $crate::ir::DType::U32 => {
                type $t = u32;
                $body
            }
            $crate::ir::DType::U64 => {
                type $t = u64;
                $body
            }
        }
    };
}
pub(crate) use with_elem;

/// Runs `$body` with `$t` bound to the Rust type of integer dtype `$dtype` (signed or
/// unsigned). Callers check that the dtype is an integer one; any other dtype runs the i64
/// arm, whose `arr::<i64>` then fails with an error instead of a panic.
macro_rules! with_int {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::ir::DType::I8 => {
                type $t = i8;
                $body
            }
            $crate::ir::DType::I16 => {
                type $t = i16;
                $body
            }
            $crate::ir::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::ir::DType::U8 => {
                type $t = u8;
                $body
            }
            $crate::ir::DType::U16 => {
                type $t = u16;
                $body
            }
            $crate::ir::DType::U32 => {
                type $t = u32;
                $body
            }
            $crate::ir::DType::U64 => {
                type $t = u64;
                $body
            }
            _ => {
                type $t = i64;
                $body
            }
        }
    };
}
pub(crate) use with_int;

/// The array of `t` as element type `T`, or an error naming the dtypes (relations have checked
/// the dtype already, so this only fires on an internal inconsistency).
pub(crate) fn arr<'a, T: Elem>(op: &str, t: &'a Tensor) -> Result<&'a ArcArray<T, IxDyn>, OpError> {
    T::array(t).ok_or_else(|| invalid(op, format_args!("unexpected dtype {}", t.dtype())))
}

/// A float tensor as f32 (f16 widens, f64 rounds, f32 shares the buffer): the kernels that
/// compute in f32 read their float arguments through this.
pub(crate) fn to_f32(op: &str, t: &Tensor) -> Result<ArcArray<f32, IxDyn>, OpError> {
    match &t.0 {
        TensorData::F32(a) => Ok(a.clone()),
        TensorData::F16(a) => Ok(a.mapv(f16::to_f32).into_shared()),
        TensorData::F64(a) => Ok(a.mapv(|v| v as f32).into_shared()),
        _ => Err(type_err(op, format_args!("expected a float tensor (f32, f16 or f64), got dtype {}", t.dtype()))),
    }
}

/// An f32 result converted back to `dtype` (f32, f16 or f64).
pub(crate) fn from_f32(op: &str, a: ArrayD<f32>, dtype: DType) -> Result<Tensor, OpError> {
    match dtype {
        DType::F32 => Ok(Tensor(TensorData::F32(a.into_shared()))),
        DType::F16 => Ok(Tensor(TensorData::F16(a.mapv(f16::from_f32).into_shared()))),
        DType::F64 => Ok(Tensor(TensorData::F64(a.mapv(f64::from).into_shared()))),
        other => Err(invalid(op, format_args!("unexpected dtype {other}"))),
    }
}

/// Applies `f` elementwise to `a` and `b` broadcast to `shape`, spreading the output over
/// `ctx`'s workers when it is large (`par.rs`; each element is `f` of its pair whatever the
/// split).
///
/// When both inputs are row-major (nearly always: kernels produce row-major arrays), the
/// broadcast is planned by [`Zip2Plan`] over slices; otherwise ndarray's general `Zip` runs.
/// Both apply `f` to the same pairs in the same order, so results are identical.
pub(crate) fn zip2<A: Copy + Sync, B: Copy + Sync, C: Send>(
    op: &str,
    ctx: &KernelCtx,
    a: &ArcArray<A, IxDyn>,
    b: &ArcArray<B, IxDyn>,
    shape: &[usize],
    f: impl Fn(A, B) -> C + Sync + Send,
) -> Result<ArrayD<C>, OpError> {
    check_dims(shape)?;
    let bad = || invalid(op, format_args!("cannot broadcast to {}", shape_str(shape)));
    let av = a.broadcast(IxDyn(shape)).ok_or_else(bad)?;
    let bv = b.broadcast(IxDyn(shape)).ok_or_else(bad)?;
    if let (Some(xa), Some(xb)) = (a.as_slice(), b.as_slice()) {
        let total: usize = shape.iter().product();
        let plan = Zip2Plan::new(a.shape(), b.shape(), shape);
        let out = match par::workers(ctx, total) {
            None => {
                let mut out = Vec::with_capacity(total);
                plan.span(xa, xb, 0, total, &f, &mut out);
                out
            }
            Some(pool) => par::collect_chunks(pool, par::min_chunk(ctx), total, |range, sink| {
                plan.span(xa, xb, range.start, range.len(), &f, sink)
            }),
        };
        return ArrayD::from_shape_vec(IxDyn(shape), out).map_err(|_| bad());
    }
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// The broadcast of two row-major inputs of shapes `sa` and `sb` to `shape` (which [`zip2`]
/// checked), as loops over slices.
///
/// Each input gets a stride per output axis (0 where it is broadcast); output axes of size 1
/// are dropped and neighbours whose strides line up in both inputs are merged, so a
/// `[256, 64, 3, 3] * [256, 1, 1, 1]` becomes a 256 × 576 loop. The innermost merged axis has
/// stride 1 or 0 in each input, so it runs as a loop over slices (or a slice and a scalar),
/// instead of ndarray's `IxDyn` index arithmetic per element.
struct Zip2Plan {
    /// (length, stride in a, stride in b) of the outer axes, outermost first.
    axes: Vec<(usize, usize, usize)>,
    /// Length and strides of the innermost merged axis.
    inner: (usize, usize, usize),
}

impl Zip2Plan {
    fn new(sa: &[usize], sb: &[usize], shape: &[usize]) -> Zip2Plan {
        // Row-major strides of an input, aligned to the output's axes (0 where broadcast).
        let strides = |s: &[usize]| -> Vec<usize> {
            let mut st = vec![0; shape.len()];
            let mut acc = 1;
            for (k, &d) in s.iter().enumerate().rev() {
                let axis = shape.len() - s.len() + k;
                st[axis] = if d == 1 { 0 } else { acc };
                acc *= d;
            }
            st
        };
        let (ta, tb) = (strides(sa), strides(sb));
        let mut axes: Vec<(usize, usize, usize)> = Vec::with_capacity(shape.len());
        for (i, &n) in shape.iter().enumerate() {
            if n == 1 {
                continue;
            }
            match axes.last_mut() {
                Some(last) if last.1 == ta[i] * n && last.2 == tb[i] * n => {
                    last.0 *= n;
                    last.1 = ta[i];
                    last.2 = tb[i];
                }
                _ => axes.push((n, ta[i], tb[i])),
            }
        }
        let inner = axes.pop().unwrap_or((1, 0, 0));
        Zip2Plan { axes, inner }
    }

    /// Appends `f` of the pairs of output elements `start..start + len` (row-major) to `out`.
    fn span<A: Copy, B: Copy, C>(
        &self,
        xa: &[A],
        xb: &[B],
        start: usize,
        len: usize,
        f: &impl Fn(A, B) -> C,
        out: &mut impl Extend<C>,
    ) {
        let (inner, ia, ib) = self.inner;
        if len == 0 || inner == 0 {
            return;
        }
        // The odometer over the outer axes at `start`'s row, with each input's offset.
        let (mut row, mut col) = (start / inner, start % inner);
        let mut index = vec![0usize; self.axes.len()];
        let (mut oa, mut ob) = (0usize, 0usize);
        for (k, &(n, da, db)) in self.axes.iter().enumerate().rev() {
            index[k] = row % n;
            row /= n;
            oa += index[k] * da;
            ob += index[k] * db;
        }
        let mut left = len;
        loop {
            let take = (inner - col).min(left);
            let (a0, b0) = (oa + col * ia, ob + col * ib);
            match (ia, ib) {
                (1, 1) => out.extend(xa[a0..a0 + take].iter().zip(&xb[b0..b0 + take]).map(|(&x, &y)| f(x, y))),
                (1, 0) => {
                    let y = xb[ob];
                    out.extend(xa[a0..a0 + take].iter().map(|&x| f(x, y)));
                }
                (0, 1) => {
                    let x = xa[oa];
                    out.extend(xb[b0..b0 + take].iter().map(|&y| f(x, y)));
                }
                _ => out.extend((0..take).map(|k| f(xa[a0 + k * ia], xb[b0 + k * ib]))),
            }
            left -= take;
            col = 0;
            // Advance the odometer; done when every outer axis wrapped or the span is full.
            let mut k = self.axes.len();
            loop {
                if k == 0 || left == 0 {
                    return;
                }
                k -= 1;
                let (n, da, db) = self.axes[k];
                index[k] += 1;
                oa += da;
                ob += db;
                if index[k] < n {
                    break;
                }
                index[k] = 0;
                oa -= da * n;
                ob -= db * n;
            }
        }
    }
}
