"""What a worker hosts: models and model instances, and the backend calls made for them.

A worker process hosts one model instance (a python model, or a model asked to run on its
own) or the instances of many models of one backend (a shared worker). Each model it hosts
is a :class:`HostedModel` (the backend's ``TRITONBACKEND_ModelInitialize`` ran once for it
in this process, whatever the number of its instances here) and each instance a
:class:`HostedInstance` (its own ``TRITONBACKEND_ModelInstanceInitialize`` and execution
state). The functions here make the backend calls; :mod:`.main` decides on which thread.

Worker side.
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..backend.api import Model, ModelInstance, Request
from ..backend.loader import find_backend_library
from ..errors import Code, TritonError
from .libraries import BackendLibraries, LoadedBackend
from .outputs import OutputWriter
from .protocol import Kind

if TYPE_CHECKING:  # pragma: no cover
    from .host import WorkerHost

log = logging.getLogger("tritium.worker")

__all__ = [
    "HostedModel",
    "HostedInstance",
    "error_of",
    "init_model",
    "init_instance",
    "run_batch",
    "finalize_instance",
    "finalize_model",
]


def error_of(exc: BaseException, what: str) -> TritonError:
    """``exc`` as the TritonError sent to the core (INTERNAL naming ``what`` for other exceptions)."""
    if isinstance(exc, TritonError):
        return exc
    log.debug("%s failed:\n%s", what, "".join(traceback.format_exception(exc)))
    return TritonError(Code.INTERNAL, f"{what}: {type(exc).__name__}: {exc}")


class HostedModel:
    """A model version this worker hosts (``TRITONBACKEND_ModelInitialize`` ran for it here).

    :ivar id: the core's id for it in this worker (INIT_MODEL's ``model_id``).
    :ivar loaded: its backend library.
    :ivar model: the backend API's :class:`Model`.
    :ivar instances: ids of its instances hosted here.
    """

    __slots__ = ("id", "loaded", "model", "instances")

    def __init__(self, model_id: int, loaded: LoadedBackend, model: Model) -> None:
        self.id = model_id
        self.loaded = loaded
        self.model = model
        self.instances: set[int] = set()


class HostedInstance:
    """A model instance this worker hosts.

    :ivar id: the core's id for it in this worker (INIT_INSTANCE's ``instance_id``).
    :ivar hosted: its model.
    :ivar instance: the backend API's :class:`ModelInstance`.
    :ivar writer: builds its requests and places its outputs.
    :ivar decoupled: whether its model is decoupled.
    :ivar execute_ns: moving average of its executions, nanoseconds.
    """

    __slots__ = ("id", "hosted", "instance", "writer", "decoupled", "execute_ns", "label", "execute")

    def __init__(self, instance_id: int, hosted: HostedModel, instance: ModelInstance, writer: OutputWriter) -> None:
        self.id = instance_id
        self.hosted = hosted
        self.instance = instance
        self.writer = writer
        policy = hosted.model.config.get("model_transaction_policy") or {}
        self.decoupled = bool(policy.get("decoupled", False))
        self.execute_ns = 0.0
        #: how execute failures name the model
        self.label = f"model '{hosted.model.name}' execute"
        #: the backend's ``TRITONBACKEND_ModelInstanceExecute`` (looked up once, called per batch)
        self.execute = hosted.loaded.module.TRITONBACKEND_ModelInstanceExecute


def init_model(libraries: BackendLibraries, settings: dict[str, Any]) -> HostedModel:
    """Find and load the model's backend library (initialized once per process) and run its
    ``TRITONBACKEND_ModelInitialize`` (auto-complete when ``settings["auto_complete"]``).

    :param settings: the INIT_MODEL settings (``model_id``, ``backend``, ``model_name``,
        ``version``, ``model_path``, ``backend_directory``, ``runtime``, ``backend_config``,
        ``config``, ``auto_complete``).
    :raises TritonError: NOT_FOUND listing the places searched for the library; the
        backend's error (any exception) from its initialize functions.
    """
    library = find_backend_library(
        settings["backend"],
        settings["model_path"],
        int(settings["version"]),
        settings["backend_directory"],
        settings.get("runtime", ""),
    )
    loaded = libraries.initialized(library, settings["backend"], settings.get("backend_config", {}))
    assert loaded.backend is not None
    model = Model(
        settings["model_name"],
        int(settings["version"]),
        settings["config"],
        settings["model_path"],
        loaded.backend,
        bool(settings.get("auto_complete", False)),
    )
    try:
        loaded.call("TRITONBACKEND_ModelInitialize", model)
    except BaseException:
        _finalize_quietly(loaded, "TRITONBACKEND_ModelFinalize", model)  # as Triton, after a failed initialize
        raise
    model.auto_complete_config = False
    return HostedModel(int(settings["model_id"]), loaded, model)


def _finalize_quietly(loaded: LoadedBackend, entry_point: str, target: Any) -> None:
    """Call a finalize entry point after its initialize failed (its own error is only logged)."""
    try:
        loaded.call(entry_point, target)
    except BaseException as exc:  # noqa: BLE001 - the initialize's error is the one reported
        log.debug("%s after a failed initialize: %s", entry_point, exc)


def init_instance(worker: WorkerHost, hosted: HostedModel, settings: dict[str, Any]) -> HostedInstance:
    """Run ``TRITONBACKEND_ModelInstanceInitialize`` for a new instance of ``hosted``.

    :param settings: the INIT_INSTANCE settings (``instance_id``, ``name``, ``kind``,
        ``device_id`` and the validated, normalized ``config``).
    :raises TritonError: the backend's error.
    """
    config = settings.get("config")
    if config is not None:  # the validated, normalized config
        hosted.model.config = config
    instance = ModelInstance(
        settings["name"], settings.get("kind", "KIND_CPU"), int(settings.get("device_id", 0)), hosted.model
    )
    result = HostedInstance(int(settings["instance_id"]), hosted, instance, OutputWriter(worker, hosted.model.config))
    try:
        hosted.loaded.call("TRITONBACKEND_ModelInstanceInitialize", instance)
    except BaseException:
        _finalize_quietly(hosted.loaded, "TRITONBACKEND_ModelInstanceFinalize", instance)
        raise
    return result


def run_batch(hosted: HostedInstance, batch_id: int, wire_requests: list[Any]) -> list[Any]:
    """Execute one batch on ``hosted`` and return its EXECUTE_DONE frame.

    Every request ends with a response: an exception fails those the backend did not answer,
    and a backend that returns without answering one (not decoupled) fails it with INTERNAL.
    """
    writer = hosted.writer
    t0 = time.perf_counter_ns()
    requests: list[Request] = []
    error: TritonError | None = None
    try:
        requests = writer.build_requests(batch_id, wire_requests)
    except BaseException as exc:
        error = error_of(exc, "reading the request inputs")
    t1 = time.perf_counter_ns()
    writer.output_ns = 0
    decoupled = hosted.decoupled
    if not decoupled:
        writer.hold()
    if error is None:
        try:
            hosted.execute(hosted.instance, requests)
        except BaseException as exc:
            error = error_of(exc, hosted.label)
    t2 = time.perf_counter_ns()
    output_ns = writer.output_ns
    if error is not None:
        if not requests:
            for index in range(len(wire_requests)):
                writer.send_error(batch_id, index, error)
        for request in requests:
            if not request.completed:
                request.respond(error=error)
    elif not decoupled:
        for request in requests:
            if not request.completed:
                request.respond(
                    error=TritonError(
                        Code.INTERNAL,
                        f"backend '{hosted.hosted.model.backend.name}' did not send a response "
                        f"for request '{request.id}'",
                    )
                )
    writer.finish_batch(requests)
    responses = writer.release_held()
    timings = [t1 - t0, max(0, t2 - t1 - output_ns), output_ns]
    hosted.execute_ns += (time.perf_counter_ns() - t0 - hosted.execute_ns) * 0.1
    return [Kind.EXECUTE_DONE, batch_id, timings, responses]


def finalize_instance(hosted: HostedInstance) -> TritonError | None:
    """``TRITONBACKEND_ModelInstanceFinalize``; returns its error, if any."""
    hosted.hosted.instances.discard(hosted.id)
    try:
        hosted.hosted.loaded.call("TRITONBACKEND_ModelInstanceFinalize", hosted.instance)
    except BaseException as exc:
        return error_of(exc, "TRITONBACKEND_ModelInstanceFinalize")
    return None


def finalize_model(hosted: HostedModel) -> TritonError | None:
    """``TRITONBACKEND_ModelFinalize``; returns its error, if any."""
    try:
        hosted.loaded.call("TRITONBACKEND_ModelFinalize", hosted.model)
    except BaseException as exc:
        return error_of(exc, "TRITONBACKEND_ModelFinalize")
    return None
