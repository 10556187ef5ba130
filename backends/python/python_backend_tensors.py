"""Tensors and DLPack of the ``pb_utils`` API (part of ``c_python_backend_utils``).

:class:`Tensor` (a named numpy array, with its KServe datatype) and the DLPack
exchange both ways: ``Tensor.to_dlpack``/``__dlpack__`` hand out CPU tensors,
``Tensor.from_dlpack`` takes capsules or objects with ``__dlpack__`` (torch,
numpy, cupy), copying GPU tensors to host memory through torch or cupy. Runs
only inside a tritium worker hosting a ``python`` model.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np
from python_backend_errors import TritonModelException

_NUMPY_DATATYPE = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
}
# TRITONSERVER_DataType values
_DATATYPE_ENUM = {
    "BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14,
}  # fmt: skip
_KDLCPU, _KDLBFLOAT = 1, 4


def _datatype_of(dtype: np.dtype) -> str:
    if dtype.kind in ("O", "S"):
        return "BYTES"
    datatype = _NUMPY_DATATYPE.get(dtype.newbyteorder("=")) if dtype.byteorder == ">" else _NUMPY_DATATYPE.get(dtype)
    if datatype is None:
        raise TritonModelException("NumPy dtype is not supported.")
    return datatype


class Tensor:
    """A named tensor: ``Tensor(name, numpy_array)``.

    Request inputs are read-only numpy views of the shared-memory arena (no
    copy); BYTES tensors are object arrays of ``bytes``; BF16 tensors hold the
    raw bits as ``uint16``.
    """

    __slots__ = ("_array", "_datatype", "_name")

    def __init__(self, name: str, numpy_array: np.ndarray) -> None:
        if not isinstance(name, str) or not isinstance(numpy_array, np.ndarray):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument types are supported:\n"
                "    1. Tensor(arg0: str, arg1: numpy.ndarray)\n\n"
                f"Invoked with: {name!r}, {type(numpy_array).__name__}"
            )
        dtype = numpy_array.dtype
        datatype = _NUMPY_DATATYPE.get(dtype)  # a native-order numeric dtype: the usual case
        if datatype is None:
            datatype = _datatype_of(dtype)
            if datatype != "BYTES" and dtype.byteorder == ">":
                numpy_array = numpy_array.astype(dtype.newbyteorder("="))
        if not numpy_array.flags.c_contiguous:
            numpy_array = np.ascontiguousarray(numpy_array)
        self._name = name
        self._array = numpy_array
        self._datatype = datatype

    @classmethod
    def _wrap(cls, name: str, array: np.ndarray, datatype: str) -> Tensor:
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array
        tensor._datatype = datatype
        return tensor

    def name(self) -> str:
        """The tensor name."""
        return self._name

    def as_numpy(self) -> np.ndarray:
        """The tensor as a numpy array (a read-only view of shared memory for request inputs)."""
        return self._array

    def shape(self) -> list[int]:
        """The shape, as a list."""
        return [int(d) for d in self._array.shape]

    def triton_dtype(self) -> int:
        """The ``TRITONSERVER_DataType`` value (``TRITONSERVER_TYPE_FP32`` is 11)."""
        return _DATATYPE_ENUM[self._datatype]

    def is_cpu(self) -> bool:
        """True: tritium tensors always live in host memory."""
        return True

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the tensor (CPU).

        A read-only tensor (a request input: shared memory) is copied once
        first, because DLPack cannot mark memory read-only.
        """
        if self._datatype == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        array = self._array
        if self._datatype == "BF16":
            torch = sys.modules.get("torch")
            if torch is not None:  # hand out a real bfloat16 tensor
                as_torch = torch.from_numpy(array.copy().view(np.int16)).view(torch.bfloat16)
                return torch.utils.dlpack.to_dlpack(as_torch)
        if not array.flags.writeable:
            array = array.copy()
        return array.__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        del stream
        return self.to_dlpack()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDLCPU, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_object: Any) -> Tensor:
        """A tensor from a DLPack capsule or an object with ``__dlpack__`` (torch, numpy, ...).

        CPU tensors are used in place (no copy). A GPU tensor is copied to host
        memory through torch or cupy when the model has imported one of them.
        """
        if not isinstance(name, str):
            raise TypeError("from_dlpack(name, dlpack_object): name must be a str")
        array, datatype = _from_dlpack(dlpack_object)
        if datatype is None:
            datatype = _datatype_of(array.dtype)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        return Tensor._wrap(name, array, datatype)

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._datatype}, shape={self.shape()})"


class _DLManagedTensorHead(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
    ]


class _Capsule:
    """Gives a raw DLPack capsule the ``__dlpack__`` protocol numpy's ``from_dlpack`` wants."""

    def __init__(self, capsule: Any, device: tuple[int, int]) -> None:
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, stream: Any = None) -> Any:
        del stream
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def _capsule_head(capsule: Any) -> _DLManagedTensorHead:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    if not is_valid(capsule, b"dltensor"):
        raise TritonModelException(
            "from_dlpack: the capsule is not an unused DLPack tensor (a capsule can be consumed only once)"
        )
    address = get_pointer(capsule, b"dltensor")
    return _DLManagedTensorHead.from_address(address)


def _from_torch(tensor: Any) -> tuple[np.ndarray, str | None]:
    torch = sys.modules["torch"]
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16), "BF16"
    return tensor.numpy(), None


def _from_dlpack(obj: Any) -> tuple[np.ndarray, str | None]:
    if isinstance(obj, Tensor):
        return obj._array, obj._datatype
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_torch(obj)
    if hasattr(obj, "__dlpack__"):
        device = tuple(obj.__dlpack_device__()) if hasattr(obj, "__dlpack_device__") else (_KDLCPU, 0)
        if device[0] != _KDLCPU:
            cupy = sys.modules.get("cupy")
            if cupy is not None:
                return cupy.asnumpy(cupy.from_dlpack(obj)), None
            raise TritonModelException(_gpu_message(device))
        try:
            return np.from_dlpack(obj), None
        except (BufferError, TypeError, RuntimeError) as exc:
            raise TritonModelException(f"from_dlpack: {exc}") from None
    if type(obj).__name__ == "PyCapsule":
        head = _capsule_head(obj)
        device = (int(head.device_type), int(head.device_id))
        if device[0] != _KDLCPU or head.code == _KDLBFLOAT:
            if torch is not None:
                return _from_torch(torch.utils.dlpack.from_dlpack(obj))
            cupy = sys.modules.get("cupy")
            if cupy is not None and device[0] != _KDLCPU:
                return cupy.asnumpy(cupy.from_dlpack(_Capsule(obj, device))), None
            if device[0] != _KDLCPU:
                raise TritonModelException(_gpu_message(device))
            raise TritonModelException("from_dlpack: a bfloat16 DLPack tensor needs torch (import torch in the model)")
        try:
            return np.from_dlpack(_Capsule(obj, device)), None
        except (BufferError, TypeError, RuntimeError) as exc:
            raise TritonModelException(f"from_dlpack: {exc}") from None
    raise TritonModelException(
        f"from_dlpack: expected a DLPack capsule or an object with __dlpack__, got {type(obj).__name__}"
    )


def _gpu_message(device: tuple[int, int]) -> str:
    return (
        f"from_dlpack: the tensor lives on DLPack device {device} (not the CPU); tritium moves tensors "
        "through host shared memory and copies a GPU tensor to the host only through torch or cupy: "
        "import one of them in the model, or move the tensor to the CPU first"
    )
