#!/usr/bin/env python3
"""Writes the LSTM / GRU / RNN models and expected outputs used by engine/tests/onnx_rnn.rs.

Usage (in the venv scripts/onnx_data.sh makes, which has onnx, onnxruntime and numpy):
    target/onnx-venv/bin/python scripts/onnx_rnn_fixtures.py engine/tests/data/onnx/rnn

Every case is a folder `<case>/` with `model.onnx`, `input_K.npy` (the graph inputs, in
order) and `output_K.npy` (the graph outputs). Models are built with onnx.helper from seeded
random weights; expected outputs come from onnxruntime (CPU). onnxruntime's LSTM and GRU refuse
`layout = 1` and its RNN ignores the attribute, so a `layout = 1` case is run as its
`layout = 0` twin on transposed inputs, and the outputs are transposed back: that is what the
spec defines `layout = 1` to be. `bad_*.onnx` are models the importer must refuse.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I32 = TensorProto.INT32
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def make_model(nodes, inputs, outputs, inits=(), opset=14):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="passel-rnn-fixtures")
    m.ir_version = 8
    return m


def layer(op, seed, T, N, I, H, direction="forward", bias=True, seq_lens=None, h0=False, c0=False, peep=False,
          const_weights=False, const_lens=False, layout=0, outputs=("Y", "Y_h", "Y_c"), scale=1.0, **attrs):
    """One recurrent node with seeded values; returns (model, feeds, layout-0 twin, twin feeds)."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    vals = {
        "X": (scale * rng.uniform(-1, 1, (T, N, I))).astype(np.float32),
        "W": rng.uniform(-0.6, 0.6, (D, G * H, I)).astype(np.float32),
        "R": rng.uniform(-0.6, 0.6, (D, G * H, H)).astype(np.float32),
    }
    names = ["X", "W", "R"]
    if bias:
        vals["B"] = rng.uniform(-0.4, 0.4, (D, 2 * G * H)).astype(np.float32)
    names.append("B" if bias else "")
    if seq_lens is not None:
        vals["sequence_lens"] = np.array(seq_lens, np.int32)
    names.append("sequence_lens" if seq_lens is not None else "")
    if h0:
        vals["initial_h"] = rng.uniform(-0.5, 0.5, (D, N, H)).astype(np.float32)
    names.append("initial_h" if h0 else "")
    if op == "LSTM":
        if c0:
            vals["initial_c"] = (scale * rng.uniform(-0.5, 0.5, (D, N, H))).astype(np.float32)
        names.append("initial_c" if c0 else "")
        if peep:
            vals["P"] = rng.uniform(-0.5, 0.5, (D, 3 * H)).astype(np.float32)
        names.append("P" if peep else "")
    while names and names[-1] == "":
        names.pop()
    outs = [o if o in outputs else "" for o in (["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"])]
    while outs and outs[-1] == "":
        outs.pop()
    const = set()
    if const_weights:
        const |= {"W", "R", "B", "P"}
    if const_lens:
        const.add("sequence_lens")

    def build(lay, vals):
        node = helper.make_node(op, names, outs, name=f"{op.lower()}1", hidden_size=H, direction=direction,
                                layout=lay, **attrs)
        inputs, inits, feeds = [], [], []
        for n in names:
            if not n:
                continue
            v = vals[n]
            if n in const:
                inits.append(numpy_helper.from_array(v, n))
            else:
                inputs.append(vi(n, I32 if v.dtype == np.int32 else F, list(v.shape)))
                feeds.append(v)
        shapes = {"Y": [T, D, N, H] if lay == 0 else [N, T, D, H]}
        shapes["Y_h"] = shapes["Y_c"] = [D, N, H] if lay == 0 else [N, D, H]
        outputs_vi = [vi(o, F, shapes[o]) for o in outs if o]
        return make_model([node], inputs, outputs_vi, inits), feeds

    twin, twin_feeds = build(0, vals)
    if layout == 0:
        return twin, twin_feeds, twin, twin_feeds
    # layout = 1: X is [batch, seq, input], states [batch, num_directions, hidden].
    vals1 = dict(vals)
    vals1["X"] = np.ascontiguousarray(vals["X"].transpose(1, 0, 2))
    for k in ("initial_h", "initial_c"):
        if k in vals:
            vals1[k] = np.ascontiguousarray(vals[k].transpose(1, 0, 2))
    model, feeds = build(1, vals1)
    return model, feeds, twin, twin_feeds


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, feeds)))


