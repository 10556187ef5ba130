"""Protobuf messages of ``inference.GRPCInferenceService`` <-> the core's requests and responses.

Runs in the core process, on the event loop, once per call. The request
path follows Triton 2.51's gRPC frontend (``infer_handler.cc``), including
the order in which it reports errors: model version string, request
parameters, input data (shared memory, ``contents`` vs
``raw_input_contents``, typed ``contents`` of the right kind), requested
output parameters (``classification``); everything else (shapes,
datatypes, byte sizes, BYTES length prefixes, batch size) the core checks
when the request runs. Each error is a :class:`~tritium.core.errors.TritonError`
carrying Triton's message.

The raw path is lean: ``raw_input_contents[i]`` goes to the core as the
bytes object protobuf hands out (no further copy), outputs go out as
``raw_output_contents`` (one copy out of shared memory), and no per-element
Python loop runs. Typed ``contents`` are converted with numpy (BYTES: joined in C,
:mod:`tritium.core._bytes_elements`) and bounded by ``--max-json-request-bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from ...core.api import (
    Code,
    CudaRef,
    InferenceRequest,
    InferenceResponse,
    InferInput,
    RequestedOutput,
    ShmRef,
    TritonError,
    by_name,
    join_bytes_elements,
)
from ...proto import grpc_service_pb2 as pb
from .wire import LARGE, NATIVE_SPLIT, raw_output_parts, split_raw_inputs

__all__ = [
    "parse_version",
    "to_infer_request",
    "to_infer_response",
    "infer_response_parts",
    "parse_infer_request",
    "TypedContentsTooLarge",
    "to_stream_response",
    "stream_error",
    "parameters_to_proto",
    "model_metadata_to_proto",
]

ModelInferResponse = pb.ModelInferResponse
InferOutputTensor = pb.ModelInferResponse.InferOutputTensor
ModelStreamInferResponse = pb.ModelStreamInferResponse

_INT64_MAX = (1 << 63) - 1


# -- model version ------------------------------------------------------------------------
def _stol(text: str) -> int:
    """``std::stol(text)``: leading white space, an optional sign, then digits; the rest is ignored."""
    i, n = 0, len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    start = i
    if i < n and text[i] in "+-":
        i += 1
    digits = i
    while i < n and "0" <= text[i] <= "9":
        i += 1
    if i == digits:
        raise ValueError("stol")
    value = int(text[start:i])
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise ValueError("stol")
    return value


def parse_version(version: str) -> str:
    """Check a request's model version string as Triton does and return it normalized.

    "" stays "" (the version policy chooses); otherwise the number as Triton
    reads it (``std::stol``), so "01" names version 1.

    :raises TritonError: INVALID_ARG with Triton's messages for text that is
        not a number or a negative number.
    """
    if not version:
        return version
    if len(version) < 19 and version.isascii() and version.isdigit() and version[0] != "0":
        return version  # the common case: a plain positive number
    try:
        number = _stol(version)
    except ValueError:
        raise TritonError(
            Code.INVALID_ARG,
            f"failed to get model version from specified version string '{version}' (details: stol), "
            "version should be an integral value > 0",
        ) from None
    if number < 0:
        raise TritonError(
            Code.INVALID_ARG,
            f"invalid model version specified '{version}' , version should be an integral value > 0",
        )
    return str(number)


# -- parameters ----------------------------------------------------------------------------
def _value(param: pb.InferParameter) -> Any:
    which = param.WhichOneof("parameter_choice")
    return None if which is None else getattr(param, which)


def _request_parameters(params: Mapping[str, pb.InferParameter]) -> dict[str, Any]:
    """Request parameters as Python values, with Triton's type checks of the keys it knows."""
    out: dict[str, Any] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        if key == "sequence_id":
            if which not in ("int64_param", "string_param"):
                raise TritonError(
                    Code.INVALID_ARG,
                    "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
                )
        elif key in ("sequence_start", "sequence_end"):
            if which != "bool_param":
                raise TritonError(Code.INVALID_ARG, f"invalid value type for '{key}' parameter, expected bool_param.")
        elif key == "priority":
            if which == "int64_param":
                if param.int64_param < 0:
                    raise TritonError(Code.INVALID_ARG, "invalid value for 'priority', expected value >= 0.")
            elif which != "uint64_param":
                raise TritonError(
                    Code.INVALID_ARG,
                    "invalid value type for 'priority' parameter, expected int64_param or uint64_param.",
                )
        elif key == "timeout":
            if which != "int64_param":
                raise TritonError(Code.INVALID_ARG, "invalid value type for 'timeout' parameter, expected int64_param.")
        elif key.startswith("triton_"):
            if key != "triton_enable_empty_final_response":
                raise TritonError(
                    Code.INVALID_ARG,
                    "parameter keys starting with 'triton_' are reserved for Triton usage. Only the "
                    "following keys starting with 'triton_' are allowed: triton_enable_empty_final_response",
                )
            if which != "bool_param":
                raise TritonError(
                    Code.INVALID_ARG,
                    f"invalid value type for '{key}' parameter, expected bool_param.",
                )
        elif which not in ("int64_param", "bool_param", "string_param", "double_param"):
            raise TritonError(
                Code.INVALID_ARG,
                f"invalid value type for '{key}' parameter, expected int64_param, bool_param, or string_param.",
            )
        out[key] = getattr(param, which)
    return out


