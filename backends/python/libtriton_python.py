"""The ``python`` backend: runs a Triton ``model.py`` (class ``TritonPythonModel``) unchanged.

Loads ``<model>/<version>/model.py`` (or the config's ``default_model_filename``)
in the worker process that hosts the model instance and calls it the way
Triton's python backend does:

* ``TritonPythonModel.auto_complete_config(auto_complete_model_config)``
  (static; when auto-complete is on) in ``TRITONBACKEND_ModelInitialize``;
* ``initialize(args)`` with Triton's ``args`` dict (all values strings:
  ``model_config`` as JSON, ``model_instance_kind`` ``"CPU"``/``"GPU"``,
  ``model_instance_name``, ``model_instance_device_id``,
  ``model_repository`` (the model folder), ``model_version``, ``model_name``);
* ``execute(requests)`` for every batch — a plain function or ``async def``
  (run to completion on the backend's own asyncio event loop; for decoupled
  models it runs in the background, as in Triton);
* ``finalize()`` at unload.

``import triton_python_backend_utils as pb_utils`` works in model code because
this module puts its own folder on ``sys.path`` — only in the worker process
that loads it. The model file is imported as module ``<version>.<name>``
(``1.model``) with its version folder and model folder on ``sys.path``, as in
Triton, so it can import files next to it.

Errors never kill the worker. An exception in ``initialize`` fails the load
with Triton's message (``RuntimeError: boom\\n\\nAt:\\n  /m/1/model.py(6):
initialize\\n``); one in ``execute`` fails the requests of that batch with
``Failed to process the request(s) for model '<instance>', message: ...``;
a wrong number of responses, an output the config does not declare or an
output of the wrong datatype fail the request with a message naming the model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import os
import sys
import threading
import traceback
import types
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # only in this worker process: makes pb_utils importable for model code
    sys.path.insert(0, _HERE)

import c_python_backend_utils as c_utils  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

from tritium.core.backend.api import Model, ModelInstance, Request  # noqa: E402
from tritium.core.errors import Code, TritonError  # noqa: E402
from tritium.core.inference.types import by_config_name  # noqa: E402
from tritium.core.model_repository.paths import safe_join  # noqa: E402

# No TRITONBACKEND_THREADED: the worker switches to threaded receiving by itself for a
# decoupled model (at instance initialization) and at a model's first BLS request, so a
# plain model keeps the faster inline path.

log = logging.getLogger("tritium.backend.python")

_PB_UTILS_FILE = os.path.join(_HERE, "triton_python_backend_utils.py")
# frames Triton would not show (its equivalents are C++): this backend, tritium's core, asyncio and
# concurrent.futures (async execute), importlib's import_module
_HIDDEN_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.abspath(path)), "")
    for path in (
        __file__,
        asyncio.__file__,
        concurrent.futures.__file__,
        sys.modules["tritium.core"].__file__ or "",
    )
)
_HIDDEN_FILES = {importlib.__file__}


# -- error messages as Triton words them -------------------------------------------------------------
def _hidden(filename: str) -> bool:
    if filename == _PB_UTILS_FILE:
        return False  # Triton's pure-Python helpers show in its tracebacks too
    return filename in _HIDDEN_FILES or filename.startswith(_HIDDEN_DIRS)


def format_exception(exc: BaseException) -> str:
    """``Type: message`` and the Python frames, innermost first, as Triton's python backend prints
    them (``\\n\\nAt:\\n  /m/1/model.py(6): initialize\\n``); frames of tritium itself are left out,
    as Triton's C++ frames are."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        return text
    frames = [
        (frame.f_code.co_filename, lineno, frame.f_code.co_name)
        for frame, lineno in traceback.walk_tb(exc.__traceback__)
        if not _hidden(frame.f_code.co_filename)
    ]
    if not frames:
        return text
    return text + "\n\nAt:\n" + "".join(f"  {name}({line}): {func}\n" for name, line, func in reversed(frames))


# -- loading the model file -------------------------------------------------------------------------
def _model_file(model: Model) -> str:
    filename = model.config.get("default_model_filename") or "model.py"
    version_dir = safe_join(model.repository_path, str(model.version), what="version")
    path = safe_join(version_dir, filename, what="default_model_filename")
    if not path.is_file():
        raise TritonError(
            Code.NOT_FOUND,
            f"unable to find '{path}' for model '{model.name}' version {model.version}: the python backend "
            f"needs a {filename} there (or set default_model_filename)",
        )
    # the path as the repository names it (not resolved), as Triton shows it in tracebacks
    return os.path.join(model.repository_path, str(model.version), filename)


