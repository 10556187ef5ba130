"""HTTP endpoints of Triton's system and CUDA shared-memory extensions (thin handlers).

``GET  /v2/{system,cuda}sharedmemory[/region/{name}]/status``
``POST /v2/{system,cuda}sharedmemory/region/{name}/register``
``POST /v2/{system,cuda}sharedmemory[/region/{name}]/unregister``

Bodies, status codes and messages are Triton 2.51's (``http_server.cc``),
checked against the real server. Handlers run on the core's event loop and
call :class:`~tritium.core.memory.shm_region.SharedMemoryManager` /
:class:`~tritium.core.memory.cuda.CudaSharedMemoryManager`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ...core.api import Code, TritonError
from . import codec
from .context import EndpointContext, error_response
from .messages import HttpRequest, HttpResponse
from .router import CONTROL_BODY_BYTES, Router

__all__ = ["add_shared_memory_routes"]

_NOT_STRING = "attempt to access JSON non-string as string"
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_NOT_INT = "attempt to access JSON non-signed-integer as signed-integer"
_UINT64_MAX = (1 << 64) - 1


def _answer(body: Any = None, error: TritonError | None = None) -> HttpResponse:
    if error is not None:
        return error_response(error)
    return HttpResponse(200, b"" if body is None else codec.dumps(body))


def _register_body(request: HttpRequest) -> Mapping[str, Any]:
    doc = codec.loads(request.body)  # the connection refused bodies over --max-request-bytes
    if not isinstance(doc, dict):
        raise TritonError(Code.INVALID_ARG, "attempt to access non-object JSON as object")
    return doc


def _field(doc: Mapping[str, Any], key: str, kind: str, default: Any = None) -> Any:
    """A register field, checked as Triton's JSON accessors check it."""
    if key not in doc:
        if default is not None:
            return default
        raise TritonError(Code.INVALID_ARG, f"Shared memory register request has no '{key}' field")
    value = doc[key]
    if kind == "str":
        if type(value) is not str:
            raise TritonError(Code.INVALID_ARG, _NOT_STRING)
    elif kind == "uint":
        if type(value) is not int or not 0 <= value <= _UINT64_MAX:
            raise TritonError(Code.INVALID_ARG, _NOT_UINT)
    elif kind == "int":
        if type(value) is not int:
            raise TritonError(Code.INVALID_ARG, _NOT_INT)
    return value


# -- system shared memory ------------------------------------------------------------------------
def system_status(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Every registered region, or the one named: ``[{"name","key","offset","byte_size"}]``."""
    try:
        return _answer(ctx.server.shared_memory_status("system", request.params.get("name", "")))
    except TritonError as exc:
        return _answer(error=exc)


def system_register(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Register ``{"key", "offset", "byte_size"}`` as region ``name``."""
    try:
        doc = _register_body(request)
        key = _field(doc, "key", "str")
        offset = _field(doc, "offset", "uint", 0)
        byte_size = _field(doc, "byte_size", "uint")
        ctx.server.register_system_shared_memory(request.params["name"], key, offset, byte_size)
    except TritonError as exc:
        return _answer(error=exc)
    return _answer()


def system_unregister(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Unregister the region named (or all)."""
    ctx.server.unregister_shared_memory("system", request.params.get("name", ""))
    return _answer()


# -- CUDA shared memory ----------------------------------------------------------------------------
def cuda_status(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Every registered CUDA region, or the one named: ``[{"name","device_id","byte_size"}]``."""
    try:
        return _answer(ctx.server.shared_memory_status("cuda", request.params.get("name", "")))
    except TritonError as exc:
        return _answer(error=exc)


def cuda_register(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Register ``{"raw_handle": {"b64": ...}, "device_id", "byte_size"}`` as CUDA region ``name``."""
    try:
        doc = _register_body(request)
        raw = _field(doc, "raw_handle", "any")
        if not isinstance(raw, dict) or "b64" not in raw:
            raise TritonError(Code.INVALID_ARG, "Shared memory register request has no 'b64' field in 'raw_handle'")
        encoded = _field(raw, "b64", "str")
        device_id = _field(doc, "device_id", "int")
        byte_size = _field(doc, "byte_size", "uint")
        try:
            handle = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise TritonError(Code.INVALID_ARG, "'raw_handle' is not valid base64") from None
        ctx.server.register_cuda_shared_memory(request.params["name"], handle, device_id, byte_size)
    except TritonError as exc:
        return _answer(error=exc)
    return _answer()


def cuda_unregister(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """Unregister the CUDA region named (or all)."""
    ctx.server.unregister_shared_memory("cuda", request.params.get("name", ""))
    return _answer()


def add_shared_memory_routes(router: Router) -> None:
    """Register the system and CUDA shared-memory endpoints (405 for other methods)."""
    for kind, status, register, unregister in (
        ("system", system_status, system_register, system_unregister),
        ("cuda", cuda_status, cuda_register, cuda_unregister),
    ):
        base = f"/v2/{kind}sharedmemory"
        region = base + "/region/{name}"
        router.add(base + "/status", "GET", status)
        router.add(region + "/status", "GET", status)
        router.add(region + "/register", "POST", register, max_body=CONTROL_BODY_BYTES)
        router.add(base + "/unregister", "POST", unregister, max_body=CONTROL_BODY_BYTES)
        router.add(region + "/unregister", "POST", unregister, max_body=CONTROL_BODY_BYTES)
