"""Client-side helpers shared by the black-box suites: raw HTTP calls, gRPC readiness, module servers."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.server import ServerProcess

__all__ = ["http_call", "declare_body", "read_reply", "grpc_call", "wait_grpc_ready", "module_server", "HTTP_ONLY"]

#: flags for a server that only needs its HTTP endpoint
HTTP_ONLY = ("--allow-grpc=false", "--allow-metrics=false")


def http_call(
    server: ServerProcess | int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request to ``server``'s HTTP endpoint (or to a port on 127.0.0.1); returns
    status, headers (lower-case names) and body."""
    port = server if isinstance(server, int) else server.http_port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def declare_body(server: ServerProcess, path: str, size: int, send: int = 0) -> socket.socket:
    """Open a connection and POST ``path`` declaring a ``size``-byte body, of which ``send`` bytes (whole MiB) are sent."""
    sock = socket.create_connection(("127.0.0.1", server.http_port))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode())
    chunk = b"{" * (1 << 20)
    for _ in range(send >> 20):
        sock.sendall(chunk)
    return sock


def read_reply(sock: socket.socket, timeout: float = 30.0) -> tuple[bytes, bytes]:
    """Read a JSON error answer (up to its closing brace) from ``sock`` and close it: (head, body)."""
    sock.settimeout(timeout)
    reply = b""
    while b"}" not in reply:
        data = sock.recv(4096)
        if not data:
            break
        reply += data
    sock.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    return head, body


def grpc_call(server: ServerProcess, rpc: str, request: Any, metadata: Any = None) -> tuple[Any, Any]:
    """One raw gRPC call of ``inference.GRPCInferenceService``; returns (status code, response or details)."""
    import grpc

    from tritium.proto import grpc_service_pb2_grpc

    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            return grpc.StatusCode.OK, getattr(stub, rpc)(request, metadata=metadata, timeout=120)
        except grpc.RpcError as exc:
            return exc.code(), exc.details()


def wait_grpc_ready(server: ServerProcess, timeout: float = 120.0) -> None:
    """Wait until the server answers ServerReady=true over gRPC (the HTTP endpoint may be off)."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(server.grpc_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert server.proc is not None
            if server.proc.poll() is not None:
                raise RuntimeError(f"tritium-server exited with {server.proc.returncode}:\n{server.log()}")
            try:
                if client.is_server_ready():
                    return
            except InferenceServerException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"tritium-server not ready after {timeout} s:\n{server.log()}")
    finally:
        client.close()


def module_server(
    root: Path,
    build: Callable[[Path], None],
    args: Sequence[str],
    grpc_only: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[ServerProcess]:
    """Build a repository under ``root`` with ``build``, run a server on it, stop it afterwards.

    ``grpc_only``: the HTTP endpoint is off, so readiness is waited for over gRPC.
    ``env``: variables set for the server besides this process's (``TRITIUM_PLUGINS``, ...).
    """
    repo = root / "models"
    build(repo)
    proc = ServerProcess([repo], list(args), log_path=root / "server.log", env=env)
    proc.start(wait_ready=not grpc_only)
    try:
        if grpc_only:
            wait_grpc_ready(proc)
        yield proc
    finally:
        proc.stop()
