"""Writes the ONNX conformance data that `passel conformance` checks passel against.

Run through scripts/onnx_data.sh (which makes the venv). Every case is a folder holding
`model.onnx`, `input_K.npy`, `output_K.npy` and `meta.json` (input/output names, tolerances,
the ONNX op types used, input shapes for symbolic dims). Nothing here is written by passel's
authors: node cases come from onnx's own generators, light models with onnx's expected
outputs, transformer graphs and the OCR models with onnxruntime's outputs.

  OUT/node/<case>/          onnx.backend.test.case.node.collect_testcases()
  OUT/light/<model>/        onnx/backend/test/data/light/ (inputs as onnx's runner makes them)
  OUT/models/<name>/        BERT- and GPT-2-shaped graphs, rapidocr det/cls (if installable)
"""

import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else "target/onnx-data"


def write_case(folder, model, inputs, outputs, meta):
    """Writes model.onnx, input_K.npy, output_K.npy and meta.json into `folder`."""
    os.makedirs(folder, exist_ok=True)
    if isinstance(model, (bytes, bytearray)):
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(model)
    else:
        onnx.save(model, os.path.join(folder, "model.onnx"))
    # Row-major files (rank 0 stays rank 0): transposed arrays would be saved in Fortran order.
    for k, a in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{k}.npy"), np.asarray(a, order="C"))
    for k, a in enumerate(outputs):
        np.save(os.path.join(folder, f"output_{k}.npy"), np.asarray(a, order="C"))
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def graph_ops(model):
    """The op types of the graph, those inside If / Loop / Scan subgraphs included."""
    ops, todo = set(), [model.graph]
    while todo:
        g = todo.pop()
        for n in g.node:
            ops.add(n.op_type)
            for a in n.attribute:
                todo.extend([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs))
    return sorted(ops)


def real_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


# ---- (a) node cases ----

# Inputs that determine a result's shape (or an attribute passel keeps static): ONNX's node
# cases feed them as graph inputs, while exported models hold them as constants or shape
# subgraphs. passel's types are static, so such an input, when it is a graph input, becomes
# an initializer with the case's value (meta.json lists them under "static_inputs").
STATIC_INPUTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 2, 3},
    "Resize": {1, 2, 3}, "Upsample": {1}, "Split": {1}, "Squeeze": {1}, "Unsqueeze": {1},
    "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
    "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
    "ReduceSumSquare": {1}, "TopK": {1}, "Trilu": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2},
    "OneHot": {1}, "Clip": {1, 2}, "CenterCropPad": {1}, "CumSum": {1}, "CumProd": {1},
    # Window sizes and AffineGrid's output size fix their outputs' shapes.
    "HannWindow": {0}, "HammingWindow": {0}, "BlackmanWindow": {0}, "AffineGrid": {1},
    # A Loop's trip count and condition fix the length of its scan outputs.
    "Loop": {0, 1},
    # A transform's length and axis, a frame step and length, a mel matrix's sizes and
    # frequencies, an unpooled or folded image's size fix their outputs' shapes.
    "DFT": {1, 2}, "STFT": {1, 3}, "MelWeightMatrix": {0, 1, 2, 3, 4}, "Col2Im": {1, 2},
    "MaxUnpool": {2},
    # Dropout's ratio and training flag decide whether it is the identity.
    "Dropout": {1, 2},
}


def static_names(node):
    """The names of `node`'s inputs that STATIC_INPUTS marks as shape-determining."""
    return {node.input[i] for i in STATIC_INPUTS.get(node.op_type, ()) if i < len(node.input) and node.input[i]}


def make_static(model, inputs, also=()):
    """Turns shape-determining graph inputs (and the names in `also`: an expanded case's
    inputs that are shape-determining inputs of its twin's node) into initializers; returns
    the new model, the remaining inputs' values and the names made static."""
    static = set(also)
    for node in model.graph.node:
        static |= static_names(node)
    names = [i.name for i in model.graph.input]
    static &= set(names)
    if not static:
        return model, list(inputs), []
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [i for i in m.graph.input if i.name not in static]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    values = dict(zip(names, inputs))
    for name in sorted(static):
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))
    return m, [values[n] for n in names if n not in static], sorted(static)


