"""The native-backend host's C side: the handles the shim holds and its ``tritium_py_*`` callbacks.

The shim (``shim.c``) refers to Python objects by int64 handles kept in one registry per process
(requests, output buffers, response parameters, models); the ``extern "Python"`` callbacks it
calls (``OutputBuffer``, ``ResponseSend``, response parameters, a decoupled request's release and
factory flags, logging, ``ModelSetConfig``) resolve them here, on whatever thread the backend
calls from (cffi takes the GIL). :mod:`.host` fills the registry and calls the library.

Everything here runs in the worker process.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...errors import Code, TritonError
from ...inference.tensor import tensor_from_buffer
from ...inference.types import DATATYPES, DataType, element_count
from ..api import Request
from .build import load_shim

__all__ = ["install_callbacks", "log_levels"]

log = logging.getLogger("tritium.backend.native")

_BY_VALUE: dict[int, DataType] = {dt.config_value: dt for dt in DATATYPES}
_PARAM_STRING, _PARAM_INT, _PARAM_BOOL, _PARAM_DOUBLE = 0, 1, 2, 3
_RESPONSE_FINAL = 1
_RELEASE_RESCHEDULE = 2  # TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
_LOG_LEVELS = (logging.INFO, logging.WARNING, logging.ERROR, logging.DEBUG)


@dataclass(slots=True)
class _Buffer:
    """An output buffer handed out by ``TRITONBACKEND_OutputBuffer``."""

    array: np.ndarray | None = None  # shared memory from the request's output_buffer
    raw: Any = None  # BYTES: a cffi char[] the backend writes the serialized tensor into
    raw_size: int = 0


class _ModelHandleOwner(Protocol):
    """What a model handle resolves to: the host's state of one model (``host._NativeModel``)."""

    def set_config(self, text: str) -> None:
        """``TRITONBACKEND_ModelSetConfig`` of that model, with the config as JSON."""
        ...


@dataclass(slots=True)
class _Request:
    handle: int
    request: Request
    keep: list[Any]  # cffi objects the C struct points into
    released: bool = False


class _Registry:
    """Handles the C side holds (int64) -> Python objects, shared by all threads.

    Dict operations are atomic under the GIL, which every callback holds. Handles are never
    reused in a process, so a handle of a finalized model or a completed request finds nothing
    rather than another model's or request's object.
    """

    def __init__(self) -> None:
        self.requests: dict[int, _Request] = {}
        self.buffers: dict[int, _Buffer] = {}
        self.parameters: dict[int, dict[str, Any]] = {}
        self.models: dict[int, _ModelHandleOwner] = {}  # each model's host state, by its C struct's handle
        self._ids = itertools.count(1)

    def new_id(self) -> int:
        """A handle not used before in this process (``next`` on a count is atomic under the GIL)."""
        return next(self._ids)


_registry = _Registry()


def log_levels() -> int:
    """The shim's log-level bits: which of INFO, WARNING, ERROR and VERBOSE ``tritium`` logs now."""
    logger = logging.getLogger("tritium")
    levels = 0
    for bit, level in enumerate(_LOG_LEVELS):
        if logger.isEnabledFor(level):
            levels |= 1 << bit
    return levels


def _take_error(ffi: Any, lib: Any, error: Any) -> TritonError:
    """Turn a TRITONSERVER_Error* the backend returned into a TritonError and free it."""
    try:
        code = Code(int(error.code)) if 0 <= int(error.code) <= 7 else Code.UNKNOWN
        message = ffi.string(error.message).decode(errors="replace") if error.message != ffi.NULL else ""
    finally:
        lib.TRITONSERVER_ErrorDelete(error)
    return TritonError(code, message)


# -- callbacks from the C side -------------------------------------------------------
_installed = False