#: resolves ``(region name, offset, byte size)`` to a registered window
#: (:meth:`~tritium.core.memory.shm_region.SharedMemoryManager.resolve`)
RegionResolver = Callable[[str, int, "int | None"], "ShmRef | CudaRef"]


def _tensor_parameters(
    params: Mapping[str, pb.InferParameter], name: str, regions: RegionResolver | None
) -> tuple[dict[str, Any], ShmRef | CudaRef | None]:
    """Input or output parameters as Python values, and the shared-memory window they name (if any).

    :raises TritonError: Triton's errors for badly typed shared-memory
        parameters, and those of :meth:`SharedMemoryManager.resolve`.
    """
    out = {key: _value(param) for key, param in params.items()}
    numbers: dict[str, int] = {}
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        if key in out:
            if params[key].WhichOneof("parameter_choice") != "int64_param":
                raise TritonError(
                    Code.INVALID_ARG,
                    f"invalid value type for '{key}' parameter for tensor '{name}', expected int64_param.",
                )
            numbers[key] = out[key]
    if "shared_memory_region" not in out:
        for key in numbers:
            raise TritonError(
                Code.INVALID_ARG,
                f"'{key}' can not be specified without 'shared_memory_region' parameter for tensor '{name}'",
            )
        return {k: v for k, v in out.items() if v is not None}, None
    region = out["shared_memory_region"]
    if params["shared_memory_region"].WhichOneof("parameter_choice") != "string_param":
        raise TritonError(
            Code.INVALID_ARG,
            f"invalid value type for 'shared_memory_region' parameter for tensor '{name}', expected string_param.",
        )
    if regions is None:
        raise TritonError(Code.NOT_FOUND, f"Unable to find shared memory region: '{region}'")
    ref = regions(region, numbers.get("shared_memory_offset", 0), numbers.get("shared_memory_byte_size"))
    return {k: v for k, v in out.items() if v is not None}, ref


def parameters_to_proto(params: Mapping[str, Any], target: Any) -> None:
    """Write Python parameter values into a protobuf ``map<string, InferParameter>``.

    bool -> bool_param, int -> int64_param, float -> double_param, anything
    else -> string_param (as Triton propagates response parameters).
    """
    for key, value in params.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            param.int64_param = value
        elif isinstance(value, float):
            param.double_param = value
        else:
            param.string_param = str(value)


# -- typed contents --------------------------------------------------------------------------
# (contents field, datatype it carries, numpy dtype of the field, datatypes narrower than the field)
_TYPED: tuple[tuple[str, str, Any, Mapping[str, Any]], ...] = (
    ("bool_contents", "BOOL", np.bool_, {}),
    ("int_contents", "INT32", np.int32, {"INT8": np.int8, "INT16": np.int16}),
    ("int64_contents", "INT64", np.int64, {}),
    ("uint_contents", "UINT32", np.uint32, {"UINT8": np.uint8, "UINT16": np.uint16}),
    ("uint64_contents", "UINT64", np.uint64, {}),
    ("fp32_contents", "FP32", np.float32, {}),
    ("fp64_contents", "FP64", np.float64, {}),
    ("bytes_contents", "BYTES", None, {}),
)


