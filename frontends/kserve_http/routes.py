"""One thin aiohttp handler per KServe v2 / Triton endpoint, and the URL table.

Handlers run on the core's event loop. Each translates the HTTP request into
one call of the in-process API (:class:`~tritium.core.server.InferenceServer`)
and the result, or the :class:`~tritium.core.errors.TritonError` it raised,
into Triton's answer: JSON bodies (``{"error": "..."}`` for errors, status by
:func:`~tritium.frontends.base.http_status`), empty bodies for the health
and readiness endpoints, 404 ``{"error":"Not Found"}`` for an unknown URL and
405 ``{"error":"Method Not Allowed"}`` for a known URL with the wrong method.
The URLs are Triton's: model names are ``[^/]+``, versions ``[0-9]+``, no
trailing slashes.
"""

from __future__ import annotations

import logging
import re
import zlib
from typing import Awaitable, Callable

from aiohttp import hdrs, web

from ...core.errors import Code, TritonError
from ...core.response import InferenceResponse
from . import codec
from .app import INFLIGHT, MAX_REQUEST_BYTES, SERVER
from .body import BodyTooLarge, error_status, read_body
from .repository import add_repository_routes
from .shared_memory import add_shared_memory_routes

log = logging.getLogger("tritium.http")

__all__ = ["add_routes"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_JSON = "application/json"
_EMPTY_TYPE = "text/plain"  # what Triton sends with its empty health/readiness bodies


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON)


def _error(exc: TritonError, headers: dict[str, str] | None = None) -> web.Response:
    body = codec.dumps({"error": exc.message})
    status = error_status(exc)
    return web.Response(body=body, status=status, content_type=_JSON, headers=headers)


def _empty(ok: bool) -> web.Response:
    return web.Response(status=200 if ok else 400, content_type=_EMPTY_TYPE)


def _version(request: web.Request) -> str:
    """The URL's model version ("": the version policy chooses), read as Triton does (``stol``)."""
    text = request.match_info.get("version", "")
    if not text:
        return ""
    number = int(text)
    if number > (1 << 63) - 1:
        raise TritonError(
            Code.INVALID_ARG,
            f"failed to get model version from specified version string '{text}' (details: stol), "
            "version should be an integral value > 0",
        )
    return str(number)


# -- server ------------------------------------------------------------------------------------


async def server_metadata(request: web.Request) -> web.Response:
    """``GET /v2``: server name, version and extensions."""
    return _json(codec.dumps(request.app[SERVER].metadata()))


async def health_live(request: web.Request) -> web.Response:
    """``GET /v2/health/live``: 200 when live, else 400; empty body."""
    return _empty(request.app[SERVER].live)


async def health_ready(request: web.Request) -> web.Response:
    """``GET /v2/health/ready``: 200 when ready, else 400; empty body."""
    return _empty(request.app[SERVER].ready)


# -- models ------------------------------------------------------------------------------------


async def model_metadata(request: web.Request) -> web.Response:
    """``GET /v2/models/{m}[/versions/{v}]``: inputs, outputs, versions, platform."""
    try:
        metadata = request.app[SERVER].model_metadata(request.match_info["model"], _version(request))
    except TritonError as exc:
        return _error(exc)
    return _json(codec.dumps(metadata))


async def model_ready(request: web.Request) -> web.Response:
    """``GET /v2/models/{m}[/versions/{v}]/ready``: 200, or 400 "Model version not ready"."""
    try:
        version = _version(request)
    except TritonError as exc:
        return _error(exc)
    if request.app[SERVER].model_ready(request.match_info["model"], version):
        return _empty(True)
    return _error(TritonError(Code.INVALID_ARG, "Model version not ready"))


async def model_config(request: web.Request) -> web.Response:
    """``GET /v2/models/{m}[/versions/{v}]/config``: the model configuration as JSON."""
    try:
        config = request.app[SERVER].model_config(request.match_info["model"], _version(request))
    except TritonError as exc:
        return _error(exc)
    return _json(codec.dumps(config))


async def model_stats(request: web.Request) -> web.Response:
    """``GET /v2/models[/{m}[/versions/{v}]]/stats``: the statistics extension."""
    try:
        name = request.match_info.get("model", "")
        stats = request.app[SERVER].statistics(name, _version(request))
    except TritonError as exc:
        return _error(exc)
    return _json(codec.dumps(stats))


