"""A fake ``tensorrt`` module for testing the tensorrt backend on machines without a GPU.

It has the parts of TensorRT 10's Python API that the backend calls, with the
same names and calling conventions (``Runtime.deserialize_cuda_engine``,
``ICudaEngine.num_io_tensors`` / ``get_tensor_name`` / ``get_tensor_mode`` /
``get_tensor_dtype`` / ``get_tensor_shape`` / ``get_tensor_profile_shape``,
``IExecutionContext.set_optimization_profile_async`` / ``set_input_shape`` /
``get_tensor_shape`` / ``set_tensor_address`` / ``execute_async_v3``). A
"plan" is JSON (:func:`plan`) describing an elementwise add/sub engine:
``OUTPUT0 = INPUT0 + INPUT1``, ``OUTPUT1 = INPUT0 - INPUT1``, FP32, with
optimisation profiles. Execution reads and writes "device memory" at the
addresses it was given, which with :class:`tests.support.fake_cuda.FakeCudaRuntime`
is host memory: so the backend's binding by name, profile choice and copies
are checked, TensorRT itself is not (the GPU check script does that).
"""

from __future__ import annotations

import ctypes
import enum
import json
import types
from typing import Any

import numpy as np

__all__ = ["fake_tensorrt_module", "plan"]


def plan(profiles: list[tuple[int, int, int]], width: int = 4) -> bytes:
    """A fake serialized engine: one ``(min, opt, max)`` batch range per profile, inputs ``[batch, width]``."""
    return json.dumps({"profiles": profiles, "width": width}).encode()


class TensorIOMode(enum.Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4


class Logger:
    WARNING = 2

    def __init__(self, level: int) -> None:
        self.level = level


class _Context:
    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.profile = 0
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self.profiles_set: list[int] = []

    def set_optimization_profile_async(self, profile: int, stream: int) -> bool:
        del stream
        self.profile = profile
        self.profiles_set.append(profile)
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        low, _opt, high = self.engine.get_tensor_profile_shape(name, self.profile)
        if len(shape) != 2 or not (low[0] <= shape[0] <= high[0]) or shape[1] != self.engine.width:
            return False
        self.shapes[name] = tuple(shape)
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        if name in self.shapes:
            return self.shapes[name]
        return self.shapes.get("INPUT0", (-1, self.engine.width))

    def set_tensor_address(self, name: str, address: int) -> bool:
        self.addresses[name] = address
        return True

    def execute_async_v3(self, stream: int) -> bool:
        del stream
        shape = self.shapes["INPUT0"]
        count = int(np.prod(shape))

        def read(name: str) -> np.ndarray:
            return np.frombuffer(ctypes.string_at(self.addresses[name], count * 4), np.float32).reshape(shape)

        a, b = read("INPUT0"), read("INPUT1")
        for name, value in (("OUTPUT0", a + b), ("OUTPUT1", a - b)):
            data = np.ascontiguousarray(value, np.float32).tobytes()
            ctypes.memmove(self.addresses[name], data, len(data))
        return True


class _Engine:
    NAMES = ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.profiles = [tuple(p) for p in spec["profiles"]]
        self.width = int(spec["width"])
        self.contexts: list[_Context] = []

    @property
    def num_io_tensors(self) -> int:
        return len(self.NAMES)

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.profiles)

    def get_tensor_name(self, index: int) -> str:
        return self.NAMES[index]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode.INPUT if name.startswith("INPUT") else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> DataType:
        del name
        return DataType.FLOAT

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        del name
        return (-1, self.width)

    def is_shape_inference_io(self, name: str) -> bool:
        del name
        return False

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        del name
        low, opt, high = self.profiles[profile]
        return [(low, self.width), (opt, self.width), (high, self.width)]

    def create_execution_context(self) -> _Context:
        context = _Context(self)
        self.contexts.append(context)
        return context


class Runtime:
    def __init__(self, logger: Logger) -> None:
        self.logger = logger

    def deserialize_cuda_engine(self, data: bytes) -> _Engine | None:
        try:
            return _Engine(json.loads(data))
        except (ValueError, KeyError, TypeError):
            return None  # as TensorRT does for a plan it cannot read


def fake_tensorrt_module() -> types.ModuleType:
    """A module object to put at ``sys.modules["tensorrt"]``."""
    module = types.ModuleType("tensorrt")
    module.__version__ = "10.0.0-fake"
    module.Logger = Logger
    module.Runtime = Runtime
    module.TensorIOMode = TensorIOMode
    module.DataType = DataType
    module.nptype = lambda dtype: {
        DataType.FLOAT: np.float32,
        DataType.HALF: np.float16,
        DataType.INT8: np.int8,
        DataType.INT32: np.int32,
        DataType.BOOL: np.bool_,
    }[dtype]
    return module
