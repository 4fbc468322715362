//! ONNX `LSTM`, `GRU` and `RNN` import, checked against onnxruntime: the cases in
//! `tests/data/onnx/rnn/` (written by `scripts/onnx_rnn_fixtures.py`: seeded weights, expected
//! outputs from onnxruntime) cover both directions, `sequence_lens` given as a graph input and
//! as a constant, initial states, peepholes, `input_forget`, `linear_before_reset`, `clip`,
//! every activation function with and without parameters, and `layout = 1`. The `bad_*`
//! models must be refused with an error naming the node.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use expect_test::expect;
use passel_engine::frontend::onnx::{import_onnx_bytes, ImportOptions};
use passel_engine::interp::{eval_function, Value};
use passel_engine::ir::{print_module, verify_module, DType, ExprKind, Module, Tensor};
use passel_engine::op;

/// The largest relative error allowed against onnxruntime: `|got - want| <= MAX_REL_ERR *
/// max(|want|, 1e-3)` (the floor keeps values near zero from dividing by almost nothing).
const MAX_REL_ERR: f64 = 1e-4;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx/rnn")
}

fn import(path: &Path) -> Result<Module, String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    import_onnx_bytes(Bytes::from(bytes), &ImportOptions::default()).map_err(|e| e.to_string())
}

/// Reads a little-endian, C-order `.npy` file of f32 or i32 (what the fixture script writes).
fn read_npy(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let dtype = if header.contains("'<f4'") {
        DType::F32
    } else if header.contains("'<i4'") {
        DType::I32
    } else {
        panic!("{}: unexpected dtype in {header}", path.display())
    };
    let shape_text = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).unwrap();
    let shape: Vec<u64> =
        shape_text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    Tensor::from_le_bytes(&shape, dtype, &bytes[start + header_len..]).unwrap()
}

fn npys(dir: &Path, prefix: &str) -> Vec<Tensor> {
    (0..).map(|k| dir.join(format!("{prefix}_{k}.npy"))).take_while(|p| p.exists()).map(|p| read_npy(&p)).collect()
}

/// Imports case `name`, evaluates it on its inputs and returns the largest relative error of
/// its outputs against onnxruntime's.
fn run_case(name: &str) -> f64 {
    let dir = data_dir().join(name);
    let m = import(&dir.join("model.onnx")).unwrap_or_else(|e| panic!("{name}: {e}"));
    verify_module(&m).unwrap_or_else(|e| panic!("{name} does not verify: {e:?}"));
    let args: Vec<Value> = npys(&dir, "input").into_iter().map(Value::Tensor).collect();
    let want = npys(&dir, "output");
    let got = eval_function(&m, "main", &args).unwrap_or_else(|e| panic!("{name}: {e}"));
    let got: Vec<Tensor> = match &got {
        Value::Tensor(t) => vec![t.clone()],
        Value::Tuple(vs) => vs.iter().map(|v| v.as_tensor().cloned().expect("a tensor output")).collect(),
        Value::Func(_) => panic!("{name}: a function result"),
    };
    assert_eq!(got.len(), want.len(), "{name}: number of outputs");
    let mut max_rel = 0.0f64;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "{name}: shape of output {k}");
        for (a, b) in g.to_f64s().iter().zip(w.to_f64s()) {
            let rel = (a - b).abs() / b.abs().max(1e-3);
            assert!(rel <= MAX_REL_ERR, "{name}: output {k}: got {a}, onnxruntime {b} (relative error {rel:e})");
            max_rel = max_rel.max(rel);
        }
    }
    max_rel
}

fn op_count(m: &Module, name: &str) -> usize {
    let f = m.get("main").expect("@main");
    f.node_ids().filter(|&id| matches!(f.kind(id), ExprKind::Call { op: o, .. } if op::get(*o).name == name)).count()
}

#[test]
fn bidirectional_lstm_with_lengths_states_peepholes_clip_and_activations_matches_onnxruntime() {
    run_case("lstm_bidirectional_everything");
}

