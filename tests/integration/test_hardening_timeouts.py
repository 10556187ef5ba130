"""Timeouts against slow or silent clients (issue 15's probe; its own module server, short timeouts).

HTTP connections that send nothing, half a head, a head that trickles in or
half a body are closed after the timeout; a busy keep-alive connection is not;
an idle gRPC connection gets a GOAWAY.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.clients import module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

TIMEOUT_S = 2


@pytest.fixture(scope="module")
def short_timeouts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))

    args = [f"--http-{kind}-timeout-secs={TIMEOUT_S}" for kind in ("header", "body", "idle")]
    yield from module_server(
        tmp_path_factory.mktemp("timeouts"), build, [*args, f"--grpc-max-connection-idle-secs={TIMEOUT_S}"]
    )


@pytest.mark.parametrize(
    "sends, trickle",
    [
        (b"", False),  # a keep-alive connection that never sends a request
        (b"GET /v2/health/live HTTP/1.1\r\nHo", False),  # half a head
        (b"GET /v2/health/live HTTP/1.1\r\n", True),  # a head that trickles in, a byte at a time
        (b"POST /v2/models/echo/infer HTTP/1.1\r\nContent-Length: 100\r\n\r\n{", False),  # half a body
    ],
    ids=["idle", "half-head", "slow-head", "half-body"],
)
def test_silent_or_slow_connections_are_closed(short_timeouts: ServerProcess, sends: bytes, trickle: bool) -> None:
    sock = socket.create_connection(("127.0.0.1", short_timeouts.http_port))
    sock.settimeout(0.25)
    sock.sendall(sends)
    started = time.monotonic()
    closed = None
    while closed is None and time.monotonic() - started < 10 * TIMEOUT_S:
        try:
            if trickle:
                sock.sendall(b"X")
            if sock.recv(4096) == b"":
                closed = time.monotonic() - started
        except TimeoutError:
            pass
        except OSError:
            closed = time.monotonic() - started
    sock.close()
    assert closed is not None and closed >= TIMEOUT_S - 0.5
    assert "closing an HTTP connection" in short_timeouts.log()


def test_a_busy_keep_alive_connection_is_not_closed(short_timeouts: ServerProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", short_timeouts.http_port, timeout=30)
    for _ in range(6):  # requests 0.5 s apart: idle, but never for the idle timeout
        conn.request("GET", "/v2/health/live")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        time.sleep(TIMEOUT_S / 4)
    conn.close()


def test_an_idle_grpc_connection_is_closed(short_timeouts: ServerProcess) -> None:
    states: list[grpc.ChannelConnectivity] = []
    with grpc.insecure_channel(short_timeouts.grpc_url) as channel:
        channel.subscribe(states.append)
        call = channel.unary_unary("/inference.GRPCInferenceService/ServerLive")
        call(b"", timeout=30)
        deadline = time.monotonic() + 30 * TIMEOUT_S

        def closed() -> bool:  # READY seen, then IDLE (the subscription's first IDLE may come late)
            seen = list(states)
            ready = grpc.ChannelConnectivity.READY
            return ready in seen and grpc.ChannelConnectivity.IDLE in seen[seen.index(ready) :]

        while time.monotonic() < deadline and not closed():
            time.sleep(0.1)
        channel.unsubscribe(states.append)
    # connected, then the server's GOAWAY after the idle time sends the channel back to IDLE
    assert closed(), states
