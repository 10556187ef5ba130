"""L0_model_control: model control modes and the model repository extension over HTTP and gRPC.

Expected answers are real Triton 2.51's (explicit mode, python models), recorded with the same
requests: index entries and their order, states, empty 200 bodies for load/unload, 500
``failed to load 'm', failed to poll from model repository`` for a config that does not parse
(the same message for a model that is not there, but 400 / INVALID_ARGUMENT: docs/compatibility.md), 400 ``load failed for model ...`` for one that fails, 503 in modes
``none`` and ``poll``. Where tritium refuses what Triton accepts (names with ``..``, uploads
without the opt-in flag) the deviation is deliberate (docs/security.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import grpc_call, http_call
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess
from tritium.proto import grpc_service_pb2 as pb

BROKEN_PY = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom: deliberate failure in initialize")

    def execute(self, requests):
        return []
"""

BROKEN_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

IO4 = {
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
}


SLOW_PY = """
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep(3)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
"""


def build(repo: Path) -> None:
    add_model(repo, "m", identity_config(dims="[ 4 ]"), versions=(1, 2))
    add_model(repo, "slow", BROKEN_CONFIG, files={"1/model.py": SLOW_PY})
    add_model(repo, "other", identity_config(dims="[ 4 ]"))
    add_model(repo, "unload_me", identity_config(dims="[ 4 ]"))
    add_model(repo, "broken", BROKEN_CONFIG, files={"1/model.py": BROKEN_PY})


