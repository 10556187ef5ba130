"""The Ray Serve integration's adapters, in this process without Ray: Starlette requests and protobuf
messages in, over a started server, with a stand-in for the replica's agent.

What reaches the KServe handlers of ``tritium-server``'s endpoints through
``HttpAdapter`` and ``GrpcAdapter``, and what the replica's API changes: readiness
and statistics from the cluster view, load/unload through the agent, shared
memory, trace and logging refused, compressed bodies refused, metadata without the
unavailable extensions. The real cluster is tested in test_ray_serve.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

pytest.importorskip("starlette", reason="the ray extra (pip install 'tritium[ray]') is not installed")

from starlette.requests import Request  # noqa: E402

from tests.support.repo import add_model, identity_config  # noqa: E402
from tritium.cli import parse_args  # noqa: E402
from tritium.core.api import Code, InferenceServer, TritonError  # noqa: E402
from tritium.frontends.kserve_grpc.servicer import HealthServicer, InferenceServicer  # noqa: E402
from tritium.integrations.ray_serve.grpc_proxy import GrpcAdapter  # noqa: E402
from tritium.integrations.ray_serve.http_proxy import HttpAdapter  # noqa: E402
from tritium.integrations.ray_serve.replica_api import ReplicaServer  # noqa: E402
from tritium.proto import grpc_service_pb2 as pb  # noqa: E402
from tritium.proto import health_pb2  # noqa: E402


class FakeAgent:
    """The agent's cluster view and repository calls, answered from fixed values and recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.cluster_ready = False

    async def ready(self) -> bool:
        return self.cluster_ready

    async def model_ready(self, name: str, version: str = "") -> bool:
        self.calls.append(("model_ready", name, version))
        return name == "everywhere"

    async def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        if name == "nope":
            raise TritonError(Code.INVALID_ARG, "requested model 'nope' is not available")
        return {"model_stats": [{"name": name or "all", "summed": True}]}

    async def metrics(self) -> bytes:
        return b'nv_inference_count{model="m",replica="r1",version="1"} 3\n'

    async def load_model(self, name: str, config: str | None = None, files: dict[str, bytes] | None = None) -> None:
        self.calls.append(("load", name, config, files))

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        self.calls.append(("unload", name, unload_dependents))


