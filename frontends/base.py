"""What every frontend shares: the one mapping from Triton error codes to transport statuses.

HTTP follows Triton's ``HttpCodeFromError``: INTERNAL 500, NOT_FOUND 404,
UNAVAILABLE 503, UNSUPPORTED 501, everything else 400. gRPC follows Triton's
``GrpcCodeFromError``: each code maps to the gRPC status of the same name
(INVALID_ARG -> INVALID_ARGUMENT, UNSUPPORTED -> UNIMPLEMENTED).
"""

from __future__ import annotations

import grpc

from ..core.api import Code, TritonError

__all__ = ["http_status", "grpc_status", "grpc_status_of", "DETAILS_CHARS"]

#: gRPC status details are cut to this many characters (gRPC refuses metadata over 16 KiB)
DETAILS_CHARS = 4096

_HTTP = {
    Code.INTERNAL: 500,
    Code.NOT_FOUND: 404,
    Code.UNAVAILABLE: 503,
    Code.UNSUPPORTED: 501,
}

_GRPC = {
    Code.UNKNOWN: grpc.StatusCode.UNKNOWN,
    Code.INTERNAL: grpc.StatusCode.INTERNAL,
    Code.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.INVALID_ARG: grpc.StatusCode.INVALID_ARGUMENT,
    Code.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Code.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
    Code.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Code.CANCELLED: grpc.StatusCode.CANCELLED,
}


def http_status(code: Code) -> int:
    """The HTTP status Triton answers an error of ``code`` with."""
    return _HTTP.get(code, 400)


def grpc_status(code: Code) -> grpc.StatusCode:
    """The gRPC status Triton answers an error of ``code`` with."""
    return _GRPC[code]


def grpc_status_of(exc: TritonError) -> grpc.StatusCode:
    """The gRPC status of ``exc``: its own ``grpc_status`` where it has one (a size limit:
    RESOURCE_EXHAUSTED), else Triton's mapping of its code."""
    return getattr(exc, "grpc_status", None) or _GRPC[exc.code]
