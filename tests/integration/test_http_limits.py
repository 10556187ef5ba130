"""HTTP/REST endpoint: the request body limit (``ServerOptions.max_request_bytes``).

``tritium-server`` has no flag for the limit (its default is 2 GiB), so
these tests serve the endpoint's application in-process, with a small limit,
over a stand-in for the server that answers every inference with its input.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from tritium.core.request import InferenceRequest
from tritium.core.response import InferenceResponse, OutputTensor
from tritium.frontends.kserve_http import create_app

LIMIT = 1024


class _Model:
    decoupled = False
    config: dict[str, Any] = {
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_UINT8", "dims": [-1]}],
    }


class _EchoServer:
    """Just enough of InferenceServer for the infer endpoint: every output is the first input."""

    def model(self, name: str, version: str = "") -> _Model:
        del name, version
        return _Model()

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        first = request.inputs[0]
        data = memoryview(bytes(first.data or b""))
        output = OutputTensor("OUTPUT0", first.datatype, first.shape, data)
        return InferenceResponse(request.model_name, "1", request.id, [output])


async def _post(body: bytes, headers: dict[str, str], chunked: bool = False) -> tuple[int, Any]:
    app = create_app(_EchoServer(), LIMIT)  # type: ignore[arg-type]
    server = TestServer(app)
    await server.start_server(auto_decompress=False)  # as HTTPFrontend serves it
    try:
        async with ClientSession() as session:

            async def chunks() -> Any:
                yield body

            payload: Any = chunks() if chunked else body
            url = server.make_url("/v2/models/m/infer")
            async with session.post(url, data=payload, headers=headers) as resp:
                return resp.status, json.loads(await resp.read())
    finally:
        await server.close()


def _request(count: int) -> bytes:
    tensor = {"name": "INPUT0", "shape": [count], "datatype": "UINT8", "data": [1] * count}
    return json.dumps({"inputs": [tensor]}).encode()


def run(
    body: bytes, headers: dict[str, str] | None = None, chunked: bool = False
) -> tuple[int, Any]:
    return asyncio.run(_post(body, headers or {}, chunked))


def test_body_within_the_limit() -> None:
    body = _request(300)
    assert len(body) <= LIMIT
    status, reply = run(body)
    assert status == 200
    assert reply["outputs"][0]["data"] == [1] * 300


def test_body_over_the_limit() -> None:
    body = _request(400)
    assert (run(body)) == (
        400,
        {"error": f"request body of {len(body)} bytes exceeds the maximum request size of "
                  f"{LIMIT} bytes"},
    )


def test_chunked_body_over_the_limit() -> None:
    assert run(_request(400), chunked=True) == (
        400,
        {"error": f"request body exceeds the maximum request size of {LIMIT} bytes"},
    )


def test_compressed_body_over_the_limit_once_decompressed() -> None:
    body = gzip.compress(_request(2000))
    assert len(body) <= LIMIT
    assert run(body, {"Content-Encoding": "gzip"}) == (
        400,
        {"error": f"decompressed request body exceeds the maximum request size of {LIMIT} bytes"},
    )


def test_application_factory_has_every_route() -> None:
    app = create_app(_EchoServer(), LIMIT)  # type: ignore[arg-type]
    assert isinstance(app, web.Application)
    paths = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    assert {
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/stats",
        "/v2/models/{model}/infer",
        "/v2/models/{model}/versions/{version}/infer",
    } <= paths
