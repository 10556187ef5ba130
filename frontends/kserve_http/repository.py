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

import base64
import binascii
import json
from typing import Any

from aiohttp import hdrs, web

from ...core.errors import Code, TritonError
from . import codec
from .app import SERVER
from .body import error_status, read_body

__all__ = ["add_repository_routes", "REPOSITORY_PREFIX"]

REPOSITORY_PREFIX = "/v2/repository"
_FILE = "file:"


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=codec.dumps(body), status=status, content_type="application/json")


def _error(exc: TritonError) -> web.Response:
    return _json({"error": exc.message}, error_status(exc))


async def _body(request: web.Request) -> dict[str, Any]:
    """The JSON body ({} when empty or not an object), read within the size limit.

    :raises BodyTooLarge: for a body over the limit (413, refused before reading
        it when its length is declared).
    :raises TritonError: INTERNAL for a body that is not JSON (Triton's status).
    """
    raw = await read_body(request)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise TritonError(Code.INTERNAL, f"failed to parse the request JSON buffer: {exc}") from None
    return data if isinstance(data, dict) else {}  # Triton: JSON that is not an object has no members


def _parameters(body: dict[str, Any]) -> dict[str, Any]:
    params = body.get("parameters", {})
    return params if isinstance(params, dict) else {}


async def repository_index(request: web.Request) -> web.Response:
    """``POST /v2/repository/index``: ``[{"name", "version", "state", "reason"}, ...]``."""
    try:
        body = await _body(request)
        ready = body.get("ready", False)
        if not isinstance(ready, bool):
            raise TritonError(Code.INTERNAL, "attempt to access JSON non-boolean as boolean")
        return _json(request.app[SERVER].repository_index(ready))
    except TritonError as exc:
        return _error(exc)


async def model_load(request: web.Request) -> web.Response:
    """``POST /v2/repository/models/{m}/load``: load or reload; 200 with an empty body when READY."""
    try:
        params = _parameters(await _body(request))
        config: str | None = None
        files: dict[str, bytes] = {}
        for key, value in params.items():
            if key == "config":
                if not isinstance(value, str):
                    raise TritonError(Code.INTERNAL, "attempt to access JSON non-string as string")
                config = value
            elif key.startswith(_FILE):
                if not isinstance(value, str):
                    raise TritonError(Code.INTERNAL, "attempt to access JSON non-string as string")
                try:
                    files[key[len(_FILE):]] = base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    raise TritonError(Code.INVALID_ARG, f"failed to decode the base64 contents of '{key}'") from None
            else:
                raise TritonError(Code.INTERNAL, "unexpected error on creating Triton parameter")
        await request.app[SERVER].load_model(request.match_info["model"], config, files or None)
    except TritonError as exc:
        return _error(exc)
    return web.Response(status=200, content_type="application/json")


async def model_unload(request: web.Request) -> web.Response:
    """``POST /v2/repository/models/{m}/unload``: 200 with an empty body."""
    try:
        params = _parameters(await _body(request))
        dependents = params.get("unload_dependents", False) is True  # Triton ignores other values
        await request.app[SERVER].unload_model(request.match_info["model"], dependents)
    except TritonError as exc:
        return _error(exc)
    return web.Response(status=200, content_type="application/json")


def add_repository_routes(app: web.Application, method_not_allowed: Any) -> None:
    """Register the repository extension's URLs on ``app`` (before the catch-all routes)."""
    for path, handler in (
        (REPOSITORY_PREFIX + "/index", repository_index),
        (REPOSITORY_PREFIX + "/models/{model:[^/]+}/load", model_load),
        (REPOSITORY_PREFIX + "/models/{model:[^/]+}/unload", model_unload),
    ):
        resource = app.router.add_resource(path)
        resource.add_route(hdrs.METH_POST, handler)
        resource.add_route(hdrs.METH_ANY, method_not_allowed)
