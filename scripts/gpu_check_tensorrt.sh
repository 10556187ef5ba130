#!/usr/bin/env bash
# Check the GPU backends (TensorRT engines; onnxruntime-gpu's CUDA and TensorRT providers) end to end
# on a machine with an NVIDIA GPU (see scripts/gpu_check_tensorrt.py).
#
#   scripts/gpu_check_tensorrt.sh [--device 0] [--bench] [--seconds 10] [--keep]
#
# Makes (or reuses) a virtual environment with tritium's tensorrt, onnxruntime-gpu and examples extras,
# then runs scripts/gpu_check_tensorrt.py in it. Prints PASS or FAIL; exits non-zero on failure.
# Environment:
#   GPU_CHECK_VENV     where the virtual environment goes (default: /tmp/tritium-gpu-check-trt-venv)
#   GPU_CHECK_PYTHON   an interpreter that already has everything (no install)
#   PYTHON             the interpreter that makes the virtual environment (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
  exec "$GPU_CHECK_PYTHON" scripts/gpu_check_tensorrt.py "$@"
fi
if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -d /proc/driver/nvidia/gpus ]; then
  echo "FAIL  no NVIDIA GPU or driver on this machine (no nvidia-smi, no /proc/driver/nvidia/gpus)" >&2
  echo "FAIL"
  exit 1
fi
VENV=${GPU_CHECK_VENV:-/tmp/tritium-gpu-check-trt-venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# the CPU onnxruntime shadows onnxruntime-gpu (same import name): never both in one environment
"$VENV/bin/python" -m pip install -q -e '.[tensorrt,examples]' 'tritonclient[http,grpc]==2.51.0' 'numpy<2'
"$VENV/bin/python" -m pip uninstall -q -y onnxruntime >/dev/null 2>&1 || true
# CUDA and cuDNN from PyPI so that onnxruntime-gpu's CUDA provider loads without a CUDA toolkit
"$VENV/bin/python" -m pip install -q 'onnxruntime-gpu[cuda,cudnn]>=1.21'
exec "$VENV/bin/python" scripts/gpu_check_tensorrt.py "$@"
