"""``inference.GRPCInferenceService`` behind Ray Serve's gRPC proxy: the gRPC endpoint's servicer, called by Serve.

Serve's gRPC proxy serves any service whose ``add_<Service>Servicer_to_server``
function is listed in its ``grpc_servicer_functions``; it decodes each call's
request message, routes it to one replica and calls the deployment method
named like the RPC (``ModelInfer``, ...), passing Serve's gRPC context as
``grpc_context``. :class:`GrpcAdapter` (a mixin of the ``TritiumServer``
deployment) hands each call to the same servicer ``tritium-server``'s gRPC
endpoint runs (:class:`~tritium.frontends.kserve_grpc.servicer.InferenceServicer`,
:class:`~tritium.frontends.kserve_grpc.servicer.HealthServicer`) over the
replica's :class:`~.replica_api.ReplicaServer`, on the replica's event loop. An
error is the gRPC status and details Triton answers with, set on ``grpc_context``.

Only the transport differs: ``ModelInfer`` goes through the servicer's
serialized-message path (Serve hands a message: it is serialized for it, and the
answer parsed back); ``ModelStreamInfer`` (bidirectional streaming: each stream
stays on one replica) is the servicer's stream, its writes yielded to Serve.
Readiness, statistics and model load/unload cover every live replica; the
shared-memory, trace and logging RPCs answer UNIMPLEMENTED (see :mod:`.replica_api`).
``grpc.health.v1.Health/Check`` answers SERVING while the cluster is ready.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from ...core.api import Code, TritonError, clip
from ...frontends.base import DETAILS_CHARS, grpc_status_of
from ...frontends.kserve_grpc.servicer import HealthServicer, InferenceServicer
from ...proto import grpc_service_pb2 as pb
from ...proto import health_pb2

log = logging.getLogger("tritium.ray_serve")

__all__ = ["GrpcAdapter", "SERVICER_FUNCTIONS"]

#: the ``grpc_servicer_functions`` to give Serve's gRPC proxy (``serve start`` or a config file)
SERVICER_FUNCTIONS = [
    "tritium.proto.grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server",
    "tritium.proto.health_pb2_grpc.add_HealthServicer_to_server",
]

_END = object()
Method = Callable[..., Coroutine[Any, Any, Any]]


def _unary(rpc: str, servicer: str = "servicer", response: Any = None) -> Method:
    """The deployment method ``rpc``: the servicer's, with a TritonError it lets through answered too."""
    empty = response if response is not None else getattr(pb, rpc + "Response")

    async def call(self: Any, request: Any, grpc_context: Any = None) -> Any:
        try:
            return await getattr(getattr(self, servicer), rpc)(request, grpc_context)
        except TritonError as exc:
            error = exc
        except Exception as exc:  # a bug, not a bad request: INTERNAL, logged, the replica goes on
            log.exception("%s failed", rpc)
            error = TritonError(Code.INTERNAL, f"{type(exc).__name__}: {exc}")
        if grpc_context is not None:
            grpc_context.set_code(grpc_status_of(error))
            grpc_context.set_details(clip(error.message, DETAILS_CHARS))
        return empty()

    call.__name__ = call.__qualname__ = rpc
    return call


class _StreamWriter:
    """The servicer's stream context: what it writes goes to ``queue``."""

    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self.queue = queue

    async def write(self, message: Any) -> None:
        self.queue.put_nowait(message)


class GrpcAdapter:
    """The RPCs of ``inference.GRPCInferenceService`` and ``grpc.health.v1.Health`` as deployment methods.

    Needs ``self.servicer`` (:class:`InferenceServicer`) and ``self.health`` (:class:`HealthServicer`).
    """

    servicer: InferenceServicer
    health: HealthServicer

    ServerLive = _unary("ServerLive")
    ServerReady = _unary("ServerReady")
    ModelReady = _unary("ModelReady")
    ServerMetadata = _unary("ServerMetadata")
    ModelMetadata = _unary("ModelMetadata")
    ModelConfig = _unary("ModelConfig")
    ModelStatistics = _unary("ModelStatistics")
    RepositoryIndex = _unary("RepositoryIndex")
    RepositoryModelLoad = _unary("RepositoryModelLoad")
    RepositoryModelUnload = _unary("RepositoryModelUnload")
    SystemSharedMemoryStatus = _unary("SystemSharedMemoryStatus")
    SystemSharedMemoryRegister = _unary("SystemSharedMemoryRegister")
    SystemSharedMemoryUnregister = _unary("SystemSharedMemoryUnregister")
    CudaSharedMemoryStatus = _unary("CudaSharedMemoryStatus")
    CudaSharedMemoryRegister = _unary("CudaSharedMemoryRegister")
    CudaSharedMemoryUnregister = _unary("CudaSharedMemoryUnregister")
    TraceSetting = _unary("TraceSetting")
    LogSettings = _unary("LogSettings")
    Check = _unary("Check", "health", health_pb2.HealthCheckResponse)

    async def ModelInfer(self, request: pb.ModelInferRequest, grpc_context: Any = None) -> pb.ModelInferResponse:
        """The servicer's ModelInfer, on the message serialized (an error: empty, its status on the context)."""
        answer = await self.servicer.model_infer_bytes(request.SerializeToString(), grpc_context)
        return pb.ModelInferResponse.FromString(answer)

    async def ModelStreamInfer(
        self, request_stream: AsyncIterator[pb.ModelInferRequest], grpc_context: Any = None
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """The servicer's stream: its messages as it writes them (a failed request: an ``error_message``)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        run = asyncio.ensure_future(self.servicer.ModelStreamInfer(request_stream, _StreamWriter(queue)))
        run.add_done_callback(lambda _: queue.put_nowait(_END))
        try:
            while (message := await queue.get()) is not _END:
                yield message
            run.result()
        finally:
            if not run.done():
                run.cancel()
