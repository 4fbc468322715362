"""Measures passel on the BERT-base-sized exports of scripts/export_bert_base.py (docs/onnx.md,
"Scale: a BERT-base-sized export"). Not in CI.

For each model folder DIR (model.onnx, input_K.npy, onnxruntime's output_K.npy), ROUNDS times,
models and commands alternated, each under `/usr/bin/time -v` (wall time, peak RSS):

  check   passel check DIR/model.onnx                      import, verify, InferType; no printing
  import  passel import DIR/model.onnx -o /dev/null        import and print the .pir text
  o3_j1   passel run DIR/model.onnx -O3 -j1 --timing -o /dev/null   (+ the pipeline's own total)
  o3      passel run DIR/model.onnx -O3 > /dev/null        default threads (all cores)
  bench   passel bench --model DIR/model.onnx -O3 --threads 2 --repeats 1 --json F
          (its import row, serial -O3 row, peak heap and peak RSS of import + serial run)
  eval    passel eval DIR/model.onnx --input DIR/input_K.npy… --output-dir T
          --compare DIR --rtol 1e-4 --atol 1e-4             (vs onnxruntime)

and once, untimed, the error after -O3: `passel run -O3 -o T/o3.pir`, then `passel eval T/o3.pir`
on the same inputs. Errors: max |passel - onnxruntime| per output, and that over max
|onnxruntime| (the issue's criterion: ≤ 1e-4). Prints medians as a markdown table and writes
every sample to OUT/measure.json.

Usage (needs numpy, e.g. target/export-venv/bin/python):
  python scripts/bench_bert_base.py [--passel target/release/passel] [--rounds 3] [--no-after-o3]
                                    [OUT=target/bert_base] [DIR…]
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd under /usr/bin/time -v; returns (wall s, peak RSS bytes, stderr of cmd)."""
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    err = r.stderr
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{err[-3000:]}")
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", err)
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) * 1024
    return wall, rss, err


def inputs_of(d):
    return sorted(glob.glob(os.path.join(d, "input_*.npy")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))


def errors(got_dir, want_dir):
    out = []
    for want_path in sorted(glob.glob(os.path.join(want_dir, "output_*.npy"))):
        want = np.load(want_path)
        got = np.load(os.path.join(got_dir, os.path.basename(want_path)))
        assert got.shape == want.shape, (got.shape, want.shape)
        abs_err = float(np.max(np.abs(got.astype(np.float64) - want)))
        out.append({"output": os.path.basename(want_path), "max_abs_err": abs_err,
                    "max_abs_ref": float(np.max(np.abs(want))),
                    "rel_to_max": abs_err / float(np.max(np.abs(want)))})
    return out


def one_round(passel, d, tmp, samples):
    model = os.path.join(d, "model.onnx")
    s = samples.setdefault(d, {})

    def add(key, value):
        s.setdefault(key, []).append(value)

    wall, rss, _ = timed([passel, "check", model])
    add("check_s", wall), add("check_rss", rss)
    wall, rss, _ = timed([passel, "import", model, "-o", "/dev/null"])
    add("import_print_s", wall), add("import_print_rss", rss)
    wall, rss, err = timed([passel, "run", model, "-O3", "-j1", "--timing", "-o", "/dev/null"])
    add("run_o3_j1_s", wall), add("run_o3_j1_rss", rss)
    add("o3_j1_pipeline_ms", int(re.search(r"Total: (\d+)us", err).group(1)) / 1e3)
    ecse = re.search(r"EliminateCommonSubexpr: (\d+)us", err)
    add("o3_j1_cse_ms", int(ecse.group(1)) / 1e3 if ecse else None)
    with open(os.devnull, "w") as null:
        wall, rss, _ = timed([passel, "run", model, "-O3"], stdout=null)
    add("run_o3_s", wall), add("run_o3_rss", rss)
    js = os.path.join(tmp, "bench.json")
    wall, rss, _ = timed([passel, "bench", "--model", model, "-O3", "--threads", "2", "--repeats", "1", "--json", js])
    with open(js) as f:
        rep = json.load(f)
    rows = {(r["mode"], r["threads"]): r for r in rep["rows"]}
    add("bench_import_ms", rows[("import", 1)]["time_ms"])
    add("bench_o3_j1_ms", rows[("serial", 1)]["time_ms"])
    add("bench_o3_j2_ms", rows[("parallel", 2)]["time_ms"])
    add("bench_print_ms", rows[("print", 1)]["time_ms"])
    add("bench_peak_heap_x", rep["model"]["peak_heap_per_weight_byte"])
    add("bench_peak_rss_x", rep["model"]["peak_rss_per_weight_byte"])
    add("bench_process_rss", rss)
    s["weight_bytes"] = rep["model"]["weight_bytes"]
    s["file_bytes"] = rep["model"]["file_bytes"]
    s["ops"] = [rep["model"]["ops_before"], rep["model"]["ops_after"]]
    s["load_average"] = s.get("load_average", []) + [rep["machine"]["load_average"]]
    outdir = os.path.join(tmp, "eval")
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [passel, "eval", model] + sum((["--input", p] for p in inputs_of(d)), []) + [
        "--output-dir", outdir, "--compare", d, "--rtol", "1e-4", "--atol", "1e-4"]
    wall, rss, _ = timed(cmd)
    add("eval_s", wall), add("eval_rss", rss)
    s["errors"] = errors(outdir, d)


