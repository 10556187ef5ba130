"""The gRPC endpoint: KServe v2 ``inference.GRPCInferenceService`` with Triton's extensions.

Serves on ``--grpc-address``/``--grpc-port`` (default ``0.0.0.0:8001``) with
grpc.aio on the core's event loop, next to ``grpc.health.v1.Health/Check``
(SERVING while the server is ready), as ``tritonserver`` does. Clients:
``tritonclient.grpc`` (sync, aio, streaming) and ``perf_analyzer -i grpc``.

Message sizes: a request may be up to ``max_request_bytes`` (capped at
gRPC's 2 GiB - 1 limit); responses are not limited, as in Triton.

``plugins.toml`` settings (``[frontends.grpc]``): ``options``, a table of
extra gRPC channel arguments (``"grpc.keepalive_time_ms" = 7200000``).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import grpc

from ...core.errors import Code, TritonError
from ...core.hookspecs import hookimpl
from ...proto import grpc_service_pb2_grpc, health_pb2_grpc
from .restricted import RestrictedInterceptor
from .servicer import HealthServicer, InferenceServicer, infer_handler

log = logging.getLogger("tritium.grpc")

__all__ = ["GRPCFrontend", "tritium_frontend"]

_MAX_MESSAGE = (1 << 31) - 1  # gRPC's limit on a message (INT_MAX)


class GRPCFrontend:
    """The gRPC server.

    :param server: the :class:`~tritium.core.server.InferenceServer` to serve.
    :param address: address to bind (``0.0.0.0``).
    :param port: port to bind.
    :param max_request_bytes: the largest request message accepted.
    :param options: extra gRPC channel arguments.
    :param restrictions: ``--grpc-restricted-protocol`` groups: group -> (key, value).
    """

    name = "grpc"

    def __init__(
        self,
        server: Any,
        address: str,
        port: int,
        max_request_bytes: int = _MAX_MESSAGE,
        options: Mapping[str, Any] | None = None,
        restrictions: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.server = server
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
        self._grpc: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Bind and serve (runs on the core's event loop, while the server starts).

        :raises TritonError: UNAVAILABLE when the address cannot be bound.
        """
        interceptors = [RestrictedInterceptor(self.restrictions)] if self.restrictions else []
        server = grpc.aio.server(options=self.options, interceptors=interceptors)
        servicer = InferenceServicer(self.server)
        server.add_generic_rpc_handlers((infer_handler(servicer),))  # first: it wins for ModelInfer
        grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(self.server), server)
        try:
            bound = server.add_insecure_port(self.address)
        except RuntimeError:
            bound = 0
        if not bound:
            raise TritonError(Code.UNAVAILABLE, f"Socket '{self.address}' already in use ")
        await server.start()
        self._grpc = server
        log.info("Started GRPCInferenceService at %s", self.address)

    async def stop(self, grace: float) -> None:
        """Stop accepting calls; let running ones finish for up to ``grace`` seconds, then close."""
        server, self._grpc = self._grpc, None
        if server is not None:
            await server.stop(grace)


@hookimpl
def tritium_frontend(name: str, server: Any, settings: Mapping[str, Any]) -> GRPCFrontend | None:
    """Create the gRPC frontend (plugin hook)."""
    if name != "grpc":
        return None
    options = server.options
    return GRPCFrontend(
        server,
        options.grpc_address,
        options.grpc_port,
        options.max_request_bytes,
        dict(settings.get("options") or {}),
        options.grpc_restricted_protocol,
    )
