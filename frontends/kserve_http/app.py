"""The HTTP/REST endpoint: its URL table, its dispatcher, and its start/stop.

:class:`HTTPFrontend` listens on ``--http-address``/``--http-port`` with one
:class:`~.connection.HttpConnection` per client connection and routes each
request through the :class:`~.router.Router` that :func:`create_router`
fills (see :mod:`.routes`). Handlers get an :class:`EndpointContext` (the
server, the body limit, the requests in flight; :mod:`.context`) and the request. Everything
runs in the core process, on its event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from ...core.errors import Code, TritonError
from ...core.server import InferenceServer
from .body import body_too_large
from .connection import HttpConnection, HttpRequest, HttpResponse
from .connection_table import ConnectionTable
from .context import EndpointContext, error_response
from .restricted import restriction_error
from .router import METHOD_NOT_ALLOWED, NOT_FOUND, Router
from .routes import add_routes

log = logging.getLogger("tritium.http")

__all__ = ["HTTPFrontend", "create_router", "frontend_from_options"]


def create_router() -> Router:
    """The URL table of every KServe v2 / Triton endpoint (see :mod:`.routes`)."""
    router = Router()
    add_routes(router)
    return router


class HTTPFrontend:
    """The ``http`` frontend: KServe v2 + Triton's extensions over HTTP/1.1.

    :param server: the server to serve.
    :param address: address to bind (``--http-address``).
    :param port: port to bind (``--http-port``).
    :param max_request_bytes: request body limit (larger bodies get 413).
    :param restrictions: ``--http-restricted-api`` groups: group -> (header, value).
    """

    name = "http"

    def __init__(
        self,
        server: InferenceServer,
        address: str,
        port: int,
        max_request_bytes: int,
        restrictions: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.server = server
        self.address = address
        self.port = port
        self.context = EndpointContext(server, max_request_bytes)
        self.router = create_router()
        self.restrictions = dict(restrictions or {})
        self.connections = ConnectionTable()
        self._listener: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the connections' dispatcher -------------------------------------------------------
    @property
    def max_body_bytes(self) -> int:
        """The request body limit in bytes."""
        return self.context.max_request_bytes

    def too_large(self, size: int | None) -> HttpResponse:
        """413 for a body of ``size`` bytes (None: a chunked body past the limit)."""
        return error_response(body_too_large(size, self.context.max_request_bytes))

    def body_destination(self, request: HttpRequest, size: int) -> tuple[memoryview, Any]:
        """The inference routes' binary bodies go into the arena (no copy to the worker); others into memory."""
        route, params = self.router.resolve(request.path)
        request.route, request.params = route, params
        if (
            route is not None
            and route.arena_body
            and "inference-header-content-length" in request.headers
            and "content-encoding" not in request.headers
        ):
            block = self.server.request_buffer(size)
            return block.view, block
        return memoryview(bytearray(size)), None

    def dispatch(self, request: HttpRequest, respond: Callable[[HttpResponse], None]) -> None:
        """Route ``request`` to its handler; ``respond`` gets the answer (now or from a task)."""
        route = request.route
        if route is None:
            route, request.params = self.router.resolve(request.path)
            if route is None:
                respond(NOT_FOUND)
                return
        handler = route.handlers.get(request.method)
        if handler is None:
            respond(METHOD_NOT_ALLOWED)
            return
        if self.restrictions:
            refused = restriction_error(self.restrictions, request)
            if refused is not None:
                respond(refused)
                return
        request.respond = respond
        result = handler(self.context, request)
        if result is None:  # the handler answers through request.respond
            return
        if isinstance(result, HttpResponse):
            respond(result)
            return
        task = asyncio.get_running_loop().create_task(self._answer(result, respond))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _answer(pending: Awaitable[HttpResponse], respond: Callable[[HttpResponse], None]) -> None:
        try:
            response = await pending
        except TritonError as exc:
            response = error_response(exc)
        except Exception as exc:  # a bug must not leave the client without an answer
            log.exception("HTTP request failed")
            response = error_response(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
        respond(response)

    # -- start and stop ------------------------------------------------------------------
    async def start(self) -> None:
        """Bind and serve; logs ``Started HTTPService at <address>:<port>`` as Triton does.

        :raises OSError: when the port cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            lambda: HttpConnection(self, self.connections),
            self.address,
            self.port,
            reuse_address=True,
            backlog=1024,
        )
        log.info("Started HTTPService at %s:%d", self.address, self.port)

    async def stop(self, grace: float) -> None:
        """Stop accepting connections, let requests in flight finish for ``grace`` s, close."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.close()
        inflight = self.context.inflight
        self.connections.close_idle()
        if inflight.count and not await inflight.wait_idle(grace):
            log.warning("%d HTTP requests still in flight after %.1f s", inflight.count, grace)
        self.connections.abort_all()
        for task in list(self._tasks):
            task.cancel()
        await listener.wait_closed()


def frontend_from_options(server: Any) -> HTTPFrontend:
    """The frontend for ``server.options`` (address, port and request size limit)."""
    options = server.options
    return HTTPFrontend(
        server, options.http_address, options.http_port, options.max_request_bytes, options.http_restricted_api
    )
