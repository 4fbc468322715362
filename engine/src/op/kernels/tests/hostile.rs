//! Issue #26 ("hostile input, round 2"): answers checked against ONNX's reference
//! (`onnx.reference`, onnx 1.20) and onnxruntime 1.23, and the bounds on kernel scratch and
//! folding cost.

use super::{check, f, ints, run1, tt};
use crate::ir::{AttrValue, Attrs, DType, Tensor, Type};
use crate::op::kernels::nn::{conv2d_scratch_elements, conv2d_tiled, CONV_TILE_ELEMENTS};
use crate::op::{self, DEFAULT_MAX_FOLD_COST};

const NAN: f64 = f64::NAN;

fn bounds(lo: f64, hi: f64) -> Attrs {
    Attrs::new().with("a_min", AttrValue::Float(lo)).with("a_max", AttrValue::Float(hi))
}

/// ONNX's Clip is `min(max(x, min), max)`: with min > max every number becomes max
/// (onnxruntime and the reference give `[nan, 0, 0, 0]`; this kernel gave `[nan, 0, 5, 0]`).
#[test]
fn clip_with_a_min_above_a_max_gives_a_max_like_onnx() {
    let x = f(&[4], &[NAN, -1.0, 3.0, 10.0]);
    check(&run1("clip", &[x], bounds(5.0, 0.0)), DType::F32, &[4], &[NAN, 0.0, 0.0, 0.0]);
    let h = tt(&[3], DType::F16, &[-1.0, 3.0, 10.0]);
    check(&run1("clip", &[h], bounds(5.0, 0.0)), DType::F16, &[3], &[0.0, 0.0, 0.0]);
    for dtype in [DType::I32, DType::I64] {
        let i = tt(&[3], dtype, &[-1.0, 3.0, 10.0]);
        check(&run1("clip", &[i], bounds(5.0, 0.0)), dtype, &[3], &[0.0, 0.0, 0.0]);
        // Bounds round inward; an empty integer range still gives max's floor.
        let i = tt(&[3], dtype, &[-1.0, 0.0, 1.0]);
        check(&run1("clip", &[i], bounds(0.5, 0.7)), dtype, &[3], &[0.0, 0.0, 0.0]);
    }
    // In-range bounds are unchanged.
    check(&run1("clip", &[f(&[3], &[-2.0, 0.5, 3.0])], bounds(-1.0, 1.0)), DType::F32, &[3], &[-1.0, 0.5, 1.0]);
}

fn row(vals: &[f64]) -> Tensor {
    f(&[1, 1, 1, vals.len() as u64], vals)
}

/// The reference pads with NaN and drops each window's NaNs, so MaxPool is the maximum of the
/// window's numbers (onnxruntime agrees whenever the NaN is not last in its window; it is
/// order-dependent there). A window with no number is NaN.
#[test]
fn max_pool2d_skips_nan_like_the_onnx_reference() {
    let k = |w: i64| ints("pool_size", &[1, w]);
    check(&run1("max_pool2d", &[row(&[NAN, 1.0, 3.0, 2.0])], k(4)), DType::F32, &[1, 1, 1, 1], &[3.0]);
    check(&run1("max_pool2d", &[row(&[3.0, 1.0, 2.0, NAN])], k(4)), DType::F32, &[1, 1, 1, 1], &[3.0]);
    check(&run1("max_pool2d", &[row(&[1.0, NAN, 3.0, 2.0])], k(2)), DType::F32, &[1, 1, 1, 3], &[1.0, 3.0, 3.0]);
    check(&run1("max_pool2d", &[row(&[NAN, NAN, NAN, 1.0])], k(2)), DType::F32, &[1, 1, 1, 3], &[NAN, NAN, 1.0]);
    let x = f(&[1, 1, 2, 2], &[NAN, 1.0, 2.0, 3.0]);
    let padded = ints("pool_size", &[2]).with("padding", AttrValue::Ints(vec![1].into()));
    let expected = [NAN, 1.0, 1.0, 2.0, 3.0, 3.0, 2.0, 3.0, 3.0];
    check(&run1("max_pool2d", &[x], padded), DType::F32, &[1, 1, 3, 3], &expected);
}

/// AveragePool in the reference: without `count_include_pad` a NaN is dropped like padding
/// (the mean of the window's numbers); with it, NaN propagates.
#[test]
fn avg_pool2d_nan_follows_the_onnx_reference() {
    let x = f(&[1, 1, 2, 2], &[NAN, 1.0, 2.0, 3.0]);
    let padded = ints("pool_size", &[2]).with("padding", AttrValue::Ints(vec![1].into()));
    let expected = [NAN, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.5, 3.0];
    check(&run1("avg_pool2d", &[x.clone()], padded.clone()), DType::F32, &[1, 1, 3, 3], &expected);
    let inc = padded.with("count_include_pad", AttrValue::Bool(true));
    let expected = [NAN, NAN, 0.25, NAN, NAN, 1.0, 0.5, 1.25, 0.75];
    check(&run1("avg_pool2d", &[x], inc), DType::F32, &[1, 1, 3, 3], &expected);
}

