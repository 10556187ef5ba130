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
exec "$VENV/bin/python" -m pytest "$@"
