"""HTTP/REST endpoint: health, metadata, config, readiness and statistics; URLs and methods.

Exact statuses, headers and JSON bodies as Triton 2.51 answers them, over
plain HTTP and through ``tritonclient.http``. One server for the module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import HTTP_ONLY, http_call, module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

TWO_VERSIONS = """
    backend: "identity"
    max_batch_size: 0
    version_policy: { all { } }
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
SIXTEEN = [float(i) for i in range(16)]
GOOD = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": SIXTEEN}]}
DECOUPLED = "model_transaction_policy { decoupled: true }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "identity_fp32", identity_config("TYPE_FP32", "[ 16 ]", max_batch_size=8))
        add_model(repo, "two_versions", TWO_VERSIONS, versions=(1, 2))
        add_model(repo, "decoupled", identity_config("TYPE_FP32", "[ 4 ]", max_batch_size=0, extra=DECOUPLED))

    yield from module_server(tmp_path_factory.mktemp("http_endpoints"), build, HTTP_ONLY)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    triton = httpclient.InferenceServerClient(server.http_url)
    yield triton
    triton.close()


call = http_call


def get_json(server: ServerProcess, path: str) -> tuple[int, Any]:
    status, headers, body = call(server, "GET", path)
    assert headers["content-type"] == "application/json"
    return status, json.loads(body)


def test_started_log_line(server: ServerProcess) -> None:
    assert f"Started HTTPService at 127.0.0.1:{server.http_port}" in server.log()


def test_server_metadata(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    status, body = get_json(server, "/v2")
    assert status == 200
    assert body["name"] == "tritium"
    assert "binary_tensor_data" in body["extensions"] and "classification" in body["extensions"]
    assert client.get_server_metadata() == body


@pytest.mark.parametrize("path", ["/v2/health/live", "/v2/health/ready"])
def test_health_is_200_with_an_empty_body(server: ServerProcess, path: str) -> None:
    status, headers, body = call(server, "GET", path)
    assert (status, body) == (200, b"")
    assert headers["content-length"] == "0"


def test_health_through_tritonclient(client: httpclient.InferenceServerClient) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("identity_fp32")
    assert client.is_model_ready("two_versions", "2")
    assert not client.is_model_ready("two_versions", "3")
    assert not client.is_model_ready("nope")


def test_model_metadata_exact(server: ServerProcess) -> None:
    status, headers, body = call(server, "GET", "/v2/models/identity_fp32")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body == (
        b'{"name":"identity_fp32","versions":["1"],"platform":"identity",'
        b'"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,16]}],'
        b'"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]}]}'
    )


def test_model_metadata_versions(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    assert get_json(server, "/v2/models/two_versions")[1]["versions"] == ["1", "2"]
    assert get_json(server, "/v2/models/two_versions/versions/1")[1]["versions"] == ["1"]
    assert get_json(server, "/v2/models/two_versions/versions/2")[1]["versions"] == ["2"]
    metadata = client.get_model_metadata("two_versions", "1")
    assert metadata["versions"] == ["1"]
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}]


def test_model_config(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    status, config = get_json(server, "/v2/models/identity_fp32/config")
    assert status == 200
    assert config["name"] == "identity_fp32"
    assert config["max_batch_size"] == 8
    assert config["input"][0]["name"] == "INPUT0" and config["input"][0]["dims"] == [16]
    assert client.get_model_config("identity_fp32") == config
    assert get_json(server, "/v2/models/identity_fp32/versions/1/config") == (200, config)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/identity_fp32/ready",
        "/v2/models/identity_fp32/versions/1/ready",
        "/v2/models/two_versions/versions/2/ready",
    ],
)
def test_model_ready(server: ServerProcess, path: str) -> None:
    status, _, body = call(server, "GET", path)
    assert (status, body) == (200, b"")


@pytest.mark.parametrize("path", ["/v2/models/nope/ready", "/v2/models/identity_fp32/versions/3/ready"])
def test_model_not_ready(server: ServerProcess, path: str) -> None:
    status, headers, body = call(server, "GET", path)
    assert (status, body) == (400, b'{"error":"Model version not ready"}')
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "path,status,message",
    [
        ("/v2/models/nope", 404, "Request for unknown model: 'nope' is not found"),
        ("/v2/models/nope/config", 404, "Request for unknown model: 'nope' is not found"),
        (
            "/v2/models/identity_fp32/versions/3",
            404,
            "Request for unknown model: 'identity_fp32' version 3 is not found",
        ),
        (
            "/v2/models/identity_fp32/versions/3/config",
            404,
            "Request for unknown model: 'identity_fp32' version 3 is not found",
        ),
        ("/v2/models/nope/stats", 400, "requested model 'nope' is not available"),
        (
            "/v2/models/identity_fp32/versions/3/stats",
            400,
            "requested model version is not available for model 'identity_fp32'",
        ),
    ],
)
def test_unknown_model_or_version(server: ServerProcess, path: str, status: int, message: str) -> None:
    assert get_json(server, path) == (status, {"error": message})


