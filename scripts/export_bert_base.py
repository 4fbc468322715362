"""Exports a BERT-base-sized ONNX model (≈110 M parameters, ≈440 MB) for the scale
measurements in docs/onnx.md ("Scale: a BERT-base-sized export"). Not committed, not in CI.

The network is scripts/export_models.py's `bert_classic_module` (BERT as transformers 4.x's
BertModel wrote it: eager attention, additive `(1 - mask) * -10000` mask, which passel imports;
transformers 5's BertModel exports IsNaN / And). That function builds the tiny test size with
its dimensions written in; this script keeps its classes and forward and swaps in BERT-base
sized submodules: hidden 768, 12 layers, 12 heads, intermediate 3072, vocab 30522, 512
positions, 2 token types. Weights are torch's default initialisation under seed 0.

Inputs: batch 1, sequence 128 (input_ids seeded, attention_mask with the last 8 tokens padded,
token_type_ids 0 for the first 64 tokens and 1 after). Each export goes to OUT/<name>/ in the
layout of `passel conformance`'s model cases: model.onnx (weights embedded when the file stays
under protobuf's 2 GB limit, else external data in model.onnx.data), input_K.npy,
onnxruntime's output_K.npy (CPUExecutionProvider) and meta.json.

  bert_base_legacy   torch.onnx.export(dynamo=False), TorchScript exporter, opset 17
  bert_base_dynamo   torch.onnx.export(dynamo=True) (default opset of the installed torch)

Usage (the venv of scripts/export_models.sh: torch, transformers, onnx, onnxscript, onnxruntime):
  python scripts/export_bert_base.py [OUT] [NAME_SUBSTRING…]     OUT defaults to target/bert_base
"""

import contextlib
import io
import json
import os
import shutil
import sys
import time
import traceback
import warnings

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models as em  # noqa: E402

DIMS = dict(vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, positions=512, type_vocab=2)
SEQ, PAD = 128, 8
PROTOBUF_LIMIT = 2 * 1024**3


def bert_base_module(vocab, hidden, layers, heads, ffn, positions, type_vocab):
    """export_models.bert_classic_module's Bert and Layer (its forward and graph), with
    BERT-base-sized submodules in place of the tiny ones."""
    import torch
    from torch import nn

    m = em.bert_classic_module()
    Layer = type(m.layers[0])
    m.word, m.pos = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
    m.segment = nn.Embedding(type_vocab, hidden)
    m.ln = nn.LayerNorm(hidden, eps=1e-12)
    m.layers = nn.ModuleList([Layer(hidden, heads, ffn) for _ in range(layers)])
    m.pool = nn.Linear(hidden, hidden)
    m.position_ids = torch.arange(positions).unsqueeze(0)  # the registered buffer
    return m


