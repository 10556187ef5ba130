"""What every frontend shares: the one mapping from Triton error codes to transport statuses, and
the view of readiness and statistics the KServe endpoints answer from (:class:`ClusterView`).

HTTP follows Triton's ``HttpCodeFromError``: INTERNAL 500, NOT_FOUND 404,
UNAVAILABLE 503, UNSUPPORTED 501, everything else 400. gRPC follows Triton's
``GrpcCodeFromError``: each code maps to the gRPC status of the same name
(INVALID_ARG -> INVALID_ARGUMENT, UNSUPPORTED -> UNIMPLEMENTED).
"""

from __future__ import annotations

from typing import Any, Protocol

import grpc

from ..core.api import Code, ServerAPI, TritonError

__all__ = ["http_status", "grpc_status", "grpc_status_of", "DETAILS_CHARS", "ClusterView", "LocalView"]

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


class ClusterView(Protocol):
    """The answers that cover every server behind an endpoint's address: server and model readiness,
    statistics. The KServe endpoints await them (HTTP and gRPC alike).

    One server answers for itself (:class:`LocalView`); an integration that runs several servers
    behind one address (Ray Serve's replicas, ``integrations/ray_serve/agent.py``) asks each of them.
    """

    async def ready(self) -> bool:
        """KServe ``server ready``."""
        ...

    async def model_ready(self, name: str, version: str = "") -> bool:
        """KServe ``model ready``."""
        ...

    async def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """Triton's statistics extension (see :meth:`~tritium.core.api.ServerAPI.statistics`).

        :raises TritonError: INVALID_ARG for a model or version not loaded.
        """
        ...


class LocalView:
    """:class:`ClusterView` of one server: its own answers."""

    __slots__ = ("server",)

    def __init__(self, server: ServerAPI) -> None:
        self.server = server

    async def ready(self) -> bool:
        return self.server.ready

    async def model_ready(self, name: str, version: str = "") -> bool:
        return self.server.model_ready(name, version)

    async def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        return self.server.statistics(name, version)