def test_statistics(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    [entry] = get_json(server, "/v2/models/identity_fp32/stats")[1]["model_stats"]
    before = entry["inference_count"]
    status, _, _ = call(server, "POST", "/v2/models/identity_fp32/infer", json.dumps(GOOD).encode())
    assert status == 200
    status, stats = get_json(server, "/v2/models/identity_fp32/stats")
    assert status == 200
    [entry] = stats["model_stats"]
    assert (entry["name"], entry["version"]) == ("identity_fp32", "1")
    assert entry["inference_count"] == before + 1
    assert entry["inference_stats"]["success"]["count"] >= 1
    assert get_json(server, "/v2/models/identity_fp32/versions/1/stats") == (200, stats)
    both = get_json(server, "/v2/models/two_versions/stats")[1]["model_stats"]
    assert [(s["name"], s["version"]) for s in both] == [
        ("two_versions", "1"),
        ("two_versions", "2"),
    ]
    everything = get_json(server, "/v2/models/stats")[1]["model_stats"]
    assert {s["name"] for s in everything} == {"identity_fp32", "two_versions", "decoupled"}
    assert client.get_inference_statistics("identity_fp32") == stats


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/v2/",
        "/v1/models",
        "/v2/foo",
        "/v2/health",
        "/v2/health/ready/",
        "/v2/models",
        "/v2/models/",
        "/v2/models/identity_fp32/",
        "/v2/models/identity_fp32/foo",
        "/v2/models/identity_fp32/versions/",
        "/v2/models/identity_fp32/versions/abc",
        "/v2/models/identity_fp32/versions/-1/ready",
        "/metrics",
    ],
)
def test_unknown_url(server: ServerProcess, path: str) -> None:
    for method in ("GET", "POST"):
        status, headers, body = call(server, method, path)
        assert (status, body) == (404, b'{"error":"Not Found"}')
        assert headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/v2/models/identity_fp32/infer"),
        ("PUT", "/v2/models/identity_fp32/infer"),
        ("POST", "/v2/models/identity_fp32"),
        ("POST", "/v2/models/identity_fp32/config"),
        ("POST", "/v2/models/identity_fp32/ready"),
        ("POST", "/v2/models/identity_fp32/stats"),
        ("POST", "/v2/models/stats"),
        ("POST", "/v2"),
        ("POST", "/v2/health/live"),
        ("DELETE", "/v2/health/ready"),
    ],
)
def test_wrong_method(server: ServerProcess, method: str, path: str) -> None:
    status, headers, body = call(server, method, path)
    assert (status, body) == (405, b'{"error":"Method Not Allowed"}')
    assert headers["content-type"] == "application/json"


def test_head_is_not_allowed(server: ServerProcess) -> None:
    status, headers, body = call(server, "HEAD", "/v2/health/live")
    assert (status, body, headers["content-length"]) == (405, b"", "30")


def test_decoupled_model_is_refused(server: ServerProcess) -> None:
    tensor = {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}
    request = {"inputs": [tensor]}
    body = json.dumps(request).encode()
    status, _, body = call(server, "POST", "/v2/models/decoupled/infer", body)
    assert (status, json.loads(body)) == (
        501,
        {"error": "HTTP end point doesn't support models with decoupled transaction policy"},
    )


def test_infer_by_version(client: httpclient.InferenceServerClient) -> None:
    data = np.array([1, 2, 3, 4], dtype=np.float32)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(data)
    for version in ("1", "2", ""):
        result = client.infer("two_versions", [inp], model_version=version)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
        assert result.get_response()["model_version"] == (version or "2")


def test_errors_through_tritonclient(client: httpclient.InferenceServerClient) -> None:
    unknown = "Request for unknown model: 'nope' is not found"
    with pytest.raises(InferenceServerException, match=unknown):
        client.get_model_metadata("nope")
    inp = httpclient.InferInput("INPUT0", [1, 15], "FP32")
    inp.set_data_from_numpy(np.zeros((1, 15), dtype=np.float32))
    shape = r"unexpected shape for input 'INPUT0'"
    with pytest.raises(InferenceServerException, match=shape) as info:
        client.infer("identity_fp32", [inp])
    assert info.value.status() == "400"