def _import_model(path: str, version: int) -> types.ModuleType:
    """Import ``path`` as module ``<version>.<stem>`` (``1.model``), Triton's name for it."""
    version_dir = os.path.dirname(path)
    model_dir = os.path.dirname(version_dir)
    # appended, as Triton does: model code can import the files next to it
    for folder in (version_dir, model_dir):
        if folder not in sys.path:
            sys.path.append(folder)
    sys.dont_write_bytecode = True  # as Triton: no __pycache__ written into the model repository
    package = str(version)
    existing = sys.modules.get(package)
    if existing is None or list(getattr(existing, "__path__", [])) != [version_dir]:
        package_spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        package_spec.submodule_search_locations = [version_dir]
        sys.modules[package] = importlib.util.module_from_spec(package_spec)
    name = f"{package}.{Path(path).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TritonError(Code.INTERNAL, f"cannot import the python model file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    path = _model_file(model)
    try:
        module = _import_model(path, model.version)
    except TritonError:
        raise
    except BaseException as exc:
        raise TritonError(Code.INTERNAL, format_exception(exc)) from None
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise TritonError(
            Code.INTERNAL,
            f"AttributeError: module '{module.__name__}' has no attribute 'TritonPythonModel'",
        )
    model.state = {"path": path, "module": module, "cls": cls}
    if model.auto_complete_config and hasattr(cls, "auto_complete_config"):
        _auto_complete(model, cls)


def _auto_complete(model: Model, cls: Any) -> None:
    before = json.dumps(model.config, sort_keys=True)
    config = pb_utils.ModelConfig(json.dumps(model.config))
    try:
        result = cls.auto_complete_config(config)
    except BaseException as exc:
        raise TritonError(Code.INTERNAL, format_exception(exc)) from None
    if not isinstance(result, pb_utils.ModelConfig):
        raise TritonError(
            Code.INTERNAL,
            f"auto_complete_config function in model '{model.name}' must return a valid pb.ModelConfig object.",
        )
    completed = result.as_dict()
    if json.dumps(completed, sort_keys=True) != before:
        model.set_config(completed)


