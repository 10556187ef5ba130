"""Triton's generate extension: ``POST /v2/models/<m>[/versions/<v>]/generate`` and ``/generate_stream``.

The request body is one JSON object. A key that names an input of the model
config is that input: a scalar or a flat list of values becomes a tensor of the
config's datatype, shaped by the config's dims (a ``-1`` takes what the element
count leaves, the last one of several; the others are 1), with a batch dimension
of 1 first for a batching model. Every other key is a request parameter (an
object under ``"parameters"`` is merged in), and ``"id"`` is also the request id.
The response is one JSON object: ``model_name``, ``model_version``, ``id`` (when
given) and one key per output, a single element as a scalar and more as a flat
list, keys sorted (Triton's order).

``/generate`` answers with the model's one response; a model that sends more
than one, or none, is an error. ``/generate_stream`` answers with Server-Sent
Events, ``data: {...}`` per response (the flags-only final response of a
decoupled model sends nothing); an error before the first response is an HTTP
error, JSON for a request refused before it runs, an event stream carrying the
error for the model's own error response; an error during the stream is an event
``data: {"error": "..."}`` that ends it.

Triton 2.51's ``http_server.cc`` generate handlers are the reference for the
messages; where Triton answers a client's broken body with 500 (JSON parse
errors) or an error with 200 (the wrong number of responses), tritium answers
400 (docs/compatibility.md). Runs on the core's event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from ...core.api import Code, InferenceRequest, InferenceResponse, InferInput, TritonError, by_config_name
from .. import sse
from . import codec
from ._rapidjson import encode, to_bytes
from .context import EndpointContext, error_response, url_version
from .messages import HttpRequest, HttpResponse, HttpStreamResponse

log = logging.getLogger("tritium.http")

__all__ = ["generate", "generate_stream", "parse_generate_request", "render_generate_response"]

_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model that "
    "generates various number of responses"
)
_NOT_OBJECT = "attempt to get members for non-object"


class _Object(dict):
    """A JSON object that remembers a repeated key (Python's parser keeps the last one)."""

    repeated: str | None = None


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                obj.repeated = key
                break
            seen.add(key)
    return obj


def _invalid(exc: TritonError) -> TritonError:
    """A body error as 400 (Triton's JSON accessors answer 500 for the client's mistake)."""
    return TritonError(Code.INVALID_ARG, exc.message) if exc.code == Code.INTERNAL else exc


def _load(body: memoryview | bytes) -> _Object:
    text = str(body, "utf-8", "surrogateescape")
    try:
        root = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError:
        try:
            codec.loads(body)  # raises the error with RapidJSON's wording
        except TritonError as exc:
            raise _invalid(exc) from None
        raise
    except RecursionError:
        raise TritonError(
            Code.INVALID_ARG, "failed to parse the request JSON buffer: the document is nested too deeply"
        ) from None
    if not isinstance(root, _Object):
        raise TritonError(Code.INVALID_ARG, _NOT_OBJECT)
    return root


def _shape(name: str, dims: list[int], count: int, batched: bool) -> list[int]:
    """The shape of ``count`` elements under config ``dims`` (Triton's generate schema)."""
    known = 1
    for dim in dims:
        if dim != -1:
            known *= dim
    shape = list(dims)
    if -1 in dims:
        last = len(dims) - 1 - dims[::-1].index(-1)
        if known == 0 or count % known:
            raise TritonError(
                Code.INVALID_ARG, f"The schema can not convert input '{name}' to tensor with proper shape"
            )
        shape = [1 if d == -1 else d for d in dims]
        shape[last] = count // known
    elif known != count:
        raise TritonError(Code.INVALID_ARG, f"The schema can not convert input '{name}' to tensor with proper shape")
    return [1, *shape] if batched else shape


def parse_generate_request(
    body: memoryview | bytes, name: str, version: str, config: dict[str, Any]
) -> InferenceRequest:
    """The inference request of a generate body for the model of ``config`` (its JSON form).

    :raises TritonError: INVALID_ARG for a body that is not a JSON object, a repeated key,
        values that do not fit an input's datatype or dims, or a parameter of a type other
        than string, number or boolean.
    """
    root = _load(body)
    if root.repeated is not None and any(i["name"] == root.repeated for i in config.get("input", [])):
        raise TritonError(
            Code.INVALID_ARG, f"[request id: <id_unknown>] input '{root.repeated}' already exists in request"
        )
    specs = {str(item["name"]): item for item in config.get("input", [])}
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    inputs: list[InferInput] = []
    parameters: dict[str, Any] = {}
    for key, value in root.items():
        spec = specs.get(key)
        if spec is None:
            if key == "parameters" and isinstance(value, dict):
                parameters.update(value)
            else:
                parameters[key] = value
            continue
        values = value if type(value) is list else [value]
        dt = by_config_name(str(spec["data_type"]))
        assert dt is not None  # the config was normalized
        shape = _shape(key, [int(d) for d in spec.get("dims", [])], len(values), batched)
        if any(type(v) in (list, dict, _Object) for v in values):
            raise TritonError(
                Code.INVALID_ARG, "Unable to parse 'data': Shape does not match true shape of 'data' field"
            )
        try:
            data = codec._json_tensor(key, dt.name, values, len(values))
        except TritonError as exc:
            raise _invalid(exc) from None
        inputs.append(InferInput(key, dt.name, shape, data))
    try:
        parameters, _binary = codec._request_parameters({"parameters": parameters})
    except TritonError as exc:
        raise _invalid(exc) from None
    request_id = parameters.get("id")
    return InferenceRequest(name, version, request_id if type(request_id) is str else "", inputs, [], parameters)


def render_generate_response(response: InferenceResponse) -> bytes:
    """The JSON object of one response: model name and version, id, one key per output (sorted).

    :raises TritonError: INVALID_ARG for an FP16/BF16 output (JSON cannot carry them),
        INTERNAL for an output whose bytes do not match its shape.
    """
    items = {"model_name": encode(response.model_name), "model_version": encode(response.model_version)}
    if response.id:
        items["id"] = encode(response.id)
    for out in response.outputs:
        text = codec._json_data(out.name, out.datatype, list(out.shape), out.data)
        count = 1
        for dim in out.shape:
            count *= int(dim)
        items[out.name] = text[1:-1] if count == 1 else text
    return to_bytes("{" + ",".join(f"{encode(k)}:{items[k]}" for k in sorted(items)) + "}")


def _error_body(exc: TritonError) -> bytes:
    return codec.dumps({"error": exc.message})


def _model_error(exc: TritonError) -> TritonError:
    """The model's error response, as the generate endpoints answer it: 400 whatever its code (Triton)."""
    return TritonError(Code.INVALID_ARG, exc.message)


def _empty(response: InferenceResponse) -> bool:
    """A decoupled model's flags-only final response (nothing to send)."""
    return response.final and not response.outputs and response.error is None


async def _responses(ctx: EndpointContext, request: HttpRequest) -> AsyncGenerator[InferenceResponse, None]:
    """Every response to the request, the flags-only final one left out; counted in flight."""
    server = ctx.server
    name = request.params["model"]
    version = url_version(request)
    model = server.model(name, version)
    ireq = parse_generate_request(request.body, name, version, model.config)
    ctx.inflight.enter()
    try:
        async with aclosing(server.infer_stream(ireq)) as stream:
            async for response in stream:
                if _empty(response):
                    response.release()
                    continue
                yield response
    finally:
        ctx.inflight.leave()


async def generate(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``POST /v2/models/{m}[/versions/{v}]/generate``: exactly one response, as one JSON object."""
    answer: InferenceResponse | None = None
    try:
        async with aclosing(_responses(ctx, request)) as responses:
            async for response in responses:
                if answer is not None:
                    response.release()
                    raise TritonError(Code.INVALID_ARG, _ONE_RESPONSE)
                if response.error is not None:
                    response.release()
                    raise _model_error(response.error)
                answer = response
        if answer is None:
            raise TritonError(Code.INVALID_ARG, _ONE_RESPONSE)
        return HttpResponse(200, render_generate_response(answer))
    except TritonError as exc:
        return error_response(exc)
    finally:
        if answer is not None:
            answer.release()


async def _events(
    first: InferenceResponse | None, responses: AsyncGenerator[InferenceResponse, None]
) -> AsyncGenerator[bytes, None]:
    """The stream's events: each response rendered, an error as the last event."""
    async with aclosing(responses):
        pending = first
        while True:
            if pending is None:
                try:
                    pending = await anext(responses, None)
                except TritonError as exc:  # the request failed under way (e.g. its instance died)
                    yield sse.frame(_error_body(exc))
                    return
                if pending is None:
                    return
            response, pending = pending, None
            try:
                if response.error is not None:
                    yield sse.frame(_error_body(response.error))
                    return
                body = render_generate_response(response)
            except TritonError as exc:
                yield sse.frame(_error_body(exc))
                return
            finally:
                response.release()
            yield sse.frame(body)


async def generate_stream(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``POST /v2/models/{m}[/versions/{v}]/generate_stream``: Server-Sent Events, one per response."""
    responses = _responses(ctx, request)
    try:
        first = await anext(responses, None)
    except TritonError as exc:
        await responses.aclose()
        return error_response(exc)
    if first is not None and first.error is not None:  # the model refused it: an error status
        error = _model_error(first.error)
        first.release()
        await responses.aclose()
        return HttpResponse(error_response(error).status, sse.frame(_error_body(error)), sse.CONTENT_TYPE)
    return HttpStreamResponse(200, _events(first, responses), sse.CONTENT_TYPE)
