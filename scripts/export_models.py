"""Exports small random-weight models with torch.onnx and writes them as passel test data.

Run through scripts/export_models.sh (which makes target/export-venv with torch, transformers,
onnx, onnxscript, onnxruntime). Not part of CI: CI reads the committed files, without torch.

Every case is a folder OUT/<name>/ in the layout of `passel conformance`'s `models/` cases
(scripts/onnx_data.py): `model.onnx` (weights embedded), seeded inputs `input_K.npy`,
onnxruntime's outputs `output_K.npy`, and `meta.json` (kind, inputs, outputs, ops, rtol, atol,
source, plus architecture, exporter, opset, versions, op histogram). `passel conformance OUT`
runs them. OUT/README.md lists every model with its op histogram (ops inside If/Loop subgraphs
included) and, when a passel binary is given, what `passel import` / `passel eval` say.

Each architecture is exported with the dynamo exporter (`torch.onnx.export(..., dynamo=True)`)
and, as a second file, with the legacy TorchScript exporter (`dynamo=False`) where it still
works; static input shapes. Then onnxruntime quantizes BERT and the LSTM/GRU model
(`quantize_dynamic`), YOLO and ConvNeXt (`quantize_static`, QDQ; YOLO also QOperator), and
BERT / GPT-2 go through onnxruntime's transformer optimizer (com.microsoft fused ops). An exporter that fails is
recorded in OUT/failures.json and the README with its error; the rest go on.

Usage:
  export_models.py OUT [NAME_SUBSTRING…]      export (all, or names containing a substring)
  export_models.py --readme OUT [PASSEL]      only rewrite OUT/README.md from the committed
                                              cases, running PASSEL import / eval on each
"""

import collections
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 0
LEGACY_OPSET = 17


# ---------------------------------------------------------------- ONNX inspection (no torch)


def op_key(domain, op_type):
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def walk_graph(graph, hist, depth=0):
    """Adds every node of `graph` and of its subgraphs (If/Loop/Scan bodies) to `hist`;
    returns the number of nodes inside subgraphs."""
    inner = 0
    for n in graph.node:
        hist[(op_key(n.domain, n.op_type), depth > 0)] += 1
        if depth > 0:
            inner += 1
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for g in subs:
                inner += walk_graph(g, hist, depth + 1)
    return inner


def inspect(model):
    """Op histogram and counts: {op: count} over the main graph, its subgraphs and the
    model-local functions; which ops occur only inside subgraphs / functions."""
    hist = collections.Counter()
    inner = walk_graph(model.graph, hist)
    fhist = collections.Counter()
    for f in model.functions:
        for n in f.node:
            fhist[op_key(n.domain, n.op_type)] += 1
    total = collections.Counter()
    in_sub = collections.Counter()
    for (op, sub), c in hist.items():
        total[op] += c
        if sub:
            in_sub[op] += c
    for op, c in fhist.items():
        total[op] += c
    opsets = {(o.domain or "ai.onnx"): o.version for o in model.opset_import}
    return {
        "nodes": len(model.graph.node),
        "subgraph_nodes": inner,
        "function_nodes": sum(fhist.values()),
        "functions": [f"{f.domain}::{f.name}" for f in model.functions],
        "histogram": dict(sorted(total.items())),
        "in_subgraphs": dict(sorted(in_sub.items())),
        "opsets": opsets,
    }


def supported_ops():
    """passel's SUPPORTED_OPS, read from the importer's `onnx_ops!` table."""
    text = open(os.path.join(ROOT, "engine/src/frontend/onnx/ops.rs")).read()
    block = text[text.index("onnx_ops! {") :]
    block = block[: block.index("\n}\n")]
    return set(re.findall(r'^\s*"(\w+)":', block, re.M))


# ---------------------------------------------------------------- export (torch)

VERSIONS = {}
FAILURES = {}  # name -> error text


def versions():
    import onnxruntime
    import onnxscript
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxscript": onnxscript.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }


def seed_all(seed=SEED):
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed)


def short_error(e):
    """The exception's type and message, first lines only (exporter errors are long)."""
    msg = f"{type(e).__name__}: {e}".strip()
    lines = [l for l in msg.splitlines() if l.strip()]
    tb = traceback.extract_tb(e.__traceback__)
    where = f"\n(raised at {tb[-1].filename.split('site-packages/')[-1]}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    return "\n".join(lines[:6])[:1500] + where


def ort_run(path, inputs, unfused=False):
    """onnxruntime's outputs, with its default graph optimizations; if the session cannot be
    made with them (an onnxruntime bug on some optimizer outputs), with none. `unfused` (QDQ
    models) always runs with none: onnxruntime's optimizer turns DequantizeLinear → op →
    QuantizeLinear into its integer kernels (QLinearConv, …), which round differently from the
    float operators the model is made of (0.05 abs on convnext_dynamo_qdq, 0.5 on
    yolo_dynamo_qdq), while the unoptimized run computes exactly what the graph says. Returns
    the outputs and a note saying which."""
    import onnxruntime as ort

    note = None
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if unfused:
        note = ("QDQ model: the expected outputs were computed with GraphOptimizationLevel.ORT_DISABLE_ALL "
                "(the graph's own float operators; onnxruntime's fused integer kernels round differently)")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        note = (f"onnxruntime cannot load this model with its graph optimizations on ({short_error(e).splitlines()[0][:300]}); "
                "the expected outputs were computed with GraphOptimizationLevel.ORT_DISABLE_ALL")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert len(names) == len(inputs), (names, len(inputs))
    return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))], note