# -- the model instance ---------------------------------------------------------------------------
class InstanceContext:
    """One model instance of a python model: the ``TritonPythonModel`` object and how it answers."""

    def __init__(self, instance: ModelInstance) -> None:
        model = instance.model
        config = model.config
        self.model_name = model.name
        self.model_version = model.version
        self.instance_name = instance.name
        #: what Triton's python backend puts before the message of an error of ``execute``
        self.error_prefix = f"Failed to process the request(s) for model '{instance.name}', message: "
        self.path: str = model.state["path"]
        self.model_dir = os.path.dirname(self.path)
        policy = config.get("model_transaction_policy") or {}
        self.decoupled = bool(policy.get("decoupled", False))
        self.output_names = [str(o["name"]) for o in config.get("output", [])]
        # implicit-state outputs of the sequence batcher are outputs too (the core keeps them)
        states = (config.get("sequence_batching") or {}).get("state", [])
        self._outputs = set(self.output_names) | {str(st["output_name"]) for st in states}
        self.input_types = {}  # input name -> KServe datatype ("FP32", "BYTES", "BF16")
        for item in config.get("input", []):
            datatype = by_config_name(str(item.get("data_type", "")))
            if datatype is not None:
                self.input_types[str(item["name"])] = datatype.name
        self.model: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()

    # -- responses (any thread; callers hold the request state's lock) -------------------------
    def send(self, request: Request, response: c_utils.InferenceResponse | None, final: bool) -> None:
        """Send a pb_utils response for ``request`` (its outputs go into shared memory once);
        None sends only the final flag. Never raises: a response that cannot be sent becomes an
        error response, so the request is never left open by mistake."""
        try:
            self._send(request, response, final)
        except Exception as exc:
            log.error("model '%s': failed to send a response: %s", self.model_name, exc)
            if not request.completed:
                message = exc.message if isinstance(exc, TritonError) else f"{type(exc).__name__}: {exc}"
                try:
                    self.send_error(
                        request,
                        f"model '{self.model_name}': failed to send a response: {message}",
                        final,
                    )
                except TritonError:
                    pass

    def _send(self, request: Request, response: c_utils.InferenceResponse | None, final: bool) -> None:
        if response is None:
            request.respond(final=final)
            return
        parameters = response._parameters or None
        if response._error is not None:
            error = response._error
            request.respond(
                error=TritonError(Code(int(error.code())), error.message()),
                parameters=parameters,
                final=final,
            )
            return
        outputs: dict[str, np.ndarray] = {}
        for tensor in response._outputs:
            name = tensor._name
            if name not in self._outputs:
                self.send_error(
                    request,
                    f"model '{self.model_name}' returned output '{name}', which its configuration does not "
                    f"declare (outputs: {', '.join(self.output_names)})",
                    final=final,
                )
                return
            array = tensor._array
            if tensor._datatype == "BYTES" and array.dtype == np.object_:
                array = _bytes_elements(array)
            outputs[name] = array
        request.respond(outputs, parameters=parameters, final=final)

    def send_error(self, request: Request, message: str, final: bool = True) -> None:
        """Send an INTERNAL error response."""
        request.respond(error=TritonError(Code.INTERNAL, message), final=final)

    def abandoned(self, request: Request) -> None:
        """Nothing references a request that never got its final response any more: end it."""
        if request.completed:
            return
        log.warning(
            "model '%s': request '%s' was dropped without the final flag "
            "(TRITONSERVER_RESPONSE_COMPLETE_FINAL); tritium ended it",
            self.model_name,
            request.id,
        )
        try:
            if self.decoupled:
                request.respond(final=True)
            else:  # cannot happen through execute's return value; never answer with an empty success
                self.send_error(request, f"model '{self.model_name}' sent no response for this request")
        except TritonError:
            pass

    # -- asyncio ---------------------------------------------------------------------------------
    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The instance's asyncio event loop, running on its own thread (started on first use)."""
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="tritium-python-asyncio", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def stop_event_loop(self) -> None:
        with self._loop_lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()


def _bytes_elements(array: np.ndarray) -> np.ndarray:
    """Object arrays may hold anything Triton turns into bytes with ``str()``; give the core bytes."""
    flat = array.reshape(-1)
    if all(type(x) is bytes or type(x) is str for x in flat):
        return array
    out = np.empty(array.shape, dtype=np.object_)
    out.reshape(-1)[:] = [
        bytes(x) if isinstance(x, (bytes, bytearray, memoryview, np.bytes_)) else str(x).encode("utf-8") for x in flat
    ]
    return out


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    context = InstanceContext(instance)
    c_utils._set_context(context)
    instance.state = context
    model = instance.model
    args = {
        "model_config": json.dumps(model.config, separators=(",", ":")),
        "model_instance_kind": instance.kind.removeprefix("KIND_"),
        "model_instance_name": instance.name,
        "model_instance_device_id": str(instance.device_id),
        "model_repository": model.repository_path,
        "model_version": str(model.version),
        "model_name": model.name,
    }
    try:
        context.model = model.state["cls"]()
        initialize = getattr(context.model, "initialize", None)
        if initialize is not None:
            result = initialize(args)
            if inspect.isawaitable(result):  # `async def initialize` (Triton runs it to completion too)
                _run(context, result)
    except BaseException as exc:
        context.stop_event_loop()
        raise TritonError(Code.INTERNAL, format_exception(exc)) from None


def _run(context: InstanceContext, awaitable: Any) -> Any:
    """Run a coroutine to completion on the instance's event loop; return its result."""
    return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), context.event_loop()).result()


def _as_coroutine(awaitable: Any) -> Coroutine[Any, Any, Any]:
    if asyncio.iscoroutine(awaitable):
        return awaitable

    async def wait() -> Any:
        return await awaitable

    return wait()


