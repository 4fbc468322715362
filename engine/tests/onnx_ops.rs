//! The operators added for ONNX import through the text format and the interpreter: every
//! call, with its attributes, survives a parse/print round trip, evaluates, and yields a value
//! of the function's declared type with the expected elements.

use passel_engine::interp::eval_function;
use passel_engine::ir::{module_structural_eq, parse_module, print_module};

/// One function per operator: (name, body, result type, expected elements in row-major order).
const CASES: &[(&str, &str, &str, &[f64])] = &[
    ("clip", "clip(tensor<(3,), f32>[-2.0, 0.5, 3.0], a_min=-1.0, a_max=1.0)", "Tensor[(3,), f32]", &[-1.0, 0.5, 1.0]),
    ("clip_int", "clip(tensor<(2,), i32>[-9, 9], a_min=-1, a_max=3)", "Tensor[(2,), i32]", &[-1.0, 3.0]),
    ("hard_sigmoid", "hard_sigmoid(tensor<(2,), f32>[0.0, 9.0], alpha=0.5, beta=0.25)", "Tensor[(2,), f32]", &[0.25, 1.0]),
    ("hard_swish", "hard_swish(tensor<(2,), f32>[3.0, -3.0])", "Tensor[(2,), f32]", &[3.0, 0.0]),
    ("erf", "erf(tensor<(2,), f32>[0.0, 10.0])", "Tensor[(2,), f32]", &[0.0, 1.0]),
    ("reciprocal", "reciprocal(tensor<(1,), f32>[4.0])", "Tensor[(1,), f32]", &[0.25]),
    ("abs", "abs(tensor<(2,), i64>[-3, 2])", "Tensor[(2,), i64]", &[3.0, 2.0]),
    ("logical_not", "logical_not(tensor<(2,), bool>[true, false])", "Tensor[(2,), bool]", &[0.0, 1.0]),
    ("gelu", "gelu(tensor<(1,), f32>[0.0], approximate=\"none\")", "Tensor[(1,), f32]", &[0.0]),
    ("min", "min(tensor<(2, 2), f32>[1.0, -2.0, 3.0, 4.0], axis=[0], keepdims=true)", "Tensor[(1, 2), f32]", &[1.0, -2.0]),
    ("take", "take(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0], tensor<(1,), i32>[-1], axis=1)", "Tensor[(2, 1), f32]", &[2.0, 4.0]),
    (
        "strided_slice",
        "strided_slice(tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0], begin=[-1], end=[0], strides=[-2], axes=[0])",
        "Tensor[(2,), f32]",
        &[4.0, 2.0],
    ),
    (
        "pad",
        "pad(tensor<(2,), f32>[1.0, 2.0], pad_width=[2, 1], pad_value=0.0, pad_mode=\"reflect\")",
        "Tensor[(5,), f32]",
        &[1.0, 2.0, 1.0, 2.0, 1.0],
    ),
    ("trilu", "trilu(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0], upper=false, k=0)", "Tensor[(2, 2), f32]", &[1.0, 0.0, 3.0, 4.0]),
    (
        "resize2d",
        "resize2d(tensor<(1, 2), f32>[1.0, 3.0], size=[1, 4], method=\"linear\", coordinate_transformation_mode=\"align_corners\", rounding_method=\"floor\", cubic_alpha=-0.5, exclude_outside=false)",
        "Tensor[(1, 4), f32]",
        &[1.0, 1.6666666, 2.3333333, 3.0],
    ),
    (
        "conv2d_transpose",
        "conv2d_transpose(tensor<(1, 1, 1, 1), f32>[2.0], tensor<(1, 1, 1, 2), f32>[1.0, 3.0], strides=[1], padding=[0], dilation=[1], groups=1, output_padding=[0])",
        "Tensor[(1, 1, 1, 2), f32]",
        &[2.0, 6.0],
    ),
    (
        "max_pool2d",
        "max_pool2d(tensor<(1, 1, 1, 3), f32>[1.0, 3.0, 2.0], pool_size=[1, 2], strides=[1, 2], padding=[0, 0, 0, 0], dilation=[1], ceil_mode=true)",
        "Tensor[(1, 1, 1, 2), f32]",
        &[3.0, 2.0],
    ),
    (
        "avg_pool2d",
        "avg_pool2d(tensor<(1, 1, 1, 2), f32>[1.0, 3.0], pool_size=[1, 2], padding=[0, 1, 0, 0], count_include_pad=false, ceil_mode=false)",
        "Tensor[(1, 1, 1, 2), f32]",
        &[1.0, 2.0],
    ),
    ("global_avg_pool2d", "global_avg_pool2d(tensor<(1, 1, 1, 2), f32>[1.0, 3.0])", "Tensor[(1, 1, 1, 1), f32]", &[2.0]),
    ("global_max_pool2d", "global_max_pool2d(tensor<(1, 1, 1, 2), f32>[1.0, 3.0])", "Tensor[(1, 1, 1, 1), f32]", &[3.0]),
    (
        "lrn",
        "lrn(tensor<(1, 1, 1, 1), f32>[2.0], size=1, alpha=1.0, beta=1.0, bias=0.0)",
        "Tensor[(1, 1, 1, 1), f32]",
        &[0.5],
    ),
    ("matmul", "matmul(tensor<(2,), f32>[1.0, 2.0], tensor<(2,), f32>[3.0, 4.0])", "Tensor[(), f32]", &[11.0]),
    ("split", "split(tensor<(3,), f32>[1.0, 2.0, 3.0], indices=[1]).1", "Tensor[(2,), f32]", &[2.0, 3.0]),
    (
        "gather_elements",
        "gather_elements(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0], tensor<(2, 1), i64>[1, 0], axis=1)",
        "Tensor[(2, 1), f32]",
        &[2.0, 3.0],
    ),
    (
        "scatter_elements",
        "scatter_elements(tensor<(3,), f32>[1.0, 2.0, 3.0], tensor<(2,), i64>[0, 0], tensor<(2,), f32>[5.0, 6.0], axis=0, reduction=\"add\")",
        "Tensor[(3,), f32]",
        &[12.0, 2.0, 3.0],
    ),
    (
        "scatter_nd",
        "scatter_nd(tensor<(2, 2), i32>[1, 2, 3, 4], tensor<(1, 1), i64>[1], tensor<(1, 2), i32>[7, 8], reduction=\"none\")",
        "Tensor[(2, 2), i32]",
        &[1.0, 2.0, 7.0, 8.0],
    ),
    (
        "one_hot",
        "one_hot(tensor<(2,), i64>[0, 2], tensor<(2,), f32>[0.0, 1.0], depth=3, axis=-1)",
        "Tensor[(2, 3), f32]",
        &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    ),
    (
        "argmax",
        "argmax(tensor<(2, 2), f32>[1.0, 5.0, 7.0, 2.0], axis=1, keepdims=false, select_last_index=false)",
        "Tensor[(2,), i64]",
        &[1.0, 0.0],
    ),
    ("argmin", "argmin(tensor<(3,), i32>[3, -1, 2], axis=0, keepdims=true)", "Tensor[(1,), i64]", &[1.0]),
    ("cumsum", "cumsum(tensor<(3,), f32>[1.0, 2.0, 3.0], axis=0, exclusive=true, reverse=false)", "Tensor[(3,), f32]", &[0.0, 1.0, 3.0]),
    ("cumprod", "cumprod(tensor<(3,), i64>[2, 3, 4], axis=0, reverse=true)", "Tensor[(3,), i64]", &[24.0, 12.0, 4.0]),
    ("prod", "prod(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0], axis=[1], keepdims=false)", "Tensor[(2,), f32]", &[2.0, 12.0]),
    (
        "einsum",
        "einsum(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0], tensor<(2,), f32>[1.0, 1.0], equation=\"ij,j->i\")",
        "Tensor[(2,), f32]",
        &[3.0, 7.0],
    ),
    (
        "grid_sample",
        "grid_sample(tensor<(1, 1, 1, 2), f32>[1.0, 3.0], tensor<(1, 1, 1, 2), f32>[0.0, 0.0], mode=\"linear\", padding_mode=\"zeros\", align_corners=true)",
        "Tensor[(1, 1, 1, 1), f32]",
        &[2.0],
    ),
    ("bitcast", "bitcast(tensor<(1,), f32>[1.0], dtype=i32)", "Tensor[(1,), i32]", &[1065353216.0]),
];

