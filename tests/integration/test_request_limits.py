"""Request sizes are bounded on both transports; the error names the limit (``--max-request-bytes``)."""

from __future__ import annotations

import gzip
import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

LIMIT = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))

    yield from module_server(tmp_path_factory.mktemp("limits"), build, [f"--max-request-bytes={LIMIT}"])


def request(count: int) -> bytes:
    tensor = {"name": "INPUT0", "shape": [count], "datatype": "UINT8", "data": [1] * count}
    return json.dumps({"inputs": [tensor]}).encode()


def post(server: ServerProcess, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, _headers, reply = http_call(server, "POST", "/v2/models/echo/infer", body, headers)
    return status, json.loads(reply)


def test_http_body_within_the_limit(server: ServerProcess) -> None:
    body = request(1000)
    assert len(body) <= LIMIT
    status, reply = post(server, body)
    assert status == 200 and reply["outputs"][0]["data"] == [1] * 1000


def test_http_body_over_the_limit(server: ServerProcess) -> None:
    body = request(2000)
    assert post(server, body) == (
        413,
        {"error": f"request body of {len(body)} bytes exceeds the maximum request size of {LIMIT} bytes"},
    )
    assert post(server, request(10))[0] == 200


def test_http_bodies_of_other_endpoints_over_the_limit(server: ServerProcess) -> None:
    body = json.dumps({"key": "/k", "offset": 0, "byte_size": 8, "pad": "x" * LIMIT}).encode()
    expected = {"error": f"request body of {len(body)} bytes exceeds the maximum request size of {LIMIT} bytes"}
    for path in ("/v2/systemsharedmemory/region/r/register", "/v2/repository/index"):
        status, _headers, reply = http_call(server, "POST", path, body)
        assert (status, json.loads(reply)) == (413, expected), path


def test_http_chunked_body_over_the_limit(server: ServerProcess) -> None:
    body = request(2000)
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        conn.request("POST", "/v2/models/echo/infer", body=iter([body]), encode_chunked=True)
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())) == (
            413,
            {"error": f"request body exceeds the maximum request size of {LIMIT} bytes"},
        )
    finally:
        conn.close()


def test_http_compressed_body_over_the_limit_once_decompressed(server: ServerProcess) -> None:
    body = gzip.compress(request(3000))
    assert len(body) <= LIMIT
    assert post(server, body, {"Content-Encoding": "gzip"}) == (
        413,
        {"error": f"decompressed request body exceeds the maximum request size of {LIMIT} bytes"},
    )


def test_grpc_message_over_the_limit(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    small = grpcclient.InferInput("INPUT0", [100], "UINT8")
    small.set_data_from_numpy(np.ones(100, np.uint8))
    assert client.infer("echo", [small]).as_numpy("OUTPUT0").tolist() == [1] * 100
    big = grpcclient.InferInput("INPUT0", [LIMIT * 2], "UINT8")
    big.set_data_from_numpy(np.ones(LIMIT * 2, np.uint8))
    with pytest.raises(InferenceServerException) as info:
        client.infer("echo", [big])
    assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
    # the limit is named by gRPC core itself: "Received message larger than max (<size> vs. <limit>)";
    # grpcio's newer core (the grpc.aio transport) prefixes "SERVER: ", the C++ 1.51 one does not
    assert re.fullmatch(rf"(SERVER: )?Received message larger than max \(\d+ vs\. {LIMIT}\)", info.value.message())
    assert client.infer("echo", [small]).as_numpy("OUTPUT0").tolist() == [1] * 100


def test_tritonclient_still_sending_its_body_reads_the_413(server: ServerProcess) -> None:
    # tritonclient writes the whole body before it reads: the server refuses from the headers, then
    # drains (lingering close) so that the client reads the 413 instead of a connection reset
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    size = 8 << 20
    big = httpclient.InferInput("INPUT0", [size], "UINT8")
    big.set_data_from_numpy(np.ones(size, np.uint8), binary_data=True)
    for _ in range(3):
        with pytest.raises(InferenceServerException) as info:
            client.infer("echo", [big])
        assert "exceeds the maximum request size of 4096 bytes" in str(info.value), str(info.value)
    small = httpclient.InferInput("INPUT0", [10], "UINT8")
    small.set_data_from_numpy(np.ones(10, np.uint8), binary_data=True)
    assert client.infer("echo", [small]).as_numpy("OUTPUT0").tolist() == [1] * 10
    client.close()
