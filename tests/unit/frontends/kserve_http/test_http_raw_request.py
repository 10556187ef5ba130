"""A raw binary HTTP request (``Inference-Header-Content-Length: 0``) to a BYTES model: the body is its one element."""

from __future__ import annotations

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.inference.tensor import deserialize_bytes
from tritium.frontends.kserve_http.codec import raw_infer_request


def _config(dims: list[int], max_batch_size: int = 0) -> dict[str, object]:
    return {
        "max_batch_size": max_batch_size,
        "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": dims}],
    }


@pytest.mark.parametrize(
    ("body", "max_batch_size", "shape"), [(b"hello", 0, [1]), (b"", 0, [1]), (b"a\x00b", 4, [1, 1])]
)
def test_the_body_becomes_one_length_prefixed_element(body: bytes, max_batch_size: int, shape: list[int]) -> None:
    request, _plan = raw_infer_request(memoryview(body), "m", "", _config([1], max_batch_size))
    (raw,) = request.inputs
    assert (raw.name, raw.datatype, raw.shape) == ("TEXT", "BYTES", shape)
    assert bytes(raw.data) == len(body).to_bytes(4, "little") + body
    assert deserialize_bytes(raw.data, 1).tolist() == [body]


def test_a_bytes_input_of_another_shape_is_refused() -> None:
    with pytest.raises(TritonError) as caught:
        raw_infer_request(memoryview(b"hello"), "m", "", _config([2]))
    assert (caught.value.code, caught.value.message) == (
        Code.INVALID_ARG,
        "[request id: <id_unknown>] For BYTE datatype raw input 'TEXT', the model must have input shape [1]",
    )
