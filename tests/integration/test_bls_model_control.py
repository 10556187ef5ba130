"""BLS model control: ``pb_utils.load_model``, ``unload_model`` and ``is_model_ready`` from python models.

Black-box: tritium-server subprocesses in explicit model control mode (and one in mode
``none``), a python model ``ctl`` that runs the call its request names and answers
``ok:<result>`` or ``err:<exception type>:<message>``, driven over HTTP and gRPC. Results and
messages are Triton 2.51's on the same model code (observed on the real server), except that
uploads need ``--model-load-allow-file-override`` as on the repository API (Triton has no
such opt-in) and a malformed version is an exception (Triton's stub crashes).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

CTL = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "cmd" data_type: TYPE_STRING dims: [ 1 ] } ]
    output [ { name: "out" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

CTL_MODEL = """
    import base64, json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                cmd = json.loads(pb_utils.get_input_tensor_by_name(r, "cmd").as_numpy()[0])
                try:
                    op = cmd.pop("op")
                    if "files" in cmd:
                        cmd["files"] = {k: base64.b64decode(v) for k, v in cmd["files"].items()}
                    res = getattr(pb_utils, op)(*cmd.pop("args", []), **cmd)
                    text = "ok:" + repr(res)
                except Exception as e:
                    text = "err:" + type(e).__name__ + ":" + str(e)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("out", np.array([text.encode()], dtype=object))]))
            return out
"""

TARGET = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

TARGET_MODEL = """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() + 1)])
                    for r in requests]
