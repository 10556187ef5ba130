"""Control channels over one Unix stream socket per worker.

:class:`AsyncChannel` is the core's side: non-blocking, driven by the event
loop (``add_reader``/``add_writer``), frames written in the same loop
iteration go out in one ``sendmsg``. :class:`BlockingChannel` is the worker's
side: a reader thread receives, any thread sends (under a lock). Both carry
file descriptors as ``SCM_RIGHTS`` ancillary data (see :mod:`.protocol`).
"""

from __future__ import annotations

import array
import asyncio
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import TritonError
from .protocol import MAX_FDS_PER_FRAME, FrameDecoder, encode

__all__ = ["AsyncChannel", "BlockingChannel"]

_RECV_BYTES = 256 * 1024
_ANC_SPACE = socket.CMSG_SPACE(MAX_FDS_PER_FRAME * 4 * 4)


def _fds_from_ancdata(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(data[: len(data) - (len(data) % arr.itemsize)])
            fds.extend(arr)
    return fds


def _ancillary(fds: Sequence[int]) -> list[tuple[int, int, bytes]]:
    if not fds:
        return []
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]


class AsyncChannel:
    """The core's end of a worker's control socket.

    Runs on the core's event loop thread only.

    :param sock: the connected socket (set non-blocking here).
    :param on_message: called with ``(message, fds)`` for each frame received;
        the callee owns the fds.
    :param on_close: called once with None (peer closed) or the exception
        that broke the channel.
    :param poll_budget: after a flush that wrote a frame sent with ``poll=True``: how long
        (ns) to poll the socket for the reply before going back to the event loop (see
        :mod:`.reply_poll`); None or 0 never polls.
    """

    def __init__(
        self,
        sock: socket.socket,
        on_message: Callable[[list[Any], list[int]], None],
        on_close: Callable[[BaseException | None], None],
        poll_budget: Callable[[], int] | None = None,
    ) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._fileno = sock.fileno()
        self._on_message = on_message
        self._on_close = on_close
        self._decoder = FrameDecoder()
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray(_RECV_BYTES)
        self._view = memoryview(self._buffer)
        self._pending: deque[tuple[bytes, list[int]]] = deque()
        self._writing = False
        self._flush_scheduled = False
        self.closed = False
        self._poll_budget = poll_budget
        self._poll_after_flush = False
        self._polling = False
        self._loop.add_reader(self._fileno, self._on_readable)

    def send(self, message: list[Any], fds: Sequence[int] = (), lazy: bool = False, poll: bool = False) -> None:
        """Send one frame: now, or (``lazy``) at the end of this loop iteration together with others.

        ``fds`` are duplicated by the kernel on sending; the caller keeps its copies.
        ``poll``: once the frame is written, poll for the reply as long as the channel's
        ``poll_budget`` says (see :mod:`.reply_poll`).
        Sending on a closed channel is a no-op (the close callback has run or will).
        """
        if self.closed:
            return
        if poll:
            self._poll_after_flush = True
        self._pending.append((encode(message, len(fds)), list(fds)))
        if self._writing:
            return
        if not lazy:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._writing and not self._pending:
            return
        pending = self._pending
        while pending and not self.closed:
            # coalesce consecutive frames without fds into one write
            data, fds = pending.popleft()
            if not fds:
                parts = [data]
                while pending and not pending[0][1]:
                    parts.append(pending.popleft()[0])
                if len(parts) > 1:
                    data = b"".join(parts)
            try:
                sent = self._sock.sendmsg([data], _ancillary(fds))
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._fail(exc)
                return
            if sent < len(data):
                pending.appendleft((data[sent:], [] if sent else fds))
                if not self._writing:
                    self._writing = True
                    self._loop.add_writer(self._fileno, self._on_writable)
                return
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fileno)
        if self._poll_after_flush:
            self._poll_after_flush = False
            if self._poll_budget is not None and not self._polling and not self.closed:
                budget_ns = self._poll_budget()
                if budget_ns > 0:
                    self._poll(budget_ns)

    def _poll(self, budget_ns: int) -> None:
        """Read the socket without blocking until something arrives (then handle it) or
        ``budget_ns`` nanoseconds have passed (then the event loop waits for it as usual)."""
        self._polling = True
        try:
            deadline = time.perf_counter_ns() + budget_ns
            receive, buffers = self._sock.recvmsg_into, [self._buffer]
            while True:
                try:
                    nbytes, ancdata, _flags, _addr = receive(buffers, _ANC_SPACE)
                except (BlockingIOError, InterruptedError):
                    if time.perf_counter_ns() >= deadline:
                        return
                    continue
                except OSError as exc:
                    self._fail(exc)
                    return
                if self._received(nbytes, ancdata) and nbytes == _RECV_BYTES:
                    self._on_readable()  # more may be waiting
                return
        finally:
            self._polling = False

    def _on_writable(self) -> None:
        self._flush()

    def _on_readable(self) -> None:
        while not self.closed:
            try:
                nbytes, ancdata, _flags, _addr = self._sock.recvmsg_into([self._buffer], _ANC_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._fail(exc)
                return
            if not self._received(nbytes, ancdata) or nbytes < _RECV_BYTES:
                return

    def _received(self, nbytes: int, ancdata: list[tuple[int, int, bytes]]) -> bool:
        """Handle what one read got (frames, or the peer closing); False once the channel failed."""
        fds = _fds_from_ancdata(ancdata) if ancdata else None
        if not nbytes:
            for fd in fds or ():
                os.close(fd)
            self._fail(None)
            return False
        try:
            for message, frame_fds in self._decoder.feed(self._view[:nbytes], fds):
                self._on_message(message, frame_fds)
        except TritonError as exc:
            self._fail(exc)
            return False
        return not self.closed

    def _fail(self, exc: BaseException | None) -> None:
        if self.closed:
            return
        self.close()
        self._on_close(exc)

    def close(self) -> None:
        """Stop reading and writing and close the socket (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self._loop.remove_reader(self._fileno)
        if self._writing:
            self._loop.remove_writer(self._fileno)
        self._pending.clear()
        for fd in self._decoder.close():
            os.close(fd)
        self._sock.close()


class BlockingChannel:
    """The worker's end of its control socket (blocking; thread-safe sends)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._lock = threading.Lock()
        self._decoder = FrameDecoder()
        self._buffer = bytearray(_RECV_BYTES)
        self._view = memoryview(self._buffer)
        #: frames already received and not yet handed out by :meth:`receive`
        self.buffered = 0

    def send(self, message: list[Any], fds: Sequence[int] = ()) -> None:
        """Send one frame now (from any thread).

        :raises OSError: when the core has gone (broken pipe).
        """
        data = encode(message, len(fds))
        with self._lock:
            sent = self._sock.sendmsg([data], _ancillary(fds))
            if sent < len(data):
                self._sock.sendall(memoryview(data)[sent:])

    def send_many(self, messages: Sequence[list[Any]]) -> None:
        """Send several frames (without fds) in one write (from any thread)."""
        data = b"".join(encode(m) for m in messages)
        with self._lock:
            self._sock.sendall(data)

    def receive(self) -> Iterator[tuple[list[Any], list[int]]]:
        """Yield frames until the core closes the socket (then return).

        While a frame is handled, :attr:`buffered` says how many more were
        received with it (they are handed out before the socket is read again).

        :raises TritonError: INTERNAL for a malformed frame.
        """
        while True:
            frames = self.receive_once()
            if frames is None:
                return
            for i, frame in enumerate(frames):
                self.buffered = len(frames) - i - 1
                yield frame
            self.buffered = 0

    def receive_once(self) -> list[tuple[list[Any], list[int]]] | None:
        """Read the socket once (blocking until something arrives) and return the complete frames
        received, maybe none; None once the peer closed the socket.

        :raises TritonError: INTERNAL for a malformed frame.
        """
        while True:
            try:
                nbytes, ancdata, _flags, _addr = self._sock.recvmsg_into([self._buffer], _ANC_SPACE)
            except InterruptedError:
                continue
            except OSError:
                return None
            fds = _fds_from_ancdata(ancdata) if ancdata else None
            if not nbytes:
                for fd in fds or ():
                    os.close(fd)
                return None
            return list(self._decoder.feed(self._view[:nbytes], fds))

    def close(self) -> None:
        """Close the socket."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
