"""What the HTTP endpoint's handlers share: the endpoint context and the error answer.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio

from ...core.api import Code, ServerAPI, TritonError
from ..base import ClusterView, LocalView
from . import codec
from .body import error_status
from .messages import HttpRequest, HttpResponse

__all__ = ["EndpointContext", "Inflight", "error_response", "url_version"]


class Inflight:
    """Counts the inference requests being handled, so that a stop can wait for them."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        """A request starts."""
        self.count += 1
        self._idle.clear()

    def leave(self) -> None:
        """A request is answered (or failed)."""
        self.count -= 1
        if not self.count:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for no request in flight; return whether that happened."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


class EndpointContext:
    """What every handler may use.

    :ivar server: the in-process API.
    :ivar max_request_bytes: the body limit, bytes.
    :ivar max_json_bytes: the limit of an inference request's JSON (its header, or all of a JSON body), bytes.
    :ivar max_decompressed_bytes: the most a compressed body may inflate to, bytes (capped by
        ``max_request_bytes`` where it is used).
    :ivar inflight: inference requests being handled.
    :ivar cluster: where server and model readiness and statistics come from (default: the
        server's own, :class:`~tritium.frontends.base.LocalView`; Ray Serve: every replica's).
    """

    __slots__ = ("server", "max_request_bytes", "max_json_bytes", "max_decompressed_bytes", "inflight", "cluster")

    def __init__(
        self,
        server: ServerAPI,
        max_request_bytes: int,
        max_json_bytes: int = 0,
        max_decompressed_bytes: int = 0,
        cluster: ClusterView | None = None,
    ) -> None:
        self.server = server
        self.cluster: ClusterView = cluster if cluster is not None else LocalView(server)
        self.max_request_bytes = max_request_bytes
        self.max_json_bytes = max_json_bytes or max_request_bytes
        self.max_decompressed_bytes = max_decompressed_bytes or max_request_bytes
        self.inflight = Inflight()


def error_response(exc: TritonError, headers: dict[str, str] | None = None) -> HttpResponse:
    """Triton's error answer: ``{"error": "<message>"}`` with the error's HTTP status."""
    if headers is None:
        headers = getattr(exc, "headers", None)
    return HttpResponse(error_status(exc), codec.dumps({"error": exc.message}), headers=headers)


def url_version(request: HttpRequest) -> str:
    """The URL's model version ("": the version policy chooses), read as Triton does (``stol``).

    :raises TritonError: INVALID_ARG for a number beyond int64, with Triton's message.
    """
    text = request.params.get("version", "")
    if not text:
        return ""
    number = int(text)
    if number > (1 << 63) - 1:
        raise TritonError(
            Code.INVALID_ARG,
            f"failed to get model version from specified version string '{text}' (details: stol), "
            "version should be an integral value > 0",
        )
    return str(number)
