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
        "reciprocal: expected a float tensor (f32, f16 or f64), got dtype i32"
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
    // A start past the end of one axis empties only that axis (ONNX
    // test_slice_start_out_of_bounds: (20, 10, 5) sliced [1000:1000] on axis 1 is (20, 0, 5)).
    let big = tt(&[4, 3, 2], DType::F32, &[0.0; 24]);
    let r = run1("strided_slice", &[big], slice(&[1000], &[1000], Some(&[1]), Some(&[1])));
    check(&r, DType::F32, &[4, 0, 2], &[]);
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

// ---- pools, lrn, conv2d_transpose ----

fn seq(n: usize) -> Vec<f64> {
    (1..=n).map(|v| v as f64).collect()
}

#[test]
fn max_pool2d_ceil_mode_padding_and_dilation() {
    let x = f(&[1, 1, 4, 4], &seq(16));
    let a = ints("pool_size", &[3, 3]).with("strides", AttrValue::Ints(vec![2, 2].into()));
    check(&run1("max_pool2d", &[x.clone()], a.clone()), DType::F32, &[1, 1, 1, 1], &[11.0]);
    let ceil = a.with("ceil_mode", AttrValue::Bool(true));
    check(&run1("max_pool2d", &[x.clone()], ceil), DType::F32, &[1, 1, 2, 2], &[11.0, 12.0, 15.0, 16.0]);
    // A last window that would start in the padding is dropped (ONNX's reduce-by-one case).
    let small = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let a = ints("pool_size", &[1])
        .with("strides", AttrValue::Ints(vec![2].into()))
        .with("ceil_mode", AttrValue::Bool(true));
    check(&run1("max_pool2d", &[small], a), DType::F32, &[1, 1, 1, 1], &[1.0]);
    // Padding never wins, even against negative inputs.
    let neg = f(&[1, 1, 2, 2], &[-1.0, -2.0, -3.0, -4.0]);
    let a = ints("pool_size", &[2]).with("padding", AttrValue::Ints(vec![1].into()));
    check(
        &run1("max_pool2d", &[neg], a),
        DType::F32,
        &[1, 1, 3, 3],
        &[-1.0, -1.0, -2.0, -1.0, -1.0, -2.0, -3.0, -3.0, -4.0],
    );
    let a = ints("pool_size", &[2]).with("dilation", AttrValue::Ints(vec![2].into()));
    check(&run1("max_pool2d", &[x.clone()], a), DType::F32, &[1, 1, 2, 2], &[11.0, 12.0, 15.0, 16.0]);
    assert_eq!(
        err("max_pool2d", &[x.clone()], ints("pool_size", &[5])),
        "max_pool2d: window extent 5 is larger than the padded input 4"
    );
    assert_eq!(
        err("max_pool2d", &[f(&[4], &[0.0; 4])], ints("pool_size", &[1])),
        "max_pool2d: expected 4-d data (NCHW), got shape (4,)"
    );
    assert_eq!(err("max_pool2d", &[x], Attrs::new()), "operator `max_pool2d` needs attribute `pool_size`");
}

#[test]
fn avg_pool2d_counts_and_ceil_mode() {
    let x = f(&[1, 1, 4, 4], &seq(16));
    let a = ints("pool_size", &[3, 3])
        .with("strides", AttrValue::Ints(vec![2, 2].into()))
        .with("ceil_mode", AttrValue::Bool(true));
    check(&run1("avg_pool2d", &[x.clone()], a), DType::F32, &[1, 1, 2, 2], &[6.0, 7.5, 12.0, 13.5]);
    let a = ints("pool_size", &[2])
        .with("dilation", AttrValue::Ints(vec![2].into()))
        .with("ceil_mode", AttrValue::Bool(true));
    check(&run1("avg_pool2d", &[x], a), DType::F32, &[1, 1, 2, 2], &[6.0, 7.0, 10.0, 11.0]);
    let s = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let a = ints("pool_size", &[2]).with("padding", AttrValue::Ints(vec![1].into()));
    check(
        &run1("avg_pool2d", &[s.clone()], a.clone()),
        DType::F32,
        &[1, 1, 3, 3],
        &[1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0],
    );
    let inc = a.with("count_include_pad", AttrValue::Bool(true));
    check(
        &run1("avg_pool2d", &[s], inc),
        DType::F32,
        &[1, 1, 3, 3],
        &[0.25, 0.75, 0.5, 1.0, 2.5, 1.5, 0.75, 1.75, 1.0],
    );
    // ONNX's averagepool_2d_precomputed_pads_count_include_pad.
    let x = f(&[1, 1, 5, 5], &seq(25));
    let a = ints("pool_size", &[5])
        .with("padding", AttrValue::Ints(vec![2, 2, 2, 2].into()))
        .with("count_include_pad", AttrValue::Bool(true));
    #[rustfmt::skip]
    let expected = [
        2.52, 3.6, 4.8, 4.08, 3.24, 4.56, 6.4, 8.4, 7.04, 5.52, 7.2, 10.0, 13.0, 10.8, 8.4,
        6.96, 9.6, 12.4, 10.24, 7.92, 6.12, 8.4, 10.8, 8.88, 6.84,
    ];
    check(&run1("avg_pool2d", &[x], a), DType::F32, &[1, 1, 5, 5], &expected);
}

