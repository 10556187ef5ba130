"""gRPC endpoint, everything but tensor round trips: health, metadata, configuration, statistics,
streaming, the asyncio client, unimplemented extensions, start-up and shutdown.

Black-box: one tritium-server subprocess for the module (HTTP off, so only the gRPC endpoint
is exercised), driven with ``tritonclient.grpc`` (sync, aio and streaming) and the generated
stub. Expected answers are Triton 2.51's (/work/ref/REPORT.md).
"""

from __future__ import annotations

import asyncio
import queue
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server, wait_grpc_ready
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

EXTENSIONS = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "generate",
    "trace",
    "logging",
]

SLOW = identity_config(extra='parameters { key: "execute_delay_ms" value { string_value: "400" } }')


def build_repository(root: Path) -> None:
    add_model(root, "identity_fp32", identity_config())
    add_model(root, "identity_nobatch", identity_config(dims="[ 2, 3 ]", max_batch_size=0))
    add_model(root, "identity_bytes", identity_config(dtype="TYPE_STRING", dims="[ -1 ]", max_batch_size=0))
    add_model(root, "stats_model", identity_config())
    add_model(
        root,
        "two_versions",
        identity_config(dims="[ 4 ]", max_batch_size=0, extra="version_policy: { all { } }"),
        versions=(1, 2),
    )
    add_model(root, "two_versions_latest", identity_config(dims="[ 4 ]", max_batch_size=0), versions=(1, 2))
    add_model(root, "decoupled", identity_config(extra="model_transaction_policy { decoupled: true }"))
    add_model(root, "slow", SLOW)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("grpc_service")
    yield from module_server(root, build_repository, ["--allow-http=false"], grpc_only=True)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    ch = grpc.insecure_channel(server.grpc_url)
    yield ch
    ch.close()


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> service_pb2_grpc.GRPCInferenceServiceStub:
    return service_pb2_grpc.GRPCInferenceServiceStub(channel)