/// GlobalMaxPool, ReduceMax / ReduceMin and Max / Min propagate NaN in the reference.
#[test]
fn global_max_pool_reductions_and_maximum_propagate_nan() {
    let x = row(&[1.0, NAN, 3.0, 2.0]);
    check(&run1("global_max_pool2d", &[x.clone()], Attrs::new()), DType::F32, &[1, 1, 1, 1], &[NAN]);
    check(&run1("global_avg_pool2d", &[x.clone()], Attrs::new()), DType::F32, &[1, 1, 1, 1], &[NAN]);
    for name in ["max", "min", "sum"] {
        check(&run1(name, &[x.clone()], Attrs::new()), DType::F32, &[], &[NAN]);
    }
    let (a, b) = (f(&[2], &[NAN, 1.0]), f(&[2], &[2.0, NAN]));
    for name in ["maximum", "minimum"] {
        check(&run1(name, &[a.clone(), b.clone()], Attrs::new()), DType::F32, &[2], &[NAN, NAN]);
    }
}

/// Deterministic values without a random generator: small integers and halves, so every
/// tiling sums exactly the same products.
fn pattern(shape: &[u64], salt: u64) -> Tensor {
    let n: u64 = shape.iter().product();
    let vals: Vec<f64> = (0..n).map(|i| ((i * 7 + salt * 3) % 11) as f64 * 0.5 - 2.0).collect();
    f(shape, &vals)
}

fn conv_attrs(strides: i64, pad: &[i64], dilation: i64, groups: i64) -> Attrs {
    ints("strides", &[strides])
        .with("padding", AttrValue::Ints(pad.into()))
        .with("dilation", AttrValue::Ints(vec![dilation].into()))
        .with("groups", AttrValue::Int(groups))
}

/// Every tiling of the im2col equals the single tile of every output position (the plain
/// im2col this kernel used to be), over strides, asymmetric padding, dilation and groups.
#[test]
fn conv2d_tilings_equal_the_single_tile_im2col() {
    let cases: [(&[u64], &[u64], Attrs); 6] = [
        (&[1, 1, 5, 5], &[1, 1, 3, 3], Attrs::new()),
        (&[2, 3, 7, 6], &[4, 3, 3, 2], conv_attrs(2, &[1, 0, 2, 1], 1, 1)),
        (&[1, 4, 9, 9], &[6, 2, 3, 3], conv_attrs(1, &[2], 2, 2)),
        (&[1, 4, 6, 6], &[4, 1, 1, 1], conv_attrs(3, &[0], 1, 4)),
        (&[1, 2, 4, 8], &[3, 2, 4, 8], conv_attrs(1, &[0, 3], 1, 1)),
        (&[1, 1, 1, 1], &[1, 1, 1, 1], conv_attrs(5, &[3], 1, 1)),
    ];
    for (i, (xs, ws, attrs)) in cases.into_iter().enumerate() {
        let args = [pattern(xs, i as u64), pattern(ws, i as u64 + 1)];
        let whole = conv2d_tiled(&args, &attrs, Some(usize::MAX)).unwrap().remove(0);
        let positions = whole.shape()[2] * whole.shape()[3];
        for tile in [Some(1), Some(2), Some(3), Some(7), Some(positions - 1), None] {
            let tiled = conv2d_tiled(&args, &attrs, tile).unwrap().remove(0);
            assert!(tiled.bit_eq(&whole), "case {i}, tile {tile:?}: {tiled} vs {whole}");
        }
    }
}

fn conv_types(x: &[u64], w: &[u64]) -> [Type; 2] {
    [Type::tensor(x.to_vec(), DType::F32), Type::tensor(w.to_vec(), DType::F32)]
}

