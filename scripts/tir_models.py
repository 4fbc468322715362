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
  LegalizeOps, FuseTIR: milliseconds at -j1 and -j2 (from --timing)
  tir stage:       the tir pipeline as it runs by default, fused into one stage (one task per
                   PrimFunc runs all its passes; --timing attaches an instrument, which runs the
                   passes one by one instead): from a second run with --trace, the wall time
                   from the first tir pass's start to the last one's end, milliseconds at -j1
                   and -j2, and its speedup
  largest share:   the largest PrimFunc's share of the tir stage's work at -j1 (the sum of its
                   passes' times over the sum of all): a stage cannot run faster than its
                   largest task, so this bounds the 2-thread speedup at 1 / share

Python 3 standard library only. Usage:
  python3 scripts/tir_models.py [--passel target/release/passel] [--repeats 3] [DIR]
"""

import argparse
import json
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
    times = {"LegalizeOps": 0, "FuseTIR": 0}
    stats = {}
    in_lower = False
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


def run_traced(passel, model, threads):
    """The fused tir stage's wall time (us) and per-PrimFunc work (us), from --trace."""
    with tempfile.TemporaryDirectory() as tmp:
        out, trace = os.path.join(tmp, "out.pir"), os.path.join(tmp, "trace.json")
        res = subprocess.run([passel, "run", model, "-O3", "--lower", f"-j{threads}", "--trace", trace,
                              "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if res.returncode != 0:
            return None
        events = [e for e in json.load(open(trace))["traceEvents"]
                  if e.get("ph") == "X" and e["name"] in TIR_PIPELINE]
    if not events:
        return 0, {}
    wall = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    work = {}
    for e in events:
        f = e["args"]["function"]
        work[f] = work.get(f, 0) + e["dur"]
    return wall, work


def best(passel, model, threads, repeats):
    runs = [run(passel, model, threads) for _ in range(repeats)]
    traced = [run_traced(passel, model, threads) for _ in range(repeats)]
    if any(r is None for r in runs + traced):
        return None
    times = {k: min(r[0][k] for r in runs) for k in runs[0][0]}
    best_trace = min(traced, key=lambda t: t[0])
    times["tir"] = best_trace[0]
    work = best_trace[1]
    times["share"] = max(work.values()) / sum(work.values()) if work and sum(work.values()) else 0.0
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
          "| FuseTIR ms -j1 / -j2 | tir stage ms -j1 / -j2 | tir speedup | largest share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in sorted(os.listdir(args.dir)):
        model = os.path.join(args.dir, name, "model.onnx")
        if name in skip or not os.path.exists(model):
            continue
        one = best(args.passel, model, 1, args.repeats)
        two = best(args.passel, model, 2, args.repeats)
        if one is None or two is None:
            print(f"| {name} | does not lower | | | | | | | | | |", flush=True)
            continue
        (t1, c), (t2, c2) = one, two
        if c != c2:
            print(f"{name}: counts differ between -j1 and -j2: {c} vs {c2}", file=sys.stderr)
        speedup = f"{t1['tir'] / t2['tir']:.2f}x" if t2["tir"] else "-"
        print(f"| {name} | {c['groups']} | {c['calls']} → {c['kernels']} | {c['fused_groups']} → {c['fused']} "
              f"| {c['defs']} | {c['prims']} | {ms(t1['LegalizeOps'])} / {ms(t2['LegalizeOps'])} "
              f"| {ms(t1['FuseTIR'])} / {ms(t2['FuseTIR'])} | {ms(t1['tir'])} / {ms(t2['tir'])} | {speedup} "
              f"| {t1['share']:.0%} |",
              flush=True)


if __name__ == "__main__":
    main()
