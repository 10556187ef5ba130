"""Reading HTTP request bodies within ``--max-request-bytes``, refusing larger ones early.

A body whose declared ``Content-Length`` is over the limit is refused from its
headers, before a byte of it is read; a chunked body is read only up to the
limit. Either way the answer is ``413 Payload Too Large`` with
``{"error": "request body ... exceeds the maximum request size of N bytes"}``.
Runs on the core's event loop, in the HTTP handlers.
"""

from __future__ import annotations

from aiohttp import web

from ...core.errors import Code, TritonError
from ..base import http_status
from .app import MAX_REQUEST_BYTES

__all__ = ["BodyTooLarge", "read_body", "error_status"]


class BodyTooLarge(TritonError):
    """A request body over the limit (HTTP 413; the message names the limit)."""

    http_status = 413

    def __init__(self, message: str) -> None:
        super().__init__(Code.INVALID_ARG, message)


def error_status(exc: TritonError) -> int:
    """The HTTP status of ``exc``: 413 for :class:`BodyTooLarge`, else Triton's mapping."""
    return int(getattr(exc, "http_status", 0)) or http_status(exc.code)


async def read_body(request: web.Request) -> bytes:
    """The whole body, at most ``MAX_REQUEST_BYTES`` of it.

    :raises BodyTooLarge: when the body is (or declares to be) over the limit.
    """
    limit = request.app[MAX_REQUEST_BYTES]
    size = request.content_length
    if size is not None:
        if size > limit:
            raise BodyTooLarge(f"request body of {size} bytes exceeds the maximum request size of {limit} bytes")
        return await request.content.readexactly(size) if size else b""
    try:
        return await request.read()  # chunked: aiohttp enforces client_max_size (= limit)
    except web.HTTPRequestEntityTooLarge:
        raise BodyTooLarge(f"request body exceeds the maximum request size of {limit} bytes") from None
