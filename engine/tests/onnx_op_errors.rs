//! The importer's errors for the operators decomposed at import (`Det`, `DFT`, `STFT`,
//! `MelWeightMatrix`, `Col2Im`, `MaxUnpool`, `TensorScatter`, `CausalConvWithState`,
//! `LinearAttention`, `FlexAttention`, `QLinearConv`, `Resize`, `Dropout`, `DeformConv`,
//! `RoiAlign`, MaxPool's Indices, `TfIdfVectorizer`, `com.microsoft::DynamicQuantizeLSTM`) on the models of
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
    check("det_not_square", expect!["node `det` (Det): X must be [..., M, M] (square matrices), got shape [2, 3]"]);
}

#[test]
fn a_dft_over_the_real_imaginary_axis_is_refused() {
    check(
        "dft_last_axis",
        expect!["node `dft` (DFT): axis 2 is out of range for an input of rank 3 (the last axis holds re / im)"],
    );
}

#[test]
fn a_onesided_dft_of_a_complex_signal_is_refused() {
    check("dft_onesided_complex", expect!["node `dft` (DFT): `onesided` needs a real input (last dimension 1)"]);
}

#[test]
fn an_stft_without_window_or_frame_length_is_refused() {
    check("stft_no_frame_length", expect!["node `stft` (STFT): either the window or frame_length is required"]);
}

#[test]
fn mel_bins_past_the_spectrum_are_refused() {
    check("mel_upper_edge_past_nyquist", expect!["node `mel` (MelWeightMatrix): the mel bin edges reach spectrum bin 9, outside 0..9 (upper_edge_hertz above the Nyquist rate?)"]);
}

#[test]
fn col2im_of_3d_blocks_with_the_wrong_block_count_is_refused() {
    check("col2im_3d_block_count", expect!["node `col2im` (Col2Im): the input has 5 blocks, but image_shape [3, 3, 3], block_shape [2, 2, 2] and the window attributes give [2, 2, 2]"]);
}

#[test]
fn col2im_with_the_wrong_block_count_is_refused() {
    check("col2im_block_count", expect!["node `col2im` (Col2Im): the input has 5 blocks, but image_shape [3, 3], block_shape [2, 2] and the window attributes give 2 x 2"]);
}

#[test]
fn maxunpool_indices_of_another_shape_are_refused() {
    check(
        "maxunpool_indices_shape",
        expect!["node `unpool` (MaxUnpool): I must be integers of X's shape [1, 1, 2, 2], got i64 [1, 1, 2, 3]"],
    );
}

