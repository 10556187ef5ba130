"""The KServe handlers under another endpoint's URLs: what the SageMaker and Vertex AI endpoints share.

Triton's SageMaker and Vertex AI endpoints are its HTTP endpoint with other
routes in front: the body of ``/invocations`` or of the Vertex AI predict
route is a KServe v2 inference request, parsed and answered by the same code.
Two things differ, and :func:`delegate` applies them before handing the request
to the KServe handler (:func:`~.routes.infer`, :func:`~.generate.generate`):

- the size of the JSON part of a binary request comes from the
  ``Content-Type``, ``<mime>;json-header-size=<n>`` (``mime`` below), not from
  ``Inference-Header-Content-Length`` (which these endpoints ignore);
- responses are never compressed (``Accept-Encoding`` is ignored), as Triton's
  endpoints answer.

A ``transform`` rewrites each answer (SageMaker's binary responses carry the
size in their ``Content-Type`` too; its multi-model invoke answers errors with
400). Runs on the core's event loop.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ...core.api import Code, TritonError
from .app import HTTPFrontend, frontend_from_options
from .context import EndpointContext, error_response
from .messages import HttpRequest, HttpResponse
from .router import Handler, Router

__all__ = [
    "PreparedFrontend",
    "check_settings",
    "cloud_frontend",
    "SAGEMAKER_BINARY",
    "VERTEX_AI_BINARY",
    "BAD_REQUEST",
    "delegate",
    "json_header_size",
    "binary_content_type",
]

#: the ``Content-Type`` prefix of a binary request (and, for SageMaker, response); the JSON size follows
SAGEMAKER_BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VERTEX_AI_BINARY = "application/vnd.vertex-ai-triton.binary+json;json-header-size="

#: Triton's answer to a URL these endpoints do not serve: 400, empty body
BAD_REQUEST = HttpResponse(400, b"", None)

_IHCL = "inference-header-content-length"
_INTEGER = re.compile(r"\s*[+-]?\d")  # what C++ std::stoi starts with

Transform = Callable[[HttpResponse], HttpResponse]


def json_header_size(content_type: str | None, mime: str) -> str | None:
    """The JSON size text of a binary request's ``Content-Type`` (None: not a binary request, all JSON).

    :param mime: :data:`SAGEMAKER_BINARY` or :data:`VERTEX_AI_BINARY`.
    :raises TritonError: INVALID_ARG with Triton's messages when the MIME type is not at the
        start of the header, or the size is not a number (Triton 2.51 reads that as 0).
    """
    if content_type is None:
        return None
    pos = content_type.find(mime)
    if pos == -1:
        return None
    if pos != 0:
        raise TritonError(
            Code.INVALID_ARG, f"expect MIME type for binary data starts with '{mime}', got: {content_type}"
        )
    size = content_type[len(mime) :]
    if not _INTEGER.match(size):
        raise TritonError(Code.INVALID_ARG, f"Unable to parse inference header size, got: {size}")
    return size


def binary_content_type(mime: str) -> Transform:
    """A transform giving a binary response ``Content-Type: <mime><json size>`` instead of
    ``application/octet-stream`` with ``Inference-Header-Content-Length`` (SageMaker's form)."""

    def transform(response: HttpResponse) -> HttpResponse:
        headers = response.headers
        if not headers or "Inference-Header-Content-Length" not in headers:
            return response
        rest = {k: v for k, v in headers.items() if k != "Inference-Header-Content-Length"}
        size = headers["Inference-Header-Content-Length"]
        return HttpResponse(response.status, response.body, mime + size, rest or None, response.release)

    return transform


def delegate(
    ctx: EndpointContext,
    request: HttpRequest,
    handler: Handler,
    model: str,
    version: str,
    mime: str,
    transform: Transform | None = None,
) -> HttpResponse | Awaitable[HttpResponse] | None:
    """Answer ``request`` with the KServe ``handler`` as if it were sent to ``model``'s URL.

    :param handler: :func:`~.routes.infer`, :func:`~.generate.generate` or
        :func:`~.generate.generate_stream`.
    :param model: the model name; ``version``: its version ("" for the version policy's).
    :param mime: the binary ``Content-Type`` prefix of this endpoint.
    :param transform: applied to every answer, now or later (None: answers as they are).
    :returns: what the handler returns (an answer now, an awaitable, or None when it answers
        through ``request.respond``).
    """
    headers = request.headers
    headers.pop(_IHCL, None)  # Triton's cloud endpoints read the size from Content-Type only
    headers.pop("accept-encoding", None)
    finish = transform or _same
    try:
        size = json_header_size(headers.get("content-type"), mime)
    except TritonError as exc:
        return finish(error_response(exc))
    if size is not None:
        headers[_IHCL] = size
    request.params = {"model": model, "version": version} if version else {"model": model}
    if transform is not None:
        respond = request.respond
        request.respond = lambda response: respond(transform(response))
    result = handler(ctx, request)
    if result is None:
        return None
    if isinstance(result, HttpResponse):
        return finish(result)
    return _then(result, finish)


def _same(response: HttpResponse) -> HttpResponse:
    return response


async def _then(pending: Awaitable[HttpResponse], transform: Transform) -> HttpResponse:
    try:
        response = await pending
    except TritonError as exc:
        response = error_response(exc)
    return transform(response)


def check_settings(table: str, settings: Mapping[str, Any], known: Sequence[str]) -> None:
    """Refuse keys of ``[frontends.<table>]`` that the endpoint does not know.

    :raises TritonError: INVALID_ARG naming the unknown keys and the known ones.
    """
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise TritonError(
            Code.INVALID_ARG,
            f"unknown setting(s) {', '.join(unknown)} in [frontends.{table}] (known: {', '.join(known)})",
        )


def cloud_frontend(
    server: Any,
    name: str,
    service: str,
    settings: Mapping[str, Any],
    router: Router,
    prepare: Callable[[], None],
    default_port: int = 8080,
) -> PreparedFrontend:
    """A cloud endpoint: ``router`` on ``settings``' ``address`` (default 0.0.0.0, as Triton binds
    them) and ``port``, plain HTTP, with the KServe endpoint's limits, timeouts and restrictions.

    :param name: its ``plugins.toml`` name; ``service``: its start-up label (Triton's).
    :param prepare: run once the models are loaded, before it serves (see :class:`PreparedFrontend`).
    """
    address = str(settings.get("address", "0.0.0.0"))
    port = int(settings.get("port", default_port))
    http = frontend_from_options(server, address, port, router, name=name, service=service, tls=False)
    return PreparedFrontend(http, prepare)


class PreparedFrontend:
    """An :class:`~.app.HTTPFrontend` that runs ``prepare`` once the models are loaded, before it serves.

    The cloud endpoints choose their default model from the loaded models (``prepare``
    raises :class:`TritonError` to fail the start-up). Has the frontend protocol's
    ``name``, ``address``, ``port``, ``start`` and ``stop``.
    """

    def __init__(self, http: HTTPFrontend, prepare: Callable[[], None]) -> None:
        self.http = http
        self.prepare = prepare
        self.name = http.name
        self.address = http.address
        self.port = http.port

    async def start(self) -> None:
        """Prepare, then bind and serve.

        :raises TritonError: from ``prepare``; OSError when the port cannot be bound.
        """
        self.prepare()
        await self.http.start()

    async def stop(self, grace: float) -> None:
        """Stop as :meth:`HTTPFrontend.stop`."""
        await self.http.stop(grace)