def post(server: ServerProcess, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    raw = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    status, _, reply = http_call(server, "POST", path, raw, headers)
    return status, (json.loads(reply) if reply else None)


rpc = grpc_call


def infer(server: ServerProcess, model: str, version: str = "") -> np.ndarray:
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(np.arange(4, dtype=np.float32).reshape(1, 4))
    return client.infer(model, [inp], model_version=version).as_numpy("OUTPUT0")


def wait_state(server: ServerProcess, name: str, state: str, timeout: float = 60) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        index = post(server, "/v2/repository/index")[1]
        if all(e.get("state") == state for e in index if e["name"] == name) or time.monotonic() > deadline:
            return [e for e in index if e["name"] == name]
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("explicit")
    build(root / "models")
    proc = ServerProcess(
        [root / "models"], ["--model-control-mode=explicit", "--load-model=m"], log_path=root / "server.log"
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


# -- explicit mode ------------------------------------------------------------------------------------
def test_explicit_mode_loads_only_the_startup_models(server: ServerProcess) -> None:
    status, index = post(server, "/v2/repository/index")
    assert status == 200
    assert [e for e in index if e["name"] != "m"] == [
        {"name": n, "state": "UNAVAILABLE", "reason": "not loaded"} for n in ("broken", "other", "slow", "unload_me")
    ]
    assert {"name": "m", "version": "2", "state": "READY"} in index
    assert post(server, "/v2/repository/index", {"ready": True})[1][0] == {
        "name": "m",
        "version": "2",
        "state": "READY",
    }
    assert infer(server, "m").tolist() == [[0, 1, 2, 3]]


def test_index_over_grpc(server: ServerProcess) -> None:
    code, response = rpc(server, "RepositoryIndex", pb.RepositoryIndexRequest(ready=True))
    assert code == grpc.StatusCode.OK
    assert pb.RepositoryIndexResponse.ModelIndex(name="m", version="2", state="READY") in response.models
    assert all(m.state == "READY" for m in response.models)
    code, response = rpc(server, "RepositoryIndex", pb.RepositoryIndexRequest())
    assert (
        pb.RepositoryIndexResponse.ModelIndex(name="broken", state="UNAVAILABLE", reason="not loaded")
        in response.models
    )


def test_index_bad_bodies(server: ServerProcess) -> None:
    assert post(server, "/v2/repository/index", b"{bad")[0] == 400  # Triton: 500
    assert post(server, "/v2/repository/index", {"ready": "yes"}) == (
        400,
        {"error": "attempt to access JSON non-boolean as boolean"},
    )
    status, _, body = http_call(server, "GET", "/v2/repository/index")
    assert (status, json.loads(body)) == (405, {"error": "Method Not Allowed"})


def test_load_and_unload_over_http(server: ServerProcess) -> None:
    assert post(server, "/v2/repository/models/other/load") == (200, None)
    assert wait_state(server, "other", "READY") == [{"name": "other", "version": "1", "state": "READY"}]
    assert infer(server, "other").tolist() == [[0, 1, 2, 3]]
    assert post(server, "/v2/repository/models/other/unload") == (200, None)
    assert wait_state(server, "other", "UNAVAILABLE") == [
        {"name": "other", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    ]
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'other' has no available versions"):
        infer(server, "other")
    # unloading what is not loaded, or not there at all, succeeds (as Triton)
    assert post(server, "/v2/repository/models/other/unload") == (200, None)
    assert post(server, "/v2/repository/models/nonexist/unload") == (200, None)


def test_unload_lets_requests_in_flight_finish(server: ServerProcess) -> None:
    import threading

    assert post(server, "/v2/repository/models/slow/load") == (200, None)
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.arange(4, dtype=np.float32))
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(client.infer("slow", [inp]).as_numpy("OUTPUT0").tolist()))
    worker.start()
    time.sleep(1)  # the request is executing (the model sleeps 3 s)
    assert post(server, "/v2/repository/models/slow/unload") == (200, None)
    states = [e for e in post(server, "/v2/repository/index")[1] if e["name"] == "slow"]
    assert states == [{"name": "slow", "version": "1", "state": "UNLOADING"}]  # as Triton reports it
    worker.join(60)
    assert result == [[0.0, 1.0, 2.0, 3.0]]
    assert wait_state(server, "slow", "UNAVAILABLE") == [
        {"name": "slow", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
    ]


def test_load_and_unload_over_grpc(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.load_model("unload_me")
    assert client.is_model_ready("unload_me")
    request = pb.RepositoryModelUnloadRequest(model_name="unload_me")
    request.parameters["unload_dependents"].bool_param = True
    assert rpc(server, "RepositoryModelUnload", request)[0] == grpc.StatusCode.OK
    assert wait_state(server, "unload_me", "UNAVAILABLE")[0]["reason"] == "unloaded"
    assert not client.is_model_ready("unload_me")
    assert rpc(server, "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="nonexist"))[0] == (
        grpc.StatusCode.OK
    )


def test_load_of_a_model_that_is_not_there(server: ServerProcess) -> None:
    # Triton 2.51's message; its 500 / INTERNAL is a client's mistake here: 400 / INVALID_ARGUMENT (issue 15)
    message = "failed to load 'nonexist', failed to poll from model repository"
    assert post(server, "/v2/repository/models/nonexist/load") == (400, {"error": message})
    assert rpc(server, "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="nonexist")) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
    )


def test_load_of_a_model_that_fails(server: ServerProcess) -> None:
    status, body = post(server, "/v2/repository/models/broken/load")
    assert status == 400
    assert body["error"].startswith("load failed for model 'broken': version 1 is at UNAVAILABLE state: Internal: ")
    assert "boom: deliberate failure in initialize" in body["error"] and body["error"].endswith(";\n")
    (entry,) = [e for e in post(server, "/v2/repository/index")[1] if e["name"] == "broken"]
    assert entry["state"] == "UNAVAILABLE" and "boom: deliberate failure in initialize" in entry["reason"]
    code, details = rpc(server, "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="broken"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details == body["error"]


def test_load_with_a_config_override(server: ServerProcess) -> None:
    config = {"backend": "identity", "max_batch_size": 8, "version_policy": {"all": {}}, **IO4}
    assert post(server, "/v2/repository/models/m/load", {"parameters": {"config": json.dumps(config)}}) == (200, None)
    assert [e for e in post(server, "/v2/repository/index")[1] if e["name"] == "m"] == [
        {"name": "m", "version": "1", "state": "READY"},
        {"name": "m", "version": "2", "state": "READY"},
    ]
    assert infer(server, "m", "1").tolist() == [[0, 1, 2, 3]]
    # back to config.pbtxt: version 1 is unloaded again
    assert post(server, "/v2/repository/models/m/load") == (200, None)
    assert wait_state(server, "m", "READY", timeout=0)[0] in (
        {"name": "m", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
    )


def test_load_with_a_bad_config_override_keeps_the_loaded_model(server: ServerProcess) -> None:
    message = "failed to load 'm', failed to poll from model repository"
    assert post(server, "/v2/repository/models/m/load", {"parameters": {"config": "{not json"}}) == (
        500,
        {"error": message},
    )
    other_name = json.dumps({"name": "other", "backend": "identity"})
    assert post(server, "/v2/repository/models/m/load", {"parameters": {"config": other_name}}) == (
        500,
        {"error": message},
    )
    assert post(server, "/v2/repository/models/m/load", {"parameters": {"config": 5}}) == (
        400,
        {"error": "attempt to access JSON non-string as string"},
    )
    assert post(server, "/v2/repository/models/m/load", {"parameters": {"foo": "bar"}}) == (
        400,
        {"error": "unexpected error on creating Triton parameter"},
    )
    request = pb.RepositoryModelLoadRequest(model_name="m")
    request.parameters["config"].string_param = "{bad"
    assert rpc(server, "RepositoryModelLoad", request) == (grpc.StatusCode.INTERNAL, message)
    # gRPC parameter errors: Triton's messages
    for key, kind, expected in (
        ("foo", "string_param", "unrecognized load parameter 'foo'."),
        ("config", "int64_param", "invalid value type for load parameter 'config', expected string_param."),
        (
            "file:1/model.py",
            "string_param",
            "invalid value type for load parameter 'file:1/model.py', expected bytes_param.",
        ),
    ):
        request = pb.RepositoryModelLoadRequest(model_name="m")
        setattr(request.parameters[key], kind, 5 if kind == "int64_param" else "x")
        assert rpc(server, "RepositoryModelLoad", request) == (grpc.StatusCode.INVALID_ARGUMENT, expected)
    request = pb.RepositoryModelUnloadRequest(model_name="nonexist")
    request.parameters["unload_dependents"].string_param = "x"
    assert rpc(server, "RepositoryModelUnload", request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value type for 'unload_dependents' parameter, expected bool_param.",
    )
    # HTTP: unload ignores parameters it does not understand, as Triton
    for body in ({"parameters": {"unload_dependents": "x"}}, {"parameters": {"foo": True}}, {"parameters": 5}, []):
        assert post(server, "/v2/repository/models/nonexist/unload", body) == (200, None)
    assert infer(server, "m").tolist() == [[0, 1, 2, 3]]  # the loaded version kept serving


def test_reload_that_fails_keeps_the_old_version(server: ServerProcess) -> None:
    config = {"backend": "no_such_backend", "max_batch_size": 8, **IO4}
    status, body = post(server, "/v2/repository/models/m/load", {"parameters": {"config": json.dumps(config)}})
    assert status == 400 and body["error"].startswith("load failed for model 'm': version 2 is at UNAVAILABLE state")
    assert {"name": "m", "version": "2", "state": "READY"} in post(server, "/v2/repository/index")[1]
    assert infer(server, "m").tolist() == [[0, 1, 2, 3]]


def test_load_url_method(server: ServerProcess) -> None:
    status, _, body = http_call(server, "GET", "/v2/repository/models/m/load")
    assert (status, json.loads(body)) == (405, {"error": "Method Not Allowed"})


# -- modes none and poll refuse load / unload ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["none", "poll"])
def test_load_and_unload_refused_outside_explicit_mode(tmp_path: Path, start_server: Any, mode: str) -> None:
    add_model(tmp_path / "repo", "m", identity_config(dims="[ 4 ]"))
    server = start_server([tmp_path / "repo"], [f"--model-control-mode={mode}", "--repository-poll-secs=0"])
    message = "explicit model load / unload is not allowed if polling is enabled"
    for action in ("load", "unload"):
        assert post(server, f"/v2/repository/models/m/{action}") == (503, {"error": message})
    assert rpc(server, "RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="m")) == (
        grpc.StatusCode.UNAVAILABLE,
        message,
    )
    assert rpc(server, "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="m")) == (
        grpc.StatusCode.UNAVAILABLE,
        message,
    )
    assert post(server, "/v2/repository/index")[1] == [{"name": "m", "version": "1", "state": "READY"}]


def test_load_model_star_loads_everything(tmp_path: Path, start_server: Any) -> None:
    add_model(tmp_path / "repo", "a", identity_config(dims="[ 4 ]"))
    add_model(tmp_path / "repo", "b", identity_config(dims="[ 4 ]"))
    server = start_server([tmp_path / "repo"], ["--model-control-mode=explicit", "--load-model=*"])
    assert post(server, "/v2/repository/index", {"ready": True})[1] == [
        {"name": "a", "version": "1", "state": "READY"},
        {"name": "b", "version": "1", "state": "READY"},
    ]


def test_startup_model_that_is_missing_fails_start_with_exit_on_error(tmp_path: Path, start_server: Any) -> None:
    add_model(tmp_path / "repo", "a", identity_config(dims="[ 4 ]"))
    server = start_server([tmp_path / "repo"], ["--model-control-mode=explicit", "--load-model=nope"], wait=False)
    assert server.wait_exit(120) == 1
    assert "failed to load all models" in server.log()
    server = start_server(
        [tmp_path / "repo"],
        ["--model-control-mode=explicit", "--load-model=nope", "--exit-on-error=false", "--strict-readiness=false"],
    )
    assert http_call(server, "GET", "/v2/health/ready")[0] == 200


def test_poll_mode_follows_the_repository(tmp_path: Path, start_server: Any) -> None:
    repo = tmp_path / "repo"
    add_model(repo, "a", identity_config(dims="[ 4 ]"))
    server = start_server([repo], ["--model-control-mode=poll", "--repository-poll-secs=1"])
    assert post(server, "/v2/repository/index")[1] == [{"name": "a", "version": "1", "state": "READY"}]
    add_model(repo, "b", identity_config(dims="[ 4 ]"))  # added model
    (repo / "a" / "2").mkdir()  # added version: the default policy serves the latest
    deadline = time.monotonic() + 60
    want = [
        {"name": "a", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
        {"name": "a", "version": "2", "state": "READY"},
        {"name": "b", "version": "1", "state": "READY"},
    ]
    while post(server, "/v2/repository/index")[1] != want and time.monotonic() < deadline:
        time.sleep(0.2)
    assert post(server, "/v2/repository/index")[1] == want
    assert infer(server, "b").tolist() == [[0, 1, 2, 3]]
    # a changed config.pbtxt: every version now
    (repo / "a" / "config.pbtxt").write_text(identity_config(dims="[ 4 ]", extra="version_policy: { all { } }"))
    want[0] = {"name": "a", "version": "1", "state": "READY"}
    while post(server, "/v2/repository/index")[1] != want:
        assert time.monotonic() < deadline + 30
        time.sleep(0.2)
    assert infer(server, "a", "1").tolist() == [[0, 1, 2, 3]]
    import shutil

    shutil.rmtree(repo / "b")  # removed model
    client = httpclient.InferenceServerClient(server.http_url)
    while client.is_model_ready("b"):
        assert time.monotonic() < deadline + 60
        time.sleep(0.2)
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'b'"):
        infer(server, "b")
    assert [e["name"] for e in post(server, "/v2/repository/index")[1]] == ["a", "a"]


def _ready(server: ServerProcess) -> int:
    return http_call(server, "GET", "/v2/health/ready")[0]


def test_a_failed_model_unloaded_or_removed_no_longer_holds_readiness(tmp_path: Path, start_server: Any) -> None:
    """A version that failed to load keeps the server not ready (strict readiness) until it is unloaded or removed."""
    repo = tmp_path / "repo"
    add_model(repo, "good", identity_config(dims="[ 4 ]"))
    add_model(repo, "broken", BROKEN_CONFIG, files={"1/model.py": BROKEN_PY})
    server = start_server([repo], ["--model-control-mode=explicit", "--load-model=good"])
    assert _ready(server) == 200
    assert post(server, "/v2/repository/models/broken/load")[0] == 400
    assert _ready(server) == 400
    assert post(server, "/v2/repository/models/broken/unload") == (200, None)
    (entry,) = [e for e in post(server, "/v2/repository/index")[1] if e["name"] == "broken"]
    assert (entry["state"], entry["reason"]) == ("UNAVAILABLE", "unloaded")
    assert _ready(server) == 200
    assert infer(server, "good").tolist() == [[0, 1, 2, 3]]


def test_poll_mode_a_failed_model_removed_no_longer_holds_readiness(tmp_path: Path, start_server: Any) -> None:
    import shutil

    repo = tmp_path / "repo"
    add_model(repo, "good", identity_config(dims="[ 4 ]"))
    server = start_server([repo], ["--model-control-mode=poll", "--repository-poll-secs=1"])
    assert _ready(server) == 200
    add_model(repo, "broken", BROKEN_CONFIG, files={"1/model.py": BROKEN_PY})
    deadline = time.monotonic() + 60
    while _ready(server) == 200:
        assert time.monotonic() < deadline, "the failed model never counted against readiness"
        time.sleep(0.2)
    shutil.rmtree(repo / "broken")
    while _ready(server) != 200:
        assert time.monotonic() < deadline + 30, "readiness stayed down after the failed model was removed"
        time.sleep(0.2)
    assert infer(server, "good").tolist() == [[0, 1, 2, 3]]


# -- what is not a model -------------------------------------------------------------------------------


def test_hidden_folders_and_pycache_are_not_models(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "m", identity_config(dims="[ 4 ]"))
    (repo / "__pycache__").mkdir()  # a client script beside the models was imported
    (repo / "__pycache__" / "client.cpython-311.pyc").write_bytes(b"\x00")
    (repo / ".ipynb_checkpoints").mkdir()
    # the default --exit-on-error=true: a folder taken for a broken model would stop the start-up
    with ServerProcess([repo], log_path=tmp_path / "server.log") as proc:
        status, _, body = http_call(proc, "POST", "/v2/repository/index", b"{}")
        assert (status, [entry["name"] for entry in json.loads(body)]) == (200, ["m"])
