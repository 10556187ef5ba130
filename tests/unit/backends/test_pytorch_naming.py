"""Triton's input/output naming rules of the pytorch backend, on ``forward()`` signatures (no torch needed).

The black-box suite (``tests/integration/test_pytorch_backend.py``) serves real
TorchScript files named by each rule and shows one violation as a load error;
the violations of every rule are checked here, directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tritium.core.backend.api import Backend, Model
from tritium.core.errors import TritonError

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "tritium_backend_pytorch_naming", ROOT / "backends/pytorch/libtriton_pytorch.py"
)
assert _spec is not None and _spec.loader is not None
pytorch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pytorch)

TENSOR = "TensorType"


def _model(inputs: list[str], outputs: list[str], sequence: dict[str, Any] | None = None) -> Model:
    config: dict[str, Any] = {
        "name": "m",
        "input": [{"name": n, "data_type": "TYPE_FP32", "dims": [2]} for n in inputs],
        "output": [{"name": n, "data_type": "TYPE_FP32", "dims": [2]} for n in outputs],
    }
    if sequence is not None:
        config["sequence_batching"] = sequence
    return Model("m", 1, config, "/nonexistent", Backend("pytorch", "", {}), False)


def _args(*names: str) -> list[tuple[str, str]]:
    return [(n, TENSOR) for n in names]


def test_names_indices_and_config_order() -> None:
    assert pytorch._input_map(_model(["y", "x"], ["out"]), _args("x", "y")) == (False, {"y": 1, "x": 0})
    assert pytorch._input_map(_model(["B__1", "A__0"], ["out"]), _args("x", "y")) == (False, {"B__1": 1, "A__0": 0})
    assert pytorch._input_map(_model(["first", "second"], ["out"]), _args("x", "y")) == (
        False,
        {"first": 0, "second": 1},
    )
    assert pytorch._input_map(_model(["A", "B"], ["out"]), [("inputs", "DictType")]) == (True, {"A": 0, "B": 1})
    assert pytorch._output_map(_model(["x"], ["OUT__1", "OUT__0"])) == {"OUT__1": 1, "OUT__0": 0}
    assert pytorch._output_map(_model(["x"], ["b", "a"])) == {"b": 0, "a": 1}


def test_state_and_control_inputs_count_and_follow_the_index_rule() -> None:
    sequence = {
        "control_input": [
            {"name": "START__2", "control": [{"kind": "CONTROL_SEQUENCE_START", "fp32_false_true": [0, 1]}]}
        ],
        "state": [{"input_name": "STATE__1", "output_name": "STATE_OUT__1", "data_type": "TYPE_FP32", "dims": [2]}],
    }
    model = _model(["INPUT__0"], ["OUTPUT__0"], sequence)
    assert pytorch._input_map(model, _args("x", "state", "start")) == (
        False,
        {"INPUT__0": 0, "START__2": 2, "STATE__1": 1},
    )
    assert pytorch._output_map(model) == {"OUTPUT__0": 0, "STATE_OUT__1": 1}  # the hidden state output too


@pytest.mark.parametrize(
    ("inputs", "sequence", "arguments", "message"),
    [
        (
            ["INPUT__0"],
            {"control_input": [{"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START"}]}]},
            _args("x", "start"),
            "input 'START' does not follow <name>__<index> naming convention.",
        ),
        (
            ["x"],
            {"state": [{"input_name": "s__1", "output_name": "o__1", "data_type": "TYPE_FP32", "dims": [2]}]},
            _args("x", "s"),
            "PyTorch model 'm' is using sequence batching with state but not all inputs and outputs "
            "follow the <name>__<index> naming convention.",
        ),
        (
            ["A", "B"],
            None,
            [("a", "DictType"), ("b", "DictType")],
            "Multiple inputs of kind DictType were detected. Only a single input of type Dict(str, Tensor) is supported.",
        ),
        (["A"], None, [("a", "IntType")], "An input of type 'IntType' ('a') was detected in the model."),
        (
            ["INPUT__0", "OTHER__0"],
            None,
            _args("a", "b"),
            "unable to load model 'm': inputs 'INPUT__0' and 'OTHER__0' "
            "both map to position 0 (<name>__<index> naming convention)",
        ),
        (
            ["INPUT__0", "INPUT__5"],
            None,
            _args("a", "b"),
            "unable to load model 'm': input 'INPUT__5' maps to position 5 "
            "(<name>__<index> naming convention), but forward() takes 2 arguments",
        ),
    ],
)
def test_rule_violations_name_the_input_and_the_rule(inputs, sequence, arguments, message: str) -> None:
    with pytest.raises(TritonError) as info:
        pytorch._input_map(_model(inputs, ["OUTPUT__0"], sequence), arguments)
    assert message in info.value.message
