"""The Vertex AI endpoint's URLs: its health route, its predict route, and the predict route's redirects.

Follows Triton's ``vertex_ai_server.cc`` (2.51, with the later fixes that apply
``--http-restricted-api`` and refuse redirects that change the server):

- ``GET <AIP_HEALTH_ROUTE>``: 200 when the server is ready, else 400; empty body.
- ``POST <AIP_PREDICT_ROUTE>``: a KServe v2 inference request for the default
  model, answered as ``POST /v2/models/<default>/infer`` is. A binary request
  says the size of its JSON part in its ``Content-Type``
  (``application/vnd.vertex-ai-triton.binary+json;json-header-size=<n>``); a
  binary response is the KServe one (``application/octet-stream`` with
  ``Inference-Header-Content-Length``), as Triton's.
- ``POST <AIP_PREDICT_ROUTE>`` with ``X-Vertex-Ai-Triton-Redirect: <path>``: the
  request goes to the KServe endpoint ``/<path>`` instead, with the method that
  endpoint takes: ``v2``, ``v2/health/{live,ready}``, ``v2/models/<m>[/versions/<v>]``
  with nothing, ``/ready``, ``/config``, ``/stats`` or ``/infer``, ``v2/models/stats``,
  ``v2/{system,cuda}sharedmemory[/region/<r>]/status``, ``v2/repository/index`` and
  ``metrics`` (the per-model metrics). Shared-memory registration and model
  load/unload through a redirect are refused with 403 (as Triton since 2.68); any
  other path is 400 with an empty body.
- anything else: 400 with an empty body; a wrong method on a known URL: 405.

Runs on the core's event loop.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

from ..kserve_http.adapter import BAD_REQUEST, VERTEX_AI_BINARY, delegate
from ..kserve_http.app import create_router
from ..kserve_http.body import body_too_large
from ..kserve_http.context import EndpointContext, error_response
from ..kserve_http.messages import HttpRequest, HttpResponse
from ..kserve_http.restricted import group_refusal, restriction_error
from ..kserve_http.router import Router
from ..kserve_http.routes import health_ready, infer

__all__ = ["VertexAiRoutes", "REDIRECT_HEADER"]

REDIRECT_HEADER = "x-vertex-ai-triton-redirect"

_MODEL = re.compile(
    r"/v2/models/([^/]+)(?:/versions/([0-9]+))?(?:/(infer|generate|generate_stream|ready|config|stats|trace/setting))?"
)
_HEALTH = re.compile(r"/v2/health/(?:live|ready)")
_SHARED_MEMORY = re.compile(r"/v2/(?:system|cuda)sharedmemory(?:/region/[^/]+)?/(status|register|unregister)")
_REPOSITORY = re.compile(r"/v2/repository(?:/[^/]+)?/(index|models/[^/]+/(?:load|unload))")

_FORBIDDEN = HttpResponse(403, b"", None)


def _redirect_method(path: str) -> str | HttpResponse:
    """The method Triton hands a redirect to ``path`` with, or the answer when it refuses it."""
    if path in ("/metrics", "/v2", "/v2/models/stats") or _HEALTH.fullmatch(path):
        return "GET"
    match = _MODEL.fullmatch(path)
    if match is not None:
        kind = match.group(3)
        if kind == "infer":
            return "POST"
        return "GET" if kind in (None, "ready", "config", "stats") else BAD_REQUEST
    match = _SHARED_MEMORY.fullmatch(path)
    if match is not None:
        return "GET" if match.group(1) == "status" else _FORBIDDEN
    match = _REPOSITORY.fullmatch(path)
    if match is not None:
        return "POST" if match.group(1) == "index" else _FORBIDDEN
    return BAD_REQUEST


class VertexAiRoutes:
    """The handlers of one Vertex AI endpoint and its settings.

    :param predict_route: ``AIP_PREDICT_ROUTE``; ``health_route``: ``AIP_HEALTH_ROUTE``.
    :param default_model: the model the predict route serves ("" until chosen at start-up).
    :param restrictions: ``--http-restricted-api`` (group -> header, value).
    :param metrics: renders the Prometheus text of ``metrics`` redirects (None: metrics are off).
    """

    def __init__(
        self,
        predict_route: str,
        health_route: str,
        default_model: str,
        restrictions: dict[str, tuple[str, str]],
        metrics: Any = None,
    ) -> None:
        self.predict_route = predict_route
        self.health_route = health_route
        self.default_model = default_model
        self.restrictions = restrictions
        self.metrics = metrics
        self.kserve = create_router()

    def health(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """``GET <health route>``: 200 when ready, else 400; empty body."""
        refused = group_refusal(self.restrictions, "health", request.headers)
        return refused if refused is not None else health_ready(ctx, request)

    def predict(self, ctx: EndpointContext, request: HttpRequest) -> Any:
        """``POST <predict route>``: the default model's inference, or a redirect (see the module)."""
        target = request.headers.get(REDIRECT_HEADER)
        if target is None:
            refused = group_refusal(self.restrictions, "inference", request.headers)
            if refused is not None:
                return refused
            return delegate(ctx, request, infer, self.default_model, "", VERTEX_AI_BINARY)
        return self._redirect(ctx, request, "/" + target)

    def _redirect(self, ctx: EndpointContext, request: HttpRequest, path: str) -> Any:
        method = _redirect_method(path)
        if isinstance(method, HttpResponse):
            return method
        if path == "/metrics":
            if self.metrics is None:
                return BAD_REQUEST
            return HttpResponse(200, self.metrics(), "text/plain; charset=utf-8")
        route, params = self.kserve.resolve(path)
        handler = route.handlers.get(method) if route is not None else None
        if route is None or handler is None:
            return BAD_REQUEST
        if route.max_body is not None and len(request.body) > route.max_body:
            return error_response(body_too_large(len(request.body), route.max_body, route_limit=True))
        inner = HttpRequest(method, path, request.headers)
        inner.body, inner.body_block, inner.respond = request.body, request.body_block, request.respond
        refused = restriction_error(self.restrictions, inner)
        if refused is not None:
            return refused
        if route.arena_body:  # an inference: the size of its JSON comes from the Content-Type here too
            model, version = params["model"], params.get("version", "")
            return delegate(ctx, inner, infer, model, version, VERTEX_AI_BINARY)
        inner.route, inner.params = route, params
        return handler(ctx, inner)

    def router(self) -> Router:
        """The URL table: unknown URLs get Triton's empty 400."""
        router = Router(not_found=BAD_REQUEST)
        router.add(self.health_route, "GET", self.health)
        router.add(self.predict_route, "POST", self.predict, arena_body=True)
        return router
