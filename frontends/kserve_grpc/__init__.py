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
``"aio"``. :func:`transport_choice` says which one serves and why; the
start-up table shows that line under the endpoint's address, and
``python -m tritium.frontends.kserve_grpc`` prints it without starting a
server (docs/grpc_transport.md).

Keepalive and idle connections follow Triton's ``--grpc-keepalive-*`` and
``--grpc-http2-*`` flags and tritium's ``--grpc-max-connection-idle-secs``
(channel arguments, :mod:`tritium.cli_network`); ``--grpc-use-ssl`` serves
TLS (on the grpc.aio transport: :mod:`.tls`).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc

from ...core.api import Code, TritonError, hookimpl
from .servicer import HealthServicer, InferenceServicer

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

log = logging.getLogger("tritium.grpc")

__all__ = ["GRPCFrontend", "tritium_frontend", "TRANSPORTS", "TransportChoice", "transport_choice"]

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


class TransportChoice(NamedTuple):
    """Which transport serves the endpoint, and the line that names it (see :func:`transport_choice`)."""

    #: ``"native"``, ``"aio"``, or ``""`` when the setting cannot be served (``line`` says why)
    kind: str
    #: ``native (gRPC C++ 1.51.1)``, ``grpc.aio (grpcio 1.66.2): <why not native>``, or the refusal
    line: str
    #: the :class:`~.native_transport.NativeTransport` class when ``kind`` is ``"native"``
    native: Any = None
    #: why the native transport cannot load, when ``"auto"`` fell back to grpc.aio for that reason
    unavailable: str = ""


def transport_choice(setting: str = "auto", tls: bool = False) -> TransportChoice:
    """The transport ``[frontends.grpc] transport = setting`` gives, with TLS (``--grpc-use-ssl``) or not.

    The line is what the start-up table and the log show: the native transport
    with the gRPC C++ version it runs on, or grpc.aio with grpcio's version and
    the reason the native one is not used.
    """
    aio = f"grpc.aio (grpcio {grpc.__version__})"
    if tls:
        if setting == "native":
            return TransportChoice("", 'the native transport does not serve TLS; use transport = "auto"')
        return TransportChoice("aio", f"{aio}: TLS (--grpc-use-ssl) is served by grpc.aio only")
    if setting == "aio":
        return TransportChoice("aio", f'{aio}: [frontends.grpc] transport = "aio"')
    native, reason = load_native_transport()
    if native is not None:
        return TransportChoice("native", str(native.name), native)
    if setting == "native":
        return TransportChoice("", f"native transport not available ({reason})")
    return TransportChoice("aio", f"{aio}: native transport not available ({reason})", unavailable=reason)


class GRPCFrontend:
    """The gRPC server.

    :param server: the :class:`~tritium.core.api.ServerAPI` to serve.
    :param address: address to bind (``0.0.0.0``).
    :param port: port to bind.
    :param max_request_bytes: the largest request message accepted.
    :param options: extra gRPC channel arguments.
    :param restrictions: ``--grpc-restricted-protocol`` groups: group -> (key, value).
    :param transport: ``"auto"``, ``"native"`` or ``"aio"`` (see the module's docs).
    :param tls: TLS files (:class:`~tritium.core.settings.network.TlsFiles`, ``--grpc-use-ssl``), None: plaintext.
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
        #: the transport that will serve, decided now for the start-up table (before the models load)
        self.choice = transport_choice(transport, tls is not None)
        #: shown under the endpoint's address in the start-up table (core/startup.py)
        self.startup_note = f"transport: {self.choice.line}"
        self._transport: Any = None

    def _make_transport(self) -> Any:
        servicer, health = InferenceServicer(self.server), HealthServicer(self.server)
        choice = self.choice
        if not choice.kind:
            raise TritonError(Code.UNAVAILABLE, f"gRPC: {choice.line}")
        if choice.kind == "native":
            return choice.native(servicer, health, self.options, self.restrictions)
        if choice.unavailable:
            log.warning("gRPC: native transport not available (%s); using grpc.aio", choice.unavailable)
        from .aio_transport import AioTransport

        aio = AioTransport(servicer, health, self.options, self.restrictions)
        if self.tls is not None:
            from .tls import server_credentials

            aio.credentials = server_credentials(self.tls)
        return aio

    async def start(self) -> None:
        """Bind and serve (runs on the core's event loop, while the server starts).

        :raises TritonError: UNAVAILABLE when the address cannot be bound, or
            the native transport was asked for and is not built.
        """
        transport = self._make_transport()
        await transport.start(self.address)
        self._transport = transport
        log.info("Started GRPCInferenceService at %s%s", self.address, " (TLS)" if self.tls is not None else "")
        log.info("gRPC transport: %s", self.choice.line)

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
