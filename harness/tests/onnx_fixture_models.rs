//! Small ONNX models against onnxruntime: control flow (If, Loop, Scan) in
//! `engine/tests/data/onnx/control/` (written by `scripts/onnx_control_fixtures.py`, expected
//! outputs from onnxruntime checked against onnx's reference evaluator or a numpy oracle) and
//! onnxruntime's `com.microsoft` operators in `engine/tests/data/onnx/microsoft/`
//! (`scripts/onnx_microsoft_fixtures.py`, expected outputs from onnxruntime's kernels; the same
//! script writes the 1-D Conv / pool model in `windows_1d/`). Each
//! imports, verifies, evaluates to onnxruntime's outputs, survives the `-O3` pipeline with
//! verify-each and evaluates the same after it, and prints / parses to a fixed point.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use passel_engine::frontend::onnx::{import_onnx_bytes, ImportError, ImportOptions, NodeError};
use passel_engine::interp::Value;
use passel_engine::ir::{parse_module, print_module, verify_module, Module, Tensor};
use passel_engine::transform::{Pass, PassContext, Severity, VERIFY_EACH};
use passel_harness::{eval, npy};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/onnx")
}

fn dir() -> PathBuf {
    data().join("control")
}

/// `name` is `control/…` or `microsoft/…` below `engine/tests/data/onnx`, or a control model.
fn case(name: &str) -> PathBuf {
    if name.contains('/') {
        data().join(name)
    } else {
        dir().join(name)
    }
}

fn import(name: &str) -> Result<Module, ImportError> {
    let bytes = std::fs::read(case(name).join("model.onnx")).expect("fixture");
    import_onnx_bytes(Bytes::from(bytes), &ImportOptions::default())
}

fn numbered(name: &str, prefix: &str) -> Vec<Tensor> {
    (0..)
        .map(|k| case(name).join(format!("{prefix}_{k}.npy")))
        .take_while(|p| p.exists())
        .map(|p| npy::read(&p).expect("npy"))
        .collect()
}

fn assert_outputs(m: &Module, name: &str, when: &str) {
    assert_outputs_within(m, name, when, (1e-5, 1e-6));
}

fn assert_outputs_within(m: &Module, name: &str, when: &str, (rtol, atol): (f64, f64)) {
    let args: Vec<Value> = numbered(name, "input").into_iter().map(Value::Tensor).collect();
    let got = eval::run(m, "main", &args, 0).unwrap_or_else(|e| panic!("{name} {when}: eval: {e}"));
    let want = numbered(name, "output");
    assert_eq!(got.len(), want.len(), "{name} {when}: output count");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let c = eval::compare(g, w, rtol, atol);
        assert!(c.ok(), "{name} {when}: output {k}: {:?} (max abs err {})", c.first, c.max_abs_err);
    }
}

fn optimize(m: Module) -> Module {
    passel_passes::link();
    let ctx = PassContext::builder().opt_level(3).num_threads(2).config(VERIFY_EACH, true).build().expect("ctx");
    let out = ctx.scope(|| passel_passes::default_pipeline(3).run(m, &ctx)).expect("-O3 runs").expect("-O3 passes");
    let errors: Vec<_> = ctx.diagnostics().take().into_iter().filter(|d| d.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "-O3 reports errors: {errors:?}");
    out
}

const MODELS: &[&str] = &["if_runtime", "if_runtime_else", "if_static", "loop_for", "loop_while", "scan", "nested"];

