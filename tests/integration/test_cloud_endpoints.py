"""The SageMaker and Vertex AI endpoints (frontends/sagemaker, frontends/vertex_ai), black-box.

One tritium-server for the module serves both, beside the KServe HTTP endpoint, in explicit
model-control mode with the ``identity`` model loaded: the requests are what AWS's and Google's
clients send (boto3's ``invoke_endpoint`` POSTs the body to ``/invocations`` with its
``Content-Type``, and SageMaker's platform calls the multi-model ``/models`` routes with
``X-Amzn-SageMaker-Target-Model``; Vertex AI's ``rawPredict`` POSTs the body to
``AIP_PREDICT_ROUTE``), sent as plain HTTP to see every status, header and body. Answers are
compared with what the KServe endpoint answers for the same request. More servers check the
start-up rules: readiness, the default model, the required routes, port checks and refused flags.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import http_call
from tests.support.ensembles import add_ensemble, step
from tests.support.repo import add_model, identity_config
from tests.support.server import REPO_ROOT, ServerProcess, free_port

IDENTITY = """
    backend: "identity"
    max_batch_size: 0
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
SAGEMAKER_MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VERTEX_MIME = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
PREDICT = "/v1/endpoints/123/deployedModels/456:predict"
HEALTH = "/v1/endpoints/123/deployedModels/456"
TARGET = "X-Amzn-SageMaker-Target-Model"
LIMIT = 4096  # the module server's --max-request-bytes
REDIRECT = "X-Vertex-Ai-Triton-Redirect"

JSON_REQUEST = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
JSON_ANSWER = {
    "model_name": "identity",
    "model_version": "1",
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4], "data": [1.0, 2.0, 3.0, 4.0]}],
}
BINARY_HEADER = json.dumps(
    {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }
).encode()
VALUES = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
BINARY_ANSWER_HEADER = (
    b'{"model_name":"identity","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32",'
    b'"shape":[4],"parameters":{"binary_data_size":16}}]}'
)