# -- inference ---------------------------------------------------------------------------------


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    if not body:
        raise TritonError(Code.INVALID_ARG, "nothing to be decompressed")
    inflater = zlib.decompressobj(wbits=47)  # zlib or gzip, as Triton's inflateInit2(15 | 32)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        message = f"failed to decompress the '{encoding}' request body: {exc}"
        raise TritonError(Code.INVALID_ARG, message) from None
    if len(data) > limit:
        raise BodyTooLarge(f"decompressed request body exceeds the maximum request size of {limit} bytes")
    return data


def _compress(data: list[memoryview | bytes], encoding: str) -> bytes:
    # Triton: deflateInit2(15 | 16) for gzip, deflateInit (zlib wrapper) for deflate, default level.
    deflater = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
    return b"".join([*(deflater.compress(part) for part in data), deflater.flush()])


_STOD = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")  # what C++ std::stod accepts


def _accepted_encoding(header: str | None) -> str | None:
    """The response compression Triton picks from ``Accept-Encoding`` (``CompressionTypeUsed``)."""
    if header is None:
        return None
    chosen, weight = "identity", 0.0
    for item in header.split(","):
        start = len(item) - len(item.lstrip(" "))
        if start == len(item):
            continue
        qpos = item.find(";q=")
        if qpos != -1 and start >= qpos:
            continue
        kind = item[start:] if qpos == -1 else item[start:qpos]
        value = 1.0
        if qpos != -1:
            number = _STOD.match(item, qpos + 3)
            if number is None:
                continue
            value = float(number.group(1))
        if kind in ("identity", "deflate", "gzip") and value > weight:
            chosen, weight = kind, value
    return None if chosen == "identity" else chosen