#[test]
fn control_flow_models_match_onnxruntime_before_and_after_o3() {
    for name in MODELS {
        let m = import(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{name}: imported module does not verify: {e:?}"));
        assert_outputs(&m, name, "as imported");
        let text = print_module(&m);
        let again =
            parse_module(&text).unwrap_or_else(|e| panic!("{name}: printed module does not parse: {e:?}\n{text}"));
        assert_eq!(print_module(&again), text, "{name}: print/parse is not a fixed point");
        let o3 = optimize(m);
        assert_outputs(&o3, name, "after -O3");
    }
}

/// onnxruntime's contrib operators, decomposed at import, and 1-D windows against its own
/// kernels (which use approximations of erf / tanh / exp: 1e-4 relative).
#[test]
fn microsoft_operators_and_1d_windows_match_onnxruntime_before_and_after_o3() {
    let microsoft = [
        "gelus",
        "skip_layer_norm",
        "fused_matmul",
        "attention",
        "multi_head_attention",
        "dynamic_quantize_matmul",
        "rotary_embedding",
    ];
    // 1-D Conv, pools and global pools on rank-3 input, run as 2-D over a height of 1.
    let windows = ["windows_1d/conv_pool_1d".to_string()];
    for name in microsoft.iter().map(|n| format!("microsoft/{n}")).chain(windows) {
        let name = &name;
        let m = import(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        verify_module(&m).unwrap_or_else(|e| panic!("{name}: imported module does not verify: {e:?}"));
        assert_outputs_within(&m, name, "as imported", (1e-4, 1e-5));
        let text = print_module(&m);
        let again = parse_module(&text).unwrap_or_else(|e| panic!("{name}: printed module does not parse: {e:?}"));
        assert_eq!(print_module(&again), text, "{name}: print/parse is not a fixed point");
        assert_outputs_within(&optimize(m), name, "after -O3", (1e-4, 1e-5));
    }
}

/// onnxruntime's QOperator contrib ops (`QLinearAdd`, `QLinearMul`, `QLinearSigmoid`,
/// `QLinearConcat`), uint8 and int8: the quantized outputs equal onnxruntime's to the quantum
/// before and after -O3.
#[test]
fn qlinear_contrib_operators_match_onnxruntime() {
    let name = "microsoft/qlinear";
    let m = import(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name}: imported module does not verify: {e:?}"));
    assert_outputs_within(&m, name, "as imported", (0.0, 0.0));
    assert_outputs_within(&optimize(m), name, "after -O3", (0.0, 0.0));
}

/// The shapes the importer gives each construct: a runtime `If` is the IR's `if`; a constant
/// condition imports one branch; a counted loop and a scan unroll; a `while` loop is a
/// recursive global function called from `@main`.
#[test]
fn each_construct_imports_to_its_ir_form() {
    let text = |n: &str| print_module(&import(n).expect(n));
    let t = text("if_runtime");
    assert!(t.contains("if (") && t.matches("def @").count() == 1, "{t}");
    let t = text("if_static");
    assert!(!t.contains("if (") && t.contains("relu(") && !t.contains("exp("), "{t}");
    let t = text("loop_for");
    assert!(!t.contains("if (") && t.matches("def @").count() == 1 && t.contains("concatenate("), "{t}");
    let t = text("loop_while");
    assert!(t.contains("def @loop0(") && t.contains("@loop0(") && t.matches("def @").count() == 2, "{t}");
    let t = text("scan");
    assert!(t.matches("take(").count() == 8 && t.matches("def @").count() == 1, "{t}");
    // The outer loop's condition (`i < 4`) is known at every iteration, so it unrolls to five
    // iterations, each an `if` holding the inner counted loop, unrolled too.
    let t = text("nested");
    assert!(t.matches("if (").count() == 5 && t.matches("def @").count() == 1, "{t}");
    // Unrolling is bounded over the whole model, nested loops included: 60,000 × 60,000
    // iterations stay two loop functions (not 60,000, not billions of bindings).
    let bytes = std::fs::read(dir().join("hostile_nested_loops.onnx")).expect("fixture");
    let m = import_onnx_bytes(Bytes::from(bytes), &ImportOptions::default()).expect("imports");
    let t = print_module(&m);
    assert_eq!(t.matches("def @").count(), 3, "{t}");
}

/// Control flow passel cannot give static types, malformed control flow, and contrib operators
/// used in ways passel does not take are clear errors naming the node and what is wrong.
#[test]
fn bad_control_flow_is_a_clear_error() {
    let cases = [
        ("bad_undefined_outer", "node `branch` (If): its subgraphs read `nowhere`, which no enclosing graph defines"),
        ("bad_branch_types", "node `branch` (If): its branches produce different types (then: Tensor[(2,), f32]; else: Tensor[(4,), f32])"),
        ("bad_loop_trip_count", "node `loop` (Loop): input 0 (M, the trip count) must be an int64 tensor of one element, got Tensor[(2,), i64]"),
        ("bad_loop_dynamic_scan", "node `loop` (Loop): has 1 scan outputs but its trip count is not known at import"),
        ("bad_scan_too_long", "node `scan` (Scan): scans 131072 steps over a body of 1 nodes: with the loops unrolled before it, more than the 65536 nodes passel unrolls in one model"),
        ("bad_unsupported_in_branch", "unsupported ONNX operators: Unique (1 node, first `Unique #0`)"),
    ];
    let microsoft = [
        ("microsoft/bad_attention_heads", "node `attn` (Attention): Q has shape [2, 5, 8]: expected [batch, sequence, hidden] with hidden divisible by num_heads = 3"),
        ("microsoft/bad_attention_mask", "node `attn` (Attention): the mask has shape [4]; passel takes valid lengths [2], or 0/1 masks [2, 5] or [2, 5, 5]"),
        ("microsoft/bad_quant_zero_scale", "node `q` (QuantizeLinear): the scale has a zero or non-finite value"),
        ("microsoft/bad_quant_scale_shape", "node `dq` (DequantizeLinear): the scale has shape [4]; per-axis quantization along axis 1 of [2, 5, 8] needs [5]"),
        ("microsoft/bad_attention_past", "node `attn` (Attention): input 4 (past) is given; passel's Attention takes no past state"),
        ("microsoft/bad_qlinear_per_channel", "node `qadd` (QLinearAdd): A's scale has shape [3]; this operator takes a per-tensor (one-element) value"),
        ("microsoft/bad_rotary_no_heads", "node `rope` (RotaryEmbedding): attribute `num_heads` must be given when `rotary_embedding_dim` is"),
        ("microsoft/bad_skip_layer_norm_mean", "node `sln` (SkipLayerNormalization): output `mean` (used by node Identity #1) is not computed by the importer"),
    ];
    for (name, want) in cases.into_iter().chain(microsoft) {
        let bytes = std::fs::read(case(&format!("{name}.onnx"))).expect("fixture");
        let err = import_onnx_bytes(Bytes::from(bytes), &ImportOptions::default()).expect_err(name).to_string();
        assert!(err.starts_with(want), "{name}: {err}");
    }
}

/// The importer's errors are typed: a caller can tell which node failed and how without
/// reading the message.
#[test]
fn bad_models_give_typed_errors_naming_the_node() {
    let err = |name: &str| {
        let bytes = std::fs::read(case(&format!("{name}.onnx"))).expect("fixture");
        import_onnx_bytes(Bytes::from(bytes), &ImportOptions::default()).expect_err(name)
    };
    match err("microsoft/bad_skip_layer_norm_mean") {
        ImportError::Node { node, error: NodeError::NotComputed { output, user } } => {
            assert_eq!(
                (node.as_str(), output.as_str(), user.as_deref()),
                ("`sln` (SkipLayerNormalization)", "mean", Some("Identity #1"))
            );
        }
        e => panic!("bad_skip_layer_norm_mean: {e:?}"),
    }
    match err("bad_undefined_outer") {
        ImportError::Node { node, error: NodeError::Structure(_) } => assert_eq!(node, "`branch` (If)"),
        e => panic!("bad_undefined_outer: {e:?}"),
    }
}