def call(
    port: int, method: str, path: str, body: bytes | dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request (a dict body is sent as JSON): (status, headers by lower-case name, body)."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
    return http_call(port, method, path, body, headers)


def cloud_args(sagemaker: int | None, vertex: int | None) -> list[str]:
    args = []
    if sagemaker is not None:
        args += ["--allow-sagemaker=true", f"--sagemaker-port={sagemaker}", "--sagemaker-address=127.0.0.1"]
    if vertex is not None:
        args += ["--allow-vertex-ai=true", f"--vertex-ai-port={vertex}", "--vertex-ai-address=127.0.0.1"]
    return args


class Cloud:
    """The module's server: its KServe, SageMaker and Vertex AI ports and the multi-model root."""

    def __init__(self, server: ServerProcess, sagemaker: int, vertex: int, root: Path) -> None:
        self.server, self.sagemaker, self.vertex, self.root = server, sagemaker, vertex, root

    def kserve(
        self, method: str, path: str, body: Any = None, headers: Any = None
    ) -> tuple[int, dict[str, str], bytes]:
        return call(self.server.http_port, method, path, body, headers)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    tmp = tmp_path_factory.mktemp("cloud")
    repo = tmp / "repo"
    add_model(repo, "identity", IDENTITY)
    root = tmp / "opt-ml-models"  # SageMaker's /opt/ml/models: the multi-model endpoint loads from here
    plugins = tmp / "plugins.toml"
    text = (REPO_ROOT / "plugins.toml").read_text()
    assert "[frontends.sagemaker]\n" in text
    plugins.write_text(text.replace("[frontends.sagemaker]\n", f'[frontends.sagemaker]\nmulti_model_root = "{root}"\n'))
    sagemaker, vertex = free_port(), free_port()
    env = {"TRITIUM_PLUGINS": str(plugins), "AIP_PREDICT_ROUTE": PREDICT, "AIP_HEALTH_ROUTE": HEALTH}
    args = ["--model-control-mode=explicit", "--load-model=identity", f"--max-request-bytes={LIMIT}"]
    args += cloud_args(sagemaker, vertex)
    with ServerProcess([repo], args, env=env) as server:
        wait_listening(server, sagemaker, vertex)
        yield Cloud(server, sagemaker, vertex, root)


def wait_listening(server: ServerProcess, *ports: int) -> None:
    """Wait until ``ports`` accept connections: the endpoints start one after another, so the HTTP
    endpoint (what ServerProcess waits for) may answer first."""
    deadline = time.monotonic() + 60
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, server.log()
                time.sleep(0.1)


def mme_model(root: Path, name: str, nested: bool = False) -> Path:
    """A multi-model archive as SageMaker unpacks it: ``<root>/<hash>/model`` holding the model itself
    (``config.pbtxt`` at the top) or, ``nested``, one model folder."""
    url = root / name / "model"
    add_model(url.parent if not nested else url, "model" if not nested else "inner", IDENTITY)
    return url


# -- SageMaker ---------------------------------------------------------------------------------


def test_sagemaker_ping_is_empty_200(cloud: Cloud) -> None:
    assert call(cloud.sagemaker, "GET", "/ping") == (200, {"content-type": "text/plain", "content-length": "0"}, b"")


def test_sagemaker_invocations_json(cloud: Cloud) -> None:
    status, headers, body = call(cloud.sagemaker, "POST", "/invocations", JSON_REQUEST)
    assert (status, headers["content-type"], json.loads(body)) == (200, "application/json", JSON_ANSWER)
    assert body == cloud.kserve("POST", "/v2/models/identity/infer", JSON_REQUEST)[2]


def test_sagemaker_invocations_binary_size_in_content_type(cloud: Cloud) -> None:
    headers = {"Content-Type": f"{SAGEMAKER_MIME}{len(BINARY_HEADER)}"}
    status, answer, body = call(cloud.sagemaker, "POST", "/invocations", BINARY_HEADER + VALUES, headers)
    assert status == 200
    assert answer["content-type"] == f"{SAGEMAKER_MIME}{len(BINARY_ANSWER_HEADER)}"
    assert "inference-header-content-length" not in answer
    assert body == BINARY_ANSWER_HEADER + VALUES


def test_sagemaker_invocations_target_header(cloud: Cloud) -> None:
    status, _, body = call(cloud.sagemaker, "POST", "/invocations", JSON_REQUEST, {TARGET: "nope"})
    assert (status, json.loads(body)) == (404, {"error": "Request for unknown model: 'nope' is not found"})
    status, _, body = call(cloud.sagemaker, "POST", "/invocations", JSON_REQUEST, {TARGET: "identity"})
    assert (status, json.loads(body)) == (200, JSON_ANSWER)


def test_sagemaker_ignores_inference_header_content_length(cloud: Cloud) -> None:
    """As Triton's: the JSON size comes from the Content-Type only (a JSON body with the KServe header is JSON)."""
    body = json.dumps(JSON_REQUEST).encode()
    headers = {"Content-Type": "application/json", "Inference-Header-Content-Length": "5"}
    status, _, answer = call(cloud.sagemaker, "POST", "/invocations", body, headers)
    assert (status, json.loads(answer)) == (200, JSON_ANSWER)


def test_sagemaker_bad_json_is_kserve_error(cloud: Cloud) -> None:
    bad = b'{"inputs": [}'
    status, _, body = call(cloud.sagemaker, "POST", "/invocations", bad, {"Content-Type": "application/json"})
    expected = cloud.kserve("POST", "/v2/models/identity/infer", bad, {"Content-Type": "application/json"})
    assert status == expected[0] == 400
    assert body == expected[2]
    assert json.loads(body)["error"].startswith("failed to parse the request JSON buffer")


@pytest.mark.parametrize(
    ("content_type", "error"),
    [
        (
            f"text/plain; {SAGEMAKER_MIME}3",
            f"expect MIME type for binary data starts with '{SAGEMAKER_MIME}', got: text/plain; {SAGEMAKER_MIME}3",
        ),
        (f"{SAGEMAKER_MIME}abc", "Unable to parse inference header size, got: abc"),
        (f"{SAGEMAKER_MIME}999", "inference header size should be in range (0, 22), got: 999"),
    ],
)
def test_sagemaker_bad_binary_content_type(cloud: Cloud, content_type: str, error: str) -> None:
    status, _, body = call(
        cloud.sagemaker, "POST", "/invocations", b'{"inputs": []}' + b"\0" * 8, {"Content-Type": content_type}
    )
    assert (status, json.loads(body)) == (400, {"error": error})


def test_sagemaker_unknown_url_and_wrong_method(cloud: Cloud) -> None:
    assert call(cloud.sagemaker, "GET", "/v2/health/ready")[::2] == (400, b"")
    assert call(cloud.sagemaker, "POST", "/predict", JSON_REQUEST)[::2] == (400, b"")
    assert call(cloud.sagemaker, "GET", "/invocations")[::2] == (405, b'{"error":"Method Not Allowed"}')
    assert call(cloud.sagemaker, "POST", "/ping")[::2] == (405, b'{"error":"Method Not Allowed"}')


def test_sagemaker_multi_model_lifecycle(cloud: Cloud) -> None:
    """Load, list, get, invoke (the target header names the model), load again (409), unload."""
    url = mme_model(cloud.root, "hash1")
    load = {"model_name": "hash1", "url": str(url)}
    assert call(cloud.sagemaker, "POST", "/models", load, {TARGET: "m1.tar.gz"})[::2] == (200, b"")
    status, _, body = call(cloud.sagemaker, "GET", "/models")
    assert (status, json.loads(body)) == (200, {"models": [{"modelName": "hash1", "modelUrl": str(url.parent)}]})
    status, _, body = call(cloud.sagemaker, "GET", "/models/hash1")
    assert (status, json.loads(body)) == (200, {"modelName": "hash1", "modelUrl": str(url.parent)})
    status, _, body = call(cloud.sagemaker, "POST", "/models/hash1/invoke", JSON_REQUEST, {TARGET: "m1.tar.gz"})
    assert (status, json.loads(body)) == (200, {**JSON_ANSWER, "model_name": "m1.tar.gz"})
    # /invocations serves it too when the target header names it
    status, _, body = call(cloud.sagemaker, "POST", "/invocations", JSON_REQUEST, {TARGET: "m1.tar.gz"})
    assert (status, json.loads(body)) == (200, {**JSON_ANSWER, "model_name": "m1.tar.gz"})
    # the loaded model serves on the KServe endpoint too, under its target name
    assert cloud.kserve("GET", "/v2/models/m1.tar.gz/ready")[0] == 200
    status, _, body = call(cloud.sagemaker, "POST", "/models", load, {TARGET: "m1.tar.gz"})
    assert (status, json.loads(body)) == (409, {"error": "model 'hash1' is already loaded"})
    assert call(cloud.sagemaker, "DELETE", "/models/hash1", headers={TARGET: "m1.tar.gz"})[::2] == (200, b"")
    assert call(cloud.sagemaker, "DELETE", "/models/hash1")[::2] == (404, b"")
    assert call(cloud.sagemaker, "GET", "/models/hash1")[::2] == (404, b"")
    assert call(cloud.sagemaker, "POST", "/models/hash1/invoke", JSON_REQUEST)[::2] == (404, b"")
    assert json.loads(call(cloud.sagemaker, "GET", "/models")[2]) == {"models": []}
    assert cloud.kserve("GET", "/v2/models/m1.tar.gz/ready")[0] == 400


def test_sagemaker_multi_model_nested_folder_and_errors(cloud: Cloud) -> None:
    """A URL holding one model folder loads it; invoke errors are 400 whatever KServe answers (Triton's)."""
    url = mme_model(cloud.root, "hash2", nested=True)
    assert call(cloud.sagemaker, "POST", "/models", {"model_name": "hash2", "url": str(url)})[::2] == (200, b"")
    try:
        status, _, body = call(cloud.sagemaker, "POST", "/models/hash2/invoke", JSON_REQUEST)
        assert (status, json.loads(body)) == (200, {**JSON_ANSWER, "model_name": "hash2"})
        # a target the server does not have: KServe says 404, the multi-model endpoint 400
        status, _, body = call(cloud.sagemaker, "POST", "/models/hash2/invoke", JSON_REQUEST, {TARGET: "nope"})
        assert (status, json.loads(body)) == (400, {"error": "Request for unknown model: 'nope' is not found"})
        bad = b'{"inputs": [}'
        status, _, body = call(
            cloud.sagemaker, "POST", "/models/hash2/invoke", bad, {"Content-Type": "application/json"}
        )
        assert status == 400 and json.loads(body)["error"].startswith("failed to parse the request JSON buffer")
    finally:
        assert call(cloud.sagemaker, "DELETE", "/models/hash2")[::2] == (200, b"")


def test_sagemaker_multi_model_ensemble(cloud: Cloud) -> None:
    """A URL holding an ensemble and its composing model: both load (the composing model under its
    folder's name), the ensemble answers under the target name, and the unload takes both."""
    url = cloud.root / "hash6" / "model"
    add_model(url, "step", identity_config(dims="[ 4 ]"))
    add_ensemble(url, "pipeline", [step("step", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    load = {"model_name": "hash6", "url": str(url)}
    assert call(cloud.sagemaker, "POST", "/models", load, {TARGET: "pipeline"})[::2] == (200, b"")
    request = {"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    status, _, body = call(cloud.sagemaker, "POST", "/models/hash6/invoke", request, {TARGET: "pipeline"})
    assert (status, json.loads(body)) == (
        200,
        {
            "model_name": "pipeline",
            "model_version": "1",
            "outputs": [{"name": "OUT", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}],
        },
    )
    assert cloud.kserve("GET", "/v2/models/step/ready")[0] == 200
    status, _, body = call(cloud.sagemaker, "POST", "/models", {"model_name": "hash7", "url": str(url)})
    assert (status, json.loads(body)) == (409, {"error": "a model named 'step' is already serving"})
    assert call(cloud.sagemaker, "DELETE", "/models/hash6", headers={TARGET: "pipeline"})[::2] == (200, b"")
    assert cloud.kserve("GET", "/v2/models/pipeline/ready")[0] == 400
    assert cloud.kserve("GET", "/v2/models/step/ready")[0] == 400
    two = cloud.root / "hash8" / "model"
    add_model(two, "a", IDENTITY)
    add_model(two, "b", IDENTITY)
    status, _, body = call(cloud.sagemaker, "POST", "/models", {"model_name": "hash8", "url": str(two)})
    assert (status, json.loads(body)) == (
        400,
        {
            "error": f"'{two}' holds 2 model folders and 0 ensembles: a multi-model URL holds one model, "
            "or one ensemble and its composing models"
        },
    )


def test_sagemaker_multi_model_refuses_urls_outside_the_root(cloud: Cloud, tmp_path: Path) -> None:
    outside = mme_model(tmp_path, "hash3")
    escape = cloud.root / "hash3"
    escape.parent.mkdir(parents=True, exist_ok=True)
    escape.symlink_to(outside.parent)  # inside by name, outside once resolved
    for url in (str(outside), str(escape / "model"), "", "relative/model"):
        status, _, body = call(cloud.sagemaker, "POST", "/models", {"model_name": "hash3", "url": url})
        assert status == 400, url
        assert json.loads(body)["error"] == (
            f"Invalid \"url\" '{url}': expected a folder under {cloud.root} (multi_model_root), "
            f"of the form {cloud.root}/<hash>/model[/<subdir>]"
        )
    assert json.loads(call(cloud.sagemaker, "GET", "/models")[2]) == {"models": []}


def test_sagemaker_multi_model_load_failure(cloud: Cloud) -> None:
    url = cloud.root / "hash4" / "model"
    add_model(url.parent, "model", IDENTITY.replace('"identity"', '"no_such_backend"'))
    status, _, body = call(cloud.sagemaker, "POST", "/models", {"model_name": "hash4", "url": str(url)})
    assert status == 400
    assert json.loads(body)["error"].startswith("load failed for model 'hash4'")
    assert call(cloud.sagemaker, "GET", "/models/hash4")[::2] == (404, b"")
    assert call(cloud.sagemaker, "GET", "/ping")[0] == 200  # the failed model holds nothing down
    # a target name that a model already serves under (here, a model of the repository)
    status, _, body = call(
        cloud.sagemaker, "POST", "/models", {"model_name": "hash5", "url": str(url)}, {TARGET: "identity"}
    )
    assert (status, json.loads(body)) == (409, {"error": "a model named 'identity' is already serving"})
    status, _, body = call(cloud.sagemaker, "POST", "/models", b"[1,", {"Content-Type": "application/json"})
    assert status == 400 and "error" in json.loads(body)


def test_bodies_are_bounded_as_on_the_kserve_endpoint(cloud: Cloud) -> None:
    """--max-request-bytes holds on every inference route (413 from the headers); /models loads are
    control bodies (64 KiB)."""
    big = b"{" + b" " * LIMIT + b"}"
    expected = {"error": f"request body of {len(big)} bytes exceeds the maximum request size of {LIMIT} bytes"}
    for port, path in (
        (cloud.sagemaker, "/invocations"),
        (cloud.sagemaker, "/models/h/invoke"),
        (cloud.vertex, PREDICT),
    ):
        status, _, body = call(port, "POST", path, big, {"Content-Type": "application/json"})
        assert (status, json.loads(body)) == (413, expected), path


# -- Vertex AI ---------------------------------------------------------------------------------


def test_vertex_ai_health(cloud: Cloud) -> None:
    assert call(cloud.vertex, "GET", HEALTH)[::2] == (200, b"")
    assert call(cloud.vertex, "POST", HEALTH)[::2] == (405, b'{"error":"Method Not Allowed"}')


def test_vertex_ai_predict_json_and_binary(cloud: Cloud) -> None:
    status, headers, body = call(cloud.vertex, "POST", PREDICT, JSON_REQUEST)
    assert (status, headers["content-type"], json.loads(body)) == (200, "application/json", JSON_ANSWER)
    headers = {"Content-Type": f"{VERTEX_MIME}{len(BINARY_HEADER)}"}
    status, answer, body = call(cloud.vertex, "POST", PREDICT, BINARY_HEADER + VALUES, headers)
    assert status == 200
    assert (answer["content-type"], answer["inference-header-content-length"]) == (
        "application/octet-stream",
        str(len(BINARY_ANSWER_HEADER)),
    )
    assert body == BINARY_ANSWER_HEADER + VALUES


def test_vertex_ai_errors_and_unknown_urls(cloud: Cloud) -> None:
    bad = b'{"inputs": [}'
    status, _, body = call(cloud.vertex, "POST", PREDICT, bad, {"Content-Type": "application/json"})
    assert (status, body) == (400, cloud.kserve("POST", "/v2/models/identity/infer", bad)[2])
    assert call(cloud.vertex, "GET", PREDICT)[::2] == (405, b'{"error":"Method Not Allowed"}')
    assert call(cloud.vertex, "POST", "/invocations", JSON_REQUEST)[::2] == (400, b"")
    assert call(cloud.vertex, "GET", "/v2/health/ready")[::2] == (400, b"")


@pytest.mark.parametrize(
    ("target", "kserve"),
    [
        ("v2", ("GET", "/v2")),
        ("v2/health/live", ("GET", "/v2/health/live")),
        ("v2/models/identity", ("GET", "/v2/models/identity")),
        ("v2/models/identity/versions/1/ready", ("GET", "/v2/models/identity/versions/1/ready")),
        ("v2/models/identity/config", ("GET", "/v2/models/identity/config")),
        ("v2/models/nope/config", ("GET", "/v2/models/nope/config")),
        ("v2/systemsharedmemory/status", ("GET", "/v2/systemsharedmemory/status")),
        ("v2/repository/index", ("POST", "/v2/repository/index")),
    ],
)
def test_vertex_ai_redirect_reads(cloud: Cloud, target: str, kserve: tuple[str, str]) -> None:
    """A redirect answers as the KServe endpoint it names, with that endpoint's method."""
    redirected = call(cloud.vertex, "POST", PREDICT, b"", {REDIRECT: target})
    expected = cloud.kserve(*kserve)
    assert (redirected[0], redirected[2]) == (expected[0], expected[2])


def test_vertex_ai_redirect_infer_and_stats(cloud: Cloud) -> None:
    status, _, body = call(cloud.vertex, "POST", PREDICT, JSON_REQUEST, {REDIRECT: "v2/models/identity/infer"})
    assert (status, json.loads(body)) == (200, JSON_ANSWER)
    status, _, body = call(cloud.vertex, "POST", PREDICT, JSON_REQUEST, {REDIRECT: "v2/models/nope/infer"})
    assert (status, json.loads(body)) == (404, {"error": "Request for unknown model: 'nope' is not found"})
    status, _, body = call(cloud.vertex, "POST", PREDICT, b"", {REDIRECT: "v2/models/identity/stats"})
    assert status == 200 and json.loads(body)["model_stats"][0]["name"] == "identity"
    status, headers, body = call(cloud.vertex, "POST", PREDICT, b"", {REDIRECT: "metrics"})
    assert (status, headers["content-type"]) == (200, "text/plain; charset=utf-8")
    assert 'nv_inference_request_success{model="identity",version="1"} ' in body.decode()


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("v2/repository/models/identity/unload", 403),
        ("v2/repository/models/identity/load", 403),
        ("v2/systemsharedmemory/region/r/register", 403),
        ("v2/cudasharedmemory/unregister", 403),
        ("v2/models/identity/generate", 400),
        ("v2/logging", 400),
        ("v2/trace/setting", 400),
        ("nothing", 400),
    ],
)
def test_vertex_ai_redirect_refused(cloud: Cloud, target: str, status: int) -> None:
    """Changes to the server through a redirect are 403 (as Triton since 2.68); unknown targets 400; empty bodies."""
    assert call(cloud.vertex, "POST", PREDICT, b"{}", {REDIRECT: target})[::2] == (status, b"")
    assert cloud.kserve("GET", "/v2/models/identity/ready")[0] == 200


# -- start-up rules (their own servers) ---------------------------------------------------------


def test_not_ready_ping_and_unspecified_default_model(tmp_path: Path) -> None:
    """A model failed to load (--exit-on-error=false): /ping says not ready (400), live mode says 200;
    two models and no SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: /invocations names Triton's placeholder."""
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    add_model(repo, "broken", IDENTITY.replace('"identity"', '"no_such_backend"'))
    port = free_port()
    with ServerProcess([repo], ["--exit-on-error=false", *cloud_args(port, None)]) as server:
        wait_listening(server, port)
        assert call(server.http_port, "GET", "/v2/health/ready")[0] == 400
        assert call(port, "GET", "/ping")[::2] == (400, b"")
        status, _, body = call(port, "POST", "/invocations", JSON_REQUEST)
        assert (status, json.loads(body)) == (
            404,
            {"error": "Request for unknown model: 'unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME' is not found"},
        )
    port = free_port()
    env = {"SAGEMAKER_TRITON_PING_MODE": "live", "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "identity"}
    with ServerProcess([repo], ["--exit-on-error=false", *cloud_args(port, None)], env=env) as server:
        wait_listening(server, port)
        assert call(port, "GET", "/ping")[::2] == (200, b"")
        status, _, body = call(port, "POST", "/invocations", JSON_REQUEST)
        assert (status, json.loads(body)) == (200, JSON_ANSWER)


def _failed_start(tmp_path: Path, args: list[str], env: dict[str, str]) -> str:
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    add_model(repo, "other", IDENTITY)
    server = ServerProcess([repo], args, env=env)
    server.start(wait_ready=False)
    try:
        assert server.wait_exit(120) == 1
        return server.log()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ([], {"AIP_HEALTH_ROUTE": HEALTH}, "AIP_PREDICT_ROUTE is not defined for Vertex AI endpoint"),
        ([], {"AIP_PREDICT_ROUTE": PREDICT}, "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint"),
        (
            [],
            {"AIP_PREDICT_ROUTE": PREDICT, "AIP_HEALTH_ROUTE": HEALTH},
            "Expect the model repository contains only a single model if default model is not specified",
        ),
        (
            ["--vertex-ai-default-model=nope"],
            {"AIP_PREDICT_ROUTE": PREDICT, "AIP_HEALTH_ROUTE": HEALTH},
            "Expect the default model 'nope' is loaded",
        ),
    ],
)
def test_vertex_ai_start_up_errors(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")} | env
    log = _failed_start(tmp_path, [*cloud_args(None, free_port()), *args], env)
    assert message in log


def test_vertex_ai_default_model_flag(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    add_model(repo, "other", IDENTITY)
    port = free_port()
    env = {"AIP_PREDICT_ROUTE": "/predict", "AIP_HEALTH_ROUTE": "/health"}
    args = [*cloud_args(None, port), "--vertex-ai-default-model=other"]
    with ServerProcess([repo], args, env=env) as server:
        wait_listening(server, port)
        status, _, body = call(port, "POST", "/predict", JSON_REQUEST)
        assert (status, json.loads(body)) == (200, {**JSON_ANSWER, "model_name": "other"})


def _parse_error(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    run = subprocess.run(
        [sys.executable, "-m", "tritium", "--model-repository=/nonexistent", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("AIP_", "SAGEMAKER_"))} | (env or {}),
    )
    return run.returncode, run.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--allow-sagemaker=true", "--allow-vertex-ai=true"],
            None,
            "The server cannot listen to SageMaker requests and Vertex AI requests at the same address and port "
            "0.0.0.0:8080",
        ),
        (
            ["--allow-sagemaker=true", "--sagemaker-port=8000"],
            None,
            "The server cannot listen to HTTP requests and SageMaker requests at the same address and port 0.0.0.0:8000",
        ),
        (
            ["--allow-sagemaker=true", "--sagemaker-safe-port-range=8000-8001"],
            None,
            "The server cannot listen to metrics requests at port 8002, allowed port range is [8000, 8001]",
        ),
        (
            ["--allow-sagemaker=true"],
            {"SAGEMAKER_SAFE_PORT_RANGE": "9000-9100"},
            "The server cannot listen to HTTP requests at port 8000, allowed port range is [9000, 9100]",
        ),
        (["--sagemaker-safe-port-range=8000"], None, "invalid port range '8000' (expected <integer>-<integer>"),
        (
            ["--sagemaker-thread-count=4"],
            None,
            "--sagemaker-thread-count is a tritonserver flag for SageMaker thread counts, which tritium does not "
            "support yet",
        ),
        (
            ["--vertex-ai-thread-count=4"],
            None,
            "--vertex-ai-thread-count is a tritonserver flag for Vertex AI thread counts, which tritium does not "
            "support yet",
        ),
        (["--allow-vertex-ai=true"], {"AIP_HTTP_PORT": "http"}, "AIP_HTTP_PORT: invalid port 'http'"),
    ],
)
def test_flag_checks(args: list[str], env: dict[str, str] | None, message: str) -> None:
    """Triton's port checks and the refused thread-count flags: exit 2 with the message, nothing bound."""
    status, stderr = _parse_error(args, env)
    assert status == 2
    assert message in stderr, stderr


def test_aip_mode_prediction_defaults(tmp_path: Path) -> None:
    """AIP_MODE=PREDICTION: Vertex AI on at $AIP_HTTP_PORT, the model repository from $AIP_STORAGE_URI,
    HTTP and gRPC off (the metrics endpoint stays)."""
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    port = free_port()
    env = {
        "AIP_MODE": "PREDICTION",
        "AIP_HTTP_PORT": str(port),
        "AIP_STORAGE_URI": str(repo),
        "AIP_PREDICT_ROUTE": PREDICT,
        "AIP_HEALTH_ROUTE": HEALTH,
    }
    server = ServerProcess([], ["--vertex-ai-address=127.0.0.1"], env=env)
    server.start(wait_ready=False)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.proc is not None and server.proc.poll() is None, server.log()
            try:
                if call(port, "GET", HEALTH)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.2)
        status, _, body = call(port, "POST", PREDICT, JSON_REQUEST)
        assert (status, json.loads(body)) == (200, JSON_ANSWER)
        assert "endpoints: metrics, vertex_ai (not enabled or not in this server: http, grpc)" in server.log()
    finally:
        server.stop()


