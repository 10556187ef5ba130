"""The gRPC endpoint: KServe v2 ``inference.GRPCInferenceService`` with Triton's extensions.

Serves on ``--grpc-address``/``--grpc-port`` (default ``0.0.0.0:8001``),
next to ``grpc.health.v1.Health/Check`` (SERVING while the server is ready),
as ``tritonserver`` does. Clients: ``tritonclient.grpc`` (sync, aio,
streaming) and ``perf_analyzer -i grpc``.

Two transports carry the same servicers (:mod:`.servicer`) on the core's
event loop: the native one (:mod:`.native_transport`: gRPC's C++ server, an
extension built when ``libgrpc++-dev`` is installed) and grpc.aio
(:mod:`.aio_transport`). Message sizes: a request may be up to
``max_request_bytes`` (capped at gRPC's 2 GiB - 1 limit); responses are not
limited, as in Triton.

``plugins.toml`` settings (``[frontends.grpc]``): ``options``, a table of
extra gRPC channel arguments (``"grpc.keepalive_time_ms" = 7200000``);
``transport``: ``"auto"`` (default: native when built, else grpc.aio, said
once in the log), ``"native"`` (an error at start-up when not built) or
``"aio"``.

Keepalive and idle connections follow Triton's ``--grpc-keepalive-*`` and
``--grpc-http2-*`` flags and tritium's ``--grpc-max-connection-idle-secs``
(channel arguments, :mod:`tritium.cli_network`); ``--grpc-use-ssl`` serves
TLS (on the grpc.aio transport: :mod:`.tls`).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.api import Code, TritonError, hookimpl
from .servicer import HealthServicer, InferenceServicer

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

log = logging.getLogger("tritium.grpc")

__all__ = ["GRPCFrontend", "tritium_frontend", "TRANSPORTS"]

_MAX_MESSAGE = (1 << 31) - 1  # gRPC's limit on a message (INT_MAX)

#: the values of ``[frontends.grpc] transport``
TRANSPORTS = ("auto", "native", "aio")


def load_native_transport() -> tuple[Any, str]:
    """The :class:`~.native_transport.NativeTransport` class, or None and why it cannot be used."""
    if importlib.util.find_spec(f"{__name__}._native") is None:
        return None, "the extension was not built: install libgrpc++-dev, pkg-config and g++, then reinstall tritium"
    try:
        from .native_transport import NativeTransport
    except ImportError as exc:  # built, but a library it links against is missing
        return None, str(exc)
    return NativeTransport, ""


class GRPCFrontend:
    """The gRPC server.

    :param server: the :class:`~tritium.core.api.ServerAPI` to serve.
    :param address: address to bind (``0.0.0.0``).
    :param port: port to bind.
    :param max_request_bytes: the largest request message accepted.
    :param options: extra gRPC channel arguments.
    :param restrictions: ``--grpc-restricted-protocol`` groups: group -> (key, value).
    :param transport: ``"auto"``, ``"native"`` or ``"aio"`` (see the module's docs).
    :param tls: TLS files (:class:`~tritium.core.network.TlsFiles`, ``--grpc-use-ssl``), None: plaintext.
        TLS is served by the grpc.aio transport.
    :raises TritonError: INVALID_ARG for another ``transport``.
    """

    name = "grpc"

    def __init__(
        self,
        server: ServerAPI,
        address: str,
        port: int,
        max_request_bytes: int = _MAX_MESSAGE,
        options: Mapping[str, Any] | None = None,
        restrictions: dict[str, tuple[str, str]] | None = None,
        transport: str = "auto",
        tls: Any = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise TritonError(
                Code.INVALID_ARG,
                f"[frontends.grpc] transport = {transport!r}: expected one of {', '.join(TRANSPORTS)}",
            )
        self.server = server
        self.host, self.port = address, port  # where it listens (start-up checks the port first)
        self.address = f"{address}:{port}" if ":" not in address else f"[{address}]:{port}"
        base: dict[str, Any] = {
            "grpc.max_receive_message_length": max(0, min(int(max_request_bytes), _MAX_MESSAGE)),
            "grpc.max_send_message_length": -1,
            # Triton does not share its port (--reuse-grpc-port=false): a port in use is an error
            "grpc.so_reuseport": 0,
        }
        base.update(options or {})
        self.options = list(base.items())
        self.restrictions = dict(restrictions or {})
        self.transport = transport
        self.tls = tls
        self._transport: Any = None

    def _make_transport(self) -> Any:
        servicer, health = InferenceServicer(self.server), HealthServicer(self.server)
        if self.tls is not None:
            if self.transport == "native":
                raise TritonError(
                    Code.UNAVAILABLE, 'gRPC: the native transport does not serve TLS; use transport = "auto"'
                )
            from .aio_transport import AioTransport
            from .tls import server_credentials

            aio = AioTransport(servicer, health, self.options, self.restrictions)
            aio.credentials = server_credentials(self.tls)
            return aio
        if self.transport != "aio":
            native, reason = load_native_transport()
            if native is not None:
                return native(servicer, health, self.options, self.restrictions)
            if self.transport == "native":
                raise TritonError(Code.UNAVAILABLE, f"gRPC: native transport not available ({reason})")
            log.warning("gRPC: native transport not available (%s); using grpc.aio", reason)
        from .aio_transport import AioTransport

        return AioTransport(servicer, health, self.options, self.restrictions)

    async def start(self) -> None:
        """Bind and serve (runs on the core's event loop, while the server starts).

        :raises TritonError: UNAVAILABLE when the address cannot be bound, or
            the native transport was asked for and is not built.
        """
        transport = self._make_transport()
        await transport.start(self.address)
        self._transport = transport
        log.info("Started GRPCInferenceService at %s%s", self.address, " (TLS)" if self.tls is not None else "")
        log.info("gRPC transport: %s", transport.name)

    async def stop(self, grace: float) -> None:
        """Stop accepting calls; let running ones finish for up to ``grace`` seconds, then close."""
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.stop(grace)


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> GRPCFrontend | None:
    """Create the gRPC frontend (plugin hook)."""
    if name != "grpc":
        return None
    options = server.options
    network = options.network
    return GRPCFrontend(
        server,
        options.grpc_address,
        options.grpc_port,
        options.max_request_bytes,
        {**network.grpc_channel_args, **dict(settings.get("options") or {})},
        options.grpc_restricted_protocol,
        str(settings.get("transport", "auto")),
        network.grpc_tls,
    )
