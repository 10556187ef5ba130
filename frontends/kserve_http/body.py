"""Request bodies within ``--max-request-bytes``, and the status of an endpoint error.

A body whose declared ``Content-Length`` is over the limit is refused from its
headers, before a byte of it is read; a chunked body is read only up to the
limit (see :mod:`.connection`). Either way the answer is ``413 Payload Too
Large`` with ``{"error": "request body ... exceeds the maximum request size of
N bytes"}``. A compressed body is held to the same limit once decompressed.
"""

from __future__ import annotations

from ...core.api import Code, TritonError
from ..base import http_status

__all__ = ["BodyTooLarge", "UnsupportedEncoding", "body_too_large", "error_status"]


class BodyTooLarge(TritonError):
    """A request body over the limit (HTTP 413; the message names the limit)."""

    http_status = 413

    def __init__(self, message: str) -> None:
        super().__init__(Code.INVALID_ARG, message)


class UnsupportedEncoding(TritonError):
    """A ``Content-Encoding`` other than gzip, deflate or identity (HTTP 415, with ``Accept-Encoding``).

    Triton 2.51 answers 501 (a server error) for this client mistake.
    """

    http_status = 415
    headers = {"Accept-Encoding": "gzip, deflate"}

    def __init__(self, message: str) -> None:
        super().__init__(Code.UNSUPPORTED, message)


def body_too_large(size: int | None, limit: int, route_limit: bool = False) -> BodyTooLarge:
    """The error for a body of ``size`` bytes (None: a chunked body that passed the limit).

    :param route_limit: ``limit`` is the route's own fixed limit (the control routes' 64 KiB), not
        ``--max-request-bytes``: the message says so, so that nobody raises the wrong flag.
    """
    what = "the limit of this route's body" if route_limit else "the maximum request size"
    if size is None:
        return BodyTooLarge(f"request body exceeds {what} of {limit} bytes")
    return BodyTooLarge(f"request body of {size} bytes exceeds {what} of {limit} bytes")


def error_status(exc: TritonError) -> int:
    """The HTTP status of ``exc``: 413 for :class:`BodyTooLarge`, else Triton's mapping."""
    return int(getattr(exc, "http_status", 0)) or http_status(exc.code)