def _typed_contents(io: Any, model_name: str) -> bytes:
    """The raw bytes of an input given as typed ``contents`` (Triton's ``InferGRPCToInput``)."""
    contents = io.contents
    datatype = io.datatype if by_name(io.datatype) is not None else "<invalid>"  # Triton's name for it
    data = b""
    for field, carried, np_type, narrow in _TYPED:
        values = getattr(contents, field)
        if not len(values):
            continue
        if data:
            raise TritonError(
                Code.INVALID_ARG,
                f"unexpected explicit tensor data for input tensor '{io.name}' for model '{model_name}', "
                "binary data was already supplied.",
            )
        tensor_type = carried
        if datatype in narrow:  # INT8/INT16/UINT8/UINT16 travel as 32-bit elements
            tensor_type = datatype
        if tensor_type != datatype:
            raise TritonError(
                Code.INVALID_ARG,
                f"unexpected explicit tensor data for input tensor '{io.name}' for model '{model_name}' "
                f"of type '{tensor_type}', expected datatype '{datatype}'",
            )
        if np_type is None:
            data = join_bytes_elements(values)  # in C: a few ns an element
        elif datatype in narrow:  # keep the low bytes of each element, as Triton does
            data = np.array(values, dtype=np_type).astype(narrow[datatype]).tobytes()
        else:
            data = np.array(values, dtype=np_type).tobytes()
    return data


# -- requests -----------------------------------------------------------------------------
def to_infer_request(
    request: pb.ModelInferRequest,
    model_lookup: Callable[[str, str], Any],
    raws: Sequence[bytes | memoryview] | None = None,
    regions: RegionResolver | None = None,
) -> InferenceRequest:
    """Build the core request for a ``ModelInferRequest``.

    :param model_lookup: ``server.model``; called only on the error path, so
        that a request naming an unknown model gets that answer first, as in
        Triton, whatever else is wrong with it.
    :param raws: the raw input contents when they were split off the message
        (see :mod:`.wire`); by default ``request.raw_input_contents``.
    :param regions: resolves tensors in registered shared-memory regions.
    :raises TritonError: INVALID_ARG / NOT_FOUND with Triton's messages.
    """
    version = request.model_version
    if version:
        version = parse_version(version)
    try:
        return _convert(request, version, request.raw_input_contents if raws is None else raws, regions)
    except TritonError:
        model_lookup(request.model_name, version)  # raises first for an unknown model
        raise


def _convert(
    request: pb.ModelInferRequest,
    version: str,
    raws: Sequence[bytes | memoryview],
    regions: RegionResolver | None,
) -> InferenceRequest:
    model_name = request.model_name
    parameters = _request_parameters(request.parameters) if request.parameters else {}
    n_raw = len(raws)
    index = 0
    inputs: list[InferInput] = []
    for io in request.inputs:
        params, ref = _tensor_parameters(io.parameters, io.name, regions) if io.parameters else ({}, None)
        data: bytes | memoryview | None
        if ref is not None:
            data = None
        elif io.HasField("contents"):
            if n_raw:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"contents field must not be specified when using raw_input_contents for '{io.name}' "
                    f"for model '{model_name}'",
                )
            data = _typed_contents(io, model_name)
        elif index < n_raw:
            data = raws[index]
            index += 1
        else:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to find data for input tensor '{io.name}' for model '{model_name}' in request.",
            )
        inputs.append(InferInput(io.name, io.datatype, list(io.shape), data, params, ref))
    outputs: list[RequestedOutput] = []
    for out in request.outputs:
        params, ref = _tensor_parameters(out.parameters, out.name, regions) if out.parameters else ({}, None)
        if "classification" in params:
            cls = out.parameters["classification"]
            if cls.WhichOneof("parameter_choice") != "int64_param":
                raise TritonError(
                    Code.INVALID_ARG, "invalid value type for 'classification' parameter, expected int64_param"
                )
            if cls.int64_param <= 0:
                raise TritonError(Code.INVALID_ARG, "invalid value for 'classification' parameter, expected >= 0")
            params["classification"] = cls.int64_param & 0xFFFFFFFF  # Triton keeps a uint32
        outputs.append(RequestedOutput(out.name, params, ref))
    return InferenceRequest(model_name, version, request.id, inputs, outputs, parameters)


# -- responses ------------------------------------------------------------------------------
def to_infer_response(response: InferenceResponse, with_raw: bool = True) -> pb.ModelInferResponse:
    """The ``ModelInferResponse`` of a core response (outputs copied into ``raw_output_contents``).

    :param with_raw: False leaves ``raw_output_contents`` out (see :func:`infer_response_parts`).

    The caller releases ``response`` afterwards.
    """
    outputs = response.outputs
    message = ModelInferResponse(
        model_name=response.model_name,
        model_version=response.model_version,
        id=response.id,
        outputs=[InferOutputTensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in outputs],
        raw_output_contents=[bytes(t.data) for t in outputs] if with_raw else (),
    )
    if response.parameters:
        parameters_to_proto(response.parameters, message.parameters)
    return message


