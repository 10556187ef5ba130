"""The grpc.aio transport of the gRPC endpoint: the fallback when the native one is not built.

grpcio's asyncio server on the core's event loop, with the servicers of
:mod:`.servicer` registered as generated handlers, ModelInfer as a
pass-through of serialized bytes (:func:`.servicer.infer_handler`) and
``--grpc-restricted-protocol`` as a server interceptor. About 250–500 µs of
server CPU per bare call on the project's 2-core machine (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import DecodeError

from ...core.api import Code, TritonError
from ...proto import grpc_service_pb2 as pb
from ...proto import grpc_service_pb2_grpc, health_pb2_grpc
from .restricted import RestrictedInterceptor
from .servicer import infer_handler
from .transport import Transport

__all__ = ["AioTransport", "checked_handlers"]


def checked_handlers(servicer: Any) -> grpc.GenericRpcHandler:
    """The unary RPCs (but ModelInfer) with their request parsed here: an undecodable message is
    INVALID_ARGUMENT ``malformed <request message>: <protobuf's reason>``, as on the native transport
    (grpcio's generated handlers answer UNKNOWN)."""
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        if method.name == "ModelInfer" or method.client_streaming or method.server_streaming:
            continue
        request_class = getattr(pb, method.input_type.name)
        response_class = getattr(pb, method.output_type.name)

        behaviour_of_method = getattr(servicer, method.name)

        async def call(
            raw: bytes, context: Any, behaviour: Any = behaviour_of_method, cls: Any = request_class
        ) -> Any:  # the defaults bind this method's behaviour and class
            try:
                request = cls.FromString(raw)
            except DecodeError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {cls.__name__}: {exc}")
            return await behaviour(request, context)

        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=None, response_serializer=response_class.SerializeToString
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


class AioTransport(Transport):
    """Serve the servicers with ``grpc.aio`` (parameters: :class:`.transport.Transport`)."""

    name = "grpc.aio"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._server: grpc.aio.Server | None = None
        #: TLS credentials (``--grpc-use-ssl``), None: plaintext
        self.credentials: grpc.ServerCredentials | None = None

    async def start(self, address: str) -> None:
        """Bind ``address`` (``host:port``) and serve; runs on the core's event loop.

        :raises TritonError: UNAVAILABLE when the address cannot be bound.
        """
        interceptors = [RestrictedInterceptor(self.restrictions)] if self.restrictions else []
        server = grpc.aio.server(options=self.options, interceptors=interceptors)
        server.add_generic_rpc_handlers((infer_handler(self.servicer),))  # first: it wins for ModelInfer
        server.add_generic_rpc_handlers((checked_handlers(self.servicer),))  # then the other unary RPCs
        grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(self.servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        try:
            if self.credentials is not None:
                bound = server.add_secure_port(address, self.credentials)
            else:
                bound = server.add_insecure_port(address)
        except RuntimeError:
            bound = 0
        if not bound:
            raise TritonError(Code.UNAVAILABLE, f"Socket '{address}' already in use ")
        await server.start()
        self._server = server

    async def stop(self, grace: float) -> None:
        """Refuse new calls; let running ones finish for up to ``grace`` seconds, then cancel them."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
