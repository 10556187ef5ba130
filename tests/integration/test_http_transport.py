"""The HTTP endpoint's HTTP/1.1 handling, black-box on raw sockets and http.client.

Keep-alive, pipelined requests answered in order, chunked request bodies,
``Expect: 100-continue``, bodies over the limit refused from their headers,
clients that disconnect mid-body or half-close, a slow reader of a large
response (back-pressure: the server keeps serving others), malformed and
oversized heads. Every case ends by checking that the server still answers
and that no arena memory is left held.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.clients import module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

LIMIT = 64 * 1024 * 1024  # --max-request-bytes
BIG = 8 * 1024 * 1024  # bytes of the large tensors


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_FP32", "[ -1 ]", max_batch_size=0))
        add_model(repo, "echo_u8", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))

    yield from module_server(
        tmp_path_factory.mktemp("http_transport"), build, [f"--max-request-bytes={LIMIT}", "--allow-grpc=false"]
    )


def infer_body(values: np.ndarray, datatype: str = "FP32") -> tuple[bytes, int]:
    """A binary-extension request for INPUT0 = ``values``; returns the body and its JSON header length."""
    raw = values.tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [len(values)],
                    "datatype": datatype,
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    return header + raw, len(header)


def request_bytes(model: str, body: bytes, header_length: int, extra: str = "") -> bytes:
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {header_length}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) off a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(1 << 20)
        self.buffer += data
        return bool(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError("closed before a response head")
        head, rest = bytes(self.buffer).split(b"\r\n\r\n", 1)
        self.buffer = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        size = int(headers.get("content-length", "0"))
        while len(self.buffer) < size:
            if not self._fill():
                raise ConnectionError("closed inside a response body")
        body, self.buffer = bytes(self.buffer[:size]), self.buffer[size:]
        return status, headers, body

    def closed(self, timeout: float = 10.0) -> bool:
        """True when the server closes the connection (nothing more is sent) within ``timeout`` s."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def decoded(reply: tuple[int, dict[str, str], bytes], dtype: type = np.float32) -> np.ndarray:
    status, headers, body = reply
    assert status == 200, body[:300]
    length = int(headers["inference-header-content-length"])
    meta = json.loads(body[:length])
    assert meta["outputs"][0]["name"] == "OUTPUT0"
    return np.frombuffer(body[length:], dtype=dtype)


def connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.http_port), timeout=60)


def arena_used(server: ServerProcess) -> float:
    """The core's arena bytes held by requests, from the metrics endpoint."""
    with urllib.request.urlopen(server.metrics_url, timeout=30) as resp:
        text = resp.read().decode()
    match = re.search(r"^tritium_arena_used_bytes (\S+)$", text, re.M)
    assert match, "no tritium_arena_used_bytes metric"
    return float(match.group(1))


def assert_arena_drains(server: ServerProcess) -> None:
    for _ in range(100):
        if arena_used(server) == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"{arena_used(server)} arena bytes still held")


def still_serves(server: ServerProcess) -> None:
    values = np.arange(5, dtype=np.float32)
    body, length = infer_body(values)
    with connect(server) as sock:
        sock.sendall(request_bytes("echo", body, length))
        assert decoded(Reader(sock).response()).tolist() == values.tolist()
    assert_arena_drains(server)


