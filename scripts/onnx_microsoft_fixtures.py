#!/usr/bin/env python3
"""Writes test models of onnxruntime's com.microsoft operators with onnxruntime's outputs.

Usage (needs `pip install onnx numpy onnxruntime`, e.g. the venv scripts/onnx_data.sh makes):
    python3 scripts/onnx_microsoft_fixtures.py engine/tests/data/onnx/microsoft

Each model is one contrib operator (or a few) built with onnx.helper; the inputs are seeded and
the expected outputs are what onnxruntime's CPU kernels compute: `<dest>/<name>/model.onnx`,
`input_K.npy`, `output_K.npy`. harness/tests/onnx_fixture_models.rs checks them like the control-flow
models.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I32 = TensorProto.INT32
MS = "com.microsoft"


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def arr(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
        producer_name="passel-fixtures",
    )
    m.ir_version = 8
    return m


def ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain=MS, **attrs)


def fixtures():
    rng = np.random.default_rng(11)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    out = {}
    B, S, H, N = 2, 5, 8, 2
    out["gelus"] = (
        model(
            [
                ms("Gelu", ["x"], ["g"]),
                ms("BiasGelu", ["x", "b"], ["bg"]),
                ms("FastGelu", ["x", "b"], ["fg"]),
                ms("FastGelu", ["x"], ["fg0"]),
                ms("QuickGelu", ["x"], ["qg"], alpha=1.5),
            ],
            [vi("x", F, [B, S, H])],
            [vi(n, F, [B, S, H]) for n in ["g", "bg", "fg", "fg0", "qg"]],
            [arr("b", r(H))],
        ),
        [r(B, S, H) * 2],
    )
    out["skip_layer_norm"] = (
        model(
            [
                ms("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-5),
                ms("SkipLayerNormalization", ["x", "skip", "gamma"], ["y2"]),
                ms("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["y3", "", "", "sum3"], epsilon=1e-6),
                # onnxruntime registers (and its optimizer writes) this one in the default domain.
                helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y4"], epsilon=1e-6, axis=-1),
            ],
            [vi("x", F, [B, S, H]), vi("skip", F, [B, S, H])],
            [vi(n, F, [B, S, H]) for n in ["y", "sum", "y2", "y3", "sum3", "y4"]],
            [arr("gamma", r(H)), arr("beta", r(H)), arr("bias", r(H))],
        ),
        [r(B, S, H), r(B, S, H)],
    )
    out["fused_matmul"] = (
        model(
            [
                ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.5, transA=1),
                ms("FusedMatMul", ["a", "c"], ["y2"], transB=1),
            ],
            [vi("a", F, [2, 3, 4]), vi("b", F, [2, 3, 5]), vi("c", F, [2, 6, 4])],
            [vi("y", F, [2, 4, 5]), vi("y2", F, [2, 3, 6])],
        ),
        [r(2, 3, 4), r(2, 3, 5), r(2, 6, 4)],
    )
    w, bias = r(H, 3 * H) * 0.5, r(3 * H) * 0.1
    lengths = np.array([5, 3], np.int32)
    raw = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    out["attention"] = (
        model(
            [
                ms("Attention", ["x", "w", "bias", "lengths"], ["y_len"], num_heads=N),
                ms("Attention", ["x", "w", "bias", "raw"], ["y_raw"], num_heads=N),
                ms("Attention", ["x", "w", "bias"], ["y_causal"], num_heads=N, unidirectional=1),
                ms("Attention", ["x", "w", ""], ["y_scaled"], num_heads=N, scale=0.3),
            ],
            [vi("x", F, [B, S, H])],
            [vi(n, F, [B, S, H]) for n in ["y_len", "y_raw", "y_causal", "y_scaled"]],
            [arr("w", w), arr("bias", bias), arr("lengths", lengths), arr("raw", raw)],
        ),
        [r(B, S, H)],
    )
    L = 7
    kpm = np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]], np.int32)
    out["multi_head_attention"] = (
        model(
            [
                ms("MultiHeadAttention", ["q", "k", "v"], ["y"], num_heads=N),
                ms("MultiHeadAttention", ["q", "k", "v", "qkv_bias", "kpm"], ["y_masked"], num_heads=N),
                ms("MultiHeadAttention", ["q", "q", "q", "", "", "abias"], ["y_self"], num_heads=N, unidirectional=1),
            ],
            [vi("q", F, [B, S, H]), vi("k", F, [B, L, H]), vi("v", F, [B, L, H])],
            [vi(n, F, [B, S, H]) for n in ["y", "y_masked", "y_self"]],
            [arr("qkv_bias", r(3 * H) * 0.1), arr("kpm", kpm), arr("abias", r(1, N, S, S))],
        ),
        [r(B, S, H), r(B, L, H), r(B, L, H)],
    )
    out["qlinear"] = qlinear_fixture(rng)
    # Weights within [-63, 63]: onnxruntime's u8 x s8 kernel saturates int16 pair sums on CPUs
    # without VNNI (255 * 127 * 2 > 32767), which ONNX's exact product does not.
    wq = rng.integers(-63, 64, (8, 5)).astype(np.int8)
    out["dynamic_quantize_matmul"] = (
        model(
            [
                ms("DynamicQuantizeMatMul", ["a", "wq", "ws", "wz", "bias"], ["y"]),
                ms("DynamicQuantizeMatMul", ["a", "wq", "ws1"], ["y_scalar"]),
            ],
            [vi("a", F, [2, 3, 8])],
            [vi("y", F, [2, 3, 5]), vi("y_scalar", F, [2, 3, 5])],
            [
                arr("wq", wq),
                arr("ws", (rng.random(5) * 0.02 + 0.01).astype(np.float32)),
                arr("wz", np.array([0, 1, -2, 0, 3], np.int8)),
                arr("bias", r(5)),
                arr("ws1", np.array(0.015, np.float32)),
            ],
        ),
        [r(2, 3, 8)],
    )
    out["rotary_embedding"] = rotary_fixture(rng)
    return out


def rotary_fixture(rng):
    """RotaryEmbedding: 3-D and 4-D input, halves and interleaved pairs, the whole head and a
    partial rotary_embedding_dim, a one-element start position (a graph input and a constant)
    and per-token [B, S] position ids; `scale` set where it changes nothing."""
    B, S, N, D, M = 2, 5, 2, 8, 12
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    I64 = TensorProto.INT64
    angles = np.arange(M)[:, None] / (10000.0 ** (np.arange(0, D, 2)[None, :] / D))
    part = np.arange(M)[:, None] / (10000.0 ** (np.arange(0, 4, 2)[None, :] / 4))
    inits = [
        arr("cos", np.cos(angles).astype(np.float32)),
        arr("sin", np.sin(angles).astype(np.float32)),
        arr("cos2", np.cos(part).astype(np.float32)),
        arr("sin2", np.sin(part).astype(np.float32)),
        arr("p_const", np.array([3], np.int64)),
    ]
    nodes = [
        ms("RotaryEmbedding", ["x3", "p0", "cos", "sin"], ["y_halves"]),
        ms("RotaryEmbedding", ["x3", "pids", "cos", "sin"], ["y_pairs"], interleaved=1, num_heads=N),
        ms("RotaryEmbedding", ["x3", "p0", "cos2", "sin2"], ["y_partial"], interleaved=1, rotary_embedding_dim=4, num_heads=N),
        ms("RotaryEmbedding", ["x4", "pids", "cos", "sin"], ["y_4d"], scale=0.5),
        ms("RotaryEmbedding", ["x4", "p_const", "cos2", "sin2"], ["y_4d_partial"], rotary_embedding_dim=4, num_heads=N),
    ]
    pids = rng.integers(0, M, (B, S)).astype(np.int64)
    return (
        model(
            nodes,
            [vi("x3", F, [B, S, N * D]), vi("x4", F, [B, N, S, D]), vi("p0", I64, []), vi("pids", I64, [B, S])],
            [vi(n, F, [B, S, N * D]) for n in ["y_halves", "y_pairs", "y_partial"]]
            + [vi(n, F, [B, N, S, D]) for n in ["y_4d", "y_4d_partial"]],
            inits,
        ),
        [r(B, S, N * D), r(B, N, S, D), np.array(4, np.int64), pids],
    )


def qlinear_fixture(rng):
    """onnxruntime's QOperator contrib ops (what `quantize_static(QuantFormat.QOperator)` writes):
    uint8 and int8, broadcasting, absent zero points, and a concat of inputs quantized with
    different parameters."""
    U8, I8 = TensorProto.UINT8, TensorProto.INT8
    u8 = lambda *s: rng.integers(0, 256, s).astype(np.uint8)  # noqa: E731
    i8 = lambda *s: rng.integers(-128, 128, s).astype(np.int8)  # noqa: E731
    f = lambda v: np.array(v, np.float32)  # noqa: E731
    inits = [
        arr("sa", f(0.05)), arr("za", np.array(120, np.uint8)),
        arr("sb", f(0.02)), arr("zb", np.array(7, np.uint8)),
        arr("sc", f(0.06)), arr("zc", np.array(128, np.uint8)),
        arr("sm", f(0.4)), arr("zm", np.array(3, np.uint8)),
        arr("sy", f(1.0 / 256)), arr("zy", np.array(0, np.uint8)),
        arr("si", f(0.03)), arr("si2", f(0.045)), arr("zi", np.array(-5, np.int8)),
        arr("scat", f(0.07)), arr("zcat", np.array(100, np.uint8)),
    ]
    nodes = [
        ms("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["add"]),
        ms("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sm", "zm"], ["mul"]),
        ms("QLinearSigmoid", ["a", "sa", "za", "sy", "zy"], ["sig"]),
        ms("QLinearAdd", ["c", "si", "zi", "c", "si2", "zi", "si2", "zi"], ["add_i8"]),
        ms("QLinearMul", ["c", "si", "zi", "c", "si", "zi", "si2", "zi"], ["mul_i8"]),
        ms("QLinearSigmoid", ["c", "si", "zi", "sy", ""], ["sig_i8"]),
        ms("QLinearConcat", ["scat", "zcat", "a", "sa", "za", "add", "sc", "zc", "d", "scat", "zcat"], ["cat"], axis=0),
    ]
    return (
        model(
            nodes,
            [vi("a", U8, [2, 3, 4]), vi("b", U8, [3, 4]), vi("c", I8, [2, 3, 4]), vi("d", U8, [1, 3, 4])],
            [
                vi("add", U8, [2, 3, 4]),
                vi("mul", U8, [2, 3, 4]),
                vi("sig", U8, [2, 3, 4]),
                vi("add_i8", I8, [2, 3, 4]),
                vi("mul_i8", I8, [2, 3, 4]),
                vi("sig_i8", I8, [2, 3, 4]),
                vi("cat", U8, [5, 3, 4]),
            ],
            inits,
        ),
        [u8(2, 3, 4), u8(3, 4), i8(2, 3, 4), u8(1, 3, 4)],
    )


def window_fixtures():
    """Default-domain 1-D windows (Conv, pools, global pools on rank-3 NCL input), which passel
    runs as 2-D over a height of 1; written to `<dest>/../windows_1d/`."""
    rng = np.random.default_rng(13)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    m = model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 1], strides=[2], dilations=[2], group=1),
            helper.make_node("Conv", ["x", "wg"], ["cg"], auto_pad="SAME_UPPER", group=2, kernel_shape=[3]),
            helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[3], strides=[2], pads=[1, 1]),
            helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[4], count_include_pad=1, pads=[1, 2]),
            helper.make_node("GlobalMaxPool", ["x"], ["gmp"]),
            helper.make_node("GlobalAveragePool", ["x"], ["gap"]),
        ],
        [vi("x", F, [2, 4, 11])],
        [
            vi("c", F, [2, 3, 5]),
            vi("cg", F, [2, 6, 11]),
            vi("mp", F, [2, 4, 6]),
            vi("ap", F, [2, 4, 11]),
            vi("gmp", F, [2, 4, 1]),
            vi("gap", F, [2, 4, 1]),
        ],
        [arr("w", r(3, 4, 3)), arr("b", r(3)), arr("wg", r(6, 2, 3))],
    )
    return {"conv_pool_1d": (m, [r(2, 4, 11)])}


def bad_fixtures():
    """Models the importer must refuse with a clear error."""
    x = vi("x", F, [2, 5, 8])
    w = arr("w", np.zeros([8, 24], np.float32))
    return {
        "bad_attention_heads": model(
            [ms("Attention", ["x", "w"], ["y"], name="attn", num_heads=3)], [x], [vi("y", F, [2, 5, 8])], [w]
        ),
        "bad_attention_mask": model(
            [ms("Attention", ["x", "w", "", "m"], ["y"], name="attn", num_heads=2)],
            [x],
            [vi("y", F, [2, 5, 8])],
            [w, arr("m", np.ones([4], np.int32))],
        ),
        "bad_attention_past": model(
            [ms("Attention", ["x", "w", "", "", "past"], ["y"], name="attn", num_heads=2)],
            [x],
            [vi("y", F, [2, 5, 8])],
            [w, arr("past", np.zeros([2, 2, 2, 1, 4], np.float32))],
        ),
        "bad_quant_zero_scale": model(
            [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")],
            [x],
            [vi("y", TensorProto.UINT8, [2, 5, 8])],
            [arr("s", np.array(0.0, np.float32)), arr("z", np.array(3, np.uint8))],
        ),
        "bad_quant_scale_shape": model(
            [helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dq", axis=1)],
            [vi("q", TensorProto.INT8, [2, 5, 8])],
            [vi("y", F, [2, 5, 8])],
            [arr("s", np.ones([4], np.float32))],
        ),
        "bad_qlinear_per_channel": model(
            [ms("QLinearAdd", ["q", "s", "z", "q", "s", "z", "s1", "z"], ["y"], name="qadd")],
            [vi("q", TensorProto.UINT8, [2, 3])],
            [vi("y", TensorProto.UINT8, [2, 3])],
            [arr("s", np.ones([3], np.float32)), arr("z", np.array(0, np.uint8)), arr("s1", np.array(1.0, np.float32))],
        ),
        "bad_rotary_no_heads": model(
            [ms("RotaryEmbedding", ["x", "p", "c", "s"], ["y"], name="rope", rotary_embedding_dim=4)],
            [x],
            [vi("y", F, [2, 5, 8])],
            [arr("p", np.array(0, np.int64)), arr("c", np.ones([6, 2], np.float32)), arr("s", np.zeros([6, 2], np.float32))],
        ),
        "bad_skip_layer_norm_mean": model(
            [
                ms("SkipLayerNormalization", ["x", "x", "g"], ["y", "mean"], name="sln"),
                helper.make_node("Identity", ["mean"], ["m"]),
            ],
            [x],
            [vi("y", F, [2, 5, 8]), vi("m", F, [2, 5, 1])],
            [arr("g", np.ones([8], np.float32))],
        ),
    }


def write_case(d, m, inputs):
    os.makedirs(d, exist_ok=True)
    data = m.SerializeToString()
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(data)
    feeds = {vi.name: x for vi, x in zip(m.graph.input, inputs)}
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    for k, x in enumerate(inputs):
        np.save(os.path.join(d, f"input_{k}.npy"), x)
    for k, y in enumerate(got):
        np.save(os.path.join(d, f"output_{k}.npy"), np.asarray(y))
    print(f"{d}: {len(data)} bytes, {len(got)} outputs (onnxruntime {ort.__version__})")


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else "engine/tests/data/onnx/microsoft"
    for name, (m, inputs) in fixtures().items():
        write_case(os.path.join(dest, name), m, inputs)
    windows = os.path.join(os.path.dirname(os.path.normpath(dest)), "windows_1d")
    for name, (m, inputs) in window_fixtures().items():
        write_case(os.path.join(windows, name), m, inputs)
    for name, m in bad_fixtures().items():
        path = os.path.join(dest, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
