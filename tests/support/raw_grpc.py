"""A gRPC call written frame by frame over HTTP/2 (h2), for messages no gRPC client sends."""

from __future__ import annotations

import socket
import struct

import h2.config
import h2.connection
import h2.events


def raw_call(port: int, method: str, payload: bytes, encoding: str, compressed: bool = True) -> dict[str, str]:
    """Send one length-prefixed message to ``method`` on loopback ``port``, flagged compressed with
    ``encoding`` (``grpc-encoding``), and return the ``grpc-*`` headers and trailers of the answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", method),
                (":authority", f"127.0.0.1:{port}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-encoding", encoding),
            ],
        )
        conn.send_data(stream, struct.pack(">BI", int(compressed), len(payload)) + payload, end_stream=True)
        sock.sendall(conn.data_to_send())
        status: dict[str, str] = {}
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return status
            for event in conn.receive_data(data):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    status.update((k, v) for k, v in event.headers if k.startswith("grpc-"))
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return status
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