class Context:
    """Serve's gRPC context, as the servicer uses it."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


def _request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if body or method == "POST":
        raw.append((b"content-length", str(len(body)).encode()))
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": raw}
    return Request(scope, receive)


def _infer_body() -> bytes:
    data = list(range(4))
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": data}]}).encode()


def _grpc_infer(model: str = "identity") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model, id="g1")
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    del tensor
    request.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    return request


def test_the_endpoints_handlers_answer_through_the_adapters(tmp_path: Path) -> None:
    add_model(tmp_path, "identity", identity_config(dims="[ 4 ]"))

    async def scenario() -> None:
        options, _ = parse_args([f"--model-repository={tmp_path}", "--max-request-bytes=4096"])
        options.http = options.grpc = options.metrics = False
        server = InferenceServer(options)
        await server.start(frontends=False)
        agent = FakeAgent()
        api = ReplicaServer(server, agent)  # type: ignore[arg-type]
        http = HttpAdapter(api, agent, agent.metrics)  # type: ignore[arg-type]
        methods = GrpcAdapter()
        methods.servicer, methods.health = InferenceServicer(api, agent), HealthServicer(api, agent)  # type: ignore[arg-type]
        try:
            await _http_checks(http, agent)
            await _grpc_checks(methods, agent)
        finally:
            await server.stop()

    asyncio.run(scenario())


async def _http_checks(http: HttpAdapter, agent: FakeAgent) -> None:
    async def call(method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, bytes, Any]:
        response = await http.handle(_request(method, path, body, {k.replace("_", "-"): v for k, v in headers.items()}))
        return response.status_code, bytes(response.body), response.headers

    status, body, _ = await call("POST", "/v2/models/identity/infer", _infer_body(), accept_encoding="gzip")
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == [0.0, 1.0, 2.0, 3.0]  # not compressed
    status, body, headers = await call("POST", "/v2/models/identity/infer", _infer_body(), content_encoding="gzip")
    assert (status, headers["accept-encoding"]) == (501, "identity") and b"Unsupported compression type" in body
    status, body, _ = await call("POST", "/v2/models/nope/infer", _infer_body())
    assert status == 404 and b"Request for unknown model: 'nope' is not found" in body
    status, body, _ = await call("POST", "/v2/models/identity/infer", b"x" * 5000)
    assert status == 413 and b"exceeds the maximum request size of 4096 bytes" in body
    assert (await call("GET", "/v2/models/identity/infer"))[:2] == (405, b'{"error":"Method Not Allowed"}')
    assert (await call("GET", "/v2/nothing"))[:2] == (404, b'{"error":"Not Found"}')
    for path in ("/v2/models/identity/generate", "/v2/openapi.json"):  # not served through Serve
        assert (await call("GET" if "openapi" in path else "POST", path, b"{}"))[0] == 404

    assert (await call("GET", "/v2/health/live"))[:2] == (200, b"")
    assert (await call("GET", "/v2/health/ready"))[:2] == (400, b"")  # the cluster view's answer
    agent.cluster_ready = True
    assert (await call("GET", "/v2/health/ready"))[:2] == (200, b"")
    assert (await call("GET", "/v2/models/everywhere/versions/2/ready"))[:2] == (200, b"")
    status, body, _ = await call("GET", "/v2/models/identity/ready")
    assert (status, body) == (400, b'{"error":"Model version not ready"}') and (
        "model_ready",
        "everywhere",
        "2",
    ) in agent.calls
    status, body, _ = await call("GET", "/v2/models/stats")
    assert status == 200 and json.loads(body) == {"model_stats": [{"name": "all", "summed": True}]}
    assert (await call("GET", "/v2/models/nope/stats"))[0] == 400
    status, body, headers = await call("GET", "/metrics")
    assert status == 200 and body.startswith(b"nv_inference_count") and "version=0.0.4" in headers["content-type"]

    status, body, _ = await call("GET", "/v2")
    extensions = json.loads(body)["extensions"]
    assert "statistics" in extensions and not {"system_shared_memory", "cuda_shared_memory", "generate"} & set(
        extensions
    )
    status, body, _ = await call("POST", "/v2/repository/index", b'{"ready": true}')
    assert status == 200 and json.loads(body)[0]["name"] == "identity"
    load = {"parameters": {"config": "{}", "file:1/model.py": "eA=="}}
    assert (await call("POST", "/v2/repository/models/m/load", json.dumps(load).encode()))[:2] == (200, b"")
    assert (await call("POST", "/v2/repository/models/m/unload", b'{"parameters": {"unload_dependents": true}}'))[
        0
    ] == 200
    assert ("load", "m", "{}", {"1/model.py": b"x"}) in agent.calls and ("unload", "m", True) in agent.calls

    for method, path in (
        ("POST", "/v2/systemsharedmemory/region/r/register"),
        ("GET", "/v2/cudasharedmemory/status"),
        ("POST", "/v2/trace/setting"),
        ("GET", "/v2/models/identity/trace/setting"),
        ("GET", "/v2/logging"),
    ):
        status, body, _ = await call(method, path, b"{}" if method == "POST" else b"")
        assert status == 501 and b"not available through Ray Serve" in body, (path, body)
    shm = {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "parameters": {"shared_memory_region": "r"}}
    status, body, _ = await call("POST", "/v2/models/identity/infer", json.dumps({"inputs": [shm]}).encode())
    assert status == 501 and b"shared memory is not available through Ray Serve" in body


async def _grpc_checks(methods: GrpcAdapter, agent: FakeAgent) -> None:
    context = Context()
    response = await methods.ModelInfer(_grpc_infer(), context)
    assert context.code is None and response.id == "g1"
    assert np.frombuffer(response.raw_output_contents[0], np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]
    context = Context()
    assert await methods.ModelInfer(_grpc_infer("nope"), context) == pb.ModelInferResponse()
    assert context.code == grpc.StatusCode.NOT_FOUND and "unknown model: 'nope'" in context.details

    async def stream() -> Any:
        for model in ("identity", "nope", "identity"):
            yield _grpc_infer(model)

    answers = [message async for message in methods.ModelStreamInfer(stream(), Context())]
    assert [bool(a.error_message) for a in answers] == [False, True, False]
    assert answers[0].infer_response.id == "g1" and "unknown model" in answers[1].error_message

    agent.cluster_ready = False
    assert (await methods.ServerReady(pb.ServerReadyRequest(), Context())).ready is False
    check = await methods.Check(health_pb2.HealthCheckRequest(), Context())
    assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert (await methods.ModelReady(pb.ModelReadyRequest(name="everywhere"), Context())).ready is True
    stats = await methods.ModelStatistics(pb.ModelStatisticsRequest(name="identity"), Context())
    assert stats.model_stats[0].name == "identity"
    meta = await methods.ServerMetadata(pb.ServerMetadataRequest(), Context())
    assert "system_shared_memory" not in meta.extensions and "statistics" in meta.extensions
    await methods.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="g"), Context())
    assert ("unload", "g", False) in agent.calls

    for rpc, request in (
        ("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(name="r", key="/r", byte_size=64)),
        ("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name="r")),
        ("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest()),
        ("TraceSetting", pb.TraceSettingRequest()),
        ("LogSettings", pb.LogSettingsRequest()),
    ):
        context = Context()
        answer = await getattr(methods, rpc)(request, context)
        assert context.code == grpc.StatusCode.UNIMPLEMENTED and "not available through Ray Serve" in context.details
        assert answer == type(answer)()