def tolerances(outputs):
    """The issue's criterion: max |got - want| <= 1e-4 * max |want| for every float output,
    integer outputs exact. As the runner's `atol + rtol * |want|`: rtol 0, atol 1e-4 times the
    smallest per-output max |want| (floored at 1e-7)."""
    scales = [float(np.max(np.abs(o))) for o in outputs if o.dtype.kind == "f" and o.size]
    atol = max(1e-7, 1e-4 * min(scales)) if scales else 0.0
    return 0.0, float(f"{atol:.3g}")


def real_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def strip_stack_traces(graph):
    """Drops the dynamo exporter's per-node `pkg.torch.onnx.stack_trace` metadata (Python
    tracebacks with this machine's paths and counters that differ between runs); the other
    metadata (name scopes, class hierarchy, fx node) stays."""
    for n in graph.node:
        keep = [p for p in n.metadata_props if "stack_trace" not in p.key]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
        for a in n.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                strip_stack_traces(g)


def write_case(name, path_in, inputs, info):
    """Copies the exported model into OUT/<name>/, runs onnxruntime on `inputs` and writes
    the inputs, outputs and meta.json."""
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    model = onnx.load(path_in)
    # Weights embedded: no external data anywhere.
    for t in model.graph.initializer:
        assert t.data_location != onnx.TensorProto.EXTERNAL, f"{name}: {t.name} is external"
    strip_stack_traces(model.graph)
    for f in model.functions:
        strip_stack_traces(f)
    onnx.checker.check_model(model)
    dst = os.path.join(folder, "model.onnx")
    onnx.save(model, dst)
    outputs, ort_note = ort_run(dst, inputs, unfused=name.endswith("_qdq"))
    info = dict(info, note="; ".join(x for x in (info.get("note"), ort_note) if x) or None)
    for k, a in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{k}.npy"), a)
    for k, a in enumerate(outputs):
        np.save(os.path.join(folder, f"output_{k}.npy"), a)
    rtol, atol = tolerances(outputs)
    ins = real_inputs(model)
    symbolic = any(not d.HasField("dim_value") for i in ins for d in i.type.tensor_type.shape.dim)
    insp = inspect(model)
    meta = {
        "kind": "model",
        "architecture": info["arch"],
        "exporter": info["exporter"],
        "ops": sorted(insp["histogram"]),
        "op_histogram": insp["histogram"],
        "ops_in_subgraphs": insp["in_subgraphs"],
        "opsets": insp["opsets"],
        "opset": insp["opsets"].get("ai.onnx"),
        "nodes": insp["nodes"],
        "subgraph_nodes": insp["subgraph_nodes"],
        "function_nodes": insp["function_nodes"],
        "rtol": rtol,
        "atol": atol,
        "inputs": [i.name for i in ins],
        "outputs": [o.name for o in model.graph.output],
        "shapes": {
            "inputs": [list(a.shape) for a in inputs],
            "outputs": [list(a.shape) for a in outputs],
        },
        "dtypes": {"inputs": [str(a.dtype) for a in inputs], "outputs": [str(a.dtype) for a in outputs]},
        "max_abs_reference": [float(np.max(np.abs(o))) if o.size else 0.0 for o in outputs],
        "seed": SEED,
        "source": f"{info['exporter']}; expected outputs from onnxruntime {VERSIONS['onnxruntime']} "
        f"(CPUExecutionProvider) on seeded inputs; scripts/export_models.py",
        "versions": VERSIONS,
    }
    if info.get("note"):
        meta["note"] = info["note"]
    if symbolic:
        meta["input_shapes"] = {i.name: list(a.shape) for i, a in zip(ins, inputs)}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    size = os.path.getsize(dst)
    print(f"  {name}: opset {meta['opset']}, {insp['nodes']} nodes (+{insp['subgraph_nodes']} in subgraphs), "
          f"{size / 1024:.0f} KiB, ops {', '.join(meta['ops'])}", flush=True)
    assert size < 2 * 1024 * 1024, f"{name} is {size} bytes"
    return dst


def export_one(name, module, args, input_names, output_names, arch, dynamo, note=None):
    """Exports `module` on `args` with one exporter to OUT/<name>/; returns the model path
    or None (failure recorded)."""
    import torch

    tmp = os.path.join(TMP, name + ".onnx")
    exporter = (
        f"torch.onnx.export(dynamo=True) torch {VERSIONS['torch']}, onnxscript {VERSIONS['onnxscript']}"
        if dynamo
        else f"torch.onnx.export(dynamo=False, TorchScript, opset {LEGACY_OPSET}) torch {VERSIONS['torch']}"
    )
    try:
        module.eval()
        log = io.StringIO()
        with torch.no_grad(), contextlib.redirect_stdout(log), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if dynamo:
                torch.onnx.export(
                    module,
                    tuple(args),
                    tmp,
                    dynamo=True,
                    input_names=input_names,
                    output_names=output_names,
                    external_data=False,
                    verbose=False,
                )
            else:
                torch.onnx.export(
                    module,
                    tuple(args),
                    tmp,
                    dynamo=False,
                    opset_version=LEGACY_OPSET,
                    input_names=input_names,
                    output_names=output_names,
                    do_constant_folding=True,
                )
        inputs = [a.detach().numpy() for a in args]
        return write_case(name, tmp, inputs, {"arch": arch, "exporter": exporter, "note": note})
    except Exception as e:  # noqa: BLE001 - an exporter failure is data, recorded
        FAILURES[name] = {"arch": arch, "exporter": exporter, "error": short_error(e)}
        print(f"  {name}: FAILED: {short_error(e).splitlines()[0][:300]}", flush=True)
        if os.environ.get("EXPORT_TRACEBACK"):
            traceback.print_exc()
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)
        return None


