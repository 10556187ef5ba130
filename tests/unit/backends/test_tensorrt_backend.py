"""The tensorrt backend's entry points with a fake TensorRT and a fake CUDA runtime injected.

The fakes (``tests/support/fake_tensorrt.py``, ``tests/support/fake_cuda.py``)
follow TensorRT 10's and cuda-python's APIs, so this checks what the backend
does with them: auto-complete from the engine, binding by name, profile
choice, host<->device copies, errors. TensorRT itself runs only in
``scripts/gpu_check_tensorrt.sh`` on a machine with a GPU. The black-box load
error on a machine without a GPU is in ``tests/integration/test_framework_errors.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.fake_cuda import FakeCudaRuntime
from tests.support.fake_tensorrt import fake_tensorrt_module, plan
from tritium.core.backend.api import Backend, Model, ModelInstance, Request
from tritium.core.errors import TritonError
from tritium.core.model import devices

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Any:
    spec = importlib.util.spec_from_file_location(
        "tritium_backend_tensorrt_test", ROOT / "backends/tensorrt/libtriton_tensorrt.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> FakeCudaRuntime:
    fake = FakeCudaRuntime(device_count=2)
    cuda, bindings = types.ModuleType("cuda"), types.ModuleType("cuda.bindings")
    bindings.runtime = fake  # type: ignore[attr-defined]
    cuda.bindings = bindings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt_module())
    monkeypatch.setattr(devices, "gpu_ids", lambda: (0, 1))
    return fake


class _Sink:
    def __init__(self) -> None:
        self.responses: list[tuple[Any, Any]] = []

    def send_response(self, request, outputs, error, parameters, final):  # noqa: ANN001
        self.responses.append((dict(outputs or {}), error))

    def output_buffer(self, request, datatype, shape):  # noqa: ANN001
        raise AssertionError("not used")


def _model(tmp_path: Path, config: dict[str, Any], data: bytes, auto: bool = False) -> Model:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.plan").write_bytes(data)
    return Model("m", 1, {"name": "m", **config}, str(tmp_path / "m"), Backend("tensorrt", str(tmp_path), {}), auto)


IO = {
    "max_batch_size": 16,
    "input": [{"name": n, "data_type": "TYPE_FP32", "dims": [4]} for n in ("INPUT0", "INPUT1")],
    "output": [{"name": n, "data_type": "TYPE_FP32", "dims": [4]} for n in ("OUTPUT0", "OUTPUT1")],
}


def _request(sink: _Sink, a: np.ndarray, b: np.ndarray) -> Request:
    return Request("", 0, 0, {}, {"INPUT0": a, "INPUT1": b}, [], sink)


def test_auto_complete_reads_the_engine_and_its_profiles(backend, runtime, tmp_path: Path) -> None:
    model = _model(tmp_path, {}, plan([(1, 4, 8), (1, 16, 32)]), auto=True)
    backend.TRITONBACKEND_ModelInitialize(model)
    assert model.config["max_batch_size"] == 32 and model.config["dynamic_batching"] == {}
    assert model.config["input"] == IO["input"] and model.config["output"] == IO["output"]


def test_a_batch_is_bound_by_name_copied_in_and_out_and_split(backend, runtime, tmp_path: Path) -> None:
    model = _model(tmp_path, dict(IO), plan([(1, 4, 16)]))
    backend.TRITONBACKEND_ModelInitialize(model)
    instance = ModelInstance("m_0", "KIND_GPU", 1, model)
    backend.TRITONBACKEND_ModelInstanceInitialize(instance)
    sink = _Sink()
    rng = np.random.default_rng(0)
    pairs = [
        (rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32)) for n in (1, 3)
    ]
    backend.TRITONBACKEND_ModelInstanceExecute(instance, [_request(sink, a, b) for a, b in pairs])
    for (a, b), (outputs, error) in zip(pairs, sink.responses):
        assert error is None
        np.testing.assert_array_equal(outputs["OUTPUT0"], a + b)
        np.testing.assert_array_equal(outputs["OUTPUT1"], a - b)
    kinds = [c.kind for c in runtime.copies]
    assert kinds == [1, 1, 2, 2] and [c.count for c in runtime.copies] == [64, 64, 64, 64]  # 4 rows x 4 FP32
    assert all(c.device == 1 for c in runtime.copies)  # the instance's GPU
    backend.TRITONBACKEND_ModelInstanceFinalize(instance)
    assert runtime.allocations == {}


def test_the_profile_that_holds_the_batch_is_chosen_and_a_group_can_restrict_them(
    backend, runtime, tmp_path: Path
) -> None:
    config = dict(IO, instance_group=[{"name": "m", "count": 1, "kind": "KIND_GPU", "profile": ["0"]}])
    model = _model(tmp_path, config, plan([(1, 2, 4), (5, 8, 16)]))
    backend.TRITONBACKEND_ModelInitialize(model)
    free = ModelInstance("any_0", "KIND_GPU", 0, model)  # not in the group: every profile
    backend.TRITONBACKEND_ModelInstanceInitialize(free)
    sink = _Sink()
    a = np.ones((6, 4), np.float32)
    backend.TRITONBACKEND_ModelInstanceExecute(free, [_request(sink, a, a)])
    assert sink.responses[0][1] is None and free.state["context"].profiles_set == [1]
    restricted = ModelInstance("m_0", "KIND_GPU", 0, model)
    backend.TRITONBACKEND_ModelInstanceInitialize(restricted)
    with pytest.raises(
        TritonError,
        match=r"no optimization profile of the engine accepts the input shapes "
        r"\(INPUT0 \[6, 4\], INPUT1 \[6, 4\]\)",
    ):
        backend.TRITONBACKEND_ModelInstanceExecute(restricted, [_request(_Sink(), a, a)])


@pytest.mark.parametrize(
    ("config", "kind", "data", "message"),
    [
        (IO, "KIND_CPU", plan([(1, 4, 16)]), "TensorRT engines run only on GPUs, but instance 'm_0' is KIND_CPU"),
        (IO, "KIND_GPU", b"\x00not an engine", "TensorRT could not deserialize"),
        (
            dict(IO, input=[{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}]),
            "KIND_GPU",
            plan([(1, 4, 16)]),
            "unexpected inference input 'IN', allowed inputs are: INPUT0, INPUT1",
        ),
        (
            dict(IO, output=[{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [4]}]),
            "KIND_GPU",
            plan([(1, 4, 16)]),
            "unexpected datatype TYPE_INT32 for inference output 'OUTPUT0', expecting TYPE_FP32",
        ),
    ],
)
def test_instance_errors(backend, runtime, tmp_path: Path, config, kind: str, data: bytes, message: str) -> None:
    model = _model(tmp_path, dict(config), data)
    backend.TRITONBACKEND_ModelInitialize(model)
    with pytest.raises(TritonError, match=message.replace("(", r"\(").replace("[", r"\[")):
        backend.TRITONBACKEND_ModelInstanceInitialize(ModelInstance("m_0", kind, 0, model))


def test_without_gpu_and_packages_the_message_names_each_missing_part(backend, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(devices, "gpu_ids", lambda: ())
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # import tensorrt raises ImportError
    for name in ("cuda", "cuda.bindings", "cuda.bindings.runtime", "cuda.cudart"):  # torch may have imported them
        monkeypatch.setitem(sys.modules, name, None)
    model = _model(tmp_path, dict(IO), plan([(1, 4, 16)]))
    with pytest.raises(TritonError) as info:
        backend.TRITONBACKEND_ModelInitialize(model)
    message = info.value.message
    assert message.startswith(
        "the tensorrt backend runs TensorRT engines on NVIDIA GPUs; this machine lacks an NVIDIA GPU"
    )
    assert (
        "the tensorrt package (import of tensorrt halted; None in sys.modules; pip install 'tritium[tensorrt]')"
        in message
    )
    assert "the cuda-python package (" in message