def make():
    em.seed_all()
    m = bert_base_module(**DIMS)
    args = [em.ids(DIMS["vocab"], SEQ, 1), em.mask(SEQ, PAD), (em.torch_arange(SEQ) >= SEQ // 2).long()]
    return m, args, ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state", "pooler_output"]


def export(name, dynamo, out, tmp):
    import torch

    em.seed_all()
    module, args, ins, outs = make()
    module.eval()
    n_params = sum(p.numel() for p in module.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    external = weight_bytes > PROTOBUF_LIMIT * 0.95
    path = os.path.join(tmp, name + ".onnx")
    exporter = (f"torch.onnx.export(dynamo=True) torch {torch.__version__}" if dynamo else
                f"torch.onnx.export(dynamo=False, TorchScript, opset {em.LEGACY_OPSET}) torch {torch.__version__}")
    print(f"{name}: {n_params / 1e6:.1f} M parameters, {weight_bytes / 1e6:.1f} MB; {exporter}", flush=True)
    start = time.perf_counter()
    log = io.StringIO()
    with torch.no_grad(), contextlib.redirect_stdout(log), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(module, tuple(args), path, dynamo=True, input_names=ins, output_names=outs,
                              external_data=external, verbose=False)
        else:
            torch.onnx.export(module, tuple(args), path, dynamo=False, opset_version=em.LEGACY_OPSET,
                              input_names=ins, output_names=outs, do_constant_folding=True)
    t_export = time.perf_counter() - start

    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    model = onnx.load(path)
    em.strip_stack_traces(model.graph)
    for f in model.functions:
        em.strip_stack_traces(f)
    dst = os.path.join(folder, "model.onnx")
    if external or model.ByteSize() >= PROTOBUF_LIMIT:
        external = True
        onnx.save(model, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=1024)
        onnx.checker.check_model(dst)
    else:
        onnx.checker.check_model(model)
        onnx.save(model, dst)
    del model
    inputs = [a.detach().numpy() for a in args]
    start = time.perf_counter()
    outputs, ort_note = em.ort_run(dst, inputs)
    t_ort = time.perf_counter() - start
    for k, a in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{k}.npy"), a)
    for k, a in enumerate(outputs):
        np.save(os.path.join(folder, f"output_{k}.npy"), a)

    model = onnx.load(dst, load_external_data=False)
    insp = em.inspect(model)
    init_bytes = 0
    for t in model.graph.initializer:
        n = int(np.prod(t.dims)) if t.dims else 1
        init_bytes += n * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    rtol, atol = em.tolerances(outputs)
    meta = {
        "kind": "model",
        "architecture": "BERT-base-sized bert_classic_module (transformers 4.x BertModel graph), random weights",
        "dims": dict(DIMS, seq=SEQ, batch=1, padded_tokens=PAD),
        "exporter": exporter,
        "parameters": n_params,
        "initializer_bytes": init_bytes,
        "file_bytes": os.path.getsize(dst) + (os.path.getsize(dst + ".data") if external else 0),
        "external_data": external,
        "export_seconds": round(t_export, 2),
        "onnxruntime_seconds": round(t_ort, 2),
        "ops": sorted(insp["histogram"]),
        "op_histogram": insp["histogram"],
        "opset": insp["opsets"].get("ai.onnx"),
        "nodes": insp["nodes"],
        "rtol": rtol,
        "atol": atol,
        "inputs": [i.name for i in em.real_inputs(model)],
        "outputs": [o.name for o in model.graph.output],
        "shapes": {"inputs": [list(a.shape) for a in inputs], "outputs": [list(a.shape) for a in outputs]},
        "max_abs_reference": [float(np.max(np.abs(o))) for o in outputs],
        "seed": em.SEED,
        "source": f"{exporter}; expected outputs from onnxruntime (CPUExecutionProvider) on seeded inputs; "
                  "scripts/export_bert_base.py",
        "versions": em.VERSIONS,
    }
    if ort_note:
        meta["note"] = ort_note
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(f"  -> {dst}: {meta['file_bytes'] / 1e6:.1f} MB{' (external data)' if external else ''}, "
          f"initializers {init_bytes / 1e6:.1f} MB, opset {meta['opset']}, {insp['nodes']} nodes, "
          f"export {t_export:.1f} s, onnxruntime {t_ort:.1f} s; ops {', '.join(meta['ops'])}", flush=True)
    os.remove(path)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    return dst


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(em.ROOT, "target", "bert_base")
    only = sys.argv[2:]
    tmp = os.path.join(em.ROOT, "target", "bert-base-tmp")
    os.makedirs(out, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    em.VERSIONS.update(em.versions())
    failures = {}
    for name, dynamo in (("bert_base_legacy", False), ("bert_base_dynamo", True)):
        if only and not any(s in name for s in only):
            continue
        try:
            export(name, dynamo, out, tmp)
        except Exception as e:  # noqa: BLE001 - an exporter failure is reported, the other goes on
            failures[name] = em.short_error(e)
            print(f"{name}: FAILED: {failures[name]}", flush=True)
            if os.environ.get("EXPORT_TRACEBACK"):
                traceback.print_exc()
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(out, "failures.json"), "w") as f:
        json.dump(failures, f, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
