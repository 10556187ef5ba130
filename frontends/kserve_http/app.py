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
import mmap
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.api import Code, ServerAPI, TritonError
from .body import body_too_large
from .connection import HttpConnection
from .connection_table import ConnectionTable, HttpTimeouts
from .context import EndpointContext, error_response
from .messages import HttpRequest, HttpResponse
from .restricted import restriction_error
from .router import METHOD_NOT_ALLOWED, Router
from .routes import add_routes

log = logging.getLogger("tritium.http")

__all__ = ["HTTPFrontend", "create_router", "frontend_from_options"]

#: bodies from this size on are received into an anonymous mapping rather than a bytearray
_MAPPED_BODY = 1 << 20
#: how the SageMaker and Vertex AI endpoints' binary requests give their JSON size (in the Content-Type)
_BINARY_SIZE = "json-header-size="


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
    :param timeouts: header, body and keep-alive idle timeouts (:class:`~.connection_table.HttpTimeouts`).
    :param tls: HTTPS files (:class:`~tritium.core.settings.network.TlsFiles`, ``--http-use-ssl``), None: plain HTTP.
    :param max_json_bytes: the largest JSON part of an inference request (0: ``max_request_bytes``);
        JSON becomes Python objects, so it is bounded more tightly than binary data (413).
    :param max_decompressed_bytes: the most a compressed body may inflate to (0: ``max_request_bytes``;
        413 past it); the inflated bytes count against the in-flight budget as they grow (503).
    :param max_connections: the most connections open at once (``--http-max-connections``; 503 past it;
        0: no bound but the open-file limit's, which always applies).
    :param router: the URL table (default: :func:`create_router`'s); another endpoint that serves
        the same handlers under other URLs (SageMaker, Vertex AI) passes its own.
    :param name: the endpoint's name (its ``plugins.toml`` table).
    :param service: what the start-up line calls it (``Started <service> at <address>:<port>``).
    """

    def __init__(
        self,
        server: ServerAPI,
        address: str,
        port: int,
        max_request_bytes: int,
        restrictions: dict[str, tuple[str, str]] | None = None,
        timeouts: HttpTimeouts | None = None,
        tls: Any = None,
        max_json_bytes: int = 0,
        max_decompressed_bytes: int = 0,
        max_connections: int = 0,
        router: Router | None = None,
        name: str = "http",
        service: str = "HTTPService",
    ) -> None:
        self.name = name
        self.service = service
        self.server = server
        self.address = address
        self.port = port
        self.context = EndpointContext(server, max_request_bytes, max_json_bytes, max_decompressed_bytes)
        self.router = router if router is not None else create_router()
        self.restrictions = dict(restrictions or {})
        self.connections = ConnectionTable(timeouts, max_connections)
        #: bytes of request bodies being received or handled: the server's budget, shared with gRPC
        self.budget = server.body_budget
        self.tls = tls
        self._listener: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the connections' dispatcher -------------------------------------------------------
    def body_limit(self, request: HttpRequest) -> int:
        """The body limit of ``request``'s route: ``--max-request-bytes``, or less for small control bodies.

        Resolves the route (kept on the request for :meth:`dispatch`).
        """
        route, params = self.router.resolve(request.path)
        request.route, request.params = route, params
        limit = self.context.max_request_bytes
        if route is not None and route.max_body is not None:
            return min(limit, route.max_body)
        return limit

    def too_large(self, size: int | None, limit: int) -> HttpResponse:
        """413 for a body of ``size`` bytes over ``limit`` (None: a chunked body past it)."""
        return error_response(body_too_large(size, limit, route_limit=limit < self.context.max_request_bytes))

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes of the server's budget for bodies in flight (``--max-inflight-request-bytes``)."""
        return self.budget.reserve(size)

    def unreserve(self, size: int) -> None:
        """Give back bytes taken by :meth:`reserve`."""
        self.budget.release(size)

    def busy(self) -> HttpResponse:
        """503 (with ``Retry-After``) for a body the budget for bodies in flight cannot hold now."""
        log.info("HTTP: a request body was refused: %d bytes of bodies are in flight already", self.budget.held)
        return error_response(self.budget.refusal(), {"Retry-After": "1"})

    def body_destination(self, request: HttpRequest, size: int) -> tuple[memoryview, Any]:
        """The inference routes' binary bodies go into the arena (no copy to the worker); others into memory.

        A binary body is one with ``Inference-Header-Content-Length``, or (the cloud endpoints)
        a ``Content-Type`` that gives the JSON size.

        A large body in memory is an anonymous mapping: pages are taken as the
        bytes arrive (a client that declares a size and sends nothing costs
        nothing) and go back to the system as soon as the request is dropped.
        """
        route = request.route
        if route is None:
            route, request.params = self.router.resolve(request.path)
            request.route = route
        headers = request.headers
        if (
            route is not None
            and route.arena_body
            and ("inference-header-content-length" in headers or _BINARY_SIZE in headers.get("content-type", ""))
            and "content-encoding" not in headers
        ):
            block = self.server.request_buffer(size)
            return block.view, block
        if size >= _MAPPED_BODY:
            return memoryview(mmap.mmap(-1, size)), None
        return memoryview(bytearray(size)), None

    def dispatch(self, request: HttpRequest, respond: Callable[[HttpResponse], None]) -> None:
        """Route ``request`` to its handler; ``respond`` gets the answer (now or from a task)."""
        route = request.route
        if route is None:
            route, request.params = self.router.resolve(request.path)
            if route is None:
                respond(self.router.not_found)
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
        context = None
        if self.tls is not None:
            from .tls import reload_certificate, ssl_context

            context = ssl_context(self.tls)
            try:
                loop.add_signal_handler(signal.SIGHUP, reload_certificate, context, self.tls)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread (in-process use)
                pass
        self._listener = await loop.create_server(
            lambda: HttpConnection(self, self.connections),
            self.address,
            self.port,
            reuse_address=True,
            backlog=1024,
            ssl=context,
        )
        log.info("Started %s at %s:%d%s", self.service, self.address, self.port, " (HTTPS)" if context else "")

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


def frontend_from_options(
    server: ServerAPI,
    address: str | None = None,
    port: int | None = None,
    router: Router | None = None,
    name: str = "http",
    service: str = "HTTPService",
    tls: bool = True,
) -> HTTPFrontend:
    """The frontend for ``server.options`` (address, port, limits, timeouts, TLS, restrictions).

    The other parameters serve another endpoint with the same machinery (SageMaker, Vertex
    AI): its address and port (default ``--http-address``/``--http-port``), URL table, name
    and start-up label (see :class:`HTTPFrontend`); ``tls=False``: plain HTTP whatever
    ``--http-use-ssl`` says.
    """
    options = server.options
    return HTTPFrontend(
        server,
        options.http_address if address is None else address,
        options.http_port if port is None else port,
        options.max_request_bytes,
        options.http_restricted_api,
        HttpTimeouts(
            options.network.http_header_timeout_s,
            options.network.http_body_timeout_s,
            options.network.http_idle_timeout_s,
        ),
        options.network.http_tls if tls else None,
        options.network.max_json_request_bytes,
        options.network.max_decompressed_request_bytes,
        options.network.http_max_connections,
        router,
        name,
        service,
    )
