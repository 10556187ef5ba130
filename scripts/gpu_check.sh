#!/usr/bin/env bash
# Check tensors in CUDA shared memory end to end on a machine with an NVIDIA GPU (see scripts/gpu_check.py).
#
#   scripts/gpu_check.sh [--device 0] [--kind gpu|cpu] [--require-gpu-ep] [--keep]
#
# Makes (or reuses) a virtual environment with tritium and the `cuda` and `onnxruntime-gpu` extras,
# then runs scripts/gpu_check.py in it. Prints PASS or FAIL; exits non-zero on failure.
# Environment:
#   GPU_CHECK_VENV     where the virtual environment goes (default: /tmp/tritium-gpu-check-venv)
#   GPU_CHECK_PYTHON   an interpreter that already has everything (no install; e.g. on a machine
#                      without network access): tritium[cuda,onnxruntime-gpu], cuda-python<13,
#                      tritonclient[http,grpc]==2.51.0, setuptools<81, onnx
#   GPU_CHECK_CUDA_LIBS=1  also install CUDA and cuDNN from PyPI (onnxruntime-gpu[cuda,cudnn], ~1-2 GB)
#                      for a machine without a CUDA toolkit, so that the CUDA execution provider loads
#   PYTHON             the interpreter that makes the virtual environment (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
  exec "$GPU_CHECK_PYTHON" scripts/gpu_check.py "$@"
fi
if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -d /proc/driver/nvidia/gpus ]; then
  echo "FAIL  no NVIDIA GPU or driver on this machine (no nvidia-smi, no /proc/driver/nvidia/gpus)" >&2
  echo "FAIL"
  exit 1
fi
VENV=${GPU_CHECK_VENV:-/tmp/tritium-gpu-check-venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
ORT='onnxruntime-gpu>=1.17'
if [ "${GPU_CHECK_CUDA_LIBS:-0}" = "1" ]; then
  ORT='onnxruntime-gpu[cuda,cudnn]>=1.21'
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# the CPU onnxruntime shadows onnxruntime-gpu (same import name): never both in one environment
"$VENV/bin/python" -m pip uninstall -q -y onnxruntime >/dev/null 2>&1 || true
# cuda-python<13: tritonclient 2.51's cuda_shared_memory imports cuda.cudart (gone in cuda-python 13);
# setuptools<81: tritonclient 2.51's shared-memory utilities import pkg_resources
"$VENV/bin/python" -m pip install -q -e '.[cuda,onnxruntime-gpu]' "$ORT" 'cuda-python>=12.6,<13' \
  'tritonclient[http,grpc]==2.51.0' 'setuptools<81' 'onnx>=1.15' 'numpy<2'
exec "$VENV/bin/python" scripts/gpu_check.py "$@"
