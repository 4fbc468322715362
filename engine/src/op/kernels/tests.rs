//! Hand-computed results for every operator, and type-relation errors.

// `&[x.clone()]` reads better than `std::slice::from_ref(&x)` in a table of cases.
#![allow(clippy::cloned_ref_to_slice_refs)]

use crate::ir::{AttrValue, Attrs, DType, Tensor, TensorError, Type};
use crate::op::{self, KernelCtx, OpError};

mod axis;
mod hostile;
mod indexing;
mod onnx;

pub(super) fn ctx() -> KernelCtx {
    KernelCtx::seeded(0)
}

pub(super) fn tt(shape: &[u64], dtype: DType, vals: &[f64]) -> Tensor {
    Tensor::from_f64s(shape, dtype, vals).unwrap()
}

pub(super) fn f(shape: &[u64], vals: &[f64]) -> Tensor {
    tt(shape, DType::F32, vals)
}

pub(super) fn ints(key: &str, v: &[i64]) -> Attrs {
    Attrs::new().with(key, AttrValue::Ints(v.into()))
}

pub(super) fn int(key: &str, v: i64) -> Attrs {
    Attrs::new().with(key, AttrValue::Int(v))
}

pub(super) fn run(name: &str, args: &[Tensor], attrs: Attrs) -> Result<Vec<Tensor>, OpError> {
    let def = op::get(op::lookup(name).unwrap());
    def.check_attrs(&attrs).map_err(OpError::Invalid)?;
    (def.kernel)(args, &attrs, &mut ctx())
}

pub(super) fn run1(name: &str, args: &[Tensor], attrs: Attrs) -> Tensor {
    let mut out = run(name, args, attrs).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

pub(super) fn err(name: &str, args: &[Tensor], attrs: Attrs) -> String {
    run(name, args, attrs).unwrap_err().to_string()
}

/// Asserts shape, dtype and values (floats within 1e-4 relative / absolute).
#[track_caller]
pub(super) fn check(t: &Tensor, dtype: DType, shape: &[usize], expected: &[f64]) {
    assert_eq!(t.dtype(), dtype, "dtype of {t}");
    assert_eq!(t.shape(), shape, "shape of {t}");
    let got = t.to_f64s();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        let ok = (g.is_nan() && e.is_nan()) || g == e || (g - e).abs() <= 1e-4 * (1.0 + e.abs());
        assert!(ok, "got {got:?}, expected {expected:?}");
    }
}

pub(super) fn rel(name: &str, args: &[Type], attrs: Attrs) -> Result<Type, OpError> {
    (op::get(op::lookup(name).unwrap()).type_rel)(args, &attrs)
}

pub(super) fn rel_err(name: &str, args: &[Type], attrs: Attrs) -> String {
    rel(name, args, attrs).unwrap_err().to_string()
}

pub(super) fn ty(shape: &[u64], dtype: DType) -> Type {
    Type::tensor(shape.to_vec(), dtype)
}

#[test]
fn registry_names_are_unique_and_documented() {
    let mut names: Vec<&str> = op::all().map(|(_, d)| d.name).collect();
    for (id, d) in op::all() {
        assert!(!d.doc.is_empty(), "{} has no doc", d.name);
        assert_eq!(op::lookup(d.name), Some(id));
        let mut seen = std::collections::HashSet::new();
        assert!(d.attrs.iter().all(|a| seen.insert(a.name)), "{} repeats an attribute", d.name);
    }
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
    for name in [
        "add",
        "subtract",
        "multiply",
        "divide",
        "power",
        "maximum",
        "minimum",
        "negative",
        "exp",
        "log",
        "sqrt",
        "tanh",
        "sigmoid",
        "relu",
        "gelu",
        "erf",
        "reciprocal",
        "abs",
        "hard_swish",
        "clip",
        "hard_sigmoid",
        "logical_not",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "where",
        "cast",
        "matmul",
        "dense",
        "conv2d",
        "bias_add",
        "batch_norm",
        "layer_norm",
        "softmax",
        "dropout",
        "reshape",
        "transpose",
        "concatenate",
        "split",
        "broadcast_to",
        "sum",
        "mean",
        "max",
        "min",
        "zeros",
        "ones",
        "random_uniform",
    ] {
        assert!(op::lookup(name).is_some(), "{name} is not registered");
    }
    let stateful: Vec<&str> = op::all().filter(|(_, d)| d.stateful).map(|(_, d)| d.name).collect();
    assert_eq!(stateful, ["random_uniform"]);
}

#[test]
fn binary_arithmetic_broadcasts() {
    let a = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f(&[2], &[10.0, 20.0]);
    check(&run1("add", &[a.clone(), b.clone()], Attrs::new()), DType::F32, &[2, 2], &[11.0, 22.0, 13.0, 24.0]);
    check(&run1("subtract", &[a.clone(), b.clone()], Attrs::new()), DType::F32, &[2, 2], &[-9.0, -18.0, -7.0, -16.0]);
    check(&run1("multiply", &[a.clone(), b.clone()], Attrs::new()), DType::F32, &[2, 2], &[10.0, 40.0, 30.0, 80.0]);
    check(&run1("divide", &[b.clone(), a.clone()], Attrs::new()), DType::F32, &[2, 2], &[10.0, 10.0, 10.0 / 3.0, 5.0]);
    check(&run1("power", &[a.clone(), f(&[], &[2.0])], Attrs::new()), DType::F32, &[2, 2], &[1.0, 4.0, 9.0, 16.0]);
    let c = f(&[2, 1], &[2.5, 0.0]);
    check(&run1("maximum", &[a.clone(), c.clone()], Attrs::new()), DType::F32, &[2, 2], &[2.5, 2.5, 3.0, 4.0]);
    check(&run1("minimum", &[a, c], Attrs::new()), DType::F32, &[2, 2], &[1.0, 2.0, 0.0, 0.0]);
}

