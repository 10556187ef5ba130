"""``inference.GRPCInferenceService`` behind Ray Serve's gRPC proxy.

Serve's gRPC proxy serves any service whose ``add_<Service>Servicer_to_server``
function is listed in its ``grpc_servicer_functions``; it decodes each call's
request message, routes it to one replica and calls the deployment method
named like the RPC (``ModelInfer``, ...), passing Serve's gRPC context as
``grpc_context``. Those methods are here, as a mixin of the ``TritiumServer``
deployment; each runs on the replica's event loop, and an error is the gRPC
status and details Triton answers with (set on ``grpc_context``, with an
empty message). Readiness, statistics and model load/unload cover every live
replica, as over HTTP (see :mod:`.http_routes`).

``ModelStreamInfer`` (bidirectional streaming) works through Serve's proxy:
each stream stays on one replica and its requests run in order. Shared-memory
RPCs answer UNIMPLEMENTED: a registered region would exist on one replica only.
``grpc.health.v1.Health/Check`` answers SERVING while the cluster is ready.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from google.protobuf import json_format

from ...core.api import Code, TritonError, refuse_decoupled
from ...frontends.base import grpc_status
from ...frontends.kserve_grpc.codec import (
    model_metadata_to_proto,
    parse_version,
    stream_error,
    stream_skips,
    to_infer_request,
    to_infer_response,
    to_stream_response,
)
from ...frontends.kserve_grpc.repository import load_parameters, unload_dependents
from ...proto import grpc_service_pb2 as pb
from ...proto import health_pb2
from .http_routes import UNAVAILABLE_EXTENSIONS

log = logging.getLogger("tritium.ray_serve")

__all__ = ["GrpcMethods", "SERVICER_FUNCTIONS"]

#: the ``grpc_servicer_functions`` to give Serve's gRPC proxy (``serve start`` or a config file)
SERVICER_FUNCTIONS = [
    "tritium.proto.grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server",
    "tritium.proto.health_pb2_grpc.add_HealthServicer_to_server",
]

M = TypeVar("M")


def _fail(context: Any, exc: TritonError, empty: M) -> M:
    if context is not None:
        context.set_code(grpc_status(exc.code))
        context.set_details(exc.message)
    return empty


def _unavailable(rpc: str, empty: M, context: Any) -> M:
    message = f"{rpc}: shared memory is not available through Ray Serve (each request may reach another replica)"
    return _fail(context, TritonError(Code.UNSUPPORTED, message), empty)


class GrpcMethods:
    """The RPCs of ``inference.GRPCInferenceService`` over ``self.server`` and ``self.agent``."""

    server: Any
    agent: Any

    # -- health ------------------------------------------------------------------------------
    async def ServerLive(self, request: pb.ServerLiveRequest, grpc_context: Any = None) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.server.live)

    async def ServerReady(self, request: pb.ServerReadyRequest, grpc_context: Any = None) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=await self.agent.ready())

    async def ModelReady(self, request: pb.ModelReadyRequest, grpc_context: Any = None) -> pb.ModelReadyResponse:
        try:
            version = parse_version(request.version)
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.ModelReadyResponse())
        return pb.ModelReadyResponse(ready=await self.agent.model_ready(request.name, version))

    async def Check(
        self, request: health_pb2.HealthCheckRequest, grpc_context: Any = None
    ) -> health_pb2.HealthCheckResponse:
        serving = await self.agent.ready()
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse(status=status)

    # -- metadata, configuration, statistics ----------------------------------------------------
    async def ServerMetadata(
        self, request: pb.ServerMetadataRequest, grpc_context: Any = None
    ) -> pb.ServerMetadataResponse:
        meta = self.server.metadata()
        extensions = [e for e in meta.get("extensions", []) if e not in UNAVAILABLE_EXTENSIONS]
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"], extensions=extensions)

    async def ModelMetadata(
        self, request: pb.ModelMetadataRequest, grpc_context: Any = None
    ) -> pb.ModelMetadataResponse:
        try:
            meta = self.server.model_metadata(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.ModelMetadataResponse())
        return model_metadata_to_proto(meta)

    async def ModelConfig(self, request: pb.ModelConfigRequest, grpc_context: Any = None) -> pb.ModelConfigResponse:
        try:
            config = self.server.model_config(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.ModelConfigResponse())
        response = pb.ModelConfigResponse()
        json_format.ParseDict(config, response.config, ignore_unknown_fields=True)
        return response

    async def ModelStatistics(
        self, request: pb.ModelStatisticsRequest, grpc_context: Any = None
    ) -> pb.ModelStatisticsResponse:
        try:
            stats = await self.agent.statistics(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.ModelStatisticsResponse())
        return json_format.ParseDict(stats, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)

    # -- inference ---------------------------------------------------------------------------------
    async def ModelInfer(self, request: pb.ModelInferRequest, grpc_context: Any = None) -> pb.ModelInferResponse:
        server = self.server
        try:
            core_request = to_infer_request(request, server.model)
            model = server.model(core_request.model_name, core_request.model_version)
            refuse_decoupled(model, "ModelInfer RPC")
            response = await server.infer(core_request, model)
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.ModelInferResponse())
        except Exception as exc:  # a bug, not a bad request: INTERNAL, logged, the replica goes on
            log.exception("ModelInfer failed")
            error = TritonError(Code.INTERNAL, f"{type(exc).__name__}: {exc}")
            return _fail(grpc_context, error, pb.ModelInferResponse())
        try:
            return to_infer_response(response)
        finally:
            response.release()

    async def ModelStreamInfer(
        self, request_stream: AsyncIterator[pb.ModelInferRequest], grpc_context: Any = None
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """Run the stream's requests one after another; yield each response as it comes.

        A request that fails gets an ``error_message`` and the stream stays open.
        """
        async for request in request_stream:
            try:
                core_request = to_infer_request(request, self.server.model)
                model = self.server.model(core_request.model_name, core_request.model_version)
            except TritonError as exc:
                yield stream_error(exc.message, request.id)
                continue
            try:
                async for response in self.server.infer_stream(core_request, model):
                    try:
                        if stream_skips(response, core_request, model.decoupled):
                            continue
                        yield to_stream_response(response, core_request)
                    finally:
                        response.release()
            except TritonError as exc:
                yield stream_error(exc.message, request.id)
            except Exception as exc:  # a broken response must not end the stream
                log.exception("ModelStreamInfer request failed")
                yield stream_error(f"{type(exc).__name__}: {exc}", request.id)

    # -- the model repository -----------------------------------------------------------------------
    async def RepositoryIndex(
        self, request: pb.RepositoryIndexRequest, grpc_context: Any = None
    ) -> pb.RepositoryIndexResponse:
        response = pb.RepositoryIndexResponse()
        for item in self.server.repository_index(request.ready):
            response.models.add(**item)
        return response

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, grpc_context: Any = None
    ) -> pb.RepositoryModelLoadResponse:
        try:
            config, files = load_parameters(request)
            await self.agent.load_model(request.model_name, config, files or None)
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.RepositoryModelLoadResponse())
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, grpc_context: Any = None
    ) -> pb.RepositoryModelUnloadResponse:
        try:
            await self.agent.unload_model(request.model_name, unload_dependents(request))
        except TritonError as exc:
            return _fail(grpc_context, exc, pb.RepositoryModelUnloadResponse())
        return pb.RepositoryModelUnloadResponse()

    # -- not available through Serve, or not in tritium yet --------------------------------------------
    async def SystemSharedMemoryStatus(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusResponse(), grpc_context)

    async def SystemSharedMemoryRegister(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterResponse(), grpc_context)

    async def SystemSharedMemoryUnregister(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterResponse(), grpc_context)

    async def CudaSharedMemoryStatus(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusResponse(), grpc_context)

    async def CudaSharedMemoryRegister(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("CudaSharedMemoryRegister", pb.CudaSharedMemoryRegisterResponse(), grpc_context)

    async def CudaSharedMemoryUnregister(self, request: Any, grpc_context: Any = None) -> Any:
        return _unavailable("CudaSharedMemoryUnregister", pb.CudaSharedMemoryUnregisterResponse(), grpc_context)

    async def TraceSetting(self, request: Any, grpc_context: Any = None) -> pb.TraceSettingResponse:
        error = TritonError(Code.UNSUPPORTED, "TraceSetting: the trace extension is not supported by tritium yet")
        return _fail(grpc_context, error, pb.TraceSettingResponse())

    async def LogSettings(self, request: Any, grpc_context: Any = None) -> pb.LogSettingsResponse:
        error = TritonError(Code.UNSUPPORTED, "LogSettings: the logging extension is not supported by tritium yet")
        return _fail(grpc_context, error, pb.LogSettingsResponse())
