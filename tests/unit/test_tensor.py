"""The BYTES codec and raw tensor views."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core.errors import TritonError
from tritium.core.tensor import deserialize_bytes, serialize_bytes, tensor_from_buffer
from tritium.core.types import by_name


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
