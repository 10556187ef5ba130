"""The gRPC endpoint's transports under load and abuse: native (gRPC C++) and the grpc.aio fallback.

Black-box: ``tritium-server`` subprocesses with ``[frontends.grpc] transport``
forced in a plugins.toml of the test, driven with ``tritonclient.grpc`` and
raw grpcio channels. Most cases run on both transports; a few are about the
native one only (its shutdown, its leak check, its error answers). Every
other gRPC suite runs on the default transport (native wherever it is built).
"""

from __future__ import annotations

import asyncio
import gzip
import os
import queue
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from tests.support.clients import wait_grpc_ready
from tests.support.grpc_transport import endpoints_cell, transport_line
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess


def _native_unavailable() -> str:
    """Why the native transport cannot load here ("" when it can), asked in a subprocess.

    (tritium's generated protobuf modules stay out of this process, which uses tritonclient's.)
    """
    code = "from tritium.frontends.kserve_grpc import load_native_transport; print(load_native_transport()[1])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.strip()


_REASON = _native_unavailable()
NATIVE_BUILT = not _REASON
NOT_BUILT = f"the native transport is not built: {_REASON}"
LIMIT = 20 << 20  # --max-request-bytes of the module servers: 16 MiB passes, 21 MiB does not


def slow_config(delay_ms: int, count: int = 1) -> str:
    """An identity model (FP32 [-1]) that takes ``delay_ms`` per request."""
    return identity_config(
        dims="[ -1 ]",
        max_batch_size=0,
        count=count,
        extra=f'parameters {{ key: "execute_delay_ms" value {{ string_value: "{delay_ms}" }} }}',
    )


PLUGINS = """
[frontends.grpc]
enabled = true
transport = "{transport}"
"""

TRANSPORTS = [
    pytest.param("native", marks=pytest.mark.skipif(not NATIVE_BUILT, reason=NOT_BUILT)),
    "aio",
]


def build_repository(repo: Path) -> None:
    add_model(repo, "identity", identity_config(dims="[ -1 ]", max_batch_size=0))
    add_model(repo, "slow", slow_config(300, count=2))


def grpc_server(
    tmp: Path,
    transport: str,
    args: tuple[str, ...] = (),
    models: Callable[[Path], None] = build_repository,
    plugins_extra: str = "",
) -> ServerProcess:
    """A gRPC-only server with ``transport`` forced, on a repository that ``models`` builds."""
    repo = tmp / "models"
    repo.mkdir()
    models(repo)
    plugins = tmp / f"plugins-{transport}.toml"
    plugins.write_text(PLUGINS.format(transport=transport) + plugins_extra)
    server = ServerProcess(
        [repo],
        ["--allow-http=false", "--allow-metrics=false", *args],
        log_path=tmp / f"server-{transport}-{time.monotonic_ns()}.log",
        env={"TRITIUM_PLUGINS": str(plugins)},
    )
    server.start(wait_ready=False)
    wait_grpc_ready(server)
    return server


