"""How the endpoints bound their clients: body budget, timeouts, gRPC keepalive, TLS.

One :class:`NetworkSettings` per server (``ServerOptions.network``), set by
``tritium-server``'s flags (:mod:`tritium.cli_network`); docs/security.md
lists them with their defaults. Read by the HTTP and gRPC endpoints when
they start, in the core process. One :class:`BodyBudget` per server
(``InferenceServer.body_budget``), shared by the HTTP and gRPC endpoints.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..errors import Code, TritonError

__all__ = [
    "BodyBudget",
    "NetworkSettings",
    "TlsFiles",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_JSON_BYTES",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DEFAULT_HTTP_MAX_CONNECTIONS",
]

#: the default ``--max-request-bytes``: a 256 MiB tensor and its header fit (Triton 2.51 has no
#: HTTP limit and 2 GiB on gRPC; its later ``--http-max-input-size`` defaults to 64 MB)
DEFAULT_MAX_REQUEST_BYTES = 512 << 20


#: the default ``--max-json-request-bytes``: about a second of parsing on one core (larger
#: tensors go as binary data, as tritonclient sends them by default)
DEFAULT_MAX_JSON_BYTES = 32 << 20


#: the default ``--max-decompressed-request-bytes``: what one compressed HTTP body may inflate to (Triton's
#: later ``--http-max-input-size`` default, 64 MB): a gzip body of 64 KiB can hold that much, so this,
#: not the body's own size, is what one compressed request costs
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 << 20


#: the default ``--http-max-connections`` (an idle connection costs about 3 kB of the core's memory:
#: docs/security.md)
DEFAULT_HTTP_MAX_CONNECTIONS = 10_000


@dataclass(slots=True, frozen=True)
class TlsFiles:
    """PEM files of one endpoint's TLS (Triton's ``--grpc-server-cert`` ... flags).

    :ivar cert: the server's certificate chain.
    :ivar key: the server's private key.
    :ivar root: the CA that client certificates must chain to (mutual TLS), or "".
    :ivar mutual: require and check a client certificate.
    """

    cert: str
    key: str
    root: str = ""
    mutual: bool = False


@dataclass(slots=True)
class NetworkSettings:
    """Limits and timeouts of the endpoints (all seconds and bytes).

    :ivar max_inflight_request_bytes: bytes of request bodies held at once over all connections
        of the HTTP and gRPC endpoints together (``--max-inflight-request-bytes``; 0: four times
        ``--max-request-bytes``; see :class:`BodyBudget`): an HTTP body that does not fit is
        answered 503 with ``Retry-After``, a gRPC ModelInfer UNAVAILABLE.
    :ivar max_json_request_bytes: the largest JSON part of an HTTP inference request
        (``--max-json-request-bytes``): JSON is parsed into Python objects on a parse thread that
        holds the interpreter for the whole parse, so it is bounded more tightly than binary data.
        The same bound holds for the part of a gRPC ``ModelInferRequest`` that is not
        ``raw_input_contents`` (typed ``contents``, parsed an element at a time).
    :ivar max_decompressed_request_bytes: the most a compressed (gzip, deflate) HTTP body may inflate
        to (``--max-decompressed-request-bytes``, never above ``--max-request-bytes``): 413 past it;
        the inflated bytes count against the in-flight budget as they grow.
    :ivar http_max_connections: the most HTTP connections open at once (``--http-max-connections``);
        one more is answered 503 and closed as it is accepted. Besides it, a connection accepted
        near the open-file limit is refused the same way (see ``fd_reserve`` in the HTTP endpoint).
    :ivar http_header_timeout_s: a request head must be complete this long after its first byte.
    :ivar http_body_timeout_s: a request body (or a response being sent) may stall this long.
    :ivar http_idle_timeout_s: a keep-alive connection may wait this long for a request.
    :ivar grpc_channel_args: gRPC server channel arguments from the keepalive and idle flags
        (``grpc.keepalive_time_ms``, ``grpc.max_connection_idle_ms``, ...).
    :ivar grpc_tls: the gRPC endpoint's TLS (``--grpc-use-ssl``), None: plaintext.
    :ivar http_tls: the HTTP endpoint's TLS (``--http-use-ssl``, tritium's addition), None: plaintext.
    """

    max_inflight_request_bytes: int = 0
    max_json_request_bytes: int = DEFAULT_MAX_JSON_BYTES
    max_decompressed_request_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    http_max_connections: int = DEFAULT_HTTP_MAX_CONNECTIONS
    http_header_timeout_s: float = 30.0
    http_body_timeout_s: float = 60.0
    http_idle_timeout_s: float = 300.0
    grpc_channel_args: dict[str, int] = field(default_factory=dict)
    grpc_tls: TlsFiles | None = None
    http_tls: TlsFiles | None = None


class BodyBudget:
    """The server's budget for bytes of request bodies held at once (``--max-inflight-request-bytes``).

    One per server, shared by the HTTP endpoint (a body counts from its
    declared length, before it is received, until its response is on the
    wire) and the gRPC endpoint (a ModelInfer message, or one request of a
    ModelStreamInfer, from its arrival until its responses are given). A
    request that does not fit is refused with :meth:`refusal`: the budget
    answers "come back later" (HTTP 503, gRPC UNAVAILABLE), never runs the
    server out of memory. tritium's addition: Triton 2.51 has no such bound.
    Used on the core's event loop, and by the HTTP parse threads for a body
    being inflated (a lock keeps the count exact).

    :param limit: the budget, bytes; at least one request at the size limit fits.
    :ivar held: bytes taken now.
    """

    __slots__ = ("limit", "held", "_lock")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    @classmethod
    def for_limits(cls, max_inflight_request_bytes: int, max_request_bytes: int) -> BodyBudget:
        """The budget of ``--max-inflight-request-bytes`` (0: four times ``--max-request-bytes``),
        never below ``max_request_bytes`` (a request the size limit allows always fits an idle server)."""
        return cls(max(max_inflight_request_bytes or 4 * max_request_bytes, max_request_bytes))

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes; False (nothing taken) when they do not fit beside those held."""
        with self._lock:
            held = self.held + size
            if held > self.limit:
                return False
            self.held = held
            return True

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken by :meth:`reserve` (once per successful reserve)."""
        with self._lock:
            self.held -= size

    def refusal(self) -> TritonError:
        """The error a request that does not fit fails with: UNAVAILABLE (HTTP 503, gRPC UNAVAILABLE)."""
        return TritonError(
            Code.UNAVAILABLE, f"the server holds {self.limit} bytes of request bodies already; retry later"
        )