def test_keep_alive_serves_many_requests_on_one_connection(server: ServerProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        for i in range(50):
            values = np.full(i + 1, i, dtype=np.float32)
            body, length = infer_body(values)
            conn.request("POST", "/v2/models/echo/infer", body, {"Inference-Header-Content-Length": str(length)})
            resp = conn.getresponse()
            reply = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
            assert "connection" not in reply[1]
            assert decoded(reply).tolist() == values.tolist()
        conn.request("GET", "/v2/health/ready")
        assert conn.getresponse().status == 200
        assert conn.sock is not None  # the same connection throughout
    finally:
        conn.close()
    still_serves(server)


def test_pipelined_requests_are_answered_in_order(server: ServerProcess) -> None:
    wanted = []
    data = b""
    for i in range(20):
        values = np.arange(i, i + 3 + i % 4, dtype=np.float32)
        body, length = infer_body(values)
        data += request_bytes("echo", body, length)
        wanted.append(values.tolist())
    data += b"GET /v2/models/echo/ready HTTP/1.1\r\nHost: x\r\n\r\n"
    data += b"GET /v2/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(data)  # all of them in one write
        reader = Reader(sock)
        for values in wanted:
            assert decoded(reader.response()).tolist() == values
        assert reader.response()[0] == 200
        assert reader.response()[:3:2] == (404, b'{"error":"Not Found"}')
    still_serves(server)


def test_chunked_request_body(server: ServerProcess) -> None:
    values = np.arange(1000, dtype=np.float32)
    body, length = infer_body(values)
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        pieces = [body[i : i + 777] for i in range(0, len(body), 777)]
        conn.request(
            "POST",
            "/v2/models/echo/infer",
            body=iter(pieces),
            encode_chunked=True,
            headers={"Inference-Header-Content-Length": str(length)},
        )
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        assert decoded((resp.status, headers, resp.read())).tolist() == values.tolist()
        assert headers["connection"] == "close"  # a chunked request's connection ends with its response
    finally:
        conn.close()
    still_serves(server)


def test_malformed_chunked_body_is_400_and_the_connection_closes(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nxx\r\n"
        )
        reader = Reader(sock)
        status, _, body = reader.response()
        assert status == 400 and json.loads(body)["error"].startswith("malformed chunked request body")
        assert reader.closed()
    still_serves(server)


def test_expect_100_continue(server: ServerProcess) -> None:
    values = np.arange(64, dtype=np.float32)
    body, length = infer_body(values)
    with connect(server) as sock:
        sock.sendall(
            request_bytes("echo", b"", length, "Expect: 100-continue\r\n").replace(
                b"Content-Length: 0", f"Content-Length: {len(body)}".encode()
            )
        )
        reader = Reader(sock)
        while b"\r\n\r\n" not in reader.buffer:
            assert reader._fill()
        assert reader.buffer.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        del reader.buffer[: len(b"HTTP/1.1 100 Continue\r\n\r\n")]
        sock.sendall(body)
        assert decoded(reader.response()).tolist() == values.tolist()
    still_serves(server)


def test_expect_100_continue_over_the_limit_is_refused_without_continue(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            + f"Content-Length: {LIMIT + 1}\r\n\r\n".encode()
        )
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert (status, json.loads(body)) == (
            413,
            {"error": f"request body of {LIMIT + 1} bytes exceeds the maximum request size of {LIMIT} bytes"},
        )
        assert headers["connection"] == "close"
        assert reader.closed()
    still_serves(server)


def test_oversized_body_is_refused_from_its_headers(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
        reader = Reader(sock)  # the answer comes though no byte of the body was sent
        status, _, body = reader.response()
        assert status == 413 and "99999999999 bytes exceeds" in json.loads(body)["error"]
        assert reader.closed()
    still_serves(server)


def test_clients_that_disconnect_mid_body_leave_nothing_held(server: ServerProcess) -> None:
    values = np.zeros(BIG // 4, dtype=np.float32)
    body, length = infer_body(values)
    for _ in range(5):
        sock = connect(server)
        request = request_bytes("echo", body, length)
        sock.sendall(request[: len(request) // 2])  # the body is received straight into the arena
        time.sleep(0.05)
        sock.close()
    still_serves(server)  # and the arena drained: the half-received bodies were freed


def test_client_that_disconnects_before_its_response_leaves_nothing_held(server: ServerProcess) -> None:
    values = np.ones(BIG // 4, dtype=np.float32)
    body, length = infer_body(values)
    for _ in range(5):
        sock = connect(server)
        sock.sendall(request_bytes("echo", body, length))
        sock.close()  # gone before the (large) response is written
    still_serves(server)


def test_half_closed_client_gets_its_response(server: ServerProcess) -> None:
    values = np.arange(7, dtype=np.float32)
    body, length = infer_body(values)
    with connect(server) as sock:
        sock.sendall(request_bytes("echo", body, length))
        sock.shutdown(socket.SHUT_WR)  # nothing more from this client
        reader = Reader(sock)
        assert decoded(reader.response()).tolist() == values.tolist()
        assert reader.closed()  # and then the server closes its side too
    still_serves(server)


def test_slow_reader_of_a_large_response_does_not_hold_up_others(server: ServerProcess) -> None:
    values = (np.arange(BIG, dtype=np.uint64) % 251).astype(np.uint8)
    body, length = infer_body(values, "UINT8")
    slow = connect(server)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    try:
        slow.sendall(request_bytes("echo_u8", body, length))
        time.sleep(0.5)  # the response is stuck in the socket buffers: the connection waits on the client
        assert arena_used(server) >= BIG  # its shared memory is held until the bytes are on the wire
        started = time.monotonic()
        for _ in range(20):  # meanwhile other clients are served as usual
            still_small = np.arange(3, dtype=np.float32)
            small_body, small_length = infer_body(still_small)
            with connect(server) as other:
                other.sendall(request_bytes("echo", small_body, small_length))
                assert decoded(Reader(other).response()).tolist() == still_small.tolist()
        assert time.monotonic() - started < 30
        # now read it, slowly at first
        reader = Reader(slow)
        while b"\r\n\r\n" not in reader.buffer:
            reader.buffer += slow.recv(1024)
            time.sleep(0.001)
        assert decoded(reader.response(), np.uint8).tobytes() == values.tobytes()
    finally:
        slow.close()
    still_serves(server)


def test_malformed_request_head_is_400_and_the_connection_closes(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        reader = Reader(sock)
        status, headers, body = reader.response()
        assert status == 400 and json.loads(body)["error"].startswith("malformed HTTP request")
        assert reader.closed()
    still_serves(server)


def test_request_head_over_the_limit_is_431(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nX-Pad: " + b"a" * (70 * 1024))
        reader = Reader(sock)
        status, _, body = reader.response()
        assert status == 431 and "larger than the limit of 65536 bytes" in json.loads(body)["error"]
        assert reader.closed()
    still_serves(server)


def test_http_1_0_closes_unless_kept_alive(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.0\r\n\r\n")
        reader = Reader(sock)
        status, headers, _ = reader.response()
        assert (status, headers["connection"]) == (200, "close")
        assert reader.closed()
    with connect(server) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 2)
        reader = Reader(sock)
        assert [reader.response()[0] for _ in range(2)] == [200, 200]


def test_many_connections_at_once(server: ServerProcess) -> None:
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            values = np.full(10, i, dtype=np.float32)
            body, length = infer_body(values)
            with connect(server) as sock:
                reader = Reader(sock)
                for _ in range(10):
                    sock.sendall(request_bytes("echo", body, length))
                    assert decoded(reader.response()).tolist() == values.tolist()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[:3]
    still_serves(server)


def test_percent_encoded_raw_request_line(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v2/models/ech%6F/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert Reader(sock).response()[0] == 200  # %6F is "o": the model "echo"


def test_binary_data_size_struct_layout(server: ServerProcess) -> None:
    # the raw binary request (Inference-Header-Content-Length: 0): the body is the one input
    values = np.arange(9, dtype=np.float32)
    raw = values.tobytes()
    with connect(server) as sock:
        sock.sendall(request_bytes("echo", raw, 0))
        status, headers, body = Reader(sock).response()
        assert status == 200
        length = int(headers["inference-header-content-length"])
        assert struct.unpack("<9f", body[length:]) == tuple(values.tolist())
