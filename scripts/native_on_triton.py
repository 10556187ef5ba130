#!/usr/bin/env python3
"""Build tritium's C example backends against Triton's own headers and serve them with the real Triton.

The source-compatibility check end to end: ``examples/native_backends/*`` and
the test backend ``misbehave.c`` are compiled as C++ (Triton's headers are
C++-only) against ``--triton-include`` (a folder holding
``triton/core/tritonbackend.h``), loaded by Triton 2.51 (nvidia-pytriton's
``tritonserver``), and sent the requests that
``tests/integration/test_native_backends.py`` sends to tritium. Prints each
answer; exit status 1 when one differs from what those tests expect of
tritium.

    python scripts/native_on_triton.py --triton-venv /work/ref/venv --triton-include /tmp/triton-core/include
"""

from __future__ import annotations

import argparse
import http.client
import json
import queue
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.triton import TritonServer  # noqa: E402
from tests.support.server import free_port  # noqa: E402

EXAMPLES = ROOT / "examples" / "native_backends"
MODELS = {
    # model: (backend, config body, source)
    "identity": (
        "c_identity",
        """max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_STRING dims: [ 2 ] } ]
""",
        EXAMPLES / "identity" / "identity.c",
    ),
    "repeat": (
        "c_repeat",
        """max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
""",
        EXAMPLES / "repeat" / "repeat.c",
    ),
    "accumulate": (
        "c_accumulate",
        """max_batch_size: 0
input [ { name: "INPUT" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "TOTAL" data_type: TYPE_INT64 dims: [ 1 ] } ]
""",
        EXAMPLES / "accumulate" / "accumulate.c",
    ),
    "misbehave": (
        "misbehave",
        """max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
""",
        ROOT / "tests" / "integration" / "native_backends" / "misbehave.c",
    ),
}


def build(repo: Path, include: Path) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        raise SystemExit("needs g++ (Triton's headers are C++-only)")
    for model, (backend, config, source) in MODELS.items():
        (repo / model / "1").mkdir(parents=True)
        (repo / model / "config.pbtxt").write_text(f'backend: "{backend}"\n{config}')
        subprocess.run(
            [
                cxx,
                "-x",
                "c++",
                "-shared",
                "-fPIC",
                "-O2",
                "-pthread",
                f"-I{include}",
                str(source),
                "-o",
                str(repo / model / f"libtriton_{backend}.so"),
            ],
            check=True,
        )


def check(http_url: str, grpc_url: str) -> list[tuple[str, object, object]]:
    """(case, got, expected) for every request."""
    results: list[tuple[str, object, object]] = []
    client = httpclient.InferenceServerClient(http_url)
    a = httpclient.InferInput("INPUT0", [2, 4], "FP32")
    a.set_data_from_numpy(np.arange(8, dtype=np.float32).reshape(2, 4) / 4)
    b = httpclient.InferInput("INPUT1", [2, 2], "BYTES")
    b.set_data_from_numpy(np.array([[b"hello", b""], [b"\x00bin\xff", "µ".encode()]], dtype=np.object_))
    result = client.infer("identity", [a, b])
    results.append(
        (
            "identity",
            [result.as_numpy("OUTPUT0").tolist(), result.as_numpy("OUTPUT1").tolist()],
            [[[0.0, 0.25, 0.5, 0.75], [1.0, 1.25, 1.5, 1.75]], [[b"hello", b""], [b"\x00bin\xff", "µ".encode()]]],
        )
    )
    x = httpclient.InferInput("INPUT", [3], "INT64")
    x.set_data_from_numpy(np.array([1, 2, 3], np.int64))
    result = client.infer("accumulate", [x])
    results.append(
        ("accumulate", [result.as_numpy("TOTAL").tolist(), result.get_response()["parameters"]], [[6], {"requests": 1}])
    )
    client.close()
    for value, expected in ((4, (400, {"error": "native says no"})), (5, (501, {"error": "not this one"}))):
        conn = http.client.HTTPConnection(http_url, timeout=60)
        body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [value]}]}
        conn.request("POST", "/v2/models/misbehave/infer", json.dumps(body))
        response = conn.getresponse()
        results.append((f"misbehave {value} (HTTP)", (response.status, json.loads(response.read())), expected))
        conn.close()
    stream = grpcclient.InferenceServerClient(grpc_url)
    answers: queue.Queue[tuple[object, object]] = queue.Queue()
    stream.start_stream(callback=lambda result, error: answers.put((result, error)))
    tensor = grpcclient.InferInput("IN", [3], "INT32")
    tensor.set_data_from_numpy(np.array([7, -1, 42], np.int32))
    stream.async_stream_infer("repeat", [tensor], enable_empty_final_response=True)
    got = []
    while True:
        result, error = answers.get(timeout=60)
        if error is not None:
            got.append(str(error))
            break
        if result.get_response().parameters["triton_final_response"].bool_param:  # type: ignore[attr-defined]
            break
        got.append((result.as_numpy("OUT").tolist(), result.as_numpy("IDX").tolist()))  # type: ignore[attr-defined]
    stream.stop_stream()
    stream.close()
    results.append(("repeat (gRPC stream)", got, [([7], [0]), ([-1], [1]), ([42], [2])]))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton-venv", type=Path, default=ROOT / "benchmarks" / ".triton-venv")
    parser.add_argument(
        "--triton-include", type=Path, required=True, help="folder holding Triton's triton/core/tritonbackend.h"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tritium-native-on-triton-") as tmp:
        repo = Path(tmp) / "models"
        build(repo, args.triton_include)
        server = TritonServer(args.triton_venv, repo, free_port(), free_port(), free_port(), Path(tmp) / "triton.log")
        server.start()
        try:
            results = check(server.http_url, server.grpc_url)
        finally:
            server.stop()
    differ = 0
    for case, got, expected in results:
        same = got == expected
        differ += not same
        print(f"{'same' if same else 'DIFFERENT'}: {case}: {got!r}" + ("" if same else f" (tritium: {expected!r})"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