#[test]
fn an_unknown_tensor_scatter_mode_is_refused() {
    check(
        "tensor_scatter_mode",
        expect![[r#"node `scatter` (TensorScatter): attribute `mode` = "ring" is not supported (linear, circular)"#]],
    );
}

#[test]
fn a_tensor_scatter_update_of_another_shape_is_refused() {
    check("tensor_scatter_update_shape", expect!["node `scatter` (TensorScatter): update f32 [2, 1, 6] must match past_cache f32 [2, 4, 5] except along axis 1, where it may be shorter"]);
}

#[test]
fn a_causal_conv_weight_that_is_not_depthwise_is_refused() {
    check(
        "causal_conv_not_depthwise",
        expect![
            "node `conv` (CausalConvWithState): weight must have shape [4, 1, K] (depthwise, K >= 1), got [4, 2, 3]"
        ],
    );
}

#[test]
fn an_unknown_causal_conv_activation_is_refused() {
    check(
        "causal_conv_activation",
        expect![[
            r#"node `conv` (CausalConvWithState): attribute `activation` = "relu" is not supported (none, silu, swish)"#
        ]],
    );
}

#[test]
fn linear_attention_heads_that_do_not_divide_are_refused() {
    check(
        "linear_attention_heads",
        expect!["node `la` (LinearAttention): q_num_heads 3 must be a positive multiple of kv_num_heads 2"],
    );
}

#[test]
fn an_unknown_linear_attention_update_rule_is_refused() {
    check(
        "linear_attention_rule",
        expect![[
            r#"node `la` (LinearAttention): attribute `update_rule` = "fancy" is not supported (linear, gated, delta, gated_delta)"#
        ]],
    );
}

#[test]
fn a_gated_linear_attention_without_decay_is_refused() {
    check(
        "linear_attention_no_decay",
        expect!["node `la` (LinearAttention): update_rule needs the decay input (input 4)"],
    );
}

#[test]
fn flex_attention_kv_heads_that_do_not_divide_are_refused() {
    check("flex_attention_heads", expect!["node `flex` (FlexAttention): K [1, 2, 4, 8] must be [1, Hkv, S, 8] and V [1, 2, 4, 8] [1, Hkv, S, Ev], with Hkv dividing Q's 3 heads"]);
}

#[test]
fn a_score_mod_that_changes_the_shape_is_refused() {
    check("flex_attention_score_mod_shape", expect!["node `flex` (FlexAttention): its `score_mod` must produce one Tensor[(1, 2, 4, 4), f32], got Tensor[(1, 2, 4), f32]"]);
}

#[test]
fn a_qlinear_conv_scale_of_the_wrong_shape_is_refused() {
    check(
        "qlinear_conv_scale_shape",
        expect!["node `qconv` (QLinearConv): x_scale has shape [2]; it must be a scalar"],
    );
}

#[test]
fn a_qlinear_conv_zero_scale_is_refused() {
    check("qlinear_conv_zero_scale", expect!["node `qconv` (QLinearConv): the scale has a zero or non-finite value"]);
}

#[test]
fn an_unknown_resize_aspect_policy_is_refused() {
    check(
        "resize_policy",
        expect![[
            r#"node `resize` (Resize): keep_aspect_ratio_policy "fit" is not supported (stretch, not_larger, not_smaller)"#
        ]],
    );
}

#[test]
fn a_training_dropout_without_a_seed_is_refused() {
    check("dropout_training", expect!["node `dropout` (Dropout): training_mode = true with a nonzero ratio and no `seed`: its mask is fresh randomness on every run, which passel does not model"]);
}

#[test]
fn a_dropout_seed_outside_numpys_range_is_refused() {
    check(
        "dropout_negative_seed",
        expect!["node `dropout` (Dropout): attribute `seed` = -1 must be between 0 and 2^32 - 1"],
    );
}

#[test]
fn a_deform_conv_offset_of_the_wrong_channel_count_is_refused() {
    check(
        "deform_conv_offset_shape",
        expect!["node `deform` (DeformConv): offset [1, 6, 2, 2] must be [1, 8, oH, oW] (offset_group·kH·kW·2)"],
    );
}

#[test]
fn a_deform_conv_whose_channels_do_not_split_into_groups_is_refused() {
    check("deform_conv_groups", expect!["node `deform` (DeformConv): X's 3 channels must be W's 1 per group × group 2 and divide by offset_group 1; W's 2 output channels must divide by group"]);
}

#[test]
fn roi_align_with_adaptive_sampling_is_refused() {
    check("roi_align_adaptive", expect!["node `roi` (RoiAlign): sampling_ratio 0 (adaptive: samples per bin from each region's size at run time) is not supported; give a positive sampling_ratio"]);
}

#[test]
fn an_unknown_roi_align_mode_is_refused() {
    check("roi_align_mode", expect![[r#"node `roi` (RoiAlign): mode "median" is not supported (avg, max)"#]]);
}

#[test]
fn a_maxunpool_output_shape_smaller_than_the_unpooled_size_is_refused() {
    check("maxunpool_output_shape_smaller", expect!["node `unpool` (MaxUnpool): output_shape [1, 1, 3, 3] must be [N, C, spatial…] and at least the unpooled size [1, 1, 4, 4]"]);
}

#[test]
fn a_crop_and_resize_roi_of_the_wrong_length_is_refused() {
    check(
        "resize_roi_length",
        expect!["node `resize` (Resize): input 1 (roi) has 3 values, expected 2 per resized axis (8)"],
    );
}

#[test]
fn the_indices_of_a_3d_maxpool_are_refused() {
    check("maxpool_indices_3d", expect!["node `pool` (MaxPool): the Indices output of a 3-D MaxPool is not supported"]);
}

#[test]
fn a_tfidf_vectorizer_over_strings_is_refused() {
    check("tfidf_string_pool", expect!["node `tfidf` (TfIdfVectorizer): attribute `pool_strings`: string pools are not supported (passel has no string tensors)"]);
}

#[test]
fn an_unknown_tfidf_weighting_is_refused() {
    check(
        "tfidf_mode",
        expect![[r#"node `tfidf` (TfIdfVectorizer): attribute `mode` = "BM25" is not supported (TF, IDF, TFIDF)"#]],
    );
}

#[test]
fn a_dynamic_quantize_lstm_scale_of_the_wrong_shape_is_refused() {
    check(
        "dq_lstm_scale_shape",
        expect!["node `lstm` (DynamicQuantizeLSTM): input 8 (W_scale) must be float32 [1] or [1, 8], got f32 [3]"],
    );
}

#[test]
fn a_dynamic_quantize_lstm_with_float_weights_is_refused() {
    check("dq_lstm_float_weights", expect!["node `lstm` (DynamicQuantizeLSTM): input 1 (W) must be int8 or uint8 [1, 4, 8] ([num_directions, input_size, 4*hidden_size] with hidden_size 2), got f32 [1, 4, 8]"]);
}
