"""Python models and ensembles over them, for the ensemble and response-cache suites.

Every model here runs unchanged on real Triton 2.51 too (the answers the
suites expect from it were recorded there).
"""

from __future__ import annotations

from pathlib import Path

from .repo import add_model

__all__ = ["IO", "add_python", "add_ensemble", "step", "build_repo"]

ADD_ONE = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x + 1).astype(np.float32))]))
        return out
"""

ADD2 = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (a + b).astype(np.float32))]))
        return out
"""

FAIL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        error = pb_utils.TritonError("step exploded")
        return [pb_utils.InferenceResponse(output_tensors=[], error=error) for r in requests]
"""

REPEAT = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            sender = r.get_response_sender()
            for i in range(3):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * (i + 1)).astype(np.float32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def add_python(root: Path, name: str, source: str, extra: str = "", io: str = IO) -> None:
    """A python model with max_batch_size 8 (``io``: its inputs and outputs)."""
    add_model(root, name, f'backend: "python"\nmax_batch_size: 8\n{io}\n{extra}\n', files={"1/model.py": source})


def step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    """One ``ensemble_scheduling.step`` entry."""
    ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1 {ins} {outs} }}'


def add_ensemble(root: Path, name: str, steps: list[str], extra: str = "") -> None:
    """An ensemble IN FP32 [4] -> OUT FP32 [4] (max_batch_size 8) over ``steps``."""
    add_model(
        root,
        name,
        f"""platform: "ensemble"
max_batch_size: 8
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{extra}
ensemble_scheduling {{ step [ {", ".join(steps)} ] }}
""",
    )


def build_repo(root: Path) -> Path:
    """The composing python models and the valid ensembles over them."""
    add_python(root, "add_one", ADD_ONE)
    add_python(root, "fail", FAIL)
    add_python(root, "repeat", REPEAT, "model_transaction_policy { decoupled: true }")
    add_python(
        root,
        "add2",
        ADD2,
        io="""
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
    )
    one = "add_one"
    add_ensemble(
        root,
        "ens_ok",
        [step(one, {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
    )
    add_ensemble(
        root,
        "ens_fail",
        [
            step(one, {"INPUT0": "IN"}, {"OUTPUT0": "a"}),
            step("fail", {"INPUT0": "a"}, {"OUTPUT0": "b"}),
            step(one, {"INPUT0": "b"}, {"OUTPUT0": "OUT"}),
        ],
    )
    add_ensemble(
        root,
        "ens_dec",
        [step("repeat", {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
    )
    # a diamond: two steps from IN run side by side, a third joins them (OUT = (IN + 1) + (IN + 1))
    add_ensemble(
        root,
        "ens_diamond",
        [
            step(one, {"INPUT0": "IN"}, {"OUTPUT0": "left"}),
            step(one, {"INPUT0": "IN"}, {"OUTPUT0": "right"}),
            step("add2", {"INPUT0": "left", "INPUT1": "right"}, {"OUTPUT0": "OUT"}),
        ],
    )
    # an ensemble as a step of another: OUT = ens_ok(IN) + 1 = IN + 3
    add_ensemble(
        root,
        "ens_nested",
        [step("ens_ok", {"IN": "IN"}, {"OUT": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
    )
    return root
