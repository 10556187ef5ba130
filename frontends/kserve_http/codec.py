"""KServe v2 JSON and Triton's binary tensor extension: request parsing and response rendering.

Everything here is transport-free and synchronous: :func:`parse_infer_request`
turns an HTTP body (a JSON header, optionally followed by binary tensor
data) into an :class:`~tritium.core.inference.request.InferenceRequest`;
:func:`render_infer_response` turns an
:class:`~tritium.core.inference.response.InferenceResponse` into the JSON header and
the list of binary output buffers to send after it.

Triton 2.51's HTTP endpoint (``http_server.cc``) is the reference: the order
of the checks and their messages are its own; where its JSON accessors fail
with INTERNAL (HTTP 500) for a malformed request, tritium answers INVALID_ARG
(400): a client's mistake is never a server error (docs/compatibility.md). Binary data is never
copied here: inputs are ``memoryview`` slices of the body, binary outputs are
the response's own buffers. JSON data is checked and converted with C-level
passes (``map``/``set``/``min``/``max`` and numpy), never an element loop in
Python, except for BYTES, whose elements are separate strings anyway. JSON
text itself (number layout, escapes, parse errors) is :mod:`._rapidjson`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from ...core.api import (
    Code,
    CudaRef,
    InferenceRequest,
    InferenceResponse,
    InferInput,
    RequestedOutput,
    ShmRef,
    TritonError,
    by_config_name,
    by_name,
    clip,
    deserialize_bytes,
    join_bytes_elements,
    serialize_bytes,
)
from ._rapidjson import dumps, encode, fix_floats, loads, strings_json, to_bytes
from .plain import plain_request

__all__ = [
    "LargeJson",
    "OutputPlan",
    "Rendered",
    "dumps",
    "header_length",
    "parse_infer_request",
    "raw_infer_request",
    "render_infer_response",
]

_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_FP32_MAX = float(np.finfo(np.float32).max)
_SMALL = 256  # elements: a JSON tensor this small is range-checked in Python before its FP32 cast

_NOT_STRING = "attempt to access JSON non-string as string"
_NOT_BOOL = "attempt to access JSON non-boolean as boolean"
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_NOT_INT = "attempt to access JSON non-signed-integer as signed-integer"
_NOT_NUMBER = "attempt to access JSON non-number as double"
_NOT_ARRAY = "attempt to access JSON non-array as array"
_MISSING = "attempt to access non-existing object member "
_SHAPE_MISMATCH = "Unable to parse 'data': Shape does not match true shape of 'data' field"

#: resolves ``(region name, offset, byte size or None)`` to a registered window
#: (:meth:`~tritium.core.memory.shm_region.SharedMemoryManager.resolve`)
RegionResolver = Callable[[str, int, "int | None"], "ShmRef | CudaRef"]


def _malformed(message: str) -> TritonError:
    """A request body Triton's JSON accessors refuse (INTERNAL, HTTP 500, in Triton 2.51; 400 here)."""
    return TritonError(Code.INVALID_ARG, message)


def _invalid(message: str) -> TritonError:
    return TritonError(Code.INVALID_ARG, message)


def _size_mismatch(name: str) -> TritonError:
    return TritonError(Code.INTERNAL, f"output tensor shape does not match size of output for '{name}'")