def export_both(base, make, arch, note=None, legacy=True):
    """make() -> (module, args, input_names, output_names); a fresh seeded module per export."""
    paths = {}
    for dynamo in (True, False) if legacy else (True,):
        name = f"{base}_{'dynamo' if dynamo else 'legacy'}"
        if not wanted(name):
            continue
        seed_all()
        module, args, ins, outs = make()
        paths[dynamo] = export_one(name, module, args, ins, outs, arch, dynamo, note)
    return paths


def wanted(name):
    return not ONLY or any(s in name for s in ONLY)


# ---- the architectures


def ids(vocab, n, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g, dtype=torch.int64)


def randn(shape, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def mask(n, pad):
    import torch

    m = torch.ones(1, n, dtype=torch.int64)
    if pad:
        m[0, n - pad :] = 0
    return m


class HF:
    """Wraps a transformers model so that forward takes positional tensors and returns a tuple
    of tensors (no cache, no dict)."""

    @staticmethod
    def wrap(model, keys, picks, extra=None):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *args):
                out = self.m(**dict(zip(keys, args)), **(extra or {}), return_dict=True)
                return tuple(out[k] for k in picks)

        return Wrapped()


def bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=32, type_vocab_size=2,
    )
    m = BertModel(cfg)
    keys = ["input_ids", "attention_mask", "token_type_ids"]
    tt = (torch_arange(16) >= 8).long()  # two segments
    args = [ids(96, 16, 1), mask(16, 3), tt]
    return HF.wrap(m, keys, ["last_hidden_state", "pooler_output"]), args, keys, ["last_hidden_state", "pooler_output"]


def torch_arange(n):
    import torch

    return torch.arange(n).unsqueeze(0)


def bert_classic_module():
    import math

    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, h=32, heads=4, ffn=64):
            super().__init__()
            self.heads, self.d = heads, h // heads
            self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
            self.ln1 = nn.LayerNorm(h, eps=1e-12)
            self.inter, self.out = nn.Linear(h, ffn), nn.Linear(ffn, h)
            self.ln2 = nn.LayerNorm(h, eps=1e-12)

        def split(self, x):
            return x.view(x.size()[:-1] + (self.heads, self.d)).permute(0, 2, 1, 3)

        def forward(self, x, ext):
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + ext
            ctx = torch.matmul(nn.functional.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
            ctx = ctx.view(ctx.size()[:-2] + (self.heads * self.d,))
            a = self.ln1(self.o(ctx) + x)
            return self.ln2(self.out(nn.functional.gelu(self.inter(a))) + a)

    class Bert(nn.Module):
        """BERT as transformers 4.x's BertModel wrote it (eager attention, additive
        `(1 - mask) * -10000` mask): the graph onnxruntime's attention fusion matches."""

        def __init__(self):
            super().__init__()
            self.word, self.pos, self.segment = nn.Embedding(96, 32), nn.Embedding(32, 32), nn.Embedding(2, 32)
            self.ln = nn.LayerNorm(32, eps=1e-12)
            self.layers = nn.ModuleList([Layer(), Layer()])
            self.pool = nn.Linear(32, 32)
            self.register_buffer("position_ids", torch.arange(32).unsqueeze(0))

        def forward(self, input_ids, attention_mask, token_type_ids):
            n = input_ids.size(1)
            x = self.ln(self.word(input_ids) + self.pos(self.position_ids[:, :n]) + self.segment(token_type_ids))
            ext = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).to(torch.float32)) * -10000.0
            for layer in self.layers:
                x = layer(x, ext)
            return x, torch.tanh(self.pool(x[:, 0]))

    return Bert()


def bert_classic():
    keys = ["input_ids", "attention_mask", "token_type_ids"]
    args = [ids(96, 16, 1), mask(16, 3), (torch_arange(16) >= 8).long()]
    return bert_classic_module(), args, keys, ["last_hidden_state", "pooler_output"]


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    m = GPT2LMHeadModel(cfg)
    keys = ["input_ids", "attention_mask"]
    return HF.wrap(m, keys, ["logits"], {"use_cache": False}), [ids(96, 16, 2), mask(16, 0)], keys, ["logits"]


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
    )
    m = LlamaForCausalLM(cfg)
    keys = ["input_ids", "attention_mask"]
    return HF.wrap(m, keys, ["logits"], {"use_cache": False}), [ids(96, 16, 3), mask(16, 0)], keys, ["logits"]


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(
        vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0,
        pad_token_id=0, eos_token_id=1,
    )
    m = T5ForConditionalGeneration(cfg)
    keys = ["input_ids", "attention_mask", "decoder_input_ids"]
    args = [ids(96, 12, 4), mask(12, 2), ids(96, 8, 5)]
    return HF.wrap(m, keys, ["logits"], {"use_cache": False}), args, keys, ["logits"]


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=10,
    )
    m = ViTForImageClassification(cfg)
    return HF.wrap(m, ["pixel_values"], ["logits"]), [randn((1, 3, 32, 32), 6)], ["pixel_values"], ["logits"]


def whisper_encoder():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = WhisperConfig(
        vocab_size=96, num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=64, max_source_positions=32,
        max_target_positions=32,
    )
    m = WhisperEncoder(cfg)
    # The encoder requires 2 * max_source_positions frames (its conv stem has stride 2).
    return (
        HF.wrap(m, ["input_features"], ["last_hidden_state"]),
        [randn((1, 16, 64), 7)],
        ["input_features"],
        ["last_hidden_state"],
    )


def convnext():
    from transformers import ConvNextConfig, ConvNextForImageClassification

    cfg = ConvNextConfig(
        num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10,
        image_size=32,
    )
    m = ConvNextForImageClassification(cfg)
    return HF.wrap(m, ["pixel_values"], ["logits"]), [randn((1, 3, 32, 32), 8)], ["pixel_values"], ["logits"]


