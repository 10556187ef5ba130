"""Checks of an inference request against its model's configuration.

Messages, their order and their codes are Triton's (``InferenceRequest::
Normalize`` in Triton 2.51), checked against the real server. One deliberate
difference: where Triton's "expected N inputs" message prints a malformed
list (``missing required input(s) ]``), tritium prints ``[]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest, InferInput
from ..inference.tensor import TRUNCATED_ELEMENT, TRUNCATED_PREFIX, scan_bytes_elements
from ..inference.types import DataType, by_config_name, by_name, element_count

__all__ = [
    "TensorSpec",
    "ModelSignature",
    "request_prefix",
    "validate_request",
    "check_input_bytes",
    "check_bytes_elements",
]


def request_prefix(request_id: str) -> str:
    """``"[request id: <id>] "`` as Triton starts request errors (``<id_unknown>`` when none)."""
    return f"[request id: {request_id or '<id_unknown>'}] "


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A configured input or output: name, datatype, dims (without the batch dim)."""

    name: str
    datatype: DataType
    dims: tuple[int, ...]
    optional: bool = False
    label_filename: str = ""


def _format_shape(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _names(names: Sequence[str]) -> str:
    return "[" + ",".join(f"'{n}'" for n in sorted(names)) + "]"


class ModelSignature:
    """The inputs, outputs and batching of a model config, prepared for request checks.

    :param name: model name.
    :param config: the normalized config in its JSON form.
    """

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        self.name = name
        self.max_batch_size = int(config.get("max_batch_size", 0))
        self.inputs: dict[str, TensorSpec] = {}
        self.outputs: dict[str, TensorSpec] = {}
        for key, table in (("input", self.inputs), ("output", self.outputs)):
            for item in config.get(key, []):
                dt = by_config_name(item["data_type"])
                assert dt is not None  # normalization rejected bad types
                table[item["name"]] = TensorSpec(
                    item["name"],
                    dt,
                    tuple(int(d) for d in item.get("dims", [])),
                    bool(item.get("optional", False)),
                    str(item.get("label_filename", "")),
                )
        self.required = [n for n, s in self.inputs.items() if not s.optional]
        #: name -> (KServe datatype name, dims) of each input, when every input is required
        #: (the common config): lets :func:`validate_request` accept a valid request in one pass
        #: name -> bytes per element of each input (0 for BYTES: elements of their own sizes)
        self.itemsizes = {n: (0 if s.datatype.is_bytes else s.datatype.itemsize) for n, s in self.inputs.items()}
        #: name -> (KServe datatype name, dims, dims as a list when none is -1, else None)
        self.fixed_inputs: dict[str, tuple[str, tuple[int, ...], list[int] | None]] | None = None
        if len(self.required) == len(self.inputs):
            self.fixed_inputs = {
                n: (s.datatype.name, s.dims, None if -1 in s.dims else list(s.dims)) for n, s in self.inputs.items()
            }


def _check_count(sig: ModelSignature, request: InferenceRequest, prefix: str) -> None:
    got = len(request.inputs)
    names = [i.name for i in request.inputs]
    present = set(names)
    missing = [n for n in sig.required if n not in present]
    total, required = len(sig.inputs), len(sig.required)
    if total == required:
        if got != total:
            raise TritonError(
                Code.INVALID_ARG,
                f"{prefix}expected {total} inputs but got {got} inputs for model '{sig.name}'. "
                f"Got input(s) {_names(names)}, but missing required input(s) {_names(missing)}. "
                "Please provide all required input(s).",
            )
    elif not required <= got <= total or missing:
        raise TritonError(
            Code.INVALID_ARG,
            f"{prefix}expected number of inputs between {required} and {total} but got {got} inputs for "
            f"model '{sig.name}'. Got input(s) {_names(names)}, but missing required input(s) "
            f"{_names(missing)}. Please provide all required input(s).",
        )


def _shape_matches(dims: Sequence[int], shape: Sequence[int]) -> bool:
    if len(dims) != len(shape):
        return False
    return all(d == -1 or d == s for d, s in zip(dims, shape))


def _valid_batch_size(sig: ModelSignature, request: InferenceRequest) -> int:
    """The batch size of a request that passes every check of :func:`validate_request`; 0 otherwise.

    One pass for the request path; any doubt returns 0 and the full checks
    find (and word) what is wrong.
    """
    fixed = sig.fixed_inputs
    inputs = request.inputs
    if fixed is None or len(inputs) != len(fixed):
        return 0
    max_batch = sig.max_batch_size
    batch = 0
    seen = set()
    for inp in inputs:
        spec = fixed.get(inp.name)
        if spec is None or inp.datatype != spec[0]:
            return 0
        shape = inp.shape
        if max_batch > 0:
            if not shape:
                return 0
            first = shape[0]
            if not batch:
                batch = first
            elif first != batch:
                return 0
            shape = shape[1:]
        if shape != spec[2]:  # a configured shape with no variable dimension: one comparison
            if spec[2] is not None or len(shape) != len(spec[1]):
                return 0
            for d, n in zip(spec[1], shape):
                if n < 0 or (d != n and d != -1):
                    return 0
        seen.add(inp.name)
    if len(seen) != len(inputs):
        return 0
    outputs = sig.outputs
    for out in request.outputs:
        if out.name not in outputs:
            return 0
    if max_batch > 0:
        return batch if 1 <= batch <= max_batch else 0
    return 1


def validate_request(sig: ModelSignature, request: InferenceRequest) -> int:
    """Check a request's inputs and requested outputs; return its batch size.

    Does not look at tensor bytes (see :func:`check_input_bytes`).

    :returns: the batch size (1 for a model that does not batch).
    :raises TritonError: INVALID_ARG with Triton's message for a duplicate,
        unknown or missing input, an unknown output, a batch size above
        ``max_batch_size``, a wrong datatype or a wrong shape.
    """
    batch_size = _valid_batch_size(sig, request)
    if batch_size:
        return batch_size
    prefix = request_prefix(request.id)
    seen: set[str] = set()
    for inp in request.inputs:
        if inp.name in seen:
            raise TritonError(Code.INVALID_ARG, f"{prefix}input '{inp.name}' already exists in request")
        seen.add(inp.name)
    _check_count(sig, request, prefix)
    for inp in request.inputs:
        if inp.name not in sig.inputs:
            raise TritonError(Code.INVALID_ARG, f"unexpected inference input '{inp.name}' for model '{sig.name}'")
    for out in request.outputs:
        if out.name not in sig.outputs:
            raise TritonError(Code.INVALID_ARG, f"unexpected inference output '{out.name}' for model '{sig.name}'")

    batch_size = 1
    if sig.max_batch_size > 0:
        batch: int | None = None
        for inp in request.inputs:
            if not inp.shape:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"{prefix}input '{inp.name}' has no shape but model requires batch dimension for '{sig.name}'",
                )
            if batch is None:
                batch = int(inp.shape[0])
            elif int(inp.shape[0]) != batch:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"{prefix}input '{inp.name}' batch size does not match other inputs for '{sig.name}'",
                )
        batch_size = batch if batch is not None else 1
        if batch_size > sig.max_batch_size:
            raise TritonError(
                Code.INVALID_ARG,
                f"{prefix}inference request batch-size must be <= {sig.max_batch_size} for '{sig.name}'",
            )
        if batch_size < 1:
            raise TritonError(Code.INVALID_ARG, f"{prefix}inference request batch-size must be >= 1 for '{sig.name}'")

    for inp in request.inputs:
        spec = sig.inputs[inp.name]
        dt = by_name(inp.datatype)
        if dt is None:
            raise TritonError(
                Code.INVALID_ARG,
                f"{prefix}inference input '{inp.name}' data-type is '<invalid>', "
                f"but model '{sig.name}' expects '{spec.datatype.name}'",
            )
        if dt is not spec.datatype:
            raise TritonError(
                Code.INVALID_ARG,
                f"{prefix}inference input '{inp.name}' data-type is '{dt.name}', "
                f"but model '{sig.name}' expects '{spec.datatype.name}'",
            )
        shape = inp.shape[1:] if sig.max_batch_size > 0 else inp.shape
        if any(int(d) < 0 for d in inp.shape) or not _shape_matches(spec.dims, shape):
            if sig.max_batch_size > 0:
                expected = _format_shape((-1, *spec.dims))
                note = (
                    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
                    "to be prepended to each input shape. If you want to specify the full shape including the "
                    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
                    "configuration docs for more info on max_batch_size."
                )
            else:
                expected = _format_shape(spec.dims)
                note = " "
            raise TritonError(
                Code.INVALID_ARG,
                f"{prefix}unexpected shape for input '{inp.name}' for model '{sig.name}'. "
                f"Expected {expected}, got {_format_shape(inp.shape)}.{note}",
            )
    return batch_size


