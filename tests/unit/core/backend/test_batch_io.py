"""BatchIO: ragged inputs flattened, Triton's six batch-input kinds, BATCH_SCATTER_WITH_INPUT_SHAPE.

Expected values are the examples of Triton's model_config.proto and
ragged_batching.md, and what its backend library computes for a request of
batch size 2 (ITEM_SHAPE repeats the item's shape once per batch item).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tritium.core.backend.api import Request
from tritium.core.backend.batch_io import BatchIO, flat_input
from tritium.core.backend.framework import run_batched
from tritium.core.errors import TritonError

KINDS = {
    "BATCH_ELEMENT_COUNT": "E",
    "BATCH_ACCUMULATED_ELEMENT_COUNT": "A",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO": "Z",
    "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE": "M",
    "BATCH_ITEM_SHAPE": "S",
    "BATCH_ITEM_SHAPE_FLATTEN": "F",
}


def _config(data_type: str = "TYPE_FP32", max_batch_size: int = 8) -> dict[str, Any]:
    return {
        "max_batch_size": max_batch_size,
        "input": [
            {"name": "X", "data_type": "TYPE_FP32", "dims": [-1, -1], "allow_ragged_batch": True},
            {"name": "Y", "data_type": "TYPE_FP32", "dims": [2]},
        ],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}],
        "batch_input": [
            {"kind": kind, "target_name": [target], "data_type": data_type, "source_input": ["X"]}
            for kind, target in KINDS.items()
        ],
        "batch_output": [{"target_name": ["OUT"], "kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "source_input": ["X"]}],
    }


def _request(x: np.ndarray, y: np.ndarray | None = None) -> Request:
    inputs = {"X": x, "Y": y if y is not None else np.zeros((x.shape[0], 2), np.float32)}
    return Request("", 0, 0, {}, inputs, [], sink=None)  # type: ignore[arg-type]


def test_nothing_to_do_without_ragged_inputs_or_batch_io() -> None:
    assert BatchIO.from_config({"input": [{"name": "X", "dims": [4]}], "output": []}) is None


def test_the_proto_example_batch_2_of_3_by_1_and_batch_1_of_2_by_2() -> None:
    layout = BatchIO.from_config(_config())
    assert layout is not None
    a = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    b = np.arange(4, dtype=np.float32).reshape(1, 2, 2) + 100
    inputs = layout.inputs([_request(a), _request(b)])
    assert inputs["X"].shape == (10,)  # ragged: every element, flattened, in request order
    assert inputs["X"].tolist() == [*a.reshape(-1).tolist(), *b.reshape(-1).tolist()]
    assert inputs["Y"].shape == (3, 2)  # not ragged: concatenated along the batch dimension
    assert inputs["E"].tolist() == [6, 4] and inputs["E"].dtype == np.float32
    assert inputs["A"].tolist() == [6, 10]
    assert inputs["Z"].tolist() == [0, 6, 10]
    assert inputs["M"].shape == (6,)
    assert inputs["S"].shape == (3, 2) and inputs["S"].tolist() == [[3, 1], [3, 1], [2, 2]]
    assert inputs["F"].shape == (6,) and inputs["F"].tolist() == [3, 1, 3, 1, 2, 2]


def test_int32_batch_inputs_and_every_target_name() -> None:
    config = _config("TYPE_INT32")
    config["batch_input"][1]["target_name"] = ["A", "A2"]
    layout = BatchIO.from_config(config)
    assert layout is not None
    inputs = layout.inputs([_request(np.zeros((1, 3), np.float32)), _request(np.zeros((1, 4), np.float32))])
    assert {inputs[n].dtype for n in KINDS.values()} == {np.dtype(np.int32)}
    assert inputs["A"].tolist() == inputs["A2"].tolist() == [3, 7]


def test_adjacent_ragged_inputs_flatten_to_a_view() -> None:
    whole = np.arange(9, dtype=np.float32)
    whole.flags.writeable = False
    requests = [_request(whole[0:3].reshape(1, 3)), _request(whole[3:9].reshape(2, 3))]
    flat = flat_input(requests, "X")
    assert np.shares_memory(flat, whole) and flat.tolist() == whole.tolist() and not flat.flags.writeable
    apart = [_request(np.ones((1, 2), np.float32)), _request(np.zeros((1, 3), np.float32))]
    assert flat_input(apart, "X").tolist() == [1, 1, 0, 0, 0]


def test_batch_output_is_scattered_with_each_request_s_input_shape() -> None:
    layout = BatchIO.from_config(_config())
    assert layout is not None
    requests = [_request(np.zeros((1, 3, 1), np.float32)), _request(np.zeros((2, 2, 2), np.float32))]
    parts = layout.scatter(requests, "OUT", np.arange(12, dtype=np.float32))
    assert parts is not None
    assert [p.shape for p in parts] == [(1, 3), (2, 2)]  # [batch, -1]: the input's first two dims
    assert parts[0].tolist() == [[0, 1, 2]] and parts[1].tolist() == [[3, 4], [5, 6]]
    assert layout.scatter(requests, "OTHER", np.zeros(3)) is None
    with pytest.raises(TritonError, match="batch output 'OUT' has 6 elements, fewer than the 7"):
        layout.scatter(requests, "OUT", np.zeros(6, np.float32))
    config = _config()
    config["output"][0]["dims"] = [-1, -1, -1]
    deep = BatchIO.from_config(config)
    assert deep is not None
    with pytest.raises(TritonError, match="variable dimension past the 3 dimensions of its source input 'X'"):
        deep.scatter(requests, "OUT", np.zeros(12, np.float32))


def test_run_batched_gives_the_model_the_batch_and_each_request_its_part() -> None:
    layout = BatchIO.from_config(_config())
    seen: dict[str, np.ndarray] = {}

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        seen.update(inputs)
        return {"OUT": inputs["X"] * 2}

    x1, x2 = np.ones((1, 2), np.float32), np.full((1, 3), 3, np.float32)
    results = run_batched([_request(x1), _request(x2)], True, run, ["OUT"], layout=layout)
    assert seen["E"].tolist() == [2, 3]
    assert [r["OUT"].tolist() for r in results] == [[[2, 2]], [[6, 6, 6]]]
    alone = run_batched([_request(x2)], False, run, ["OUT"], layout=layout)
    assert seen["Z"].tolist() == [0, 3] and alone[0]["OUT"].tolist() == [[6, 6, 6]]
