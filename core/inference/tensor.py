"""Tensors and the single BYTES codec.

BYTES tensors travel (HTTP binary extension, gRPC ``raw_*_contents``, the
worker arena, client shared memory) as a concatenation of elements, each a
4-byte little-endian unsigned length followed by that many bytes. In memory
they are numpy object arrays of ``bytes``. Every other datatype is its raw
little-endian elements.

This module is the only code that reads or writes that layout:

* :func:`join_bytes_elements` and :func:`serialize_bytes` write it;
* :func:`scan_bytes_elements` walks the length prefixes of a buffer without
  copying anything: how many well-formed elements it holds, and where it goes
  wrong (:func:`tritium.core.model.validation.check_bytes_elements` turns that into
  Triton's messages for a request's input; the python backend's
  ``pb_utils.deserialize_bytes_tensor`` into Triton's ``struct.error``);
* :func:`deserialize_bytes` (and :func:`tensor_from_buffer` for BYTES) parses
  it into elements.

The walk and the join are C (:mod:`._bytes_elements`, built by setup.py where
a C compiler exists: a few nanoseconds an element), with the Python
fallbacks here where it was not built.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, overload

import numpy as np

from ..errors import Code, TritonError
from .types import DataType, element_count

__all__ = [
    "join_bytes_elements",
    "scan_bytes_elements",
    "TRUNCATED_PREFIX",
    "TRUNCATED_ELEMENT",
    "serialize_bytes",
    "serialized_bytes_size",
    "deserialize_bytes",
    "to_bytes_array",
    "tensor_from_buffer",
    "tensor_to_buffer",
]

_LEN = struct.Struct("<I")


def _join_in_python(items: Iterable[Any]) -> bytes:
    parts = []
    for item in items:
        parts.append(_LEN.pack(len(item)))
        parts.append(item)
    return b"".join(parts)


try:  # C (setup.py builds it where a C compiler exists): a few ns an element, not 0.3 µs
    from .._bytes_elements import join as _join
except ImportError:
    _join = _join_in_python


def join_bytes_elements(items: Sequence[bytes]) -> bytes:
    """The serialized form of BYTES elements: each element's 4-byte little-endian length, then it.

    :param items: the elements, ``bytes`` each (a list, an object array, protobuf's repeated bytes).
    :raises TypeError: for an element that is not ``bytes``.
    """
    return _join(items)


#: statuses of :func:`scan_bytes_elements`: the buffer ends inside a length prefix, or inside the
#: element a prefix announces
TRUNCATED_PREFIX, TRUNCATED_ELEMENT = 1, 2

#: buffers of more than this many bytes / 4 try the vectorised count first (Python fallback only)
_UNIFORM_FROM = 4096


def _uniform_count(view: memoryview) -> int | None:
    """The number of elements of ``view`` when they all have the first one's length (numpy, no loop); else None."""
    end = len(view)
    (size,) = _LEN.unpack_from(view, 0)
    stride = 4 + size
    if end % stride:
        return None
    count = end // stride
    lengths: np.ndarray = np.ndarray((count,), dtype="<u4", buffer=view, offset=0, strides=(stride,))
    return count if bool((lengths == size).all()) else None


def _scan_in_python(buffer: memoryview | bytes | bytearray) -> tuple[int, int, int, int]:
    """:func:`scan_bytes_elements` where the C scan was not built.

    Elements of one length are counted by numpy in one pass, others one at a
    time (about 0.3 µs each).
    """
    view = memoryview(buffer).cast("B")
    end = len(view)
    count = _uniform_count(view) if end > 4 * _UNIFORM_FROM else None
    pos = end if count is not None else 0  # every element has the same length: counted in one vectorised pass
    count = count or 0
    while pos < end:
        if end - pos < 4:
            return count, TRUNCATED_PREFIX, end - pos, 0
        (size,) = _LEN.unpack_from(view, pos)
        pos += 4
        if size > end - pos:
            return count, TRUNCATED_ELEMENT, end - pos, size
        pos += size
        count += 1
    return count, 0, 0, 0


# scan_bytes_elements(buffer) -> (count, status, available, size): the length prefixes of a
# serialized BYTES tensor walked without a copy (``buffer``: anything with the buffer protocol, read
# as bytes). ``count`` is the number of well-formed elements from the start. ``status`` 0: the buffer
# is exactly those elements (``available`` and ``size`` 0); TRUNCATED_PREFIX: after ``count``
# elements only ``available`` (< 4) bytes are left for the next length prefix; TRUNCATED_ELEMENT:
# the next prefix says ``size`` bytes but only ``available`` follow it. The C scan itself where it
# was built (a few ns an element, the interpreter released for buffers of 64 KiB or more: no call
# in between on the request path), else the Python fallback above.
try:
    from .._bytes_elements import count as scan_bytes_elements
except ImportError:  # setup.py found no C compiler
    scan_bytes_elements = _scan_in_python


def to_bytes_array(array: np.ndarray) -> np.ndarray:
    """Return ``array`` as an object array of ``bytes`` (str elements UTF-8 encoded).

    :param array: any shape; dtype object (bytes/str), ``S`` or ``U``.
    :raises TritonError: INVALID_ARG when an element is neither bytes nor str.
    """
    if array.dtype == np.object_ and all(type(x) is bytes for x in array.flat):
        return array
    out = np.empty(array.shape, dtype=np.object_)
    flat_out = out.reshape(-1)
    for i, item in enumerate(array.reshape(-1)):
        if isinstance(item, (bytes, bytearray, memoryview)):
            flat_out[i] = bytes(item)
        elif isinstance(item, str):
            flat_out[i] = item.encode("utf-8")
        elif isinstance(item, np.bytes_):
            flat_out[i] = bytes(item)
        else:
            raise TritonError(
                Code.INVALID_ARG,
                f"BYTES tensor element of type {type(item).__name__} is not bytes or str",
            )
    return out


def serialized_bytes_size(array: np.ndarray) -> int:
    """Size in bytes of ``serialize_bytes(array)``."""
    flat = to_bytes_array(array).reshape(-1)
    return 4 * flat.size + sum(len(x) for x in flat)


@overload
def serialize_bytes(array: np.ndarray, out: None = None) -> bytes: ...
@overload
def serialize_bytes(array: np.ndarray, out: memoryview) -> int: ...
def serialize_bytes(array: np.ndarray, out: memoryview | None = None) -> bytes | int:
    """Serialize a BYTES tensor to length-prefixed elements (row-major order).

    :param array: object array of bytes/str (any shape).
    :param out: when given, write into this buffer and return the byte count.
    :returns: the serialized bytes, or the number of bytes written to ``out``.
    """
    data = _join(to_bytes_array(array).reshape(-1))
    if out is None:
        return data
    if data:  # an empty tensor comes with an empty, read-only buffer
        out[: len(data)] = data
    return len(data)


def deserialize_bytes(buffer: memoryview | bytes | bytearray, count: int | None = None) -> np.ndarray:
    """Parse length-prefixed elements into a 1-D object array of ``bytes``.

    :param buffer: the serialized elements (anything with the buffer protocol).
    :param count: the number of elements expected; None parses to the end.
    :raises TritonError: INVALID_ARG when a length prefix runs past the end of
        the buffer, when the buffer holds more or fewer than ``count``
        elements, or when bytes are left over.
    """
    view = memoryview(buffer).cast("B")
    found, status, _available, size = scan_bytes_elements(view)
    if status or (count is not None and found != count):
        raise _malformed(view, count, found, status, size)
    data = buffer if type(buffer) is bytes else view.tobytes()  # one copy; slicing bytes then gives bytes
    unpack = _LEN.unpack_from
    items: list[bytes] = []
    append = items.append
    pos = 0
    for _ in range(found):  # the scan checked every prefix
        (size,) = unpack(data, pos)
        pos += 4 + size
        append(data[pos - size : pos])
    out = np.empty(found, dtype=np.object_)
    out[:] = items
    return out


def _malformed(view: memoryview, count: int | None, found: int, status: int, size: int) -> TritonError:
    """The error of :func:`deserialize_bytes` for a buffer that the scan found to be malformed (or miscounted).

    With ``count`` given, the first ``count`` elements are what counts: anything after them is left over.
    """
    if count is not None and found >= count:
        pos = 0
        for _ in range(count):
            (length,) = _LEN.unpack_from(view, pos)
            pos += 4 + length
        return TritonError(
            Code.INVALID_ARG, f"unexpected {len(view) - pos} trailing bytes after {count} string elements"
        )
    if status == TRUNCATED_PREFIX:
        return TritonError(Code.INVALID_ARG, "element byte size indicator exceeds the end of the buffer")
    if status == TRUNCATED_ELEMENT:
        return TritonError(Code.INVALID_ARG, f"element byte size {size} exceeds the end of the buffer")
    return TritonError(Code.INVALID_ARG, f"expected {count} string elements, got {found}")


def tensor_from_buffer(datatype: DataType, shape: Sequence[int], buffer: memoryview | bytes) -> np.ndarray:
    """View (fixed-size types, no copy) or parse (BYTES) a tensor held in ``buffer``.

    :param datatype: the tensor's datatype.
    :param shape: its shape; the buffer must hold exactly that many elements.
    :raises TritonError: INVALID_ARG when the byte size does not match.
    """
    count = element_count(shape)
    if datatype.is_bytes:
        return deserialize_bytes(buffer, count).reshape(shape)
    expected = count * datatype.itemsize
    if len(buffer) != expected:
        raise TritonError(
            Code.INVALID_ARG,
            f"unexpected byte size {len(buffer)}, expecting {expected} for {datatype.name} shape {list(shape)}",
        )
    return np.frombuffer(buffer, dtype=datatype.numpy, count=count).reshape(shape)


def tensor_to_buffer(datatype: DataType, array: np.ndarray) -> bytes | memoryview:
    """Return the wire bytes of ``array`` (a view when it is already contiguous)."""
    if datatype.is_bytes:
        return serialize_bytes(array)
    array = np.ascontiguousarray(array, dtype=datatype.numpy)
    return memoryview(array).cast("B")  # type: ignore[arg-type]  # numpy 1.26 stubs: ndarray lacks __buffer__
