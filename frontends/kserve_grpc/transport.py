"""What a transport of the gRPC endpoint is: a server that carries the servicers over gRPC.

Two implement it: :class:`.native_transport.NativeTransport` (gRPC's C++
server) and :class:`.aio_transport.AioTransport` (grpc.aio).
:class:`~tritium.frontends.kserve_grpc.GRPCFrontend` picks one
(``[frontends.grpc] transport``) and calls :meth:`Transport.start` and
:meth:`Transport.stop` on the core's event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .servicer import HealthServicer, InferenceServicer

__all__ = ["Transport"]


class Transport:
    """Serve ``inference.GRPCInferenceService`` and ``grpc.health.v1.Health`` with one gRPC server.

    :param servicer: the ``inference.GRPCInferenceService`` servicer.
    :param health: the ``grpc.health.v1.Health`` servicer.
    :param options: gRPC channel arguments (name, value), ``grpc.max_receive_message_length`` among them.
    :param restrictions: ``--grpc-restricted-protocol`` groups: group -> (header key, value).
    """

    #: how the start-up table and the log name it ("gRPC transport: <name>...", see ``transport_choice``)
    name = ""

    def __init__(
        self,
        servicer: InferenceServicer,
        health: HealthServicer,
        options: Sequence[tuple[str, Any]],
        restrictions: dict[str, tuple[str, str]],
    ) -> None:
        self.servicer, self.health = servicer, health
        self.options, self.restrictions = list(options), restrictions

    async def start(self, address: str) -> None:
        """Bind ``address`` (``host:port``) and serve.

        :raises TritonError: UNAVAILABLE when the address cannot be bound.
        """
        raise NotImplementedError

    async def stop(self, grace: float) -> None:
        """Refuse new calls; let running ones finish for up to ``grace`` seconds, then cancel them."""
        raise NotImplementedError
