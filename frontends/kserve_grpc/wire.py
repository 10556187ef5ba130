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

The split walks only the message's top-level fields (tags and lengths), in
the native extension's C++ (:func:`._native.split_raw_inputs`). Where the
extension is not built, large messages take protobuf's own parser (copies,
but no Python loop over the client's bytes on the event loop).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.api import Code, TritonError

try:
    from ._native import split_raw_inputs as _native_split
except ImportError:  # not built: large messages take protobuf's own parser (see split_raw_inputs)
    _native_split = None

__all__ = ["LARGE", "NATIVE_SPLIT", "split_raw_inputs", "raw_output_parts"]

#: messages at least this large (bytes) take the copy-free path
LARGE = 256 * 1024
_RAW_OUTPUT_TAG = bytes([(6 << 3) | 2])


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


#: whether :func:`split_raw_inputs` is available (the native transport's extension is built)
NATIVE_SPLIT = _native_split is not None


def split_raw_inputs(data: bytes | memoryview) -> tuple[bytes, list[memoryview]]:
    """Split a serialized ``ModelInferRequest`` into the message without its raw inputs, and those.

    Needs the native extension (:data:`NATIVE_SPLIT`); without it, large
    messages are parsed by protobuf itself (copies, but C code: nothing
    walks a client's bytes in Python, on the event loop).

    :returns: the other fields (to parse with protobuf) and the raw input
        contents as views of ``data``, in order.
    :raises TritonError: INVALID_ARG for bytes that are not a well-formed message.
    """
    try:
        return _native_split(data)
    except ValueError as exc:
        raise TritonError(Code.INVALID_ARG, f"malformed ModelInferRequest: {exc}") from None


def raw_output_parts(head: bytes, raws: Sequence[memoryview | bytes]) -> list[bytes | memoryview]:
    """A serialized ``ModelInferResponse`` as parts to join: ``head`` (the other fields), then ``raw_output_contents``."""
    parts: list[bytes | memoryview] = [head]
    for raw in raws:
        parts += (_RAW_OUTPUT_TAG, _encode_varint(len(raw)), raw)
    return parts