def as_array(a):
    if isinstance(a, TensorProto):
        return numpy_helper.to_array(a)
    # A numpy scalar (DynamicQuantizeLinear's y_scale) is a rank-0 tensor.
    return np.asarray(a) if isinstance(a, np.generic) else a

def node_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    # An expanded case (`…_expanded`, a function body) is grouped under its twin's op.
    single = {}
    # The twin's shape-determining inputs: the expanded graph takes the same inputs, by name.
    twin_static = {}
    for c in cases:
        if c.model is not None and len(c.model.graph.node) == 1:
            single[c.name] = c.model.graph.node[0].op_type
            twin_static[c.name] = static_names(c.model.graph.node[0])
    n = 0
    for c in cases:
        if c.model is None or not c.data_sets:
            continue
        base = c.name.split("_expanded")[0]
        group = single.get(c.name) or single.get(base) or c.model.graph.node[0].op_type
        inputs, outputs = c.data_sets[0]
        inputs, outputs = [as_array(a) for a in inputs], [as_array(a) for a in outputs]
        model = c.model
        meta = {
            "kind": "node",
            "group": group,
            "ops": graph_ops(c.model),
            "opset": max((o.version for o in c.model.opset_import if o.domain in ("", "ai.onnx")), default=0),
            "rtol": float(c.rtol),
            "atol": float(c.atol),
            "inputs": [i.name for i in c.model.graph.input],
            "outputs": [o.name for o in c.model.graph.output],
        }
        ok = all(isinstance(a, np.ndarray) for a in list(inputs) + list(outputs))
        if not ok:
            meta["skip"] = "inputs or outputs are not plain tensors (sequence, optional or map)"
            inputs, outputs = [], []
        elif any(a.dtype == object for a in list(inputs) + list(outputs)):
            meta["skip"] = "string tensors"
            inputs, outputs = [], []
        elif len(inputs) == len(c.model.graph.input):
            also = twin_static.get(base, set()) if c.name != base else set()
            model, inputs, static = make_static(c.model, inputs, also)
            meta["static_inputs"] = static
            meta["inputs"] = [i.name for i in model.graph.input]
        write_case(os.path.join(OUT, "node", c.name), model, inputs, outputs, meta)
        n += 1
    print(f"node cases: {n} written to {OUT}/node")


# ---- (b) light models ----

LIGHT_TOL = {"densenet121": 2e-3}


