"""The HTTP endpoint's request and response objects, and what a connection hands its requests to.

:class:`HttpRequest` is what a route handler sees of a parsed request;
:class:`HttpResponse` / :class:`HttpStreamResponse` are what it answers;
:class:`Dispatcher` is the router's side of a
:class:`~.connection.HttpConnection`. Plain objects, no I/O.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

__all__ = ["HttpRequest", "HttpResponse", "HttpStreamResponse", "Dispatcher"]


def _unset(response: HttpResponse) -> None:
    raise RuntimeError("the request is not being answered by a connection")


class HttpRequest:
    """One parsed request, as the route handlers see it.

    :ivar method: ``GET``, ``POST``, ...
    :ivar path: the URL path as sent (percent-encoded; the route's parameters are decoded).
    :ivar headers: header values by lower-case name (the first of repeated headers).
    :ivar body: the body bytes (a view of the arena block or buffer it was received into).
    :ivar params: the route's URL parameters (``model``, ``version``, ``name``).
    :ivar body_block: the arena block holding ``body`` when it was received into the
        core's arena (:class:`~tritium.core.memory.pool.SharedBlock`, one reference
        held by the connection until the response is sent), else None.
    :ivar job: what cancels the work a handler started for it (``job.cancel()``: an
        inference request, :class:`~tritium.core.model.servable.Cancellable`), called when the
        client closes its connection before the answer; None: nothing to cancel.
    :ivar hold: what the request holds of the in-flight budget besides its body (an inflated
        body: :class:`~.inflate.BudgetHold`), released by the connection with the response; or None.
    """

    __slots__ = ("method", "path", "headers", "body", "params", "body_block", "route", "respond", "job", "hold")

    def __init__(self, method: str, path: str, headers: dict[str, str]) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body: memoryview | bytes = b""
        self.params: dict[str, str] = {}
        self.body_block: Any = None
        self.route: Any = None
        self.hold: Any = None
        #: answers the request (exactly once): for a handler that answers later, from a callback
        self.respond: Callable[[HttpResponse], None] = _unset
        self.job: Any = None


class HttpResponse:
    """A response to write: status, content type, extra headers and the body.

    :param status: the HTTP status.
    :param body: the body: bytes, or a list of buffers written one after the other
        (views of shared memory, sent without a copy).
    :param content_type: the ``Content-Type`` (None: no such header).
    :param headers: further headers.
    :param release: called once the body is on the wire (or the connection is gone):
        gives the shared memory behind ``body`` back.
    """

    __slots__ = ("status", "body", "content_type", "headers", "release")

    def __init__(
        self,
        status: int = 200,
        body: bytes | list[Any] = b"",
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers
        self.release = release


class HttpStreamResponse(HttpResponse):
    """A response whose body comes in pieces, as they are produced (Server-Sent Events).

    Sent with ``Transfer-Encoding: chunked`` (HTTP/1.0: unframed, then the connection
    closes), one chunk per piece; the next piece is taken only once the previous
    one is on its way to the client (back-pressure). The connection closes
    ``chunks`` when the client goes away or the stream ends.

    :param status: the HTTP status.
    :param chunks: the body's pieces (bytes, empty ones skipped).
    :param content_type: the ``Content-Type``.
    :param headers: further headers.
    """

    __slots__ = ("chunks",)

    def __init__(
        self,
        status: int,
        chunks: AsyncGenerator[bytes, None],
        content_type: str | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status, b"", content_type, headers)
        self.chunks = chunks


class Dispatcher(Protocol):
    """What a connection hands its requests to (the endpoint's router)."""

    def body_destination(self, request: HttpRequest, size: int) -> tuple[memoryview, Any]:
        """Where a body of ``size`` bytes is received: ``(writable view, arena block or None)``."""

    def dispatch(self, request: HttpRequest, respond: Callable[[HttpResponse], None]) -> None:
        """Handle ``request``; call ``respond`` exactly once, now or later."""

    def too_large(self, size: int | None, limit: int) -> HttpResponse:
        """The 413 answer for a body of ``size`` bytes over ``limit`` (None: a chunked body past it)."""

    def body_limit(self, request: HttpRequest) -> int:
        """The body limit of ``request``'s route in bytes (its route is resolved here)."""

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes of the endpoint's budget for bodies in flight (False: it is spent)."""

    def unreserve(self, size: int) -> None:
        """Give back what :meth:`reserve` took."""

    def busy(self) -> HttpResponse:
        """The 503 answer for a body the budget cannot hold."""