def yolo_module():
    import torch
    from torch import nn

    class ConvBnAct(nn.Module):
        def __init__(self, cin, cout, k=3, s=1):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = ConvBnAct(c, c, 1)
            self.b = ConvBnAct(c, c, 3)

        def forward(self, x):
            return x + self.b(self.a(x))

    class C2f(nn.Module):  # YOLOv8's split / bottleneck / concat block
        def __init__(self, cin, cout):
            super().__init__()
            self.c = cout // 2
            self.cv1 = ConvBnAct(cin, 2 * self.c, 1)
            self.m = Bottleneck(self.c)
            self.cv2 = ConvBnAct(3 * self.c, cout, 1)

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            y.append(self.m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1 = ConvBnAct(c, c // 2, 1)
            self.cv2 = ConvBnAct(c * 2, c, 1)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))

    class Detect(nn.Module):  # YOLOv5-style anchor head with grid decoding
        def __init__(self, chs, nc=3, strides=(8, 16)):
            super().__init__()
            self.no = nc + 5
            self.na = 2
            self.strides = strides
            self.convs = nn.ModuleList(nn.Conv2d(c, self.na * self.no, 1) for c in chs)
            self.register_buffer("anchors", torch.tensor([[[10.0, 13.0], [16.0, 30.0]], [[30.0, 61.0], [62.0, 45.0]]]))

        def forward(self, feats):
            out = []
            for i, x in enumerate(feats):
                b, _, h, w = x.shape
                y = self.convs[i](x).view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
                grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2)
                anchor = self.anchors[i].view(1, self.na, 1, 1, 2)
                xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
                wh = (y[..., 2:4] * 2) ** 2 * anchor
                out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
            return torch.cat(out, 1)

    class TinyYolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = ConvBnAct(3, 8, 3, 2)  # /2
            self.s2 = nn.Sequential(ConvBnAct(8, 16, 3, 2), C2f(16, 16))  # /4
            self.s3 = nn.Sequential(ConvBnAct(16, 24, 3, 2), C2f(24, 24))  # /8
            self.s4 = nn.Sequential(ConvBnAct(24, 32, 3, 2), C2f(32, 32), SPPF(32))  # /16
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = C2f(32 + 24, 24)
            self.down = ConvBnAct(24, 24, 3, 2)
            self.fuse2 = C2f(24 + 32, 32)
            self.detect = Detect((24, 32))
            for m in self.modules():  # non-trivial, seeded batch-norm statistics
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.data.uniform_(0.5, 1.5)
                    m.bias.data.uniform_(-0.2, 0.2)

        def forward(self, images):
            x = self.s2(self.stem(images))
            p3 = self.s3(x)
            p4 = self.s4(p3)
            n3 = self.fuse(torch.cat([self.up(p4), p3], 1))
            n4 = self.fuse2(torch.cat([self.down(n3), p4], 1))
            return self.detect([n3, n4])

    return TinyYolo()


def yolo():
    return yolo_module(), [randn((1, 3, 64, 64), 9).clamp(-2, 2) * 0.5 + 0.5], ["images"], ["detections"]


def rnn_module():
    from torch import nn

    class Tagger(nn.Module):  # embedding -> bidirectional LSTM -> GRU -> linear
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.lstm = nn.LSTM(16, 16, num_layers=1, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(32, 16, num_layers=1, batch_first=True)
            self.out = nn.Linear(16, 5)

        def forward(self, tokens, h0):
            y, _ = self.lstm(self.emb(tokens))
            z, hn = self.gru(y, h0)
            return self.out(z), hn

    return Tagger()


def rnn():
    return rnn_module(), [ids(50, 12, 10), randn((1, 1, 16), 11) * 0.5], ["tokens", "h0"], ["logits", "h_n"]


def cond_module():
    import torch
    from torch import nn

    class Branchy(nn.Module):
        """Two data-dependent branches (torch.cond): with the committed input, the first
        takes its true branch and the second its false one."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
            self.b = nn.Linear(8, 8)

        def forward(self, x):
            def then_(x):
                return torch.relu(self.a(x)) * 2.0

            def else_(x):
                return torch.tanh(self.b(x)) - 1.0

            y = torch.cond(x.sum() > 0, then_, else_, (x,))
            z = torch.cond(y.mean() < -5.0, then_, else_, (y,))
            return y, z

    return Branchy()


def cond():
    x = randn((2, 8), 12).abs() + 0.1  # sum > 0: first cond takes then_
    return cond_module(), [x], ["x"], ["y", "z"]


def loop_module():
    import torch
    from torch import nn

    class Iterate(nn.Module):
        """A loop whose trip count comes from the data (the number of positive entries) and
        a while loop whose condition is data-dependent; scripted for the TorchScript exporter."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, x):
            n = int((x > 0).sum())
            h = x
            for _ in range(n):
                h = torch.tanh(self.lin(h)) + 0.5 * x
            k = 0
            while bool(h.abs().max() > 0.05) and k < 20:
                h = h * 0.5
                k += 1
            return h, torch.tensor(k)

    return Iterate()


def loop_make():
    return loop_module(), [randn((1, 6), 13)], ["x"], ["h", "steps"]


def export_loop():
    """Loop: the TorchScript exporter on a scripted module; the dynamo exporter on torch's
    `while_loop` higher-order op."""
    import torch

    if wanted("loop_legacy"):
        seed_all()
        m, args, ins, outs = loop_make()
        export_one("loop_legacy", torch.jit.script(m), args, ins, outs, "data-dependent Loop (scripted for/while)", False)
    if wanted("loop_dynamo"):
        seed_all()
        from torch._higher_order_ops.while_loop import while_loop
        from torch import nn

        class WhileNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(6, 6)

            def forward(self, x):
                def cond_fn(i, h):
                    return (h.abs().max() > 0.05) & (i < 20)

                def body_fn(i, h):
                    return i + 1, torch.tanh(self.lin(h)) * 0.5 * h  # |h| at least halves

                i, h = while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))
                return h, i

        export_one("loop_dynamo", WhileNet(), [randn((1, 6), 13)], ["x"], ["h", "steps"],
                   "data-dependent Loop (torch while_loop)", True)