"""

UPLOADED_CONFIG = json.dumps(
    {
        "name": "uploaded",
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}],
    }
)


def _source() -> str:
    import textwrap

    return base64.b64encode(textwrap.dedent(TARGET_MODEL).encode()).decode()


def _repository(repo: Path) -> None:
    add_model(repo, "ctl", CTL, files={"1/model.py": CTL_MODEL})
    add_model(repo, "target", TARGET, files={"1/model.py": TARGET_MODEL})


def _server(root: Path, args: list[str]) -> Iterator[ServerProcess]:
    return module_server(root, _repository, args + ["--allow-metrics=false"])


@pytest.fixture(scope="module")
def explicit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _server(tmp_path_factory.mktemp("bls_control"), ["--model-control-mode=explicit", "--load-model=ctl"])


def ctl(server: ServerProcess, transport: str = "http", **command: Any) -> str:
    """Run one pb_utils call inside the ``ctl`` model; its ``ok:...`` / ``err:...`` answer."""
    data = np.array([json.dumps(command).encode()], dtype=object)
    if transport == "http":
        client: Any = httpclient.InferenceServerClient(server.http_url)
        inp = httpclient.InferInput("cmd", [1], "BYTES")
    else:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        inp = grpcclient.InferInput("cmd", [1], "BYTES")
    inp.set_data_from_numpy(data)
    try:
        return client.infer("ctl", [inp]).as_numpy("out")[0].decode()
    finally:
        client.close()


def _failed(what: str, message: str) -> str:
    return f"err:TritonModelException:Failed to {what} model: Failed to process the request for model 'ctl_0', message: {message}"


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_load_ready_unload(explicit: ServerProcess, transport: str) -> None:
    assert ctl(explicit, transport, op="is_model_ready", args=["target"]) == "ok:False"
    assert ctl(explicit, transport, op="load_model", args=["target"]) == "ok:None"
    assert ctl(explicit, transport, op="is_model_ready", args=["target"]) == "ok:True"
    assert ctl(explicit, transport, op="is_model_ready", model_name="target", model_version="1") == "ok:True"
    assert ctl(explicit, transport, op="is_model_ready", args=["target", "2"]) == "ok:False"
    status, _, body = http_call(
        explicit,
        "POST",
        "/v2/models/target/infer",
        json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.5]}]}).encode(),
    )
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == [2.5]
    assert ctl(explicit, transport, op="unload_model", args=["target"]) == "ok:None"
    assert ctl(explicit, transport, op="is_model_ready", args=["target"]) == "ok:False"
    status, _, body = http_call(explicit, "POST", "/v2/repository/index", b"{}")
    states = {e["name"]: e.get("state") for e in json.loads(body)}
    assert states["ctl"] == "READY" and states["target"] in ("UNLOADING", "UNAVAILABLE")  # as in Triton


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        (
            {"op": "load_model", "args": ["nope"]},
            _failed("load", "failed to load 'nope', failed to poll from model repository"),
        ),
        (
            {"op": "load_model", "model_name": "target", "config": "{bad"},
            _failed("load", "failed to load 'target', failed to poll from model repository"),
        ),
        (
            {"op": "load_model", "args": [""]},
            _failed(
                "load", "invalid model name '': a model name cannot be empty, '.', '..' or contain '/', '\\' or NUL"
            ),
        ),
        (
            {
                "op": "load_model",
                "model_name": "uploaded",
                "config": UPLOADED_CONFIG,
                "files": {"file:1/model.py": _source()},
            },
            _failed(
                "load",
                "failed to load 'uploaded': loading model files sent in the request is disabled; start the server "
                "with --model-load-allow-file-override=true to allow it",
            ),
        ),
        ({"op": "unload_model", "args": ["nope"]}, "ok:None"),  # not loaded: no error, as in Triton
        ({"op": "is_model_ready", "args": ["nope"]}, "ok:False"),
        (
            {"op": "is_model_ready", "args": ["target", "x"]},
            "err:TritonModelException:is_model_ready(): model_version must be a version number or '', got 'x'",
        ),
        (
            {"op": "load_model", "args": [5]},
            "err:TypeError:load_model(): incompatible function arguments. The following "
            "argument types are supported:\n    1. (model_name: str, config: str = '', files: object = None) -> None",
        ),
        (
            {"op": "is_model_ready", "args": [5]},
            "err:TypeError:is_model_ready(): incompatible function arguments. The "
            "following argument types are supported:\n    1. (model_name: str, model_version: str = '') -> bool",
        ),
        (
            {"op": "unload_model", "args": [5]},
            "err:TypeError:unload_model(): incompatible function arguments. The "
            "following argument types are supported:\n    1. (model_name: str, unload_dependents: bool = False) -> None",
        ),
    ],
)
def test_errors(explicit: ServerProcess, command: dict[str, Any], answer: str) -> None:
    assert ctl(explicit, **command) == answer


def test_upload_with_the_operators_consent(tmp_path: Path) -> None:
    for server in _server(
        tmp_path, ["--model-control-mode=explicit", "--load-model=ctl", "--model-load-allow-file-override=true"]
    ):
        files = {"file:1/model.py": _source()}
        assert ctl(server, op="load_model", model_name="uploaded", config=UPLOADED_CONFIG, files=files) == "ok:None"
        assert ctl(server, "grpc", op="is_model_ready", args=["uploaded"]) == "ok:True"
        status, _, body = http_call(
            server,
            "POST",
            "/v2/models/uploaded/infer",
            json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}).encode(),
        )
        assert status == 200 and json.loads(body)["outputs"][0]["data"] == [2.0]
        # files need a config, and keys of the form file:<path>
        assert ctl(server, op="load_model", model_name="again", files=files) == _failed(
            "load", "failed to load 'again', failed to poll from model repository"
        )
        assert ctl(
            server, op="load_model", model_name="again", config=UPLOADED_CONFIG, files={"1/model.py": _source()}
        ) == _failed("load", "load_model(): files key '1/model.py' must be 'file:<path>'")


def test_refused_outside_explicit_mode(tmp_path: Path) -> None:
    for server in _server(tmp_path, []):
        refused = "explicit model load / unload is not allowed if polling is enabled"
        assert ctl(server, op="load_model", args=["target"]) == _failed("load", refused)
        assert ctl(server, "grpc", op="unload_model", args=["target"]) == _failed("unload", refused)
        assert ctl(server, op="is_model_ready", args=["target"]) == "ok:True"
