"""``--grpc-restricted-protocol``: RPC groups that answer only calls carrying a metadata key with a value.

``--grpc-restricted-protocol=model-repository:admin-key=secret`` restricts
the repository RPCs to calls whose metadata has
``triton-grpc-protocol-admin-key: secret`` (Triton prefixes the key); other
calls fail with UNAVAILABLE ``This protocol is restricted, expecting header
'triton-grpc-protocol-admin-key'``, as in Triton (the message keeps the
key's case as given; the key matches in lower case, since gRPC metadata keys
are lower-case — Triton never matches a key given with capitals). On grpc.aio a server
interceptor, so that it covers every RPC whichever module implements it; the native transport
asks :func:`refusal` before it dispatches a call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc

__all__ = ["RestrictedInterceptor", "METHOD_GROUPS", "HEADER_PREFIX", "STREAMING", "rule_for", "refusal"]

HEADER_PREFIX = "triton-grpc-protocol-"

#: the restricted-API group of every RPC (Triton's grouping)
METHOD_GROUPS = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelConfig": "model-config",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}
#: the streaming RPCs (the others are unary)
STREAMING = {"ModelStreamInfer"}


def rule_for(method: str, restrictions: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """The (header, value) a call of ``method`` (``/package.Service/Name``) must carry, or None."""
    group = METHOD_GROUPS.get(method.rsplit("/", 1)[-1]) if method.startswith("/inference.") else None
    return restrictions.get(group) if group is not None else None


def refusal(rule: tuple[str, str], metadata: Iterable[tuple[str, Any]]) -> str | None:
    """Triton's UNAVAILABLE message for a call whose ``metadata`` lacks ``rule``'s header, else None."""
    key = HEADER_PREFIX + rule[0]
    if dict(metadata).get(key.lower()) == rule[1]:  # gRPC metadata keys are lower-case
        return None
    return f"This protocol is restricted, expecting header '{key}'"


class RestrictedInterceptor(grpc.aio.ServerInterceptor):
    """Refuse calls of restricted groups that lack the header.

    :param restrictions: group -> (header name without Triton's prefix, value).
    """

    def __init__(self, restrictions: dict[str, tuple[str, str]]) -> None:
        self.restrictions = restrictions

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        rule = rule_for(handler_call_details.method, self.restrictions)
        if rule is not None:
            message = refusal(rule, handler_call_details.invocation_metadata or ())
            if message is not None:
                return _refusal(handler_call_details.method.rsplit("/", 1)[-1] in STREAMING, message)
        return await continuation(handler_call_details)


def _refusal(streaming: bool, message: str) -> grpc.RpcMethodHandler:
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    async def stream(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, message)

    if streaming:
        return grpc.stream_stream_rpc_method_handler(stream)
    return grpc.unary_unary_rpc_method_handler(unary)