def check_input_bytes(sig: ModelSignature, request: InferenceRequest, inp: InferInput, nbytes: int) -> None:
    """Check the byte size of a fixed-size input's data against its shape.

    :raises TritonError: INVALID_ARG with Triton's "input byte size mismatch" message.
    """
    dt = sig.inputs[inp.name].datatype
    expected = element_count(inp.shape) * dt.itemsize
    if nbytes != expected:
        raise TritonError(
            Code.INVALID_ARG,
            f"{request_prefix(request.id)}input byte size mismatch for input '{inp.name}' for model "
            f"'{sig.name}'. Expected {expected}, got {nbytes}",
        )


def check_bytes_elements(
    sig: ModelSignature, request: InferenceRequest, inp: InferInput, buffer: memoryview | bytes | bytearray
) -> None:
    """Check that a BYTES input holds exactly as many well-formed elements as its shape says.

    ``buffer`` is the input's serialized form: each element a 4-byte
    little-endian length and that many bytes (the binary tensor data
    extension's BYTES layout). The elements are counted by the codec's scan
    (:func:`.tensor.scan_bytes_elements`: in C, a few nanoseconds per element,
    where setup.py built it), without a copy.

    :raises TritonError: INVALID_ARG with Triton's messages for a truncated
        length prefix, an element running past the end, or too few/many elements.
    """
    expected = element_count(inp.shape)
    prefix = request_prefix(request.id)
    count, status, available, size = scan_bytes_elements(buffer)
    if status == TRUNCATED_PREFIX:
        raise TritonError(
            Code.INVALID_ARG,
            f"{prefix}incomplete string length indicator for inference input '{inp.name}' for model "
            f"'{sig.name}', expecting 4 bytes but only {available} bytes available. Please make sure "
            "the string length indicator is in one buffer.",
        )
    if status == TRUNCATED_ELEMENT:
        raise TritonError(
            Code.INVALID_ARG,
            f"incomplete string data for inference input '{inp.name}', expecting string of length "
            f"{size} but only {available} bytes available",
        )
    if count > expected:
        raise TritonError(
            Code.INVALID_ARG,
            f"{prefix}unexpected number of string elements {count} for inference input '{inp.name}' for "
            f"model '{sig.name}', expecting {expected}",
        )
    if count < expected:
        raise TritonError(
            Code.INVALID_ARG,
            f"{prefix}expected {expected} string elements for inference input '{inp.name}' for model "
            f"'{sig.name}', got {count}",
        )
