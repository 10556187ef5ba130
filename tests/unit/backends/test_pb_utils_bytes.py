"""``pb_utils.serialize_byte_tensor`` / ``deserialize_bytes_tensor`` (the python backend's helpers) on the core's codec.

Their results and errors are those of Triton's pure-Python helpers: a buffer
cut short raises ``struct.error`` with the message ``struct.unpack_from``
gives there (reproduced below by an element-by-element parse with ``struct``).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BACKEND = Path(__file__).resolve().parents[3] / "backends" / "python"


@pytest.fixture(scope="module")
def pb_utils() -> Iterator[ModuleType]:
    """The module as a worker imports it; afterwards the backend's bare-name modules are forgotten
    again (outside a worker they are not importable: tests/integration/test_python_backend.py)."""
    before = set(sys.modules)
    sys.path.insert(0, str(BACKEND))  # the backend's modules import each other by bare names
    try:
        import triton_python_backend_utils

        yield triton_python_backend_utils
    finally:
        sys.path.remove(str(BACKEND))
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(BACKEND)):
                del sys.modules[name]


def _parse_with_struct(buffer: bytes) -> list[bytes]:
    """Element by element with ``struct``, as Triton's helper parses."""
    items, offset = [], 0
    while offset < len(buffer):
        (length,) = struct.unpack_from("<I", buffer, offset)
        offset += 4
        (item,) = struct.unpack_from(f"<{length}s", buffer, offset)
        offset += length
        items.append(item)
    return items


def _serialized(*elements: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


@pytest.mark.parametrize(
    "buffer",
    [b"", _serialized(b""), _serialized(b"", b"ab", b"", b"\x00\xff"), _serialized(*[b"x" * i for i in range(20)])],
)
def test_deserialize_well_formed(pb_utils: ModuleType, buffer: bytes) -> None:
    for given in (buffer, bytearray(buffer), memoryview(buffer), np.frombuffer(buffer, dtype=np.uint8)):
        parsed = pb_utils.deserialize_bytes_tensor(given)
        assert (parsed.dtype, parsed.shape) == (np.dtype(np.object_), (len(_parse_with_struct(buffer)),))
        assert parsed.tolist() == _parse_with_struct(buffer)


@pytest.mark.parametrize(
    ("buffer", "message"),
    [
        (
            b"\x01\x00",
            "unpack_from requires a buffer of at least 4 bytes for unpacking 4 bytes at offset 0 (actual buffer size is 2)",
        ),
        (
            _serialized(b"abc") + b"\x05",
            "unpack_from requires a buffer of at least 11 bytes for unpacking 4 bytes at offset 7 (actual buffer size is 8)",
        ),
        (
            struct.pack("<I", 5) + b"ab",
            "unpack_from requires a buffer of at least 9 bytes for unpacking 5 bytes at offset 4 (actual buffer size is 6)",
        ),
        (
            _serialized(b"a") + struct.pack("<I", 0xFFFFFFFF),
            "unpack_from requires a buffer of at least 4294967304 bytes for unpacking 4294967295 bytes at offset 9 "
            "(actual buffer size is 9)",
        ),
    ],
)
def test_deserialize_a_buffer_cut_short_is_tritons_struct_error(
    pb_utils: ModuleType, buffer: bytes, message: str
) -> None:
    with pytest.raises(struct.error) as reference:
        _parse_with_struct(buffer)
    assert str(reference.value) == message
    with pytest.raises(struct.error) as caught:
        pb_utils.deserialize_bytes_tensor(buffer)
    assert str(caught.value) == message


def test_serialize(pb_utils: ModuleType) -> None:
    assert pb_utils.serialize_byte_tensor(np.empty((2, 0), dtype=np.object_)) == ()
    assert pb_utils.serialize_byte_tensor(np.zeros(3, dtype=np.float32)) is None
    mixed = np.array([b"ab", "é", 7, b""], dtype=np.object_)
    assert pb_utils.serialize_byte_tensor(mixed) == _serialized(b"ab", "é".encode(), b"7", b"")
    # row-major whatever the array's layout; np.bytes_ elements lose trailing NULs, as numpy gives them
    grid = np.array([[b"a", b"bb\x00"], [b"", b"c"]], dtype=np.bytes_).T
    assert pb_utils.serialize_byte_tensor(grid) == _serialized(b"a", b"", b"bb", b"c")
    round_trip = pb_utils.deserialize_bytes_tensor(pb_utils.serialize_byte_tensor(mixed))
    assert round_trip.tolist() == [b"ab", "é".encode(), b"7", b""]