def to_layout1(model, outs):
    """Transposes layout-0 outputs (Y [T,D,N,H], Y_h / Y_c [D,N,H]) to layout 1."""
    res = []
    for o, a in zip(model.graph.output, outs):
        res.append(np.ascontiguousarray(a.transpose(2, 0, 1, 3) if o.name == "Y" else a.transpose(1, 0, 2)))
    return res


def write_case(out, name, model, feeds, outputs):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for k, a in enumerate(feeds):
        np.save(os.path.join(folder, f"input_{k}.npy"), a)
    for k, a in enumerate(outputs):
        np.save(os.path.join(folder, f"output_{k}.npy"), np.asarray(a, np.float32))


CASES = {
    # Bidirectional LSTM with everything: lengths as a graph input, initial states,
    # peepholes, clip and six non-default activations (HardSigmoid takes alpha 0.3 and beta
    # 0.4, Elu alpha 0.9; the reverse direction's are the defaults but Softplus).
    "lstm_bidirectional_everything": dict(
        op="LSTM", seed=1, T=5, N=3, I=3, H=4, direction="bidirectional", seq_lens=[5, 3, 1], h0=True, c0=True,
        peep=True, clip=2.5, activations=["HardSigmoid", "Softsign", "Elu", "Sigmoid", "Tanh", "Softplus"],
        activation_alpha=[0.3, 0.9], activation_beta=[0.4]),
    # layout = 1, input_forget, constant weights and constant lengths (masks fold at import).
    "lstm_layout1_input_forget": dict(
        op="LSTM", seed=2, T=4, N=3, I=2, H=3, seq_lens=[4, 2, 3], h0=True, c0=True, peep=True, input_forget=1,
        const_weights=True, const_lens=True, layout=1),
    # Reverse LSTM whose Y is not requested, a zero-length sequence and LeakyRelu / Relu.
    "lstm_reverse_empty_sequence": dict(
        op="LSTM", seed=3, T=3, N=2, I=2, H=3, direction="reverse", seq_lens=[3, 0], h0=True, c0=True,
        activations=["Sigmoid", "LeakyRelu", "Relu"], activation_alpha=[0.2], outputs=("Y_h", "Y_c")),
    # A clip well below the cell state's size: clip bounds the gates' pre-activations, not the
    # cell state h() is applied to (onnxruntime's reading).
    "lstm_clip_below_cell_state": dict(
        op="LSTM", seed=9, T=6, N=2, I=3, H=3, h0=True, c0=True, clip=0.3, scale=6.0),
    # Bidirectional GRU with linear_before_reset, lengths, initial state, clip, and LeakyRelu,
    # HardSigmoid and ScaledTanh (alphas 0.05, 0.25, 0.9; betas 0.45, 1.1).
    "gru_bidirectional_linear_before_reset": dict(
        op="GRU", seed=4, T=5, N=3, I=3, H=4, direction="bidirectional", seq_lens=[2, 5, 4], h0=True,
        linear_before_reset=1, clip=1.5, activations=["Sigmoid", "LeakyRelu", "HardSigmoid", "ScaledTanh"],
        activation_alpha=[0.05, 0.25, 0.9], activation_beta=[0.45, 1.1]),
    # GRU whose clip bounds every gate's pre-activation (inputs six times larger).
    "gru_clip_small": dict(
        op="GRU", seed=11, T=5, N=2, I=3, H=3, direction="bidirectional", seq_lens=[5, 3], h0=True, clip=0.3,
        scale=6.0),
    # Reverse GRU, layout = 1, Affine and ThresholdedRelu, constant weights, no bias.
    "gru_reverse_layout1": dict(
        op="GRU", seed=5, T=4, N=2, I=3, H=3, direction="reverse", bias=False, h0=True, const_weights=True, layout=1,
        activations=["Sigmoid", "Affine"], activation_alpha=[0.5], activation_beta=[0.1]),
    # Bidirectional RNN with lengths, initial state, clip, ThresholdedRelu and LeakyRelu.
    "rnn_bidirectional_lengths": dict(
        op="RNN", seed=6, T=4, N=3, I=2, H=3, direction="bidirectional", seq_lens=[1, 4, 3], h0=True, clip=0.8,
        activations=["ThresholdedRelu", "LeakyRelu"], activation_alpha=[0.1, 0.2]),
    # The smallest unrolling, whose imported module a test prints: two steps, no bias, no
    # initial state (the first step has no recurrent product).
    "rnn_two_steps": dict(op="RNN", seed=8, T=2, N=1, I=2, H=2, bias=False, const_weights=True),
    # A forward RNN with two activations (the schema's default list has two) uses the first.
    "rnn_forward_two_activations": dict(
        op="RNN", seed=10, T=3, N=2, I=2, H=3, h0=True, activations=["Relu", "Tanh"]),
    # Forward RNN, layout = 1, Softsign, constant weights.
    "rnn_layout1_softsign": dict(
        op="RNN", seed=7, T=3, N=2, I=3, H=4, h0=True, const_weights=True, layout=1, activations=["Softsign"]),
}


