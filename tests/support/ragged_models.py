"""Models that use ragged batching: one ragged input and one batch input of each kind.

The ONNX and TorchScript models compute the same thing. Inputs: ``INPUT``
(FP32, ragged, 1-D in the model) and the six batch inputs ``E`` (element
count, FP32), ``A`` (accumulated, INT32), ``Z`` (accumulated with zero,
FP32), ``M`` (max element count as shape, INT32), ``S`` (item shape, INT32
``[batch, 1]``) and ``F`` (item shape flattened, FP32). Outputs: ``OUT =
2 * INPUT`` (a batch output scattered with INPUT's shape) and, for each batch
input X, ``X_OUT``: X flattened and repeated once per batch item (``M_OUT``:
M's length, INT64), so each request sees the whole batch's values.
"""

from __future__ import annotations

import warnings
from pathlib import Path

__all__ = ["BATCH_INPUTS", "IO_CONFIG", "ragged_onnx", "ragged_torchscript"]

#: (target name, kind, data type) of the models' batch inputs
BATCH_INPUTS = [
    ("E", "BATCH_ELEMENT_COUNT", "TYPE_FP32"),
    ("A", "BATCH_ACCUMULATED_ELEMENT_COUNT", "TYPE_INT32"),
    ("Z", "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "TYPE_FP32"),
    ("M", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", "TYPE_INT32"),
    ("S", "BATCH_ITEM_SHAPE", "TYPE_INT32"),
    ("F", "BATCH_ITEM_SHAPE_FLATTEN", "TYPE_FP32"),
]
_OUT_TYPES = {
    "E": "TYPE_FP32",
    "A": "TYPE_INT32",
    "Z": "TYPE_FP32",
    "M": "TYPE_INT64",
    "S": "TYPE_INT32",
    "F": "TYPE_FP32",
}

#: the config's inputs, batch inputs, outputs and batch output (both models)
IO_CONFIG = (
    'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
    + "batch_input [\n"
    + ",\n".join(
        f'  {{ kind: {kind} target_name: "{name}" data_type: {dtype} source_input: "INPUT" }}'
        for name, kind, dtype in BATCH_INPUTS
    )
    + "\n]\noutput [\n"
    + '  { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] },\n'
    + ",\n".join(f'  {{ name: "{n}_OUT" data_type: {t} dims: [ -1 ] }}' for n, t in _OUT_TYPES.items())
    + "\n]\n"
    + 'batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]\n'
)


def ragged_onnx(path: Path) -> None:
    """The ONNX model (opset 17)."""
    import onnx
    from onnx import TensorProto, helper

    f32, i32, i64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
    nodes = [
        helper.make_node("Mul", ["INPUT", "two"], ["OUT"]),
        helper.make_node("Shape", ["S"], ["items"], start=0, end=1),
        helper.make_node("Concat", ["items", "one"], ["rows_shape"], axis=0),
        helper.make_node("Shape", ["M"], ["M_len"]),
    ]
    for name, source in (("E", "E"), ("A", "A"), ("Z", "Z"), ("M", "M_len"), ("S", "S"), ("F", "F")):
        nodes.append(helper.make_node("Reshape", [source, "row"], [f"{name}_row"]))
        nodes.append(helper.make_node("Expand", [f"{name}_row", "rows_shape"], [f"{name}_OUT"]))
    graph = helper.make_graph(
        nodes,
        "ragged",
        [
            helper.make_tensor_value_info("INPUT", f32, ["n"]),
            helper.make_tensor_value_info("E", f32, ["r"]),
            helper.make_tensor_value_info("A", i32, ["r"]),
            helper.make_tensor_value_info("Z", f32, ["r1"]),
            helper.make_tensor_value_info("M", i32, ["m"]),
            helper.make_tensor_value_info("S", i32, ["b", "k"]),
            helper.make_tensor_value_info("F", f32, ["bk"]),
        ],
        [
            helper.make_tensor_value_info("OUT", f32, ["n"]),
            *(
                helper.make_tensor_value_info(f"{n}_OUT", {"FP32": f32, "INT32": i32, "INT64": i64}[t[5:]], ["b", None])
                for n, t in _OUT_TYPES.items()
            ),
        ],
        [
            helper.make_tensor("two", f32, [], [2.0]),
            helper.make_tensor("one", i64, [1], [1]),
            helper.make_tensor("row", i64, [2], [1, -1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def ragged_torchscript(path: Path) -> None:
    """The TorchScript model (``forward(INPUT, E, A, Z, M, S, F)``: config names are the argument names)."""
    import torch

    class Ragged(torch.nn.Module):
        def rows(self, value: torch.Tensor, items: int) -> torch.Tensor:
            return value.reshape(1, -1).expand(items, -1)

        def forward(
            self,
            INPUT: torch.Tensor,  # noqa: N803 - the config's input names
            E: torch.Tensor,  # noqa: N803
            A: torch.Tensor,  # noqa: N803
            Z: torch.Tensor,  # noqa: N803
            M: torch.Tensor,  # noqa: N803
            S: torch.Tensor,  # noqa: N803
            F: torch.Tensor,  # noqa: N803
        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            items = S.shape[0]
            length = torch.tensor([M.shape[0]], dtype=torch.int64)
            return (
                INPUT * 2,
                self.rows(E, items),
                self.rows(A, items),
                self.rows(Z, items),
                self.rows(length, items),
                self.rows(S, items),
                self.rows(F, items),
            )

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript (still Triton's format)
        torch.jit.save(torch.jit.script(Ragged()), str(path))
