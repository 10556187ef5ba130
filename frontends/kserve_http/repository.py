"""HTTP routes of Triton's model repository extension (kept apart from the inference routes).

``POST /v2/repository/index`` (body optional: ``{"ready": true}``),
``POST /v2/repository/models/<m>/load`` (body optional: ``{"parameters":
{"config": "<JSON>", "file:<path>": "<base64>"}}``) and
``POST /v2/repository/models/<m>/unload`` (``{"parameters":
{"unload_dependents": true}}``). Answers are Triton's: 200 with an empty
body for load/unload, the index as a JSON array, errors as
``{"error": "..."}`` with Triton's status (a body that is not JSON, or a
parameter of the wrong type, is 500 as in Triton). Bodies are read within the
endpoint's size limit (413 beyond it, see :mod:`.body`). Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any

import numpy as np

from ...core.api import Code, TritonError
from . import codec
from .context import EndpointContext, error_response
from .messages import HttpRequest, HttpResponse
from .router import CONTROL_BODY_BYTES, Router

__all__ = ["add_repository_routes", "REPOSITORY_PREFIX"]

REPOSITORY_PREFIX = "/v2/repository"
_FILE = "file:"


def _json(body: Any) -> HttpResponse:
    return HttpResponse(200, codec.dumps(body))


def _body(raw: Any) -> dict[str, Any]:
    """The JSON body ``raw`` ({} when empty or not an object; the connection enforced the size limit).

    :raises TritonError: INVALID_ARG for a body that is not JSON (Triton: INTERNAL).
    """
    if not raw:
        return {}
    data = codec.loads(raw)  # RapidJSON's messages; nesting and huge numbers are 400 too
    return data if isinstance(data, dict) else {}  # Triton: JSON that is not an object has no members


def _parameters(body: dict[str, Any]) -> dict[str, Any]:
    params = body.get("parameters", {})
    return params if isinstance(params, dict) else {}


def repository_index(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``POST /v2/repository/index``: ``[{"name", "version", "state", "reason"}, ...]``."""
    try:
        body = _body(request.body)
        ready = body.get("ready", False)
        if not isinstance(ready, bool):
            raise TritonError(Code.INVALID_ARG, "attempt to access JSON non-boolean as boolean")
        return _json(ctx.server.repository_index(ready))
    except TritonError as exc:
        return error_response(exc)


#: a load body larger than this (base64 model files) is parsed and decoded on a thread, off the event loop
OFFLOAD_LOAD_BYTES = 1 << 20
#: the most JSON members and elements a load body may hold (counted as its ``,`` and ``:`` bytes, which
#: base64 never contains): the parse holds the interpreter for as long as it builds objects, so millions
#: of tiny values would stall every thread; large file contents cost little per byte
MAX_LOAD_JSON_VALUES = 100_000


def _check_value_count(body: Any) -> None:
    """:raises TritonError: INVALID_ARG when ``body`` holds more than :data:`MAX_LOAD_JSON_VALUES` values."""
    raw = np.frombuffer(body, np.uint8)
    count = int(np.count_nonzero(raw == ord(","))) + int(np.count_nonzero(raw == ord(":")))
    if count > MAX_LOAD_JSON_VALUES:
        raise TritonError(
            Code.INVALID_ARG,
            f"the load request's JSON has about {count} values, more than the {MAX_LOAD_JSON_VALUES} accepted",
        )


#: base64 file contents are decoded this many characters at a time (a multiple of 4): each piece holds
#: the interpreter while it is decoded, so a large file decoded on a thread lets the event loop run
#: between the pieces (one call for 60 MiB held it about 0.25 s)
_B64_PIECE = 4 << 20


def _b64decode(text: str) -> bytes:
    """``base64.b64decode(text, validate=True)``, in pieces of :data:`_B64_PIECE` characters.

    :raises binascii.Error: as the one call would (padding is accepted at the very end only).
    """
    if len(text) <= _B64_PIECE:
        return base64.b64decode(text, validate=True)
    if text.find("=", 0, len(text) - 2) >= 0:
        raise binascii.Error("Excess data after padding")
    return b"".join(base64.b64decode(text[i : i + _B64_PIECE], validate=True) for i in range(0, len(text), _B64_PIECE))


def _load_parameters(body: Any) -> tuple[str | None, dict[str, bytes]]:
    """The ``config`` override and the decoded ``file:`` uploads of a load body.

    :raises TritonError: INVALID_ARG for a body that is not JSON, a value that is not a string,
        bad base64 or an unknown parameter (Triton's messages).
    """
    params = _parameters(_body(body))
    config: str | None = None
    files: dict[str, bytes] = {}
    for key, value in params.items():
        if key == "config":
            if not isinstance(value, str):
                raise TritonError(Code.INVALID_ARG, "attempt to access JSON non-string as string")
            config = value
        elif key.startswith(_FILE):
            if not isinstance(value, str):
                raise TritonError(Code.INVALID_ARG, "attempt to access JSON non-string as string")
            try:
                files[key[len(_FILE) :]] = _b64decode(value)
            except (binascii.Error, ValueError):
                raise TritonError(Code.INVALID_ARG, f"failed to decode the base64 contents of '{key}'") from None
        else:
            raise TritonError(Code.INVALID_ARG, "unexpected error on creating Triton parameter")
    return config, files


async def model_load(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``POST /v2/repository/models/{m}/load``: load or reload; 200 with an empty body when READY.

    The body may carry model files (up to ``--max-request-bytes``): one over
    :data:`OFFLOAD_LOAD_BYTES` is parsed on a thread, so the event loop keeps serving.
    """
    try:
        if len(request.body) > OFFLOAD_LOAD_BYTES:
            _check_value_count(request.body)  # one numpy pass: milliseconds
            config, files = await asyncio.to_thread(_load_parameters, request.body)
        else:
            config, files = _load_parameters(request.body)
        await ctx.server.load_model(request.params["model"], config, files or None)
    except TritonError as exc:
        return error_response(exc)
    return HttpResponse(200, b"")


async def model_unload(ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
    """``POST /v2/repository/models/{m}/unload``: 200 with an empty body."""
    try:
        params = _parameters(_body(request.body))
        dependents = params.get("unload_dependents", False) is True  # Triton ignores other values
        await ctx.server.unload_model(request.params["model"], dependents)
    except TritonError as exc:
        return error_response(exc)
    return HttpResponse(200, b"")


def add_repository_routes(router: Router) -> None:
    """Register the repository extension's URLs (POST only; other methods are 405)."""
    router.add(REPOSITORY_PREFIX + "/index", "POST", repository_index, max_body=CONTROL_BODY_BYTES)
    router.add(REPOSITORY_PREFIX + "/models/{model}/load", "POST", model_load)
    router.add(REPOSITORY_PREFIX + "/models/{model}/unload", "POST", model_unload, max_body=CONTROL_BODY_BYTES)
