#!/usr/bin/env python3
"""The least Python that serves a KServe JSON ``add_sub`` request with tritium's process layout.

A yardstick for ``benchmarks/headroom.py``, not a server: a core process
(uvloop, httptools, msgspec) parses each ``POST .../infer`` JSON body of two
FP32 [4] inputs named ``INPUT0`` and ``INPUT1``, sends both tensors to one
worker process in a msgpack frame over a Unix socketpair, and renders the
worker's ``OUTPUT0 = INPUT0 + INPUT1`` and ``OUTPUT1 = INPUT0 - INPUT1`` as
KServe JSON. The worker, forked at start, blocks on its socket and runs the
arithmetic in numpy. No checks, no statistics, no scheduler, no shared
memory: tensor bytes travel inside the frames (64 bytes here). What it costs
per request is a floor under any design of one Python core and one Python
worker process per model instance on this machine.

Usage (loopback only)::

    python benchmarks/minimal_server.py PORT
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import httptools
import msgpack
import msgspec
import numpy as np
import uvloop

LENGTH = struct.Struct("<I")  # each frame: its payload's length in bytes, then the msgpack payload


def read_frames(buffer: bytearray) -> list[Any]:
    """Take every complete frame off the front of ``buffer``; return their decoded payloads."""
    messages = []
    while len(buffer) >= LENGTH.size:
        (length,) = LENGTH.unpack_from(buffer)
        if len(buffer) < LENGTH.size + length:
            break
        messages.append(msgpack.unpackb(bytes(buffer[LENGTH.size : LENGTH.size + length])))
        del buffer[: LENGTH.size + length]
    return messages


def frame(message: list[Any]) -> bytes:
    """``message`` as a frame: its payload length, then the msgpack payload."""
    payload = msgpack.packb(message)
    return LENGTH.pack(len(payload)) + payload


def received_frames(sock: socket.socket) -> Iterator[Any]:
    """A blocking socket's frames, decoded, until the peer closes it."""
    buffer = bytearray()
    while data := sock.recv(65536):
        buffer += data
        yield from read_frames(buffer)


def run_worker(sock: socket.socket) -> None:
    """The worker: ``[id, INPUT0 bytes, INPUT1 bytes]`` in, ``[id, OUTPUT0 bytes, OUTPUT1 bytes]`` out."""
    for request_id, first, second in received_frames(sock):
        a, b = np.frombuffer(first, np.float32), np.frombuffer(second, np.float32)
        sock.sendall(frame([request_id, (a + b).tobytes(), (a - b).tobytes()]))


class WorkerLink(asyncio.Protocol):
    """The core's end of the socketpair: sends requests, calls each one's callback with its outputs."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiting: dict[int, Callable[[bytes, bytes], None]] = {}
        self.next_id = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass

    def send(self, first: bytes, second: bytes, on_done: Callable[[bytes, bytes], None]) -> None:
        assert self.transport is not None
        self.next_id += 1
        self.waiting[self.next_id] = on_done
        self.transport.write(frame([self.next_id, first, second]))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for request_id, total, difference in read_frames(self.buffer):
            self.waiting.pop(request_id)(total, difference)


_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class HTTPReader(asyncio.Protocol):
    """One client connection's HTTP/1.1 parsing and answers; subclasses handle each complete request."""

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def take_body(self) -> bytes:
        """The complete request's body (the next request starts empty)."""
        body, self.body = b"".join(self.body), []
        return body

    def write_json(self, status: int, document: dict[str, Any]) -> None:
        """Answer with ``document`` as JSON; nothing when the client has left (wrk stops with requests in flight)."""
        assert self.transport is not None
        if self.transport.is_closing():
            return
        body = _encoder.encode(document)
        reason = b"OK" if status == 200 else b"Bad Request"
        head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        self.transport.write(head % (status, reason, len(body)) + body)


class HTTPConnection(HTTPReader):
    """One client connection: every request is taken as an add_sub infer request."""

    def __init__(self, link: WorkerLink) -> None:
        super().__init__()
        self.link = link

    def on_message_complete(self) -> None:
        request = _decoder.decode(self.take_body())
        tensors = {t["name"]: np.asarray(t["data"], np.float32).tobytes() for t in request["inputs"]}
        self.link.send(tensors["INPUT0"], tensors["INPUT1"], self.respond)

    def respond(self, total: bytes, difference: bytes) -> None:
        outputs = [
            {"name": name, "datatype": "FP32", "shape": [4], "data": np.frombuffer(data, np.float32).tolist()}
            for name, data in (("OUTPUT0", total), ("OUTPUT1", difference))
        ]
        self.write_json(200, {"model_name": "add_sub", "model_version": "1", "outputs": outputs})


async def serve(port: int, core_end: socket.socket) -> None:
    """Serve on 127.0.0.1:``port`` until killed."""
    loop = asyncio.get_running_loop()
    _, link = await loop.create_connection(WorkerLink, sock=core_end)
    server = await loop.create_server(lambda: HTTPConnection(link), "127.0.0.1", port)
    await server.serve_forever()


def main() -> None:
    port = int(sys.argv[1])
    core_end, worker_end = socket.socketpair()
    if os.fork() == 0:
        core_end.close()
        run_worker(worker_end)
        os._exit(0)
    worker_end.close()
    uvloop.run(serve(port, core_end))


if __name__ == "__main__":
    main()