ARCHS = [
    ("bert", bert, "BERT (transformers BertModel: 2 layers, hidden 32, 4 heads, vocab 96, seq 16)"),
    ("bert_classic", bert_classic, "BERT, hand-written in torch as transformers 4.x's eager BertModel (additive -10000 mask; 2 layers, hidden 32, 4 heads)"),
    ("gpt2", gpt2, "GPT-2 (transformers GPT2LMHeadModel: 2 layers, hidden 32, 4 heads, vocab 96, seq 16)"),
    ("llama", llama, "LLaMA decoder (transformers LlamaForCausalLM: RMSNorm, rotary, GQA 4 q / 2 kv heads, SwiGLU, 2 layers, hidden 32)"),
    ("t5", t5, "T5 encoder-decoder (transformers T5ForConditionalGeneration: 2+2 layers, d_model 32, relative position buckets; one decoder pass, no generation loop)"),
    ("vit", vit, "ViT (transformers ViTForImageClassification: 32x32 image, patch 8, 2 layers, hidden 32)"),
    ("whisper_enc", whisper_encoder, "Whisper audio encoder (transformers WhisperEncoder: 16 mel bins x 64 frames, conv stem, 2 layers, hidden 32)"),
    ("convnext", convnext, "ConvNeXt (transformers ConvNextForImageClassification: 2 stages [16, 32], depths [1, 1], 32x32 image)"),
    ("yolo", yolo, "YOLO-style detector (torch: Conv-BN-SiLU backbone, C2f, SPPF, FPN/PAN with nearest upsample, YOLOv5 anchor head with grid decode; 64x64 image)"),
    ("rnn", rnn, "LSTM/GRU tagger (torch: embedding, bidirectional LSTM, GRU with initial state, linear; 12 tokens)"),
    ("cond", cond, "data-dependent If (torch.cond twice, one input takes each branch)"),
]


ARCH_NAMES = {"bert": "BERT (transformers)", "bert_classic": "BERT (transformers 4.x eager pattern)", "gpt2": "GPT-2 (transformers)"}

# ---- onnxruntime tools on exported models


def calib_reader(model_path, n=8, seed=SEED):
    from onnxruntime.quantization import CalibrationDataReader

    model = onnx.load(model_path)
    ins = real_inputs(model)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(seed + 100)
            self.items = []
            for _ in range(n):
                feed = {}
                for i in ins:
                    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
                    feed[i.name] = (rng.standard_normal(shape).clip(-2, 2) * 0.5 + 0.5).astype(np.float32)
                self.items.append(feed)
            self.it = iter(self.items)

        def get_next(self):
            return next(self.it, None)

    return Reader()


def inputs_of(name):
    folder = os.path.join(OUT, name)
    k, out = 0, []
    while os.path.exists(os.path.join(folder, f"input_{k}.npy")):
        out.append(np.load(os.path.join(folder, f"input_{k}.npy")))
        k += 1
    return out


def derived(name, src_name, arch, tool, fn):
    """Runs `fn(src_path, dst_path)` (an onnxruntime tool) on OUT/<src_name>/model.onnx and
    writes the result as case `name` with the source's inputs."""
    if not wanted(name):
        return
    src = os.path.join(OUT, src_name, "model.onnx")
    if not os.path.exists(src):
        FAILURES[name] = {"arch": arch, "exporter": tool, "error": f"source case {src_name} was not exported"}
        print(f"  {name}: skipped, {src_name} missing", flush=True)
        return
    tmp = os.path.join(TMP, name + ".onnx")
    try:
        log = io.StringIO()
        with contextlib.redirect_stdout(log), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(src, tmp)
        write_case(name, tmp, inputs_of(src_name), {"arch": arch, "exporter": f"{tool} (onnxruntime {VERSIONS['onnxruntime']}) on {src_name}"})
    except Exception as e:  # noqa: BLE001
        FAILURES[name] = {"arch": arch, "exporter": tool, "error": short_error(e)}
        print(f"  {name}: FAILED: {short_error(e).splitlines()[0][:300]}", flush=True)
        if os.environ.get("EXPORT_TRACEBACK"):
            traceback.print_exc()
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)


