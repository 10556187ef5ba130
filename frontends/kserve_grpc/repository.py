"""gRPC RPCs of Triton's model repository extension: RepositoryIndex, RepositoryModelLoad/Unload.

A mixin of :class:`~tritium.frontends.kserve_grpc.servicer.InferenceServicer`
(kept in its own module). ``config`` comes as ``string_param``, ``file:<path>``
contents as ``bytes_param``, ``unload_dependents`` as ``bool_param``; other
parameters are refused with Triton's messages (other unload parameters are
ignored, as in Triton). Runs on the core's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.api import Code, TritonError, clip
from ...proto import grpc_service_pb2 as pb
from ..base import DETAILS_CHARS, grpc_status

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

__all__ = ["RepositoryServicerMixin", "load_parameters", "unload_dependents"]

_FILE = "file:"


def _fail(context: Any, exc: TritonError, empty: Any) -> Any:
    context.set_code(grpc_status(exc.code))
    context.set_details(clip(exc.message, DETAILS_CHARS))
    return empty


def load_parameters(request: pb.RepositoryModelLoadRequest) -> tuple[str | None, dict[str, bytes]]:
    """A load request's ``config`` (JSON text, or None) and ``file:<path>`` contents (path -> bytes).

    Raises:
        TritonError: INVALID_ARG for a parameter of the wrong type or an unknown one, with Triton's
            message.
    """
    config: str | None = None
    files: dict[str, bytes] = {}
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
            files[key[len(_FILE) :]] = param.bytes_param
        else:
            raise TritonError(Code.INVALID_ARG, f"unrecognized load parameter '{key}'.")
    return config, files


def unload_dependents(request: pb.RepositoryModelUnloadRequest) -> bool:
    """An unload request's ``unload_dependents`` (False when absent; other parameters are ignored, as in
    Triton).

    Raises:
        TritonError: INVALID_ARG when it is not a ``bool_param``.
    """
    param = request.parameters.get("unload_dependents")
    if param is None:
        return False
    if param.WhichOneof("parameter_choice") != "bool_param":
        raise TritonError(
            Code.INVALID_ARG, "invalid value type for 'unload_dependents' parameter, expected bool_param."
        )
    return param.bool_param


class RepositoryServicerMixin:
    """The repository RPCs over ``self.server`` (an :class:`~tritium.core.api.ServerAPI`)."""

    server: ServerAPI

    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: Any) -> pb.RepositoryIndexResponse:
        response = pb.RepositoryIndexResponse()
        for item in self.server.repository_index(request.ready):
            response.models.add(**item)
        return response

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Any
    ) -> pb.RepositoryModelLoadResponse:
        try:
            config, files = load_parameters(request)
            await self.server.load_model(request.model_name, config, files or None)
        except TritonError as exc:
            return _fail(context, exc, pb.RepositoryModelLoadResponse())
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Any
    ) -> pb.RepositoryModelUnloadResponse:
        try:
            await self.server.unload_model(request.model_name, unload_dependents(request))
        except TritonError as exc:
            return _fail(context, exc, pb.RepositoryModelUnloadResponse())
        return pb.RepositoryModelUnloadResponse()
