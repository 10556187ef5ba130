"""One HTTP/1.1 connection of the HTTP endpoint: framing, bodies, keep-alive, back-pressure.

A lean protocol on ``httptools`` (llhttp, the parser uvicorn uses) for the
fixed set of KServe/Triton routes, in place of a web framework: a request
costs a header parse, a route lookup and one ``write``. Runs on the core's
event loop, one :class:`HttpConnection` per TCP connection.

Framing (RFC 9112):

- The head (request line and headers) is collected in a buffer allocated when
  the first bytes arrive (:data:`HEAD_START_BYTES`, grown fourfold as needed,
  given back once the request is answered and nothing else came: an idle
  connection holds no buffer) and parsed by ``httptools`` once complete; a head over
  :data:`MAX_HEAD_BYTES` is refused with 431.
- A connection past the endpoint's bounds (``--http-max-connections``, or the
  server near its open-file limit) is answered 503 and closed as it is
  accepted (:meth:`~.connection_table.ConnectionTable.refusal`).
- A ``Content-Length`` body is received straight into its destination
  (:class:`asyncio.BufferedProtocol`): the kernel copies the bytes of an
  inference request into the core's shared-memory arena, where the worker
  reads them, with no copy in between. A declared length over the
  endpoint's limit is refused with 413 from the headers, before a byte of the
  body is read, and the connection is closed.
- A chunked body goes through the parser, is bounded by the same limit
  (413 once it passes it), and the connection closes after its response.
- ``Expect: 100-continue`` is answered with ``100 Continue`` before the
  body is read (or with the 413, without reading it).
- Keep-alive follows HTTP/1.1 (and ``Connection: keep-alive`` for HTTP/1.0);
  pipelined requests are answered one after the other, in order: the next
  request is parsed only once the current response is on the wire (bytes
  that arrive meanwhile wait in the head buffer; reading pauses when it is
  full).
- Back-pressure: the transport's high-water mark is 0, so a response the
  kernel cannot take at once pauses the connection until it drains; only
  then is the response's shared memory released and the next request read.
- A client that does not finish a head in time (the header timeout, however
  slowly the bytes trickle in), stops half-way through a body or stops
  reading a response (the body timeout: no progress), or leaves a keep-alive
  connection idle (the idle timeout) is dropped (see
  :class:`~.connection_table.ConnectionTable`). A client that half-closes after sending its
  request still gets the response, but the request is cancelled (as Go's ``net/http`` treats
  it): an end of the stream or a lost connection before the answer calls ``cancel()`` on the
  request's job (:attr:`HttpRequest.job`), and its model sees ``is_cancelled()``.
- Lingering close (RFC 9112 section 9.6): a request refused before its body
  is read (413 from the headers, 503 for a full body budget, a malformed
  head) closes its connection, but not at once: a client still sending its
  body (``tritonclient`` writes the whole body before it reads) would get a
  connection reset instead of the answer, since the kernel resets a socket
  closed with unread bytes. After the refusal the write side is shut down
  and the rest of the body is read into a scratch buffer and dropped (never
  kept), for at most :data:`LINGER_S` seconds and :data:`LINGER_BYTES`
  bytes, until the client closes its side.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

import httptools

from .framing import CONTINUE, HEAD_END, Head, json_string, keep_alive, status_lines, url_path
from .messages import Dispatcher, HttpRequest, HttpResponse, HttpStreamResponse

log = logging.getLogger("tritium.http")

__all__ = ["HttpConnection", "MAX_HEAD_BYTES", "HEAD_START_BYTES", "LINGER_S", "LINGER_BYTES"]

#: the largest request head (request line and headers) accepted, bytes
MAX_HEAD_BYTES = 64 * 1024
#: the head buffer's first size (a usual request head fits), bytes; it grows fourfold up to MAX_HEAD_BYTES
HEAD_START_BYTES = 4 * 1024
#: a chunked body is read through this buffer, bytes
_CHUNK_BUFFER = 64 * 1024
#: after a refusal, the rest of a request body is read and dropped for at most this long, seconds
LINGER_S = 5.0
#: ... and at most this many bytes
LINGER_BYTES = 256 << 20
#: where the dropped bytes go (shared by all connections: nothing reads it)
_SCRATCH = memoryview(bytearray(256 * 1024))

# connection states
_HEAD, _BODY, _CHUNKED, _BUSY, _CLOSED, _LINGER = range(6)


class HttpConnection(asyncio.BufferedProtocol):
    """One client connection (see the module docstring).

    :param dispatcher: routes requests and says where bodies go.
    :param table: the endpoint's table of open connections (for stall checks and stop;
        :class:`~.connection_table.ConnectionTable`).
    """

    def __init__(self, dispatcher: Dispatcher, table: Any) -> None:
        self._dispatcher = dispatcher
        self._table = table
        self._transport: asyncio.Transport | None = None
        self._head = bytearray()  # allocated when bytes arrive (get_buffer), grown as needed
        self._head_view = memoryview(self._head)
        self._filled = 0
        self._scan = 0
        self._state = _HEAD
        self._request: HttpRequest | None = None
        self._keep_alive = True
        self._body_view: memoryview | None = None
        self._body_pos = 0
        self._body_block: Any = None  # the arena block a body is being received into
        self._current_block: Any = None  # the arena block of the request being answered
        self._current: HttpRequest | None = None  # the request being answered (its budget hold)
        self._parser: Any = None
        self._chunk_head: Head | None = None
        self._chunk_buffer: memoryview | None = None
        self._reading = True
        self._write_paused = False
        self._pending_release: Callable[[], None] | None = None
        self._close_after = False
        self._head_only = False  # answering a HEAD request: headers only
        self._http10 = False  # the request being answered is HTTP/1.0
        self._eof = False
        self._reserved = 0  # bytes of the endpoint's body budget this connection holds
        self._stream: asyncio.Task[None] | None = None  # sending an HttpStreamResponse
        self._serving: HttpRequest | None = None  # the request being answered (its job is cancelled if the client goes)
        self._drained: asyncio.Future[None] | None = None  # a stream waits for the transport to drain
        #: monotonic time of the last progress, for the stall and idle checks
        self.progress = 0.0
        #: monotonic time the head being received began
        self.head_since = 0.0
        self._unsent = 0  # bytes of a response still in the transport at the last stall check
        self._linger = False  # the response refuses a request whose body was not read: linger after it
        self._linger_since = 0.0
        self._lingered = 0  # bytes dropped while lingering

    # -- transport callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, asyncio's or uvloop's (whose class is no asyncio.Transport subclass)
        self._transport = stream = cast(asyncio.Transport, transport)
        # a response the kernel cannot take at once pauses us until it drains (see _on_written)
        stream.set_write_buffer_limits(high=0)
        self.progress = self.head_since = time.monotonic()
        refusal = self._table.refusal(stream.get_extra_info("socket"))
        if refusal is not None:  # past the connection bound: answered and closed at once, never read
            self._state = _CLOSED
            body = ('{"error":' + json_string(refusal) + "}").encode()
            stream.write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
            )
            stream.close()
            return
        self._table.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_serving()
        self._state = _CLOSED
        self._table.discard(self)
        if self._stream is not None:
            self._stream.cancel()
        self._free_body()
        self._release_response()
        self._transport = None

    def eof_received(self) -> bool:
        # a half-close: answer what was sent, then close
        self._eof = True
        if self._state == _BUSY or self._write_paused:
            self._cancel_serving()  # as Go's net/http: a client that closed its side is gone
            return True
        if self._state in (_BODY, _CHUNKED, _LINGER):  # the client gave up in the middle of a body
            return False
        self._process()  # a complete request may still be in the buffer
        return self._state == _BUSY

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self.progress = time.monotonic()
        drained, self._drained = self._drained, None
        if drained is not None:  # a stream goes on with its next piece
            if not drained.done():
                drained.set_result(None)
            return
        self._release_response()
        if self._close_after:
            self._close_or_linger()
        elif self._state == _BUSY:
            self._state = _HEAD
            self._process()

    def get_buffer(self, sizehint: int) -> memoryview:
        state = self._state
        if state == _BODY:
            assert self._body_view is not None
            return self._body_view[self._body_pos :]
        if state == _LINGER:
            return _SCRATCH
        if state == _CHUNKED:
            if self._chunk_buffer is None:
                self._chunk_buffer = memoryview(bytearray(_CHUNK_BUFFER))
            return self._chunk_buffer
        if self._filled < MAX_HEAD_BYTES:
            if self._filled == len(self._head):
                self._grow_head()
            return self._head_view[self._filled :]
        # full while busy: reading was paused; a read that still happens is dropped into scratch
        return memoryview(bytearray(1))

    def buffer_updated(self, nbytes: int) -> None:
        self.progress = now = time.monotonic()
        state = self._state
        if not self._filled and state == _HEAD:
            self.head_since = now  # the first bytes of a head: the header timeout runs from here
        if state == _BODY:
            self._body_pos += nbytes
            assert self._body_view is not None
            if self._body_pos == len(self._body_view):
                self._body_view = None
                self._start()
            return
        if state == _CHUNKED:
            assert self._chunk_buffer is not None
            self._feed_chunked(self._chunk_buffer[:nbytes])
            return
        if state == _LINGER:
            self._lingered += nbytes
            if self._lingered > LINGER_BYTES:
                self._close()
            return
        if state == _CLOSED:
            return
        if self._filled >= MAX_HEAD_BYTES:
            return
        self._filled += nbytes
        if state == _HEAD:
            self._process()
        elif self._filled >= MAX_HEAD_BYTES:
            self._pause_reading()  # pipelined bytes fill the buffer while a request is served

    # -- heads -------------------------------------------------------------------------------
    def _process(self) -> None:
        """Parse the next complete head in the buffer, if any, and start its request."""
        if self._state != _HEAD:
            return
        end = self._head.find(HEAD_END, max(0, self._scan - 3), self._filled)
        if end < 0:
            if self._filled >= MAX_HEAD_BYTES:
                self._fail(431, f"request header fields are larger than the limit of {MAX_HEAD_BYTES} bytes")
            elif self._eof:
                self._close()
            else:
                self._scan = self._filled
                self._resume_reading()
            return
        head_len = end + 4
        head = Head()
        parser = httptools.HttpRequestParser(head)
        try:
            parser.feed_data(self._head_view[:head_len])
        except httptools.HttpParserUpgrade:
            pass  # an Upgrade request is answered as a plain one
        except httptools.HttpParserError as exc:
            self._fail(400, f"malformed HTTP request: {exc}")
            return
        if not head.complete:
            self._fail(400, "malformed HTTP request head")
            return
        method = parser.get_method().decode("ascii", "replace")
        request = HttpRequest(method, url_path(head.url), head.headers)
        self._http10 = parser.get_http_version() == "1.0"
        self._keep_alive = keep_alive(self._http10, head.headers.get("connection"))
        self._request = request
        headers = head.headers
        if "transfer-encoding" in headers and not head.message_done:
            self._consume(head_len)
            self._start_chunked(parser, head, self._dispatcher.body_limit(request))
            return
        length_text = headers.get("content-length")
        size = int(length_text) if length_text else 0  # llhttp accepts digits only
        limit = self._dispatcher.body_limit(request) if size else 0  # (no body: no route lookup here)
        if size > limit:
            self._consume(head_len)
            self._keep_alive = False
            self._respond_now(self._dispatcher.too_large(size, limit))
            return
        if size == 0:
            self._consume(head_len)
            self._start()
            return
        if not self._dispatcher.reserve(size):
            self._consume(head_len)
            self._keep_alive = False
            self._respond_now(self._dispatcher.busy())
            return
        self._reserved = size
        if headers.get("expect", "").lower() == "100-continue" and self._transport is not None:
            self._transport.write(CONTINUE)
        try:
            view, block = self._dispatcher.body_destination(request, size)
        except Exception as exc:  # the arena cannot hold it
            log.error("no memory for a request body of %d bytes: %s", size, exc)
            self._consume(head_len)
            self._keep_alive = False
            self._respond_now(HttpResponse(503, b'{"error":"not enough memory for the request body"}'))
            return
        self._body_block = block
        have = min(self._filled - head_len, size)  # body bytes that came with the head
        if have:
            view[:have] = self._head_view[head_len : head_len + have]
        self._consume(head_len + have)
        request.body = view
        if have == size:
            self._start()
        else:
            self._body_view = view
            self._body_pos = have
            self._state = _BODY
            self._resume_reading()

    def _grow_head(self) -> None:
        """A head buffer fourfold the size (the first: :data:`HEAD_START_BYTES`), the bytes kept."""
        size = min(MAX_HEAD_BYTES, max(HEAD_START_BYTES, 4 * len(self._head)))
        bigger = bytearray(size)
        bigger[: self._filled] = self._head_view[: self._filled]
        self._head, self._head_view = bigger, memoryview(bigger)

    def _trim_head(self) -> None:
        """Give the head buffer back once it is empty (an idle keep-alive connection holds none)."""
        if not self._filled and self._head:
            self._head = bytearray()
            self._head_view = memoryview(self._head)

    def _consume(self, count: int) -> None:
        """Drop the first ``count`` bytes of the head buffer."""
        rest = self._filled - count
        if rest:  # pipelined bytes (rare): moved to the front through a copy (the ranges overlap)
            self._head[:rest] = bytes(self._head_view[count : self._filled])
        self._filled = rest
        self._scan = 0

    # -- chunked bodies ---------------------------------------------------------------------
    def _start_chunked(self, parser: Any, head: Head, limit: int) -> None:
        self._keep_alive = False  # a chunked request's connection closes after its response
        if head.headers.get("expect", "").lower() == "100-continue" and self._transport is not None:
            self._transport.write(CONTINUE)
        head.body = bytearray()
        head.limit = limit
        self._parser, self._chunk_head = parser, head
        self._state = _CHUNKED
        if self._filled:
            data = bytes(self._head_view[: self._filled])
            self._filled = 0
            self._feed_chunked(data)
        else:
            self._resume_reading()

    def _feed_chunked(self, data: bytes | memoryview) -> None:
        head = self._chunk_head
        assert head is not None and head.body is not None
        before = head.body_size
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(400, f"malformed chunked request body: {exc}")
            return
        grown = min(head.body_size, head.limit) - min(before, head.limit)
        if grown:
            if not self._dispatcher.reserve(grown):
                self._parser = self._chunk_head = None
                self._keep_alive = False
                self._free_body()
                self._respond_now(self._dispatcher.busy())
                return
            self._reserved += grown
        if head.body_size > head.limit:
            self._parser = self._chunk_head = None
            self._keep_alive = False
            self._respond_now(self._dispatcher.too_large(None, head.limit))
            return
        if head.message_done:
            assert self._request is not None
            self._request.body = bytes(head.body)
            self._parser = self._chunk_head = None
            self._chunk_buffer = None
            self._start()

    # -- requests and responses ---------------------------------------------------------------
    def _start(self) -> None:
        request = self._request
        assert request is not None
        self._request = None
        self._state = _BUSY
        self._serving = request
        self._head_only = request.method == "HEAD"
        request.body_block = self._current_block = self._body_block
        self._current = request
        self._body_block = None
        try:
            self._dispatcher.dispatch(request, self._respond)
        except Exception:  # a bug in a handler must not leave the client waiting
            log.exception("HTTP request %s %s failed", request.method, request.path)
            self._respond(HttpResponse(500, b'{"error":"internal error"}'))

    def _respond_now(self, response: HttpResponse) -> None:
        """Refuse the request being received with ``response``; the connection lingers, then closes."""
        self._state = _BUSY
        self._linger = True
        self._respond(response)

    def _respond(self, response: HttpResponse) -> None:
        """Write ``response``; then (once it is on the wire) go on with the next request."""
        self._serving = None
        if response.__class__ is not HttpResponse and isinstance(response, HttpStreamResponse):
            self._respond_stream(response)
            return
        transport = self._transport
        self._pending_release = response.release
        self.progress = self.head_since = time.monotonic()  # idle (and a pipelined head) time runs from the answer
        if transport is None or transport.is_closing():
            self._release_response()
            return
        keep = self._keep_alive and not self._eof
        body = response.body
        if type(body) is list:
            parts: list[Any] | None = body
            size = sum([memoryview(b).nbytes for b in body])
        else:
            parts = None
            size = len(body)
        start = status_lines(response.status, response.content_type)
        if response.headers:
            start += "".join([f"{k}: {v}\r\n" for k, v in response.headers.items()])
        if keep:
            if self._http10:
                start += "Connection: keep-alive\r\n"
            head = f"{start}Content-Length: {size}\r\n\r\n".encode("latin-1")
        else:
            head = f"{start}Content-Length: {size}\r\nConnection: close\r\n\r\n".encode("latin-1")
        head_only, self._head_only = self._head_only, False
        if parts is None:
            # body is bytes here: mypy narrows `type(body) is list` in the if-branch only
            transport.write(head if head_only or not size else head + body)  # type: ignore[operator]
        elif head_only:
            transport.write(head)
        else:
            transport.writelines([head, *parts])
        self._written(keep)

    def _written(self, keep: bool) -> None:
        """The response is written: go on with the next request (once it drained), or close."""
        self._close_after = not keep
        if self._write_paused:
            return  # resume_writing continues
        self._release_response()
        if not keep:
            self._close_or_linger()
            return
        self._state = _HEAD
        if self._filled:
            self._process()  # a pipelined request is waiting
        else:
            self._resume_reading()

    def _cancel_serving(self) -> None:
        """The client went away before the answer: cancel the work started for it (its model sees it)."""
        request, self._serving = self._serving, None
        if request is not None and request.job is not None and self._state == _BUSY:
            request.job.cancel()

    def _respond_stream(self, response: HttpStreamResponse) -> None:
        """Write the head of a streamed response, then its pieces from a task (:meth:`_pump`)."""
        transport = self._transport
        if transport is None or transport.is_closing():
            asyncio.get_running_loop().create_task(response.chunks.aclose())
            return
        chunked = not self._http10
        keep = chunked and self._keep_alive and not self._eof
        start = status_lines(response.status, response.content_type)
        if response.headers:
            start += "".join([f"{k}: {v}\r\n" for k, v in response.headers.items()])
        if chunked:
            start += "Transfer-Encoding: chunked\r\n"
        if not keep:
            start += "Connection: close\r\n"
        self._head_only = False
        transport.write((start + "\r\n").encode("latin-1"))
        self._stream = asyncio.get_running_loop().create_task(self._pump(response.chunks, chunked, keep))

    async def _pump(self, chunks: AsyncGenerator[bytes, None], chunked: bool, keep: bool) -> None:
        """Send ``chunks`` one by one, each once the previous one drained; then end the body."""
        loop = asyncio.get_running_loop()
        try:
            async for data in chunks:
                transport = self._transport
                if transport is None or transport.is_closing():
                    return
                if not data:
                    continue
                transport.write(b"%x\r\n%b\r\n" % (len(data), data) if chunked else data)
                self.progress = time.monotonic()
                if self._write_paused:
                    self._drained = loop.create_future()
                    await self._drained
        except asyncio.CancelledError:
            return  # the connection is gone
        except Exception:
            log.exception("streaming an HTTP response failed")
            keep = False  # the body is cut short: the client sees the connection close mid-stream
            chunked = False
        finally:
            self._stream = None
            await chunks.aclose()
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if chunked:
            transport.write(b"0\r\n\r\n")
        self._written(keep)

    def _release_response(self) -> None:
        """The response is on the wire (or the client gone): its shared memory and the body go back."""
        release, self._pending_release = self._pending_release, None
        block, self._current_block = self._current_block, None
        self._trim_head()
        answered, self._current = self._current, None
        if answered is not None and answered.hold is not None:
            answered.hold.release()
        if self._reserved:
            self._dispatcher.unreserve(self._reserved)
            self._reserved = 0
        try:
            if release is not None:
                release()
        except Exception:
            log.exception("releasing an HTTP response failed")
        finally:
            if block is not None:
                block.release()

    def _free_body(self) -> None:
        """Drop a body being received (the client left, or it is refused): its memory goes back now."""
        block, self._body_block = self._body_block, None
        if block is not None:
            block.release()
        self._body_view = None
        if self._request is not None:
            self._request.body = b""
        if self._chunk_head is not None:
            self._chunk_head.body = None
            self._chunk_head = self._parser = None
        self._chunk_buffer = None
        if self._reserved and self._state != _BUSY:
            self._dispatcher.unreserve(self._reserved)
            self._reserved = 0

    def _fail(self, status: int, message: str) -> None:
        """Answer a request that cannot be read with ``status`` and close the connection."""
        self._keep_alive = False
        self._free_body()
        body = ('{"error":' + json_string(message) + "}").encode()
        self._respond_now(HttpResponse(status, body))

    def _pause_reading(self) -> None:
        if self._reading and self._transport is not None:
            self._reading = False
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if not self._reading and self._transport is not None:
            self._reading = True
            self._transport.resume_reading()

    def _close_or_linger(self) -> None:
        """Close after a response: at once, or (after a refusal) once the client stops sending."""
        transport = self._transport
        if not self._linger or self._eof or transport is None or transport.is_closing():
            self._close()
            return
        self._linger = False
        self._state = _LINGER
        self._linger_since = time.monotonic()
        self._lingered = 0
        if transport.can_write_eof():  # the client sees the end of the answer (TLS: Content-Length says it)
            transport.write_eof()
        self._resume_reading()

    def _close(self) -> None:
        self._state = _CLOSED
        if self._transport is not None:
            self._transport.close()

    # -- for the connection table ---------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No request is being received or answered."""
        return self._state == _HEAD and not self._filled and not self._write_paused

    def expired(self, now: float, header_s: float, body_s: float, idle_s: float) -> str | None:
        """Why the connection has waited on its client for too long (None: it has not).

        A head not complete ``header_s`` after its first byte (however slowly
        it trickles in); a body, or a response the client does not read, that
        makes no progress for ``body_s`` (a response that drains counts as
        progress, however slowly it goes); a keep-alive connection with no
        request for ``idle_s``.
        """
        state = self._state
        if state == _LINGER:
            return "its refused request body did not end" if now - self._linger_since > LINGER_S else None
        if self._write_paused:
            transport = self._transport
            unsent = transport.get_write_buffer_size() if transport is not None else 0
            if unsent != self._unsent:
                self._unsent = unsent
                self.progress = now
            return "its response was not read" if now - self.progress > body_s else None
        if state in (_BODY, _CHUNKED):
            return "its request body made no progress" if now - self.progress > body_s else None
        if state == _HEAD:
            if self._filled:
                return "its request head was not complete" if now - self.head_since > header_s else None
            return "it was idle" if now - self.progress > idle_s else None
        return None

    def abort(self) -> None:
        """Drop the connection now."""
        if self._transport is not None:
            self._transport.abort()

    def close_if_idle(self) -> bool:
        """Close the connection when it is idle (at stop); True when it was closed."""
        if self.idle or self._state == _LINGER:
            self._close()
            return True
        self._keep_alive = False
        return False
