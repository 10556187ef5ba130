"""The BYTES element count: the C scan agrees with the Python fallback, and the checks give Triton's messages."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritium.core.errors import Code, TritonError
from tritium.core.inference import tensor
from tritium.core.inference.request import InferenceRequest, InferInput
from tritium.core.model import validation

native = pytest.importorskip("tritium.core._bytes_elements", reason="the C scan was not built (no C compiler)")


def serialize(elements: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def test_the_server_uses_the_c_scan() -> None:
    # (scripts/test.sh fails where a C compiler exists and the scan did not build)
    assert tensor.scan_bytes_elements is native.count


@settings(max_examples=300, deadline=None)
@given(
    elements=st.lists(st.binary(max_size=12), max_size=40),
    tail=st.binary(max_size=12),
)
def test_c_and_python_counts_agree(elements: list[bytes], tail: bytes) -> None:
    buffer = serialize(elements) + tail
    assert native.count(buffer) == tensor._scan_in_python(buffer)


@pytest.mark.parametrize(
    ("buffer", "expected"),
    [
        (b"", (0, 0, 0, 0)),
        (serialize([b"", b"a", b"bc"]), (3, 0, 0, 0)),
        (serialize([b"a"]) + b"\x01\x00", (1, 1, 2, 0)),  # a prefix cut after 2 of its 4 bytes
        (serialize([b"a"]) + struct.pack("<I", 9) + b"xyz", (1, 2, 3, 9)),  # 9 bytes announced, 3 sent
        (struct.pack("<I", 0xFFFFFFFF), (0, 2, 0, 0xFFFFFFFF)),  # the largest length: no overflow
    ],
)
def test_counts_of_known_buffers(buffer: bytes, expected: tuple[int, int, int, int]) -> None:
    assert native.count(buffer) == expected
    assert native.count(memoryview(bytearray(buffer))) == expected
    assert tensor._scan_in_python(buffer) == expected


def test_a_large_buffer_of_varied_lengths_is_counted_exactly() -> None:
    buffer = serialize([b"", b"a", b"bcd"] * 100_000)  # past the size from which the scan releases the GIL
    assert native.count(buffer) == (300_000, 0, 0, 0)
    assert native.count(memoryview(buffer)[: len(buffer) - 1]) == (299_999, 2, 2, 3)


def test_a_buffer_that_is_not_bytes_like_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        native.count("not bytes")  # type: ignore[arg-type]


SIG = validation.ModelSignature(
    "strings",
    {
        "input": [{"name": "INPUT0", "data_type": "TYPE_STRING", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": [-1]}],
    },
)


def check(buffer: bytes, count: int) -> None:
    request = InferenceRequest("strings", "", "r1", [InferInput("INPUT0", "BYTES", [count], buffer)])
    validation.check_bytes_elements(SIG, request, request.inputs[0], buffer)


def test_the_checks_give_tritons_messages() -> None:
    check(serialize([b"a", b"bc"]), 2)
    cases = [
        (
            serialize([b"a"]) + b"\x01",
            1,
            "[request id: r1] incomplete string length indicator for inference input 'INPUT0' for model "
            "'strings', expecting 4 bytes but only 1 bytes available. Please make sure the string length "
            "indicator is in one buffer.",
        ),
        (
            struct.pack("<I", 5) + b"ab",
            1,
            "incomplete string data for inference input 'INPUT0', expecting string of length 5 but only 2 "
            "bytes available",
        ),
        (
            serialize([b"a", b"b", b"c"]),
            2,
            "[request id: r1] unexpected number of string elements 3 for inference input 'INPUT0' for "
            "model 'strings', expecting 2",
        ),
        (
            serialize([b"a"]),
            2,
            "[request id: r1] expected 2 string elements for inference input 'INPUT0' for model 'strings', got 1",
        ),
    ]
    for buffer, count, message in cases:
        with pytest.raises(TritonError) as caught:
            check(buffer, count)
        assert (caught.value.code, caught.value.message) == (Code.INVALID_ARG, message)


@settings(max_examples=200, deadline=None)
@given(elements=st.lists(st.binary(max_size=12), max_size=40))
def test_c_join_is_the_serialized_form(elements: list[bytes]) -> None:
    assert native.join(elements) == serialize(elements) == tensor._join_in_python(elements)
    array = np.empty(len(elements), dtype=np.object_)
    array[:] = elements
    assert tensor.serialize_bytes(array) == serialize(elements)
    assert native.count(native.join(elements)) == (len(elements), 0, 0, 0)


def test_join_takes_protobufs_repeated_bytes_and_refuses_other_items() -> None:
    from tritium.proto import grpc_service_pb2 as pb

    assert tensor._join is native.join
    message = pb.ModelInferRequest.InferInputTensor()
    message.contents.bytes_contents.extend([b"x", b"", b"yz"])
    assert native.join(message.contents.bytes_contents) == serialize([b"x", b"", b"yz"])
    with pytest.raises(TypeError, match="join\\(\\) needs bytes, not str"):
        native.join([b"a", "b"])
    with pytest.raises(TypeError):
        native.join(7)  # type: ignore[arg-type]
