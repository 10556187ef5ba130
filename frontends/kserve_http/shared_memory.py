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
from typing import Any, Awaitable, Callable, Mapping

from aiohttp import hdrs, web

from ...core.errors import Code, TritonError
from . import codec
from .app import SERVER
from .body import error_status, read_body

__all__ = ["add_shared_memory_routes"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_NOT_STRING = "attempt to access JSON non-string as string"
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_NOT_INT = "attempt to access JSON non-signed-integer as signed-integer"
_UINT64_MAX = (1 << 64) - 1


def _answer(body: Any = None, error: TritonError | None = None) -> web.Response:
    if error is not None:
        return web.Response(
            body=codec.dumps({"error": error.message}), status=error_status(error), content_type="application/json"
        )
    if body is None:
        return web.Response(status=200, content_type="application/json")
    return web.Response(body=codec.dumps(body), status=200, content_type="application/json")


async def _register_body(request: web.Request) -> Mapping[str, Any]:
    doc = codec.loads(await read_body(request))  # 413 over --max-request-bytes
    if not isinstance(doc, dict):
        raise TritonError(Code.INTERNAL, "attempt to access non-object JSON as object")
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
            raise TritonError(Code.INTERNAL, _NOT_STRING)
    elif kind == "uint":
        if type(value) is not int or not 0 <= value <= _UINT64_MAX:
            raise TritonError(Code.INTERNAL, _NOT_UINT)
    elif kind == "int":
        if type(value) is not int:
            raise TritonError(Code.INTERNAL, _NOT_INT)
    return value


# -- system shared memory ------------------------------------------------------------------------
async def system_status(request: web.Request) -> web.Response:
    """Every registered region, or the one named: ``[{"name","key","offset","byte_size"}]``."""
    try:
        return _answer(request.app[SERVER].shared_memory.status(request.match_info.get("name", "")))
    except TritonError as exc:
        return _answer(error=exc)


async def system_register(request: web.Request) -> web.Response:
    """Register ``{"key", "offset", "byte_size"}`` as region ``name``."""
    try:
        doc = await _register_body(request)
        key = _field(doc, "key", "str")
        offset = _field(doc, "offset", "uint", 0)
        byte_size = _field(doc, "byte_size", "uint")
        request.app[SERVER].shared_memory.register(request.match_info["name"], key, offset, byte_size)
    except TritonError as exc:
        return _answer(error=exc)
    return _answer()


async def system_unregister(request: web.Request) -> web.Response:
    """Unregister the region named (or all)."""
    request.app[SERVER].shared_memory.unregister(request.match_info.get("name", ""))
    return _answer()


# -- CUDA shared memory ----------------------------------------------------------------------------
async def cuda_status(request: web.Request) -> web.Response:
    """Every registered CUDA region, or the one named: ``[{"name","device_id","byte_size"}]``."""
    try:
        return _answer(request.app[SERVER].cuda_shared_memory.status(request.match_info.get("name", "")))
    except TritonError as exc:
        return _answer(error=exc)


async def cuda_register(request: web.Request) -> web.Response:
    """Register ``{"raw_handle": {"b64": ...}, "device_id", "byte_size"}`` as CUDA region ``name``."""
    try:
        doc = await _register_body(request)
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
        request.app[SERVER].cuda_shared_memory.register(request.match_info["name"], handle, device_id, byte_size)
    except TritonError as exc:
        return _answer(error=exc)
    return _answer()


async def cuda_unregister(request: web.Request) -> web.Response:
    """Unregister the CUDA region named (or all)."""
    request.app[SERVER].cuda_shared_memory.unregister(request.match_info.get("name", ""))
    return _answer()


def add_shared_memory_routes(add: Callable[[str, str, Handler], None]) -> None:
    """Register the endpoints with ``add(path, method, handler)`` (405 for other methods)."""
    for kind, status, register, unregister in (
        ("system", system_status, system_register, system_unregister),
        ("cuda", cuda_status, cuda_register, cuda_unregister),
    ):
        base = f"/v2/{kind}sharedmemory"
        region = base + "/region/{name}"
        add(base + "/status", hdrs.METH_GET, status)
        add(region + "/status", hdrs.METH_GET, status)
        add(region + "/register", hdrs.METH_POST, register)
        add(base + "/unregister", hdrs.METH_POST, unregister)
        add(region + "/unregister", hdrs.METH_POST, unregister)
