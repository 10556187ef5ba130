"""The inference request most clients send, decoded in one C pass (msgspec), for the request path.

``tritonclient`` and ``perf_analyzer`` send binary inputs sized by
``binary_data_size``; curl and most other clients send numeric tensors as
flat JSON ``data`` arrays. Both name the outputs they want, with string or
boolean request parameters at most. :func:`plain_request` decodes exactly
that layout straight from the JSON header into typed structs (with msgspec,
which checks the types and ranges as it parses) and builds the core's request
from them; JSON ``data`` goes through the same conversion as in the full
checks. Anything else (nested or non-numeric JSON data, shared memory,
classification, integer parameters, an unknown member, malformed JSON, a
value the conversion refuses) makes it return None, and
:func:`.codec.parse_infer_request`'s full checks decide, with Triton's
messages. So the fast path accepts only requests the full checks accept the
same way. Runs on the core's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from ...core.api import InferenceRequest, InferInput, RequestedOutput, TritonError

__all__ = ["plain_request"]

# a non-negative int64 (larger unsigned values are legal too: the full checks take those)
_Dim = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]


class _BinarySize(msgspec.Struct, forbid_unknown_fields=True):
    binary_data_size: _Dim


class _Input(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    datatype: str
    shape: list[_Dim]
    parameters: _BinarySize | None = None  # binary data after the header ...
    data: list[int | float] | None = None  # ... or a flat array of JSON numbers


class _OutputParameters(msgspec.Struct, forbid_unknown_fields=True):
    binary_data: bool = False


class _Output(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    parameters: _OutputParameters | None = None


class _Request(msgspec.Struct, forbid_unknown_fields=True):
    inputs: list[_Input]
    outputs: list[_Output] | None = None
    id: str = ""
    parameters: dict[str, str | bool] | None = None


_DECODE = msgspec.json.Decoder(_Request).decode
#: request parameters whose types and ranges only the full checks apply
_CHECKED = frozenset({"sequence_id", "sequence_start", "sequence_end", "priority", "timeout"})


#: converts an input's JSON ``data`` (name, datatype, values, element count) to the tensor's
#: raw bytes, raising TritonError for values the datatype does not take
JsonTensor = Callable[[str, str, list[Any], int], bytes | memoryview]


def plain_request(
    header: memoryview, body: memoryview, start: int, model_name: str, model_version: str, json_tensor: JsonTensor
) -> tuple[InferenceRequest, dict[str, bool], bool] | None:
    """The request of a body in the common layout; None when the full checks must decide.

    :param header: the JSON header (the first ``start`` bytes of ``body``).
    :param body: the whole body; binary inputs are slices of it after the header.
    :param json_tensor: the full checks' conversion of JSON ``data`` (a TritonError from it
        returns None, so that the full checks report it in their order).
    :returns: the request, each listed output's ``binary_data`` flag, and the
        request's ``binary_data_output`` (for the outputs it did not list).
    """
    try:
        doc = _DECODE(header)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    request_id = doc.id
    if request_id and not request_id.isascii():
        return None  # the full checks look at the text
    parameters: dict[str, Any] = {}
    binary_output = False
    if doc.parameters:
        parameters = doc.parameters
        for key, value in parameters.items():
            if key == "binary_data_output":
                if value is not True and value is not False:
                    return None
                binary_output = value
            elif key in _CHECKED or key.startswith("triton_"):
                return None
    offset, end = start, len(body)
    inputs: list[InferInput] = []
    for item in doc.inputs:
        values = item.data
        if item.parameters is None:
            count = 1
            for dim in item.shape:
                count *= dim
            if values is None or count == 0:
                return None
            try:
                tensor = json_tensor(item.name, item.datatype, values, count)
            except TritonError:
                return None
            inputs.append(InferInput(item.name, item.datatype, item.shape, tensor, {}, None, -1))
            continue
        size = item.parameters.binary_data_size
        if values is not None or size > end - offset:
            return None
        inputs.append(
            InferInput(
                item.name,
                item.datatype,
                item.shape,
                body[offset : offset + size],
                {"binary_data_size": size},
                None,
                offset,
            )
        )
        offset += size
    if offset != end or len({i.name for i in inputs}) != len(inputs):
        return None
    binary: dict[str, bool] = {}
    outputs: list[RequestedOutput] = []
    if doc.outputs is not None:
        for out in doc.outputs:
            name = out.name
            if name in binary:
                return None  # a repeated output: the full checks keep its first settings
            binary[name] = out.parameters.binary_data if out.parameters is not None else False
            outputs.append(RequestedOutput(name))
    request = InferenceRequest(model_name, model_version, request_id, inputs, outputs, parameters)
    return request, binary, binary_output