def light_models():
    import onnxruntime as ort

    src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    n = 0
    for fname in sorted(os.listdir(src)):
        if not fname.endswith(".onnx"):
            continue
        name = fname[len("light_"):-len(".onnx")]
        model = onnx.load(os.path.join(src, fname))
        # The input onnx's runner feeds these models (runner/__init__.py, generate_dummy_data
        # with random=False): arange(n) / n in the input's shape.
        inputs = []
        for x in real_inputs(model):
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
            count = int(np.prod(shape))
            inputs.append((np.arange(count).reshape(shape) / count).astype(np.float32))
        outputs = []
        for k in range(len(model.graph.output)):
            t = TensorProto()
            with open(os.path.join(src, f"light_{name}_output_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            outputs.append(numpy_helper.to_array(t))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {x.name: a for x, a in zip(real_inputs(model), inputs)})
        ort_err = max(float(np.max(np.abs(g - e))) for g, e in zip(got, outputs))
        meta = {
            "kind": "light",
            "ops": graph_ops(model),
            "rtol": LIGHT_TOL.get(name, 1e-3),
            "atol": 1e-7,
            "inputs": [x.name for x in real_inputs(model)],
            "outputs": [o.name for o in model.graph.output],
            "onnxruntime_max_abs_error_vs_expected": ort_err,
        }
        write_case(os.path.join(OUT, "light", name), model, inputs, outputs, meta)
        n += 1
    print(f"light models: {n} written to {OUT}/light")


# ---- (c) transformer graphs as torch.onnx exports them ----

class G:
    """A small graph builder: named initializers and nodes, torch.onnx-style names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, base):
        self.k += 1
        return f"/{base}_{self.k}"

    def w(self, shape, scale=0.02, base="w"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), n))
        return n

    def c(self, value, dtype=np.int64, base="const"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), n))
        return n

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type + "_out") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    # torch.onnx's LayerNorm below opset 17: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add.
    def layer_norm_decomposed(self, x, dim):
        mean = self.op("ReduceMean", [x], axes=[-1])
        d = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [d, self.c(2.0, np.float32)])], axes=[-1])
        std = self.op("Sqrt", [self.op("Add", [var, self.c(1e-12, np.float32)])])
        y = self.op("Div", [d, std])
        gamma = self.w([dim], 0.1)
        return self.op("Add", [self.op("Mul", [y, self.op("Add", [gamma, self.c(1.0, np.float32)])]), self.w([dim])])

    def layer_norm(self, x, dim):
        gamma = self.op("Add", [self.w([dim], 0.1), self.c(1.0, np.float32)])
        return self.op("LayerNormalization", [x, gamma, self.w([dim])], axis=-1, epsilon=1e-5)

    def linear(self, x, din, dout):
        return self.op("Add", [self.op("MatMul", [x, self.w([din, dout])]), self.w([dout])])

    def gelu_erf(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.c(1.4142135381698608, np.float32)])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.c(1.0, np.float32)])]), self.c(0.5, np.float32)])

    def gelu_tanh(self, x):
        cube = self.op("Pow", [x, self.c(3.0, np.float32)])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.c(0.044715, np.float32)])])
        t = self.op("Tanh", [self.op("Mul", [inner, self.c(0.7978845608028654, np.float32)])])
        return self.op("Mul", [self.op("Mul", [x, self.c(0.5, np.float32)]), self.op("Add", [t, self.c(1.0, np.float32)])])

    def dim_of(self, x, i):
        """torch's `x.size(i)` as a 1-element tensor: Shape -> Gather -> Unsqueeze."""
        g = self.op("Gather", [self.op("Shape", [x]), self.c(i)], axis=0)
        return self.op("Unsqueeze", [g, self.c([0])])

    def split_heads(self, x, heads, head_dim, perm):
        """view(b, s, heads, head_dim) through a Shape/Gather/Concat shape, then permute."""
        shape = self.op("Concat", [self.dim_of(x, 0), self.dim_of(x, 1), self.c([heads]), self.c([head_dim])], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=perm)

    def merge_heads(self, x, like, hidden):
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        shape = self.op("Concat", [self.dim_of(like, 0), self.dim_of(like, 1), self.c([hidden])], axis=0)
        return self.op("Reshape", [t, shape])


def bert(seed=0, vocab=120, seq=16, hidden=64, heads=4, layers=2, ffn=128):
    g = G(seed)
    hd = hidden // heads
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])
    mask_in = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq])
    tok = g.op("Gather", [g.w([vocab, hidden], base="word_embeddings"), "input_ids"], axis=0)
    pos_ids = g.op("Unsqueeze", [g.op("Range", [g.c(0), g.op("Squeeze", [g.dim_of("input_ids", 1), g.c([0])]), g.c(1)]), g.c([0])])
    pos = g.op("Gather", [g.w([seq, hidden], base="position_embeddings"), pos_ids], axis=0)
    x = g.layer_norm_decomposed(g.op("Add", [tok, pos]), hidden)
    # extended attention mask: (1 - mask[:, None, None, :]) * -10000
    m = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.c([1, 2])])], to=TensorProto.FLOAT)
    m = g.op("Mul", [g.op("Sub", [g.c(1.0, np.float32), m]), g.c(-10000.0, np.float32)])
    for _ in range(layers):
        q = g.split_heads(g.linear(x, hidden, hidden), heads, hd, [0, 2, 1, 3])
        k = g.split_heads(g.linear(x, hidden, hidden), heads, hd, [0, 2, 3, 1])
        v = g.split_heads(g.linear(x, hidden, hidden), heads, hd, [0, 2, 1, 3])
        s = g.op("Div", [g.op("MatMul", [q, k]), g.c(float(np.sqrt(hd)), np.float32)])
        p = g.op("Softmax", [g.op("Add", [s, m])], axis=-1)
        a = g.merge_heads(g.op("MatMul", [p, v]), x, hidden)
        x = g.layer_norm_decomposed(g.op("Add", [g.linear(a, hidden, hidden), x]), hidden)
        h = g.linear(g.gelu_erf(g.linear(x, hidden, ffn)), ffn, hidden)
        x = g.layer_norm_decomposed(g.op("Add", [h, x]), hidden)
    pooled = g.op("Tanh", [g.linear(g.op("Gather", [x, g.c(0)], axis=1), hidden, hidden)])
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    g.nodes.append(helper.make_node("Identity", [pooled], ["pooler_output"]))
    outs = [
        helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, seq, hidden]),
        helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, [1, hidden]),
    ]
    graph = helper.make_graph(g.nodes, "bert_tiny", [ids, mask_in], outs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="pytorch-shaped")
    rng = np.random.default_rng(seed + 1)
    inputs = [rng.integers(0, vocab, (1, seq)).astype(np.int64), np.array([[1] * (seq - 3) + [0] * 3], np.int64)]
    return model, inputs


