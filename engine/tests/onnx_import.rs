//! ONNX import of the small fixture models in `tests/data/onnx/` (written by
//! `scripts/onnx_fixtures.py`): structure of the imported module, opset variants,
//! `input_shapes`, shape-subgraph folding, zero-copy weights and every bad-input error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use expect_test::{expect, Expect};
use passel_engine::frontend::onnx::{
    import_onnx_bytes, ExternalData, ExternalDataError, ImportError, ImportOptions, UnsupportedOp,
};
use passel_engine::ir::{print_module, verify_module, Constant, ExprKind, Module};
use passel_engine::op;

fn fixture(name: &str) -> Bytes {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx").join(format!("{name}.onnx"));
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn import_with(name: &str, options: &ImportOptions) -> Result<Module, ImportError> {
    import_onnx_bytes(fixture(name), options)
}

fn import(name: &str) -> Result<Module, ImportError> {
    import_with(name, &ImportOptions::default())
}

/// Imports `name`, checks the module verifies and its text matches `expected`.
fn check(name: &str, expected: Expect) {
    let m = import(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name} does not verify: {e:?}"));
    expected.assert_eq(&print_module(&m));
}

fn same_text(a: &str, b: &str) {
    let (ma, mb) = (import(a).unwrap(), import(b).unwrap());
    assert_eq!(print_module(&ma), print_module(&mb), "{a} vs {b}");
}

fn error(name: &str) -> String {
    match import(name) {
        Ok(m) => panic!("{name} imported:\n{}", print_module(&m)),
        Err(e) => e.to_string(),
    }
}

/// Operator names of every call in `@main`, with their counts, sorted by name.
fn op_counts(m: &Module) -> Vec<(String, usize)> {
    let f = m.get("main").expect("@main");
    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in f.node_ids() {
        if let ExprKind::Call { op: o, .. } = f.kind(id) {
            *counts.entry(op::get(*o).name.to_string()).or_default() += 1;
        }
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort();
    v
}

#[test]
fn shape_subgraph_folds_to_a_constant_newshape() {
    // Shape -> Gather -> Unsqueeze -> Concat feeding Reshape: no shape op is left.
    check(
        "shape_subgraph",
        expect![[r#"
            def @main(%x: Tensor[(2, 3, 4), f32]) -> Tensor[(2, 12), f32] {
              let %y: Tensor[(2, 12), f32] = reshape(%x, newshape=[2, 12]);
              %y
            }
        "#]],
    );
}

#[test]
fn squeeze_axes_as_attribute_and_as_input_import_alike() {
    let expected = expect![[r#"
        def @main(%x: Tensor[(2, 1, 3), f32]) -> Tensor[(1, 2, 3), f32] {
          let %s: Tensor[(2, 3), f32] = reshape(%x, newshape=[2, 3]);
          let %y: Tensor[(1, 2, 3), f32] = reshape(%s, newshape=[1, 2, 3]);
          %y
        }
    "#]];
    same_text("squeeze_attr_opset11", "squeeze_input_opset13");
    check("squeeze_input_opset13", expected);
}

#[test]
fn clip_bounds_as_attributes_and_as_inputs_import_alike() {
    let expected = expect![[r#"
        def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
          let %y: Tensor[(4,), f32] = clip(%x, a_max=6.0, a_min=-1.0);
          %y
        }
    "#]];
    same_text("clip_attr_opset9", "clip_input_opset13");
    check("clip_input_opset13", expected);
}

#[test]
fn softmax_before_opset_13_coerces_to_2d() {
    check(
        "softmax_opset11",
        expect![[r#"
            def @main(%x: Tensor[(2, 3, 4), f32]) -> Tensor[(2, 3, 4), f32] {
              let %y_reshape: Tensor[(2, 12), f32] = reshape(%x, newshape=[2, 12]);
              let %y_softmax: Tensor[(2, 12), f32] = softmax(%y_reshape, axis=-1);
              let %y: Tensor[(2, 3, 4), f32] = reshape(%y_softmax, newshape=[2, 3, 4]);
              %y
            }
        "#]],
    );
}

#[test]
fn constant_of_shape_weights_stay_compact_fills() {
    check(
        "constant_of_shape_weights",
        expect![[r#"
            def @main(%x: Tensor[(1, 3, 4, 4), f32]) -> Tensor[(1, 4, 4, 4), f32] {
              let %y: Tensor[(1, 4, 4, 4), f32] = conv2d(%x, full<(4, 3, 1, 1), f32>(0.5), dilation=[1, 1], groups=1, padding=[0, 0, 0, 0], strides=[1, 1]);
              %y
            }
        "#]],
    );
}

#[test]
fn unsorted_nodes_are_converted_in_topological_order() {
    check(
        "unsorted_nodes",
        expect![[r#"
            def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
              let %a: Tensor[(2,), f32] = negative(%x);
              let %y: Tensor[(2,), f32] = relu(%a);
              %y
            }
        "#]],
    );
}

#[test]
fn constant_calls_fold_only_within_the_fold_limit() {
    check(
        "const_add",
        expect![[r#"
            def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
              let %y: Tensor[(4,), f32] = add(%x, tensor<(4,), f32>[11.0, 22.0, 33.0, 44.0]);
              %y
            }
        "#]],
    );
    let m = import_with("const_add", &ImportOptions { fold_limit: 3, ..ImportOptions::default() }).unwrap();
    verify_module(&m).unwrap();
    assert_eq!(op_counts(&m), vec![("add".to_string(), 2)]);
}

/// Issue #26: Clip with min > max gives max, as onnxruntime does (`[nan, 0, 0, 0]`), also
/// when folded at import.
#[test]
fn clip_with_min_above_max_folds_to_max_at_import() {
    check(
        "clip_min_above_max",
        expect![[r#"
            def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
              let %y: Tensor[(4,), f32] = add(%x, tensor<(4,), f32>[nan, 0.0, 0.0, 0.0]);
              %y
            }
        "#]],
    );
}

/// Issue #26: a MaxPool whose window is its whole 65536-element constant input is within
/// the fold limit but costs 4 * 10^9 window steps; the importer leaves it a call (by its cost
/// estimate, before evaluating anything).
#[test]
fn a_costly_constant_call_is_not_folded_at_import() {
    let m = import("max_pool_whole_window").unwrap();
    verify_module(&m).unwrap();
    assert_eq!(op_counts(&m), vec![("add".to_string(), 1), ("max_pool2d".to_string(), 1)]);
}

#[test]
fn transformer_block_keeps_onnx_names_and_returns_a_tuple() {
    let m = import("transformer_block").unwrap();
    verify_module(&m).unwrap();
    let text = print_module(&m);
    assert!(text.starts_with(
        "def @main(%ids: Tensor[(3,), i64], %mask: Tensor[(3, 3), bool]) -> (Tensor[(3, 4), f32], Tensor[(3, 3), f32])"
    ));
    assert!(text.contains("let %attn: Tensor[(3, 3), f32] = softmax(%masked, axis=1);"), "{text}");
    assert!(text.contains("(%out, %attn)"), "{text}");
    let counts = op_counts(&m);
    let expected: Vec<(String, usize)> = [
        ("add", 2),
        ("divide", 2),
        ("erf", 1),
        ("matmul", 3),
        ("mean", 2),
        ("multiply", 2),
        ("power", 1),
        ("softmax", 1),
        ("sqrt", 1),
        ("subtract", 1),
        ("take", 1),
        ("transpose", 1),
        ("where", 1),
    ]
    .iter()
    .map(|&(n, c)| (n.to_string(), c))
    .collect();
    assert_eq!(counts, expected);
}

#[test]
fn raw_weights_are_not_copied_at_import() {
    let bytes = fixture("conv_relu");
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    let m = import_onnx_bytes(bytes.clone(), &ImportOptions::default()).unwrap();
    let f = m.get("main").unwrap();
    let mut raw = 0;
    for id in f.node_ids() {
        if let ExprKind::Const { idx } = f.kind(id) {
            if let Constant::Raw { data, .. } = &**f.constant(*idx) {
                assert!(range.contains(&(data.as_ptr() as usize)), "raw weight outside the model buffer");
                raw += 1;
            }
        }
    }
    // The conv weight (4x3x3x3 = 108 floats) stays in the buffer; small tensors are dense.
    assert_eq!(raw, 1);
}

#[test]
fn conv_relu_imports_the_whole_classifier() {
    let m = import("conv_relu").unwrap();
    verify_module(&m).unwrap();
    let counts = op_counts(&m);
    let expected: Vec<(String, usize)> = [
        ("add", 1),
        ("bias_add", 1),
        ("conv2d", 1),
        ("dense", 1),
        ("global_avg_pool2d", 1),
        ("max_pool2d", 1),
        ("relu", 1),
        ("reshape", 1),
        ("softmax", 1),
    ]
    .iter()
    .map(|&(n, c)| (n.to_string(), c))
    .collect();
    assert_eq!(counts, expected);
    let text = print_module(&m);
    assert!(text.contains("padding=[1, 1, 1, 1]"), "{text}");
}

#[test]
fn symbolic_input_needs_an_input_shape() {
    let e = error("symbolic_batch");
    assert_eq!(e, "graph input `x`: dimension 0 is symbolic (`batch`); give the shape with --input-shape x=d0,d1,…");
    let given = |shape: Vec<u64>| ImportOptions { input_shapes: vec![("x".into(), shape)], ..ImportOptions::default() };
    check_text(
        import_with("symbolic_batch", &given(vec![5, 3])).unwrap(),
        expect![[r#"
            def @main(%x: Tensor[(5, 3), f32]) -> Tensor[(5, 3), f32] {
              let %y: Tensor[(5, 3), f32] = relu(%x);
              %y
            }
        "#]],
    );
    let e = import_with("symbolic_batch", &given(vec![5, 4])).unwrap_err().to_string();
    assert_eq!(e, "graph input `x`: --input-shape gives 4 for dimension 1, the model fixes it to 3");
    let e = import_with("symbolic_batch", &given(vec![5])).unwrap_err().to_string();
    assert_eq!(e, "graph input `x`: --input-shape gives 1 dimensions but the model declares 2");
    let wrong = ImportOptions { input_shapes: vec![("input".into(), vec![1])], ..ImportOptions::default() };
    let e = import_with("symbolic_batch", &wrong).unwrap_err().to_string();
    assert_eq!(e, "graph input `input`: --input-shape names no graph input (inputs: x)");
}

fn check_text(m: Module, expected: Expect) {
    verify_module(&m).unwrap();
    expected.assert_eq(&print_module(&m));
}

#[test]
fn unsupported_operators_are_listed_in_one_error() {
    match import("bad_unsupported") {
        Err(ImportError::Unsupported(ops)) => assert_eq!(
            ops,
            vec![
                UnsupportedOp { op_type: "custom::LSTMish".into(), count: 1, first_node: "first_lstm".into() },
                UnsupportedOp { op_type: "Unique".into(), count: 3, first_node: "unique_1".into() },
            ]
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error("bad_unsupported"),
        "unsupported ONNX operators: custom::LSTMish (1 node, first `first_lstm`), Unique (3 nodes, first `unique_1`)"
    );
}

/// Issue #26 item 14: ONNX names reach messages escaped (a NUL, a newline and a zero-width
/// space printed raw) and cut (a 100,000-character op type made a 100 KB error).
#[test]
fn onnx_names_in_errors_are_escaped_and_cut() {
    assert_eq!(
        error("bad_invisible_names"),
        "unsupported ONNX operators: Re\\u{200b}lu (1 node, first `node\\u{0}\\u{a}name`)"
    );
    let err = error("bad_long_op_name");
    assert!(err.len() < 400, "{} bytes", err.len());
    assert!(err.contains("… (100000 characters in all)"), "{err}");
}

#[test]
fn bad_graphs_are_errors_naming_the_node_or_tensor() {
    let cases = [
        ("bad_cycle", "node `add_a` (Add): is part of a cycle (its inputs depend on its own outputs)"),
        (
            "bad_missing_initializer",
            "node `add_bias` (Add): input `bias` is not a graph input, an initializer or the output of any node",
        ),
        ("bad_dims_overflow", "tensor `huge`: dimensions [1099511627776, 1099511627776] overflow"),
        (
            "bad_external_missing",
            "tensor `w`: is stored in external file `missing_weights.bin` but no external-data reader was given",
        ),
        (
            "bad_unhandled_attribute",
            "node `upsample` (Resize): attribute `antialias` = 1 needs mode linear or cubic, not nearest",
        ),
        ("bad_unknown_attribute", "node `relu` (Relu): attribute `flavour` is not handled by the importer"),
    ];
    for (name, expected) in cases {
        assert_eq!(error(name), expected, "{name}");
    }
}

/// Models once refused for their element types (float64 inputs, int8 initializers) import
/// with those dtypes and evaluate in them.
#[test]
fn double_and_int8_models_import_in_their_own_dtypes() {
    check(
        "bad_f64_input",
        expect![[r#"
            def @main(%x: Tensor[(2,), f64]) -> Tensor[(2,), f64] {
              let %y: Tensor[(2,), f64] = relu(%x);
              %y
            }
        "#]],
    );
    check(
        "bad_int8_initializer",
        expect![[r#"
            def @main(%x: Tensor[(2,), i8]) -> Tensor[(2,), i8] {
              let %y: Tensor[(2,), i8] = add(%x, tensor<(2,), i8>[1, 2]);
              %y
            }
        "#]],
    );
}

struct MemoryExternal(HashMap<String, Bytes>);

impl ExternalData for MemoryExternal {
    fn load(&self, location: &str) -> Result<Bytes, ExternalDataError> {
        self.0.get(location).cloned().ok_or_else(|| ExternalDataError::Other("no such file".to_string()))
    }
}

#[test]
fn external_data_comes_from_the_callers_reader() {
    let ext = |files: &[(&str, Vec<u8>)]| ImportOptions {
        external_data: Some(Arc::new(MemoryExternal(
            files.iter().map(|(k, v)| (k.to_string(), Bytes::from(v.clone()))).collect(),
        ))),
        ..ImportOptions::default()
    };
    let two_floats: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let e = import_with("bad_external_missing", &ext(&[])).unwrap_err().to_string();
    assert_eq!(e, "tensor `w`: external data `missing_weights.bin`: no such file");
    // `length` 8 at offset 0 of a 4-byte file is out of range, never a panic.
    let e = import_with("bad_external_outside", &ext(&[("../outside.bin", vec![0; 4])])).unwrap_err().to_string();
    assert_eq!(e, "tensor `w`: external data `../outside.bin`: range 0+Some(8) is outside the file (4 bytes)");
    let m = import_with("bad_external_missing", &ext(&[("missing_weights.bin", two_floats)])).unwrap();
    check_text(
        m,
        expect![[r#"
            def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
              let %y: Tensor[(2,), f32] = add(%x, tensor<(2,), f32>[1.5, -2.0]);
              %y
            }
        "#]],
    );
}

#[test]
fn truncated_or_corrupt_bytes_are_errors_not_panics() {
    let bytes = fixture("conv_relu");
    for len in 0..bytes.len() {
        // Any prefix either fails to decode or imports (a prefix can still be a valid message).
        let _ = import_onnx_bytes(bytes.slice(..len), &ImportOptions::default());
    }
    let e = import_onnx_bytes(bytes.slice(..bytes.len() / 2), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, ImportError::Decode(_)), "{e}");
    let mut corrupt = bytes.to_vec();
    for (i, b) in corrupt.iter_mut().enumerate() {
        if i % 7 == 3 {
            *b ^= 0x5a;
        }
    }
    assert!(import_onnx_bytes(Bytes::from(corrupt), &ImportOptions::default()).is_err());
    let e = import_onnx_bytes(Bytes::from_static(b""), &ImportOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "the model imports no default-domain (ai.onnx) opset");
}

/// Check that a pool whose explicit pads reach the kernel size (windows of only padding, NaN
/// for AveragePool) is refused, as onnxruntime refuses it, naming the node.
#[test]
fn pool_pads_not_smaller_than_the_kernel_are_refused() {
    assert_eq!(
        error("bad_pool_pads"),
        "node `pool` (AveragePool): pads [2, 0, 0, 0] must each be smaller than the kernel [2, 2] (a window of only padding has no value)"
    );
}

/// Check that a node with more inputs than its operator's ONNX schema takes is refused, not
/// imported with the extras dropped, and that the limit follows the opset (Clip takes
/// min/max inputs only from opset 11).
#[test]
fn more_inputs_than_the_operator_takes_are_refused() {
    assert_eq!(
        error("bad_relu_three_inputs"),
        "node `relu` (Relu): has 3 inputs, but `Relu` (opset 13) takes at most 1"
    );
    // Clip(x, min, max) imports at opset 13 (clip_input_opset13), not at opset 9, where min
    // and max are attributes.
    assert!(import("clip_input_opset13").is_ok());
    assert_eq!(
        error("bad_clip_inputs_opset9"),
        "node `clip` (Clip): has 3 inputs, but `Clip` (opset 9) takes at most 1"
    );
}

/// Check that import refuses what the text format cannot hold: ranks above the parser's
/// limit (64), on a graph input and on a node's output, and shapes whose element count does
/// not fit 64 bits (Conv pads of 2^62): every imported module prints to text `check` accepts.
#[test]
fn ranks_and_sizes_the_text_format_cannot_hold_are_refused() {
    assert_eq!(error("bad_rank65_input"), "graph input `x`: has rank 65, more than passel's limit of 64");
    assert_eq!(
        error("bad_rank65_unsqueeze"),
        "node `unsq` (Unsqueeze): output `y` has rank 65, more than passel's limit of 64"
    );
    assert_eq!(
        error("bad_conv_huge_pads"),
        "node `conv` (Conv): output `y` shape [1, 1, 9223372036854775810, 9223372036854775810] has more elements than fit in 64 bits"
    );
}

/// Check that a Constant whose `value` tensor is stored as external data (onnx's
/// `save_model(..., convert_attribute=True)`) reads it through the caller's reader.
#[test]
fn a_constant_value_in_external_data_uses_the_reader() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx");
    let bin = Bytes::from(std::fs::read(dir.join("constant_external_value.bin")).unwrap());
    let options = ImportOptions {
        external_data: Some(Arc::new(MemoryExternal(HashMap::from([(
            "constant_external_value.bin".to_string(),
            bin,
        )])))),
        ..ImportOptions::default()
    };
    let m = import_with("constant_external_value", &options).unwrap_or_else(|e| panic!("{e}"));
    check_text(
        m,
        expect![[r#"
            def @main(%x: Tensor[(8,), f32]) -> Tensor[(8,), f32] {
              let %y: Tensor[(8,), f32] = add(%x, tensor<(8,), f32>[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]);
              %y
            }
        "#]],
    );
    assert_eq!(
        error("constant_external_value"),
        "node `const` (Constant): attribute `value`: is stored in external file `constant_external_value.bin` but no external-data reader was given"
    );
}