/// A large kernel no longer needs a column matrix of every output position: a 128 x 128
/// kernel over 256 x 256 data needed 16384 x 16641 elements (1.09 GB), a 256 x 256 kernel
/// over 510 x 510 data was refused as `[65536, 255, 255]`; both now take one tile.
#[test]
fn conv2d_scratch_is_one_bounded_tile_for_large_kernels() {
    let scratch = |x: &[u64], w: &[u64]| conv2d_scratch_elements(&conv_types(x, w), &Attrs::new()).unwrap();
    assert!(scratch(&[1, 1, 256, 256], &[1, 1, 128, 128]) <= CONV_TILE_ELEMENTS);
    assert_eq!(scratch(&[1, 1, 510, 510], &[1, 1, 256, 256]), CONV_TILE_ELEMENTS, "16 positions per tile");
    // Bounded by the constant or by one weight column, whatever the data size.
    for (x, w) in [
        (&[1, 3, 224, 224][..], &[64, 3, 7, 7][..]),
        (&[8, 512, 64, 64], &[512, 512, 3, 3]),
        (&[1, 1024, 300, 300], &[1, 1024, 32, 32]),
    ] {
        let column: u64 = w[1..].iter().product();
        assert!(scratch(x, w) <= CONV_TILE_ELEMENTS.max(column), "{x:?} {w:?}");
    }
    // A 48 x 48 kernel (4608-row tiles of 227 positions; the plain im2col would be
    // 4608 x 289) computes what a direct loop does.
    let (x, w) = (pattern(&[1, 2, 64, 64], 1), pattern(&[2, 2, 48, 48], 2));
    let out = run1("conv2d", &[x.clone(), w.clone()], Attrs::new());
    assert_eq!(out.shape(), [1, 2, 17, 17]);
    let (xv, wv, got) = (x.to_f64s(), w.to_f64s(), out.to_f64s());
    for (oc, oy, ox) in [(0, 0, 0), (1, 16, 16), (0, 5, 11), (1, 9, 2)] {
        let mut acc = 0.0;
        for c in 0..2 {
            for i in 0..48 {
                for j in 0..48 {
                    acc += xv[(c * 64 + oy + i) * 64 + ox + j] * wv[((oc * 2 + c) * 48 + i) * 48 + j];
                }
            }
        }
        let g = got[(oc * 17 + oy) * 17 + ox];
        assert!((g - acc).abs() <= 1e-3 * (1.0 + acc.abs()), "({oc}, {oy}, {ox}): {g} vs {acc}");
    }
}

fn cost(name: &str, args: &[Type], attrs: &Attrs) -> u64 {
    let def = op::get(op::lookup(name).unwrap());
    let out = (def.type_rel)(args, attrs).unwrap();
    (def.cost)(args, attrs, &out)
}

/// The cost estimates: linear operators count their elements, windows and inner products
/// multiply; the hostile calls are far over the folding budget, real folds far under.
#[test]
fn operator_costs_scale_with_windows_and_inner_products() {
    let t = |s: &[u64]| Type::tensor(s.to_vec(), DType::F32);
    assert_eq!(cost("add", &[t(&[4, 4]), t(&[4])], &Attrs::new()), 16 + 4 + 16);
    assert_eq!(cost("sum", &[t(&[8, 8])], &Attrs::new()), 64 + 1);
    assert_eq!(cost("matmul", &[t(&[2, 3]), t(&[3, 5])], &Attrs::new()), 6 + 15 + 10 + 10 * 3);
    assert_eq!(cost("dense", &[t(&[2, 3]), t(&[5, 3])], &Attrs::new()), 6 + 15 + 10 + 10 * 3);
    let pool = ints("pool_size", &[1024, 1024]).with("padding", AttrValue::Ints(vec![511].into()));
    let hostile = cost("max_pool2d", &[t(&[1, 1, 1024, 1024])], &pool);
    assert_eq!(hostile, (1 << 20) + 1023 * 1023 + 1023 * 1023 * (1 << 20));
    assert!(hostile > DEFAULT_MAX_FOLD_COST);
    let conv = cost("conv2d", &[t(&[1, 1, 510, 510]), t(&[1, 1, 256, 256])], &Attrs::new());
    assert!(conv >= 255 * 255 * 65536, "over the budget ({DEFAULT_MAX_FOLD_COST}) by 4x");
    let transpose = cost("conv2d_transpose", &[t(&[1, 2, 3, 3]), t(&[2, 4, 2, 2])], &Attrs::new());
    assert_eq!(transpose, 18 + 32 + 4 * 4 * 4 + 18 * 16);
    let lrn = Attrs::new().with("size", AttrValue::Int(1 << 40));
    assert_eq!(cost("lrn", &[t(&[1, 3, 2, 2])], &lrn), 24 + 12 * 3, "at most every channel");
    // A 1000 x 1000 matmul is within the budget, and so is scaling a 512-channel 3 x 3 conv
    // weight (what FoldScaleAxis leaves to fold).
    assert!(cost("matmul", &[t(&[1000, 1000]), t(&[1000, 1000])], &Attrs::new()) <= DEFAULT_MAX_FOLD_COST);
    assert!(cost("multiply", &[t(&[512, 512, 3, 3]), t(&[512, 1, 1, 1])], &Attrs::new()) < DEFAULT_MAX_FOLD_COST);
    // Overflow saturates.
    let huge = cost("conv2d", &[t(&[1 << 20, 1 << 20, 1 << 12, 1 << 12]), t(&[1 << 20, 1 << 20, 1, 1])], &Attrs::new());
    assert_eq!(huge, u64::MAX);
}