#[test]
fn lstm_with_layout_1_input_forget_and_constant_lengths_matches_onnxruntime() {
    run_case("lstm_layout1_input_forget");
    // The constant lengths' masks fold at import: no comparison is left, only the selects.
    let m = import(&data_dir().join("lstm_layout1_input_forget/model.onnx")).unwrap();
    assert_eq!(op_count(&m, "less"), 0);
    assert!(op_count(&m, "where") > 0);
}

#[test]
fn reverse_lstm_with_an_empty_sequence_matches_onnxruntime() {
    // onnxruntime gives an empty sequence zero final states, not its initial ones.
    run_case("lstm_reverse_empty_sequence");
}

#[test]
fn lstm_clip_bounds_the_gates_not_the_cell_state_as_onnxruntime_does() {
    // The initial cell state is well above the clip, so clipping it before h() would differ.
    run_case("lstm_clip_below_cell_state");
}

#[test]
fn bidirectional_gru_with_linear_before_reset_matches_onnxruntime() {
    run_case("gru_bidirectional_linear_before_reset");
    // Lengths given as a graph input are compared at run time, once per time step and once
    // for the empty-sequence check (shared by both directions); the forward direction's
    // LeakyRelu compares once per step too.
    let m = import(&data_dir().join("gru_bidirectional_linear_before_reset/model.onnx")).unwrap();
    assert_eq!(op_count(&m, "less"), (5 + 1) + 5);
}

#[test]
fn gru_clip_bounds_every_gate_as_onnxruntime_does() {
    run_case("gru_clip_small");
}

#[test]
fn reverse_gru_with_layout_1_and_affine_matches_onnxruntime() {
    run_case("gru_reverse_layout1");
}

#[test]
fn bidirectional_rnn_with_lengths_and_parameterised_activations_matches_onnxruntime() {
    run_case("rnn_bidirectional_lengths");
}

#[test]
fn a_forward_rnn_with_two_activations_uses_the_first_as_onnxruntime_does() {
    run_case("rnn_forward_two_activations");
}

#[test]
fn rnn_with_layout_1_and_softsign_matches_onnxruntime() {
    run_case("rnn_layout1_softsign");
}

