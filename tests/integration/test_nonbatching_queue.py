"""``dynamic_batching`` on a model with ``max_batch_size: 0``: the queue policy and priorities apply, batching does not.

Probed on real Triton 2.51 (python model, one instance, 1 s per request,
``default_queue_policy { max_queue_size: 1 }``, 5 concurrent requests): 2 answered
200, 3 answered 503 ``[request id: <id_unknown>] Exceeds maximum queue size``. The
model reports how many requests each execute got and in which order it ran them,
so the assertions are on what the model saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

from tests.integration.test_dynamic_batcher import _concurrent
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

MODEL = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.delay = float(params["delay_s"]["string_value"])
        self.seqno = 0

    def execute(self, requests):
        time.sleep(self.delay)
        self.seqno += 1
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor("NREQ", np.array([len(requests)], np.int32)),
                    pb_utils.Tensor("SEQNO", np.array([self.seqno], np.int32)),
                ]
            )
            for _ in requests
        ]
"""


def config(dynamic: str, delay_s: float) -> str:
    return f"""
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "NREQ" data_type: TYPE_INT32 dims: [ 1 ] }}, {{ name: "SEQNO" data_type: TYPE_INT32 dims: [ 1 ] }} ]
        dynamic_batching {{ {dynamic} }}
        parameters {{ key: "delay_s" value {{ string_value: "{delay_s}" }} }}
        instance_group [ {{ count: 1 kind: KIND_CPU }} ]
    """


def build(repo: Path) -> None:
    add_model(repo, "queue1", config("default_queue_policy { max_queue_size: 1 }", 1.0), files={"1/model.py": MODEL})
    add_model(repo, "levels", config("priority_levels: 2 default_priority_level: 2", 1.5), files={"1/model.py": MODEL})
    add_model(
        repo,
        "timeout",
        config("default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 200000 }", 1.0),
        files={"1/model.py": MODEL},
    )
    add_model(repo, "delay", config("max_queue_delay_microseconds: 30000000", 0.3), files={"1/model.py": MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("nonbatching"), build, [])


def call(server: ServerProcess, protocol: str, model: str, **kwargs: int) -> object:
    import numpy as np

    if protocol == "http":
        import tritonclient.http as client_module
    else:
        import tritonclient.grpc as client_module  # type: ignore[no-redef]

    def run() -> dict[str, int]:
        url = server.http_url.replace("http://", "") if protocol == "http" else server.grpc_url
        client = client_module.InferenceServerClient(url)
        try:
            tensor = client_module.InferInput("INPUT0", [1], "FP32")
            tensor.set_data_from_numpy(np.ones(1, np.float32))
            result = client.infer(model, [tensor], **kwargs)
            return {name: int(result.as_numpy(name)[0]) for name in ("NREQ", "SEQNO")}
        finally:
            client.close()

    return run


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_max_queue_size_applies(server: ServerProcess, protocol: str) -> None:
    # one request executes (1 s), one waits (max_queue_size 1), three are refused: Triton 2.51's answers
    results = _concurrent([call(server, protocol, "queue1") for _ in range(5)], stagger_s=0.1)
    errors = [r for r in results if isinstance(r, InferenceServerException)]
    assert [(e.message(), e.status()) for e in errors] == [
        (
            "[request id: <id_unknown>] Exceeds maximum queue size",
            "503" if protocol == "http" else "StatusCode.UNAVAILABLE",
        )
    ] * 3
    served = [r for r in results if isinstance(r, dict)]
    assert [r["NREQ"] for r in served] == [1, 1]


def test_priority_levels_apply(server: ServerProcess) -> None:
    # the first runs; two of level 2 and then one of level 1 queue; level 1 goes next
    calls = [
        call(server, "http", "levels"),
        call(server, "http", "levels"),
        call(server, "grpc", "levels"),
        call(server, "grpc", "levels", priority=1),
    ]
    first, low1, low2, high = _concurrent(calls, stagger_s=0.2)
    base = first["SEQNO"]
    assert high["SEQNO"] == base + 1
    assert sorted([low1["SEQNO"], low2["SEQNO"]]) == [base + 2, base + 3]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_queue_timeout_applies(server: ServerProcess, protocol: str) -> None:
    first, second = _concurrent([call(server, protocol, "timeout"), call(server, protocol, "timeout")], stagger_s=0.1)
    assert first["NREQ"] == 1
    assert isinstance(second, InferenceServerException)
    assert (second.message(), second.status()) == (
        "Request timeout expired",
        "503" if protocol == "http" else "StatusCode.UNAVAILABLE",
    )


def test_requests_are_not_batched_nor_delayed(server: ServerProcess) -> None:
    # a 30 s queue delay would hold a lone request if the model batched; each runs alone, at once
    results = _concurrent([call(server, "http", "delay") for _ in range(3)], stagger_s=0.05)
    assert [r["NREQ"] for r in results] == [1, 1, 1]
    assert sorted(r["SEQNO"] for r in results) == [1, 2, 3]
