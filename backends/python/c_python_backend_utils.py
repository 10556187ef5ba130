"""The objects Triton's python backend implements natively (its ``c_python_backend_utils`` module).

Model code reaches them through ``triton_python_backend_utils`` (``pb_utils``),
which re-exports them, exactly as in Triton: :class:`Tensor`,
:class:`InferenceRequest`, :class:`InferenceResponse`,
:class:`InferenceResponseSender`, :class:`ResponseIterator`,
:class:`TritonError`, :class:`TritonModelException`, :class:`Logger`,
:class:`MetricFamily`, :class:`PreferredMemory`, :class:`InferenceTrace` and
the functions ``get_model_dir``, ``is_model_ready``, ``load_model``,
``unload_model``.

Runs only inside a tritium worker process hosting a ``python`` model: the
backend (``libtriton_python.py``) puts this folder on ``sys.path`` there and
installs the per-instance context with :func:`_set_context`. Frames of this
file are left out of the tracebacks model errors carry, as Triton's C++ frames
are.
"""

from __future__ import annotations

import asyncio
import ctypes
import enum
import json
import logging
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from python_backend_context import InstanceContext

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "Metric",
    "MetricFamily",
    "PreferredMemory",
    "ResponseIterator",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "get_model_dir",
    "is_model_ready",
    "load_model",
    "unload_model",
]

_log = logging.getLogger("tritium.python_model")

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1
#: the most model-file bytes one ``load_model`` call carries (they travel in one frame to the core)
_MAX_FILES_BYTES = 128 * 1024 * 1024

#: the context of the model instance this worker hosts (set by the backend)
_context: InstanceContext | None = None


def _set_context(context: InstanceContext | None) -> None:
    global _context
    _context = context


# -- errors -----------------------------------------------------------------------------------
class TritonModelException(Exception):
    """Raised by pb_utils calls that fail (and by model code, to fail a request)."""


class _ErrorCode(enum.IntEnum):
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __repr__(self) -> str:
        return f"<__ErrorCode.{self.name}: {int(self)}>"


class TritonError:
    """An error a response carries: ``TritonError(message, code=TritonError.INTERNAL)``.

    Not an exception (as in Triton): put it in ``InferenceResponse(error=...)``.
    """

    UNKNOWN = _ErrorCode.UNKNOWN
    INTERNAL = _ErrorCode.INTERNAL
    NOT_FOUND = _ErrorCode.NOT_FOUND
    INVALID_ARG = _ErrorCode.INVALID_ARG
    UNAVAILABLE = _ErrorCode.UNAVAILABLE
    UNSUPPORTED = _ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = _ErrorCode.ALREADY_EXISTS
    CANCELLED = _ErrorCode.CANCELLED

    __slots__ = ("_code", "_message")

    def __init__(self, message: str, code: int = _ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str):
            raise TypeError(f"TritonError(message, code): message must be a str, got {type(message).__name__}")
        try:
            self._code = _ErrorCode(int(code))
        except (TypeError, ValueError):
            raise TypeError(f"TritonError(message, code): unknown error code {code!r}") from None
        self._message = message

    def message(self) -> str:
        """The error message."""
        return self._message

    def code(self) -> _ErrorCode:
        """The error code (``TritonError.INTERNAL``, ...)."""
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self._code!r})"


# -- tensors --------------------------------------------------------------------------------
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