def fp32_input(data: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return tensor


def rpc_error(call: Any, *args: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=30)
    return info.value.code(), info.value.details()


def as_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


# -- health ------------------------------------------------------------------------------------------
def test_server_live_and_ready(
    client: grpcclient.InferenceServerClient, stub: service_pb2_grpc.GRPCInferenceServiceStub
) -> None:
    assert client.is_server_live() is True
    assert client.is_server_ready() is True
    assert stub.ServerLive(pb.ServerLiveRequest()) == pb.ServerLiveResponse(live=True)
    assert stub.ServerReady(pb.ServerReadyRequest()) == pb.ServerReadyResponse(ready=True)


@pytest.mark.parametrize("service", [b"", b"inference.GRPCInferenceService"])
def test_health_check_serving(channel: grpc.Channel, service: bytes) -> None:
    # grpc.health.v1.Health/Check, encoded by hand: HealthCheckRequest{service=1}, HealthCheckResponse{status=1}
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    request = (b"\x0a" + bytes([len(service)]) + service) if service else b""
    assert check(request, timeout=30) == b"\x08\x01"  # status: SERVING


@pytest.mark.parametrize(
    ("name", "version", "ready"),
    [
        ("identity_fp32", "", True),
        ("identity_fp32", "1", True),
        ("identity_fp32", "3", False),
        ("two_versions", "1", True),
        ("two_versions", "2", True),
        ("two_versions_latest", "1", False),
        ("two_versions_latest", "2", True),
        ("nope", "", False),
        ("", "", False),
    ],
)
def test_model_ready(stub: service_pb2_grpc.GRPCInferenceServiceStub, name: str, version: str, ready: bool) -> None:
    assert stub.ModelReady(pb.ModelReadyRequest(name=name, version=version)).ready is ready


def test_model_ready_bad_version(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    assert rpc_error(stub.ModelReady, pb.ModelReadyRequest(name="identity_fp32", version="abc")) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "failed to get model version from specified version string 'abc' (details: stol), "
        "version should be an integral value > 0",
    )


# -- metadata --------------------------------------------------------------------------------------
def test_server_metadata(client: grpcclient.InferenceServerClient) -> None:
    from tritium import __version__

    metadata = client.get_server_metadata()
    assert metadata == pb.ServerMetadataResponse(name="tritium", version=__version__, extensions=EXTENSIONS)


def _tensor(name: str, datatype: str, shape: list[int]) -> pb.ModelMetadataResponse.TensorMetadata:
    return pb.ModelMetadataResponse.TensorMetadata(name=name, datatype=datatype, shape=shape)


@pytest.mark.parametrize(
    ("name", "version", "versions", "datatype", "shape"),
    [
        ("identity_fp32", "", ["1"], "FP32", [-1, 16]),
        ("identity_fp32", "1", ["1"], "FP32", [-1, 16]),
        ("identity_bytes", "", ["1"], "BYTES", [-1]),
        ("identity_nobatch", "", ["1"], "FP32", [2, 3]),
        ("two_versions", "", ["1", "2"], "FP32", [4]),
        ("two_versions", "1", ["1"], "FP32", [4]),
        ("two_versions_latest", "", ["2"], "FP32", [4]),
    ],
)
def test_model_metadata(
    client: grpcclient.InferenceServerClient,
    name: str,
    version: str,
    versions: list[str],
    datatype: str,
    shape: list[int],
) -> None:
    assert client.get_model_metadata(name, version) == pb.ModelMetadataResponse(
        name=name,
        versions=versions,
        platform="identity",
        inputs=[_tensor("INPUT0", datatype, shape)],
        outputs=[_tensor("OUTPUT0", datatype, shape)],
    )


UNKNOWN_MODEL_CASES = [
    ("nope", "", grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'nope' is not found"),
    ("", "", grpc.StatusCode.NOT_FOUND, "Request for unknown model: '' is not found"),
    (
        "identity_fp32",
        "3",
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'identity_fp32' version 3 is not found",
    ),
    (
        "two_versions_latest",
        "1",
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'two_versions_latest' version 1 is not found",
    ),
    (
        "identity_fp32",
        "abc",
        grpc.StatusCode.INVALID_ARGUMENT,
        "failed to get model version from specified version string 'abc' (details: stol), "
        "version should be an integral value > 0",
    ),
    (
        "identity_fp32",
        "-1",
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid model version specified '-1' , version should be an integral value > 0",
    ),
]


@pytest.mark.parametrize(("name", "version", "code", "message"), UNKNOWN_MODEL_CASES)
def test_model_metadata_errors(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, name: str, version: str, code: grpc.StatusCode, message: str
) -> None:
    assert rpc_error(stub.ModelMetadata, pb.ModelMetadataRequest(name=name, version=version)) == (code, message)


@pytest.mark.parametrize(("name", "version", "code", "message"), UNKNOWN_MODEL_CASES)
def test_model_config_errors(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, name: str, version: str, code: grpc.StatusCode, message: str
) -> None:
    assert rpc_error(stub.ModelConfig, pb.ModelConfigRequest(name=name, version=version)) == (code, message)


# -- configuration ------------------------------------------------------------------------------------
def test_model_config(client: grpcclient.InferenceServerClient) -> None:
    config = client.get_model_config("identity_fp32").config
    assert as_dict(config) == {
        "name": "identity_fp32",
        "backend": "identity",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": 8,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": ["16"]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": ["16"]}],
        "instance_group": [{"name": "identity_fp32_0", "kind": "KIND_CPU", "count": 1}],
        "optimization": {"input_pinned_memory": {"enable": True}, "output_pinned_memory": {"enable": True}},
    }
    assert client.get_model_config("identity_fp32", "1") == client.get_model_config("identity_fp32")


def test_model_config_of_each_version(client: grpcclient.InferenceServerClient) -> None:
    for version in ("1", "2"):
        config = client.get_model_config("two_versions", version).config
        assert (config.name, config.max_batch_size, list(config.input[0].dims)) == ("two_versions", 0, [4])
        assert config.version_policy.WhichOneof("policy_choice") == "all"


# -- statistics -------------------------------------------------------------------------------------
def test_model_statistics(client: grpcclient.InferenceServerClient) -> None:
    before = client.get_inference_statistics("stats_model").model_stats[0]
    assert (before.name, before.version, before.inference_count, before.execution_count) == ("stats_model", "1", 0, 0)
    one = np.zeros((1, 16), dtype=np.float32)
    for data in (one, one, np.zeros((2, 16), dtype=np.float32)):
        client.infer("stats_model", [fp32_input(data)])
    with pytest.raises(InferenceServerException):  # rejected before it reaches the model: not counted
        client.infer("stats_model", [fp32_input(np.zeros((1, 15), dtype=np.float32))])

    response = client.get_inference_statistics("stats_model", "1")
    assert len(response.model_stats) == 1
    stats = response.model_stats[0]
    assert (stats.name, stats.version, stats.inference_count, stats.execution_count) == ("stats_model", "1", 4, 3)
    assert stats.last_inference > 1_600_000_000_000  # milliseconds since the epoch
    inference = stats.inference_stats
    for field in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        assert getattr(inference, field).count == 3, field
    assert inference.success.ns > 0
    assert (inference.fail.count, inference.cache_hit.count, inference.cache_miss.count) == (0, 0, 0)
    assert inference.HasField("fail") and inference.HasField("cache_hit")  # present though empty, as in Triton
    assert [(b.batch_size, b.compute_infer.count) for b in stats.batch_stats] == [(1, 2), (2, 1)]


def test_model_statistics_all_models_and_versions(client: grpcclient.InferenceServerClient) -> None:
    every = client.get_inference_statistics()
    assert [(s.name, s.version) for s in every.model_stats] == [
        ("decoupled", "1"),
        ("identity_bytes", "1"),
        ("identity_fp32", "1"),
        ("identity_nobatch", "1"),
        ("slow", "1"),
        ("stats_model", "1"),
        ("two_versions", "1"),
        ("two_versions", "2"),
        ("two_versions_latest", "2"),
    ]
    versions = client.get_inference_statistics("two_versions").model_stats
    assert [s.version for s in versions] == ["1", "2"]


@pytest.mark.parametrize(
    ("name", "version", "message"),
    [
        ("nope", "", "requested model 'nope' is not available"),
        ("identity_fp32", "3", "requested model version is not available for model 'identity_fp32'"),
    ],
)
def test_model_statistics_errors(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, name: str, version: str, message: str
) -> None:
    assert rpc_error(stub.ModelStatistics, pb.ModelStatisticsRequest(name=name, version=version)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
    )


def test_decoupled_model_refuses_model_infer(client: grpcclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer("decoupled", [fp32_input(np.zeros((1, 16), dtype=np.float32))])
    assert (info.value.status(), info.value.message()) == (
        "StatusCode.UNIMPLEMENTED",
        "ModelInfer RPC doesn't support models with decoupled transaction policy",
    )


# -- streaming ------------------------------------------------------------------------------------------
def test_stream_responses_and_errors_in_request_order(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        good = np.arange(16, dtype=np.float32).reshape(1, 16) + 0.5
        client.async_stream_infer("identity_fp32", [fp32_input(good)], request_id="s1")
        client.async_stream_infer("nope", [fp32_input(good)], request_id="s2")
        client.async_stream_infer("identity_fp32", [fp32_input(good[:, :15])], request_id="s3")
        client.async_stream_infer("identity_fp32", [fp32_input(np.stack([good[0], -good[0]]))], request_id="s4")
        got = [results.get(timeout=30) for _ in range(4)]
    finally:
        client.stop_stream()
        client.close()

    result, error = got[0]
    assert error is None
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == ("identity_fp32", "1", "s1")
    assert response.parameters["triton_final_response"].bool_param is True
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT0", "FP32", [1, 16])]
    assert response.raw_output_contents[0] == good.tobytes()

    assert got[1][0] is None
    assert got[1][1].message() == "Request for unknown model: 'nope' is not found"
    assert got[2][0] is None
    assert got[2][1].message() == (
        "[request id: s3] unexpected shape for input 'INPUT0' for model 'identity_fp32'. Expected [-1,16], "
        "got [1,15]. NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to "
        "be prepended to each input shape. If you want to specify the full shape including the batch dim in your "
        "input dims config, try setting max_batch_size to zero. See the model configuration docs for more info "
        "on max_batch_size."
    )
    result, error = got[3]
    assert error is None
    assert result.get_response().id == "s4"
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.stack([good[0], -good[0]]))


def test_stream_error_message_carries_the_request_id(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = pb.ModelInferRequest(model_name="nope", id="s2")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    request.raw_input_contents.append(bytes(64))
    responses = list(stub.ModelStreamInfer(iter([request]), timeout=30))
    assert responses == [
        pb.ModelStreamInferResponse(
            error_message="Request for unknown model: 'nope' is not found",
            infer_response=pb.ModelInferResponse(id="s2"),
        )
    ]


def test_stream_decoupled_model(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = pb.ModelInferRequest(model_name="decoupled", id="d1")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    request.raw_input_contents.append(np.ones(16, dtype=np.float32).tobytes())
    responses = list(stub.ModelStreamInfer(iter([request]), timeout=30))
    assert len(responses) == 1
    response = responses[0]
    assert response.error_message == ""
    assert response.infer_response.id == "d1"
    assert response.infer_response.parameters["triton_final_response"].bool_param is True
    assert response.infer_response.raw_output_contents[0] == np.ones(16, dtype=np.float32).tobytes()


# -- the asyncio client ------------------------------------------------------------------------------------
def test_aio_client_concurrent_requests(server: ServerProcess) -> None:
    async def run() -> None:
        client = aioclient.InferenceServerClient(server.grpc_url)
        try:
            assert await client.is_server_ready() is True
            metadata = await client.get_model_metadata("identity_fp32")
            assert metadata.name == "identity_fp32"

            async def one(i: int) -> None:
                data = np.full((1 + i % 4, 16), i, dtype=np.float32)
                tensor = aioclient.InferInput("INPUT0", list(data.shape), "FP32")
                tensor.set_data_from_numpy(data)
                result = await client.infer("identity_fp32", [tensor], request_id=f"aio-{i}")
                assert result.get_response().id == f"aio-{i}"
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)

            await asyncio.gather(*(one(i) for i in range(24)))
        finally:
            await client.close()

    asyncio.run(run())


def test_client_deadline_cancels_and_the_server_goes_on(client: grpcclient.InferenceServerClient) -> None:
    data = np.ones((1, 16), dtype=np.float32)
    with pytest.raises(InferenceServerException) as info:
        client.infer("slow", [fp32_input(data)], client_timeout=0.1)
    assert info.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    result = client.infer("slow", [fp32_input(data)], client_timeout=30)  # waits behind the abandoned one
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
    result = client.infer("identity_fp32", [fp32_input(data)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


# -- start-up and shutdown -------------------------------------------------------------------------------
def test_log_line_like_triton(server: ServerProcess) -> None:
    assert f"Started GRPCInferenceService at {server.grpc_url}\n" in server.log()  # no "(TLS)": plain


def test_port_in_use_is_an_error(server: ServerProcess, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "identity_fp32", identity_config())
    second = ServerProcess(
        [repo],
        ["--allow-http=false", "--allow-metrics=false", f"--grpc-port={server.grpc_port}"],
        log_path=tmp_path / "second.log",
    )
    second.start(wait_ready=False)
    try:
        assert second.wait_exit(120) != 0
    finally:
        second.stop()
    # found before any model loads (docs/compatibility.md: Triton loads them first)
    assert (
        f"the grpc endpoint's port {server.grpc_port} on 127.0.0.1 is already in use; no model was loaded"
        in second.log()
    )


def test_sigterm_lets_in_flight_requests_finish(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "slow", SLOW)
    proc = ServerProcess([repo], ["--allow-http=false", "--allow-metrics=false"], log_path=tmp_path / "server.log")
    proc.start(wait_ready=False)
    try:
        wait_grpc_ready(proc)
        client = grpcclient.InferenceServerClient(proc.grpc_url)
        results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        data = np.ones((1, 16), dtype=np.float32)
        client.async_infer("slow", [fp32_input(data)], callback=lambda result, error: results.put((result, error)))
        time.sleep(0.15)  # the request is executing (400 ms)
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        result, error = results.get(timeout=30)
        assert error is None
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
        assert proc.wait_exit(60) == 0
        client.close()
    finally:
        proc.stop()
