"""The OpenAI endpoint bounds its clients as the KServe HTTP endpoint does (issue 15).

One server with an empty repository, the endpoint's ``max_request_bytes`` small, and short
``--http-body-timeout-secs`` / ``--http-idle-timeout-secs``: a declared body over the limit is
413 from its headers, a chunked one is cut off at the limit, a stalled body is 408, an idle
keep-alive connection is closed, and an unknown chat role is a 400 in OpenAI's error shape.
"""

from __future__ import annotations

import json
import socket
import textwrap
import time
from collections.abc import Iterator

import pytest

from tests.support.server import ServerProcess, free_port

LIMIT = 65536
TIMEOUT_S = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("openai_limits")
    (root / "models").mkdir()
    plugins = root / "plugins.toml"
    plugins.write_text(
        textwrap.dedent(f"""
        [frontends.http]
        enabled = true
        [frontends.openai]
        enabled = false
        max_request_bytes = {LIMIT}
    """)
    )
    port = free_port()
    args = [
        f"--openai-port={port}",
        "--openai-address=127.0.0.1",
        "--allow-grpc=false",
        f"--http-body-timeout-secs={TIMEOUT_S}",
        f"--http-idle-timeout-secs={TIMEOUT_S}",
    ]
    proc = ServerProcess([root / "models"], args, log_path=root / "server.log", env={"TRITIUM_PLUGINS": str(plugins)})
    proc.openai_port = port  # type: ignore[attr-defined]
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.openai_port))  # type: ignore[attr-defined]
    sock.settimeout(5 * TIMEOUT_S)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict]:
    """Status and JSON body of one response (read until its Content-Length is complete)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(v) for k, _, v in (line.partition(": ") for line in lines[1:]) if k.lower() == "content-length")
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), json.loads(body)


def error(message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


TOO_LARGE = error(f"Request body too large: Maximum request body size {LIMIT} exceeded.", code="request_too_large")


def test_a_declared_length_over_the_limit_is_413_from_the_headers(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n{" % (LIMIT * 100)
    )
    started = time.monotonic()
    assert read_response(sock) == (413, TOO_LARGE)  # the body is never sent: answered from the headers
    assert time.monotonic() - started < TIMEOUT_S
    sock.close()


def test_expect_100_continue_over_the_limit_is_413_not_an_invitation(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (LIMIT * 100)
    )
    assert read_response(sock) == (413, TOO_LARGE)  # no "100 Continue" first: the body is never sent
    sock.close()


def test_expect_100_continue_under_the_limit_is_invited(server: ServerProcess) -> None:
    body = json.dumps({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}).encode()
    sock = connect(server)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    sock.settimeout(TIMEOUT_S)
    assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
    sock.sendall(body)
    status, answer = read_response(sock)
    assert status == 404 and answer["error"]["code"] == "model_not_found"
    sock.close()


def test_a_chunked_body_is_413_once_past_the_limit(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 16384
    for _ in range(LIMIT // len(piece) + 2):  # past the limit, and the body never ends
        sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))
    assert read_response(sock) == (413, TOO_LARGE)
    sock.close()


def test_a_stalled_body_is_408(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    started = time.monotonic()
    status, body = read_response(sock)
    waited = time.monotonic() - started
    assert (status, body) == (
        408,
        error(
            f"The request body made no progress for {TIMEOUT_S} s (--http-body-timeout-secs).", code="request_timeout"
        ),
    )
    assert TIMEOUT_S - 0.5 <= waited < 4 * TIMEOUT_S
    sock.close()


def test_an_idle_keep_alive_connection_is_closed(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_response(sock) == (200, {"object": "list", "data": []})
    started = time.monotonic()
    assert sock.recv(1) == b""  # closed by the server after the idle timeout
    assert TIMEOUT_S - 0.5 <= time.monotonic() - started < 4 * TIMEOUT_S
    sock.close()


def test_an_unknown_chat_role_is_400(server: ServerProcess) -> None:
    sock = connect(server)
    body = json.dumps({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    assert read_response(sock) == (
        400,
        error(
            "Invalid value: 'wizard'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
            "'developer'.",
            "messages[0].role",
            "invalid_value",
        ),
    )
    sock.close()