def bad_models():
    """Models the importer refuses: name -> model."""
    out = {}
    T, N, I, H = 3, 2, 2, 3

    def lstm(name, w_shape, r_shape, x_shape=(T, N, I), **attrs):
        node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name=name, **attrs)
        return make_model([node], [vi("X", F, list(x_shape)), vi("W", F, list(w_shape)), vi("R", F, list(r_shape))],
                          [vi("Y", F, None)])

    out["bad_lstm_w_shape"] = lstm("lstm_w", (1, 4 * H, I + 1), (1, 4 * H, H), hidden_size=H)
    out["bad_lstm_hidden_size"] = lstm("lstm_h", (1, 4 * H, I), (1, 4 * H, H), hidden_size=H + 1)
    out["bad_lstm_activation"] = lstm("lstm_act", (1, 4 * H, I), (1, 4 * H, H), hidden_size=H,
                                      activations=["Sigmoid", "Swish", "Tanh"])
    out["bad_lstm_activation_count"] = lstm("lstm_acts", (1, 4 * H, I), (1, 4 * H, H), hidden_size=H,
                                            activations=["Sigmoid", "Tanh"])
    out["bad_lstm_direction"] = lstm("lstm_dir", (1, 4 * H, I), (1, 4 * H, H), hidden_size=H, direction="sideways")
    out["bad_lstm_too_long"] = lstm("lstm_long", (1, 4 * H, 1), (1, 4 * H, H), x_shape=(20000, 1, 1), hidden_size=H)
    # Two nodes of 10,000 steps each: the second takes the model past the bound.
    nodes = [helper.make_node("GRU", ["X", "W", "R"], [f"Y{k}"], name=f"gru{k}", hidden_size=H) for k in (1, 2)]
    out["bad_gru_too_long_together"] = make_model(
        nodes, [vi("X", F, [10000, 1, 1]), vi("W", F, [1, 3 * H, 1]), vi("R", F, [1, 3 * H, H])],
        [vi("Y1", F, None), vi("Y2", F, None)])
    # A constant sequence_lens entry longer than the sequence.
    node = helper.make_node("RNN", ["X", "W", "R", "", "L"], ["Y"], name="rnn_len", hidden_size=H)
    out["bad_rnn_sequence_lens"] = make_model(
        [node], [vi("X", F, [T, N, I]), vi("W", F, [1, H, I]), vi("R", F, [1, H, H])], [vi("Y", F, None)],
        [numpy_helper.from_array(np.array([T, T + 1], np.int32), "L")])
    # sequence_lens must be int32.
    node = helper.make_node("GRU", ["X", "W", "R", "", "L"], ["Y"], name="gru_len64", hidden_size=H)
    out["bad_gru_sequence_lens_int64"] = make_model(
        [node], [vi("X", F, [T, N, I]), vi("W", F, [1, 3 * H, I]), vi("R", F, [1, 3 * H, H]),
                 vi("L", TensorProto.INT64, [N])], [vi("Y", F, None)])
    # activation_alpha with a value no activation takes.
    out["bad_lstm_leftover_alpha"] = lstm("lstm_alpha", (1, 4 * H, I), (1, 4 * H, H), hidden_size=H,
                                          activations=["Sigmoid", "Tanh", "LeakyRelu"], activation_alpha=[0.1, 0.2])
    # An empty input whose batch is so large that the outputs' sizes overflow.
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], name="rnn_huge", hidden_size=H)
    out["bad_rnn_huge_batch"] = make_model(
        [node], [vi("X", F, [T, 1 << 62, 0]), vi("W", F, [1, H, 0]), vi("R", F, [1, H, H])], [vi("Y", F, None)])
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "engine/tests/data/onnx/rnn"
    os.makedirs(out, exist_ok=True)
    for name, spec in CASES.items():
        model, feeds, twin, twin_feeds = layer(**spec)
        want = run_ort(twin, twin_feeds)
        if spec.get("layout", 0) == 1:
            want = to_layout1(twin, want)
        write_case(out, name, model, feeds, want)
    for name, model in bad_models().items():
        onnx.save(model, os.path.join(out, f"{name}.onnx"))
    print(f"{len(CASES)} cases and {len(bad_models())} bad models written to {out}")


if __name__ == "__main__":
    main()
