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

One :class:`NativeBackend` is the backend of one library in one process, as
in Triton: it hosts every model of that library the worker loads, and every
instance of those models. What belongs to one model (its C struct, its
handle for ``ModelSetConfig``, what its requests need) lives in
``Model.state`` (a ``_NativeModel``), what belongs to one instance (its C
struct) in ``ModelInstance.state`` (a ``_NativeInstance``); the library keeps
its own per-model and per-instance state through the shim's
``TRITONBACKEND_ModelSetState`` / ``ModelInstanceSetState``, which store it
in those C structs. Instances execute at the same time, each on its own
thread: cffi releases the GIL while the library runs, and models may be
initialized and finalized meanwhile.

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
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import Code, TritonError
from ...inference.tensor import serialize_bytes
from ...inference.types import DataType, by_config_name, from_numpy
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


class _Pins:
    """cffi objects that C structs point into, kept alive as long as this object.

    One per owner of C structs: the backend, each model, each instance. Appending
    is atomic under the GIL, so threads may pin into the same list.
    """

    def __init__(self, ffi: Any) -> None:
        self.ffi = ffi
        self.objects: list[Any] = []

    def string(self, text: str) -> Any:
        """A pinned NUL-terminated copy of ``text`` (``char[]``)."""
        data = self.ffi.new("char[]", text.encode())
        self.objects.append(data)
        return data

    def message(self, text: str) -> Any:
        """A pinned ``TRITONSERVER_Message*`` holding the JSON ``text`` (not owned by C: never freed there)."""
        raw = text.encode()
        base = self.ffi.new("char[]", raw)
        message = self.ffi.new("TRITONSERVER_Message*", {"base": base, "size": len(raw), "owned": 0})
        self.objects.extend((base, message))
        return message


@dataclass(frozen=True, slots=True)
class _ModelIO:
    """What every request of one model needs, taken from its final config.

    Replaced whole, never changed, so an execute reads one consistent value
    while another thread initializes an instance of the same model.
    """

    input_types: dict[str, DataType]  # datatype by input name, from the config (BF16 arrives as uint16)
    outputs: list[str]  # every output of the model: a request that names none gets these
    outputs_c: Any  # ``char*[]`` of ``outputs``
    decoupled: bool


class _NativeModel:
    """The host's state of one model (kept in ``Model.state``): its C struct and its requests' needs.

    Registered in the callbacks' registry under :attr:`handle`, the ``handle``
    of its C struct, through which ``TRITONBACKEND_ModelSetConfig`` finds it.

    :param host: the backend that hosts the model.
    :param model: the model.
    """

    def __init__(self, host: NativeBackend, model: Model) -> None:
        self.host = host
        self.model = model
        self.handle = _registry.new_id()
        self.pins = _Pins(host.ffi)
        self.in_model_initialize = False
        self.io: _ModelIO | None = None  # set when its first instance is initialized (the config is final)
        self._config_text = json.dumps(model.config)
        self._lock = threading.Lock()  # config and io: instances of one model may initialize at the same time
        self.c = host.ffi.new(
            "TRITONBACKEND_Model*",
            {
                "handle": self.handle,
                "name": self.pins.string(model.name),
                "version": int(model.version),
                "repository": self.pins.string(str(model.repository_path)),
                "config": self.pins.message(self._config_text),
                "backend": host.c_backend,
                "auto_complete": bool(model.auto_complete_config),
            },
        )

    def _point_at(self, text: str) -> None:
        """Make ``text`` the config the library sees; the old message stays pinned (another thread may read it)."""
        self.c.config = self.pins.message(text)
        self._config_text = text

    def publish(self, config: dict[str, Any]) -> _ModelIO:
        """Give the library the model's final (validated) config and derive what requests need from it.

        :returns: the model's :class:`_ModelIO`, rebuilt only when the config changed.
        """
        text = json.dumps(config)
        with self._lock:
            if self.io is not None and text == self._config_text:
                return self.io
            if text != self._config_text:
                self._point_at(text)
            self.io = self.host.model_io(config)
            return self.io

    def set_config(self, text: str) -> None:
        """``TRITONBACKEND_ModelSetConfig``: only during this model's ModelInitialize, with auto-complete on.

        :param text: the completed model config, as JSON.
        :raises TritonError: UNSUPPORTED outside ModelInitialize or with
            auto-complete off; INVALID_ARG when ``text`` is not a JSON object.
        """
        if not self.in_model_initialize:
            raise TritonError(
                Code.UNSUPPORTED, "TRITONBACKEND_ModelSetConfig can only be called in TRITONBACKEND_ModelInitialize"
            )
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise TritonError(Code.INVALID_ARG, f"model configuration is not valid JSON: {exc}") from None
        if not isinstance(config, dict):
            raise TritonError(Code.INVALID_ARG, "model configuration must be a JSON object")
        self.model.set_config(config)
        with self._lock:
            self._point_at(json.dumps(config))


