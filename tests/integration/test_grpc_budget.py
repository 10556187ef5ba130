"""One budget for request bodies in flight over both endpoints (``--max-inflight-request-bytes``).

Black-box: a ``tritium-server`` per gRPC transport (``[frontends.grpc]
transport``, as in test_grpc_transport.py) with HTTP and gRPC on, an 8 MiB
``--max-request-bytes`` and a 24 MiB budget, and a python model that holds
every request until the test opens its gate (a file): three 7 MiB ModelInfer
messages then hold 21 MiB. Whether they are held is seen from outside: a
4 MiB probe to a model that does not exist is answered NOT_FOUND (it fits, and
its bytes go back before the server turns to another call) until they are,
UNAVAILABLE (the budget's answer) once they are. No timed assertion: every
wait is a poll with a generous bound.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from tests.integration.test_grpc_transport import TRANSPORTS
from tests.support.clients import declare_body, read_reply, wait_grpc_ready
from tests.support.repo import add_model
from tests.support.server import ServerProcess, transport_plugins

LIMIT = 8 << 20  # --max-request-bytes
BUDGET = 24 << 20  # --max-inflight-request-bytes: three 7 MiB messages fit, a fourth does not
BIG = 7 << 20  # bytes of tensor data in a large message
PROBE = 4 << 20  # fits beside two large messages held (18 MiB), not beside three (25 MiB)
REFUSED = f"the server holds {BUDGET} bytes of request bodies already; retry later"
UNKNOWN = "Request for unknown model: 'nope' is not found"
WAIT_S = 60.0  # the bound of every poll

GATED = """
import os
import time

import triton_python_backend_utils as pb_utils

GATE = {gate!r}


class TritonPythonModel:
    def execute(self, requests):
        deadline = time.monotonic() + 120
        while not os.path.exists(GATE) and time.monotonic() < deadline:
            time.sleep(0.01)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
"""
GATED_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


class Gate:
    """The file the gated model waits for: closed, requests are held; open, they are answered."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> None:
        self.path.touch()

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=TRANSPORTS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp(f"grpc_budget_{request.param}")
    repo = tmp / "models"
    add_model(repo, "gated", GATED_CONFIG, files={"1/model.py": GATED.format(gate=str(tmp / "gate"))})
    # three instances: three requests all execute at once (none waits in the scheduler's queue,
    # where a cancelled request would be dropped and give its bytes back at once)
    add_model(
        repo,
        "gated_wide",
        GATED_CONFIG.replace("count: 1", "count: 3"),
        files={"1/model.py": GATED.format(gate=str(tmp / "gate"))},
    )
    proc = ServerProcess(
        [repo],
        [f"--max-request-bytes={LIMIT}", f"--max-inflight-request-bytes={BUDGET}", "--allow-metrics=false"],
        log_path=tmp / "server.log",
        env=transport_plugins(tmp, request.param),
    )
    proc.start()
    proc.gate = Gate(tmp / "gate")  # type: ignore[attr-defined]
    try:
        wait_grpc_ready(proc)
        yield proc
    finally:
        proc.gate.open()  # type: ignore[attr-defined]  # nothing stays held at shutdown
        assert proc.stop() == 0
    assert "calls not released" not in proc.log()  # the native transport's leak check at shutdown


@pytest.fixture
def gate(server: ServerProcess) -> Iterator[Gate]:
    """The server's gate, closed for the test (and opened after it, so that nothing stays held)."""
    gate: Gate = server.gate  # type: ignore[attr-defined]
    gate.close()
    try:
        yield gate
    finally:
        gate.open()


@pytest.fixture
def stub(server: ServerProcess) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(server.grpc_url, options=options) as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def message(model: str, data: bytes, request_id: str = "") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    request.inputs.add(name="INPUT0", datatype="UINT8", shape=[len(data)])
    request.raw_input_contents.append(data)
    return request


def tensor(seed: int, size: int = BIG) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, np.uint8).tobytes()


def probe(stub: Any) -> tuple[grpc.StatusCode, str]:
    """A PROBE-byte ModelInfer to a model that does not exist: its status and details."""
    try:
        stub.ModelInfer(message("nope", bytes(PROBE)), timeout=60)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    raise AssertionError("a model that does not exist answered")


def poll(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"not seen within {WAIT_S} s: {what}"
        time.sleep(0.05)


def wait_full(stub: Any) -> None:
    """Wait until the budget holds three large messages: the probe is refused with the budget's message."""
    poll(lambda: probe(stub) == (grpc.StatusCode.UNAVAILABLE, REFUSED), "the probe refused")


def wait_free(stub: Any) -> None:
    """Wait until the probe fits again (NOT_FOUND)."""
    poll(lambda: probe(stub) == (grpc.StatusCode.NOT_FOUND, UNKNOWN), "the probe let through")


def refusal(stub: Any, request: pb.ModelInferRequest) -> tuple[grpc.StatusCode, str]:
    """The status and details of a ModelInfer that must fail."""
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request, timeout=60)
    return info.value.code(), info.value.details()


