"""HTTP routes of Triton's trace and logging extensions.

``GET/POST /v2/trace/setting``, ``GET/POST /v2/models/<m>[/versions/<v>]/trace/setting``
(the settings of :class:`~tritium.core.tracing.Tracer`) and ``GET/POST /v2/logging``
(:class:`~tritium.core.observability.logging.LogManager`). Answers are Triton's JSON; a bad value is
400 with Triton's message, ``trace_file``/``log_file`` are 501 as in Triton. Where Triton
answers 500 for a client's mistake (a body that is not JSON, a value of the wrong JSON
type), tritium answers 400 (docs/compatibility.md). Runs on the core's event loop.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.api import Code, TritonError
from . import codec
from .context import EndpointContext, error_response
from .messages import HttpRequest, HttpResponse
from .router import CONTROL_BODY_BYTES, Router

__all__ = ["add_trace_logging_routes"]


def _body(request: HttpRequest) -> Any:
    raw = request.body
    if not raw:
        return {}
    try:
        return json.loads(bytes(raw))
    except ValueError as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to parse the request JSON buffer: {exc}") from None


def _json(body: Any) -> HttpResponse:
    return HttpResponse(200, codec.dumps(body))


def trace_setting(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET``: the (model's) trace settings; ``POST``: change them and answer the new ones."""
    model = request.params.get("model", "")
    server = ctx.server
    try:
        if request.method == "POST":
            return _json(server.update_trace_settings(model, _body(request)))
        return _json(server.trace_settings(model))
    except TritonError as exc:
        return error_response(exc)


def logging_setting(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET``: the log settings; ``POST``: change them and answer the new ones."""
    server = ctx.server
    try:
        if request.method == "POST":
            body = _body(request)
            if not isinstance(body, dict):
                raise TritonError(Code.INVALID_ARG, "the log settings must be a JSON object")
            return _json(server.update_log_settings(body))
        return _json(server.log_settings())
    except TritonError as exc:
        return error_response(exc)


def add_trace_logging_routes(router: Router) -> None:
    """Register the trace and logging routes."""
    for path in (
        "/v2/trace/setting",
        "/v2/models/{model}/trace/setting",
        "/v2/models/{model}/versions/{version}/trace/setting",
    ):
        router.add(path, "GET", trace_setting)
        router.add(path, "POST", trace_setting, max_body=CONTROL_BODY_BYTES)
    router.add("/v2/logging", "GET", logging_setting)
    router.add("/v2/logging", "POST", logging_setting, max_body=CONTROL_BODY_BYTES)
