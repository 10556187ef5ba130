"""core/model/reshape.py: the config's reshape maps, as Triton's Normalize and response outputs apply them."""

from __future__ import annotations

from tritium.core.model.reshape import Reshape, reshapes


def test_no_reshape_costs_nothing() -> None:
    config = {"max_batch_size": 0, "input": [{"name": "x", "dims": [4]}], "output": [{"name": "y", "dims": [4]}]}
    assert reshapes(config, "input") is None and reshapes(config, "output") is None
    same = {"input": [{"name": "x", "dims": [4], "reshape": {"shape": [4]}}]}
    assert reshapes(same, "input") is None


def test_fixed_dims() -> None:
    config = {
        "input": [{"name": "x", "dims": [6], "reshape": {"shape": [2, 3]}}],
        "output": [{"name": "y", "dims": [6], "reshape": {"shape": [3, 2]}}],
    }
    assert reshapes(config, "input")["x"].apply([6]) == [2, 3]
    assert reshapes(config, "output")["y"].apply([3, 2]) == [6]


def test_batch_dim_stays_outside_and_variable_dims_carry_across_in_order() -> None:
    config = {
        "max_batch_size": 4,
        "input": [
            {"name": "v", "dims": [-1, 3, -1], "reshape": {"shape": [-1, 1, 3, -1]}},
            {"name": "s", "dims": [1], "reshape": {"shape": []}},
        ],
        "output": [{"name": "v", "dims": [-1, 3, -1], "reshape": {"shape": [-1, 1, 3, -1]}}],
    }
    inputs = reshapes(config, "input")
    assert inputs["v"].apply([2, 5, 3, 7]) == [2, 5, 1, 3, 7]
    assert inputs["s"].apply([2, 1]) == [2]
    assert reshapes(config, "output")["v"].apply([2, 5, 1, 3, 7]) == [2, 5, 3, 7]


def test_missing_variable_dim_stays_unknown() -> None:
    # a shape that lacks the variable dims (a model's broken output) leaves -1: the caller's
    # element count check refuses it
    assert Reshape([-1], [2, -1], batched=False).apply([]) == [2, -1]