#[test]
fn contiguous_broadcast_matches_ndarray_zip() {
    // `zip2` plans row-major inputs itself; ndarray's general `Zip` (which it takes for other
    // layouts) must give the same elements for every broadcast pattern.
    let cases: &[(&[usize], &[usize])] = &[
        (&[4, 3, 2, 2], &[4, 1, 1, 1]),
        (&[4, 3, 2, 2], &[3, 1, 1]),
        (&[2, 1, 3], &[1, 4, 1]),
        (&[5], &[]),
        (&[], &[2, 3]),
        (&[2, 3], &[2, 3]),
        (&[1, 3, 1], &[2, 1, 4]),
        (&[2, 0, 3], &[1, 3]),
        (&[3, 1], &[1, 1]),
    ];
    for &(sa, sb) in cases {
        let arr = |s: &[usize], k: f32| {
            let n: usize = s.iter().product();
            ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(s), (0..n).map(|i| i as f32 * k + 1.0).collect()).unwrap()
        };
        let (a, b) = (arr(sa, 1.0), arr(sb, 0.25));
        let rank = sa.len().max(sb.len());
        let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
        let out_dim = |i| if dim(sa, i) == 0 || dim(sb, i) == 0 { 0 } else { dim(sa, i).max(dim(sb, i)) };
        let shape: Vec<usize> = (0..rank).map(out_dim).collect();
        let got = super::zip2("test", &ctx(), &a, &b, &shape, |x, y| x * 10.0 - y).unwrap();
        let want = ndarray::Zip::from(&a.broadcast(ndarray::IxDyn(&shape)).unwrap())
            .and(&b.broadcast(ndarray::IxDyn(&shape)).unwrap())
            .map_collect(|&x, &y| x * 10.0 - y);
        assert_eq!(got, want, "{sa:?} with {sb:?}");
        // A non-row-major input takes the general path and agrees too.
        let at = a.clone().reversed_axes();
        let bt = b.broadcast(ndarray::IxDyn(&shape)).unwrap().to_owned().reversed_axes().into_shared();
        let tshape: Vec<usize> = shape.iter().rev().copied().collect();
        if at.shape().iter().zip(&tshape).all(|(&d, &t)| d == t || d == 1) {
            let got_t = super::zip2("test", &ctx(), &at, &bt, &tshape, |x, y| x * 10.0 - y).unwrap();
            assert_eq!(got_t, want.clone().reversed_axes(), "{sa:?} with {sb:?}, transposed");
        }
    }
}

#[test]
fn integer_arithmetic_wraps_and_truncates() {
    let a = tt(&[3], DType::I32, &[7.0, -7.0, i32::MAX as f64]);
    let b = tt(&[3], DType::I32, &[2.0, 2.0, 1.0]);
    check(&run1("divide", &[a.clone(), b.clone()], Attrs::new()), DType::I32, &[3], &[3.0, -3.0, i32::MAX as f64]);
    check(&run1("add", &[a.clone(), b.clone()], Attrs::new()), DType::I32, &[3], &[9.0, -5.0, i32::MIN as f64]);
    check(&run1("power", &[b.clone(), tt(&[], DType::I32, &[3.0])], Attrs::new()), DType::I32, &[3], &[8.0, 8.0, 1.0]);
    let zero = tt(&[1], DType::I64, &[0.0]);
    assert_eq!(err("divide", &[zero.clone(), zero], Attrs::new()), "divide: integer division by zero");
}

#[test]
fn integer_power_is_exact_modulo_two_to_the_bits_for_huge_exponents() {
    // power(3, 2^32) once folded with the exponent clamped to u32::MAX.
    let pow_i64 = |b: f64, e: f64| {
        let t = run1("power", &[tt(&[], DType::I64, &[b]), tt(&[], DType::I64, &[e])], Attrs::new());
        t.to_bits_scalar().map(|v| v as i64)
    };
    assert_eq!(pow_i64(3.0, 4294967296.0), Some(2491309678558969857));
    assert_eq!(pow_i64(3.0, 4294967295.0), Some(830436559519656619));
    assert_eq!(pow_i64(-3.0, 4294967297.0), Some(-7473929035676909571));
    assert_eq!(pow_i64(2.0, 64.0), Some(0));
    assert_eq!(pow_i64(7.0, 0.0), Some(1));
}

#[test]
fn f16_computes_through_f32() {
    let a = tt(&[2], DType::F16, &[1.5, -2.0]);
    check(&run1("add", &[a.clone(), a.clone()], Attrs::new()), DType::F16, &[2], &[3.0, -4.0]);
    check(&run1("relu", &[a], Attrs::new()), DType::F16, &[2], &[1.5, 0.0]);
}

