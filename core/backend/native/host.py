"""The host of a native backend: ``libtriton_<name>.so`` behind the Python backend API.

:class:`NativeBackend` is what the loader returns for a shared library: an
object with the same ``TRITONBACKEND_*`` entry points as a Python backend
module, so the worker (``core/worker/main.py``) runs a native backend exactly
like a Python one. Each entry point fills the C structs of the shim
(``shim.c``) and calls the library's function of the same name. The shim
answers most of the library's calls itself (accessors; responses and their
outputs are C structs until they are sent); the few that need the worker
arrive at the ``tritium_py_*`` callbacks in :mod:`.callbacks` — ``OutputBuffer``,
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

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import Code, TritonError
from ...tensor import serialize_bytes
from ...types import DataType
from ..api import Backend, Model, ModelInstance, Request
from .build import load_shim
from .callbacks import _registry, _Request, _take_error, install_callbacks, log_levels

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
        install_callbacks(self.ffi)
        self.lib.tritium_set_log_levels(log_levels())
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
