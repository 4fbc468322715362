//! Hand-computed results for the operators added for ONNX import (elementwise extras, `min`,
//! indexing, padding, pooling, transposed convolution, `lrn`, `resize2d`) and for the
//! ONNX-driven extensions of `matmul` and `split`.

use super::{check, err, f, int, ints, rel, rel_err, run, run1, tt, ty};
use crate::ir::{AttrValue, Attrs, DType};
use crate::op::OpError;

fn float(key: &str, v: f64) -> Attrs {
    Attrs::new().with(key, AttrValue::Float(v))
}

fn s(key: &str, v: &str) -> Attrs {
    Attrs::new().with(key, AttrValue::Str(v.into()))
}

// ---- elementwise ----

#[test]
fn erf_is_accurate_to_f32_precision() {
    // Reference values of erf to 10 digits.
    let xs = [0.0, 0.1, 0.5, -1.0, 2.0, 3.5, -3.99, 5.0, -30.0];
    let expected =
        [0.0, 0.1124629160, 0.5204998778, -0.8427007929, 0.9953222650, 0.9999992569, -0.9999999832, 1.0, -1.0];
    let out = run1("erf", &[f(&[9], &xs)], Attrs::new());
    for (g, e) in out.to_f64s().iter().zip(expected) {
        assert!((g - e).abs() <= 1.2e-7, "erf: got {g}, expected {e}");
    }
    assert!(run1("erf", &[f(&[1], &[f64::NAN])], Attrs::new()).to_f64s()[0].is_nan());
}

#[test]
fn reciprocal_abs_and_hard_swish() {
    check(
        &run1("reciprocal", &[f(&[3], &[2.0, -0.5, 0.0])], Attrs::new()),
        DType::F32,
        &[3],
        &[0.5, -2.0, f64::INFINITY],
    );
    check(&run1("abs", &[f(&[3], &[-1.5, 0.0, 2.0])], Attrs::new()), DType::F32, &[3], &[1.5, 0.0, 2.0]);
    let i = tt(&[3], DType::I32, &[-3.0, 4.0, i32::MIN as f64]);
    check(&run1("abs", &[i.clone()], Attrs::new()), DType::I32, &[3], &[3.0, 4.0, i32::MIN as f64]);
    assert_eq!(
        err("reciprocal", &[i], Attrs::new()),
        "reciprocal: expected a float tensor (f32 or f16), got dtype i32"
    );
    let x = f(&[6], &[-4.0, -1.0, 0.0, 1.0, 3.0, 4.0]);
    check(&run1("hard_swish", &[x], Attrs::new()), DType::F32, &[6], &[0.0, -1.0 / 3.0, 0.0, 2.0 / 3.0, 3.0, 4.0]);
}

#[test]
fn clip_bounds_floats_and_integers() {
    let bounds = float("a_min", -1.0).with("a_max", AttrValue::Float(1.0));
    let x = f(&[4], &[-2.0, 0.5, 3.0, f64::NAN]);
    check(&run1("clip", &[x.clone()], bounds.clone()), DType::F32, &[4], &[-1.0, 0.5, 1.0, f64::NAN]);
    let i = tt(&[3], DType::I64, &[-5.0, 2.0, 7.0]);
    let ib = float("a_min", -1.0).with("a_max", AttrValue::Int(3));
    check(&run1("clip", &[i], ib), DType::I64, &[3], &[-1.0, 2.0, 3.0]);
    assert_eq!(err("clip", &[x.clone()], float("a_min", 0.0)), "operator `clip` needs attribute `a_max`");
    assert_eq!(rel_err("clip", &[ty(&[2], DType::Bool)], bounds), "clip: expected a numeric tensor, got dtype bool");
    assert_eq!(rel_err("clip", &[ty(&[2], DType::F32)], float("a_min", 0.0)), "clip: missing attribute `a_max`");
}

