//! Hand-computed results for the element-indexing operators of ONNX import: `gather_elements`,
//! `scatter_elements`, `scatter_nd`, `one_hot`, `einsum` and `grid_sample`.

use super::{check, err, f, int, rel_err, run, run1, tt, ty};
use crate::ir::{AttrValue, Attrs, DType, Tensor};

fn i64s(shape: &[u64], vals: &[f64]) -> Tensor {
    tt(shape, DType::I64, vals)
}

fn s(key: &str, v: &str) -> Attrs {
    Attrs::new().with(key, AttrValue::Str(v.into()))
}

#[test]
fn gather_elements_follows_the_indices_along_the_axis() {
    // onnx's example: [[1, 2], [3, 4]] with [[0, 0], [1, 0]] on axis 1.
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let i = i64s(&[2, 2], &[0.0, 0.0, 1.0, 0.0]);
    check(&run1("gather_elements", &[x.clone(), i], int("axis", 1)), DType::F32, &[2, 2], &[1.0, 1.0, 4.0, 3.0]);
    // Axis 0, fewer index rows than data rows, negative index.
    let i = tt(&[1, 2], DType::I32, &[-1.0, 0.0]);
    check(&run1("gather_elements", &[x.clone(), i], Attrs::new()), DType::F32, &[1, 2], &[3.0, 2.0]);
    assert_eq!(
        err("gather_elements", &[x.clone(), i64s(&[1, 1], &[2.0])], Attrs::new()),
        "gather_elements: index 2 is out of range for axis 0 of length 2"
    );
    assert_eq!(
        rel_err("gather_elements", &[ty(&[2, 2], DType::F32), ty(&[3, 2], DType::I64)], int("axis", 1)),
        "gather_elements: indices of shape (3, 2) do not fit data of shape (2, 2) (same rank, no longer on axes other than 1)"
    );
    assert_eq!(
        rel_err("gather_elements", &[ty(&[2], DType::F32), ty(&[2], DType::F32)], Attrs::new()),
        "gather_elements: indices must have dtype i32 or i64, got f32"
    );
}

