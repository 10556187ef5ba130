"""Tiny framework models for the backend suites: TorchScript, torch.export and ONNX files built in a test.

Each builder writes one model file and returns nothing; the reference
computation a test compares against is the same framework run in-process
(:func:`torch_reference`, :func:`onnx_reference`). The stateful pair
(:func:`stateful_torchscript`, :func:`stateful_onnx`) computes, per step,
``state' = 0.5 * state + x`` and ``y = 2 * state'`` with ``x``, ``y`` and the
state FP32 ``[batch, 2]``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "STATE_DECAY",
    "add_sub_onnx",
    "add_sub_torchscript",
    "weighty_torchscript",
    "dict_torchscript",
    "exported_program",
    "load_torchscript",
    "named_torchscript",
    "offset_onnx",
    "onnx_reference",
    "openvino_ir",
    "raising_torchscript",
    "state_step",
    "stateful_onnx",
    "stateful_torchscript",
    "strings_torchscript",
    "without_package",
]

STATE_DECAY = 0.5


def _save_script(module: Any, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript (still Triton's format)
        torch.jit.save(torch.jit.script(module), str(path))


def load_torchscript(path: Path | str) -> Any:
    """``torch.jit.load`` without torch 2.13's deprecation warning (the reference run in a test)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(str(path))


def add_sub_torchscript(path: Path) -> None:
    """``forward(a, b) -> (a + b, a - b)`` (FP32, any shape)."""
    import torch

    class AddSub(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a + b, a - b

    _save_script(AddSub(), path)


def weighty_torchscript(path: Path, mib: int) -> None:
    """``forward(x) -> x + weight[:4]`` (FP32 [4]) with a ``mib`` MiB weight of 1.5s: the memory of
    its loaded copies is easy to see."""
    import torch

    class Weighty(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.full((mib * 262144,), 1.5), requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.weight[:4]

    _save_script(Weighty(), path)


def named_torchscript(path: Path) -> None:
    """``forward(scale, x) -> x * scale + 1`` (named arguments; FP32)."""
    import torch

    class Named(torch.nn.Module):
        def forward(self, scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return x * scale + 1

    _save_script(Named(), path)


def dict_torchscript(path: Path) -> None:
    """``forward(inputs: Dict[str, Tensor]) -> inputs["A"] * 10 + inputs["B"]``."""
    import torch

    class FromDict(torch.nn.Module):
        def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
            return inputs["A"] * 10 + inputs["B"]

    _save_script(FromDict(), path)


def strings_torchscript(path: Path) -> None:
    """``forward(texts: List[str]) -> (lengths INT64 [n], upper-cased texts List[str])``."""
    import torch

    class Strings(torch.nn.Module):
        def forward(self, texts: list[str]) -> tuple[torch.Tensor, list[str]]:
            return torch.tensor([len(t) for t in texts], dtype=torch.int64), [t.upper() for t in texts]

    _save_script(Strings(), path)


def raising_torchscript(path: Path) -> None:
    """``forward(x)`` raises ``ValueError("x must be non-negative")`` when any element is negative."""
    import torch

    class Raising(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool((x < 0).any()):
                raise ValueError("x must be non-negative")
            return x.sqrt()

    _save_script(Raising(), path)


def stateful_torchscript(path: Path) -> None:
    """``forward(INPUT__0, STATE_IN__1) -> (OUTPUT__0, STATE_OUT__1)`` (see the module docstring)."""
    import torch

    class Stateful(torch.nn.Module):
        def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            new_state = state * 0.5 + x
            return new_state * 2, new_state

    _save_script(Stateful(), path)


def stateful_onnx(path: Path) -> None:
    """ONNX inputs ``INPUT``, ``STATE_IN``; outputs ``OUTPUT``, ``STATE_OUT`` (see the module docstring)."""
    import onnx
    from onnx import TensorProto, helper

    shape = ["batch", 2]
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["STATE_IN", "half"], ["decayed"]),
            helper.make_node("Add", ["decayed", "INPUT"], ["STATE_OUT"]),
            helper.make_node("Mul", ["STATE_OUT", "two"], ["OUTPUT"]),
        ],
        "stateful",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("INPUT", "STATE_IN")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("OUTPUT", "STATE_OUT")],
        [
            helper.make_tensor("half", TensorProto.FLOAT, [], [STATE_DECAY]),
            helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def add_sub_onnx(path: Path, batch: int | str = "batch") -> None:
    """ONNX ``OUTPUT0 = INPUT0 + INPUT1``, ``OUTPUT1 = INPUT0 - INPUT1``, FP32 ``[batch, 4]``
    (``batch`` a symbol for a dynamic batch dimension, or a fixed size)."""
    import onnx
    from onnx import TensorProto, helper

    shape = [batch, 4]
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("INPUT0", "INPUT1")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("OUTPUT0", "OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def offset_onnx(offset: float) -> bytes:
    """The bytes of an ONNX model ``OUTPUT0 = INPUT0 + offset``, FP32 ``[4]`` (one model of many
    that each answer with their own values)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "offset"], ["OUTPUT0"])],
        "offset",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [4])],
        [helper.make_tensor("offset", TensorProto.FLOAT, [], [float(offset)])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def openvino_ir(onnx_path: Path, xml_path: Path) -> None:
    """Convert an ONNX file to OpenVINO IR (``.xml`` + ``.bin``) with ``openvino.convert_model``."""
    from tritium.backends.openvino.libtriton_openvino import import_openvino

    ov = import_openvino()

    xml_path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.convert_model(str(onnx_path)), str(xml_path))


def state_step(x: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of the stateful models in numpy: ``(output, new state)``."""
    new_state = (state * np.float32(STATE_DECAY) + x).astype(np.float32)
    return (new_state * np.float32(2)).astype(np.float32), new_state


def exported_program(path: Path) -> None:
    """A ``torch.export`` program: ``forward(x, y) -> (relu(x) * y, x.sum(dim=1))``, FP32 ``[batch, 4]``,
    the batch dimension dynamic (1..64)."""
    import torch

    class Exported(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.relu(x) * y, x.sum(dim=1)

    batch = torch.export.Dim("batch", min=1, max=64)
    example = (torch.randn(2, 4), torch.randn(2, 4))
    program = torch.export.export(Exported(), example, dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.export.save(program, str(path))


def onnx_reference(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run an ONNX file with onnxruntime in this process (every output)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def without_package(root: Path, package: str) -> dict[str, str]:
    """Environment for a server whose workers cannot import ``package`` (a stand-in on PYTHONPATH
    raises ImportError, as an absent package does): ``ServerProcess(..., env=without_package(...))``."""
    fake = root / f"no_{package}" / package
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"raise ImportError(\"No module named '{package}'\")\n")
    return {"PYTHONPATH": str(fake.parent)}
