"""Python models under stress: a stub killed or hung mid-request, and a 256 MiB tensor."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.procs import shm_entries, worker_pids
from tests.support.repo import add_model
from tests.support.server import ServerProcess

SLEEPY = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = float(pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()[0])
            time.sleep(seconds)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SLEPT", np.array([seconds], np.float32))]))
        return responses
"""
SLEEPY_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "SECONDS" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SLEPT" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "execute_timeout_seconds" value: { string_value: "%s" } }
"""
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
"""
IDENTITY_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "sleepy", SLEEPY_CONFIG % "60", files={"1/model.py": SLEEPY})
        add_model(repo, "hangs", SLEEPY_CONFIG % "1", files={"1/model.py": SLEEPY})
        add_model(repo, "identity", IDENTITY_CONFIG, files={"1/model.py": IDENTITY})

    yield from module_server(tmp_path_factory.mktemp("python_robustness"), build, [])


def seconds(value: float) -> list[httpclient.InferInput]:
    tensor = httpclient.InferInput("SECONDS", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], np.float32))
    return [tensor]


def wait_ready(client: httpclient.InferenceServerClient, model: str) -> None:
    deadline = time.monotonic() + 60
    while not client.is_model_ready(model) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.is_model_ready(model)


def stub_of(server: ServerProcess, model_dir_name: str) -> int:
    """The worker process serving a model (a child of the server, found by its working directory)."""
    assert server.proc is not None
    for pid in worker_pids(server.proc.pid):
        if os.readlink(f"/proc/{pid}/cwd").endswith(f"/{model_dir_name}"):
            return pid
    raise AssertionError(f"no worker for {model_dir_name}")


def test_a_killed_stub_fails_its_request_and_comes_back(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    assert client.infer("sleepy", seconds(0)).as_numpy("SLEPT").tolist() == [0.0]
    stub = stub_of(server, "sleepy")
    failures: list[BaseException] = []

    def call() -> None:
        try:
            httpclient.InferenceServerClient(server.http_url, network_timeout=60).infer("sleepy", seconds(30))
        except BaseException as exc:  # noqa: BLE001 - checked below
            failures.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(1.0)
    os.kill(stub, signal.SIGKILL)  # a worker of the server this module started
    thread.join(60)
    assert [str(f) for f in failures] == [
        "[500] model instance 'sleepy_0': worker process was killed by signal SIGKILL"
    ]
    wait_ready(client, "sleepy")
    assert client.infer("sleepy", seconds(0.01)).as_numpy("SLEPT").tolist() == [pytest.approx(0.01)]
    assert stub_of(server, "sleepy") != stub


def test_a_stub_over_its_execute_timeout_is_killed_and_restarted(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    started = time.monotonic()
    with pytest.raises(InferenceServerException) as info:
        client.infer("hangs", seconds(30))
    assert time.monotonic() - started < 20
    assert str(info.value) == (
        "[500] model instance 'hangs_0': worker process did not finish executing within the execute timeout "
        "of 1 s and was killed"
    )
    wait_ready(client, "hangs")
    assert client.infer("hangs", seconds(0)).as_numpy("SLEPT").tolist() == [0.0]


def test_a_256_mib_tensor_round_trips_with_default_settings(server: ServerProcess) -> None:
    before = shm_entries(client_regions=False)
    size = 256 * 1024 * 1024
    data = np.random.default_rng(7).integers(0, 255, size, dtype=np.uint8)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=300, connection_timeout=300)
    tensor = httpclient.InferInput("INPUT0", [size], "UINT8")
    tensor.set_data_from_numpy(data, binary_data=True)
    result = client.infer("identity", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    assert np.array_equal(result.as_numpy("OUTPUT0"), data)
    del result, tensor
    assert shm_entries(client_regions=False) == before  # tritium's arenas never have a name in /dev/shm