fn source() -> String {
    CASES.iter().map(|(name, body, ty, _)| format!("def @{name}() -> {ty} {{\n  {body}\n}}\n\n")).collect()
}

#[test]
fn new_operators_round_trip_through_the_text_format() {
    let src = source();
    let m = parse_module(&src).unwrap_or_else(|e| panic!("parse failed:\n{e}"));
    let text = print_module(&m);
    let m2 = parse_module(&text).unwrap_or_else(|e| panic!("reparse failed:\n{e}\n{text}"));
    assert!(module_structural_eq(&m, &m2), "not structurally equal after round trip:\n{text}");
    assert_eq!(print_module(&m2), text);
    // Every attribute is printed back.
    for key in [
        "a_min=",
        "approximate=\"none\"",
        "pad_mode=\"reflect\"",
        "coordinate_transformation_mode=",
        "output_padding=",
        "count_include_pad=false",
        "indices=[1]",
    ] {
        assert!(text.contains(key), "{key} missing from:\n{text}");
    }
}

#[test]
fn new_operators_evaluate_in_the_interpreter() {
    let m = parse_module(&source()).unwrap();
    for (name, _, ty, expected) in CASES {
        let v = eval_function(&m, name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let Some(t) = v.as_tensor() else { panic!("{name}: not a tensor") };
        assert_eq!(t.ty().to_string(), *ty, "{name}");
        let got = t.to_f64s();
        assert_eq!(got.len(), expected.len(), "{name}");
        for (g, e) in got.iter().zip(*expected) {
            assert!((g - e).abs() <= 1e-6 * (1.0 + e.abs()), "{name}: got {got:?}, expected {expected:?}");
        }
    }
}

#[test]
fn a_kernel_error_of_a_new_operator_is_an_evaluation_error() {
    let src = "def @main() -> Tensor[(1,), f32] {\n  take(tensor<(2,), f32>[1.0, 2.0], tensor<(1,), i64>[2])\n}\n";
    let m = parse_module(src).unwrap();
    let e = eval_function(&m, "main", &[]).unwrap_err();
    assert!(e.to_string().contains("take: index 2 is out of range for axis 0 of length 2"), "{e}");
}
