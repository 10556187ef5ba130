"""One thin handler per KServe v2 / Triton endpoint, and the URL table.

Handlers run on the core's event loop. Each translates the HTTP request into
one call of the in-process API (:class:`~tritium.core.api.ServerAPI`)
and the result, or the :class:`~tritium.core.errors.TritonError` it raised,
into Triton's answer: JSON bodies (``{"error": "..."}`` for errors, status by
:func:`~tritium.frontends.base.http_status`), empty bodies for the health
and readiness endpoints; unknown URLs and wrong methods are the router's
(:mod:`.router`). Handlers that answer at once are plain functions; the
ones that wait (inference, model loading, and readiness and statistics, which
come from the context's :class:`~tritium.frontends.base.ClusterView`) are coroutines.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core.api import Code, Done, InferenceRequest, InferenceResponse, TritonError, refuse_decoupled
from . import codec
from .body import BodyTooLarge, UnsupportedEncoding
from .context import EndpointContext, error_response
from .context import url_version as _version
from .generate import generate, generate_stream
from .inflate import BudgetHold, inflate
from .messages import HttpRequest, HttpResponse
from .openapi import add_openapi_route
from .repository import add_repository_routes
from .router import Router
from .shared_memory import add_shared_memory_routes
from .trace_logging import add_trace_logging_routes

log = logging.getLogger("tritium.http")

__all__ = ["add_routes"]

_JSON = "application/json"
_EMPTY_TYPE = "text/plain"  # what Triton sends with its empty health/readiness bodies
_OK_EMPTY = HttpResponse(200, b"", _EMPTY_TYPE)
_BAD_EMPTY = HttpResponse(400, b"", _EMPTY_TYPE)


def _json(body: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(status, body, _JSON)


# -- server ------------------------------------------------------------------------------------


def server_metadata(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2``: server name, version and extensions."""
    return _json(codec.dumps(ctx.server.metadata()))