async def infer(request: web.Request) -> web.StreamResponse:
    """``POST /v2/models/{m}[/versions/{v}]/infer``: one inference, JSON and/or binary tensors."""
    inflight = request.app[INFLIGHT]
    inflight.enter()
    try:
        return await _infer(request)
    except TritonError as exc:
        return _error(exc)
    except Exception as exc:  # a bug must not take the connection down without an answer
        log.exception("HTTP inference request failed")
        return _error(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
    finally:
        inflight.leave()


async def _infer(request: web.Request) -> web.StreamResponse:
    server = request.app[SERVER]
    name = request.match_info["model"]
    version = _version(request)
    model = server.model(name, version)
    if model.decoupled:
        message = "HTTP end point doesn't support models with decoupled transaction policy"
        raise TritonError(Code.UNSUPPORTED, message)
    encoding = request.headers.get(hdrs.CONTENT_ENCODING)
    if encoding in (None, "", "identity"):
        encoding = None
    elif encoding not in ("gzip", "deflate"):
        unsupported = TritonError(Code.UNSUPPORTED, "Unsupported compression type")
        return _error(unsupported, {"Accept-Encoding": "gzip, deflate"})
    body = await read_body(request)
    if encoding is not None:
        body = _decompress(body, encoding, request.app[MAX_REQUEST_BYTES])
    view = memoryview(body)
    length = codec.header_length(request.headers.get("Inference-Header-Content-Length"), len(view))
    if length == 0:
        ireq, plan = codec.raw_infer_request(view, name, version, model.config)
    else:
        ireq, plan = codec.parse_infer_request(view, length, name, version, server.shared_memory.resolve)
    response = await server.infer(ireq)
    streaming = False
    try:
        rendered = codec.render_infer_response(response, plan)
        compression = _accepted_encoding(request.headers.get(hdrs.ACCEPT_ENCODING))
        headers = {hdrs.CONTENT_TYPE: "application/octet-stream" if rendered.buffers else _JSON}
        if rendered.buffers:
            headers["Inference-Header-Content-Length"] = str(len(rendered.header))
        if compression is not None:
            headers[hdrs.CONTENT_ENCODING] = compression
            body = _compress([rendered.header, *rendered.buffers], compression)
            return web.Response(body=body, headers=headers)
        if not rendered.buffers:
            return web.Response(body=rendered.header, headers=headers)
        if rendered.size <= _COPY_BELOW:  # small: one copy, one write (and one system call)
            return web.Response(body=b"".join([rendered.header, *rendered.buffers]), headers=headers)
        streaming = True
        return await _send_binary(request, rendered, headers, response)
    finally:
        if not streaming:
            response.release()


#: binary responses up to this many bytes are copied into one body; larger ones are written
#: straight from shared memory (fewer system calls matter more than a copy for small ones)
_COPY_BELOW = 64 * 1024


class _BinaryResponse(web.StreamResponse):
    """A streamed response whose status line and headers go out with the first body write.

    (``web.Response`` does the same; a plain ``StreamResponse`` sends its
    headers on their own, costing one more system call and client wake-up.)
    """

    _send_headers_immediately = False


async def _send_binary(
    request: web.Request,
    rendered: codec.Rendered,
    headers: dict[str, str],
    response: InferenceResponse,
) -> web.StreamResponse:
    """Write the JSON header, then each output buffer straight from shared memory; release after.

    The transport may keep a reference to a buffer it could not send at once
    (uvloop does), so the response is released only when the transport's
    write buffer is empty: while the buffers are written the connection's
    high-water mark is 0, which makes ``drain()`` wait for exactly that.
    """
    stream = _BinaryResponse(headers=headers)
    stream.content_length = rendered.size
    transport = request.transport
    try:
        if transport is not None:
            transport.set_write_buffer_limits(high=0)
        await stream.prepare(request)
        await stream.write(rendered.header)
        for buffer in rendered.buffers:
            await stream.write(buffer)
        await stream.write_eof()
        await request.writer.drain()
    except ConnectionError:
        log.debug("client went away while an inference response was sent")
    finally:
        response.release()
        if transport is not None and not transport.is_closing():
            transport.set_write_buffer_limits()
    return stream


# -- errors for URLs and methods ------------------------------------------------------------------


async def not_found(request: web.Request) -> web.Response:
    """Any URL that is not an endpoint: 404 ``{"error":"Not Found"}``."""
    del request
    return _json(b'{"error":"Not Found"}', 404)


async def method_not_allowed(request: web.Request) -> web.Response:
    """A known URL with the wrong method: 405 ``{"error":"Method Not Allowed"}``."""
    del request
    return _json(b'{"error":"Method Not Allowed"}', 405)


# Triton extensions tritium does not implement yet: their URLs answer 501 naming the extension
_NOT_YET = (
    ("/v2/models/{model:[^/]+}/trace/setting", "trace"),
    ("/v2/trace/setting", "trace"),
    ("/v2/logging", "logging"),
)


def _not_yet(extension: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        del request
        return _error(TritonError(Code.UNSUPPORTED, f"the {extension} extension is not supported by tritium yet"))

    return handler


_MODEL = "/v2/models/{model:[^/]+}"
_VERSION = _MODEL + "/versions/{version:[0-9]+}"


def add_routes(app: web.Application) -> None:
    """Register every endpoint on ``app`` (infer first: it is the hot path)."""

    def add(path: str, method: str, handler: Handler) -> None:
        resource = app.router.add_resource(path)
        resource.add_route(method, handler)
        resource.add_route(hdrs.METH_ANY, method_not_allowed)

    add("/v2/models/stats", hdrs.METH_GET, model_stats)
    for base in (_MODEL, _VERSION):
        add(base + "/infer", hdrs.METH_POST, infer)
        add(base, hdrs.METH_GET, model_metadata)
        add(base + "/ready", hdrs.METH_GET, model_ready)
        add(base + "/config", hdrs.METH_GET, model_config)
        add(base + "/stats", hdrs.METH_GET, model_stats)
    add("/v2", hdrs.METH_GET, server_metadata)
    add("/v2/health/live", hdrs.METH_GET, health_live)
    add("/v2/health/ready", hdrs.METH_GET, health_ready)
    add_repository_routes(app, method_not_allowed)
    add_shared_memory_routes(add)
    for path, extension in _NOT_YET:
        app.router.add_route(hdrs.METH_ANY, path, _not_yet(extension))
    app.router.add_route(hdrs.METH_ANY, "/{tail:.*}", not_found)
