"""The request fast path (frontends/kserve_http/plain.py) against the full checks of codec.py.

A body the fast path takes must give the very request the full checks give; a body it
declines must be left to the full checks, which then answer with Triton's message.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from tritium.core import TritonError
from tritium.frontends.kserve_http import codec
from tritium.frontends.kserve_http.plain import plain_request


def _tensor(name: str, datatype: str, shape: list[int], data: Any) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def _body(doc: Any, tail: bytes = b"") -> tuple[memoryview, int]:
    header = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
    return memoryview(header + tail), len(header)


def _full(body: memoryview, header_length: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(codec, "plain_request", lambda *args: None)
        return codec.parse_infer_request(body, header_length, "m", "")


def _summary(parsed: Any) -> Any:
    request, plan = parsed
    inputs = [
        (i.name, i.datatype, i.shape, bytes(i.data), i.parameters, i.shared_memory, i.buffer_offset)
        for i in request.inputs
    ]
    outputs = [(o.name, o.parameters, o.shared_memory) for o in request.outputs]
    return request.id, request.parameters, inputs, outputs, plan


TAKEN = {
    "fp32": {"inputs": [_tensor("A", "FP32", [2, 2], [1, 2.5, -3e-7, 1e39])], "outputs": [{"name": "Y"}]},
    "fp64": {"inputs": [_tensor("A", "FP64", [3], [0.1, -0.0, 12345678901234567890])]},
    "int8-wraps": {"inputs": [_tensor("A", "INT8", [2], [-129, 128])]},
    "uint64": {"inputs": [_tensor("A", "UINT64", [2], [0, 2**64 - 1])]},
    "two-inputs": {
        "id": "r1",
        "parameters": {"binary_data_output": True},
        "inputs": [_tensor("A", "INT32", [1, 2], [1, 2]), _tensor("B", "INT64", [2], [3, -4])],
        "outputs": [{"name": "Y", "parameters": {"binary_data": False}}, {"name": "Z"}],
    },
}


@pytest.mark.parametrize("doc", TAKEN.values(), ids=TAKEN.keys())
def test_json_data_taken_by_the_fast_path_as_the_full_checks_take_it(
    doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    body, length = _body(doc)
    assert plain_request(body[:length], body, length, "m", "", codec._json_tensor) is not None
    assert _summary(codec.parse_infer_request(body, length, "m", "")) == _summary(_full(body, length, monkeypatch))


def test_binary_and_json_inputs_mixed(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {
        "inputs": [
            _tensor("A", "FP32", [2], [1.5, 2]),
            {"name": "B", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},
        ]
    }
    body, length = _body(doc, struct.pack("<2f", 3, 4))
    fast = _summary(codec.parse_infer_request(body, length, "m", ""))
    assert fast == _summary(_full(body, length, monkeypatch))
    assert fast[2] == [
        ("A", "FP32", [2], struct.pack("<2f", 1.5, 2), {}, None, -1),
        ("B", "FP32", [2], struct.pack("<2f", 3, 4), {"binary_data_size": 8}, None, length),
    ]


DECLINED = {
    "nested": ({"inputs": [_tensor("A", "FP32", [2], [[1], [2]])]}, None),
    "bool": ({"inputs": [_tensor("A", "BOOL", [2], [True, False])]}, None),
    "bytes": ({"inputs": [_tensor("A", "BYTES", [1], ["x"])]}, None),
    "nan-token": ('{"inputs":[{"name":"A","datatype":"FP32","shape":[1],"data":[NaN]}]}', None),
    "empty": ({"inputs": [_tensor("A", "FP32", [0], [])]}, None),
    "data-and-binary": (
        {"inputs": [{**_tensor("A", "FP32", [1], [1]), "parameters": {"binary_data_size": 4}}]},
        "Input must set only one of the following fields",
    ),
    "negative-unsigned": (
        {"inputs": [_tensor("A", "UINT8", [1], [-1])]},
        "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer",
    ),
    "float-for-int": ({"inputs": [_tensor("A", "INT32", [1], [1.5])]}, "Unable to parse 'data'"),
    "count-mismatch": ({"inputs": [_tensor("A", "FP32", [3], [1, 2])]}, "Unable to parse 'data'"),
    "half": ({"inputs": [_tensor("A", "FP16", [1], [1.0])]}, "receiving FP16 data via JSON is not supported"),
    "duplicate": (
        {"inputs": [_tensor("A", "FP32", [1], [1]), _tensor("A", "FP32", [1], [2])]},
        "input 'A' already exists in request",
    ),
}


@pytest.mark.parametrize("doc,error", DECLINED.values(), ids=DECLINED.keys())
def test_json_data_the_fast_path_declines_goes_to_the_full_checks(
    doc: Any, error: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, length = _body(doc)
    assert plain_request(body[:length], body, length, "m", "", codec._json_tensor) is None
    if error is None:
        assert _summary(codec.parse_infer_request(body, length, "m", "")) == _summary(_full(body, length, monkeypatch))
        return
    with pytest.raises(TritonError) as raised:
        codec.parse_infer_request(body, length, "m", "")
    assert error in raised.value.message