def health_live(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/health/live``: 200 when live, else 400; empty body."""
    return _OK_EMPTY if ctx.server.live else _BAD_EMPTY


async def health_ready(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/health/ready``: 200 when ready (every server behind the address), else 400; empty body."""
    return _OK_EMPTY if await ctx.cluster.ready() else _BAD_EMPTY


# -- models ------------------------------------------------------------------------------------


def model_metadata(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/models/{m}[/versions/{v}]``: inputs, outputs, versions, platform."""
    try:
        metadata = ctx.server.model_metadata(request.params["model"], _version(request))
    except TritonError as exc:
        return error_response(exc)
    return _json(codec.dumps(metadata))


async def model_ready(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/models/{m}[/versions/{v}]/ready``: 200, or 400 "Model version not ready"."""
    try:
        version = _version(request)
    except TritonError as exc:
        return error_response(exc)
    if await ctx.cluster.model_ready(request.params["model"], version):
        return _OK_EMPTY
    return error_response(TritonError(Code.INVALID_ARG, "Model version not ready"))


def model_config(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/models/{m}[/versions/{v}]/config``: the model configuration as JSON."""
    try:
        config = ctx.server.model_config(request.params["model"], _version(request))
    except TritonError as exc:
        return error_response(exc)
    return _json(codec.dumps(config))


async def model_stats(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``GET /v2/models[/{m}[/versions/{v}]]/stats``: the statistics extension (summed over the servers)."""
    try:
        stats = await ctx.cluster.statistics(request.params.get("model", ""), _version(request))
    except TritonError as exc:
        return error_response(exc)
    return _json(codec.dumps(stats))


# -- inference ---------------------------------------------------------------------------------


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


#: an inference body whose JSON is larger than this (a compressed body: once inflated; one larger
#: than OFFLOAD_COMPRESSED_BYTES is inflated there too) is parsed on a thread of
#: :data:`_PARSE_THREADS`, so the event loop keeps serving meanwhile
OFFLOAD_JSON_BYTES = 1 << 20
OFFLOAD_COMPRESSED_BYTES = 16 << 10
#: the threads that decompress and parse large bodies (a few: more large bodies wait their turn)
_PARSE_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tritium-http-parse")
_IHCL = "inference-header-content-length"


def infer(ctx: EndpointContext, request: HttpRequest) -> HttpResponse | None:
    """``POST /v2/models/{m}[/versions/{v}]/infer``: one inference, JSON and/or binary tensors.

    Answers from the model's completion callback (``request.respond``), with no task
    or coroutine per request; errors found before the model runs are answered at once.
    A large JSON or compressed body is decoded on a parse thread first (one task).
    """
    recv_ns = time.perf_counter_ns() if ctx.server.tracing else 0
    try:
        version = _version(request)
        model = ctx.server.model(request.params["model"], version)
        refuse_decoupled(model, "HTTP end point")
        encoding = request.headers.get("content-encoding")
        if encoding is not None:
            encoding = _encoding(encoding)
        inflated = None
        if encoding is not None and len(request.body) <= OFFLOAD_COMPRESSED_BYTES:
            # inflated here (bounded: deflate makes at most about 1032 bytes of one), then parsed
            # where a plain body of its inflated size would be
            inflated = _inflate(ctx, request, encoding)
        size = len(request.body if inflated is None else inflated)
        if (encoding is not None and inflated is None) or (
            size > OFFLOAD_JSON_BYTES and codec.header_length(request.headers.get(_IHCL), size) > OFFLOAD_JSON_BYTES
        ):
            _spawn(ctx, _infer_offloaded(ctx, request, model, encoding, version, recv_ns, inflated))
            return None
        parsed = _parse(ctx, request, model, encoding, version, inflated)
    except TritonError as exc:
        return error_response(exc)
    except Exception as exc:  # a bug must not take the connection down without an answer
        log.exception("HTTP inference request failed")
        return error_response(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
    return _submit(ctx, request, parsed, model, recv_ns)


def _submit(
    ctx: EndpointContext,
    request: HttpRequest,
    parsed: tuple[InferenceRequest, codec.OutputPlan],
    model: Any,
    recv_ns: int,
) -> HttpResponse | None:
    """Hand a parsed request to the model; ``recv_ns`` (``perf_counter_ns``, 0 with tracing off) starts its trace."""
    ireq, plan = parsed
    respond = request.respond
    inflight = ctx.inflight

    def done(response: InferenceResponse | None, error: BaseException | None) -> None:
        inflight.leave()
        if response is None:
            if not isinstance(error, TritonError):
                log.error("HTTP inference request failed: %r", error)
                error = TritonError(Code.INTERNAL, f"internal error: {error!r}")
            respond(error_response(error))
            return
        try:
            answer = _render_or_error(request, response, plan)
        except codec.LargeJson:  # outputs too large to render as JSON on the event loop
            _spawn(ctx, _render_offloaded(request, response, plan))
            return
        respond(answer)

    answer: Done = done
    if recv_ns:  # the trace extension is on: sample this request
        server = ctx.server
        trace = server.begin_trace(ireq, "HTTP", recv_ns, request.headers.get("traceparent"))
        if trace is not None:
            answer = server.traced(trace, done)
    inflight.enter()
    try:
        request.job = ctx.server.submit(ireq, answer, model)
    except TritonError as exc:
        inflight.leave()
        return error_response(exc)
    return None


_TASKS: set[asyncio.Task[None]] = set()


def _spawn(ctx: EndpointContext, coroutine: Any) -> None:
    task = asyncio.get_running_loop().create_task(coroutine)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


async def _infer_offloaded(
    ctx: EndpointContext,
    request: HttpRequest,
    model: Any,
    encoding: str | None,
    version: str,
    recv_ns: int,
    inflated: bytearray | None,
) -> None:
    """:func:`infer` for a large body: decoded on a parse thread, then submitted from the loop."""
    loop = asyncio.get_running_loop()
    try:
        parsed = await loop.run_in_executor(_PARSE_THREADS, _parse, ctx, request, model, encoding, version, inflated)
        answer = _submit(ctx, request, parsed, model, recv_ns)
    except TritonError as exc:
        answer = error_response(exc)
    except Exception as exc:
        log.exception("HTTP inference request failed")
        answer = error_response(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))
    if answer is not None:
        request.respond(answer)


#: an empty body with no Inference-Header-Content-Length (Triton 2.51 takes it for a raw input of 0 bytes)
_EMPTY_BODY = (
    "the inference request body is empty: expected the request's JSON (or, for one raw binary input, "
    "the 'Inference-Header-Content-Length: 0' header)"
)


def _encoding(encoding: str) -> str | None:
    """The body's ``Content-Encoding`` header as a coding (None: identity); 415 for one Triton does not read."""
    if encoding in ("", "identity"):
        return None
    if encoding not in ("gzip", "deflate"):
        raise UnsupportedEncoding("Unsupported compression type")
    return encoding


def _inflate(ctx: EndpointContext, request: HttpRequest, encoding: str) -> bytearray:
    """The compressed body of ``request`` inflated, within ``--max-decompressed-request-bytes`` and the
    in-flight budget (the bytes held until the connection releases the request)."""
    hold = request.hold = BudgetHold(ctx.server.body_budget)
    limit = ctx.max_decompressed_bytes
    flag = "--max-decompressed-request-bytes" if limit < ctx.max_request_bytes else ""
    return inflate(request.body, encoding, min(limit, ctx.max_request_bytes), hold, flag)


def _parse(
    ctx: EndpointContext,
    request: HttpRequest,
    model: Any,
    encoding: str | None,
    version: str,
    inflated: bytearray | None = None,
) -> tuple[InferenceRequest, codec.OutputPlan]:
    """The request and its output plan, from the (decompressed) body.

    Pure computation over the body: runs on the event loop for the usual
    bodies, on a parse thread for large ones. ``inflated``: the body of a
    compressed request, already decompressed.
    """
    headers = request.headers
    body = request.body
    if inflated is None and encoding is not None:
        inflated = _inflate(ctx, request, encoding)
    view = memoryview(body if inflated is None else inflated)
    name = request.params["model"]
    declared = headers.get(_IHCL)
    if not view and declared is None:
        raise TritonError(Code.INVALID_ARG, _EMPTY_BODY)
    length = codec.header_length(declared, len(view))
    if length > ctx.max_json_bytes:
        raise BodyTooLarge(
            f"the JSON of the request ({length} bytes) exceeds the maximum of {ctx.max_json_bytes} bytes "
            "(--max-json-request-bytes); send large tensors as binary data"
        )
    if length == 0:
        ireq, plan = codec.raw_infer_request(view, name, version, model.config)
    else:
        ireq, plan = codec.parse_infer_request(view, length, name, version, ctx.server.resolve_shared_memory)
    if encoding is None:
        ireq.buffer = request.body_block  # binary inputs already lie in the arena
    return ireq, plan


def _render_or_error(
    request: HttpRequest, response: InferenceResponse, plan: codec.OutputPlan, rendered: Any = None
) -> HttpResponse:
    """The answer to ``response`` (on the event loop: it releases the response's shared memory)."""
    try:
        if isinstance(rendered, Exception):
            raise rendered
        return _render(request, response, plan, rendered)
    except codec.LargeJson:
        raise
    except TritonError as exc:
        response.release()
        return error_response(exc)
    except Exception as exc:
        response.release()
        log.exception("rendering an HTTP inference response failed")
        return error_response(TritonError(Code.INTERNAL, f"internal error: {exc!r}"))


async def _render_offloaded(request: HttpRequest, response: InferenceResponse, plan: codec.OutputPlan) -> None:
    """Render a response with large JSON outputs on a parse thread, then answer from the loop."""
    loop = asyncio.get_running_loop()
    rendered = await loop.run_in_executor(_PARSE_THREADS, _render_json, response, plan)
    request.respond(_render_or_error(request, response, plan, rendered))


def _render_json(response: InferenceResponse, plan: codec.OutputPlan) -> codec.Rendered | Exception:
    """The JSON rendering alone (on a parse thread), or the error it raised."""
    try:
        return codec.render_infer_response(response, plan)
    except Exception as exc:
        return exc


def _render(
    request: HttpRequest, response: InferenceResponse, plan: codec.OutputPlan, rendered: codec.Rendered | None = None
) -> HttpResponse:
    """The answer to an inference; binary outputs are written straight from shared memory."""
    if rendered is None:
        rendered = codec.render_infer_response(response, plan, OFFLOAD_JSON_BYTES)
    compression = _accepted_encoding(request.headers.get("accept-encoding"))
    headers: dict[str, str] | None = None
    if rendered.buffers:
        content_type = "application/octet-stream"
        headers = {"Inference-Header-Content-Length": str(len(rendered.header))}
    else:
        content_type = _JSON
    if compression is not None:
        headers = headers or {}
        headers["Content-Encoding"] = compression
        body = _compress([rendered.header, *rendered.buffers], compression)
        response.release()
        return HttpResponse(200, body, content_type, headers)
    if not rendered.buffers:
        response.release()
        return HttpResponse(200, rendered.header, content_type, headers)
    # the connection releases the outputs' shared memory once the bytes are on the wire
    return HttpResponse(200, [rendered.header, *rendered.buffers], content_type, headers, response.release)


_MODEL = "/v2/models/{model}"
_VERSION = _MODEL + "/versions/{version}"


def add_routes(router: Router, generate_extension: bool = True, openapi: bool = True) -> None:
    """Register every endpoint on ``router`` (infer first: it is the hot path).

    ``generate_extension=False`` leaves out the generate URLs; ``openapi=False`` the OpenAPI
    document (Ray Serve's proxy serves neither).
    """
    for base in (_MODEL, _VERSION):
        router.add(base + "/infer", "POST", infer, arena_body=True)
    for base in (_MODEL, _VERSION) if generate_extension else ():
        router.add(base + "/generate", "POST", generate)
        router.add(base + "/generate_stream", "POST", generate_stream)
    router.add("/v2/models/stats", "GET", model_stats)
    for base in (_MODEL, _VERSION):
        router.add(base, "GET", model_metadata)
        router.add(base + "/ready", "GET", model_ready)
        router.add(base + "/config", "GET", model_config)
        router.add(base + "/stats", "GET", model_stats)
    router.add("/v2", "GET", server_metadata)
    router.add("/v2/health/live", "GET", health_live)
    router.add("/v2/health/ready", "GET", health_ready)
    add_repository_routes(router)
    add_shared_memory_routes(router)
    if openapi:
        add_openapi_route(router)
    add_trace_logging_routes(router)