#[test]
fn global_pools_keep_spatial_axes() {
    let x = f(&[1, 2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -8.0]);
    check(&run1("global_avg_pool2d", &[x.clone()], Attrs::new()), DType::F32, &[1, 2, 1, 1], &[2.5, 2.5]);
    check(&run1("global_max_pool2d", &[x], Attrs::new()), DType::F32, &[1, 2, 1, 1], &[4.0, 7.0]);
    let h = tt(&[1, 1, 2], DType::F16, &[1.0, 3.0]);
    check(&run1("global_avg_pool2d", &[h], Attrs::new()), DType::F16, &[1, 1, 1], &[2.0]);
    assert_eq!(
        err("global_max_pool2d", &[f(&[1, 1, 0, 2], &[])], Attrs::new()),
        "global_max_pool2d: cannot pool the empty spatial axes of (1, 1, 0, 2)"
    );
}

#[test]
fn lrn_normalises_across_channels() {
    let x = f(&[1, 3, 1, 1], &[1.0, 2.0, 3.0]);
    let a = int("size", 3).with("alpha", AttrValue::Float(3.0)).with("beta", AttrValue::Float(1.0));
    check(&run1("lrn", &[x.clone()], a), DType::F32, &[1, 3, 1, 1], &[1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0]);
    // An even size looks one channel further ahead than behind.
    let a = int("size", 2).with("alpha", AttrValue::Float(2.0)).with("beta", AttrValue::Float(1.0));
    check(&run1("lrn", &[x.clone()], a), DType::F32, &[1, 3, 1, 1], &[1.0 / 6.0, 2.0 / 14.0, 3.0 / 10.0]);
    // Defaults: alpha 1e-4, beta 0.75, bias 1.
    let y = run1("lrn", &[x.clone()], int("size", 1));
    check(
        &y,
        DType::F32,
        &[1, 3, 1, 1],
        &[1.0 / 1.0001f64.powf(0.75), 2.0 / 1.0004f64.powf(0.75), 3.0 / 1.0009f64.powf(0.75)],
    );
    assert_eq!(err("lrn", &[x], int("size", 0)), "lrn: `size` must be positive, got 0");
}

