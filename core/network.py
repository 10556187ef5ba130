"""How the endpoints bound their clients: body budget, timeouts, gRPC keepalive, TLS.

One :class:`NetworkSettings` per server (``ServerOptions.network``), set by
``tritium-server``'s flags (:mod:`tritium.cli_network`); docs/security.md
lists them with their defaults. Read by the HTTP and gRPC endpoints when
they start, in the core process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NetworkSettings", "TlsFiles", "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_MAX_JSON_BYTES"]

#: the default ``--max-request-bytes``: a 256 MiB tensor and its header fit (Triton 2.51 has no
#: HTTP limit and 2 GiB on gRPC; its later ``--http-max-input-size`` defaults to 64 MB)
DEFAULT_MAX_REQUEST_BYTES = 512 << 20


#: the default ``--max-json-request-bytes``: about a second of parsing on one core (larger
#: tensors go as binary data, as tritonclient sends them by default)
DEFAULT_MAX_JSON_BYTES = 32 << 20


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

    :ivar max_inflight_request_bytes: bytes of HTTP request bodies held at once over all
        connections (``--max-inflight-request-bytes``; 0: four times ``--max-request-bytes``);
        a body that does not fit is answered 503 with ``Retry-After``.
    :ivar max_json_request_bytes: the largest JSON part of an HTTP inference request
        (``--max-json-request-bytes``): JSON is parsed into Python objects on a parse thread that
        holds the interpreter for the whole parse, so it is bounded more tightly than binary data.
        The same bound holds for the part of a gRPC ``ModelInferRequest`` that is not
        ``raw_input_contents`` (typed ``contents``, parsed an element at a time).
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
    http_header_timeout_s: float = 30.0
    http_body_timeout_s: float = 60.0
    http_idle_timeout_s: float = 300.0
    grpc_channel_args: dict[str, int] = field(default_factory=dict)
    grpc_tls: TlsFiles | None = None
    http_tls: TlsFiles | None = None