def test_model_infer_over_the_budget_is_unavailable_and_the_budget_comes_back(stub: Any, gate: Gate) -> None:
    for round_ in range(2):  # the second round finds the whole budget free again
        data = [tensor(10 * round_ + i) for i in range(3)]
        held = [stub.ModelInfer.future(message("gated", d, f"r{round_}-{i}"), timeout=120) for i, d in enumerate(data)]
        wait_full(stub)
        for extra in range(2):  # past the budget: refused at once, while the three are held
            over = message("gated", tensor(99), f"over{extra}")
            assert refusal(stub, over) == (grpc.StatusCode.UNAVAILABLE, REFUSED)
        gate.open()
        for i, (future, d) in enumerate(zip(held, data)):
            response = future.result(timeout=120)
            assert (response.id, response.raw_output_contents[0]) == (f"r{round_}-{i}", d)
        wait_free(stub)
        gate.close()


def test_a_refused_stream_request_gets_the_message_and_the_stream_goes_on(
    server: ServerProcess, stub: Any, gate: Gate
) -> None:
    sent: queue.Queue[pb.ModelInferRequest | None] = queue.Queue()

    def requests() -> Iterator[pb.ModelInferRequest]:
        while (item := sent.get(timeout=120)) is not None:
            yield item

    data = [tensor(20 + i) for i in range(3)]
    for i, d in enumerate(data):
        sent.put(message("gated", d, f"s{i}"))
    responses = stub.ModelStreamInfer(requests(), timeout=120)
    wait_full(stub)  # the stream's three requests are held
    refused_before = server.log().count("gRPC: a stream request was refused")
    sent.put(message("gated", tensor(23), "s3"))
    poll(lambda: server.log().count("gRPC: a stream request was refused") > refused_before, "s3 refused")
    gate.open()
    small = tensor(24, 1000)
    sent.put(message("gated", small, "s4"))
    sent.put(None)
    got = [(r.error_message, r.infer_response.id, r.infer_response.raw_output_contents) for r in responses]
    expected_data = [*data, None, small]
    assert [g[:2] for g in got] == [("", "s0"), ("", "s1"), ("", "s2"), (REFUSED, "s3"), ("", "s4")]  # in order
    for (_, _, raws), d in zip(got, expected_data):
        assert list(raws) == ([] if d is None else [d])
    wait_free(stub)


def test_http_bodies_and_grpc_messages_share_the_budget(server: ServerProcess, stub: Any, gate: Gate) -> None:
    # HTTP bodies declared and not sent hold the whole budget: gRPC is refused
    bodies = [declare_body(server, "/v2/repository/models/up/load", LIMIT) for _ in range(BUDGET // LIMIT)]
    try:
        wait_full(stub)
        small = message("gated", b"\1" * 16)
        assert refusal(stub, small) == (grpc.StatusCode.UNAVAILABLE, REFUSED)
    finally:
        for sock in bodies:
            sock.close()
    wait_free(stub)  # the abandoned bodies are given back at once

    # gRPC messages held by the model: an HTTP body is refused
    data = [tensor(30 + i) for i in range(3)]
    held = [stub.ModelInfer.future(message("gated", d), timeout=120) for d in data]
    wait_full(stub)
    head, body = read_reply(declare_body(server, "/v2/repository/models/up/load", PROBE))
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n") and b"\r\nRetry-After: 1\r\n" in head
    assert json.loads(body) == {"error": REFUSED}
    gate.open()
    assert [f.result(timeout=120).raw_output_contents[0] for f in held] == data
    wait_free(stub)


def test_cancelled_calls_hold_their_bytes_until_the_model_is_done_then_give_them_back(stub: Any, gate: Gate) -> None:
    """Cancelled while their model executes them (it sees ``is_cancelled()``), requests keep their
    bytes until it is done with their tensors."""
    held = [stub.ModelInfer.future(message("gated_wide", tensor(40 + i)), timeout=120) for i in range(3)]
    wait_full(stub)
    for future in held:
        future.cancel()
    assert all(future.cancelled() for future in held)
    assert probe(stub) == (grpc.StatusCode.UNAVAILABLE, REFUSED)  # the model still holds their tensors
    gate.open()
    wait_free(stub)
    gate.close()

    # a stream cancelled while its requests are held
    sent: queue.Queue[pb.ModelInferRequest | None] = queue.Queue()
    for i in range(3):
        sent.put(message("gated_wide", tensor(50 + i), f"c{i}"))
    stream = stub.ModelStreamInfer(iter(sent.get, None), timeout=120)
    wait_full(stub)
    stream.cancel()
    sent.put(None)  # the client's sending thread ends
    gate.open()
    wait_free(stub)