#[test]
fn conv2d_transpose_scatters_kernels() {
    let x = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let w = f(&[1, 1, 2, 2], &[1.0; 4]);
    let go = |a: Attrs| run1("conv2d_transpose", &[x.clone(), w.clone()], a);
    check(&go(Attrs::new()), DType::F32, &[1, 1, 3, 3], &[1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 3.0, 7.0, 4.0]);
    #[rustfmt::skip]
    let blocks = [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 3.0, 3.0, 4.0, 4.0];
    check(&go(ints("strides", &[2])), DType::F32, &[1, 1, 4, 4], &blocks);
    let padded = ints("strides", &[2]).with("padding", AttrValue::Ints(vec![1].into()));
    check(&go(padded), DType::F32, &[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let extra = ints("strides", &[2]).with("output_padding", AttrValue::Ints(vec![1, 0].into()));
    let out = go(extra);
    assert_eq!(out.shape(), [1, 1, 5, 4]);
    assert_eq!(out.to_f64s()[16..], [0.0; 4]);
    // Two groups, one channel each.
    let x2 = f(&[1, 2, 1, 1], &[1.0, 2.0]);
    let w2 = f(&[2, 1, 1, 1], &[10.0, -1.0]);
    check(&run1("conv2d_transpose", &[x2, w2], int("groups", 2)), DType::F32, &[1, 2, 1, 1], &[10.0, -2.0]);
    // ONNX's convtranspose case: 3x3 input 0..8, two 3x3 all-ones output channels.
    let x3 = f(&[1, 1, 3, 3], &(0..9).map(f64::from).collect::<Vec<_>>());
    let w3 = f(&[1, 2, 3, 3], &[1.0; 18]);
    let out = run1("conv2d_transpose", &[x3, w3], Attrs::new());
    #[rustfmt::skip]
    let ch = [
        0.0, 1.0, 3.0, 3.0, 2.0, 3.0, 8.0, 15.0, 12.0, 7.0, 9.0, 21.0, 36.0, 27.0, 15.0,
        9.0, 20.0, 33.0, 24.0, 13.0, 6.0, 13.0, 21.0, 15.0, 8.0,
    ];
    check(&out, DType::F32, &[1, 2, 5, 5], &[ch, ch].concat());
    assert_eq!(
        err(
            "conv2d_transpose",
            &[x.clone(), w.clone()],
            ints("strides", &[2]).with("output_padding", AttrValue::Ints(vec![2].into()))
        ),
        "conv2d_transpose: `output_padding` 2 must be non-negative and less than the stride or dilation"
    );
    assert_eq!(
        err("conv2d_transpose", &[x.clone(), f(&[2, 1, 1, 1], &[1.0; 2])], Attrs::new()),
        "conv2d_transpose: data has 1 channels but weight (2, 1, 1, 1) expects 2"
    );
    assert_eq!(
        err("conv2d_transpose", &[x, w], ints("padding", &[2])),
        "conv2d_transpose: padding 4 removes the whole output of length 3"
    );
}

#[test]
fn absurd_pool_and_transpose_geometry_is_an_error_not_an_allocation() {
    let x = f(&[1, 1, 2, 2], &[1.0; 4]);
    let huge = ints("pool_size", &[1]).with("padding", AttrValue::Ints(vec![1 << 40].into()));
    let e = run("max_pool2d", &[x.clone()], huge).unwrap_err();
    assert!(matches!(e, OpError::Tensor(crate::ir::TensorError::TooLarge { .. })), "{e}");
    let e = run(
        "avg_pool2d",
        &[x.clone()],
        ints("pool_size", &[i64::MAX]).with("dilation", AttrValue::Ints(vec![i64::MAX].into())),
    );
    assert_eq!(e.unwrap_err().to_string(), "avg_pool2d: padding, dilation or pool size overflows");
    let w = f(&[1, 1, 1, 1], &[1.0]);
    let e = run("conv2d_transpose", &[x.clone(), w], ints("strides", &[1 << 40])).unwrap_err();
    assert!(matches!(e, OpError::Tensor(crate::ir::TensorError::TooLarge { .. })), "{e}");
    let w3 = f(&[1, 1, 3, 3], &[1.0; 9]);
    let e = run(
        "conv2d_transpose",
        &[x, w3],
        ints("strides", &[i64::MAX]).with("dilation", AttrValue::Ints(vec![i64::MAX].into())),
    );
    assert_eq!(e.unwrap_err().to_string(), "conv2d_transpose: strides, padding, dilation or kernel size overflows");
}

// ---- resize2d ----

fn resize(size: &[i64], method: &str) -> Attrs {
    ints("size", size).with("method", AttrValue::Str(method.into()))
}

#[test]
fn resize2d_nearest_matches_onnx_upsample_case() {
    // ONNX's resize_upsample_scales_nearest: [1, 1, 2, 2] by (2, 3).
    let x = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let row1 = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0];
    let row2 = [3.0, 3.0, 3.0, 4.0, 4.0, 4.0];
    let expected = [row1, row1, row2, row2].concat();
    check(&run1("resize2d", &[x], resize(&[4, 6], "nearest")), DType::F32, &[1, 1, 4, 6], &expected);
}

#[test]
fn resize2d_nearest_rounding_modes() {
    let x = f(&[1, 1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let go = |mode: &str| {
        run1("resize2d", &[x.clone()], resize(&[1, 8], "nearest").with("rounding_method", AttrValue::Str(mode.into())))
    };
    check(&go("round_prefer_floor"), DType::F32, &[1, 1, 1, 8], &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    check(&go("floor"), DType::F32, &[1, 1, 1, 8], &[1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
    check(&go("ceil"), DType::F32, &[1, 1, 1, 8], &[1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 4.0]);
    // Ties (x.5) under asymmetric coordinates.
    let y = f(&[1, 2], &[1.0, 2.0]);
    let tie = |mode: &str| {
        let a = resize(&[1, 4], "nearest")
            .with("coordinate_transformation_mode", AttrValue::Str("asymmetric".into()))
            .with("rounding_method", AttrValue::Str(mode.into()));
        run1("resize2d", &[y.clone()], a)
    };
    check(&tie("round_prefer_floor"), DType::F32, &[1, 4], &[1.0, 1.0, 2.0, 2.0]);
    check(&tie("round_prefer_ceil"), DType::F32, &[1, 4], &[1.0, 2.0, 2.0, 2.0]);
    let i = tt(&[1, 2], DType::I32, &[5.0, 9.0]);
    check(&run1("resize2d", &[i], resize(&[1, 4], "nearest")), DType::I32, &[1, 4], &[5.0, 5.0, 9.0, 9.0]);
}

#[test]
fn resize2d_linear_coordinate_modes() {
    let x = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // ONNX's resize_upsample_scales_linear (half_pixel).
    #[rustfmt::skip]
    let half = [1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0];
    check(&run1("resize2d", &[x.clone()], resize(&[4, 4], "linear")), DType::F32, &[1, 1, 4, 4], &half);
    // ONNX's resize_upsample_scales_linear_align_corners.
    let t = 1.0 / 3.0;
    #[rustfmt::skip]
    let corners = [
        1.0, 1.0 + t, 1.0 + 2.0 * t, 2.0, 1.0 + 2.0 * t, 2.0, 2.0 + t, 2.0 + 2.0 * t,
        2.0 + t, 2.0 + 2.0 * t, 3.0, 3.0 + t, 3.0, 3.0 + t, 3.0 + 2.0 * t, 4.0,
    ];
    let a = resize(&[4, 4], "linear").with("coordinate_transformation_mode", AttrValue::Str("align_corners".into()));
    check(&run1("resize2d", &[x.clone()], a), DType::F32, &[1, 1, 4, 4], &corners);
    // ONNX's resize_downsample_scales_linear: scales 0.6 give a 1x2 output, mapped with 0.6.
    let y = f(&[1, 1, 2, 4], &seq(8));
    let a = resize(&[1, 2], "linear").with("scale_h", AttrValue::Float(0.6)).with("scale_w", AttrValue::Float(0.6));
    check(&run1("resize2d", &[y.clone()], a), DType::F32, &[1, 1, 1, 2], &[2.6666665, 4.3333331]);
    // pytorch_half_pixel maps a length-1 output to -0.5 (the first element); half_pixel to
    // the middle.
    let v = f(&[1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let a =
        resize(&[1, 1], "linear").with("coordinate_transformation_mode", AttrValue::Str("pytorch_half_pixel".into()));
    check(&run1("resize2d", &[v.clone()], a), DType::F32, &[1, 1], &[1.0]);
    check(&run1("resize2d", &[v.clone()], resize(&[1, 1], "linear")), DType::F32, &[1, 1], &[2.5]);
    // asymmetric: x / scale; tf_half_pixel_for_nn: (x + 0.5) / scale.
    let a = resize(&[1, 8], "linear").with("coordinate_transformation_mode", AttrValue::Str("asymmetric".into()));
    check(&run1("resize2d", &[v.clone()], a), DType::F32, &[1, 8], &[1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.0]);
    let a = resize(&[1, 2], "nearest")
        .with("coordinate_transformation_mode", AttrValue::Str("tf_half_pixel_for_nn".into()));
    check(&run1("resize2d", &[v], a), DType::F32, &[1, 2], &[2.0, 4.0]);
}

#[test]
fn resize2d_cubic_matches_onnx_and_excludes_outside() {
    // ONNX's resize_upsample_scales_cubic, first row.
    let x = f(&[1, 1, 4, 4], &seq(16));
    let out = run1("resize2d", &[x.clone()], resize(&[8, 8], "cubic"));
    assert_eq!(out.shape(), [1, 1, 8, 8]);
    let row = [0.47265625, 0.76953125, 1.24609375, 1.875, 2.28125, 2.91015625, 3.38671875, 3.68359375];
    for (g, e) in out.to_f64s()[..8].iter().zip(row) {
        assert!((g - e).abs() < 1e-5, "got {g}, expected {e}");
    }
    // With exclude_outside the two taps left of the input are dropped and the rest
    // renormalised: 1 + 5 * (-0.10546875 / 0.7734375).
    let a = resize(&[8, 8], "cubic").with("exclude_outside", AttrValue::Bool(true));
    let first = run1("resize2d", &[x], a).to_f64s()[0];
    assert!((first - (1.0 - 5.0 * 0.10546875 / 0.7734375)).abs() < 1e-5, "{first}");
}

#[test]
fn resize2d_rejects_bad_attributes() {
    let x = f(&[1, 2], &[1.0, 2.0]);
    assert_eq!(
        err("resize2d", &[x.clone()], resize(&[2, 2], "bilinear")),
        "resize2d: `method` must be one of nearest, linear, cubic, got \"bilinear\""
    );
    assert_eq!(
        err("resize2d", &[x.clone()], ints("size", &[2])),
        "resize2d: `size` must be two non-negative values [out_h, out_w], got [2]"
    );
    assert_eq!(
        err("resize2d", &[x.clone()], ints("size", &[2, 2]).with("scale_h", AttrValue::Float(0.0))),
        "resize2d: `scale_h` must be positive and finite, got 0"
    );
    assert_eq!(
        err("resize2d", &[f(&[2], &[1.0, 2.0])], ints("size", &[2, 2])),
        "resize2d: expected a tensor of rank 2 or more, got shape (2,)"
    );
    assert_eq!(
        err("resize2d", &[f(&[0, 2], &[])], ints("size", &[2, 2])),
        "resize2d: cannot resize the empty axis 0 of (0, 2)"
    );
    let e = run("resize2d", &[x], ints("size", &[1 << 20, 1 << 20])).unwrap_err();
    assert!(matches!(e, OpError::Tensor(crate::ir::TensorError::TooLarge { .. })), "{e}");
    check(&run1("resize2d", &[f(&[1, 2], &[1.0, 2.0])], ints("size", &[0, 1 << 40])), DType::F32, &[0, 1 << 40], &[]);
}

// ---- matmul and split extensions ----

#[test]
fn matmul_follows_numpy_for_vectors_and_batches() {
    let f32t = |s: &[u64]| ty(s, DType::F32);
    let shape_of = |a: &[u64], b: &[u64]| rel("matmul", &[f32t(a), f32t(b)], Attrs::new()).map(|t| t.to_string());
    assert_eq!(shape_of(&[2, 1, 4, 5], &[3, 5, 6]).unwrap(), "Tensor[(2, 3, 4, 6), f32]");
    assert_eq!(shape_of(&[5], &[5]).unwrap(), "Tensor[(), f32]");
    assert_eq!(shape_of(&[5], &[2, 5, 3]).unwrap(), "Tensor[(2, 3), f32]");
    assert_eq!(shape_of(&[2, 4, 5], &[5]).unwrap(), "Tensor[(2, 4), f32]");
    assert_eq!(
        rel_err("matmul", &[f32t(&[2, 4, 5]), f32t(&[3, 5, 6])], Attrs::new()),
        "matmul: batch dimensions do not broadcast: shapes (2, 4, 5) and (3, 5, 6)"
    );
    assert_eq!(
        rel_err("matmul", &[f32t(&[]), f32t(&[3])], Attrs::new()),
        "matmul: operands must have rank 1 or more, got shapes () and (3,)"
    );
    // Vector . vector, vector x matrix, matrix x vector.
    let v = f(&[2], &[1.0, 2.0]);
    let m = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(&run1("matmul", &[v.clone(), v.clone()], Attrs::new()), DType::F32, &[], &[5.0]);
    check(&run1("matmul", &[v.clone(), m.clone()], Attrs::new()), DType::F32, &[2], &[7.0, 10.0]);
    check(&run1("matmul", &[m.clone(), v], Attrs::new()), DType::F32, &[2], &[5.0, 11.0]);
    // [2, 1, 1, 2] x [3, 2, 1]: every (i, j) pairs a's batch i with b's batch j.
    let a = f(&[2, 1, 1, 2], &[1.0, 0.0, 0.0, 1.0]);
    let b = f(&[3, 2, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(&run1("matmul", &[a, b], Attrs::new()), DType::F32, &[2, 3, 1, 1], &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
}

#[test]
fn split_at_indices() {
    let x = f(&[7], &seq(7));
    let out = run("split", &[x.clone()], ints("indices", &[2, 5])).unwrap();
    assert_eq!(out.len(), 3);
    check(&out[0], DType::F32, &[2], &[1.0, 2.0]);
    check(&out[1], DType::F32, &[3], &[3.0, 4.0, 5.0]);
    check(&out[2], DType::F32, &[2], &[6.0, 7.0]);
    let m = f(&[2, 3], &seq(6));
    let out = run("split", &[m], ints("indices", &[1, 1]).with("axis", AttrValue::Int(-1))).unwrap();
    let shapes: Vec<Vec<usize>> = out.iter().map(|t| t.shape().to_vec()).collect();
    assert_eq!(shapes, [vec![2, 1], vec![2, 0], vec![2, 2]]);
    let t = rel("split", &[ty(&[7], DType::I64)], ints("indices", &[3])).unwrap();
    assert_eq!(t.to_string(), "(Tensor[(3,), i64], Tensor[(4,), i64])");
    assert_eq!(
        err("split", &[x.clone()], ints("indices", &[5, 2])),
        "split: `indices` must be ascending split points in [0, 7] (axis 0 of (7,)), got [5, 2]"
    );
    assert_eq!(
        err("split", &[x.clone()], ints("indices", &[8])),
        "split: `indices` must be ascending split points in [0, 7] (axis 0 of (7,)), got [8]"
    );
    assert_eq!(
        err("split", &[x.clone()], ints("indices", &[2]).with("indices_or_sections", AttrValue::Int(7))),
        "split: exactly one of `indices_or_sections` and `indices` must be given"
    );
    assert_eq!(
        err("split", &[x], Attrs::new()),
        "split: exactly one of `indices_or_sections` and `indices` must be given"
    );
}

// ---- operators of issue #27: rounding, trigonometry, activations, predicates, mod, bits ----

#[test]
fn rounding_trigonometric_and_smooth_unary_operators_match_f64_math() {
    let xs = [-2.5, -0.5, 0.3, 0.5, 1.5, 2.7];
    type F = fn(f64) -> f64;
    let cases: [(&str, F); 12] = [
        ("floor", f64::floor),
        ("ceil", f64::ceil),
        ("round", f64::round_ties_even),
        ("sin", f64::sin),
        ("cos", f64::cos),
        ("tan", f64::tan),
        ("atan", f64::atan),
        ("sinh", f64::sinh),
        ("cosh", f64::cosh),
        ("asinh", f64::asinh),
        ("softsign", |x| x / (1.0 + x.abs())),
        ("softplus", |x| x.exp().ln_1p()),
    ];
    for (name, g) in cases {
        let out = run1(name, &[f(&[6], &xs)], Attrs::new()).to_f64s();
        for (&x, o) in xs.iter().zip(out) {
            let want = g(x as f32 as f64);
            assert!((o - want).abs() <= 1e-6 * want.abs().max(1.0), "{name}({x}) = {o}, expected {want}");
        }
    }
    // Inverse functions on their domains.
    let ys = [-0.9, 0.0, 0.4];
    for (name, g) in [("asin", f64::asin as F), ("acos", f64::acos), ("atanh", f64::atanh)] {
        let out = run1(name, &[f(&[3], &ys)], Attrs::new()).to_f64s();
        for (&y, o) in ys.iter().zip(out) {
            assert!((o - g(y as f32 as f64)).abs() < 1e-6, "{name}({y}) = {o}");
        }
    }
    check(&run1("acosh", &[f(&[1], &[1.0])], Attrs::new()), DType::F32, &[1], &[0.0]);
    // mish(1) = tanh(ln(1 + e)); softplus(100) does not overflow.
    check(&run1("mish", &[f(&[2], &[1.0, 0.0])], Attrs::new()), DType::F32, &[2], &[0.865_098_4, 0.0]);
    check(&run1("softplus", &[f(&[1], &[100.0])], Attrs::new()), DType::F32, &[1], &[100.0]);
    // sign works on integers and keeps NaN.
    check(&run1("sign", &[tt(&[3], DType::I8, &[-7.0, 0.0, 9.0])], Attrs::new()), DType::I8, &[3], &[-1.0, 0.0, 1.0]);
    check(&run1("sign", &[f(&[2], &[f64::NAN, -0.0])], Attrs::new()), DType::F32, &[2], &[f64::NAN, 0.0]);
    assert_eq!(
        err("floor", &[tt(&[1], DType::I32, &[1.0])], Attrs::new()),
        "floor: expected a float tensor (f32, f16 or f64), got dtype i32"
    );
}

#[test]
fn activation_family_follows_onnx_definitions_and_checks_attributes() {
    let x = f(&[4], &[-2.0, -0.5, 0.5, 2.0]);
    let e = |v: f64| v.exp() - 1.0;
    check(&run1("elu", &[x.clone()], float("alpha", 2.0)), DType::F32, &[4], &[2.0 * e(-2.0), 2.0 * e(-0.5), 0.5, 2.0]);
    let (a, g) = (1.673_263_192_176_818_8, 1.050_701_022_148_132_3);
    check(
        &run1("selu", &[x.clone()], Attrs::new()),
        DType::F32,
        &[4],
        &[g * a * e(-2.0), g * a * e(-0.5), g * 0.5, g * 2.0],
    );
    check(
        &run1("celu", &[x.clone()], float("alpha", 2.0)),
        DType::F32,
        &[4],
        &[2.0 * e(-1.0), 2.0 * e(-0.25), 0.5, 2.0],
    );
    check(&run1("leaky_relu", &[x.clone()], float("alpha", 0.1)), DType::F32, &[4], &[-0.2, -0.05, 0.5, 2.0]);
    check(&run1("thresholded_relu", &[x.clone()], float("alpha", 1.0)), DType::F32, &[4], &[0.0, 0.0, 0.0, 2.0]);
    let sh = float("bias", 1.5).with("lambd", AttrValue::Float(1.0));
    check(&run1("shrink", &[x.clone()], sh.clone()), DType::F32, &[4], &[-0.5, 0.0, 0.0, 0.5]);
    check(&run1("shrink", &[tt(&[3], DType::I8, &[-3.0, 0.0, 3.0])], sh), DType::I8, &[3], &[-1.0, 0.0, 1.0]);
    // Bad attributes are errors naming the operator and the attribute.
    assert_eq!(err("celu", &[x.clone()], float("alpha", 0.0)), "celu: `alpha` must not be 0");
    assert_eq!(err("shrink", &[x.clone()], float("lambd", -1.0)), "shrink: `lambd` must not be negative, got -1");
    assert_eq!(err("elu", &[x.clone()], float("alpha", f64::INFINITY)), "elu: `alpha` must be finite, got inf");
    assert_eq!(err("leaky_relu", &[x], int("slope", 1)), "unknown attribute `slope` of `leaky_relu` (valid: alpha)");
    assert_eq!(
        err("elu", &[tt(&[1], DType::I64, &[1.0])], Attrs::new()),
        "elu: expected a float tensor (f32, f16 or f64), got dtype i64"
    );
}

#[test]
fn isnan_and_isinf_classify_floats() {
    let x = f(&[4], &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.0]);
    check(&run1("isnan", &[x.clone()], Attrs::new()), DType::Bool, &[4], &[1.0, 0.0, 0.0, 0.0]);
    check(&run1("isinf", &[x.clone()], Attrs::new()), DType::Bool, &[4], &[0.0, 1.0, 1.0, 0.0]);
    let pos_only = Attrs::new().with("detect_negative", AttrValue::Bool(false));
    check(&run1("isinf", &[x.clone()], pos_only), DType::Bool, &[4], &[0.0, 1.0, 0.0, 0.0]);
    let d = tt(&[2], DType::F64, &[f64::NAN, f64::NEG_INFINITY]);
    check(&run1("isinf", &[d.clone()], Attrs::new()), DType::Bool, &[2], &[0.0, 1.0]);
    check(&run1("isnan", &[d], Attrs::new()), DType::Bool, &[2], &[1.0, 0.0]);
    assert_eq!(
        err("isinf", &[x], int("detect_positive", 1)),
        "attribute `detect_positive` of `isinf` must be bool, got int"
    );
    assert!(err("isnan", &[tt(&[1], DType::I32, &[1.0])], Attrs::new()).contains("expected a float tensor"));
}

#[test]
fn mod_is_floored_or_truncated_like_onnx() {
    let a = tt(&[4], DType::I32, &[7.0, -7.0, 7.0, -7.0]);
    let b = tt(&[4], DType::I32, &[3.0, 3.0, -3.0, -3.0]);
    check(&run1("mod", &[a.clone(), b.clone()], Attrs::new()), DType::I32, &[4], &[1.0, 2.0, -2.0, -1.0]);
    let fmod = Attrs::new().with("fmod", AttrValue::Bool(true));
    check(&run1("mod", &[a.clone(), b], fmod.clone()), DType::I32, &[4], &[1.0, -1.0, 1.0, -1.0]);
    let x = f(&[2], &[5.5, -5.5]);
    check(&run1("mod", &[x.clone(), f(&[], &[2.0])], fmod.clone()), DType::F32, &[2], &[1.5, -1.5]);
    // i8::MIN mod -1 is 0, not an overflow.
    let m = run1("mod", &[tt(&[1], DType::I8, &[-128.0]), tt(&[1], DType::I8, &[-1.0])], Attrs::new());
    check(&m, DType::I8, &[1], &[0.0]);
    // Floored float mod follows numpy: the divisor's sign, also for zero and infinity.
    let fa = f(&[4], &[-4.3, 0.0, -3.0, 1.0]);
    let fb = f(&[4], &[2.1, -2.0, f64::INFINITY, f64::NEG_INFINITY]);
    let out = run1("mod", &[fa, fb], Attrs::new()).to_f64s();
    assert!((out[0] - 2.0).abs() < 1e-5, "{out:?}");
    assert_eq!(out[1].to_bits(), (-0.0f64).to_bits());
    assert_eq!(&out[2..], [f64::INFINITY, f64::NEG_INFINITY]);
    assert_eq!(err("mod", &[x.clone(), x], int("fmod", 1)), "attribute `fmod` of `mod` must be bool, got int");
    assert_eq!(err("mod", &[a.clone(), tt(&[1], DType::I32, &[0.0])], Attrs::new()), "mod: integer modulo by zero");
}

#[test]
fn logical_bitwise_and_shift_operators_check_their_dtypes() {
    let p = tt(&[4], DType::Bool, &[1.0, 1.0, 0.0, 0.0]);
    let q = tt(&[4], DType::Bool, &[1.0, 0.0, 1.0, 0.0]);
    check(&run1("logical_and", &[p.clone(), q.clone()], Attrs::new()), DType::Bool, &[4], &[1.0, 0.0, 0.0, 0.0]);
    check(&run1("logical_or", &[p.clone(), q.clone()], Attrs::new()), DType::Bool, &[4], &[1.0, 1.0, 1.0, 0.0]);
    check(&run1("logical_xor", &[p.clone(), q], Attrs::new()), DType::Bool, &[4], &[0.0, 1.0, 1.0, 0.0]);
    let a = tt(&[2], DType::I16, &[12.0, -1.0]);
    let b = tt(&[2], DType::I16, &[10.0, 6.0]);
    check(&run1("bitwise_and", &[a.clone(), b.clone()], Attrs::new()), DType::I16, &[2], &[8.0, 6.0]);
    check(&run1("bitwise_or", &[a.clone(), b.clone()], Attrs::new()), DType::I16, &[2], &[14.0, -1.0]);
    check(&run1("bitwise_xor", &[a.clone(), b], Attrs::new()), DType::I16, &[2], &[6.0, -7.0]);
    check(&run1("bitwise_not", &[a.clone()], Attrs::new()), DType::I16, &[2], &[-13.0, 0.0]);
    check(&run1("bitwise_not", &[tt(&[1], DType::U8, &[1.0])], Attrs::new()), DType::U8, &[1], &[254.0]);
    let u = tt(&[3], DType::U8, &[16.0, 255.0, 1.0]);
    let k = tt(&[3], DType::U8, &[2.0, 1.0, 8.0]);
    check(&run1("left_shift", &[u.clone(), k.clone()], Attrs::new()), DType::U8, &[3], &[64.0, 254.0, 0.0]);
    check(&run1("right_shift", &[u, k], Attrs::new()), DType::U8, &[3], &[4.0, 127.0, 0.0]);
    assert_eq!(
        err("logical_and", &[a.clone(), a.clone()], Attrs::new()),
        "logical_and: expected a bool tensor, got dtype i16"
    );
    assert_eq!(
        err("bitwise_or", &[p.clone(), p], Attrs::new()),
        "bitwise_or: expected an integer tensor, got dtype bool"
    );
    // Signed shifts: out-of-range amounts give 0 (left) or the sign (right, arithmetic).
    let s8 = tt(&[3], DType::I8, &[-8.0, 4.0, -1.0]);
    let by = tt(&[3], DType::I8, &[-1.0, 1.0, 8.0]);
    check(&run1("left_shift", &[s8.clone(), by.clone()], Attrs::new()), DType::I8, &[3], &[0.0, 8.0, 0.0]);
    check(&run1("right_shift", &[s8, by], Attrs::new()), DType::I8, &[3], &[-1.0, 2.0, -1.0]);
    check(
        &run1("left_shift", &[a.clone(), tt(&[], DType::I16, &[13.0])], Attrs::new()),
        DType::I16,
        &[2],
        &[-32768.0, -8192.0],
    );
    let fl = f(&[1], &[1.0]);
    assert_eq!(
        err("left_shift", &[fl.clone(), fl], Attrs::new()),
        "left_shift: expected an integer tensor, got dtype f32"
    );
}
