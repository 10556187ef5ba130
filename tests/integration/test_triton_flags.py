"""tritonserver's --id, --model-load-retry-count, --model-config-name and no-op flag values, black-box.

With ``--id triton`` the server names itself ``triton`` in server metadata over HTTP and gRPC,
which NVIDIA's ``simple_http_health_metadata.py`` / ``simple_grpc_health_metadata.py`` check
(this test makes the same calls; the scripts themselves pass against such a server);
``--model-load-retry-count`` tries a failed load again (Triton's ``load_retry``);
``--model-config-name`` picks ``configs/<name>.pbtxt`` where it exists, else ``config.pbtxt``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import http_call, module_server, wait_grpc_ready
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

#: fails its first ``FAILURES`` loads (counted in a file of its model folder), then loads
FLAKY = """
import os

import triton_python_backend_utils as pb_utils

FAILURES = {failures}


class TritonPythonModel:
    def initialize(self, args):
        marker = os.path.join(args["model_repository"], "tries")
        tries = int(open(marker).read()) if os.path.exists(marker) else 0
        with open(marker, "w") as f:
            f.write(str(tries + 1))
        if tries < FAILURES:
            raise pb_utils.TritonModelException(f"failing try {{tries + 1}}")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""
PYTHON = """
backend: "python"
max_batch_size: 0
input [ { name: "I" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "O" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "simple", identity_config("TYPE_INT32", "[ 16 ]", max_batch_size=8))
        alt = add_model(repo, "alt", identity_config("TYPE_FP32", "[ 4 ]", max_batch_size=8))
        (alt / "configs").mkdir()
        (alt / "configs" / "h100.pbtxt").write_text(identity_config("TYPE_FP32", "[ 4 ]", max_batch_size=2))
        (alt / "configs" / "a100.pbtxt").write_text(identity_config("TYPE_FP32", "[ 4 ]", max_batch_size=3))
        add_model(repo, "flaky", PYTHON, files={"1/model.py": FLAKY.format(failures=2)})
        add_model(repo, "broken", PYTHON, files={"1/model.py": FLAKY.format(failures=5)})

    args = [
        "--id=triton",
        "--model-load-retry-count=2",
        "--model-config-name=h100",
        "--pinned-memory-pool-byte-size=0",
        "--cuda-memory-pool-byte-size=0:0",
        "--exit-on-error=false",
        "--strict-readiness=false",
    ]
    yield from module_server(tmp_path_factory.mktemp("triton_flags"), build, args)


def test_id_names_the_server_over_http_and_grpc(server: ServerProcess) -> None:
    # the calls of NVIDIA's simple_http_health_metadata.py and simple_grpc_health_metadata.py
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.is_server_live(query_params={"test_1": 1, "test_2": 2})
    assert http.is_server_ready() and http.is_model_ready("simple")
    assert http.get_server_metadata()["name"] == "triton"
    assert http.get_model_metadata("simple", query_params={"test_1": 1, "test_2": 2})["name"] == "simple"
    with pytest.raises(InferenceServerException, match="Request for unknown model"):
        http.get_model_metadata("wrong_model_name")
    wait_grpc_ready(server)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    assert grpc.is_server_live() and grpc.is_server_ready() and grpc.is_model_ready("simple")
    assert grpc.get_server_metadata().name == "triton"
    assert grpc.get_model_metadata("simple").name == "simple"
    with pytest.raises(InferenceServerException, match="Request for unknown model"):
        grpc.get_model_metadata("wrong_model_name")
    assert re.search(r"^\| server_id +\| triton +\|$", server.log(), re.M)


def test_a_failed_load_is_tried_again(server: ServerProcess) -> None:
    folder = Path(server.repositories[0])
    assert http_call(server, "GET", "/v2/models/flaky/ready")[0] == 200
    assert (folder / "flaky" / "tries").read_text() == "3"  # two failures, then the third try loaded
    log = server.log()
    for attempt in (1, 2):
        assert (
            f"failed to load 'flaky' version 1, trying again (try {attempt} of 3 failed): TritonModelException: "
            f"failing try {attempt}\n" in log
        )
    # one that fails every try is tried three times, then reported failed with the last reason
    assert http_call(server, "GET", "/v2/models/broken/ready")[0] == 400
    assert (folder / "broken" / "tries").read_text() == "3"
    assert re.search(r"failed to load 'broken' version 1: .*failing try 3", log)


def test_model_config_name_picks_the_custom_config(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    assert http.get_model_config("alt")["max_batch_size"] == 2  # configs/h100.pbtxt
    assert http.get_model_config("simple")["max_batch_size"] == 8  # no configs/: config.pbtxt


def test_no_op_values_are_logged(server: ServerProcess) -> None:
    log = server.log()
    assert (
        "--pinned-memory-pool-byte-size=0 accepted: tritium does not have a pinned host-memory pool, and this value "
        "asks for none" in log
    )
    assert "--cuda-memory-pool-byte-size=0:0 accepted: tritium does not have a CUDA memory pool" in log