def after_o3(passel, d, tmp, samples):
    pir = os.path.join(tmp, "o3.pir")
    subprocess.run([passel, "run", os.path.join(d, "model.onnx"), "-O3", "-o", pir], check=True)
    outdir = os.path.join(tmp, "eval_o3")
    shutil.rmtree(outdir, ignore_errors=True)
    r = subprocess.run([passel, "eval", pir] + sum((["--input", p] for p in inputs_of(d)), []) +
                       ["--output-dir", outdir], capture_output=True, text=True)
    if r.returncode != 0:
        samples[d]["errors_after_o3"] = f"passel eval of the -O3 output failed: {r.stderr.strip()[-500:]}"
    else:
        samples[d]["errors_after_o3"] = errors(outdir, d)
    samples[d]["o3_pir_bytes"] = os.path.getsize(pir)
    os.remove(pir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(ROOT, "target", "bert_base"))
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--passel", default=os.path.join(ROOT, "target", "release", "passel"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-after-o3", action="store_true")
    a = ap.parse_args()
    dirs = a.dirs or sorted(os.path.dirname(p) for p in glob.glob(os.path.join(a.out, "*", "model.onnx")))
    tmp = os.path.join(a.out, "measure-tmp")
    os.makedirs(tmp, exist_ok=True)
    samples = {}
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(a.rounds):
        for d in dirs:
            print(f"round {r + 1}: {d}", file=sys.stderr, flush=True)
            one_round(a.passel, d, tmp, samples)
    if not a.no_after_o3:
        for d in dirs:
            after_o3(a.passel, d, tmp, samples)
    shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(a.out, "measure.json"), "w") as f:
        json.dump({"started": start, "rounds": a.rounds, "samples": samples}, f, indent=1)

    med = lambda xs: statistics.median(x for x in xs if x is not None)
    mb = 1e6
    print(f"started {start}, {a.rounds} rounds, medians (all samples in {a.out}/measure.json)")
    print("| model | weights MB | check s | check RSS MB (× weights) | import -o /dev/null s | its RSS MB (×) "
          "| run -O3 -j1 s | -O3 pipeline ms (CSE ms) | its RSS MB (×) | run -O3 > /dev/null s | its RSS MB (×) "
          "| bench import ms | bench -O3 -j1 ms | -j2 ms | bench peak heap × | bench peak RSS × "
          "| eval s | eval RSS MB | max abs err (÷ max abs ref) | after -O3 |")
    print("|---" * 20 + "|")
    for d, s in samples.items():
        w = s["weight_bytes"]
        rss = lambda k: f"{med(s[k]) / mb:.0f} ({med(s[k]) / w:.2f}×)"
        errs = "; ".join(f"{e['max_abs_err']:.2e} ({e['rel_to_max']:.1e})" for e in s["errors"])
        after = s.get("errors_after_o3")
        after = after if isinstance(after, str) or after is None else "; ".join(
            f"{e['max_abs_err']:.2e} ({e['rel_to_max']:.1e})" for e in after)
        print(f"| {os.path.basename(d)} | {w / mb:.1f} | {med(s['check_s']):.2f} | {rss('check_rss')} "
              f"| {med(s['import_print_s']):.2f} | {rss('import_print_rss')} "
              f"| {med(s['run_o3_j1_s']):.2f} | {med(s['o3_j1_pipeline_ms']):.0f} ({med(s['o3_j1_cse_ms']):.0f}) "
              f"| {rss('run_o3_j1_rss')} | {med(s['run_o3_s']):.2f} | {rss('run_o3_rss')} "
              f"| {med(s['bench_import_ms']):.0f} | {med(s['bench_o3_j1_ms']):.0f} | {med(s['bench_o3_j2_ms']):.0f} "
              f"| {med(s['bench_peak_heap_x']):.2f} | {med(s['bench_peak_rss_x']):.2f} "
              f"| {med(s['eval_s']):.2f} | {med(s['eval_rss']) / mb:.0f} | {errs} | {after} |")
    print("load average (bench's reading per round):",
          {os.path.basename(d): s["load_average"] for d, s in samples.items()})


if __name__ == "__main__":
    main()
