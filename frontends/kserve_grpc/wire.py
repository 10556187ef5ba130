"""ModelInfer messages on the wire, for large tensors: no protobuf copies of the tensor bytes.

Python protobuf copies a ``bytes`` field when it parses a message, again when
it is read, again when one is assigned, and once more when the message is
serialized. For a request or response carrying megabytes of tensor data
those copies cost more than the rest of the call. So above
:data:`LARGE` bytes, the ``raw_input_contents`` (field 7 of
``ModelInferRequest``) are sliced straight out of the received bytes, and the
``raw_output_contents`` (field 6 of ``ModelInferResponse``) follow the
serialized rest of the response as parts, joined once by the transport (the
native one copies them straight into its gRPC slice). Smaller messages take
protobuf's own (faster for them) path.

The split walks only the message's top-level fields (tags and lengths). When
the native gRPC transport is built, its C++ walker does it
(:func:`._native.split_raw_inputs`); otherwise this module's Python one, which
gives the same results (tests/unit/test_grpc_wire.py holds them to it).
"""

from __future__ import annotations

from typing import Sequence

from ...core.errors import Code, TritonError

try:
    from ._native import split_raw_inputs as _native_split  # type: ignore[import-not-found]
except ImportError:  # not built: the Python walker below
    _native_split = None

__all__ = ["LARGE", "split_raw_inputs", "raw_output_parts"]

#: messages at least this large (bytes) take the copy-free path
LARGE = 256 * 1024
_RAW_INPUT_FIELD = 7
_RAW_OUTPUT_TAG = bytes([(6 << 3) | 2])


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(view) or shift > 63:
            raise TritonError(Code.INVALID_ARG, "malformed ModelInferRequest: truncated varint")
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def split_raw_inputs(data: bytes | memoryview) -> tuple[bytes, list[memoryview]]:
    """Split a serialized ``ModelInferRequest`` into the message without its raw inputs, and those.

    :returns: the other fields (to parse with protobuf) and the raw input
        contents as views of ``data``, in order.
    :raises TritonError: INVALID_ARG for bytes that are not a well-formed message.
    """
    if _native_split is not None:
        try:
            return _native_split(data)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise TritonError(Code.INVALID_ARG, f"malformed ModelInferRequest: {exc}") from None
    return split_raw_inputs_python(data)


def split_raw_inputs_python(data: bytes | memoryview) -> tuple[bytes, list[memoryview]]:
    """:func:`split_raw_inputs` in Python (the fallback when the native transport is not built)."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    rest: list[memoryview] = []
    raws: list[memoryview] = []
    while pos < end:
        start = pos
        tag, pos = _varint(view, pos)
        field, wire_type = tag >> 3, tag & 7
        if wire_type == 2:
            length, pos = _varint(view, pos)
            body = pos
            pos += length
            if pos > end:
                raise TritonError(Code.INVALID_ARG, "malformed ModelInferRequest: field runs past the end")
            if field == _RAW_INPUT_FIELD:
                raws.append(view[body:pos])
                continue
        elif wire_type == 0:
            _, pos = _varint(view, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise TritonError(Code.INVALID_ARG, f"malformed ModelInferRequest: wire type {wire_type}")
        if pos > end:
            raise TritonError(Code.INVALID_ARG, "malformed ModelInferRequest: field runs past the end")
        rest.append(view[start:pos])
    return b"".join(rest), raws


def raw_output_parts(head: bytes, raws: Sequence[memoryview | bytes]) -> list[bytes | memoryview]:
    """A serialized ``ModelInferResponse`` as parts to join: ``head`` (the other fields), then ``raw_output_contents``."""
    parts: list[bytes | memoryview] = [head]
    for raw in raws:
        parts += (_RAW_OUTPUT_TAG, _encode_varint(len(raw)), raw)
    return parts
