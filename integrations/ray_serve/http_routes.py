"""The KServe v2 HTTP protocol (and Triton's extensions) behind Ray Serve's HTTP proxy.

Serve's proxy hands each request to one replica as a Starlette ``Request``;
:func:`handle` answers it with a Starlette ``Response``, on the replica's
event loop. The URLs, bodies, status codes and messages are Triton's (as
``tritium-server``'s HTTP endpoint gives them); what differs is the reach:

- local to the replica that got the request: server metadata, liveness, model
  metadata and configuration, inference (JSON and the binary tensor
  extension), the repository index;
- over every live replica (through :class:`~.agent.ReplicaAgent`): server
  and model readiness, statistics (summed), model load and unload, and
  ``GET /metrics`` (each replica's ``nv_*`` metrics, labelled ``replica``).

System and CUDA shared memory cannot work through a proxy that may send each
request to another replica, on another machine: those URLs answer 501, and
server metadata does not list the two extensions. Compressed request bodies
(``Content-Encoding``) are refused with Triton's 501 "Unsupported compression
type"; responses are not compressed.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.api import Code, TritonError, refuse_decoupled
from ...frontends.base import http_status
from ...frontends.kserve_grpc.codec import parse_version
from ...frontends.kserve_http import codec
from .agent import ReplicaAgent

log = logging.getLogger("tritium.ray_serve")

__all__ = ["Routes", "handle", "UNAVAILABLE_EXTENSIONS"]

#: extensions of ``tritium-server`` that are not available through Serve
UNAVAILABLE_EXTENSIONS = ("system_shared_memory", "cuda_shared_memory", "generate")

_JSON = "application/json"
_MODEL = re.compile(r"/v2/models/([^/]+)(?:/versions/([0-9]+))?(/infer|/ready|/config|/stats)?")
_REPOSITORY = re.compile(r"/v2/repository/models/([^/]+)/(load|unload)")
_SHARED_MEMORY = re.compile(r"/v2/(?:system|cuda)sharedmemory(?:/.*)?")
_NOT_YET = {"/v2/trace/setting": "trace", "/v2/logging": "logging"}
_MODEL_TRACE = re.compile(r"/v2/models/[^/]+/trace/setting")
_FILE = "file:"


class _TooLarge(TritonError):
    def __init__(self, message: str) -> None:
        super().__init__(Code.INVALID_ARG, message)


def _json(body: Any, status: int = 200) -> Response:
    return Response(codec.dumps(body), status_code=status, media_type=_JSON)


def _error(exc: TritonError, headers: dict[str, str] | None = None) -> Response:
    status = 413 if isinstance(exc, _TooLarge) else http_status(exc.code)
    return Response(codec.dumps({"error": exc.message}), status_code=status, media_type=_JSON, headers=headers)


def _empty(ok: bool) -> Response:
    return Response(b"", status_code=200 if ok else 400, media_type="text/plain")


def _not_found() -> Response:
    return Response(b'{"error":"Not Found"}', status_code=404, media_type=_JSON)


def _not_allowed() -> Response:
    return Response(b'{"error":"Method Not Allowed"}', status_code=405, media_type=_JSON)


async def _body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes (refused from its declared length when it says more)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge(f"request body of {declared} bytes exceeds the maximum request size of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge(f"request body exceeds the maximum request size of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    raw = await _body(request, limit)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # malformed, huge integers, nested too deeply: 400
        raise TritonError(Code.INVALID_ARG, f"failed to parse the request JSON buffer: {exc}") from None
    return data if isinstance(data, dict) else {}


def _parameters(body: dict[str, Any]) -> dict[str, Any]:
    params = body.get("parameters", {})
    return params if isinstance(params, dict) else {}


# -- handlers ------------------------------------------------------------------------------------
class Routes:
    """The handlers of one replica (``server``: its ServerAPI, ``agent``: the cluster view)."""

    def __init__(self, server: Any, agent: ReplicaAgent) -> None:
        self.server = server
        self.agent = agent
        self.limit = int(server.options.max_request_bytes)

    def metadata(self) -> Response:
        meta = dict(self.server.metadata())
        meta["extensions"] = [e for e in meta["extensions"] if e not in UNAVAILABLE_EXTENSIONS]
        return _json(meta)

    async def model(self, request: Request, name: str, version: str, tail: str) -> Response:
        method = request.method
        if tail == "/infer":
            return await self.infer(request, name, version) if method == "POST" else _not_allowed()
        if method != "GET":
            return _not_allowed()
        if tail == "/ready":
            if await self.agent.model_ready(name, version):
                return _empty(True)
            return _error(TritonError(Code.INVALID_ARG, "Model version not ready"))
        if tail == "/config":
            return _json(self.server.model_config(name, version))
        if tail == "/stats":
            return _json(await self.agent.statistics(name, version))
        return _json(self.server.model_metadata(name, version))

    async def infer(self, request: Request, name: str, version: str) -> Response:
        server = self.server
        model = server.model(name, version)
        refuse_decoupled(model, "HTTP end point")
        if request.headers.get("content-encoding", "identity") not in ("", "identity"):
            unsupported = TritonError(Code.UNSUPPORTED, "Unsupported compression type")
            return _error(unsupported, {"Accept-Encoding": "identity"})
        view = memoryview(await _body(request, self.limit))
        length = codec.header_length(request.headers.get("inference-header-content-length"), len(view))
        if length == 0:
            ireq, plan = codec.raw_infer_request(view, name, version, model.config)
        else:
            ireq, plan = codec.parse_infer_request(view, length, name, version)
        response = await server.infer(ireq)
        try:
            rendered = codec.render_infer_response(response, plan)
            if not rendered.buffers:
                return Response(rendered.header, media_type=_JSON)
            headers = {"Inference-Header-Content-Length": str(len(rendered.header))}
            body = b"".join([rendered.header, *rendered.buffers])
            return Response(body, media_type="application/octet-stream", headers=headers)
        finally:
            response.release()

    async def repository(self, request: Request, name: str, action: str) -> Response:
        params = _parameters(await _json_body(request, self.limit))
        if action == "unload":
            await self.agent.unload_model(name, params.get("unload_dependents", False) is True)
            return Response(b"", media_type=_JSON)
        config: str | None = None
        files: dict[str, bytes] = {}
        for key, value in params.items():
            if key != "config" and not key.startswith(_FILE):
                raise TritonError(Code.INTERNAL, "unexpected error on creating Triton parameter")
            if not isinstance(value, str):
                raise TritonError(Code.INVALID_ARG, "attempt to access JSON non-string as string")
            if key == "config":
                config = value
                continue
            try:
                files[key[len(_FILE) :]] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise TritonError(Code.INVALID_ARG, f"failed to decode the base64 contents of '{key}'") from None
        await self.agent.load_model(name, config, files or None)
        return Response(b"", media_type=_JSON)

    async def index(self, request: Request) -> Response:
        ready = (await _json_body(request, self.limit)).get("ready", False)
        if not isinstance(ready, bool):
            raise TritonError(Code.INVALID_ARG, "attempt to access JSON non-boolean as boolean")
        return _json(self.server.repository_index(ready))

    async def route(self, request: Request) -> Response:
        path, method = _application_path(request), request.method

        async def get(answer: Callable[[], Awaitable[Response]]) -> Response:
            return await answer() if method == "GET" else _not_allowed()

        async def post(answer: Callable[[], Awaitable[Response]]) -> Response:
            return await answer() if method == "POST" else _not_allowed()

        match = _MODEL.fullmatch(path)
        if match is not None and path != "/v2/models/stats":
            name, version, tail = match.group(1), parse_version(match.group(2) or ""), match.group(3) or ""
            return await self.model(request, name, version, tail)
        if path == "/v2/models/stats":
            return await get(lambda: _answer(self.agent.statistics(), _json))
        if path == "/v2":
            return await get(lambda: _now(self.metadata()))
        if path == "/v2/health/live":
            return await get(lambda: _now(_empty(self.server.live)))
        if path == "/v2/health/ready":
            return await get(lambda: _answer(self.agent.ready(), _empty))
        if path in ("/metrics", "/metrics/"):
            return await get(lambda: _answer(self.agent.metrics(), _prometheus))
        if path == "/v2/repository/index":
            return await post(lambda: self.index(request))
        match = _REPOSITORY.fullmatch(path)
        if match is not None:
            return await post(lambda: self.repository(request, match.group(1), match.group(2)))
        if _SHARED_MEMORY.fullmatch(path):
            raise TritonError(
                Code.UNSUPPORTED,
                "shared memory is not available through Ray Serve: each request may reach another replica "
                "(send tensors in the request body)",
            )
        extension = _NOT_YET.get(path) or ("trace" if _MODEL_TRACE.fullmatch(path) else None)
        if extension is not None:
            raise TritonError(Code.UNSUPPORTED, f"the {extension} extension is not supported by tritium yet")
        return _not_found()


def _application_path(request: Request) -> str:
    """The URL path below the application's ``route_prefix`` (Serve passes it as the ASGI ``root_path``)."""
    path = request.url.path
    root = str(request.scope.get("root_path", "")).rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


async def _now(response: Response) -> Response:
    return response


async def _answer(value: Awaitable[Any], to_response: Callable[[Any], Response]) -> Response:
    return to_response(await value)


def _prometheus(text: bytes) -> Response:
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


async def handle(routes: Routes, request: Request) -> Response:
    """Answer one HTTP request; a :class:`TritonError` becomes Triton's ``{"error": ...}`` answer."""
    try:
        return await routes.route(request)
    except TritonError as exc:
        return _error(exc)
    except Exception as exc:  # a bug must not leave the client without an answer
        log.exception("HTTP request %s %s failed", request.method, request.url.path)
        return _error(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