def gpt2(seed=0, vocab=120, seq=16, hidden=64, heads=4, layers=2):
    g = G(seed)
    hd = hidden // heads
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])
    wte = g.w([vocab, hidden], base="wte")
    n = g.dim_of("input_ids", 1)
    pos_ids = g.op("Unsqueeze", [g.op("Range", [g.c(0), g.op("Squeeze", [n, g.c([0])]), g.c(1)]), g.c([0])])
    x = g.op("Add", [g.op("Gather", [wte, "input_ids"], axis=0), g.op("Gather", [g.w([seq, hidden], base="wpe"), pos_ids], axis=0)])
    # The causal-mask buffer `bias` sliced to the sequence length, as GPT-2's export does.
    bias_n = g.name("bias")
    g.inits.append(numpy_helper.from_array(np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq), bias_n))
    causal = g.op("Slice", [g.op("Slice", [bias_n, g.c([0]), n, g.c([2])]), g.c([0]), n, g.c([3])])
    neg = g.c(np.finfo(np.float32).min, np.float32)
    for _ in range(layers):
        h = g.layer_norm(x, hidden)
        qkv = g.linear(h, hidden, 3 * hidden)
        q, k, v = g.op("Split", [qkv, g.c([hidden, hidden, hidden])], n_out=3, axis=2)
        q = g.split_heads(q, heads, hd, [0, 2, 1, 3])
        k = g.split_heads(k, heads, hd, [0, 2, 3, 1])
        v = g.split_heads(v, heads, hd, [0, 2, 1, 3])
        s = g.op("Div", [g.op("MatMul", [q, k]), g.c(float(np.sqrt(hd)), np.float32)])
        s = g.op("Where", [causal, s, neg])
        a = g.merge_heads(g.op("MatMul", [g.op("Softmax", [s], axis=-1), v]), x, hidden)
        x = g.op("Add", [x, g.linear(a, hidden, hidden)])
        h = g.linear(g.gelu_tanh(g.linear(g.layer_norm(x, hidden), hidden, 4 * hidden)), 4 * hidden, hidden)
        x = g.op("Add", [x, h])
    x = g.layer_norm(x, hidden)
    g.nodes.append(helper.make_node("MatMul", [x, g.op("Transpose", [wte], perm=[1, 0])], ["logits"]))
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, seq, vocab])]
    graph = helper.make_graph(g.nodes, "gpt2_tiny", [ids], outs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch-shaped")
    rng = np.random.default_rng(seed + 2)
    return model, [rng.integers(0, vocab, (1, seq)).astype(np.int64)]


def run_ort(model_bytes, names, inputs):
    import onnxruntime as ort

    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))


