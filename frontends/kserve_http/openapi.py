"""An OpenAPI 3.0 document of the HTTP endpoint, served at ``GET /v2/openapi.json``.

Written from the KServe v2 (Open Inference Protocol) REST specification and
Triton's extension documents (binary tensor data, model repository, system and
CUDA shared memory, statistics): the paths tritium serves, their request
bodies and their answers. It documents the API for clients and drives the
schemathesis run of the test suite (tests/integration/test_openapi_fuzz.py).
Built once, at import; runs on the core's event loop.
"""

from __future__ import annotations

import json
from typing import Any

from .messages import HttpRequest, HttpResponse
from .router import Router

__all__ = ["OPENAPI_PATH", "document", "add_openapi_route"]

OPENAPI_PATH = "/v2/openapi.json"

_ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
_PARAMETERS = {
    "type": "object",
    "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]},
}
_TENSOR = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "datatype": {
            "type": "string",
            "enum": [
                "BOOL",
                "UINT8",
                "UINT16",
                "UINT32",
                "UINT64",
                "INT8",
                "INT16",
                "INT32",
                "INT64",
                "FP16",
                "FP32",
                "FP64",
                "BYTES",
                "BF16",
            ],
        },
        "parameters": _PARAMETERS,
        "data": {"type": "array"},
    },
}
_INFER_REQUEST = {
    "type": "object",
    "required": ["inputs"],
    "properties": {
        "id": {"type": "string"},
        "parameters": _PARAMETERS,
        "inputs": {"type": "array", "items": _TENSOR},
        "outputs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "parameters": _PARAMETERS},
            },
        },
    },
}
_INFER_RESPONSE = {
    "type": "object",
    "properties": {
        "model_name": {"type": "string"},
        "model_version": {"type": "string"},
        "id": {"type": "string"},
        "parameters": _PARAMETERS,
        "outputs": {"type": "array", "items": _TENSOR},
    },
}
_REGISTER = {
    "type": "object",
    "properties": {
        "key": {"type": "string"},
        "offset": {"type": "integer", "minimum": 0},
        "byte_size": {"type": "integer", "minimum": 0},
    },
}
_CUDA_REGISTER = {
    "type": "object",
    "properties": {
        "raw_handle": {"type": "object", "properties": {"b64": {"type": "string"}}},
        "device_id": {"type": "integer", "minimum": 0},
        "byte_size": {"type": "integer", "minimum": 0},
    },
}
_NAME = {"name": "model_name", "in": "path", "required": True, "schema": {"type": "string"}}
_VERSION = {
    "name": "model_version",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_REGION = {"name": "region_name", "in": "path", "required": True, "schema": {"type": "string"}}


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _answers(ok: dict[str, Any] | None = None, *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": "OK"}}
    if ok is not None:
        out["200"]["content"] = {"application/json": {"schema": ok}}
    for status in errors or (400,):
        out[str(status)] = {"description": "error", "content": {"application/json": {"schema": _ERROR}}}
    return out


def _operation(
    summary: str,
    parameters: list[dict[str, Any]],
    ok: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
    errors: tuple[int, ...] = (400, 404),
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "parameters": parameters, "responses": _answers(ok, *errors)}
    if body is not None:
        op["requestBody"] = body
    return op


def _model_paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for base, params in (
        ("/v2/models/{model_name}", [_NAME]),
        ("/v2/models/{model_name}/versions/{model_version}", [_NAME, _VERSION]),
    ):
        paths[base] = {"get": _operation("model metadata", params, {"type": "object"})}
        paths[base + "/ready"] = {"get": _operation("model readiness (empty body)", params)}
        paths[base + "/config"] = {"get": _operation("model configuration", params, {"type": "object"})}
        paths[base + "/stats"] = {"get": _operation("model statistics", params, {"type": "object"})}
        paths[base + "/infer"] = {
            "post": _operation(
                "inference (JSON; Triton's binary extension adds Inference-Header-Content-Length)",
                params,
                _INFER_RESPONSE,
                _json_body(_INFER_REQUEST),
                (400, 404, 413, 415, 503),
            )
        }
    return paths


def document() -> dict[str, Any]:
    """The OpenAPI document (a fresh dict)."""
    paths: dict[str, Any] = {
        "/v2": {"get": _operation("server metadata", [], {"type": "object"}, errors=())},
        "/v2/health/live": {"get": _operation("liveness (empty body)", [], errors=())},
        "/v2/health/ready": {"get": _operation("readiness (empty body)", [], errors=())},
        "/v2/models/stats": {"get": _operation("statistics of every model", [], {"type": "object"})},
        **_model_paths(),
        "/v2/repository/index": {
            "post": _operation(
                "model repository index",
                [],
                {"type": "array"},
                _json_body({"type": "object", "properties": {"ready": {"type": "boolean"}}}, required=False),
                (400,),
            )
        },
        "/v2/repository/models/{model_name}/unload": {
            "post": _operation(
                "unload a model",
                [_NAME],
                None,
                _json_body(
                    {
                        "type": "object",
                        "properties": {
                            "parameters": {"type": "object", "properties": {"unload_dependents": {"type": "boolean"}}}
                        },
                    },
                    required=False,
                ),
                (400, 404, 503),
            )
        },
    }
    for kind, register in (("systemsharedmemory", _REGISTER), ("cudasharedmemory", _CUDA_REGISTER)):
        base = f"/v2/{kind}"
        paths[base + "/status"] = {"get": _operation(f"{kind} regions", [], {"type": "array"})}
        paths[base + "/region/{region_name}/status"] = {"get": _operation("one region", [_REGION], {"type": "array"})}
        paths[base + "/region/{region_name}/register"] = {
            "post": _operation(
                "register a region",
                [_REGION],
                None,
                _json_body(register),
                (400, 404, 409),
            )
        }
        paths[base + "/unregister"] = {"post": _operation("unregister every region", [])}
        paths[base + "/region/{region_name}/unregister"] = {"post": _operation("unregister a region", [_REGION])}
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "tritium HTTP/REST endpoint",
            "version": "2",
            "description": "KServe v2 (Open Inference Protocol) with Triton's extensions, as tritium serves them. "
            "The model repository's load (it may run uploaded code) is left out of this document.",
        },
        "paths": paths,
    }


_BODY = json.dumps(document(), separators=(",", ":")).encode()


def openapi(ctx: Any, request: HttpRequest) -> HttpResponse:
    """``GET /v2/openapi.json``: this document."""
    return HttpResponse(200, _BODY)


def add_openapi_route(router: Router) -> None:
    """Register ``GET /v2/openapi.json``."""
    router.add(OPENAPI_PATH, "GET", openapi)
