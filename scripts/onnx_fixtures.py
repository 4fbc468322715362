#!/usr/bin/env python3
"""Writes the small ONNX models used by the importer's Rust tests and as fuzz seeds.

Usage (needs `pip install onnx numpy`, e.g. in a venv):
    python3 scripts/onnx_fixtures.py engine/tests/data/onnx

Every model is built with onnx.helper, a few KB at most, and deterministic (fixed values, no
random weights), so re-running the script reproduces the committed files byte for byte.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=13, name="g", check=True):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="passel-fixtures")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def arr(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def fixtures():
    out = {}
    w = np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3) / 100.0
    # ONNX value names that are not text-format names (Caffe2 exports write `gpu_0/data_0`).
    out["onnx_names"] = model(
        [helper.make_node("Relu", ["gpu_0/data_0"], ["gpu_0/softmax_1"], name="relu")],
        [vi("gpu_0/data_0", F, [2])],
        [vi("gpu_0/softmax_1", F, [2])],
    )
    out["conv_relu"] = model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1], strides=[1, 1]),
            helper.make_node("Relu", ["c"], ["r"], name="relu1"),
            helper.make_node("MaxPool", ["r"], ["p"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
            helper.make_node("Flatten", ["g"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
            helper.make_node("Softmax", ["y"], ["prob"], name="softmax"),
        ],
        [vi("x", F, [1, 3, 8, 8])],
        [vi("prob", F, [1, 5])],
        [
            arr("w", w),
            arr("b", np.array([0.1, -0.1, 0.2, 0.0], np.float32)),
            arr("fc_w", np.arange(20, dtype=np.float32).reshape(5, 4) / 10.0),
            arr("fc_b", np.zeros(5, np.float32)),
        ],
    )
    # Reshape fed by Shape -> Gather -> Unsqueeze -> Concat: folds to a constant newshape.
    out["shape_subgraph"] = model(
        [
            helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
            helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
            helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
            helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
        ],
        [vi("x", F, [2, 3, 4])],
        [vi("y", F, [2, 12])],
        [arr("zero", np.array(0, np.int64)), arr("axes0", np.array([0], np.int64)), arr("minus1", np.array([-1], np.int64))],
    )
    out["symbolic_batch"] = model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", F, ["batch", 3])],
        [vi("y", F, ["batch", 3])],
    )
    out["squeeze_attr_opset11"] = model(
        [
            helper.make_node("Squeeze", ["x"], ["s"], name="sq", axes=[1]),
            helper.make_node("Unsqueeze", ["s"], ["y"], name="unsq", axes=[0]),
        ],
        [vi("x", F, [2, 1, 3])],
        [vi("y", F, [1, 2, 3])],
        opset=11,
    )
    out["squeeze_input_opset13"] = model(
        [
            helper.make_node("Squeeze", ["x", "ax1"], ["s"], name="sq"),
            helper.make_node("Unsqueeze", ["s", "ax0"], ["y"], name="unsq"),
        ],
        [vi("x", F, [2, 1, 3])],
        [vi("y", F, [1, 2, 3])],
        [arr("ax1", np.array([1], np.int64)), arr("ax0", np.array([0], np.int64))],
    )
    out["clip_attr_opset9"] = model(
        [helper.make_node("Clip", ["x"], ["y"], name="clip", min=-1.0, max=6.0)],
        [vi("x", F, [4])],
        [vi("y", F, [4])],
        opset=9,
    )
    out["clip_input_opset13"] = model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")],
        [vi("x", F, [4])],
        [vi("y", F, [4])],
        [arr("lo", np.array(-1.0, np.float32)), arr("hi", np.array(6.0, np.float32))],
    )
    out["softmax_opset11"] = model(
        [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)],
        [vi("x", F, [2, 3, 4])],
        [vi("y", F, [2, 3, 4])],
        opset=11,
    )
    # Opset-9 style weights: ConstantOfShape fills, as in the onnx wheel's light models.
    out["constant_of_shape_weights"] = model(
        [
            helper.make_node("Constant", [], ["wshape"], name="wshape_c", value=arr("v", np.array([4, 3, 1, 1], np.int64))),
            helper.make_node(
                "ConstantOfShape", ["wshape"], ["w"], name="wfill", value=arr("v", np.array([0.5], np.float32))
            ),
            helper.make_node("Conv", ["x", "w"], ["y"], name="conv"),
        ],
        [vi("x", F, [1, 3, 4, 4])],
        [vi("y", F, [1, 4, 4, 4])],
        opset=9,
    )
    # BERT-style block: embedding Gather, layer-norm decomposition, erf-GELU, attention-ish
    # MatMul + Softmax with a Where mask, two outputs.
    h = 4
    out["transformer_block"] = model(
        [
            helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed", axis=0),
            helper.make_node("ReduceMean", ["e"], ["mu"], name="ln_mean", axes=[-1]),
            helper.make_node("Sub", ["e", "mu"], ["d"], name="ln_sub"),
            helper.make_node("Pow", ["d", "two"], ["d2"], name="ln_pow"),
            helper.make_node("ReduceMean", ["d2"], ["var"], name="ln_var", axes=[-1]),
            helper.make_node("Add", ["var", "eps"], ["ve"], name="ln_add"),
            helper.make_node("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
            helper.make_node("Div", ["d", "sd"], ["n"], name="ln_div"),
            helper.make_node("MatMul", ["n", "wq"], ["q"], name="q_proj"),
            helper.make_node("Transpose", ["q"], ["qt"], name="q_t", perm=[1, 0]),
            helper.make_node("MatMul", ["q", "qt"], ["scores"], name="scores"),
            helper.make_node("Where", ["mask", "scores", "neg"], ["masked"], name="mask"),
            helper.make_node("Softmax", ["masked"], ["attn"], name="attn", axis=-1),
            helper.make_node("MatMul", ["attn", "n"], ["ctx"], name="ctx"),
            helper.make_node("Div", ["ctx", "sqrt2"], ["g0"], name="gelu_div"),
            helper.make_node("Erf", ["g0"], ["g1"], name="gelu_erf"),
            helper.make_node("Add", ["g1", "one"], ["g2"], name="gelu_add"),
            helper.make_node("Mul", ["ctx", "g2"], ["g3"], name="gelu_mul"),
            helper.make_node("Mul", ["g3", "half"], ["out"], name="gelu_half"),
        ],
        [vi("ids", I64, [3]), vi("mask", TensorProto.BOOL, [3, 3])],
        [vi("out", F, [3, h]), vi("attn", F, [3, 3])],
        [
            arr("emb", np.arange(10 * h, dtype=np.float32).reshape(10, h) / 7.0),
            arr("two", np.array(2.0, np.float32)),
            arr("eps", np.array(1e-5, np.float32)),
            arr("wq", (np.arange(h * h, dtype=np.float32).reshape(h, h) - 7.0) / 9.0),
            arr("neg", np.array(-1e4, np.float32)),
            arr("sqrt2", np.array(np.sqrt(2.0), np.float32)),
            arr("one", np.array(1.0, np.float32)),
            arr("half", np.array(0.5, np.float32)),
        ],
        opset=13,
    )
    # Nodes listed consumers-first: the importer sorts them topologically.
    out["unsorted_nodes"] = model(
        [
            helper.make_node("Relu", ["a"], ["y"], name="second"),
            helper.make_node("Neg", ["x"], ["a"], name="first"),
        ],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    # A constant expression: folded at import unless the fold limit is below its size.
    out["const_add"] = model(
        [
            helper.make_node("Add", ["a", "b"], ["ab"], name="add_consts"),
            helper.make_node("Add", ["x", "ab"], ["y"], name="add_x"),
        ],
        [vi("x", F, [4])],
        [vi("y", F, [4])],
        [arr("a", np.array([1, 2, 3, 4], np.float32)), arr("b", np.array([10, 20, 30, 40], np.float32))],
    )
    # ---- bad input ----
    out["bad_unsupported"] = model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="ok"),
            helper.make_node("LSTMish", ["a"], ["b"], name="first_lstm", domain="custom"),
            helper.make_node("Unique", ["b"], ["c"], name="unique_1"),
            helper.make_node("Unique", ["c"], ["d"], name="unique_2"),
            helper.make_node("Unique", ["d"], ["y"]),
        ],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    out["bad_cycle"] = model(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
            helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
        ],
        [vi("x", F, [2])],
        [vi("b", F, [2])],
        check=False,
    )
    out["bad_missing_initializer"] = model(
        [helper.make_node("Add", ["x", "bias"], ["y"], name="add_bias")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    out["bad_f64_input"] = model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", TensorProto.DOUBLE, [2])],
        [vi("y", TensorProto.DOUBLE, [2])],
    )
    out["bad_int8_initializer"] = model(
        [helper.make_node("Add", ["x", "q"], ["y"], name="add_q")],
        [vi("x", TensorProto.INT8, [2])],
        [vi("y", TensorProto.INT8, [2])],
        [arr("q", np.array([1, 2], np.int8))],
    )
    big = TensorProto(name="huge", data_type=F, dims=[1 << 40, 1 << 40])
    out["bad_dims_overflow"] = model(
        [helper.make_node("Add", ["x", "huge"], ["y"], name="add_huge")],
        [vi("x", F, [1])],
        [vi("y", F, [1])],
        [big],
        check=False,
    )
    ext = TensorProto(name="w", data_type=F, dims=[2])
    ext.data_location = TensorProto.EXTERNAL
    for key, value in [("location", "../outside.bin"), ("offset", "0"), ("length", "8")]:
        entry = ext.external_data.add()
        entry.key, entry.value = key, value
    out["bad_external_outside"] = model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        [ext],
        check=False,
    )
    ext2 = TensorProto(name="w", data_type=F, dims=[2])
    ext2.data_location = TensorProto.EXTERNAL
    entry = ext2.external_data.add()
    entry.key, entry.value = "location", "missing_weights.bin"
    out["bad_external_missing"] = model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        [ext2],
        check=False,
    )
    out["bad_unhandled_attribute"] = model(
        [
            helper.make_node(
                "Resize", ["x", "", "scales"], ["y"], name="upsample", mode="nearest", antialias=1
            )
        ],
        [vi("x", F, [1, 1, 2, 2])],
        [vi("y", F, [1, 1, 4, 4])],
        [arr("scales", np.array([1, 1, 2, 2], np.float32))],
        opset=18,
    )
    out["bad_unknown_attribute"] = model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu", flavour="spicy")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    # Issue #26: Clip with min > max on a constant, folded at import (onnxruntime: [nan, 0, 0, 0]).
    out["clip_min_above_max"] = model(
        [
            helper.make_node("Clip", ["c", "lo", "hi"], ["k"], name="clip"),
            helper.make_node("Add", ["x", "k"], ["y"], name="add"),
        ],
        [vi("x", F, [4])],
        [vi("y", F, [4])],
        [
            arr("c", np.array([np.nan, -1.0, 3.0, 10.0], np.float32)),
            arr("lo", np.array(5.0, np.float32)),
            arr("hi", np.array(0.0, np.float32)),
        ],
    )
    # Issue #26: a MaxPool on a constant within the fold limit (65536 elements in and out)
    # whose window is the whole input: 4 * 10^9 window steps if folded at import.
    out["max_pool_whole_window"] = model(
        [
            helper.make_node(
                "Constant", [], ["shape"], name="shape_c", value=arr("v", np.array([1, 1, 128, 512], np.int64))
            ),
            helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill", value=arr("v", np.array([1.0], np.float32))),
            helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[128, 512], pads=[63, 255, 63, 255]),
            helper.make_node("Add", ["x", "p"], ["y"], name="add"),
        ],
        [vi("x", F, [1, 1, 127, 511])],
        [vi("y", F, [1, 1, 127, 511])],
    )
    # onnxruntime refuses explicit pool pads >= kernel ("Pad should be smaller than kernel").
    out["bad_pool_pads"] = model(
        [helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], pads=[2, 0, 0, 0])],
        [vi("x", F, [1, 1, 4, 4])],
        [vi("y", F, [1, 1, 5, 3])],
    )
    # The checker refuses more inputs than the schema's max_input; the file is written anyway.
    out["bad_relu_three_inputs"] = model(
        [helper.make_node("Relu", ["x", "x", "x"], ["y"], name="relu")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    out["bad_clip_inputs_opset9"] = model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip", min=-1.0, max=1.0)],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        [arr("lo", np.array(-2.0, np.float32)), arr("hi", np.array(2.0, np.float32))],
        opset=9,
        check=False,
    )
    out["bad_rank65_input"] = model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", F, [1] * 65)],
        [vi("y", F, [1] * 65)],
    )
    out["bad_rank65_unsqueeze"] = model(
        [helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq")],
        [vi("x", F, [1] * 64)],
        [vi("y", F, [1] * 65)],
        [arr("axes", np.array([0], np.int64))],
    )
    out["bad_conv_huge_pads"] = model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[2**62] * 4)],
        [vi("x", F, [1, 1, 2, 2])],
        [vi("y", F, None)],
        [arr("w", np.ones((1, 1, 1, 1), np.float32))],
        check=False,
    )
    # Issue #26 item 14: names with invisible characters, and a very long one, in errors.
    out["bad_invisible_names"] = model(
        [helper.make_node("Re\u200blu", ["x"], ["y"], name="node\x00\nname")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    out["bad_long_op_name"] = model(
        [helper.make_node("X" * 100_000, ["x"], ["y"], name="n")],
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        check=False,
    )
    return out


def external_fixtures():
    """Models saved with their tensors as external data, as `onnx.save_model` writes them."""
    out = {}
    # A Constant node whose `value` tensor is external (`convert_attribute=True`): the checker
    # and onnxruntime accept it.
    value = numpy_helper.from_array(np.arange(8, dtype=np.float32) / 4.0, "value")
    out["constant_external_value"] = model(
        [
            helper.make_node("Constant", [], ["c"], name="const", value=value),
            helper.make_node("Add", ["x", "c"], ["y"], name="add"),
        ],
        [vi("x", F, [8])],
        [vi("y", F, [8])],
    )
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else "engine/tests/data/onnx"
    os.makedirs(dest, exist_ok=True)
    for name, m in fixtures().items():
        path = os.path.join(dest, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        print(f"{path}: {os.path.getsize(path)} bytes")
    for name, m in external_fixtures().items():
        path = os.path.join(dest, name + ".onnx")
        onnx.save_model(
            m,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=name + ".bin",
            size_threshold=0,
            convert_attribute=True,
        )
        print(f"{path}: {os.path.getsize(path)} bytes + {name}.bin")


if __name__ == "__main__":
    main()
