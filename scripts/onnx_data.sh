#!/usr/bin/env bash
# Makes target/onnx-venv (onnx, onnxruntime, numpy from PyPI) and writes the ONNX conformance
# data to target/onnx-data (see scripts/onnx_data.py). Re-running reuses the venv.
# Usage: scripts/onnx_data.sh [OUT_DIR [node|light|models]…]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/onnx-venv
OUT=${1:-target/onnx-data}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  "$VENV/bin/pip" install -q onnx onnxruntime numpy
fi
"$VENV/bin/python" -W ignore scripts/onnx_data.py "$OUT" "${@:2}"
