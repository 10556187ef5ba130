"""Security of the model repository API: uploads, paths, names, restricted APIs, body sizes.

Each case is a black-box request against a running server; where a request is refused,
the test also checks that nothing was written outside the places the server owns and
that the server keeps serving.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.clients import grpc_call, http_call
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess
from tritium.proto import grpc_service_pb2 as pb

ECHO_PY = b"""
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
"""


def config(name: str, **extra: Any) -> str:
    return json.dumps(
        {
            "name": name,
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            **extra,
        }
    )


def load(
    server: ServerProcess, name: str, parameters: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    body = json.dumps({"parameters": parameters}).encode()
    status, _, reply = http_call(server, "POST", f"/v2/repository/models/{name}/load", body, headers)
    return status, (json.loads(reply) if reply else None)


rpc = grpc_call


def echo(server: ServerProcess, name: str) -> list[float]:
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.arange(4, dtype=np.float32))
    return client.infer(name, [inp]).as_numpy("OUTPUT0").tolist()


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("security")


def _server(sandbox: Path, tag: str, args: list[str]) -> Iterator[ServerProcess]:
    repo = sandbox / f"repo-{tag}"
    add_model(repo, "m", identity_config(dims="[ 4 ]", max_batch_size=0))
    proc = ServerProcess(
        [repo],
        [
            "--model-control-mode=explicit",
            "--load-model=m",
            f"--model-cache-directory={sandbox / f'cache-{tag}'}",
            *args,
        ],
        log_path=sandbox / f"server-{tag}.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def locked(sandbox: Path) -> Iterator[ServerProcess]:
    """A server without the upload opt-in."""
    yield from _server(sandbox, "locked", ["--max-request-bytes=65536"])


@pytest.fixture(scope="module")
def open_server(sandbox: Path) -> Iterator[ServerProcess]:
    """A server with ``--model-load-allow-file-override=true``."""
    yield from _server(sandbox, "open", ["--model-load-allow-file-override=true"])


# -- file: uploads ------------------------------------------------------------------------------------
def test_uploads_are_refused_without_the_opt_in_flag(locked: ServerProcess, sandbox: Path) -> None:
    before = tree(sandbox)
    params = {"config": config("up"), "file:1/model.py": base64.b64encode(ECHO_PY).decode()}
    message = (
        "failed to load 'up': loading model files sent in the request is disabled; "
        "start the server with --model-load-allow-file-override=true to allow it"
    )
    assert load(locked, "up", params) == (400, {"error": message})
    request = pb.RepositoryModelLoadRequest(model_name="up")
    request.parameters["config"].string_param = config("up")
    request.parameters["file:1/model.py"].bytes_param = ECHO_PY
    assert rpc(locked, "RepositoryModelLoad", request) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert tree(sandbox) - before <= {"server-locked.log"}


def test_uploads_load_with_the_opt_in_flag(open_server: ServerProcess) -> None:
    params = {"config": config("up"), "file:1/model.py": base64.b64encode(ECHO_PY).decode()}
    assert load(open_server, "up", params) == (200, None)
    assert echo(open_server, "up") == [0.0, 1.0, 2.0, 3.0]
    request = pb.RepositoryModelLoadRequest(model_name="up2")
    request.parameters["config"].string_param = config("up2")
    request.parameters["file:1/model.py"].bytes_param = ECHO_PY
    assert rpc(open_server, "RepositoryModelLoad", request)[0] == grpc.StatusCode.OK
    assert echo(open_server, "up2") == [0.0, 1.0, 2.0, 3.0]
    # the tritonclient calls the docs show
    httpclient.InferenceServerClient(open_server.http_url).load_model(
        "up3", config=config("up3"), files={"file:1/model.py": ECHO_PY}
    )
    assert echo(open_server, "up3") == [0.0, 1.0, 2.0, 3.0]
    import tritonclient.grpc as grpcclient

    grpcclient.InferenceServerClient(open_server.grpc_url).load_model(
        "up4", config=config("up4"), files={"file:1/model.py": ECHO_PY}
    )
    assert echo(open_server, "up4") == [0.0, 1.0, 2.0, 3.0]
    # as in Triton: models that exist only in a request are not in the index
    status, _, body = http_call(open_server, "POST", "/v2/repository/index")
    assert [e["name"] for e in json.loads(body)] == ["m"]


def test_uploads_need_a_config(open_server: ServerProcess) -> None:
    assert load(open_server, "noconf", {"file:1/model.py": base64.b64encode(ECHO_PY).decode()}) == (
        500,
        {"error": "failed to load 'noconf', failed to poll from model repository"},  # Triton's answer
    )


@pytest.mark.parametrize(
    "path",
    ["../../escape.py", "1/../../escape.py", "/tmp/escape-abs.py", "1/./model.py", "", "1//model.py", "1\\..\\x.py"],
)
def test_upload_paths_that_leave_the_model_folder_are_refused(
    open_server: ServerProcess, sandbox: Path, path: str
) -> None:
    before = tree(sandbox)
    params = {"config": config("evil"), f"file:{path}": base64.b64encode(b"print('pwned')").decode()}
    status, body = load(open_server, "evil", params)
    assert status == 400
    assert body["error"].startswith(f"invalid file override path 'file:{path}'")
    assert tree(sandbox) - before <= {"server-open.log"}
    assert not Path("/tmp/escape-abs.py").exists()
    request = pb.RepositoryModelLoadRequest(model_name="evil")
    request.parameters["config"].string_param = config("evil")
    request.parameters[f"file:{path}"].bytes_param = b"x"
    assert rpc(open_server, "RepositoryModelLoad", request) == (grpc.StatusCode.INVALID_ARGUMENT, body["error"])
    assert echo(open_server, "m") == [0.0, 1.0, 2.0, 3.0]  # the server keeps serving


def test_upload_with_bad_base64_is_refused(open_server: ServerProcess) -> None:
    params = {"config": config("b64"), "file:1/model.py": "!!!notbase64"}
    assert load(open_server, "b64", params) == (
        400,
        {"error": "failed to decode the base64 contents of 'file:1/model.py'"},
    )


def test_symlinked_model_files_cannot_lead_out(open_server: ServerProcess, sandbox: Path) -> None:
    # a repository model whose default_model_filename is a symlink to a file outside the model folder
    repo = Path(open_server.repositories[0])
    outside = sandbox / "outside.py"
    outside.write_bytes(ECHO_PY)
    model = repo / "linked"
    (model / "1").mkdir(parents=True)
    os.symlink(outside, model / "1" / "model.py")
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    status, body = load(open_server, "linked", {})
    assert status == 400 and "leaves the directory it must stay in" in body["error"]


# -- config overrides cannot point outside the model folder ----------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("default_model_filename", "../../../etc/passwd"),
        ("default_model_filename", "/etc/passwd"),
        ("runtime", "../../evil.py"),
        ("runtime", "/usr/lib/evil.so"),
    ],
)
def test_config_paths_outside_the_model_folder_are_refused(locked: ServerProcess, field: str, value: str) -> None:
    override = json.loads(config("m"))
    override.update({"backend": "identity", field: value})
    status, body = load(locked, "m", {"config": json.dumps(override)})
    assert (status, body) == (
        400,
        {
            "error": f"load failed for model 'm': invalid {field} '{value}': it must be a file name inside the model folder"
        },
    )
    assert echo(locked, "m") == [0.0, 1.0, 2.0, 3.0]


# -- model names ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url_name", ["..", "..%2F..%2Ftmp", "a%2Fb", "%2E%2E", "a%5Cb"])
def test_model_names_with_separators_or_dotdot_are_refused(locked: ServerProcess, url_name: str) -> None:
    for action in ("load", "unload"):
        status, _, body = http_call(locked, "POST", f"/v2/repository/models/{url_name}/{action}")
        if status == 404:  # the URL itself did not match (normalized away by the HTTP layer): also refused
            assert json.loads(body) == {"error": "Not Found"}
            continue
        assert status == 400 and json.loads(body)["error"].startswith("invalid model name")


@pytest.mark.parametrize(("url_name", "name"), [("..%2Fm", "../m"), ("%2E%2E%2F..%2Fm", "../../m"), ("a%2Fb", "a/b")])
def test_names_with_separators_in_other_urls_name_no_model(locked: ServerProcess, url_name: str, name: str) -> None:
    # lookups only: a name with a separator is no model's name (Triton's answers); nothing is resolved on disk
    unknown = {"error": f"Request for unknown model: '{name}' is not found"}
    for path in (f"/v2/models/{url_name}", f"/v2/models/{url_name}/config"):
        status, _, body = http_call(locked, "GET", path)
        assert (status, json.loads(body)) == (404, unknown)
    status, _, body = http_call(locked, "GET", f"/v2/models/{url_name}/ready")
    assert (status, json.loads(body)) == (400, {"error": "Model version not ready"})


@pytest.mark.parametrize("name", ["..", ".", "../m", "a/b", "a\\b", ""])
def test_model_names_refused_over_grpc(locked: ServerProcess, name: str) -> None:
    for rpc_name, message in (
        ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name=name)),
        ("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name=name)),
    ):
        code, details = rpc(locked, rpc_name, message)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(f"invalid model name '{name}'")


def test_config_name_with_separators_is_refused(locked: ServerProcess) -> None:
    override = json.loads(config("../m"))
    override["backend"] = "identity"
    status, body = load(locked, "m", {"config": json.dumps(override)})
    assert (status, body) == (500, {"error": "failed to load 'm', failed to poll from model repository"})


def test_ensemble_step_model_name_with_separators_is_refused(locked: ServerProcess) -> None:
    override = {
        "platform": "ensemble",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]}],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "../m",
                    "model_version": -1,
                    "input_map": {"INPUT0": "IN"},
                    "output_map": {"OUTPUT0": "OUT"},
                }
            ]
        },
    }
    status, body = load(locked, "m", {"config": json.dumps(override)})
    assert (status, body) == (
        400,
        {
            "error": "load failed for model 'm': invalid ensemble step model_name '../m': "
            "a model name cannot be empty, '.', '..' or contain '/', '\\' or NUL"
        },
    )
    assert echo(locked, "m") == [0.0, 1.0, 2.0, 3.0]


# -- request sizes ------------------------------------------------------------------------------------------
def test_repository_bodies_over_the_limit_are_refused_early(locked: ServerProcess) -> None:
    import socket

    # declare a huge body and send only the headers: the answer comes before any body byte
    with socket.create_connection(("127.0.0.1", locked.http_port), timeout=30) as sock:
        sock.sendall(
            b"POST /v2/repository/models/m/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000000\r\n\r\n"
        )
        reply = sock.recv(65536).decode()
    assert reply.startswith("HTTP/1.1 413")
    assert '{"error":"request body of 10000000000 bytes exceeds the maximum request size of 65536 bytes"}' in reply
    status, _, body = http_call(locked, "POST", "/v2/repository/index", b"{" + b" " * 70000 + b"}")
    assert (status, json.loads(body)) == (
        413,
        {"error": "request body of 70002 bytes exceeds the maximum request size of 65536 bytes"},
    )
    assert echo(locked, "m") == [0.0, 1.0, 2.0, 3.0]


# -- restricted APIs ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def restricted(sandbox: Path) -> Iterator[ServerProcess]:
    groups = "model-repository,shared-memory,statistics,trace,logging"
    yield from _server(
        sandbox,
        "restricted",
        [f"--http-restricted-api={groups}:Admin-Key=secret", f"--grpc-restricted-protocol={groups}:admin-key=secret"],
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/repository/index"),
        ("POST", "/v2/repository/models/m/load"),
        ("POST", "/v2/repository/models/nope/unload"),
        ("GET", "/v2/models/stats"),
        ("GET", "/v2/models/m/stats"),
        ("GET", "/v2/systemsharedmemory/status"),
        ("GET", "/v2/cudasharedmemory/status"),
        ("GET", "/v2/logging"),
        ("GET", "/v2/trace/setting"),
        ("GET", "/v2/models/m/trace/setting"),
    ],
)
def test_restricted_http_apis_need_the_header(restricted: ServerProcess, method: str, path: str) -> None:
    # Triton 2.51: the header matches in any case; the message names it as configured
    expected = (403, "text/plain", b'{"error":"This API is restricted, expecting header \'Admin-Key\'"}')
    for headers in ({}, {"admin-key": "wrong"}):
        status, reply_headers, body = http_call(restricted, method, path, None, headers)
        assert (status, reply_headers["content-type"].split(";")[0], body) == expected
    status, _, _ = http_call(restricted, method, path, None, {"admin-key": "secret"})
    assert status != 403


def test_unrestricted_http_apis_stay_open(restricted: ServerProcess) -> None:
    assert http_call(restricted, "GET", "/v2/health/ready")[0] == 200
    assert http_call(restricted, "GET", "/v2/models/m")[0] == 200
    assert echo(restricted, "m") == [0.0, 1.0, 2.0, 3.0]
    status, _, body = http_call(restricted, "POST", "/v2/repository/index", None, {"Admin-Key": "secret"})
    assert (status, json.loads(body)) == (200, [{"name": "m", "version": "1", "state": "READY"}])


@pytest.mark.parametrize(
    ("rpc_name", "request_message"),
    [
        ("RepositoryIndex", pb.RepositoryIndexRequest()),
        ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="m")),
        ("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="nope")),
        ("ModelStatistics", pb.ModelStatisticsRequest()),
        ("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest()),
        ("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest()),
        ("TraceSetting", pb.TraceSettingRequest()),
        ("LogSettings", pb.LogSettingsRequest()),
    ],
)
def test_restricted_grpc_protocols_need_the_header(
    restricted: ServerProcess, rpc_name: str, request_message: Any
) -> None:
    expected = (
        grpc.StatusCode.UNAVAILABLE,
        "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'",
    )
    assert rpc(restricted, rpc_name, request_message) == expected
    assert (
        rpc(restricted, rpc_name, request_message, [("admin-key", "secret")]) == expected
    )  # Triton's prefix is needed
    assert rpc(restricted, rpc_name, request_message, [("triton-grpc-protocol-admin-key", "bad")]) == expected
    code, _ = rpc(restricted, rpc_name, request_message, [("triton-grpc-protocol-admin-key", "secret")])
    assert code != grpc.StatusCode.UNAVAILABLE


def test_unrestricted_grpc_protocols_stay_open(restricted: ServerProcess) -> None:
    assert rpc(restricted, "ServerReady", pb.ServerReadyRequest())[1].ready
    assert rpc(restricted, "ModelMetadata", pb.ModelMetadataRequest(name="m"))[0] == grpc.StatusCode.OK


def test_restricted_api_flag_errors() -> None:
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tritium", "--model-repository=x", *args], capture_output=True, text=True, timeout=60
        )

    result = run("--http-restricted-api=model-repository")
    assert result.returncode == 2 and "restricted api option format is" in result.stderr
    result = run("--http-restricted-api=bogus:k=v")
    assert result.returncode == 2 and "unknown restricted api 'bogus'" in result.stderr
    result = run("--grpc-restricted-protocol=logging:a=b", "--grpc-restricted-protocol=logging:c=d")
    assert result.returncode == 2 and "api 'logging' can only be restricted once" in result.stderr


def test_restricted_shared_memory_registers_only_with_the_header(restricted: ServerProcess) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import InferenceServerException

    key = f"/tritium_test_restricted_{os.getpid()}"
    handle = shm.create_shared_memory_region("r", key, 64)
    http = httpclient.InferenceServerClient(restricted.http_url)
    try:
        with pytest.raises(InferenceServerException, match="This API is restricted, expecting header 'Admin-Key'"):
            http.register_system_shared_memory("r", key, 64)
        http.register_system_shared_memory("r", key, 64, headers={"Admin-Key": "secret"})
        assert http.get_system_shared_memory_status(headers={"admin-key": "secret"}) == [
            {"name": "r", "key": key, "offset": 0, "byte_size": 64}
        ]
        http.unregister_system_shared_memory("r", headers={"Admin-Key": "secret"})
        client = grpcclient.InferenceServerClient(restricted.grpc_url)
        with pytest.raises(InferenceServerException, match="This protocol is restricted"):
            client.register_system_shared_memory("g", key, 64)
        header = {"triton-grpc-protocol-admin-key": "secret"}
        client.register_system_shared_memory("g", key, 64, headers=header)
        status = client.get_system_shared_memory_status(headers=header)
        assert [(r.name, r.key, r.byte_size) for r in status.regions.values()] == [("g", key, 64)]
        client.unregister_system_shared_memory(headers=header)
    finally:
        http.close()  # its kept-alive connection
        shm.destroy_shared_memory_region(handle)
