"""The host of a native backend: ``libtriton_<name>.so`` behind the Python backend API.

:class:`NativeBackend` is what the loader returns for a shared library: an
object with the same ``TRITONBACKEND_*`` entry points as a Python backend
module, so the worker (``core/worker/main.py``) runs a native backend exactly
like a Python one. Each entry point fills the C structs of the shim
(``shim.c``) and calls the library's function of the same name. The shim
answers most of the library's calls itself (accessors; responses and their
outputs are C structs until they are sent); the few that need the worker
arrive at the ``tritium_py_*`` callbacks below — ``OutputBuffer``,
``ResponseSend``, response parameters, a decoupled request's release and
factory flags, logging, ``ModelSetConfig`` — on whatever thread the backend
calls from (cffi takes the GIL).

Data path: an input's ``buffer`` is the address of the request's tensor in
the shared-memory arena (no copy; BYTES inputs are re-serialized once into
Triton's length-prefixed form); ``TRITONBACKEND_OutputBuffer`` hands out a
block of the worker's output arena, which then reaches the core by
descriptor, without a copy (BYTES outputs are parsed once).

Everything here runs in the worker process.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import Code, TritonError
from ...tensor import serialize_bytes, tensor_from_buffer
from ...types import DATATYPES, DataType, element_count
from ..api import Backend, Model, ModelInstance, Request
from .build import load_shim

__all__ = ["NativeBackend", "ENTRY_POINTS", "REQUIRED_ENTRY_POINT"]

log = logging.getLogger("tritium.backend.native")

REQUIRED_ENTRY_POINT = "TRITONBACKEND_ModelInstanceExecute"
ENTRY_POINTS = (
    "TRITONBACKEND_Initialize",
    "TRITONBACKEND_Finalize",
    "TRITONBACKEND_ModelInitialize",
    "TRITONBACKEND_ModelFinalize",
    "TRITONBACKEND_ModelInstanceInitialize",
    "TRITONBACKEND_ModelInstanceFinalize",
    REQUIRED_ENTRY_POINT,
)
_SIGNATURES = {
    "TRITONBACKEND_Initialize": "TRITONSERVER_Error*(*)(TRITONBACKEND_Backend*)",
    "TRITONBACKEND_Finalize": "TRITONSERVER_Error*(*)(TRITONBACKEND_Backend*)",
    "TRITONBACKEND_ModelInitialize": "TRITONSERVER_Error*(*)(TRITONBACKEND_Model*)",
    "TRITONBACKEND_ModelFinalize": "TRITONSERVER_Error*(*)(TRITONBACKEND_Model*)",
    "TRITONBACKEND_ModelInstanceInitialize": "TRITONSERVER_Error*(*)(TRITONBACKEND_ModelInstance*)",
    "TRITONBACKEND_ModelInstanceFinalize": "TRITONSERVER_Error*(*)(TRITONBACKEND_ModelInstance*)",
    REQUIRED_ENTRY_POINT: "TRITONSERVER_Error*(*)(TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request**, uint32_t)",
}
_KINDS = {"KIND_AUTO": 0, "KIND_CPU": 1, "KIND_GPU": 2, "KIND_MODEL": 3}
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


@dataclass(slots=True)
class _Request:
    handle: int
    request: Request
    keep: list[Any]  # cffi objects the C struct points into
    released: bool = False


class _Registry:
    """Handles the C side holds (int64) -> Python objects, shared by all threads.

    Dict operations are atomic under the GIL, which every callback holds.
    """

    def __init__(self) -> None:
        self.requests: dict[int, _Request] = {}
        self.buffers: dict[int, _Buffer] = {}
        self.parameters: dict[int, dict[str, Any]] = {}
        self.models: dict[int, NativeBackend] = {}
        self._ids = itertools.count(1)

    def new_id(self) -> int:
        return next(self._ids)


_registry = _Registry()


class NativeBackend:
    """A loaded ``libtriton_<name>.so``, presented as a Python backend module.

    Defines the same entry points as a Python backend; each calls the
    library's C function when the library exports it (all optional but
    ``TRITONBACKEND_ModelInstanceExecute``, as in Triton).

    :param path: the shared library.
    :param backend: the backend name.
    :raises TritonError: UNAVAILABLE when the shim cannot be built; NOT_FOUND
        with Triton's wording when the library cannot be loaded (e.g. an
        undefined symbol outside the API tritium provides) or lacks
        ``TRITONBACKEND_ModelInstanceExecute``.
    """

    def __init__(self, path: Path, backend: str) -> None:
        shim = load_shim()
        self.ffi, self.lib = shim.ffi, shim.lib
        _install_callbacks(self.ffi)
        self.lib.tritium_set_log_levels(_log_levels())
        self.path = path
        self.name = backend
        self._handle = self.lib.tritium_dlopen(str(path).encode())
        if self._handle == self.ffi.NULL:
            raise TritonError(Code.NOT_FOUND, f"unable to load shared library: {self._dlerror()}")
        self._fns: dict[str, Any] = {}
        for name in ENTRY_POINTS:
            address = self.lib.tritium_dlsym(self._handle, name.encode())
            if address != self.ffi.NULL:
                self._fns[name] = self.ffi.cast(_SIGNATURES[name], address)
        if REQUIRED_ENTRY_POINT not in self._fns:
            raise TritonError(
                Code.NOT_FOUND,
                f"unable to find required entrypoint '{REQUIRED_ENTRY_POINT}' in shared library: "
                f"{path}: undefined symbol: {REQUIRED_ENTRY_POINT}",
            )
        self._keep: list[Any] = []
        self._c_backend: Any = None
        self._c_model: Any = None
        self._c_instance: Any = None
        self._model: Model | None = None
        self._model_handle = 0
        self._in_model_initialize = False
        self._names: dict[str, Any] = {}
        self._empty = self.ffi.new("char[]", b"")
        self._input_types: dict[str, DataType] = {}
        self._all_outputs: list[str] = []
        self._all_outputs_c: Any = None
        self._decoupled = False

    def _dlerror(self) -> str:
        message = self.lib.tritium_dlerror()
        return self.ffi.string(message).decode(errors="replace") if message != self.ffi.NULL else "unknown error"

    def _cstr(self, text: str) -> Any:
        data = self.ffi.new("char[]", text.encode())
        self._keep.append(data)
        return data

    def _message(self, document: Any) -> Any:
        text = json.dumps(document).encode()
        base = self.ffi.new("char[]", text)
        message = self.ffi.new("TRITONSERVER_Message*", {"base": base, "size": len(text), "owned": 0})
        self._keep.extend((base, message))
        return message

    def _call(self, name: str, *args: Any) -> None:
        fn = self._fns.get(name)
        if fn is None:
            return
        error = fn(*args)
        if error != self.ffi.NULL:
            raise _take_error(self.ffi, self.lib, error)

    # -- entry points (called by the worker on its executing thread) --------
    def TRITONBACKEND_Initialize(self, backend: Backend) -> None:
        self._c_backend = self.ffi.new(
            "TRITONBACKEND_Backend*",
            {
                "name": self._cstr(backend.name),
                "directory": self._cstr(str(backend.directory)),
                "config": self._message({"cmdline": dict(backend.config)}),
            },
        )
        self._call("TRITONBACKEND_Initialize", self._c_backend)

    def TRITONBACKEND_ModelInitialize(self, model: Model) -> None:
        self._model = model
        self._model_handle = _registry.new_id()
        _registry.models[self._model_handle] = self
        self._c_model = self.ffi.new(
            "TRITONBACKEND_Model*",
            {
                "handle": self._model_handle,
                "name": self._cstr(model.name),
                "version": int(model.version),
                "repository": self._cstr(str(model.repository_path)),
                "config": self._message(model.config),
                "backend": self._c_backend,
                "auto_complete": bool(model.auto_complete_config),
            },
        )
        self._in_model_initialize = True
        try:
            self._call("TRITONBACKEND_ModelInitialize", self._c_model)
        finally:
            self._in_model_initialize = False
            self._c_model.auto_complete = False

    def TRITONBACKEND_ModelInstanceInitialize(self, instance: ModelInstance) -> None:
        self._c_model.config = self._message(instance.model.config)  # the validated config
        self._prepare(instance.model.config)
        self._c_instance = self.ffi.new(
            "TRITONBACKEND_ModelInstance*",
            {
                "name": self._cstr(instance.name),
                "kind": _KINDS.get(instance.kind, 1),
                "device_id": int(instance.device_id),
                "model": self._c_model,
            },
        )
        self._call("TRITONBACKEND_ModelInstanceInitialize", self._c_instance)

    def TRITONBACKEND_ModelInstanceExecute(self, instance: ModelInstance, requests: list[Request]) -> None:
        del instance
        array = self.ffi.new("TRITONBACKEND_Request*[]", len(requests))
        handles = []
        for i, request in enumerate(requests):
            handle = _registry.new_id()
            c_request, keep = self._c_request(handle, request)
            _registry.requests[handle] = _Request(handle, request, keep)
            handles.append(handle)
            array[i] = c_request
        try:
            self._call(REQUIRED_ENTRY_POINT, self._c_instance, array, len(requests))
        finally:
            if not self._decoupled:  # a decoupled backend may keep its requests past execute
                for handle in handles:
                    _registry.requests.pop(handle, None)

    def TRITONBACKEND_ModelInstanceFinalize(self, instance: ModelInstance) -> None:
        del instance
        if self._c_instance is not None:
            self._call("TRITONBACKEND_ModelInstanceFinalize", self._c_instance)

    def TRITONBACKEND_ModelFinalize(self, model: Model) -> None:
        del model
        if self._c_model is not None:
            try:
                self._call("TRITONBACKEND_ModelFinalize", self._c_model)
            finally:
                _registry.models.pop(self._model_handle, None)

    def TRITONBACKEND_Finalize(self, backend: Backend) -> None:
        del backend
        if self._c_backend is not None:
            self._call("TRITONBACKEND_Finalize", self._c_backend)

    # -- requests ---------------------------------------------------------------
    def _prepare(self, config: dict[str, Any]) -> None:
        """Cache what every request of this model needs (after the config is final)."""
        from ...types import by_config_name

        self._input_types = {}
        for spec in config.get("input", []):
            dt = by_config_name(str(spec.get("data_type", "")))
            if dt is not None:
                self._input_types[str(spec["name"])] = dt
        self._all_outputs = [str(o["name"]) for o in config.get("output", [])]
        self._all_outputs_c = self.ffi.new("char*[]", [self._name(n) for n in self._all_outputs] or [self.ffi.NULL])
        self._decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled"))

    def _name(self, text: str) -> Any:
        """A NUL-terminated copy of a tensor name, kept for the life of the backend."""
        found = self._names.get(text)
        if found is None:
            found = self._names[text] = self.ffi.new("char[]", text.encode())
        return found

    def _datatype(self, name: str, tensor: np.ndarray) -> DataType:
        """An input's datatype: from the config (BF16 arrives as uint16), else from numpy."""
        dt = self._input_types.get(name)
        if dt is None:
            from ...types import from_numpy

            dt = from_numpy(tensor.dtype)
            if dt is None:
                raise TritonError(Code.INTERNAL, f"input '{name}' has unsupported dtype {tensor.dtype}")
        return dt

    def _c_request(self, handle: int, request: Request) -> tuple[Any, list[Any]]:
        """The C struct of one request (no tensor data is copied but BYTES) and what it points into."""
        ffi = self.ffi
        inputs = request.inputs
        c_inputs = ffi.new("TRITONBACKEND_Input[]", len(inputs) or 1)
        shapes = ffi.new("int64_t[]", [int(d) for t in inputs.values() for d in t.shape] or [0])
        keep: list[Any] = [c_inputs, shapes]
        offset = 0
        for i, (name, tensor) in enumerate(inputs.items()):
            dt = self._datatype(name, tensor)
            if dt.is_bytes:
                raw = serialize_bytes(tensor)
                buffer = ffi.from_buffer(raw)
                keep.extend((raw, buffer))
                size = len(raw)
            else:
                size = tensor.nbytes
                buffer = ffi.from_buffer(tensor) if size else ffi.NULL  # the arena itself: no copy
            entry = c_inputs[i]
            entry.name = self._name(name)
            entry.datatype = dt.config_value
            entry.shape = shapes + offset
            entry.dims_count = tensor.ndim
            entry.byte_size = size
            entry.buffer = buffer
            offset += tensor.ndim
        if request.requested_output_names:
            names = request.requested_output_names
            c_names = ffi.new("char*[]", [self._name(n) for n in names])
            keep.append(c_names)
        else:
            names, c_names = self._all_outputs, self._all_outputs_c
        c_request = ffi.new("TRITONBACKEND_Request*")
        c_request.handle = handle
        if request.id:
            text = ffi.new("char[]", request.id.encode())
            keep.append(text)
            c_request.id = text
        else:
            c_request.id = self._empty
        corr = request.correlation_id
        if isinstance(corr, str):
            text = ffi.new("char[]", corr.encode())
            keep.append(text)
            c_request.correlation_id_string = text
        elif corr:
            c_request.correlation_id = int(corr)
        c_request.flags = int(request.flags)
        c_request.timeout_us = int(request.timeout_us)
        c_request.input_count = len(inputs)
        c_request.inputs = c_inputs
        c_request.output_count = len(names)
        c_request.output_names = c_names
        c_request.notify_release = self._decoupled
        keep.append(c_request)
        return c_request, keep

    def set_config(self, text: str) -> None:
        """``TRITONBACKEND_ModelSetConfig``: only during ModelInitialize, with auto-complete on."""
        assert self._model is not None
        if not self._in_model_initialize:
            raise TritonError(
                Code.UNSUPPORTED, "TRITONBACKEND_ModelSetConfig can only be called in TRITONBACKEND_ModelInitialize"
            )
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise TritonError(Code.INVALID_ARG, f"model configuration is not valid JSON: {exc}") from None
        if not isinstance(config, dict):
            raise TritonError(Code.INVALID_ARG, "model configuration must be a JSON object")
        self._model.set_config(config)
        self._c_model.config = self._message(config)


def _log_levels() -> int:
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


def _install_callbacks(ffi: Any) -> None:
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
