#!/usr/bin/env bash
# Times TVM's ONNX import + its matching relax pipeline next to `passel bench --model` on the
# same files and prints a side-by-side table (scripts/tvm_compare.py says exactly what runs).
# Not part of CI. Makes target/tvm-venv (apache-tvm 0.27.0.post1, onnx, numpy from PyPI) and
# builds the release passel binary if it is missing. Re-running reuses both.
# With --lower both sides go on to the loop level (PrimFuncs, then the tir passes; no code
# generation) at one thread. TVM runs with TVM_NUM_THREADS=1; PASSEL=path/to/passel picks the
# binary (default target/release/passel).
# Usage: scripts/tvm_compare.sh [--lower] [--input-shape NAME=D0,D1,…]… [--repeats N] [--tvm-repeats N] MODEL.onnx…
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TVM_VENV:-target/tvm-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import tvm, onnx, numpy" 2>/dev/null; then
  "$VENV/bin/pip" install -q "apache-tvm==0.27.0.post1" onnx numpy
fi
PASSEL=${PASSEL:-target/release/passel}
if [ ! -x "$PASSEL" ]; then
  cargo build --release --bin passel
fi
TVM_NUM_THREADS=1 "$VENV/bin/python" -W ignore scripts/tvm_compare.py --passel "$PASSEL" "$@"
