"""``--http-restricted-api``: API groups that answer only requests carrying a header with a value.

``--http-restricted-api=model-repository,statistics:admin-key=secret``
restricts the model repository and statistics endpoints: a request without
``admin-key: secret`` gets Triton's answer, 403 with
``{"error":"This API is restricted, expecting header 'admin-key'"}``
(the same for a wrong value). The groups and the URLs in each are Triton's
(``health``, ``metadata``, ``inference``, ``shared-memory``,
``model-config``, ``model-repository``, ``statistics``, ``trace``,
``logging``). An aiohttp middleware, so that it covers routes added by any
module; runs on the core's event loop before the handler (the body is not read).
"""

from __future__ import annotations

import re
from typing import Awaitable, Callable

from aiohttp import web

__all__ = ["api_group", "restricted_middleware"]

_GROUPS = (
    (re.compile(r"^/v2/repository(/|$)"), "model-repository"),
    (re.compile(r"^/v2/(system|cuda)sharedmemory(/|$)"), "shared-memory"),
    (re.compile(r"^/v2/logging$"), "logging"),
    (re.compile(r"^/v2/(models/[^/]+(/versions/[0-9]+)?/)?trace/setting$"), "trace"),
    (re.compile(r"^/v2/models(/[^/]+(/versions/[0-9]+)?)?/stats$"), "statistics"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/(infer|generate|generate_stream)$"), "inference"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/config$"), "model-config"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?/ready$"), "health"),
    (re.compile(r"^/v2/health/(live|ready)$"), "health"),
    (re.compile(r"^/v2/models/[^/]+(/versions/[0-9]+)?$"), "metadata"),
    (re.compile(r"^/v2/?$"), "metadata"),
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def api_group(path: str) -> str | None:
    """The restricted-API group of a URL path (None: not in any group)."""
    for pattern, group in _GROUPS:
        if pattern.match(path):
            return group
    return None


def restricted_middleware(restrictions: dict[str, tuple[str, str]]):  # type: ignore[no-untyped-def]
    """The middleware enforcing ``restrictions`` (group -> (header name, value))."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        group = api_group(request.path)
        rule = restrictions.get(group) if group is not None else None
        if rule is not None:
            header, value = rule
            if request.headers.get(header) != value:
                body = '{"error":"This API is restricted, expecting header \'%s\'"}' % header
                return web.Response(status=403, text=body, content_type="text/plain")
        return await handler(request)

    return middleware
