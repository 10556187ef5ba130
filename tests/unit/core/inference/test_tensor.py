"""The BYTES codec and raw tensor views."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.inference import tensor
from tritium.core.inference.tensor import (
    deserialize_bytes,
    join_bytes_elements,
    serialize_bytes,
    tensor_from_buffer,
)
from tritium.core.inference.types import BYTES, by_name


def test_bytes_round_trip_keeps_nul_and_non_utf8_bytes():
    items = np.array([b"", b"a\x00b", b"\xff\xfe", "héllo".encode()], dtype=object)
    data = serialize_bytes(items)
    assert data[:4] == b"\x00\x00\x00\x00"
    assert list(deserialize_bytes(data, 4)) == list(items)


def test_bytes_prefix_beyond_the_buffer_is_an_error():
    with pytest.raises(TritonError, match="exceeds the end of the buffer"):
        deserialize_bytes(b"\x64\x00\x00\x00abc")
    with pytest.raises(TritonError, match="expected 3 string elements, got 1"):
        deserialize_bytes(b"\x01\x00\x00\x00a", 3)


def test_raw_views_do_not_copy_and_check_sizes():
    buf = bytearray(np.arange(6, dtype=np.int32).tobytes())
    array = tensor_from_buffer(by_name("INT32"), [2, 3], memoryview(buf))
    buf[0] = 9
    assert array[0, 0] == 9
    with pytest.raises(TritonError, match="unexpected byte size"):
        tensor_from_buffer(by_name("INT32"), [2, 2], memoryview(buf))


# -- the single BYTES codec's edge cases: exact values and messages -------------------------------


def _serialized(*elements: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


@pytest.fixture(params=["c", "python"])
def scan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case runs on the C scan (where it was built) and on the Python fallback."""
    if request.param == "python":
        monkeypatch.setattr(tensor, "scan_bytes_elements", tensor._scan_in_python)
    elif tensor.scan_bytes_elements is tensor._scan_in_python:
        pytest.skip("the C scan was not built (no C compiler)")
    return str(request.param)


def test_an_empty_tensor_is_an_empty_buffer(scan: str) -> None:
    assert serialize_bytes(np.empty((0, 3), dtype=np.object_)) == b""
    assert join_bytes_elements([]) == b""
    assert tensor.scan_bytes_elements(b"") == (0, 0, 0, 0)
    for count in (None, 0):
        parsed = deserialize_bytes(b"", count)
        assert (parsed.dtype, parsed.shape) == (np.dtype(np.object_), (0,))
    assert tensor_from_buffer(BYTES, [2, 0], memoryview(b"")).shape == (2, 0)


def test_zero_length_elements(scan: str) -> None:
    data = _serialized(b"", b"x", b"")
    assert data == b"\x00\x00\x00\x00\x01\x00\x00\x00x\x00\x00\x00\x00"
    assert serialize_bytes(np.array([b"", "x", b""], dtype=np.object_)) == data
    assert join_bytes_elements([b"", b"x", b""]) == data
    assert tensor.scan_bytes_elements(data) == (3, 0, 0, 0)
    assert deserialize_bytes(data).tolist() == [b"", b"x", b""]
    assert deserialize_bytes(memoryview(bytearray(data)), 3).tolist() == [b"", b"x", b""]
    assert tensor_from_buffer(BYTES, [1, 3], data).tolist() == [[b"", b"x", b""]]
    assert join_bytes_elements([b""] * 5) == bytes(20)  # a null request's BYTES input (model_batching)
    assert deserialize_bytes(bytes(20), 5).tolist() == [b""] * 5


def test_elements_are_bytes_copied_out_of_the_buffer(scan: str) -> None:
    buffer = bytearray(_serialized(b"ab", b"c"))
    parsed = deserialize_bytes(memoryview(buffer), 2)
    buffer[4] = ord("z")
    assert [type(x) for x in parsed] == [bytes, bytes]
    assert parsed.tolist() == [b"ab", b"c"]


@pytest.mark.parametrize(
    ("data", "count", "scanned", "message"),
    [
        # a length prefix cut short: 2 of its 4 bytes, after one good element
        (
            _serialized(b"a") + b"\x01\x00",
            None,
            (1, 1, 2, 0),
            "element byte size indicator exceeds the end of the buffer",
        ),
        (b"\x01", 1, (0, 1, 1, 0), "element byte size indicator exceeds the end of the buffer"),
        # a length past the end: 9 announced, 3 follow
        (struct.pack("<I", 9) + b"xyz", None, (0, 2, 3, 9), "element byte size 9 exceeds the end of the buffer"),
        (
            _serialized(b"a") + struct.pack("<I", 9) + b"xyz",
            2,
            (1, 2, 3, 9),
            "element byte size 9 exceeds the end of the buffer",
        ),
        # the largest length does not overflow
        (
            struct.pack("<I", 0xFFFFFFFF),
            None,
            (0, 2, 0, 0xFFFFFFFF),
            "element byte size 4294967295 exceeds the end of the buffer",
        ),
        # count mismatches
        (_serialized(b"a"), 3, (1, 0, 0, 0), "expected 3 string elements, got 1"),
        (b"", 2, (0, 0, 0, 0), "expected 2 string elements, got 0"),
        (_serialized(b"a", b"bc", b"d"), 2, (3, 0, 0, 0), "unexpected 5 trailing bytes after 2 string elements"),
        (_serialized(b"a"), 0, (1, 0, 0, 0), "unexpected 5 trailing bytes after 0 string elements"),
        # with a count, whatever follows that many elements is left over, malformed or not
        (_serialized(b"a") + b"\x01\x00", 1, (1, 1, 2, 0), "unexpected 2 trailing bytes after 1 string elements"),
        (
            _serialized(b"a") + struct.pack("<I", 9),
            1,
            (1, 2, 0, 9),
            "unexpected 4 trailing bytes after 1 string elements",
        ),
    ],
)
def test_malformed_buffers(
    scan: str, data: bytes, count: int | None, scanned: tuple[int, int, int, int], message: str
) -> None:
    assert tensor.scan_bytes_elements(data) == scanned
    assert tensor.scan_bytes_elements(memoryview(bytearray(data))) == scanned
    for buffer in (data, memoryview(bytearray(data))):
        with pytest.raises(TritonError) as caught:
            deserialize_bytes(buffer, count)
        assert (caught.value.code, caught.value.message) == (Code.INVALID_ARG, message)


def test_tensor_from_buffer_checks_the_count_of_its_shape(scan: str) -> None:
    with pytest.raises(TritonError) as caught:
        tensor_from_buffer(BYTES, [2, 2], _serialized(b"a", b"b", b"c"))
    assert caught.value.message == "expected 4 string elements, got 3"