# -- responses --------------------------------------------------------------------------------
class InferenceResponse:
    """``InferenceResponse(output_tensors=[...], error=None)``: the response to one request."""

    __slots__ = ("_error", "_outputs", "_parameters")

    def __init__(
        self,
        output_tensors: Sequence[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        outputs = list(output_tensors) if output_tensors is not None else []
        for tensor in outputs:
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    "InferenceResponse(output_tensors, error): output_tensors must be a list of "
                    f"pb_utils.Tensor, found {type(tensor).__name__}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(
                f"InferenceResponse(output_tensors, error): error must be a pb_utils.TritonError, "
                f"found {type(error).__name__}"
            )
        self._outputs = outputs
        self._error = error
        self._parameters = _parameters_dict(parameters, "InferenceResponse")

    def output_tensors(self) -> list[Tensor]:
        """The output tensors."""
        return list(self._outputs)

    def has_error(self) -> bool:
        """True when the response carries an error."""
        return self._error is not None

    def error(self) -> TritonError | None:
        """The error, or None."""
        return self._error

    def parameters(self) -> str:
        """The response parameters, as a JSON string."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def __repr__(self) -> str:
        return f"InferenceResponse(outputs={[t.name() for t in self._outputs]}, error={self._error!r})"


def _parameters_dict(parameters: Any, what: str) -> dict[str, Any]:
    if parameters is None or parameters == "":
        return {}
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters)
        except ValueError as exc:
            raise TritonModelException(f"{what}: parameters is not valid JSON: {exc}") from None
    if not isinstance(parameters, dict):
        raise TypeError(f"{what}: parameters must be a dict or a JSON string, got {type(parameters).__name__}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"{what}: parameter keys must be strings, found {type(key).__name__}")
        if not isinstance(value, (bool, int, float, str)):
            raise TritonModelException(
                f"{what}: expect parameters values to have type bool/int/float/str, found type "
                f"{type(value).__name__} for key '{key}'"
            )
    return dict(parameters)


class _RequestState:
    """What one incoming request shares between its InferenceRequest and its response sender."""

    __slots__ = ("__weakref__", "closed", "context", "lock", "pending", "request")

    def __init__(self, request: Any, context: InstanceContext) -> None:
        self.request = request  # tritium.core.backend.api.Request
        self.context = context
        self.lock = threading.RLock()
        self.closed = False
        self.pending: InferenceResponse | None = None  # not decoupled: a response sent without the final flag

    def reschedule(self) -> None:
        """Release the request for another run (no final response) unless it is complete."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.pending = None
            self.request.reschedule()

    def finish_with_error(self, message: str) -> None:
        """Send a final error response unless the request is already complete."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.pending = None
            self.context.send_error(self.request, message)

    def __del__(self) -> None:
        # Nothing can answer the request any more (its InferenceRequest and sender are gone):
        # end it rather than leave the client waiting forever.
        try:
            if not self.closed and self.context is not None:
                self.closed = True
                self.context.abandoned(self.request)
        except Exception:  # interpreter shutdown, closed channel
            pass


class InferenceResponseSender:
    """Sends the responses of one request: ``send(response=None, flags=0)``, from any thread."""

    __slots__ = ("_state",)

    def __init__(self, state: _RequestState) -> None:
        self._state = state

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send ``response``; ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL`` ends the request.

        :raises TritonModelException: when the sender was closed by a final
            response, or for a response without the final flag in a model
            that is not decoupled and already sent one.
        """
        state = self._state
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send(): response must be a pb_utils.InferenceResponse, got {type(response).__name__}")
        final = bool(int(flags) & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is None and not final:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        with state.lock:
            if state.closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if not state.context.decoupled:
                # a model that is not decoupled sends exactly one response, and the final flag
                if response is not None and state.pending is not None:
                    raise TritonModelException(
                        "Unable to send response. A model that is not decoupled sends exactly one response per request."
                    )
                if not final:
                    state.pending = response
                    return
                response = response if response is not None else state.pending
                state.pending = None
                if response is None:
                    state.closed = True
                    state.context.send_error(
                        state.request,
                        f"model '{state.context.model_name}' is not decoupled, but its response sender sent "
                        "the final flag without any response",
                    )
                    return
            if final:
                state.closed = True
            state.context.send(state.request, response, final)

    def is_cancelled(self) -> bool:
        """False: tritium does not report request cancellation to models yet."""
        return False


class InferenceTrace:
    """Accepted for compatibility; tritium does not trace BLS requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs


class PreferredMemory:
    """Accepted for compatibility: tritium returns BLS outputs in host memory."""

    def __init__(self, preferred_memory_type: int = TRITONSERVER_MEMORY_CPU, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


# -- requests --------------------------------------------------------------------------------
class InferenceRequest:
    """A request: one the model receives in ``execute``, or a BLS request it builds.

    BLS: ``InferenceRequest(model_name=..., inputs=[...], requested_output_names=[...],
    request_id="", correlation_id=0, model_version=-1, flags=0, timeout=0,
    parameters=None).exec()`` (or ``exec(decoupled=True)``, ``async_exec()``).
    """

    __slots__ = (
        "_correlation_id",
        "_flags",
        "_inputs",
        "_model_name",
        "_model_version",
        "_parameters",
        "_release_flags",
        "_request_id",
        "_requested",
        "_sender",
        "_state",
        "_timeout",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: Sequence[Tensor] | None = None,
        requested_output_names: Sequence[str] | None = None,
        model_name: str | None = None,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        del preferred_memory, trace
        if not isinstance(model_name, str) or not model_name:
            raise TypeError("InferenceRequest(): model_name (the model to call) is required")
        tensors = list(inputs or [])
        for tensor in tensors:
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    f"InferenceRequest(): inputs must be pb_utils.Tensor objects, found {type(tensor).__name__}"
                )
        names = (
            [requested_output_names] if isinstance(requested_output_names, str) else list(requested_output_names or [])
        )
        self._model_name = model_name
        self._model_version = int(model_version)
        self._request_id = str(request_id)
        self._correlation_id = correlation_id
        self._flags = int(flags)
        self._timeout = int(timeout)
        self._parameters = _parameters_dict(parameters, "InferenceRequest")
        self._inputs: list[Tensor] | None = tensors
        self._requested: list[str] = [str(n) for n in names]
        self._state: _RequestState | None = None
        self._sender: InferenceResponseSender | None = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    @classmethod
    def _incoming(cls, request: Any, context: InstanceContext) -> InferenceRequest:
        """Wrap a request the core gave the backend (``tritium.core.backend.api.Request``)."""
        self = cls.__new__(cls)
        params = request.parameters or {}  # the core keeps its own (sequence_id, timeout, ...) out
        flags = int(request.flags or 0)
        correlation = request.correlation_id or 0
        timeout = int(request.timeout_us or 0)
        self._model_name = context.model_name
        self._model_version = context.model_version
        self._request_id = request.id
        self._correlation_id = correlation
        self._flags = flags
        self._timeout = timeout
        self._parameters = params
        self._inputs = None
        self._requested = list(request.requested_output_names) or context.output_names
        self._state = _RequestState(request, context)
        self._sender = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        return self

    # -- what models read ------------------------------------------------------------------
    def request_id(self) -> str:
        """The request id ("" when none)."""
        return self._request_id

    def correlation_id(self) -> int | str:
        """The sequence correlation id (0 when none)."""
        return self._correlation_id

    def flags(self) -> int:
        """Sequence flags (``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` = 1, ``..._END`` = 2)."""
        return self._flags

    def set_flags(self, flags: int) -> None:
        """Set the flags (for BLS requests)."""
        self._flags = int(flags)

    def timeout(self) -> int:
        """The request timeout in microseconds (0: none)."""
        return self._timeout

    def parameters(self) -> str:
        """The request parameters as a JSON string (``'{"key":"value"}'``), as in Triton."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def inputs(self) -> list[Tensor]:
        """The input tensors, in the order the client sent them."""
        if self._inputs is None:
            assert self._state is not None
            types = self._state.context.input_types
            self._inputs = [
                Tensor._wrap(name, array, types.get(name) or _datatype_of(array.dtype))
                for name, array in self._state.request.inputs.items()
            ]
        return list(self._inputs)

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for (all outputs of the model when it named none), as a set."""
        return set(self._requested)

    def get_response_sender(self) -> InferenceResponseSender:
        """The response sender of this request (decoupled models; any thread)."""
        if self._state is None:
            raise TritonModelException("get_response_sender() is only available on requests given to execute()")
        if self._sender is None:
            self._sender = InferenceResponseSender(self._state)
        return self._sender

    def is_cancelled(self) -> bool:
        """False: tritium does not report request cancellation to models yet."""
        return False

    def set_release_flags(self, flags: int) -> None:
        """How the request is released when execute returns: ``TRITONSERVER_REQUEST_RELEASE_ALL``
        (the default) or ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``: run it again (a model with
        ``sequence_batching { iterative_sequence: true }``; any other model's request fails). A
        model that is not decoupled returns None for a request it reschedules; a decoupled one
        sends no final response in that run."""
        self._release_flags = int(flags)

    def _rescheduled(self) -> bool:
        return bool(self._release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)

    def trace(self) -> InferenceTrace:
        """A placeholder trace (tritium does not trace BLS requests)."""
        return InferenceTrace()

    # -- BLS ---------------------------------------------------------------------------------
    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on ``model_name`` and wait: an :class:`InferenceResponse`, or with
        ``decoupled=True`` a :class:`ResponseIterator` over every response."""
        call, error = self._send(decoupled)
        if error is not None:
            return ResponseIterator(None, error) if decoupled else error
        if decoupled:
            return ResponseIterator(call, model_name=self._model_name)
        return _single_response(self._model_name, call.result())

    def async_exec(self, decoupled: bool = False) -> asyncio.Future[Any]:
        """:meth:`exec` for ``async def execute``: an awaitable of the response (or iterator)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise TritonModelException("async_exec() must be called from a coroutine (async def execute)") from None
        future: asyncio.Future[Any] = loop.create_future()
        call, error = self._send(decoupled)
        if error is not None:
            future.set_result(ResponseIterator(None, error) if decoupled else error)
            return future
        if decoupled:
            future.set_result(ResponseIterator(call, model_name=self._model_name))
            return future
        model_name = self._model_name

        def settle(result: Any) -> None:
            if not future.done():
                future.set_result(result)

        def done(cf: Any) -> None:
            try:
                result = _single_response(model_name, cf.result())
            except BaseException as exc:  # the BLS client failed: still answer the awaiting model
                result = InferenceResponse(error=TritonError(f"BLS request failed: {exc}"))
            loop.call_soon_threadsafe(settle, result)

        call.future().add_done_callback(done)
        return future

    def _send(self, decoupled: bool) -> tuple[Any, InferenceResponse | None]:
        from tritium.core.errors import TritonError as CoreError
        from tritium.core.worker import bls

        try:
            client = bls.client()
        except CoreError as exc:
            raise TritonModelException(str(exc)) from None
        inputs = self._inputs if self._inputs is not None else self.inputs()
        try:
            call = client.infer(
                self._model_name,
                [(t._name, t._datatype, t._array) for t in inputs],
                list(self._requested),
                model_version="" if self._model_version < 0 else str(self._model_version),
                request_id=self._request_id,
                correlation_id=self._correlation_id,
                flags=self._flags,
                parameters=self._parameters,
                timeout_us=max(0, self._timeout),
                decoupled=decoupled,
            )
        except CoreError as exc:
            return None, InferenceResponse(
                error=TritonError(f"Model {self._model_name} - Error when running inference: {exc}")
            )
        return call, None

    def __repr__(self) -> str:
        return f"InferenceRequest(model_name={self._model_name!r}, request_id={self._request_id!r})"


# messages of the core that only a request refused before any model ran can carry
_REQUEST_ERROR_PREFIXES = (
    "[request id: ",
    "unexpected inference input '",
    "unexpected inference output '",
)


def _bls_error_message(model_name: str, message: str) -> str:
    """Triton's python backend words BLS requests the server refused as it does (the model's own
    error responses pass through unchanged)."""
    if message.startswith("Request for unknown model: "):
        return (
            f"Model {model_name} - Error when running inference: Failed for execute the inference request. "
            f"Model '{model_name}' is not ready."
        )
    if message.startswith(_REQUEST_ERROR_PREFIXES) or message.startswith(f"Model {model_name} is using the decoupled"):
        return f"Model {model_name} - Error when running inference: {message}"
    return message


def _convert(response: Any, model_name: str) -> InferenceResponse:
    """A BLS response of the core (``tritium.core.worker.bls.BlsResponse``) as a pb_utils one.

    As in Triton, every BLS error has the code INTERNAL.
    """
    error = None
    if response.error is not None:
        error = TritonError(_bls_error_message(model_name, response.error.message), TritonError.INTERNAL)
    outputs = [Tensor._wrap(name, array, datatype) for name, (datatype, array) in response.outputs.items()]
    result = InferenceResponse(outputs, error)
    if response.parameters:
        result._parameters = dict(response.parameters)
    return result


def _single_response(model_name: str, response: Any) -> InferenceResponse:
    if not response.final:  # a decoupled model answered: Triton refuses exec() for those
        return InferenceResponse(
            error=TritonError(
                f"Model {model_name} - Error when running inference: Model {model_name} is using the decoupled. "
                "The current BLS request call doesn't support models using the decoupled transaction policy. "
                "Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'"
            )
        )
    return _convert(response, model_name)


class ResponseIterator:
    """The responses of a BLS request made with ``decoupled=True``, in order.

    As in Triton, when the callee ends with a final flag that carries no
    response, a last empty :class:`InferenceResponse` is yielded.
    """

    def __init__(self, call: Any, error: InferenceResponse | None = None, model_name: str = "") -> None:
        self._model_name = model_name
        self._responses = call.responses() if call is not None else iter(())
        self._pending_error = error
        self._done = False
        self._final_seen = False

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            self._done = True
            return error
        if self._done:
            raise StopIteration
        try:
            response = next(self._responses)
        except StopIteration:
            self._done = True
            if not self._final_seen:
                self._final_seen = True
                return InferenceResponse([])
            raise
        if response.final:
            self._final_seen = True
            self._done = True
        return _convert(response, self._model_name)

    def cancel(self) -> None:
        """Accepted for compatibility: tritium does not cancel BLS requests yet."""


# -- logging ---------------------------------------------------------------------------------
class _LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3

    def __repr__(self) -> str:
        return f"<LogLevel.{self.name}: {int(self)}>"


_LEVELS = {
    _LogLevel.INFO: logging.INFO,
    _LogLevel.WARNING: logging.WARNING,
    _LogLevel.ERROR: logging.ERROR,
    _LogLevel.VERBOSE: logging.DEBUG,
}


def _emit(message: str, level: _LogLevel) -> None:
    # stacklevel 3: the model code that called Logger.log_*()
    _log.log(_LEVELS[_LogLevel(int(level))], "%s", message, stacklevel=3)


class Logger:
    """Log to the server log: ``pb_utils.Logger.log_info(message)`` (also ``log_warn``,
    ``log_error``, ``log_verbose`` — shown with ``--log-verbose`` > 0 — and ``log(message, level)``)."""

    LogLevel = _LogLevel
    INFO = _LogLevel.INFO
    WARNING = _LogLevel.WARNING
    ERROR = _LogLevel.ERROR
    VERBOSE = _LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _LogLevel = _LogLevel.INFO) -> None:
        _emit(str(message), level)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(str(message), _LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(str(message), _LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(str(message), _LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(str(message), _LogLevel.VERBOSE)


# -- custom metrics --------------------------------------------------------------------------
class _MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class Metric:
    """One metric of a :class:`MetricFamily` (kept in the worker; not exported by tritium yet)."""

    def __init__(self, family: MetricFamily, labels: dict[str, str] | None, buckets: Sequence[float] | None) -> None:
        self._family = family
        self._labels = dict(labels or {})
        self._buckets = list(buckets or [])
        self._value = 0.0
        self._lock = threading.Lock()

    def increment(self, value: float) -> None:
        if self._family._kind == _MetricKind.COUNTER and value < 0:
            raise TritonModelException("Failed to increment metric value: a counter cannot be decremented")
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        if self._family._kind != _MetricKind.GAUGE:
            raise TritonModelException("Failed to set metric value: only gauges can be set")
        with self._lock:
            self._value = float(value)

    def observe(self, value: float) -> None:
        with self._lock:
            self._value += value

    def value(self) -> float:
        return self._value


class MetricFamily:
    """``MetricFamily(name, description, kind)`` — accepted so models that define custom metrics
    load and run; the values stay in the worker (tritium does not export them on /metrics yet)."""

    COUNTER = _MetricKind.COUNTER
    GAUGE = _MetricKind.GAUGE
    HISTOGRAM = _MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: _MetricKind) -> None:
        self._name = name
        self._description = description
        self._kind = _MetricKind(int(kind))

    def Metric(self, labels: dict[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        return Metric(self, labels, buckets)


# -- model management ------------------------------------------------------------------------
def get_model_dir() -> str:
    """The folder of the model file (``<repository>/<model>/<version>``)."""
    if _context is None:
        raise TritonModelException("get_model_dir() is only available inside a model")
    return _context.model_dir


def _control(action: str, model_name: str, **arguments: Any) -> Any:
    """Send a model-control request to the server and wait for its answer (the BLS client's)."""
    from tritium.core.errors import TritonError as CoreError
    from tritium.core.worker import bls

    try:
        call = bls.client().control(action, model_name, **arguments)
    except CoreError as exc:
        raise TritonModelException(str(exc)) from None
    return call.result()


def _control_error(what: str, message: str) -> TritonModelException:
    """Triton's python backend words a refused load or unload this way."""
    instance = _context.instance_name if _context is not None else "<unknown>"
    return TritonModelException(
        f"Failed to {what} model: Failed to process the request for model '{instance}', message: {message}"
    )


def _check_str(function: str, signature: str, **values: Any) -> None:
    for value in values.values():
        if not isinstance(value, str):
            raise TypeError(
                f"{function}(): incompatible function arguments. The following argument types are "
                f"supported:\n    1. {signature}"
            )


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether version ``model_version`` of ``model_name`` ("": the version the policy serves) is
    ready (KServe model ready), asked of the server this model runs in.

    :raises TypeError: for arguments that are not strings (Triton's signature).
    :raises TritonModelException: for a version that is not a number (Triton's stub crashes).
    """
    _check_str(
        "is_model_ready",
        "(model_name: str, model_version: str = '') -> bool",
        model_name=model_name,
        model_version=model_version,
    )
    if model_version and not model_version.isdigit():
        raise TritonModelException(
            f"is_model_ready(): model_version must be a version number or '', got '{model_version}'"
        )
    response = _control("ready", model_name, version=model_version)
    if response.error is not None:
        raise TritonModelException(response.error.message)
    return bool(response.parameters.get("ready", False))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load, or reload, ``model_name`` on the server this model runs in (Triton's python backend
    model loading API), as ``POST /v2/repository/models/<name>/load`` does: explicit model control
    mode only; ``config`` a JSON model configuration that replaces ``config.pbtxt``; ``files``
    ``{"file:<path>": bytes}`` (a model that exists only in the request: needs ``config`` and
    the server's ``--model-load-allow-file-override``). Returns once the model is ready.

    :raises TypeError: for a name or config that is not a string (Triton's signature).
    :raises TritonModelException: when the server refuses or the load fails (its message).
    """
    _check_str(
        "load_model",
        "(model_name: str, config: str = '', files: object = None) -> None",
        model_name=model_name,
        config=config,
    )
    if files is not None and not isinstance(files, dict):
        raise TritonModelException("load_model(): 'files' must be a dict of 'file:<path>' -> bytes")
    total = sum(len(v) for v in (files or {}).values() if isinstance(v, (bytes, bytearray)))
    if total > _MAX_FILES_BYTES:
        raise TritonModelException(
            f"load_model(): the files come to {total} bytes, more than the {_MAX_FILES_BYTES} bytes "
            "one request can carry; place the model in the model repository instead"
        )
    response = _control("load", model_name, config=config, files=dict(files or {}))
    if response.error is not None:
        raise _control_error("load", response.error.message)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload ``model_name`` from the server this model runs in, as ``POST
    /v2/repository/models/<name>/unload`` does (explicit mode only; a model that is not
    loaded is no error). Returns once the model takes no new requests.

    :raises TypeError: for a name that is not a string (Triton's signature).
    :raises TritonModelException: when the server refuses (its message).
    """
    _check_str("unload_model", "(model_name: str, unload_dependents: bool = False) -> None", model_name=model_name)
    response = _control("unload", model_name, unload_dependents=bool(unload_dependents))
    if response.error is not None:
        raise _control_error("unload", response.error.message)
