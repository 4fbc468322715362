#!/usr/bin/env python3
"""Writes the bad-input models of the decomposed operators (Det, DFT, STFT, MelWeightMatrix, Col2Im,
MaxUnpool, TensorScatter, CausalConvWithState, LinearAttention, FlexAttention, QLinearConv,
Resize, Dropout, DeformConv, RoiAlign, MaxPool's Indices, TfIdfVectorizer, com.microsoft
DynamicQuantizeLSTM) used by engine/tests/onnx_op_errors.rs. Their good inputs are ONNX's own node
cases (`passel conformance`); these are the models the importer must refuse, each with an error
naming the node and what is wrong.

Usage (in the venv scripts/onnx_data.sh makes):
    target/onnx-venv/bin/python scripts/onnx_ops_fixtures.py engine/tests/data/onnx/ops
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
U8 = TensorProto.UINT8


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(node, inputs, outputs, inits=(), opset=21, preview=False, microsoft=False):
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)]
    if preview:
        opsets.append(helper.make_opsetid("ai.onnx.preview", 1))
    if microsoft:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(graph, opset_imports=opsets, producer_name="passel-ops-fixtures")
    m.ir_version = 10
    return m


def cases():
    x = vi("x", F, [1, 10, 1])
    y = vi("y", F, None)
    yield "det_not_square", model(helper.make_node("Det", ["x"], ["y"], name="det"), [vi("x", F, [2, 3])], [y])
    yield "dft_last_axis", model(helper.make_node("DFT", ["x"], ["y"], name="dft", axis=2), [x], [y], opset=19)
    yield "dft_onesided_complex", model(
        helper.make_node("DFT", ["x"], ["y"], name="dft", axis=1, onesided=1),
        [vi("x", F, [1, 10, 2])], [y], opset=19)
    yield "stft_no_frame_length", model(
        helper.make_node("STFT", ["x", "step"], ["y"], name="stft"),
        [vi("x", F, [1, 64, 1])], [y], [const("step", np.array(8, np.int64))], opset=17)
    yield "mel_upper_edge_past_nyquist", model(
        helper.make_node("MelWeightMatrix", ["bins", "n", "rate", "lo", "hi"], ["y"], name="mel"),
        [], [y],
        [const("bins", np.array(8, np.int64)), const("n", np.array(16, np.int64)),
         const("rate", np.array(8000, np.int64)), const("lo", np.array(0.0, np.float32)),
         const("hi", np.array(16000.0, np.float32))], opset=17)
    yield "col2im_3d_block_count", model(
        helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="col2im"),
        [vi("x", F, [1, 8, 5])], [y],
        [const("image", np.array([3, 3, 3], np.int64)), const("block", np.array([2, 2, 2], np.int64))], opset=18)
    yield "col2im_block_count", model(
        helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="col2im"),
        [vi("x", F, [1, 4, 5])], [y],
        [const("image", np.array([3, 3], np.int64)), const("block", np.array([2, 2], np.int64))], opset=18)
    yield "maxunpool_indices_shape", model(
        helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2]),
        [vi("x", F, [1, 1, 2, 2]), vi("i", I64, [1, 1, 2, 3])], [y], opset=11)
    yield "tensor_scatter_mode", model(
        helper.make_node("TensorScatter", ["past", "update", "w"], ["y"], name="scatter", mode="ring"),
        [vi("past", F, [2, 4, 5]), vi("update", F, [2, 1, 5]), vi("w", I64, [2])], [y], opset=24)
    yield "tensor_scatter_update_shape", model(
        helper.make_node("TensorScatter", ["past", "update", "w"], ["y"], name="scatter"),
        [vi("past", F, [2, 4, 5]), vi("update", F, [2, 1, 6]), vi("w", I64, [2])], [y], opset=24)
    yield "causal_conv_not_depthwise", model(
        helper.make_node("CausalConvWithState", ["x", "w"], ["y", "state"], name="conv"),
        [vi("x", F, [1, 4, 8]), vi("w", F, [4, 2, 3])], [y, vi("state", F, None)], opset=27)
    yield "causal_conv_activation", model(
        helper.make_node("CausalConvWithState", ["x", "w"], ["y", "state"], name="conv", activation="relu"),
        [vi("x", F, [1, 4, 8]), vi("w", F, [4, 1, 3])], [y, vi("state", F, None)], opset=27)
    qkv = [vi("q", F, [1, 2, 12]), vi("k", F, [1, 2, 8]), vi("v", F, [1, 2, 8])]
    yield "linear_attention_heads", model(
        helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], name="la", q_num_heads=3,
                         kv_num_heads=2, update_rule="linear"),
        qkv, [y, vi("state", F, None)], opset=27)
    yield "linear_attention_rule", model(
        helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], name="la", q_num_heads=2,
                         kv_num_heads=2, update_rule="fancy"),
        [vi("q", F, [1, 2, 8]), qkv[1], qkv[2]], [y, vi("state", F, None)], opset=27)
    yield "linear_attention_no_decay", model(
        helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], name="la", q_num_heads=2,
                         kv_num_heads=2, update_rule="gated"),
        [vi("q", F, [1, 2, 8]), qkv[1], qkv[2]], [y, vi("state", F, None)], opset=27)
    yield "flex_attention_heads", model(
        helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], name="flex", domain="ai.onnx.preview"),
        [vi("q", F, [1, 3, 4, 8]), vi("k", F, [1, 2, 4, 8]), vi("v", F, [1, 2, 4, 8])], [y], opset=26,
        preview=True)
    reduce = helper.make_graph(
        [helper.make_node("ReduceSum", ["s", "axes"], ["s_out"], keepdims=0)], "score_mod_reduce",
        [vi("s", F, None)], [vi("s_out", F, None)], initializer=[const("axes", np.array([3], np.int64))])
    yield "flex_attention_score_mod_shape", model(
        helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], name="flex", domain="ai.onnx.preview",
                         score_mod=reduce),
        [vi("q", F, [1, 2, 4, 8]), vi("k", F, [1, 2, 4, 8]), vi("v", F, [1, 2, 4, 8])], [y], opset=26,
        preview=True)
    qargs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    qinits = [const("xz", np.array(0, np.uint8)), const("w", np.ones((2, 1, 1, 1), np.uint8)),
              const("wz", np.array(0, np.uint8)), const("ys", np.array(0.5, np.float32)),
              const("yz", np.array(0, np.uint8))]
    yield "qlinear_conv_scale_shape", model(
        helper.make_node("QLinearConv", qargs, ["y"], name="qconv"),
        [vi("x", U8, [1, 1, 3, 3])], [y], qinits + [const("xs", np.array([0.5, 0.5], np.float32)),
                                                 const("ws", np.array(0.5, np.float32))], opset=10)
    yield "qlinear_conv_zero_scale", model(
        helper.make_node("QLinearConv", qargs, ["y"], name="qconv"),
        [vi("x", U8, [1, 1, 3, 3])], [y], qinits + [const("xs", np.array(0.5, np.float32)),
                                                 const("ws", np.array(0.0, np.float32))], opset=10)
    yield "resize_policy", model(
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize", keep_aspect_ratio_policy="fit"),
        [vi("x", F, [1, 1, 4, 4])], [y], [const("sizes", np.array([1, 1, 2, 2], np.int64))], opset=18)
    yield "dropout_training", model(
        helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="dropout"),
        [vi("x", F, [2, 3])], [y], [const("r", np.array(0.5, np.float32)), const("t", np.array(True))], opset=13)
    yield "dropout_negative_seed", model(
        helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="dropout", seed=-1),
        [vi("x", F, [2, 3])], [y], [const("r", np.array(0.5, np.float32)), const("t", np.array(True))], opset=13)
    yield "deform_conv_offset_shape", model(
        helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="deform"),
        [vi("x", F, [1, 1, 3, 3]), vi("w", F, [1, 1, 2, 2]), vi("offset", F, [1, 6, 2, 2])], [y], opset=22)
    yield "deform_conv_groups", model(
        helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="deform", group=2),
        [vi("x", F, [1, 3, 3, 3]), vi("w", F, [2, 1, 2, 2]), vi("offset", F, [1, 8, 2, 2])], [y], opset=22)
    roi_inputs = [vi("x", F, [1, 1, 10, 10]), vi("rois", F, [3, 4]), vi("b", I64, [3])]
    yield "roi_align_adaptive", model(
        helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], name="roi", output_height=5, output_width=5),
        roi_inputs, [y], opset=16)
    yield "roi_align_mode", model(
        helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], name="roi", mode="median", sampling_ratio=2),
        roi_inputs, [y], opset=16)
    yield "maxunpool_output_shape_smaller", model(
        helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], name="unpool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        [vi("x", F, [1, 1, 2, 2]), vi("i", I64, [1, 1, 2, 2])], [y],
        [const("shape", np.array([1, 1, 3, 3], np.int64))], opset=11)
    yield "resize_roi_length", model(
        helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], name="resize", mode="linear",
                         coordinate_transformation_mode="tf_crop_and_resize"),
        [vi("x", F, [1, 1, 4, 4])], [y],
        [const("roi", np.array([0, 0, 0.4], np.float32)), const("sizes", np.array([1, 1, 3, 3], np.int64))],
        opset=18)
    yield "tfidf_string_pool", model(
        helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf", mode="TF", min_gram_length=1,
                         max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                         pool_strings=["a"]),
        [vi("x", TensorProto.INT32, [4])], [y], opset=9)
    yield "tfidf_mode", model(
        helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf", mode="BM25", min_gram_length=1,
                         max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                         pool_int64s=[2]),
        [vi("x", TensorProto.INT32, [4])], [y], opset=9)
    lstm_inputs = ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"]
    yield "dq_lstm_scale_shape", model(
        helper.make_node("DynamicQuantizeLSTM", lstm_inputs, ["y"], name="lstm", domain="com.microsoft",
                         hidden_size=2),
        [vi("x", F, [3, 1, 4])], [y],
        [const("w", np.ones((1, 4, 8), np.int8)), const("r", np.ones((1, 2, 8), np.int8)),
         const("ws", np.ones((3,), np.float32)), const("wz", np.zeros((3,), np.int8)),
         const("rs", np.ones((1,), np.float32)), const("rz", np.zeros((1,), np.int8))], opset=17, microsoft=True)
    yield "dq_lstm_float_weights", model(
        helper.make_node("DynamicQuantizeLSTM", lstm_inputs, ["y"], name="lstm", domain="com.microsoft",
                         hidden_size=2),
        [vi("x", F, [3, 1, 4])], [y],
        [const("w", np.ones((1, 4, 8), np.float32)), const("r", np.ones((1, 2, 8), np.int8)),
         const("ws", np.ones((1,), np.float32)), const("wz", np.zeros((1,), np.int8)),
         const("rs", np.ones((1,), np.float32)), const("rz", np.zeros((1,), np.int8))], opset=17, microsoft=True)
    yield "maxpool_indices_3d", model(
        helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2, 2]),
        [vi("x", F, [1, 1, 4, 4, 4])], [y, vi("i", I64, None)], opset=12)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "engine/tests/data/onnx/ops"
    os.makedirs(out, exist_ok=True)
    for name, m in cases():
        with open(os.path.join(out, f"bad_{name}.onnx"), "wb") as f:
            f.write(m.SerializeToString())
    print(f"wrote {len(list(cases()))} models to {out}")


if __name__ == "__main__":
    main()