def transformers():
    for name, (model, inputs) in [("bert_tiny", bert()), ("gpt2_tiny", gpt2())]:
        onnx.checker.check_model(model, full_check=True)
        names = [i.name for i in real_inputs(model)]
        outputs = run_ort(model.SerializeToString(), names, inputs)
        meta = {
            "kind": "model",
            "ops": graph_ops(model),
            "rtol": 1e-3,
            "atol": 1e-5,
            "inputs": names,
            "outputs": [o.name for o in model.graph.output],
            "source": "built with onnx.helper following torch.onnx export patterns; expected outputs from onnxruntime",
        }
        write_case(os.path.join(OUT, "models", name), model, inputs, outputs, meta)
        print(f"model {name}: {len(model.graph.node)} nodes, ops {meta['ops']}")


# ---- (d) rapidocr's PaddleOCR det/cls models ----

OCR_SHAPES = {"det": [1, 3, 160, 160], "cls": [1, 3, 48, 192]}


def ocr_models():
    wheel_dir = os.path.join(os.path.dirname(OUT.rstrip("/")) or ".", "ocr-wheel")
    os.makedirs(wheel_dir, exist_ok=True)
    # Only the wheel's files are needed (its runtime dependencies, e.g. OpenCV, are not).
    r = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", wheel_dir, "rapidocr-onnxruntime"],
        capture_output=True,
        text=True,
    )
    wheels = [f for f in os.listdir(wheel_dir) if f.startswith("rapidocr_onnxruntime") and f.endswith(".whl")]
    if not wheels:
        print(f"skip: rapidocr-onnxruntime cannot be downloaded: {(r.stderr or r.stdout).strip()[:300]}")
        return
    import zipfile

    with zipfile.ZipFile(os.path.join(wheel_dir, sorted(wheels)[-1])) as z:
        found = [n for n in z.namelist() if n.endswith(".onnx")]
        print(f"rapidocr wheel {sorted(wheels)[-1]} ships: {', '.join(os.path.basename(n) for n in found)}")
        for member in found:
            base = os.path.basename(member)
            kind = "det" if "_det_" in base else "cls" if "_cls_" in base else None
            if kind is None:
                print(f"skip {base}: the recognition model is not part of this check (det and cls are)")
                continue
            data = z.read(member)
            model = onnx.load_from_string(data)
            x = real_inputs(model)[0]
            shape = OCR_SHAPES[kind]
            rng = np.random.default_rng(7)
            inputs = [rng.random(shape, np.float32)]
            outputs = run_ort(data, [x.name], inputs)
            name = f"ocr_{kind}"
            meta = {
                "kind": "model",
                "ops": graph_ops(model),
                "rtol": 1e-3,
                "atol": 1e-4,
                "inputs": [x.name],
                "outputs": [o.name for o in model.graph.output],
                "input_shapes": {x.name: shape},
                "source": f"rapidocr-onnxruntime wheel: {member}; expected outputs from onnxruntime",
            }
            write_case(os.path.join(OUT, "models", name), data, inputs, outputs, meta)
            print(f"model {name}: {base}, {len(model.graph.node)} nodes, opset {model.opset_import[0].version}")


if __name__ == "__main__":
    onnxruntime.set_default_logger_severity(3)
    t = time.time()
    only = sys.argv[2:]
    steps = {"node": [node_cases], "light": [light_models], "models": [transformers, ocr_models]}
    for d, fns in steps.items():
        if only and d not in only:
            continue
        shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
        for fn in fns:
            fn()
    print(f"onnx data written to {OUT} in {time.time() - t:.1f} s")
