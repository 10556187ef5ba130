"""Health checks of a busy worker: a second socket, answered by a thread that is not the model's.

The control channel's PING is answered between batches only (the worker's
main thread receives frames and runs the model). So each worker also gets a
heartbeat socket: a daemon thread in the worker (:func:`serve_heartbeat`)
echoes every byte the core sends on it, whatever the model is doing. The
core (:class:`Heartbeat`) pings it while a batch executes; no echo within
the ping timeout means the worker is stopped or wedged (a frozen process, a
deadlock that holds the GIL) and it is killed: its requests fail, its
instance restarts. A model that runs long but leaves the interpreter
running (Python code, or native code that releases the GIL, as numpy,
onnxruntime and torch do) keeps answering and is never killed for it; the
``execute_timeout_seconds`` parameter bounds those.
"""

from __future__ import annotations

import asyncio
import socket
import threading

__all__ = ["Heartbeat", "serve_heartbeat"]


def serve_heartbeat(fd: int) -> threading.Thread:
    """Worker side: echo the core's heartbeat bytes on ``fd`` from a daemon thread, until it closes."""
    sock = socket.socket(fileno=fd)

    def echo() -> None:
        try:
            while True:
                data = sock.recv(64)
                if not data:
                    return
                sock.sendall(data)
        except OSError:
            return

    thread = threading.Thread(target=echo, name="tritium-heartbeat", daemon=True)
    thread.start()
    return thread


class Heartbeat:
    """Core side of one worker's heartbeat socket (runs on the core's event loop).

    :param sock: the core's end of the socketpair.
    """

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._lock = asyncio.Lock()

    async def ping(self, timeout: float) -> bool:
        """Send one byte and wait up to ``timeout`` s for its echo; False when none came."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            try:
                await asyncio.wait_for(loop.sock_sendall(self._sock, b"."), timeout)
                return await asyncio.wait_for(loop.sock_recv(self._sock, 64), timeout) != b""
            except (TimeoutError, OSError):
                return False

    def close(self) -> None:
        self._sock.close()
