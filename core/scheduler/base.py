"""What every scheduler works with: payloads (requests in flight), batches, instances.

A :class:`Payload` is one validated request whose input bytes are already in
the core's arena. A scheduler groups payloads into a :class:`Batch` and hands
it to a free :class:`Executor` (a model instance). The batch reports each
response back to its payload and, when the backend's execute returns, tells
the scheduler the instance is free again.

Everything here runs on the core's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import Code, TritonError

__all__ = [
    "Payload",
    "Batch",
    "Executor",
    "Scheduler",
    "ResponseHandler",
    "Rejected",
    "QueueFull",
    "admit",
    "no_instance_error",
    "reschedule_error",
    "cancelled_error",
]


class Rejected(TritonError):
    """A request the scheduler dropped from its queue (queue timeout with REJECT).

    Counted as a failure with reason REJECTED (``nv_inference_request_failure``), as in Triton.
    """


class QueueFull(Rejected):
    """A request refused because its priority level's queue is full.

    Not counted in the statistics at all: Triton 2.51 refuses it before it is
    tracked (measured: ``fail`` and every failure reason stay 0).
    """


class ResponseHandler(Protocol):
    """Receives the responses of one payload (implemented by the model)."""

    def on_response(
        self,
        payload: Payload,
        outputs: list[list[Any]],
        error: TritonError | None,
        parameters: dict[str, Any] | None,
        final: bool,
        worker: Any,
    ) -> None: ...

    def on_executed(self, payload: Payload) -> None: ...

    def on_cancel(self, payload: Payload) -> None: ...


class Payload:
    """One request in flight inside a model.

    :ivar wire: the request as it goes to the worker (id, inputs as arena
        descriptors, requested output names, parameters).
    :ivar batch_size: its batch size (1 for a model that does not batch).
    :ivar handler: where its responses go.
    :ivar context: the owner's per-request state (response future, blocks...).
    :ivar arrival_ns: when the scheduler got it (``perf_counter_ns``).
    :ivar dispatch_ns: when it went to an instance.
    :ivar timings: ``[input, infer, output]`` ns of the execution it was in.
    :ivar final: True once its final response was delivered.
    :ivar done: True once its final response came from the worker (it may be
        held back for ``preserve_ordering``).
    :ivar rescheduled: True from the backend's rescheduling of the run that just
        executed until its handler's ``on_executed`` accounted that run.
    """

    __slots__ = (
        "wire",
        "batch_size",
        "handler",
        "context",
        "arrival_ns",
        "dispatch_ns",
        "timings",
        "final",
        "done",
        "rescheduled",
    )

    def __init__(self, wire: dict[str, Any], batch_size: int, handler: ResponseHandler, context: Any) -> None:
        self.wire = wire
        self.batch_size = batch_size
        self.handler = handler
        self.context = context
        self.arrival_ns = time.perf_counter_ns()
        self.dispatch_ns = 0
        self.timings: Sequence[int] | None = None
        self.final = False
        self.done = False
        self.rescheduled = False

    def fail(self, error: TritonError) -> None:
        """Deliver a final error response (no-op once final)."""
        if not self.final:
            self.done = True
            self.handler.on_response(self, [], error, None, True, None)

    def cancel(self) -> None:
        """Its client cancelled it: dropped if still queued, else the model is told (no-op once final)."""
        if not self.final:
            self.handler.on_cancel(self)


def no_instance_error(label: str) -> TritonError:
    """UNAVAILABLE: the model (``label``: ``'m' version 1``) has no instance that can run a request."""
    return TritonError(Code.UNAVAILABLE, f"model {label} has no available instance")


def cancelled_error() -> TritonError:
    """CANCELLED: the error of a request its client cancelled before it ran (Triton's status code)."""
    return TritonError(Code.CANCELLED, "Request was cancelled")


def reschedule_error() -> TritonError:
    """The error of a request a backend rescheduled in a model that does not reschedule requests.

    Triton 2.51's words (it logs them); Triton then never answers the request of a model with the
    default scheduler or a sequence batcher, decoupled or not (the client waits forever).
    """
    return TritonError(
        Code.INTERNAL,
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured "
        "to handle such a flag.",
    )


def admit(payload: Payload, stopped: TritonError | None, has_instances: bool, label: str) -> bool:
    """A scheduler's first check of a new payload: fail it when stopped or without instances.

    :returns: True when the scheduler may take it.
    """
    if stopped is not None:
        payload.fail(stopped)
        return False
    if not has_instances:
        payload.fail(no_instance_error(label))
        return False
    return True


class Executor(Protocol):
    """A model instance as a scheduler sees it."""

    name: str

    def execute(self, batch: Batch) -> None: ...


class Batch:
    """Payloads executed together by one instance (what one EXECUTE frame carries).

    :param payloads: the requests, in order.
    :param executor: the instance that runs them.
    :param on_free: called with the executor when its execute has returned
        (or the worker died): the scheduler may give it the next batch.
    :param on_executed: called with the batch's size and ``[input, infer,
        output]`` ns after a successful execute (statistics).
    :param on_release: called with a payload and whether it was rescheduled when
        the backend released it: its final response came (after the handler got
        it) or it was rescheduled (``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``,
        no response: the scheduler runs it again). None: the scheduler does not
        reschedule, and a rescheduled request fails with :func:`reschedule_error`.
    """

    __slots__ = (
        "payloads",
        "wire_requests",
        "executor",
        "_on_free",
        "_on_executed",
        "_on_release",
        "_finalizers",
        "_released",
        "_executed",
    )

    def __init__(
        self,
        payloads: list[Payload],
        executor: Executor,
        on_free: Callable[[Executor], None],
        on_executed: Callable[[int, Sequence[int]], None],
        on_release: Callable[[Payload, bool], None] | None = None,
    ) -> None:
        self.payloads = payloads
        self.wire_requests = [p.wire for p in payloads]
        self.executor = executor
        self._on_free = on_free
        self._on_executed = on_executed
        self._on_release = on_release
        self._finalizers: list[Callable[[], None]] = []
        #: indexes of the payloads this batch rescheduled (done here, though the payload runs on)
        self._released: set[int] | None = None  # made at the first rescheduling: most batches have none
        self._executed = False  # the backend's execute returned

    def add_finalizer(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the execute returns or fails, before the instance is free again."""
        self._finalizers.append(callback)

    def on_response(
        self,
        index: int,
        outputs: list[list[Any]],
        error: TritonError | None,
        parameters: dict[str, Any] | None,
        final: bool,
        worker: Any,
        rescheduled: bool = False,
    ) -> None:
        """A RESPONSE frame for request ``index`` of this batch (``rescheduled``: the RESCHEDULE flag)."""
        if not 0 <= index < len(self.payloads):
            raise TritonError(Code.INTERNAL, f"RESPONSE for request {index} of a batch of {len(self.payloads)}")
        payload = self.payloads[index]
        if payload.done or (self._released is not None and index in self._released):
            raise TritonError(Code.INTERNAL, f"RESPONSE after the final response of request {index}")
        if rescheduled:
            if self._released is None:
                self._released = set()
            self._released.add(index)
            if self._on_release is None:
                payload.fail(reschedule_error())
                return
            payload.rescheduled = True
            if self._executed:  # released after execute returned: account the run now
                payload.handler.on_executed(payload)
            self._on_release(payload, True)
            return
        if final:
            payload.done = True
        payload.handler.on_response(payload, outputs, error, parameters, final, worker)
        if final and self._on_release is not None:
            self._on_release(payload, False)

    @property
    def complete(self) -> bool:
        """True once every request of the batch got its final response or was rescheduled."""
        released = self._released
        if released is None:
            return all(p.done for p in self.payloads)
        return all(p.done or i in released for i, p in enumerate(self.payloads))

    def on_done(self, timings: Sequence[int] | None, error: TritonError | None) -> None:
        """The backend's execute returned (timings) or the worker is gone (error)."""
        if error is not None:
            for payload in self.payloads:
                payload.fail(error)
        else:
            assert timings is not None
            size = sum(p.batch_size for p in self.payloads)
            self._on_executed(size, timings)
            for payload in self.payloads:
                payload.timings = timings
                payload.handler.on_executed(payload)
        self._executed = True
        finalizers, self._finalizers = self._finalizers, []
        for callback in finalizers:
            callback()
        self._on_free(self.executor)


class Scheduler(Protocol):
    """Triton's scheduler interface: take requests, know what is in flight, stop."""

    def enqueue(self, payload: Payload) -> None:
        """Accept a payload; it gets its responses through its handler."""

    def inflight_count(self) -> int:
        """Payloads queued or executing."""

    def add_executor(self, executor: Executor) -> None:
        """An instance is ready to take batches."""

    def remove_executor(self, executor: Executor) -> None:
        """An instance is gone (its worker died or the model unloads)."""

    def stop(self, error: TritonError) -> None:
        """Fail everything queued with ``error``; take nothing more."""