def infer_response_parts(response: InferenceResponse) -> list[bytes | memoryview]:
    """The serialized ``ModelInferResponse`` as parts to join; large outputs go in without protobuf copies.

    The parts may be views of the response's output memory: use them before
    releasing ``response`` (see :mod:`.wire`).
    """
    if sum(len(t.data) for t in response.outputs) < LARGE:
        return [to_infer_response(response).SerializeToString()]
    head = to_infer_response(response, with_raw=False).SerializeToString()
    return raw_output_parts(head, [t.data for t in response.outputs])


class TypedContentsTooLarge(TritonError):
    """The fields of a ``ModelInferRequest`` other than ``raw_input_contents`` are past their limit.

    gRPC's status for it is RESOURCE_EXHAUSTED (what gRPC itself answers for a
    message past ``grpc.max_receive_message_length``).
    """

    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            Code.INVALID_ARG,
            f"the ModelInferRequest without its raw_input_contents ({size} bytes) exceeds the maximum of "
            f"{limit} bytes (--max-json-request-bytes); send large tensors as raw_input_contents",
        )


def parse_infer_request(
    data: bytes | memoryview, max_typed_bytes: int = 0
) -> tuple[pb.ModelInferRequest, Sequence[bytes | memoryview]]:
    """Parse a serialized ``ModelInferRequest``; large raw inputs stay views of ``data`` (see :mod:`.wire`).

    :param max_typed_bytes: the most bytes the message may have besides its
        ``raw_input_contents`` (``--max-json-request-bytes``; 0: no limit).
        Typed ``contents`` are parsed and converted an element at a time, in
        C code that holds the interpreter (about 60 ms per MiB at worst), so
        they are bounded like JSON, before protobuf parses them. Checked where
        the native split (:data:`.wire.NATIVE_SPLIT`) locates the raw inputs.
    :raises TritonError: INVALID_ARG for bytes that are not a ``ModelInferRequest``;
        :class:`TypedContentsTooLarge` past ``max_typed_bytes``.
    """
    try:
        if len(data) < LARGE or not NATIVE_SPLIT:
            request = pb.ModelInferRequest.FromString(data)
            return request, request.raw_input_contents
        rest, raws = split_raw_inputs(data)
        if max_typed_bytes and len(rest) > max_typed_bytes:
            raise TypedContentsTooLarge(len(rest), max_typed_bytes)
        return pb.ModelInferRequest.FromString(rest), raws
    except DecodeError as exc:
        raise TritonError(Code.INVALID_ARG, f"malformed ModelInferRequest: {exc}") from None


def to_stream_response(response: InferenceResponse, request: InferenceRequest) -> pb.ModelStreamInferResponse:
    """One ``ModelStreamInferResponse`` of a stream: the response, or its error, flagged final or not."""
    if response.error is not None:
        message = ModelStreamInferResponse(error_message=response.error.message)
        infer = message.infer_response
        infer.id = request.id
        infer.model_name = request.model_name
        infer.model_version = request.model_version
    else:
        message = ModelStreamInferResponse(infer_response=to_infer_response(response))
        infer = message.infer_response
        if response.final and not response.outputs:
            infer.model_version = ""  # Triton's flags-only final response names no version
    infer.parameters["triton_final_response"].bool_param = response.final
    return message


def stream_skips(response: InferenceResponse, request: InferenceRequest, decoupled: bool) -> bool:
    """True for a decoupled model's flags-only final response (no outputs, parameters or error), which a
    stream carries only when the request sets ``triton_enable_empty_final_response``, as in Triton."""
    return (
        decoupled
        and response.final
        and response.error is None
        and not response.outputs
        and not response.parameters
        and not request.parameters.get("triton_enable_empty_final_response", False)
    )


def stream_error(message: str, request_id: str) -> pb.ModelStreamInferResponse:
    """The stream message for a request that could not start (its error and id)."""
    out = ModelStreamInferResponse(error_message=message)
    out.infer_response.id = request_id
    return out


# -- metadata -----------------------------------------------------------------------------------
def model_metadata_to_proto(meta: Mapping[str, Any]) -> pb.ModelMetadataResponse:
    """``ModelMetadataResponse`` from the core's model metadata dict."""
    tensor = pb.ModelMetadataResponse.TensorMetadata
    return pb.ModelMetadataResponse(
        name=meta["name"],
        versions=meta.get("versions", []),
        platform=meta.get("platform", ""),
        inputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta.get("inputs", [])],
        outputs=[tensor(name=t["name"], datatype=t["datatype"], shape=t["shape"]) for t in meta.get("outputs", [])],
    )