def test_plugins_toml_settings_are_checked(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins.toml"
    plugins.write_text(
        textwrap.dedent("""
        [frontends.http]
        [frontends.sagemaker]
        enabled = true
        port = 0
        mystery = 1
    """)
    )
    log = _failed_start(tmp_path, [], {"TRITIUM_PLUGINS": str(plugins)})
    assert (
        "unknown setting(s) mystery in [frontends.sagemaker] (known: enabled, module, port, address, multi_model_root)"
        in log
    )


def test_restricted_apis_hold_on_the_cloud_endpoints(tmp_path: Path) -> None:
    """--http-restricted-api applies to both endpoints, by the API group of each route."""
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    sagemaker, vertex = free_port(), free_port()
    env = {"AIP_PREDICT_ROUTE": PREDICT, "AIP_HEALTH_ROUTE": HEALTH}
    args = ["--http-restricted-api=inference,model-repository:admin-key=yes", *cloud_args(sagemaker, vertex)]
    refused = (403, b'{"error":"This API is restricted, expecting header \'admin-key\'"}')
    key = {"admin-key": "yes"}
    with ServerProcess([repo], args, env=env) as server:
        wait_listening(server, sagemaker, vertex)
        assert call(sagemaker, "POST", "/invocations", JSON_REQUEST)[::2] == refused
        assert call(sagemaker, "POST", "/invocations", JSON_REQUEST, {"admin-key": "no"})[::2] == refused
        status, _, body = call(sagemaker, "POST", "/invocations", JSON_REQUEST, key)
        assert (status, json.loads(body)) == (200, JSON_ANSWER)
        assert call(sagemaker, "GET", "/models")[::2] == refused
        assert call(sagemaker, "GET", "/ping")[::2] == (200, b"")
        assert call(vertex, "POST", PREDICT, JSON_REQUEST)[::2] == refused
        assert call(vertex, "POST", PREDICT, b"", {REDIRECT: "v2/repository/index"})[::2] == refused
        assert call(vertex, "POST", PREDICT, b"", {REDIRECT: "v2/repository/index", **key})[0] == 200
        assert call(vertex, "POST", PREDICT, b"", {REDIRECT: "v2/models/identity/ready"})[::2] == (200, b"")
        assert call(vertex, "GET", HEALTH)[::2] == (200, b"")


def test_sagemaker_inference_type_generate(tmp_path: Path) -> None:
    """SAGEMAKER_TRITON_INFERENCE_TYPE=generate: /invocations is the generate extension."""
    repo = tmp_path / "repo"
    add_model(repo, "identity", IDENTITY)
    port = free_port()
    with ServerProcess([repo], cloud_args(port, None), env={"SAGEMAKER_TRITON_INFERENCE_TYPE": "generate"}) as server:
        wait_listening(server, port)
        status, _, body = call(port, "POST", "/invocations", {"INPUT0": [1, 2, 3, 4]})
        assert (status, json.loads(body)) == (
            200,
            {"model_name": "identity", "model_version": "1", "OUTPUT0": [1.0, 2.0, 3.0, 4.0]},
        )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SAGEMAKER_TRITON_INFERENCE_TYPE": "predict"},
            "Invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'predict'. Must be one of: infer, generate, generate_stream.",
        ),
        ({"SAGEMAKER_TRITON_PING_MODE": "up"}, "SAGEMAKER_TRITON_PING_MODE must be 'ready' or 'live', not 'up'"),
    ],
)
def test_sagemaker_environment_is_checked(tmp_path: Path, env: dict[str, str], message: str) -> None:
    assert message in _failed_start(tmp_path, cloud_args(free_port(), None), env)