def ort_tools():
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    def qdyn(src, dst):
        # reduce_range: 7-bit weights. onnxruntime's u8 x s8 integer GEMM on CPUs without VNNI
        # (this machine: AVX2) sums pairs of products in int16 and saturates, so with full-range
        # weights its MatMulInteger differs from the exact product ONNX defines (measured: off by
        # up to 3.4e5 on a 4x32x8 product) and the reference would be wrong; onnxruntime's own
        # docs recommend reduce_range there.
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, reduce_range=True)

    def qstatic(fmt, reduce_range=False):
        # The QOperator models run onnxruntime's integer QLinearConv, whose u8 x s8 kernel
        # saturates on CPUs without VNNI like MatMulInteger above (measured on yolo_dynamo_qop's
        # first conv: 2,131 of 8,192 outputs off, by up to 26 quanta, against the exact integer
        # convolution), so they get 7-bit weights too. The QDQ models' reference runs without
        # graph optimizations (float ops between DQ and Q) and needs no such care.
        def run(src, dst):
            quantize_static(
                src, dst, calib_reader(src), quant_format=fmt, activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range,
            )

        return run

    def optimize(kind, opt_level=None):
        def run(src, dst):
            from onnxruntime.transformers.optimizer import optimize_model

            opt = optimize_model(src, model_type=kind, num_heads=4, hidden_size=32, opt_level=opt_level)
            opt.save_model_to_file(dst, use_external_data_format=False)

        return run

    for src in ("bert_legacy", "bert_dynamo"):
        derived(f"{src}_qdynamic", src, "BERT, dynamically quantized", "quantize_dynamic(weight_type=QInt8, reduce_range=True)", qdyn)
    derived("rnn_legacy_qdynamic", "rnn_legacy", "LSTM/GRU tagger, dynamically quantized", "quantize_dynamic(weight_type=QInt8, reduce_range=True)", qdyn)
    derived("yolo_dynamo_qdq", "yolo_dynamo", "YOLO-style detector, static QDQ", "quantize_static(QDQ, U8 activations, S8 per-channel weights, 8 seeded calibration inputs)", qstatic(QuantFormat.QDQ))
    derived("convnext_dynamo_qdq", "convnext_dynamo", "ConvNeXt, static QDQ", "quantize_static(QDQ, U8 activations, S8 per-channel weights, 8 seeded calibration inputs)", qstatic(QuantFormat.QDQ))
    derived("yolo_dynamo_qop", "yolo_dynamo", "YOLO-style detector, static QOperator", "quantize_static(QOperator, U8 activations, S8 per-channel weights, reduce_range=True, 8 seeded calibration inputs)", qstatic(QuantFormat.QOperator, reduce_range=True))
    for arch, kind in (("bert", "bert"), ("bert_classic", "bert"), ("gpt2", "gpt2")):
        for exp in ("legacy", "dynamo"):
            src = f"{arch}_{exp}"
            derived(f"{src}_ortopt", src, f"{ARCH_NAMES[arch]}, after onnxruntime's transformer optimizer",
                    f"onnxruntime.transformers.optimizer.optimize_model(model_type={kind!r}, num_heads=4, hidden_size=32)",
                    optimize(kind))
    # opt_level 2 first runs onnxruntime's own graph optimizer (BiasGelu and a fused
    # embedding SkipLayerNormalization, no Attention).
    derived("bert_legacy_ortopt2", "bert_legacy", f"{ARCH_NAMES['bert']}, after onnxruntime's transformer optimizer",
            "onnxruntime.transformers.optimizer.optimize_model(model_type='bert', num_heads=4, hidden_size=32, opt_level=2)",
            optimize("bert", 2))


def export_all():
    global VERSIONS
    import torch

    torch.set_num_threads(1)
    VERSIONS = versions()
    print("versions:", VERSIONS, flush=True)
    for base, make, arch in ARCHS:
        t = time.time()
        if export_both(base, make, arch):
            print(f"{base}: {time.time() - t:.1f} s", flush=True)
    export_loop()
    ort_tools()
    fpath = os.path.join(OUT, "failures.json")
    old = json.load(open(fpath)) if os.path.exists(fpath) and ONLY else {}
    old = {k: v for k, v in old.items() if not wanted(k)}
    old.update(FAILURES)
    old["versions"] = VERSIONS
    with open(fpath, "w") as f:
        json.dump(old, f, indent=1, sort_keys=True)


# ---------------------------------------------------------------- README (no torch)