@pytest.fixture(scope="module", params=TRANSPORTS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = grpc_server(
        tmp_path_factory.mktemp(f"grpc_{request.param}"), request.param, (f"--max-request-bytes={LIMIT}",)
    )
    proc.transport = request.param  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        assert proc.stop() == 0
    assert "calls not released" not in proc.log()  # the native transport's leak check at shutdown


def fp32(data: np.ndarray) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return tensor


def infer_request(model: str, data: np.ndarray, request_id: str = "") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    request.inputs.add(name="INPUT0", datatype="FP32", shape=list(data.shape))
    request.raw_input_contents.append(data.astype(np.float32).tobytes())
    return request


def open_fds(server: ServerProcess) -> int:
    assert server.proc is not None
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


# -- both transports ---------------------------------------------------------------------------------
def test_the_transport_asked_for_is_used(server: ServerProcess) -> None:
    setting = server.transport  # type: ignore[attr-defined]
    expected = "native (gRPC C++" if setting == "native" else "grpc.aio"
    assert f"gRPC transport: {expected}" in server.log()
    # the start-up table says it too, under the endpoint's address, with the version and why
    line = transport_line(setting)
    assert line.startswith(expected)
    assert endpoints_cell(server.log()) == [f"grpc 127.0.0.1:{server.grpc_port}", f"transport: {line}"]
    assert f"gRPC transport: {line}\n" in server.log()


def test_many_concurrent_calls(server: ServerProcess) -> None:
    async def run() -> None:
        async with grpc.aio.insecure_channel(server.grpc_url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)

            async def one(i: int) -> None:
                if i % 5 == 0:
                    assert (await stub.ServerReady(pb.ServerReadyRequest(), timeout=60)).ready is True
                    return
                data = np.arange(i % 7 + 1, dtype=np.float32) * i
                response = await stub.ModelInfer(infer_request("identity", data, f"c{i}"), timeout=60)
                assert response.id == f"c{i}"
                assert response.raw_output_contents[0] == data.tobytes()

            await asyncio.gather(*(one(i) for i in range(400)))

    asyncio.run(run())


def test_a_stream_with_many_messages(server: ServerProcess) -> None:
    def requests() -> Iterator[pb.ModelInferRequest]:
        for i in range(300):
            yield infer_request("nope" if i == 150 else "identity", np.full(i % 5 + 1, i, np.float32), f"s{i}")

    with grpc.insecure_channel(server.grpc_url) as channel:
        responses = list(service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(requests(), timeout=120))
    assert [r.infer_response.id for r in responses] == [f"s{i}" for i in range(300)]  # in request order
    for i, response in enumerate(responses):
        if i == 150:
            assert response.error_message == "Request for unknown model: 'nope' is not found"
        else:
            assert response.error_message == ""
            assert response.infer_response.raw_output_contents[0] == np.full(i % 5 + 1, i, np.float32).tobytes()


def test_16_mib_both_ways(server: ServerProcess) -> None:
    data = np.random.default_rng(16).random(4 << 20, dtype=np.float32)  # 16 MiB
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        result = client.infer("identity", [fp32(data)], request_id="big")
    finally:
        client.close()
    assert result.get_response().id == "big"
    assert np.array_equal(result.as_numpy("OUTPUT0"), data)


def test_a_message_over_the_limit_is_refused_and_the_server_goes_on(server: ServerProcess) -> None:
    big = infer_request("identity", np.zeros((LIMIT >> 2) + 1024, np.float32))
    with grpc.insecure_channel(server.grpc_url, options=[("grpc.max_send_message_length", -1)]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for call in (stub.ModelInfer, lambda r, timeout: list(stub.ModelStreamInfer(iter([r]), timeout=timeout))):
            with pytest.raises(grpc.RpcError) as info:
                call(big, timeout=60)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f" vs. {LIMIT})" in info.value.details()
        small = np.ones(4, np.float32)
        assert stub.ModelInfer(infer_request("identity", small), timeout=60).raw_output_contents[0] == small.tobytes()


def test_cancelled_and_disconnected_calls_leave_nothing_behind(server: ServerProcess) -> None:
    data = np.ones(4, np.float32)
    with grpc.insecure_channel(server.grpc_url) as channel:  # warm: the connection's own descriptors
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(infer_request("identity", data), timeout=60)
    baseline = open_fds(server)

    async def cancel_some() -> None:
        async with grpc.aio.insecure_channel(server.grpc_url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            calls = [stub.ModelInfer(infer_request("slow", data), timeout=60) for _ in range(6)]
            stream = stub.ModelStreamInfer(timeout=60)
            await stream.write(infer_request("slow", data, "in-stream"))
            await asyncio.sleep(0.1)  # the calls are in the server
            for call in (*calls, stream):
                call.cancel()
            for call in (*calls, stream):
                assert await call.code() == grpc.StatusCode.CANCELLED

    asyncio.run(cancel_some())
    for _ in range(4):  # disconnects: the client goes away without a word
        channel = grpc.insecure_channel(server.grpc_url)
        future = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer.future(
            infer_request("slow", data), timeout=60
        )
        time.sleep(0.05)
        channel.close()
        with pytest.raises(grpc.RpcError):
            future.result()
    with grpc.insecure_channel(server.grpc_url) as channel:  # the server goes on
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ModelInfer(infer_request("slow", data, "after"), timeout=60).id == "after"
    deadline = time.monotonic() + 20
    while open_fds(server) > baseline and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_fds(server) <= baseline


def test_compressed_requests(server: ServerProcess) -> None:
    # (the native transport inflates them itself: an empty tensor, one step, and 4 MB over several)
    rng = np.random.default_rng(7)
    tensors = [np.zeros(0, np.float32), np.arange(100_000, dtype=np.float32)]
    tensors.append(rng.integers(0, 16, 1_000_000).astype(np.float32))
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        for algorithm in ("gzip", "deflate"):
            for data in tensors:
                result = client.infer("identity", [fp32(data)], compression_algorithm=algorithm)
                assert np.array_equal(result.as_numpy("OUTPUT0"), data)
    finally:
        client.close()


#: what each transport answers for a compressed message that does not inflate (grpc.aio: grpcio's core)
CORRUPT = {
    "native": {
        "garbage": "Decompression failed due to data error",
        "truncated": "Decompression failed due to data error",
    },
    "aio": {"garbage": "Decompression failed due to zlib error", "truncated": "Decompression failed due to data error"},
}


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_corrupt_compressed_messages_are_internal_errors(server: ServerProcess, encoding: str) -> None:
    from tests.support.raw_grpc import raw_call

    method = "/inference.GRPCInferenceService/ModelInfer"
    port = int(server.grpc_url.rsplit(":", 1)[1])
    message = infer_request("identity", np.arange(4, dtype=np.float32), "ok").SerializeToString()
    packed = gzip.compress(message) if encoding == "gzip" else zlib.compress(message)
    expected = CORRUPT[server.transport]  # type: ignore[attr-defined]
    for case, payload in (("garbage", b"\x00 not compressed data"), ("truncated", packed[:-6])):
        answer = raw_call(port, method, payload, encoding)
        assert (answer["grpc-status"], answer["grpc-message"]) == ("13", expected[case]), case
    assert raw_call(port, method, packed, encoding)["grpc-status"] == "0"  # the same message, whole
    with grpc.insecure_channel(server.grpc_url) as channel:  # and the server goes on
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert (
            stub.ModelInfer(infer_request("identity", np.arange(4, dtype=np.float32), "after"), timeout=60).id
            == "after"
        )


def test_compressed_stream_requests(server: ServerProcess) -> None:
    results: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    sent = [np.arange(n, dtype=np.float32) for n in (3, 300_000)]
    try:
        client.start_stream(lambda result, error: results.put((result, error)), compression_algorithm="gzip")
        for i, data in enumerate(sent):
            client.async_stream_infer("identity", [fp32(data)], request_id=str(i))
        for i, data in enumerate(sent):
            result, error = results.get(timeout=30)
            assert error is None
            assert result.get_response().id == str(i)
            assert np.array_equal(result.as_numpy("OUTPUT0"), data)
        client.stop_stream()
    finally:
        client.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_shutdown_lets_calls_in_flight_finish(tmp_path: Path, transport: str) -> None:
    proc = grpc_server(tmp_path, transport, models=lambda repo: add_model(repo, "slow", slow_config(200)))
    try:
        data = np.arange(4, dtype=np.float32)
        client = grpcclient.InferenceServerClient(proc.grpc_url)
        results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        for i in range(4):
            client.async_infer(
                "slow",
                [fp32(data + i)],
                callback=lambda result, error: results.put((result, error)),
                request_id=f"u{i}",
            )
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        client.async_stream_infer("slow", [fp32(data + 10)], request_id="st")
        time.sleep(0.15)  # all in the server; the model takes 200 ms per request, one at a time
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        got = {}
        for _ in range(5):
            result, error = results.get(timeout=60)
            assert error is None
            got[result.get_response().id] = result.as_numpy("OUTPUT0")
        client.stop_stream()
        client.close()
        assert sorted(got) == ["st", "u0", "u1", "u2", "u3"]
        assert np.array_equal(got["st"], data + 10) and np.array_equal(got["u3"], data + 3)
        assert proc.wait_exit(60) == 0
    finally:
        proc.stop()
    assert "calls not released" not in proc.log()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_channel_arguments_from_plugins_toml(tmp_path: Path, transport: str) -> None:
    options = '[frontends.grpc.options]\n"grpc.max_receive_message_length" = 1000\n'
    proc = grpc_server(
        tmp_path,
        transport,
        models=lambda repo: add_model(repo, "identity", identity_config(dims="[ -1 ]", max_batch_size=0)),
        plugins_extra=options,
    )
    try:
        with grpc.insecure_channel(proc.grpc_url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            assert stub.ModelInfer(infer_request("identity", np.ones(100, np.float32)), timeout=30).outputs
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(infer_request("identity", np.ones(300, np.float32)), timeout=30)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert info.value.details().endswith(" vs. 1000)")
    finally:
        assert proc.stop() == 0


# -- the native transport --------------------------------------------------------------------------
native_only = pytest.mark.skipif(not NATIVE_BUILT, reason=NOT_BUILT)


@native_only
def test_native_shutdown_cancels_calls_that_outlast_the_grace_period(tmp_path: Path) -> None:
    # no drain (--exit-timeout-secs=0), then the endpoint's grace period (1 s) passes, well before the model answers
    proc = grpc_server(
        tmp_path, "native", ("--exit-timeout-secs=0",), lambda repo: add_model(repo, "very_slow", slow_config(2500))
    )
    try:
        channel = grpc.insecure_channel(proc.grpc_url)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        future = stub.ModelInfer.future(infer_request("very_slow", np.ones(4, np.float32)), timeout=60)
        time.sleep(0.3)
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        with pytest.raises(grpc.RpcError) as info:
            future.result(timeout=30)
        assert info.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        channel.close()
        assert proc.wait_exit(60) == 0
    finally:
        proc.stop()
    assert "calls not released" not in proc.log()


@native_only
def test_native_answers_unknown_methods_and_undecodable_messages(tmp_path: Path) -> None:
    proc = grpc_server(tmp_path, "native", models=lambda repo: None)
    try:
        with grpc.insecure_channel(proc.grpc_url) as channel:
            raw = lambda method: channel.unary_unary(method, request_serializer=None, response_deserializer=None)  # noqa: E731
            with pytest.raises(grpc.RpcError) as info:
                raw("/inference.GRPCInferenceService/NoSuchMethod")(b"", timeout=30)
            assert (info.value.code(), info.value.details()) == (grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            with pytest.raises(grpc.RpcError) as info:
                raw("/inference.GRPCInferenceService/ModelMetadata")(b"\x0a\xff", timeout=30)  # a length past the end
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert info.value.details().startswith("malformed ModelMetadataRequest: ")
            ready = raw("/inference.GRPCInferenceService/ServerReady")(b"", timeout=30)
            assert pb.ServerReadyResponse.FromString(ready).ready is True
    finally:
        assert proc.stop() == 0


def test_an_unknown_transport_setting_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    plugins = tmp_path / "plugins.toml"
    plugins.write_text(PLUGINS.format(transport="fast"))
    proc = ServerProcess(
        [tmp_path / "models"],
        ["--allow-http=false", "--allow-metrics=false"],
        log_path=tmp_path / "server.log",
        env={"TRITIUM_PLUGINS": str(plugins)},
    )
    proc.start(wait_ready=False)
    try:
        assert proc.wait_exit(60) != 0
    finally:
        proc.stop()
    assert "[frontends.grpc] transport = 'fast': expected one of auto, native, aio" in proc.log()


@native_only
def test_the_default_transport_is_native_where_it_is_built(tmp_path: Path) -> None:
    proc = grpc_server(tmp_path, "auto", models=lambda repo: None)
    try:
        assert "gRPC transport: native (gRPC C++" in proc.log()
    finally:
        proc.stop()
