//! Hand-computed results for the operators along one axis: `argmax`, `argmin`, `topk`,
//! `cumsum`, `cumprod` and the `prod` reduction.

use super::{check, err, f, int, ints, rel_err, run, run1, tt, ty};
use crate::ir::{AttrValue, Attrs, DType};

#[test]
fn argmax_and_argmin_pick_first_or_last() {
    let x = f(&[2, 3], &[1.0, 5.0, 5.0, 7.0, -1.0, 7.0]);
    check(&run1("argmax", &[x.clone()], int("axis", 1)), DType::I64, &[2], &[1.0, 0.0]);
    let last = int("axis", 1).with("select_last_index", AttrValue::Bool(true));
    check(&run1("argmax", &[x.clone()], last.clone()), DType::I64, &[2], &[2.0, 2.0]);
    let keep = int("axis", 0).with("keepdims", AttrValue::Bool(true));
    check(&run1("argmin", &[x.clone()], keep), DType::I64, &[1, 3], &[0.0, 1.0, 0.0]);
    // NaN counts as the largest value.
    check(&run1("argmax", &[f(&[3], &[1.0, f64::NAN, 9.0])], Attrs::new()), DType::I64, &[], &[1.0]);
    check(
        &run1("argmin", &[tt(&[3], DType::I32, &[4.0, -2.0, -2.0])], last.with("axis", AttrValue::Int(0))),
        DType::I64,
        &[],
        &[2.0],
    );
    assert_eq!(
        rel_err("argmax", &[ty(&[0, 2], DType::F32)], Attrs::new()),
        "argmax: cannot take the argmax of (0, 2) over the empty axis 0"
    );
    assert_eq!(
        rel_err("argmin", &[ty(&[2], DType::Bool)], Attrs::new()),
        "argmin: expected a numeric tensor, got dtype bool"
    );
}

#[test]
fn topk_returns_sorted_values_and_positions() {
    let x = f(&[2, 4], &[1.0, 4.0, 2.0, 4.0, 0.0, -1.0, 3.0, 2.0]);
    let out = run("topk", &[x.clone()], int("k", 2)).unwrap();
    // Equal values come by position.
    check(&out[0], DType::F32, &[2, 2], &[4.0, 4.0, 3.0, 2.0]);
    check(&out[1], DType::I64, &[2, 2], &[1.0, 3.0, 2.0, 3.0]);
    let smallest = int("k", 1).with("largest", AttrValue::Bool(false)).with("axis", AttrValue::Int(0));
    let out = run("topk", &[x.clone()], smallest).unwrap();
    check(&out[0], DType::F32, &[1, 4], &[0.0, -1.0, 2.0, 2.0]);
    check(&out[1], DType::I64, &[1, 4], &[1.0, 1.0, 0.0, 1.0]);
    assert_eq!(err("topk", &[x.clone()], int("k", 5)), "topk: k = 5 must be between 0 and the length 4 of axis 1");
    assert_eq!(err("topk", &[x], Attrs::new()), "operator `topk` needs attribute `k`");
}

#[test]
fn cumsum_and_cumprod_scan_forward_backward_and_exclusive() {
    let x = f(&[4], &[1.0, 2.0, 3.0, 4.0]);
    check(&run1("cumsum", &[x.clone()], Attrs::new()), DType::F32, &[4], &[1.0, 3.0, 6.0, 10.0]);
    let ex = Attrs::new().with("exclusive", AttrValue::Bool(true));
    check(&run1("cumsum", &[x.clone()], ex.clone()), DType::F32, &[4], &[0.0, 1.0, 3.0, 6.0]);
    let rev = ex.clone().with("reverse", AttrValue::Bool(true));
    check(&run1("cumsum", &[x.clone()], rev.clone()), DType::F32, &[4], &[9.0, 7.0, 4.0, 0.0]);
    check(&run1("cumprod", &[x.clone()], Attrs::new()), DType::F32, &[4], &[1.0, 2.0, 6.0, 24.0]);
    check(&run1("cumprod", &[x], rev), DType::F32, &[4], &[24.0, 12.0, 4.0, 1.0]);
    let m = tt(&[2, 2], DType::I32, &[1.0, 2.0, 3.0, 4.0]);
    check(&run1("cumsum", &[m.clone()], int("axis", 1)), DType::I32, &[2, 2], &[1.0, 3.0, 3.0, 7.0]);
    check(&run1("cumsum", &[m.clone()], int("axis", -2)), DType::I32, &[2, 2], &[1.0, 2.0, 4.0, 6.0]);
    assert_eq!(err("cumsum", &[m], int("axis", 2)), "cumsum: axis 2 is out of range for a tensor of rank 2");
}

#[test]
fn prod_reduces_with_identity_one() {
    let x = f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    check(&run1("prod", &[x.clone()], ints("axis", &[1])), DType::F32, &[2], &[6.0, 120.0]);
    check(&run1("prod", &[x], Attrs::new()), DType::F32, &[], &[720.0]);
    check(&run1("prod", &[f(&[0], &[])], Attrs::new()), DType::F32, &[], &[1.0]);
    check(&run1("prod", &[tt(&[2], DType::I8, &[16.0, 16.0])], Attrs::new()), DType::I8, &[], &[0.0]);
}
