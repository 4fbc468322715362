//! Hand-computed results for the operators added for ONNX import (elementwise extras, `min`,
//! indexing, padding, pooling, transposed convolution, `lrn`, `resize2d`) and for the
//! ONNX-driven extensions of `matmul` and `split`.

use super::{check, err, f, ints, rel, rel_err, run, run1, tt, ty};
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