# -- execute ------------------------------------------------------------------------------------
def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    context: InstanceContext = instance.state
    pb_requests = [c_utils.InferenceRequest._incoming(r, context) for r in requests]
    prefix = context.error_prefix
    execute = getattr(context.model, "execute", None)
    if execute is None:
        _fail(
            pb_requests,
            prefix + f"Python model {context.path} does not implement `execute` method.",
        )
        return
    try:
        result = execute(pb_requests)
        if type(result) is not list and inspect.isawaitable(result):
            if context.decoupled:  # as Triton: the next batch may start while this one awaits
                _in_background(context, result, pb_requests, prefix)
                return
            result = _run(context, result)
    except BaseException as exc:
        message = prefix + format_exception(exc)
        log.error("%s", message)
        _fail(pb_requests, message)
        return
    _answer(context, pb_requests, result, prefix)


def _fail(pb_requests: Sequence[c_utils.InferenceRequest], message: str) -> None:
    for pb_request in pb_requests:
        assert pb_request._state is not None
        pb_request._state.finish_with_error(message)


def _in_background(
    context: InstanceContext,
    awaitable: Any,
    pb_requests: list[c_utils.InferenceRequest],
    prefix: str,
) -> None:
    future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), context.event_loop())

    def done(f: concurrent.futures.Future[Any]) -> None:
        try:
            result = f.result()
        except BaseException as exc:
            message = prefix + format_exception(exc)
            log.error("%s", message)
            _fail(pb_requests, message)
            return
        if result is not None:
            _fail(
                pb_requests,
                prefix + f"Python model '{context.instance_name}' is using the decoupled mode and the execute "
                "function must return None.",
            )
            return
        _release(pb_requests)

    future.add_done_callback(done)


def _release(pb_requests: Sequence[c_utils.InferenceRequest]) -> None:
    """After execute: the requests the model rescheduled (``set_release_flags``) go back to run again."""
    for pb_request in pb_requests:
        if pb_request._rescheduled():
            assert pb_request._state is not None
            pb_request._state.reschedule()


def _answer(context: InstanceContext, pb_requests: list[c_utils.InferenceRequest], result: Any, prefix: str) -> None:
    """Send what execute returned (a list of responses; None for decoupled models)."""
    if context.decoupled:
        if result is not None:
            _fail(
                pb_requests,
                prefix + f"Python model '{context.instance_name}' is using the decoupled mode and the execute "
                "function must return None.",
            )
            return
        _release(pb_requests)
        return
    if result is None:  # fine when every request was answered through its response sender
        _fail(
            pb_requests,
            prefix + "Expected a list in the execute return, found type '<class 'NoneType'>'.",
        )
        return
    if not isinstance(result, (list, tuple)):
        _fail(
            pb_requests,
            prefix + f"Expected a list in the execute return, found type '{type(result)}'.",
        )
        return
    if len(result) != len(pb_requests):
        _fail(
            pb_requests,
            prefix + "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            f"InferenceRequest(s) size is:{len(pb_requests)}, and InferenceResponse(s) size is:{len(result)}\n",
        )
        return
    for pb_request, response in zip(pb_requests, result):
        if pb_request._rescheduled() and response is not None:  # Triton's words
            _fail(
                pb_requests,
                prefix + "Expected a None object in the execute function return list for reschduled request, "
                f"found type '{type(response)}'.",
            )
            return
        if response is not None and not isinstance(response, c_utils.InferenceResponse):
            _fail(
                pb_requests,
                prefix + "Expected an 'InferenceResponse' object in the execute function return list, "
                f"found type '{type(response)}'.",
            )
            return
    for pb_request, response in zip(pb_requests, result):
        state = pb_request._state
        assert state is not None
        with state.lock:
            if state.closed:  # answered through its response sender already
                continue
            if pb_request._rescheduled():
                state.reschedule()
                continue
            if response is None:
                state.closed = True
                context.send_error(
                    state.request,
                    prefix + "Expected an 'InferenceResponse' object in the execute function return list, "
                    "found type '<class 'NoneType'>'.",
                )
                continue
            state.closed = True
            state.pending = None
            context.send(state.request, response, True)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    context: InstanceContext | None = instance.state
    if context is None:
        return
    try:
        finalize = getattr(context.model, "finalize", None)
        if finalize is not None:
            result = finalize()
            if inspect.isawaitable(result):
                _run(context, result)
    except BaseException as exc:
        log.error("model '%s': finalize failed: %s", context.model_name, format_exception(exc))
    finally:
        context.stop_event_loop()
        c_utils._set_context(None)
        instance.state = None
