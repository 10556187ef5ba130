"""The HTTP/REST endpoint: the aiohttp application factory and the frontend's start/stop.

:func:`create_app` builds the :class:`aiohttp.web.Application` (state in
typed :class:`~aiohttp.web.AppKey` entries, routes from :mod:`.routes`);
:class:`HTTPFrontend` serves it with an ``AppRunner`` and a ``TCPSite`` on
``--http-address``/``--http-port``. Everything runs in the core process, on
its event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from ...core.server import InferenceServer

log = logging.getLogger("tritium.http")

__all__ = [
    "HTTPFrontend",
    "Inflight",
    "create_app",
    "frontend_from_options",
    "SERVER",
    "MAX_REQUEST_BYTES",
    "INFLIGHT",
]


class Inflight:
    """Counts the inference requests being handled, so that a stop can wait for them."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        """A request starts."""
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        """A request is answered (or failed)."""
        self.count -= 1
        if not self.count:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for no request in flight; return whether that happened."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


#: The server the endpoints call (the in-process API).
SERVER = web.AppKey("server", InferenceServer)
#: The largest request body accepted, in bytes (``ServerOptions.max_request_bytes``).
MAX_REQUEST_BYTES = web.AppKey("max_request_bytes", int)
#: Inference requests in flight.
INFLIGHT = web.AppKey("inflight", Inflight)


def create_app(
    server: InferenceServer, max_request_bytes: int, restrictions: dict[str, tuple[str, str]] | None = None
) -> web.Application:
    """Build the application serving every KServe v2 endpoint of ``server``.

    Serve it with ``auto_decompress=False`` (as :class:`HTTPFrontend` does):
    the endpoint decompresses request bodies itself, with Triton's rules and
    the size limit applied to the decompressed body.

    :param max_request_bytes: the body size limit; a larger body is refused
        with 413 and a message naming the limit (see :mod:`.body`).
    :param restrictions: ``--http-restricted-api`` groups: group -> (header, value).
    """
    from .restricted import restricted_middleware
    from .routes import add_routes  # routes read the keys above

    middlewares = [restricted_middleware(restrictions)] if restrictions else []
    app = web.Application(client_max_size=max_request_bytes, middlewares=middlewares)
    app[SERVER] = server
    app[MAX_REQUEST_BYTES] = max_request_bytes
    app[INFLIGHT] = Inflight()
    add_routes(app)
    return app


class HTTPFrontend:
    """The ``http`` frontend: KServe v2 + Triton's extensions over HTTP/1.1.

    :param server: the server to serve.
    :param address: address to bind (``--http-address``).
    :param port: port to bind (``--http-port``).
    :param max_request_bytes: request body limit.
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
        self.app = create_app(server, max_request_bytes, restrictions)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    async def start(self) -> None:
        """Bind and serve; logs ``Started HTTPService at <address>:<port>`` as Triton does.

        :raises OSError: when the port cannot be bound.
        """
        # Request bodies are decompressed by the endpoint itself (Triton's rules and limits).
        runner = web.AppRunner(
            self.app,
            access_log=None,
            handle_signals=False,
            auto_decompress=False,
            shutdown_timeout=0.5,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.address, self.port, reuse_address=True, backlog=1024)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner, self._site = runner, site
        log.info("Started HTTPService at %s:%d", self.address, self.port)

    async def stop(self, grace: float) -> None:
        """Stop accepting connections, let requests in flight finish for ``grace`` s, close."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self._site is not None:
            await self._site.stop()
            self._site = None
        inflight = self.app[INFLIGHT]
        if inflight.count and not await inflight.wait_idle(grace):
            log.warning("%d HTTP requests still in flight after %.1f s", inflight.count, grace)
        await runner.cleanup()


def frontend_from_options(server: Any) -> HTTPFrontend:
    """The frontend for ``server.options`` (address, port and request size limit)."""
    options = server.options
    return HTTPFrontend(
        server, options.http_address, options.http_port, options.max_request_bytes, options.http_restricted_api
    )
