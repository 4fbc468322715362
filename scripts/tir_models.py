"""The lowering of every real model, measured: graph functions and PrimFuncs before and after
sharing, and the time of LegalizeOps, FuseTIR and the tir pipeline at 1 and 2 threads.

For each model folder under DIR (default engine/tests/data/real_models) that is not listed in
the out-of-scope file, runs `passel run MODEL -O3 --lower -jN --timing --stats -o OUT` for N in
1 and 2, --repeats times each (the best time of each pass counts), and prints one markdown row:

  groups:          fused groups FuseOps formed (statistic `FuseOps groups formed`)
  calls → kernels: operator calls LegalizeOps replaced (`LegalizeOps calls lowered`) and the
                   distinct PrimFuncs it made for them (`LegalizeOps primfuncs made`)
  groups → fused:  groups FuseTIR replaced (`FuseTIR groups fused`) and the distinct fused
                   PrimFuncs (`FuseTIR primfuncs made`)
  graph fns / PrimFuncs: `def` and `prim` functions of the lowered module
  LegalizeOps, FuseTIR, tir pipeline (the sum of the passes of TIR_PIPELINE after FuseTIR):
                   milliseconds at -j1 and -j2, and the tir pipeline's speedup

Python 3 standard library only. Usage:
  python3 scripts/tir_models.py [--passel target/release/passel] [--repeats 3] [DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

TIR_PIPELINE = ["Simplify", "FlattenBuffer", "NarrowDataType", "LoopPartition", "VectorizeLoop",
                "StorageRewrite", "UnrollLoop", "RemoveNoOp", "CommonSubexprElimTIR"]
LINE = re.compile(r"^(\t*)([A-Za-z0-9_-]+): (\d+)us")


def run(passel, model, threads):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.pir")
        res = subprocess.run([passel, "run", model, "-O3", "--lower", f"-j{threads}", "--timing", "--stats",
                              "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if res.returncode != 0:
            return None
        text = open(out).read()
    times = {"LegalizeOps": 0, "FuseTIR": 0, "tir": 0}
    stats = {}
    in_lower = False
    after_fuse = False
    for line in res.stderr.splitlines():
        m = LINE.match(line)
        if m:
            depth, name, us = len(m.group(1)), m.group(2), int(m.group(3))
            if depth == 1:
                in_lower = name == "lower"
                continue
            if in_lower and depth == 2:
                if name in ("LegalizeOps", "FuseTIR"):
                    times[name] += us
                    after_fuse = after_fuse or name == "FuseTIR"
                elif after_fuse and name in TIR_PIPELINE:
                    times["tir"] += us
            continue
        parts = line.split()
        if len(parts) >= 3 and parts[-1].isdigit():
            stats[(parts[0], " ".join(parts[1:-1]))] = int(parts[-1])
    counts = {
        "groups": stats.get(("FuseOps", "groups formed"), 0),
        "calls": stats.get(("LegalizeOps", "calls lowered"), 0),
        "kernels": stats.get(("LegalizeOps", "primfuncs made"), 0),
        "fused_groups": stats.get(("FuseTIR", "groups fused"), 0),
        "fused": stats.get(("FuseTIR", "primfuncs made"), 0),
        "defs": sum(1 for l in text.splitlines() if l.startswith("def @")),
        "prims": sum(1 for l in text.splitlines() if l.startswith("prim @")),
    }
    return times, counts


def best(passel, model, threads, repeats):
    runs = [run(passel, model, threads) for _ in range(repeats)]
    if any(r is None for r in runs):
        return None
    times = {k: min(r[0][k] for r in runs) for k in runs[0][0]}
    return times, runs[0][1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default="engine/tests/data/real_models")
    ap.add_argument("--passel", default="target/release/passel")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out-of-scope", default="docs/onnx-real-models-out-of-scope.txt")
    args = ap.parse_args()
    skip = set()
    if os.path.exists(args.out_of_scope):
        for line in open(args.out_of_scope):
            if line.strip() and not line.startswith("#"):
                skip.add(line.split()[0])
    ms = lambda us: f"{us / 1e3:.1f}"
    print("| model | groups | calls → kernels | groups → fused | graph fns | PrimFuncs | LegalizeOps ms -j1 / -j2 "
          "| FuseTIR ms -j1 / -j2 | tir pipeline ms -j1 / -j2 | tir speedup |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in sorted(os.listdir(args.dir)):
        model = os.path.join(args.dir, name, "model.onnx")
        if name in skip or not os.path.exists(model):
            continue
        one = best(args.passel, model, 1, args.repeats)
        two = best(args.passel, model, 2, args.repeats)
        if one is None or two is None:
            print(f"| {name} | does not lower | | | | | | | | |", flush=True)
            continue
        (t1, c), (t2, c2) = one, two
        if c != c2:
            print(f"{name}: counts differ between -j1 and -j2: {c} vs {c2}", file=sys.stderr)
        speedup = f"{t1['tir'] / t2['tir']:.2f}x" if t2["tir"] else "-"
        print(f"| {name} | {c['groups']} | {c['calls']} → {c['kernels']} | {c['fused_groups']} → {c['fused']} "
              f"| {c['defs']} | {c['prims']} | {ms(t1['LegalizeOps'])} / {ms(t2['LegalizeOps'])} "
              f"| {ms(t1['FuseTIR'])} / {ms(t2['FuseTIR'])} | {ms(t1['tir'])} / {ms(t2['tir'])} | {speedup} |",
              flush=True)


if __name__ == "__main__":
    main()