#[test]
fn unary_math() {
    let x = f(&[3], &[-1.0, 0.0, 2.0]);
    let map = |g: fn(f64) -> f64| [-1.0f64, 0.0, 2.0].map(g);
    check(&run1("negative", &[x.clone()], Attrs::new()), DType::F32, &[3], &[1.0, 0.0, -2.0]);
    check(&run1("exp", &[x.clone()], Attrs::new()), DType::F32, &[3], &map(f64::exp));
    check(&run1("tanh", &[x.clone()], Attrs::new()), DType::F32, &[3], &map(f64::tanh));
    check(&run1("sigmoid", &[x.clone()], Attrs::new()), DType::F32, &[3], &map(|v| 1.0 / (1.0 + (-v).exp())));
    check(&run1("relu", &[x.clone()], Attrs::new()), DType::F32, &[3], &[0.0, 0.0, 2.0]);
    // gelu (tanh form): gelu(-1) = -0.158808, gelu(2) = 1.954598.
    let tanh = Attrs::new().with("approximate", AttrValue::Str("tanh".into()));
    check(&run1("gelu", &[x.clone()], tanh), DType::F32, &[3], &[-0.158808, 0.0, 1.954598]);
    // gelu (erf form, the default): x/2 (1 + erf(x/sqrt 2)).
    check(&run1("gelu", &[x], Attrs::new()), DType::F32, &[3], &[-0.158655254, 0.0, 1.954499736]);
    let p = f(&[3], &[1.0, 4.0, 0.0]);
    check(&run1("log", &[p.clone()], Attrs::new()), DType::F32, &[3], &[0.0, 4f64.ln(), f64::NEG_INFINITY]);
    check(&run1("sqrt", &[p], Attrs::new()), DType::F32, &[3], &[1.0, 2.0, 0.0]);
    let i = tt(&[2], DType::I64, &[-3.0, 5.0]);
    check(&run1("negative", &[i.clone()], Attrs::new()), DType::I64, &[2], &[3.0, -5.0]);
    assert_eq!(err("exp", &[i], Attrs::new()), "exp: expected a float tensor (f32, f16 or f64), got dtype i64");
}

#[test]
fn comparisons_give_bool() {
    let a = f(&[3], &[1.0, 2.0, 3.0]);
    let b = f(&[], &[2.0]);
    let cases = [
        ("equal", [0.0, 1.0, 0.0]),
        ("not_equal", [1.0, 0.0, 1.0]),
        ("less", [1.0, 0.0, 0.0]),
        ("less_equal", [1.0, 1.0, 0.0]),
        ("greater", [0.0, 0.0, 1.0]),
        ("greater_equal", [0.0, 1.0, 1.0]),
    ];
    for (name, expected) in cases {
        check(&run1(name, &[a.clone(), b.clone()], Attrs::new()), DType::Bool, &[3], &expected);
    }
    let x = tt(&[2], DType::Bool, &[1.0, 0.0]);
    check(&run1("equal", &[x.clone(), x], Attrs::new()), DType::Bool, &[2], &[1.0, 1.0]);
    let i = tt(&[2], DType::I32, &[1.0, 5.0]);
    check(&run1("less", &[i, tt(&[1], DType::I32, &[3.0])], Attrs::new()), DType::Bool, &[2], &[1.0, 0.0]);
}

#[test]
fn where_selects_with_broadcasting() {
    let c = tt(&[2, 1], DType::Bool, &[1.0, 0.0]);
    let a = f(&[2], &[1.0, 2.0]);
    let b = f(&[], &[9.0]);
    check(&run1("where", &[c.clone(), a, b], Attrs::new()), DType::F32, &[2, 2], &[1.0, 2.0, 9.0, 9.0]);
    let msg = err("where", &[f(&[1], &[1.0]), f(&[1], &[1.0]), f(&[1], &[1.0])], Attrs::new());
    assert_eq!(msg, "where: condition must have dtype bool, got f32");
}

#[test]
fn cast_converts() {
    let x = f(&[4], &[1.7, -1.7, 0.0, 3e10]);
    let to = |d| Attrs::new().with("dtype", AttrValue::DType(d));
    check(&run1("cast", &[x.clone()], to(DType::I32)), DType::I32, &[4], &[1.0, -1.0, 0.0, i32::MAX as f64]);
    check(&run1("cast", &[x.clone()], to(DType::Bool)), DType::Bool, &[4], &[1.0, 1.0, 0.0, 1.0]);
    let big = tt(&[1], DType::I64, &[(1i64 << 60) as f64 + 0.0]);
    let back = run1("cast", &[big.clone()], to(DType::I64));
    assert_eq!(back, big);
    assert_eq!(err("cast", &[x], Attrs::new()), "operator `cast` needs attribute `dtype`");
}

/// The narrow, unsigned and f64 dtypes: casts saturate floats and wrap integers like numpy,
/// integer arithmetic wraps in the dtype's width, f64 arithmetic is done in f64.
#[test]
fn narrow_unsigned_and_f64_dtypes_compute_in_their_own_width() {
    let to = |d| Attrs::new().with("dtype", AttrValue::DType(d));
    let x = f(&[3], &[300.7, -1.5, 7.9]);
    // f32 -> u8 saturates (Rust `as`), -> i8 saturates too.
    check(&run1("cast", &[x.clone()], to(DType::U8)), DType::U8, &[3], &[255.0, 0.0, 7.0]);
    check(&run1("cast", &[x], to(DType::I8)), DType::I8, &[3], &[127.0, -1.0, 7.0]);
    // i64 -> u8 wraps modulo 256, as numpy's astype does.
    check(&run1("cast", &[tt(&[2], DType::I64, &[257.0, -1.0])], to(DType::U8)), DType::U8, &[2], &[1.0, 255.0]);
    let a = tt(&[2], DType::U8, &[250.0, 3.0]);
    let b = tt(&[2], DType::U8, &[10.0, 5.0]);
    check(&run1("add", &[a.clone(), b.clone()], Attrs::new()), DType::U8, &[2], &[4.0, 8.0]);
    check(&run1("subtract", &[a.clone(), b.clone()], Attrs::new()), DType::U8, &[2], &[240.0, 254.0]);
    check(&run1("divide", &[a, b], Attrs::new()), DType::U8, &[2], &[25.0, 0.0]);
    let i = tt(&[2], DType::I16, &[32767.0, -5.0]);
    check(&run1("add", &[i.clone(), tt(&[], DType::I16, &[1.0])], Attrs::new()), DType::I16, &[2], &[-32768.0, -4.0]);
    check(&run1("abs", &[i], Attrs::new()), DType::I16, &[2], &[32767.0, 5.0]);
    // 1 + 1e-12 is exact in f64 and would round to 1 in f32.
    let d = tt(&[1], DType::F64, &[1.0]);
    let out = run1("add", &[d.clone(), tt(&[1], DType::F64, &[1e-12])], Attrs::new());
    assert_eq!(out.to_f64s(), [1.0 + 1e-12]);
    check(
        &run1("sum", &[tt(&[3], DType::U32, &[4e9, 4e8, 1.0])], Attrs::new()),
        DType::U32,
        &[],
        &[(4_400_000_001u64 - (1 << 32)) as f64],
    );
    // max_pool2d over u8 keeps the integers exactly; avg_pool2d stays float-only.
    let x = tt(&[1, 1, 2, 2], DType::U8, &[1.0, 255.0, 3.0, 254.0]);
    let pool = ints("pool_size", &[2, 2]);
    check(&run1("max_pool2d", &[x.clone()], pool.clone()), DType::U8, &[1, 1, 1, 1], &[255.0]);
    assert!(err("avg_pool2d", &[x], pool).contains("expected a float tensor"));
}