#[test]
fn a_two_step_rnn_unrolls_into_plain_operators() {
    run_case("rnn_two_steps");
    let m = import(&data_dir().join("rnn_two_steps/model.onnx")).unwrap();
    // One projection of both steps; the first step has no recurrent product (zero state).
    expect![[r#"
        def @main(%X: Tensor[(2, 1, 2), f32]) -> (Tensor[(2, 1, 1, 2), f32], Tensor[(1, 1, 2), f32]) {
          let %Y_x: Tensor[(2, 2), f32] = reshape(%X, newshape=[2, 2]);
          let %Y_xw: Tensor[(2, 2), f32] = dense(%Y_x, tensor<(2, 2), f32>[0.44387582, -0.13069823, -0.074541755, -0.15270132]);
          let %Y_xw_t: (Tensor[(1, 2), f32], Tensor[(1, 2), f32]) = split(%Y_xw, axis=0, indices=[1]);
          let %Y_xw_t_0: Tensor[(1, 2), f32] = %Y_xw_t.0;
          let %Y_xw_t_1: Tensor[(1, 2), f32] = %Y_xw_t.1;
          let %Y_h: Tensor[(1, 2), f32] = tanh(%Y_xw_t_0);
          let %Y_hr: Tensor[(1, 2), f32] = dense(%Y_h, tensor<(2, 2), f32>[-0.4716557, -0.025241455, -0.31037742, -0.2914257]);
          let %Y_pre: Tensor[(1, 2), f32] = add(%Y_xw_t_1, %Y_hr);
          let %Y_h_1: Tensor[(1, 2), f32] = tanh(%Y_pre);
          let %Y_y: Tensor[(2, 2), f32] = concatenate(%Y_h, %Y_h_1, axis=0);
          let %Y_y_1: Tensor[(2, 1, 1, 2), f32] = reshape(%Y_y, newshape=[2, 1, 1, 2]);
          let %Y_y_h: Tensor[(1, 1, 2), f32] = reshape(%Y_h_1, newshape=[1, 1, 2]);
          (%Y_y_1, %Y_y_h)
        }
    "#]]
    .assert_eq(&print_module(&m));
}

/// Imports `bad_<name>.onnx` and returns its error.
fn error(name: &str) -> String {
    match import(&data_dir().join(format!("bad_{name}.onnx"))) {
        Ok(m) => panic!("bad_{name} imported:\n{}", print_module(&m)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_weight_of_the_wrong_shape_is_refused_naming_the_node_and_the_expected_shape() {
    assert_eq!(
        error("lstm_w_shape"),
        "node `lstm_w` (LSTM): input 1 (W) must have shape [1, 12, 2] ([num_directions, 4*hidden_size, input_size] with hidden_size 3), got [1, 12, 3]"
    );
}

#[test]
fn a_hidden_size_that_does_not_match_the_weights_is_refused() {
    assert_eq!(
        error("lstm_hidden_size"),
        "node `lstm_h` (LSTM): input 1 (W) must have shape [1, 16, 2] ([num_directions, 4*hidden_size, input_size] with hidden_size 4), got [1, 12, 2]"
    );
}

#[test]
fn an_unknown_activation_is_refused_with_the_known_ones() {
    let e = error("lstm_activation");
    assert!(
        e.starts_with("node `lstm_act` (LSTM): attribute `activations`: unknown activation function \"Swish\""),
        "{e}"
    );
    assert!(
        e.contains(
            "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus"
        ),
        "{e}"
    );
}

#[test]
fn a_wrong_number_of_activations_is_refused() {
    assert_eq!(
        error("lstm_activation_count"),
        "node `lstm_acts` (LSTM): attribute `activations` has 2 function(s), but a forward LSTM takes 3 (3 per direction)"
    );
}

#[test]
fn an_unknown_direction_is_refused() {
    assert_eq!(
        error("lstm_direction"),
        "node `lstm_dir` (LSTM): attribute `direction` = \"sideways\" is not one of forward, reverse, bidirectional"
    );
}

#[test]
fn a_sequence_too_long_to_unroll_is_refused_with_the_bound() {
    assert_eq!(
        error("lstm_too_long"),
        "node `lstm_long` (LSTM): unrolling seq_length 20000 x 1 direction(s) = 20000 time steps would take the model's recurrent layers to 20000 unrolled time steps, over the import bound of 16384"
    );
}

#[test]
fn the_unrolling_bound_counts_every_recurrent_node_of_the_model() {
    // Each GRU alone is within the bound; the second takes the model past it.
    assert_eq!(
        error("gru_too_long_together"),
        "node `gru2` (GRU): unrolling seq_length 10000 x 1 direction(s) = 10000 time steps would take the model's recurrent layers to 20000 unrolled time steps, over the import bound of 16384"
    );
}

#[test]
fn a_constant_sequence_length_beyond_the_sequence_is_refused() {
    assert_eq!(
        error("rnn_sequence_lens"),
        "node `rnn_len` (RNN): input 4 (sequence_lens) holds 4, outside 0..=3 (seq_length)"
    );
}

#[test]
fn outputs_too_large_to_index_are_refused_not_overflowed() {
    // X holds no element (input_size 0), but its batch makes seq_length x batch overflow.
    assert_eq!(
        error("rnn_huge_batch"),
        "node `rnn_huge` (RNN): the outputs of seq_length 3, batch 4611686018427387904 and hidden_size 3 are too large"
    );
}

#[test]
fn sequence_lens_of_another_dtype_than_int32_is_refused() {
    assert_eq!(
        error("gru_sequence_lens_int64"),
        "node `gru_len64` (GRU): input 4 (sequence_lens) must be int32, got i64"
    );
}

#[test]
fn an_activation_parameter_no_activation_takes_is_refused() {
    let e = error("lstm_leftover_alpha");
    assert!(
        e.starts_with(
            "node `lstm_alpha` (LSTM): attributes `activation_alpha` / `activation_beta` have 1 / 0 values more than"
        ),
        "{e}"
    );
}
