#!/usr/bin/env bash
# Makes target/export-venv (torch, transformers, onnx, onnxscript, onnxruntime, numpy from PyPI)
# and writes the real-export test data to engine/tests/data/real_models (see
# scripts/export_models.py). Run by hand, not in CI: CI reads the committed files without torch.
# Re-running reuses the venv.
#
# PyPI's Linux x86_64 torch wheel is a CUDA build: its libraries are linked against CUDA's
# (libcudart, libcublas, libcudnn, libnccl, … are DT_NEEDED of libtorch_cpu.so /
# libtorch_cuda.so), so `import torch` needs them even on a machine without a GPU, and
# PyPI has no CPU-only torch. We install torch with --no-deps plus its pure-Python
# dependencies and the nvidia-* library wheels those DT_NEEDED entries name, and leave out
# what only GPU compilation uses (triton, cuda-bindings). The versions are the ones torch
# 2.15.0's metadata pins; the venv is about 4.7 GB, under target/. The other packages are
# pinned to the versions the committed data was written with (meta.json records them): bump
# them on purpose, and re-run to rewrite every case.
#
# Usage: scripts/export_models.sh [OUT_DIR [NAME_SUBSTRING…]]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/export-venv
OUT=${1:-engine/tests/data/real_models}
TORCH=2.15.0
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$VENV/bin/pip" install -q --no-deps "torch==$TORCH"
  "$VENV/bin/pip" install -q filelock "typing-extensions>=4.13" "setuptools>=77.0.3" "sympy>=1.13.3" \
    "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
  # The CUDA libraries torch's shared objects are linked against (pins from torch's METADATA).
  "$VENV/bin/pip" install -q \
    "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.2.2" \
    nvidia-cudnn-cu13==9.26.0.51 nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 \
    nvidia-nvshmem-cu13==3.7.2
fi
PINS=(transformers==5.24.0 onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.32.0 numpy==2.4.6)
if ! "$VENV/bin/pip" show -q "${PINS[@]%%==*}" >/dev/null 2>&1 \
  || [ "$("$VENV/bin/pip" freeze 2>/dev/null | grep -cxF -f <(printf '%s\n' "${PINS[@]}"))" != "${#PINS[@]}" ]; then
  "$VENV/bin/pip" install -q "${PINS[@]}"
fi
"$PY" -W ignore scripts/export_models.py "$OUT" "${@:2}"
# The README's passel columns, when a release build is there (cargo build --release --bin passel).
if [ -x target/release/passel ]; then
  "$PY" scripts/export_models.py --readme "$OUT" target/release/passel
fi
