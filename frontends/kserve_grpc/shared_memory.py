"""gRPC RPCs of Triton's system and CUDA shared-memory extensions (thin: one call each).

Statuses, codes and messages are Triton 2.51's, checked against the real
server. Every method runs in the core process, on the event loop, and calls
:class:`~tritium.core.memory.shm_region.SharedMemoryManager` /
:class:`~tritium.core.memory.cuda.CudaSharedMemoryManager`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.api import TritonError, clip
from ...proto import grpc_service_pb2 as pb
from ..base import DETAILS_CHARS, grpc_status

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

__all__ = ["SharedMemoryRpcs"]


def _fail(context: Any, exc: TritonError, empty: Any) -> Any:
    context.set_code(grpc_status(exc.code))
    context.set_details(clip(exc.message, DETAILS_CHARS))
    return empty


class SharedMemoryRpcs:
    """The six shared-memory RPCs of ``inference.GRPCInferenceService`` (mixed into the servicer).

    Expects ``self.server``: the :class:`~tritium.core.api.ServerAPI`.
    """

    server: ServerAPI

    async def SystemSharedMemoryStatus(
        self, request: pb.SystemSharedMemoryStatusRequest, context: Any
    ) -> pb.SystemSharedMemoryStatusResponse:
        response = pb.SystemSharedMemoryStatusResponse()
        try:
            regions = self.server.shared_memory_status("system", request.name)
        except TritonError as exc:
            return _fail(context, exc, response)
        for region in regions:
            response.regions[region["name"]].CopyFrom(pb.SystemSharedMemoryStatusResponse.RegionStatus(**region))
        return response

    async def SystemSharedMemoryRegister(
        self, request: pb.SystemSharedMemoryRegisterRequest, context: Any
    ) -> pb.SystemSharedMemoryRegisterResponse:
        try:
            self.server.register_system_shared_memory(request.name, request.key, request.offset, request.byte_size)
        except TritonError as exc:
            return _fail(context, exc, pb.SystemSharedMemoryRegisterResponse())
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(
        self, request: pb.SystemSharedMemoryUnregisterRequest, context: Any
    ) -> pb.SystemSharedMemoryUnregisterResponse:
        self.server.unregister_shared_memory("system", request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(
        self, request: pb.CudaSharedMemoryStatusRequest, context: Any
    ) -> pb.CudaSharedMemoryStatusResponse:
        response = pb.CudaSharedMemoryStatusResponse()
        try:
            regions = self.server.shared_memory_status("cuda", request.name)
        except TritonError as exc:
            return _fail(context, exc, response)
        for region in regions:
            response.regions[region["name"]].CopyFrom(pb.CudaSharedMemoryStatusResponse.RegionStatus(**region))
        return response

    async def CudaSharedMemoryRegister(
        self, request: pb.CudaSharedMemoryRegisterRequest, context: Any
    ) -> pb.CudaSharedMemoryRegisterResponse:
        try:
            self.server.register_cuda_shared_memory(
                request.name, bytes(request.raw_handle), request.device_id, request.byte_size
            )
        except TritonError as exc:
            return _fail(context, exc, pb.CudaSharedMemoryRegisterResponse())
        return pb.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(
        self, request: pb.CudaSharedMemoryUnregisterRequest, context: Any
    ) -> pb.CudaSharedMemoryUnregisterResponse:
        self.server.unregister_shared_memory("cuda", request.name)
        return pb.CudaSharedMemoryUnregisterResponse()