def run_passel(passel, folder, meta):
    """`passel import` and `passel eval --compare` on one case: (import result, eval result)."""
    model = os.path.join(folder, "model.onnx")

    def first_error(r):
        text = (r.stderr or r.stdout).strip()
        return text.replace("\n", " ")

    r = subprocess.run([passel, "import", model, "-o", os.devnull], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"FAIL: {first_error(r)}", "not run (import failed)"
    imp = "ok"
    cmd = [passel, "eval", model, "--compare", folder, "--rtol", str(meta["rtol"]), "--atol", str(meta["atol"])]
    k = 0
    while os.path.exists(os.path.join(folder, f"input_{k}.npy")):
        cmd += ["--input", os.path.join(folder, f"input_{k}.npy")]
        k += 1
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return imp, ("ok" if r.returncode == 0 else f"FAIL: {first_error(r)}")


def write_readme(out, passel=None):
    supported = supported_ops()
    cases = []
    for name in sorted(os.listdir(out)):
        mp = os.path.join(out, name, "meta.json")
        if os.path.exists(mp):
            cases.append((name, json.load(open(mp))))
    fpath = os.path.join(out, "failures.json")
    failures = json.load(open(fpath)) if os.path.exists(fpath) else {}
    vers = failures.get("versions") or (cases[0][1]["versions"] if cases else {})
    results = {}
    conf = {}
    if passel:
        for name, meta in cases:
            print(f"passel on {name}", flush=True)
            results[name] = tuple(passel_error(x) for x in run_passel(passel, os.path.join(out, name), meta))
        conf = conformance_table(passel, out)
    L = []
    L.append("# Real exports: models written by torch.onnx and onnxruntime's tools\n")
    L.append(
        "Written by `scripts/export_models.sh` (run by hand, outside CI: it installs torch). Each folder is a\n"
        "case in the layout of `passel conformance`'s `models/` cases: `model.onnx` (weights embedded),\n"
        "seeded inputs `input_K.npy`, onnxruntime's outputs on them `output_K.npy`, and `meta.json`\n"
        "(inputs, outputs, `rtol` / `atol`, exporter, opset, op histogram, versions). Random weights,\n"
        "seeded (`torch.manual_seed(0)` before each model is built), static input shapes.\n\n"
        "Tolerances follow issue #27's criterion, max |got - want| <= 1e-4 x max |want| per output:\n"
        "`rtol` 0 and `atol` = 1e-4 x the smallest per-output max |want| (integer outputs exact).\n\n"
        "Run them: `passel conformance engine/tests/data/real_models` (import, eval and compare, `-O3`, eval\n"
        "and compare, check + fmt round trip), or one by one:\n\n"
        "```sh\n"
        "passel import engine/tests/data/real_models/bert_dynamo/model.onnx -o /dev/null\n"
        "passel eval engine/tests/data/real_models/bert_dynamo/model.onnx --input …/input_0.npy … \\\n"
        "    --compare engine/tests/data/real_models/bert_dynamo --rtol 0 --atol <meta.json atol>\n"
        "```\n\n"
        "Regenerate: `scripts/export_models.sh` (all) or `scripts/export_models.sh engine/tests/data/real_models NAME…`;\n"
        "the README alone (no torch needed, only onnx): `python3 scripts/export_models.py --readme\n"
        "engine/tests/data/real_models target/release/passel`.\n"
    )
    if vers:
        L.append("Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())) + ".\n")
    L.append("## Models\n")
    L.append(
        "Opset: the default domain's, and the other domains whose ops the graph uses. Nodes: main\n"
        "graph (+ nodes inside If/Loop subgraphs). Not in SUPPORTED_OPS: op types (subgraphs included)\n"
        "that `engine/src/frontend/onnx/ops.rs` does not list (ops of other domains always count).\n"
        "The full architecture, exporter call and op histogram of each model are further down.\n"
    )
    head = "| model | architecture | exporter | opset | nodes | size | ops not in SUPPORTED_OPS |"
    if passel:
        head += " passel import | passel eval (vs onnxruntime) |"
    L.append(head)
    L.append("|" + "---|" * (head.count("|") - 1))
    for name, m in cases:
        size = os.path.getsize(os.path.join(out, name, "model.onnx"))
        missing = [op for op in m["ops"] if op not in supported]
        used = {op.split("::")[0] for op in m["ops"] if "::" in op}
        opset = str(m["opset"]) + "".join(f", {d} {m['opsets'].get(d, '?')}" for d in sorted(used))
        nodes = str(m["nodes"]) + (f" (+{m['subgraph_nodes']})" if m["subgraph_nodes"] else "")
        arch, exp = short_labels(name)
        row = f"| {name} | {arch} | {exp} | {opset} | {nodes} | {size / 1024:.0f} KiB | {', '.join(missing) or '-'} |"
        if passel:
            imp, ev = results[name]
            cut = lambda t: t if len(t) <= 300 else t[:300] + " …"  # noqa: E731
            row += f" {md(cut(imp))} | {md(cut(ev))} |"
        L.append(row)
    L.append("")
    if passel:
        ok_import = [n for n, _ in cases if results[n][0] == "ok"]
        ok_eval = [n for n, _ in cases if results[n][1] == "ok"]
        L.append(f"{len(cases)} models: {len(ok_import)} import ({', '.join(ok_import) or 'none'}), "
                 f"{len(ok_eval)} of them evaluate to onnxruntime's outputs.\n")
        freq = collections.Counter(op for _, m in cases for op in m["ops"] if op not in supported)
        L.append("Ops missing from SUPPORTED_OPS, by the number of models using them: "
                 + ", ".join(f"{op} ({c})" for op, c in sorted(freq.items(), key=lambda x: (-x[1], x[0]))) + ".\n")
        silent = []
        for name, m in cases:
            err = results[name][0]
            if "unsupported ONNX operators" in err:
                unnamed = [op for op in m["ops_in_subgraphs"] if op not in supported and f"{op} (" not in err]
                if unnamed:
                    silent.append(f"{name} ({', '.join(unnamed)})")
        if silent:
            L.append("Unsupported ops inside If/Loop bodies that the import error does not name (it lists\n"
                     "the main graph's ops only): " + "; ".join(silent) + ".\n")
    if conf:
        L.append("## `passel conformance engine/tests/data/real_models`\n")
        L.append(
            "The models that import, through the conformance runner: eval vs onnxruntime, `-O3`, eval\n"
            "again, check + fmt round trip (times in ms on 2 shared cores, single runs).\n"
        )
        L.append("| model | import ms | -O3 ms | ops before | ops after | max abs err | max abs err after -O3 | round trip |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        for name, cells in sorted(conf.items()):
            if cells[0] != "import failed":
                L.append(f"| {name} | " + " | ".join(cells) + " |")
        L.append("")
    L.append("## Notes\n")
    L.append(
        "- Exporters: `dynamo` is `torch.onnx.export(..., dynamo=True, external_data=False)` (torch's default\n"
        "  opset, 20 here, onnxscript's optimizer on); `TorchScript` is `dynamo=False, opset_version=17`\n"
        "  (`torch.jit.trace`, or the scripted module for `loop_legacy`). Per-node\n"
        "  `pkg.torch.onnx.stack_trace` metadata is dropped (it holds local paths); nothing else is changed.\n"
        "- T5 is the whole encoder-decoder (`T5ForConditionalGeneration`, one decoder pass on given\n"
        "  `decoder_input_ids`, no generation loop and no cache). The Whisper model is the encoder alone\n"
        "  (`WhisperEncoder`: Conv1d stem, sinusoidal positions, pre-norm layers).\n"
        "- `cond_*` holds two `torch.cond`s: with the committed input the first takes its then-branch and\n"
        "  the second its else-branch. TorchScript cannot trace `torch.cond` (cond_legacy below); its\n"
        "  If/Loop case is `loop_legacy`, a scripted module (a `for` whose trip count is the number of\n"
        "  positive inputs, 3 here, and a `while` on a data-dependent condition, giving nested Loop and\n"
        "  If). `loop_dynamo` is `torch._higher_order_ops.while_loop` (3 iterations on the input).\n"
        "- onnxruntime's transformer optimizer fuses `com.microsoft::Attention` only in\n"
        "  `bert_classic_legacy_ortopt`: its attention-fusion patterns do not match the masks that\n"
        "  transformers 5 writes (IsNaN / And / Where around the softmax), nor the dynamo exporter's\n"
        "  graphs; so `bert_classic` is BERT written the way transformers 4.x's eager BertModel was (additive\n"
        "  `(1 - mask) * -10000`). On the transformers models the optimizer fuses SkipLayerNormalization\n"
        "  and Gelu / FastGelu (BiasGelu with `opt_level=2`). It fails on gpt2_dynamo (below).\n"
        "- Quantized: `quantize_dynamic` (QInt8 weights: DynamicQuantizeLinear + MatMulInteger, and\n"
        "  com.microsoft::DynamicQuantizeLSTM for the LSTM), `quantize_static` in QDQ format (per-channel\n"
        "  S8 weights, U8 activations, 8 seeded calibration inputs) and, for YOLO, in QOperator format\n"
        "  (QLinearConv and com.microsoft QLinear* ops). Expected outputs are onnxruntime's integer\n"
        "  arithmetic; the tolerance is the same relative 1e-4.\n"
    )
    real_failures = {k: v for k, v in failures.items() if k != "versions"}
    if real_failures:
        L.append("## Exports that failed\n")
        for name, f in sorted(real_failures.items()):
            L.append(f"- **{name}** ({f['arch']}; {f['exporter']}):\n\n  ```\n" + "\n".join("  " + l for l in f["error"].splitlines()) + "\n  ```\n")
    L.append("## Op histograms\n")
    L.append("Count per op type over the whole model: main graph, If/Loop subgraphs (marked `sub:` with\nthe count inside subgraphs) and model-local functions. `domain::Op` for domains other than ONNX's default.\n")
    for name, m in cases:
        size = os.path.getsize(os.path.join(out, name, "model.onnx"))
        L.append(f"### {name}\n")
        L.append(f"{m['architecture']}. Exporter: {m['exporter']}. Opsets: "
                 + ", ".join(f"{d} {v}" for d, v in sorted(m["opsets"].items()))
                 + f". {m['nodes']} nodes" + (f" + {m['subgraph_nodes']} in subgraphs" if m["subgraph_nodes"] else "")
                 + (f" + {m['function_nodes']} in local functions" if m["function_nodes"] else "")
                 + f"; {size:,} bytes. Inputs: "
                 + ", ".join(f"`{n}` {s} {d}" for n, s, d in zip(m["inputs"], m["shapes"]["inputs"], m["dtypes"]["inputs"]))
                 + ". Outputs: "
                 + ", ".join(f"`{n}` {s} {d}" for n, s, d in zip(m["outputs"], m["shapes"]["outputs"], m["dtypes"]["outputs"]))
                 + ".\n")
        parts = []
        for op, c in m["op_histogram"].items():
            sub = m["ops_in_subgraphs"].get(op)
            mark = "" if op in supported else " ✗"
            parts.append(f"{op} {c}" + (f" (sub: {sub})" if sub else "") + mark)
        L.append(", ".join(parts) + "\n")
    L.append("✗: not in passel's SUPPORTED_OPS at the time the README was written.\n")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(L))
    print(f"wrote {os.path.join(out, 'README.md')}")


def md(s):
    return s.replace("|", "\\|")


SHORT_ARCH = {
    "bert": "BERT", "bert_classic": "BERT (4.x eager)", "gpt2": "GPT-2", "llama": "LLaMA (RMSNorm, RoPE, GQA)",
    "t5": "T5 encoder-decoder", "vit": "ViT", "whisper_enc": "Whisper encoder", "convnext": "ConvNeXt",
    "yolo": "YOLO-style detector", "rnn": "LSTM + GRU", "cond": "If (torch.cond)", "loop": "Loop (data-dependent)",
}
SHORT_TOOL = {
    "qdynamic": "quantize_dynamic", "qdq": "quantize_static QDQ", "qop": "quantize_static QOperator",
    "ortopt": "ORT transformer optimizer", "ortopt2": "ORT transformer optimizer, opt_level 2",
}


def short_labels(name):
    """(architecture, exporter) for the table, from the case name `<arch>_<exporter>[_<tool>]`."""
    for exp in ("_dynamo", "_legacy"):
        if exp in name:
            arch, rest = name.split(exp, 1)
            label = "dynamo" if exp == "_dynamo" else "TorchScript"
            if rest:
                label += " + " + SHORT_TOOL.get(rest[1:], rest[1:])
            return SHORT_ARCH.get(arch, arch), label
    return name, "?"


def conformance_table(passel, out):
    """The rows of `passel conformance OUT` (its model table), by model name."""
    r = subprocess.run([passel, "conformance", out], capture_output=True, text=True, timeout=1800)
    rows = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and not line.startswith("| model") and len(cells) == 8:
            rows[cells[0]] = cells[1:]
    return rows


def passel_error(text):
    """An error without the `error: <path>: ` prefix passel puts before it."""
    return re.sub(r"^(FAIL: )?error: \S+model\.onnx: ", r"\1", text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--readme"]:
        write_readme(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        sys.exit(0)
    OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "engine/tests/data/real_models")
    ONLY = sys.argv[2:]
    os.makedirs(OUT, exist_ok=True)
    TMP = os.path.join(ROOT, "target", "export-tmp")
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    export_all()
    write_readme(OUT)
