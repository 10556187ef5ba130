"""A request its client cancels is counted as a CANCELED failure, never as a success (issue 28).

A slow python model (it ignores the cancellation and runs each request to the end) gets gRPC
requests that the client gives up on: a short ``client_timeout`` (the deadline passes) and
``async_infer(...).cancel()``. On both gRPC transports the model's statistics then count
failures with reason ``CANCELED`` and no success (Triton 2.51, checked with the same model and
client, counts both as successes: docs/compatibility.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server, wait_grpc_ready
from tests.support.repo import add_model
from tests.support.server import ServerProcess, transport_plugins

SLOW = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(1.5)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
"""
CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


@pytest.fixture(scope="module", params=["auto", "aio"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp(f"cancelled_{request.param}")

    def build(repo: Path) -> None:
        add_model(repo, "slow", CONFIG, files={"1/model.py": SLOW})

    env = transport_plugins(root, "aio") if request.param == "aio" else None
    yield from module_server(root, build, [], env=env)


def _metric(server: ServerProcess, name: str, reason: str | None = None) -> float:
    labels = f'model="slow",reason="{reason}",version="1"' if reason else 'model="slow",version="1"'
    match = re.search(rf"^{name}\{{{re.escape(labels)}\}} ([0-9.e+]+)$", server.wait_metrics(), re.M)
    assert match is not None, name
    return float(match.group(1))


def _wait_counted(server: ServerProcess, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (
            _metric(server, "nv_inference_request_failure", "CANCELED")
            + _metric(server, "nv_inference_request_success")
            >= count
        ):
            return
        time.sleep(0.2)
    raise AssertionError(server.log()[-2000:])


def test_cancelled_requests_are_counted_canceled(server: ServerProcess) -> None:
    wait_grpc_ready(server)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    tensor = grpcclient.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(np.ones(4, np.float32))
    with pytest.raises(InferenceServerException, match="Deadline Exceeded"):
        client.infer("slow", [tensor], client_timeout=0.5)
    answers: list[object] = []
    call = client.async_infer("slow", [tensor], callback=lambda result, error: answers.append(error))
    time.sleep(0.3)
    call.cancel()
    _wait_counted(server, 2)
    time.sleep(0.5)  # nothing more is counted for them
    assert _metric(server, "nv_inference_request_failure", "CANCELED") == 2
    assert _metric(server, "nv_inference_request_success") == 0
    assert _metric(server, "nv_inference_request_failure", "BACKEND") == 0
    stats = client.get_inference_statistics("slow", as_json=True)["model_stats"][0]["inference_stats"]
    assert int(stats["fail"]["count"]) == 2 and "count" not in stats["success"]
    # a request that runs to its answer is a success
    assert client.infer("slow", [tensor]).as_numpy("OUTPUT0").tolist() == [1.0] * 4
    assert _metric(server, "nv_inference_request_success") == 1