@dataclass(slots=True)
class _NativeInstance:
    """The host's state of one model instance (kept in ``ModelInstance.state``)."""

    model: _NativeModel  # keeps the model's C struct alive while the instance's points to it
    c: Any  # ``TRITONBACKEND_ModelInstance*``
    pins: _Pins


class NativeBackend:
    """A loaded ``libtriton_<name>.so``, presented as a Python backend module.

    Defines the same entry points as a Python backend; each calls the
    library's C function when the library exports it (all optional but
    ``TRITONBACKEND_ModelInstanceExecute``, as in Triton). One object serves
    any number of models and instances of the library in the process;
    executes of different instances may run at the same time on different
    threads (one batch at a time per instance).

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
        self._pins = _Pins(self.ffi)
        #: ``TRITONBACKEND_Backend*``, from TRITONBACKEND_Initialize on
        self.c_backend: Any = None
        self._names: dict[str, Any] = {}
        self._empty = self.ffi.new("char[]", b"")

    def _dlerror(self) -> str:
        message = self.lib.tritium_dlerror()
        return self.ffi.string(message).decode(errors="replace") if message != self.ffi.NULL else "unknown error"

    def _call(self, name: str, *args: Any) -> None:
        fn = self._fns.get(name)
        if fn is None:
            return
        error = fn(*args)
        if error != self.ffi.NULL:
            raise _take_error(self.ffi, self.lib, error)

    def _model_state(self, model: Model) -> _NativeModel:
        """The host's state of ``model``.

        :raises TritonError: INTERNAL when ``model`` did not go through
            ``TRITONBACKEND_ModelInitialize`` here, or was finalized.
        """
        state = model.state
        if not isinstance(state, _NativeModel) or state.host is not self:
            raise TritonError(
                Code.INTERNAL,
                f"model '{model.name}' is not initialized in native backend '{self.name}' "
                "(TRITONBACKEND_ModelInitialize)",
            )
        return state

    def _instance_state(self, instance: ModelInstance) -> _NativeInstance:
        """The host's state of ``instance``.

        :raises TritonError: INTERNAL when ``instance`` did not go through
            ``TRITONBACKEND_ModelInstanceInitialize`` here, or was finalized.
        """
        state = instance.state
        if not isinstance(state, _NativeInstance) or state.model.host is not self:
            raise TritonError(
                Code.INTERNAL,
                f"model instance '{instance.name}' is not initialized in native backend '{self.name}' "
                "(TRITONBACKEND_ModelInstanceInitialize)",
            )
        return state

    # -- entry points (called by the worker; executes on each instance's thread) --
    def _refresh_log_levels(self) -> None:
        """Tell the shim which levels ``tritium`` logs now (the library may be loaded before logging is set up)."""
        self.lib.tritium_set_log_levels(log_levels())

    def TRITONBACKEND_Initialize(self, backend: Backend) -> None:
        self._refresh_log_levels()
        self.c_backend = self.ffi.new(
            "TRITONBACKEND_Backend*",
            {
                "name": self._pins.string(backend.name),
                "directory": self._pins.string(str(backend.directory)),
                "config": self._pins.message(json.dumps({"cmdline": dict(backend.config)})),
            },
        )
        self._pins.objects.append(self.c_backend)  # still valid if a failed Initialize is tried again
        self._call("TRITONBACKEND_Initialize", self.c_backend)

    def TRITONBACKEND_ModelInitialize(self, model: Model) -> None:
        self._refresh_log_levels()
        state = _NativeModel(self, model)
        model.state = state
        _registry.models[state.handle] = state
        state.in_model_initialize = True
        try:
            self._call("TRITONBACKEND_ModelInitialize", state.c)
        except BaseException:
            # ModelSetConfig has no use after a failed initialize; ModelFinalize may still come
            # (Triton calls it) and finds the C struct in model.state
            _registry.models.pop(state.handle, None)
            raise
        finally:
            state.in_model_initialize = False
            state.c.auto_complete = False

    def TRITONBACKEND_ModelInstanceInitialize(self, instance: ModelInstance) -> None:
        model = self._model_state(instance.model)
        model.publish(instance.model.config)  # the validated config
        pins = _Pins(self.ffi)
        c_instance = self.ffi.new(
            "TRITONBACKEND_ModelInstance*",
            {
                "name": pins.string(instance.name),
                "kind": _KINDS.get(instance.kind, 1),
                "device_id": int(instance.device_id),
                "passive": bool(instance.passive),
                "model": model.c,
            },
        )
        instance.state = _NativeInstance(model, c_instance, pins)
        self._call("TRITONBACKEND_ModelInstanceInitialize", c_instance)

    def TRITONBACKEND_ModelInstanceExecute(self, instance: ModelInstance, requests: list[Request]) -> None:
        state = self._instance_state(instance)
        io = state.model.io
        assert io is not None  # published by TRITONBACKEND_ModelInstanceInitialize
        array = self.ffi.new("TRITONBACKEND_Request*[]", len(requests))
        handles = []
        for i, request in enumerate(requests):
            handle = _registry.new_id()
            c_request, keep = self._c_request(handle, request, io)
            _registry.requests[handle] = _Request(handle, request, keep)
            handles.append(handle)
            array[i] = c_request
        try:
            self._call(REQUIRED_ENTRY_POINT, state.c, array, len(requests))
        finally:
            if not io.decoupled:  # a decoupled backend may keep its requests past execute
                for handle in handles:
                    _registry.requests.pop(handle, None)

    def TRITONBACKEND_ModelInstanceFinalize(self, instance: ModelInstance) -> None:
        state = instance.state
        if not isinstance(state, _NativeInstance):
            return
        try:
            self._call("TRITONBACKEND_ModelInstanceFinalize", state.c)
        finally:
            instance.state = None

    def TRITONBACKEND_ModelFinalize(self, model: Model) -> None:
        state = model.state
        if not isinstance(state, _NativeModel):
            return
        try:
            self._call("TRITONBACKEND_ModelFinalize", state.c)
        finally:
            _registry.models.pop(state.handle, None)
            model.state = None

    def TRITONBACKEND_Finalize(self, backend: Backend) -> None:
        del backend
        if self.c_backend is not None:
            self._call("TRITONBACKEND_Finalize", self.c_backend)

    # -- requests ---------------------------------------------------------------
    def model_io(self, config: dict[str, Any]) -> _ModelIO:
        """What every request of a model with ``config`` needs (its final config)."""
        input_types: dict[str, DataType] = {}
        for spec in config.get("input", []):
            dt = by_config_name(str(spec.get("data_type", "")))
            if dt is not None:
                input_types[str(spec["name"])] = dt
        outputs = [str(o["name"]) for o in config.get("output", [])]
        return _ModelIO(
            input_types=input_types,
            outputs=outputs,
            outputs_c=self.ffi.new("char*[]", [self._name(n) for n in outputs] or [self.ffi.NULL]),
            decoupled=bool((config.get("model_transaction_policy") or {}).get("decoupled")),
        )

    def _name(self, text: str) -> Any:
        """A NUL-terminated copy of a tensor name, kept for the life of the backend (shared by its models)."""
        found = self._names.get(text)
        if found is None:  # setdefault: of two threads adding one name, both use the one kept
            found = self._names.setdefault(text, self.ffi.new("char[]", text.encode()))
        return found

    @staticmethod
    def _datatype(name: str, tensor: np.ndarray, io: _ModelIO) -> DataType:
        """An input's datatype: from the model's config (BF16 arrives as uint16), else from numpy."""
        dt = io.input_types.get(name)
        if dt is None:
            dt = from_numpy(tensor.dtype)
            if dt is None:
                raise TritonError(Code.INTERNAL, f"input '{name}' has unsupported dtype {tensor.dtype}")
        return dt

    def _c_request(self, handle: int, request: Request, io: _ModelIO) -> tuple[Any, list[Any]]:
        """The C struct of one request of a model with ``io`` (no tensor data is copied but BYTES) and what it points into."""
        ffi = self.ffi
        inputs = request.inputs
        c_inputs = ffi.new("TRITONBACKEND_Input[]", len(inputs) or 1)
        shapes = ffi.new("int64_t[]", [int(d) for t in inputs.values() for d in t.shape] or [0])
        keep: list[Any] = [c_inputs, shapes]
        offset = 0
        for i, (name, tensor) in enumerate(inputs.items()):
            dt = self._datatype(name, tensor, io)
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
        else:
            names, c_names = io.outputs, io.outputs_c
        keep.append(c_names)  # a decoupled request may outlive its model's io
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
        c_request.notify_release = io.decoupled
        keep.append(c_request)
        return c_request, keep
