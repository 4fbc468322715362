//! The importer's errors for the operators decomposed at import (`Det`, `DFT`, `STFT`,
//! `MelWeightMatrix`, `Col2Im`, `MaxUnpool`, `TensorScatter`, `CausalConvWithState`,
//! `LinearAttention`, `FlexAttention`, `QLinearConv`, `Resize`, `Dropout`) on the models of
//! `tests/data/onnx/ops/` (written by `scripts/onnx_ops_fixtures.py`): each bad attribute, input
//! shape or input count is refused with an error naming the node and its operator. Their good
//! inputs are ONNX's node cases, run by `passel conformance`.

use std::path::Path;

use bytes::Bytes;
use expect_test::{expect, Expect};
use passel_engine::frontend::onnx::{import_onnx_bytes, ImportOptions};
use passel_engine::ir::print_module;

fn check(name: &str, expected: Expect) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx/ops").join(format!("bad_{name}.onnx"));
    let bytes = Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    match import_onnx_bytes(bytes, &ImportOptions::default()) {
        Ok(m) => panic!("bad_{name} imported:\n{}", print_module(&m)),
        Err(e) => expected.assert_eq(&e.to_string()),
    }
}

#[test]
fn det_of_a_matrix_that_is_not_square_is_refused() {
    check("det_not_square", expect![[""]]);
}

#[test]
fn a_dft_over_the_real_imaginary_axis_is_refused() {
    check("dft_last_axis", expect![[""]]);
}

#[test]
fn a_onesided_dft_of_a_complex_signal_is_refused() {
    check("dft_onesided_complex", expect![[""]]);
}

#[test]
fn an_stft_without_window_or_frame_length_is_refused() {
    check("stft_no_frame_length", expect![[""]]);
}

#[test]
fn mel_bins_past_the_spectrum_are_refused() {
    check("mel_upper_edge_past_nyquist", expect![[""]]);
}

#[test]
fn col2im_of_3d_blocks_is_refused() {
    check("col2im_3d", expect![[""]]);
}

#[test]
fn col2im_with_the_wrong_block_count_is_refused() {
    check("col2im_block_count", expect![[""]]);
}

#[test]
fn maxunpool_indices_of_another_shape_are_refused() {
    check("maxunpool_indices_shape", expect![[""]]);
}

#[test]
fn an_unknown_tensor_scatter_mode_is_refused() {
    check("tensor_scatter_mode", expect![[""]]);
}

#[test]
fn a_tensor_scatter_update_of_another_shape_is_refused() {
    check("tensor_scatter_update_shape", expect![[""]]);
}

#[test]
fn a_causal_conv_weight_that_is_not_depthwise_is_refused() {
    check("causal_conv_not_depthwise", expect![[""]]);
}

#[test]
fn an_unknown_causal_conv_activation_is_refused() {
    check("causal_conv_activation", expect![[""]]);
}

#[test]
fn linear_attention_heads_that_do_not_divide_are_refused() {
    check("linear_attention_heads", expect![[""]]);
}

#[test]
fn an_unknown_linear_attention_update_rule_is_refused() {
    check("linear_attention_rule", expect![[""]]);
}

#[test]
fn a_gated_linear_attention_without_decay_is_refused() {
    check("linear_attention_no_decay", expect![[""]]);
}

#[test]
fn flex_attention_kv_heads_that_do_not_divide_are_refused() {
    check("flex_attention_heads", expect![[""]]);
}

#[test]
fn a_score_mod_that_changes_the_shape_is_refused() {
    check("flex_attention_score_mod_shape", expect![[""]]);
}

#[test]
fn a_qlinear_conv_scale_of_the_wrong_shape_is_refused() {
    check("qlinear_conv_scale_shape", expect![[""]]);
}

#[test]
fn a_qlinear_conv_zero_scale_is_refused() {
    check("qlinear_conv_zero_scale", expect![[""]]);
}

#[test]
fn an_unknown_resize_aspect_policy_is_refused() {
    check("resize_policy", expect![[""]]);
}

#[test]
fn a_training_dropout_with_a_nonzero_ratio_is_refused() {
    check("dropout_training", expect![[""]]);
}
