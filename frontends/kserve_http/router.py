"""The URL table of the HTTP endpoint: path templates to per-method handlers.

Templates are Triton's URLs with ``{model}`` and ``{name}`` (one path
segment, ``[^/]+``) and ``{version}`` (``[0-9]+``); no trailing slashes.
A path that matches no template is 404 ``{"error":"Not Found"}``; a
matching path with a method that has no handler is 405 ``{"error":"Method
Not Allowed"}``, as Triton answers them. Exact paths are a dictionary
lookup; templates are tried in the order they were added (the inference
URLs first: they are the hot path). Runs on the core's event loop.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from .messages import HttpRequest, HttpResponse

__all__ = ["Route", "Router", "Handler", "NOT_FOUND", "METHOD_NOT_ALLOWED", "CONTROL_BODY_BYTES"]

#: the body limit of control routes whose JSON is always small (shared memory, trace, logging,
#: unload): parsed on the event loop, so bounded far below ``--max-request-bytes``
CONTROL_BODY_BYTES = 64 * 1024

#: a handler gets the endpoint's context and the request; it answers now (a response), from a
#: coroutine, or later through ``request.respond`` (it returns None)
Handler = Callable[[Any, HttpRequest], HttpResponse | Awaitable[HttpResponse] | None]

NOT_FOUND = HttpResponse(404, b'{"error":"Not Found"}')
METHOD_NOT_ALLOWED = HttpResponse(405, b'{"error":"Method Not Allowed"}')

_PARAMETERS = {"model": "[^/]+", "name": "[^/]+", "version": "[0-9]+"}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Route:
    """One URL template and its handlers by method.

    :ivar arena_body: the body of this route's requests is received into the core's
        shared-memory arena (the inference routes: their tensors go to a worker from there).
    :ivar max_body: the route's own body limit in bytes (None: the endpoint's); a larger
        body is refused with 413 from its headers.
    """

    __slots__ = ("template", "handlers", "arena_body", "max_body")

    def __init__(self, template: str, arena_body: bool = False, max_body: int | None = None) -> None:
        self.template = template
        self.handlers: dict[str, Handler] = {}
        self.arena_body = arena_body
        self.max_body = max_body


class Router:
    """Exact paths and templates, each a :class:`Route`.

    :param not_found: the answer to a path that matches no route (the KServe endpoint's 404;
        the SageMaker and Vertex AI endpoints answer 400 with an empty body, as Triton's do).
    """

    def __init__(self, not_found: HttpResponse = NOT_FOUND) -> None:
        self.not_found = not_found
        self._exact: dict[str, Route] = {}
        self._patterns: list[tuple[re.Pattern[str], Route]] = []
        self._routes: dict[str, Route] = {}

    def add(
        self, template: str, method: str, handler: Handler, arena_body: bool = False, max_body: int | None = None
    ) -> None:
        """Answer ``method`` on ``template`` with ``handler`` (``max_body``: the route's body limit, bytes).

        :raises ValueError: for a placeholder other than ``model``, ``name`` or ``version``.
        """
        route = self._routes.get(template)
        if route is None:
            route = self._routes[template] = Route(template, arena_body, max_body)
            if "{" not in template:
                self._exact[template] = route
            else:
                pieces = _PLACEHOLDER.split(template)  # text, name, text, name, ..., text
                for name in pieces[1::2]:
                    if name not in _PARAMETERS:
                        raise ValueError(f"unknown URL parameter {{{name}}} in {template}")
                regex = "".join(
                    re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>{_PARAMETERS[piece]})"
                    for i, piece in enumerate(pieces)
                )
                self._patterns.append((re.compile(regex + r"\Z"), route))
        if max_body is not None:
            route.max_body = max_body
        route.handlers[method] = handler

    def resolve(self, path: str) -> tuple[Route | None, dict[str, str]]:
        """The route of ``path`` (percent-encoded, as sent) and its decoded URL parameters (None: 404)."""
        route = self._exact.get(path)
        if route is not None:
            return route, {}
        for pattern, route in self._patterns:
            match = pattern.match(path)
            if match is not None:
                params = match.groupdict()
                if "%" in path:  # matched on the encoded path: an encoded "/" stays inside its segment
                    params = {k: unquote(v) for k, v in params.items()}
                return route, params
        return None, {}
