"""gRPC RPCs of Triton's model repository extension: RepositoryIndex, RepositoryModelLoad/Unload.

A mixin of :class:`~tritium.frontends.kserve_grpc.servicer.InferenceServicer`
(kept in its own module). ``config`` comes as ``string_param``, ``file:<path>``
contents as ``bytes_param``, ``unload_dependents`` as ``bool_param``; other
parameters are refused with Triton's messages (other unload parameters are
ignored, as in Triton). Runs on the core's event loop.
"""

from __future__ import annotations

from typing import Any


from ...core.errors import Code, TritonError, clip
from ...proto import grpc_service_pb2 as pb
from ..base import DETAILS_CHARS, grpc_status

__all__ = ["RepositoryServicerMixin"]

_FILE = "file:"


def _fail(context: Any, exc: TritonError, empty: Any) -> Any:
    context.set_code(grpc_status(exc.code))
    context.set_details(clip(exc.message, DETAILS_CHARS))
    return empty


class RepositoryServicerMixin:
    """The repository RPCs over ``self.server`` (an :class:`~tritium.core.server.InferenceServer`)."""

    server: Any

    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: Any) -> pb.RepositoryIndexResponse:
        response = pb.RepositoryIndexResponse()
        for item in self.server.repository_index(request.ready):
            response.models.add(**item)
        return response

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Any
    ) -> pb.RepositoryModelLoadResponse:
        config: str | None = None
        files: dict[str, bytes] = {}
        try:
            for key, param in request.parameters.items():
                which = param.WhichOneof("parameter_choice")
                if key == "config":
                    if which != "string_param":
                        raise TritonError(
                            Code.INVALID_ARG, "invalid value type for load parameter 'config', expected string_param."
                        )
                    config = param.string_param
                elif key.startswith(_FILE):
                    if which != "bytes_param":
                        raise TritonError(
                            Code.INVALID_ARG, f"invalid value type for load parameter '{key}', expected bytes_param."
                        )
                    files[key[len(_FILE):]] = param.bytes_param
                else:
                    raise TritonError(Code.INVALID_ARG, f"unrecognized load parameter '{key}'.")
            await self.server.load_model(request.model_name, config, files or None)
        except TritonError as exc:
            return _fail(context, exc, pb.RepositoryModelLoadResponse())
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Any
    ) -> pb.RepositoryModelUnloadResponse:
        dependents = False
        try:
            param = request.parameters.get("unload_dependents")
            if param is not None:
                if param.WhichOneof("parameter_choice") != "bool_param":
                    raise TritonError(
                        Code.INVALID_ARG, "invalid value type for 'unload_dependents' parameter, expected bool_param."
                    )
                dependents = param.bool_param
            await self.server.unload_model(request.model_name, dependents)
        except TritonError as exc:
            return _fail(context, exc, pb.RepositoryModelUnloadResponse())
        return pb.RepositoryModelUnloadResponse()