def install_callbacks(ffi: Any) -> None:
    """Register the ``extern "Python"`` functions of the shim (once per process)."""
    global _installed
    if _installed:
        return
    lib = load_shim().lib

    def guarded(fn: Callable[..., None]) -> Callable[..., Any]:
        """Run ``fn``; return NULL, or a new TRITONSERVER_Error for any exception."""

        def wrapper(*args: Any) -> Any:
            try:
                fn(*args)
                return ffi.NULL
            except TritonError as exc:
                return lib.TRITONSERVER_ErrorNew(int(exc.code), exc.message.encode())
            except Exception as exc:  # never let an exception cross into C
                log.exception("native backend callback %s failed", fn.__name__)
                return lib.TRITONSERVER_ErrorNew(int(Code.INTERNAL), f"{type(exc).__name__}: {exc}".encode())

        wrapper.__name__ = fn.__name__
        return wrapper

    def request_of(handle: int) -> _Request:
        entry = _registry.requests.get(int(handle))
        if entry is None:
            raise TritonError(Code.INVALID_ARG, "the request was released or does not belong to this execution")
        return entry

    @ffi.def_extern(name="tritium_py_output_buffer")
    @guarded
    def output_buffer(output: Any, byte_size: int, buffer: Any) -> None:
        entry = request_of(output.response.request)
        if entry.request.completed:
            raise TritonError(Code.INVALID_ARG, f"request '{entry.request.id}' already received its final response")
        if output.buffer:
            raise TritonError(Code.INVALID_ARG, f"output '{ffi.string(output.name).decode()}' already has a buffer")
        dt = _BY_VALUE[output.datatype]
        handle = _registry.new_id()
        if dt.is_bytes:
            raw = ffi.new("char[]", max(1, int(byte_size)))
            _registry.buffers[handle] = _Buffer(raw=raw, raw_size=int(byte_size))
            output.buffer = handle
            buffer[0] = raw
            return
        shape = [output.shape[i] for i in range(output.dims_count)]
        expected = element_count(shape) * dt.itemsize
        if int(byte_size) != expected:
            raise TritonError(
                Code.INVALID_ARG,
                f"output '{ffi.string(output.name).decode()}': buffer of {int(byte_size)} bytes requested, but "
                f"{dt.name} shape {shape} needs {expected}",
            )
        array = entry.request.output_buffer(ffi.string(output.name).decode(), dt.name, shape)
        _registry.buffers[handle] = _Buffer(array=array)
        output.buffer = handle
        buffer[0] = ffi.from_buffer(array) if expected else ffi.NULL

    @ffi.def_extern(name="tritium_py_response_parameter")
    @guarded
    def response_parameter(response: Any, name: Any, kind: int, value: Any) -> None:
        if not response.parameters:
            response.parameters = _registry.new_id()
            _registry.parameters[response.parameters] = {}
        parameters = _registry.parameters[response.parameters]
        key = ffi.string(name).decode()
        if kind == _PARAM_STRING:
            parameters[key] = ffi.string(ffi.cast("char*", value)).decode()
        elif kind == _PARAM_INT:
            parameters[key] = int(ffi.cast("int64_t*", value)[0])
        elif kind == _PARAM_BOOL:
            parameters[key] = bool(ffi.cast("bool*", value)[0])
        else:
            parameters[key] = float(ffi.cast("double*", value)[0])

    @ffi.def_extern(name="tritium_py_response_send")
    @guarded
    def response_send(response: Any, flags: int, error: Any) -> None:
        outputs, parameters = _take_response(ffi, response, keep=error == ffi.NULL)
        entry = request_of(response.request)
        if entry.request.completed:
            raise TritonError(Code.INVALID_ARG, f"request '{entry.request.id}' already received its final response")
        failure = None
        if error != ffi.NULL:
            code = int(error.code)
            failure = TritonError(
                Code(code) if 0 <= code <= 7 else Code.UNKNOWN,
                ffi.string(error.message).decode(errors="replace") if error.message != ffi.NULL else "",
            )
        final = bool(int(flags) & _RESPONSE_FINAL)
        entry.request.respond(outputs or None, error=failure, parameters=parameters or None, final=final)
        _forget_if_done(entry)

    @ffi.def_extern(name="tritium_py_response_delete")
    def response_delete(response: Any) -> None:
        try:
            _take_response(ffi, response, keep=False)
        except TritonError:
            pass

    @ffi.def_extern(name="tritium_py_factory_send_flags")
    @guarded
    def factory_send_flags(request: int, flags: int) -> None:
        entry = _registry.requests.get(int(request))
        if entry is None:
            raise TritonError(Code.INVALID_ARG, "the request of this response factory is complete")
        if int(flags) & _RESPONSE_FINAL:
            entry.request.respond(None, final=True)
            _forget_if_done(entry)

    @ffi.def_extern(name="tritium_py_request_release")
    @guarded
    def request_release(request: int, flags: int) -> None:
        # a decoupled model's request (it may outlive execute), or any rescheduled one
        entry = request_of(request)
        if int(flags) & _RELEASE_RESCHEDULE:  # run it again (iterative sequences): no final response
            entry.request.reschedule()
        entry.released = True
        _forget_if_done(entry)

    @ffi.def_extern(name="tritium_py_request_is_cancelled")
    @guarded
    def request_is_cancelled(request: int, is_cancelled: Any) -> None:
        # the request of a response factory may be complete (and forgotten): not cancelled then
        entry = _registry.requests.get(int(request))
        is_cancelled[0] = entry is not None and entry.request.is_cancelled()

    @ffi.def_extern(name="tritium_py_log")
    def log_message(level: int, filename: Any, line: int, msg: Any) -> None:
        py_level = _LOG_LEVELS[level] if 0 <= level < len(_LOG_LEVELS) else logging.INFO
        log.log(
            py_level,
            "%s:%d] %s",
            ffi.string(filename).decode(errors="replace"),
            line,
            ffi.string(msg).decode(errors="replace"),
        )

    @ffi.def_extern(name="tritium_py_model_set_config")
    @guarded
    def model_set_config(model: int, json_text: Any, size: int) -> None:
        owner = _registry.models.get(int(model))
        if owner is None:
            raise TritonError(Code.INVALID_ARG, "unknown model")
        owner.set_config(ffi.unpack(json_text, int(size)).decode())

    _installed = True