#[test]
fn matmul_2d_and_batched() {
    let a = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    check(&run1("matmul", &[a.clone(), b.clone()], Attrs::new()), DType::F32, &[2, 2], &[58.0, 64.0, 139.0, 154.0]);
    let a3 = f(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b3 = f(&[2, 2, 1], &[1.0, 1.0, 2.0, 0.0]);
    check(&run1("matmul", &[a3.clone(), b3], Attrs::new()), DType::F32, &[2, 1, 1], &[3.0, 6.0]);
    let b2 = f(&[2, 1], &[1.0, 10.0]);
    check(&run1("matmul", &[a3, b2], Attrs::new()), DType::F32, &[2, 1, 1], &[21.0, 43.0]);
    assert_eq!(
        err("matmul", &[a.clone(), a], Attrs::new()),
        "matmul: inner dimensions do not match: shapes (2, 3) and (2, 3)"
    );
}

#[test]
fn dense_transposes_weight() {
    let x = f(&[1, 3], &[1.0, 2.0, 3.0]);
    let w = f(&[2, 3], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    check(&run1("dense", &[x.clone(), w], Attrs::new()), DType::F32, &[1, 2], &[1.0, 6.0]);
    assert_eq!(
        rel_err("dense", &[ty(&[1, 3], DType::F32), ty(&[3, 2], DType::F32)], Attrs::new()),
        "dense: weight (3, 2) does not match data (1, 3): expected weight shape (M, 3)"
    );
}

#[test]
fn conv2d_with_padding_stride_and_groups() {
    // 1x1x3x3 input 1..9, 1x1x2x2 all-ones kernel: window sums.
    let x = f(&[1, 1, 3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let w = f(&[1, 1, 2, 2], &[1.0; 4]);
    check(&run1("conv2d", &[x.clone(), w.clone()], Attrs::new()), DType::F32, &[1, 1, 2, 2], &[12.0, 16.0, 24.0, 28.0]);
    let attrs = ints("padding", &[1]).with("strides", AttrValue::Ints(vec![2].into()));
    // Padded 5x5, windows at rows/cols 0 and 2.
    check(&run1("conv2d", &[x.clone(), w.clone()], attrs), DType::F32, &[1, 1, 2, 2], &[1.0, 5.0, 11.0, 28.0]);
    let dil = ints("dilation", &[2]);
    check(&run1("conv2d", &[x.clone(), w], dil), DType::F32, &[1, 1, 1, 1], &[20.0]);
    // Depthwise: two channels, each scaled by its own 1x1 weight.
    let x2 = f(&[1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let w2 = f(&[2, 1, 1, 1], &[10.0, -1.0]);
    check(&run1("conv2d", &[x2, w2], int("groups", 2)), DType::F32, &[1, 2, 1, 2], &[10.0, 20.0, -3.0, -4.0]);
    let big = f(&[1, 1, 4, 4], &[1.0; 16]);
    assert_eq!(
        err("conv2d", &[x, big], Attrs::new()),
        "conv2d: kernel extent 4 is larger than the padded input 3 (data (1, 1, 3, 3), weight (1, 1, 4, 4))"
    );
}

#[test]
fn bias_add_along_axis() {
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &run1("bias_add", &[x.clone(), f(&[2], &[10.0, 20.0])], Attrs::new()),
        DType::F32,
        &[2, 2],
        &[11.0, 22.0, 13.0, 24.0],
    );
    check(
        &run1("bias_add", &[x.clone(), f(&[2], &[10.0, 20.0])], int("axis", 0)),
        DType::F32,
        &[2, 2],
        &[11.0, 12.0, 23.0, 24.0],
    );
    assert_eq!(
        err("bias_add", &[x.clone(), f(&[3], &[0.0; 3])], Attrs::new()),
        "bias_add: bias must have shape (2,), got (3,)"
    );
    assert_eq!(
        err("bias_add", &[x, f(&[2], &[0.0; 2])], int("axis", 2)),
        "bias_add: axis 2 is out of range for a tensor of rank 2"
    );
}

#[test]
fn batch_norm_returns_a_tuple() {
    let x = f(&[1, 2], &[1.0, 5.0]);
    let args = [x, f(&[2], &[1.0, 2.0]), f(&[2], &[0.0, 1.0]), f(&[2], &[1.0, 1.0]), f(&[2], &[4.0, 16.0])];
    let attrs = Attrs::new().with("epsilon", AttrValue::Float(0.0));
    let out = run("batch_norm", &args, attrs).unwrap();
    assert_eq!(out.len(), 3);
    // (1-1)/2*1+0 = 0, (5-1)/4*2+1 = 3.
    check(&out[0], DType::F32, &[1, 2], &[0.0, 3.0]);
    assert_eq!(out[1], args[3]);
    assert_eq!(out[2], args[4]);
    let t = rel("batch_norm", &args.iter().map(Tensor::ty).collect::<Vec<_>>(), Attrs::new()).unwrap();
    assert_eq!(t.to_string(), "(Tensor[(1, 2), f32], Tensor[(2,), f32], Tensor[(2,), f32])");
}

#[test]
fn layer_norm_normalises_last_axis() {
    let x = f(&[1, 2], &[1.0, 3.0]);
    let attrs = Attrs::new().with("epsilon", AttrValue::Float(0.0));
    let out = run1("layer_norm", &[x, f(&[2], &[1.0, 2.0]), f(&[2], &[0.5, 0.0])], attrs);
    // mean 2, variance 1: (-1, 1) * gamma + beta.
    check(&out, DType::F32, &[1, 2], &[-0.5, 2.0]);
}

#[test]
fn softmax_over_axis() {
    let x = f(&[2, 2], &[0.0, 0.0, 0.0, 2f64.ln()]);
    check(&run1("softmax", &[x.clone()], Attrs::new()), DType::F32, &[2, 2], &[0.5, 0.5, 1.0 / 3.0, 2.0 / 3.0]);
    check(&run1("softmax", &[x], int("axis", 0)), DType::F32, &[2, 2], &[0.5, 1.0 / 3.0, 0.5, 2.0 / 3.0]);
}

#[test]
fn dropout_is_identity_and_checks_rate() {
    let x = f(&[2], &[1.0, -1.0]);
    assert_eq!(run1("dropout", &[x.clone()], Attrs::new()), x);
    let bad = Attrs::new().with("rate", AttrValue::Float(1.5));
    assert_eq!(err("dropout", &[x], bad), "dropout: `rate` must be in [0, 1), got 1.5");
}

#[test]
fn reshape_infers_minus_one() {
    let x = tt(&[2, 3], DType::I64, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    check(
        &run1("reshape", &[x.clone()], ints("newshape", &[3, -1])),
        DType::I64,
        &[3, 2],
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
    );
    assert_eq!(
        err("reshape", &[x], ints("newshape", &[4, -1])),
        "reshape: cannot reshape (2, 3) (6 elements) to (4, -1)"
    );
}

#[test]
fn transpose_default_and_explicit() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(&run1("transpose", &[x.clone()], Attrs::new()), DType::F32, &[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    check(
        &run1("transpose", &[x.clone()], ints("axes", &[0, 1])),
        DType::F32,
        &[2, 3],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    assert_eq!(err("transpose", &[x], ints("axes", &[0, 0])), "transpose: `axes` repeats axis 0");
}

#[test]
fn transposed_views_feed_other_kernels() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = run1("transpose", &[x], Attrs::new());
    check(&run1("reshape", &[t.clone()], ints("newshape", &[6])), DType::F32, &[6], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    check(&run1("dense", &[t, f(&[1, 2], &[1.0, 1.0])], Attrs::new()), DType::F32, &[3, 1], &[5.0, 7.0, 9.0]);
}

#[test]
fn concatenate_variadic() {
    let a = tt(&[1, 2], DType::I32, &[1.0, 2.0]);
    let b = tt(&[2, 2], DType::I32, &[3.0, 4.0, 5.0, 6.0]);
    check(
        &run1("concatenate", &[a.clone(), b.clone(), a.clone()], Attrs::new()),
        DType::I32,
        &[4, 2],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0],
    );
    assert_eq!(
        err("concatenate", &[a, b], int("axis", 1)),
        "concatenate: argument 2 has shape (2, 2), incompatible with (1, 2) along axis 1"
    );
}

#[test]
fn split_into_sections() {
    let x = f(&[2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let out = run("split", &[x.clone()], int("indices_or_sections", 2).with("axis", AttrValue::Int(1))).unwrap();
    assert_eq!(out.len(), 2);
    check(&out[0], DType::F32, &[2, 2], &[1.0, 2.0, 5.0, 6.0]);
    check(&out[1], DType::F32, &[2, 2], &[3.0, 4.0, 7.0, 8.0]);
    assert_eq!(
        err("split", &[x], int("indices_or_sections", 3)),
        "split: axis 0 of (2, 4) (length 2) does not split into 3 equal sections"
    );
}

#[test]
fn broadcast_to_expands() {
    let x = tt(&[2, 1], DType::Bool, &[1.0, 0.0]);
    check(&run1("broadcast_to", &[x.clone()], ints("shape", &[2, 2])), DType::Bool, &[2, 2], &[1.0, 1.0, 0.0, 0.0]);
    assert_eq!(err("broadcast_to", &[x], ints("shape", &[3, 2])), "broadcast_to: cannot broadcast (2, 1) to (3, 2)");
}

#[test]
fn reductions() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(&run1("sum", &[x.clone()], Attrs::new()), DType::F32, &[], &[21.0]);
    check(&run1("sum", &[x.clone()], ints("axis", &[0])), DType::F32, &[3], &[5.0, 7.0, 9.0]);
    let keep = ints("axis", &[-1]).with("keepdims", AttrValue::Bool(true));
    check(&run1("mean", &[x.clone()], keep.clone()), DType::F32, &[2, 1], &[2.0, 5.0]);
    check(&run1("max", &[x.clone()], keep), DType::F32, &[2, 1], &[3.0, 6.0]);
    let i = tt(&[3], DType::I64, &[-5.0, 2.0, 4.0]);
    check(&run1("max", &[i.clone()], Attrs::new()), DType::I64, &[], &[4.0]);
    check(&run1("mean", &[i.clone()], Attrs::new()), DType::I64, &[], &[0.0]);
    check(&run1("sum", &[i], Attrs::new()), DType::I64, &[], &[1.0]);
    assert_eq!(err("sum", &[x.clone()], ints("axis", &[1, -1])), "sum: `axis` repeats axis 1");
    let empty = f(&[0, 2], &[]);
    assert_eq!(err("max", &[empty], ints("axis", &[0])), "max: cannot reduce (0, 2) over an empty axis");
}

#[test]
fn zeros_ones_and_random_uniform() {
    let shape = ints("shape", &[2]);
    check(&run1("zeros", &[], shape.clone()), DType::F32, &[2], &[0.0, 0.0]);
    let i = shape.clone().with("dtype", AttrValue::DType(DType::I32));
    check(&run1("ones", &[], i), DType::I32, &[2], &[1.0, 1.0]);
    let r = shape.with("low", AttrValue::Float(2.0)).with("high", AttrValue::Float(3.0));
    let a = run1("random_uniform", &[], r.clone());
    assert!(a.to_f64s().iter().all(|v| (2.0..3.0).contains(v)));
    // Same seed, same draws.
    assert_eq!(a, run1("random_uniform", &[], r));
}

#[test]
fn absurd_shapes_type_check_but_do_not_materialize() {
    let huge = ints("shape", &[1_000_000_000, 1_000_000_000]);
    assert_eq!(rel("zeros", &[], huge.clone()).unwrap().to_string(), "Tensor[(1000000000, 1000000000), f32]");
    for name in ["zeros", "ones", "random_uniform"] {
        let e = run(name, &[], huge.clone()).unwrap_err();
        assert!(matches!(e, OpError::Tensor(TensorError::TooLarge { .. })), "{name}: {e}");
    }
    let x = f(&[1], &[1.0]);
    let e = run("broadcast_to", &[x], ints("shape", &[1 << 20, 1 << 20])).unwrap_err();
    assert!(matches!(e, OpError::Tensor(TensorError::TooLarge { .. })));
    let a = f(&[1 << 15, 1], &vec![0.0; 1 << 15]);
    let b = f(&[1, 1 << 15], &vec![0.0; 1 << 15]);
    assert!(matches!(run("add", &[a, b], Attrs::new()), Err(OpError::Tensor(TensorError::TooLarge { .. }))));
}

#[test]
fn relations_broadcast_and_reject_mismatches() {
    let t = rel("add", &[ty(&[4, 1, 3], DType::F32), ty(&[2, 1], DType::F32)], Attrs::new()).unwrap();
    assert_eq!(t.to_string(), "Tensor[(4, 2, 3), f32]");
    assert_eq!(
        rel_err("add", &[ty(&[2, 3], DType::F32), ty(&[4], DType::F32)], Attrs::new()),
        "add: shapes (2, 3) and (4,) do not broadcast"
    );
    assert_eq!(
        rel_err("multiply", &[ty(&[2], DType::F32), ty(&[2], DType::I32)], Attrs::new()),
        "multiply: dtype mismatch: f32 vs i32"
    );
    assert_eq!(
        rel_err("add", &[ty(&[2], DType::Bool), ty(&[2], DType::Bool)], Attrs::new()),
        "add: expected a numeric tensor, got dtype bool"
    );
    assert_eq!(rel_err("add", &[ty(&[2], DType::F32)], Attrs::new()), "add: expected 2 arguments, got 1");
    let tup = Type::tuple(vec![ty(&[], DType::F32)]);
    assert_eq!(rel_err("relu", &[tup], Attrs::new()), "relu: argument 1 must be a tensor, got (Tensor[(), f32],)");
    assert_eq!(
        rel_err("softmax", &[ty(&[2, 2], DType::F32)], int("axis", -3)),
        "softmax: axis -3 is out of range for a tensor of rank 2"
    );
    assert_eq!(rel_err("sum", &[ty(&[2], DType::F32)], int("axis", 0)), "sum: attribute `axis` must be ints, got int");
}

#[test]
fn kernels_reject_bad_input_without_panicking() {
    // Every operator, called with no arguments, several kinds of wrong arguments and junk
    // attributes, must return an error or a value, never panic.
    let junk = [
        Attrs::new(),
        int("axis", 99).with("groups", AttrValue::Int(0)).with("indices_or_sections", AttrValue::Int(-1)),
        ints("shape", &[-1]).with("newshape", AttrValue::Ints(vec![-1, -1].into())),
        ints("strides", &[0]).with("padding", AttrValue::Ints(vec![i64::MAX].into())),
        ints("axis", &[5]).with("dilation", AttrValue::Ints(vec![i64::MAX].into())),
    ];
    let arg_sets = [
        vec![],
        vec![f(&[], &[1.0])],
        vec![f(&[2, 2], &[1.0; 4]), tt(&[2], DType::I32, &[1.0, 2.0])],
        vec![f(&[1, 1, 1, 1], &[1.0]); 5],
        vec![tt(&[0, 3], DType::Bool, &[]); 3],
    ];
    for (_, def) in op::all() {
        for attrs in &junk {
            for args in &arg_sets {
                let _ = (def.kernel)(args, attrs, &mut ctx());
                let types: Vec<Type> = args.iter().map(Tensor::ty).collect();
                let _ = (def.type_rel)(&types, attrs);
            }
        }
    }
}

#[test]
fn float_kernels_accept_f16() {
    let h = |shape: &[u64], vals: &[f64]| tt(shape, DType::F16, vals);
    let a = h(&[1, 2], &[1.0, 2.0]);
    check(&run1("matmul", &[a.clone(), h(&[2, 1], &[3.0, 4.0])], Attrs::new()), DType::F16, &[1, 1], &[11.0]);
    check(&run1("dense", &[a.clone(), h(&[1, 2], &[1.0, 1.0])], Attrs::new()), DType::F16, &[1, 1], &[3.0]);
    let x = h(&[1, 1, 1, 2], &[1.0, 2.0]);
    check(&run1("conv2d", &[x, h(&[1, 1, 1, 1], &[2.0])], Attrs::new()), DType::F16, &[1, 1, 1, 2], &[2.0, 4.0]);
    check(&run1("softmax", &[a.clone()], Attrs::new()), DType::F16, &[1, 2], &[0.268941, 0.731059]);
    check(&run1("mean", &[a], Attrs::new()), DType::F16, &[], &[1.5]);
}

#[test]
fn injective_kernels_accept_every_dtype() {
    for dtype in DType::ALL {
        let x = tt(&[2, 2], dtype, &[1.0, 0.0, 0.0, 1.0]);
        let r = run1("reshape", &[x.clone()], ints("newshape", &[-1]));
        check(&r, dtype, &[4], &[1.0, 0.0, 0.0, 1.0]);
        let t = run1("transpose", &[x.clone()], Attrs::new());
        let c = run1("concatenate", &[x.clone(), t], int("axis", 1));
        check(&c, dtype, &[2, 4], &[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]);
        let w = run1("where", &[tt(&[2], DType::Bool, &[1.0, 0.0]), x.clone(), x], Attrs::new());
        assert_eq!(w.dtype(), dtype);
    }
}

#[test]
fn nn_relations_infer_shapes_and_reject_mismatches() {
    let f32t = |s: &[u64]| ty(s, DType::F32);
    let attrs = ints("padding", &[1, 2]).with("strides", AttrValue::Ints(vec![2, 1].into()));
    let t = rel("conv2d", &[f32t(&[2, 4, 7, 7]), f32t(&[8, 2, 3, 3])], attrs.with("groups", AttrValue::Int(2)));
    assert_eq!(t.unwrap().to_string(), "Tensor[(2, 8, 4, 9), f32]");
    assert_eq!(
        rel_err("conv2d", &[f32t(&[1, 3, 5, 5]), f32t(&[4, 2, 3, 3])], Attrs::new()),
        "conv2d: data has 3 channels but weight (4, 2, 3, 3) with groups 1 expects 2"
    );
    assert_eq!(
        rel_err("conv2d", &[f32t(&[1, 3, 5]), f32t(&[4, 3, 3, 3])], Attrs::new()),
        "conv2d: expected 4-d data (NCHW) and weight (OIHW), got shapes (1, 3, 5) and (4, 3, 3, 3)"
    );
    assert_eq!(
        rel_err("layer_norm", &[f32t(&[2, 3]), f32t(&[2]), f32t(&[3])], Attrs::new()),
        "layer_norm: gamma must have shape (3,), got (2,)"
    );
    assert_eq!(
        rel_err("matmul", &[ty(&[2, 2], DType::I32), ty(&[2, 2], DType::I32)], Attrs::new()),
        "matmul: expected a float tensor (f32, f16 or f64), got dtype i32"
    );
    let t = rel("matmul", &[f32t(&[1, 2, 3]), f32t(&[5, 3, 4])], Attrs::new()).unwrap();
    assert_eq!(t.to_string(), "Tensor[(5, 2, 4), f32]");
    let t = rel("split", &[f32t(&[6, 2])], int("indices_or_sections", 3)).unwrap();
    assert_eq!(t.to_string(), "(Tensor[(2, 2), f32], Tensor[(2, 2), f32], Tensor[(2, 2), f32])");
    let t = rel("sum", &[f32t(&[2, 3, 4])], ints("axis", &[0, 2]).with("keepdims", AttrValue::Bool(true)));
    assert_eq!(t.unwrap().to_string(), "Tensor[(1, 3, 1), f32]");
}

#[test]
fn broadcast_relations_reuse_the_argument_type_when_the_result_has_its_shape() {
    let same = |a: &Type, b: &Type| a.ptr_eq(b);
    let m = ty(&[2, 3], DType::F32);
    let s = ty(&[], DType::F32);
    let row = ty(&[3], DType::F32);
    let col = ty(&[2, 1], DType::F32);
    // Equal shapes, a scalar or a broadcastable row on either side: the tensor's own type.
    for args in [[m.clone(), m.clone()], [m.clone(), s.clone()], [s.clone(), m.clone()], [row.clone(), m.clone()]] {
        let out = rel("add", &args, Attrs::new()).unwrap();
        assert_eq!(out, m);
        assert!(same(&out, &args[0]) || same(&out, &args[1]), "{args:?}");
    }
    // A result shape neither argument has is still built: (3,) with (2, 1) is (2, 3).
    assert_eq!(rel("multiply", &[row.clone(), col.clone()], Attrs::new()).unwrap(), m);
    assert_eq!(rel("add", &[ty(&[1, 3], DType::F32), col], Attrs::new()).unwrap(), m);
    // Comparisons change the dtype, so the argument's type is not reused.
    assert_eq!(rel("less", &[m.clone(), s], Attrs::new()).unwrap(), ty(&[2, 3], DType::Bool));
    let bools = ty(&[2, 3], DType::Bool);
    let out = rel("equal", &[bools.clone(), bools.clone()], Attrs::new()).unwrap();
    assert!(same(&out, &bools));
    // Errors are unchanged: mismatched shapes and dtypes, and 0 against 1 broadcasts to 0.
    assert!(rel_err("add", &[m.clone(), ty(&[4], DType::F32)], Attrs::new()).contains("do not broadcast"));
    assert!(rel_err("add", &[m, ty(&[], DType::I32)], Attrs::new()).contains("dtype mismatch"));
    let empty = rel("add", &[ty(&[0], DType::F32), ty(&[1], DType::F32)], Attrs::new()).unwrap();
    assert_eq!(empty, ty(&[0], DType::F32));
}

#[test]
fn scalar_f32_kernels_match_the_tensor_kernels_bit_for_bit() {
    let values = [0.0f32, -0.0, 1.0, -1.5, 0.5, 3.0, 1e-40, 3.4e38, -7.25, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let mut checked = 0;
    for (_, def) in op::all() {
        let Some(scalar) = def.scalar_f32 else { continue };
        assert!(!def.tuple_result && !def.stateful, "{}", def.name);
        let n = match def.arity {
            op::Arity::Exact(n) => n,
            op::Arity::AtLeast(_) => panic!("{} has a scalar kernel but no fixed arity", def.name),
        };
        let mut combos: Vec<Vec<f32>> = vec![vec![]];
        for _ in 0..n {
            combos = combos.iter().flat_map(|c| values.iter().map(move |&v| [c.clone(), vec![v]].concat())).collect();
        }
        for args in combos {
            let tensors: Vec<Tensor> = args.iter().map(|&v| Tensor::scalar_f32(v)).collect();
            let expected = (def.kernel)(&tensors, &Attrs::new(), &mut ctx());
            let got = scalar(&args);
            match expected {
                Ok(mut out) => {
                    let out = out.remove(0);
                    let got = Tensor::scalar_f32(got.unwrap_or_else(|| panic!("{} {args:?}", def.name)));
                    assert!(out.bit_eq(&got), "{} {args:?}: kernel {out}, scalar {got}", def.name);
                }
                Err(e) => panic!("{} {args:?}: kernel failed ({e}) where the scalar path folds", def.name),
            }
            checked += 1;
        }
        // The wrong number of values is refused, never a panic.
        assert_eq!(scalar(&vec![1.0; n + 1]), None, "{}", def.name);
    }
    assert!(checked > 100, "only {checked} cases");
}

#[test]
fn dense_of_transposed_data_and_weight_is_gemm_with_both_transposes() {
    // ONNX Gemm transA=1, transB=1: a (3, 2) transposed times b (4, 3) transposed.
    let a = f(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f(&[4, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
    let at = run1("transpose", &[a], ints("axes", &[1, 0]));
    // at = [[1, 3, 5], [2, 4, 6]]; at · bᵀ: columns are at's columns 0, 1, 2 and the row sums.
    let y = run1("dense", &[at.clone(), b.clone()], Attrs::new());
    check(&y, DType::F32, &[2, 4], &[1.0, 3.0, 5.0, 9.0, 2.0, 4.0, 6.0, 12.0]);
    // The weight transposed as well (a view with swapped strides).
    let bt = run1("transpose", &[run1("transpose", &[b], Attrs::new())], Attrs::new());
    check(&run1("dense", &[at, bt], Attrs::new()), DType::F32, &[2, 4], &[1.0, 3.0, 5.0, 9.0, 2.0, 4.0, 6.0, 12.0]);
}

/// The heavy kernels give the same bits with their output spread over two workers, at any
/// task size (tasks of 1, 3, 64 elements start mid-row of every broadcast), as on the
/// calling thread: NaN, signed zeros and infinities included.
#[test]
fn kernels_give_the_same_bits_on_workers_at_any_task_size() {
    let pool = std::sync::Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
    let specials = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, 1e-40];
    let vals = |shape: &[u64], seed: u64| -> Tensor {
        let n: u64 = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|i| {
                let k = i.wrapping_mul(2654435761).wrapping_add(seed * 97) % 1009;
                if k % 37 == 0 {
                    specials[(k as usize / 37) % specials.len()]
                } else {
                    (k as f64 - 500.0) / 37.0
                }
            })
            .collect();
        f(shape, &v)
    };
    let shapes: &[(&[u64], &[u64])] =
        &[(&[3, 257, 5], &[257, 1]), (&[1000], &[1]), (&[4, 1, 33], &[1, 7, 33]), (&[2, 3], &[2, 3]), (&[1], &[129])];
    let binary = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "less", "equal"];
    let unary = ["sigmoid", "exp", "relu", "tanh", "negative", "abs", "sqrt", "erf"];
    for &(sa, sb) in shapes {
        let (a, b) = (vals(sa, 1), vals(sb, 2));
        let cases = binary
            .iter()
            .map(|&name| (name, vec![a.clone(), b.clone()]))
            .chain(unary.iter().map(|&name| (name, vec![a.clone()])));
        for (name, args) in cases {
            let def = op::get(op::lookup(name).unwrap());
            let want = (def.kernel)(&args, &Attrs::new(), &mut ctx()).unwrap();
            for min_work in [1, 3, 64, 1 << 20] {
                let mut par = ctx().with_workers(Some(pool.clone()), min_work);
                let got = (def.kernel)(&args, &Attrs::new(), &mut par).unwrap();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(g.bit_eq(w), "{name} on {sa:?} and {sb:?}, tasks from {min_work} elements");
                }
            }
        }
    }
}