#[test]
fn hard_sigmoid_defaults_and_attributes() {
    let x = f(&[4], &[-3.0, 0.0, 1.0, 3.0]);
    check(&run1("hard_sigmoid", &[x.clone()], Attrs::new()), DType::F32, &[4], &[0.0, 0.5, 0.7, 1.0]);
    let a = float("alpha", 0.5).with("beta", AttrValue::Float(0.6));
    check(&run1("hard_sigmoid", &[x], a), DType::F32, &[4], &[0.0, 0.6, 1.0, 1.0]);
}

#[test]
fn gelu_rejects_an_unknown_approximation() {
    assert_eq!(
        err("gelu", &[f(&[1], &[1.0])], s("approximate", "fast")),
        "gelu: `approximate` must be one of none, tanh, got \"fast\""
    );
}

#[test]
fn logical_not_needs_bool() {
    let b = tt(&[2], DType::Bool, &[1.0, 0.0]);
    check(&run1("logical_not", &[b], Attrs::new()), DType::Bool, &[2], &[0.0, 1.0]);
    assert_eq!(
        err("logical_not", &[f(&[1], &[1.0])], Attrs::new()),
        "logical_not: expected a bool tensor, got dtype f32"
    );
}

#[test]
fn min_reduction() {
    let x = f(&[2, 3], &[1.0, 2.0, -3.0, 4.0, 5.0, 6.0]);
    check(&run1("min", &[x.clone()], ints("axis", &[1])), DType::F32, &[2], &[-3.0, 4.0]);
    let keep = ints("axis", &[0]).with("keepdims", AttrValue::Bool(true));
    check(&run1("min", &[x], keep), DType::F32, &[1, 3], &[1.0, 2.0, -3.0]);
    check(&run1("min", &[tt(&[3], DType::I32, &[3.0, -5.0, 2.0])], Attrs::new()), DType::I32, &[], &[-5.0]);
    assert_eq!(err("min", &[f(&[0], &[])], Attrs::new()), "min: cannot reduce (0,) over an empty axis");
}

#[test]
fn arithmetic_and_comparisons_cover_integer_dtypes() {
    for dtype in [DType::I32, DType::I64] {
        let a = tt(&[3], dtype, &[7.0, -2.0, 5.0]);
        let b = tt(&[3], dtype, &[2.0, 3.0, 5.0]);
        check(&run1("subtract", &[a.clone(), b.clone()], Attrs::new()), dtype, &[3], &[5.0, -5.0, 0.0]);
        check(&run1("multiply", &[a.clone(), b.clone()], Attrs::new()), dtype, &[3], &[14.0, -6.0, 25.0]);
        check(&run1("maximum", &[a.clone(), b.clone()], Attrs::new()), dtype, &[3], &[7.0, 3.0, 5.0]);
        check(&run1("minimum", &[a.clone(), b.clone()], Attrs::new()), dtype, &[3], &[2.0, -2.0, 5.0]);
        check(&run1("greater_equal", &[a, b], Attrs::new()), DType::Bool, &[3], &[1.0, 0.0, 1.0]);
    }
}

#[test]
fn absurd_values_in_new_attributes_are_errors() {
    assert!(matches!(run("clip", &[f(&[1], &[1.0])], Attrs::new()), Err(OpError::Invalid(_))));
    let e = rel("clip", &[ty(&[1], DType::F32)], float("a_min", f64::NAN).with("a_max", AttrValue::Float(1.0)));
    assert_eq!(e.unwrap_err().to_string(), "clip: `a_min` and `a_max` must not be NaN");
}

// ---- take, strided_slice, pad, trilu ----

fn i64s(shape: &[u64], vals: &[f64]) -> crate::ir::Tensor {
    tt(shape, DType::I64, vals)
}

