"""`passel bench --model` over the real models of scripts/onnx_data.sh; prints the README table.

Usage: python3 scripts/bench_models.py [DATA_DIR] [--passel BIN] [--repeats N]
Each model's input shapes come from its meta.json (`input_shapes`), as `passel conformance`
takes them. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", default="target/onnx-data")
    ap.add_argument("--passel", default="target/release/passel")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("| model | weights MiB | import ms | -O3 -j1 ms | -O3 -j2 ms | print ms | peak heap / weights "
          "| peak RSS / weights | ops before | ops after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for group in ("light", "models"):
        root = os.path.join(args.data, group)
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            model = os.path.join(root, name, "model.onnx")
            if not os.path.exists(model):
                continue
            with open(os.path.join(root, name, "meta.json")) as f:
                meta = json.load(f)
            with tempfile.TemporaryDirectory() as tmp:
                js = os.path.join(tmp, "bench.json")
                cmd = [args.passel, "bench", "--model", model, "-O3", "--threads", "2",
                       "--repeats", str(args.repeats), "--json", js]
                for k, dims in meta.get("input_shapes", {}).items():
                    cmd += ["--input-shape", f"{k}={','.join(map(str, dims))}"]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                with open(js) as f:
                    r = json.load(f)
            t = {(row["mode"], row["threads"]): row["time_ms"] for row in r["rows"]}
            m = r["model"]
            ratio = lambda v: "—" if v is None else f"{v:.2f}"
            print(f"| {name} | {m['weight_bytes'] / 2**20:.1f} | {t[('import', 1)]:.1f} | {t[('serial', 1)]:.1f} "
                  f"| {t[('parallel', 2)]:.1f} | {t[('print', 1)]:.1f} | {ratio(m['peak_heap_per_weight_byte'])} "
                  f"| {ratio(m['peak_rss_per_weight_byte'])} | {m['ops_before']} | {m['ops_after']} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