def _take_response(ffi: Any, response: Any, keep: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Collect (and forget) the outputs and parameters of a C response.

    :param keep: False to give the buffers back without collecting outputs (a deleted or an
        error response).
    :raises TritonError: INVALID_ARG for an output without a buffer (when keeping).
    """
    parameters = _registry.parameters.pop(response.parameters, None) if response.parameters else None
    taken = []
    output = response.first
    while output != ffi.NULL:  # give every buffer back first, whatever happens below
        taken.append((output, _registry.buffers.pop(output.buffer, None) if output.buffer else None))
        output = output.next
    outputs: dict[str, np.ndarray] = {}
    if not keep:
        return outputs, parameters or {}
    for output, buffer in taken:
        dt = _BY_VALUE[output.datatype]
        shape = [output.shape[i] for i in range(output.dims_count)]
        name = ffi.string(output.name).decode()
        if buffer is None:
            if element_count(shape) != 0 or dt.is_bytes:
                raise TritonError(Code.INVALID_ARG, f"output '{name}' has no buffer (TRITONBACKEND_OutputBuffer)")
            outputs[name] = np.empty(shape, dtype=dt.numpy)
        elif dt.is_bytes:
            outputs[name] = tensor_from_buffer(dt, shape, ffi.buffer(buffer.raw, buffer.raw_size))
        else:
            assert buffer.array is not None
            outputs[name] = buffer.array
    return outputs, parameters or {}


def _forget_if_done(entry: _Request) -> None:
    """Drop a decoupled request's handle once it is released and has its final response."""
    if entry.released and entry.request.completed:
        _registry.requests.pop(entry.handle, None)