def _is_uint(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _UINT64_MAX


# -- request --------------------------------------------------------------------------------------


@dataclass(slots=True)
class OutputPlan:
    """How each output goes back: in the JSON ``data`` field or as binary data after the header.

    :ivar default_binary: the kind of the outputs the request did not list
        (``binary_data_output``; True for a raw binary request).
    :ivar binary: the kind of each listed output (its ``binary_data`` parameter).
    """

    default_binary: bool = False
    binary: dict[str, bool] = field(default_factory=dict)


_ATOI = re.compile(r"\s*([+-]?\d+)")  # the prefix C atoi reads


def header_length(value: str | None, content_length: int) -> int:
    """The JSON header size: the ``Inference-Header-Content-Length`` header, or the whole body.

    The header is read like C ``atoi`` (a non-number is 0: the whole body is
    then one raw input).

    :raises TritonError: INVALID_ARG for a size below 0 or beyond the body.
    """
    if value is None:
        return content_length
    if value.isascii() and value.isdigit():  # the usual case
        parsed = min(int(value[:12]), 2**31 - 1)  # more digits than that are past the clamp anyway
    else:
        match = _ATOI.match(value)
        digits = match.group(1)[:13] if match else "0"
        parsed = max(min(int(digits), 2**31 - 1), -(2**31))
    if parsed < 0 or parsed > content_length:
        raise _invalid(f"inference header size should be in range (0, {content_length}), got: {clip(value)}")
    return parsed


def _encode_text(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate from a \\uD8xx escape: RapidJSON refuses those
        message = f"Unable to parse '{what}': The surrogate pair in string is invalid."
        raise _malformed(message) from None


def _member_string(obj: Mapping[str, Any], key: str) -> str:
    if key not in obj:
        raise _malformed(f"Unable to parse '{key}': {_MISSING}'{key}'")
    value = obj[key]
    if type(value) is not str:
        raise _malformed(f"Unable to parse '{key}': {_NOT_STRING}")
    return value


def _request_parameters(root: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    if "parameters" not in root:
        return {}, False
    params = root["parameters"]
    if not isinstance(params, dict):
        raise _malformed("failed to get request params.: attempt to get members for non-object")
    out: dict[str, Any] = {}
    binary_output = False
    for key, value in params.items():
        kind = type(value)
        if key == "sequence_id":
            if not (_is_uint(value) or kind is str):
                raise _malformed(f"Unable to parse 'sequence_id': {_NOT_STRING}")
        elif key in ("sequence_start", "sequence_end", "binary_data_output"):
            if kind is not bool:
                raise _malformed(f"Unable to parse '{key}': {_NOT_BOOL}")
            binary_output = value if key == "binary_data_output" else binary_output
        elif key in ("priority", "timeout"):
            if not _is_uint(value):
                raise _malformed(f"Unable to parse '{key}': {_NOT_UINT}")
        elif key.startswith("triton_"):
            raise _invalid(
                "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
            )
        elif kind is int and not _INT64_MIN <= value <= _INT64_MAX:
            value = float(value)  # RapidJSON holds an integer beyond int64 as a double
        elif kind not in (str, int, bool, float):
            raise _invalid(f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'.")
        out[key] = value
    return out, binary_output


def _shape(obj: Mapping[str, Any]) -> list[int]:
    if "shape" not in obj:
        raise _malformed(f"Unable to parse 'shape': {_MISSING}'shape'")
    shape = obj["shape"]
    if type(shape) is not list:
        raise _malformed(f"Unable to parse 'shape': {_NOT_ARRAY}")
    if not all(map(_is_uint, shape)):
        raise _malformed(f"Unable to parse 'shape': {_NOT_UINT}")
    return shape


def _element_count(shape: list[int]) -> int:
    """Elements of a request shape as Triton's HTTP endpoint counts them (an empty shape has 0)."""
    count = 0
    for i, dim in enumerate(shape):
        count = dim if i == 0 else count * dim
    return count


def _flatten(values: list[Any]) -> tuple[list[Any], set[type]]:
    """Flatten nested JSON arrays in document order; also return the element types."""
    while True:
        types = set(map(type, values))
        if list not in types:
            return values, types
        if types == {list}:
            values = list(chain.from_iterable(values))
            continue
        flat: list[Any] = []
        stack = [iter(values)]
        while stack:
            for item in stack[-1]:
                if type(item) is list:
                    stack.append(iter(item))
                    break
                flat.append(item)
            else:
                stack.pop()
        values = flat


_UNSIGNED = {"UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64}
_SIGNED = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64}


#: JSON values are converted to numpy this many at a time: each conversion holds the GIL, so a
#: large tensor parsed on a parse thread lets the event loop run between the pieces
_PIECE = 1 << 18


def _array(values: list[Any], dtype: Any) -> np.ndarray:
    if len(values) <= _PIECE:
        return np.array(values, dtype=dtype)
    return np.concatenate([np.array(values[i : i + _PIECE], dtype=dtype) for i in range(0, len(values), _PIECE)])


def _json_tensor(name: str, datatype: str, data: list[Any], count: int) -> bytes | memoryview:
    """The raw bytes of a tensor given as JSON ``data``, checked as ``ReadDataFromJson`` does."""
    if datatype == "BYTES":
        flat, types = _flatten(data)
        if types - {str}:
            raise _malformed(f"Unable to parse JSON bytes array: {_NOT_STRING}")
        items = np.empty(len(flat), dtype=np.object_)
        items[:] = [_encode_text(s, "data") for s in flat]
        return serialize_bytes(items)
    if datatype in ("FP16", "BF16"):
        raise _invalid(
            f"receiving {datatype} data via JSON is not supported. Please use the binary data format for input {name}"
        )
    if by_name(datatype) is None:
        raise _invalid(f"invalid datatype for input {name}")
    flat, types = _flatten(data)
    head = flat if len(flat) <= count else flat[:count]
    if len(head) < len(flat):
        types = set(map(type, head))
    try:
        if datatype == "BOOL":
            if types - {bool}:
                raise _malformed(f"Unable to parse 'data': {_NOT_BOOL}")
            array = _array(head, np.bool_)
        elif datatype in ("FP32", "FP64"):
            if types - {int, float}:
                raise _malformed(f"Unable to parse 'data': {_NOT_NUMBER}")
            array = _array(head, np.float64)
            if datatype == "FP32":
                # values beyond FP32 become infinities, as Triton's C cast makes them; numpy warns of
                # that, so the warning is silenced, but for a small tensor only when it can happen:
                # np.errstate costs more than the whole cast. min/max skip a NaN unless it comes
                # first, and then the range test fails, so a NaN hides no out-of-range value.
                if len(head) <= _SMALL and -_FP32_MAX <= min(head, default=0.0) and max(head, default=0.0) <= _FP32_MAX:
                    array = array.astype(np.float32)
                else:
                    with np.errstate(over="ignore"):
                        array = array.astype(np.float32)
        elif datatype in _UNSIGNED:
            if types - {int} or (head and (min(head) < 0 or max(head) > _UINT64_MAX)):
                raise _malformed(f"Unable to parse 'data': {_NOT_UINT}")
            # out-of-range values wrap, as Triton's C casts do
            array = _array(head, np.uint64).astype(_UNSIGNED[datatype])
        else:
            if types - {int} or (head and (min(head) < _INT64_MIN or max(head) > _INT64_MAX)):
                raise _malformed(f"Unable to parse 'data': {_NOT_INT}")
            array = _array(head, np.int64).astype(_SIGNED[datatype])
    except OverflowError:  # an integer literal beyond any double
        raise _malformed(f"Unable to parse 'data': {_NOT_NUMBER}") from None
    if len(flat) != count:
        raise _malformed(_SHAPE_MISMATCH)
    return memoryview(array).cast("B")  # type: ignore[arg-type]  # numpy 1.26 stubs: ndarray lacks __buffer__


def _input_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if isinstance(v, (bool, int, float, str))}


def _shared_memory(params: Mapping[str, Any], regions: RegionResolver | None) -> ShmRef | CudaRef | None:
    """Check the shared-memory parameters (``CheckSharedMemoryData``); return the window, if any."""
    region = None
    if "shared_memory_region" in params:
        region = params["shared_memory_region"]
        if type(region) is not str:
            raise _malformed(f"Unable to parse 'shared_memory_region': {_NOT_STRING}")
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        if key in params and not _is_uint(params[key]):
            raise _malformed(f"Unable to parse '{key}': {_NOT_UINT}")
    if region is None:
        return None
    if regions is None:
        raise TritonError(Code.NOT_FOUND, f"Unable to find shared memory region: '{region}'")
    return regions(region, params.get("shared_memory_offset", 0), params.get("shared_memory_byte_size"))


def _inputs(
    root: Mapping[str, Any],
    body: memoryview,
    start: int,
    model_name: str,
    prefix: str,
    regions: RegionResolver | None,
) -> list[InferInput]:
    if "inputs" not in root:
        raise _malformed(f"Unable to parse 'inputs': {_MISSING}'inputs'")
    items = root["inputs"]
    if type(items) is not list:
        raise _malformed(f"Unable to parse 'inputs': {_NOT_ARRAY}")
    offset, end = start, len(body)
    seen: set[str] = set()
    inputs: list[InferInput] = []
    for item in items:
        obj = item if isinstance(item, dict) else {}
        params = obj.get("parameters")
        params = params if isinstance(params, dict) else {}
        has_data, has_binary = "data" in obj, "binary_data_size" in params
        has_shm = "shared_memory_region" in params
        if has_data + has_binary + has_shm != 1:
            message = (
                "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                "'parameters', 'shared_memory_region' in 'parameters'. But"
            )
            if not (has_data or has_binary or has_shm):
                message += " no field is set"
            else:
                fields = (
                    ("data", has_data),
                    ("binary_data_size", has_binary),
                    ("shared_memory_region", has_shm),
                )
                message += " set" + "".join(f" '{field}'" for field, on in fields if on)
            raise _invalid(message)
        name = _member_string(obj, "name")
        datatype = _member_string(obj, "datatype")
        shape = _shape(obj)
        if name in seen:
            raise _invalid(f"{prefix}input '{name}' already exists in request")
        seen.add(name)
        data: bytes | memoryview | None
        ref: ShmRef | CudaRef | None = None
        at = -1
        if has_binary:
            size = params["binary_data_size"]
            if not _is_uint(size):
                raise _malformed(f"Unable to parse 'binary_data_size': {_NOT_UINT}")
            if size > end - offset:
                missing = size - (end - offset)
                raise _invalid(
                    f"unexpected size for input '{name}', expecting {missing} additional bytes for model '{model_name}'"
                )
            data = body[offset : offset + size]
            at = offset
            offset += size
        else:
            ref = _shared_memory(params, regions)
            count = _element_count(shape)
            if ref is not None:
                data = None
            elif count == 0:
                data = b""
            else:
                values = obj["data"]
                if type(values) is not list:
                    raise _malformed(f"Unable to parse 'data': {_NOT_ARRAY}")
                data = _json_tensor(name, datatype, values, count)
        inputs.append(InferInput(name, datatype, shape, data, _input_parameters(params), ref, at))
    if offset != end:
        raise _invalid(f"unexpected additional input data for model '{model_name}'")
    return inputs


def _outputs(root: Mapping[str, Any], plan: OutputPlan, regions: RegionResolver | None) -> list[RequestedOutput]:
    if "outputs" not in root:
        return []
    items = root["outputs"]
    if type(items) is not list:
        raise _malformed(f"Unable to parse 'outputs': {_NOT_ARRAY}")
    outputs: list[RequestedOutput] = []
    for item in items:
        obj = item if isinstance(item, dict) else {}
        params = obj.get("parameters")
        params = params if isinstance(params, dict) else {}
        if "shared_memory_region" in params:
            if "classification" in params:
                raise _invalid("Output can't set both 'shared_memory_region' and 'classification'")
            if "binary_data" in params:
                if type(params["binary_data"]) is not bool:
                    raise _malformed(f"Unable to set 'binary_data': {_NOT_BOOL}")
                if params["binary_data"]:
                    raise _invalid("Output can't set both 'shared_memory_region' and 'binary_data'")
        name = _member_string(obj, "name")
        classes = params.get("classification", 0)
        if not _is_uint(classes):
            raise _malformed(f"Unable to set 'classification': {_NOT_UINT}")
        ref = _shared_memory(params, regions)
        binary = params.get("binary_data", False)
        if type(binary) is not bool:
            raise _malformed(f"Unable to parse 'binary_data': {_NOT_BOOL}")
        if name not in plan.binary:  # a repeated output keeps its first settings, as in Triton
            plan.binary[name] = binary
            outputs.append(RequestedOutput(name, {"classification": classes} if classes else {}, ref))
    return outputs


def parse_infer_request(
    body: memoryview,
    header_length: int,
    model_name: str,
    model_version: str,
    regions: RegionResolver | None = None,
) -> tuple[InferenceRequest, OutputPlan]:
    """Parse an inference request body: the JSON header, then the binary data it sizes.

    :param body: the whole (decompressed) body; binary inputs are slices of it, with
        their :attr:`~tritium.core.inference.request.InferInput.buffer_offset` set.
    :param header_length: bytes of JSON header at its start (> 0).
    :param regions: resolves tensors given in registered shared-memory regions
        (None: no region exists).
    :raises TritonError: INVALID_ARG for malformed JSON (Triton's "Unable to
        parse ..." messages; Triton answers those with INTERNAL), INVALID_ARG for inconsistent sizes, NOT_FOUND for
        an unknown shared-memory region.
    """
    plain = plain_request(body[:header_length], body, header_length, model_name, model_version, _json_tensor)
    if plain is not None:  # the layout most clients send, checked while it was decoded
        request, binary, binary_output = plain
        return request, OutputPlan(binary_output, binary)
    doc = loads(body[:header_length])
    root: Mapping[str, Any] = doc if isinstance(doc, dict) else {}
    request_id = ""
    if "id" in root:
        if type(root["id"]) is not str:
            raise _malformed(f"Unable to parse 'id': {_NOT_STRING}")
        request_id = root["id"]
        _encode_text(request_id, "id")
    parameters, binary_output = _request_parameters(root)
    prefix = f"[request id: {request_id or '<id_unknown>'}] "
    inputs = _inputs(root, body, header_length, model_name, prefix, regions)
    plan = OutputPlan(binary_output)
    outputs = _outputs(root, plan, regions)
    request = InferenceRequest(model_name, model_version, request_id, inputs, outputs, parameters)
    return request, plan


def raw_infer_request(
    body: memoryview, model_name: str, model_version: str, config: Mapping[str, Any]
) -> tuple[InferenceRequest, OutputPlan]:
    """A raw binary request (``Inference-Header-Content-Length: 0``): the body is the one input.

    Its shape is deduced from the config as Triton does (batch 1 for a
    batching model; a single variable dimension takes what the size gives);
    every output goes back as binary data.

    :raises TritonError: INVALID_ARG with Triton's messages when the model has
        more than one input, the shape cannot be deduced, or the size does not fit.
    """
    prefix = "[request id: <id_unknown>] "
    configured = list(config.get("input", []))
    if len(configured) != 1:
        raise _invalid(
            f"{prefix}Raw request must only have 1 input (found 1) to be deduced but got "
            f"{len(configured)} inputs in '{model_name}' model configuration"
        )
    spec = configured[0]
    dtype = by_config_name(str(spec.get("data_type", "")))
    if dtype is None:
        raise _invalid(f"{prefix}invalid datatype for the raw input of model '{model_name}'")
    shape = [1] if int(config.get("max_batch_size", 0)) != 0 else []
    dynamic, count = -1, 1
    for dim in (int(d) for d in spec.get("dims", [])):
        if dim == -1:
            if dynamic != -1:
                raise _invalid(
                    f"{prefix}The shape of the raw input '{spec['name']}' can not be deduced "
                    "because there are more than one variable-sized dimension"
                )
            dynamic = len(shape)
        else:
            count *= dim
        shape.append(dim)
    data: bytes | memoryview = body
    if dtype.is_bytes:
        if dynamic != -1 or count != 1:
            raise _invalid(f"{prefix}For BYTE datatype raw input '{spec['name']}', the model must have input shape [1]")
        data = join_bytes_elements([bytes(body)])  # the body is the one element
    else:
        if dynamic != -1:
            shape[dynamic] = len(body) // (count * dtype.itemsize) if count else 0
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(body) != expected:
            raise _invalid(
                f"{prefix}input byte size mismatch for input 'raw_input' for model '{model_name}'. "
                f"Expected {expected}, got {len(body)}"
            )
    raw = InferInput(spec["name"], dtype.name, shape, data, buffer_offset=-1 if dtype.is_bytes else 0)
    return InferenceRequest(model_name, model_version, "", [raw]), OutputPlan(default_binary=True)


# -- response -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Rendered:
    """A rendered inference response: the JSON header and the binary buffers that follow it."""

    header: bytes
    buffers: list[memoryview | bytes]

    @property
    def size(self) -> int:
        """Total body size in bytes."""
        return len(self.header) + sum(memoryview(b).nbytes for b in self.buffers)


def _json_data(name: str, datatype: str, shape: list[int], data: memoryview | bytes) -> str:
    """The JSON ``data`` array of an output (``WriteDataToJson``)."""
    count = 1
    for dim in shape:
        count *= int(dim)
    if datatype == "BYTES":
        try:
            items = deserialize_bytes(data, count)
        except TritonError:
            raise _size_mismatch(name) from None
        return strings_json([b.decode("utf-8", "surrogateescape") for b in items])
    if datatype in ("FP16", "BF16"):
        raise _invalid(
            f"sending {datatype} data via JSON is not supported. Please use the binary data format for output"
        )
    dtype = by_name(datatype)
    if dtype is None:
        raise _invalid("Invalid data type for output tensor")
    if memoryview(data).nbytes != count * dtype.itemsize:
        raise _size_mismatch(name)
    array = np.frombuffer(data, dtype=dtype.numpy, count=count)
    if datatype == "FP32":
        array = array.astype(np.float64)  # Triton writes floats as the doubles they convert to
    text = encode(array.tolist())
    return fix_floats(text) if datatype in ("FP32", "FP64") else text


_TEXT_JSON: dict[str, str] = {}  # names as JSON strings (model and output names: a small, fixed set)
_MODEL_JSON: dict[tuple[str, str], str] = {}


def _json_text(text: str) -> str:
    cached = _TEXT_JSON.get(text)
    if cached is None:
        if len(_TEXT_JSON) > 4096:
            _TEXT_JSON.clear()
        cached = _TEXT_JSON[text] = encode(text)
    return cached


def _model_json(name: str, version: str) -> str:
    cached = _MODEL_JSON.get((name, version))
    if cached is None:
        if len(_MODEL_JSON) > 4096:
            _MODEL_JSON.clear()
        cached = _MODEL_JSON[(name, version)] = f'"model_name":{encode(name)},"model_version":{encode(version)}'
    return cached


class LargeJson(Exception):
    """Raised by :func:`render_infer_response` for an output over its ``json_limit`` (render it off the loop)."""


def render_infer_response(response: InferenceResponse, plan: OutputPlan, json_limit: int = 0) -> Rendered:
    """Render ``response`` (``FinalizeResponse``); binary outputs are referenced, not copied.

    The caller still owns the response and releases it once the buffers are
    sent. Outputs of zero bytes send no binary data.

    :param json_limit: an output of more bytes than this to be sent as JSON raises
        :class:`LargeJson` instead (0: no limit).
    :raises TritonError: INVALID_ARG for an FP16/BF16 output asked as JSON,
        INTERNAL for an output whose bytes do not match its shape.
    """
    head = [
        f'{{"id":{encode(response.id)},' if response.id else "{",
        _model_json(response.model_name, response.model_version),
    ]
    if response.parameters:
        parameters = dumps(response.parameters).decode("utf-8", "surrogateescape")
        head.append(f',"parameters":{parameters}')
    head.append(',"outputs":[')
    buffers: list[memoryview | bytes] = []
    binary, default_binary = plan.binary, plan.default_binary
    first = True
    for out in response.outputs:
        name, data = out.name, out.data
        start = f'{"" if first else ","}{{"name":{_json_text(name)},"datatype":"{out.datatype}","shape":[{",".join(map(str, map(int, out.shape)))}]'
        first = False
        if out.shared_memory_region is not None:  # written into the client's region: nothing to send
            head.append(start + "}")
        elif binary.get(name, default_binary):
            nbytes = data.nbytes if type(data) is memoryview else len(data)
            head.append(f'{start},"parameters":{{"binary_data_size":{nbytes}}}}}')
            if nbytes:
                buffers.append(data)
        else:
            if json_limit and memoryview(data).nbytes > json_limit:
                raise LargeJson(name)
            head.append(f'{start},"data":{_json_data(name, out.datatype, out.shape, data)}}}')
    head.append("]}")
    return Rendered(to_bytes("".join(head)), buffers)
