"""Serve's HTTP proxy in front of the HTTP endpoint's handlers: a Starlette request in, a Starlette response out.

Serve's proxy hands each request to one replica as a Starlette ``Request``;
:meth:`HttpAdapter.handle` turns it into the endpoint's
:class:`~tritium.frontends.kserve_http.messages.HttpRequest`, routes it through
the KServe URL table (:func:`~tritium.frontends.kserve_http.routes.add_routes`:
the same handlers, codec, messages and status codes as ``tritium-server``'s
HTTP endpoint) over the replica's :class:`~.replica_api.ReplicaServer`, and
turns the answer back into a Starlette ``Response``, on the replica's event loop.

What this adapter adds (see :mod:`.replica_api` for what the API changes):

- the URL path below the application's ``route_prefix`` (Serve's ASGI ``root_path``);
- the body, read within ``--max-request-bytes`` (or the route's smaller limit): 413 beyond it;
- ``GET /metrics``: every live replica's ``nv_*`` metrics, labelled ``replica``;
- the shared-memory, trace and logging URLs answer 501 before their handlers read the body;
- a compressed inference body (``Content-Encoding``) is refused with Triton's 501
  "Unsupported compression type", and responses are not compressed;
- the generate extension and the OpenAPI document are not served (404).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.api import Code, ServerAPI, TritonError
from ...frontends.base import ClusterView
from ...frontends.kserve_http.body import body_too_large
from ...frontends.kserve_http.context import EndpointContext, error_response
from ...frontends.kserve_http.messages import HttpRequest, HttpResponse, HttpStreamResponse
from ...frontends.kserve_http.restricted import api_group
from ...frontends.kserve_http.router import METHOD_NOT_ALLOWED, Handler, Route, Router
from ...frontends.kserve_http.routes import add_routes, infer
from .replica_api import REFUSED_GROUPS

log = logging.getLogger("tritium.ray_serve")

__all__ = ["HttpAdapter"]

_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


class HttpAdapter:
    """The KServe HTTP handlers of one replica behind Serve's HTTP proxy.

    :param server: the replica's API (:class:`~.replica_api.ReplicaServer`).
    :param cluster: where readiness and statistics come from (the replica's agent).
    :param metrics: the Prometheus text of ``GET /metrics`` (None: not served).
    """

    def __init__(
        self, server: ServerAPI, cluster: ClusterView, metrics: Callable[[], Awaitable[bytes]] | None = None
    ) -> None:
        options = server.options
        network = options.network
        self.context = EndpointContext(
            server,
            options.max_request_bytes,
            network.max_json_request_bytes,
            network.max_decompressed_request_bytes,
            cluster,
        )
        self.router = Router()
        add_routes(self.router, generate_extension=False, openapi=False)
        if metrics is not None:

            async def prometheus(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
                return HttpResponse(200, await metrics(), _PROMETHEUS)

            for path in ("/metrics", "/metrics/"):
                self.router.add(path, "GET", prometheus)

    async def handle(self, request: Request) -> Response:
        """Answer one HTTP request; a :class:`TritonError` becomes Triton's ``{"error": ...}`` answer."""
        try:
            answer = await self._answer(request)
        except TritonError as exc:
            answer = error_response(exc)
        except Exception as exc:  # a bug must not leave the client without an answer
            log.exception("HTTP request %s %s failed", request.method, request.url.path)
            answer = error_response(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
        return _starlette_response(answer)

    async def _answer(self, request: Request) -> HttpResponse:
        path = _application_path(request)
        refusal = REFUSED_GROUPS.get(api_group(path) or "")
        if refusal is not None:
            raise refusal()
        route, params = self.router.resolve(path)
        if route is None:
            return self.router.not_found
        handler = route.handlers.get(request.method)
        if handler is None:
            return METHOD_NOT_ALLOWED
        headers: dict[str, str] = {}
        for name, value in request.headers.raw:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        if handler is infer and headers.get("content-encoding", "identity") not in ("", "identity"):
            return error_response(
                TritonError(Code.UNSUPPORTED, "Unsupported compression type"), {"Accept-Encoding": "identity"}
            )
        headers.pop("accept-encoding", None)  # responses are not compressed
        message = HttpRequest(request.method, path, headers)
        message.body = await self._body(request, route)
        message.params, message.route = params, route
        return await _dispatch(handler, self.context, message)

    async def _body(self, request: Request, route: Route) -> bytes:
        """The body, within the route's limit (refused from its declared length when it says more)."""
        limit = full = self.context.max_request_bytes
        if route.max_body is not None:
            limit = min(limit, route.max_body)
        declared = request.headers.get("content-length")
        if declared is None and "transfer-encoding" not in request.headers:
            return b""  # HTTP/1.1: no body
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise body_too_large(int(declared), limit, route_limit=limit < full)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise body_too_large(None, limit, route_limit=limit < full)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _dispatch(handler: Handler, context: EndpointContext, request: HttpRequest) -> HttpResponse:
    """The handler's answer: given now, awaited, or given later through ``request.respond``."""
    answered: asyncio.Future[HttpResponse] = asyncio.get_running_loop().create_future()
    request.respond = lambda response: None if answered.done() else answered.set_result(response)
    result = handler(context, request)
    if isinstance(result, HttpResponse):
        return result
    if result is not None:
        return await result
    try:
        return await answered
    except asyncio.CancelledError:  # the client went away: stop the work the handler started
        if request.job is not None:
            request.job.cancel()
        raise


def _application_path(request: Request) -> str:
    """The URL path below the application's ``route_prefix`` (Serve passes it as the ASGI ``root_path``)."""
    path = request.url.path
    root = str(request.scope.get("root_path", "")).rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _starlette_response(answer: HttpResponse) -> Response:
    """``answer`` as Starlette's response (its body joined; its shared memory given back)."""
    if isinstance(answer, HttpStreamResponse):  # the generate extension is not routed
        raise TypeError("a streamed response cannot be sent through Ray Serve's proxy")
    try:
        body: Any = answer.body
        content = b"".join(body) if isinstance(body, list) else bytes(body)
    finally:
        if answer.release is not None:
            answer.release()
    return Response(content, status_code=answer.status, headers=answer.headers, media_type=answer.content_type)
