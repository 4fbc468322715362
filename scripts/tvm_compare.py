"""passel vs TVM on the same ONNX files: import, then the pipeline that matches `passel -O3`.

Run through scripts/tvm_compare.sh (it makes the venv). For each model:

passel: `passel bench --model FILE -O3 --threads 2 --repeats N --json …`: best-of-N import
  time (map, decode, verify), the default -O3 pipeline at -j1 and -j2, print time and peak
  memory (see `passel bench --help`).

TVM 0.27 (apache-tvm 0.27.0.post1), best of --tvm-repeats runs each:
  import:   tvm.relax.frontend.onnx.from_onnx(onnx.load(FILE), shape_dict) (params bound as
            constants, the default keep_params_in_input=False, like passel's import)
  matching: the relax passes that do what passel -O3 does, under PassContext(opt_level=3):
            FoldBatchnormToConv2D, DecomposeOpsForInference  (passel: SimplifyInference,
                                                              FoldScaleAxis)
            FoldConstant                                     (passel: FoldConstant)
            EliminateCommonSubexpr, CanonicalizeBindings,
            DeadCodeElimination                              (passel: the same three)
            LegalizeOps, AnnotateTIROpPattern, FuseOps,
            FuseTIR                                          (passel: FuseOps; relax can only
                                                              fuse ops lowered to TIR)
  no-fold:  the same list without FoldConstant (what the passes cost when weights are not
            folded; relax's FoldConstant builds and runs TIR for every foldable call).

Ratios: (TVM import + matching) / (passel import + -O3 at -j1), and the same with TVM's
no-fold list (a lower bound on what TVM's matching pipeline costs).

With --lower, both sides go on to the loop level, without code generation, at one thread:
passel: `passel bench --model FILE -O3 --lower --threads 2 …`: import, then -O3 and the
  lowering pipeline (LegalizeOps, FuseTIR, the tir passes) at -j1 and -j2; the PrimFunc
  count from `passel run FILE -O3 --lower -j1`.
TVM: import, the matching list (it already ends in LegalizeOps … FuseTIR, so the module
  holds one PrimFunc per fused kernel), then the module's PrimFuncs through what
  `tvm.tirx.build` runs before code generation (each exported under its name, as relax.build's
  AttachGlobalSymbol does): BindTarget(llvm), the default tir pipeline
  (`tvm.tirx.get_tir_pipeline("default")`: s_tir's lowering, FlattenBuffer … VectorizeLoop,
  StorageRewrite, UnrollLoop, Simplify, RemoveNoOp, CommonSubexprElim, …, SplitHostDevice,
  MakePackedAPI), split_host_device_mods and the host finalisation passes (LowerTVMBuiltin,
  LowerIntrin). TVM_NUM_THREADS=1. Ratio: (TVM import + matching + tir lowering) /
  (passel import + -O3 + lowering at -j1).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def matching(fold):
    t = relax.transform
    passes = [t.FoldBatchnormToConv2D(), t.DecomposeOpsForInference()]
    if fold:
        passes.append(t.FoldConstant())
    passes += [
        t.EliminateCommonSubexpr(),
        t.CanonicalizeBindings(),
        t.DeadCodeElimination(),
        t.LegalizeOps(),
        t.AnnotateTIROpPattern(),
        t.FuseOps(),
        t.FuseTIR(),
    ]
    return tvm.transform.Sequential(passes)


def best(n, f):
    times, out = [], None
    for _ in range(max(1, n)):
        start = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - start)
    return min(times), out


def tir_lowering(mod):
    """What tvm.tirx.build runs on the PrimFuncs of `mod` before code generation."""
    from tvm.tirx.build import split_host_device_mods

    # Exported under their names, as relax.build's AttachGlobalSymbol does before tirx.build.
    funcs = {gv: f.with_attr("global_symbol", gv.name_hint) for gv, f in mod.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc)}
    tir_mod = tvm.IRModule(funcs)
    target = tvm.target.Target("llvm")
    target = target.with_host(target)
    tir_mod = tvm.tirx.transform.BindTarget(target)(tir_mod)
    pipeline, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("default")
    tir_mod = pipeline(tir_mod)
    host, devices = split_host_device_mods(tir_mod)
    host = finalize_host()(host)
    for dev in devices.values():
        finalize_device()(dev)
    return len(funcs), host


def tvm_times(path, shapes, repeats, lower):
    model = onnx.load(path)
    names = {i.name for i in model.graph.input}
    shape_dict = {k: v for k, v in shapes.items() if k in names} or None
    t_import, mod = best(repeats, lambda: from_onnx(model, shape_dict=shape_dict))
    out = {"import": t_import}
    for key, fold in (("matching", True), ("no_fold", False)):
        def run(fold=fold):
            with tvm.transform.PassContext(opt_level=3):
                return matching(fold)(mod)
        out[key], lowered = best(repeats, run)
        if lower and fold:
            def tir():
                with tvm.transform.PassContext(opt_level=3):
                    return tir_lowering(lowered)
            out["tir"], (out["prim_funcs"], _) = best(repeats, tir)
    return out


def passel_times(binary, path, shapes, repeats, lower):
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "bench.json")
        cmd = [binary, "bench", "--model", path, "-O3", "--threads", "2", "--repeats", str(repeats), "--json", js]
        shape_args = []
        names = {i.name for i in onnx.load(path, load_external_data=False).graph.input}
        for k, v in shapes.items():
            if k in names:
                shape_args += ["--input-shape", f"{k}={','.join(map(str, v))}"]
        if lower:
            cmd.append("--lower")
        subprocess.run(cmd + shape_args, check=True, stdout=subprocess.DEVNULL)
        prim_funcs = None
        if lower:
            text = subprocess.run([binary, "run", path, "-O3", "--lower", "-j1"] + shape_args, check=True,
                                  stdout=subprocess.PIPE, text=True).stdout
            prim_funcs = sum(1 for line in text.splitlines() if line.startswith("prim @"))
        with open(js) as f:
            report = json.load(f)
    rows = {(r["mode"], r["threads"]): r["time_ms"] / 1e3 for r in report["rows"]}
    return {
        "import": rows[("import", 1)],
        "o3_j1": rows[("serial", 1)],
        "o3_j2": rows[("parallel", 2)],
        "print": rows[("print", 1)],
        "peak_heap_per_weight_byte": report["model"]["peak_heap_per_weight_byte"],
        "prim_funcs": prim_funcs,
    }


def parse_shape(text):
    name, _, dims = text.rpartition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"--input-shape {text!r}: expected NAME=D0,D1,…")
    return name, [int(d) for d in dims.split(",") if d.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", help=".onnx files")
    ap.add_argument("--passel", default="target/release/passel")
    ap.add_argument("--input-shape", action="append", type=parse_shape, default=[],
                    help="NAME=D0,D1,… for every model with an input NAME")
    ap.add_argument("--repeats", type=int, default=3, help="passel repetitions per row (best counts)")
    ap.add_argument("--tvm-repeats", type=int, default=1, help="TVM repetitions (best counts)")
    ap.add_argument("--lower", action="store_true",
                    help="go on to the loop level on both sides (see the module docs) and report that table")
    args = ap.parse_args()
    shapes = dict(args.input_shape)
    print(f"tvm {tvm.__version__}, onnx {onnx.__version__}, passel {args.passel}", file=sys.stderr)
    ms = lambda s: f"{s * 1e3:.1f}"
    if args.lower:
        print("| model | passel PrimFuncs | TVM PrimFuncs | passel import + -O3 + lower -j1 ms | -j2 ms "
              "| TVM import ms | TVM graph → PrimFuncs ms | TVM tir lowering ms | TVM total ms | TVM / passel -j1 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for path in args.models:
            name = os.path.basename(os.path.dirname(path)) if os.path.basename(path) == "model.onnx" else path
            p = passel_times(args.passel, path, shapes, args.repeats, True)
            ours, ours2 = p["import"] + p["o3_j1"], p["import"] + p["o3_j2"]
            try:
                t = tvm_times(path, shapes, args.tvm_repeats, True)
            except Exception as e:  # TVM's importer or a pass refuses the model: say so, go on
                reason = (str(e).strip().splitlines() or [type(e).__name__])[-1][:80].replace("|", "/")
                print(f"| {name} | {p['prim_funcs']} | - | {ms(ours)} | {ms(ours2)} | TVM fails: {reason} | | | | |",
                      flush=True)
                continue
            theirs = t["import"] + t["matching"] + t["tir"]
            print(f"| {name} | {p['prim_funcs']} | {t['prim_funcs']} | {ms(ours)} | {ms(ours2)} | {ms(t['import'])} "
                  f"| {ms(t['matching'])} | {ms(t['tir'])} | {ms(theirs)} | {theirs / ours:.1f}x |", flush=True)
        return
    print("| model | passel import ms | passel -O3 -j1 ms | -j2 ms | passel import + -O3 ms "
          "| TVM import ms | TVM matching passes ms | TVM no-fold passes ms | TVM import + matching ms "
          "| TVM / passel | TVM no-fold / passel |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in args.models:
        p = passel_times(args.passel, path, shapes, args.repeats, False)
        t = tvm_times(path, shapes, args.tvm_repeats, False)
        ours = p["import"] + p["o3_j1"]
        theirs = t["import"] + t["matching"]
        name = os.path.basename(os.path.dirname(path)) if os.path.basename(path) == "model.onnx" else path
        print(f"| {name} | {ms(p['import'])} | {ms(p['o3_j1'])} | {ms(p['o3_j2'])} | {ms(ours)} "
              f"| {ms(t['import'])} | {ms(t['matching'])} | {ms(t['no_fold'])} | {ms(theirs)} "
              f"| {theirs / ours:.1f}x | {(t['import'] + t['no_fold']) / ours:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