#[test]
fn scatter_elements_writes_and_reduces_in_index_order() {
    // onnx's example: data [[1, 2, 3, 4, 5]], indices [[1, 3]], updates [[1.1, 2.1]], axis 1.
    let x = f(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let i = i64s(&[1, 2], &[1.0, 3.0]);
    let u = f(&[1, 2], &[1.1, 2.1]);
    let axis1 = int("axis", 1);
    check(
        &run1("scatter_elements", &[x.clone(), i, u], axis1.clone()),
        DType::F32,
        &[1, 5],
        &[1.0, 1.1, 3.0, 2.1, 5.0],
    );
    // A repeated index: "none" keeps the last update, "add" and "max" combine both.
    let i = i64s(&[1, 2], &[1.0, -4.0]);
    let u = f(&[1, 2], &[10.0, 20.0]);
    let with = |r: &str| axis1.clone().with("reduction", AttrValue::Str(r.into()));
    let none = run1("scatter_elements", &[x.clone(), i.clone(), u.clone()], with("none"));
    check(&none, DType::F32, &[1, 5], &[1.0, 20.0, 3.0, 4.0, 5.0]);
    let add = run1("scatter_elements", &[x.clone(), i.clone(), u.clone()], with("add"));
    check(&add, DType::F32, &[1, 5], &[1.0, 32.0, 3.0, 4.0, 5.0]);
    let mul = run1("scatter_elements", &[x.clone(), i.clone(), u.clone()], with("mul"));
    check(&mul, DType::F32, &[1, 5], &[1.0, 400.0, 3.0, 4.0, 5.0]);
    let min = run1("scatter_elements", &[x.clone(), i.clone(), u.clone()], with("min"));
    check(&min, DType::F32, &[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    // Integers wrap.
    let xi = tt(&[2], DType::I8, &[100.0, 0.0]);
    let r = run1("scatter_elements", &[xi, i64s(&[1], &[0.0]), tt(&[1], DType::I8, &[100.0])], s("reduction", "add"));
    check(&r, DType::I8, &[2], &[-56.0, 0.0]);
    assert_eq!(
        err("scatter_elements", &[x.clone(), i64s(&[1, 1], &[5.0]), f(&[1, 1], &[0.0])], axis1.clone()),
        "scatter_elements: index 5 is out of range for axis 1 of length 5"
    );
    assert_eq!(
        err("scatter_elements", &[x.clone(), i64s(&[1, 1], &[0.0]), f(&[1, 1], &[0.0])], s("reduction", "avg")),
        "scatter_elements: `reduction` must be one of none, add, mul, max, min, got \"avg\""
    );
    assert_eq!(
        rel_err("scatter_elements", &[ty(&[2], DType::F32), ty(&[1], DType::I64), ty(&[2], DType::F32)], Attrs::new()),
        "scatter_elements: updates must have the indices' shape (1,) and the data's dtype f32, got Tensor[(2,), f32]"
    );
}

#[test]
fn scatter_nd_writes_slices_at_index_tuples() {
    // onnx's example 1: data [1..8], indices [[4], [3], [1], [7]], updates [9, 10, 11, 12].
    let x = f(&[8], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let i = i64s(&[4, 1], &[4.0, 3.0, 1.0, 7.0]);
    let u = f(&[4], &[9.0, 10.0, 11.0, 12.0]);
    check(
        &run1("scatter_nd", &[x, i, u], Attrs::new()),
        DType::F32,
        &[8],
        &[1.0, 11.0, 3.0, 10.0, 9.0, 6.0, 7.0, 12.0],
    );
    // Rows of a 2x2 matrix, added twice to row 0.
    let x = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let i = i64s(&[2, 1], &[0.0, 0.0]);
    let u = f(&[2, 2], &[10.0, 20.0, 30.0, 40.0]);
    let r = run1("scatter_nd", &[x.clone(), i, u], s("reduction", "add"));
    check(&r, DType::F32, &[2, 2], &[41.0, 62.0, 3.0, 4.0]);
    // Whole-index tuples address single elements.
    let r = run1("scatter_nd", &[x.clone(), i64s(&[1, 2], &[1.0, -1.0]), f(&[1], &[9.0])], Attrs::new());
    check(&r, DType::F32, &[2, 2], &[1.0, 2.0, 3.0, 9.0]);
    assert_eq!(
        rel_err("scatter_nd", &[ty(&[2, 2], DType::F32), ty(&[1, 3], DType::I64), ty(&[1], DType::F32)], Attrs::new()),
        "scatter_nd: the indices' last dimension 3 must be between 1 and the data's rank 2"
    );
    assert_eq!(
        rel_err("scatter_nd", &[ty(&[2, 2], DType::F32), ty(&[1, 1], DType::I64), ty(&[1], DType::F32)], Attrs::new()),
        "scatter_nd: updates must have shape (1, 2) and the data's dtype f32, got Tensor[(1,), f32]"
    );
}

#[test]
fn one_hot_inserts_the_depth_axis() {
    let values = f(&[2], &[0.0, 5.0]);
    let depth = |d: i64, axis: i64| int("depth", d).with("axis", AttrValue::Int(axis));
    let i = tt(&[3], DType::F32, &[1.9, -1.0, 3.0]);
    // Indices truncate; -1 counts from depth; 3 is out of range: a line of `off`.
    check(
        &run1("one_hot", &[i.clone(), values.clone()], depth(3, -1)),
        DType::F32,
        &[3, 3],
        &[0.0, 5.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0],
    );
    check(
        &run1("one_hot", &[i, values.clone()], depth(3, 0)),
        DType::F32,
        &[3, 3],
        &[0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 5.0, 0.0],
    );
    assert_eq!(
        rel_err("one_hot", &[ty(&[3], DType::I64), ty(&[3], DType::F32)], depth(3, -1)),
        "one_hot: values must be [off, on] of shape (2,), got (3,)"
    );
    assert_eq!(
        rel_err("one_hot", &[ty(&[3], DType::I64), ty(&[2], DType::F32)], depth(0, -1)),
        "one_hot: `depth` must be positive, got 0"
    );
}

#[test]
fn einsum_contracts_transposes_and_takes_diagonals() {
    let a = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let eq = |e: &str| s("equation", e);
    check(&run1("einsum", &[a.clone(), b.clone()], eq("ij,jk->ik")), DType::F32, &[2, 2], &[4.0, 5.0, 10.0, 11.0]);
    check(&run1("einsum", &[a.clone()], eq("ij->ji")), DType::F32, &[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    check(&run1("einsum", &[a.clone()], eq("ij->i")), DType::F32, &[2], &[6.0, 15.0]);
    // Implicit output: the letters seen once, sorted (here `ik`).
    check(&run1("einsum", &[a.clone(), b.clone()], eq("ij,jk")), DType::F32, &[2, 2], &[4.0, 5.0, 10.0, 11.0]);
    // Diagonal and trace; `...` over a batch axis.
    let m = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(&run1("einsum", &[m.clone()], eq("ii->i")), DType::F32, &[2], &[1.0, 4.0]);
    check(&run1("einsum", &[m.clone()], eq("ii")), DType::F32, &[], &[5.0]);
    let batch = f(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &run1("einsum", &[batch, m.clone()], eq("...ij,jk->...ik")),
        DType::F32,
        &[2, 1, 2],
        &[7.0, 10.0, 15.0, 22.0],
    );
    let i = tt(&[2], DType::I32, &[3.0, 4.0]);
    check(&run1("einsum", &[i.clone(), i], eq("i,i")), DType::I32, &[], &[25.0]);
    assert_eq!(err("einsum", &[a.clone(), b.clone()], eq("ij,kl->ik,")), "einsum: the output side must be one term");
    assert_eq!(err("einsum", &[a.clone(), a.clone()], eq("ij,jk->ik")), "einsum: label 'j' has lengths 3 and 2");
    assert_eq!(
        err("einsum", &[a.clone()], eq("ij,jk->ik")),
        "einsum: the equation has 2 inputs, but 1 arguments were given"
    );
    assert_eq!(err("einsum", &[a], eq("i1->i")), "einsum: term \"i1\": '1' is not a letter or `...`");
}

#[test]
fn grid_sample_interpolates_and_pads() {
    // A 1x1x2x2 image sampled at its centre, a corner and outside.
    let x = f(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let grid = f(&[1, 1, 3, 2], &[0.0, 0.0, -1.0, -1.0, 2.0, 0.0]);
    let attrs = |mode: &str, pad: &str, align: bool| {
        s("mode", mode).with("padding_mode", AttrValue::Str(pad.into())).with("align_corners", AttrValue::Bool(align))
    };
    // align_corners: (-1, -1) is pixel (0, 0); (2, 0) is pixel (1.5, 0.5), half outside.
    check(
        &run1("grid_sample", &[x.clone(), grid.clone()], attrs("linear", "zeros", true)),
        DType::F32,
        &[1, 1, 1, 3],
        &[2.5, 1.0, 1.5],
    );
    check(
        &run1("grid_sample", &[x.clone(), grid.clone()], attrs("linear", "border", true)),
        DType::F32,
        &[1, 1, 1, 3],
        &[2.5, 1.0, 3.0],
    );
    // Without align_corners (-1, -1) is the outer corner, a quarter of pixel (0, 0).
    check(
        &run1("grid_sample", &[x.clone(), grid.clone()], attrs("linear", "zeros", false)),
        DType::F32,
        &[1, 1, 1, 3],
        &[2.5, 0.25, 0.0],
    );
    // Nearest rounds halves to even: the centre (0.5, 0.5) is pixel (0, 0).
    check(
        &run1("grid_sample", &[x.clone(), grid.clone()], attrs("nearest", "zeros", true)),
        DType::F32,
        &[1, 1, 1, 3],
        &[1.0, 1.0, 0.0],
    );
    // Reflection folds pixel 1.5 back to 0.5 (the border is [0, 1] with align_corners).
    check(
        &run1("grid_sample", &[x.clone(), grid.clone()], attrs("linear", "reflection", true)),
        DType::F32,
        &[1, 1, 1, 3],
        &[2.5, 1.0, 2.5],
    );
    assert_eq!(
        rel_err("grid_sample", &[ty(&[1, 1, 2, 2], DType::F32), ty(&[1, 1, 3, 3], DType::F32)], Attrs::new()),
        "grid_sample: x [N, C, D1…Dr] (r >= 1) needs a grid [N, O1…Or, r]; got x (1, 1, 2, 2) and grid (1, 1, 3, 3)"
    );
    assert!(run("grid_sample", &[x, grid], s("mode", "area")).is_err());
}