#[test]
fn take_gathers_with_negative_indices() {
    let x = f(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(
        &run1("take", &[x.clone(), i64s(&[2], &[2.0, -3.0])], Attrs::new()),
        DType::F32,
        &[2, 2],
        &[5.0, 6.0, 1.0, 2.0],
    );
    let idx = tt(&[1, 1], DType::I32, &[1.0]);
    check(&run1("take", &[x.clone(), idx], int("axis", 1)), DType::F32, &[3, 1, 1], &[2.0, 4.0, 6.0]);
    check(&run1("take", &[x.clone(), i64s(&[], &[-1.0])], Attrs::new()), DType::F32, &[2], &[5.0, 6.0]);
    let b = tt(&[3], DType::Bool, &[1.0, 0.0, 1.0]);
    check(&run1("take", &[b, i64s(&[2], &[1.0, 1.0])], Attrs::new()), DType::Bool, &[2], &[0.0, 0.0]);
    assert_eq!(
        err("take", &[x.clone(), i64s(&[1], &[3.0])], Attrs::new()),
        "take: index 3 is out of range for axis 0 of length 3"
    );
    assert_eq!(
        err("take", &[x.clone(), i64s(&[1], &[-4.0])], Attrs::new()),
        "take: index -4 is out of range for axis 0 of length 3"
    );
    assert_eq!(
        err("take", &[x.clone(), f(&[1], &[0.0])], Attrs::new()),
        "take: indices must have dtype i32 or i64, got f32"
    );
    assert_eq!(
        err("take", &[x, i64s(&[1], &[0.0])], int("axis", 2)),
        "take: axis 2 is out of range for a tensor of rank 2"
    );
}

fn slice(begin: &[i64], end: &[i64], strides: Option<&[i64]>, axes: Option<&[i64]>) -> Attrs {
    let mut a = ints("begin", begin).with("end", AttrValue::Ints(end.into()));
    if let Some(s) = strides {
        a = a.with("strides", AttrValue::Ints(s.into()));
    }
    if let Some(x) = axes {
        a = a.with("axes", AttrValue::Ints(x.into()));
    }
    a
}

#[test]
fn strided_slice_follows_onnx_slice() {
    let vals: Vec<f64> = (0..10).map(f64::from).collect();
    let x = tt(&[10], DType::I32, &vals);
    let go = |a: Attrs| run1("strided_slice", &[x.clone()], a);
    check(&go(slice(&[2], &[8], Some(&[3]), None)), DType::I32, &[2], &[2.0, 5.0]);
    check(&go(slice(&[8], &[1], Some(&[-2]), None)), DType::I32, &[4], &[8.0, 6.0, 4.0, 2.0]);
    // End clamps; INT64_MAX means "to the end", INT64_MIN with a negative step "to the start".
    check(&go(slice(&[7], &[i64::MAX], None, None)), DType::I32, &[3], &[7.0, 8.0, 9.0]);
    let rev: Vec<f64> = vals.iter().rev().copied().collect();
    check(&go(slice(&[-1], &[i64::MIN], Some(&[-1]), None)), DType::I32, &[10], &rev);
    check(&go(slice(&[20], &[30], None, None)), DType::I32, &[0], &[]);
    check(&go(slice(&[-3], &[-1], None, None)), DType::I32, &[2], &[7.0, 8.0]);
    // A start before the first element with a negative step selects nothing (numpy).
    check(&go(slice(&[-20], &[-30], Some(&[-1]), None)), DType::I32, &[0], &[]);
    let m = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let r = run1("strided_slice", &[m.clone()], slice(&[1], &[1000], None, Some(&[-1])));
    check(&r, DType::F32, &[2, 2], &[2.0, 3.0, 5.0, 6.0]);
    let r = run1("strided_slice", &[m.clone()], slice(&[-1, 2], &[-1000, 0], Some(&[-1, -2]), None));
    check(&r, DType::F32, &[2, 1], &[6.0, 3.0]);
    assert_eq!(
        err("strided_slice", &[m.clone()], slice(&[0], &[1], Some(&[0]), None)),
        "strided_slice: stride of axis 0 is 0"
    );
    assert_eq!(
        err("strided_slice", &[m.clone()], slice(&[0, 0], &[1, 1], None, Some(&[1, -1]))),
        "strided_slice: `axes` repeats axis 1"
    );
    assert_eq!(
        err("strided_slice", &[m], slice(&[0, 0], &[1], None, None)),
        "strided_slice: `begin`, `end`, `strides` and `axes` must have equal lengths, got 2, 1, 2 and 2"
    );
}

fn pads(widths: &[i64], mode: &str) -> Attrs {
    ints("pad_width", widths).with("pad_mode", AttrValue::Str(mode.into()))
}

#[test]
fn pad_constant_reflect_edge_and_crop() {
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let a = pads(&[1, 0, 0, 1], "constant").with("pad_value", AttrValue::Float(9.0));
    check(&run1("pad", &[x.clone()], a), DType::F32, &[3, 3], &[9.0, 9.0, 9.0, 1.0, 2.0, 9.0, 3.0, 4.0, 9.0]);
    let v = f(&[3], &[1.0, 2.0, 3.0]);
    check(&run1("pad", &[v.clone()], pads(&[2, 2], "reflect")), DType::F32, &[7], &[3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
    check(&run1("pad", &[v.clone()], pads(&[2, 1], "edge")), DType::F32, &[6], &[1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
    // Reflection wider than the axis keeps mirroring (numpy's `reflect`).
    let two = f(&[2], &[1.0, 2.0]);
    check(&run1("pad", &[two.clone()], pads(&[3, 0], "reflect")), DType::F32, &[5], &[2.0, 1.0, 2.0, 1.0, 2.0]);
    // Negative widths crop.
    check(&run1("pad", &[v.clone()], ints("pad_width", &[-1, 1])), DType::F32, &[3], &[2.0, 3.0, 0.0]);
    let i = tt(&[1], DType::I64, &[5.0]);
    let a = ints("pad_width", &[1, 0]).with("pad_value", AttrValue::Float(7.0));
    check(&run1("pad", &[i], a), DType::I64, &[2], &[7.0, 5.0]);
    assert_eq!(
        err("pad", &[v.clone()], ints("pad_width", &[-2, -2])),
        "pad: pads (-2, -2) crop more than the length 3 of axis 0"
    );
    assert_eq!(
        err("pad", &[x], ints("pad_width", &[1, 1])),
        "pad: `pad_width` needs 4 values for a tensor of rank 2, got 2"
    );
    assert_eq!(
        err("pad", &[v], pads(&[1, 1], "wrap")),
        "pad: `pad_mode` must be one of constant, reflect, edge, got \"wrap\""
    );
    assert_eq!(err("pad", &[f(&[0], &[])], pads(&[1, 0], "edge")), "pad: cannot edge-pad the empty axis 0");
    let e = run("pad", &[two], ints("pad_width", &[1 << 40, 0])).unwrap_err();
    assert!(matches!(e, OpError::Tensor(crate::ir::TensorError::TooLarge { .. })), "{e}");
}

#[test]
fn trilu_masks_triangles() {
    let x = f(&[3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    check(
        &run1("trilu", &[x.clone()], Attrs::new()),
        DType::F32,
        &[3, 3],
        &[1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0],
    );
    let lower = Attrs::new().with("upper", AttrValue::Bool(false)).with("k", AttrValue::Int(-1));
    check(&run1("trilu", &[x.clone()], lower), DType::F32, &[3, 3], &[0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 7.0, 8.0, 0.0]);
    check(&run1("trilu", &[x], int("k", 1)), DType::F32, &[3, 3], &[0.0, 2.0, 3.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0]);
    let b = tt(&[2, 1, 2], DType::Bool, &[1.0, 1.0, 1.0, 1.0]);
    let lower = Attrs::new().with("upper", AttrValue::Bool(false));
    check(&run1("trilu", &[b], lower), DType::Bool, &[2, 1, 2], &[1.0, 0.0, 1.0, 0.0]);
    assert_eq!(
        err("trilu", &[f(&[3], &[0.0; 3])], Attrs::new()),
        "trilu: expected a tensor of rank 2 or more, got shape (3,)"
    );
}
